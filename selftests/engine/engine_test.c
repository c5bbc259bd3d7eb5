// SPDX-License-Identifier: GPL-2.0
/*
 * Engine tests on lavapipe with the validation layers on (no message
 * allowed).  The reference-model test runs a device program that reads
 * and writes guest memory through the lookup helper while the CPU writes
 * between and during dispatches; after every dispatch guest memory must
 * equal, byte for byte, what a model with no mirrors computes, including
 * bytes the CPU wrote during the dispatch next to bytes the device wrote
 * (false sharing inside one word).  Every userspace backend, mirrors off
 * and on (measured hotness, read-mostly, prefer-device, small budget).
 * Then one test per rule or error path: a raced upload is never published,
 * rule 5, budget exhaustion and eviction, thrash back-off, import refused,
 * device lost.
 */
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <sys/mman.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <spirv/unified1/spirv.h>

#include "kselftest_harness.h"
#include "hmirror/engine.h"
#include "hmirror/lookup.h"
#include "hmirror/vkctx.h"
#include "hmirror/watch.h"
#include "vkfault_test.h"
#include "../../lib/engine/test_hooks.h"

extern const uint32_t hm_test_rw_spv[];
extern const size_t hm_test_rw_spv_words;

/* Generous per-test limits: lavapipe on a loaded machine, or under TCG. */
#undef TEST_TIMEOUT_DEFAULT
#ifdef HM_ENGINE_TEST_VM
#define TEST_TIMEOUT_DEFAULT 300
#define CHUNK_SHIFT	12      /* TCG: small chunks keep each diff cheap */
#define SUBMIT_TIMEOUT_NS (120ull * 1000000000)
#else
#define TEST_TIMEOUT_DEFAULT 120
#define CHUNK_SHIFT	16
#define SUBMIT_TIMEOUT_NS (60ull * 1000000000)
#endif
#define CHUNK		(1u << CHUNK_SHIFT)
#define NR_CHUNKS	16
#define SPACE_BYTES	(NR_CHUNKS * CHUNK)
#define GUEST_BASE	0x100000000ull
#define MAX_LANES	512
#define RW_USER_WORDS	5
#ifdef HM_ENGINE_TEST_VM
#define NR_DISPATCHES	12      /* TCG: slow CPU */
#else
#define NR_DISPATCHES	24
#endif

enum { OP_NONE = 0, OP_STORE32 = 1, OP_STORE8 = 2 };

struct plan_entry { uint32_t roff, woff, op, x; };

struct cpu_write { uint32_t off; uint8_t val; };

struct env {
	struct hm_vk *vk;
	struct hm_engine *e;
	struct hm_space *s;
	uint8_t *mem;                   /* the watched CPU mapping */
	uint8_t *model;
	uint32_t space_id, pipe;
	struct hm_vk_buffer plan;
	uint64_t rng;
	/* the CPU thread of a dispatch */
	pthread_t thr;
	atomic_bool stop;
	atomic_bool go;                 /* the CPU thread may write */
	uint64_t published_at_start;    /* mirrors published at dispatch starts, summed */
	uint32_t *cpu_bytes;            /* offsets the CPU may write during this dispatch */
	size_t nr_cpu_bytes;
	struct cpu_write *log;
	size_t nr_log, cap_log;
	uint64_t thr_rng;
	/* roles of words in the current dispatch */
	uint8_t *role;
	/* the program: rw.spvasm (one form), or rw_build()'s in its tiers */
	enum tier_mode { T_ONE_FORM = 0, T_COMPACT, T_SPEC, T_BOTH } tier;
	uint32_t *rw_w;                 /* rw_build()'s module */
	size_t rw_n;
	struct hm_engine_test_hooks hooks;      /* kept by env_new(), installed on e */
};

static uint64_t rnd(uint64_t *s)
{
	uint64_t x = *s;

	x ^= x << 13;
	x ^= x >> 7;
	x ^= x << 17;
	return *s = x;
}

/* the 32-bit word at byte off of p (any alignment) */
static uint32_t u32_at(const void *p, size_t off)
{
	uint32_t x;

	memcpy(&x, (const char *)p + off, sizeof(x));
	return x;
}

static __attribute__((unused)) uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + ts.tv_nsec;
}

/* in the VM the module is there to load (natively this fails) */
static void maybe_load_module(void)
{
	if (hm_backend_probe(HM_BACKEND_KMOD, NULL) != -ENODEV || getuid() ||
	    system("modprobe -q hmirror 2>/dev/null"))
		return;
	for (int i = 0; i < 200 && access("/dev/hmirror", F_OK); i++)
		usleep(10000);
}

/*
 * rw.spvasm's program built with the append API, its load through the
 * load call site (hm_spirv_emit_load()), so that it has both tiers; its
 * stores as D969's call site: the helper, the store where mapped, the mark
 * (the sink where not).  Push block: the table's and window's words, then
 * base lo/hi, plan lo/hi, n.
 */
#define RW_PUSH_WORDS (HM_DEVICE_TABLE_PUSH_WORDS + RW_USER_WORDS)
#define FN HM_SPV_SEC_FUNCTION

struct rwb {
	struct hm_spirv_module *m;
	uint32_t u32, u64, bl, label;
};

static uint32_t rwb_if(struct rwb *b, uint32_t cond, uint32_t *ret_merge)
{
	uint32_t then = hm_spirv_id(b->m);

	*ret_merge = hm_spirv_id(b->m);
	HM_SPV(b->m, FN, SpvOpSelectionMerge, *ret_merge, SpvSelectionControlMaskNone);
	HM_SPV(b->m, FN, SpvOpBranchConditional, cond, then, *ret_merge);
	HM_SPV(b->m, FN, SpvOpLabel, then);
	return then;
}

static void rwb_endif(struct rwb *b, uint32_t merge)
{
	HM_SPV(b->m, FN, SpvOpBranch, merge);
	HM_SPV(b->m, FN, SpvOpLabel, merge);
}

/* if (op == which) { dev, mark = lookup(g); if (dev) store; mark = 1 } */
static void rwb_store(struct rwb *b, const struct hm_spirv_table_ids *t, uint32_t op,
		      uint32_t which, uint32_t g, uint32_t v)
{
	struct hm_spirv_module *m = b->m;
	uint32_t merge, merge2, dev, mark, p;

	rwb_if(b, HM_SPV_OP(m, FN, SpvOpIEqual, b->bl, op, hm_spirv_const_u32(m, which)),
	       &merge);
	hm_spirv_emit_lookup(m, t, g, &dev, &mark);
	rwb_if(b, HM_SPV_OP(m, FN, SpvOpINotEqual, b->bl, dev, hm_spirv_const_u64(m, 0)),
	       &merge2);
	if (which == OP_STORE32) {
		p = HM_SPV_OP(m, FN, SpvOpConvertUToPtr,
			      hm_spirv_type_pointer(m, SpvStorageClassPhysicalStorageBuffer, b->u32), dev);
		HM_SPV(m, FN, SpvOpStore, p, v, SpvMemoryAccessAlignedMask, 4);
	} else {
		uint32_t u8 = hm_spirv_type_int(m, 8, false);

		p = HM_SPV_OP(m, FN, SpvOpConvertUToPtr,
			      hm_spirv_type_pointer(m, SpvStorageClassPhysicalStorageBuffer, u8), dev);
		HM_SPV(m, FN, SpvOpStore, p, HM_SPV_OP(m, FN, SpvOpUConvert, u8, v),
		       SpvMemoryAccessAlignedMask, 1);
	}
	rwb_endif(b, merge2);
	p = HM_SPV_OP(m, FN, SpvOpConvertUToPtr,
		      hm_spirv_type_pointer(m, SpvStorageClassPhysicalStorageBuffer, b->u32), mark);
	HM_SPV(m, FN, SpvOpStore, p, hm_spirv_const_u32(m, 1), SpvMemoryAccessAlignedMask, 4);
	rwb_endif(b, merge);
}

static int rw_build(uint32_t **ret_w, size_t *ret_n)
{
	struct rwb b = { 0 };
	struct hm_spirv_module *m;
	struct hm_spirv_table_ids t;
	struct hm_spirv_window_ids w;
	uint32_t push[RW_PUSH_WORDS], gidx, merge, base, plan, e, v4, g, v, val[1];
	int r = hm_spirv_module_new(&b.m);

	if (r)
		return r;
	m = b.m;
	hm_spirv_capability(m, 39);            /* Int8 */
	hm_spirv_capability(m, 4448);          /* StorageBuffer8BitAccess */
	hm_spirv_extension(m, "SPV_KHR_8bit_storage");
	b.u32 = hm_spirv_type_int(m, 32, false);
	b.u64 = hm_spirv_type_int(m, 64, false);
	b.bl = hm_spirv_type_bool(m);
	v4 = hm_spirv_type_vector(m, b.u32, 4);
	hm_spirv_compute_main(m, RW_PUSH_WORDS, 64, push, &gidx);
	hm_spirv_push_ids(m, push, &t, &w);
#define J(lo, hi) HM_SPV_OP(m, FN, SpvOpBitwiseOr, b.u64, \
			    HM_SPV_OP(m, FN, SpvOpUConvert, b.u64, lo), \
			    HM_SPV_OP(m, FN, SpvOpShiftLeftLogical, b.u64, \
				      HM_SPV_OP(m, FN, SpvOpUConvert, b.u64, hi), \
				      hm_spirv_const_u32(m, 32)))
	base = J(push[HM_DEVICE_TABLE_PUSH_WORDS], push[HM_DEVICE_TABLE_PUSH_WORDS + 1]);
	plan = J(push[HM_DEVICE_TABLE_PUSH_WORDS + 2], push[HM_DEVICE_TABLE_PUSH_WORDS + 3]);
#undef J
	rwb_if(&b, HM_SPV_OP(m, FN, SpvOpULessThan, b.bl, gidx,
			     push[HM_DEVICE_TABLE_PUSH_WORDS + 4]), &merge);
	e = HM_SPV_OP(m, FN, SpvOpLoad, v4,
		      HM_SPV_OP(m, FN, SpvOpConvertUToPtr,
				hm_spirv_type_pointer(m, SpvStorageClassPhysicalStorageBuffer, v4),
				HM_SPV_OP(m, FN, SpvOpIAdd, b.u64, plan,
					  HM_SPV_OP(m, FN, SpvOpShiftLeftLogical, b.u64,
						    HM_SPV_OP(m, FN, SpvOpUConvert, b.u64, gidx),
						    hm_spirv_const_u32(m, 4)))),
		      SpvMemoryAccessAlignedMask, 16);
	g = HM_SPV_OP(m, FN, SpvOpIAdd, b.u64, base,
		      HM_SPV_OP(m, FN, SpvOpUConvert, b.u64,
				HM_SPV_OP(m, FN, SpvOpCompositeExtract, b.u32, e, 0)));
	hm_spirv_emit_load(m, &t, &w, g, 1, val);
	v = HM_SPV_OP(m, FN, SpvOpBitwiseXor, b.u32, val[0],
		      HM_SPV_OP(m, FN, SpvOpCompositeExtract, b.u32, e, 3));
	g = HM_SPV_OP(m, FN, SpvOpIAdd, b.u64, base,
		      HM_SPV_OP(m, FN, SpvOpUConvert, b.u64,
				HM_SPV_OP(m, FN, SpvOpCompositeExtract, b.u32, e, 1)));
	rwb_store(&b, &t, HM_SPV_OP(m, FN, SpvOpCompositeExtract, b.u32, e, 2), OP_STORE32,
		  g, v);
	rwb_store(&b, &t, HM_SPV_OP(m, FN, SpvOpCompositeExtract, b.u32, e, 2), OP_STORE8,
		  g, v);
	rwb_endif(&b, merge);
	HM_SPV(m, FN, SpvOpReturn);
	hm_spirv_inst(m, FN, SpvOpFunctionEnd, NULL, 0);
	r = hm_spirv_module_finish(m, ret_w, ret_n);
	hm_spirv_module_free(m);
	return r;
}
#undef FN

static int env_pipeline(struct env *v)
{
	/* T_BOTH: tier one until the test queues tier two itself
	 * (hm_engine_pipeline_queue_tier()), so that dispatches run in it */
	static const uint32_t flags[] = { [T_COMPACT] = HM_PIPELINE_COMPACT_ONLY,
					  [T_SPEC] = HM_PIPELINE_SPECULATIVE_ONLY,
					  [T_BOTH] = HM_PIPELINE_COMPACT_ONLY };
	int err;

	if (v->tier == T_ONE_FORM)
		return hm_engine_pipeline_new(v->e, hm_test_rw_spv, hm_test_rw_spv_words, "main",
					      RW_USER_WORDS, &v->pipe);
	err = rw_build(&v->rw_w, &v->rw_n);
	if (err)
		return err;
	return hm_engine_pipeline_new_tiered(v->e, v->rw_w, v->rw_n, "main", RW_USER_WORDS,
					     flags[v->tier], &v->pipe);
}

/* watch_shift: the space's watch unit (0: the engine's chunk) */
static int env_new_units(struct env *v, enum hm_backend b, const struct hm_engine_params *ep,
			 unsigned watch_shift, const char **why)
{
	enum tier_mode tier = v->tier;
	struct hm_engine_test_hooks hooks = v->hooks;

	/* HMIRROR_TEST_SPARSE=1: a device that binds sparse gets the sparse
	 * mirror window (the GPU runs; lavapipe has no sparse binding) */
	struct hm_vk_params vp = { .validation = 1,
				   .flags = getenv("HMIRROR_TEST_SPARSE") ? HM_VK_SPARSE : 0 };
	struct hm_space_params sp = { .size = SPACE_BYTES,
				      .chunk_shift = watch_shift ? watch_shift : CHUNK_SHIFT,
				      .flags = HM_SPACE_POPULATE, .backend = b };
	int err;

	memset(v, 0, sizeof(*v));
	v->tier = tier;
	v->hooks = hooks;
	v->rng = 0x9e3779b97f4a7c15ull ^ (uint64_t)b;
	*why = NULL;
	if (b == HM_BACKEND_KMOD)
		maybe_load_module();
	if (b != HM_BACKEND_AUTO && hm_backend_probe(b, why))
		return -EOPNOTSUPP;
	err = hm_vk_new(&vp, &v->vk);
	if (err) {
		*why = "no Vulkan device with validation layers";
		return err;
	}
	err = hm_space_new(&sp, &v->s);
	if (err) {
		*why = "hm_space_new failed";
		return err;
	}
	v->mem = hm_space_addr(v->s);
	v->model = malloc(SPACE_BYTES);
	v->role = calloc(SPACE_BYTES / 4, 1);
	v->cpu_bytes = malloc(SPACE_BYTES * sizeof(*v->cpu_bytes));
	v->cap_log = 1 << 14;
	v->log = malloc(v->cap_log * sizeof(*v->log));
	if (!v->model || !v->role || !v->cpu_bytes || !v->log)
		return -ENOMEM;
	for (uint32_t i = 0; i < SPACE_BYTES; i++)
		v->mem[i] = v->model[i] = (uint8_t)(i * 7 + (i >> 9));
	err = hm_engine_new(v->vk, ep, &v->e);
	if (err) {
		*why = "hm_engine_new failed";
		return err;
	}
	hm__test_engine_hooks(v->e, &v->hooks);
	err = hm_engine_add_space(v->e, v->s, GUEST_BASE, &v->space_id);
	if (err)
		return err;
	err = env_pipeline(v);
	if (err)
		return err;
	return hm_vk_buffer_new(v->vk, MAX_LANES * sizeof(struct plan_entry), HM_VK_MEM_HOST,
				&v->plan);
}

static int env_new(struct env *v, enum hm_backend b, const struct hm_engine_params *ep,
		   const char **why)
{
	return env_new_units(v, b, ep, 0, why);
}

static unsigned env_free(struct env *v)
{
	unsigned msgs = 0;

	if (v->e)
		hm_engine_free(v->e);
	hm_space_free(v->s);
	if (v->vk) {
		hm_vk_buffer_free(v->vk, &v->plan);
		msgs = hm_vk_validation_count(v->vk);
		hm_vk_free(v->vk);
	}
	free(v->model);
	free(v->rw_w);
	free(v->role);
	free(v->cpu_bytes);
	free(v->log);
	memset(v, 0, sizeof(*v));
	return msgs;
}

/* engine hook: the table is final and the submission follows */
static void start_cpu_writes(void *arg)
{
	struct env *v = arg;

	/* what this dispatch will read: a mirror published at its start
	 * (one the CPU writes during it may be gone at its end) */
	v->published_at_start += hm__engine_nr_published(v->e);
	atomic_store(&v->go, true);
}

static void *cpu_thread(void *arg)
{
	struct env *v = arg;

	while (!atomic_load(&v->go) && !atomic_load(&v->stop))
		sched_yield();
	while (!atomic_load(&v->stop) && v->nr_log < v->cap_log && v->nr_cpu_bytes) {
		uint32_t off = v->cpu_bytes[rnd(&v->thr_rng) % v->nr_cpu_bytes];
		uint8_t val = (uint8_t)rnd(&v->thr_rng);

		((volatile uint8_t *)v->mem)[off] = val;
		v->log[v->nr_log++] = (struct cpu_write){ off, val };
		for (volatile int spin = 0; spin < 200; spin++)
			;
	}
	return NULL;
}

/* A random word of role 0 (or of role `ok` too); marks it `as`. */
static uint32_t pick_word(struct env *v, uint8_t ok, uint8_t as)
{
	for (;;) {
		uint32_t w = rnd(&v->rng) % (SPACE_BYTES / 4);

		if (v->role[w] == 0 || (ok && v->role[w] == ok)) {
			v->role[w] = as;
			return w;
		}
	}
}

enum { R_READ = 1, R_W32 = 2, R_W8 = 3, R_CPU = 4 };

/*
 * Build a plan of n lanes, run it with a CPU thread writing bytes the
 * device neither reads nor writes (some in the words the device stores a
 * byte of), update the model, compare.  Returns the number of the first
 * mismatching byte + 1, 0 when equal, or a negative errno from dispatch.
 */
static long round_trip_at(struct env *v, uint32_t n, uint32_t flags, bool cpu_during,
			  bool cpu_early, bool out_of_range)
{
	struct plan_entry *pl = v->plan.map;
	uint32_t push[RW_USER_WORDS];
	uint64_t base = GUEST_BASE, pa = v->plan.addr;
	int err;

	memset(v->role, 0, SPACE_BYTES / 4);
	v->nr_cpu_bytes = 0;
	for (uint32_t i = 0; i < n; i++) {
		uint32_t r = pick_word(v, R_READ, R_READ), w, op;

		op = rnd(&v->rng) % 10 == 0 ? OP_NONE : (rnd(&v->rng) & 1 ? OP_STORE32 : OP_STORE8);
		pl[i] = (struct plan_entry){ .roff = 4 * r, .op = op, .x = (uint32_t)rnd(&v->rng) };
		if (op == OP_STORE32) {
			w = pick_word(v, 0, R_W32);
			pl[i].woff = 4 * w;
		} else if (op == OP_STORE8) {
			uint32_t k = rnd(&v->rng) % 4;

			w = pick_word(v, 0, R_W8);
			pl[i].woff = 4 * w + k;
			for (uint32_t j = 0; j < 4; j++)
				if (j != k)
					v->cpu_bytes[v->nr_cpu_bytes++] = 4 * w + j;
		}
	}
	if (out_of_range && n >= 2) {
		/* one store and one load land nowhere (the sink; reads 0) */
		pl[0].op = OP_STORE32;
		pl[0].woff = SPACE_BYTES + 64;
		pl[1].roff = SPACE_BYTES + 128;
	}
	for (uint32_t i = 0; i < 64; i++) {
		uint32_t w = pick_word(v, 0, R_CPU);

		for (uint32_t j = 0; j < 4; j++)
			v->cpu_bytes[v->nr_cpu_bytes++] = 4 * w + j;
	}
	/* the model: what the device does, with every access home */
	for (uint32_t i = 0; i < n; i++) {
		uint32_t val = 0;

		if (pl[i].roff < SPACE_BYTES)
			memcpy(&val, v->model + pl[i].roff, 4);
		val ^= pl[i].x;
		if (pl[i].woff >= SPACE_BYTES)
			continue;
		if (pl[i].op == OP_STORE32)
			memcpy(v->model + pl[i].woff, &val, 4);
		else if (pl[i].op == OP_STORE8)
			v->model[pl[i].woff] = (uint8_t)val;
	}
	push[0] = (uint32_t)base;
	push[1] = (uint32_t)(base >> 32);
	push[2] = (uint32_t)pa;
	push[3] = (uint32_t)(pa >> 32);
	push[4] = n;
	v->nr_log = 0;
	atomic_store(&v->stop, false);
	/* early: from before the harvest, racing the uploads too; else from
	 * the engine's hook on, i.e. while the device runs and copies back */
	atomic_store(&v->go, cpu_early);
	v->thr_rng = rnd(&v->rng) | 1;
	if (cpu_during && pthread_create(&v->thr, NULL, cpu_thread, v))
		return -errno;
	err = hm_engine_dispatch(v->e, v->pipe, (n + 63) / 64, 1, 1, push, RW_USER_WORDS, flags);
	if (cpu_during) {
		atomic_store(&v->stop, true);
		pthread_join(v->thr, NULL);
	}
	for (size_t i = 0; i < v->nr_log; i++)
		v->model[v->log[i].off] = v->log[i].val;
	if (err)
		return err;
	for (uint32_t i = 0; i < SPACE_BYTES; i++)
		if (v->mem[i] != v->model[i])
			return (long)i + 1;
	return 0;
}

static __attribute__((unused)) long round_trip(struct env *v, uint32_t n, uint32_t flags,
					       bool cpu_during, bool out_of_range)
{
	return round_trip_at(v, n, flags, cpu_during, true, out_of_range);
}

/* CPU writes between dispatches: k random bytes anywhere, model too. */
static void cpu_between(struct env *v, unsigned k)
{
	for (unsigned i = 0; i < k; i++) {
		uint32_t off = rnd(&v->rng) % SPACE_BYTES;
		uint8_t val = (uint8_t)rnd(&v->rng);

		v->mem[off] = val;
		v->model[off] = val;
	}
}

