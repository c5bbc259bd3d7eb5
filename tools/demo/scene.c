// SPDX-License-Identifier: GPL-2.0
/*
 * The demo's workload (scene.h): hierarchy, reference walk, guest CPU.
 *
 * The hierarchy: primitives (boxes at a depth z) in Morton order, split at
 * the middle down to leaves of DEMO_LEAF_MAX; nodes in depth-first order
 * with an escape link each, so that the walk needs no stack.  The same
 * seed gives the same scene on every machine.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "scene.h"

_Static_assert(sizeof(struct demo_node) == 48, "node");
_Static_assert(sizeof(struct demo_prim) == 32, "prim");
_Static_assert(sizeof(struct demo_hit) == 16, "hit");

double demo_now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

uint32_t demo_rnd(struct demo_rng *r)
{
	/* xorshift64* */
	r->s ^= r->s >> 12;
	r->s ^= r->s << 25;
	r->s ^= r->s >> 27;
	return (uint32_t)((r->s * 2685821657736338717ull) >> 32);
}

/* ---- the hierarchy -------------------------------------------------------- */

struct builder {
	struct demo_scene *sc;
	const struct demo_prim *src;	/* primitives before reordering */
	const uint32_t *order;		/* their indices in Morton order */
	uint32_t next_node;
};

static uint64_t spread(uint32_t v)	/* 16 bits -> every other of 32 */
{
	uint64_t x = v & 0xffff;

	x = (x | (x << 8)) & 0x00ff00ff;
	x = (x | (x << 4)) & 0x0f0f0f0f;
	x = (x | (x << 2)) & 0x33333333;
	x = (x | (x << 1)) & 0x55555555;
	return x;
}

static int morton_order(const struct demo_prim *src, uint32_t *order, uint32_t n)
{
	uint64_t *key = malloc((size_t)n * sizeof(*key)), *tmp = malloc((size_t)n * sizeof(*tmp));

	if (!key || !tmp) {
		free(key);
		free(tmp);
		return -ENOMEM;
	}
	for (uint32_t i = 0; i < n; i++) {
		uint32_t cx = (src[i].x0 + src[i].x1) / 2, cy = (src[i].y0 + src[i].y1) / 2;

		key[i] = ((spread(cx) | (spread(cy) << 1)) << 32) | i;
	}
	/* LSD radix sort on the 32 key bits, 8 at a time */
	for (int shift = 32; shift < 64; shift += 8) {
		size_t cnt[257] = { 0 };

		for (uint32_t i = 0; i < n; i++)
			cnt[((key[i] >> shift) & 0xff) + 1]++;
		for (int k = 0; k < 256; k++)
			cnt[k + 1] += cnt[k];
		for (uint32_t i = 0; i < n; i++)
			tmp[cnt[(key[i] >> shift) & 0xff]++] = key[i];
		uint64_t *t = key;

		key = tmp;
		tmp = t;
	}
	for (uint32_t i = 0; i < n; i++)
		order[i] = (uint32_t)key[i];
	free(key);
	free(tmp);
	return 0;
}

static void build(struct builder *b, uint32_t ni, uint32_t lo, uint32_t hi, uint32_t escape)
{
	struct demo_scene *sc = b->sc;
	struct demo_node n = { .x0 = UINT32_MAX, .y0 = UINT32_MAX, .zmin = UINT32_MAX,
				 .escape = escape };

	for (uint32_t i = lo; i < hi; i++) {
		const struct demo_prim *p = &b->src[b->order[i]];

		n.x0 = p->x0 < n.x0 ? p->x0 : n.x0;
		n.y0 = p->y0 < n.y0 ? p->y0 : n.y0;
		n.x1 = p->x1 > n.x1 ? p->x1 : n.x1;
		n.y1 = p->y1 > n.y1 ? p->y1 : n.y1;
		n.zmin = p->z < n.zmin ? p->z : n.zmin;
	}
	if (hi - lo <= DEMO_LEAF_MAX) {
		n.left = lo;
		n.count = hi - lo;
		for (uint32_t i = lo; i < hi; i++)
			sc->leaf_of[i] = ni;
		sc->nodes[ni] = n;
		return;
	}
	uint32_t mid = lo + (hi - lo) / 2;

	n.left = b->next_node;
	b->next_node += 2;
	sc->nodes[ni] = n;
	build(b, n.left, lo, mid, n.left + 1);
	build(b, n.left + 1, mid, hi, escape);
}

