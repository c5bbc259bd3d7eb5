// SPDX-License-Identifier: GPL-2.0
/*
 * Lazy home import on lavapipe, validation layers on: adding or mapping a
 * space imports nothing; a dispatch imports exactly the pieces its table
 * names, before the device reads the table; an import the driver refuses
 * fails that dispatch and leaves the engine as it was
 * (Documentation/engine.rst, "Home imports").  The device program is
 * rw.spvasm: each lane reads a guest word and stores it, xored, at
 * another.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "kselftest_harness.h"
#include "hmirror/engine.h"
#include "hmirror/vkctx.h"
#include "hmirror/watch.h"
#include "vkfault_test.h"

extern const uint32_t hm_test_rw_spv[];
extern const size_t hm_test_rw_spv_words;

#undef TEST_TIMEOUT_DEFAULT
#define TEST_TIMEOUT_DEFAULT 120
#define CHUNK		(64ull << 10)
#define PIECE		(64ull << 20)   /* space.c's piece for a space up to 16 GiB */
#define BIG		(16ull << 30)
#define GUEST		(1ull << 40)
#define RW_USER_WORDS	5
#define OP_STORE32	1

struct plan_entry { uint32_t roff, woff, op, x; };

struct env {
	struct hm_vk *vk;
	struct hm_engine *e;
	struct hm_space *s;
	uint8_t *mem;
	uint32_t id, pipe;
	struct hm_vk_buffer plan;
};

static enum hm_backend backend(void)
{
	return hm_backend_probe(HM_BACKEND_UFFD_ASYNC, NULL) ? HM_BACKEND_MPROTECT :
							      HM_BACKEND_UFFD_ASYNC;
}

/* vk, engine, a never-touched space of size bytes added unmapped, the program */
static int env_new(struct env *v, uint64_t size)
{
	struct hm_vk_params vp = { .validation = 1 };
	struct hm_engine_params ep = { .chunk_shift = 16, .timeout_ns = 60ull * 1000000000 };
	struct hm_space_params sp = { .size = size, .chunk_shift = 16, .backend = backend() };
	int err;

	memset(v, 0, sizeof(*v));
	err = hm_vk_new(&vp, &v->vk);
	if (!err)
		err = hm_engine_new(v->vk, &ep, &v->e);
	if (!err)
		err = hm_space_new(&sp, &v->s);
	if (!err)
		err = hm_engine_add_space(v->e, v->s, HM_ENGINE_UNMAPPED, &v->id);
	if (!err)
		err = hm_engine_pipeline_new(v->e, hm_test_rw_spv, hm_test_rw_spv_words, "main",
					     RW_USER_WORDS, &v->pipe);
	if (!err)
		err = hm_vk_buffer_new(v->vk, 4096, HM_VK_MEM_HOST, &v->plan);
	if (!err)
		v->mem = hm_space_addr(v->s);
	return err;
}

static unsigned env_free(struct env *v)
{
	unsigned msgs = 0;

	hm_engine_free(v->e);
	hm_space_free(v->s);
	if (v->vk) {
		hm_vk_buffer_free(v->vk, &v->plan);
		msgs = hm_vk_validation_count(v->vk);
		hm_vk_free(v->vk);
	}
	memset(v, 0, sizeof(*v));
	return msgs;
}

/* One lane: the word at guest + roff, xored with x, stored at guest + woff. */
static int lane(struct env *v, uint64_t roff, uint64_t woff, uint32_t x)
{
	struct plan_entry *pl = v->plan.map;
	uint32_t push[RW_USER_WORDS] = { (uint32_t)GUEST, (uint32_t)(GUEST >> 32),
					 (uint32_t)v->plan.addr, (uint32_t)(v->plan.addr >> 32), 1 };

	pl[0] = (struct plan_entry){ (uint32_t)roff, (uint32_t)woff, OP_STORE32, x };
	return hm_engine_dispatch(v->e, v->pipe, 1, 1, 1, push, RW_USER_WORDS, 0);
}

