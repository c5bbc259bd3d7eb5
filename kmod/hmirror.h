/* SPDX-License-Identifier: GPL-2.0 */
/*
 * hmirror.ko internal header: guest spaces, guards, counters.
 * Documentation/design.rst describes the mechanism, locking and lifetimes.
 */
#ifndef _HMIRROR_H
#define _HMIRROR_H

#include <linux/atomic.h>
#include <linux/fs.h>
#include <linux/kref.h>
#include <linux/list.h>
#include <linux/mm.h>
#include <linux/mutex.h>
#include <linux/percpu.h>
#include <linux/refcount.h>
#include <linux/spinlock.h>
#include <linux/types.h>
#include <linux/wait.h>
#include <linux/xarray.h>

#include <linux/hmirror.h>

#include "hmirror_config.h"

struct mem_cgroup;
struct pid;
struct poll_table_struct;

/* ---- counters and the registry of spaces (stats.c) ---------------------- */

/*
 * One array of counters per space and one global, each per CPU (a trip
 * or a harvest adds to this CPU's copy, without a shared cache line;
 * readers sum the copies), indexed by this enum;
 * the names are hmirror_stat_names[], in this order, in debugfs and in
 * netlink's STATS_GET and SPACE_GET.  Gauges (spaces, bytes, pages
 * resident, mappings, pins, dma-bufs) go up and down; the rest only grow.
 * Counters below HMIRROR_NR_SPACE_STATS are kept per space too (debugfs
 * "stats" and "spaces"); the rest (pins, dma-bufs, netlink events) only
 * globally (debugfs "device").
 */
enum hmirror_stat {
	HMIRROR_STAT_SPACES,		/* gauge: live spaces (global only) */
	HMIRROR_STAT_SPACE_BYTES,	/* gauge: sum of space sizes */
	HMIRROR_STAT_PAGES_RESIDENT,	/* gauge: pages allocated */
	HMIRROR_STAT_MAPPINGS,		/* gauge: VMAs of spaces */
	HMIRROR_STAT_TRIPS,		/* first writes to armed chunks */
	HMIRROR_STAT_CHUNKS_ARMED,	/* chunk arm transitions */
	HMIRROR_STAT_CHUNKS_DISARMED,
	HMIRROR_STAT_HARVESTS,
	HMIRROR_STAT_HARVESTS_EMPTY,	/* answered by the written-count short-cut */
	HMIRROR_STAT_CHUNKS_REPORTED,
	HMIRROR_STAT_HARVEST_NS,	/* time spent in harvest */
	HMIRROR_STAT_REARM_CALLS,	/* wp_shared_mapping_range() calls */
	HMIRROR_STAT_REARM_PTES,	/* PTEs it write-protected */
	HMIRROR_STAT_REARM_NS,		/* time in wp_shared_mapping_range() */
	HMIRROR_STAT_DRAIN_NS,		/* time waiting out ->page_mkwrite */
	HMIRROR_STAT_FAULT_READ,	/* ->fault, guarded mapping, read */
	HMIRROR_STAT_FAULT_WRITE,	/* ->fault, guarded mapping, write */
	HMIRROR_STAT_FAULT_VIEW,	/* ->fault, device view */
	HMIRROR_STAT_FAULT_MKWRITE,	/* ->page_mkwrite calls */
	HMIRROR_STAT_FAULT_MAP_PAGES,	/* ->map_pages calls */
	HMIRROR_STAT_FAULT_SIGBUS,
	HMIRROR_STAT_FAULT_OOM,
	HMIRROR_STAT_PINNED_KEPT,	/* re-armed chunks kept written: pinned */
	HMIRROR_STAT_TRIP_OPENED,	/* PTEs a trip made writable besides its own */
	HMIRROR_NR_SPACE_STATS,
	/* global only */
	HMIRROR_STAT_PINS = HMIRROR_NR_SPACE_STATS,	/* gauge: live pins */
	HMIRROR_STAT_PINNED_BYTES,	/* gauge: bytes pinned by live pins */
	HMIRROR_STAT_PINS_CREATED,
	HMIRROR_STAT_PINS_FAILED,	/* pin requests refused or failed */
	HMIRROR_STAT_PIN_RETRIES,	/* pins redone after a racing invalidation */
	/* pins invalidated, by cause: HMIRROR_INVAL_UNMAP.._OTHER in order */
	HMIRROR_STAT_INVAL_UNMAP,
	HMIRROR_STAT_INVAL_CLEAR,
	HMIRROR_STAT_INVAL_RELEASE,
	HMIRROR_STAT_INVAL_MIGRATE,
	HMIRROR_STAT_INVAL_EXCLUSIVE,
	HMIRROR_STAT_INVAL_OTHER,
	HMIRROR_STAT_INVAL_IGNORED,	/* notifier calls that keep the frames */
	HMIRROR_STAT_DMABUFS,		/* gauge: live dma-bufs */
	HMIRROR_STAT_DMABUFS_EXPORTED,
	HMIRROR_STAT_DMABUF_BYTES,	/* gauge: bytes of live dma-bufs */
	HMIRROR_STAT_DMABUF_MAPS,	/* attachments mapped (sg tables built) */
	HMIRROR_STAT_EVENTS_SENT,	/* netlink messages multicast */
	HMIRROR_STAT_EVENTS_DROPPED,	/* messages not built or not delivered */
	HMIRROR_STAT_CHUNKS_LOST,	/* chunk records not delivered */
	HMIRROR_NR_STATS
};

