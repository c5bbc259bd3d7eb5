/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * hmirror engine: home imports, the device table, device-local mirrors of
 * hot chunks, clean-only uploads, copy-back of device writes before a
 * dispatch is reported done (the rules 1-6 of data-path.rst; engine.rst;
 * hmirror(7) says where the documentation is installed).
 *
 * The engine runs on the caller's hm_vk (which may wrap the caller's own
 * VkDevice and queue).  Guest spaces come from the watch API (watch.h):
 * the engine imports each space's device view, arms guards on the chunks
 * it mirrors, harvests them before each dispatch and checks their write
 * generation around each upload.
 *
 * All calls on one engine are serialised by the engine's lock.  Functions
 * return 0 or a negative errno.  After the device was lost every call that
 * needs the device returns -ENODEV; home pages are never written by a
 * failed dispatch's copy-back, nor later by another's (a dispatch that ran
 * and could not copy home drops the mirrors it wrote).
 */
#ifndef HMIRROR_ENGINE_H
#define HMIRROR_ENGINE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <linux/hmirror_table.h>
#include "hmirror/advice.h"
#include "hmirror/vkctx.h"
#include "hmirror/watch.h"

#ifdef __cplusplus
extern "C" {
#endif

struct hm_engine;

/* hm_engine_params.flags */
#define HM_ENGINE_NO_MIRRORS	(1u << 0) /* every access reads home */
#define HM_ENGINE_TABLE_HOST	(1u << 1) /* table in host memory even where device-local host-visible exists */
/* no device timestamps around dispatches (ns_dispatch_gpu stays 0): they
 * cost an empty dispatch 42 -> 90 us on lavapipe; hosts that do not read
 * ns_dispatch_gpu (hmirrord) set it */
#define HM_ENGINE_NO_TIMESTAMPS	(1u << 2)
/* (1u << 3) is a test hook's: lib/engine/test_hooks.h */
/* a dense window even where the device binds sparse (hm_vk made with
 * HM_VK_SPARSE on a device with sparseResidencyAliased) */
#define HM_ENGINE_WINDOW_DENSE	(1u << 4)
#define HM_ENGINE_FLAGS_ALL	(HM_ENGINE_NO_MIRRORS | HM_ENGINE_TABLE_HOST | \
				 HM_ENGINE_NO_TIMESTAMPS | HM_ENGINE_WINDOW_DENSE)

/* Limits */
/* spaces imported at once (hm_engine_add_space(): -EMFILE beyond) */
#define HM_ENGINE_MAX_SPACES	1024
/* mappings of the guest address space (hm_engine_map()): a map, or an
 * unmap that splits a mapping in two, that would need more returns
 * -EMFILE.  Each costs 32 bytes; a map or unmap moves the mappings after
 * it in one sorted array (4,096 of them: ~128 KiB) */
#define HM_ENGINE_MAX_MAPPINGS	65536
#define HM_ENGINE_MAX_PIPELINES	256
/* chunks over all spaces, and mapped guest chunks over all mappings
 * (each counted on its own): hm_engine_params.max_chunks, default
 * HM_ENGINE_MAX_CHUNKS (16 Mi: 1 TiB at 64 KiB chunks, 320 MiB of host
 * state), at most HM_ENGINE_MAX_CHUNKS_LIMIT (256 Mi: 5 GiB of host state) */
#define HM_ENGINE_MAX_CHUNKS	(1u << 24)
#define HM_ENGINE_MAX_CHUNKS_LIMIT (1u << 28)
/* 128-byte push block - 12 table and window words (hmirror_table.h);
 * hm_engine_pipeline_new*() and _adopt() return -E2BIG beyond it */
#define HM_ENGINE_MAX_USER_PUSH_WORDS HM_USER_PUSH_WORDS_MAX

