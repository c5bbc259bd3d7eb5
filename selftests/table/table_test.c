// SPDX-License-Identifier: GPL-2.0
/*
 * Host side of the device table, marks, the shared-lookup plan and the
 * emitted SPIR-V (validity, dedup).  No Vulkan device needed.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <spirv/unified1/spirv.h>

#include "kselftest_harness.h"
#include "hmirror/table.h"
#include "hmirror/lookup.h"
#include "../../lib/lookup_reference.h"
#include "spv_check.h"

static uint64_t rng_state = 0x1234567887654321ull;
static uint64_t rnd(void)
{
	/* xorshift64* */
	rng_state ^= rng_state >> 12;
	rng_state ^= rng_state << 25;
	rng_state ^= rng_state >> 27;
	return rng_state * 2685821657736338717ull;
}

struct tbl {
	void *mem;
	size_t bytes;
	struct hm_table *t;
};

static int tbl_new(struct tbl *b, uint32_t nr_home, unsigned shift)
{
	b->bytes = hm_table_bytes_for(nr_home);
	/* 64 guard bytes after the table: must never be written */
	b->mem = aligned_alloc(64, (b->bytes + 64 + 63) / 64 * 64);
	if (!b->mem)
		return -ENOMEM;
	memset((char *)b->mem + b->bytes, 0xa5, 64);
	return hm_table_new(b->mem, b->bytes, nr_home, shift, &b->t);
}

static int tbl_guard_intact(const struct tbl *b)
{
	const unsigned char *g = (const unsigned char *)b->mem + b->bytes;

	for (int i = 0; i < 64; i++)
		if (g[i] != 0xa5)
			return 0;
	return 1;
}

static void tbl_free(struct tbl *b)
{
	hm_table_free(b->t);
	free(b->mem);
}

/* A chunk whose home slot is want (searching from start). */
static uint64_t chunk_with_home(uint32_t want, uint32_t nr_home, uint64_t *start)
{
	for (uint64_t c = *start;; c++) {
		if (hm_table_home_slot(c, nr_home) == want) {
			*start = c + 1;
			return c;
		}
	}
}

TEST(sizes_and_layout)
{
	struct tbl b;
	const struct hm_table_slot *s;
	uint32_t slot;
	uint64_t dev;

	ASSERT_EQ(sizeof(struct hm_table_slot), HM_TABLE_SLOT_BYTES);
	ASSERT_EQ(hm_table_bytes_for(100), (100 + HM_TABLE_PROBES - 1) * 16);
	ASSERT_EQ(hm_table_nr_slots_for(100), 103);
	ASSERT_EQ(hm_marks_bytes_for(103), 4 * 104 + HM_MARKS_SLACK);
	ASSERT_EQ(sizeof(struct hm_device_table_push), 4 * HM_DEVICE_TABLE_PUSH_WORDS);
	ASSERT_EQ(0, tbl_new(&b, 100, 16));
	s = b.mem;
	for (uint32_t i = 0; i < 103; i++)
		ASSERT_EQ(s[i].chunk, HM_TABLE_EMPTY_CHUNK);
	ASSERT_EQ(0, hm_table_insert(b.t, 42, 0x1000000, &slot));
	ASSERT_GE(slot, hm_table_home_slot(42, 100));
	ASSERT_LT(slot, hm_table_home_slot(42, 100) + HM_TABLE_PROBES);
	/* the device reads {chunk, delta} at slot * 16 */
	ASSERT_EQ(s[slot].chunk, 42);
	ASSERT_EQ(s[slot].delta, 0x1000000);
	ASSERT_EQ(0, hm_table_lookup(b.t, (42ull << 16) + 123, &dev, NULL));
	ASSERT_EQ(dev, (42ull << 16) + 123 + 0x1000000);
	/* negative deltas (device address below the guest address) */
	ASSERT_EQ(0, hm_table_update(b.t, 42, -(int64_t)(40ull << 16)));
	ASSERT_EQ(s[slot].delta, -(int64_t)(40ull << 16));
	ASSERT_EQ(0, hm_table_lookup(b.t, (42ull << 16) + 8, &dev, NULL));
	ASSERT_EQ(dev, (2ull << 16) + 8);
	ASSERT_TRUE(tbl_guard_intact(&b));
	tbl_free(&b);
}

