/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * Engine internals, shared by the lib/engine sources.  Everything here runs under
 * hm_engine.lock.
 */
#ifndef HMIRROR_ENGINE_INTERNAL_H
#define HMIRROR_ENGINE_INTERNAL_H

#include <pthread.h>
#include <time.h>

#include "hmirror/engine.h"
#include "hmirror/table.h"
#include "hmirror/lookup.h"
#include "test_hooks.h"
#include "../env.h"         /* hm_env_knob() */

#define HM_NO_MIRROR		UINT32_MAX

/* hm_chunk.flags */
#define HM_CH_ARMED		(1u << 0) /* guard armed (until a harvest takes it: HM_CAP_HARVEST_TAKE) */
#define HM_CH_PUBLISHED		(1u << 1) /* the table names the mirror */
#define HM_CH_QUEUED		(1u << 2) /* on the want list */
/* a read-mostly mirror a CPU write made stale: repointed home (rule 2),
 * its slot kept off the LRU lists, refreshed in place by copying again only
 * the watch units whose generation moved since it was published */
#define HM_CH_STALE		(1u << 3)
/* mapped at no guest address or at several (aliases, gmap.c): never
 * mirrored, so that every alias reads and writes the one copy, home */
#define HM_CH_HOME_ONLY		(1u << 4)
/* published, and written by the CPU while a dispatch that reads it runs
 * (ahead.c): copied again beside the dispatch (into its own slot where the
 * dispatch reads the dense window, else into a fresh one), or at its end
 * dropped or made stale as a harvest would; never set outside it */
#define HM_CH_PENDING		(1u << 5)

/* Mirror priority classes (eviction takes the lowest first). */
enum hm_prio { HM_PRIO_NONE = 0, HM_PRIO_HOT = 1, HM_PRIO_READ_MOSTLY = 2, HM_PRIO_DEVICE = 3 };
#define HM_NR_PRIO 4

/* Per-chunk state of a space (24 bytes). */
struct hm_chunk {
	uint32_t mirror;        /* pool slot, HM_NO_MIRROR */
	uint8_t advice;         /* enum hm_advice */
	uint8_t hist;           /* device-write marks of the last 8 dispatches, bit 0 = hist_seq */
	uint8_t drops;          /* guard drops in the current thrash window */
	uint8_t flags;
	uint32_t hist_seq;
	uint32_t window_start;
	uint32_t backoff_until;
	uint8_t raced;          /* dispatches whose every upload try was raced, since a publish */
};

/* A piece of a space's home import (space.c): imported (buf.buf set) at
 * the first dispatch boundary after the table named one of its chunks */
struct hm_import_piece {
	struct hm_vk_buffer buf;
	uint64_t nr_mapped;     /* mappings of its chunks, summed over them */
	bool fresh;             /* imported by this boundary, its entries not named yet */
};

struct hm_espace {
	bool used;
	struct hm_space *s;
	/* the engine's own consumer of the space's writes: an emulator's
	   hm_space_harvest() (or another engine's) never takes its records */
	struct hm_consumer *cons;
	uint64_t size;
	uint64_t nr_chunks;
	/* guest mappings (gmap.c): nmap[i] mappings cover chunk i; where it is
	 * one, gchunk[i] is the guest chunk it is mapped at */
	uint32_t *nmap;
	uint64_t *gchunk;
	void *view;             /* device view (hm_space_device_view) */
	struct hm_import_piece *pieces;
	unsigned nr_pieces;
	uint64_t piece_bytes;
	uint64_t piece_chunks;  /* piece_bytes >> chunk shift */
	struct hm_chunk *ch;
	uint64_t nr_armed;
	/* the space's watch unit (its chunk) may be finer than the engine's
	 * chunk: 1 << wshift units a chunk; ugen[u] is unit u's generation
	 * when its chunk's mirror was last published (UINT64_MAX: unknown) */
	unsigned wshift;
	uint64_t *ugen;
	/* units written into the chunk's pool copy since the dense window
	 * last copied the chunk in (hm_window_fresh(); window.c copies only
	 * these where the window held the rest), a bit a unit; NULL: none
	 * flagged yet (then every copy is whole) */
	uint64_t *wfresh;
};

/* A mapping (gmap.c): guest chunks [gchunk, gchunk + nr) name chunks
 * [idx, idx + nr) of space `space` */