static struct hm_engine_stats stats(struct env *v)
{
	struct hm_engine_stats st;

	memset(&st, 0, sizeof(st));
	hm_engine_stats(v->e, &st);
	return st;
}

static uint64_t resident(void *p, uint64_t size)
{
	static unsigned char vec[(1u << 30) / 4096];
	uint64_t n = 0, page = (uint64_t)sysconf(_SC_PAGESIZE);

	for (uint64_t off = 0; off < size; off += 1ull << 30) {
		uint64_t len = size - off < (1ull << 30) ? size - off : 1ull << 30;

		if (mincore((char *)p + off, len, vec))
			return UINT64_MAX;
		for (uint64_t i = 0; i < len / page; i++)
			n += vec[i] & 1;
	}
	return n;
}

/*
 * An untouched 16 GiB space, added and then mapped whole: no piece
 * imported, no guest page resident.  The eager import (every piece at
 * add) fails it.
 */
TEST(untouched_space_imports_nothing)
{
	struct hm_engine_stats st;
	struct env v;
	void *view;
	int err;

	err = env_new(&v, BIG);
	if (err) {
		env_free(&v);
		SKIP(return, "no 16 GiB space and engine on a Vulkan device here (%d)", err);
	}
	st = stats(&v);
	EXPECT_EQ(0, st.import_pieces);
	EXPECT_EQ(0, st.import_bytes);
	ASSERT_EQ(0, hm_engine_map(v.e, v.id, 0, BIG, GUEST, 0));
	st = stats(&v);
	EXPECT_EQ(0, st.import_pieces);
	EXPECT_EQ(0, st.import_bytes);
	ASSERT_EQ(0, hm_space_device_view(v.s, &view));
	EXPECT_EQ(0, resident(view, BIG));
	/* unmapped before any dispatch: nothing is ever imported */
	ASSERT_EQ(0, hm_engine_unmap(v.e, GUEST, BIG));
	ASSERT_EQ(0, hm_engine_map(v.e, v.id, 0, CHUNK, GUEST, 0));
	ASSERT_EQ(0, hm_engine_unmap(v.e, GUEST, CHUNK));
	ASSERT_EQ(0, lane(&v, 0, 4, 1));
	st = stats(&v);
	EXPECT_EQ(0, st.import_pieces);
	EXPECT_EQ(1, st.dispatches);
	EXPECT_EQ(0, env_free(&v));
}

/*
 * A dispatch over one mapped chunk of a 16 GiB space imports exactly that
 * chunk's piece, and the device reads and writes the guest's bytes
 * through it; a chunk of the same piece imports nothing more, one of
 * another piece one more piece; pieces stay until the space is removed.
 */