static uint32_t count_nodes(uint32_t n)
{
	return n <= DEMO_LEAF_MAX ? 1 : 1 + count_nodes(n / 2) + count_nodes(n - n / 2);
}

void demo_scene_layout(struct demo_scene *sc, uint64_t size_mib, uint64_t nr_rays)
{
	uint64_t bytes = size_mib << 20;

	memset(sc, 0, sizeof(*sc));
	sc->nr_prims = (uint32_t)(bytes / 2 / sizeof(struct demo_prim));
	sc->nr_nodes = count_nodes(sc->nr_prims);
	sc->nr_rays = (uint32_t)nr_rays;
	sc->off_nodes = 0;
	sc->off_prims = sc->off_nodes + (uint64_t)sc->nr_nodes * sizeof(struct demo_node);
	sc->off_rays = sc->off_prims + (uint64_t)sc->nr_prims * sizeof(struct demo_prim);
	sc->off_hits = sc->off_rays + (uint64_t)sc->nr_rays * sizeof(struct demo_ray);
	sc->size = sc->off_hits + (uint64_t)sc->nr_rays * sizeof(struct demo_hit);
	sc->size = (sc->size + (1u << 16) - 1) & ~(uint64_t)((1u << 16) - 1);
}

void demo_scene_point(struct demo_scene *sc, uint8_t *base)
{
	sc->base = base;
	sc->nodes = (struct demo_node *)(base + sc->off_nodes);
	sc->prims = (struct demo_prim *)(base + sc->off_prims);
	sc->rays = (struct demo_ray *)(base + sc->off_rays);
	sc->hits = (struct demo_hit *)(base + sc->off_hits);
}

int demo_scene_build(struct demo_scene *sc, uint8_t *base)
{
	struct demo_rng rng = { 0x9e3779b97f4a7c15ull };
	uint32_t nprims = sc->nr_prims;
	struct demo_prim *src = malloc((size_t)nprims * sizeof(*src));
	uint32_t *order = malloc((size_t)nprims * sizeof(*order));
	struct builder b = { .sc = sc, .src = src, .order = order, .next_node = 1 };
	int err = -ENOMEM;

	demo_scene_point(sc, base);
	sc->leaf_of = malloc((size_t)nprims * sizeof(*sc->leaf_of));
	if (!src || !order || !sc->leaf_of)
		goto out;
	for (uint32_t i = 0; i < nprims; i++) {
		uint32_t w = 16 + demo_rnd(&rng) % 240, h = 16 + demo_rnd(&rng) % 240;
		uint32_t x = demo_rnd(&rng) % (DEMO_WORLD - w), y = demo_rnd(&rng) % (DEMO_WORLD - h);

		src[i] = (struct demo_prim){ x, y, x + w, y + h, demo_rnd(&rng) >> 4, 0, 0, 0 };
	}
	err = morton_order(src, order, nprims);
	if (err)
		goto out;
	build(&b, 0, 0, nprims, DEMO_END);
	sc->nr_nodes = b.next_node;
	for (uint32_t i = 0; i < nprims; i++) {
		sc->prims[i] = src[order[i]];
		sc->prims[i].id = i;
	}
	for (uint32_t i = 0; i < sc->nr_rays; i++)
		sc->rays[i] = (struct demo_ray){ demo_rnd(&rng) % DEMO_WORLD,
						 demo_rnd(&rng) % DEMO_WORLD };
	memset(sc->hits, 0, (size_t)sc->nr_rays * sizeof(struct demo_hit));
	err = 0;
out:
	if (err) {
		free(sc->leaf_of);
		sc->leaf_of = NULL;
	}
	free(src);
	free(order);
	return err;
}

