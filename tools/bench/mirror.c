// SPDX-License-Identifier: GPL-2.0
/*
 * hmirror-bench mirror: device accesses through the engine with the data
 * home (imported host memory) and mirrored (device-local), in one run.
 *
 *   scattered  dependent scattered 4-byte loads (a pointer chase)
 *   coalesced  4-byte loads, consecutive lanes on consecutive words
 *   tree       hierarchy walk over 16-byte nodes holding 64-bit pointers
 *   upload     the engine's clean-only upload vs a plain host-to-device
 *              copy from a pinned (imported) buffer of the same size
 *   copy_back  the engine's diff + copy home of device writes vs a plain
 *              device-to-host copy of the same bytes
 *
 * Access cost: the difference between runs of steps_lo and steps_hi steps
 * (dispatch submit + wait), over lanes * (steps_hi - steps_lo), medians of
 * --rounds.  Every object carries changed_bytes (what the device changed,
 * from the model), copied_home_bytes (the engine's count) and mismatches
 * (results and guest memory against the model); the bench fails when
 * changed_bytes != copied_home_bytes or mismatches != 0.
 *
 * The device programs (tools/bench/mirror.spvasm, linked with the lookup
 * helper at build time) are embedded in the binary.
 */
#include <errno.h>
#include <getopt.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>
#include <spirv/unified1/spirv.h>

#include "hmirror/engine.h"
#include "hmirror/lookup.h"
#include "hmirror/vkctx.h"
#include "hmirror/watch.h"

#include "../../lib/engine/test_hooks.h"
#include "common.h"

extern const uint32_t hm_bench_mirror_spv[];
extern const size_t hm_bench_mirror_spv_words;

#define GUEST		0x100000000ull
#define USER_WORDS	9
#define MAX_ROUNDS	31

/* P_SITE, P_SITE_C: the chase through the library's load call site
 * (D969a), speculative and compact tier, built at run time */
enum { P_CHASE, P_COAL, P_TREE, P_INV, P_RAW, P_SITE, P_SITE_C, NR_P };
#define NR_SPVASM_P P_SITE
static const char *const entry[NR_P] = { "chase", "coal", "tree", "inv", "chase_raw", "main",
					 "main" };

struct mb {
	bool json;
	uint64_t size;
	uint64_t copyback;
	unsigned shift, groups, steps, rounds;
	enum hm_backend backend;
	struct hm_vk *vk;
	struct hm_space *s;
	struct hm_engine *e;
	uint8_t *mem;
	uint32_t pipe[NR_P];
	struct hm_vk_buffer out;
	uint32_t chase_words, tree_nodes, tree_off;
	struct perm { uint64_t n, mask, m1, m2, i1, i2, k; unsigned sh; } pc, pt;
	uint32_t *starts;               /* each lane's start of the last dispatch */
	uint64_t cursor;                /* position in each lane's segment (fresh per dispatch) */
	uint64_t last_cursor;           /* ... before the last dispatch */
	uint32_t last_first;            /* coal: first word of the last dispatch */
	uint64_t round_bytes, round_sector_bytes;  /* distinct bytes of the last dispatch */
	double reuse;                   /* fraction of its positions an earlier dispatch visited */
	bool skip_mirrors;              /* the device cannot hold mirrors + twins */
	bool sparse_window;             /* --window sparse: HM_VK_SPARSE */
	unsigned threads;
	unsigned inv_rounds;            /* copy-back rounds run (parity of the region) */
	uint32_t inv_words;
	long mismatches;
	int failed;
};


/*
 * The chase region is one random cycle over its words and the tree a
 * random placement of a ladder of nodes, both from a bijection P on
 * [0, n) (two multiply-xorshift rounds on the next power of two, cycle
 * walking below n): word P(q) holds the byte offset of word P(q + 1);
 * node T(q) points at nodes T(q + 1) and T(q + 2).  Lanes start at
 * positions i * (n / lanes) + cursor, and the cursor moves past what each
 * dispatch walked, so lanes never share a line and no dispatch walks the
 * lines an earlier one did (until a lane's segment is used up: "reuse").
 */
static uint64_t inv64(uint64_t m)
{
	uint64_t x = m;

	for (int i = 0; i < 6; i++)
		x *= 2 - m * x;
	return x;
}

static void perm_init(struct perm *p, uint64_t n, uint64_t seed)
{
	unsigned bits = 1;

	while ((1ull << bits) < n)
		bits++;
	p->n = n;
	p->mask = (1ull << bits) - 1;
	p->sh = (bits + 1) / 2;
	p->m1 = (0x9e3779b97f4a7c15ull ^ (seed * 0x632be59bd9b4e019ull)) | 1;
	p->m2 = (0xbf58476d1ce4e5b9ull + seed * 0x94d049bb133111ebull) | 1;
	p->i1 = inv64(p->m1);
	p->i2 = inv64(p->m2);
	p->k = (seed * 0xd6e8feb86659fd93ull) & p->mask;
}

static inline uint64_t perm_fwd(const struct perm *p, uint64_t x)
{
	do {
		x = (x * p->m1) & p->mask;
		x ^= x >> p->sh;
		x = (x * p->m2) & p->mask;
		x ^= x >> p->sh;
		x = (x + p->k) & p->mask;
	} while (x >= p->n);
	return x;
}

static inline uint64_t perm_inv(const struct perm *p, uint64_t x)
{
	do {
		x = (x - p->k) & p->mask;
		x ^= x >> p->sh;        /* an involution: 2 * sh >= bits */
		x = (x * p->i2) & p->mask;
		x ^= x >> p->sh;
		x = (x * p->i1) & p->mask;
	} while (x >= p->n);
	return x;
}

/* The initial value of guest word w (byte offset 4w). */
static uint32_t model_word(const struct mb *b, uint64_t w)
{
	uint64_t off = 4 * w;

	if (off < (uint64_t)b->tree_off) {
		uint64_t q = perm_inv(&b->pc, w) + 1;

		return 4 * (uint32_t)perm_fwd(&b->pc, q == b->pc.n ? 0 : q);
	}
	{
		uint64_t k = (off - b->tree_off) / 16, part = (w & 3);
		uint64_t q = (perm_inv(&b->pt, k) + 1 + (part >> 1)) % b->tree_nodes;
		uint64_t ptr = GUEST + b->tree_off + 16ull * perm_fwd(&b->pt, q);

		return part & 1 ? (uint32_t)(ptr >> 32) : (uint32_t)ptr;
	}
}

static uint32_t expect_word(const struct mb *b, uint64_t w)
{
	uint32_t v = model_word(b, w);

	if (w < b->inv_words && (b->inv_rounds & 1))
		v = ~v;
	return v;
}



static void emit_access(struct mb *b, const char *cas, const char *data, double ns,
			double home_ns, long mism);
static long check_out(struct mb *b, int p, const uint32_t *out);

static int dispatch_at(struct mb *b, int p, uint64_t base, unsigned groups, uint32_t steps,
		       uint32_t region, uint64_t *ret_ns)
{
	struct hm_engine_stats s0, s1;
	unsigned lanes = 64 * groups;
	uint32_t push[USER_WORDS] = {
		(uint32_t)base, (uint32_t)(base >> 32),
		(uint32_t)b->out.addr, (uint32_t)(b->out.addr >> 32),
		steps, region, b->tree_off, b->tree_nodes, 0,
	};
	uint32_t *out = b->out.map;
	int err;

	/* each lane's start: fresh positions, past what earlier dispatches walked */
	b->last_cursor = b->cursor;
	if (p == P_CHASE || p == P_RAW || p == P_TREE || p == P_SITE || p == P_SITE_C) {
		const struct perm *pm = p == P_TREE ? &b->pt : &b->pc;
		uint64_t seg = pm->n / lanes ? pm->n / lanes : 1;

		for (unsigned i = 0; i < lanes; i++) {
			uint64_t q = ((uint64_t)i * seg + b->cursor % seg) % pm->n;
			uint64_t x = perm_fwd(pm, q);

			b->starts[i] = p == P_TREE ? b->tree_off + 16 * (uint32_t)x : 4 * (uint32_t)x;
			out[i] = b->starts[i];
		}
		b->cursor += p == P_TREE ? 2ull * steps : steps;
	} else if (p == P_COAL) {
		b->last_first = push[8] = (uint32_t)(b->cursor % region);
		b->cursor += (uint64_t)steps * lanes;
	}
	hm_engine_stats(b->e, &s0);
	err = hm_engine_dispatch(b->e, b->pipe[p], groups, 1, 1, push, USER_WORDS, 0);
	hm_engine_stats(b->e, &s1);
	if (ret_ns)     /* the device's timestamps where it has them */
		*ret_ns = s1.ns_dispatch_gpu != s0.ns_dispatch_gpu ?
			  s1.ns_dispatch_gpu - s0.ns_dispatch_gpu : s1.ns_dispatch - s0.ns_dispatch;
	return err;
}

static int dispatch(struct mb *b, int p, unsigned groups, uint32_t steps, uint32_t region,
		    uint64_t *ret_ns)
{
	return dispatch_at(b, p, GUEST, groups, steps, region, ret_ns);
}

/* ns per lane-access of program p over base, and its out[] (to ret_out). */
static int access_cost_at(struct mb *b, int p, uint64_t base, double *ret_ns, uint32_t *ret_out)
{
	uint64_t d[MAX_ROUNDS], lo, hi;
	unsigned lanes = 64 * b->groups, s_lo = 8, s_hi = 8 + b->steps;
	int err;

	b->cursor = 0;  /* every measurement walks the same positions (home vs mirrored) */
	/* warm (and let any pending upload happen outside the timing) */
	err = dispatch_at(b, p, base, b->groups, s_lo, b->chase_words, NULL);
	if (err)
		return err;
	for (unsigned r = 0; r < b->rounds; r++) {
		err = dispatch_at(b, p, base, b->groups, s_lo, b->chase_words, &lo);
		if (!err)
			err = dispatch_at(b, p, base, b->groups, s_hi, b->chase_words, &hi);
		if (err)
			return err;
		d[r] = hi > lo ? hi - lo : 0;
	}
	memcpy(ret_out, b->out.map, lanes * 4);
	*ret_ns = (double)bench_pct50_u64(d, b->rounds) / ((double)lanes * (s_hi - s_lo));
	{
		/* positions of the last dispatch that an earlier one walked */
		const struct perm *pm = p == P_TREE ? &b->pt : &b->pc;
		uint64_t seg = p == P_COAL ? b->chase_words : (pm->n / lanes ? pm->n / lanes : 1);
		uint64_t t = b->last_cursor, l = b->cursor - b->last_cursor;

		b->reuse = t >= seg ? 1.0 : t + l > seg ? (double)(t + l - seg) / (double)l : 0.0;
		if (b->reuse > 1)
			b->reuse = 1;
	}
	return 0;
}

static int access_cost(struct mb *b, int p, double *ret_ns, uint32_t *ret_out)
{
	return access_cost_at(b, p, GUEST, ret_ns, ret_out);
}

