/* SPDX-License-Identifier: GPL-2.0 */
/*
 * hmirror-bench lookup's parts (tools/bench/lookup.c), shared with its test
 * (selftests/table/bench_programs_test.c), which builds and runs every
 * program of the bench on lavapipe.
 */
#ifndef HMIRROR_BENCH_LOOKUP_H
#define HMIRROR_BENCH_LOOKUP_H
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "hmirror/vkctx.h"

#define GROUPS 128
#define LANES 64
#define SHORT_STEPS 4
#define LONG_STEPS 36
#define CHUNK_SHIFT 16
#define PUSH_WORDS 22
#define GUEST_BASE 0x7e0000000000ull
#define CACHE_STRIDE (64u << 10)
#define PAST_STRIDE (2u << 20)
/* the "one chunk" table: a chunk of 128 MiB holds all the data */
#define HOT_CHUNK_SHIFT 27
#define HOT_NR_HOME 4
/* the page of SENTINEL words (PATH_SENTINEL, PATH_SITE's misses) */
#define SENTINEL_BYTES 4096

/*
 * The paths after PATH_RAW_GUARD are what the variants section compares
 * the helper with (load only):
 *   flat      REFERENCE, not a D969 table: one dependent 8-byte load of the
 *             chunk's delta from a flat array indexed by chunk number, no
 *             hash, no compare, no call, no guard: the least any table read
 *             on the dependent path can cost
 *   spec      REFERENCE, a call site D969 does not describe: the default
 *             helper, and beside it a speculative load at the address the
 *             chunk would have if every chunk of the space lay at one delta
 *             (clamped into the space); the helper's answer confirms it, or
 *             the guarded load at the answer replaces it
 *   selguard  the default helper with the call site's guard as selects (an
 *             unmapped access loads from the table base, which always holds
 *             64 readable bytes, and answers 0) instead of a branch
 *   mmu       REFERENCE, no table: the guest address at one delta (clamped
 *             into the space, as spec's guess) and loaded; through a
 *             sparse buffer whose chunks are bound where the mirrors lie,
 *             the device's MMU is the translation
 *   sentinel  REFERENCE: the speculative load at one delta (an address
 *             outside the space reads a page of SENTINEL words instead),
 *             trusted unless it answers SENTINEL, which a window page that
 *             holds no mirror would (the engine would keep such pages
 *             filled with it); only then the helper and the guarded load
 *   site      D969a, the library's load call site (hm_spirv_emit_load()) in
 *             its speculative tier (hm_spirv_tier_form()): the window is
 *             the chains' data at one delta (push 12-17 as for spec), a
 *             miss (lim 0) the sentinel page of push 20-21
 *   site-compact  the same module in its compact tier (every load calls
 *             the helper)
 */
#define SENTINEL 0xffffffffu
/* PATH_SITE and PATH_SITE_COMPACT: loads of n words (the first is the
 * chain's next offset; the others, offsets too, are kept live by adding
 * their bit 31, always 0), carried in a form's flags above the helper's
 * variant bits */
#define SITE_WIDTH(n)		((uint32_t)(n) << 16)
#define SITE_WIDTH_MASK		0xff0000u
#define SITE_WIDTH_OF(f)	(((f) & SITE_WIDTH_MASK) ? ((f) & SITE_WIDTH_MASK) >> 16 : 1)
enum path { PATH_RAW, PATH_HELPER, PATH_RAW_GUARD, PATH_FLAT, PATH_SPEC, PATH_SELGUARD,
	    PATH_MMU, PATH_SENTINEL, PATH_SITE, PATH_SITE_COMPACT, NR_PATHS };

enum op { OP_LOAD, OP_STORE_MARK, OP_STORE_NOMARK, NR_OPS };