struct hm_engine_params {
	uint32_t flags;
	uint32_t chunk_shift;           /* every space's; 0 = HM_CHUNK_SHIFT_DEFAULT */
	uint64_t mirror_budget;         /* device-local bytes for mirrors and their twins
					   (2 chunks each); 0 = 1/4 of the device-local heap */
	uint64_t max_upload_bytes;      /* per dispatch, 0 = no limit beyond the budget */
	/* hotness of chunks without advice: mirrored once the device wrote
	 * them in hot_marks of the last 8 dispatches; 0 = 2, > 8 = never */
	uint32_t hot_marks;
	/* thrash control: thrash_drops guard drops of one chunk within
	 * thrash_window dispatches stop its mirroring for thrash_backoff
	 * dispatches; 0 = defaults 3, 16, 64 */
	uint32_t thrash_drops;
	uint32_t thrash_window;
	uint32_t thrash_backoff;
	uint64_t timeout_ns;            /* per submission; 0 = 10 s */
	uint64_t max_import_bytes;      /* largest host-pointer import; 0 = the driver's limit */
	uint64_t max_chunks;            /* chunks over all spaces; 0 = HM_ENGINE_MAX_CHUNKS,
					   > HM_ENGINE_MAX_CHUNKS_LIMIT: -EINVAL */
	uint32_t twin_mode;             /* enum hm_twin_mode */
	/* largest mirror window; 0 = maxBufferSize, at most a quarter of the
	 * device-local heap.  Guest bytes past it are served by the helper. */
	uint64_t max_window_bytes;
	void *reserved[3];              /* NULL (-EINVAL otherwise) */
};

/* How an upload fills the twins (hm_engine_params.twin_mode) */
enum hm_twin_mode {
	HM_TWIN_AUTO = 0,       /* GATHER on a GPU, COPY on a CPU device (lavapipe) */
	HM_TWIN_SHADER,         /* a copy shader per batch, overlapping the next batch's upload */
	HM_TWIN_COPY,           /* vkCmdCopyBuffer mirror -> twin after all uploads */
	HM_TWIN_GATHER,         /* one shader reads home, writes mirror and twin (no copy regions) */
};

/* hm_engine_dispatch() flags */
#define HM_DISPATCH_SHARED_WITH_CPU (1u << 0) /* rule 5: reads and writes home only */
#define HM_DISPATCH_FLAGS_ALL	(HM_DISPATCH_SHARED_WITH_CPU)

int  hm_engine_new(struct hm_vk *vk, const struct hm_engine_params *p, struct hm_engine **ret);
void hm_engine_free(struct hm_engine *e);               /* NULL ok */

/*
 * Import space s (its device view) and, unless guest_addr is
 * HM_ENGINE_UNMAPPED, map all of it at guest_addr (hm_engine_map() without
 * flags: -EEXIST where something is mapped there already).  guest_addr
 * chunk-aligned; the space's chunk shift must be the engine's or finer,
 * by at most 6 (-EINVAL); a space is imported once (-EEXIST: map more of
 * it with hm_engine_map()).  The engine does not own s: remove the space
 * before freeing it.  A device without host-pointer import (-EOPNOTSUPP)
 * or a view it cannot import as aligned (-EINVAL) is refused here, leaving
 * the engine as it was; what the driver refuses of the import itself is
 * answered by the dispatch that first needs it (below).
 *
 * Import is lazy: adding and mapping import nothing.  The space's home is
 * imported in pieces (64 MiB; a 256th of a space over 16 GiB), each at the
 * first dispatch boundary (hm_engine_dispatch(), _record(), _submit(),
 * _prefetch(), _device_addr()) after a mapping named a chunk of it, before
 * the table reaches the device, and kept until the space is removed.  A
 * driver that pins what it imports (NVIDIA) so pins only the pieces
 * mapped at a dispatch.  Residency is lazy too: a piece is imported as it
 * is, so a page exists only once the CPU or the device touched it (an
 * untouched 16 GiB space costs no guest pages; lavapipe).  A driver that
 * refuses to import a piece with pages missing gets it again after every
 * page of it was made to exist (MADV_POPULATE_WRITE on the device view,
 * which changes no byte).  A piece the driver refuses fails the dispatch
 * that needs it (below).
 */