struct hm_emap {
	uint64_t gchunk;
	uint64_t nr;
	uint64_t idx;
	uint32_t space;
};

/* One mirror slot of the pool: a mirror chunk and its twin. */
struct hm_mirror {
	uint32_t space;         /* owner, or UINT32_MAX when free */
	uint32_t idx;           /* chunk index in the space */
	uint32_t prev, next;    /* LRU list of its priority class */
	uint8_t prio;
};

struct hm_pool {
	uint64_t chunk;         /* chunk bytes */
	uint64_t budget;        /* bytes (2 chunks a slot) */
	uint64_t used;          /* bytes of slots in use */
	uint64_t slab_bytes;
	uint32_t slots_per_slab;
	struct hm_vk_buffer *slabs;
	uint32_t nr_slabs, cap_slabs;
	struct hm_mirror *m;    /* nr_slabs * slots_per_slab */
	uint32_t *free_ids;
	uint32_t nr_free;
	uint32_t head[HM_NR_PRIO], tail[HM_NR_PRIO];  /* LRU: head = oldest */
	uint32_t nr_live;
};

struct hm_pipe {
	bool used;
	struct hm_vk_pipeline p;
	uint32_t user_words;
	/* two tiers (tier.c) */
	uint8_t tier;                   /* enum hm_tier of p; HM_TIER_NONE: the module's only form */
	bool pending;                   /* tier two queued or compiling */
	uint32_t gen;                   /* bumped when the slot is freed: a late compile is dropped */
	struct hm_vk_pipeline next;     /* tier two compiled, switched to at the next dispatch */
	uint64_t ns_compile[3];         /* by enum hm_tier */
	int next_err;                   /* tier two's compile failed: stays on tier one */
	bool skipped;                   /* built speculative at once: its form was cached */
};

/* The mirror window (window.c) */
struct hm_window_op {
	uint64_t off;                   /* window offset of the chunk */
	uint32_t mirror;                /* pool slot copied in, HM_NO_MIRROR: sentinel fill */
	bool part;                      /* copy only the units flagged in wfresh */
	uint32_t space;                 /* the chunk's space and index (copies) */
	uint64_t idx;
};

struct hm_window {
	bool enabled;                   /* mirrors on and HM_ENGINE_NO_WINDOW not set */
	bool rebuild;                   /* spaces changed: a new buffer, every mirror replanned */
	struct hm_vk_buffer buf;        /* [guard][guest_lo .. hi][guard]; none: loads use the guard */
	struct hm_vk_buffer old;        /* the buffer a rebuild replaces, freed after the sync */
	struct hm_vk_buffer guard;      /* sentinel only: the window of rule 5 and of no window */
	uint64_t guest_lo;
	uint64_t span_lo, span_hi;      /* the mapped span the buffer was built for */
	uint64_t maps_gen;              /* e->maps_gen when the span was last looked at */
	uint64_t table_gen;             /* e->table_gen the window was planned for */
	uint64_t covered;               /* guest bytes from guest_lo in the window */
	uint64_t limit;                 /* largest window, bytes */
	uint64_t *dirty;                /* guest chunks whose table entry changed since the last sync */
	size_t nr_dirty, cap_dirty;
	struct hm_window_op *ops;
	size_t nr_ops, cap_ops;
	VkBufferCopy *regs;             /* record_ops(): one slab's copy regions */
	size_t cap_regs;
	struct hm_vk_buffer descs;      /* (mirror, window) addresses for gather.comp */
	/* held[k]: the dense window's chunk k (from guest_lo) holds its
	 * published mirror's pool bytes but for the units flagged in the
	 * space's wfresh; cleared by a sentinel fill, all by a rebuild */
	uint8_t *held;
	size_t nr_held;
	struct hm_vk_cmd cmd;
	/* sparse form (window.c): mirrors and a sentinel region bound */
	bool sparse;
	VkDeviceSize align;             /* the sparse buffer's block */
	uint32_t type_bits;             /* memory types it may bind */
	struct hm_vk_buffer sentinel;   /* sentinel_bytes of sentinel, bound aliased */
	VkSparseMemoryBind *binds;
	size_t nr_binds, cap_binds;
};

/* The compile thread of the second tier (tier.c) */
struct hm_tier_job;
struct hm_tiers {
	pthread_t thread;
	bool started, stop;
	pthread_mutex_t lock;           /* protects the queue, stop and done */
	pthread_cond_t wake, done;
	struct hm_tier_job *head, **tail;
	VkPipelineCache cache;          /* tier-two pipelines compiled so far */
	uint64_t *hashes;               /* of the modules in the cache */
	size_t nr_hashes, cap_hashes;
};

