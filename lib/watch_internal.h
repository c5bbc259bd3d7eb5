/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * libhmirror watch: what the backends share (private to the library).
 *
 * Common state of a space, kept by lib/watch.c for every backend:
 *   armed    one bit a chunk: the caller armed it (stays armed; harvest re-arms)
 *   open     one bit a chunk: armed, recorded written, and currently writable
 *            in at least one mapping (uffd-sync, mprotect: the trip handler
 *            un-protected it); re-protected by arm/generation/harvest
 *   pending  chunks recorded written, not yet handed out by hm_space_harvest
 *            (a bitmap for dedup plus an array in recording order)
 *   gen      write generation: moves by 2 on the first read after the chunk
 *            was recorded (gdirty bit), so it changes whenever the chunk
 *            was written since the previous read
 * All of it is protected by the space lock (hm_lock()).
 */
#ifndef HMIRROR_WATCH_INTERNAL_H
#define HMIRROR_WATCH_INTERNAL_H

#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include <hmirror/watch.h>

#include "bits.h"

/* nothing below is part of the library's ABI */
#pragma GCC visibility push(hidden)

#define HM_HANDOFF_MAGIC 0x31574d48u /* "HMW1" */

struct hm_map {
	uintptr_t addr;      /* 0 = slot free */
};

struct hm_space;

/* a span of armed chunks [first, first+count) to scan; a peek sets bit
   (c - base) of the caller's bits for each written chunk c */
struct hm_scan_span {
	uint64_t first, count, base;
};

struct hm_backend_ops {
	enum hm_backend backend;
	unsigned caps;
	int  (*probe)(const char **ret_reason);
	/* create the pages and the primary mapping s->maps[0] */
	int  (*create)(struct hm_space *s, const struct hm_space_params *p);
	/* adopt a handoff (importer side); may be NULL (-EOPNOTSUPP) */
	int  (*import)(struct hm_space *s, const struct hm_space_handoff *h);
	void (*destroy)(struct hm_space *s);
	/* register / unregister a new watched mapping (alias) at addr */
	int  (*watch_map)(struct hm_space *s, uintptr_t addr);
	void (*unwatch_map)(struct hm_space *s, uintptr_t addr);
	/* write-protect unarmed chunks [first, first+count) for the first time
	   (lock held) */
	int  (*protect)(struct hm_space *s, uint64_t first, uint64_t count);
	/* bring what the kernel knows about writes to armed chunks in
	   [first, first+count) into pending (+gen) and make those chunks trip
	   again on the next write (lock held).  With HM_CAP_RANGE_SCAN in
	   the backend's caps, refresh and peek may be given unarmed chunks
	   and report only the armed ones (uffd-async: one PAGEMAP_SCAN) */
	int  (*refresh)(struct hm_space *s, uint64_t first, uint64_t count);
	/* optional (HM_GEN_PEEK): set bit (c - base) of bits for each armed
	   chunk c of [first, first+count) written since its last refresh,
	   changing nothing: the next refresh still finds those writes (lock
	   held) */
	int  (*peek)(struct hm_space *s, uint64_t first, uint64_t count, uint64_t *bits,
		     uint64_t base);
	/* optional (HM_CAP_RANGE_SCAN backends): refresh (bits NULL) or peek
	   every span of spans[0..n) at once, on several CPUs; a span's peek
	   bits are (c - base), each span's in words no other span's bits
	   share.  -EAGAIN: not worth it here (one CPU), nothing scanned
	   (lock held) */
	int  (*scan_spans)(struct hm_space *s, const struct hm_scan_span *spans, size_t n,
			   uint64_t *bits);
	/* stop watching armed chunks [first, first+count): a write to them
	   costs no fault and is not recorded (lock held).  Consumers only
	   (lib/watch_consumer.c); -EOPNOTSUPP leaves them armed */
	int  (*disarm)(struct hm_space *s, uint64_t first, uint64_t count);
	/* re-arm chunks about to be handed out by harvest (lock held) */
	int  (*rearm)(struct hm_space *s, const uint64_t *chunks, size_t n);
	/* export fds + fill blob bytes after the common header (lock held) */
	/* harvest: move what the kernel recorded into pending (lock held);
	   NULL where trip handlers record directly */
	int  (*collect)(struct hm_space *s);
	/* optional fast path of collect: write up to cap chunks straight into
	   out (ascending, distinct), the rest into pending; -EAGAIN = use
	   collect (lock held) */
	int  (*collect_direct)(struct hm_space *s, uint64_t *out, size_t cap, size_t *ret_n);
	int  (*export)(struct hm_space *s, struct hm_space_handoff *h);
	/* after a successful export, lock NOT held */
	void (*exported)(struct hm_space *s);
	int  (*poll_fd)(struct hm_space *s);
	/* hm_space_protect() of [addr, addr+len) in watched mapping m, lock
	   held; NULL = plain mprotect() (guards live in the page tables) */
	int  (*app_protect)(struct hm_space *s, int m, uintptr_t addr, size_t len, int prot);
	int  (*device_view)(struct hm_space *s, void **ret_addr);
	/* optional overrides of the common state machine (kmod: the module
	   keeps the state) */
	int  (*arm)(struct hm_space *s, uint64_t first, uint64_t count);
	/* optional: arm a list of chunks at once (kmod: ARM with ranges) */
	int  (*arm_chunks)(struct hm_space *s, const uint64_t *chunks, size_t n);
	int  (*harvest)(struct hm_space *s, uint64_t *ret_chunks, size_t cap,
			size_t *ret_n, bool *ret_more);
	/* hm_space_harvest_take() where the backend keeps the state (kmod);
	   NULL: the common state machine hands out pending, unarmed */
	int  (*take)(struct hm_space *s, uint64_t *ret_chunks, size_t cap,
		     size_t *ret_n, bool *ret_more);
	int  (*generations)(struct hm_space *s, const uint64_t *chunks, size_t n,
			    uint64_t *ret_gens);
	int  (*generations_range)(struct hm_space *s, uint64_t first, uint64_t count,
				  uint64_t *ret_gens);
	/* mapping of the pages (aliases, importer's CPU mapping); NULL =
	   hm_memfd_map() over s->memfd at offset 0 */
};