void demo_scene_clone(struct demo_scene *dst, const struct demo_scene *src, uint8_t *base)
{
	*dst = *src;
	memcpy(base, src->base, src->size);
	demo_scene_point(dst, base);
}

void demo_scene_fini(struct demo_scene *sc)
{
	free(sc->leaf_of);
	sc->leaf_of = NULL;
}

/* ---- the CPU reference: the same walk as traverse.comp ------------------- */

struct demo_hit demo_trace(const struct demo_scene *sc, uint32_t ray)
{
	const struct demo_ray r = sc->rays[ray];
	uint32_t best_z = UINT32_MAX, best_id = UINT32_MAX, visits = 0, err = 0;
	uint32_t ni = 0;

	while (ni != DEMO_END) {
		const struct demo_node *n = &sc->nodes[ni];

		if (++visits > DEMO_MAX_VISITS) {
			err = 1;
			break;
		}
		if (r.x < n->x0 || r.x >= n->x1 || r.y < n->y0 || r.y >= n->y1 ||
		    n->zmin > best_z) {
			ni = n->escape;
			continue;
		}
		if (n->count == 0) {
			ni = n->left;
			continue;
		}
		for (uint32_t k = 0; k < n->count; k++) {
			const struct demo_prim *p = &sc->prims[n->left + k];

			if (r.x < p->x0 || r.x >= p->x1 || r.y < p->y0 || r.y >= p->y1)
				continue;
			if (p->z < best_z || (p->z == best_z && p->id < best_id)) {
				best_z = p->z;
				best_id = p->id;
			}
		}
		ni = n->escape;
	}
	return (struct demo_hit){ best_id, best_z, visits | (err << 31), 0 };
}

/*
 * The walk of 1 Mi rays over a hierarchy of several hundred MiB is cache-
 * miss bound (about 18 us a ray on one core at 1 GiB), so it runs on many
 * threads, and while the dispatch runs: the words the walk reads do not
 * change during a dispatch (the guest then writes only words it never
 * reads), so the reference of dispatch k is the scene the device sees.
 */
#define REF_BLOCK 512

static void *ref_main(void *arg)
{
	struct demo_refpool *rp = arg;
	uint64_t seen = 0;

	pthread_mutex_lock(&rp->lock);
	for (;;) {
		while (!rp->quit && rp->gen == seen)
			pthread_cond_wait(&rp->cond, &rp->lock);
		if (rp->quit)
			break;
		seen = rp->gen;
		pthread_mutex_unlock(&rp->lock);
		for (;;) {
			uint32_t b = atomic_fetch_add(&rp->next, REF_BLOCK);

			if (b >= rp->n)
				break;
			uint32_t e = b + REF_BLOCK < rp->n ? b + REF_BLOCK : rp->n;

			for (uint32_t i = b; i < e; i++)
				rp->want[i] = demo_trace(rp->sc, rp->first + i);
		}
		pthread_mutex_lock(&rp->lock);
		if (--rp->running == 0) {
			rp->t_end = demo_now_s();
			pthread_cond_broadcast(&rp->done_cond);
		}
	}
	pthread_mutex_unlock(&rp->lock);
	return NULL;
}