/* The one dispatch of an engine recorded or submitted and not yet
 * completed (hm_engine_record(), hm_engine_submit()).  While it is in
 * flight every call that would change the table, the mirrors or the
 * window returns -EBUSY. */
enum hm_work_mode { HM_WORK_NONE = 0, HM_WORK_RECORDED, HM_WORK_SUBMITTED };
struct hm_engine_work {
	struct hm_engine *e;
	uint8_t mode;                   /* enum hm_work_mode */
	bool shared;
	bool free_pipeline;             /* hm_engine_pipeline_free() of it came meanwhile */
	uint32_t pipeline;
	size_t nr_descs;                /* copy-back entries recorded */
	VkSemaphore sem;                /* signalled at completion (submitted) */
	uint64_t value;
	uint64_t t0, ns_host;
};

struct hm_engine {
	struct hm_vk *vk;
	struct hm_engine_params p;
	struct hm_engine_test_hooks test;       /* test_hooks.h; zero but in tests */
	pthread_mutex_t lock;
	unsigned shift;
	uint64_t chunk;
	uint32_t seq;           /* dispatch sequence number */
	bool mirrors;           /* mirroring enabled */
	bool need_republish;    /* a shared dispatch repointed mirrors home */

	struct hm_espace spaces[HM_ENGINE_MAX_SPACES];
	uint32_t spaces_end;    /* highest used space id + 1 */
	uint64_t total_chunks;  /* chunks of every space */
	/* the guest address space (gmap.c): mappings sorted by guest chunk,
	 * none overlapping; mapped_chunks of them, the table's entries */
	struct hm_emap *maps;
	size_t nr_maps, cap_maps;
	uint64_t maps_gen;              /* bumped by every new mapping (gmap.c) */
	uint64_t table_gen;             /* bumped by every table rebuild (table.c) */
	uint64_t mapped_chunks;
	/* pieces with a mapped chunk and no import: hm_engine_import_named()
	 * (table.c) imports them at the next dispatch boundary */
	uint64_t nr_import_pending;

	/* device table and marks */
	struct hm_table *table;
	struct hm_vk_buffer table_buf;
	bool table_device_local;
	struct hm_vk_buffer marks_buf;
	void *marks_mem;        /* mmap()ed when imported */
	size_t marks_map_bytes;
	bool marks_imported;

	struct hm_pool pool;

	/* want list: (space << 40 | idx) */
	uint64_t *queue;
	size_t nr_queue, cap_queue;

	/* scratch */
	uint64_t *harvest_buf;
	size_t harvest_cap;
	uint64_t *cand;         /* candidates of this dispatch's upload */
	uint32_t *cand_slot;
	uint64_t *idxs;
	size_t *uoff;           /* candidate i's units start at ug0/ug1[uoff[i]] */
	size_t cap_cand;
	uint64_t *ug0, *ug1;    /* generations of every unit of the candidates */
	size_t cap_ug0, cap_ug1;
	uint64_t *back;         /* marked mirrored chunks of this dispatch */
	size_t nr_back, cap_back;
	struct hm_vk_buffer descs, counts;  /* copy-back descriptors and byte counts */
	/* a recorded copy-back: the marked ones of descs (compact.comp) and
	 * the indirect dispatch of diff.comp over them */
	struct hm_vk_buffer descs_out, indirect;
	struct hm_vk_pipeline compact;
	size_t cap_descs;

	struct hm_vk_pipeline diff;
	struct hm_vk_pipeline twin;     /* HM_TWIN_SHADER */
	struct hm_vk_buffer twin_addrs; /* mirror addresses of an upload's candidates */
	struct hm_vk_pipeline gather;   /* HM_TWIN_GATHER */
	struct hm_vk_buffer gather_descs; /* (home, mirror) of an upload's candidates */
	uint64_t *span_gen;             /* generations asked over spans with gaps */
	size_t cap_span_gen;
	struct hm_gen_span *gen_spans;  /* one generations call's spans */
	size_t cap_gen_spans;
	VkBufferCopy *ahead_regs;       /* HMIRROR_AHEAD_REGIONS: a pass's in-place copies */
	size_t cap_ahead_regs;
	/* a check after a copy, span by span or over the whole space: what a
	 * span's call and a unit of a whole scan last cost (running averages,
	 * 0 until measured; upload.c) */
	double check_span_ns, check_unit_ns;
	VkQueryPool timestamps;         /* 2 queries around the caller's dispatch */
	/* submitters created once (a command buffer + fence each, reset for
	 * every submission): the caller's dispatch, uploads, copy-back */
	struct hm_vk_cmd cmd_dispatch, cmd_upload, cmd_back;
	struct hm_pipe pipes[HM_ENGINE_MAX_PIPELINES];
	struct hm_window win;
	struct hm_tiers tiers;

