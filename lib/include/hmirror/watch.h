/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * libhmirror watch API: write-watch guards over a guest space, one API over
 * four backends (the hmirror kernel module, userfaultfd async write-protect
 * with PAGEMAP_SCAN, synchronous userfaultfd, mprotect + SIGSEGV).
 *
 * Every function returns 0 or a negative errno; output parameters are named
 * ret_*.  The library never logs, never exits, and installs a SIGSEGV
 * handler only when the caller creates an mprotect space (it chains to the
 * caller's previous handler for faults that are not its own).
 *
 * Semantics (identical across backends; watch.rst):
 *  - A chunk is 1 << chunk_shift bytes.  Chunks are unarmed until
 *    hm_space_arm(); once armed a chunk stays armed (harvest re-arms).
 *  - The first CPU store to an armed chunk through any watched mapping
 *    (hm_space_addr() of the creator, every alias) is recorded and proceeds.
 *    Kernel writes (read(2) into the space, process_vm_writev) are recorded
 *    where hm_space_caps() has HM_CAP_KERNEL_WRITES; elsewhere they may fail
 *    with EFAULT (mprotect) -- see the capability.
 *  - hm_space_harvest() returns each chunk written since it was last
 *    reported, in ascending order, and re-arms it; hm_space_harvest_take()
 *    returns them and leaves them unarmed (HM_CAP_HARVEST_TAKE).  A store racing a harvest
 *    is reported by this harvest or the next (possibly by both), never lost.
 *  - hm_space_generation(): even = the chunk is armed and was not written
 *    since; odd = not clean (never armed, or -- kmod -- written since armed
 *    and not yet re-armed).  The value only grows and changes on the first
 *    write after the chunk was (re-)armed.  The userspace backends, which
 *    learn of writes at scan time, scan and re-arm the chunk inside the
 *    call, so they answer even for every armed chunk.  Rule 3:
 *    g0 = gen; if (HM_GEN_CLEAN(g0)) { copy; clean iff gen == g0 } else
 *    hm_space_arm() (re-arms, keeps the record) and retry.
 *  - Writes through hm_space_device_view() and through an importer's
 *    hm_space_addr() are never recorded.
 *  - fork(): the child does not inherit any mapping of the space (every
 *    library mapping is MADV_DONTFORK); hand the space over with
 *    hm_space_export()/hm_space_import() instead.
 *  - A space is safe to use from several threads; calls are serialised by
 *    a per-space lock.
 */
#ifndef HMIRROR_WATCH_H
#define HMIRROR_WATCH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

enum hm_backend {
	HM_BACKEND_AUTO = 0,
	HM_BACKEND_KMOD,
	HM_BACKEND_UFFD_ASYNC,
	HM_BACKEND_UFFD_SYNC,
	HM_BACKEND_MPROTECT,
};
#define HM_BACKEND_COUNT 5

/* hm_space_params.flags */
#define HM_SPACE_POPULATE	(1u << 0) /* allocate every page up front */
#define HM_SPACE_FLAGS_ALL	(HM_SPACE_POPULATE)

#define HM_GEN_CLEAN(g)		(((g) & 1) == 0)

#define HM_CHUNK_SHIFT_DEFAULT	16
#define HM_CHUNK_SHIFT_MAX	30
/* limits (every user-allocatable resource has one) */
#define HM_SPACE_MAX_CHUNKS	(1ull << 24)	/* chunks per space */
#define HM_SPACE_MAX_BYTES	(1ull << 40)	/* bytes per space */
#define HM_SPACE_MAX_MAPS	6		/* watched mappings: primary + aliases */
#define HM_MPROTECT_MAX_SPACES	64		/* live mprotect spaces per process */

struct hm_space_params {
	uint64_t size;          /* bytes, multiple of the chunk size */
	uint32_t chunk_shift;   /* >= page shift; 0 = default 16 (64 KiB) */
	uint32_t flags;         /* HM_SPACE_POPULATE, ... */
	enum hm_backend backend;/* AUTO = best available */
	/* optional host virtual address for the watched CPU mapping
	 * (MAP_FIXED_NOREPLACE); not a guest address: where the space lies
	 * in the guest's GPU address space is the engine's
	 * (hm_engine_add_space()) or the daemon's (hm_client_space_add()) */
	void *addr;
};

struct hm_space;

int  hm_space_new(const struct hm_space_params *p, struct hm_space **ret);
void hm_space_free(struct hm_space *s);                /* NULL ok */
void    *hm_space_addr(const struct hm_space *s);      /* the watched CPU mapping */
uint64_t hm_space_size(const struct hm_space *s);
unsigned hm_space_chunk_shift(const struct hm_space *s);
uint64_t hm_space_nr_chunks(const struct hm_space *s);
enum hm_backend hm_space_backend(const struct hm_space *s);
const char *hm_backend_name(enum hm_backend b);
/* "kmod", "uffd-async", "uffd-sync", "mprotect"; -EINVAL otherwise */
int  hm_backend_from_name(const char *name, enum hm_backend *ret);
const char *hm_space_backend_reason(const struct hm_space *s);

/*
 * Is backend b usable here?  0 if so; otherwise -ENODEV (no module),
 * -EOPNOTSUPP (kernel lacks the feature), -EPERM (not allowed), -EPROTO
 * (module API mismatch).  *ret_reason (optional) gets a static sentence.
 */
int  hm_backend_probe(enum hm_backend b, const char **ret_reason);

/* capabilities of a space's backend (hm_space_caps) */
#define HM_CAP_KERNEL_WRITES	(1u << 0) /* read(2) etc. into armed memory succeeds and is recorded */
#define HM_CAP_POLL		(1u << 1) /* hm_space_poll_fd() works */
#define HM_CAP_HANDOFF		(1u << 2) /* hm_space_export() works */
#define HM_CAP_NO_VMA_SPLIT	(1u << 3) /* guards never split VMAs (no vm.max_map_count wall) */
#define HM_CAP_KERNEL_TRIP	(1u << 4) /* a trip is resolved in the kernel, no userspace round trip */
#define HM_CAP_RECLAIM_SAFE	(1u << 5) /* records survive reclaim of the pages (uffd-async: only
					     when the library could mlock the watched mappings) */