static void dump_mismatch(struct __test_metadata *_metadata, struct env *v, long r)
{
	if (r > 0)
		TH_LOG("first mismatch at byte %ld (chunk %ld): memory %#x, model %#x",
		       r - 1, (r - 1) >> CHUNK_SHIFT, v->mem[r - 1], v->model[r - 1]);
	if (v->vk && hm_vk_validation_count(v->vk))
		TH_LOG("validation: %s", v->vk->last_message);
}

/* ---- the reference-model test ------------------------------------------ */

enum mode { M_OFF, M_HOT, M_READ_MOSTLY, M_PREFER, M_SMALL_BUDGET, M_READ_MOSTLY_TWIN_SHADER, M_SMALL_BUDGET_TWIN_SHADER,
	    M_READ_MOSTLY_GATHER, M_SMALL_BUDGET_GATHER };

FIXTURE(model) {
	struct env v;
};

FIXTURE_VARIANT(model) {
	enum hm_backend backend;
	enum mode mode;
	enum tier_mode tier;
	unsigned watch_shift;	/* 0: the engine's chunk; 12: page units, refreshed in part */
};

#define MODEL_VARIANT(bname, b, mname, m) \
	FIXTURE_VARIANT_ADD(model, bname##_##mname) { .backend = b, .mode = m }
/* the program with the load call site, in one tier, or both (switched
 * between two of the dispatches) */
#define MODEL_TIER(bname, b, mname, m, tname, t) \
	FIXTURE_VARIANT_ADD(model, bname##_##mname##_##tname) { .backend = b, .mode = m, .tier = t }
#define MODEL_VARIANT_PAGES(bname, b, mname, m) \
	FIXTURE_VARIANT_ADD(model, bname##_##mname##_pages) { .backend = b, .mode = m, \
							       .watch_shift = 12 }
#define MODEL_TIER_PAGES(bname, b, mname, m, tname, t) \
	FIXTURE_VARIANT_ADD(model, bname##_##mname##_##tname##_pages) { .backend = b, .mode = m, \
									  .tier = t, .watch_shift = 12 }

#ifndef HM_ENGINE_TEST_VM
MODEL_VARIANT(uffd_async, HM_BACKEND_UFFD_ASYNC, off, M_OFF);
MODEL_VARIANT(uffd_async, HM_BACKEND_UFFD_ASYNC, hot, M_HOT);
MODEL_VARIANT(uffd_async, HM_BACKEND_UFFD_ASYNC, read_mostly, M_READ_MOSTLY);
MODEL_VARIANT(uffd_async, HM_BACKEND_UFFD_ASYNC, prefer_device, M_PREFER);
MODEL_VARIANT(uffd_async, HM_BACKEND_UFFD_ASYNC, small_budget, M_SMALL_BUDGET);
/* twins by the copy shader (the default on a GPU; lavapipe's is the copy) */
MODEL_VARIANT(uffd_async, HM_BACKEND_UFFD_ASYNC, read_mostly_twin_shader, M_READ_MOSTLY_TWIN_SHADER);
MODEL_VARIANT(uffd_async, HM_BACKEND_UFFD_ASYNC, small_budget_twin_shader, M_SMALL_BUDGET_TWIN_SHADER);
MODEL_VARIANT(uffd_async, HM_BACKEND_UFFD_ASYNC, read_mostly_gather, M_READ_MOSTLY_GATHER);
MODEL_VARIANT(uffd_async, HM_BACKEND_UFFD_ASYNC, small_budget_gather, M_SMALL_BUDGET_GATHER);
/* page watch units under 64 KiB chunks: stale mirrors refreshed in part */
MODEL_VARIANT_PAGES(uffd_async, HM_BACKEND_UFFD_ASYNC, read_mostly_gather, M_READ_MOSTLY_GATHER);
MODEL_VARIANT_PAGES(uffd_async, HM_BACKEND_UFFD_ASYNC, read_mostly, M_READ_MOSTLY);
MODEL_VARIANT_PAGES(uffd_async, HM_BACKEND_UFFD_ASYNC, prefer_device, M_PREFER);
MODEL_VARIANT_PAGES(uffd_async, HM_BACKEND_UFFD_ASYNC, small_budget_gather, M_SMALL_BUDGET_GATHER);
MODEL_VARIANT_PAGES(mprotect, HM_BACKEND_MPROTECT, read_mostly, M_READ_MOSTLY);
/* a GPU's configuration: gather.comp fills the window, loads read it */
MODEL_TIER(uffd_async, HM_BACKEND_UFFD_ASYNC, small_budget_gather, M_SMALL_BUDGET_GATHER,
	   speculative, T_SPEC);
MODEL_TIER_PAGES(uffd_async, HM_BACKEND_UFFD_ASYNC, read_mostly_gather, M_READ_MOSTLY_GATHER,
		 speculative, T_SPEC);
MODEL_VARIANT(uffd_sync, HM_BACKEND_UFFD_SYNC, off, M_OFF);
MODEL_VARIANT(uffd_sync, HM_BACKEND_UFFD_SYNC, read_mostly, M_READ_MOSTLY);
MODEL_VARIANT(uffd_sync, HM_BACKEND_UFFD_SYNC, small_budget, M_SMALL_BUDGET);
MODEL_VARIANT(mprotect, HM_BACKEND_MPROTECT, off, M_OFF);
MODEL_VARIANT(mprotect, HM_BACKEND_MPROTECT, read_mostly, M_READ_MOSTLY);
MODEL_VARIANT(mprotect, HM_BACKEND_MPROTECT, small_budget, M_SMALL_BUDGET);
MODEL_TIER(uffd_async, HM_BACKEND_UFFD_ASYNC, off, M_OFF, speculative, T_SPEC);
MODEL_TIER(uffd_async, HM_BACKEND_UFFD_ASYNC, hot, M_HOT, compact, T_COMPACT);
MODEL_TIER(uffd_async, HM_BACKEND_UFFD_ASYNC, hot, M_HOT, speculative, T_SPEC);
MODEL_TIER(uffd_async, HM_BACKEND_UFFD_ASYNC, read_mostly, M_READ_MOSTLY, compact, T_COMPACT);
MODEL_TIER(uffd_async, HM_BACKEND_UFFD_ASYNC, read_mostly, M_READ_MOSTLY, speculative, T_SPEC);
MODEL_TIER(uffd_async, HM_BACKEND_UFFD_ASYNC, read_mostly, M_READ_MOSTLY, both, T_BOTH);
MODEL_TIER(uffd_async, HM_BACKEND_UFFD_ASYNC, prefer_device, M_PREFER, speculative, T_SPEC);
MODEL_TIER(uffd_async, HM_BACKEND_UFFD_ASYNC, small_budget, M_SMALL_BUDGET, speculative, T_SPEC);
MODEL_TIER(uffd_async, HM_BACKEND_UFFD_ASYNC, small_budget, M_SMALL_BUDGET, both, T_BOTH);
MODEL_TIER(mprotect, HM_BACKEND_MPROTECT, read_mostly, M_READ_MOSTLY, speculative, T_SPEC);
#endif
MODEL_TIER(kmod, HM_BACKEND_KMOD, read_mostly, M_READ_MOSTLY, both, T_BOTH);
/* the module's guards (in the VM; natively they SKIP) */
MODEL_VARIANT(kmod, HM_BACKEND_KMOD, read_mostly, M_READ_MOSTLY);
MODEL_VARIANT(kmod, HM_BACKEND_KMOD, small_budget, M_SMALL_BUDGET);

FIXTURE_SETUP(model)
{
	struct hm_engine_params ep = { .chunk_shift = CHUNK_SHIFT, .timeout_ns = SUBMIT_TIMEOUT_NS };
	const char *why;
	int err;

	switch (variant->mode) {
	case M_OFF:
		ep.flags = HM_ENGINE_NO_MIRRORS;
		break;
	case M_HOT:
		ep.hot_marks = 1;
		break;
	case M_SMALL_BUDGET_GATHER:
	case M_SMALL_BUDGET_TWIN_SHADER:
		ep.twin_mode = variant->mode == M_SMALL_BUDGET_GATHER ? HM_TWIN_GATHER : HM_TWIN_SHADER;
		/* fall through */
	case M_SMALL_BUDGET:
		ep.mirror_budget = 6 * 2 * CHUNK;
		ep.thrash_drops = 200;  /* no back-off: mirrors stay in play */
		break;
	case M_READ_MOSTLY_GATHER:
	case M_READ_MOSTLY_TWIN_SHADER:
		ep.twin_mode = variant->mode == M_READ_MOSTLY_GATHER ? HM_TWIN_GATHER : HM_TWIN_SHADER;
		/* fall through */
	case M_READ_MOSTLY:
		ep.thrash_drops = 200;
		break;
	default:
		break;
	}
	self->v.tier = variant->tier;
	self->v.hooks = (struct hm_engine_test_hooks){ .before_dispatch = start_cpu_writes,
						       .arg = &self->v };
	err = env_new_units(&self->v, variant->backend, &ep, variant->watch_shift, &why);
	if (why && err)
		SKIP(return, "%s: %s (%d)", hm_backend_name(variant->backend), why, err);
	ASSERT_EQ(0, err);
	if (variant->mode == M_READ_MOSTLY || variant->mode == M_SMALL_BUDGET ||
	    variant->mode == M_READ_MOSTLY_TWIN_SHADER || variant->mode == M_SMALL_BUDGET_TWIN_SHADER ||
	    variant->mode == M_READ_MOSTLY_GATHER || variant->mode == M_SMALL_BUDGET_GATHER)
		ASSERT_EQ(0, hm_engine_advise(self->v.e, GUEST_BASE, SPACE_BYTES,
					      HM_ADVICE_READ_MOSTLY));
	if (variant->mode == M_PREFER) {
		ASSERT_EQ(0, hm_engine_advise(self->v.e, GUEST_BASE, SPACE_BYTES / 2,
					      HM_ADVICE_PREFER_DEVICE));
		ASSERT_EQ(0, hm_engine_advise(self->v.e, GUEST_BASE + SPACE_BYTES - CHUNK, CHUNK,
					      HM_ADVICE_NEVER_MIRROR));
	}
}

FIXTURE_TEARDOWN(model)
{
	if (self->v.vk) {
		if (hm_vk_validation_count(self->v.vk))
			TH_LOG("validation: %s", self->v.vk->last_message);
		EXPECT_EQ(0, env_free(&self->v));
	}
}

TEST_F(model, random_cpu_and_device_writes)
{
	struct hm_engine_stats st;
	unsigned sinks = 0, shared = 0;
	bool ever_mirrored = false;

	if (!self->v.e)
		return;         /* skipped in setup (the 6.1 harness runs the body) */
	for (int d = 0; d < NR_DISPATCHES; d++) {
		bool is_shared = d % 6 == 5, oor = d % 4 == 1;
		long r;

		cpu_between(&self->v, d % 3 ? 16 : 0);
		/* every third dispatch the CPU also races the uploads */
		r = round_trip_at(&self->v, 64 + 32 * (d % 8),
				  is_shared ? HM_DISPATCH_SHARED_WITH_CPU : 0, true, d % 3 == 2, oor);
		dump_mismatch(_metadata, &self->v, r);
		ASSERT_EQ(0, r);
		if (self->v.tier == T_BOTH) {
			struct hm_engine_pipeline_info pi;

			/* tier one for dispatches 0-2, tier two queued and waited
			 * for after the third: the fourth switches */
			ASSERT_EQ(0, hm_engine_pipeline_info(self->v.e, self->v.pipe, &pi));
			ASSERT_EQ(d < 3 ? HM_TIER_COMPACT : HM_TIER_SPECULATIVE, pi.tier);
			if (d == 2) {
				ASSERT_EQ(0, hm_engine_pipeline_queue_tier(self->v.e, self->v.pipe,
									   self->v.rw_w,
									   self->v.rw_n, "main"));
				ASSERT_EQ(0, hm_engine_pipeline_wait(self->v.e, self->v.pipe,
								     SUBMIT_TIMEOUT_NS));
			}
		}
		sinks += oor;
		shared += is_shared;
		for (uint32_t c = 0; c < NR_CHUNKS && !ever_mirrored; c++) {
			bool m;

			ASSERT_EQ(0, hm_engine_is_mirrored(self->v.e, GUEST_BASE + c * CHUNK, &m));
			ever_mirrored |= m;
		}
	}
	ASSERT_EQ(0, hm_engine_stats(self->v.e, &st));
	TH_LOG("%s: uploads %lu (discarded %lu), guard drops %lu, shared drops %lu, evicted %lu, "
	       "refused %lu, thrash %lu, marks %lu, copied home %lu B in %lu chunks; "
	       "phases us: harvest %lu upload %lu dispatch %lu marks %lu copy-back %lu",
	       hm_backend_name(variant->backend), st.uploads, st.uploads_discarded,
	       st.mirrors_dropped_by_guard, st.mirrors_dropped_shared, st.mirrors_evicted,
	       st.budget_refusals, st.thrash_backoffs, st.marks_scanned, st.bytes_copied_home,
	       st.chunks_copied_home, st.ns_harvest / 1000, st.ns_upload / 1000,
	       st.ns_dispatch / 1000, st.ns_marks / 1000, st.ns_copy_back / 1000);
	ASSERT_EQ(NR_DISPATCHES, st.dispatches);
	ASSERT_EQ(shared, st.shared_dispatches);
	ASSERT_EQ(self->v.tier == T_BOTH ? 1 : 0, st.tier_switches);
	if (self->v.tier == T_SPEC && variant->mode != M_OFF)
		ASSERT_LT(0, st.window_copies + st.window_binds);    /* loads had a window to hit */
	ASSERT_EQ(sinks, st.sink_marks);
	ASSERT_LT(0, st.marks_scanned);
	if (variant->mode == M_OFF) {
		ASSERT_EQ(0, st.uploads);
		ASSERT_EQ(0, st.bytes_copied_home);
		ASSERT_FALSE(ever_mirrored);
		ASSERT_EQ(0, self->v.published_at_start);
		return;
	}
	ASSERT_TRUE(ever_mirrored || self->v.published_at_start);
	ASSERT_LT(0, st.uploads);
	ASSERT_LT(0, st.bytes_copied_home);
	ASSERT_LT(0, st.mirrors_dropped_by_guard);
	ASSERT_LE(st.mirror_bytes, st.mirror_budget);
	if (variant->mode == M_SMALL_BUDGET || variant->mode == M_SMALL_BUDGET_TWIN_SHADER ||
	    variant->mode == M_SMALL_BUDGET_GATHER)
		ASSERT_LT(0, st.budget_refusals);
	if (variant->mode == M_PREFER) {
		bool m;

		/* never-mirror holds */
		ASSERT_EQ(0, hm_engine_is_mirrored(self->v.e, GUEST_BASE + SPACE_BYTES - CHUNK, &m));
		ASSERT_FALSE(m);
	}
}

/* ---- torture: the model at 10^6 operations ------------------------------ */

/*
 * The reference model run until it has done HMIRROR_TORTURE_OPS operations
 * (default 10^6, natively and under TCG): device lanes, CPU bytes
 * written between and during dispatches, and every 25 dispatches new
 * advice over a random range (default, read-mostly, prefer-device, never),
 * with shared and out-of-range dispatches among them, a small budget and
 * measured hotness.  Every byte of the space compared after each
 * dispatch.  The seed (HMIRROR_TORTURE_SEED) and the count are reported.
 */
FIXTURE(torture) {
	struct env v;
};

FIXTURE_VARIANT(torture) {
	enum hm_backend backend;
};

FIXTURE_VARIANT_ADD(torture, kmod) { .backend = HM_BACKEND_KMOD };
#ifndef HM_ENGINE_TEST_VM
FIXTURE_VARIANT_ADD(torture, uffd_async) { .backend = HM_BACKEND_UFFD_ASYNC };
FIXTURE_VARIANT_ADD(torture, uffd_sync) { .backend = HM_BACKEND_UFFD_SYNC };
FIXTURE_VARIANT_ADD(torture, mprotect) { .backend = HM_BACKEND_MPROTECT };
#endif

FIXTURE_SETUP(torture)
{
	struct hm_engine_params ep = { .chunk_shift = CHUNK_SHIFT, .timeout_ns = SUBMIT_TIMEOUT_NS,
				       .hot_marks = 1, .mirror_budget = 8 * CHUNK };
	const char *why;
	int err;

	self->v.hooks = (struct hm_engine_test_hooks){ .before_dispatch = start_cpu_writes,
						       .arg = &self->v };
	err = env_new(&self->v, variant->backend, &ep, &why);
	if (why && err)
		SKIP(return, "%s: %s (%d)", hm_backend_name(variant->backend), why, err);
	ASSERT_EQ(0, err);
}

FIXTURE_TEARDOWN(torture)
{
	if (self->v.vk) {
		if (hm_vk_validation_count(self->v.vk))
			TH_LOG("validation: %s", self->v.vk->last_message);
		EXPECT_EQ(0, env_free(&self->v));
	}
}

TEST_F_TIMEOUT(torture, a_million_operations, 1200)
{
	const char *os = getenv("HMIRROR_TORTURE_OPS"), *ss = getenv("HMIRROR_TORTURE_SEED");
	uint64_t want = os ? strtoull(os, NULL, 0) : 1000000;
	uint64_t ops = 0, lanes = 0, cpu = 0, seed;
	struct hm_engine_stats st;
	unsigned d;

	if (!self->v.e)
		return;
	self->v.cap_log = 256;	/* CPU bytes during a dispatch: at most as many as lanes */
	seed = ss ? strtoull(ss, NULL, 0) : self->v.rng ^ (uint64_t)time(NULL);
	self->v.rng = seed | 1;
	for (d = 0; ops < want; d++) {
		uint32_t n = 64 + (uint32_t)(rnd(&self->v.rng) % (MAX_LANES - 64));
		uint32_t flags = rnd(&self->v.rng) % 16 == 0 ? HM_DISPATCH_SHARED_WITH_CPU : 0;
		unsigned k = (unsigned)(rnd(&self->v.rng) % 64);
		long r;

		if (d % 25 == 0) {
			uint32_t c0 = (uint32_t)(rnd(&self->v.rng) % NR_CHUNKS);
			uint32_t nc = 1 + (uint32_t)(rnd(&self->v.rng) % (NR_CHUNKS - c0));

			ASSERT_EQ(0, hm_engine_advise(self->v.e, GUEST_BASE + (uint64_t)c0 * CHUNK,
						      (uint64_t)nc * CHUNK,
						      (enum hm_advice)(rnd(&self->v.rng) % 4)));
		}
		cpu_between(&self->v, k);
		r = round_trip_at(&self->v, n, flags, rnd(&self->v.rng) % 3 != 0,
				  rnd(&self->v.rng) & 1, rnd(&self->v.rng) % 8 == 0);
		dump_mismatch(_metadata, &self->v, r);
		ASSERT_EQ(0, r) TH_LOG("seed %#llx, dispatch %u, after %llu operations",
				       (unsigned long long)seed, d, (unsigned long long)ops);
		lanes += n;
		cpu += k + self->v.nr_log;
		ops += n + k + self->v.nr_log;
	}
	ASSERT_EQ(0, hm_engine_stats(self->v.e, &st));
	TH_LOG("%s: seed %#llx: %llu operations (%llu device lanes, %llu CPU bytes) in %u "
	       "dispatches; uploads %lu, guard drops %lu, evicted %lu, copied home %lu B",
	       hm_backend_name(variant->backend), (unsigned long long)seed,
	       (unsigned long long)ops, (unsigned long long)lanes, (unsigned long long)cpu, d,
	       st.uploads, st.mirrors_dropped_by_guard, st.mirrors_evicted, st.bytes_copied_home);
	EXPECT_LT(0, st.uploads);
	EXPECT_LT(0, st.bytes_copied_home);
}

/* ---- fault injection through VK_LAYER_HMIRROR_fault (tools/vkfault) ----- */

#ifndef HM_ENGINE_TEST_VM
static enum hm_backend first_backend(void);

static void fault_clear(void)
{
	unsetenv("HMIRROR_VKFAULT_ALLOC");
	unsetenv("HMIRROR_VKFAULT_LOST");
	unsetenv("HMIRROR_VKFAULT_LOST_BEFORE");
	unsetenv("HMIRROR_VKFAULT_REPORT");
}

enum { FAULT_DISPATCHES = 6 };

struct fault_run {
	int setup;		/* 0, or the error of setting up */
	int failed_at;		/* the dispatch that failed, -1 if none */
	int err;		/* its error */
	int after;		/* dispatches tried after it that did not fail */
	long wrong;		/* bytes neither old nor new, or a CPU byte lost */
	const char *why;	/* setup -EOPNOTSUPP: what the machine lacks */
};

/*
 * The scenario every fault is injected into: an engine with the whole
 * space prefer-device (uploads, mirrors, copy-back) over the first
 * backend, FAULT_DISPATCHES dispatches of 200 lanes with CPU bytes written
 * before each.  After a failed dispatch every byte must be what it was
 * before it or what the dispatch would have made it (a device lost in the
 * middle may have written some of it, a copy-back some of it), and every
 * CPU byte must be home; later dispatches must fail too.
 */
static void fault_scenario(struct __test_metadata *_metadata, struct fault_run *fr)
{
	struct hm_engine_params ep = { .chunk_shift = CHUNK_SHIFT, .timeout_ns = SUBMIT_TIMEOUT_NS };
	const char *why;
	struct env v;
	uint8_t *before;

	memset(fr, 0, sizeof(*fr));
	fr->failed_at = -1;
	memset(&v, 0, sizeof(v));
	fr->setup = env_new(&v, first_backend(), &ep, &why);
	fr->why = why;
	if (!fr->setup)
		fr->setup = hm_engine_advise(v.e, GUEST_BASE, SPACE_BYTES, HM_ADVICE_PREFER_DEVICE);
	before = malloc(SPACE_BYTES);
	if (!fr->setup && before) {
		for (int d = 0; d < FAULT_DISPATCHES; d++) {
			long r;

			cpu_between(&v, 32);
			memcpy(before, v.mem, SPACE_BYTES);
			r = round_trip_at(&v, 200, 0, false, false, false);
			if (fr->failed_at < 0 && r > 0) {
				fr->wrong++;	/* a wrong byte from a dispatch that succeeded */
				break;
			}
			if (r == 0 && fr->failed_at >= 0)
				fr->after++;
			if (r < 0 && fr->failed_at < 0) {
				fr->failed_at = d;
				fr->err = (int)r;
			}
			if (r < 0) {
				for (uint32_t i = 0; i < SPACE_BYTES; i++)
					if (v.mem[i] != before[i] && v.mem[i] != v.model[i])
						fr->wrong++;
				/* what is there now is what the next one starts from */
				memcpy(v.model, v.mem, SPACE_BYTES);
			}
		}
	}
	free(before);
	env_free(&v);
}

/* false: the scenario cannot run here (no device with validation layers,
 * no backend), and the test was marked skipped */
static bool fault_counts(struct __test_metadata *_metadata, long *allocs, long *submits)
{
	char path[] = "/tmp/hmirror-vkfault.XXXXXX";
	struct fault_run fr;
	int fd = mkstemp(path);
	FILE *f;

	ASSERT_LE(0, fd);
	close(fd);
	fault_clear();
	setenv("HMIRROR_VKFAULT_REPORT", path, 1);
	fault_scenario(_metadata, &fr);
	fault_clear();
	if (fr.setup == -EOPNOTSUPP) {
		unlink(path);
		SKIP(return false, "%s", fr.why ? fr.why : "no engine here");
	}
	ASSERT_EQ(0, fr.setup);
	ASSERT_EQ(-1, fr.failed_at);
	ASSERT_EQ(0, fr.wrong);
	f = fopen(path, "r");
	ASSERT_NE(NULL, f);
	ASSERT_EQ(2, fscanf(f, "allocs %ld submits %ld", allocs, submits));
	fclose(f);
	unlink(path);
	return true;
}

/*
 * Every Vulkan memory allocation of the scenario fails in turn (the Nth,
 * then the Nth and all after it): set-up answers a negative errno or the
 * dispatches do, nothing crashes, and no byte of guest memory is wrong.
 */
TEST(vk_allocation_failures_fail_cleanly)
{
	long allocs, submits;
	int setup_fails = 0, dispatch_fails = 0;

	if (!hm_test_fault_layer())
		SKIP(return, "no build/share/hmirror/vkfault next to this program");
	if (!fault_counts(_metadata, &allocs, &submits))
		return;
	ASSERT_LT(0, allocs);
	for (int every = 0; every < 2; every++)
		for (long n = 1; n <= allocs; n++) {
			struct fault_run fr;
			char val[32];

			snprintf(val, sizeof(val), "%ld%s", n, every ? ",every" : "");
			setenv("HMIRROR_VKFAULT_ALLOC", val, 1);
			fault_scenario(_metadata, &fr);
			fault_clear();
			EXPECT_GE(0, fr.setup) TH_LOG("allocation %s", val);
			EXPECT_EQ(0, fr.wrong) TH_LOG("allocation %s: %ld bytes wrong", val, fr.wrong);
			if (fr.failed_at >= 0)
				EXPECT_GT(0, fr.err);
			setup_fails += fr.setup < 0;
			dispatch_fails += fr.failed_at >= 0;
		}
	TH_LOG("%ld allocations in the scenario, each failed alone and from it on: set-up "
	       "refused %d times, a dispatch %d times, 0 wrong bytes", allocs, setup_fails,
	       dispatch_fails);
	EXPECT_LT(0, setup_fails);
}

/*
 * The device lost at each queue submission of the scenario in turn
 * (uploads, the dispatch, the copy-back's), after that submission ran or
 * instead of it: the dispatch fails with -ENODEV, so does every one after
 * it, every CPU byte is home and every byte the device had written or
 * copied is either its old or its new value.
 */
TEST(vk_device_lost_at_every_submission)
{
	static const char *const knob[2] = { "HMIRROR_VKFAULT_LOST", "HMIRROR_VKFAULT_LOST_BEFORE" };
	long allocs, submits;
	int lost = 0;

	if (!hm_test_fault_layer())
		SKIP(return, "no build/share/hmirror/vkfault next to this program");
	if (!fault_counts(_metadata, &allocs, &submits))
		return;
	ASSERT_LT(FAULT_DISPATCHES, submits);
	for (int k = 0; k < 2; k++)
		for (long n = 1; n <= submits; n++) {
			struct fault_run fr;
			char val[32];

			snprintf(val, sizeof(val), "%ld", n);
			setenv(knob[k], val, 1);
			fault_scenario(_metadata, &fr);
			fault_clear();
			if (fr.setup) {
				/* the loss fell in set-up (a submission of add_space) */
				EXPECT_GT(0, fr.setup);
				continue;
			}
			EXPECT_LE(0, fr.failed_at) TH_LOG("%s=%ld: nothing failed", knob[k], n);
			EXPECT_EQ(-ENODEV, fr.err) TH_LOG("%s=%ld", knob[k], n);
			EXPECT_EQ(0, fr.after) TH_LOG("%s=%ld: a dispatch after the loss ran", knob[k], n);
			EXPECT_EQ(0, fr.wrong) TH_LOG("%s=%ld: %ld bytes wrong", knob[k], n, fr.wrong);
			lost++;
		}
	TH_LOG("%ld submissions in the scenario; lost after and instead of each: %d dispatches "
	       "failed with -ENODEV, 0 wrong bytes", submits, lost);
}
#endif

/* ---- single rules and error paths (uffd-async, else the first backend) -- */

static enum hm_backend first_backend(void)
{
	static const enum hm_backend order[] = {
#ifdef HM_ENGINE_TEST_VM
		HM_BACKEND_KMOD,
#endif
		HM_BACKEND_UFFD_ASYNC, HM_BACKEND_UFFD_SYNC, HM_BACKEND_MPROTECT,
	};

	maybe_load_module();
	for (unsigned i = 0; i < sizeof(order) / sizeof(order[0]); i++)
		if (!hm_backend_probe(order[i], NULL))
			return order[i];
	return HM_BACKEND_MPROTECT;
}

FIXTURE(rules) {
	struct env v;
	struct hm_engine_params ep;
	int hook_calls;
	int hook_writes;	/* calls that write, from the first */
	uint32_t hook_off;
	uint8_t hook_val;
	/* the ahead tests: one CPU write while a dispatch walks, and one
	 * while the copy beside it is made */
	bool walk_armed, race_armed;
	int walk_calls;
	uint32_t walk_off, walk_off2;	/* walk_off2: a second byte, 0 for none */
	uint8_t walk_val;
};

FIXTURE_SETUP(rules)
{
	memset(&self->v, 0, sizeof(self->v));
	/* uploads at the boundary only: these tests count one step's tries
	 * and publishes; the ahead tests below turn them on */
	self->ep = (struct hm_engine_params){ .chunk_shift = CHUNK_SHIFT,
					      .timeout_ns = SUBMIT_TIMEOUT_NS,
					      .flags = HM_ENGINE_NO_AHEAD };
	self->v.hooks.arg = self;
}

FIXTURE_TEARDOWN(rules)
{
	if (self->v.vk) {
		if (hm_vk_validation_count(self->v.vk))
			TH_LOG("validation: %s", self->v.vk->last_message);
		EXPECT_EQ(0, env_free(&self->v));
	}
}

#define RULES_ENV(self) do { \
	const char *why; \
	int err = env_new(&(self)->v, first_backend(), &(self)->ep, &why); \
	if (err && why) \
		SKIP(return, "%s (%d)", why, err); \
	ASSERT_EQ(0, err); \
} while (0)

/* One lane: v = word at roff ^ x, stored (32-bit) at woff. */
static int one_lane(struct env *v, uint32_t roff, uint32_t woff, uint32_t x, uint32_t flags)
{
	struct plan_entry *pl = v->plan.map;
	uint32_t push[RW_USER_WORDS] = { (uint32_t)GUEST_BASE, (uint32_t)(GUEST_BASE >> 32),
					 (uint32_t)v->plan.addr, (uint32_t)(v->plan.addr >> 32), 1 };

	pl[0] = (struct plan_entry){ roff, woff, OP_STORE32, x };
	return hm_engine_dispatch(v->e, v->pipe, 1, 1, 1, push, RW_USER_WORDS, flags);
}

static void hook_cpu_write(void *arg)
{
	FIXTURE_DATA(rules) *self = arg;

	self->hook_calls++;
	if (self->hook_calls <= (self->hook_writes ? self->hook_writes : 1))
		self->v.mem[self->hook_off] = self->hook_val + self->hook_calls - 1;
}

/*
 * Rule 3: a copy raced by a CPU write is never published.  The engine tries
 * such a chunk again within the same dispatch (HM_UPLOAD_RETRIES): the
 * first copy is raced, the second is clean and published, and the device
 * reads the CPU's byte either way.
 */
TEST_F(rules, raced_upload_is_never_published)
{
	uint32_t off = 3 * CHUNK + 100, out = 5 * CHUNK;
	struct hm_engine_stats st;
	uint32_t got;
	bool m;

	self->v.hooks.after_upload_copy = hook_cpu_write;
	self->hook_off = off;
	self->hook_val = 0x5a;
	RULES_ENV(self);
	self->v.mem[off] = 0x11;
	ASSERT_EQ(0, hm_engine_advise(self->v.e, GUEST_BASE + 3 * CHUNK, CHUNK, HM_ADVICE_READ_MOSTLY));
	/* the CPU writes the chunk after the first copy, before its check */
	ASSERT_EQ(0, one_lane(&self->v, off & ~3u, out, 0, 0));
	ASSERT_EQ(2, self->hook_calls);
	ASSERT_EQ(0, hm_engine_stats(self->v.e, &st));
	ASSERT_EQ(1, st.uploads_discarded);
	ASSERT_EQ(1, st.upload_retries);
	ASSERT_EQ(1, st.uploads);
	ASSERT_EQ(0, st.ahead_passes);                  /* HM_ENGINE_NO_AHEAD */
	ASSERT_EQ(0, hm_engine_is_mirrored(self->v.e, GUEST_BASE + off, &m));
	ASSERT_TRUE(m);
	/* the device read the second copy, which holds the CPU's byte */
	memcpy(&got, self->v.mem + out, 4);
	ASSERT_EQ(0x5a, (got >> 8 * (off & 3)) & 0xff);
	/* the next dispatch's harvest reports the write again (harmless, as
	 * documented: it is copied once more), and reads the same bytes */
	ASSERT_EQ(0, one_lane(&self->v, off & ~3u, out + 4, 0, 0));
	ASSERT_EQ(0, hm_engine_stats(self->v.e, &st));
	ASSERT_EQ(1, st.uploads_discarded);
	ASSERT_EQ(2, st.uploads);
	ASSERT_EQ(0, memcmp(self->v.mem + out, self->v.mem + out + 4, 4));
}

/* after_upload_copy: at the first call, the CPU writes the candidate's byte
 * (hook_off) and a byte of another mirrored chunk (walk_off) */
static void hook_two_writes(void *arg)
{
	FIXTURE_DATA(rules) *self = arg;

	if (++self->hook_calls == 1) {
		self->v.mem[self->hook_off] = self->hook_val;
		self->v.mem[self->walk_off] = self->walk_val;
	}
}

/*
 * HMIRROR_CHECK_WHOLE=1: the check after a copy scans the whole space in
 * one call (uffd-async; elsewhere span by span, and the same must hold).
 * The raced candidate is discarded and its retry publishes the CPU's byte;
 * the write the whole scan found on another mirrored chunk, not a
 * candidate, is kept for the next harvest: the dispatch after the next
 * reads it, not the mirror's old byte.
 */
TEST_F(rules, whole_space_check_keeps_what_it_finds)
{
	uint32_t off = 3 * CHUNK + 100, far = 9 * CHUNK + 200, out = 5 * CHUNK;
	struct hm_engine_stats st;
	bool m;

	ASSERT_EQ(0, setenv("HMIRROR_CHECK_WHOLE", "1", 1));    /* this test's process */
	RULES_ENV(self);
	self->v.mem[far] = 0x21;
	ASSERT_EQ(0, hm_engine_advise(self->v.e, GUEST_BASE + 9 * CHUNK, CHUNK, HM_ADVICE_READ_MOSTLY));
	ASSERT_EQ(0, one_lane(&self->v, far & ~3u, out, 0, 0));
	ASSERT_EQ(0, hm_engine_is_mirrored(self->v.e, GUEST_BASE + far, &m));
	ASSERT_TRUE(m);
	ASSERT_EQ(0x21, self->v.mem[out + (far & 3)]);
	/* the next upload copies chunk 3; the CPU writes it and chunk 9 */
	self->v.hooks.after_upload_copy = hook_two_writes;
	hm__test_engine_hooks(self->v.e, &self->v.hooks);
	self->hook_off = off;
	self->hook_val = 0x5a;
	self->walk_off = far;
	self->walk_val = 0x77;
	self->v.mem[off] = 0x11;
	ASSERT_EQ(0, hm_engine_advise(self->v.e, GUEST_BASE + 3 * CHUNK, CHUNK, HM_ADVICE_READ_MOSTLY));
	ASSERT_EQ(0, one_lane(&self->v, off & ~3u, out + 4, 0, 0));
	ASSERT_EQ(2, self->hook_calls);         /* the raced copy and its retry */
	ASSERT_EQ(0, hm_engine_stats(self->v.e, &st));
	ASSERT_EQ(1, st.uploads_discarded);
	ASSERT_EQ(0x5a, self->v.mem[out + 4 + (off & 3)]);
	/* the next harvest reports chunk 9: its mirror goes, and the
	 * dispatch reads the CPU's byte */
	ASSERT_EQ(0, one_lane(&self->v, far & ~3u, out + 8, 0, 0));
	ASSERT_EQ(0x77, self->v.mem[out + 8 + (far & 3)]);
}

/*
 * Rule 3 across a gap: candidates 3 and 5 around armed chunk 4 are checked
 * as one span (its generations taken whole, each candidate's copied out).
 * The CPU writes chunk 3 after the first copy: it alone is discarded, its
 * retry publishes the CPU's byte, and chunk 5 is published at once.  A
 * check that left a gapped candidate's generations unread would compare
 * what the previous upload (chunk 4's) left there, keep the raced copy and
 * lose the write.
 */
TEST_F(rules, raced_upload_across_a_gap_is_never_published)
{
	uint32_t off = 3 * CHUNK + 100, mid = 4 * CHUNK + 8, out = 7 * CHUNK;
	struct hm_engine_stats st;
	bool m;

	RULES_ENV(self);
	self->v.mem[mid] = 0x42;
	self->v.mem[off] = 0x11;
	ASSERT_EQ(0, hm_engine_advise(self->v.e, GUEST_BASE + 4 * CHUNK, CHUNK, HM_ADVICE_READ_MOSTLY));
	ASSERT_EQ(0, one_lane(&self->v, mid & ~3u, out, 0, 0));
	ASSERT_EQ(0, hm_engine_is_mirrored(self->v.e, GUEST_BASE + mid, &m));
	ASSERT_TRUE(m);
	ASSERT_EQ(0x42, self->v.mem[out + (mid & 3)]);
	/* chunks 3 and 5 upload together; the CPU writes 3 after the copy */
	self->v.hooks.after_upload_copy = hook_cpu_write;
	hm__test_engine_hooks(self->v.e, &self->v.hooks);
	self->hook_off = off;
	self->hook_val = 0x5a;
	ASSERT_EQ(0, hm_engine_advise(self->v.e, GUEST_BASE + 3 * CHUNK, CHUNK, HM_ADVICE_READ_MOSTLY));
	ASSERT_EQ(0, hm_engine_advise(self->v.e, GUEST_BASE + 5 * CHUNK, CHUNK, HM_ADVICE_READ_MOSTLY));
	ASSERT_EQ(0, one_lane(&self->v, off & ~3u, out + 4, 0, 0));
	ASSERT_EQ(2, self->hook_calls);         /* the raced copy and its retry */
	ASSERT_EQ(0, hm_engine_stats(self->v.e, &st));
	ASSERT_EQ(1, st.uploads_discarded);     /* chunk 3's first copy only */
	ASSERT_EQ(1, st.upload_retries);
	ASSERT_EQ(3, st.uploads);               /* 4; then 5, and 3's retry */
	ASSERT_EQ(0x5a, self->v.mem[out + 4 + (off & 3)]);
	ASSERT_EQ(0, hm_engine_is_mirrored(self->v.e, GUEST_BASE + 5 * CHUNK, &m));
	ASSERT_TRUE(m);
}

/* A chunk raced at every try stays home for the dispatch and reads home. */
TEST_F(rules, upload_raced_every_try_stays_home)
{
	uint32_t off = 3 * CHUNK + 100, out = 5 * CHUNK;
	struct hm_engine_stats st;
	uint32_t got;
	bool m;

	self->v.hooks.after_upload_copy = hook_cpu_write;
	self->hook_off = off;
	self->hook_val = 0x60;
	self->hook_writes = 1000;
	RULES_ENV(self);
	ASSERT_EQ(0, hm_engine_advise(self->v.e, GUEST_BASE + 3 * CHUNK, CHUNK, HM_ADVICE_READ_MOSTLY));
	ASSERT_EQ(0, one_lane(&self->v, off & ~3u, out, 0, 0));
	ASSERT_EQ(3, self->hook_calls);		/* the copy and two retries */
	ASSERT_EQ(0, hm_engine_stats(self->v.e, &st));
	ASSERT_EQ(3, st.uploads_discarded);
	ASSERT_EQ(2, st.upload_retries);	/* the tries after the first, no more */
	ASSERT_EQ(0, st.uploads);
	ASSERT_EQ(0, hm_engine_is_mirrored(self->v.e, GUEST_BASE + off, &m));
	ASSERT_FALSE(m);
	/* home: the last byte the CPU wrote */
	memcpy(&got, self->v.mem + out, 4);
	ASSERT_EQ(0x62, (got >> 8 * (off & 3)) & 0xff);
}

/*
 * Race control: a chunk raced at every try of two dispatches is not tried
 * again for the next one (1, then 3, then 7 dispatches), reads home
 * meanwhile, and is mirrored again once the writer stops.
 */
TEST_F(rules, raced_every_dispatch_backs_off)
{
	uint32_t off = 3 * CHUNK + 100, out = 5 * CHUNK;
	static const unsigned tries[] = { 3, 3, 0, 3, 0, 0, 0, 3 };
	struct hm_engine_stats st;
	uint32_t got;
	bool m;

	self->v.hooks.after_upload_copy = hook_cpu_write;
	self->hook_off = off;
	self->hook_val = 0x10;
	self->hook_writes = 1000;	/* after every copy, whichever chunks it held */
	RULES_ENV(self);
	ASSERT_EQ(0, hm_engine_advise(self->v.e, GUEST_BASE + 3 * CHUNK, CHUNK, HM_ADVICE_READ_MOSTLY));
	for (unsigned d = 0, discarded = 0; d < sizeof(tries) / sizeof(tries[0]); d++) {
		ASSERT_EQ(0, one_lane(&self->v, off & ~3u, out, 0, 0));
		discarded += tries[d];
		ASSERT_EQ(0, hm_engine_stats(self->v.e, &st));
		ASSERT_EQ(discarded, st.uploads_discarded) TH_LOG("dispatch %u", d);
		ASSERT_EQ(0, hm_engine_is_mirrored(self->v.e, GUEST_BASE + off, &m));
		ASSERT_FALSE(m);
		/* home: the last byte the CPU wrote */
		memcpy(&got, self->v.mem + out, 4);
		ASSERT_EQ((uint8_t)(0x10 + self->hook_calls - 1), (got >> 8 * (off & 3)) & 0xff);
	}
	EXPECT_EQ(3, st.thrash_backoffs);
	/* the writer stops: the first try after the backoff publishes it */
	self->hook_writes = self->hook_calls;
	for (unsigned d = 0; d < 16 && !m; d++) {
		ASSERT_EQ(0, one_lane(&self->v, off & ~3u, out, 0, 0));
		ASSERT_EQ(0, hm_engine_is_mirrored(self->v.e, GUEST_BASE + off, &m));
	}
	EXPECT_TRUE(m);
	memcpy(&got, self->v.mem + out, 4);
	EXPECT_EQ((uint8_t)(0x10 + self->hook_writes - 1), (got >> 8 * (off & 3)) & 0xff);
}

TEST_F(rules, shared_dispatch_reads_home)
{
	uint32_t src = 7 * CHUNK + 8, out = 9 * CHUNK;
	struct hm_engine_stats st0, st1;
	uint32_t got, before;
	bool m;

	self->v.hooks.before_dispatch = hook_cpu_write;
	self->hook_off = src;
	self->hook_val = 0xc3;
	RULES_ENV(self);
	ASSERT_EQ(0, hm_engine_advise(self->v.e, GUEST_BASE, SPACE_BYTES, HM_ADVICE_READ_MOSTLY));
	/* first dispatch uploads everything; the hook has not fired yet */
	self->hook_calls = 1;
	ASSERT_EQ(0, one_lane(&self->v, 0, 2 * CHUNK, 0, 0));
	ASSERT_EQ(0, hm_engine_is_mirrored(self->v.e, GUEST_BASE + src, &m));
	ASSERT_TRUE(m);
	memcpy(&before, self->v.mem + src, 4);
	ASSERT_NE(0xc3, before & 0xff);
	ASSERT_NE(0x3c, (before >> 8) & 0xff);

	/* a non-shared dispatch sees its chunk as of the dispatch's start:
	 * the CPU's write after the upload is not in the mirror */
	self->hook_calls = 0;
	ASSERT_EQ(0, one_lane(&self->v, src, out, 0, 0));
	memcpy(&got, self->v.mem + out, 4);
	ASSERT_EQ(before, got);

	/* rule 5: the same race in a shared dispatch reads home */
	self->hook_off = src + 1;
	self->hook_val = 0x3c;
	self->hook_calls = 0;
	ASSERT_EQ(0, hm_engine_stats(self->v.e, &st0));
	ASSERT_EQ(0, one_lane(&self->v, src, out + 4, 0, HM_DISPATCH_SHARED_WITH_CPU));
	memcpy(&got, self->v.mem + out + 4, 4);
	ASSERT_EQ(0xc3, got & 0xff);
	ASSERT_EQ(0x3c, (got >> 8) & 0xff);
	ASSERT_EQ(0, hm_engine_stats(self->v.e, &st1));
	ASSERT_EQ(st0.uploads, st1.uploads);                   /* no upload for it */
	ASSERT_EQ(st0.bytes_copied_home, st1.bytes_copied_home); /* wrote home itself */
	ASSERT_EQ(st0.mirrors_dropped_shared + 1, st1.mirrors_dropped_shared);
	ASSERT_EQ(0, hm_engine_is_mirrored(self->v.e, GUEST_BASE + out, &m));
	ASSERT_FALSE(m);                                        /* its mirror is stale: dropped */
	/* untouched mirrors come back without an upload */
	ASSERT_EQ(0, hm_engine_is_mirrored(self->v.e, GUEST_BASE + 12 * CHUNK, &m));
	ASSERT_FALSE(m);                                        /* repointed home meanwhile */
	self->hook_calls = 1;
	ASSERT_EQ(0, one_lane(&self->v, 12 * CHUNK, 2 * CHUNK + 8, 0, 0));
	ASSERT_EQ(0, hm_engine_is_mirrored(self->v.e, GUEST_BASE + 12 * CHUNK, &m));
	ASSERT_TRUE(m);
	ASSERT_EQ(0, hm_engine_stats(self->v.e, &st0));
	/* re-uploaded: the chunk the shared dispatch stored into, and the
	 * chunk the CPU wrote (7) */
	ASSERT_EQ(st1.uploads + 2, st0.uploads);
}

/* Backend-independent engine logic: natively only (each test JITs its
 * pipelines again, which costs seconds under TCG). */
#ifndef HM_ENGINE_TEST_VM
TEST_F(rules, budget_exhaustion_and_eviction)
{
	struct hm_engine_stats st;
	bool m;
	long r;

	self->ep.mirror_budget = 4 * 2 * CHUNK;
	RULES_ENV(self);
	ASSERT_EQ(0, hm_engine_advise(self->v.e, GUEST_BASE, SPACE_BYTES, HM_ADVICE_READ_MOSTLY));
	r = round_trip(&self->v, 128, 0, false, false);
	dump_mismatch(_metadata, &self->v, r);
	ASSERT_EQ(0, r);
	ASSERT_EQ(0, hm_engine_stats(self->v.e, &st));
	ASSERT_EQ(4, st.chunks_mirrored);
	ASSERT_EQ(4, st.uploads);
	ASSERT_EQ(4 * 2 * CHUNK, st.mirror_bytes);
	ASSERT_LT(0, st.budget_refusals);
	ASSERT_EQ(0, st.mirrors_evicted);

	/* a higher class evicts the oldest of a lower one */
	ASSERT_EQ(0, hm_engine_advise(self->v.e, GUEST_BASE + 12 * CHUNK, 2 * CHUNK,
				      HM_ADVICE_PREFER_DEVICE));
	r = round_trip(&self->v, 128, 0, false, false);
	dump_mismatch(_metadata, &self->v, r);
	ASSERT_EQ(0, r);
	ASSERT_EQ(0, hm_engine_stats(self->v.e, &st));
	ASSERT_EQ(4, st.chunks_mirrored);
	ASSERT_EQ(2, st.mirrors_evicted);
	ASSERT_EQ(0, hm_engine_is_mirrored(self->v.e, GUEST_BASE + 12 * CHUNK, &m));
	ASSERT_TRUE(m);
	ASSERT_EQ(0, hm_engine_is_mirrored(self->v.e, GUEST_BASE + 13 * CHUNK, &m));
	ASSERT_TRUE(m);
	/* prefer-device is never evicted for read-mostly */
	for (int i = 0; i < 3; i++) {
		r = round_trip(&self->v, 64, 0, false, false);
		ASSERT_EQ(0, r);
	}
	ASSERT_EQ(0, hm_engine_is_mirrored(self->v.e, GUEST_BASE + 12 * CHUNK, &m));
	ASSERT_TRUE(m);
}

/* a space imported in several pieces (as a large space is): exact too */
TEST_F(rules, split_imports)
{
	struct hm_engine_stats st;

	self->ep.max_import_bytes = 4 * CHUNK;
	RULES_ENV(self);
	/* imported lazily, at the first dispatch */
	ASSERT_EQ(0, hm_engine_stats(self->v.e, &st));
	ASSERT_EQ(0, st.import_pieces);
	ASSERT_EQ(0, hm_engine_advise(self->v.e, GUEST_BASE, SPACE_BYTES / 2, HM_ADVICE_READ_MOSTLY));
	for (int d = 0; d < 4; d++) {
		long r;

		cpu_between(&self->v, 8);
		r = round_trip(&self->v, 256, 0, false, false);
		dump_mismatch(_metadata, &self->v, r);
		ASSERT_EQ(0, r);
	}
	ASSERT_EQ(0, hm_engine_stats(self->v.e, &st));
	ASSERT_EQ(NR_CHUNKS / 4, st.import_pieces);
	ASSERT_EQ(SPACE_BYTES, st.import_bytes);
	ASSERT_LT(0, st.uploads);
	ASSERT_LT(0, st.bytes_copied_home);
	/* uploads group by home piece: at least one region per piece used */
	ASSERT_LE(2, st.upload_regions);
}

/* one batch of consecutive chunks: one copy region each way, every time */
TEST_F(rules, upload_regions_merge)
{
	struct hm_engine_stats st;

	RULES_ENV(self);
	for (int round = 0; round < 3; round++) {
		uint64_t before;

		ASSERT_EQ(0, hm_engine_stats(self->v.e, &st));
		before = st.upload_regions;
		ASSERT_EQ(0, hm_engine_advise(self->v.e, GUEST_BASE, 8 * CHUNK, HM_ADVICE_NEVER_MIRROR));
		ASSERT_EQ(0, hm_engine_advise(self->v.e, GUEST_BASE, 8 * CHUNK,
					      HM_ADVICE_PREFER_DEVICE));
		/* a store to a different unmirrored chunk each round: none gets hot */
		ASSERT_EQ(0, one_lane(&self->v, 0, (12 + round) * CHUNK, 0, 0));
		ASSERT_EQ(0, hm_engine_stats(self->v.e, &st));
		ASSERT_EQ(8 * (round + 1), st.uploads);
		ASSERT_EQ(before + 2, st.upload_regions);
	}
}

/*
 * Thrash control backs off chunks mirrored because they were measured hot:
 * no advice, the device stores into the chunk every dispatch (hot after 2),
 * the CPU writes it after each: 2 guard drops stop its mirroring for 5
 * dispatches.  Every byte ends as both writers left it.
 */
TEST_F(rules, thrash_backoff)
{
	uint32_t off = 2 * CHUNK + 40, v, got;
	struct hm_engine_stats st;
	bool m;

	self->ep.thrash_drops = 2;
	self->ep.thrash_window = 16;
	self->ep.thrash_backoff = 5;
	RULES_ENV(self);
	memcpy(&v, self->v.mem + off, 4);
	/* d1, d2: stores home, marked: hot.  d3: uploaded. */
	for (int i = 0; i < 3; i++) {
		ASSERT_EQ(0, one_lane(&self->v, off, off, 1, 0));
		v ^= 1;
	}
	ASSERT_EQ(0, hm_engine_is_mirrored(self->v.e, GUEST_BASE + off, &m));
	ASSERT_TRUE(m);
	/* CPU write; d4: dropped (1), uploaded again */
	self->v.mem[off] ^= 2;
	v ^= 2;
	ASSERT_EQ(0, one_lane(&self->v, off, off, 1, 0));
	v ^= 1;
	ASSERT_EQ(0, hm_engine_is_mirrored(self->v.e, GUEST_BASE + off, &m));
	ASSERT_TRUE(m);
	/* CPU write; d5: dropped (2): backs off, stays home */
	self->v.mem[off] ^= 2;
	v ^= 2;
	ASSERT_EQ(0, one_lane(&self->v, off, off, 1, 0));
	v ^= 1;
	ASSERT_EQ(0, hm_engine_stats(self->v.e, &st));
	ASSERT_EQ(1, st.thrash_backoffs);
	ASSERT_EQ(2, st.mirrors_dropped_by_guard);
	ASSERT_EQ(0, st.mirrors_refreshed);
	for (int i = 0; i < 4; i++) {
		ASSERT_EQ(0, hm_engine_is_mirrored(self->v.e, GUEST_BASE + off, &m));
		ASSERT_FALSE(m);
		ASSERT_EQ(0, one_lane(&self->v, off, off, 1, 0));
		v ^= 1;
	}
	/* back-off over: mirrored again */
	ASSERT_EQ(0, one_lane(&self->v, off, off, 1, 0));
	v ^= 1;
	ASSERT_EQ(0, hm_engine_is_mirrored(self->v.e, GUEST_BASE + off, &m));
	ASSERT_TRUE(m);
	memcpy(&got, self->v.mem + off, 4);
	ASSERT_EQ(v, got);
}

/*
 * Read-mostly data is never blacklisted because the CPU writes it (the
 * demo's hierarchy: words beside the ones the device reads): each drop is
 * followed by a copy again, whatever the thrash settings, and the device
 * reads every write.
 */
TEST_F(rules, read_mostly_never_backs_off)
{
	uint32_t off = 2 * CHUNK + 40, got;
	struct hm_engine_stats st;
	bool m;

	self->ep.thrash_drops = 2;
	self->ep.thrash_window = 16;
	self->ep.thrash_backoff = 64;
	RULES_ENV(self);
	ASSERT_EQ(0, hm_engine_advise(self->v.e, GUEST_BASE + 2 * CHUNK, CHUNK, HM_ADVICE_READ_MOSTLY));
	/* the output stays home: only the read chunk's uploads are counted */
	ASSERT_EQ(0, hm_engine_advise(self->v.e, GUEST_BASE + 8 * CHUNK, CHUNK,
				      HM_ADVICE_NEVER_MIRROR));
	for (uint32_t i = 0; i < 8; i++) {
		if (i)
			self->v.mem[off + 4] = (uint8_t)i;	/* a neighbour of the word read */
		self->v.mem[off] = (uint8_t)(0x40 + i);
		ASSERT_EQ(0, one_lane(&self->v, off, 8 * CHUNK + 4 * i, 0, 0));
		ASSERT_EQ(0, hm_engine_is_mirrored(self->v.e, GUEST_BASE + off, &m));
		ASSERT_TRUE(m);
		memcpy(&got, self->v.mem + 8 * CHUNK + 4 * i, 4);
		ASSERT_EQ(0x40 + i, got & 0xff);
	}
	ASSERT_EQ(0, hm_engine_stats(self->v.e, &st));
	ASSERT_EQ(0, st.thrash_backoffs);
	ASSERT_EQ(7, st.mirrors_dropped_by_guard);
	ASSERT_EQ(7, st.mirrors_refreshed);
	ASSERT_EQ(8, st.uploads);
}

/*
 * hm_engine_harvest_now() (the daemon calls it on the module's guard-trip
 * events): a CPU write to a mirrored chunk followed by an early harvest
 * drops the mirror and repoints the slot home before any dispatch.
 */
TEST_F(rules, harvest_now_drops_mirror_before_dispatch)
{
	uint32_t off = 2 * CHUNK + 72, out = 9 * CHUNK;
	uint64_t dev_mirror, dev_after;
	struct hm_engine_stats st0, st1;
	bool m;

	RULES_ENV(self);
	ASSERT_EQ(-EINVAL, hm_engine_harvest_now(NULL));
	ASSERT_EQ(0, hm_engine_advise(self->v.e, GUEST_BASE + 2 * CHUNK, CHUNK, HM_ADVICE_READ_MOSTLY));
	ASSERT_EQ(0, one_lane(&self->v, off, out, 0, 0));
	ASSERT_EQ(0, hm_engine_is_mirrored(self->v.e, GUEST_BASE + off, &m));
	ASSERT_TRUE(m);
	ASSERT_EQ(0, hm_engine_device_addr(self->v.e, GUEST_BASE + off, &dev_mirror));
	/* control: nothing written, nothing dropped */
	ASSERT_EQ(0, hm_engine_harvest_now(self->v.e));
	ASSERT_EQ(0, hm_engine_is_mirrored(self->v.e, GUEST_BASE + off, &m));
	ASSERT_TRUE(m);

	ASSERT_EQ(0, hm_engine_stats(self->v.e, &st0));
	self->v.mem[off] ^= 0x5a;
	ASSERT_EQ(1, hm_engine_harvest_now(self->v.e));
	ASSERT_EQ(0, hm_engine_stats(self->v.e, &st1));
	ASSERT_EQ(st0.dispatches, st1.dispatches);      /* no dispatch in between */
	ASSERT_EQ(st0.mirrors_dropped_by_guard + 1, st1.mirrors_dropped_by_guard);
	ASSERT_EQ(st0.mirrors_dropped_early + 1, st1.mirrors_dropped_early);
	ASSERT_EQ(st0.early_harvests + 1, st1.early_harvests);
	ASSERT_EQ(0, hm_engine_is_mirrored(self->v.e, GUEST_BASE + off, &m));
	ASSERT_FALSE(m);
	ASSERT_EQ(0, hm_engine_device_addr(self->v.e, GUEST_BASE + off, &dev_after));
	ASSERT_NE(dev_mirror, dev_after);                /* the table names home */
	/* the same write is not reported twice */
	ASSERT_EQ(0, hm_engine_harvest_now(self->v.e));
	/* the next dispatch sees the CPU's byte (re-uploaded or home) */
	ASSERT_EQ(0, one_lane(&self->v, off, out, 0, 0));
	ASSERT_EQ(0, memcmp(self->v.mem + off, self->v.mem + out, 4));
	ASSERT_EQ(0, hm_engine_stats(self->v.e, &st1));
	ASSERT_EQ(st0.mirrors_dropped_by_guard + 1, st1.mirrors_dropped_by_guard);
}

/*
 * hm_engine_prefetch(): the advised chunks are uploaded and published
 * before any dispatch, guarded as an upload at a dispatch is: a CPU write
 * after the prefetch is seen by the next dispatch.
 */
TEST_F(rules, prefetch_uploads_before_the_first_dispatch)
{
	uint32_t off = 3 * CHUNK + 40, out = 9 * CHUNK;
	struct hm_engine_stats st;
	bool m;

	RULES_ENV(self);
	ASSERT_EQ(-EINVAL, hm_engine_prefetch(NULL));
	ASSERT_EQ(0, hm_engine_prefetch(self->v.e));    /* nothing wanted yet */
	ASSERT_EQ(0, hm_engine_advise(self->v.e, GUEST_BASE + 2 * CHUNK, 3 * CHUNK,
				      HM_ADVICE_READ_MOSTLY));
	ASSERT_EQ(3, hm_engine_prefetch(self->v.e));
	for (uint32_t c = 2; c < 5; c++) {
		ASSERT_EQ(0, hm_engine_is_mirrored(self->v.e, GUEST_BASE + c * CHUNK, &m));
		ASSERT_TRUE(m);
	}
	ASSERT_EQ(0, hm_engine_is_mirrored(self->v.e, GUEST_BASE + 5 * CHUNK, &m));
	ASSERT_FALSE(m);
	ASSERT_EQ(0, hm_engine_stats(self->v.e, &st));
	ASSERT_EQ(0, st.dispatches);
	ASSERT_EQ(3, st.uploads);
	ASSERT_EQ(2, st.prefetches);
	ASSERT_EQ(0, hm_engine_prefetch(self->v.e));    /* all clean: nothing to do */

	/* the guard holds from the prefetch on */
	self->v.mem[off] ^= 0x5a;
	ASSERT_EQ(0, one_lane(&self->v, off, out, 0, 0));
	ASSERT_EQ(0, memcmp(self->v.mem + off, self->v.mem + out, 4));
	ASSERT_EQ(0, hm_engine_stats(self->v.e, &st));
	ASSERT_EQ(1, st.dispatches);
	ASSERT_EQ(1, st.mirrors_dropped_by_guard);
	ASSERT_EQ(4, st.uploads);                       /* the written chunk, again */
	ASSERT_EQ(0, st.uploads_discarded);
}

TEST_F(rules, hot_chunks_are_mirrored)
{
	struct hm_engine_stats st;
	bool m;

	self->ep.hot_marks = 2;
	RULES_ENV(self);
	/* device writes chunk 6 in two dispatches: hot, mirrored for the third */
	ASSERT_EQ(0, one_lane(&self->v, 0, 6 * CHUNK, 5, 0));
	ASSERT_EQ(0, hm_engine_is_mirrored(self->v.e, GUEST_BASE + 6 * CHUNK, &m));
	ASSERT_FALSE(m);
	uint32_t oldw, neww, diff = 0;

	ASSERT_EQ(0, one_lane(&self->v, 0, 6 * CHUNK + 4, 5, 0));
	memcpy(&oldw, self->v.mem + 6 * CHUNK + 8, 4);
	memcpy(&neww, self->v.mem + 4, 4);
	neww ^= 5;
	for (int j = 0; j < 4; j++)
		diff += ((oldw ^ neww) >> (8 * j)) & 0xff ? 1 : 0;
	ASSERT_LT(0, diff);
	ASSERT_EQ(0, one_lane(&self->v, 4, 6 * CHUNK + 8, 5, 0));
	ASSERT_EQ(0, hm_engine_is_mirrored(self->v.e, GUEST_BASE + 6 * CHUNK, &m));
	ASSERT_TRUE(m);
	ASSERT_EQ(0, hm_engine_stats(self->v.e, &st));
	ASSERT_EQ(1, st.uploads);
	/* the third store went to the mirror; the bytes it changed came home */
	ASSERT_EQ(1, st.chunks_copied_home);
	ASSERT_EQ(diff, st.bytes_copied_home);
	ASSERT_EQ(u32_at(self->v.mem, 4) ^ 5, u32_at(self->v.mem, 6 * CHUNK + 8));
}

TEST_F(rules, import_refused)
{
	struct hm_space_params sp = { .size = SPACE_BYTES, .chunk_shift = CHUNK_SHIFT,
				      .backend = first_backend() };
	struct hm_space *s2 = NULL;
	uint32_t id;
	long r;

	RULES_ENV(self);
	ASSERT_EQ(0, hm_space_new(&sp, &s2));
	/* bad guest addresses */
	ASSERT_EQ(-EINVAL, hm_engine_add_space(self->v.e, s2, GUEST_BASE + CHUNK / 2, &id));
	ASSERT_EQ(-EEXIST, hm_engine_add_space(self->v.e, s2, GUEST_BASE + CHUNK, &id));
	ASSERT_EQ(-EEXIST, hm_engine_add_space(self->v.e, self->v.s, 2 * GUEST_BASE, &id));
	/* a device that refuses host-pointer import (lavapipe accepts every
	 * pointer, so the refusal is the one a device without the extension
	 * gives): the engine stays as it was */
	self->v.vk->has_host_import = false;
	ASSERT_EQ(-EOPNOTSUPP, hm_engine_add_space(self->v.e, s2, 2 * GUEST_BASE, &id));
	self->v.vk->has_host_import = true;
	r = round_trip(&self->v, 64, 0, true, false);
	ASSERT_EQ(0, r);
	/* and a second space works once import does */
	ASSERT_EQ(0, hm_engine_add_space(self->v.e, s2, 2 * GUEST_BASE, &id));
	ASSERT_EQ(0, hm_engine_remove_space(self->v.e, id));
	ASSERT_EQ(-ENOENT, hm_engine_remove_space(self->v.e, id));
	hm_space_free(s2);
}

TEST_F(rules, device_lost_leaves_home_intact)
{
	struct hm_engine_stats st;
	uint32_t got;
	long r;

	if (!hm_test_fault_layer())
		SKIP(return, "no build/share/hmirror/vkfault next to this program");
	RULES_ENV(self);
	ASSERT_EQ(0, hm_engine_advise(self->v.e, GUEST_BASE, SPACE_BYTES, HM_ADVICE_PREFER_DEVICE));
	r = round_trip(&self->v, 64, 0, false, false);
	ASSERT_EQ(0, r);
	ASSERT_EQ(0, hm_engine_stats(self->v.e, &st));
	ASSERT_EQ(NR_CHUNKS, st.chunks_mirrored);
	/* the next submission (the dispatch itself: everything is mirrored
	 * and clean) loses the device (VK_LAYER_HMIRROR_fault) */
	memcpy(self->v.model, self->v.mem, SPACE_BYTES);
	hm_test_lose_device_now(true);
	r = one_lane(&self->v, 0, 4 * CHUNK, 0xffffffff, 0);
	hm_test_lose_device_now(false);
	ASSERT_EQ(-ENODEV, r);
	ASSERT_EQ(0, memcmp(self->v.model, self->v.mem, SPACE_BYTES));
	ASSERT_EQ(-ENODEV, one_lane(&self->v, 0, 4 * CHUNK, 0xffffffff, 0));
	memcpy(&got, self->v.mem + 4 * CHUNK, 4);
	ASSERT_EQ(0, memcmp(self->v.model, self->v.mem, SPACE_BYTES));
	ASSERT_EQ(0, hm_engine_stats(self->v.e, &st));
	ASSERT_EQ(1, st.dispatches);
	ASSERT_EQ(-ENODEV, hm_engine_add_space(self->v.e, self->v.s, 2 * GUEST_BASE, NULL));
}

/* ---- the mirror window and the two tiers (D969a) ------------------------ */

/*
 * The window probe: a dispatch (like any other: the engine syncs the window
 * before it) that copies its push block's twelve table and window words to
 * out[0..11] and every word of the window it was given, raw, to out[16 +
 * k] (at most cap words): what the device's speculative loads would read.
 */
#define PROBE_USER_WORDS 3

static int probe_build(uint32_t **ret_w, size_t *ret_n)
{
	struct rwb b = { 0 };
	struct hm_spirv_module *m;
	uint32_t push[HM_DEVICE_TABLE_PUSH_WORDS + PROBE_USER_WORDS], gidx, merge, out, first, last;
	uint32_t n, psb, k;
	int r = hm_spirv_module_new(&b.m);

	if (r)
		return r;
	m = b.m;
	b.u32 = hm_spirv_type_int(m, 32, false);
	b.u64 = hm_spirv_type_int(m, 64, false);
	b.bl = hm_spirv_type_bool(m);
	psb = hm_spirv_type_pointer(m, SpvStorageClassPhysicalStorageBuffer, b.u32);
	hm_spirv_compute_main(m, HM_DEVICE_TABLE_PUSH_WORDS + PROBE_USER_WORDS, 64, push, &gidx);
#define FN HM_SPV_SEC_FUNCTION
#define J(lo, hi) HM_SPV_OP(m, FN, SpvOpBitwiseOr, b.u64, \
			    HM_SPV_OP(m, FN, SpvOpUConvert, b.u64, lo), \
			    HM_SPV_OP(m, FN, SpvOpShiftLeftLogical, b.u64, \
				      HM_SPV_OP(m, FN, SpvOpUConvert, b.u64, hi), \
				      hm_spirv_const_u32(m, 32)))
#define AT(base, i) HM_SPV_OP(m, FN, SpvOpConvertUToPtr, psb, \
			      HM_SPV_OP(m, FN, SpvOpIAdd, b.u64, base, \
					HM_SPV_OP(m, FN, SpvOpShiftLeftLogical, b.u64, \
						  HM_SPV_OP(m, FN, SpvOpUConvert, b.u64, i), \
						  hm_spirv_const_u32(m, 2))))
	out = J(push[HM_DEVICE_TABLE_PUSH_WORDS], push[HM_DEVICE_TABLE_PUSH_WORDS + 1]);
	first = J(push[HM_PUSH_WINDOW_FIRST_LO], push[HM_PUSH_WINDOW_FIRST_HI]);
	last = J(push[HM_PUSH_WINDOW_LAST_LO], push[HM_PUSH_WINDOW_LAST_HI]);
	rwb_if(&b, HM_SPV_OP(m, FN, SpvOpIEqual, b.bl, gidx, hm_spirv_const_u32(m, 0)), &merge);
	for (uint32_t i = 0; i < HM_DEVICE_TABLE_PUSH_WORDS; i++)
		HM_SPV(m, FN, SpvOpStore, AT(out, hm_spirv_const_u32(m, i)), push[i],
		       SpvMemoryAccessAlignedMask, 4);
	rwb_endif(&b, merge);
	/* n = min(words of the window, cap) */
	n = HM_SPV_OP(m, FN, SpvOpUConvert, b.u32,
		      HM_SPV_OP(m, FN, SpvOpShiftRightLogical, b.u64,
				HM_SPV_OP(m, FN, SpvOpIAdd, b.u64,
					  HM_SPV_OP(m, FN, SpvOpISub, b.u64, last, first),
					  hm_spirv_const_u64(m, HM_ACCESS_MAX_BYTES)),
				hm_spirv_const_u32(m, 2)));
	n = HM_SPV_OP(m, FN, SpvOpSelect, b.u32,
		      HM_SPV_OP(m, FN, SpvOpULessThan, b.bl, n,
				push[HM_DEVICE_TABLE_PUSH_WORDS + 2]),
		      n, push[HM_DEVICE_TABLE_PUSH_WORDS + 2]);
	rwb_if(&b, HM_SPV_OP(m, FN, SpvOpULessThan, b.bl, gidx, n), &merge);
	k = HM_SPV_OP(m, FN, SpvOpIAdd, b.u32, gidx, hm_spirv_const_u32(m, 16));
	HM_SPV(m, FN, SpvOpStore, AT(out, k),
	       HM_SPV_OP(m, FN, SpvOpLoad, b.u32, AT(first, gidx), SpvMemoryAccessAlignedMask, 4),
	       SpvMemoryAccessAlignedMask, 4);
	rwb_endif(&b, merge);