int demo_ref_init(struct demo_refpool *rp, const struct demo_scene *sc, unsigned threads,
		  uint32_t max_rays)
{
	memset(rp, 0, sizeof(*rp));
	rp->sc = sc;
	if (max_rays) {
		rp->own_want = malloc((size_t)max_rays * sizeof(*rp->own_want));
		if (!rp->own_want)
			return -ENOMEM;
		rp->want = rp->own_want;
	}
	pthread_mutex_init(&rp->lock, NULL);
	pthread_cond_init(&rp->cond, NULL);
	pthread_cond_init(&rp->done_cond, NULL);
	if (threads > 64)
		threads = 64;
	for (rp->nr_threads = 0; rp->nr_threads < (threads ? threads : 1); rp->nr_threads++)
		if (pthread_create(&rp->th[rp->nr_threads], NULL, ref_main, rp))
			break;
	return rp->nr_threads ? 0 : -EAGAIN;
}

void demo_ref_start(struct demo_refpool *rp, const struct demo_scene *sc, uint32_t first,
		    uint32_t n, struct demo_hit *want)
{
	pthread_mutex_lock(&rp->lock);
	if (sc)
		rp->sc = sc;
	rp->want = want ? want : rp->own_want;
	rp->first = first;
	rp->n = n;
	atomic_store(&rp->next, 0);
	rp->running = rp->nr_threads;
	rp->t_begin = demo_now_s();
	rp->gen++;
	pthread_cond_broadcast(&rp->cond);
	pthread_mutex_unlock(&rp->lock);
}

void demo_ref_wait(struct demo_refpool *rp)
{
	pthread_mutex_lock(&rp->lock);
	while (rp->running)
		pthread_cond_wait(&rp->done_cond, &rp->lock);
	pthread_mutex_unlock(&rp->lock);
}

void demo_ref_fini(struct demo_refpool *rp)
{
	pthread_mutex_lock(&rp->lock);
	rp->quit = true;
	pthread_cond_broadcast(&rp->cond);
	pthread_mutex_unlock(&rp->lock);
	for (unsigned i = 0; i < rp->nr_threads; i++)
		pthread_join(rp->th[i], NULL);
	free(rp->own_want);
	rp->own_want = rp->want = NULL;
}

/* ---- the guest CPU -------------------------------------------------------- */

enum { PH_IDLE, PH_DURING, PH_QUIT };

uint32_t demo_cpu_word(uint32_t ray, uint32_t dispatch)
{
	return (ray * 2654435761u) ^ (dispatch << 24) ^ 0x5eedu;
}

static void note_change(struct demo_guest *g, const void *word)
{
	if (g->nr_changed == g->cap_changed) {
		uint32_t cap = g->cap_changed ? 2 * g->cap_changed : 1024;
		uint64_t *c = realloc(g->changed, cap * sizeof(*c));

		if (!c)
			abort();	/* a bench: no way to go on honestly */
		g->changed = c;
		g->cap_changed = cap;
	}
	g->changed[g->nr_changed++] = (uint64_t)((const uint8_t *)word - g->sc->base);
}

/*
 * A primitive moves away (z grows) and its leaf's bound is tightened.
 * Bounds only rise, so every ancestor's zmin stays a bound.  The words
 * changed are noted in g->changed (cleared here first).
 */
void demo_guest_modify(struct demo_guest *g)
{
	struct demo_scene *sc = g->sc;

	g->nr_changed = 0;
	for (uint32_t i = 0; i < g->mods; i++) {
		uint32_t p = demo_rnd(&g->rng_mods) % sc->nr_prims;
		struct demo_node *leaf = &sc->nodes[sc->leaf_of[p]];
		uint32_t zmin = UINT32_MAX;

		if (sc->prims[p].z < UINT32_MAX - 4096) {
			sc->prims[p].z += 1 + demo_rnd(&g->rng_mods) % 4096;
			note_change(g, &sc->prims[p].z);
		}
		for (uint32_t k = 0; k < leaf->count; k++) {
			uint32_t z = sc->prims[leaf->left + k].z;

			zmin = z < zmin ? z : zmin;
		}
		leaf->zmin = zmin;
		note_change(g, &leaf->zmin);
		g->modified++;
	}
}

/* One pass during a dispatch: the hit records' cpu words, interleaved with
 * scratch words of random nodes and primitives (words the walk never
 * reads, in the chunks it reads). */
