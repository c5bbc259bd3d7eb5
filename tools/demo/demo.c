// SPDX-License-Identifier: GPL-2.0
/*
 * hmirror-demo: the main job end to end (README.md, Documentation/daemon.rst).
 *
 * An "emulator" process builds a bounding-volume hierarchy of a few hundred
 * MiB in a guest space (the watch API: the module where it is loaded, else
 * userfaultfd), hands the space to hmirrord over its socket (SCM_RIGHTS),
 * and runs ray-traversal dispatches through the daemon: a translated
 * program (tools/demo/traverse.comp, linked with the lookup helper) reads
 * nodes, primitives and rays from guest memory and writes hit records into
 * guest memory.  Meanwhile a CPU thread acts as the guest:
 *  - between dispatches it moves some primitives away (z grows) and raises
 *    their leaves' zmin: guest writes to mirrored chunks, which the guards
 *    must catch so that no dispatch reads a stale mirror;
 *  - during each dispatch it writes words the traversal never reads, in
 *    the same chunks the device reads and writes: a scratch word of nodes
 *    and primitives, and the "cpu word" of each hit record of the running
 *    dispatch, the word beside the three the device writes (false sharing:
 *    the copy home must not undo a CPU write).
 * After each dispatch every hit (id, z, nodes visited) is checked against a
 * CPU traversal of the scene as it was during the dispatch (computed on
 * every core but one while the dispatch runs), and every CPU write made
 * during it must still be there.  The last line reads
 * "demo: ... mismatches=0" when all is right.  SIGINT/SIGTERM: the
 * dispatch in flight finishes, the summary is printed (INTERRUPTED), the
 * exit status is 128 + the signal.
 *
 *   hmirror-demo [--socket PATH] [--size MIB] [--rays N] [--dispatches N]
 *                [--mods N] [--small] [--plot FILE.png] [--backend NAME]
 *                [--threads N]
 */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <hmirror/client.h>
#include <hmirror/watch.h>

#include "demo/traverse.spv.h"	/* hm_demo_traverse_spv: linked module */

#define GUEST_BASE	((uint64_t)0x100000000)	/* where the "guest" sees the space */
#define WORLD		(1u << 16)
#define LEAF_MAX	4
#define END		UINT32_MAX
#define MAX_VISITS	65536	/* as traverse.comp: a bound, never reached */
#define USER_PUSH	10

struct node { uint32_t x0, y0, x1, y1, zmin, left, count, escape, scratch, pad[3]; };
struct prim { uint32_t x0, y0, x1, y1, z, id, scratch, pad; };
struct ray { uint32_t x, y; };
struct hit { uint32_t id, z, visits, cpu; };

_Static_assert(sizeof(struct node) == 48, "node");
_Static_assert(sizeof(struct prim) == 32, "prim");
_Static_assert(sizeof(struct hit) == 16, "hit");

struct scene {
	uint8_t *base;			/* CPU mapping of the guest space */
	uint64_t size;
	uint64_t off_nodes, off_prims, off_rays, off_hits;
	struct node *nodes;
	struct prim *prims;
	struct ray *rays;
	struct hit *hits;
	uint32_t nr_nodes, nr_prims, nr_rays;
	uint32_t *leaf_of;		/* prim -> its leaf node (host memory) */
	uint32_t next_node;
};

static uint64_t rng_state = 0x9e3779b97f4a7c15ull;

static uint32_t rnd(void)
{
	/* xorshift64*: the scene is the same on every machine */
	rng_state ^= rng_state >> 12;
	rng_state ^= rng_state << 25;
	rng_state ^= rng_state >> 27;
	return (uint32_t)((rng_state * 2685821657736338717ull) >> 32);
}

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* ---- the hierarchy: primitives in Morton order, split at the middle ------ */

static uint32_t *order;			/* prim indices, in Morton order */
static struct prim *src;		/* primitives before reordering */

static uint64_t spread(uint32_t v)	/* 16 bits -> every other of 32 */
{
	uint64_t x = v & 0xffff;

	x = (x | (x << 8)) & 0x00ff00ff;
	x = (x | (x << 4)) & 0x0f0f0f0f;
	x = (x | (x << 2)) & 0x33333333;
	x = (x | (x << 1)) & 0x55555555;
	return x;
}

static void morton_order(uint32_t n)
{
	uint64_t *key = malloc((size_t)n * sizeof(*key)), *tmp = malloc((size_t)n * sizeof(*tmp));

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
}