/* one CPU's copy; a gauge's copies sum to its value (each may wrap) */
struct hmirror_stats {
	u64 v[HMIRROR_NR_STATS];
};

DECLARE_PER_CPU(struct hmirror_stats, hmirror_global_stats);
extern const char *const hmirror_stat_names[HMIRROR_NR_STATS];

/* a global-only counter; any context (this_cpu_add() is irq-safe) */
static inline void hmirror_count_add(enum hmirror_stat i, s64 v)
{
	this_cpu_add(hmirror_global_stats.v[i], v);
}

static inline void hmirror_count_inc(enum hmirror_stat i)
{
	hmirror_count_add(i, 1);
}

/* the sum over every CPU; exact once the writers are quiet */
s64 hmirror_stat_read(struct hmirror_stats __percpu *st, enum hmirror_stat i);

/*
 * Every live space, for debugfs and netlink, and the lock of the
 * registry: the list, each process's count of spaces and the space ids
 * (space.c); it also orders a space's netlink events.
 */
extern struct mutex hmirror_lock;
extern struct list_head hmirror_spaces;

/* ---- accounting (account.c) --------------------------------------------- */

/*
 * What one user (real uid) holds.  A reference per space, pin and dma-buf
 * charged to it; the entry goes with the last.
 */
struct hmirror_user {
	struct list_head node;		/* in hmirror_users, its lock */
	kuid_t uid;
	refcount_t ref;
	atomic_long_t bytes;		/* charged, against max_user_bytes */
	atomic_t nr_spaces;		/* live spaces it created */
	atomic_t nr_pins;		/* live pins it made */
};

struct cred;

struct hmirror_user *hmirror_user_get(void);
void hmirror_user_hold(struct hmirror_user *u);
void hmirror_user_put(struct hmirror_user *u);
int hmirror_user_charge(struct hmirror_user *u, unsigned long bytes);
void hmirror_user_uncharge(struct hmirror_user *u, unsigned long bytes);
int hmirror_user_count_inc(atomic_t *count, unsigned int max);
const struct cred *hmirror_memlock_charge(unsigned long nr_pages);
void hmirror_memlock_uncharge(const struct cred *cred, unsigned long nr_pages);
void hmirror_account_init(void);
struct seq_file;
int hmirror_users_show(struct seq_file *m, void *unused);

/* ---- spaces ------------------------------------------------------------- */

/* chunks a re-arming harvest takes and re-arms at a time */
#define HMIRROR_BATCH		2048
/* pages one clean_record_shared_mapping_range() covers (s->clean) */
#define HMIRROR_CLEAN_PAGES	32768