#define HM_ENGINE_UNMAPPED	UINT64_MAX
int  hm_engine_add_space(struct hm_engine *e, struct hm_space *s, uint64_t guest_addr,
			 uint32_t *ret_id);
/* Unmap every mapping of space id, then forget the space. */
int  hm_engine_remove_space(struct hm_engine *e, uint32_t id);

/*
 * The guest GPU address space (Documentation/userspace-api.rst, "Guest address
 * space").  Map bytes [offset, offset + size) of space id at guest
 * [guest_addr, guest_addr + size): the table names them for the device at
 * once, and the next dispatch sees them.  offset, size and guest_addr
 * chunk-aligned, size > 0, the range inside the space and below 2^64
 * (-EINVAL, as for unknown flags or space ids: -ENOENT for an id not in
 * use).  The same bytes may be mapped at several guest addresses
 * (aliases): every alias reads and writes the one copy, so a CPU write is
 * seen through all of them and a device write through one is home, seen
 * through the others.  A chunk mapped at more than one guest address
 * stays home (never mirrored) while it is; a chunk gaining its second
 * mapping, or losing its mapping, has its mirror dropped first.
 *
 * Where something is mapped in the range already: -EEXIST, unless flags
 * has HM_MAP_REPLACE, which unmaps it first (a remap: mmap's MAP_FIXED).
 * -EMFILE beyond HM_ENGINE_MAX_MAPPINGS mappings, -E2BIG beyond
 * hm_engine_params.max_chunks mapped chunks; -EBUSY while a work is in
 * flight.  On any error nothing changed, except for an -ENOMEM (host or
 * device memory for a bigger table) after HM_MAP_REPLACE unmapped the
 * range: the range is then left unmapped.  A mapping next to another of
 * the same space at the matching offset is merged with it.
 */
#define HM_MAP_REPLACE		(1u << 0)
#define HM_MAP_FLAGS_ALL	(HM_MAP_REPLACE)
int  hm_engine_map(struct hm_engine *e, uint32_t id, uint64_t offset, uint64_t size,
		   uint64_t guest_addr, uint32_t flags);
/* Unmap every mapped chunk of guest [guest_addr, guest_addr + size)
 * (aligned as for hm_engine_map()); holes are skipped.  -ENOENT where
 * nothing in the range is mapped, -EMFILE where it would split a mapping
 * and there are HM_ENGINE_MAX_MAPPINGS already, -EBUSY while a work is in
 * flight; nothing changed on any error. */
int  hm_engine_unmap(struct hm_engine *e, uint64_t guest_addr, uint64_t size);
/* What guest_addr is mapped to now: space id and byte offset (-ENOENT if
 * nothing). */
int  hm_engine_translate(struct hm_engine *e, uint64_t guest_addr, uint32_t *ret_id,
			 uint64_t *ret_offset);

/* Advice for every chunk mapped in [guest_addr, guest_addr + size)
 * (chunk granularity; advice belongs to the space's chunk, so it holds
 * for every alias).  -ENOENT where nothing is mapped in the range. */
int  hm_engine_advise(struct hm_engine *e, uint64_t guest_addr, uint64_t size, enum hm_advice a);

/* A compute pipeline from a SPIR-V module that calls the lookup helper
 * (already linked).  Its push block: HM_DEVICE_TABLE_PUSH_WORDS table words
 * (uapi/linux/hmirror_table.h) then user_push_words of the caller's. */
int  hm_engine_pipeline_new(struct hm_engine *e, const uint32_t *spirv, size_t nr_words,
			    const char *entry, uint32_t user_push_words, uint32_t *ret_id);
/* The same for a pipeline built elsewhere (hm_vk_pipeline_new() on the
 * engine's hm_vk, push block of 4 * (HM_DEVICE_TABLE_PUSH_WORDS +
 * user_push_words) bytes), so that a compile, which can take a driver
 * seconds, runs on a thread of the caller's without the engine's lock.
 * On success the engine owns it and *p is zeroed; on error (-EINVAL for a
 * push size that does not match, -EMFILE for no free slot) *p is left. */