static void build(struct scene *sc, uint32_t ni, uint32_t lo, uint32_t hi,
		  uint32_t escape)
{
	struct node n = { UINT32_MAX, UINT32_MAX, 0, 0, UINT32_MAX, 0, 0, escape };

	for (uint32_t i = lo; i < hi; i++) {
		const struct prim *p = &src[order[i]];

		n.x0 = p->x0 < n.x0 ? p->x0 : n.x0;
		n.y0 = p->y0 < n.y0 ? p->y0 : n.y0;
		n.x1 = p->x1 > n.x1 ? p->x1 : n.x1;
		n.y1 = p->y1 > n.y1 ? p->y1 : n.y1;
		n.zmin = p->z < n.zmin ? p->z : n.zmin;
	}
	if (hi - lo <= LEAF_MAX) {
		n.left = lo;
		n.count = hi - lo;
		for (uint32_t i = lo; i < hi; i++)
			sc->leaf_of[i] = ni;
		sc->nodes[ni] = n;
		return;
	}
	uint32_t mid = lo + (hi - lo) / 2;

	n.left = sc->next_node;
	sc->next_node += 2;
	sc->nodes[ni] = n;
	build(sc, n.left, lo, mid, n.left + 1);
	build(sc, n.left + 1, mid, hi, escape);
}

static uint32_t count_nodes(uint32_t n)
{
	return n <= LEAF_MAX ? 1 : 1 + count_nodes(n / 2) + count_nodes(n - n / 2);
}

/* ---- the CPU reference: the same walk as traverse.comp ------------------- */

static struct hit trace(const struct scene *sc, uint32_t ray)
{
	const struct ray r = sc->rays[ray];
	uint32_t best_z = UINT32_MAX, best_id = UINT32_MAX, visits = 0, err = 0;
	uint32_t ni = 0;

	while (ni != END) {
		const struct node *n = &sc->nodes[ni];

		if (++visits > MAX_VISITS) {
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
			const struct prim *p = &sc->prims[n->left + k];

			if (r.x < p->x0 || r.x >= p->x1 || r.y < p->y0 || r.y >= p->y1)
				continue;
			if (p->z < best_z || (p->z == best_z && p->id < best_id)) {
				best_z = p->z;
				best_id = p->id;
			}
		}
		ni = n->escape;
	}
	return (struct hit){ best_id, best_z, visits | (err << 31), 0 };
}

/*
 * ---- the reference, on every CPU core ---------------------------------------
 *
 * The walk of 1 Mi rays over a hierarchy of several hundred MiB is cache-
 * miss bound (about 18 us a ray on one core at 1 GiB): single-threaded
 * after each dispatch it took 4 times longer than the GPU (the first H200
 * run).  So it runs on nr_cpus threads, and WHILE the dispatch runs: the
 * scene the walk reads (node bounds, links, primitive boxes and z) does
 * not change during a dispatch (the guest thread then writes only words
 * the walk never reads), so the reference of dispatch k is the scene as
 * the device sees it.  After the reply only the comparison is left.
 */
struct refpool {
	const struct scene *sc;
	pthread_mutex_t lock;
	pthread_cond_t cond, done_cond;
	uint64_t gen;			/* job number; workers wait for a new one */
	uint32_t first, n;
	struct hit *want;
	atomic_uint next;		/* next block of rays to walk */
	unsigned nr_threads, running;	/* threads still on the current job */
	bool quit;
	double t_begin, t_end;		/* the job's start, its last worker's end */
	pthread_t th[64];
};

#define REF_BLOCK 512

static void *ref_main(void *arg)
{
	struct refpool *rp = arg;
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
				rp->want[i] = trace(rp->sc, rp->first + i);
		}
		pthread_mutex_lock(&rp->lock);
		if (--rp->running == 0) {
			rp->t_end = now_s();
			pthread_cond_broadcast(&rp->done_cond);
		}
	}
	pthread_mutex_unlock(&rp->lock);
	return NULL;
}