TEST(insert_update_remove)
{
	struct tbl b;
	uint32_t slot, slot2;
	uint64_t dev;

	ASSERT_EQ(0, tbl_new(&b, 64, 12));
	ASSERT_EQ(-ENOENT, hm_table_lookup(b.t, 7ull << 12, &dev, &slot));
	ASSERT_EQ(dev, 0);
	ASSERT_EQ(slot, UINT32_MAX);
	ASSERT_EQ(-ENOENT, hm_table_update(b.t, 7, 1));
	ASSERT_EQ(-ENOENT, hm_table_remove(b.t, 7));
	ASSERT_EQ(0, hm_table_insert(b.t, 7, 4096, &slot));
	ASSERT_EQ(-EEXIST, hm_table_insert(b.t, 7, 8192, NULL));
	ASSERT_EQ(0, hm_table_lookup(b.t, (7ull << 12) + 4095, &dev, &slot2));
	ASSERT_EQ(slot, slot2);
	ASSERT_EQ(dev, (7ull << 12) + 4095 + 4096);
	/* the next chunk is a different chunk */
	ASSERT_EQ(-ENOENT, hm_table_lookup(b.t, 8ull << 12, &dev, NULL));
	ASSERT_EQ(0, hm_table_update(b.t, 7, 1 << 20));
	ASSERT_EQ(0, hm_table_lookup(b.t, 7ull << 12, &dev, NULL));
	ASSERT_EQ(dev, (7ull << 12) + (1 << 20));
	ASSERT_EQ(1, hm_table_nr_entries(b.t));
	ASSERT_EQ(0, hm_table_remove(b.t, 7));
	ASSERT_EQ(0, hm_table_nr_entries(b.t));
	ASSERT_EQ(-ENOENT, hm_table_lookup(b.t, 7ull << 12, &dev, NULL));
	ASSERT_EQ(((struct hm_table_slot *)b.mem)[slot].chunk, HM_TABLE_EMPTY_CHUNK);
	ASSERT_EQ(0, hm_table_set(b.t, 7, 5, NULL));
	ASSERT_EQ(0, hm_table_set(b.t, 7, 6, NULL));
	ASSERT_EQ(0, hm_table_lookup(b.t, 7ull << 12, &dev, NULL));
	ASSERT_EQ(dev, (7ull << 12) + 6);
	tbl_free(&b);
}

/* Deferred updates: the host copy at once, the device slots at the flush,
 * only where the delta differs from what the device held. */
TEST(update_deferred_and_flush)
{
	struct hm_table_slot *dev_slots;
	struct tbl b;
	uint32_t s7, s9;
	uint64_t dev;

	ASSERT_EQ(0, tbl_new(&b, 64, 12));
	dev_slots = b.mem;
	ASSERT_EQ(-ENOENT, hm_table_update_deferred(b.t, 7, 1));
	ASSERT_EQ(0, hm_table_insert(b.t, 7, 100, &s7));
	ASSERT_EQ(0, hm_table_insert(b.t, 9, 200, &s9));
	ASSERT_EQ(0, hm_table_update_deferred(b.t, 7, 300));
	ASSERT_EQ(0, hm_table_lookup(b.t, 7ull << 12, &dev, NULL));
	EXPECT_EQ(dev, (7ull << 12) + 300);		/* the host copy: now */
	EXPECT_EQ(100, dev_slots[s7].delta);		/* the device: not yet */
	/* 9 repointed and back: nothing to write */
	ASSERT_EQ(0, hm_table_update_deferred(b.t, 9, 1));
	ASSERT_EQ(0, hm_table_update_deferred(b.t, 9, 200));
	EXPECT_EQ(1, hm_table_flush(b.t));
	EXPECT_EQ(300, dev_slots[s7].delta);
	EXPECT_EQ(200, dev_slots[s9].delta);
	EXPECT_EQ(0, hm_table_flush(b.t));
	/* an immediate update or a remove after a deferred one wins; the flush
	 * leaves the device as they left it */
	ASSERT_EQ(0, hm_table_update_deferred(b.t, 7, 400));
	ASSERT_EQ(0, hm_table_update(b.t, 7, 100));
	ASSERT_EQ(0, hm_table_update_deferred(b.t, 9, 500));
	ASSERT_EQ(0, hm_table_remove(b.t, 9));
	hm_table_flush(b.t);
	EXPECT_EQ(100, dev_slots[s7].delta);
	EXPECT_EQ(HM_TABLE_EMPTY_CHUNK, dev_slots[s9].chunk);
	EXPECT_TRUE(tbl_guard_intact(&b));
	tbl_free(&b);
}