#undef AT
#undef J
#undef FN
	HM_SPV(m, HM_SPV_SEC_FUNCTION, SpvOpReturn);
	hm_spirv_inst(m, HM_SPV_SEC_FUNCTION, SpvOpFunctionEnd, NULL, 0);
	r = hm_spirv_module_finish(m, ret_w, ret_n);
	hm_spirv_module_free(m);
	return r;
}

/* the guard-only window is 1,024 words; a window over the space more */
#define PROBE_CAP (SPACE_BYTES / 4 + 2 * HM_WINDOW_GUARD_BYTES / 4)

struct probe {
	uint32_t pipe;
	struct hm_vk_buffer out;
};

static int probe_new(struct env *v, struct probe *pr)
{
	uint32_t *w;
	size_t n;
	int err = probe_build(&w, &n);

	if (err)
		return err;
	err = hm_engine_pipeline_new(v->e, w, n, "main", PROBE_USER_WORDS, &pr->pipe);
	free(w);
	if (err)
		return err;
	return hm_vk_buffer_new(v->vk, 4 * (16 + PROBE_CAP), HM_VK_MEM_HOST, &pr->out);
}

/*
 * Run the probe and check that the window it saw agrees with the table:
 * a chunk the table names a mirror for is named at its window bytes, which
 * hold exactly its home bytes; every other window word, guards included,
 * is the sentinel; a shared dispatch sees the sentinel page alone.
 * Answers 0 or a line number of the failed check (logged).
 */