	struct hm_engine_work work;
	VkEvent work_done;              /* set by a recorded work's last command */
	VkSemaphore timeline;           /* the engine's, for hm_engine_submit() */
	uint64_t timeline_value;

	/* uploads ahead (ahead.c): while the caller's dispatch runs
	 * (in_walk), the harvest leaves published chunks it finds written
	 * on pend (HM_CH_PENDING; pend_lost: one could not be listed), and
	 * the upload's clean copies wait on ready, with their units'
	 * generations at ready_gen[uoff..], for the dispatch's end */
	bool in_walk;
	bool pend_lost;
	uint64_t walk_ns;               /* the last dispatch's device time (timestamps), 0 */
	uint64_t ahead_pass_ns;         /* the last pass of uploads beside one */
	uint64_t walk_est_ns, pass_est_ns;      /* what the late start takes of them (ahead.c) */
	uint64_t *pend;
	size_t nr_pend, cap_pend;
	struct hm_ready {
		uint64_t ref;
		uint32_t slot;
		size_t uoff;
	} *ready;
	size_t nr_ready, cap_ready;
	uint64_t *ready_gen;
	size_t nr_ready_gen, cap_ready_gen;
	/* the ready copies made in place (a pending chunk's own slot, which
	 * the dispatch never reads: it reads the dense window): the units
	 * they copied, (mirror, twin) device addresses a HM_TWIN_CATCH_PIECE,
	 * for gather.comp to bring the twins level after the copy-back */
	struct hm_vk_buffer twin_catch;
	size_t nr_twin_catch;

	struct hm_engine_stats st;
};

static inline uint64_t hm_now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + ts.tv_nsec;
}

/* Under e->lock, outside a dispatch: 0 if the engine can act now (the
 * calls that run a dispatch's steps without one), -EBUSY with a work in
 * flight, -ENODEV once the device is lost. */
static inline int hm_engine_idle(const struct hm_engine *e)
{
	return e->work.mode ? -EBUSY : e->vk->lost ? -ENODEV : 0;
}

/* a count returned where an int says it (>= 0) */
static inline int hm_count_ret(uint64_t n)
{
	return n > INT32_MAX ? INT32_MAX : (int)n;
}

static inline uint64_t hm_ref(uint32_t space, uint64_t idx)
{
	return ((uint64_t)space << 40) | idx;
}
static inline uint32_t hm_ref_space(uint64_t r) { return r >> 40; }
static inline uint64_t hm_ref_idx(uint64_t r) { return r & ((1ull << 40) - 1); }

/* Internal to the library: not exported from libhmirror.so. */
#pragma GCC visibility push(hidden)

/* space.c: a space's home pieces, imported lazily (the invariant:
 * a piece is imported before the first table entry naming it reaches the
 * device) */
int  hm_espace_import(struct hm_engine *e, struct hm_espace *sp);
void hm_espace_release(struct hm_engine *e, struct hm_espace *sp);
void hm_espace_note_mapped(struct hm_engine *e, uint32_t id, uint64_t idx, uint64_t n,
			   int delta);
int  hm_espace_import_piece(struct hm_engine *e, struct hm_espace *sp, uint64_t i);
bool hm_espace_imported(const struct hm_engine *e, const struct hm_espace *sp, uint64_t idx);
uint64_t hm_espace_home_addr(const struct hm_engine *e, const struct hm_espace *sp, uint64_t idx);
int  hm_espace_home_loc(const struct hm_engine *e, const struct hm_espace *sp, uint64_t idx,
			VkBuffer *ret_buf, uint64_t *ret_off);
int  hm_grow(void **arr, size_t *cap, size_t need, size_t elem);
void hm_sort_runs(uint64_t *a, size_t n, size_t stride);

/* a cost's running average, the newest figure weighing a quarter; the
 * first figure (avg 0) is taken as it is */