/*
 * Baselines of the same chase without the helper, in the same run: the
 * chase region copied into plain device memory, and into plain imported
 * (pinned) host memory.  What CUDA's device-memory and mapped-host figures
 * measure, here through Vulkan on the same device.
 */
static int bench_raw(struct mb *b, const uint32_t *home_out, double *ret_dev_ns)
{
	uint64_t bytes = (uint64_t)b->chase_words * 4;
	unsigned lanes = 64 * b->groups;
	struct hm_vk_buffer pinned = { 0 }, dev = { 0 };
	uint32_t *out;
	double ns_dev = 0, ns_host = 0;
	long bad_dev = 0, bad_host = 0;
	void *host;
	int err;

	if (bytes > b->vk->max_buffer) {
		fprintf(stderr, "mirror: raw baselines skipped: the chase region (%lu MiB) is larger "
			"than one buffer may be here (%lu MiB)\n", (unsigned long)(bytes >> 20),
			(unsigned long)(b->vk->max_buffer >> 20));
		*ret_dev_ns = 0;
		return 0;
	}
	out = calloc(lanes, 4);
	if (!out)
		return -ENOMEM;
	host = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (host == MAP_FAILED) {
		free(out);
		return -errno;
	}
	/* huge pages where the kernel gives them (as a driver's pinned
	 * buffer has): host_raw vs home then shows what 4 KiB pages cost */
	madvise(host, bytes, MADV_HUGEPAGE);
	memcpy(host, b->mem, bytes);
	err = hm_vk_import_host(b->vk, host, bytes, &pinned);
	if (!err)
		err = hm_vk_buffer_new(b->vk, bytes, HM_VK_MEM_DEVICE, &dev);
	/* in pieces of 1 GiB: lavapipe (Mesa 22.3) crashes copying 2 GiB at once */
	for (uint64_t o = 0; !err && o < bytes; o += 1ull << 30)
		err = hm_vk_copy_sync(b->vk, pinned.buf, o, dev.buf, o,
				      bytes - o < (1ull << 30) ? bytes - o : 1ull << 30);
	if (!err)
		err = access_cost_at(b, P_RAW, dev.addr, &ns_dev, out);
	if (!err) {
		bad_dev = (memcmp(out, home_out, lanes * 4) ? 1 : 0) + check_out(b, P_CHASE, out);
		emit_access(b, "scattered", "device_raw", ns_dev, 0, bad_dev);
		err = access_cost_at(b, P_RAW, pinned.addr, &ns_host, out);
	}
	if (!err) {
		bad_host = (memcmp(out, home_out, lanes * 4) ? 1 : 0) + check_out(b, P_CHASE, out);
		emit_access(b, "scattered", "host_raw", ns_host, 0, bad_host);
	}
	hm_vk_buffer_free(b->vk, &dev);
	hm_vk_buffer_free(b->vk, &pinned);
	munmap(host, bytes);
	free(out);
	if (err)
		return err;
	b->mismatches += bad_dev + bad_host;
	*ret_dev_ns = ns_dev;
	return 0;
}

/*
 * out[] of the last s_hi run against the host model (scattered, tree),
 * from the starts of that run; also counts the distinct bytes and 32-byte
 * sectors that run loaded (round_bytes, round_sector_bytes).
 */
static long check_out(struct mb *b, int p, const uint32_t *out)
{
	unsigned lanes = 64 * b->groups, steps = 8 + b->steps;
	uint64_t *sec, nsec = 0, nuniq = 0;
	long bad = 0;

	if (p == P_COAL) {      /* compared home vs mirrored instead */
		uint64_t words = (uint64_t)lanes * steps;

		if (words > b->chase_words)
			words = b->chase_words;
		b->round_bytes = 4 * words;
		b->round_sector_bytes = (4 * words + 31) & ~31ull;
		return 0;
	}
	sec = malloc((size_t)lanes * steps * sizeof(*sec));
	for (unsigned i = 0; i < lanes; i++) {
		uint64_t cur = GUEST + b->starts[i];

		for (unsigned s = 0; s < steps; s++) {
			uint64_t w = (cur - GUEST) / 4;

			if (sec)
				sec[nsec++] = (cur - GUEST) / (p == P_CHASE ? 4 : 16);
			if (p == P_CHASE) {
				cur = GUEST + expect_word(b, w);
			} else {
				w += ((i >> (s & 15)) & 1) ? 2 : 0;
				cur = expect_word(b, w) | (uint64_t)expect_word(b, w + 1) << 32;
			}
		}
		bad += out[i] != (uint32_t)cur;
	}
	if (sec) {
		/* distinct words (nodes), then distinct 32-byte sectors */
		uint64_t ns = 0, shift = p == P_CHASE ? 3 : 1;

		qsort(sec, nsec, sizeof(*sec), bench_cmp_u64);
		for (uint64_t k = 0; k < nsec; k++)
			if (!k || sec[k] != sec[k - 1])
				nuniq++;
		for (uint64_t k = 0; k < nsec; k++)
			if (!k || sec[k] >> shift != sec[k - 1] >> shift)
				ns++;
		b->round_bytes = nuniq * (p == P_CHASE ? 4 : 16);
		b->round_sector_bytes = ns * 32;
		free(sec);
	}
	return bad;
}

/* Fill guest memory with the model (write) or count words that differ. */
struct fill_job {
	struct mb *b;
	uint64_t lo, hi;
	bool write;
	long bad;
};

static void *fill_thread(void *arg)
{
	struct fill_job *j = arg;
	uint32_t *m = (uint32_t *)j->b->mem;

	for (uint64_t w = j->lo; w < j->hi; w++) {
		if (j->write)
			m[w] = model_word(j->b, w);
		else
			j->bad += m[w] != expect_word(j->b, w);
	}
	return NULL;
}

static long fill_or_check(struct mb *b, bool write)
{
	struct fill_job job[32];
	pthread_t t[32];
	unsigned n = b->threads, started = 0;
	uint64_t words = b->size / 4;
	long bad = 0;

	for (unsigned i = 0; i < n; i++) {
		job[i] = (struct fill_job){ b, words * i / n, words * (i + 1) / n, write, 0 };
		if (i && !pthread_create(&t[i], NULL, fill_thread, &job[i]))
			started |= 1u << i;
		else if (i)
			fill_thread(&job[i]);
	}
	fill_thread(&job[0]);
	for (unsigned i = 1; i < n; i++)
		if (started & (1u << i))
			pthread_join(t[i], NULL);
	for (unsigned i = 0; i < n; i++)
		bad += job[i].bad;
	return bad;
}

static long check_memory(struct mb *b)
{
	return fill_or_check(b, false);
}

static const char *dev_name(const struct mb *b)
{
	return b->vk->props.deviceName;
}

static void emit_access(struct mb *b, const char *cas, const char *data, double ns,
			double home_ns, long mism)
{
	if (b->json) {
		printf("{\"bench\":\"mirror\",\"case\":\"%s\",\"data\":\"%s\",\"device\":\"%s\","
		       "\"backend\":\"%s\",\"working_set\":%lu,\"chunk_shift\":%u,\"lanes\":%u,"
		       "\"steps\":%u,\"rounds\":%u,\"ns_per_lane_access\":%.5f",
		       cas, data, dev_name(b), hm_backend_name(hm_space_backend(b->s)),
		       (unsigned long)b->size, b->shift, 64 * b->groups, b->steps, b->rounds, ns);
		if (home_ns > 0)
			printf(",\"speedup_vs_home\":%.3f", ns > 0 ? home_ns / ns : 0);
		printf(",\"distinct_bytes_per_round\":%lu,\"sector_bytes_per_round\":%lu,"
		       "\"reuse_fraction\":%.3f", (unsigned long)b->round_bytes,
		       (unsigned long)b->round_sector_bytes, b->reuse);
		printf(",\"changed_bytes\":0,\"copied_home_bytes\":0,\"mismatches\":%ld}\n", mism);
	} else {
		printf("%-10s %-10s %10.4f ns/lane-access, %7.1f MB of 32-B sectors a round, "
		       "reuse %.2f", cas, data, ns, b->round_sector_bytes / 1e6, b->reuse);
		if (home_ns > 0)
			printf("  %8.2fx faster than home", ns > 0 ? home_ns / ns : 0);
		printf("%s\n", mism ? "  MISMATCH" : "");
	}
}

/*
 * A plain copy of bytes between host memory at host (imported, in pieces
 * of at most one buffer's size) and plain device buffers, all pieces in one
 * command buffer: GB/s, median of rounds.  to_device: host -> device.
 */
static int plain_copy(struct mb *b, void *host, uint64_t bytes, bool to_device, double *ret_gbps)
{
	uint64_t piece = b->vk->max_buffer & ~((uint64_t)b->vk->min_import_align - 1) &
			 ~((1ull << b->shift) - 1);
	unsigned n = (bytes + piece - 1) / piece;
	struct hm_vk_buffer hb[64] = { 0 }, db[64] = { 0 };
	uint64_t d[MAX_ROUNDS];
	int err = 0;

	if (!piece || n > 64)
		return -E2BIG;
	for (unsigned i = 0; i < n && !err; i++) {
		uint64_t len = bytes - i * piece < piece ? bytes - i * piece : piece;

		err = hm_vk_import_host(b->vk, (uint8_t *)host + i * piece, len, &hb[i]);
		if (!err)
			err = hm_vk_buffer_new(b->vk, len, HM_VK_MEM_DEVICE, &db[i]);
	}
	for (unsigned r = 0; r < b->rounds && !err; r++) {
		VkCommandBuffer cb;
		uint64_t t0 = bench_clock_ns();

		err = hm_vk_cmd_begin(b->vk, &cb);
		if (err)
			break;
		for (unsigned i = 0; i < n; i++) {
			VkBufferCopy reg = { .size = hb[i].size };

			vkCmdCopyBuffer(cb, to_device ? hb[i].buf : db[i].buf,
					to_device ? db[i].buf : hb[i].buf, 1, &reg);
		}
		hm_vk_cmd_barrier(cb);
		err = hm_vk_submit_wait(b->vk, cb, 0);
		d[r] = bench_clock_ns() - t0;
	}
	for (unsigned i = 0; i < n; i++) {
		hm_vk_buffer_free(b->vk, &db[i]);
		hm_vk_buffer_free(b->vk, &hb[i]);
	}
	if (!err)
		*ret_gbps = (double)bytes / (double)bench_pct50_u64(d, b->rounds);
	return err;
}

/* A plain device-to-device copy of bytes (at most 1 GiB): GB/s. */
static int plain_d2d(struct mb *b, uint64_t bytes, double *ret_gbps)
{
	struct hm_vk_buffer x = { 0 }, y = { 0 };
	uint64_t d[MAX_ROUNDS];
	int err;

	if (bytes > (1ull << 30))
		bytes = 1ull << 30;
	if (bytes > b->vk->max_buffer)
		bytes = b->vk->max_buffer;
	err = hm_vk_buffer_new(b->vk, bytes, HM_VK_MEM_DEVICE, &x);
	if (!err)
		err = hm_vk_buffer_new(b->vk, bytes, HM_VK_MEM_DEVICE, &y);
	for (unsigned r = 0; r < b->rounds && !err; r++) {
		uint64_t t0 = bench_clock_ns();

		err = hm_vk_copy_sync(b->vk, x.buf, 0, y.buf, 0, bytes);
		d[r] = bench_clock_ns() - t0;
	}
	hm_vk_buffer_free(b->vk, &x);
	hm_vk_buffer_free(b->vk, &y);
	if (!err)
		*ret_gbps = (double)bytes / (double)bench_pct50_u64(d, b->rounds);
	return err;
}