static int probe_check(struct __test_metadata *_metadata, struct env *v, struct probe *pr,
		       bool shared, unsigned *ret_mirrored)
{
	uint32_t push[PROBE_USER_WORDS] = { (uint32_t)pr->out.addr,
					    (uint32_t)(pr->out.addr >> 32), PROBE_CAP };
	uint32_t *o = pr->out.map, *win = o + 16;
	uint64_t delta, first, last, nwords;
	int err;

	memset(o, 0xab, 4 * 16);
	err = hm_engine_dispatch(v->e, pr->pipe, (PROBE_CAP + 63) / 64, 1, 1, push,
				 PROBE_USER_WORDS, shared ? HM_DISPATCH_SHARED_WITH_CPU : 0);
	if (err) {
		TH_LOG("dispatch %d", err);
		return __LINE__;
	}
	delta = o[HM_PUSH_WINDOW_DELTA_LO] | (uint64_t)o[HM_PUSH_WINDOW_DELTA_HI] << 32;
	first = o[HM_PUSH_WINDOW_FIRST_LO] | (uint64_t)o[HM_PUSH_WINDOW_FIRST_HI] << 32;
	last = o[HM_PUSH_WINDOW_LAST_LO] | (uint64_t)o[HM_PUSH_WINDOW_LAST_HI] << 32;
	nwords = (last + HM_ACCESS_MAX_BYTES - first) / 4;
	*ret_mirrored = 0;
	if (nwords > PROBE_CAP) {
		TH_LOG("window of %lu words", (unsigned long)nwords);
		return __LINE__;
	}
	for (uint64_t k = 0; k < nwords; k++) {
		uint64_t dev = first + 4 * k, guest = dev - delta, off = guest - GUEST_BASE;
		/* the window's guest bytes: all of it but the guards (it may
		 * cover less than the space) */
		uint64_t cov = nwords * 4 - 2 * (uint64_t)HM_WINDOW_GUARD_BYTES;
		bool in_space = shared || nwords <= 1024 ? false :
				off < (cov < SPACE_BYTES ? cov : SPACE_BYTES);
		bool m = false;
		uint64_t tdev;

		if (in_space) {
			if (hm_engine_is_mirrored(v->e, guest, &m) ||
			    hm_engine_device_addr(v->e, guest, &tdev))
				return __LINE__;
			if (m && tdev != dev) {
				TH_LOG("chunk %lu mirrored, table names %#lx, window %#lx",
					      (unsigned long)(off >> CHUNK_SHIFT),
					      (unsigned long)tdev, (unsigned long)dev);
				return __LINE__;
			}
			if (!m && tdev == dev)
				return __LINE__;
		}
		if (m) {
			uint32_t home;

			memcpy(&home, v->mem + off, 4);
			if (win[k] != home) {
				TH_LOG("mirrored word %#lx: window %#x, home %#x",
					      (unsigned long)off, win[k], home);
				return __LINE__;
			}
			if (off % CHUNK == 0)
				++*ret_mirrored;
		} else if (win[k] != HM_WINDOW_SENTINEL) {
			{
			TH_LOG("word %lu of the window (guest %#lx): %#x, not the sentinel",
				      (unsigned long)k, (unsigned long)guest, win[k]);
			return __LINE__;
		}
		}
	}
	if (shared && nwords > 1024) {
		TH_LOG("a shared dispatch was given a window");
		return __LINE__;
	}
	return 0;
}