static inline double hm_cost_average(double avg, double x)
{
	return avg ? (3 * avg + x) / 4 : x;
}

/* gmap.c: the guest address space */
const struct hm_emap *hm_engine_map_find(const struct hm_engine *e, uint64_t gchunk);
/* the space and chunk a guest chunk is mapped to, NULL if none */
struct hm_espace *hm_engine_space_of_chunk(struct hm_engine *e, uint64_t gchunk,
					   uint32_t *ret_id, uint64_t *ret_idx);
int  hm_engine_map_space(struct hm_engine *e, uint32_t id, uint64_t guest_addr);
int  hm_engine_unmap_space(struct hm_engine *e, uint32_t id);
void hm_gmap_finish(struct hm_engine *e);

/* The guest chunk of a chunk mapped exactly once (every mirrored chunk). */
static inline uint64_t hm_espace_gchunk(const struct hm_espace *sp, uint64_t idx)
{
	return sp->gchunk[idx];
}

/* table.c */
int  hm_engine_table_rebuild(struct hm_engine *e, uint64_t nr_chunks);
/* room for nr_chunks entries (a rebuild where there is none) */
int  hm_engine_table_reserve(struct hm_engine *e, uint64_t nr_chunks);
int64_t hm_engine_chunk_delta(const struct hm_engine *e, const struct hm_espace *sp,
			      uint64_t idx, uint64_t gchunk);
/* at a dispatch boundary, first: the pieces the table names imported */
int  hm_engine_import_named(struct hm_engine *e);
void hm_engine_table_free(struct hm_engine *e);

/* mirror.c */
int  hm_pool_init(struct hm_engine *e, uint64_t budget);
void hm_pool_finish(struct hm_engine *e);
int  hm_pool_alloc(struct hm_engine *e, uint32_t *ret_id);
void hm_pool_free_slot(struct hm_engine *e, uint32_t id);
uint64_t hm_pool_mirror_addr(const struct hm_engine *e, uint32_t id);
uint64_t hm_pool_twin_addr(const struct hm_engine *e, uint32_t id);
uint64_t hm_pool_twin_offset(const struct hm_engine *e);
/* the slab of a slot and the mirror's offset in it (twin: + hm_pool_twin_offset) */
VkBuffer hm_pool_slab(const struct hm_engine *e, uint32_t id, uint64_t *ret_off);
void hm_pool_lru_add(struct hm_engine *e, uint32_t id, uint32_t space, uint64_t idx, uint8_t prio);
void hm_pool_lru_del(struct hm_engine *e, uint32_t id);
void hm_pool_lru_touch(struct hm_engine *e, uint32_t id);
uint32_t hm_pool_victim(struct hm_engine *e, uint8_t below_prio);
/* a free slot for a chunk of class prio, or one evicted from a lower
 * class (*ret_evicted: its chunk's hm_ref(), else UINT64_MAX) */
int  hm_pool_take_slot(struct hm_engine *e, uint8_t prio, uint32_t *ret_id,
		       uint64_t *ret_evicted);
/* a mirror's life: wanted, published, stale, dropped */
uint8_t hm_chunk_prio(const struct hm_engine *e, const struct hm_chunk *c);
void hm_engine_queue(struct hm_engine *e, uint32_t space, uint64_t idx);
int  hm_engine_repoint(struct hm_engine *e, uint64_t chunk, int64_t delta);
/* the window's list of changed table entries (read by window.c) */
void hm_window_note(struct hm_engine *e, uint32_t space, uint64_t idx);
void hm_window_fresh(struct hm_engine *e, struct hm_espace *sp, uint64_t idx, uint64_t u);
void hm_engine_drop_mirror(struct hm_engine *e, uint32_t space, uint64_t idx);
void hm_engine_stale_mirror(struct hm_engine *e, uint32_t space, uint64_t idx);
int  hm_engine_republish(struct hm_engine *e);
int  hm_engine_unpublish_all(struct hm_engine *e);

/* harvest.c */
int  hm_engine_harvest(struct hm_engine *e);
/* a CPU write found in chunk idx's published mirror: dropped, or made
 * stale to be refreshed, and wanted again */
void hm_engine_guard_hit(struct hm_engine *e, uint32_t space, uint64_t idx);

/* upload.c */
int  hm_engine_upload(struct hm_engine *e);
/* one upload try beside the caller's dispatch (e->in_walk): its clean
 * copies go on e->ready, published by hm_engine_ahead_finish() */
