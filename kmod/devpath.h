/* SPDX-License-Identifier: GPL-2.0 */
/*
 * hmirror: the device's ways in (pins of user memory, dma-buf export) and
 * the generic netlink family.  Internal interface between kmod/pin.c,
 * kmod/dmabuf.c, kmod/netlink.c, kmod/devpath.c and the core.
 */
#ifndef HMIRROR_DEVPATH_H
#define HMIRROR_DEVPATH_H

#include <linux/atomic.h>
#include <linux/mm_types.h>
#include <linux/types.h>

#include <linux/hmirror.h>

struct dentry;
struct file;
struct page;
struct sk_buff;

/* Counters of the device paths; one instance, shown in debugfs. */
enum hmirror_dev_inval {	/* index of an HMIRROR_INVAL_* cause's counter */
	HMIRROR_DEV_INVAL_UNMAP = HMIRROR_INVAL_UNMAP - 1,
	HMIRROR_DEV_INVAL_CLEAR = HMIRROR_INVAL_CLEAR - 1,
	HMIRROR_DEV_INVAL_RELEASE = HMIRROR_INVAL_RELEASE - 1,
	HMIRROR_DEV_INVAL_MIGRATE = HMIRROR_INVAL_MIGRATE - 1,
	HMIRROR_DEV_INVAL_EXCLUSIVE = HMIRROR_INVAL_EXCLUSIVE - 1,
	HMIRROR_DEV_INVAL_OTHER = HMIRROR_INVAL_OTHER - 1,
	HMIRROR_DEV_INVAL_NR,
};

struct hmirror_dev_stats {
	atomic64_t pins;		/* pins alive */
	atomic64_t pinned_bytes;	/* bytes pinned by live pins */
	atomic64_t pins_created;
	atomic64_t pins_failed;		/* pin requests refused or failed */
	atomic64_t pin_retries;		/* pins redone after a racing invalidation */
	atomic64_t inval[HMIRROR_DEV_INVAL_NR]; /* pins invalidated, by cause */
	atomic64_t inval_ignored;	/* notifier calls that keep the frames */
	atomic64_t dmabufs;		/* dma-bufs alive */
	atomic64_t dmabufs_exported;
	atomic64_t dmabuf_bytes;	/* bytes of live dma-bufs */
	atomic64_t dmabuf_maps;		/* attachments mapped (sg tables built) */
	atomic64_t events_sent;		/* messages multicast */
	atomic64_t events_dropped;	/* messages not built or not delivered */
	atomic64_t chunks_lost;		/* chunk records not delivered */
};

extern struct hmirror_dev_stats hmirror_dev_stats;

static inline void hmirror_dev_inc(atomic64_t *c)
{
	atomic64_inc(c);
}

/* pin.c */
long hmirror_ioctl_pin(struct file *file, void *data);
int hmirror_pin_init(void);
void hmirror_pin_exit(void);

/*
 * dmabuf.c: a dma-buf over a page array.  @pages are referenced by the
 * caller and handed over (each one is put when the dma-buf is released),
 * as is the owner reference that @release drops (may be NULL).
 */
struct hmirror_page_vec {
	struct page ***chunks;		/* HMIRROR_PV_PER_CHUNK pages each */
	unsigned long nr_pages;
	struct hmirror_user *user;	/* charged for the array; reference */
};

#define HMIRROR_PV_PER_CHUNK	(PAGE_SIZE / sizeof(struct page *))

static inline struct page *hmirror_pv_page(const struct hmirror_page_vec *pv,
					   unsigned long i)
{
	return pv->chunks[i / HMIRROR_PV_PER_CHUNK][i % HMIRROR_PV_PER_CHUNK];
}

static inline struct page **hmirror_pv_slot(struct hmirror_page_vec *pv,
					    unsigned long i)
{
	return &pv->chunks[i / HMIRROR_PV_PER_CHUNK][i % HMIRROR_PV_PER_CHUNK];
}

struct hmirror_user;
/* charged to @user (a reference taken) against max_user_bytes */
int hmirror_pv_alloc(struct hmirror_page_vec *pv, unsigned long nr_pages,
		     struct hmirror_user *user);
void hmirror_pv_free(struct hmirror_page_vec *pv);	/* puts no page */

int hmirror_dmabuf_export(struct hmirror_page_vec *pv, u32 flags,
			  void (*release)(void *owner), void *owner);
struct hmirror_dmabuf_export;
int hmirror_dmabuf_check(struct hmirror_dmabuf_export *ex, u64 bytes,
			 unsigned long *ret_first, unsigned long *ret_count);

/* netlink.c */
enum hmirror_nl_space_what { HMIRROR_NL_SPACE_NEW, HMIRROR_NL_SPACE_DEL };

int hmirror_nl_init(void);
void hmirror_nl_exit(void);
void hmirror_nl_range_invalidated(u32 pin_id, pid_t tgid, u64 addr, u64 size,
				  u32 cause);
void hmirror_nl_chunk_written(u32 space_id, u64 chunk, u64 generation);
struct hmirror_space;
/* NEW also records the owner (dev_owner_* fields of the space) */
void hmirror_nl_space_event(struct hmirror_space *s,
			    enum hmirror_nl_space_what what);

/* devpath.c: the counters by name, NULL-terminated */
struct hmirror_dev_counter {
	const char *name;
	atomic64_t *v;
};

extern const struct hmirror_dev_counter hmirror_dev_counters[];

/* one entry point each way for the core's module init/exit */
int hmirror_devpath_init(void);
void hmirror_devpath_exit(void);

#endif /* HMIRROR_DEVPATH_H */