static void write_during(struct demo_guest *g)
{
	struct demo_scene *sc = g->sc;
	uint32_t pairs = 0;

	for (uint32_t i = 0; i < g->nr_rays; i++) {
		uint32_t ray = g->first_ray + i;

		__atomic_store_n(&sc->hits[ray].cpu, demo_cpu_word(ray, g->dispatch),
				 __ATOMIC_RELAXED);
		if (g->write_every && i % g->write_every == 0 && pairs < g->scratch_max) {
			uint32_t a = demo_rnd(&g->rng_scratch) % sc->nr_nodes;
			uint32_t b = demo_rnd(&g->rng_scratch) % sc->nr_prims;

			__atomic_store_n(&sc->nodes[a].scratch, g->dispatch, __ATOMIC_RELAXED);
			__atomic_store_n(&sc->prims[b].scratch, g->dispatch, __ATOMIC_RELAXED);
			g->want_node_scratch[a] = g->dispatch;
			g->want_prim_scratch[b] = g->dispatch;
			pairs++;
		}
		g->writes++;
	}
	g->writes += 2 * pairs;
}

static void *guest_main(void *arg)
{
	struct demo_guest *g = arg;

	pthread_mutex_lock(&g->lock);
	for (;;) {
		while (g->phase == PH_IDLE || !g->busy)
			pthread_cond_wait(&g->cond, &g->lock);
		if (g->phase == PH_QUIT)
			break;
		pthread_mutex_unlock(&g->lock);
		write_during(g);
		pthread_mutex_lock(&g->lock);
		g->busy = false;
		pthread_cond_broadcast(&g->cond);
	}
	pthread_mutex_unlock(&g->lock);
	return NULL;
}

/*
 * The writer that never stops: the pad words of random nodes and
 * primitives, without pause, from init to fini (a guest thread spinning on
 * its own data beside the hierarchy).  Its last value of each word is kept
 * in the want arrays too (the pad words are its alone).
 */
static void *constant_main(void *arg)
{
	struct demo_guest *g = arg;
	struct demo_scene *sc = g->sc;
	struct demo_rng rng = { 0x243f6a8885a308d3ull };
	uint32_t v = 0;

	while (!atomic_load_explicit(&g->constant_quit, memory_order_relaxed)) {
		uint32_t a = demo_rnd(&rng) % sc->nr_nodes, b = demo_rnd(&rng) % sc->nr_prims;

		v++;
		__atomic_store_n(&sc->nodes[a].pad[0], v, __ATOMIC_RELAXED);
		__atomic_store_n(&sc->prims[b].pad, v, __ATOMIC_RELAXED);
		g->want_node_scratch[sc->nr_nodes + a] = v;
		g->want_prim_scratch[sc->nr_prims + b] = v;
		g->constant_writes += 2;
	}
	return NULL;
}

int demo_guest_init(struct demo_guest *g, struct demo_scene *sc)
{
	g->sc = sc;
	g->rng_mods.s = 0x9e3779b97f4a7c15ull ^ 0x6d6f6473ull;
	g->rng_scratch.s = 0x9e3779b97f4a7c15ull ^ 0x73637261ull;
	/* [0, n): scratch words; [n, 2n): pad words of the constant writer */
	g->want_node_scratch = calloc(2 * (size_t)sc->nr_nodes, sizeof(uint32_t));
	g->want_prim_scratch = calloc(2 * (size_t)sc->nr_prims, sizeof(uint32_t));
	if (!g->want_node_scratch || !g->want_prim_scratch)
		return -ENOMEM;
	for (uint32_t i = 0; i < sc->nr_nodes; i++) {
		g->want_node_scratch[i] = sc->nodes[i].scratch;
		g->want_node_scratch[sc->nr_nodes + i] = sc->nodes[i].pad[0];
	}
	for (uint32_t i = 0; i < sc->nr_prims; i++) {
		g->want_prim_scratch[i] = sc->prims[i].scratch;
		g->want_prim_scratch[sc->nr_prims + i] = sc->prims[i].pad;
	}
	pthread_mutex_init(&g->lock, NULL);
	pthread_cond_init(&g->cond, NULL);
	if (pthread_create(&g->th, NULL, guest_main, g))
		return -EAGAIN;
	if (g->constant && pthread_create(&g->th_constant, NULL, constant_main, g)) {
		g->constant = false;
		return -EAGAIN;
	}
	return 0;
}