/* spaces created by one process (thread group), for the per-process limit */
struct hmirror_owner {
	struct list_head node;		/* in hmirror_owners, hmirror_lock */
	struct pid *tgid;		/* reference held */
	unsigned int nr_spaces;		/* hmirror_lock */
};

/*
 * A guest space.  Lifetime: a kref, one reference held by the space file
 * (dropped by its ->release, which runs only once every VMA, which holds
 * the file, is gone) and one by anything else that needs the space (e.g.
 * an exported dma-buf).  The pages are the module's; they are freed with
 * the last reference (pages pinned by GUP stay alive through their own
 * page references).  file/mapping are valid only while the file lives.
 */
struct hmirror_space {
	struct kref kref;
	u32 id;				/* > 0, cyclic: not reused soon (space.c) */
	u64 size;			/* bytes */
	unsigned int chunk_shift;
	unsigned int chunk_page_shift;	/* chunk_shift - PAGE_SHIFT */
	u64 nr_chunks;
	pgoff_t nr_pages;
	struct file *file;		/* not a reference; see above */
	struct address_space *mapping;	/* file's; every VMA is in it */

	/*
	 * Pages, indexed by page offset in the space.  Entries are only
	 * added (->fault, populate) and removed when the space is freed;
	 * the xarray's own lock serializes insertion.
	 */
	struct xarray pages;

	/*
	 * Serializes re-arming (arm, disarm, re-arming harvest).  Taken
	 * before lock, and before page locks.  Never held across a user
	 * copy.
	 */
	struct mutex arm_lock;
	unsigned long *clean;		/* arm_lock: clean_record scratch */
	bool view_mapped;		/* the device view was ever mapped */

	/*
	 * Protects armed, written, summary, nr_written, and writes of
	 * gens[].  Taken inside the page lock by ->page_mkwrite.
	 */
	spinlock_t lock;
	unsigned long *armed;		/* bit per chunk: watched, not written */
	unsigned long *written;		/* bit per chunk: recorded, unharvested */
	unsigned long *summary;		/* bit per word of written[]: non-zero */
	u64 nr_written;			/* weight of written[]; read lockless */
	/* one per chunk, vmalloc_user(): mmap()ed read-only; see uapi */
	u64 *gens;
	size_t gens_bytes;		/* page-aligned size of gens */

	wait_queue_head_t wq;		/* poll: nr_written != 0 */

	struct mem_cgroup *memcg;	/* charged for pages; reference held */
	struct hmirror_user *user;	/* charged for pages, metadata, dma-bufs */
	unsigned long meta_bytes;	/* metadata charged to @user */
	atomic_t nr_dmabufs;		/* live dma-bufs of the space */
	struct hmirror_owner *owner;	/* hmirror_lock */
	struct list_head node;		/* in hmirror_spaces, hmirror_lock */

	struct hmirror_stats __percpu *stats;	/* GFP_KERNEL_ACCOUNT */

	kuid_t owner_uid;		/* creator's euid (netlink.c) */
};

static inline void hmirror_stat_add(struct hmirror_space *s,
				    enum hmirror_stat i, s64 v)
{
	this_cpu_add(s->stats->v[i], v);
	this_cpu_add(hmirror_global_stats.v[i], v);
}

static inline void hmirror_stat_inc(struct hmirror_space *s,
				    enum hmirror_stat i)
{
	hmirror_stat_add(s, i, 1);
}

static inline pgoff_t hmirror_chunk_to_pgoff(const struct hmirror_space *s,
					     u64 chunk)
{
	return (pgoff_t)chunk << s->chunk_page_shift;
}

/*
 * Each file below calls only files listed before it; main.c (module
 * init/exit, the ioctl table and the file operations of every fd kind)
 * calls them all and is called by none.
 */

/* netlink.c: the generic netlink family */
enum hmirror_nl_space_what { HMIRROR_NL_SPACE_NEW, HMIRROR_NL_SPACE_DEL };