TEST(bad_arguments)
{
	struct hm_table *t = (void *)1;
	static struct hm_table_slot mem[64] __attribute__((aligned(16)));
	struct tbl b;

	ASSERT_EQ(-EINVAL, hm_table_new(mem, sizeof(mem), 8, 11, &t));
	ASSERT_EQ(NULL, t);
	ASSERT_EQ(-EINVAL, hm_table_new(mem, sizeof(mem), 8, 41, &t));
	ASSERT_EQ(-EINVAL, hm_table_new(mem, sizeof(mem), 0, 16, &t));
	ASSERT_EQ(-EINVAL, hm_table_new(mem, sizeof(mem), 62, 16, &t));
	ASSERT_EQ(-EINVAL, hm_table_new((char *)mem + 8, sizeof(mem) - 8, 8, 16, &t));
	ASSERT_EQ(-EINVAL, hm_table_new(NULL, sizeof(mem), 8, 16, &t));
	ASSERT_EQ(-EINVAL, hm_table_new(mem, sizeof(mem), HM_TABLE_MAX_NR_HOME + 1, 16, &t));
	ASSERT_EQ(0, hm_table_new(mem, sizeof(mem), 61, 16, &t));
	/* a chunk number no guest address can have */
	ASSERT_EQ(-EINVAL, hm_table_insert(t, HM_TABLE_EMPTY_CHUNK, 0, NULL));
	ASSERT_EQ(-EINVAL, hm_table_insert(t, 1ull << 48, 0, NULL));
	ASSERT_EQ(0, hm_table_insert(t, (1ull << 48) - 1, 0, NULL));
	hm_table_free(t);
	hm_table_free(NULL);
	ASSERT_EQ(0, tbl_new(&b, 8, 16));
	tbl_free(&b);
}

/* The last home slot's window runs into the PROBES - 1 overhang slots,
 * and a fifth chunk of the same home is refused, never dropped. */
TEST(last_home_slot_and_full_window)
{
	const uint32_t nr_home = 257;
	struct tbl b;
	uint64_t start = 0, c[5], dev;
	uint32_t slot;

	ASSERT_EQ(0, tbl_new(&b, nr_home, 16));
	for (int i = 0; i < 5; i++)
		c[i] = chunk_with_home(nr_home - 1, nr_home, &start);
	for (int i = 0; i < 4; i++) {
		ASSERT_EQ(0, hm_table_insert(b.t, c[i], (int64_t)i << 32, &slot));
		ASSERT_EQ(slot, nr_home - 1 + i);
	}
	ASSERT_EQ(slot, hm_table_nr_slots(b.t) - 1);
	ASSERT_EQ(-ENOSPC, hm_table_insert(b.t, c[4], 0, NULL));
	ASSERT_EQ(-ENOENT, hm_table_lookup(b.t, c[4] << 16, &dev, NULL));
	for (int i = 0; i < 4; i++) {
		ASSERT_EQ(0, hm_table_lookup(b.t, (c[i] << 16) | 0xfffc, &dev, &slot));
		ASSERT_EQ(dev, ((c[i] << 16) | 0xfffc) + ((uint64_t)i << 32));
	}
	/* removing the first frees its slot for the fifth; the others stay */
	ASSERT_EQ(0, hm_table_remove(b.t, c[0]));
	ASSERT_EQ(0, hm_table_insert(b.t, c[4], 77, &slot));
	ASSERT_EQ(slot, nr_home - 1);
	for (int i = 1; i < 5; i++)
		ASSERT_EQ(0, hm_table_lookup(b.t, c[i] << 16, NULL, NULL));
	ASSERT_TRUE(tbl_guard_intact(&b));
	tbl_free(&b);
}