TEST(dispatch_imports_the_pieces_its_table_names)
{
	uint64_t a = 5 * (1ull << 30) + 3 * CHUNK;     /* space offsets */
	uint64_t b = a + 7 * CHUNK;                     /* the same piece */
	uint64_t c = 11 * (1ull << 30);                 /* another */
	uint32_t want, got, x = 0x5a5a1234;
	struct hm_engine_stats st;
	uint64_t dev, dev2;
	uint8_t *model;
	struct env v;
	int err;

	err = env_new(&v, BIG);
	if (err) {
		env_free(&v);
		SKIP(return, "no 16 GiB space and engine on a Vulkan device here (%d)", err);
	}
	model = malloc(CHUNK);
	ASSERT_NE(NULL, model);
	for (uint64_t i = 0; i < CHUNK; i++)
		v.mem[a + i] = model[i] = (uint8_t)(i * 13 + 5);
	/* guest chunk 0 -> a */
	ASSERT_EQ(0, hm_engine_map(v.e, v.id, a, CHUNK, GUEST, 0));
	EXPECT_EQ(0, stats(&v).import_pieces);
	ASSERT_EQ(0, lane(&v, 64, 128, x));
	memcpy(&want, model + 64, 4);
	want ^= x;
	memcpy(model + 128, &want, 4);
	EXPECT_EQ(0, memcmp(model, v.mem + a, CHUNK));
	st = stats(&v);
	EXPECT_EQ(1, st.import_pieces);
	EXPECT_EQ(PIECE, st.import_bytes);
	EXPECT_EQ(0, st.import_failures);
	/* the table names the piece: its address plus the chunk's offset */
	ASSERT_EQ(0, hm_engine_device_addr(v.e, GUEST + 128, &dev));
	EXPECT_NE(0, dev);

	/* guest chunk 1 -> b, in the same piece: nothing more imported */
	ASSERT_EQ(0, hm_engine_map(v.e, v.id, b, CHUNK, GUEST + CHUNK, 0));
	memcpy(v.mem + b + 8, &x, 4);
	ASSERT_EQ(0, lane(&v, CHUNK + 8, 256, 0));
	memcpy(&got, v.mem + a + 256, 4);
	EXPECT_EQ(x, got);
	st = stats(&v);
	EXPECT_EQ(1, st.import_pieces);
	EXPECT_EQ(PIECE, st.import_bytes);
	ASSERT_EQ(0, hm_engine_device_addr(v.e, GUEST + CHUNK, &dev2));
	EXPECT_EQ(dev - 128 + (b - a), dev2);

	/* guest chunk 2 -> c, another piece: one more, imported by the
	 * lookup as a dispatch would */
	ASSERT_EQ(0, hm_engine_map(v.e, v.id, c, CHUNK, GUEST + 2 * CHUNK, 0));
	EXPECT_EQ(1, stats(&v).import_pieces);
	ASSERT_EQ(0, hm_engine_device_addr(v.e, GUEST + 2 * CHUNK, &dev2));
	EXPECT_NE(0, dev2);
	EXPECT_EQ(2, stats(&v).import_pieces);
	ASSERT_EQ(0, lane(&v, 64, 2 * CHUNK + 12, 0));
	memcpy(&got, v.mem + c + 12, 4);
	memcpy(&want, v.mem + a + 64, 4);
	EXPECT_EQ(want, got);
	st = stats(&v);
	EXPECT_EQ(2, st.import_pieces);
	EXPECT_EQ(2 * PIECE, st.import_bytes);
	TH_LOG("16 GiB space, 3 chunks mapped in 2 pieces: %lu pieces, %lu MiB imported in "
	       "%.2f ms", (unsigned long)st.import_pieces, (unsigned long)(st.import_bytes >> 20),
	       st.ns_import / 1e6);

	/* unmapped: the pieces stay; removed: they go */
	ASSERT_EQ(0, hm_engine_unmap(v.e, GUEST, 3 * CHUNK));
	ASSERT_EQ(0, lane(&v, 0, 4, 1));
	EXPECT_EQ(2, stats(&v).import_pieces);
	ASSERT_EQ(0, hm_engine_remove_space(v.e, v.id));
	st = stats(&v);
	EXPECT_EQ(0, st.import_pieces);
	EXPECT_EQ(0, st.import_bytes);
	free(model);
	EXPECT_EQ(0, env_free(&v));
}

/* Past 16 GiB a piece is a 256th of the space: 128 MiB of a 32 GiB one. */
TEST(a_larger_space_has_larger_pieces)
{
	const uint64_t size = 32ull << 30;
	struct hm_engine_stats st;
	struct env v;
	int err;

	err = env_new(&v, size);
	if (err) {
		env_free(&v);
		SKIP(return, "no 32 GiB space and engine on a Vulkan device here (%d)", err);
	}
	ASSERT_EQ(0, hm_engine_map(v.e, v.id, size - CHUNK, CHUNK, GUEST, 0));
	v.mem[size - CHUNK + 20] = 0x77;
	ASSERT_EQ(0, lane(&v, 20, 24, 0));
	EXPECT_EQ(0x77, v.mem[size - CHUNK + 24]);
	st = stats(&v);
	EXPECT_EQ(1, st.import_pieces);
	EXPECT_EQ(2 * PIECE, st.import_bytes);
	EXPECT_EQ(0, env_free(&v));
}

