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
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include "hmirror/engine.h"
#include "hmirror/vkctx.h"
#include "hmirror/watch.h"

extern const uint32_t hm_bench_mirror_spv[];
extern const size_t hm_bench_mirror_spv_words;

#define GUEST		0x100000000ull
#define USER_WORDS	8
#define MAX_ROUNDS	31

enum { P_CHASE, P_COAL, P_TREE, P_INV, P_RAW, NR_P };
static const char *const entry[NR_P] = { "chase", "coal", "tree", "inv", "chase_raw" };

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
	unsigned inv_rounds;            /* copy-back rounds run (parity of the region) */
	uint32_t inv_words;
	long mismatches;
	int failed;
};

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + ts.tv_nsec;
}

static uint32_t mix(uint32_t x)
{
	x ^= x >> 16;
	x *= 0x7feb352d;
	x ^= x >> 15;
	x *= 0x846ca68b;
	x ^= x >> 16;
	return x;
}

/* The initial value of guest word w (byte offset 4w). */
static uint32_t model_word(const struct mb *b, uint64_t w)
{
	uint64_t off = 4 * w;

	if (off < (uint64_t)b->tree_off)
		return 4 * (mix((uint32_t)w) % b->chase_words);
	{
		uint64_t k = (off - b->tree_off) / 16, part = (w & 3);
		uint32_t child = mix((uint32_t)(2 * k + 1 + (part >> 1))) % b->tree_nodes;
		uint64_t ptr = GUEST + b->tree_off + 16ull * child;

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

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

static uint64_t median(uint64_t *v, unsigned n)
{
	qsort(v, n, sizeof(*v), cmp_u64);
	return v[n / 2];
}

static void emit_access(struct mb *b, const char *cas, const char *data, double ns,
			double home_ns, long mism);

static int dispatch_at(struct mb *b, int p, uint64_t base, unsigned groups, uint32_t steps,
		       uint32_t region, uint64_t *ret_ns)
{
	struct hm_engine_stats s0, s1;
	uint32_t push[USER_WORDS] = {
		(uint32_t)base, (uint32_t)(base >> 32),
		(uint32_t)b->out.addr, (uint32_t)(b->out.addr >> 32),
		steps, region, b->tree_off, b->tree_nodes,
	};
	int err;

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
	*ret_ns = (double)median(d, b->rounds) / ((double)lanes * (s_hi - s_lo));
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

	out = calloc(lanes, 4);
	if (!out)
		return -ENOMEM;
	host = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_POPULATE,
		    -1, 0);
	if (host == MAP_FAILED) {
		free(out);
		return -errno;
	}
	memcpy(host, b->mem, bytes);
	err = hm_vk_import_host(b->vk, host, bytes, &pinned);
	if (!err)
		err = hm_vk_buffer_new(b->vk, bytes, HM_VK_MEM_DEVICE, &dev);
	if (!err)
		err = hm_vk_copy_sync(b->vk, pinned.buf, 0, dev.buf, 0, bytes);
	if (!err)
		err = access_cost_at(b, P_RAW, dev.addr, &ns_dev, out);
	if (!err) {
		bad_dev = memcmp(out, home_out, lanes * 4) ? 1 : 0;
		err = access_cost_at(b, P_RAW, pinned.addr, &ns_host, out);
	}
	if (!err)
		bad_host = memcmp(out, home_out, lanes * 4) ? 1 : 0;
	hm_vk_buffer_free(b->vk, &dev);
	hm_vk_buffer_free(b->vk, &pinned);
	munmap(host, bytes);
	free(out);
	if (err)
		return err;
	b->mismatches += bad_dev + bad_host;
	emit_access(b, "scattered", "device_raw", ns_dev, 0, bad_dev);
	emit_access(b, "scattered", "host_raw", ns_host, 0, bad_host);
	*ret_dev_ns = ns_dev;
	return 0;
}

/* out[] of the last s_hi run against the host model (scattered, tree). */
static long check_out(struct mb *b, int p, const uint32_t *out)
{
	unsigned lanes = 64 * b->groups, steps = 8 + b->steps;
	long bad = 0;

	if (p == P_COAL)
		return 0;       /* compared home vs mirrored instead */
	for (unsigned i = 0; i < lanes; i++) {
		uint64_t cur;

		if (p == P_CHASE) {
			cur = GUEST + 4ull * ((i * 0x9e3779b1u) % b->chase_words);
			for (unsigned s = 0; s < steps; s++)
				cur = GUEST + expect_word(b, (cur - GUEST) / 4);
		} else {
			cur = GUEST + b->tree_off + 16ull * ((i * 0x9e3779b1u) % b->tree_nodes);
			for (unsigned s = 0; s < steps; s++) {
				uint64_t w = (cur - GUEST) / 4 + ((i >> (s & 15)) & 1 ? 2 : 0);

				cur = expect_word(b, w) | (uint64_t)expect_word(b, w + 1) << 32;
			}
		}
		bad += out[i] != (uint32_t)cur;
	}
	return bad;
}

static long check_memory(struct mb *b)
{
	const uint32_t *m = (const uint32_t *)b->mem;
	long bad = 0;

	for (uint64_t w = 0; w < b->size / 4; w++)
		bad += m[w] != expect_word(b, w);
	return bad;
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
		printf(",\"changed_bytes\":0,\"copied_home_bytes\":0,\"mismatches\":%ld}\n", mism);
	} else {
		printf("%-10s %-9s %10.4f ns/lane-access", cas, data, ns);
		if (home_ns > 0)
			printf("  %8.2fx faster than home", ns > 0 ? home_ns / ns : 0);
		printf("%s\n", mism ? "  MISMATCH" : "");
	}
}