int  hm_engine_pipeline_adopt(struct hm_engine *e, struct hm_vk_pipeline *p,
			      uint32_t user_push_words, uint32_t *ret_id);
void hm_engine_pipeline_free(struct hm_engine *e, uint32_t id);

/*
 * Two tiers (D969a; Documentation/engine.rst, "Two tiers").  A module whose
 * loads call the load functions of lookup.h (hm_spirv_emit_load()) has two
 * forms (hm_spirv_tier_form()): the compact one (every load calls the
 * helper: quick to compile) and the speculative one (loads read the mirror
 * window first).  hm_engine_pipeline_new() builds the compact pipeline and
 * returns, so the first dispatch runs at once; the engine's compile thread
 * builds the speculative one, and the dispatch after it is ready switches
 * to it (between two dispatches: both forms answer the same).  A module
 * whose speculative form this engine compiled before (its pipeline cache
 * holds it) is built in that form at once, skipping tier one.  A module
 * without load functions has one form.  flags ask for one tier only.
 */
#define HM_PIPELINE_COMPACT_ONLY	(1u << 0)
#define HM_PIPELINE_SPECULATIVE_ONLY	(1u << 1)
#define HM_PIPELINE_FLAGS_ALL	(HM_PIPELINE_COMPACT_ONLY | HM_PIPELINE_SPECULATIVE_ONLY)
int  hm_engine_pipeline_new_tiered(struct hm_engine *e, const uint32_t *spirv, size_t nr_words,
				   const char *entry, uint32_t user_push_words, uint32_t flags,
				   uint32_t *ret_id);
/* Queue the speculative form of spirv (the module pipeline id was built
 * from, in its compact form, elsewhere: hm_engine_pipeline_adopt()) on the
 * compile thread.  -ENOENT for a module with one form. */
int  hm_engine_pipeline_queue_tier(struct hm_engine *e, uint32_t id, const uint32_t *spirv,
				   size_t nr_words, const char *entry);
struct hm_engine_pipeline_info {
	uint32_t tier;                  /* enum hm_tier dispatched now (0: the only form) */
	bool pending;                   /* tier two queued or compiling */
	bool tier_one_skipped;          /* built speculative at once: cached */
	int tier_two_error;             /* its compile failed (stays on tier one) */
	uint64_t ns_compile_compact;    /* wall time of each compile, 0 if none */
	uint64_t ns_compile_speculative;
};
int  hm_engine_pipeline_info(struct hm_engine *e, uint32_t id, struct hm_engine_pipeline_info *ret);
/* Wait until no tier-two compile of pipeline id is pending (timeout_ns, 0
 * = 10 s; -ETIMEDOUT).  The switch itself happens at the next dispatch. */
int  hm_engine_pipeline_wait(struct hm_engine *e, uint32_t id, uint64_t timeout_ns);

/*
 * Run a dispatch: harvest CPU writes and drop the mirrors they hit, upload
 * clean wanted chunks (one batched copy, published only if their write
 * generation held), dispatch with the push block, then scan the marks and
 * copy home exactly the bytes the device changed in mirrors.  Returns once
 * every device write is home (rule 4).  nr_push must equal the pipeline's
 * user_push_words.  First the home pieces that mappings name are imported
 * (hm_engine_add_space()): an import the driver refuses returns its error
 * (-ENOSPC, -ENOMEM, -EBADF, ...) before anything else of the dispatch
 * ran; the table still names no piece that is not imported, and the next
 * dispatch tries again.
 */
int  hm_engine_dispatch(struct hm_engine *e, uint32_t pipeline, uint32_t gx, uint32_t gy,
			uint32_t gz, const uint32_t *push, uint32_t nr_push, uint32_t flags);

/*
 * The emulator's command stream (Documentation/userspace-api.rst, "Your
 * command stream").  A dispatch described once:
 */