/* A chunk mapped at two guest addresses (an alias) and remapped: the
 * import names every alias, and the table never names a piece it lacks. */
TEST(aliases_and_rebuilds_name_the_import)
{
	uint64_t a = 3 * PIECE + 5 * CHUNK, dev0, dev1;
	struct env v;
	uint32_t got, x = 0xdeadbeef;
	int err;

	err = env_new(&v, 8 * PIECE);
	if (err) {
		env_free(&v);
		SKIP(return, "no engine on a Vulkan device here (%d)", err);
	}
	ASSERT_EQ(0, hm_engine_map(v.e, v.id, a, CHUNK, GUEST, 0));
	ASSERT_EQ(0, hm_engine_map(v.e, v.id, a, CHUNK, GUEST + 16 * CHUNK, 0));
	/* enough mappings to rebuild the table while the piece waits */
	for (uint64_t i = 0; i < 300; i++)
		ASSERT_EQ(0, hm_engine_map(v.e, v.id, 6 * PIECE + i * CHUNK, CHUNK,
					   GUEST + (100 + 2 * i) * CHUNK, 0));
	EXPECT_EQ(0, stats(&v).import_pieces);
	memcpy(v.mem + a + 40, &x, 4);
	/* read through one alias, write through the other */
	ASSERT_EQ(0, lane(&v, 40, 16 * CHUNK + 80, 0));
	memcpy(&got, v.mem + a + 80, 4);
	EXPECT_EQ(x, got);
	EXPECT_EQ(2, stats(&v).import_pieces);          /* pieces 3 and 6 */
	ASSERT_EQ(0, hm_engine_device_addr(v.e, GUEST, &dev0));
	ASSERT_EQ(0, hm_engine_device_addr(v.e, GUEST + 16 * CHUNK, &dev1));
	EXPECT_EQ(dev0, dev1);
	EXPECT_EQ(0, env_free(&v));
}

/* The count of vkAllocateMemory calls up to the first dispatch of the
 * scenario below (VK_LAYER_HMIRROR_fault's report). */
static long allocs_before_dispatch(struct __test_metadata *_metadata, uint64_t size,
				   const uint64_t *offs, int n)
{
	char path[] = "/tmp/hmirror-vkfault.XXXXXX";
	int fd = mkstemp(path);
	long allocs = -1, submits;
	struct env v;
	FILE *f;

	if (fd < 0)
		return -1;
	close(fd);
	setenv("HMIRROR_VKFAULT_REPORT", path, 1);
	if (!env_new(&v, size))
		for (int i = 0; i < n; i++)
			hm_engine_map(v.e, v.id, offs[i], CHUNK, GUEST + i * CHUNK, 0);
	env_free(&v);
	unsetenv("HMIRROR_VKFAULT_REPORT");
	f = fopen(path, "r");
	if (f) {
		if (fscanf(f, "allocs %ld submits %ld", &allocs, &submits) != 2)
			allocs = -1;
		fclose(f);
	}
	unlink(path);
	return allocs;
}

/*
 * The driver refuses an import at a dispatch boundary (VK_LAYER_HMIRROR_fault
 * fails the allocations of its tries): the dispatch returns the error
 * before the device ran anything, the pieces imported before the refusal
 * stay, the others stay pending, no dispatch is counted, guest memory is
 * untouched; once the driver imports again, the next dispatch imports the
 * rest and runs.  One refusal alone: the populated retry imports it.
 */