void demo_guest_stop_constant(struct demo_guest *g)
{
	if (!g->constant)
		return;
	atomic_store(&g->constant_quit, true);
	pthread_join(g->th_constant, NULL);
	g->constant = false;
}

void demo_guest_fini(struct demo_guest *g)
{
	if (!g->sc)
		return;
	demo_guest_stop_constant(g);
	pthread_mutex_lock(&g->lock);
	g->phase = PH_QUIT;
	g->busy = true;
	pthread_cond_broadcast(&g->cond);
	pthread_mutex_unlock(&g->lock);
	pthread_join(g->th, NULL);
	free(g->want_node_scratch);
	free(g->want_prim_scratch);
	free(g->changed);
	g->want_node_scratch = g->want_prim_scratch = NULL;
	g->changed = NULL;
	g->sc = NULL;
}

void demo_guest_during_start(struct demo_guest *g, uint32_t dispatch, uint32_t first, uint32_t n)
{
	pthread_mutex_lock(&g->lock);
	g->dispatch = dispatch;
	g->first_ray = first;
	g->nr_rays = n;
	g->phase = PH_DURING;
	g->busy = true;
	pthread_cond_broadcast(&g->cond);
	pthread_mutex_unlock(&g->lock);
}

void demo_guest_during_wait(struct demo_guest *g)
{
	pthread_mutex_lock(&g->lock);
	while (g->busy)
		pthread_cond_wait(&g->cond, &g->lock);
	g->phase = PH_IDLE;
	pthread_mutex_unlock(&g->lock);
}

void demo_check_hits(const struct demo_scene *sc, const struct demo_hit *want, uint32_t first,
		     uint32_t n, uint32_t dispatch, uint64_t *mismatches, uint64_t *lost,
		     uint64_t *ret_hits, const char *who)
{
	for (uint32_t i = 0; i < n; i++) {
		uint32_t ray = first + i;
		struct demo_hit w = want[i], got = sc->hits[ray];

		if (got.id != w.id || got.z != w.z || got.visits != w.visits) {
			if (*mismatches < 5)
				fprintf(stderr, "\n%s: ray %u: device (%u, %u, %u) "
					"cpu (%u, %u, %u)\n", who, ray, got.id, got.z,
					got.visits, w.id, w.z, w.visits);
			(*mismatches)++;
		}
		if (got.cpu != demo_cpu_word(ray, dispatch)) {
			if (*lost < 5)
				fprintf(stderr, "\n%s: ray %u: the CPU's word was lost "
					"(0x%x)\n", who, ray, got.cpu);
			(*lost)++;
		}
		if (ret_hits)
			*ret_hits += w.id != UINT32_MAX;
	}
}

uint64_t demo_check_scratch(const struct demo_guest *g)
{
	const struct demo_scene *sc = g->sc;
	uint64_t lost = 0;

	for (uint32_t i = 0; i < sc->nr_nodes; i++)
		lost += (sc->nodes[i].scratch != g->want_node_scratch[i]) +
			(sc->nodes[i].pad[0] != g->want_node_scratch[sc->nr_nodes + i]);
	for (uint32_t i = 0; i < sc->nr_prims; i++)
		lost += (sc->prims[i].scratch != g->want_prim_scratch[i]) +
			(sc->prims[i].pad != g->want_prim_scratch[sc->nr_prims + i]);
	return lost;
}