/*
 * Property: over random sequences of advice (mirror, never mirror, default),
 * CPU writes (guard drops), early harvests, dispatches that write (tier
 * two), evictions (a budget of 5 mirrors) and shared dispatches, the window
 * of every dispatch agrees with its table.
 */
static void window_property(struct __test_metadata *_metadata, FIXTURE_DATA(rules) *self,
			    uint64_t max_window)
{
	static const enum hm_advice adv[] = { HM_ADVICE_READ_MOSTLY, HM_ADVICE_PREFER_DEVICE,
					      HM_ADVICE_NEVER_MIRROR, HM_ADVICE_DEFAULT };
	struct probe pr = { 0 };
	struct hm_engine_stats st;
	unsigned most = 0, checks = 0;

	self->ep.mirror_budget = 5 * 2 * CHUNK;
	self->ep.thrash_drops = 200;
	self->ep.max_window_bytes = max_window;
	self->v.tier = T_SPEC;
	RULES_ENV(self);
	ASSERT_EQ(0, probe_new(&self->v, &pr));
	for (int step = 0; step < 60; step++) {
		uint64_t r = rnd(&self->v.rng);
		unsigned mirrored = 0;
		int line;

		switch (r % 6) {
		case 0:
		case 1: {
			uint32_t c = (r >> 8) % NR_CHUNKS, n = 1 + (r >> 16) % 4;

			if (c + n > NR_CHUNKS)
				n = NR_CHUNKS - c;
			ASSERT_EQ(0, hm_engine_advise(self->v.e, GUEST_BASE + (uint64_t)c * CHUNK,
						      (uint64_t)n * CHUNK, adv[(r >> 24) % 4]));
			break;
		}
		case 2:
			cpu_between(&self->v, 1 + (r >> 8) % 4);
			break;
		case 3:
			cpu_between(&self->v, 2);
			ASSERT_LE(0, hm_engine_harvest_now(self->v.e));
			break;
		case 4: {
			long rt = round_trip(&self->v, 64 + (r >> 8) % 128, 0, false, false);

			dump_mismatch(_metadata, &self->v, rt);
			ASSERT_EQ(0, rt);
			break;
		}
		case 5:
			line = probe_check(_metadata, &self->v, &pr, true, &mirrored);
			ASSERT_EQ(0, line) TH_LOG("step %d: shared probe", step);
			break;
		}
		line = probe_check(_metadata, &self->v, &pr, false, &mirrored);
		ASSERT_EQ(0, line) TH_LOG("step %d (op %lu)", step, (unsigned long)(r % 6));
		checks++;
		if (mirrored > most)
			most = mirrored;
	}
	ASSERT_EQ(0, hm_engine_stats(self->v.e, &st));
	TH_LOG("%u checks, up to %u chunks mirrored; window (%s) copies %lu, fills %lu, binds %lu, "
	       "syncs %lu, drops %lu, evictions %lu", checks, most,
	       st.window_sparse ? "sparse" : "dense", st.window_copies, st.window_fills,
	       st.window_binds, st.window_syncs, st.mirrors_dropped_by_guard, st.mirrors_evicted);
	ASSERT_LT(0, most);             /* the window held mirrors */
	ASSERT_LT(0, st.window_fills + st.window_binds);    /* and lost some */
	ASSERT_LT(0, st.mirrors_dropped_by_guard);
	ASSERT_LT(0, st.mirrors_evicted);
	ASSERT_EQ(max_window ? SPACE_BYTES / 2 : 0, st.window_uncovered_bytes);
	hm_vk_buffer_free(self->v.vk, &pr.out);
}

TEST_F(rules, window_agrees_with_table_at_every_dispatch)
{
	window_property(_metadata, self, 0);
}

/* A window smaller than the spaces (NVIDIA's maxBufferSize is 4094 MiB)
 * covers their first half; mirrors past it are named at their pool slots
 * and reached through the helper: the same property, and every writing
 * dispatch of the sequence matches the model. */
TEST_F(rules, window_smaller_than_the_spaces)
{
	window_property(_metadata, self, 2 * HM_WINDOW_GUARD_BYTES + SPACE_BYTES / 2);
}

/* A guest word equal to the sentinel reads as itself, mirrored or not. */
TEST_F(rules, sentinel_guest_word_reads_correctly)
{
	uint32_t sent = HM_WINDOW_SENTINEL, near = 0xfffffffe, got;
	uint32_t mir = 3 * CHUNK + 64, home = 9 * CHUNK + 64, out = 12 * CHUNK;
	struct hm_engine_stats st;
	bool m;

	self->v.tier = T_SPEC;
	RULES_ENV(self);
	ASSERT_EQ(0, hm_engine_advise(self->v.e, GUEST_BASE + 3 * CHUNK, CHUNK,
				      HM_ADVICE_READ_MOSTLY));
	memcpy(self->v.mem + mir, &sent, 4);
	memcpy(self->v.mem + mir + 4, &near, 4);
	memcpy(self->v.mem + home, &sent, 4);
	/* first dispatch uploads chunk 3; then read each word (x = 0) */
	ASSERT_EQ(0, one_lane(&self->v, 0, out, 0, 0));
	ASSERT_EQ(0, hm_engine_is_mirrored(self->v.e, GUEST_BASE + mir, &m));
	ASSERT_TRUE(m);
	ASSERT_EQ(0, one_lane(&self->v, mir, out, 0, 0));
	memcpy(&got, self->v.mem + out, 4);
	ASSERT_EQ(sent, got);
	ASSERT_EQ(0, one_lane(&self->v, mir + 4, out, 0, 0));
	memcpy(&got, self->v.mem + out, 4);
	ASSERT_EQ(near, got);
	ASSERT_EQ(0, one_lane(&self->v, home, out, 0, 0));
	memcpy(&got, self->v.mem + out, 4);
	ASSERT_EQ(sent, got);
	ASSERT_EQ(0, one_lane(&self->v, mir, out, 0x0f0f0f0f, 0));
	memcpy(&got, self->v.mem + out, 4);
	ASSERT_EQ(sent ^ 0x0f0f0f0f, got);
	ASSERT_EQ(0, hm_engine_stats(self->v.e, &st));
	ASSERT_LT(0, st.window_copies + st.window_binds);
}

/*
 * A mirror dropped by a guard is never read: the CPU writes a mirrored
 * chunk between two dispatches; the next one's speculative load reads the
 * CPU's word, not the window's stale copy.  Once by the harvest at the
 * dispatch, once by hm_engine_harvest_now().  The chunk is not wanted again
 * (no advice, not hot), so nothing re-uploads it before the read.
 */
TEST_F(rules, dropped_mirror_is_never_read)
{
	uint32_t src = 5 * CHUNK + 128, out = 11 * CHUNK, got, want;
	bool m;

	self->ep.hot_marks = 9;         /* never hot */
	self->v.tier = T_SPEC;
	RULES_ENV(self);
	for (int early = 0; early < 2; early++) {
		ASSERT_EQ(0, hm_engine_advise(self->v.e, GUEST_BASE + 5 * CHUNK, CHUNK,
					      HM_ADVICE_READ_MOSTLY));
		ASSERT_EQ(0, one_lane(&self->v, src, out, 0, 0));
		ASSERT_EQ(0, hm_engine_is_mirrored(self->v.e, GUEST_BASE + src, &m));
		ASSERT_TRUE(m);
		ASSERT_EQ(0, hm_engine_advise(self->v.e, GUEST_BASE + 5 * CHUNK, CHUNK,
					      HM_ADVICE_DEFAULT));
		want = 0x600d0000u + early;
		memcpy(self->v.mem + src, &want, 4);
		if (early)
			ASSERT_EQ(1, hm_engine_harvest_now(self->v.e));
		ASSERT_EQ(0, one_lane(&self->v, src, out, 0, 0));
		ASSERT_EQ(0, hm_engine_is_mirrored(self->v.e, GUEST_BASE + src, &m));
		ASSERT_FALSE(m);
		memcpy(&got, self->v.mem + out, 4);
		ASSERT_EQ(want, got) TH_LOG("early %d", early);
	}
}

/*
 * Rule 5 with the window: a word changed home behind the guards (through
 * the device view, which nothing records) is not in the window's mirror; a
 * normal dispatch reads the mirror (the stale word: the window is in use),
 * a dispatch shared with the CPU reads home.
 */
TEST_F(rules, shared_dispatch_reads_home_not_the_window)
{
	uint32_t src = 6 * CHUNK + 16, out = 13 * CHUNK, got, old, x = 0x5eed1234;
	uint8_t *view;
	bool m;

	self->v.tier = T_SPEC;
	RULES_ENV(self);
	ASSERT_EQ(0, hm_space_device_view(self->v.s, (void **)&view));
	ASSERT_EQ(0, hm_engine_advise(self->v.e, GUEST_BASE + 6 * CHUNK, CHUNK,
				      HM_ADVICE_READ_MOSTLY));
	ASSERT_EQ(0, one_lane(&self->v, 0, out, 0, 0));
	ASSERT_EQ(0, hm_engine_is_mirrored(self->v.e, GUEST_BASE + src, &m));
	ASSERT_TRUE(m);
	memcpy(&old, self->v.mem + src, 4);
	ASSERT_NE(old, x);
	memcpy(view + src, &x, 4);
	ASSERT_EQ(0, one_lane(&self->v, src, out, 0, 0));
	memcpy(&got, self->v.mem + out, 4);
	ASSERT_EQ(old, got);            /* control: the window's copy */
	ASSERT_EQ(0, one_lane(&self->v, src, out, 0, HM_DISPATCH_SHARED_WITH_CPU));
	memcpy(&got, self->v.mem + out, 4);
	ASSERT_EQ(x, got);
}

/*
 * The default two tiers: the pipeline starts compact, its speculative form
 * compiles on the engine's thread, the switch comes at a dispatch boundary
 * and changes no result; a second pipeline of the same module is built
 * speculative at once (its form is in the engine's pipeline cache); a
 * pipeline freed while its tier two compiles loses nothing.
 */
TEST_F(rules, tier_two_switches_at_a_dispatch_boundary)
{
	struct hm_engine_pipeline_info pi;
	struct hm_engine_stats st;
	uint32_t p2, p3, got[2];
	uint32_t *w;
	size_t n;

	self->v.tier = T_COMPACT;
	RULES_ENV(self);
	ASSERT_EQ(0, hm_engine_advise(self->v.e, GUEST_BASE, SPACE_BYTES / 2, HM_ADVICE_READ_MOSTLY));
	hm_engine_pipeline_free(self->v.e, self->v.pipe);
	ASSERT_EQ(0, rw_build(&w, &n));
	ASSERT_EQ(0, hm_engine_pipeline_new(self->v.e, w, n, "main", RW_USER_WORDS, &self->v.pipe));
	ASSERT_EQ(0, hm_engine_pipeline_info(self->v.e, self->v.pipe, &pi));
	ASSERT_EQ(HM_TIER_COMPACT, pi.tier);    /* only a dispatch switches */
	ASSERT_LT(0, pi.ns_compile_compact);
	ASSERT_EQ(0, one_lane(&self->v, 2 * CHUNK + 40, 12 * CHUNK, 0x1111, 0));
	ASSERT_EQ(0, hm_engine_pipeline_wait(self->v.e, self->v.pipe, SUBMIT_TIMEOUT_NS));
	ASSERT_EQ(0, one_lane(&self->v, 2 * CHUNK + 40, 12 * CHUNK + 4, 0x1111, 0));
	ASSERT_EQ(0, hm_engine_pipeline_info(self->v.e, self->v.pipe, &pi));
	ASSERT_EQ(HM_TIER_SPECULATIVE, pi.tier);
	ASSERT_FALSE(pi.pending);
	ASSERT_EQ(0, pi.tier_two_error);
	ASSERT_LT(0, pi.ns_compile_speculative);
	memcpy(got, self->v.mem + 12 * CHUNK, 8);
	ASSERT_EQ(got[0], got[1]);
	ASSERT_EQ(0, hm_engine_stats(self->v.e, &st));
	ASSERT_EQ(1, st.tier_switches);
	ASSERT_LT(0, st.window_copies + st.window_binds);

	ASSERT_EQ(0, hm_engine_pipeline_new(self->v.e, w, n, "main", RW_USER_WORDS, &p2));
	ASSERT_EQ(0, hm_engine_pipeline_info(self->v.e, p2, &pi));
	ASSERT_EQ(HM_TIER_SPECULATIVE, pi.tier);
	ASSERT_TRUE(pi.tier_one_skipped);
	ASSERT_FALSE(pi.pending);
	ASSERT_EQ(0, pi.ns_compile_compact);
	ASSERT_EQ(0, hm_engine_stats(self->v.e, &st));
	ASSERT_EQ(1, st.tier_one_skipped);
	/* one tier only, on request */
	ASSERT_EQ(0, hm_engine_pipeline_new_tiered(self->v.e, w, n, "main", RW_USER_WORDS,
						   HM_PIPELINE_COMPACT_ONLY, &p3));
	ASSERT_EQ(0, hm_engine_pipeline_info(self->v.e, p3, &pi));
	ASSERT_EQ(HM_TIER_COMPACT, pi.tier);
	ASSERT_FALSE(pi.pending);
	hm_engine_pipeline_free(self->v.e, p3);
	ASSERT_EQ(-EINVAL, hm_engine_pipeline_new_tiered(self->v.e, w, n, "main", RW_USER_WORDS,
							 HM_PIPELINE_FLAGS_ALL, &p3));
	/* freed while its tier two may still compile (a new module: not cached) */
	w[n - 2] ^= 0;
	ASSERT_EQ(0, hm_engine_pipeline_new_tiered(self->v.e, hm_test_rw_spv, hm_test_rw_spv_words,
						   "main", RW_USER_WORDS, 0, &p3));
	ASSERT_EQ(0, hm_engine_pipeline_info(self->v.e, p3, &pi));
	ASSERT_EQ(HM_TIER_NONE, pi.tier);       /* one form: no load functions */
	hm_engine_pipeline_free(self->v.e, p3);
	hm_engine_pipeline_free(self->v.e, p2);
	free(w);
}

/*
 * hm_engine_add_space() makes the device view's pages exist before the
 * import (NVIDIA refuses never-written pages) without changing a byte and
 * without a write the guards record: chunks written before stay as they
 * were, never-written chunks read zero, and the harvest after the import
 * reports nothing.
 */