static int ref_init(struct refpool *rp, const struct scene *sc, unsigned threads,
		    uint32_t max_rays)
{
	memset(rp, 0, sizeof(*rp));
	rp->sc = sc;
	rp->want = malloc((size_t)max_rays * sizeof(*rp->want));
	if (!rp->want)
		return -ENOMEM;
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

static void ref_start(struct refpool *rp, uint32_t first, uint32_t n)
{
	pthread_mutex_lock(&rp->lock);
	rp->first = first;
	rp->n = n;
	atomic_store(&rp->next, 0);
	rp->running = rp->nr_threads;
	rp->t_begin = now_s();
	rp->gen++;
	pthread_cond_broadcast(&rp->cond);
	pthread_mutex_unlock(&rp->lock);
}

static void ref_wait(struct refpool *rp)
{
	pthread_mutex_lock(&rp->lock);
	while (rp->running)
		pthread_cond_wait(&rp->done_cond, &rp->lock);
	pthread_mutex_unlock(&rp->lock);
}

static void ref_fini(struct refpool *rp)
{
	pthread_mutex_lock(&rp->lock);
	rp->quit = true;
	pthread_cond_broadcast(&rp->cond);
	pthread_mutex_unlock(&rp->lock);
	for (unsigned i = 0; i < rp->nr_threads; i++)
		pthread_join(rp->th[i], NULL);
	free(rp->want);
	rp->want = NULL;
}

/* ---- SIGINT / SIGTERM: stop after the dispatch in flight, report ---------- */

static volatile sig_atomic_t stop_sig;

static void on_stop(int sig)
{
	stop_sig = sig;
}

/* ---- the guest CPU thread ------------------------------------------------- */

enum { PH_IDLE, PH_MODIFY, PH_DURING, PH_QUIT };

struct guest {
	struct scene *sc;
	pthread_mutex_t lock;
	pthread_cond_t cond;
	int phase;			/* what the main thread asks */
	bool busy;			/* the thread works on it */
	uint32_t dispatch, first_ray, nr_rays, mods;
	/* CPU writes of this dispatch, checked afterwards */
	uint32_t *scratch_idx;		/* node index, then prim index */
	uint32_t nr_scratch;
	uint64_t writes, modified;
};

static uint32_t cpu_word(uint32_t ray, uint32_t dispatch)
{
	return (ray * 2654435761u) ^ (dispatch << 24) ^ 0x5eedu;
}

static void modify_between(struct guest *g)
{
	struct scene *sc = g->sc;

	for (uint32_t i = 0; i < g->mods; i++) {
		uint32_t p = rnd() % sc->nr_prims;
		struct node *leaf = &sc->nodes[sc->leaf_of[p]];
		uint32_t zmin = UINT32_MAX;

		/* the primitive moves away; its leaf's bound is tightened.
		 * Bounds only rise, so every ancestor's zmin stays a bound. */
		if (sc->prims[p].z < UINT32_MAX - 4096)
			sc->prims[p].z += 1 + rnd() % 4096;
		for (uint32_t k = 0; k < leaf->count; k++) {
			uint32_t z = sc->prims[leaf->left + k].z;

			zmin = z < zmin ? z : zmin;
		}
		leaf->zmin = zmin;
		g->modified++;
	}
}

static void write_during(struct guest *g)
{
	struct scene *sc = g->sc;
	uint32_t n = g->nr_scratch;

	/* one pass: the hit records' cpu words, interleaved with scratch
	 * words of random nodes and primitives (words the walk never reads) */
	for (uint32_t i = 0; i < g->nr_rays; i++) {
		uint32_t ray = g->first_ray + i;

		__atomic_store_n(&sc->hits[ray].cpu, cpu_word(ray, g->dispatch),
				 __ATOMIC_RELAXED);
		if ((i & 15) == 0 && n < 2 * 4096) {
			uint32_t a = rnd() % sc->nr_nodes, b = rnd() % sc->nr_prims;

			__atomic_store_n(&sc->nodes[a].scratch, g->dispatch,
					 __ATOMIC_RELAXED);
			__atomic_store_n(&sc->prims[b].scratch, g->dispatch,
					 __ATOMIC_RELAXED);
			g->scratch_idx[n++] = a;
			g->scratch_idx[n++] = b;
		}
		g->writes++;
	}
	g->nr_scratch = n;
}

static void *guest_main(void *arg)
{
	struct guest *g = arg;

	pthread_mutex_lock(&g->lock);
	for (;;) {
		while (g->phase == PH_IDLE || !g->busy)
			pthread_cond_wait(&g->cond, &g->lock);
		if (g->phase == PH_QUIT)
			break;
		int ph = g->phase;

		pthread_mutex_unlock(&g->lock);
		if (ph == PH_MODIFY)
			modify_between(g);
		else
			write_during(g);
		pthread_mutex_lock(&g->lock);
		g->busy = false;
		pthread_cond_broadcast(&g->cond);
	}
	pthread_mutex_unlock(&g->lock);
	return NULL;
}

static void guest_start(struct guest *g, int phase)
{
	pthread_mutex_lock(&g->lock);
	g->phase = phase;
	g->busy = true;
	pthread_cond_broadcast(&g->cond);
	pthread_mutex_unlock(&g->lock);
}

static void guest_wait(struct guest *g)
{
	pthread_mutex_lock(&g->lock);
	while (g->busy)
		pthread_cond_wait(&g->cond, &g->lock);
	g->phase = PH_IDLE;
	pthread_mutex_unlock(&g->lock);
}

/* ---- main ---------------------------------------------------------------- */

static void progress(uint32_t done, uint32_t total, double rays_s, bool tty)
{
	int w = 40, filled = total ? (int)((uint64_t)done * w / total) : w;

	if (!tty) {
		if (done == total || (done * 4 / total) != ((done - 1) * 4 / total))
			fprintf(stderr, "demo: %u/%u dispatches, %.0f rays/s\n",
				done, total, rays_s);
		return;
	}
	fprintf(stderr, "\r[%.*s%*s] %u/%u dispatches  %.3g Mrays/s ",
		filled, "########################################", w - filled,
		"", done, total, rays_s / 1e6);
	if (done == total)
		fputc('\n', stderr);
}

static void usage(FILE *f)
{
	fprintf(f, "usage: hmirror-demo [--socket PATH] [--size MIB] [--rays N]\n"
		"       [--dispatches N] [--mods N] [--small] [--plot FILE.png]\n"
		"       [--backend kmod|uffd-async|uffd-sync|mprotect]\n"
		"  --size MIB        guest memory for the hierarchy (default: 256;\n"
		"                    --small: 16)\n"
		"  --advice N        for the hierarchy: 0 default, 1 read-mostly\n"
		"                    (default), 2 prefer device, 3 never mirror\n"
		"  --rays N          rays per dispatch (default: 1M on a GPU, 8K on\n"
		"                    a CPU device)\n"
		"  --dispatches N    (default: 24 on a GPU, 16 on a CPU device)\n"
		"  --threads N       CPU reference threads (default: cores - 1)\n"
		"SIGINT/SIGTERM: stops after the dispatch in flight, reports, exits\n"
		"128 + the signal number.\n");
}

int main(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "socket", required_argument, NULL, 's' },
		{ "size", required_argument, NULL, 'm' },
		{ "rays", required_argument, NULL, 'r' },
		{ "dispatches", required_argument, NULL, 'd' },
		{ "mods", required_argument, NULL, 'k' },
		{ "small", no_argument, NULL, 'S' },
		{ "plot", required_argument, NULL, 'p' },
		{ "backend", required_argument, NULL, 'b' },
		{ "spirv", required_argument, NULL, 'x' },	/* debugging */
		{ "advice", required_argument, NULL, 'a' },
		{ "threads", required_argument, NULL, 't' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	const char *sock = NULL, *plot = NULL, *backend = NULL, *spirv = NULL;
	uint64_t size_mib = 256, rays_per = 0;
	uint32_t dispatches = 0, mods = 256, advice = 1, threads = 0;
	bool small = false, tty = isatty(2);
	struct hm_space_params sp = { 0 };
	struct hm_space *space;
	struct hm_client *cl;
	struct scene sc = { 0 };
	struct guest g = { 0 };
	uint32_t pipe, space_id;
	uint64_t mismatches = 0, lost_writes = 0, hit_rays = 0;
	double t_build, t_run = 0, *t_disp, t_start = now_s();
	/* per-phase wall time of the dispatch loop (the summary's breakdown) */
	double t_modify = 0, t_guest = 0, t_ref = 0, t_refwait = 0, t_cmp = 0;
	struct refpool rp;
	struct sigaction sa = { .sa_handler = on_stop };
	sigset_t stopset;
	int c, r;

	while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
		switch (c) {
		case 's': sock = optarg; break;
		case 'm': size_mib = strtoull(optarg, NULL, 0); break;
		case 'r': rays_per = strtoull(optarg, NULL, 0); break;
		case 'd': dispatches = (uint32_t)strtoul(optarg, NULL, 0); break;
		case 'k': mods = (uint32_t)strtoul(optarg, NULL, 0); break;
		case 'S': small = true; break;
		case 'p': plot = optarg; break;
		case 'b': backend = optarg; break;
		case 'x': spirv = optarg; break;
		case 'a': advice = (uint32_t)strtoul(optarg, NULL, 0); break;
		case 't': threads = (uint32_t)strtoul(optarg, NULL, 0); break;
		case 'h': usage(stdout); return 0;
		default: usage(stderr); return 2;
		}
	}
	if (small && size_mib == 256)
		size_mib = 16;
	/* no SA_RESTART: a wait is cut short and the loop looks at stop_sig.
	 * Only the main thread takes them (the others block both). */
	sigemptyset(&sa.sa_mask);
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
	sigemptyset(&stopset);
	sigaddset(&stopset, SIGINT);
	sigaddset(&stopset, SIGTERM);

	r = hm_client_connect(sock, &cl);
	if (r < 0) {
		fprintf(stderr, "demo: cannot reach hmirrord (%s): %s\n",
			sock ? sock : "default socket", strerror(-r));
		printf("demo: FAILED no daemon mismatches=unknown\n");
		return 1;
	}
	const struct hm_msg_hello_reply *info = hm_client_info(cl);
	bool cpu_dev = strstr(info->device, "llvmpipe") || strstr(info->device, "lavapipe");

	if (!rays_per)
		rays_per = small ? 2048 : cpu_dev ? 8192 : 1u << 20;
	if (!dispatches)
		dispatches = small ? 6 : cpu_dev ? 16 : 24;
	fprintf(stderr, "demo: daemon pid %u, device %s, protocol %u\n",
		info->daemon_pid, info->device, info->version);
	if (!(info->features & HM_FEAT_ENGINE)) {
		fprintf(stderr, "demo: the daemon has no engine (built without "
			"it, or no usable device): nothing can be dispatched\n");
		printf("demo: FAILED daemon without engine, 0 dispatches run, "
		       "mismatches=unknown\n");
		return 1;
	}

	/* ---- the guest space and the scene in it ---- */
	uint64_t bytes = size_mib << 20;
	uint32_t nprims = (uint32_t)(bytes / 2 / sizeof(struct prim));

	sc.nr_prims = nprims;
	sc.nr_nodes = count_nodes(nprims);
	sc.nr_rays = (uint32_t)(rays_per * dispatches);
	sc.off_nodes = 0;
	sc.off_prims = sc.off_nodes + (uint64_t)sc.nr_nodes * sizeof(struct node);
	sc.off_rays = sc.off_prims + (uint64_t)nprims * sizeof(struct prim);
	sc.off_hits = sc.off_rays + (uint64_t)sc.nr_rays * sizeof(struct ray);
	sc.size = sc.off_hits + (uint64_t)sc.nr_rays * sizeof(struct hit);
	sc.size = (sc.size + (1u << 16) - 1) & ~(uint64_t)((1u << 16) - 1);
	sp.size = sc.size;
	if (backend && hm_backend_from_name(backend, &sp.backend) < 0) {
		fprintf(stderr, "demo: unknown backend %s\n", backend);
		return 2;
	}
	r = hm_space_new(&sp, &space);
	if (r < 0) {
		fprintf(stderr, "demo: hm_space_new(%" PRIu64 " MiB): %s\n",
			sc.size >> 20, strerror(-r));
		printf("demo: FAILED no guest space mismatches=unknown\n");
		return 1;
	}
	sc.base = hm_space_addr(space);
	sc.nodes = (struct node *)(sc.base + sc.off_nodes);
	sc.prims = (struct prim *)(sc.base + sc.off_prims);
	sc.rays = (struct ray *)(sc.base + sc.off_rays);
	sc.hits = (struct hit *)(sc.base + sc.off_hits);
	fprintf(stderr, "demo: guest space %.1f MiB at guest 0x%" PRIx64
		" (backend %s: %s)\n", (double)sc.size / (1 << 20), GUEST_BASE,
		hm_backend_name(hm_space_backend(space)),
		hm_space_backend_reason(space));

	t_build = now_s();
	src = malloc((size_t)nprims * sizeof(*src));
	order = malloc((size_t)nprims * sizeof(*order));
	sc.leaf_of = malloc((size_t)nprims * sizeof(*sc.leaf_of));
	if (!src || !order || !sc.leaf_of)
		return 1;
	for (uint32_t i = 0; i < nprims; i++) {
		uint32_t w = 16 + rnd() % 240, h = 16 + rnd() % 240;
		uint32_t x = rnd() % (WORLD - w), y = rnd() % (WORLD - h);

		src[i] = (struct prim){ x, y, x + w, y + h, rnd() >> 4, 0, 0, 0 };
		order[i] = i;
	}
	morton_order(nprims);
	sc.next_node = 1;
	build(&sc, 0, 0, nprims, END);
	sc.nr_nodes = sc.next_node;
	for (uint32_t i = 0; i < nprims; i++) {
		sc.prims[i] = src[order[i]];
		sc.prims[i].id = i;
	}
	free(src);
	free(order);
	for (uint32_t i = 0; i < sc.nr_rays; i++)
		sc.rays[i] = (struct ray){ rnd() % WORLD, rnd() % WORLD };
	memset(sc.hits, 0, (size_t)sc.nr_rays * sizeof(struct hit));
	t_build = now_s() - t_build;
	fprintf(stderr, "demo: hierarchy of %u nodes over %u primitives "
		"(%.0f MiB of nodes and primitives) built in %.2f s\n",
		sc.nr_nodes, nprims,
		((double)sc.nr_nodes * sizeof(struct node) + (double)nprims * sizeof(struct prim)) / (1 << 20), t_build);

	if (stop_sig) {
		fprintf(stderr, "demo: stopped by signal %d after building the scene\n",
			(int)stop_sig);
		printf("demo: INTERRUPTED dispatches=0 mismatches=0 device=\"%s\"\n",
		       info->device);
		hm_client_free(cl);
		hm_space_free(space);
		free(sc.leaf_of);
		return 128 + stop_sig;
	}

	/* ---- hand it to the daemon ---- */
	r = hm_client_space_add(cl, space, GUEST_BASE, &space_id);
	if (r < 0) {
		fprintf(stderr, "demo: space_add: %s\n", strerror(-r));
		printf("demo: FAILED space not registered mismatches=unknown\n");
		return 1;
	}
	/* the hierarchy is read-mostly: mirror it, drop on CPU writes
	 * (--advice: 0 default, 1 read-mostly, 2 prefer device, 3 never) */
	r = hm_client_advise(cl, GUEST_BASE + sc.off_nodes, sc.off_rays - sc.off_nodes,
			     advice);
	if (r < 0)
		fprintf(stderr, "demo: advise: %s (continuing)\n", strerror(-r));
	/* the hit records: the device writes them, the CPU writes the word
	 * beside each during the dispatch.  Prefer-device mirrors them, so
	 * the device's writes come home by the diff against the twin and the
	 * CPU's words must survive it (rule 4, false sharing). */
	if (advice != 3) {
		r = hm_client_advise(cl, GUEST_BASE + sc.off_hits,
				     (uint64_t)sc.nr_rays * sizeof(struct hit), 2);
		if (r < 0)
			fprintf(stderr, "demo: advise hits: %s (continuing)\n",
				strerror(-r));
	}
	const uint32_t *words = hm_demo_traverse_spv;
	size_t nr_words = sizeof(hm_demo_traverse_spv) / 4;

	if (spirv) {
		/* another traversal module, same interface (debugging) */
		FILE *f = fopen(spirv, "rb");
		static uint32_t buf[1 << 20];

		nr_words = f ? fread(buf, 4, sizeof(buf) / 4, f) : 0;
		if (f)
			fclose(f);
		words = buf;
	}
	r = hm_client_pipeline_new(cl, words, nr_words, "main", USER_PUSH, &pipe);
	if (r < 0) {
		fprintf(stderr, "demo: pipeline: %s\n", strerror(-r));
		printf("demo: FAILED pipeline refused mismatches=unknown\n");
		return 1;
	}

	g.sc = &sc;
	g.mods = mods;
	g.scratch_idx = malloc(2 * 4096 * sizeof(uint32_t) + 64);
	pthread_mutex_init(&g.lock, NULL);
	pthread_cond_init(&g.cond, NULL);
	pthread_t th;
	long ncpu = sysconf(_SC_NPROCESSORS_ONLN);

	/* every core but one: the daemon's device thread and the guest thread
	 * must not wait for a core while the reference runs */
	if (!threads)
		threads = ncpu > 1 ? (uint32_t)ncpu - 1 : 1;
	/* the helper threads never take SIGINT/SIGTERM */
	pthread_sigmask(SIG_BLOCK, &stopset, NULL);
	pthread_create(&th, NULL, guest_main, &g);
	r = ref_init(&rp, &sc, threads, (uint32_t)rays_per);
	pthread_sigmask(SIG_UNBLOCK, &stopset, NULL);
	if (r < 0) {
		fprintf(stderr, "demo: reference threads: %s\n", strerror(-r));
		printf("demo: FAILED no reference threads mismatches=unknown\n");
		return 1;
	}
	t_disp = calloc(dispatches, sizeof(*t_disp));

	uint32_t done;

	for (done = 0; done < dispatches; done++) {
		uint32_t first = (uint32_t)(done * rays_per);
		uint64_t nodes_g = GUEST_BASE + sc.off_nodes, prims_g = GUEST_BASE + sc.off_prims;
		uint64_t rays_g = GUEST_BASE + sc.off_rays, hits_g = GUEST_BASE + sc.off_hits;
		uint32_t push[USER_PUSH] = {
			(uint32_t)nodes_g, (uint32_t)(nodes_g >> 32),
			(uint32_t)prims_g, (uint32_t)(prims_g >> 32),
			(uint32_t)rays_g, (uint32_t)(rays_g >> 32),
			(uint32_t)hits_g, (uint32_t)(hits_g >> 32),
			first, (uint32_t)rays_per,
		};
		struct hm_client_dispatch d = {
			.pipeline = pipe,
			.groups = { (uint32_t)((rays_per + 63) / 64), 1, 1 },
			.nr_push = USER_PUSH, .push = push,
		};
		struct hm_client_result res;
		uint64_t ticket;
		double t0, t1, t2;
		bool submitted;

		if (stop_sig)
			break;
		/* the guest writes the scene between dispatches */
		t0 = now_s();
		if (done) {
			guest_start(&g, PH_MODIFY);
			guest_wait(&g);
		}
		t_modify += now_s() - t0;
		g.dispatch = done + 1;
		g.first_ray = first;
		g.nr_rays = (uint32_t)rays_per;
		g.nr_scratch = 0;
		t0 = now_s();
		r = hm_client_submit(cl, &d, &ticket);
		submitted = r == 0;
		if (submitted) {
			/* ... and beside what the device reads and writes; the
			 * reference walks the same scene meanwhile */
			guest_start(&g, PH_DURING);
			ref_start(&rp, first, (uint32_t)rays_per);
			/* in slices, so that a signal is seen; once stopping,
			 * the dispatch in flight still gets 30 s to finish */
			double give_up = 0;

			for (;;) {
				r = hm_client_wait(cl, ticket, 200, &res);
				if (r != -ETIMEDOUT)
					break;
				if (stop_sig && !give_up)
					give_up = now_s() + 30;
				if ((give_up && now_s() > give_up) ||
				    (!give_up && now_s() - t0 > 600))
					break;
			}
		}
		t_disp[done] = now_s() - t0;
		t1 = now_s();
		if (submitted)
			guest_wait(&g);
		t_guest += now_s() - t1;
		t1 = now_s();
		if (submitted)
			ref_wait(&rp);
		t2 = now_s();
		t_refwait += t2 - t1;
		if (submitted)
			t_ref += rp.t_end - rp.t_begin;
		t_run += t_disp[done];
		if (r < 0) {
			fprintf(stderr, "\ndemo: dispatch %u: %s\n", done + 1, strerror(-r));
			break;
		}
		/* every hit against the CPU's walk of the same scene */
		for (uint32_t i = 0; i < rays_per; i++) {
			uint32_t ray = first + i;
			struct hit want = rp.want[i], got = sc.hits[ray];

			if (got.id != want.id || got.z != want.z ||
			    got.visits != want.visits) {
				if (mismatches < 5)
					fprintf(stderr, "\ndemo: ray %u: device (%u, %u, %u) "
						"cpu (%u, %u, %u)\n", ray, got.id, got.z,
						got.visits, want.id, want.z, want.visits);
				mismatches++;
			}
			if (got.cpu != cpu_word(ray, done + 1)) {
				if (lost_writes < 5)
					fprintf(stderr, "\ndemo: ray %u: the CPU's word "
						"was lost (0x%x)\n", ray, got.cpu);
				lost_writes++;
			}
			hit_rays += want.id != UINT32_MAX;
		}
		for (uint32_t k = 0; k + 1 < g.nr_scratch; k += 2) {
			if (sc.nodes[g.scratch_idx[k]].scratch < done + 1 ||
			    sc.prims[g.scratch_idx[k + 1]].scratch < done + 1)
				lost_writes++;
		}
		t_cmp += now_s() - t2;
		progress(done + 1, dispatches, (double)rays_per * (done + 1) / t_run, tty);
	}
	guest_start(&g, PH_QUIT);
	pthread_join(th, NULL);
	ref_fini(&rp);
	if (stop_sig)
		fprintf(stderr, "%sdemo: stopped by signal %d after %u of %u dispatches\n",
			tty ? "\n" : "", (int)stop_sig, done, dispatches);

	struct hm_client_stats st = { 0 };

	hm_client_stats(cl, &st);
	uint64_t rays_done = (uint64_t)done * rays_per;
	double rays_s = t_run > 0 ? (double)rays_done / t_run : 0;

	fprintf(stderr, "demo: %u dispatches of %" PRIu64 " rays, %" PRIu64
		" hit something; guest wrote %" PRIu64 " primitives between "
		"dispatches and %" PRIu64 " words during them\n", done, rays_per,
		hit_rays, g.modified, g.writes + g.nr_scratch);
	/* where the time went: the loop's phases (wall time; the reference
	 * overlaps the dispatch, "reference after reply" is what it adds) */
	double t_total = now_s() - t_start;

	fprintf(stderr, "demo: time: total %.2f s; build %.2f s; loop: modify %.3f s, "
		"dispatch (submit to writes home) %.2f s, guest writes after reply %.3f s, "
		"reference %.2f s on %u threads (%.2f s after the reply), compare %.3f s; "
		"%.1f us a ray on the CPU\n", t_total, t_build, t_modify, t_run, t_guest,
		t_ref, rp.nr_threads, t_refwait, t_cmp,
		done ? t_ref * rp.nr_threads * 1e6 / ((double)done * rays_per) : 0.0);
	if (plot) {
		char dat[4096];
		FILE *f;

		snprintf(dat, sizeof(dat), "%s.dat", plot);
		f = fopen(dat, "w");
		if (f) {
			for (uint32_t i = 0; i < done; i++)
				fprintf(f, "%u %.3f\n", i + 1, t_disp[i] * 1e3);
			fclose(f);
			char cmd[8192];

			snprintf(cmd, sizeof(cmd),
				 "gnuplot -e \"set terminal png size 900,500; "
				 "set output '%s'; set xlabel 'dispatch'; "
				 "set ylabel 'ms (submit to writes home)'; "
				 "set title 'hmirror demo: %s, %" PRIu64 " rays a dispatch'; "
				 "plot '%s' using 1:2 with linespoints title 'dispatch time'\"",
				 plot, info->device, rays_per, dat);
			if (system(cmd) != 0)
				fprintf(stderr, "demo: gnuplot failed; data in %s\n", dat);
			else
				fprintf(stderr, "demo: plot written to %s\n", plot);
		}
	}
	printf("demo: dispatches=%u rays=%" PRIu64 " rays_per_s=%.0f "
	       "chunks_mirrored=%" PRIu64 " guard_trips=%" PRIu64
	       " mirrors_dropped=%" PRIu64 " bytes_uploaded=%" PRIu64
	       " bytes_copied_home=%" PRIu64 " lost_cpu_writes=%" PRIu64
	       " mismatches=%" PRIu64 "%s device=\"%s\" backend=%s"
	       " t_total=%.2f t_build=%.2f t_dispatch=%.2f t_ref=%.2f t_ref_after=%.2f"
	       " ref_threads=%u\n",
	       done, rays_done, rays_s, st.engine[HM_ESTAT_CHUNKS_MIRRORED],
	       st.engine[HM_ESTAT_GUARD_TRIPS], st.engine[HM_ESTAT_MIRRORS_DROPPED],
	       st.engine[HM_ESTAT_BYTES_UPLOADED], st.engine[HM_ESTAT_BYTES_COPIED_HOME],
	       lost_writes, mismatches + lost_writes,
	       stop_sig ? " INTERRUPTED" : done < dispatches ? " INCOMPLETE" : "",
	       info->device, hm_backend_name(hm_space_backend(space)),
	       t_total, t_build, t_run, t_ref, t_refwait, rp.nr_threads);
	hm_client_free(cl);
	hm_space_free(space);
	free(t_disp);
	free(g.scratch_idx);
	free(sc.leaf_of);
	if (stop_sig)
		return 128 + stop_sig;
	return mismatches || lost_writes || done < dispatches ? 1 : 0;
}
