/* SPDX-License-Identifier: GPL-2.0 */
/*
 * The demo's workload, shared by hmirror-demo and hmirror-bench workload:
 * the scene (a bounding-volume hierarchy, rays and hit records in one
 * guest range), its CPU reference walk, and the guest CPU that writes it
 * between and during dispatches.  tools/demo/traverse.comp is the device
 * side of the same walk.
 */
#ifndef HMIRROR_DEMO_SCENE_H
#define HMIRROR_DEMO_SCENE_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#define DEMO_WORLD	(1u << 16)
#define DEMO_LEAF_MAX	4
#define DEMO_END	UINT32_MAX
#define DEMO_MAX_VISITS	65536	/* as traverse.comp: a bound, never reached */
#define DEMO_USER_PUSH	10	/* traverse.comp's words after the table's */

struct demo_node { uint32_t x0, y0, x1, y1, zmin, left, count, escape, scratch, pad[3]; };
struct demo_prim { uint32_t x0, y0, x1, y1, z, id, scratch, pad; };
struct demo_ray { uint32_t x, y; };
struct demo_hit { uint32_t id, z, visits, cpu; };

/* Where each array lives in the range (offsets from base, 64 KiB aligned
 * size) and, once built, pointers into one copy of it. */
struct demo_scene {
	uint8_t *base;
	uint64_t size;
	uint64_t off_nodes, off_prims, off_rays, off_hits;
	struct demo_node *nodes;
	struct demo_prim *prims;
	struct demo_ray *rays;
	struct demo_hit *hits;
	uint32_t nr_nodes, nr_prims, nr_rays;
	uint32_t *leaf_of;		/* prim -> its leaf node (host memory, shared) */
};

/* The layout of a scene of size_mib MiB of hierarchy with nr_rays rays
 * (every dispatch's together); no memory is touched. */
void demo_scene_layout(struct demo_scene *sc, uint64_t size_mib, uint64_t nr_rays);
/* Build it at base (sc->size bytes, zeroed or not).  0 or -ENOMEM. */
int  demo_scene_build(struct demo_scene *sc, uint8_t *base);
/* The same scene at another base (a copy of the bytes); leaf_of shared. */
void demo_scene_clone(struct demo_scene *dst, const struct demo_scene *src, uint8_t *base);
void demo_scene_point(struct demo_scene *sc, uint8_t *base);
void demo_scene_fini(struct demo_scene *sc);	/* frees leaf_of */

struct demo_hit demo_trace(const struct demo_scene *sc, uint32_t ray);

/* The reference walk on many threads, while a dispatch runs. */
struct demo_refpool {
	const struct demo_scene *sc;
	pthread_mutex_t lock;
	pthread_cond_t cond, done_cond;
	uint64_t gen;
	uint32_t first, n;
	struct demo_hit *want;		/* n hits, want[i] for ray first + i */
	struct demo_hit *own_want;	/* max_rays of demo_ref_init, or NULL */
	atomic_uint next;
	unsigned nr_threads, running;
	bool quit;
	double t_begin, t_end;
	pthread_t th[64];
};
int  demo_ref_init(struct demo_refpool *rp, const struct demo_scene *sc, unsigned threads,
		   uint32_t max_rays);
/* sc NULL: the last one; want NULL: the pool's own (rp->own_want) */
void demo_ref_start(struct demo_refpool *rp, const struct demo_scene *sc, uint32_t first,
		    uint32_t n, struct demo_hit *want);
void demo_ref_wait(struct demo_refpool *rp);
void demo_ref_fini(struct demo_refpool *rp);

/* The guest CPU. */
struct demo_rng { uint64_t s; };
uint32_t demo_rnd(struct demo_rng *r);

/* A word the guest changed between dispatches (for whoever must apply
 * exactly the changed bytes to a device copy): offset from base. */
struct demo_guest {
	struct demo_scene *sc;
	pthread_mutex_t lock;
	pthread_cond_t cond;
	int phase;
	bool busy;
	uint32_t dispatch, first_ray, nr_rays, mods;
	uint32_t write_every;		/* rays a scratch pair; 0 = none */
	uint32_t scratch_max;		/* scratch pairs a dispatch, at most */
	bool constant;			/* a writer that never stops (own thread) */
	struct demo_rng rng_mods, rng_scratch;
	/* the scratch words as the guest last wrote them: what must be in
	 * memory at the end of the run (no lost CPU write) */
	uint32_t *want_node_scratch, *want_prim_scratch;
	uint64_t *changed;		/* offsets of words changed between dispatches */
	uint32_t nr_changed, cap_changed;
	uint64_t writes, modified, constant_writes;
	pthread_t th, th_constant;
	atomic_bool constant_run, constant_quit;
};
#define DEMO_WRITE_EVERY	16
#define DEMO_SCRATCH_MAX	4096
/* Zero g, then set mods, write_every, scratch_max, constant before init. */
int  demo_guest_init(struct demo_guest *g, struct demo_scene *sc);
void demo_guest_fini(struct demo_guest *g);
/* Between dispatches: move g->mods primitives (synchronously, this thread). */
void demo_guest_modify(struct demo_guest *g);
/* Write during dispatch number `dispatch` (1-based) of rays [first, +n):
 * start returns at once, wait until the pass is over.  The constant
 * writer (if any) runs from demo_guest_init to demo_guest_fini. */
void demo_guest_during_start(struct demo_guest *g, uint32_t dispatch, uint32_t first,
			     uint32_t n);
void demo_guest_during_wait(struct demo_guest *g);
/* The constant writer's last word is written when this returns. */
void demo_guest_stop_constant(struct demo_guest *g);
uint32_t demo_cpu_word(uint32_t ray, uint32_t dispatch);

/* Compare dispatch `dispatch`'s hits with want; counts added to the two
 * totals; *ret_hits += rays that hit something. */
void demo_check_hits(const struct demo_scene *sc, const struct demo_hit *want, uint32_t first,
		     uint32_t n, uint32_t dispatch, uint64_t *mismatches, uint64_t *lost,
		     uint64_t *ret_hits, const char *who);
/* Every scratch word the guest wrote is there: lost writes. */
uint64_t demo_check_scratch(const struct demo_guest *g);

double demo_now_s(void);

#endif /* HMIRROR_DEMO_SCENE_H */