/*
 * Consumers: an emulator's own harvest (its texture cache, through the
 * space's built-in consumer) never takes the engine's records.  Without
 * them it did: the engine kept its mirror of the written chunk and the
 * device read 1000 where the CPU had written 4242.
 */
TEST_F(rules, emulator_harvest_leaves_the_engine_its_records)
{
	uint32_t off = 2 * CHUNK + 64, out = 9 * CHUNK, val = 1000, got;
	uint64_t chunks[64], want;
	bool more, m, seen = false;
	size_t n;

	RULES_ENV(self);
	memcpy(self->v.mem + off, &val, 4);
	ASSERT_EQ(0, hm_engine_advise(self->v.e, GUEST_BASE + 2 * CHUNK, CHUNK, HM_ADVICE_READ_MOSTLY));
	ASSERT_EQ(0, one_lane(&self->v, off, out, 0, 0));
	ASSERT_EQ(0, hm_engine_is_mirrored(self->v.e, GUEST_BASE + off, &m));
	ASSERT_TRUE(m);
	memcpy(&got, self->v.mem + out, 4);
	ASSERT_EQ(1000, got);

	/* the emulator watches the whole space for its own cache */
	ASSERT_EQ(0, hm_space_arm(self->v.s, 0, hm_space_nr_chunks(self->v.s)));
	val = 4242;
	memcpy(self->v.mem + off, &val, 4);
	want = off >> hm_space_chunk_shift(self->v.s);
	do {
		ASSERT_EQ(0, hm_space_harvest(self->v.s, chunks, 64, &n, &more));
		for (size_t i = 0; i < n; i++)
			seen |= chunks[i] == want;
	} while (more);
	ASSERT_TRUE(seen);	/* its cache sees the write */
	/* and so does the engine: the mirror is dropped, the device reads 4242 */
	ASSERT_EQ(0, one_lane(&self->v, off, out, 0, 0));
	memcpy(&got, self->v.mem + out, 4);
	ASSERT_EQ(4242, got);
	/* the emulator's next harvest: nothing new (the device wrote out
	   through the device view, unwatched) */
	ASSERT_EQ(0, hm_space_harvest(self->v.s, chunks, 64, &n, &more));
	EXPECT_EQ(0, n);
}

/* during_dispatch: the CPU writes walk_off once, while the dispatch runs */
static void hook_walk_write(void *arg)
{
	FIXTURE_DATA(rules) *self = arg;

	if (!self->walk_armed)
		return;
	self->walk_armed = false;
	self->walk_calls++;
	self->v.mem[self->walk_off] = self->walk_val;
	if (self->walk_off2)
		self->v.mem[self->walk_off2] = self->walk_val;
}

/* after_upload_copy: once the walk's write is made, the CPU writes the
 * same byte again during the copy beside the dispatch */
static void hook_walk_race(void *arg)
{
	FIXTURE_DATA(rules) *self = arg;

	if (!self->race_armed || !self->walk_calls)
		return;
	self->race_armed = false;
	self->v.mem[self->walk_off] = self->walk_val + 1;
}

static uint8_t byte_at(const struct env *v, uint32_t word_off, uint32_t byte_off)
{
	uint32_t got;

	memcpy(&got, v->mem + word_off, 4);
	return (uint8_t)(got >> 8 * (byte_off & 3));
}

#define RULES_AHEAD_ENV(self, off, val) do { \
	(self)->ep.flags = 0; \
	(self)->v.hooks.during_dispatch = hook_walk_write; \
	(self)->v.hooks.after_upload_copy = hook_walk_race; \
	(self)->walk_off = (off); \
	(self)->walk_val = (val); \
	RULES_ENV(self); \
	ASSERT_EQ(0, hm_engine_advise((self)->v.e, GUEST_BASE + 3 * CHUNK, CHUNK, \
				      HM_ADVICE_READ_MOSTLY)); \
} while (0)

/* The second dispatch: the CPU writes off (0x11 before) while it walks;
 * it reads the mirror it started with, its result at out; two passes. */
static void walk_with_cpu_write(struct __test_metadata *_metadata, FIXTURE_DATA(rules) *self,
				uint32_t off, uint32_t out, struct hm_engine_stats *st)
{
	self->walk_armed = true;
	ASSERT_EQ(0, one_lane(&self->v, off & ~3u, out, 0, 0));
	ASSERT_EQ(1, self->walk_calls);
	ASSERT_EQ(0x11, byte_at(&self->v, out, off));
	ASSERT_EQ(0, hm_engine_stats(self->v.e, st));
	ASSERT_EQ(2, st->ahead_passes);
}

/*
 * Uploads ahead (ahead.c): a mirror the CPU writes while a dispatch walks
 * stays the dispatch's; a fresh copy made beside the walk replaces it at
 * the dispatch's end, and the next dispatch reads the CPU's byte with no
 * upload of its own.
 */
TEST_F(rules, ahead_upload_refreshes_a_written_mirror)
{
	uint32_t off = 3 * CHUNK + 100, out = 9 * CHUNK;
	struct hm_engine_stats st;
	uint64_t dev0, dev1;
	bool m;

	RULES_AHEAD_ENV(self, off, 0x77);
	self->v.mem[off] = 0x11;
	ASSERT_EQ(0, one_lane(&self->v, off & ~3u, out, 0, 0));
	ASSERT_EQ(0, hm_engine_device_addr(self->v.e, GUEST_BASE + off, &dev0));
	ASSERT_EQ(0, hm_engine_stats(self->v.e, &st));
	ASSERT_EQ(1, st.uploads);
	ASSERT_EQ(1, st.ahead_passes);
	ASSERT_EQ(0, st.ahead_uploads);

	walk_with_cpu_write(_metadata, self, off, out + 4, &st);
	ASSERT_EQ(1, st.ahead_uploads);
	ASSERT_EQ(0, st.ahead_discarded);
	ASSERT_EQ(2, st.uploads);
	/* the pass's time in its parts: the second pass harvested, copied
	 * and checked; the late start needs a second queue and timestamps */
	ASSERT_GT(st.ns_ahead_harvest, 0);
	ASSERT_GT(st.ns_ahead_copy, 0);
	ASSERT_GT(st.ns_ahead_check, 0);
	/* and its other parts: the candidate picked, its generations noted
	 * (the check is part of them), its clean copy listed, then published
	 * after the dispatch; none of them counted in the boundary's */
	ASSERT_GT(st.ns_ahead_select, 0);
	ASSERT_GT(st.ns_ahead_gens, st.ns_ahead_check);
	ASSERT_GT(st.ns_ahead_publish, 0);
	ASSERT_GT(st.ns_ahead_finish, 0);
	ASSERT_GE(st.ns_ahead, st.ns_ahead_harvest + st.ns_ahead_copy + st.ns_ahead_select +
			       st.ns_ahead_gens + st.ns_ahead_publish + st.ns_ahead_finish);
	ASSERT_GE(st.ns_upload_gens, st.ns_upload_check);
	if (!self->v.vk->side)
		ASSERT_EQ(0, st.ns_ahead_wait);
	ASSERT_EQ(0, st.mirrors_dropped_by_guard);
	ASSERT_EQ(0, hm_engine_is_mirrored(self->v.e, GUEST_BASE + off, &m));
	ASSERT_TRUE(m);
	ASSERT_EQ(0, hm_engine_device_addr(self->v.e, GUEST_BASE + off, &dev1));
	ASSERT_NE(dev0, dev1);                          /* a fresh slot */

	ASSERT_EQ(0, one_lane(&self->v, off & ~3u, out + 8, 0, 0));
	ASSERT_EQ(0x77, byte_at(&self->v, out + 8, off));
	ASSERT_EQ(0, hm_engine_stats(self->v.e, &st));
	ASSERT_EQ(0, st.uploads_discarded);
	ASSERT_EQ(0, st.mirrors_dropped_by_guard);
	ASSERT_EQ(1, st.ahead_uploads);                 /* not copied again */
	ASSERT_EQ(0, hm_engine_is_mirrored(self->v.e, GUEST_BASE + off, &m));
	ASSERT_TRUE(m);
}

/*
 * HMIRROR_AHEAD_COPY=0 (a measurement knob): the pass harvests and copies
 * nothing; the written mirror is resolved at the dispatch's end as the
 * harvest would have, and the next dispatch's boundary uploads it.
 */
TEST_F(rules, ahead_harvest_only_leaves_the_copy_to_the_boundary)
{
	uint32_t off = 3 * CHUNK + 100, out = 9 * CHUNK;
	struct hm_engine_stats st;
	bool m;

	ASSERT_EQ(0, setenv("HMIRROR_AHEAD_COPY", "0", 1));     /* this test's process */
	RULES_AHEAD_ENV(self, off, 0x6d);
	self->v.mem[off] = 0x11;
	ASSERT_EQ(0, one_lane(&self->v, off & ~3u, out, 0, 0));
	walk_with_cpu_write(_metadata, self, off, out + 4, &st);
	ASSERT_EQ(0, st.ahead_uploads);
	ASSERT_EQ(0, st.ahead_discarded);
	ASSERT_EQ(1, st.mirrors_dropped_by_guard);      /* at the dispatch's end */
	ASSERT_EQ(1, st.uploads);

	ASSERT_EQ(0, one_lane(&self->v, off & ~3u, out + 8, 0, 0));
	ASSERT_EQ(0x6d, byte_at(&self->v, out + 8, off));
	ASSERT_EQ(0, hm_engine_stats(self->v.e, &st));
	ASSERT_EQ(0, st.ahead_uploads);
	ASSERT_EQ(0, hm_engine_is_mirrored(self->v.e, GUEST_BASE + off, &m));
	ASSERT_TRUE(m);                                 /* uploaded at the boundary */
}

/*
 * A copy made beside a dispatch that stores into the same chunk lacks the
 * device's bytes: it is discarded, and the next dispatch reads both the
 * device's word and the CPU's byte.
 */
TEST_F(rules, ahead_copy_of_a_chunk_the_dispatch_stores_into_is_discarded)
{
	uint32_t a = 3 * CHUNK + 64, b = 3 * CHUNK + 200, out = 9 * CHUNK, x = 0x5eed1234;
	struct hm_engine_stats st;
	uint32_t got;

	RULES_AHEAD_ENV(self, b, 0x42);
	memset(self->v.mem + a, 0, 4);
	ASSERT_EQ(0, one_lane(&self->v, b & ~3u, out, 0, 0));
	self->walk_armed = true;
	/* word a = word a ^ x = x, into the mirror, while the CPU writes b */
	ASSERT_EQ(0, one_lane(&self->v, a, a, x, 0));
	ASSERT_EQ(1, self->walk_calls);
	memcpy(&got, self->v.mem + a, 4);
	ASSERT_EQ(x, got);                              /* home holds both */
	ASSERT_EQ(0x42, self->v.mem[b]);

	ASSERT_EQ(0, one_lane(&self->v, a, out + 4, 0, 0));
	memcpy(&got, self->v.mem + out + 4, 4);
	ASSERT_EQ(x, got);
	ASSERT_EQ(0, one_lane(&self->v, b & ~3u, out + 8, 0, 0));
	ASSERT_EQ(0x42, byte_at(&self->v, out + 8, b));
	ASSERT_EQ(0, hm_engine_stats(self->v.e, &st));
	ASSERT_EQ(0, st.ahead_uploads);
	ASSERT_EQ(1, st.ahead_discarded);
}

/*
 * Rule 3 beside the walk: a CPU write during the copy discards it; the
 * written mirror is dropped at the dispatch's end, and the next dispatch
 * reads the last byte the CPU wrote.
 */
static void raced_copy(struct __test_metadata *_metadata, FIXTURE_DATA(rules) *self,
		       uint32_t off, uint32_t out, struct hm_engine_stats *st)
{
	ASSERT_EQ(0, one_lane(&self->v, off & ~3u, out, 0, 0));
	self->walk_armed = self->race_armed = true;
	ASSERT_EQ(0, one_lane(&self->v, off & ~3u, out + 4, 0, 0));
	ASSERT_FALSE(self->race_armed);                 /* the copy was made */
	ASSERT_EQ(0, hm_engine_stats(self->v.e, st));
	ASSERT_EQ(0, st->ahead_uploads);
	ASSERT_EQ(1, st->ahead_discarded);
}

TEST_F(rules, ahead_copy_raced_is_discarded)
{
	uint32_t off = 3 * CHUNK + 100, out = 9 * CHUNK;
	struct hm_engine_stats st;
	bool m;

	RULES_AHEAD_ENV(self, off, 0x50);
	raced_copy(_metadata, self, off, out, &st);
	ASSERT_EQ(1, st.mirrors_dropped_by_guard);
	ASSERT_EQ(0, hm_engine_is_mirrored(self->v.e, GUEST_BASE + off, &m));
	ASSERT_FALSE(m);
	ASSERT_EQ(0, one_lane(&self->v, off & ~3u, out + 8, 0, 0));
	ASSERT_EQ(0x51, byte_at(&self->v, out + 8, off));
}

/*
 * The same with the GPU's upload form (HM_TWIN_GATHER) and page watch
 * units: beside the walk only the written unit of the chunk comes from
 * home; its other units reach the fresh slot from the old mirror, device
 * to device.  The next dispatch reads both the CPU's byte and a byte of
 * another unit as home holds them, through the table (the window keeps
 * its own copy of units that did not change).
 */
static void gathered_refresh(struct __test_metadata *_metadata, FIXTURE_DATA(rules) *self)
{
	uint32_t off = 3 * CHUNK + 100, other = 3 * CHUNK + CHUNK / 2 + 8, out = 9 * CHUNK;
	struct hm_engine_stats st;
	const char *why;
	int err;

	self->ep.flags = HM_ENGINE_NO_WINDOW;   /* loads through the table: the slot */
	self->ep.twin_mode = HM_TWIN_GATHER;
	self->v.hooks.during_dispatch = hook_walk_write;
	self->walk_off = off;
	self->walk_val = 0x5a;
	err = env_new_units(&self->v, first_backend(), &self->ep, 12, &why);
	if (err && why)
		SKIP(return, "%s (%d)", why, err);
	ASSERT_EQ(0, err);
	ASSERT_EQ(0, hm_engine_advise(self->v.e, GUEST_BASE + 3 * CHUNK, CHUNK,
				      HM_ADVICE_READ_MOSTLY));
	for (uint32_t k = 0; k < CHUNK; k++)
		self->v.mem[3 * CHUNK + k] = (uint8_t)(k * 7 + 1);
	ASSERT_EQ(0, one_lane(&self->v, off & ~3u, out, 0, 0));
	self->walk_armed = true;
	ASSERT_EQ(0, one_lane(&self->v, off & ~3u, out + 4, 0, 0));
	ASSERT_EQ(1, self->walk_calls);
	ASSERT_EQ(0, hm_engine_stats(self->v.e, &st));
	ASSERT_EQ(1, st.ahead_uploads);

	ASSERT_EQ(0, one_lane(&self->v, off & ~3u, out + 8, 0, 0));
	ASSERT_EQ(0x5a, byte_at(&self->v, out + 8, off));
	ASSERT_EQ(0, one_lane(&self->v, other & ~3u, out + 12, 0, 0));
	ASSERT_EQ(self->v.mem[other], byte_at(&self->v, out + 12, other));
	ASSERT_EQ((uint8_t)((other - 3 * CHUNK) * 7 + 1), byte_at(&self->v, out + 12, other));
	ASSERT_EQ(0, hm_engine_stats(self->v.e, &st));
	ASSERT_EQ(1, st.ahead_uploads);                 /* not copied again */
	ASSERT_EQ(0, st.mirrors_dropped_by_guard);
}

TEST_F(rules, ahead_gathered_refresh_keeps_the_unwritten_units)
{
	gathered_refresh(_metadata, self);
}

/* The same with the pass's gather in one row of workgroups
 * (HMIRROR_SIDE_GATHER_GROUPS=1): the row takes all 16 units in turn. */
TEST_F(rules, ahead_gather_in_one_row_copies_every_unit)
{
	ASSERT_EQ(0, setenv("HMIRROR_SIDE_GATHER_GROUPS", "1", 1));     /* this test's process */
	gathered_refresh(_metadata, self);
}

/*
 * Where the dispatch reads and writes the dense mirror window (lavapipe's
 * form), the copy beside the walk is made in the written chunk's own pool
 * slot, its written units alone, its twin left for after the copy-back
 * (ahead.c).  The environment: the GPU's upload form, page watch units,
 * chunk 3 advised read-mostly and filled with a pattern.
 */
static int in_place_env(struct __test_metadata *_metadata, FIXTURE_DATA(rules) *self,
			uint32_t off, uint8_t val)
{
	const char *why;
	int err;

	self->ep.flags = 0;
	self->ep.twin_mode = HM_TWIN_GATHER;
	self->v.hooks.during_dispatch = hook_walk_write;
	self->v.hooks.after_upload_copy = hook_walk_race;
	self->walk_off = off;
	self->walk_val = val;
	err = env_new_units(&self->v, first_backend(), &self->ep, 12, &why);
	if (err && why)
		return 1;
	if (err)
		return -1;
	if (hm_engine_advise(self->v.e, GUEST_BASE + 3 * CHUNK, CHUNK, HM_ADVICE_READ_MOSTLY))
		return -1;
	for (uint32_t k = 0; k < CHUNK; k++)
		self->v.mem[3 * CHUNK + k] = (uint8_t)(k * 7 + 1);
	return 0;
}

#define IN_PLACE_ENV(self, off, val) do { \
	int r_ = in_place_env(_metadata, self, off, val); \
	if (r_ > 0) \
		SKIP(return, "no Vulkan device or backend"); \
	ASSERT_EQ(0, r_); \
} while (0)

/*
 * Refreshed in place, a written chunk needs no second slot: with the
 * budget holding one mirror, the copy beside the walk is published at
 * the dispatch's end (a fresh slot would be refused, and the mirror
 * dropped, as in ahead_never_evicts), and the next dispatch reads the
 * CPU's byte and another unit's byte as home holds them, with no upload.
 */
TEST_F(rules, ahead_refresh_in_place_needs_no_second_slot)
{
	uint32_t off = 3 * CHUNK + 100, other = 3 * CHUNK + CHUNK / 2 + 8, out = 9 * CHUNK;
	struct hm_engine_stats st;
	bool m;

	self->ep.mirror_budget = 2 * CHUNK;
	IN_PLACE_ENV(self, off, 0x5a);
	ASSERT_EQ(0, one_lane(&self->v, off & ~3u, out, 0, 0));
	ASSERT_EQ(0, hm_engine_stats(self->v.e, &st));
	ASSERT_EQ(1, st.uploads);
	ASSERT_GT(st.window_copies, 0);                 /* the dense window serves it */
	/* its sync's time in its parts: planned, recorded, then run */
	ASSERT_GT(st.ns_window_plan, 0);
	ASSERT_GT(st.ns_window_record, 0);
	ASSERT_GT(st.ns_window_sync, st.ns_window_plan + st.ns_window_record);
	self->walk_armed = true;
	ASSERT_EQ(0, one_lane(&self->v, off & ~3u, out + 4, 0, 0));
	ASSERT_EQ(1, self->walk_calls);
	ASSERT_EQ((uint8_t)((off - 3 * CHUNK) * 7 + 1), byte_at(&self->v, out + 4, off));
	ASSERT_EQ(0, hm_engine_stats(self->v.e, &st));
	ASSERT_EQ(1, st.ahead_uploads);
	ASSERT_EQ(0, st.ahead_discarded);
	ASSERT_EQ(0, st.mirrors_dropped_by_guard);
	ASSERT_LE(st.mirror_bytes, st.mirror_budget);

	ASSERT_EQ(0, one_lane(&self->v, off & ~3u, out + 8, 0, 0));
	ASSERT_EQ(0x5a, byte_at(&self->v, out + 8, off));
	ASSERT_EQ(0, one_lane(&self->v, other & ~3u, out + 12, 0, 0));
	ASSERT_EQ((uint8_t)((other - 3 * CHUNK) * 7 + 1), byte_at(&self->v, out + 12, other));
	ASSERT_EQ(0, hm_engine_stats(self->v.e, &st));
	ASSERT_EQ(2, st.uploads);                       /* the first, and the one beside */
	ASSERT_EQ(0, st.uploads_discarded);
	ASSERT_EQ(0, st.mirrors_dropped_by_guard);
	ASSERT_EQ(0, hm_engine_is_mirrored(self->v.e, GUEST_BASE + off, &m));
	ASSERT_TRUE(m);
}

/*
 * HMIRROR_AHEAD_REGIONS=1 (set in this test's process): the copy in place
 * beside the walk is made by copy commands instead of gather.comp, a
 * region a run of written units (two apart here, against one gather
 * dispatch), and reads as ahead_refresh_in_place_needs_no_second_slot's:
 * the next dispatch reads both of the CPU's bytes (0x5a) and another
 * unit's as home holds them, with no upload at its boundary.
 */
TEST_F(rules, ahead_in_place_by_copy_regions)
{
	/* units of 4 KiB: with 64 KiB chunks the two bytes are units 0 and
	   5, two regions; with the VM's 4 KiB chunks, one unit, one region */
	bool two = CHUNK / 4096 > 5;
	uint32_t off = 3 * CHUNK + 100, off2 = 3 * CHUNK + (two ? 5 * 4096 : 0) + 12;
	uint32_t other = 3 * CHUNK + CHUNK / 2 + 8, out = 9 * CHUNK;
	struct hm_engine_stats st0, st;

	setenv("HMIRROR_AHEAD_REGIONS", "1", 1);
	self->ep.mirror_budget = 2 * CHUNK;
	self->walk_off2 = off2;
	IN_PLACE_ENV(self, off, 0x5a);
	ASSERT_EQ(0, one_lane(&self->v, off & ~3u, out, 0, 0));
	ASSERT_EQ(0, hm_engine_stats(self->v.e, &st0));
	self->walk_armed = true;
	ASSERT_EQ(0, one_lane(&self->v, off & ~3u, out + 4, 0, 0));
	ASSERT_EQ(1, self->walk_calls);
	ASSERT_EQ(0, hm_engine_stats(self->v.e, &st));
	ASSERT_EQ(1, st.ahead_uploads);
	ASSERT_EQ(0, st.ahead_discarded);
	ASSERT_EQ(st0.upload_regions + (two ? 2 : 1), st.upload_regions);	/* no gather */

	ASSERT_EQ(0, one_lane(&self->v, off & ~3u, out + 8, 0, 0));
	ASSERT_EQ(0x5a, byte_at(&self->v, out + 8, off));
	ASSERT_EQ(0, one_lane(&self->v, off2 & ~3u, out + 12, 0, 0));
	ASSERT_EQ(0x5a, byte_at(&self->v, out + 12, off2));
	ASSERT_EQ(0, one_lane(&self->v, other & ~3u, out + 16, 0, 0));
	ASSERT_EQ((uint8_t)((other - 3 * CHUNK) * 7 + 1), byte_at(&self->v, out + 16, other));
	ASSERT_EQ(0, hm_engine_stats(self->v.e, &st));
	ASSERT_EQ(2, st.uploads);
	ASSERT_EQ(0, st.uploads_discarded);
}