/* --rounds uploads of the whole space with twin mode mode: GB/s (copy, phase) */
static int upload_rounds(struct mb *b, uint32_t mode, double *ret_copy, double *ret_phase)
{
	uint64_t copy[MAX_ROUNDS], phase[MAX_ROUNDS], bytes = 0;
	int err;

	err = hm__engine_set_twin_mode(b->e, mode);
	if (err)
		return err;
	for (unsigned r = 0; r < b->rounds; r++) {
		struct hm_engine_stats s0, s1;

		/* drop every mirror, then ask for them again: one batched upload */
		err = hm_engine_advise(b->e, GUEST, b->size, HM_ADVICE_NEVER_MIRROR);
		if (!err)
			err = hm_engine_advise(b->e, GUEST, b->size, HM_ADVICE_PREFER_DEVICE);
		if (err)
			return err;
		hm_engine_stats(b->e, &s0);
		err = dispatch(b, P_CHASE, 1, 1, b->chase_words, NULL);
		if (err)
			return err;
		hm_engine_stats(b->e, &s1);
		copy[r] = s1.ns_upload_copy - s0.ns_upload_copy;
		phase[r] = s1.ns_upload - s0.ns_upload;
		bytes = s1.upload_bytes - s0.upload_bytes;
		if (bytes != b->size) {
			fprintf(stderr, "mirror: uploaded %lu of %lu bytes (budget?)\n",
				(unsigned long)bytes, (unsigned long)b->size);
			b->failed = 1;
		}
	}
	*ret_copy = (double)bytes / (double)bench_pct50_u64(copy, b->rounds);
	*ret_phase = (double)bytes / (double)bench_pct50_u64(phase, b->rounds);
	return 0;
}

static int bench_upload(struct mb *b)
{
	double plain = 0, plain_home = 0, d2d = 0, eng, engp, engc = 0, engcp = 0, engs = 0, engsp = 0;
	bool auto_copy = b->vk->props.deviceType == VK_PHYSICAL_DEVICE_TYPE_CPU;
	uint64_t bytes = b->size;
	void *host;
	int err;

	/* both ways of filling twins (engine.h: enum hm_twin_mode), the
	 * engine's default (AUTO: the shader on a GPU, the copy on a CPU
	 * device) last, which leaves everything mirrored */
	err = upload_rounds(b, auto_copy ? HM_TWIN_SHADER : HM_TWIN_COPY,
			    auto_copy ? &engs : &engc, auto_copy ? &engsp : &engcp);
	if (!err)
		err = upload_rounds(b, auto_copy ? HM_TWIN_COPY : HM_TWIN_SHADER,
				    auto_copy ? &engc : &engs, auto_copy ? &engcp : &engsp);
	if (!err)
		err = hm__engine_set_twin_mode(b->e, HM_TWIN_AUTO);
	if (err)
		return err;
	eng = auto_copy ? engc : engs;
	engp = auto_copy ? engcp : engsp;

	/* the baseline: a plain copy from pinned (imported) host memory */
	host = mmap(NULL, b->size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_POPULATE,
		    -1, 0);
	if (host == MAP_FAILED)
		return -errno;
	memset(host, 0x5a, b->size);
	err = plain_copy(b, host, b->size, true, &plain);
	munmap(host, b->size);
	if (err)
		return err;
	/* diagnostics: the same plain copy from the guest's home pages (the
	 * space's device view: its page size, not the engine, if slower), and
	 * a device-to-device copy (what the twin costs) */
	{
		void *view;

		if (hm_space_device_view(b->s, &view) || plain_copy(b, view, b->size, true, &plain_home))
			plain_home = 0;
		if (plain_d2d(b, b->size, &d2d))
			d2d = 0;
	}
	if (b->json)
		printf("{\"bench\":\"mirror\",\"case\":\"upload\",\"device\":\"%s\",\"backend\":\"%s\","
		       "\"working_set\":%lu,\"chunk_shift\":%u,\"rounds\":%u,\"upload_bytes\":%lu,"
		       "\"engine_copy_gbps\":%.3f,\"engine_phase_gbps\":%.3f,\"plain_h2d_gbps\":%.3f,"
		       "\"ratio\":%.4f,\"phase_ratio\":%.4f,\"plain_h2d_from_home_gbps\":%.3f,"
		       "\"plain_d2d_gbps\":%.3f,\"twin_mode\":\"%s\",\"twin_copy_engine_copy_gbps\":%.3f,"
		       "\"twin_copy_engine_phase_gbps\":%.3f,\"twin_copy_ratio\":%.4f,"
		       "\"twin_shader_engine_copy_gbps\":%.3f,\"twin_shader_engine_phase_gbps\":%.3f,"
		       "\"twin_shader_ratio\":%.4f,"
		       "\"changed_bytes\":0,\"copied_home_bytes\":0,\"mismatches\":0}\n",
		       dev_name(b), hm_backend_name(hm_space_backend(b->s)), (unsigned long)b->size,
		       b->shift, b->rounds, (unsigned long)bytes, eng, engp, plain,
		       plain > 0 ? eng / plain : 0, plain > 0 ? engp / plain : 0, plain_home, d2d,
		       auto_copy ? "copy" : "shader", engc, engcp, plain > 0 ? engc / plain : 0,
		       engs, engsp, plain > 0 ? engs / plain : 0);
	else
		printf("upload     engine copy %.2f GB/s (whole phase %.2f), plain pinned H2D %.2f GB/s: "
		       "%.1f%% (%.1f%%); plain H2D from the home pages %.2f GB/s, D2D %.2f GB/s; "
		       "twins by copy %.2f GB/s (%.1f%%), by shader %.2f GB/s (%.1f%%); default %s\n",
		       eng, engp, plain, plain > 0 ? 100 * eng / plain : 0,
		       plain > 0 ? 100 * engp / plain : 0, plain_home, d2d, engc,
		       plain > 0 ? 100 * engc / plain : 0, engs, plain > 0 ? 100 * engs / plain : 0,
		       auto_copy ? "copy" : "shader");
	return 0;
}

static int bench_copy_back(struct mb *b)
{
	uint64_t ns[MAX_ROUNDS], changed = 0, copied = 0;
	uint32_t words = b->copyback / 4;
	unsigned groups = (words / 64 + 15) / 16;
	double plain = 0, gbps;
	uint32_t steps;
	void *host;
	long bad;
	int err;

	if (groups > 65535)
		groups = 65535;
	if (!groups)
		groups = 1;
	steps = (words + 64 * groups - 1) / (64 * groups);
	b->inv_words = words;
	for (unsigned r = 0; r < b->rounds; r++) {
		struct hm_engine_stats s0, s1;

		hm_engine_stats(b->e, &s0);
		err = dispatch(b, P_INV, groups, steps, words, NULL);
		if (err)
			return err;
		hm_engine_stats(b->e, &s1);
		b->inv_rounds++;
		ns[r] = s1.ns_copy_back - s0.ns_copy_back;
		copied += s1.bytes_copied_home - s0.bytes_copied_home;
		changed += 4ull * words;        /* ~x differs from x in every byte */
	}
	gbps = (double)(4ull * words) / (double)bench_pct50_u64(ns, b->rounds);
	bad = check_memory(b);
	b->mismatches += bad;

	host = mmap(NULL, b->copyback, PROT_READ | PROT_WRITE,
		    MAP_PRIVATE | MAP_ANONYMOUS | MAP_POPULATE, -1, 0);
	if (host == MAP_FAILED)
		return -errno;
	err = plain_copy(b, host, b->copyback, false, &plain);
	munmap(host, b->copyback);
	if (err)
		return err;
	if (changed != copied || bad)
		b->failed = 1;
	if (b->json)
		printf("{\"bench\":\"mirror\",\"case\":\"copy_back\",\"device\":\"%s\",\"backend\":\"%s\","
		       "\"working_set\":%lu,\"region\":%lu,\"rounds\":%u,\"engine_gbps\":%.3f,"
		       "\"plain_d2h_gbps\":%.3f,\"ratio\":%.4f,\"changed_bytes\":%lu,"
		       "\"copied_home_bytes\":%lu,\"mismatches\":%ld}\n",
		       dev_name(b), hm_backend_name(hm_space_backend(b->s)), (unsigned long)b->size,
		       (unsigned long)b->copyback, b->rounds, gbps, plain,
		       plain > 0 ? gbps / plain : 0, (unsigned long)changed, (unsigned long)copied, bad);
	else
		printf("copy_back  engine %.2f GB/s, plain D2H %.2f GB/s; changed %lu B, copied home %lu B, "
		       "mismatches %ld\n", gbps, plain, (unsigned long)changed, (unsigned long)copied, bad);
	return 0;
}

/*
 * Step-by-step host-pointer import (the steps of hm_vk_import_host(),
 * each reported): vkGetMemoryHostPointerPropertiesEXT, vkCreateBuffer,
 * the memory type chosen, vkAllocateMemory with
 * VkImportMemoryHostPointerInfoEXT, vkBindBufferMemory, the device address.
 * The result is what the library's import would do with the same pointer.
 */
struct import_steps {
	const char *failed;     /* step that failed, "none" */
	VkResult res;           /* its VkResult (VK_SUCCESS when none) */
	uint32_t host_bits;     /* VkMemoryHostPointerPropertiesEXT.memoryTypeBits */
	uint32_t buf_bits;      /* VkMemoryRequirements.memoryTypeBits */
	int type;               /* chosen type index, -1 none */
	uint64_t req_size;
};

#define PROBE_USAGE (VK_BUFFER_USAGE_STORAGE_BUFFER_BIT | VK_BUFFER_USAGE_TRANSFER_SRC_BIT | \
		     VK_BUFFER_USAGE_TRANSFER_DST_BIT | VK_BUFFER_USAGE_SHADER_DEVICE_ADDRESS_BIT)