#define HM_CAP_HARVEST_TAKE	(1u << 6) /* hm_space_harvest_take() works */
/* what the application may do to a watched mapping (Documentation/watch.rst,
   "What escapes a guard"): */
#define HM_CAP_MPROTECT		(1u << 7) /* its own mprotect() keeps the guards (else: through
					     hm_space_protect() only) */
#define HM_CAP_MREMAP		(1u << 8) /* mremap() of a whole watched mapping is followed
					     (hm_space_addr() answers the new address) */
#define HM_CAP_MADVISE		(1u << 9) /* madvise(MADV_DONTNEED) keeps the guards */
#define HM_CAP_RANGE_SCAN	(1u << 10) /* hm_space_generations_range() refreshes or peeks
					      a range in one kernel call, however sparsely
					      armed (else one call a run of armed chunks) */
#define HM_CAP_GEN_DEFER	(1u << 11) /* HM_GEN_DEFER answers from what the space knows,
					      with no kernel call (else the flag changes
					      nothing) */
unsigned hm_space_caps(const struct hm_space *s);
/* mprotect() of [addr, addr+len) inside a watched mapping, keeping armed
   chunks guarded (the mprotect backend re-protects them; elsewhere the
   same as mprotect()).  prot: PROT_READ, optionally | PROT_WRITE. */
int  hm_space_protect(struct hm_space *s, void *addr, size_t len, int prot);
unsigned hm_backend_caps(enum hm_backend b);

/* another watched CPU mapping of the same pages (an alias) */
int  hm_space_map_alias(struct hm_space *s, void *hint, void **ret_addr);
int  hm_space_unmap_alias(struct hm_space *s, void *addr);
/* a mapping for the DEVICE (host-pointer import): same pages, never
   write-protected by guards, writes through it are NOT recorded.  One per
   space, created on the first call, unmapped by hm_space_free(). */
int  hm_space_device_view(struct hm_space *s, void **ret_addr);
/* arm write-watch on chunks [first, first+count) */
int  hm_space_arm(struct hm_space *s, uint64_t first, uint64_t count);
/* arm the n chunks listed (any order, repeats allowed), in as few kernel
   calls as the backend allows (kmod: one ioctl per 65,536 runs); all are
   checked first: -ERANGE arms none */
int  hm_space_arm_chunks(struct hm_space *s, const uint64_t *chunks, size_t n);
/* read-and-re-arm: chunks written since the last harvest/arm, ascending;
   stores at most cap, *ret_n = number stored; *ret_more = true when more
   written chunks remain recorded for the next call (nothing is lost) */
int  hm_space_harvest(struct hm_space *s, uint64_t *ret_chunks, size_t cap,
		      size_t *ret_n, bool *ret_more);
/* take: hm_space_harvest() that re-arms nothing.  The chunks handed out are
   unarmed afterwards: later writes to them are not recorded, and their
   generation stays odd, until hm_space_arm() arms them again (as rule 3
   does before an upload).  Costs what was written: no write-protect.
   -EOPNOTSUPP without HM_CAP_HARVEST_TAKE: uffd-async, whose record is
   the PTE's write-protect bit (clearing the record is re-arming it), and
   a module without HMIRROR_FEATURE_HARVEST_NO_REARM. */