/*
 * The twin of a unit copied in place takes the copy's bytes before the
 * next dispatch.  Dispatch 2 refreshes the CPU's byte (0x5a) in place;
 * dispatch 3 stores into another unit of the chunk while the CPU writes
 * the byte again (0x6b).  Its copy-back diffs the chunk against its twin:
 * a twin still holding the byte as first uploaded would differ from the
 * mirror's 0x5a, and 0x5a would be written home over the CPU's 0x6b.
 */
TEST_F(rules, ahead_in_place_twin_is_brought_level)
{
	uint32_t off = 3 * CHUNK + 100, b = 3 * CHUNK + CHUNK / 2 + 8, out = 9 * CHUNK;
	uint32_t x = 0x5eed1234, got;
	struct hm_engine_stats st;

	IN_PLACE_ENV(self, off, 0x5a);
	memset(self->v.mem + b, 0, 4);
	ASSERT_EQ(0, one_lane(&self->v, off & ~3u, out, 0, 0));
	self->walk_armed = true;
	ASSERT_EQ(0, one_lane(&self->v, off & ~3u, out + 4, 0, 0));
	ASSERT_EQ(0, hm_engine_stats(self->v.e, &st));
	ASSERT_EQ(1, st.ahead_uploads);

	self->walk_val = 0x6b;
	self->walk_armed = true;
	/* word b = word b ^ x = x, into the mirror, while the CPU writes off */
	ASSERT_EQ(0, one_lane(&self->v, b, b, x, 0));
	ASSERT_EQ(2, self->walk_calls);
	ASSERT_EQ(0x6b, self->v.mem[off]);              /* the CPU's last byte */
	memcpy(&got, self->v.mem + b, 4);
	ASSERT_EQ(x, got);                              /* and the device's word */
	ASSERT_EQ(0, hm_engine_stats(self->v.e, &st));
	ASSERT_EQ(1, st.ahead_uploads);
	ASSERT_EQ(1, st.ahead_discarded);               /* dispatch 3 stored into it */

	ASSERT_EQ(0, one_lane(&self->v, off & ~3u, out + 8, 0, 0));
	ASSERT_EQ(0x6b, byte_at(&self->v, out + 8, off));
	ASSERT_EQ(0, one_lane(&self->v, b, out + 12, 0, 0));
	memcpy(&got, self->v.mem + out + 12, 4);
	ASSERT_EQ(x, got);
}

/* Rule 3 in place: a CPU write during the copy discards it (its slot
 * stays the chunk's), and the next dispatch reads the CPU's last byte. */
TEST_F(rules, ahead_in_place_raced_is_discarded)
{
	uint32_t off = 3 * CHUNK + 100, other = 3 * CHUNK + CHUNK / 2 + 8, out = 9 * CHUNK;
	struct hm_engine_stats st;

	IN_PLACE_ENV(self, off, 0x50);
	raced_copy(_metadata, self, off, out, &st);
	ASSERT_EQ(0, one_lane(&self->v, off & ~3u, out + 8, 0, 0));
	ASSERT_EQ(0x51, byte_at(&self->v, out + 8, off));
	ASSERT_EQ(0, one_lane(&self->v, other & ~3u, out + 12, 0, 0));
	ASSERT_EQ((uint8_t)((other - 3 * CHUNK) * 7 + 1), byte_at(&self->v, out + 12, other));
}

/*
 * No slot is taken from another mirror beside a walk: with the budget
 * full, a mirror written during it is dropped at its end, and the next
 * dispatch uploads it again at its boundary.
 */
TEST_F(rules, ahead_never_evicts)
{
	uint32_t off = 3 * CHUNK + 100, out = 9 * CHUNK;
	struct hm_engine_stats st;

	self->ep.mirror_budget = 1 * 2 * CHUNK;
	RULES_AHEAD_ENV(self, off, 0x66);
	ASSERT_EQ(0, one_lane(&self->v, off & ~3u, out, 0, 0));
	self->walk_armed = true;
	ASSERT_EQ(0, one_lane(&self->v, off & ~3u, out + 4, 0, 0));
	ASSERT_EQ(0, hm_engine_stats(self->v.e, &st));
	ASSERT_EQ(0, st.ahead_uploads);
	ASSERT_EQ(0, st.mirrors_evicted);
	ASSERT_EQ(1, st.mirrors_dropped_by_guard);
	ASSERT_EQ(1, st.uploads);
	ASSERT_LE(st.mirror_bytes, st.mirror_budget);
	ASSERT_EQ(0, one_lane(&self->v, off & ~3u, out + 8, 0, 0));
	ASSERT_EQ(0x66, byte_at(&self->v, out + 8, off));
	ASSERT_EQ(0, hm_engine_stats(self->v.e, &st));
	ASSERT_EQ(2, st.uploads);
}


/*
 * The engine's sort of its lists (candidates as (chunk, slot) records, the
 * window's dirty chunks): every order it meets (sorted, a few runs, the
 * reverse, random with repeats) comes out ascending by key, each record
 * whole, none lost or made up.
 */
TEST(sort_runs_sorts_records)
{
	static const size_t sizes[] = { 0, 1, 2, 3, 64, 1000, 5801 };
	uint64_t *a = malloc(3 * 5801 * sizeof(*a));
	uint64_t rng = 0x9e3779b97f4a7c15ull;

	ASSERT_NE(NULL, a);
	for (size_t stride = 1; stride <= 3; stride++) {
		for (size_t z = 0; z < sizeof(sizes) / sizeof(sizes[0]); z++) {
			for (int order = 0; order < 5; order++) {
				size_t n = sizes[z];
				uint64_t sum_in = 0, sum_out = 0;

				for (size_t i = 0; i < n; i++) {
					uint64_t k;

					rng ^= rng << 13; rng ^= rng >> 7; rng ^= rng << 17;
					k = order == 0 ? i :                    /* sorted */
					    order == 1 ? n - i :                /* reversed */
					    order == 2 ? (i < n / 3 ? 2 * i : 2 * (i - n / 3) + 1) :
					    order == 3 ? rng % 97 :             /* repeats */
							 rng;                   /* random */
					a[i * stride] = k;
					for (size_t w = 1; w < stride; w++)
						a[i * stride + w] = k * 31 + w;
					sum_in += k;
				}
				hm_sort_runs(a, n, stride);
				for (size_t i = 0; i < n; i++) {
					if (i) {
						ASSERT_LE(a[(i - 1) * stride], a[i * stride]);
					}
					for (size_t w = 1; w < stride; w++) {
						ASSERT_EQ(a[i * stride] * 31 + w, a[i * stride + w]);
					}
					sum_out += a[i * stride];
				}
				ASSERT_EQ(sum_in, sum_out);
			}
		}
	}
	free(a);
}

/* residency is lazy: add_space leaves untouched pages absent on a driver
 * that imports a view with holes (lavapipe); hm__engine_populate_view()
 * makes them exist without recording or changing a byte */
TEST(add_space_is_lazy_populate_view_fills)
{
	static const enum hm_backend bs[] = {
		HM_BACKEND_UFFD_ASYNC, HM_BACKEND_UFFD_SYNC, HM_BACKEND_MPROTECT,
	};
	struct hm_vk_params vp = { .validation = 1 };
	struct hm_engine_params ep = { .chunk_shift = CHUNK_SHIFT,
				       .timeout_ns = SUBMIT_TIMEOUT_NS };
	long page = sysconf(_SC_PAGESIZE);
	unsigned char vec[SPACE_BYTES / 4096 + 1];
	struct hm_vk *vk;
	unsigned tested = 0;
	int err;

	err = hm_vk_new(&vp, &vk);
	if (err)
		SKIP(return, "no Vulkan device with validation layers (%d)", err);
	for (unsigned b = 0; b < sizeof(bs) / sizeof(bs[0]); b++) {
		struct hm_space_params sp = { .size = SPACE_BYTES, .chunk_shift = CHUNK_SHIFT,
					      .backend = bs[b] };
		struct hm_engine *e = NULL;
		struct hm_space *s = NULL;
		uint64_t got[NR_CHUNKS];
		unsigned resident_before = 0, resident_after = 0;
		uint8_t *mem, *view;
		size_t n;
		bool more;
		uint32_t id;

		if (hm_backend_probe(bs[b], NULL))
			continue;
		ASSERT_EQ(0, hm_space_new(&sp, &s));
		mem = hm_space_addr(s);
		/* even chunks written (every byte), odd chunks never touched */
		for (uint32_t c = 0; c < NR_CHUNKS; c += 2)
			for (uint32_t i = 0; i < CHUNK; i++)
				mem[c * CHUNK + i] = (uint8_t)(c * 31 + i * 7 + 1);
		ASSERT_EQ(0, hm_space_arm(s, 0, NR_CHUNKS));
		do {
			ASSERT_EQ(0, hm_space_harvest(s, got, NR_CHUNKS, &n, &more));
		} while (more);
		ASSERT_EQ(0, hm_space_device_view(s, (void **)&view));
		ASSERT_EQ(0, mincore(view, SPACE_BYTES, vec));
		for (uint32_t p = 0; p < SPACE_BYTES / page; p++)
			resident_before += vec[p] & 1;
		ASSERT_EQ(0, hm_engine_new(vk, &ep, &e));
		ASSERT_EQ(0, hm_engine_add_space(e, s, GUEST_BASE, &id));
		ASSERT_EQ(0, mincore(view, SPACE_BYTES, vec));
		for (uint32_t p = 0; p < SPACE_BYTES / page; p++)
			resident_after += vec[p] & 1;
		TH_LOG("%s: pages resident before add_space %u, after %u of %lu",
		       hm_backend_name(bs[b]), resident_before, resident_after,
		       (unsigned long)(SPACE_BYTES / page));
		/* lazy: the import made no page exist */
		ASSERT_EQ(resident_before, resident_after);
		ASSERT_GT(SPACE_BYTES / page, resident_after);
		ASSERT_EQ(0, hm__engine_populate_view(view, SPACE_BYTES));
		ASSERT_EQ(0, mincore(view, SPACE_BYTES, vec));
		resident_after = 0;
		for (uint32_t p = 0; p < SPACE_BYTES / page; p++)
			resident_after += vec[p] & 1;
		/* every page of the view exists now */
		ASSERT_EQ(SPACE_BYTES / page, resident_after);
		/* nothing recorded by the populate */
		ASSERT_EQ(0, hm_space_harvest(s, got, NR_CHUNKS, &n, &more));
		ASSERT_EQ(0, n);
		ASSERT_FALSE(more);
		/* content unchanged, through both mappings */
		for (uint32_t c = 0; c < NR_CHUNKS; c++)
			for (uint32_t i = 0; i < CHUNK; i++) {
				uint8_t want = c % 2 ? 0 : (uint8_t)(c * 31 + i * 7 + 1);

				ASSERT_EQ(want, view[c * CHUNK + i]);
				ASSERT_EQ(want, mem[c * CHUNK + i]);
			}
		ASSERT_EQ(0, hm_engine_remove_space(e, id));
		hm_engine_free(e);
		hm_space_free(s);
		tested++;
	}
	/* bad arguments */
	ASSERT_EQ(-EINVAL, hm__engine_populate_view(NULL, 4096));
	ASSERT_EQ(-EINVAL, hm__engine_populate_view((void *)(uintptr_t)page, 1));
	if (hm_vk_validation_count(vk))
		TH_LOG("validation: %s", vk->last_message);
	EXPECT_EQ(0, hm_vk_validation_count(vk));
	hm_vk_free(vk);
	if (!tested)
		SKIP(return, "no backend without the module");
}

#endif /* !HM_ENGINE_TEST_VM */

/* a pipeline compiled elsewhere (the daemon's compile thread): adopted only
 * with the push size it was built for, then owned by the engine */
TEST(pipeline_adopt)
{
	struct hm_vk_params vp = { .validation = 1 };
	struct hm_vk_pipeline p, none = { 0 };
	struct hm_engine *e;
	struct hm_vk *vk;
	uint32_t id = 77, id2, push[RW_USER_WORDS + 1] = { 0 };

	if (hm_vk_new(&vp, &vk))
		SKIP(return, "no Vulkan device with validation layers");
	ASSERT_EQ(0, hm_engine_new(vk, NULL, &e));
	ASSERT_EQ(0, hm_vk_pipeline_new(vk, hm_test_rw_spv, hm_test_rw_spv_words, "main",
					4 * (HM_DEVICE_TABLE_PUSH_WORDS + RW_USER_WORDS), &p));
	ASSERT_EQ(-EINVAL, hm_engine_pipeline_adopt(e, &p, RW_USER_WORDS + 1, &id));
	ASSERT_EQ(-EINVAL, hm_engine_pipeline_adopt(e, &none, RW_USER_WORDS, &id));
	ASSERT_EQ(-EINVAL, hm_engine_pipeline_adopt(e, NULL, RW_USER_WORDS, &id));
	ASSERT_EQ(77, id);
	ASSERT_NE(VK_NULL_HANDLE, p.pipe);	/* refused: still the caller's */
	ASSERT_EQ(0, hm_engine_pipeline_adopt(e, &p, RW_USER_WORDS, &id));
	ASSERT_EQ(VK_NULL_HANDLE, p.pipe);	/* adopted: the engine's */
	ASSERT_EQ(VK_NULL_HANDLE, p.layout);
	/* a push block of another size is refused at dispatch */
	ASSERT_EQ(-EINVAL, hm_engine_dispatch(e, id, 1, 1, 1, push, RW_USER_WORDS + 1, 0));
	/* freed with the engine's own; its slot serves the next pipeline */
	hm_engine_pipeline_free(e, id);
	ASSERT_EQ(0, hm_engine_pipeline_new(e, hm_test_rw_spv, hm_test_rw_spv_words, "main",
					    RW_USER_WORDS, &id2));
	ASSERT_EQ(id, id2);
	hm_engine_free(e);
	ASSERT_EQ(0, hm_vk_validation_count(vk));
	hm_vk_free(vk);
}

TEST(bad_params)
{
	struct hm_vk_params vp = { .validation = 0 };
	struct hm_engine_params ep = { .flags = 1u << 31 };
	struct hm_engine *e = (void *)1;
	struct hm_vk *vk;

	if (hm_vk_new(&vp, &vk))
		SKIP(return, "no Vulkan device");
	ASSERT_EQ(-EINVAL, hm_engine_new(vk, &ep, &e));
	ASSERT_EQ(NULL, e);
	ep.flags = 0;
	ep.chunk_shift = 5;
	ASSERT_EQ(-EINVAL, hm_engine_new(vk, &ep, &e));
	ASSERT_EQ(0, hm_engine_new(vk, NULL, &e));
	ASSERT_EQ(-EINVAL, hm_engine_dispatch(e, 0, 1, 1, 1, NULL, 0, 0));  /* no pipeline 0 */
	ASSERT_EQ(-ENOENT, hm_engine_advise(e, 0, 4096, HM_ADVICE_READ_MOSTLY));
	ASSERT_EQ(-EINVAL, hm_engine_advise(e, 0, 4096, (enum hm_advice)9));
	hm_engine_free(e);
	hm_engine_free(NULL);
	hm_vk_free(vk);
}

/* ---- the guest address space: map, alias, unmap, remap ------------------ */

/*
 * The reference model over random sequences of map (with and without
 * HM_MAP_REPLACE), alias, unmap of part of a mapping, CPU writes and
 * dispatches: the model holds the guest map (guest chunk -> space chunk)
 * and the space's bytes; the device program reads and writes guest
 * addresses through any alias (and unmapped ones: reads 0, stores sink),
 * so a stale mirror or window byte behind any alias shows up as a wrong
 * byte home.  After every step home must equal the model byte for byte
 * and hm_engine_translate() must agree with the model's map.
 */
#define GM_GCHUNKS	40      /* guest chunks from GUEST_BASE the sequences use */
#ifdef HM_ENGINE_TEST_VM
#define GM_STEPS	120
#else
#define GM_STEPS	300
#endif

FIXTURE(gmap) {
	struct env v;
	int32_t gm[GM_GCHUNKS];         /* space chunk at guest chunk g, -1: unmapped */
};

FIXTURE_VARIANT(gmap) {
	enum hm_backend backend;
	enum tier_mode tier;
};

#ifndef HM_ENGINE_TEST_VM
FIXTURE_VARIANT_ADD(gmap, uffd_async) { .backend = HM_BACKEND_UFFD_ASYNC };
FIXTURE_VARIANT_ADD(gmap, uffd_async_speculative) { .backend = HM_BACKEND_UFFD_ASYNC,
						    .tier = T_SPEC };
FIXTURE_VARIANT_ADD(gmap, uffd_sync) { .backend = HM_BACKEND_UFFD_SYNC };
FIXTURE_VARIANT_ADD(gmap, mprotect_speculative) { .backend = HM_BACKEND_MPROTECT,
						  .tier = T_SPEC };
#endif
FIXTURE_VARIANT_ADD(gmap, kmod) { .backend = HM_BACKEND_KMOD };
FIXTURE_VARIANT_ADD(gmap, kmod_speculative) { .backend = HM_BACKEND_KMOD, .tier = T_SPEC };

FIXTURE_SETUP(gmap)
{
	/* every chunk the device wrote once is mirrored at the next
	 * dispatch: mirrors come and go under the mapping changes */
	struct hm_engine_params ep = { .chunk_shift = CHUNK_SHIFT, .timeout_ns = SUBMIT_TIMEOUT_NS,
				       .hot_marks = 1, .thrash_drops = 200 };
	const char *why;
	int err;

	self->v.tier = variant->tier;
	err = env_new(&self->v, variant->backend, &ep, &why);
	if (why && err)
		SKIP(return, "%s: %s (%d)", hm_backend_name(variant->backend), why, err);
	ASSERT_EQ(0, err);
	/* env_new mapped the whole space at GUEST_BASE */
	for (int g = 0; g < GM_GCHUNKS; g++)
		self->gm[g] = g < NR_CHUNKS ? g : -1;
	/* half of it read-mostly: refreshed in place when the CPU writes it */
	ASSERT_EQ(0, hm_engine_advise(self->v.e, GUEST_BASE, SPACE_BYTES / 2,
				      HM_ADVICE_READ_MOSTLY));
}

FIXTURE_TEARDOWN(gmap)
{
	if (self->v.vk) {
		if (hm_vk_validation_count(self->v.vk))
			TH_LOG("validation: %s", self->v.vk->last_message);
		EXPECT_EQ(0, env_free(&self->v));
	}
}

/* The space byte behind guest offset off (from GUEST_BASE), -1 if unmapped. */
static long gm_byte(const int32_t *gm, uint64_t off)
{
	uint64_t g = off >> CHUNK_SHIFT;

	if (g >= GM_GCHUNKS || gm[g] < 0)
		return -1;
	return (long)gm[g] * CHUNK + (long)(off & (CHUNK - 1));
}

/* A random guest word whose space word has role 0 (or `ok`), marked `as`;
 * unmapped guest words are taken as they come (they read 0 and sink). */
static uint32_t gm_pick(struct env *v, const int32_t *gm, uint8_t ok, uint8_t as)
{
	for (;;) {
		uint32_t gw = rnd(&v->rng) % (GM_GCHUNKS * CHUNK / 4);
		long b = gm_byte(gm, 4ull * gw);

		if (b < 0)
			return 4 * gw;
		if (v->role[b / 4] == 0 || (ok && v->role[b / 4] == ok)) {
			v->role[b / 4] = as;
			return 4 * gw;
		}
	}
}

/* One dispatch of n lanes over guest offsets; the model with every access
 * home through the model's map.  0 or the first wrong byte + 1. */
static long gm_dispatch(struct env *v, const int32_t *gm, uint32_t n)
{
	struct plan_entry *pl = v->plan.map;
	uint32_t push[RW_USER_WORDS];
	uint64_t base = GUEST_BASE, pa = v->plan.addr;
	int err;

	memset(v->role, 0, SPACE_BYTES / 4);
	for (uint32_t i = 0; i < n; i++) {
		uint32_t op = rnd(&v->rng) % 8 == 0 ? OP_NONE :
			      (rnd(&v->rng) & 1 ? OP_STORE32 : OP_STORE8);

		pl[i] = (struct plan_entry){ .roff = gm_pick(v, gm, R_READ, R_READ), .op = op,
					     .x = (uint32_t)rnd(&v->rng) };
		if (op == OP_STORE32)
			pl[i].woff = gm_pick(v, gm, 0, R_W32);
		else if (op == OP_STORE8)
			pl[i].woff = gm_pick(v, gm, 0, R_W8) + rnd(&v->rng) % 4;
	}
	for (uint32_t i = 0; i < n; i++) {
		long rb = gm_byte(gm, pl[i].roff), wb = gm_byte(gm, pl[i].woff);
		uint32_t val = 0;

		if (rb >= 0)
			memcpy(&val, v->model + rb, 4);
		val ^= pl[i].x;
		if (wb < 0 || pl[i].op == OP_NONE)
			continue;
		if (pl[i].op == OP_STORE32)
			memcpy(v->model + wb, &val, 4);
		else
			v->model[wb] = (uint8_t)val;
	}
	push[0] = (uint32_t)base;
	push[1] = (uint32_t)(base >> 32);
	push[2] = (uint32_t)pa;
	push[3] = (uint32_t)(pa >> 32);
	push[4] = n;
	err = hm_engine_dispatch(v->e, v->pipe, (n + 63) / 64, 1, 1, push, RW_USER_WORDS, 0);
	if (err)
		return err;
	for (uint32_t i = 0; i < SPACE_BYTES; i++)
		if (v->mem[i] != v->model[i])
			return (long)i + 1;
	return 0;
}