static void import_steps(struct hm_vk *vk, void *ptr, uint64_t size, struct import_steps *r)
{
	VkExternalMemoryBufferCreateInfo ebci = {
		.sType = VK_STRUCTURE_TYPE_EXTERNAL_MEMORY_BUFFER_CREATE_INFO,
		.handleTypes = VK_EXTERNAL_MEMORY_HANDLE_TYPE_HOST_ALLOCATION_BIT_EXT,
	};
	VkBufferCreateInfo bci = {
		.sType = VK_STRUCTURE_TYPE_BUFFER_CREATE_INFO, .pNext = &ebci, .size = size,
		.usage = PROBE_USAGE, .sharingMode = VK_SHARING_MODE_EXCLUSIVE,
	};
	VkMemoryHostPointerPropertiesEXT hpp = {
		.sType = VK_STRUCTURE_TYPE_MEMORY_HOST_POINTER_PROPERTIES_EXT,
	};
	VkImportMemoryHostPointerInfoEXT imp = {
		.sType = VK_STRUCTURE_TYPE_IMPORT_MEMORY_HOST_POINTER_INFO_EXT,
		.handleType = VK_EXTERNAL_MEMORY_HANDLE_TYPE_HOST_ALLOCATION_BIT_EXT,
		.pHostPointer = ptr,
	};
	VkMemoryAllocateFlagsInfo fi = {
		.sType = VK_STRUCTURE_TYPE_MEMORY_ALLOCATE_FLAGS_INFO, .pNext = &imp,
		.flags = VK_MEMORY_ALLOCATE_DEVICE_ADDRESS_BIT,
	};
	VkMemoryAllocateInfo ai = {
		.sType = VK_STRUCTURE_TYPE_MEMORY_ALLOCATE_INFO, .pNext = &fi, .allocationSize = size,
	};
	VkBuffer buf = VK_NULL_HANDLE;
	VkDeviceMemory mem = VK_NULL_HANDLE;
	VkMemoryRequirements req;
	uint32_t type;

	memset(r, 0, sizeof(*r));
	r->type = -1;
	r->failed = "none";
	if (!vk->has_host_import || !vk->get_host_ptr_props) {
		r->failed = "no_extension";
		r->res = VK_ERROR_EXTENSION_NOT_PRESENT;
		return;
	}
	r->res = vk->get_host_ptr_props(vk->dev, VK_EXTERNAL_MEMORY_HANDLE_TYPE_HOST_ALLOCATION_BIT_EXT,
					ptr, &hpp);
	r->host_bits = hpp.memoryTypeBits;
	if (r->res != VK_SUCCESS) {
		r->failed = "host_pointer_properties";
		return;
	}
	r->res = vkCreateBuffer(vk->dev, &bci, NULL, &buf);
	if (r->res != VK_SUCCESS) {
		r->failed = "create_buffer";
		return;
	}
	vkGetBufferMemoryRequirements(vk->dev, buf, &req);
	r->buf_bits = req.memoryTypeBits;
	r->req_size = req.size;
	if (hm_vk_memory_type(vk, req.memoryTypeBits & hpp.memoryTypeBits, HM_VK_MEM_HOST, &type) &&
	    hm_vk_memory_type(vk, req.memoryTypeBits & hpp.memoryTypeBits, HM_VK_MEM_DEVICE, &type)) {
		r->failed = "memory_type";
		r->res = VK_ERROR_FORMAT_NOT_SUPPORTED;
		goto out;
	}
	r->type = type;
	ai.memoryTypeIndex = type;
	r->res = vkAllocateMemory(vk->dev, &ai, NULL, &mem);
	if (r->res != VK_SUCCESS) {
		r->failed = "allocate_import";
		mem = VK_NULL_HANDLE;
		goto out;
	}
	r->res = vkBindBufferMemory(vk->dev, buf, mem, 0);
	if (r->res != VK_SUCCESS) {
		r->failed = "bind";
		goto out;
	}
	{
		VkBufferDeviceAddressInfo bai = {
			.sType = VK_STRUCTURE_TYPE_BUFFER_DEVICE_ADDRESS_INFO, .buffer = buf,
		};

		if (!vkGetBufferDeviceAddress(vk->dev, &bai)) {
			r->failed = "device_address";
			r->res = VK_ERROR_UNKNOWN;
		}
	}
out:
	if (buf)
		vkDestroyBuffer(vk->dev, buf, NULL);
	if (mem)
		vkFreeMemory(vk->dev, mem, NULL);
}

/* largest power of two dividing the address, capped at 1 GiB */
static uint64_t addr_align(const void *p)
{
	uintptr_t a = (uintptr_t)p;

	if (!a)
		return 0;
	a &= -a;
	return a > (1u << 30) ? (1u << 30) : a;
}

static void print_step(bool json, const char *vkname, const char *mapping, const char *step,
		       uint64_t size, const void *view, int engine_err, int add_err,
		       const struct import_steps *s)
{
	if (json)
		printf("{\"bench\":\"mirror\",\"case\":\"import_step\",\"device\":\"%s\","
		       "\"mapping\":\"%s\",\"step\":\"%s\",\"size\":%lu,\"view_align\":%lu,"
		       "\"engine_errno\":%d,\"add_space_errno\":%d,\"failed\":\"%s\",\"result\":\"%s\","
		       "\"host_type_bits\":\"0x%x\",\"buffer_type_bits\":\"0x%x\",\"type\":%d,"
		       "\"req_size\":%lu,\"changed_bytes\":0,\"copied_home_bytes\":0,\"mismatches\":0}\n",
		       vkname, mapping, step, (unsigned long)size, (unsigned long)addr_align(view),
		       -engine_err, -add_err, s ? s->failed : "skipped",
		       s ? hm_vk_result_name(s->res) : "-", s ? s->host_bits : 0,
		       s ? s->buf_bits : 0, s ? s->type : -1, s ? (unsigned long)s->req_size : 0ul);
	else
		printf("step %-14s %-22s %5lu MiB align 0x%-8lx engine %d add %d: %s %s "
		       "host_bits 0x%x buf_bits 0x%x type %d\n", mapping, step,
		       (unsigned long)(size >> 20), (unsigned long)addr_align(view), -engine_err,
		       -add_err, s ? s->failed : "skipped", s ? hm_vk_result_name(s->res) : "-",
		       s ? s->host_bits : 0, s ? s->buf_bits : 0, s ? s->type : -1);
}

/*
 * A control that imports on every driver seen (2 MiB anonymous private,
 * written): run first and last, so that a driver refusing everything
 * after some earlier failure shows as control_last failing.
 */
static void probe_control(struct hm_vk *vk, bool json, const char *step)
{
	const uint64_t size = 2ull << 20;
	struct import_steps s;
	void *p = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

	if (p == MAP_FAILED) {
		print_step(json, vk->props.deviceName, "anonymous_private", step, size, NULL, -ENOMEM, 0,
			   NULL);
		return;
	}
	memset(p, 1, size);
	import_steps(vk, p, size, &s);
	print_step(json, vk->props.deviceName, "anonymous_private", step, size, p, 0, 0, &s);
	munmap(p, size);
}

/*
 * The matrix (Documentation/engine.rst, Home imports): uffd-async spaces
 * of 2, 16 and 64 MiB; (a) the device view imported step by step before
 * any write, (b) the same after every page was written through the guest
 * mapping, (c) hm_engine_add_space() on a fresh engine, (d) on one engine
 * reused by every probe; after (c) and (d) the view (populated by
 * add_space) is imported step by step again, so that an add_space failure
 * whose view imports is something else the engine allocated.  For
 * comparison the probe's own memfd MAP_SHARED second mapping (the first
 * one written or not), plain and with the view's madvise flags
 * (MADV_NOHUGEPAGE, MADV_DONTFORK).
 */
static void probe_matrix(struct hm_vk *vk, bool json)
{
	static const uint64_t sizes[3] = { 2ull << 20, 16ull << 20, 64ull << 20 };
	struct hm_engine_params ep = { .flags = HM_ENGINE_NO_MIRRORS | HM_ENGINE_NO_TIMESTAMPS };
	const char *vkname = vk->props.deviceName;
	struct hm_engine *shared = NULL;
	int shared_err = hm_engine_new(vk, &ep, &shared);
	long pg = sysconf(_SC_PAGESIZE);
	uint64_t ps = pg > 0 ? (uint64_t)pg : 4096;

	probe_control(vk, json, "control_first");

	for (int z = 0; z < 3; z++) {
		uint64_t size = sizes[z];

		for (int step = 0; step < 4; step++) {
			static const char *const sname[4] = {
				"a_view_unwritten", "b_view_after_guest_write",
				"c_add_space_fresh_engine", "d_add_space_reused_engine",
			};
			struct hm_space_params spp = { .size = size, .backend = HM_BACKEND_UFFD_ASYNC };
			struct hm_space *sp = NULL;
			struct hm_engine *fresh = NULL;
			struct import_steps s;
			void *view = NULL;
			int eerr = 0, aerr = 0, err;

			err = hm_space_new(&spp, &sp);
			if (!err)
				err = hm_space_device_view(sp, &view);
			if (err) {
				print_step(json, vkname, "uffd_async", sname[step], size, NULL, err, 0, NULL);
				hm_space_free(sp);
				continue;
			}
			if (step == 1) {
				volatile uint8_t *g = hm_space_addr(sp);

				for (uint64_t off = 0; off < size; off += ps)
					g[off] = 1;
			}
			if (step >= 2) {
				struct hm_engine *e;
				uint32_t id;

				if (step == 2) {
					eerr = hm_engine_new(vk, &ep, &fresh);
					e = fresh;
				} else {
					eerr = shared_err;
					e = shared;
				}
				aerr = eerr ? 0 : hm_engine_add_space(e, sp, 0, &id);
				if (!eerr && !aerr)
					hm_engine_remove_space(e, id);
			}
			import_steps(vk, view, size, &s);
			print_step(json, vkname, "uffd_async", sname[step], size, view, eerr, aerr, &s);
			hm_engine_free(fresh);
			hm_space_free(sp);
		}
		for (int m = 0; m < 8; m++) {
			static const char *const mname[8] = {
				"memfd_second_unwritten", "memfd_second_written",
				"memfd_second_madvised_unwritten", "memfd_second_madvised_written",
				"memfd_second_at_size_align_unwritten", "memfd_second_at_size_align_written",
				"memfd_second_at_4k_only_unwritten", "memfd_second_at_4k_only_written",
			};
			int fd = memfd_create("hm-probe", MFD_CLOEXEC);
			void *first = MAP_FAILED, *second = MAP_FAILED;
			struct import_steps s;

			if (fd >= 0 && !ftruncate(fd, size)) {
				first = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
				if (m < 4) {
					second = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
				} else {
					/* placed: at a multiple of size, or at one plus 4 KiB
					 * (aligned to 4 KiB, to nothing larger) */
					uint64_t span = 3 * size;
					uint8_t *res = mmap(NULL, span, PROT_NONE,
							    MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);

					if (res != MAP_FAILED) {
						uint8_t *at = (uint8_t *)(((uintptr_t)res + size - 1) &
									  ~(uintptr_t)(size - 1));

						if (m >= 6)
							at += 4096;
						/* keep only [at, at + size) reserved, then map over it */
						second = mmap(at, size, PROT_READ | PROT_WRITE,
							      MAP_SHARED | MAP_FIXED, fd, 0);
						if (second != MAP_FAILED) {
							if (at > res)
								munmap(res, at - res);
							munmap(at + size, res + span - (at + size));
						} else {
							munmap(res, span);
						}
					}
				}
			}
			if (first == MAP_FAILED || second == MAP_FAILED) {
				print_step(json, vkname, "memfd_probe", mname[m], size, NULL, -ENOENT, 0, NULL);
			} else {
				if (m >= 2) {
					madvise(first, size, MADV_NOHUGEPAGE);
					madvise(second, size, MADV_NOHUGEPAGE);
					madvise(second, size, MADV_DONTFORK);
				}
				if (m & 1)
					for (uint64_t off = 0; off < size; off += ps)
						((volatile uint8_t *)first)[off] = 1;
				import_steps(vk, second, size, &s);
				print_step(json, vkname, "memfd_probe", mname[m], size, second, 0, 0, &s);
			}
			if (first != MAP_FAILED)
				munmap(first, size);
			if (second != MAP_FAILED)
				munmap(second, size);
			if (fd >= 0)
				close(fd);
		}
	}
	probe_control(vk, json, "control_last");
	/* does one refused import (NVIDIA refuses a read-only file mapping)
	 * make the driver refuse what it took before? */
	{
		char path[] = "/tmp/hm-probe-XXXXXX";
		const uint64_t size = 2ull << 20;
		int fd = mkstemp(path);
		void *p = MAP_FAILED;
		struct import_steps s;

		if (fd >= 0) {
			unlink(path);
			if (!ftruncate(fd, size))
				p = mmap(NULL, size, PROT_READ, MAP_PRIVATE, fd, 0);
		}
		if (p != MAP_FAILED) {
			import_steps(vk, p, size, &s);
			print_step(json, vkname, "file_private_readonly", "readonly_file", size, p, 0, 0, &s);
			munmap(p, size);
		}
		if (fd >= 0)
			close(fd);
	}
	probe_control(vk, json, "control_after_readonly_file");
	{
		struct hm_space_params spp = { .size = 2ull << 20, .backend = HM_BACKEND_UFFD_ASYNC };
		struct hm_space *sp = NULL;
		struct import_steps s;
		void *view = NULL;

		if (!hm_space_new(&spp, &sp) && !hm_space_device_view(sp, &view)) {
			import_steps(vk, view, 2ull << 20, &s);
			print_step(json, vkname, "uffd_async", "a_view_after_readonly_file", 2ull << 20,
				   view, 0, 0, &s);
		}
		hm_space_free(sp);
	}
	hm_engine_free(shared);
}