static int time_copy(struct mb *b, VkBuffer src, VkBuffer dst, uint64_t bytes, double *ret_gbps)
{
	uint64_t d[MAX_ROUNDS];
	int err;

	for (unsigned r = 0; r < b->rounds; r++) {
		uint64_t t0 = now_ns();

		err = hm_vk_copy_sync(b->vk, src, 0, dst, 0, bytes);
		if (err)
			return err;
		d[r] = now_ns() - t0;
	}
	*ret_gbps = (double)bytes / (double)median(d, b->rounds);
	return 0;
}

static int bench_upload(struct mb *b)
{
	uint64_t copy[MAX_ROUNDS], phase[MAX_ROUNDS], bytes = 0;
	struct hm_vk_buffer pinned = { 0 }, dev = { 0 };
	double plain = 0, eng, engp;
	void *host;
	int err;

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
	eng = (double)bytes / (double)median(copy, b->rounds);
	engp = (double)bytes / (double)median(phase, b->rounds);

	/* the baseline: a plain copy from pinned (imported) host memory */
	host = mmap(NULL, b->size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_POPULATE,
		    -1, 0);
	if (host == MAP_FAILED)
		return -errno;
	memset(host, 0x5a, b->size);
	err = hm_vk_import_host(b->vk, host, b->size, &pinned);
	if (!err)
		err = hm_vk_buffer_new(b->vk, b->size, HM_VK_MEM_DEVICE, &dev);
	if (!err)
		err = time_copy(b, pinned.buf, dev.buf, b->size, &plain);
	hm_vk_buffer_free(b->vk, &dev);
	hm_vk_buffer_free(b->vk, &pinned);
	munmap(host, b->size);
	if (err)
		return err;
	if (b->json)
		printf("{\"bench\":\"mirror\",\"case\":\"upload\",\"device\":\"%s\",\"backend\":\"%s\","
		       "\"working_set\":%lu,\"chunk_shift\":%u,\"rounds\":%u,\"upload_bytes\":%lu,"
		       "\"engine_copy_gbps\":%.3f,\"engine_phase_gbps\":%.3f,\"plain_h2d_gbps\":%.3f,"
		       "\"ratio\":%.4f,\"phase_ratio\":%.4f,\"changed_bytes\":0,\"copied_home_bytes\":0,"
		       "\"mismatches\":0}\n",
		       dev_name(b), hm_backend_name(hm_space_backend(b->s)), (unsigned long)b->size,
		       b->shift, b->rounds, (unsigned long)bytes, eng, engp, plain,
		       plain > 0 ? eng / plain : 0, plain > 0 ? engp / plain : 0);
	else
		printf("upload     engine copy %.2f GB/s (whole phase %.2f), plain pinned H2D %.2f GB/s: "
		       "%.1f%% (%.1f%%)\n", eng, engp, plain, plain > 0 ? 100 * eng / plain : 0,
		       plain > 0 ? 100 * engp / plain : 0);
	return 0;
}