int  hm_space_harvest_take(struct hm_space *s, uint64_t *ret_chunks, size_t cap,
			   size_t *ret_n, bool *ret_more);
/* write generation of a chunk: changes whenever the chunk has been
   written since it was armed, even before a harvest (backends that only
   learn of writes at scan time scan that chunk). Used for rule 3; see the
   even/odd convention at the top of this file.  -ERANGE: chunk outside. */
int  hm_space_generation(struct hm_space *s, uint64_t chunk, uint64_t *ret_gen);
int  hm_space_generations(struct hm_space *s, const uint64_t *chunks, size_t n,
			  uint64_t *ret_gens);
/* the generations of chunks [first, first+count) into ret_gens[0..count), in
   one pass (one scan of the range on the userspace backends, whatever the
   number of chunks): what hm_space_generations() answers for the same
   chunks.  -EINVAL: count 0 or an unknown flag; -ERANGE: the range leaves
   the space. */
int  hm_space_generations_range(struct hm_space *s, uint64_t first, uint64_t count,
				unsigned flags, uint64_t *ret_gens);
/* the generations of several ranges in one call, under one lock: each
   span's are what hm_space_generations_range() with flags answers for it
   (with HMIRROR_GEN_COVER=1 a HM_CAP_RANGE_SCAN backend may scan the
   spans' cover once instead of a call a span: Documentation/watch.rst).
   Spans in any order, overlapping or not.  -EINVAL: a span without gens,
   or as hm_space_generations_range(); -ERANGE: a span leaves the space
   (nothing is scanned then). */
struct hm_gen_span {
	uint64_t first, count;		/* chunks [first, first + count) */
	uint64_t *gens;			/* their count generations */
};
int  hm_space_generations_spans(struct hm_space *s, const struct hm_gen_span *spans, size_t n,
				unsigned flags);
/* flags: answer from what the space knows, without asking the kernel where
   the backend can (uffd-async: no scan).  A write this call misses still
   moves the generation that the next call without the flag answers, so
   rule 3 may note g0 with it, never the value checked after the copy
   (where the kernel must be asked, the flag changes nothing). */
#define HM_GEN_DEFER	(1u << 0)
/* flags: ask the kernel without taking what it says (uffd-async: a
   read-only PAGEMAP_SCAN, which re-protects nothing and so flushes no
   TLB).  A chunk found written answers the generation that the call
   recording the write will give it, and the write stays for the next
   harvest, or call without the flag, to record.  For rule 3's check
   after a copy that is not tried again (the engine's last try), never
   for g0 nor before a retry: a chunk already written and not re-protected
   answers the same after a second write.  Not with HM_GEN_DEFER (-EINVAL);
   where the backend cannot peek, the flag changes nothing. */
#define HM_GEN_PEEK	(1u << 1)
/* fd that polls readable when an armed chunk was written since the last
   harvest (may be -EOPNOTSUPP for a backend; document).  Owned by the
   space: do not close it. */
int  hm_space_poll_fd(struct hm_space *s);

/* hand the space to another process (the daemon): fds + a small blob.
 * After a successful export the exporter keeps its mappings (still watched)
 * but its arm/harvest/generation/poll calls return -EBUSY: the importer
 * owns the watch state.  The userspace backends refuse to export (-EBUSY)
 * while chunks are recorded but not yet harvested (the module keeps its
 * records in the kernel and hands them over); aliases cannot be added or
 * removed after an export.  mprotect spaces cannot be exported
 * (-EOPNOTSUPP, no HM_CAP_HANDOFF).  Exporting again hands the same watch
 * to another importer: for an importer that is gone (a daemon that died
 * and was restarted); two live importers of one space would take each
 * other's records.
 * The fds in *ret are the caller's to close (after sending them). */
struct hm_space_handoff { int fds[4]; unsigned nr_fds; uint8_t blob[64]; unsigned blob_len; };
int  hm_space_export(struct hm_space *s, struct hm_space_handoff *ret);
int  hm_space_import(const struct hm_space_handoff *h, struct hm_space **ret);
  /* the importer can arm/harvest/generation and has a device view; its
     hm_space_addr() is a CPU mapping of the same pages (unwatched).
     Import takes its own references: the caller closes h->fds after. */

/* helpers: send/receive a handoff over a unix socket (SCM_RIGHTS) */
int  hm_handoff_send(int sock, const struct hm_space_handoff *h);
int  hm_handoff_recv(int sock, struct hm_space_handoff *ret);
void hm_handoff_close(struct hm_space_handoff *h);  /* closes the fds */