/*
 * A consumer (lib/watch_consumer.c): its watch set and its pending set (a
 * bitmap for dedup plus an array), under the space lock.  Once a space has
 * a consumer it has a built-in one too, cons[0], which the hm_space_arm /
 * harvest / harvest_take calls use; from then on the space's own pending
 * list is the backend's record only, fanned out to the consumers by every
 * harvest, and its armed bitmap is the union of the watch sets.
 */
struct hm_consumer {
	struct hm_space *s;
	unsigned slot;
	uint64_t *watch;         /* bitmap */
	uint64_t *pend_bits;     /* bitmap */
	uint64_t *pend;          /* array, capacity nr_chunks */
	uint64_t nr_pend;
	bool pend_sorted;
	uint64_t nr_watched;
	size_t bytes;            /* one mapping holds the three */
	struct hm_consumer_stats stats;
};

struct hm_space {
	const struct hm_backend_ops *ops;
	enum hm_backend backend;
	uint64_t size;
	unsigned chunk_shift;
	uint64_t nr_chunks;
	uint32_t flags;
	unsigned caps;
	bool imported;
	bool exported;
	char reason[320];

	int memfd;               /* the pages: a memfd, or the module's space fd */
	int notify_fd;           /* eventfd written on record (uffd-sync, mprotect), or -1 */
	void *cpu_addr;          /* hm_space_addr(): maps[0], or the importer's own mapping */
	struct hm_map maps[HM_SPACE_MAX_MAPS];  /* [0] = primary; watched */
	unsigned nr_maps;
	void *device_view;

	/* the lock: a mutex, or (mprotect) a spinlock taken with all signals
	   blocked, because the SIGSEGV handler takes it too */
	bool spin;
	pthread_mutex_t mutex;
	atomic_flag spinlock;
	sigset_t saved_mask;

	/* common watch state (see top of file) */
	uint64_t *armed;         /* bitmap */
	uint64_t *open;          /* bitmap */
	uint64_t *pend_bits;     /* bitmap */
	uint64_t *pend;          /* array, capacity nr_chunks */
	uint64_t nr_pend;
	bool pend_sorted;
	uint64_t *gen;           /* array */
	uint64_t *gdirty;        /* bitmap: recorded since gen[] was last read */
	size_t state_bytes;      /* one mapping holds all of the above */

	struct hm_space_stats stats;

	/* consumers: [0] built-in, set with the first one; NULL before */
	struct hm_consumer *cons[HM_CONSUMER_MAX + 1];
	unsigned nr_cons;        /* not counting [0] */
	uint64_t *unwp;          /* bitmap: disarmed, a scan must not protect */
	uint64_t *unarmed;       /* bitmap: watched, taken, its re-arm failed */
	uint64_t nr_unarmed;