TEST(refused_import_fails_the_dispatch_cleanly)
{
	const uint64_t size = 4 * PIECE, offs[2] = { 0, 2 * PIECE + CHUNK };
	struct hm_engine_stats st;
	uint32_t got, before;
	uint64_t dev;
	struct env v;
	long n;
	char val[32];

	if (!hm_test_fault_layer())
		SKIP(return, "no build/share/hmirror/vkfault next to this program");
	n = allocs_before_dispatch(_metadata, size, offs, 2);
	ASSERT_LT(0, n);

	/* piece 0 imports (allocation n + 1), piece 2 is refused at 4
	 * boundaries, each trying twice (allocations n + 2 .. n + 9) */
	snprintf(val, sizeof(val), "%ld,8", n + 2);
	setenv("HMIRROR_VKFAULT_ALLOC", val, 1);
	ASSERT_EQ(0, env_new(&v, size));
	unsetenv("HMIRROR_VKFAULT_ALLOC");
	for (int i = 0; i < 2; i++)
		ASSERT_EQ(0, hm_engine_map(v.e, v.id, offs[i], CHUNK, GUEST + i * CHUNK, 0));
	memcpy(&before, v.mem + offs[1] + 4, 4);
	EXPECT_EQ(-ENOSPC, lane(&v, 0, CHUNK + 4, 0x11));
	st = stats(&v);
	EXPECT_EQ(1, st.import_pieces);
	EXPECT_EQ(PIECE, st.import_bytes);
	EXPECT_EQ(1, st.import_failures);
	EXPECT_EQ(0, st.dispatches);
	memcpy(&got, v.mem + offs[1] + 4, 4);
	EXPECT_EQ(before, got);
	/* every later boundary tries again, and is refused again */
	EXPECT_EQ(-ENOSPC, lane(&v, 0, CHUNK + 4, 0x11));
	EXPECT_EQ(-ENOSPC, hm_engine_device_addr(v.e, GUEST, &dev));
	EXPECT_EQ(0, dev);
	EXPECT_EQ(-ENOSPC, hm_engine_prefetch(v.e));
	st = stats(&v);
	EXPECT_EQ(1, st.import_pieces);
	EXPECT_EQ(4, st.import_failures);
	EXPECT_EQ(0, st.dispatches);
	/* the driver imports again: the next dispatch imports piece 2 and runs */
	memcpy(v.mem + 8, &before, 4);
	ASSERT_EQ(0, lane(&v, 8, CHUNK + 4, 0x11));
	memcpy(&got, v.mem + offs[1] + 4, 4);
	EXPECT_EQ(before ^ 0x11, got);
	st = stats(&v);
	EXPECT_EQ(2, st.import_pieces);
	EXPECT_EQ(1, st.dispatches);
	ASSERT_EQ(0, hm_engine_remove_space(v.e, v.id));
	st = stats(&v);
	EXPECT_EQ(0, st.import_pieces);
	EXPECT_EQ(0, st.import_bytes);
	EXPECT_EQ(0, env_free(&v));

	/* the first try of piece 0 alone refused: populated, tried again, imported */
	snprintf(val, sizeof(val), "%ld", n + 1);
	setenv("HMIRROR_VKFAULT_ALLOC", val, 1);
	ASSERT_EQ(0, env_new(&v, size));
	unsetenv("HMIRROR_VKFAULT_ALLOC");
	ASSERT_EQ(0, hm_engine_map(v.e, v.id, 0, CHUNK, GUEST, 0));
	v.mem[100] = 0x42;
	ASSERT_EQ(0, lane(&v, 100, 200, 0));
	EXPECT_EQ(0x42, v.mem[200]);
	st = stats(&v);
	EXPECT_EQ(1, st.import_pieces);
	EXPECT_EQ(0, st.import_failures);
	EXPECT_EQ(1, st.dispatches);
	EXPECT_EQ(0, env_free(&v));
}

TEST_HARNESS_MAIN