/* Grow and rehash: every chunk ever inserted stays found. */
TEST(grow_and_rehash_never_misses)
{
	struct tbl b, nb;
	enum { N = 20000 };
	uint64_t *chunks = malloc(N * sizeof(*chunks));
	unsigned grows = 0;

	ASSERT_NE(NULL, chunks);
	ASSERT_EQ(0, tbl_new(&b, 16, 16));
	for (int i = 0; i < N; i++) {
		int r;

		chunks[i] = rnd() >> 20;        /* 44-bit chunk numbers */
		while ((r = hm_table_insert(b.t, chunks[i], (int64_t)i * 64, NULL)) == -ENOSPC) {
			uint32_t n = hm_table_grow_nr_home(hm_table_nr_home(b.t));

			for (;;) {
				ASSERT_EQ(0, tbl_new(&nb, n, 16));
				if (!hm_table_rehash_into(b.t, nb.t))
					break;
				tbl_free(&nb);
				n = hm_table_grow_nr_home(n);
			}
			tbl_free(&b);
			b = nb;
			grows++;
		}
		ASSERT_EQ(0, r);
	}
	ASSERT_EQ(N, hm_table_nr_entries(b.t));
	for (int i = 0; i < N; i++) {
		uint64_t dev;

		ASSERT_EQ(0, hm_table_lookup(b.t, chunks[i] << 16, &dev, NULL));
		ASSERT_EQ(dev, (chunks[i] << 16) + (uint64_t)i * 64);
	}
	/* the device's copy equals the table after every move */
	for (uint32_t s = 0; s < hm_table_nr_slots(b.t); s++) {
		const struct hm_table_slot *d = (const struct hm_table_slot *)b.mem + s;
		uint64_t chunk;
		int64_t delta;

		if (hm_table_slot_get(b.t, s, &chunk, &delta)) {
			ASSERT_EQ(chunk, d->chunk);
			ASSERT_EQ(delta, d->delta);
		} else {
			ASSERT_EQ(HM_TABLE_EMPTY_CHUNK, d->chunk);
		}
	}
	ASSERT_TRUE(tbl_guard_intact(&b));
	TH_LOG("%d random chunks: %u grows, %u home slots (load %.2f), %lu moves", N, grows,
	       hm_table_nr_home(b.t), (double)N / hm_table_nr_home(b.t),
	       (unsigned long)hm_table_nr_moves(b.t));
	tbl_free(&b);
	free(chunks);
}

/* Fill a table to its first -ENOSPC: inserts that move other chunks
 * (hopscotch) keep every chunk found, the device copy equal to the table,
 * and a refused insert changes nothing. */
TEST(hopscotch_moves_keep_every_chunk)
{
	enum { NR_HOME = 4096 };
	struct tbl b;
	uint64_t *chunks = malloc(4 * NR_HOME * sizeof(*chunks));
	unsigned n = 0;

	ASSERT_NE(NULL, chunks);
	ASSERT_EQ(0, tbl_new(&b, NR_HOME, 12));
	for (;;) {
		uint64_t c = rnd() >> 24;
		int r;

		r = hm_table_insert(b.t, c, (int64_t)c * 3, NULL);
		if (r == -EEXIST)
			continue;
		if (r == -ENOSPC) {
			void *snap = malloc(b.bytes);

			ASSERT_NE(NULL, snap);
			memcpy(snap, b.mem, b.bytes);
			ASSERT_EQ(-ENOSPC, hm_table_insert(b.t, c, 1, NULL));
			ASSERT_EQ(0, memcmp(snap, b.mem, b.bytes));
			ASSERT_EQ(-ENOENT, hm_table_find(b.t, c, NULL));
			free(snap);
			break;
		}
		ASSERT_EQ(0, r);
		chunks[n++] = c;
	}
	ASSERT_GT(hm_table_nr_moves(b.t), 0);
	ASSERT_EQ(n, hm_table_nr_entries(b.t));
	for (unsigned i = 0; i < n; i++) {
		uint64_t dev;

		ASSERT_EQ(0, hm_table_lookup(b.t, chunks[i] << 12, &dev, NULL));
		ASSERT_EQ(dev, (chunks[i] << 12) + chunks[i] * 3);
	}
	for (uint32_t s = 0; s < hm_table_nr_slots(b.t); s++) {
		const struct hm_table_slot *d = (const struct hm_table_slot *)b.mem + s;
		uint64_t chunk;
		int64_t delta;

		if (hm_table_slot_get(b.t, s, &chunk, &delta)) {
			/* and every chunk sits inside its own window */
			uint32_t home = hm_table_home_slot(chunk, NR_HOME);

			ASSERT_GE(s, home);
			ASSERT_LT(s, home + HM_TABLE_PROBES);
			ASSERT_EQ(chunk, d->chunk);
			ASSERT_EQ(delta, d->delta);
		} else {
			ASSERT_EQ(HM_TABLE_EMPTY_CHUNK, d->chunk);
		}
	}
	TH_LOG("%u chunks in %u home slots, %lu moves", n, NR_HOME,
	       (unsigned long)hm_table_nr_moves(b.t));
	tbl_free(&b);
	free(chunks);
}