int  hm_engine_upload_ahead(struct hm_engine *e);
/* name slot (holding chunk idx as of generations gens) in the table */
int  hm_engine_publish(struct hm_engine *e, uint32_t space, uint64_t idx, uint32_t slot,
		       const uint64_t *gens);

/* ahead.c: uploads beside the caller's dispatch */
bool hm_engine_ahead_enabled(const struct hm_engine *e, bool shared);
/* a pending chunk's candidate i copied in its own slot */
static inline bool hm_cand_in_place(const struct hm_engine *e, size_t i)
{
	const struct hm_chunk *c = &e->spaces[hm_ref_space(e->cand[i])].ch[hm_ref_idx(e->cand[i])];

	return (c->flags & HM_CH_PENDING) && e->cand_slot[i] == c->mirror;
}
#define HM_TWIN_CATCH_PIECE 4096u

/*
 * The watch units of candidate i to copy from home: all of a new mirror's;
 * of a stale one's, those whose generation moved since it was published
 * (the others still hold, in mirror and twin, what home holds: no CPU
 * write reached them, or their generation would have moved).  A pending
 * one's (ahead.c) likewise; into a fresh slot its others are copied from
 * its published mirror, which holds what home holds but for what the
 * running dispatch stores (a chunk it stores into is never published
 * from this copy); copied in place they stay where they are.  twin.c's
 * gather and the in-place copies' twin list (upload.c) both ask this.
 */
static inline bool hm_unit_wanted(const struct hm_engine *e, size_t i,
				  const struct hm_espace *sp, uint64_t idx, uint64_t u)
{
	uint64_t unit = (idx << sp->wshift) + u;

	if (!(sp->ch[idx].flags & (HM_CH_STALE | HM_CH_PENDING)))
		return true;
	return e->ug0[e->uoff[i] + u] != sp->ugen[unit];
}

void hm_engine_ahead(struct hm_engine *e, uint64_t t_submit);
void hm_engine_ahead_finish(struct hm_engine *e, bool ok);
void hm_engine_ahead_free(struct hm_engine *e);

/* twin.c: fills the candidates' mirrors and twins from home (e->cand,
 * e->cand_slot [0, n)), *ret_bytes the bytes copied */
uint32_t hm_twin_mode(const struct hm_vk *vk, uint32_t mode);   /* HM_TWIN_AUTO resolved */
int  hm_engine_twin_init(struct hm_engine *e);
unsigned hm_gather_record(struct hm_engine *e, VkCommandBuffer cb, uint64_t descs,
			  uint64_t twin_off, uint64_t piece, uint64_t nd, uint32_t rows);
int  hm_engine_copy_candidates(struct hm_engine *e, size_t n, uint64_t *ret_bytes);

/* copyback.c */
int  hm_engine_scan_marks(struct hm_engine *e, bool shared);
int  hm_engine_copy_back(struct hm_engine *e);
int  hm_engine_record_copy_back(struct hm_engine *e, VkCommandBuffer cb);
uint64_t hm_engine_copied_bytes(struct hm_engine *e, size_t n);
int  hm_engine_diff_init(struct hm_engine *e);

/* window.c: the mirror window; mirror.c and upload.c note every chunk
 * whose table entry they change (hm_window_note(), in mirror.c),
 * engine.c calls the rest around the dispatch */
int  hm_window_init(struct hm_engine *e);
void hm_window_finish(struct hm_engine *e);
/* the mapped span [lo, hi) may have grown: a new window if it did */
void hm_window_maps_changed(struct hm_engine *e);
int  hm_window_sync(struct hm_engine *e, bool shared);
void hm_window_push(const struct hm_engine *e, bool shared, uint32_t *words);
int  hm_window_after_dispatch(struct hm_engine *e, bool shared);
bool hm_window_holds(const struct hm_engine *e, const struct hm_espace *sp, uint64_t idx);

/* tier.c: the two tiers and their compile thread */
int  hm_tiers_init(struct hm_engine *e);
void hm_tiers_finish(struct hm_engine *e);
void hm_tier_switch(struct hm_engine *e, struct hm_pipe *pp);
void hm_tier_forget(struct hm_engine *e, struct hm_pipe *pp);

#pragma GCC visibility pop

#endif /* HMIRROR_ENGINE_INTERNAL_H */