struct hm_engine_dispatch {
	uint32_t pipeline;
	uint32_t groups[3];
	const uint32_t *push;           /* nr_push == the pipeline's user_push_words */
	uint32_t nr_push;
	uint32_t flags;                 /* HM_DISPATCH_* */
	/* hm_engine_submit() only (hm_engine_record(): must be VK_NULL_HANDLE):
	 * the submission waits for wait_sem >= wait_value and signals
	 * signal_sem = signal_value (timeline semaphores of the engine's
	 * device); signal_sem VK_NULL_HANDLE: the engine's own timeline
	 * (hm_engine_work_timeline() says which value) */
	VkSemaphore wait_sem;
	uint64_t wait_value;
	VkSemaphore signal_sem;
	uint64_t signal_value;
};
struct hm_engine_work;

/*
 * Record a dispatch into the caller's command buffer cb (primary, in the
 * recording state, for a queue of the engine's hm_vk queue family).  The
 * host part runs now, as hm_engine_dispatch()'s does: harvest, uploads
 * (submitted by the engine and waited for: an upload is published only
 * once its copy completed, rule 3), the window, the table.  Recorded into
 * cb: a barrier, the dispatch with its push block, a barrier, the copy-back
 * of every published mirror, gated on the device by its mark (only what
 * the device changed is written home, rule 4), a barrier.  So every device
 * write is home when cb's commands have run: whatever cb's submission
 * signals (a fence, a timeline value) is signalled after the writes are
 * home.  The caller submits cb (under hm_vk_queue_lock() when it shares
 * the queue), then calls hm_engine_complete().
 *
 * One work is in flight per engine: until it completes (or is cancelled)
 * hm_engine_dispatch(), _record(), _submit(), _harvest_now(), _advise(),
 * _add_space() and _remove_space() return -EBUSY; hm_engine_pipeline_free()
 * of its pipeline is deferred to its completion.  The guest memory may be
 * written by the CPU meanwhile: such writes are never overwritten by the
 * copy-back and drop their mirrors at the next dispatch (rule 2).
 * -EINVAL: no cb, a bad pipeline, push size, flags or group count, a
 * semaphore given.  *ret is the work (owned by the engine).
 */
int  hm_engine_record(struct hm_engine *e, VkCommandBuffer cb, const struct hm_engine_dispatch *d,
		      struct hm_engine_work **ret);
/*
 * The same on the engine's own command buffer, submitted to the engine's
 * queue without waiting: it waits for d->wait_sem (if given) and signals
 * d->signal_sem = d->signal_value, or the engine's timeline.  The value is
 * signalled after every device write of the dispatch is home.
 */
int  hm_engine_submit(struct hm_engine *e, const struct hm_engine_dispatch *d,
		      struct hm_engine_work **ret);
/* The semaphore and value a submitted work signals (-EINVAL for a
 * recorded one: its submission is the caller's). */
int  hm_engine_work_timeline(const struct hm_engine_work *w, VkSemaphore *ret_sem,
			     uint64_t *ret_value);
/*
 * Retire a work: wait up to timeout_ns (0: look once) for its commands to
 * have run, then read its marks (hotness, statistics) and free the engine
 * for the next dispatch.  The device writes were home before; this adds
 * nothing to guest memory.  -EAGAIN: not run yet (a recorded buffer not
 * submitted, or still running): call again.  -ENODEV: the device was lost
 * (the work is retired).  -EINVAL: not a work in flight.
 */
int  hm_engine_complete(struct hm_engine_work *w, uint64_t timeout_ns);
/* Drop a recorded work whose command buffer will never be submitted (an
 * error path of the caller's).  -EALREADY if it ran (complete it),
 * -EINVAL for a submitted work. */
int  hm_engine_cancel(struct hm_engine_work *w);