static int bench_copy_back(struct mb *b)
{
	uint64_t ns[MAX_ROUNDS], changed = 0, copied = 0;
	struct hm_vk_buffer pinned = { 0 }, dev = { 0 };
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
	gbps = (double)(4ull * words) / (double)median(ns, b->rounds);
	bad = check_memory(b);
	b->mismatches += bad;

	host = mmap(NULL, b->copyback, PROT_READ | PROT_WRITE,
		    MAP_PRIVATE | MAP_ANONYMOUS | MAP_POPULATE, -1, 0);
	if (host == MAP_FAILED)
		return -errno;
	err = hm_vk_import_host(b->vk, host, b->copyback, &pinned);
	if (!err)
		err = hm_vk_buffer_new(b->vk, b->copyback, HM_VK_MEM_DEVICE, &dev);
	if (!err)
		err = time_copy(b, dev.buf, pinned.buf, b->copyback, &plain);
	hm_vk_buffer_free(b->vk, &dev);
	hm_vk_buffer_free(b->vk, &pinned);
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
 * Which host memory the device imports (VK_EXT_external_memory_host): one
 * JSON object (or line) per kind of mapping, and whether dma-buf import
 * exists at all.
 */
static int probe_imports(bool json)
{
	struct hm_vk_params vp = { .validation = -1, .flags = HM_VK_NO_HOST_IMPORT };
	const size_t len = 2u << 20;
	struct hm_vk *vk;
	int err;

	err = hm_vk_new(&vp, &vk);
	if (err) {
		fprintf(stderr, "mirror: no Vulkan device: %s\n", strerror(-err));
		return err;
	}
	for (int k = 0; k < 9; k++) {
		static const char *const name[9] = {
			"anonymous_private", "anonymous_shared", "memfd_shared", "memfd_private",
			"file_private_readonly", "device_view_uffd_async", "device_view_uffd_sync",
			"device_view_mprotect", "device_view_kmod",
		};
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
			static const enum hm_backend bk[4] = { HM_BACKEND_UFFD_ASYNC, HM_BACKEND_UFFD_SYNC,
							       HM_BACKEND_MPROTECT, HM_BACKEND_KMOD };
			struct hm_space_params spp = { .size = len, .backend = bk[k - 5] };

			if (!hm_space_new(&spp, &sp) && hm_space_device_view(sp, &p))
				p = MAP_FAILED;
			break;
		}
		}
		if (p == MAP_FAILED) {
			r = -ENOENT;    /* that mapping cannot be made here */
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
			printf("import %-24s %s\n", name[k],
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
	       "  --size       working set, 64M..4G (default 64M)\n"
	       "  --backend    uffd-async (default), uffd-sync, mprotect, kmod, auto\n"
	       "  --groups     workgroups of 64 lanes (default 128)\n"
	       "  --steps      extra steps measured per lane (default 64)\n"
	       "env: HMIRROR_DEVICE (name substring or index), HMIRROR_VALIDATION=1\n");
}

static int run(struct mb *b)
{
	struct hm_vk_params vp = { .validation = -1 };
	struct hm_space_params sp = { .size = b->size, .chunk_shift = b->shift,
				      .flags = HM_SPACE_POPULATE, .backend = b->backend };
	struct hm_engine_params ep = { .chunk_shift = b->shift, .mirror_budget = 2 * b->size,
				       .hot_marks = 9 /* mirror by advice only */ };
	static const char *const cases[3] = { "scattered", "coalesced", "tree" };
	static const int progs[3] = { P_CHASE, P_COAL, P_TREE };
	unsigned lanes = 64 * b->groups;
	uint32_t *home_out[3] = { 0 }, *mir_out;
	double home_ns[3], mir_ns[3];
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
	err = hm_space_new(&sp, &b->s);
	if (err) {
		fprintf(stderr, "mirror: hm_space_new: %s\n", strerror(-err));
		return err;
	}
	b->mem = hm_space_addr(b->s);
	b->tree_off = b->size / 2;
	b->chase_words = b->tree_off / 4;
	b->tree_nodes = (b->size - b->tree_off) / 16;
	for (uint64_t w = 0; w < b->size / 4; w++)
		((uint32_t *)b->mem)[w] = model_word(b, w);
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
	for (int p = 0; p < NR_P; p++) {
		err = hm_engine_pipeline_new(b->e, hm_bench_mirror_spv, hm_bench_mirror_spv_words,
					     entry[p], USER_WORDS, &b->pipe[p]);
		if (err) {
			fprintf(stderr, "mirror: pipeline %s: %s\n", entry[p], strerror(-err));
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
	{
		double dev_ns = 0;

		err = bench_raw(b, home_out[0], &dev_ns);
		if (err)
			return err;
		if (b->json)
			printf("{\"bench\":\"mirror\",\"case\":\"scattered\",\"data\":\"ratios\","
			       "\"mirrored_vs_device_raw\":%.3f,\"home_vs_mirrored\":%.3f,"
			       "\"changed_bytes\":0,\"copied_home_bytes\":0,\"mismatches\":0}\n",
			       dev_ns > 0 ? mir_ns[0] / dev_ns : 0, mir_ns[0] > 0 ? home_ns[0] / mir_ns[0] : 0);
		else
			printf("scattered  mirrored / plain device memory %.2fx, home / mirrored %.1fx\n",
			       dev_ns > 0 ? mir_ns[0] / dev_ns : 0, mir_ns[0] > 0 ? home_ns[0] / mir_ns[0] : 0);
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
			       "\"table_device_local\":%s,\"marks_imported\":%s,\"import_pieces\":%lu,"
			       "\"validation_messages\":%u,\"changed_bytes\":0,\"copied_home_bytes\":0,"
			       "\"mismatches\":%ld}\n",
			       st.dispatches, st.uploads, st.upload_bytes, st.uploads_discarded,
			       st.mirrors_dropped_by_guard, st.thrash_backoffs, st.marks_scanned,
			       st.bytes_copied_home, st.table_device_local ? "true" : "false",
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
		{ "help", no_argument, NULL, 'h' },
		{ 0 }
	};
	struct mb b = { .size = 64ull << 20, .shift = 16, .groups = 128, .steps = 64, .rounds = 5,
			.backend = HM_BACKEND_UFFD_ASYNC };
	bool imports = false;
	int c, err;

	optind = 1;
	while ((c = getopt_long(argc, argv, "js:b:g:n:r:c:k:qih", opts, NULL)) != -1) {
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
		case 'r': b.rounds = strtoul(optarg, NULL, 0); break;
		case 'c': b.shift = strtoul(optarg, NULL, 0); break;
		case 'k': b.copyback = parse_size(optarg); break;
		case 'q': b.size = 16ull << 20; b.rounds = 3; b.steps = 16; b.groups = 32; break;
		case 'i': imports = true; break;
		case 'h': usage(); return 0;
		default: usage(); return -EINVAL;
		}
	}
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
	err = run(&b);
	hm_vk_buffer_free(b.vk, &b.out);
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