/*
 * Which host memory the device imports (VK_EXT_external_memory_host): one
 * JSON object (or line) per kind of mapping, and whether dma-buf import
 * exists at all.
 */
static int probe_imports(bool json)
{
	struct hm_vk_params vp = { .validation = -1, .flags = HM_VK_NO_HOST_IMPORT };
	const size_t len = 2u << 20;
	struct hm_engine_params ep = { .flags = HM_ENGINE_NO_MIRRORS | HM_ENGINE_NO_TIMESTAMPS };
	struct hm_engine *e = NULL;
	struct hm_vk *vk;
	int err, engine_err;

	err = hm_vk_new(&vp, &vk);
	if (err) {
		fprintf(stderr, "mirror: no Vulkan device: %s\n", strerror(-err));
		return err;
	}
	/* the *_populated cases go through hm_engine_add_space() itself (the
	 * device view's pages populated, then imported), on fresh spaces
	 * whose pages were never written */
	engine_err = hm_engine_new(vk, &ep, &e);
	/* the read-only file last: on the H200 every import after it was
	 * refused in the same process (the matrix's readonly_file and
	 * control_after_readonly_file test whether it poisons the driver) */
	for (int kk = 0; kk < 13; kk++) {
		static const int order[13] = { 0, 1, 2, 3, 5, 6, 7, 8, 9, 10, 11, 12, 4 };
		const int k = order[kk];
		static const char *const name[13] = {
			"anonymous_private", "anonymous_shared", "memfd_shared", "memfd_private",
			"file_private_readonly", "device_view_uffd_async", "device_view_uffd_sync",
			"device_view_mprotect", "device_view_kmod",
			"device_view_uffd_async_populated", "device_view_uffd_sync_populated",
			"device_view_mprotect_populated", "device_view_kmod_populated",
		};
		static const enum hm_backend bk[4] = { HM_BACKEND_UFFD_ASYNC, HM_BACKEND_UFFD_SYNC,
						       HM_BACKEND_MPROTECT, HM_BACKEND_KMOD };
		struct hm_vk_buffer buf;
		struct hm_space *sp = NULL;
		void *p = MAP_FAILED;
		int fd = -1, r;

		switch (k) {
		case 0:
			p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
			break;
		case 1:
			p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
			break;
		case 2: case 3:
			fd = memfd_create("hm-probe", 0);
			if (fd >= 0 && !ftruncate(fd, len))
				p = mmap(NULL, len, PROT_READ | PROT_WRITE,
					 k == 2 ? MAP_SHARED : MAP_PRIVATE, fd, 0);
			break;
		case 4: {
			char path[] = "/tmp/hm-probe-XXXXXX";

			fd = mkstemp(path);
			if (fd >= 0) {
				unlink(path);
				if (!ftruncate(fd, len))
					p = mmap(NULL, len, PROT_READ, MAP_PRIVATE, fd, 0);
			}
			break;
		}
		default: {
			struct hm_space_params spp = { .size = len, .backend = bk[(k - 5) % 4] };

			if (!hm_space_new(&spp, &sp) && hm_space_device_view(sp, &p))
				p = MAP_FAILED;
			break;
		}
		}
		if (p == MAP_FAILED) {
			r = -ENOENT;    /* that mapping cannot be made here */
		} else if (k >= 9) {
			uint32_t id;

			r = engine_err;
			if (!r)
				r = hm_engine_add_space(e, sp, 0, &id);
			if (!r)
				hm_engine_remove_space(e, id);
		} else {
			if (k < 5 && k != 4)
				memset(p, 1, len);
			r = hm_vk_import_host(vk, p, len, &buf);
			if (!r)
				hm_vk_buffer_free(vk, &buf);
		}
		if (json)
			printf("{\"bench\":\"mirror\",\"case\":\"import\",\"device\":\"%s\","
			       "\"mapping\":\"%s\",\"imported\":%s,\"errno\":%d,\"changed_bytes\":0,"
			       "\"copied_home_bytes\":0,\"mismatches\":0}\n", vk->props.deviceName, name[k],
			       r ? "false" : "true", -r);
		else
			printf("import %-34s %s\n", name[k],
			       r == -ENOENT ? "(mapping unavailable here)" : r ? strerror(-r) : "imported");
		if (sp)
			hm_space_free(sp);
		else if (p != MAP_FAILED)
			munmap(p, len);
		if (fd >= 0)
			close(fd);
	}
	if (json)
		printf("{\"bench\":\"mirror\",\"case\":\"dmabuf\",\"device\":\"%s\","
		       "\"VK_EXT_external_memory_dma_buf\":%s,\"min_import_align\":%lu,"
		       "\"changed_bytes\":0,\"copied_home_bytes\":0,\"mismatches\":0}\n",
		       vk->props.deviceName, vk->has_dmabuf_import ? "true" : "false",
		       (unsigned long)vk->min_import_align);
	else
		printf("dma-buf import: %s; minImportedHostPointerAlignment %lu\n",
		       vk->has_dmabuf_import ? "yes" : "no", (unsigned long)vk->min_import_align);
	hm_engine_free(e);
	e = NULL;
	probe_matrix(vk, json);
	hm_vk_free(vk);
	return 0;
}

/* the matrix alone, in a process that imported nothing before */
static int probe_import_matrix(bool json)
{
	struct hm_vk_params vp = { .validation = -1, .flags = HM_VK_NO_HOST_IMPORT };
	struct hm_vk *vk;
	int err = hm_vk_new(&vp, &vk);

	if (err) {
		fprintf(stderr, "mirror: no Vulkan device: %s\n", strerror(-err));
		return err;
	}
	probe_matrix(vk, json);
	hm_vk_free(vk);
	return 0;
}

static uint64_t parse_size(const char *s)
{
	char *end;
	uint64_t v = strtoull(s, &end, 0);

	switch (*end) {
	case 'g': case 'G': v <<= 30; break;
	case 'm': case 'M': v <<= 20; break;
	case 'k': case 'K': v <<= 10; break;
	default: break;
	}
	return v;
}

static void usage(void)
{
	printf("usage: hmirror-bench mirror [--json] [--size BYTES[K|M|G]] [--backend NAME]\n"
	       "       [--groups N] [--steps N] [--rounds N] [--chunk-shift N]\n"
	       "       [--copy-back BYTES] [--quick]\n"
	       "       hmirror-bench mirror --imports [--json]   (which host memory imports)\n"
	       "       hmirror-bench mirror --import-matrix [--json]   (the import steps only)\n"
	       "       hmirror-bench mirror --tiers N,... [--rounds N] [--json]   (the two tiers of\n"
	       "                    modules of N loads: the compact compile, a new pipeline's first\n"
	       "                    dispatch, the switch; medians of --rounds rounds, 3 by default)\n"
	       "  --window     dense (default) | sparse: the mirror window bound sparse where the\n"
	       "               device has sparseResidencyAliased (stats: window_sparse)\n"
	       "  --size       working set, 64M..4G (default 64M)\n"
	       "  --backend    uffd-async (default), uffd-sync, mprotect, kmod, auto\n"
	       "  --groups     workgroups of 64 lanes (default 128)\n"
	       "  --steps      extra steps measured per lane (default 64)\n"
	       "env: HMIRROR_DEVICE (name substring or index), HMIRROR_VALIDATION=1\n");
}

/*
 * The chase of mirror.spvasm ("chase": cur = base + out[i]; steps times
 * cur = base + *(u32 *)cur; out[i] = cur) with its load through
 * hm_spirv_emit_load(), so that the engine can build either tier of it.
 * Same push block: the table's and window's words, then USER_WORDS.
 */
static int chase_site_build(uint32_t **ret_w, size_t *ret_n)
{
	const int F = HM_SPV_SEC_FUNCTION;
	struct hm_spirv_module *m;
	struct hm_spirv_table_ids t;
	struct hm_spirv_window_ids w;
	uint32_t push[HM_DEVICE_TABLE_PUSH_WORDS + USER_WORDS], gidx, u32, u64, bl, psb;
	uint32_t base, out, oaddr, start, entry_l, header, body, merge, cur, s, next, s1, v;
	int r = hm_spirv_module_new(&m);

	if (r)
		return r;
	u32 = hm_spirv_type_int(m, 32, false);
	u64 = hm_spirv_type_int(m, 64, false);
	bl = hm_spirv_type_bool(m);
	psb = hm_spirv_type_pointer(m, SpvStorageClassPhysicalStorageBuffer, u32);
	entry_l = hm_spirv_compute_main(m, HM_DEVICE_TABLE_PUSH_WORDS + USER_WORDS, 64, push, &gidx);
	hm_spirv_push_ids(m, push, &t, &w);
#define J(lo, hi) HM_SPV_OP(m, F, SpvOpBitwiseOr, u64, HM_SPV_OP(m, F, SpvOpUConvert, u64, lo), \
			    HM_SPV_OP(m, F, SpvOpShiftLeftLogical, u64, \
				      HM_SPV_OP(m, F, SpvOpUConvert, u64, hi), \
				      hm_spirv_const_u32(m, 32)))
	base = J(push[HM_DEVICE_TABLE_PUSH_WORDS], push[HM_DEVICE_TABLE_PUSH_WORDS + 1]);
	out = J(push[HM_DEVICE_TABLE_PUSH_WORDS + 2], push[HM_DEVICE_TABLE_PUSH_WORDS + 3]);