	void *priv;              /* backend state */
};

/* lock */
void hm_lock(struct hm_space *s);
void hm_unlock(struct hm_space *s);

/* record chunk c written (lock held; async-signal-safe): pending + gen */
void hm_notify(struct hm_space *s);
static inline void hm_record(struct hm_space *s, uint64_t c)
{
	if (!hm_test_bit(s->pend_bits, c)) {
		hm_set_bit(s->pend_bits, c);
		if (s->nr_pend && s->pend[s->nr_pend - 1] > c)
			s->pend_sorted = false;
		s->pend[s->nr_pend++] = c;
	}
	/* the generation moves when it is next read: a dense bit here, so a
	   harvest of K scattered chunks touches no per-chunk array */
	hm_set_bit(s->gdirty, c);
	if (s->notify_fd >= 0)
		hm_notify(s);
}

/* backend arm of a checked range (lock held), as hm_space_arm() */
int hm_arm_locked(struct hm_space *s, uint64_t first, uint64_t count);
/* the consumers' side of harvest/take/arm (lib/watch_consumer.c) */
int hm_cons_harvest_locked(struct hm_consumer *k, unsigned flags, uint64_t *ret_chunks,
			   size_t cap, size_t *ret_n, bool *ret_more);
int hm_cons_watch_locked(struct hm_consumer *k, uint64_t first, uint64_t count);
int hm_cons_watch_chunks_locked(struct hm_consumer *k, const uint64_t *chunks, size_t n);
void hm_cons_release_all(struct hm_space *s);

/* which watched mapping holds addr; chunk index in *ret_chunk; -1 if none */
int hm_map_lookup(const struct hm_space *s, uintptr_t addr, uint64_t *ret_chunk);

int hm_set_reason(struct hm_space *s, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

/* the eventfd behind hm_space_poll_fd() for uffd-sync and mprotect */
int hm_notify_init(struct hm_space *s);

/* memfd helpers shared by the uffd and mprotect backends */
int hm_memfd_create(struct hm_space *s, const struct hm_space_params *p);
int hm_memfd_map(struct hm_space *s, void *hint, bool fixed, int prot, void **ret_addr);
int hm_memfd_import(struct hm_space *s, const struct hm_space_handoff *h);

/* common handoff blob header: magic, backend, shift, nr_maps, size, maps */
struct hm_blob {
	uint32_t magic;
	uint8_t backend;
	uint8_t chunk_shift;
	uint8_t nr_maps;
	uint8_t pad;
	uint64_t size;
	uint64_t maps[HM_SPACE_MAX_MAPS];
};
_Static_assert(sizeof(struct hm_blob) <= 64, "handoff blob too big");

extern const struct hm_backend_ops hm_kmod_ops;
extern const struct hm_backend_ops hm_uffd_async_ops;
extern const struct hm_backend_ops hm_uffd_sync_ops;
extern const struct hm_backend_ops hm_mprotect_ops;

/* uffd helpers (lib/watch_uffd.c), shared with watch_uffd_sync.c */
int hm_uffd_open(uint64_t features, bool user_only, int *ret_fd, uint64_t *ret_features);
int hm_uffd_register(int uffd, uintptr_t addr, uint64_t len);
int hm_uffd_wp(int uffd, uintptr_t addr, uint64_t len, bool wp);
int hm_uffd_wp_maps(struct hm_space *s, int uffd, uint64_t first, uint64_t count);
int hm_uffd_unwp_maps(struct hm_space *s, int uffd, uint64_t first, uint64_t count);

/*
 * For backends that learn of a write by its fault (uffd-sync, mprotect):
 * protect again, with @protect, the chunks whose "open" bit is set, among
 * the ascending chunks[0..n) (consecutive ones in one call) or in
 * [first, first+count), clearing their bits.
 */
typedef int hm_protect_fn(struct hm_space *s, uint64_t first, uint64_t count);
int hm_rearm_open(struct hm_space *s, const uint64_t *chunks, size_t n, hm_protect_fn *protect);
int hm_refresh_open(struct hm_space *s, uint64_t first, uint64_t count, hm_protect_fn *protect);

#pragma GCC visibility pop

#endif /* HMIRROR_WATCH_INTERNAL_H */