/* Load factor: the sizing hm_table_nr_home_for() picks (50 %) holds a
 * contiguous space (the common case: one space = consecutive chunks)
 * without a full window; random chunk numbers are measured and logged. */
#ifndef HM_TEST_MIN_SPACES_LOAD
#define HM_TEST_MIN_SPACES_LOAD 0.25
#endif
TEST(load_factor)
{
	static const uint32_t sizes[] = { 1, 7, 64, 1000, 4096, 65536, 100000 };

	for (unsigned s = 0; s < sizeof(sizes) / sizeof(sizes[0]); s++) {
		uint32_t n = sizes[s];
		uint64_t base = 0x7f0000000000ull >> 16;
		struct tbl b;

		ASSERT_EQ(0, tbl_new(&b, hm_table_nr_home_for(n), 16));
		for (uint32_t i = 0; i < n; i++)
			ASSERT_EQ(0, hm_table_insert(b.t, base + i, 0, NULL));
		tbl_free(&b);
	}
	/* several spaces (contiguous ranges at random bases) */
	double min_full = 1;
	for (int r = 0; r < 20; r++) {
		struct tbl b;
		uint32_t nr_home = 1 << 15, n = 0;
		double at_first_full = 0;

		ASSERT_EQ(0, tbl_new(&b, nr_home, 16));
		for (int sp = 0; sp < 64 && !at_first_full; sp++) {
			uint64_t base = rnd() >> 24, len = 1 + rnd() % 2048;

			for (uint64_t i = 0; i < len; i++) {
				int e = hm_table_insert(b.t, base + i, 0, NULL);

				if (e == -ENOSPC) {
					at_first_full = (double)n / nr_home;
					break;
				}
				n += e == 0;
			}
		}
		if (!at_first_full)
			at_first_full = (double)n / nr_home;
		if (at_first_full < min_full)
			min_full = at_first_full;
		tbl_free(&b);
	}
	TH_LOG("contiguous spaces at random bases: first full window at load >= %.3f (20 rounds)",
	       min_full);
	ASSERT_GT(min_full, HM_TEST_MIN_SPACES_LOAD);
	/* random chunks: load at the first full window, averaged */
	double sum = 0;
	const int rounds = 20;
	const uint32_t nr_home = 1 << 14;

	for (int r = 0; r < rounds; r++) {
		struct tbl b;
		uint32_t n = 0;

		ASSERT_EQ(0, tbl_new(&b, nr_home, 16));
		while (hm_table_insert(b.t, rnd() >> 20, 0, NULL) != -ENOSPC)
			n++;
		sum += (double)n / nr_home;
		tbl_free(&b);
	}
	TH_LOG("random chunks: first full window at load %.3f (mean of %d, %u home slots)",
	       sum / rounds, rounds, nr_home);
	ASSERT_GT(sum / rounds, 0.2);
}

struct scan_rec {
	uint32_t got[64];
	unsigned n;
};

static void scan_cb(uint32_t slot, void *arg)
{
	struct scan_rec *r = arg;

	if (r->n < 64)
		r->got[r->n] = slot;
	r->n++;
}