int hmirror_nl_init(void);
void hmirror_nl_exit(void);
void hmirror_nl_range_invalidated(u32 pin_id, pid_t tgid, u64 addr, u64 size,
				  u32 cause);
void hmirror_nl_chunk_written(u32 space_id, u64 chunk, u64 generation);
/* NEW also records the owner (owner_uid of the space); hmirror_lock */
void hmirror_nl_space_event(struct hmirror_space *s,
			    enum hmirror_nl_space_what what);

/* guard.c */
int hmirror_guard_alloc(struct hmirror_space *s);
void hmirror_guard_free(struct hmirror_space *s);
vm_fault_t hmirror_guard_page_mkwrite(struct vm_fault *vmf);
int hmirror_guard_arm(struct hmirror_space *s, const struct hmirror_range *runs,
		      unsigned int nr, bool disarm);
int hmirror_guard_harvest(struct hmirror_space *s, u64 __user *uchunks,
			  u64 cap, u32 flags, u64 *ret_nr, bool *ret_more);
u64 hmirror_guard_generation(struct hmirror_space *s, u64 chunk);

/* space.c; a space file's operations are main.c's (@fops) */
int hmirror_space_create(const struct hmirror_create *args,
			 const struct file_operations *fops,
			 struct hmirror_space **ret_space, int *ret_fd);
void hmirror_space_get(struct hmirror_space *s);
void hmirror_space_put(struct hmirror_space *s);
/* the page at @idx, allocated on first use (for dmabuf.c) */
struct page *hmirror_space_page(struct hmirror_space *s, pgoff_t idx);
int hmirror_space_mmap(struct file *file, struct vm_area_struct *vma);
__poll_t hmirror_space_poll(struct file *file, struct poll_table_struct *wait);
int hmirror_space_release(struct inode *inode, struct file *file);
int hmirror_fs_init(void);
void hmirror_fs_exit(void);

/*
 * dmabuf.c: a dma-buf over a page array.  The array is kept in page-sized
 * chunks, so that a huge one never needs one giant allocation.
 */
extern unsigned int hmirror_max_dmabufs_per_space;

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

/* charged to @user (a reference taken) against max_user_bytes */
int hmirror_pv_alloc(struct hmirror_page_vec *pv, unsigned long nr_pages,
		     struct hmirror_user *user);
void hmirror_pv_free(struct hmirror_page_vec *pv);	/* puts no page */

/*
 * @pv's pages are referenced by the caller and handed over (each one is
 * put when the dma-buf is released), as is the owner reference that
 * @release drops (may be NULL).  Returns the fd.
 */
int hmirror_dmabuf_export(struct hmirror_page_vec *pv, u32 flags,
			  void (*release)(void *owner), void *owner);
int hmirror_dmabuf_check(struct hmirror_dmabuf_export *ex, u64 bytes,
			 unsigned long *ret_first, unsigned long *ret_count);
/* HMIRROR_IOC_EXPORT_DMABUF on a space fd */
long hmirror_ioctl_space_export(struct file *file, void *data);

/* pin.c; a pin file's operations are main.c's (@fops) */
long hmirror_pin_create(struct hmirror_pin_create *req,
			const struct file_operations *fops);
long hmirror_ioctl_pin_state(struct file *file, void *data);
long hmirror_ioctl_pin_export(struct file *file, void *data);
__poll_t hmirror_pin_poll(struct file *file, struct poll_table_struct *wait);
int hmirror_pin_file_release(struct inode *inode, struct file *file);
int hmirror_pin_init(void);
void hmirror_pin_exit(void);

/* debugfs.c: <debugfs>/hmirror, every file of it */
void hmirror_debugfs_init(void);
void hmirror_debugfs_exit(void);

/* ---- kernel API differences (probed by configure.sh) -------------------- */

#ifndef HAVE_SK_UID
#include <net/sock.h>
/* a socket's owner; before sk_uid(), read from its inode by sock_i_uid() */
static inline kuid_t sk_uid(const struct sock *sk)
{
	return sock_i_uid((struct sock *)sk);
}
#endif

#endif /* _HMIRROR_H */