/* counters of a space (this process's view) */
struct hm_space_stats {
	uint64_t harvests;
	uint64_t chunks_reported;
	uint64_t trips;         /* userspace-seen trips (uffd-sync, mprotect) */
	uint64_t overflows;     /* mprotect: VMA limit hit in the fault handler */
};
int  hm_space_stats(const struct hm_space *s, struct hm_space_stats *ret);

/*
 * Consumers: several watchers of one space's writes, each with its own
 * cursor (Documentation/watch.rst, "Consumers").  The engine, a texture
 * cache and a buffer cache of the same emulator each take one; none can
 * take another's records.
 *  - A consumer watches a set of chunks (hm_consumer_watch: every chunk
 *    [off, off + len) touches; one bit a chunk, so unwatching a chunk ends
 *    it whoever asked for it).  A chunk is armed while anyone watches it,
 *    and disarmed when the last watcher stops: a CPU writing a chunk
 *    nobody watches then pays no fault (kmod: one, the next write of each
 *    page; uffd-async: a chunk never armed that lies within
 *    HM_CONSUMER_SCAN_GAP chunks of a watched one may be write-protected
 *    by a harvest's scan; a disarmed chunk never is).
 *  - hm_consumer_harvest() returns, ascending, every chunk this consumer
 *    watches that was written since this consumer last had it reported
 *    (or started watching it); a write is never missed by any consumer,
 *    and one racing a harvest may be reported by this harvest and the
 *    next.  A harvest may also report a chunk written just before the
 *    consumer started watching it.
 *  - The backend keeps one record a space; a harvest by any consumer
 *    collects it (uffd-async: the part this consumer watches) and fans it
 *    out to every watcher's pending set: each write costs one collect plus
 *    one pending entry a watcher.
 *  - hm_space_harvest(), hm_space_harvest_take() and hm_space_arm() are
 *    those of a built-in consumer of the space: they keep their meaning.
 *  - Free every consumer before its space.  hm_space_free() with
 *    consumers left releases their state; each call on them then returns
 *    -ENODEV, and hm_consumer_free() still frees them.  A space with
 *    consumers cannot be exported (-EBUSY).
 * Errors: -EINVAL (NULL, unknown flag, len 0), -ERANGE (outside the space,
 * nothing changed), -ENOSPC (HM_CONSUMER_MAX consumers already), -EBUSY
 * (exported space), -ENODEV (its space was freed).  Through the daemon:
 * hm_client_watch/unwatch/harvest() (client.h).
 */
#define HM_CONSUMER_MAX		16	/* consumers a space, the built-in one not counted */
#define HM_CONSUMER_SCAN_GAP	64	/* uffd-async: unwatched chunks a scan may span */

/* hm_consumer_new() flags */
#define HM_CONSUMER_WATCH_ALL	(1u << 0) /* start watching the whole space */
/* hm_consumer_harvest() flags */
#define HM_HARVEST_UNWATCH	(1u << 0) /* stop watching what is handed out (a take) */

struct hm_consumer;

int  hm_consumer_new(struct hm_space *s, unsigned flags, struct hm_consumer **ret);
void hm_consumer_free(struct hm_consumer *c);                 /* NULL ok */
int  hm_consumer_watch(struct hm_consumer *c, uint64_t off, uint64_t len);
int  hm_consumer_unwatch(struct hm_consumer *c, uint64_t off, uint64_t len);
/* the n chunks listed (any order, repeats allowed); all are checked first */
int  hm_consumer_watch_chunks(struct hm_consumer *c, const uint64_t *chunks, size_t n);
int  hm_consumer_unwatch_chunks(struct hm_consumer *c, const uint64_t *chunks, size_t n);
/* as hm_space_harvest(), for this consumer */
int  hm_consumer_harvest(struct hm_consumer *c, unsigned flags, uint64_t *ret_chunks,
			 size_t cap, size_t *ret_n, bool *ret_more);
/* the same, handed out as byte ranges of the space, one call a run of
   adjacent written chunks, ascending, with no lock held (fn may call
   into the space).  fn returning non-zero stops the harvest: the runs not
   yet handed out stay pending, and that value is returned. */
typedef int hm_consumer_range_fn(void *user, uint64_t off, uint64_t len);
int  hm_consumer_harvest_ranges(struct hm_consumer *c, unsigned flags,
				hm_consumer_range_fn *fn, void *user);
struct hm_consumer_stats {
	uint64_t harvests;
	uint64_t chunks_reported;
	uint64_t chunks_watched;	/* now */
	uint64_t chunks_pending;	/* now: recorded for this consumer, not handed out */
};
int  hm_consumer_stats(const struct hm_consumer *c, struct hm_consumer_stats *ret);

#ifdef __cplusplus
}
#endif

#endif /* HMIRROR_WATCH_H */