/*
 * Harvest the CPU writes recorded since the last harvest now, outside a
 * dispatch: each written chunk that has a mirror is repointed home in the
 * table and its mirror dropped (rule 2), exactly as the harvest at the
 * start of hm_engine_dispatch() does (thrash control counts the drop, the
 * chunk is wanted again if still advised or hot).  Serialised with
 * dispatch by the engine lock, so it never runs inside one.  For a host
 * that learns of guard trips early (the daemon, from the module's netlink
 * events).  Returns the number of mirrors dropped (>= 0) or a negative
 * errno (-ENODEV once the device is lost).
 */
int  hm_engine_harvest_now(struct hm_engine *e);

/*
 * Upload now what the next dispatch would upload (the chunks advised
 * HM_ADVICE_READ_MOSTLY or PREFER_DEVICE, or hot, that have no clean
 * mirror, within the budget): a harvest, the uploads with their retries
 * (rule 3), the window and the table, as the preparation of
 * hm_engine_dispatch() does, so that the first dispatch over freshly
 * advised memory does not wait for its mirrors (CUDA's
 * cudaMemPrefetchAsync, done synchronously).  Serialised with dispatch by
 * the engine lock.  Returns the number of mirrors published (>= 0), or
 * -EBUSY while a recorded or submitted work is not complete, -ENODEV once
 * the device is lost.  Counted in prefetches and ns_prefetch (its upload
 * parts also in ns_upload_select .. ns_window_sync), not in ns_harvest,
 * ns_upload or dispatches.
 */
int  hm_engine_prefetch(struct hm_engine *e);

/* Is the chunk holding guest_addr mirrored (published in the table) now? */
int  hm_engine_is_mirrored(struct hm_engine *e, uint64_t guest_addr, bool *ret);
/* The device address the table answers for guest_addr now (0 if none),
 * after importing what the table names, as a dispatch would (its error). */
int  hm_engine_device_addr(struct hm_engine *e, uint64_t guest_addr, uint64_t *ret);