TEST(marks_scan_and_clear)
{
	const uint32_t nr_slots = 103;
	static const uint32_t set[] = { 0, 1, 7, 8, 9, 31, 32, 63, 100, 102 };
	uint32_t *marks = calloc(1, hm_marks_bytes_for(nr_slots) + 4);
	struct scan_rec r = { 0 };

	ASSERT_NE(NULL, marks);
	marks[1 + nr_slots] = 0xdead;          /* past the last mark: never read */
	marks[HM_MARK_SINK] = 1;
	for (unsigned i = 0; i < sizeof(set) / sizeof(set[0]); i++)
		marks[HM_MARK_INDEX(set[i])] = 1;
	ASSERT_EQ(10, hm_marks_scan(marks, nr_slots, scan_cb, &r));
	ASSERT_EQ(10, r.n);
	for (unsigned i = 0; i < 10; i++)
		ASSERT_EQ(set[i], r.got[i]);
	for (uint32_t i = 1; i <= nr_slots; i++)
		ASSERT_EQ(0, marks[i]);
	ASSERT_EQ(0xdead, marks[1 + nr_slots]);
	/* the sink is separate */
	ASSERT_EQ(1, marks[HM_MARK_SINK]);
	ASSERT_EQ(1, hm_marks_take_sink(marks));
	ASSERT_EQ(0, hm_marks_take_sink(marks));
	ASSERT_EQ(0, hm_marks_scan(marks, nr_slots, scan_cb, &r));
	ASSERT_EQ(-EINVAL, hm_marks_scan(NULL, nr_slots, NULL, NULL));
	/* scanning a list of slots: only those, cleared, in list order */
	static const uint32_t list[] = { 9, 3, 100 };

	marks[HM_MARK_INDEX(3)] = marks[HM_MARK_INDEX(100)] = marks[HM_MARK_INDEX(50)] = 1;
	r.n = 0;
	ASSERT_EQ(2, hm_marks_scan_list(marks, nr_slots, list, 3, scan_cb, &r));
	ASSERT_EQ(3, r.got[0]);
	ASSERT_EQ(100, r.got[1]);
	ASSERT_EQ(0, marks[HM_MARK_INDEX(3)]);
	ASSERT_EQ(1, marks[HM_MARK_INDEX(50)]);
	ASSERT_EQ(-EINVAL, hm_marks_scan_list(marks, nr_slots, (const uint32_t[]){ 1, 103 }, 2,
					      NULL, NULL));
	ASSERT_EQ(1, hm_marks_scan(marks, nr_slots, NULL, NULL));
	free(marks);
}

TEST(access_plan)
{
	struct hm_access_plan p;

	ASSERT_EQ(-EINVAL, hm_access_plan(0, 0, 16, &p));
	ASSERT_EQ(-EINVAL, hm_access_plan(0, 6, 16, &p));
	ASSERT_EQ(-EINVAL, hm_access_plan(0, 68, 16, &p));
	ASSERT_EQ(-EINVAL, hm_access_plan(0, 4, 11, &p));
	for (unsigned shift = 12; shift <= 16; shift += 4) {
		uint64_t boundary = 0x5a5ull << shift;

		for (uint32_t bytes = 4; bytes <= 64; bytes += 4) {
			for (uint64_t g = boundary - 64; g <= boundary + 4; g += 4) {
				ASSERT_EQ(0, hm_access_plan(g, bytes, shift, &p));
				ASSERT_EQ(p.nr_words, bytes / 4);
				ASSERT_EQ(p.lookup_guest[0], g);
				ASSERT_EQ(p.lookup_guest[1], g + bytes - 4);
				for (uint32_t i = 0; i < p.nr_words; i++) {
					uint64_t w = g + 4 * i;
					uint64_t lg = p.lookup_guest[p.lookup_of_word[i]];

					/* each word shares the chunk of its lookup */
					ASSERT_EQ(w >> shift, lg >> shift);
					ASSERT_EQ(p.lookup_of_word[i], i < p.split ? 0u : 1u);
				}
				ASSERT_EQ(p.nr_lookups,
					  (g >> shift) == ((g + bytes - 4) >> shift) ? 1u : 2u);
			}
		}
	}
}

TEST(library_module_is_valid_and_exports_hm_lookup)
{
	uint32_t *w, name[4];
	size_t n;
	uint32_t cap = SpvCapabilityLinkage;

	if (!spv_have_val())
		SKIP(return, "spirv-val not installed");
	ASSERT_EQ(0, hm_spirv_lookup_library(&w, &n));
	ASSERT_EQ(w[0], 0x07230203);
	ASSERT_EQ(w[1], 0x00010500);
	/* A library module keeps Linkage, which the Vulkan environments
	 * refuse; it is validated as SPIR-V 1.5 and, once linked, for
	 * Vulkan (test-lookup-vk). */
	ASSERT_EQ(0, spv_validate(w, n, "spv1.5"));
	ASSERT_EQ(1, spv_count(w, n, SpvOpCapability, &cap, 1));
	memset(name, 0, sizeof(name));
	memcpy(name, "hm_lookup", 9);
	/* exactly one function, DontInline */
	ASSERT_EQ(1, spv_count(w, n, SpvOpFunction, NULL, 0));
	for (size_t i = 5; i < n; i += w[i] >> 16) {
		if ((w[i] & 0xffff) == SpvOpFunction)
			ASSERT_EQ(SpvFunctionControlDontInlineMask, w[i + 3]);
		if ((w[i] & 0xffff) == SpvOpDecorate &&
		    w[i + 2] == SpvDecorationLinkageAttributes) {
			ASSERT_EQ(0, memcmp(w + i + 3, name, 12));
			ASSERT_EQ(SpvLinkageTypeExport, w[i + 6]);
		}
		/* it reads nothing of its caller's: no global variables */
		ASSERT_NE(SpvOpVariable, w[i] & 0xffff);
	}
	free(w);
}