struct bench {
	struct hm_vk *vk;
	uint32_t nr_lanes;
	/* [0] device-local, [1] host import; where the device binds sparse
	 * buffers, [2] a sparse buffer whose chunks are bound to device memory
	 * in scattered order, [3] one bound chunk for chunk to the host
	 * import's memory (where its memory type may be bound): the same
	 * chains, translated by the device's MMU (section "mmu") */
	struct hm_vk_buffer data[4];
	VkDeviceSize sparse_block;              /* the sparse buffer's alignment */
	bool sparse_host;                       /* data[3] bound */
	void *host_data;
	size_t data_bytes;
	struct hm_vk_buffer table[2];           /* [0] device, [1] host import */
	struct hm_vk_buffer hot;                /* device: one chunk for all the data */
	struct hm_vk_buffer flat, flat_hot;     /* PATH_FLAT: a delta per chunk */
	struct hm_vk_buffer sentinel;           /* SENTINEL_BYTES of SENTINEL words */
	void *host_table;
	size_t table_bytes;
	uint32_t nr_home;
	struct hm_vk_buffer marks, out;
	void *marks_mem;
	size_t marks_bytes;
	VkQueryPool qp;
	struct hm_vk_buffer flush, scratch;     /* cache eviction, touch output */
	struct hm_vk_pipeline touch;
	size_t host_data_bytes, host_table_bytes;
	uint32_t flush_mib;
	uint32_t touch_copies;                  /* groups touching each slot after a flush */
	uint64_t touch_addr;                    /* what timed() touches: the table of */
	uint32_t touch_nr;                      /* the measure (16-byte units) */
	bool touch_wide;                        /* touched by 1024+ groups */
	uint32_t spec_skew;                     /* PATH_SPEC guesses this far off */
	bool json;
	unsigned rounds;
	uint32_t variant;                       /* helper form of the main matrix */
};

extern const char *const lk_path_name[NR_PATHS];
extern const char *const lk_op_name[NR_OPS];
/* which ops a path's program has */
bool lk_path_has_op(enum path path, enum op op);

/* ---- programs (SPIR-V words, malloc()ed) ---------------------------------- */
/* The chain of path and op, the helper in the form variant. */
int lk_build(enum path path, enum op op, uint32_t variant, uint32_t **ret_w, size_t *ret_n);
/* A straight-line module of nr_sites accesses (--compile-sites). */
int lk_build_sites(enum path path, uint32_t variant, uint32_t nr_sites, uint32_t salt,
		   uint32_t **ret_w, size_t *ret_n);
/* The table touch after a flush. */
int lk_build_touch(uint32_t **ret_w, size_t *ret_n);

/* ---- the bench's device state --------------------------------------------- */
int  lk_setup(struct bench *b);
/* Table image for the data placement `which`, into both table buffers. */
int  lk_point_tables(struct bench *b, int which);
void lk_teardown(struct bench *b);
int  lk_make_pipe(struct bench *b, enum path path, enum op op, uint32_t variant,
		  struct hm_vk_pipeline *ret);
/* ns a step of one configuration, every lane's end checked (-EIO): table 0
 * device, 1 host import (64 KiB chunks), 2 the one-chunk table. */
int  lk_measure(struct bench *b, const struct hm_vk_pipeline *p, enum path path,
		int data, int table, bool cache, double *ret_step_ns);

/* ---- the variants section ------------------------------------------------- */
/* One configuration of the variants section. */
struct vconf {
	bool cache;
	int table;              /* 0: a new 64 KiB chunk every step, 2: one chunk */
	enum op op;
	bool wide;
	const char *name;       /* in the summary */
};

struct vform {
	const char *name;
	enum path path;
	uint32_t flags;
	bool reference;         /* breaks D969, or is no D969 table at all */
	bool variant;           /* one of hm_lookup_variants[] */
	uint32_t spec_skew;     /* PATH_SPEC: guess this many bytes off (a miss) */
};

#define NR_VCONFS 6
#define NR_EXTRA_FORMS 14
#define NR_COMPILE_FORMS 7
extern const struct vconf lk_vconfs[NR_VCONFS];
/* the forms beside the helper's emission variants */
extern const struct vform lk_extra_forms[NR_EXTRA_FORMS];
/* the forms whose compile time --compile-sites measures */
extern const struct vform lk_compile_forms[NR_COMPILE_FORMS];
int lk_measure_vconf(struct bench *b, const struct vconf *vc, const struct hm_vk_pipeline *p,
		     enum path path, uint32_t skew, double *ret);
/* --compile-sites N,N,...: one line a form and N. */
int lk_run_compile(struct bench *b, const char *list);

#endif /* HMIRROR_BENCH_LOOKUP_H */