/* The engine's map is the model's; no chunk mapped twice is mirrored. */
static void gm_check_map(struct __test_metadata *_metadata, struct env *v, const int32_t *gm)
{
	for (int g = 0; g < GM_GCHUNKS; g++) {
		uint64_t addr = GUEST_BASE + (uint64_t)g * CHUNK + 12, off = 0, dev;
		uint32_t id = UINT32_MAX;
		int err = hm_engine_translate(v->e, addr, &id, &off);
		int aliases = 0;
		bool m;

		if (gm[g] < 0) {
			ASSERT_EQ(-ENOENT, err);
			ASSERT_EQ(-ENOENT, hm_engine_device_addr(v->e, addr, &dev));
			ASSERT_EQ(-ENOENT, hm_engine_is_mirrored(v->e, addr, &m));
			continue;
		}
		ASSERT_EQ(0, err);
		ASSERT_EQ(v->space_id, id);
		ASSERT_EQ((uint64_t)gm[g] * CHUNK + 12, off);
		for (int h = 0; h < GM_GCHUNKS; h++)
			aliases += gm[h] == gm[g];
		ASSERT_EQ(0, hm_engine_is_mirrored(v->e, addr, &m));
		if (aliases > 1)
			ASSERT_FALSE(m);
	}
}

TEST_F(gmap, random_map_alias_unmap_remap)
{
	struct hm_engine_stats st;
	unsigned maps = 0, refused = 0, unmaps = 0, dispatches = 0, aliased = 0, replaced = 0;
	unsigned mirrored_then_changed = 0;
	int32_t *gm = self->gm;

	if (!self->v.e)
		return;
	for (int step = 0; step < GM_STEPS; step++) {
		uint32_t kind = rnd(&self->v.rng) % 100;
		long r;

		if (kind < 30) {
			/* map (alias, or remap with HM_MAP_REPLACE) */
			uint32_t len = 1 + rnd(&self->v.rng) % 4;
			uint32_t mc = rnd(&self->v.rng) % (NR_CHUNKS - len + 1);
			uint32_t g = rnd(&self->v.rng) % (GM_GCHUNKS - len + 1);
			uint32_t flags = rnd(&self->v.rng) & 1 ? HM_MAP_REPLACE : 0;
			bool busy = false, was_mirrored = false;
			int want, err;

			for (uint32_t i = 0; i < len; i++) {
				bool m = false;

				busy |= gm[g + i] >= 0;
				if (gm[g + i] >= 0 &&
				    !hm_engine_is_mirrored(self->v.e,
							   GUEST_BASE + (uint64_t)(g + i) * CHUNK, &m))
					was_mirrored |= m;
			}
			want = busy && !flags ? -EEXIST : 0;
			err = hm_engine_map(self->v.e, self->v.space_id, (uint64_t)mc * CHUNK,
					    (uint64_t)len * CHUNK, GUEST_BASE + (uint64_t)g * CHUNK,
					    flags);
			ASSERT_EQ(want, err);
			if (!err) {
				for (uint32_t i = 0; i < len; i++) {
					for (int h = 0; h < GM_GCHUNKS; h++)
						aliased += gm[h] == (int32_t)(mc + i);
					gm[g + i] = mc + i;
				}
				maps++;
				replaced += busy;
				mirrored_then_changed += was_mirrored;
			} else {
				refused++;
			}
		} else if (kind < 50) {
			/* unmap part of something, or a hole */
			uint32_t len = 1 + rnd(&self->v.rng) % 6;
			uint32_t g = rnd(&self->v.rng) % (GM_GCHUNKS - len + 1);
			bool any = false;
			int err;

			for (uint32_t i = 0; i < len; i++)
				any |= gm[g + i] >= 0;
			err = hm_engine_unmap(self->v.e, GUEST_BASE + (uint64_t)g * CHUNK,
					      (uint64_t)len * CHUNK);
			ASSERT_EQ(any ? 0 : -ENOENT, err);
			for (uint32_t i = 0; i < len; i++)
				gm[g + i] = -1;
			unmaps += any;
		} else if (kind < 55) {
			/* bad input changes nothing */
			ASSERT_EQ(-EINVAL, hm_engine_map(self->v.e, self->v.space_id, CHUNK / 2,
							 CHUNK, GUEST_BASE, HM_MAP_REPLACE));
			ASSERT_EQ(-EINVAL, hm_engine_map(self->v.e, self->v.space_id,
							 SPACE_BYTES - CHUNK, 2 * CHUNK,
							 GUEST_BASE, HM_MAP_REPLACE));
			ASSERT_EQ(-EINVAL, hm_engine_unmap(self->v.e, GUEST_BASE + CHUNK / 2, CHUNK));
		} else if (kind < 65) {
			cpu_between(&self->v, 32);
		} else {
			r = gm_dispatch(&self->v, gm, 64 + 32 * (step % 8));
			dump_mismatch(_metadata, &self->v, r);
			ASSERT_EQ(0, r);
			dispatches++;
		}
		gm_check_map(_metadata, &self->v, gm);
		ASSERT_EQ(0, memcmp(self->v.mem, self->v.model, SPACE_BYTES));
	}
	ASSERT_EQ(0, hm_engine_stats(self->v.e, &st));
	TH_LOG("%s: %u maps (%u over mappings, %u chunk aliases), %u refused, %u unmaps, "
	       "%u dispatches; mirrored chunks remapped %u; uploads %lu, guard drops %lu, "
	       "copied home %lu B, window copies %lu fills %lu",
	       hm_backend_name(variant->backend), maps, replaced, aliased, refused, unmaps,
	       dispatches, mirrored_then_changed, st.uploads, st.mirrors_dropped_by_guard,
	       st.bytes_copied_home, st.window_copies, st.window_fills);
	ASSERT_LT(0, st.uploads);
	ASSERT_LT(0, st.bytes_copied_home);
	ASSERT_LT(0, aliased);
	ASSERT_LT(0, mirrored_then_changed);
	if (self->v.tier == T_SPEC)
		ASSERT_LT(0, st.window_copies + st.window_binds);
}

/* A device write through one alias is home and read through the other in
 * the next dispatch; a CPU write is read through both. */
TEST_F(gmap, alias_sees_device_and_cpu_writes)
{
	int32_t *gm = self->gm;
	struct plan_entry *pl;
	uint32_t push[RW_USER_WORDS];
	uint64_t pa;
	bool m;

	if (!self->v.e)
		return;
	pl = self->v.plan.map;
	pa = self->v.plan.addr;
	push[0] = (uint32_t)GUEST_BASE;
	push[1] = (uint32_t)(GUEST_BASE >> 32);
	push[2] = (uint32_t)pa;
	push[3] = (uint32_t)(pa >> 32);
	push[4] = 1;
	/* chunk 10 written by the device until it is mirrored */
	for (int d = 0; d < 3; d++) {
		pl[0] = (struct plan_entry){ .roff = 10 * CHUNK + 64, .woff = 10 * CHUNK,
					     .op = OP_STORE32, .x = 0x1000u + d };
		ASSERT_EQ(0, hm_engine_dispatch(self->v.e, self->v.pipe, 1, 1, 1, push,
						RW_USER_WORDS, 0));
	}
	ASSERT_EQ(0, hm_engine_is_mirrored(self->v.e, GUEST_BASE + 10 * CHUNK, &m));
	ASSERT_TRUE(m);
	/* its alias at guest chunk 30 drops the mirror */
	ASSERT_EQ(0, hm_engine_map(self->v.e, self->v.space_id, 10 * CHUNK, CHUNK,
				   GUEST_BASE + 30 * CHUNK, 0));
	gm[30] = 10;
	ASSERT_EQ(0, hm_engine_is_mirrored(self->v.e, GUEST_BASE + 10 * CHUNK, &m));
	ASSERT_FALSE(m);
	/* device writes through alias 30, reads through 10 next time */
	pl[0] = (struct plan_entry){ .roff = 0, .woff = 30 * CHUNK + 8, .op = OP_STORE32,
				     .x = 0xabcd1234u };
	ASSERT_EQ(0, hm_engine_dispatch(self->v.e, self->v.pipe, 1, 1, 1, push, RW_USER_WORDS, 0));
	ASSERT_EQ(0xabcd1234u ^ u32_at(self->v.mem, 0), u32_at(self->v.mem, 10 * CHUNK + 8));
	pl[0] = (struct plan_entry){ .roff = 10 * CHUNK + 8, .woff = 12 * CHUNK, .op = OP_STORE32,
				     .x = 0 };
	ASSERT_EQ(0, hm_engine_dispatch(self->v.e, self->v.pipe, 1, 1, 1, push, RW_USER_WORDS, 0));
	ASSERT_EQ(0, memcmp(self->v.mem + 12 * CHUNK, self->v.mem + 10 * CHUNK + 8, 4));
	/* the CPU writes the chunk: read through alias 30 */
	memcpy(self->v.mem + 10 * CHUNK + 100, "\x11\x22\x33\x44", 4);
	pl[0] = (struct plan_entry){ .roff = 30 * CHUNK + 100, .woff = 13 * CHUNK,
				     .op = OP_STORE32, .x = 0 };
	ASSERT_EQ(0, hm_engine_dispatch(self->v.e, self->v.pipe, 1, 1, 1, push, RW_USER_WORDS, 0));
	ASSERT_EQ(0, memcmp(self->v.mem + 13 * CHUNK, "\x11\x22\x33\x44", 4));
	/* the alias goes: chunk 10 may be mirrored again */
	ASSERT_EQ(0, hm_engine_unmap(self->v.e, GUEST_BASE + 30 * CHUNK, CHUNK));
	for (int d = 0; d < 3; d++) {
		pl[0] = (struct plan_entry){ .roff = 10 * CHUNK + 64, .woff = 10 * CHUNK,
					     .op = OP_STORE32, .x = 0x2000u + d };
		ASSERT_EQ(0, hm_engine_dispatch(self->v.e, self->v.pipe, 1, 1, 1, push,
						RW_USER_WORDS, 0));
	}
	ASSERT_EQ(0, hm_engine_is_mirrored(self->v.e, GUEST_BASE + 10 * CHUNK, &m));
	ASSERT_TRUE(m);
}

#ifndef HM_ENGINE_TEST_VM
/* Bad input: a clear errno and nothing changed; each limit enforced. */
TEST(gmap_bad_input_and_limits)
{
	struct hm_vk_params vp = { .validation = 1 };
	struct hm_engine_params ep = { .chunk_shift = CHUNK_SHIFT, .timeout_ns = SUBMIT_TIMEOUT_NS,
				       .max_chunks = 2 * NR_CHUNKS };
	struct hm_space_params sp = { .size = SPACE_BYTES, .chunk_shift = CHUNK_SHIFT,
				      .backend = HM_BACKEND_UFFD_ASYNC };
	struct hm_engine *e;
	struct hm_space *s;
	struct hm_vk *vk;
	uint64_t off;
	uint32_t id, id2;

	if (hm_backend_probe(sp.backend, NULL))
		sp.backend = HM_BACKEND_MPROTECT;
	if (hm_vk_new(&vp, &vk))
		SKIP(return, "no Vulkan device with validation layers");
	ASSERT_EQ(0, hm_space_new(&sp, &s));
	ASSERT_EQ(0, hm_engine_new(vk, &ep, &e));
	ASSERT_EQ(0, hm_engine_add_space(e, s, HM_ENGINE_UNMAPPED, &id));
	ASSERT_EQ(-EEXIST, hm_engine_add_space(e, s, GUEST_BASE, &id2));
	ASSERT_EQ(-ENOENT, hm_engine_translate(e, GUEST_BASE, &id2, &off));
	ASSERT_EQ(0, hm_engine_map(e, id, 0, SPACE_BYTES, GUEST_BASE, 0));
	/* each refused with nothing changed */
	ASSERT_EQ(-EINVAL, hm_engine_map(NULL, id, 0, CHUNK, 0, 0));
	ASSERT_EQ(-EINVAL, hm_engine_map(e, id, 0, CHUNK, 0, 1u << 7));
	ASSERT_EQ(-EINVAL, hm_engine_map(e, id, 0, 0, 0, 0));
	ASSERT_EQ(-EINVAL, hm_engine_map(e, id, 4096, CHUNK, 0, 0));
	ASSERT_EQ(-EINVAL, hm_engine_map(e, id, 0, CHUNK, 4096, 0));
	ASSERT_EQ(-EINVAL, hm_engine_map(e, id, 0, CHUNK + 4096, 0, 0));
	ASSERT_EQ(-EINVAL, hm_engine_map(e, id, SPACE_BYTES, CHUNK, 0, 0));
	ASSERT_EQ(-EINVAL, hm_engine_map(e, id, CHUNK, SPACE_BYTES, 0, 0));
	ASSERT_EQ(-EINVAL, hm_engine_map(e, id, 0, 2 * CHUNK, UINT64_MAX - CHUNK + 1, 0));
	ASSERT_EQ(-EINVAL, hm_engine_map(e, HM_ENGINE_MAX_SPACES, 0, CHUNK, 0, 0));
	ASSERT_EQ(-ENOENT, hm_engine_map(e, id + 1, 0, CHUNK, 0, 0));
	ASSERT_EQ(-EEXIST, hm_engine_map(e, id, 0, CHUNK, GUEST_BASE + SPACE_BYTES - CHUNK, 0));
	ASSERT_EQ(-EINVAL, hm_engine_unmap(e, GUEST_BASE, 0));
	ASSERT_EQ(-EINVAL, hm_engine_unmap(e, GUEST_BASE + 1, CHUNK));
	ASSERT_EQ(-ENOENT, hm_engine_unmap(e, GUEST_BASE + SPACE_BYTES, CHUNK));
	for (uint32_t c = 0; c < NR_CHUNKS; c++) {
		ASSERT_EQ(0, hm_engine_translate(e, GUEST_BASE + c * CHUNK + 5, &id2, &off));
		ASSERT_EQ(id, id2);
		ASSERT_EQ((uint64_t)c * CHUNK + 5, off);
	}
	ASSERT_EQ(-ENOENT, hm_engine_translate(e, GUEST_BASE - 1, &id2, &off));
	/* max_chunks mapped chunks: 16 more fit, one more does not */
	ASSERT_EQ(0, hm_engine_map(e, id, 0, SPACE_BYTES, 0, 0));
	ASSERT_EQ(-E2BIG, hm_engine_map(e, id, 0, CHUNK, 1ull << 40, 0));
	/* a replace counts what it unmaps */
	ASSERT_EQ(0, hm_engine_map(e, id, CHUNK, CHUNK, 0, HM_MAP_REPLACE));
	ASSERT_EQ(0, hm_engine_translate(e, 0, &id2, &off));
	ASSERT_EQ(CHUNK, off);
	ASSERT_EQ(0, hm_engine_unmap(e, 0, SPACE_BYTES));
	ASSERT_EQ(0, hm_engine_remove_space(e, id));
	ASSERT_EQ(-ENOENT, hm_engine_translate(e, GUEST_BASE, &id2, &off));
	ASSERT_EQ(-ENOENT, hm_engine_map(e, id, 0, CHUNK, 0, 0));
	hm_engine_free(e);

	/* HM_ENGINE_MAX_MAPPINGS: one chunk aliased at every other guest chunk */
	ep.max_chunks = 0;
	ASSERT_EQ(0, hm_engine_new(vk, &ep, &e));
	ASSERT_EQ(0, hm_engine_add_space(e, s, HM_ENGINE_UNMAPPED, &id));
	for (uint64_t i = 0; i < HM_ENGINE_MAX_MAPPINGS - 1; i++)
		ASSERT_EQ(0, hm_engine_map(e, id, 0, CHUNK, 2 * i * CHUNK, 0));
	ASSERT_EQ(0, hm_engine_map(e, id, 0, 3 * CHUNK, 1ull << 40, 0));
	ASSERT_EQ(-EMFILE, hm_engine_map(e, id, 0, CHUNK, 1ull << 41, 0));
	/* an unmap that would split one into two */
	ASSERT_EQ(-EMFILE, hm_engine_unmap(e, (1ull << 40) + CHUNK, CHUNK));
	ASSERT_EQ(0, hm_engine_translate(e, (1ull << 40) + CHUNK, &id2, &off));
	ASSERT_EQ(0, hm_engine_unmap(e, 1ull << 40, CHUNK));    /* shrinks: fine */
	ASSERT_EQ(0, hm_engine_translate(e, (1ull << 40) + CHUNK, &id2, &off));
	ASSERT_EQ(CHUNK, off);
	ASSERT_EQ(0, hm_engine_remove_space(e, id));
	hm_engine_free(e);
	hm_space_free(s);
	EXPECT_EQ(0, hm_vk_validation_count(vk));
	hm_vk_free(vk);
}

static long self_rss_kib(void)
{
	FILE *f = fopen("/proc/self/status", "r");
	char line[256];
	long kib = -1;

	if (!f)
		return -1;
	while (fgets(line, sizeof(line), f))
		if (sscanf(line, "VmRSS: %ld kB", &kib) == 1)
			break;
	fclose(f);
	return kib;
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

/* Figures: resident memory of an untouched 16 GiB space added and mapped
 * (lazy residency), and the cost of mapping and unmapping 64 KiB among
 * 4,096 mappings (median of 7 rounds of 1,000). */
TEST(gmap_figures)
{
	struct hm_vk_params vp = { .validation = 1 };
	struct hm_engine_params ep = { .chunk_shift = 16, .timeout_ns = SUBMIT_TIMEOUT_NS };
	struct hm_space_params sp = { .size = 16ull << 30, .chunk_shift = 16,
				      .backend = HM_BACKEND_UFFD_ASYNC };
	uint64_t map_ns[7], unmap_ns[7], guest_pages = 0;
	static unsigned char vec[(1u << 30) / 4096];
	struct hm_engine *e;
	struct hm_space *s;
	struct hm_vk *vk;
	long rss0, rss1, rss2;
	void *view;
	uint32_t id;
	int err;

	if (hm_backend_probe(sp.backend, NULL))
		sp.backend = HM_BACKEND_MPROTECT;
	if (hm_vk_new(&vp, &vk))
		SKIP(return, "no Vulkan device with validation layers");
	ASSERT_EQ(0, hm_engine_new(vk, &ep, &e));
	err = hm_space_new(&sp, &s);
	if (err)
		SKIP(return, "no 16 GiB space here (%d)", err);
	rss0 = self_rss_kib();
	err = hm_engine_add_space(e, s, HM_ENGINE_UNMAPPED, &id);
	if (err)
		SKIP(return, "lavapipe refused a 16 GiB import (%d)", err);
	rss1 = self_rss_kib();
	ASSERT_EQ(0, hm_engine_map(e, id, 0, sp.size, 1ull << 36, 0));
	rss2 = self_rss_kib();
	ASSERT_EQ(0, hm_space_device_view(s, &view));
	for (uint64_t off = 0; off < sp.size; off += 1ull << 30) {
		ASSERT_EQ(0, mincore((char *)view + off, 1ull << 30, vec));
		for (size_t p = 0; p < sizeof(vec); p++)
			guest_pages += vec[p] & 1;
	}
	{
		struct hm_engine_stats st;

		ASSERT_EQ(0, hm_engine_stats(e, &st));
		ASSERT_EQ(0, st.import_pieces);         /* imported lazily, at a dispatch */
	}
	TH_LOG("figure: untouched 16 GiB space: %lu guest pages resident; the engine's state "
	       "of its 262,144 chunks %ld KiB when added, %ld KiB more when mapped (table, marks)",
	       (unsigned long)guest_pages, rss1 - rss0, rss2 - rss1);
	ASSERT_EQ(0, guest_pages);
	ASSERT_LT(rss2 - rss0, 96 * 1024);
	/* 4,096 mappings of 64 KiB around, then map/unmap one among them */
	ASSERT_EQ(0, hm_engine_unmap(e, 1ull << 36, sp.size));
	for (uint64_t i = 0; i < 4096; i++)
		ASSERT_EQ(0, hm_engine_map(e, id, i << 16, 1 << 16, (2 * i) << 16, 0));
	for (int r = 0; r < 7; r++) {
		uint64_t t0, t1, t2 = 0, tm = 0;

		for (int k = 0; k < 1000; k++) {
			uint64_t g = (2 * (uint64_t)(k % 4096) + 1) << 16;

			t0 = now_ns();
			ASSERT_EQ(0, hm_engine_map(e, id, (uint64_t)k << 16, 1 << 16, g, 0));
			t1 = now_ns();
			ASSERT_EQ(0, hm_engine_unmap(e, g, 1 << 16));
			tm += t1 - t0;
			t2 += now_ns() - t1;
		}
		map_ns[r] = tm / 1000;
		unmap_ns[r] = t2 / 1000;
	}
	qsort(map_ns, 7, sizeof(*map_ns), cmp_u64);
	qsort(unmap_ns, 7, sizeof(*unmap_ns), cmp_u64);
	TH_LOG("figure: 64 KiB among 4,096 mappings: map %.2f us, unmap %.2f us "
	       "(median of 7 rounds of 1,000; min %.2f / %.2f)", map_ns[3] / 1000.0,
	       unmap_ns[3] / 1000.0, map_ns[0] / 1000.0, unmap_ns[0] / 1000.0);
	/* the target (50 us: not a walk of all 4,096 mappings) is a figure
	   reported, not asserted: a loaded host moves it */
	printf("# perf gmap_target map_us=%.2f unmap_us=%.2f target=50 %s\n",
	       map_ns[3] / 1000.0, unmap_ns[3] / 1000.0,
	       map_ns[3] < 50000 && unmap_ns[3] < 50000 ? "met" : "missed");
	fflush(stdout);
	ASSERT_EQ(0, hm_engine_remove_space(e, id));
	hm_engine_free(e);
	hm_space_free(s);
	EXPECT_EQ(0, hm_vk_validation_count(vk));
	hm_vk_free(vk);
}
#endif /* !HM_ENGINE_TEST_VM */

TEST_HARNESS_MAIN