/* Every named emission variant: a valid library module with one function,
 * no global variable, four slot loads (eight for the split reference), and
 * DontInline unless it is the inlined reference; the variant can be chosen
 * only before the helper is written. */
TEST(every_variant_library_is_valid)
{
	struct hm_spirv_module *m;
	unsigned nr_default = 0;

	if (!spv_have_val())
		SKIP(return, "spirv-val not installed");
	ASSERT_GE(hm_lookup_nr_variants, 6);
	ASSERT_EQ(HM_LOOKUP_DEFAULT_VARIANT, hm_lookup_variants[0].flags);
	/* the public variants, then the reference forms (lookup_reference.h) */
	for (unsigned v = 0; v < hm__lookup_nr_forms; v++) {
		const struct hm_lookup_variant *lv = &hm_lookup_variants[v];
		uint32_t *w;
		size_t n;
		unsigned loads = 0;

		ASSERT_EQ(lv, hm__lookup_form_by_name(lv->name));
		ASSERT_EQ(v < hm_lookup_nr_variants ? lv : NULL, hm_lookup_variant_by_name(lv->name));
		ASSERT_EQ(v >= hm_lookup_nr_variants, hm__lookup_is_reference(lv->flags))
			TH_LOG("%s", lv->name);
		ASSERT_FALSE(lv->reserved);
		ASSERT_EQ(0, lv->flags & ~HM_LOOKUP_V_ALL_FORMS);
		ASSERT_EQ(lv->needs_pow2, (lv->flags & HM_LOOKUP_V_POW2) != 0) TH_LOG("%s", lv->name);
		nr_default += lv->flags == HM_LOOKUP_DEFAULT_VARIANT;
		ASSERT_EQ(0, hm_spirv_lookup_library_variant(lv->flags, &w, &n));
		ASSERT_EQ(0, spv_validate(w, n, "spv1.5")) TH_LOG("variant %s", lv->name);
		ASSERT_EQ(1, spv_count(w, n, SpvOpFunction, NULL, 0));
		for (size_t i = 5; i < n; i += w[i] >> 16) {
			if ((w[i] & 0xffff) == SpvOpFunction)
				ASSERT_EQ(lv->flags & HM_LOOKUP_V_REF_INLINE ?
					  SpvFunctionControlInlineMask : SpvFunctionControlDontInlineMask,
					  w[i + 3]);
			ASSERT_NE(SpvOpVariable, w[i] & 0xffff);
			loads += (w[i] & 0xffff) == SpvOpLoad;
		}
		ASSERT_EQ(lv->flags & HM_LOOKUP_V_REF_SPLIT ? 2 * HM_TABLE_PROBES : HM_TABLE_PROBES,
			  loads) TH_LOG("variant %s", lv->name);
		free(w);
	}
	ASSERT_EQ(1, nr_default);
	ASSERT_EQ(NULL, hm_lookup_variant_by_name("no-such-variant"));
	ASSERT_EQ(0, hm_spirv_module_new(&m));
	ASSERT_EQ(-EINVAL, hm_spirv_set_lookup_variant(m, 1u << 30));
	ASSERT_EQ(-EINVAL, hm_spirv_set_lookup_variant(m, HM_LOOKUP_V_U64X2 | HM_LOOKUP_V_REF_SPLIT));
	ASSERT_EQ(0, hm_spirv_set_lookup_variant(m, HM_LOOKUP_V_CHAIN));
	ASSERT_NE(0, hm_spirv_lookup_fn(m));
	ASSERT_EQ(-EBUSY, hm_spirv_set_lookup_variant(m, 0));
	hm_spirv_module_free(m);
}