#undef J
	oaddr = HM_SPV_OP(m, F, SpvOpIAdd, u64, out,
			  HM_SPV_OP(m, F, SpvOpShiftLeftLogical, u64,
				    HM_SPV_OP(m, F, SpvOpUConvert, u64, gidx),
				    hm_spirv_const_u32(m, 2)));
	start = HM_SPV_OP(m, F, SpvOpIAdd, u64, base,
			  HM_SPV_OP(m, F, SpvOpUConvert, u64,
				    HM_SPV_OP(m, F, SpvOpLoad, u32,
					      HM_SPV_OP(m, F, SpvOpConvertUToPtr, psb, oaddr),
					      SpvMemoryAccessAlignedMask, 4)));
	header = hm_spirv_id(m);
	body = hm_spirv_id(m);
	merge = hm_spirv_id(m);
	uint32_t cont = hm_spirv_id(m);

	cur = hm_spirv_id(m);
	s = hm_spirv_id(m);
	next = hm_spirv_id(m);
	s1 = hm_spirv_id(m);
	HM_SPV(m, F, SpvOpBranch, header);
	HM_SPV(m, F, SpvOpLabel, header);
	HM_SPV(m, F, SpvOpPhi, u64, cur, start, entry_l, next, cont);
	HM_SPV(m, F, SpvOpPhi, u32, s, hm_spirv_const_u32(m, 0), entry_l, s1, cont);
	v = HM_SPV_OP(m, F, SpvOpULessThan, bl, s, push[HM_DEVICE_TABLE_PUSH_WORDS + 4]);
	HM_SPV(m, F, SpvOpLoopMerge, merge, cont, SpvLoopControlMaskNone);
	HM_SPV(m, F, SpvOpBranchConditional, v, body, merge);
	HM_SPV(m, F, SpvOpLabel, body);
	r = hm_spirv_emit_load(m, &t, &w, cur, 1, &v);
	HM_SPV(m, F, SpvOpBranch, cont);
	HM_SPV(m, F, SpvOpLabel, cont);
	HM_SPV(m, F, SpvOpIAdd, u64, next, base, HM_SPV_OP(m, F, SpvOpUConvert, u64, v));
	HM_SPV(m, F, SpvOpIAdd, u32, s1, s, hm_spirv_const_u32(m, 1));
	HM_SPV(m, F, SpvOpBranch, header);
	HM_SPV(m, F, SpvOpLabel, merge);
	HM_SPV(m, F, SpvOpStore, HM_SPV_OP(m, F, SpvOpConvertUToPtr, psb, oaddr),
	       HM_SPV_OP(m, F, SpvOpUConvert, u32, cur), SpvMemoryAccessAlignedMask, 4);
	HM_SPV(m, F, SpvOpReturn);
	hm_spirv_inst(m, F, SpvOpFunctionEnd, NULL, 0);
	if (!r)
		r = hm_spirv_module_finish(m, ret_w, ret_n);
	hm_spirv_module_free(m);
	return r;
}

/*
 * --tiers: modules of nr loads in straight-line code (each address the
 * last word loaded plus salt + i, masked into the space; salt makes every
 * module new to the driver's cache), the last word stored to out[lane]:
 * raw (device addresses, never dispatched) or through the load call site.
 * Push: the table's and window's words, then base lo/hi, out lo/hi.
 */
static int sites_build(bool raw, uint32_t nr, uint32_t salt, uint32_t mask, uint32_t **ret_w,
		       size_t *ret_n)
{
	const int F = HM_SPV_SEC_FUNCTION;
	struct hm_spirv_module *m;
	struct hm_spirv_table_ids t;
	struct hm_spirv_window_ids w;
	uint32_t push[HM_DEVICE_TABLE_PUSH_WORDS + 4], gidx, u32, u64, psb, base, out, off, v;
	int r = hm_spirv_module_new(&m);

	if (r)
		return r;
	u32 = hm_spirv_type_int(m, 32, false);
	u64 = hm_spirv_type_int(m, 64, false);
	psb = hm_spirv_type_pointer(m, SpvStorageClassPhysicalStorageBuffer, u32);
	hm_spirv_compute_main(m, HM_DEVICE_TABLE_PUSH_WORDS + 4, 64, push, &gidx);
	hm_spirv_push_ids(m, push, &t, &w);
#define J(lo, hi) HM_SPV_OP(m, F, SpvOpBitwiseOr, u64, HM_SPV_OP(m, F, SpvOpUConvert, u64, lo), \
			    HM_SPV_OP(m, F, SpvOpShiftLeftLogical, u64, \
				      HM_SPV_OP(m, F, SpvOpUConvert, u64, hi), \
				      hm_spirv_const_u32(m, 32)))
	base = J(push[HM_DEVICE_TABLE_PUSH_WORDS], push[HM_DEVICE_TABLE_PUSH_WORDS + 1]);
	out = J(push[HM_DEVICE_TABLE_PUSH_WORDS + 2], push[HM_DEVICE_TABLE_PUSH_WORDS + 3]);
#undef J
	off = HM_SPV_OP(m, F, SpvOpShiftLeftLogical, u32, gidx, hm_spirv_const_u32(m, 3));
	for (uint32_t i = 0; i < nr && !r; i++) {
		uint32_t a = HM_SPV_OP(m, F, SpvOpIAdd, u64, base,
				       HM_SPV_OP(m, F, SpvOpUConvert, u64,
						 HM_SPV_OP(m, F, SpvOpBitwiseAnd, u32, off,
							   hm_spirv_const_u32(m, mask))));

		if (raw)
			v = HM_SPV_OP(m, F, SpvOpLoad, u32,
				      HM_SPV_OP(m, F, SpvOpConvertUToPtr, psb, a),
				      SpvMemoryAccessAlignedMask, 4);
		else
			r = hm_spirv_emit_load(m, &t, &w, a, 1, &v);
		off = HM_SPV_OP(m, F, SpvOpIAdd, u32, v, hm_spirv_const_u32(m, salt + i));
	}
	HM_SPV(m, F, SpvOpStore,
	       HM_SPV_OP(m, F, SpvOpConvertUToPtr, psb,
			 HM_SPV_OP(m, F, SpvOpIAdd, u64, out,
				   HM_SPV_OP(m, F, SpvOpShiftLeftLogical, u64,
					     HM_SPV_OP(m, F, SpvOpUConvert, u64, gidx),
					     hm_spirv_const_u32(m, 2)))),
	       off, SpvMemoryAccessAlignedMask, 4);
	HM_SPV(m, F, SpvOpReturn);
	hm_spirv_inst(m, F, SpvOpFunctionEnd, NULL, 0);
	if (!r)
		r = hm_spirv_module_finish(m, ret_w, ret_n);
	hm_spirv_module_free(m);
	return r;
}

/*
 * --tiers N,...: what the two tiers cost a new pipeline of N loads through
 * the call site, beside a raw module of N loads, in b->rounds rounds (3
 * unless --rounds says), every module new (salted).  A round: the compact
 * tier alone (hm_engine_pipeline_new_tiered, compact only: its compile and
 * its first dispatch; lavapipe JIT-compiles there, NVIDIA at the pipeline),
 * and both tiers (the default): the time from hm_engine_pipeline_new() to
 * its first dispatch's return, which must not wait for tier two (at most
 * the compact compile + 10 %), then until tier two is ready and switched
 * to.  The two halves of a round alternate in order, and each round waits
 * for tier two, so a compile never runs beside another.  The target is
 * read two ways: the median first dispatch against the median compact
 * compile alone, and each round's first dispatch against the compact
 * compile of that same pipeline (engine_compact_ms: what the engine's own
 * compile took, the driver's run-to-run spread taken out); where the
 * driver compiles at the first dispatch (lavapipe), against the compact
 * tier's compile and first dispatch together.  One JSON object (or line)
 * per N.
 */