struct hm_engine_stats {
	uint64_t dispatches;
	uint64_t shared_dispatches;
	uint64_t chunks_mirrored;       /* now */
	uint64_t mirror_bytes;          /* device-local bytes held now (mirror + twin) */
	uint64_t mirror_budget;
	uint64_t uploads;               /* chunks copied home -> mirror */
	uint64_t upload_bytes;          /* of them read from home (a refresh beside a dispatch
					   takes its unwritten units from the old mirror) */
	uint64_t upload_regions;        /* copy regions those took (merged where contiguous) */
	uint64_t uploads_discarded;     /* generation moved during the copy */
	uint64_t mirrors_dropped_by_guard;  /* all of them, early ones included */
	uint64_t mirrors_dropped_early;   /* by hm_engine_harvest_now(), before a dispatch */
	uint64_t early_harvests;          /* hm_engine_harvest_now() calls */
	uint64_t prefetches;              /* hm_engine_prefetch() calls */
	uint64_t mirrors_dropped_shared;  /* device wrote home in a shared dispatch */
	uint64_t mirrors_evicted;       /* over budget, for a chunk of higher priority */
	uint64_t budget_refusals;       /* wanted chunks left home: budget full */
	uint64_t alloc_failures;        /* device memory for the pool refused */
	uint64_t thrash_backoffs;
	uint64_t chunks_harvested;
	uint64_t marks_scanned;         /* marked slots seen after dispatches */
	uint64_t sink_marks;            /* dispatches that stored somewhere unmapped */
	uint64_t chunks_copied_home;    /* marked mirrored chunks diffed */
	uint64_t bytes_copied_home;     /* bytes the device changed in mirrors, written home */
	uint64_t import_pieces;         /* host-pointer imports over all spaces (now) */
	uint64_t import_bytes;          /* bytes of them (now) */
	uint64_t import_failures;       /* imports refused at a dispatch boundary */
	/* time per phase, nanoseconds, summed over dispatches */
	uint64_t ns_harvest;
	uint64_t ns_upload;             /* selection, generations, copy, publish */
	uint64_t ns_upload_copy;        /* the copy: recorded, submitted, waited for */
	uint64_t ns_upload_select;      /* of ns_upload: picking candidates off the want list,
					   ordering them and their slots */
	uint64_t ns_upload_gens;        /* of ns_upload: arming, noting generations, the check after each copy */
	uint64_t ns_upload_publish;     /* of ns_upload: checks, table repoint, window notes */
	uint64_t ns_window_sync;        /* of ns_upload: making the window agree with the table */
	uint64_t ns_dispatch;           /* the caller's dispatch (submit + wait) */
	uint64_t ns_dispatch_gpu;       /* the same on the device's timestamps (0: none) */
	uint64_t ns_marks;
	uint64_t ns_copy_back;          /* diff + copy home (submit + wait) */
	uint64_t ns_total;
	uint64_t ns_prefetch;           /* hm_engine_prefetch(), all of it */
	uint64_t ns_import;             /* importing home pieces at dispatch boundaries */
	/* mirror window and tiers */
	uint64_t window_bytes;          /* the window buffer, 0 if none */
	uint64_t window_syncs;          /* dispatch boundaries that changed it */
	uint64_t window_copies;         /* mirrors copied into it */
	uint64_t window_fills;          /* chunks refilled with the sentinel */
	uint64_t window_refusals;       /* buffers refused: no window */
	uint64_t window_uncovered_bytes; /* guest bytes past the largest window (now) */
	uint64_t window_binds;          /* sparse binds made (mirrors and sentinel) */
	bool window_sparse;             /* the window is bound sparse */
	uint64_t tier_switches;         /* pipelines switched to tier two */
	uint64_t tier_one_skipped;      /* built speculative at once (cached) */
	/* mirrors a CPU write hit that were copied again in place (thrash
	 * control's choice for read-mostly chunks) instead of dropped */
	uint64_t mirrors_refreshed;
	uint64_t upload_retries;        /* copies again of candidates written during theirs */
	uint64_t dispatches_recorded;   /* hm_engine_record() (also counted in dispatches when complete) */
	uint64_t dispatches_submitted;  /* hm_engine_submit() */
	uint32_t table_nr_home;
	bool table_device_local;
	bool marks_imported;
	uint64_t ns_upload_check;       /* of ns_upload_gens: the checks after the copies */
	/* uploads ahead: the next boundary's harvest and uploads, made while
	 * the caller's dispatch runs (Documentation/engine.rst) */
	uint64_t ahead_passes;          /* dispatches that made them */
	uint64_t ahead_uploads;         /* mirrors they published (also in uploads) */
	uint64_t ahead_discarded;       /* copies written meanwhile, by the CPU or the dispatch */
	uint64_t ns_ahead;              /* their time (the part past the dispatch's end counts in ns_dispatch) */
	uint64_t ns_ahead_wait;         /* waited before them for the late start (not in ns_ahead) */
	uint64_t ns_ahead_harvest;      /* of ns_ahead: their harvests */
	uint64_t ns_ahead_copy;         /* of ns_ahead: their copies (as ns_upload_copy) */
	uint64_t ns_ahead_check;        /* of ns_ahead: their checks after the copies */
	uint64_t ns_ahead_select;       /* of ns_ahead: picking candidates (as ns_upload_select) */
	uint64_t ns_ahead_gens;         /* of ns_ahead: arming, noting, the checks (as ns_upload_gens) */
	uint64_t ns_ahead_publish;      /* of ns_ahead: the clean copies listed ready */
	uint64_t ns_ahead_finish;       /* of ns_ahead: after the dispatch, the ready copies
					   published and the pending chunks resolved */
	uint64_t ns_window_plan;        /* of ns_window_sync: the noted chunks planned, the table
					   repointed */
	uint64_t ns_window_record;      /* of ns_window_sync: the copies and fills recorded */
};
int  hm_engine_stats(struct hm_engine *e, struct hm_engine_stats *ret);

#ifdef __cplusplus
}
#endif
#endif /* HMIRROR_ENGINE_H */