/* A module built with the append API: an entry point whose accesses all go
 * through hm_spirv_emit_access(); the helper appears once, the 64-bit
 * constants once each, and the module is valid for Vulkan 1.2 and 1.3. */
TEST(append_api_module_is_valid_and_deduplicated)
{
	struct hm_spirv_module *m;
	uint32_t u64, ld[6], *w;
	struct hm_spirv_table_ids t;
	uint32_t dev[16], mark[16];
	size_t n;

	if (!spv_have_val())
		SKIP(return, "spirv-val not installed");
	ASSERT_EQ(0, hm_spirv_module_new(&m));
	u64 = hm_spirv_type_int(m, 64, false);
	ASSERT_NE(0, hm_spirv_compute_main(m, 6, 64, ld, NULL));
	t.table = HM_SPV_OP(m, HM_SPV_SEC_FUNCTION, SpvOpUConvert, u64, ld[0]);
	t.nr_home = ld[2];
	t.chunk_shift = ld[3];
	t.marks = HM_SPV_OP(m, HM_SPV_SEC_FUNCTION, SpvOpUConvert, u64, ld[4]);
	for (uint32_t words = 1; words <= 16; words++)
		ASSERT_EQ(0, hm_spirv_emit_access(m, &t, t.table, words, dev, mark));
	ASSERT_EQ(-EINVAL, hm_spirv_emit_access(m, &t, t.table, 17, dev, mark));
	HM_SPV(m, HM_SPV_SEC_FUNCTION, SpvOpReturn);
	hm_spirv_inst(m, HM_SPV_SEC_FUNCTION, SpvOpFunctionEnd, NULL, 0);
	ASSERT_EQ(0, hm_spirv_module_finish(m, &w, &n));
	ASSERT_EQ(0, spv_validate(w, n, "vulkan1.2"));
	ASSERT_EQ(0, spv_validate(w, n, "vulkan1.3"));
	ASSERT_EQ(2, spv_count(w, n, SpvOpFunction, NULL, 0));
	/* the helper once, DontInline; the caller's function as it asked */
	unsigned dont_inline = 0;

	for (size_t i = 5; i < n; i += w[i] >> 16) {
		if ((w[i] & 0xffff) == SpvOpFunction &&
		    w[i + 3] == SpvFunctionControlDontInlineMask)
			dont_inline++;
	}
	ASSERT_EQ(1, dont_inline);
	/* 1 + 2 * 15 calls of the one helper */
	ASSERT_EQ(31, spv_count(w, n, SpvOpFunctionCall, NULL, 0));
	for (uint64_t v = 0; v <= 64; v += 4) {
		unsigned nc = 0;

		for (size_t i = 5; i < n; i += w[i] >> 16)
			if ((w[i] & 0xffff) == SpvOpConstant && (w[i] >> 16) == 5 &&
			    w[i + 1] == u64 && w[i + 3] == (uint32_t)v && w[i + 4] == 0)
				nc++;
		ASSERT_LE(nc, 1);
	}
	free(w);
	hm_spirv_module_free(m);
}

TEST(builder_errors_are_sticky)
{
	struct hm_spirv_module *m;
	uint32_t *w;
	size_t n;

	ASSERT_EQ(0, hm_spirv_module_new(&m));
	hm_spirv_inst(m, HM_SPV_NR_SECTIONS, SpvOpReturn, NULL, 0);
	ASSERT_EQ(-EINVAL, hm_spirv_error(m));
	ASSERT_EQ(0, hm_spirv_type_int(m, 32, false));
	ASSERT_EQ(-EINVAL, hm_spirv_module_finish(m, &w, &n));
	ASSERT_EQ(NULL, w);
	hm_spirv_module_free(m);
	hm_spirv_module_free(NULL);
	/* a compute entry point without push words, or with too many */
	for (uint32_t nr = 0; nr <= HM_SPIRV_MAX_PUSH_WORDS + 1; nr += HM_SPIRV_MAX_PUSH_WORDS + 1) {
		uint32_t push[HM_SPIRV_MAX_PUSH_WORDS + 1];

		ASSERT_EQ(0, hm_spirv_module_new(&m));
		ASSERT_EQ(0, hm_spirv_compute_main(m, nr, 64, push, NULL));
		ASSERT_EQ(-EINVAL, hm_spirv_error(m));
		hm_spirv_module_free(m);
	}
}

TEST_HARNESS_MAIN