static int run_tiers(struct mb *b, const char *list)
{
	struct hm_vk_params vp = { .validation = -1 };
	struct hm_space_params sp = { .size = 4u << 20, .chunk_shift = 16,
				      .flags = HM_SPACE_POPULATE, .backend = b->backend };
	/* a long limit: lavapipe compiles a module at its first dispatch */
	struct hm_engine_params ep = { .chunk_shift = 16, .hot_marks = 9,
				       .timeout_ns = 600ull * 1000000000 };
	uint32_t salt = (uint32_t)bench_clock_ns(), mask = (4u << 20) - 4, *w0 = NULL, id0;
	uint32_t push0[4];
	char buf[256], *tok, *save;
	size_t nw0;
	int err;

	if (strlen(list) >= sizeof(buf))
		return -EINVAL;
	strcpy(buf, list);
	err = hm_vk_new(&vp, &b->vk);
	if (!err)
		err = hm_space_new(&sp, &b->s);
	if (!err)
		err = hm_engine_new(b->vk, &ep, &b->e);
	if (!err)
		err = hm_engine_add_space(b->e, b->s, GUEST, NULL);
	if (!err)
		err = hm_engine_advise(b->e, GUEST, 4u << 20, HM_ADVICE_READ_MOSTLY);
	if (!err)
		err = hm_vk_buffer_new(b->vk, 64 * 4, HM_VK_MEM_HOST, &b->out);
	if (err)
		return err;
	push0[0] = (uint32_t)GUEST;
	push0[1] = (uint32_t)(GUEST >> 32);
	push0[2] = (uint32_t)b->out.addr;
	push0[3] = (uint32_t)(b->out.addr >> 32);
	memset(hm_space_addr(b->s), 0x11, 4u << 20);
	/* the uploads and the window first, outside every timing */
	err = sites_build(false, 1, salt, mask, &w0, &nw0);
	if (!err)
		err = hm_engine_pipeline_new_tiered(b->e, w0, nw0, "main", 4,
						    HM_PIPELINE_COMPACT_ONLY, &id0);
	free(w0);
	if (!err)
		err = hm_engine_dispatch(b->e, id0, 1, 1, 1, push0, 4, 0);
	if (err)
		return err;
	hm_engine_pipeline_free(b->e, id0);
	if (!b->json)
		printf("device %s: tiers of modules of N loads through the call site, "
		       "medians of %u rounds (ms)\n"
		       "%8s %8s %8s %8s %8s %8s %8s %8s\n", dev_name(b), b->rounds, "loads", "raw",
		       "compact", "spec", "first", "first/c", "first/ec", "tier 2");
	for (tok = strtok_r(buf, ",", &save); tok && !err; tok = strtok_r(NULL, ",", &save)) {
		long n = strtol(tok, NULL, 10);
		struct hm_vk_pipeline rawp;
		uint32_t *w = NULL, id, push[4] = { (uint32_t)GUEST, (uint32_t)(GUEST >> 32),
						    (uint32_t)b->out.addr,
						    (uint32_t)(b->out.addr >> 32) };
		size_t nw;
		/* per round: compact alone (compile, first dispatch), both
		 * tiers (first dispatch, the engine's compact and speculative
		 * compiles, until tier two is switched to), first / engine's
		 * compact */
		double c[MAX_ROUNDS], c1[MAX_ROUNDS], f[MAX_ROUNDS], ec[MAX_ROUNDS];
		double es[MAX_ROUNDS], two[MAX_ROUNDS], fe[MAX_ROUNDS];
		double raw_ms, t0, c_lo = 0, c_hi = 0;
		unsigned switched = 0, r;
		int two_err = 0;

		if (n < 1 || n > 100000)
			return -EINVAL;
		/* raw */
		err = sites_build(true, n, salt += 0x10000, mask, &w, &nw);
		if (err)
			break;
		t0 = bench_clock_ns();
		err = hm_vk_pipeline_new(b->vk, w, nw, "main", 4 * (HM_DEVICE_TABLE_PUSH_WORDS + 4),
					 &rawp);
		raw_ms = (bench_clock_ns() - t0) / 1e6;
		free(w);
		if (err)
			break;
		hm_vk_pipeline_free(b->vk, &rawp);
		for (r = 0; r < b->rounds && !err; r++) {
			for (int half = 0; half < 2 && !err; half++) {
				bool both = (half + r) & 1;	/* alternate the order */
				struct hm_engine_pipeline_info pi;

				err = sites_build(false, n, salt += 0x10000, mask, &w, &nw);
				if (err)
					break;
				t0 = bench_clock_ns();
				if (both)
					err = hm_engine_pipeline_new(b->e, w, nw, "main", 4, &id);
				else
					err = hm_engine_pipeline_new_tiered(b->e, w, nw, "main", 4,
									    HM_PIPELINE_COMPACT_ONLY,
									    &id);
				if (!both)
					c[r] = (bench_clock_ns() - t0) / 1e6;
				free(w);
				if (err)
					break;
				if (!both) {
					t0 = bench_clock_ns();
					err = hm_engine_dispatch(b->e, id, 1, 1, 1, push, 4, 0);
					c1[r] = (bench_clock_ns() - t0) / 1e6;
					hm_engine_pipeline_free(b->e, id);
					continue;
				}
				err = hm_engine_dispatch(b->e, id, 1, 1, 1, push, 4, 0);
				f[r] = (bench_clock_ns() - t0) / 1e6;
				if (!err)
					err = hm_engine_pipeline_wait(b->e, id, 600ull * 1000000000);
				if (!err)
					err = hm_engine_dispatch(b->e, id, 1, 1, 1, push, 4, 0);
				if (err)
					fprintf(stderr, "mirror: tiers of %ld loads: %s\n", n,
						strerror(-err));
				two[r] = (bench_clock_ns() - t0) / 1e6;
				if (!err)
					err = hm_engine_pipeline_info(b->e, id, &pi);
				hm_engine_pipeline_free(b->e, id);
				if (err)
					break;
				switched += pi.tier == HM_TIER_SPECULATIVE;
				if (pi.tier_two_error)
					two_err = pi.tier_two_error;
				ec[r] = pi.ns_compile_compact / 1e6;
				es[r] = pi.ns_compile_speculative / 1e6;
				fe[r] = ec[r] > 0 ? f[r] / ec[r] : 0;
			}
			if (!err && b->json) {	/* each round as it ends: a time limit keeps it */
				printf("{\"bench\":\"mirror\",\"case\":\"tiers_round\",\"device\":\"%s\","
				       "\"loads\":%ld,\"round\":%u,\"compact_compile_ms\":%.1f,"
				       "\"compact_first_dispatch_ms\":%.1f,\"first_dispatch_ms\":%.1f,"
				       "\"engine_compact_ms\":%.1f,\"engine_speculative_ms\":%.1f,"
				       "\"tier_two_switched_ms\":%.1f}\n", dev_name(b), n, r + 1,
				       c[r], c1[r], f[r], ec[r], es[r], two[r]);
				fflush(stdout);
			}
		}
		if (err)
			break;
		if (switched != b->rounds)
			b->failed = 1;
		{
			double mc, mc1, mf, mec, mes, mtwo, mfe;

			c_lo = c_hi = c[0];
			for (r = 1; r < b->rounds; r++) {
				c_lo = c[r] < c_lo ? c[r] : c_lo;
				c_hi = c[r] > c_hi ? c[r] : c_hi;
			}
			mc = bench_median(c, b->rounds);
			mc1 = bench_median(c1, b->rounds);
			mf = bench_median(f, b->rounds);
			mec = bench_median(ec, b->rounds);
			mes = bench_median(es, b->rounds);
			mtwo = bench_median(two, b->rounds);
			mfe = bench_median(fe, b->rounds);
			if (b->json)
				printf("{\"bench\":\"mirror\",\"case\":\"tiers\",\"device\":\"%s\","
				       "\"loads\":%ld,\"rounds\":%u,\"raw_compile_ms\":%.1f,"
				       "\"compact_compile_ms\":%.1f,\"compact_compile_min_ms\":%.1f,"
				       "\"compact_compile_max_ms\":%.1f,"
				       "\"speculative_compile_ms\":%.1f,\"first_dispatch_ms\":%.1f,"
				       "\"first_dispatch_vs_compact\":%.3f,"
				       "\"first_dispatch_vs_engine_compact\":%.4f,"
				       "\"first_dispatch_vs_compact_first\":%.3f,"
				       "\"tier_two_switched_ms\":%.1f,\"engine_compact_ms\":%.1f,"
				       "\"engine_speculative_ms\":%.1f,\"compact_first_dispatch_ms\":%.1f,"
				       "\"switched\":%s,\"tier_two_error\":%d}\n",
				       dev_name(b), n, b->rounds, raw_ms, mc, c_lo, c_hi, mes, mf,
				       mc > 0 ? mf / mc : 0, mfe, mc + mc1 > 0 ? mf / (mc + mc1) : 0,
				       mtwo, mec, mes, mc1,
				       switched == b->rounds ? "true" : "false", two_err);
			else
				printf("%8ld %8.1f %8.1f %8.1f %8.1f %8.3f %8.4f %8.1f%s\n", n, raw_ms,
				       mc, mes, mf, mc > 0 ? mf / mc : 0, mfe, mtwo,
				       switched == b->rounds ? "" : "  NOT SWITCHED");
		}
		fflush(stdout);
	}
	if (!err && hm_vk_validation_count(b->vk))
		b->failed = 1;
	return err;
}

static int run(struct mb *b)
{
	struct hm_vk_params vp = { .validation = -1,
				   .flags = b->sparse_window ? HM_VK_SPARSE : 0 };
	struct hm_space_params sp = { .size = b->size, .chunk_shift = b->shift,
				      .flags = HM_SPACE_POPULATE, .backend = b->backend };
	struct hm_engine_params ep = { .chunk_shift = b->shift, .mirror_budget = 2 * b->size,
				       .hot_marks = 9 /* mirror by advice only */ };
	static const char *const cases[3] = { "scattered", "coalesced", "tree" };
	static const int progs[3] = { P_CHASE, P_COAL, P_TREE };
	unsigned lanes = 64 * b->groups;
	uint32_t *home_out[3] = { 0 }, *mir_out;
	double home_ns[3], mir_ns[3], site_ns[2];
	const char *why;
	int err;

	if (b->backend != HM_BACKEND_AUTO && hm_backend_probe(b->backend, &why)) {
		fprintf(stderr, "mirror: backend %s unavailable (%s); using the best available\n",
			hm_backend_name(b->backend), why ? why : "?");
		sp.backend = HM_BACKEND_AUTO;
	}
	err = hm_vk_new(&vp, &b->vk);
	if (err) {
		fprintf(stderr, "mirror: no Vulkan device: %s\n", strerror(-err));
		return err;
	}
	{
		/* mirrors and twins (2 x the working set) must fit the device */
		uint64_t heap = 0;
		uint32_t type;

		if (!hm_vk_memory_type(b->vk, ~0u, HM_VK_MEM_DEVICE, &type))
			heap = hm_vk_heap_size(b->vk, type);
		if (b->json)
			printf("{\"bench\":\"mirror\",\"case\":\"device\",\"device\":\"%s\","
			       "\"device_local_heap\":%lu,\"max_alloc\":%lu,\"max_buffer\":%lu,"
			       "\"min_import_align\":%lu,\"working_set\":%lu,\"changed_bytes\":0,"
			       "\"copied_home_bytes\":0,\"mismatches\":0}\n", dev_name(b),
			       (unsigned long)heap, (unsigned long)b->vk->max_alloc,
			       (unsigned long)b->vk->max_buffer, (unsigned long)b->vk->min_import_align,
			       (unsigned long)b->size);
		if (2 * b->size > heap) {
			b->skip_mirrors = true;
			fprintf(stderr, "mirror: SKIP mirrored, upload and copy-back at %lu MiB: the "
				"device-local heap (%lu MiB) cannot hold mirrors + twins (%lu MiB); "
				"home and raw cases only\n", (unsigned long)(b->size >> 20),
				(unsigned long)(heap >> 20), (unsigned long)(2 * b->size >> 20));
			if (b->json)
				printf("{\"bench\":\"mirror\",\"case\":\"skipped\",\"device\":\"%s\","
				       "\"working_set\":%lu,\"reason\":\"device-local heap %lu bytes < "
				       "mirrors + twins %lu bytes\",\"changed_bytes\":0,"
				       "\"copied_home_bytes\":0,\"mismatches\":0}\n", dev_name(b),
				       (unsigned long)b->size, (unsigned long)heap,
				       (unsigned long)(2 * b->size));
			ep.flags |= HM_ENGINE_NO_MIRRORS;
			ep.mirror_budget = 0;
		}
	}
	err = hm_space_new(&sp, &b->s);
	if (err) {
		fprintf(stderr, "mirror: hm_space_new: %s\n", strerror(-err));
		return err;
	}
	b->mem = hm_space_addr(b->s);
	b->tree_off = b->size / 2;
	b->chase_words = b->tree_off / 4;
	b->tree_nodes = (b->size - b->tree_off) / 16;
	perm_init(&b->pc, b->chase_words, 1);
	perm_init(&b->pt, b->tree_nodes, 2);
	b->starts = calloc(lanes, sizeof(*b->starts));
	if (!b->starts)
		return -ENOMEM;
	{
		long nc = sysconf(_SC_NPROCESSORS_ONLN);

		b->threads = nc < 1 ? 1 : nc > 32 ? 32 : (unsigned)nc;
	}
	fill_or_check(b, true);
	err = hm_engine_new(b->vk, &ep, &b->e);
	if (err) {
		fprintf(stderr, "mirror: hm_engine_new: %s\n", strerror(-err));
		return err;
	}
	err = hm_engine_add_space(b->e, b->s, GUEST, NULL);
	if (err) {
		fprintf(stderr, "mirror: import of the space refused: %s\n", strerror(-err));
		return err;
	}
	for (int p = 0; p < NR_SPVASM_P; p++) {
		err = hm_engine_pipeline_new(b->e, hm_bench_mirror_spv, hm_bench_mirror_spv_words,
					     entry[p], USER_WORDS, &b->pipe[p]);
		if (err) {
			fprintf(stderr, "mirror: pipeline %s: %s\n", entry[p], strerror(-err));
			return err;
		}
	}
	{
		uint32_t *w;
		size_t n;

		err = chase_site_build(&w, &n);
		if (!err)
			err = hm_engine_pipeline_new_tiered(b->e, w, n, "main", USER_WORDS,
							    HM_PIPELINE_SPECULATIVE_ONLY,
							    &b->pipe[P_SITE]);
		if (!err)
			err = hm_engine_pipeline_new_tiered(b->e, w, n, "main", USER_WORDS,
							    HM_PIPELINE_COMPACT_ONLY,
							    &b->pipe[P_SITE_C]);
		free(w);
		if (err) {
			fprintf(stderr, "mirror: the call-site chase: %s\n", strerror(-err));
			return err;
		}
	}
	err = hm_vk_buffer_new(b->vk, lanes * 4, HM_VK_MEM_HOST, &b->out);
	if (err)
		return err;
	mir_out = calloc(lanes, 4);
	if (!mir_out)
		return -ENOMEM;
	if (!b->json)
		printf("device %s, backend %s, working set %lu MiB, chunk %u KiB, %u lanes\n",
		       dev_name(b), hm_backend_name(hm_space_backend(b->s)),
		       (unsigned long)(b->size >> 20), (1u << b->shift) >> 10, lanes);

	/* home: nothing advised, never hot */
	for (int c = 0; c < 3; c++) {
		long bad;

		home_out[c] = calloc(lanes, 4);
		if (!home_out[c])
			return -ENOMEM;
		err = access_cost(b, progs[c], &home_ns[c], home_out[c]);
		if (err)
			return err;
		bad = check_out(b, progs[c], home_out[c]);
		b->mismatches += bad;
		emit_access(b, cases[c], "home", home_ns[c], 0, bad);
	}
	if (b->skip_mirrors) {
		double dev_ns = 0;

		err = bench_raw(b, home_out[0], &dev_ns);
		for (int c = 0; c < 3; c++)
			free(home_out[c]);
		free(mir_out);
		if (b->mismatches || hm_vk_validation_count(b->vk))
			b->failed = 1;
		return err;
	}
	/* uploads (the last one leaves everything mirrored) */
	err = bench_upload(b);
	if (err)
		return err;
	for (int c = 0; c < 3; c++) {
		long bad;

		err = access_cost(b, progs[c], &mir_ns[c], mir_out);
		if (err)
			return err;
		bad = check_out(b, progs[c], mir_out) + (memcmp(mir_out, home_out[c], lanes * 4) ? 1 : 0);
		b->mismatches += bad;
		emit_access(b, cases[c], "mirrored", mir_ns[c], home_ns[c], bad);
	}
	/* the same chase through the load call site (D969a): the speculative
	 * tier reads the window, the compact tier calls the helper */
	for (int c = 0; c < 2; c++) {
		int p = c ? P_SITE_C : P_SITE;
		long bad;

		err = access_cost(b, p, &site_ns[c], mir_out);
		if (err)
			return err;
		bad = check_out(b, P_CHASE, mir_out) + (memcmp(mir_out, home_out[0], lanes * 4) ? 1 : 0);
		b->mismatches += bad;
		emit_access(b, c ? "scattered_site_compact" : "scattered_site", "mirrored", site_ns[c],
			    home_ns[0], bad);
	}
	{
		double dev_ns = 0;

		err = bench_raw(b, home_out[0], &dev_ns);
		if (err)
			return err;
		if (b->json)
			printf("{\"bench\":\"mirror\",\"case\":\"scattered\",\"data\":\"ratios\","
			       "\"mirrored_vs_device_raw\":%.3f,\"home_vs_mirrored\":%.3f,"
			       "\"site_mirrored_vs_device_raw\":%.3f,"
			       "\"site_compact_mirrored_vs_device_raw\":%.3f,"
			       "\"changed_bytes\":0,\"copied_home_bytes\":0,\"mismatches\":0}\n",
			       dev_ns > 0 ? mir_ns[0] / dev_ns : 0, mir_ns[0] > 0 ? home_ns[0] / mir_ns[0] : 0,
			       dev_ns > 0 ? site_ns[0] / dev_ns : 0, dev_ns > 0 ? site_ns[1] / dev_ns : 0);
		else
			printf("scattered  mirrored / plain device memory %.2fx (through the load call "
			       "site: speculative %.2fx, compact %.2fx), home / mirrored %.1fx\n",
			       dev_ns > 0 ? mir_ns[0] / dev_ns : 0, dev_ns > 0 ? site_ns[0] / dev_ns : 0,
			       dev_ns > 0 ? site_ns[1] / dev_ns : 0,
			       mir_ns[0] > 0 ? home_ns[0] / mir_ns[0] : 0);
	}
	{
		struct hm_engine_stats st;

		hm_engine_stats(b->e, &st);
		if (st.chunks_mirrored != b->size >> b->shift) {
			fprintf(stderr, "mirror: only %lu chunks mirrored\n",
				(unsigned long)st.chunks_mirrored);
			b->failed = 1;
		}
	}
	err = bench_copy_back(b);
	free(mir_out);
	for (int c = 0; c < 3; c++)
		free(home_out[c]);
	if (err)
		return err;
	{
		struct hm_engine_stats st;

		hm_engine_stats(b->e, &st);
		if (b->json)
			printf("{\"bench\":\"mirror\",\"case\":\"stats\",\"dispatches\":%lu,\"uploads\":%lu,"
			       "\"upload_bytes\":%lu,\"uploads_discarded\":%lu,\"mirrors_dropped_by_guard\":%lu,"
			       "\"thrash_backoffs\":%lu,\"marks_scanned\":%lu,\"bytes_copied_home\":%lu,"
			       "\"window_sparse\":%s,\"window_bytes\":%lu,\"window_binds\":%lu,"
			       "\"window_copies\":%lu,"
			       "\"table_device_local\":%s,\"marks_imported\":%s,\"import_pieces\":%lu,"
			       "\"validation_messages\":%u,\"changed_bytes\":0,\"copied_home_bytes\":0,"
			       "\"mismatches\":%ld}\n",
			       st.dispatches, st.uploads, st.upload_bytes, st.uploads_discarded,
			       st.mirrors_dropped_by_guard, st.thrash_backoffs, st.marks_scanned,
			       st.bytes_copied_home, st.window_sparse ? "true" : "false",
			       (unsigned long)st.window_bytes, (unsigned long)st.window_binds,
			       (unsigned long)st.window_copies, st.table_device_local ? "true" : "false",
			       st.marks_imported ? "true" : "false", st.import_pieces,
			       hm_vk_validation_count(b->vk), b->mismatches);
		else
			printf("stats      %lu dispatches, %lu uploads, table %s, marks %s, %lu import "
			       "pieces, %ld mismatches\n", st.dispatches, st.uploads,
			       st.table_device_local ? "device-local" : "host",
			       st.marks_imported ? "imported" : "host-visible", st.import_pieces,
			       b->mismatches);
	}
	if (b->mismatches || hm_vk_validation_count(b->vk))
		b->failed = 1;
	return 0;
}

int bench_mirror(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "json", no_argument, NULL, 'j' },
		{ "size", required_argument, NULL, 's' },
		{ "backend", required_argument, NULL, 'b' },
		{ "groups", required_argument, NULL, 'g' },
		{ "steps", required_argument, NULL, 'n' },
		{ "rounds", required_argument, NULL, 'r' },
		{ "chunk-shift", required_argument, NULL, 'c' },
		{ "copy-back", required_argument, NULL, 'k' },
		{ "quick", no_argument, NULL, 'q' },
		{ "imports", no_argument, NULL, 'i' },
		{ "import-matrix", no_argument, NULL, 'm' },
		{ "tiers", required_argument, NULL, 't' },
		{ "window", required_argument, NULL, 'w' },
		{ "help", no_argument, NULL, 'h' },
		{ 0 }
	};
	struct mb b = { .size = 64ull << 20, .shift = 16, .groups = 128, .steps = 64, .rounds = 5,
			.backend = HM_BACKEND_UFFD_ASYNC };
	bool imports = false, matrix = false;
	const char *tiers = NULL;
	bool rounds_set = false;
	int c, err;

	optind = 1;
	while ((c = getopt_long(argc, argv, "js:b:g:n:r:c:k:qimt:w:h", opts, NULL)) != -1) {
		switch (c) {
		case 'j': b.json = true; break;
		case 's': b.size = parse_size(optarg); break;
		case 'b':
			if (!strcmp(optarg, "auto"))
				b.backend = HM_BACKEND_AUTO;
			else if (hm_backend_from_name(optarg, &b.backend)) {
				fprintf(stderr, "mirror: unknown backend '%s'\n", optarg);
				return -EINVAL;
			}
			break;
		case 'g': b.groups = strtoul(optarg, NULL, 0); break;
		case 'n': b.steps = strtoul(optarg, NULL, 0); break;
		case 'r': b.rounds = strtoul(optarg, NULL, 0); rounds_set = true; break;
		case 'c': b.shift = strtoul(optarg, NULL, 0); break;
		case 'k': b.copyback = parse_size(optarg); break;
		case 'q': b.size = 16ull << 20; b.rounds = 3; b.steps = 16; b.groups = 32; break;
		case 'i': imports = true; break;
		case 'm': matrix = true; break;
		case 't': tiers = optarg; break;
		case 'w':
			if (strcmp(optarg, "sparse") && strcmp(optarg, "dense")) {
				fprintf(stderr, "mirror: --window sparse|dense\n");
				return -EINVAL;
			}
			b.sparse_window = !strcmp(optarg, "sparse");
			break;
		case 'h': usage(); return 0;
		default: usage(); return -EINVAL;
		}
	}
	if (tiers && !rounds_set)
		b.rounds = 3;
	if (matrix)
		return probe_import_matrix(b.json);
	if (imports)
		return probe_imports(b.json);
	if (b.size < (2ull << b.shift) || b.size % (1ull << b.shift) || b.size > (4ull << 30) ||
	    !b.groups || b.groups > 65535 || !b.steps || !b.rounds || b.rounds > MAX_ROUNDS) {
		fprintf(stderr, "mirror: bad size/groups/steps/rounds\n");
		return -EINVAL;
	}
	if (!b.copyback)
		b.copyback = b.size / 2 < (64ull << 20) ? b.size / 2 : (64ull << 20);
	if (b.copyback > b.size / 2)
		b.copyback = b.size / 2;
	b.copyback &= ~((1ull << b.shift) - 1);
	err = tiers ? run_tiers(&b, tiers) : run(&b);
	hm_vk_buffer_free(b.vk, &b.out);
	free(b.starts);
	hm_engine_free(b.e);
	hm_space_free(b.s);
	hm_vk_free(b.vk);
	if (err) {
		fprintf(stderr, "mirror: %s\n", strerror(-err));
		return err;
	}
	if (b.failed)
		fprintf(stderr, "mirror: FAILED (changed != copied home, mismatches, or validation)\n");
	return b.failed ? -EIO : 0;
}
