// SPDX-License-Identifier: GPL-2.0
/*
 * Conformance suite of libhmirror's watch API: the same tests against every
 * backend (FIXTURE_VARIANT kmod, uffd_async, uffd_sync, mprotect).  A
 * variant whose backend is not available here SKIPs with the probe's
 * reason (kmod natively; uffd_async on 6.1).  Where a backend documents a
 * limitation (hm_space_caps()), the test checks that the limitation is
 * what the library reports.
 */
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/wait.h>

#include <hmirror/watch.h>

#include "kselftest_harness.h"
#include "backend_test.h"

/* QEMU TCG on a loaded 2-core host: give each test room (they take
   milliseconds natively) */
#undef TEST_TIMEOUT_DEFAULT
#define TEST_TIMEOUT_DEFAULT 120

#define SPACE_BYTES (8ull << 20)
#define CHUNK_SHIFT 16
#define NR_CHUNKS (SPACE_BYTES >> CHUNK_SHIFT)
#define MAX_OUT 4096

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static int count_vmas(void)
{
	FILE *f = fopen("/proc/self/maps", "r");
	int n = 0, ch;

	if (!f)
		return -1;
	while ((ch = fgetc(f)) != EOF)
		n += ch == '\n';
	fclose(f);
	return n;
}

/* harvest until nothing more is recorded; returns the number of chunks */
static int harvest_all(struct hm_space *s, uint64_t *out, size_t cap)
{
	size_t total = 0;
	bool more = true;

	while (more) {
		size_t n = 0;
		int err = hm_space_harvest(s, out + total, cap - total, &n, &more);

		if (err)
			return err;
		total += n;
		if (total == cap && more)
			return -ENOSPC;
	}
	return (int)total;
}

FIXTURE(watch) {
	struct hm_space *s;
	volatile uint8_t *p;
	uint64_t out[MAX_OUT];
};

FIXTURE_VARIANT(watch) {
	enum hm_backend backend;
};

FIXTURE_VARIANT_ADD(watch, kmod) { .backend = HM_BACKEND_KMOD };
FIXTURE_VARIANT_ADD(watch, uffd_async) { .backend = HM_BACKEND_UFFD_ASYNC };
FIXTURE_VARIANT_ADD(watch, uffd_sync) { .backend = HM_BACKEND_UFFD_SYNC };
FIXTURE_VARIANT_ADD(watch, mprotect) { .backend = HM_BACKEND_MPROTECT };

FIXTURE_SETUP(watch)
{
	struct hm_space_params p = {
		.size = SPACE_BYTES, .chunk_shift = CHUNK_SHIFT, .backend = variant->backend,
	};
	const char *why = NULL;
	int err = hm_test_backend_probe(variant->backend, &why);
	if (err)
		SKIP(return, "%s unavailable: %s (%s)", hm_backend_name(variant->backend),
		     why, strerror(-err));
	ASSERT_EQ(0, hm_space_new(&p, &self->s));
	self->p = hm_space_addr(self->s);
	ASSERT_NE(NULL, self->p);
}

FIXTURE_TEARDOWN(watch)
{
	hm_space_free(self->s);
}

#define NEED_SPACE() do { if (!self->s) return; } while (0)
#define AT(c, off) (self->p[((uint64_t)(c) << CHUNK_SHIFT) + (off)])

TEST_F(watch, reports_backend)
{
	NEED_SPACE();
	EXPECT_EQ(variant->backend, hm_space_backend(self->s));
	EXPECT_NE(0, strlen(hm_space_backend_reason(self->s)));
	EXPECT_EQ(SPACE_BYTES, hm_space_size(self->s));
	EXPECT_EQ(CHUNK_SHIFT, hm_space_chunk_shift(self->s));
	EXPECT_EQ(NR_CHUNKS, hm_space_nr_chunks(self->s));
	/* a space's caps are those of its backend, or fewer (documented) */
	EXPECT_EQ(0, hm_space_caps(self->s) & ~hm_backend_caps(variant->backend));
	TH_LOG("%s: %s", hm_backend_name(hm_space_backend(self->s)),
	       hm_space_backend_reason(self->s));
}

TEST_F(watch, harvest_exact)
{
	static const uint64_t w1[] = { 0, 1, 7, 63, 64, 100, NR_CHUNKS - 1 };
	static const uint64_t w2[] = { 1, 100 };
	int n;

	NEED_SPACE();
	ASSERT_EQ(0, hm_space_arm(self->s, 0, NR_CHUNKS));
	n = harvest_all(self->s, self->out, MAX_OUT);
	ASSERT_EQ(0, n);
	/* never-faulted pages: the first touch after arming is seen */
	for (unsigned i = 0; i < sizeof(w1) / sizeof(w1[0]); i++)
		AT(w1[i], (i * 4096 + 5) & 0xffff) = (uint8_t)(i + 1);
	n = harvest_all(self->s, self->out, MAX_OUT);
	ASSERT_EQ((int)(sizeof(w1) / sizeof(w1[0])), n);
	for (int i = 0; i < n; i++)
		EXPECT_EQ(w1[i], self->out[i]);
	/* re-armed: nothing new */
	ASSERT_EQ(0, harvest_all(self->s, self->out, MAX_OUT));
	/* reads are not writes */
	for (uint64_t c = 0; c < NR_CHUNKS; c++)
		(void)AT(c, 0);
	ASSERT_EQ(0, harvest_all(self->s, self->out, MAX_OUT));
	/* second round through populated pages, several pages of a chunk */
	for (unsigned i = 0; i < 2; i++)
		for (unsigned pg = 0; pg < 16; pg++)
			AT(w2[i], pg * 4096) = 0xaa;
	n = harvest_all(self->s, self->out, MAX_OUT);
	ASSERT_EQ(2, n);
	EXPECT_EQ(1, self->out[0]);
	EXPECT_EQ(100, self->out[1]);
	/* the data is there */
	EXPECT_EQ(0xaa, AT(100, 15 * 4096));
	EXPECT_EQ(7, AT(NR_CHUNKS - 1, (6 * 4096 + 5) & 0xffff));
}

TEST_F(watch, unarmed_not_reported)
{
	int n;

	NEED_SPACE();
	for (uint64_t c = 0; c < NR_CHUNKS; c++)
		AT(c, 0) = 1;
	ASSERT_EQ(0, harvest_all(self->s, self->out, MAX_OUT));
	ASSERT_EQ(0, hm_space_arm(self->s, 10, 5));
	/* writes before the arm are forgotten with it */
	ASSERT_EQ(0, harvest_all(self->s, self->out, MAX_OUT));
	for (uint64_t c = 0; c < NR_CHUNKS; c++)
		AT(c, 8) = 2;
	n = harvest_all(self->s, self->out, MAX_OUT);
	ASSERT_EQ(5, n);
	for (int i = 0; i < n; i++)
		EXPECT_EQ(10 + i, self->out[i]);
}

/*
 * hm_space_harvest_take(): the written chunks, ascending, left unarmed
 * (odd, later writes unrecorded) until armed again; -EOPNOTSUPP where the
 * backend cannot (uffd-async).
 */
TEST_F(watch, harvest_take)
{
	static const uint64_t w[] = { 3, 64, 100 };
	uint64_t g;
	size_t n;
	bool more = true;

	NEED_SPACE();
	ASSERT_EQ(0, hm_space_arm(self->s, 0, NR_CHUNKS));
	for (unsigned i = 0; i < 3; i++)
		AT(w[i], 100) = 1;
	if (!(hm_space_caps(self->s) & HM_CAP_HARVEST_TAKE)) {
		EXPECT_EQ(-EOPNOTSUPP, hm_space_harvest_take(self->s, self->out, MAX_OUT, &n, &more));
		EXPECT_EQ(0, n);
		EXPECT_EQ(HM_BACKEND_UFFD_ASYNC, variant->backend);
		/* nothing was taken */
		ASSERT_EQ(3, harvest_all(self->s, self->out, MAX_OUT));
		return;
	}
	ASSERT_EQ(0, hm_space_harvest_take(self->s, self->out, MAX_OUT, &n, &more));
	ASSERT_EQ(3, n);
	EXPECT_FALSE(more);
	for (unsigned i = 0; i < 3; i++)
		EXPECT_EQ(w[i], self->out[i]);
	ASSERT_EQ(0, hm_space_generation(self->s, 64, &g));
	EXPECT_FALSE(HM_GEN_CLEAN(g));
	/* unarmed now: a second write is not recorded; the rest still are */
	AT(64, 200) = 2;
	AT(5, 0) = 2;
	ASSERT_EQ(0, hm_space_harvest_take(self->s, self->out, MAX_OUT, &n, &more));
	ASSERT_EQ(1, n);
	EXPECT_EQ(5, self->out[0]);
	/* armed again: clean, then recorded */
	ASSERT_EQ(0, hm_space_arm(self->s, 64, 1));
	ASSERT_EQ(0, hm_space_generation(self->s, 64, &g));
	EXPECT_TRUE(HM_GEN_CLEAN(g));
	AT(64, 300) = 3;
	ASSERT_EQ(1, harvest_all(self->s, self->out, MAX_OUT));
	EXPECT_EQ(64, self->out[0]);
	EXPECT_EQ(3, AT(64, 300));
	EXPECT_EQ(2, AT(64, 200));
}

TEST_F(watch, harvest_cap_and_more)
{
	uint64_t got[64];
	size_t total = 0, n;
	bool more = true;

	NEED_SPACE();
	ASSERT_EQ(0, hm_space_arm(self->s, 0, NR_CHUNKS));
	for (uint64_t c = 3; c < NR_CHUNKS; c += 11)
		AT(c, 100) = 9;
	while (more) {
		ASSERT_EQ(0, hm_space_harvest(self->s, got + total, 3, &n, &more));
		ASSERT_LE(n, 3);
		total += n;
		ASSERT_LE(total, 64);
		if (more)
			ASSERT_EQ(3, n);
	}
	ASSERT_EQ((NR_CHUNKS - 3 + 10) / 11, total);
	for (size_t i = 0; i < total; i++)
		EXPECT_EQ(3 + 11 * i, got[i]);
	/* cap 0 reports only whether something is recorded */
	AT(5, 0) = 1;
	ASSERT_EQ(0, hm_space_harvest(self->s, NULL, 0, &n, &more));
	EXPECT_EQ(0, n);
	EXPECT_TRUE(more);
	ASSERT_EQ(0, hm_space_harvest(self->s, got, 64, &n, &more));
	ASSERT_EQ(1, n);
	EXPECT_EQ(5, got[0]);
	EXPECT_FALSE(more);
}

TEST_F(watch, generation_rule3)
{
	uint64_t g0, g1, g2, g3, gu;
	uint64_t cs[3] = { 4, 5, 9 }, gs[3];
	uint64_t rg[NR_CHUNKS], one[NR_CHUNKS], all[NR_CHUNKS];

	NEED_SPACE();
	ASSERT_EQ(0, hm_space_generation(self->s, 4, &gu));
	EXPECT_FALSE(HM_GEN_CLEAN(gu));	/* never armed */
	ASSERT_EQ(0, hm_space_arm(self->s, 0, NR_CHUNKS));
	ASSERT_EQ(0, hm_space_generation(self->s, 4, &g0));
	EXPECT_TRUE(HM_GEN_CLEAN(g0));
	ASSERT_EQ(0, hm_space_generation(self->s, 4, &g1));
	EXPECT_EQ(g0, g1);		/* nothing written */
	AT(5, 0) = 1;			/* a neighbour */
	ASSERT_EQ(0, hm_space_generation(self->s, 4, &g1));
	EXPECT_EQ(g0, g1);
	AT(4, 4095) = 1;		/* written before any harvest */
	ASSERT_EQ(0, hm_space_generation(self->s, 4, &g1));
	EXPECT_NE(g0, g1);
	EXPECT_GT(g1, g0);
	if (!HM_GEN_CLEAN(g1)) {	/* kmod: re-arm to get a clean baseline */
		ASSERT_EQ(0, hm_space_arm(self->s, 4, 1));
		ASSERT_EQ(0, hm_space_generation(self->s, 4, &g1));
	}
	ASSERT_TRUE(HM_GEN_CLEAN(g1));
	/* a second write after the baseline is seen too */
	AT(4, 0) = 2;
	ASSERT_EQ(0, hm_space_generation(self->s, 4, &g2));
	EXPECT_NE(g1, g2);
	/* the record survives for the harvest */
	ASSERT_EQ(2, harvest_all(self->s, self->out, MAX_OUT));
	EXPECT_EQ(4, self->out[0]);
	EXPECT_EQ(5, self->out[1]);
	ASSERT_EQ(0, hm_space_generation(self->s, 4, &g3));
	EXPECT_TRUE(HM_GEN_CLEAN(g3));
	EXPECT_GE(g3, g2);
	ASSERT_EQ(0, hm_space_generations(self->s, cs, 3, gs));
	EXPECT_EQ(g3, gs[0]);
	AT(9, 0) = 1;
	ASSERT_EQ(0, hm_space_generations(self->s, cs, 3, gs));
	EXPECT_EQ(g3, gs[0]);
	ASSERT_EQ(0, hm_space_generation(self->s, 9, &g0));
	EXPECT_EQ(gs[2], g0);

	/* over a range: what the per-chunk call answers, in one pass; a write
	   moves exactly its chunk's, and stays recorded for the harvest */
	for (uint64_t c = 0; c < NR_CHUNKS; c++)
		all[c] = c;
	ASSERT_EQ(0, hm_space_generations(self->s, all, NR_CHUNKS, one));
	ASSERT_EQ(0, hm_space_generations_range(self->s, 0, NR_CHUNKS, 0, rg));
	for (uint64_t c = 0; c < NR_CHUNKS; c++)
		EXPECT_EQ(one[c], rg[c]);
	harvest_all(self->s, self->out, MAX_OUT);
	ASSERT_EQ(0, hm_space_generations_range(self->s, 0, NR_CHUNKS, 0, one));
	AT(6, 17) = 3;
	ASSERT_EQ(0, hm_space_generations_range(self->s, 3, 5, 0, rg));
	for (uint64_t c = 3; c < 8; c++) {
		if (c == 6) {
			EXPECT_NE(one[c], rg[c - 3]);
		} else {
			EXPECT_EQ(one[c], rg[c - 3]);
		}
	}
	ASSERT_EQ(1, harvest_all(self->s, self->out, MAX_OUT));
	EXPECT_EQ(6, self->out[0]);

	/* HM_GEN_DEFER, as rule 3 uses it: g0 noted deferred, a write
	   before it and one after it (the same page: no new fault on
	   uffd-async); the call without the flag must not answer g0
	   clean */
	ASSERT_EQ(0, hm_space_generations_range(self->s, 0, NR_CHUNKS, 0, one));
	AT(7, 1) = 1;
	ASSERT_EQ(0, hm_space_generations_range(self->s, 7, 1, HM_GEN_DEFER, &g0));
	/* HM_CAP_GEN_DEFER says whether that asked the kernel: with it the
	   write is not in g0 yet (what the last call answered), without it
	   the flag changes nothing and g0 has it */
	if (HM_GEN_CLEAN(one[7])) {
		if (hm_space_caps(self->s) & HM_CAP_GEN_DEFER) {
			EXPECT_EQ(one[7], g0);
		} else {
			EXPECT_NE(one[7], g0);
		}
	}
	AT(7, 2) = 1;
	ASSERT_EQ(0, hm_space_generations_range(self->s, 7, 1, 0, &g1));
	EXPECT_TRUE(g1 != g0 || !HM_GEN_CLEAN(g1));
	EXPECT_NE(one[7], g1);
	/* a write only after the deferred g0 */
	ASSERT_EQ(0, hm_space_arm(self->s, 8, 1));
	ASSERT_EQ(0, hm_space_generations_range(self->s, 8, 1, HM_GEN_DEFER, &g0));
	AT(8, 3) = 1;
	ASSERT_EQ(0, hm_space_generations_range(self->s, 8, 1, 0, &g1));
	EXPECT_TRUE(g1 != g0 || !HM_GEN_CLEAN(g1));
	harvest_all(self->s, self->out, MAX_OUT);

	/* HM_GEN_PEEK, as rule 3's check after the copy: it sees a write
	   since g0 (over a range that starts off a word of chunks, the write
	   in its second word), answers what recording it will, and takes
	   nothing: the harvest after it still reports the chunk */
	{
		uint64_t g[NR_CHUNKS], p[NR_CHUNKS], r[NR_CHUNKS];

		EXPECT_EQ(-EINVAL, hm_space_generations_range(self->s, 0, 1,
							      HM_GEN_DEFER | HM_GEN_PEEK, g));
		EXPECT_EQ(-EINVAL, hm_space_generations_range(self->s, 0, 1, 1u << 7, g));
		ASSERT_EQ(0, hm_space_arm(self->s, 0, NR_CHUNKS));
		harvest_all(self->s, self->out, MAX_OUT);
		ASSERT_EQ(0, hm_space_generations_range(self->s, 3, NR_CHUNKS - 3, 0, g));
		ASSERT_EQ(0, hm_space_generations_range(self->s, 3, NR_CHUNKS - 3, HM_GEN_PEEK, p));
		for (uint64_t c = 3; c < NR_CHUNKS; c++)
			EXPECT_EQ(g[c - 3], p[c - 3]);	/* nothing written: clean */
		AT(100, 5) = 7;
		ASSERT_EQ(0, hm_space_generations_range(self->s, 3, NR_CHUNKS - 3, HM_GEN_PEEK, p));
		ASSERT_EQ(0, hm_space_generations_range(self->s, 3, NR_CHUNKS - 3, HM_GEN_PEEK, r));
		for (uint64_t c = 3; c < NR_CHUNKS; c++) {
			if (c == 100) {
				EXPECT_NE(g[c - 3], p[c - 3]);
			} else {
				EXPECT_EQ(g[c - 3], p[c - 3]);
			}
			EXPECT_EQ(p[c - 3], r[c - 3]);	/* a peek changes nothing */
		}
		ASSERT_EQ(1, harvest_all(self->s, self->out, MAX_OUT));
		EXPECT_EQ(100, self->out[0]);
		ASSERT_EQ(0, hm_space_generation(self->s, 100, &g1));
		/* what the peek said recording makes it (uffd-async; elsewhere
		   the flag changes nothing: kmod answers odd, written since
		   armed, and the harvest re-arms) */
		if (variant->backend == HM_BACKEND_UFFD_ASYNC)
			EXPECT_EQ(p[97], g1);
		EXPECT_EQ(0, harvest_all(self->s, self->out, MAX_OUT));
	}
}

/*
 * HM_GEN_PEEK over a range whose armed chunks lie apart, unarmed ones
 * between (a caller's span of far-apart candidates): the
 * armed chunks written are seen at either end and between, the unarmed
 * ones answer unarmed whether written or not and stay unarmed, and the
 * peek takes nothing: the harvest after it reports exactly the armed
 * chunks written.
 */
TEST_F(watch, peek_across_unarmed_chunks)
{
	static const uint64_t armed[] = { 10, 30, 31, 50 };
	uint64_t g[41], p[41], r[41], gu;

	NEED_SPACE();
	for (size_t i = 0; i < sizeof(armed) / sizeof(armed[0]); i++)
		ASSERT_EQ(0, hm_space_arm(self->s, armed[i], 1));
	harvest_all(self->s, self->out, MAX_OUT);
	ASSERT_EQ(0, hm_space_generations_range(self->s, 10, 41, 0, g));
	AT(10, 9) = 1;          /* armed, the range's first */
	AT(20, 0) = 2;          /* unarmed */
	AT(31, 100) = 3;        /* armed, between */
	AT(50, 4095) = 4;       /* armed, the range's last */
	ASSERT_EQ(0, hm_space_generations_range(self->s, 10, 41, HM_GEN_PEEK, p));
	ASSERT_EQ(0, hm_space_generations_range(self->s, 10, 41, HM_GEN_PEEK, r));
	for (uint64_t c = 10; c <= 50; c++) {
		bool is_armed = c == 10 || c == 30 || c == 31 || c == 50;

		EXPECT_EQ(p[c - 10], r[c - 10]) TH_LOG("chunk %lu", (unsigned long)c);
		if (!is_armed) {
			EXPECT_FALSE(HM_GEN_CLEAN(p[c - 10])) TH_LOG("chunk %lu", (unsigned long)c);
		} else if (c == 30) {
			EXPECT_EQ(g[c - 10], p[c - 10]);
		} else {
			EXPECT_NE(g[c - 10], p[c - 10]) TH_LOG("chunk %lu", (unsigned long)c);
		}
	}
	ASSERT_EQ(3, harvest_all(self->s, self->out, MAX_OUT));
	EXPECT_EQ(10, self->out[0]);
	EXPECT_EQ(31, self->out[1]);
	EXPECT_EQ(50, self->out[2]);
	ASSERT_EQ(0, hm_space_generation(self->s, 20, &gu));
	EXPECT_FALSE(HM_GEN_CLEAN(gu));         /* still unarmed */
	AT(20, 8) = 5;
	EXPECT_EQ(0, harvest_all(self->s, self->out, MAX_OUT));
}

/*
 * hm_space_generations_spans(): many spans in one call answer what
 * hm_space_generations_range() answers for each, whichever way the library
 * scans them: 41 close spans (uffd-async with HMIRROR_GEN_COVER=1, set
 * here: one scan over their cover) and 4 far apart (a call each, as
 * without the knob), with spans that overlap, one whose ends are
 * unarmed, one wholly unarmed at the cover's start and one of a single
 * chunk.  A peek sees the armed chunks written in every span and takes
 * nothing; without the flag the writes are taken, and the next harvest
 * reports each once.  A bad span changes nothing.
 */
#define NR_SPANS 41

static void span_list(struct hm_gen_span *sp, uint64_t (*g)[8])
{
	for (int i = 0; i < 39; i++)	/* [3i, 3i+2): chunks 0..115 */
		sp[i] = (struct hm_gen_span){ 3 * i, 2, g[i] };
	sp[39] = (struct hm_gen_span){ 112, 8, g[39] };	/* 112..119, 116..119 unarmed */
	sp[40] = (struct hm_gen_span){ 1, 1, g[40] };	/* unarmed, inside span 0 */
}

/* spans 1, 20, 37 and 39 of span_list(), at their places in g */
static void span_few(struct hm_gen_span *sp, uint64_t (*g)[8])
{
	static const int pick[] = { 1, 20, 37, 39 };
	struct hm_gen_span all[NR_SPANS];

	span_list(all, g);
	for (int i = 0; i < 4; i++)
		sp[i] = all[pick[i]];
}

static bool span_hit(uint64_t c)
{
	return c == 3 || c == 60 || c == 112;
}

/* spans sp[0..nr) answered at their places in g: unarmed chunks not
   clean, the written armed ones moved from g0, the rest as in g0 */
static void span_expect(struct __test_metadata *_metadata, const struct hm_gen_span *sp,
			int nr, uint64_t (*g)[8], uint64_t (*g0)[8])
{
	for (int i = 0; i < nr; i++) {
		int at = (int)(sp[i].gens - g[0]) / 8;

		for (uint64_t u = 0; u < sp[i].count; u++) {
			uint64_t c = sp[i].first + u;

			if (c < 2 || c >= 116) {
				EXPECT_FALSE(HM_GEN_CLEAN(sp[i].gens[u])) TH_LOG("chunk %lu",
										 (unsigned long)c);
			} else if (span_hit(c)) {
				EXPECT_NE(g0[at][u], sp[i].gens[u]) TH_LOG("chunk %lu",
									   (unsigned long)c);
			} else {
				EXPECT_EQ(g0[at][u], sp[i].gens[u]) TH_LOG("chunk %lu",
									   (unsigned long)c);
			}
		}
	}
}

static void spans_match_each_range(struct __test_metadata *_metadata,
				   FIXTURE_DATA(watch) *self)
{
	static const uint64_t written[] = { 1, 3, 60, 112, 117 };	/* 1, 117: unarmed */
	struct hm_gen_span sp[NR_SPANS], bad;
	uint64_t g0[NR_SPANS][8], g[NR_SPANS][8], want[8], b[8];

	ASSERT_EQ(0, hm_space_arm(self->s, 2, 114));	/* 2..115 */
	harvest_all(self->s, self->out, MAX_OUT);
	span_list(sp, g0);
	ASSERT_EQ(0, hm_space_generations_spans(self->s, sp, NR_SPANS, 0));
	for (size_t w = 0; w < sizeof(written) / sizeof(written[0]); w++)
		AT(written[w], 100 + w) = (uint8_t)(w + 1);

	/* a peek of all, of a few, of all again: each span as its own range
	   peeks, the written armed chunks moved from g0, the rest not */
	for (int round = 0; round < 3; round++) {
		int nr = round == 1 ? 4 : NR_SPANS;

		memset(g, 0xa5, sizeof(g));
		if (round == 1)
			span_few(sp, g);
		else
			span_list(sp, g);
		ASSERT_EQ(0, hm_space_generations_spans(self->s, sp, nr, HM_GEN_PEEK));
		for (int i = 0; i < nr; i++) {
			ASSERT_EQ(0, hm_space_generations_range(self->s, sp[i].first, sp[i].count,
								HM_GEN_PEEK, want));
			for (uint64_t u = 0; u < sp[i].count; u++) {
				EXPECT_EQ(want[u], sp[i].gens[u]) TH_LOG("span %d chunk %lu", i,
									 (unsigned long)(sp[i].first + u));
			}
		}
		span_expect(_metadata, sp, nr, g, g0);
	}

	/* a span past the space, or without gens: refused, nothing taken */
	bad = (struct hm_gen_span){ NR_CHUNKS - 1, 2, b };
	span_list(sp, g);
	sp[20] = bad;
	EXPECT_EQ(-ERANGE, hm_space_generations_spans(self->s, sp, NR_SPANS, 0));
	span_list(sp, g);
	sp[33].gens = NULL;
	EXPECT_EQ(-EINVAL, hm_space_generations_spans(self->s, sp, NR_SPANS, 0));
	EXPECT_EQ(-EINVAL, hm_space_generations_spans(self->s, sp, NR_SPANS,
						      HM_GEN_PEEK | HM_GEN_DEFER));

	/* taken, a few spans then all: the answers are what the peek said,
	   and the harvest reports the armed chunks written, each once */
	for (int round = 0; round < 2; round++) {
		int nr = round ? NR_SPANS : 4;

		memset(g, 0xa5, sizeof(g));
		if (round)
			span_list(sp, g);
		else
			span_few(sp, g);
		ASSERT_EQ(0, hm_space_generations_spans(self->s, sp, nr, 0));
		span_expect(_metadata, sp, nr, g, g0);
	}
	ASSERT_EQ(3, harvest_all(self->s, self->out, MAX_OUT));
	EXPECT_EQ(3, self->out[0]);
	EXPECT_EQ(60, self->out[1]);
	EXPECT_EQ(112, self->out[2]);
	EXPECT_EQ(0, harvest_all(self->s, self->out, MAX_OUT));
	for (size_t w = 0; w < sizeof(written) / sizeof(written[0]); w++)
		EXPECT_EQ(w + 1, AT(written[w], 100 + w));
}

TEST_F(watch, generations_spans_match_each_range)
{
	NEED_SPACE();
	setenv("HMIRROR_GEN_COVER", "1", 1);	/* this test's process only */
	spans_match_each_range(_metadata, self);
}

/*
 * The same with HMIRROR_SPAN_THREADS=1 on two scan threads (set here):
 * uffd-async scans the 41 spans on both, each keeping the runs it found,
 * and the calling thread takes them in order; the peek's bits and the
 * taken writes are each span's own, and the harvest after finds every
 * write a thread's scan took.  The 4 spans of the other rounds are a call
 * each.
 */
TEST_F(watch, generations_spans_on_scan_threads)
{
	NEED_SPACE();
	setenv("HMIRROR_SPAN_THREADS", "1", 1);	/* this test's process only */
	setenv("HMIRROR_SCAN_THREADS", "2", 1);
	spans_match_each_range(_metadata, self);
}

/* ---- concurrent writers ---------------------------------------------------- */

#define NR_WRITERS 2
#define PER_WRITER 8
#define ROUNDS 150
#define MIN_ROUNDS 2
#define RACE_SECONDS 2	/* fewer rounds where the machine is slow (TCG) */

struct race {
	struct hm_space *s;
	volatile uint8_t *p;
	atomic_int reported[NR_CHUNKS];
	atomic_int done;
	atomic_int rounds;
	atomic_int lost;
	atomic_int stray;
};

struct writer_arg {
	struct race *r;
	int id;
};

static uint64_t writer_chunk(int id, int i)
{
	return (uint64_t)(id * 37 + i * 13 + 3) % NR_CHUNKS;
}

static void *writer(void *arg)
{
	struct writer_arg *w = arg;
	struct race *r = w->r;
	uint64_t start = now_ns();
	int round;

	/* at least MIN_ROUNDS however slow the machine: the test asserts the
	   work it did, not how fast it went */
	for (round = 0; round < ROUNDS && !atomic_load(&r->lost) &&
	     (round < MIN_ROUNDS || now_ns() - start < RACE_SECONDS * 1000000000ull);
	     round++) {
		for (int i = 0; i < PER_WRITER; i++) {
			uint64_t c = writer_chunk(w->id, i);

			atomic_store(&r->reported[c], 0);
			r->p[(c << CHUNK_SHIFT) + (uint64_t)(round % 16) * 4096] = (uint8_t)round;
		}
		for (int i = 0; i < PER_WRITER; i++) {
			uint64_t c = writer_chunk(w->id, i);
			uint64_t t0 = now_ns();

			while (!atomic_load(&r->reported[c])) {
				if (now_ns() - t0 > 10000000000ull) {
					atomic_store(&r->lost, 1);
					break;
				}
				sched_yield();
			}
		}
	}
	atomic_fetch_add(&r->rounds, round);
	atomic_fetch_add(&r->done, 1);
	return NULL;
}

TEST_F(watch, concurrent_writers_never_lost)
{
	struct race *r = calloc(1, sizeof(*r));
	pthread_t th[NR_WRITERS];
	struct writer_arg wa[NR_WRITERS];
	bool mine[NR_CHUNKS] = { false };
	uint64_t out[64];

	NEED_SPACE();
	ASSERT_NE(NULL, r);
	r->s = self->s;
	r->p = self->p;
	for (int w = 0; w < NR_WRITERS; w++)
		for (int i = 0; i < PER_WRITER; i++)
			mine[writer_chunk(w, i)] = true;
	ASSERT_EQ(0, hm_space_arm(self->s, 0, NR_CHUNKS));
	for (int w = 0; w < NR_WRITERS; w++) {
		wa[w].r = r;
		wa[w].id = w;
		ASSERT_EQ(0, pthread_create(&th[w], NULL, writer, &wa[w]));
	}
	while (atomic_load(&r->done) < NR_WRITERS) {
		size_t n;
		bool more;

		ASSERT_EQ(0, hm_space_harvest(self->s, out, 64, &n, &more));
		for (size_t i = 0; i < n; i++) {
			if (out[i] >= NR_CHUNKS || !mine[out[i]])
				atomic_store(&r->stray, 1);
			else
				atomic_store(&r->reported[out[i]], 1);
			if (i)
				EXPECT_LT(out[i - 1], out[i]);
		}
		if (!n)
			sched_yield();
	}
	for (int w = 0; w < NR_WRITERS; w++)
		pthread_join(th[w], NULL);
	EXPECT_EQ(0, atomic_load(&r->lost));
	EXPECT_EQ(0, atomic_load(&r->stray));
	EXPECT_LE(MIN_ROUNDS * NR_WRITERS, atomic_load(&r->rounds));
	TH_LOG("%d rounds of %d scattered stores each, every one reported",
	       atomic_load(&r->rounds), PER_WRITER);
	free(r);
}

/* ---- aliases, device view ------------------------------------------------- */

TEST_F(watch, alias_writes_seen)
{
	volatile uint8_t *a;
	void *va;
	int n;

	NEED_SPACE();
	ASSERT_EQ(0, hm_space_arm(self->s, 0, NR_CHUNKS));
	ASSERT_EQ(0, hm_space_map_alias(self->s, NULL, &va));
	a = va;
	ASSERT_NE(self->p, a);
	a[(20ull << CHUNK_SHIFT) + 7] = 0x5a;	/* never faulted in either mapping */
	EXPECT_EQ(0x5a, AT(20, 7));		/* same pages */
	n = harvest_all(self->s, self->out, MAX_OUT);
	ASSERT_EQ(1, n);
	EXPECT_EQ(20, self->out[0]);
	/* re-armed in both mappings */
	a[(20ull << CHUNK_SHIFT) + 8] = 1;
	AT(21, 0) = 1;
	n = harvest_all(self->s, self->out, MAX_OUT);
	ASSERT_EQ(2, n);
	EXPECT_EQ(20, self->out[0]);
	EXPECT_EQ(21, self->out[1]);
	/* a write through an alias that is then unmapped is not lost */
	a[(23ull << CHUNK_SHIFT) + 1] = 1;
	ASSERT_EQ(0, hm_space_unmap_alias(self->s, va));
	EXPECT_EQ(-EINVAL, hm_space_unmap_alias(self->s, va));
	AT(22, 0) = 1;
	ASSERT_EQ(2, harvest_all(self->s, self->out, MAX_OUT));
	EXPECT_EQ(22, self->out[0]);
	EXPECT_EQ(23, self->out[1]);
}

TEST_F(watch, device_view_unwatched)
{
	volatile uint8_t *d;
	void *vd, *vd2;

	NEED_SPACE();
	ASSERT_EQ(0, hm_space_arm(self->s, 0, NR_CHUNKS));
	ASSERT_EQ(0, hm_space_device_view(self->s, &vd));
	ASSERT_EQ(0, hm_space_device_view(self->s, &vd2));
	EXPECT_EQ(vd, vd2);
	d = vd;
	for (uint64_t c = 0; c < NR_CHUNKS; c += 3)
		d[(c << CHUNK_SHIFT) + 1] = (uint8_t)c;
	EXPECT_EQ(0, harvest_all(self->s, self->out, MAX_OUT));
	EXPECT_EQ(30, AT(30, 1));
	AT(31, 1) = 0x77;
	EXPECT_EQ(0x77, d[(31ull << CHUNK_SHIFT) + 1]);
	ASSERT_EQ(1, harvest_all(self->s, self->out, MAX_OUT));
	EXPECT_EQ(31, self->out[0]);
}

/* ---- kernel writes ------------------------------------------------------- */

TEST_F(watch, kernel_writes)
{
	char buf[64];
	int pfd[2];
	ssize_t r1, r2;

	NEED_SPACE();
	memset(buf, 0x42, sizeof(buf));
	AT(41, 0) = 1;				/* populated page */
	ASSERT_EQ(0, hm_space_arm(self->s, 0, NR_CHUNKS));
	ASSERT_EQ(0, pipe(pfd));
	ASSERT_EQ(sizeof(buf), write(pfd[1], buf, sizeof(buf)));
	ASSERT_EQ(sizeof(buf), write(pfd[1], buf, sizeof(buf)));
	r1 = read(pfd[0], (void *)&AT(40, 100), sizeof(buf));	/* never faulted */
	int e1 = errno;
	r2 = read(pfd[0], (void *)&AT(41, 100), sizeof(buf));	/* populated */
	int e2 = errno;

	close(pfd[0]);
	close(pfd[1]);
	if (hm_space_caps(self->s) & HM_CAP_KERNEL_WRITES) {
		ASSERT_EQ(sizeof(buf), r1);
		ASSERT_EQ(sizeof(buf), r2);
		EXPECT_EQ(0x42, AT(40, 100));
		EXPECT_EQ(0x42, AT(41, 163));
		ASSERT_EQ(2, harvest_all(self->s, self->out, MAX_OUT));
		EXPECT_EQ(40, self->out[0]);
		EXPECT_EQ(41, self->out[1]);
	} else {
		/* the documented limitation, reported by the caps */
		EXPECT_EQ(-1, r1);
		EXPECT_EQ(EFAULT, e1);
		EXPECT_EQ(-1, r2);
		EXPECT_EQ(EFAULT, e2);
		EXPECT_EQ(0, harvest_all(self->s, self->out, MAX_OUT));
		TH_LOG("%s: kernel writes into armed memory fail with EFAULT (no HM_CAP_KERNEL_WRITES)",
		       hm_backend_name(variant->backend));
	}
}

/* uffd-async keeps records across reclaim only with its mappings locked:
   check that what the caps claim is what the kernel has */
static long vmlck_kb(void)
{
	FILE *f = fopen("/proc/self/status", "r");
	char line[256];
	long kb = -1;

	if (!f)
		return -1;
	while (fgets(line, sizeof(line), f))
		if (sscanf(line, "VmLck: %ld kB", &kb) == 1)
			break;
	fclose(f);
	return kb;
}

TEST_F(watch, reclaim_safety_reported)
{
	long before, after;

	NEED_SPACE();
	if (variant->backend != HM_BACKEND_UFFD_ASYNC) {
		EXPECT_TRUE(hm_space_caps(self->s) & HM_CAP_RECLAIM_SAFE);
		return;
	}
	before = vmlck_kb();
	{
		void *va;

		ASSERT_EQ(0, hm_space_map_alias(self->s, NULL, &va));
		after = vmlck_kb();
		if (hm_space_caps(self->s) & HM_CAP_RECLAIM_SAFE) {
			/* the alias is locked too (MLOCK_ONFAULT counts the VMA) */
			EXPECT_LE(before + (long)(SPACE_BYTES >> 10), after);
		} else {
			EXPECT_NE(NULL, strstr(hm_space_backend_reason(self->s), "mlock refused"));
		}
		ASSERT_EQ(0, hm_space_unmap_alias(self->s, va));
	}
}

/* ---- poll ------------------------------------------------------------------ */

TEST_F(watch, poll_fd)
{
	struct pollfd pfd;
	size_t n;
	bool more;
	int fd;

	NEED_SPACE();
	fd = hm_space_poll_fd(self->s);
	if (!(hm_space_caps(self->s) & HM_CAP_POLL)) {
		EXPECT_EQ(-EOPNOTSUPP, fd);
		return;
	}
	ASSERT_LE(0, fd);
	ASSERT_EQ(0, hm_space_arm(self->s, 0, NR_CHUNKS));
	pfd.fd = fd;
	pfd.events = POLLIN;
	EXPECT_EQ(0, poll(&pfd, 1, 0));
	AT(3, 3) = 3;
	EXPECT_EQ(1, poll(&pfd, 1, 2000));
	ASSERT_EQ(0, hm_space_harvest(self->s, self->out, MAX_OUT, &n, &more));
	EXPECT_EQ(1, n);
	EXPECT_EQ(0, poll(&pfd, 1, 0));
}

/* ---- fork ------------------------------------------------------------------ */

TEST_F(watch, fork_child_has_no_mapping)
{
	pid_t pid;
	int st;

	NEED_SPACE();
	ASSERT_EQ(0, hm_space_arm(self->s, 0, NR_CHUNKS));
	AT(1, 0) = 1;
	pid = fork();
	ASSERT_LE(0, pid);
	if (pid == 0) {
		/* the mapping is not inherited (MADV_DONTFORK): this faults */
		AT(2, 0) = 1;
		_exit(0);
	}
	ASSERT_EQ(pid, waitpid(pid, &st, 0));
	EXPECT_TRUE(WIFSIGNALED(st));
	if (WIFSIGNALED(st)) {
		EXPECT_EQ(SIGSEGV, WTERMSIG(st));
	}
	/* the parent's watch is intact across the fork */
	AT(3, 0) = 1;
	ASSERT_EQ(2, harvest_all(self->s, self->out, MAX_OUT));
	EXPECT_EQ(1, self->out[0]);
	EXPECT_EQ(3, self->out[1]);
	AT(4, 0) = 1;
	ASSERT_EQ(1, harvest_all(self->s, self->out, MAX_OUT));
	EXPECT_EQ(4, self->out[0]);
}

/* ---- handoff to a second process ---------------------------------------- */

static int child_importer(int sock)
{
	struct hm_space_handoff h;
	struct hm_space *s;
	uint64_t out[64];
	char go = 0;
	int n;

	if (hm_handoff_recv(sock, &h))
		return 10;
	n = hm_space_import(&h, &s);
	if (n) {
		fprintf(stderr, "# import: %s\n", strerror(-n));
		return 11;
	}
	hm_handoff_close(&h);
	if (hm_space_arm(s, 0, NR_CHUNKS))
		return 12;
	if (write(sock, "a", 1) != 1)		/* armed */
		return 13;
	if (read(sock, &go, 1) != 1)		/* parent wrote */
		return 14;
	n = harvest_all(s, out, 64);
	if (n != 2 || out[0] != 6 || out[1] != 60)
		return 15;
	/* the importer's CPU mapping shows the same bytes, and is unwatched */
	if (((volatile uint8_t *)hm_space_addr(s))[(60ull << CHUNK_SHIFT) + 9] != 0x3c)
		return 16;
	((volatile uint8_t *)hm_space_addr(s))[(61ull << CHUNK_SHIFT)] = 1;
	if (harvest_all(s, out, 64) != 0)
		return 17;
	if (write(sock, "h", 1) != 1)
		return 18;
	if (read(sock, &go, 1) != 1)		/* parent wrote again */
		return 19;
	n = harvest_all(s, out, 64);
	if (n != 1 || out[0] != 7)
		return 20;
	hm_space_free(s);
	return 0;
}

/* one importer's run of child_importer(), the parent's side */
static int handoff_round(struct __test_metadata *_metadata, FIXTURE_DATA(watch) *self,
			 struct hm_space_handoff *h)
{
	int sv[2], st;
	char c;
	pid_t pid;
	size_t n;
	bool more;

	if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv))
		return -errno;
	pid = fork();
	if (pid < 0)
		return -errno;
	if (pid == 0) {
		close(sv[0]);
		_exit(child_importer(sv[1]));
	}
	close(sv[1]);
	EXPECT_EQ(0, hm_handoff_send(sv[0], h));
	hm_handoff_close(h);
	/* the exporter hands the watch state over */
	EXPECT_EQ(-EBUSY, hm_space_harvest(self->s, self->out, MAX_OUT, &n, &more));
	EXPECT_EQ(-EBUSY, hm_space_arm(self->s, 0, 1));
	if (read(sv[0], &c, 1) == 1) {
		AT(6, 0) += 1;
		AT(60, 9) = 0x3c;
		EXPECT_EQ(1, write(sv[0], "w", 1));
		if (read(sv[0], &c, 1) == 1) {
			AT(7, 0) += 1;
			EXPECT_EQ(1, write(sv[0], "w", 1));
		}
	}
	close(sv[0]);
	if (waitpid(pid, &st, 0) != pid || !WIFEXITED(st))
		return -ECHILD;
	return WEXITSTATUS(st);	/* child_importer's step, 0 when it passed */
}

/*
 * The watch handed to a second process, which arms and harvests exactly
 * what the exporter's CPU wrote; once that importer is gone (a daemon
 * that died), a second export hands the same watch to a new one, which
 * sees the writes made after.
 */
TEST_F(watch, handoff_second_process)
{
	struct hm_space_handoff h;
	int err;

	NEED_SPACE();
	err = hm_space_export(self->s, &h);
	if (!(hm_space_caps(self->s) & HM_CAP_HANDOFF)) {
		EXPECT_EQ(-EOPNOTSUPP, err);
		return;
	}
	ASSERT_EQ(0, err);
	ASSERT_EQ(0, handoff_round(_metadata, self, &h));
	/* the first importer is gone: the same watch, to a second one */
	ASSERT_EQ(0, hm_space_export(self->s, &h));
	ASSERT_EQ(0, handoff_round(_metadata, self, &h));
}

TEST_F(watch, handoff_refused_with_records)
{
	struct hm_space_handoff h;

	NEED_SPACE();
	if (!(hm_space_caps(self->s) & HM_CAP_HANDOFF))
		return;
	ASSERT_EQ(0, hm_space_arm(self->s, 0, NR_CHUNKS));
	AT(0, 0) = 1;
	/* kmod keeps records in the module and may hand them over */
	if (variant->backend != HM_BACKEND_KMOD) {
		uint64_t g;

		ASSERT_EQ(0, hm_space_generation(self->s, 0, &g));	/* recorded now */
		EXPECT_EQ(-EBUSY, hm_space_export(self->s, &h));
		ASSERT_EQ(1, harvest_all(self->s, self->out, MAX_OUT));
	}
	ASSERT_EQ(0, hm_space_export(self->s, &h));
	hm_handoff_close(&h);
	EXPECT_EQ(-EBUSY, hm_space_map_alias(self->s, NULL, (void **)&h));
}

/* ---- bad arguments --------------------------------------------------------- */

TEST_F(watch, bad_arguments)
{
	struct hm_space_params p = { .size = SPACE_BYTES, .backend = variant->backend };
	struct hm_space_handoff h;
	struct hm_space *s2 = (void *)1;
	uint64_t g, chunk = NR_CHUNKS;
	size_t n;
	bool more;
	void *va;

	NEED_SPACE();
	EXPECT_EQ(-EINVAL, hm_space_new(NULL, &s2));
	EXPECT_EQ(NULL, s2);
	EXPECT_EQ(-EINVAL, hm_space_new(&p, NULL));
	p.size = 0;
	EXPECT_EQ(-EINVAL, hm_space_new(&p, &s2));
	p.size = (1 << 16) + 4096;
	EXPECT_EQ(-EINVAL, hm_space_new(&p, &s2));
	p.size = SPACE_BYTES;
	p.chunk_shift = 11;
	EXPECT_EQ(-EINVAL, hm_space_new(&p, &s2));
	p.chunk_shift = 31;
	EXPECT_EQ(-EINVAL, hm_space_new(&p, &s2));
	p.chunk_shift = 0;
	p.flags = 1u << 31;
	EXPECT_EQ(-EINVAL, hm_space_new(&p, &s2));
	p.flags = 0;
	p.backend = (enum hm_backend)99;
	EXPECT_EQ(-EINVAL, hm_space_new(&p, &s2));
	p.backend = variant->backend;
	p.size = HM_SPACE_MAX_BYTES * 2;
	EXPECT_EQ(-E2BIG, hm_space_new(&p, &s2));
	p.size = SPACE_BYTES;
	p.addr = (void *)self->p;		/* taken */
	EXPECT_EQ(-EEXIST, hm_space_new(&p, &s2));
	p.addr = (void *)((uintptr_t)self->p + 1);
	EXPECT_EQ(-EINVAL, hm_space_new(&p, &s2));

	EXPECT_EQ(-EINVAL, hm_space_arm(self->s, 0, 0));
	EXPECT_EQ(-ERANGE, hm_space_arm(self->s, NR_CHUNKS, 1));
	EXPECT_EQ(-ERANGE, hm_space_arm(self->s, 1, NR_CHUNKS));
	EXPECT_EQ(-ERANGE, hm_space_arm(self->s, 2, UINT64_MAX));
	EXPECT_EQ(-EINVAL, hm_space_arm(NULL, 0, 1));
	EXPECT_EQ(-EINVAL, hm_space_harvest(self->s, self->out, 4, NULL, &more));
	EXPECT_EQ(-EINVAL, hm_space_harvest(self->s, NULL, 4, &n, &more));
	EXPECT_EQ(-ERANGE, hm_space_generation(self->s, NR_CHUNKS, &g));
	EXPECT_EQ(-ERANGE, hm_space_generations(self->s, &chunk, 1, &g));
	EXPECT_EQ(-ERANGE, hm_space_generations_range(self->s, NR_CHUNKS, 1, 0, &g));
	EXPECT_EQ(-ERANGE, hm_space_generations_range(self->s, 1, UINT64_MAX, 0, &g));
	EXPECT_EQ(-EINVAL, hm_space_generations_range(self->s, 0, 0, 0, &g));
	EXPECT_EQ(-EINVAL, hm_space_generations_range(self->s, 0, 1, 0, NULL));
	EXPECT_EQ(-EINVAL, hm_space_generations_range(self->s, 0, 1, 1u << 31, &g));
	EXPECT_EQ(-EINVAL, hm_space_generation(self->s, 0, NULL));
	EXPECT_EQ(-EINVAL, hm_space_unmap_alias(self->s, (void *)self->p));
	EXPECT_EQ(-EINVAL, hm_space_map_alias(self->s, NULL, NULL));
	EXPECT_EQ(-EINVAL, hm_space_device_view(self->s, NULL));
	EXPECT_EQ(-EINVAL, hm_space_export(self->s, NULL));

	memset(&h, 0, sizeof(h));
	h.blob_len = 64;
	s2 = (void *)1;
	EXPECT_EQ(-EINVAL, hm_space_import(&h, &s2));	/* no magic */
	EXPECT_EQ(NULL, s2);
	EXPECT_EQ(-EINVAL, hm_space_import(NULL, &s2));
	EXPECT_EQ(-EINVAL, hm_handoff_send(-1, NULL));
	EXPECT_EQ(-EINVAL, hm_backend_from_name("nope", &p.backend));
	ASSERT_EQ(0, hm_backend_from_name(hm_backend_name(variant->backend), &p.backend));
	EXPECT_EQ(variant->backend, p.backend);
	EXPECT_EQ(-EINVAL, hm_backend_probe(HM_BACKEND_AUTO, NULL));
	hm_space_free(NULL);
	(void)va;
}

/* ---- resource exhaustion ------------------------------------------------- */

TEST_F(watch, alias_limit)
{
	void *va[HM_SPACE_MAX_MAPS];
	void *extra;

	NEED_SPACE();
	for (int i = 0; i < HM_SPACE_MAX_MAPS - 1; i++)
		ASSERT_EQ(0, hm_space_map_alias(self->s, NULL, &va[i]));
	EXPECT_EQ(-ENOSPC, hm_space_map_alias(self->s, NULL, &extra));
	ASSERT_EQ(0, hm_space_unmap_alias(self->s, va[0]));
	ASSERT_EQ(0, hm_space_map_alias(self->s, NULL, &va[0]));
}

/* many scattered trips: no VMA growth where the backend says so */
TEST_F(watch, scattered_trips_vmas)
{
	int before, after;

	NEED_SPACE();
	ASSERT_EQ(0, hm_space_arm(self->s, 0, NR_CHUNKS));
	before = count_vmas();
	for (uint64_t c = 0; c < NR_CHUNKS; c += 2)
		AT(c, 0) = 1;
	after = count_vmas();
	if (hm_space_caps(self->s) & HM_CAP_NO_VMA_SPLIT) {
		EXPECT_EQ(before, after);
	} else {
		EXPECT_GT(after, before + (int)NR_CHUNKS / 4);	/* the documented cost */
	}
	ASSERT_EQ((int)NR_CHUNKS / 2, harvest_all(self->s, self->out, MAX_OUT));
	TH_LOG("VMAs %d -> %d after %llu scattered trips", before, after,
	       (unsigned long long)NR_CHUNKS / 2);
}

/* fill the process's VMA budget (vm.max_map_count) up to `room' */
static void *eat_vmas(int room, size_t *ret_len)
{
	FILE *f = fopen("/proc/sys/vm/max_map_count", "r");
	int max = 65530, have = count_vmas(), want;
	size_t len;
	uint8_t *p;

	if (f) {
		if (fscanf(f, "%d", &max) != 1)
			max = 65530;
		fclose(f);
	}
	want = max - have - room;
	if (want < 2)
		return NULL;
	len = (size_t)want * 4096;
	p = mmap(NULL, len, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	if (p == MAP_FAILED)
		return NULL;
	for (int i = 1; i < want; i += 2)
		if (mprotect(p + (size_t)i * 4096, 4096, PROT_NONE) < 0)
			break;
	*ret_len = len;
	return p;
}

TEST_F(watch, vma_limit_clear_error)
{
	struct hm_space_stats st;
	size_t len = 0;
	void *eaten;
	int err, n;

	NEED_SPACE();
	eaten = eat_vmas(20, &len);
	ASSERT_NE(NULL, eaten);
	/* arming every other chunk needs a VMA each for mprotect */
	err = 0;
	for (uint64_t c = 0; c < NR_CHUNKS && !err; c += 2)
		err = hm_space_arm(self->s, c, 1);
	if (hm_space_caps(self->s) & HM_CAP_NO_VMA_SPLIT) {
		EXPECT_EQ(0, err);
	} else {
		EXPECT_EQ(-ENOMEM, err);	/* a clear error, no crash */
	}
	/* arming everything: whole-mapping runs merge, no split needed */
	ASSERT_EQ(0, hm_space_arm(self->s, 0, NR_CHUNKS));
	ASSERT_EQ(0, harvest_all(self->s, self->out, MAX_OUT));
	/* scattered trips at the wall: the writes proceed, nothing is lost */
	for (uint64_t c = 1; c < NR_CHUNKS; c += 4)
		AT(c, 1) = (uint8_t)c;
	for (uint64_t c = 1; c < NR_CHUNKS; c += 4)
		ASSERT_EQ((uint8_t)c, AT(c, 1));
	n = harvest_all(self->s, self->out, MAX_OUT);
	ASSERT_LE((int)NR_CHUNKS / 4, n);
	ASSERT_EQ(0, hm_space_stats(self->s, &st));
	if (!(hm_space_caps(self->s) & HM_CAP_NO_VMA_SPLIT)) {
		EXPECT_LE(1, st.overflows);
		TH_LOG("VMA wall: %d chunks reported for %llu written, %llu overflows", n,
		       (unsigned long long)NR_CHUNKS / 4, (unsigned long long)st.overflows);
	} else {
		EXPECT_EQ((int)NR_CHUNKS / 4, n);
		for (int i = 0; i < n; i++)
			EXPECT_EQ(1 + 4 * (uint64_t)i, self->out[i]);
	}
	/* after the harvest the space is armed again and exact */
	AT(2, 0) = 1;
	n = harvest_all(self->s, self->out, MAX_OUT);
	ASSERT_EQ(1, n);
	EXPECT_EQ(2, self->out[0]);
	munmap(eaten, len);
}

/* ---- AUTO --------------------------------------------------------------- */

/* ---- what the application does to a watched mapping (watch.rst table) -- */

/*
 * mprotect R -> RW by the application.  Through hm_space_protect() the
 * guards stay on every backend; a raw mprotect keeps them where the
 * backend says HM_CAP_MPROTECT (guards in the page tables: the uffd-wp
 * bit, the module's write-notify).  The mprotect backend's guards are the
 * protection itself: a raw mprotect to RW unarms them (documented).
 */
TEST_F(watch, app_mprotect_keeps_guards)
{
	uint8_t *base;
	int n;

	NEED_SPACE();
	base = (uint8_t *)self->p;
	ASSERT_EQ(0, hm_space_arm(self->s, 0, NR_CHUNKS));
	/* through the library: read-only, then read-write again */
	ASSERT_EQ(0, hm_space_protect(self->s, base, SPACE_BYTES, PROT_READ));
	ASSERT_EQ(0, hm_space_protect(self->s, base, SPACE_BYTES, PROT_READ | PROT_WRITE));
	AT(5, 8) = 1;
	n = harvest_all(self->s, self->out, MAX_OUT);
	ASSERT_EQ(1, n) TH_LOG("a write after hm_space_protect(RW) went unseen");
	EXPECT_EQ(5, self->out[0]);
	/* part of a chunk: the rest of it stays guarded */
	ASSERT_EQ(0, hm_space_protect(self->s, base + (9ull << CHUNK_SHIFT), 4096,
				      PROT_READ | PROT_WRITE));
	AT(9, 8192) = 1;
	ASSERT_EQ(1, harvest_all(self->s, self->out, MAX_OUT));
	EXPECT_EQ(9, self->out[0]);
	EXPECT_EQ(-EINVAL, hm_space_protect(self->s, base + 1, 4096, PROT_READ));
	EXPECT_EQ(-EINVAL, hm_space_protect(self->s, base, SPACE_BYTES, PROT_WRITE));
	/* the application's own mprotect */
	ASSERT_EQ(0, mprotect(base, SPACE_BYTES, PROT_READ));
	ASSERT_EQ(0, mprotect(base, SPACE_BYTES, PROT_READ | PROT_WRITE));
	AT(12, 8) = 1;
	n = harvest_all(self->s, self->out, MAX_OUT);
	if (hm_space_caps(self->s) & HM_CAP_MPROTECT) {
		ASSERT_EQ(1, n);
		EXPECT_EQ(12, self->out[0]);
	} else if (variant->backend == HM_BACKEND_MPROTECT) {
		EXPECT_EQ(0, n);	/* the documented hole: use hm_space_protect() */
		TH_LOG("mprotect: a raw mprotect(RW) unarms the guards (no HM_CAP_MPROTECT)");
	} else {
		TH_LOG("%s: raw mprotect then a write: %d chunks seen", hm_backend_name(variant->backend), n);
	}
}

/* a page the application made read-only through the library faults as its
   own (its SIGSEGV), not as a trip (mprotect backend; elsewhere
   hm_space_protect() is mprotect() and read-only is the kernel's) */
TEST_F(watch, app_read_only_page_stays_read_only)
{
	pid_t pid;
	int st;

	NEED_SPACE();
	if (variant->backend != HM_BACKEND_MPROTECT)
		SKIP(return, "%s: hm_space_protect() is mprotect() here",
		     hm_backend_name(variant->backend));
	ASSERT_EQ(0, hm_space_arm(self->s, 0, NR_CHUNKS));
	ASSERT_EQ(0, hm_space_protect(self->s, (uint8_t *)self->p + (3ull << CHUNK_SHIFT), 4096,
				      PROT_READ));
	pid = fork();
	if (pid == 0) {
		/* the child has no mapping of the space (MADV_DONTFORK): map it
		   the same way is not possible; write the parent's page instead
		   through a second process is meaningless, so test in-process in
		   a child of a fresh space */
		struct hm_space_params p = {
			.size = SPACE_BYTES, .chunk_shift = CHUNK_SHIFT, .backend = variant->backend,
		};
		struct hm_space *s2;
		volatile uint8_t *q;

		if (hm_space_new(&p, &s2) || hm_space_arm(s2, 0, NR_CHUNKS))
			_exit(10);
		q = hm_space_addr(s2);
		if (hm_space_protect(s2, (uint8_t *)q + (3ull << CHUNK_SHIFT), 4096, PROT_READ))
			_exit(11);
		q[(3ull << CHUNK_SHIFT) + 4096] = 1;	/* next page: a trip */
		q[(3ull << CHUNK_SHIFT) + 8] = 1;	/* the read-only page: SIGSEGV */
		_exit(0);
	}
	ASSERT_EQ(pid, waitpid(pid, &st, 0));
	EXPECT_TRUE(WIFSIGNALED(st) && WTERMSIG(st) == SIGSEGV)
		TH_LOG("exit %d: a write to a page made read-only went through",
		       WIFEXITED(st) ? WEXITSTATUS(st) : -1);
}

/* madvise(MADV_DONTNEED) over armed memory: the guards stay where the
   backend says HM_CAP_MADVISE, and the data is the memfd's */
TEST_F(watch, madvise_dontneed_keeps_guards)
{
	int n;

	NEED_SPACE();
	AT(2, 0) = 0x11;
	AT(6, 0) = 0x22;
	ASSERT_EQ(0, hm_space_arm(self->s, 0, NR_CHUNKS));
	if (madvise((void *)self->p, SPACE_BYTES, MADV_DONTNEED) < 0) {
		/* uffd-async locks its mappings (reclaim safety): the kernel
		   refuses MADV_DONTNEED on locked memory */
		ASSERT_EQ(EINVAL, errno);
		TH_LOG("%s: MADV_DONTNEED refused (EINVAL: the mapping is locked)",
		       hm_backend_name(variant->backend));
	}
	EXPECT_EQ(0x11, AT(2, 0));		/* shared memory: contents stay */
	ASSERT_EQ(0, harvest_all(self->s, self->out, MAX_OUT));
	AT(6, 4) = 0x33;
	AT(7, 4) = 0x44;			/* never populated */
	n = harvest_all(self->s, self->out, MAX_OUT);
	if (hm_space_caps(self->s) & HM_CAP_MADVISE) {
		ASSERT_EQ(2, n) TH_LOG("writes after MADV_DONTNEED went unseen");
		EXPECT_EQ(6, self->out[0]);
		EXPECT_EQ(7, self->out[1]);
	} else {
		TH_LOG("%s: after MADV_DONTNEED %d of 2 writes seen", hm_backend_name(variant->backend), n);
	}
	EXPECT_EQ(0x22, AT(6, 0));
}

/*
 * mremap of a whole watched mapping: followed where HM_CAP_MREMAP
 * (uffd-sync: UFFD_EVENT_REMAP), refused at the next harvest with -EFAULT
 * by uffd-async (a mapping's first page gone) and mprotect (the write at
 * the new address is found in a mapping of the space's memfd and
 * proceeds; before, it was a SIGSEGV nobody handled).
 */
TEST_F(watch, mremap_followed_or_refused)
{
	void *to, *old;
	int n;

	NEED_SPACE();
	ASSERT_EQ(0, hm_space_arm(self->s, 0, NR_CHUNKS));
	old = (void *)self->p;
	to = mmap(NULL, SPACE_BYTES, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	ASSERT_NE(MAP_FAILED, to);
	ASSERT_EQ(to, mremap(old, SPACE_BYTES, SPACE_BYTES, MREMAP_MAYMOVE | MREMAP_FIXED, to));
	((volatile uint8_t *)to)[(4ull << CHUNK_SHIFT) + 8] = 1;
	n = harvest_all(self->s, self->out, MAX_OUT);
	if (hm_space_caps(self->s) & HM_CAP_MREMAP) {
		ASSERT_EQ(1, n) TH_LOG("the write at the new address went unseen");
		EXPECT_EQ(4, self->out[0]);
		EXPECT_EQ(to, hm_space_addr(self->s));
		/* and re-armed there */
		((volatile uint8_t *)to)[(4ull << CHUNK_SHIFT) + 16] = 1;
		ASSERT_EQ(1, harvest_all(self->s, self->out, MAX_OUT));
	} else if (variant->backend == HM_BACKEND_UFFD_ASYNC ||
		   variant->backend == HM_BACKEND_MPROTECT) {
		EXPECT_EQ(-EFAULT, n) TH_LOG("a moved mapping harvested as if watched");
		EXPECT_EQ(1, ((volatile uint8_t *)to)[(4ull << CHUNK_SHIFT) + 8]);
	} else if (variant->backend == HM_BACKEND_KMOD) {
		/* the module watches every mapping of the space; the library's
		   address stays the old one */
		EXPECT_EQ(1, n);
		TH_LOG("kmod: the write at the new address recorded (%d)", n);
	} else {
		TH_LOG("%s: after mremap harvest says %d", hm_backend_name(variant->backend), n);
	}
	/* the fixture unmaps the old address; the new one is ours */
	if (hm_space_addr(self->s) != to)
		munmap(to, SPACE_BYTES);
}

/*
 * A chunk written, then the whole mapping moved with no write after it:
 * the record is kept where the move is followed (uffd-sync) or does not
 * matter (kmod); uffd-async and mprotect refuse the harvest with -EFAULT
 * (mprotect finds the move when its re-arm's mprotect meets the old
 * address unmapped: without that it answered -ENOMEM, as at the VMA wall).
 * uffd-sync moves back and forth MOVES times: its harvest right after
 * each mremap must find the new address (the handler thread applies the
 * REMAP event under the space's lock; before, the harvest could take the
 * lock first and re-arm at the old address: -ENOENT).
 */
TEST_F(watch, mremap_after_a_write_refused_or_kept)
{
	enum { MOVES = 64 };
	uint8_t *at[2] = { (uint8_t *)self->p, NULL };
	int n;

	NEED_SPACE();
	ASSERT_EQ(0, hm_space_arm(self->s, 0, NR_CHUNKS));
	at[1] = mmap(NULL, SPACE_BYTES, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	ASSERT_NE(MAP_FAILED, at[1]);
	for (int r = 0; r < MOVES; r++) {
		uint8_t *from = at[r % 2], *to = at[(r + 1) % 2];

		void *moved;

		((volatile uint8_t *)from)[(2ull << CHUNK_SHIFT) + 8] = (uint8_t)r;
		moved = mremap(from, SPACE_BYTES, SPACE_BYTES, MREMAP_MAYMOVE | MREMAP_FIXED, to);
		if (moved == MAP_FAILED && errno == EFAULT &&
		    variant->backend == HM_BACKEND_MPROTECT) {
			/* the trip split the mapping into VMAs, and older
			   kernels (6.1, 6.12; not 6.18, 7.3) move no range of
			   several: not moved, the record stays */
			ASSERT_EQ(1, harvest_all(self->s, self->out, MAX_OUT));
			EXPECT_EQ(2, self->out[0]);
			TH_LOG("mprotect: the kernel refused to move a split mapping (EFAULT)");
			munmap(to, SPACE_BYTES);
			return;
		}
		ASSERT_EQ(to, moved);
		n = harvest_all(self->s, self->out, MAX_OUT);
		if (!(hm_space_caps(self->s) & HM_CAP_MREMAP) &&
		    variant->backend != HM_BACKEND_KMOD) {
			EXPECT_EQ(-EFAULT, n) TH_LOG("%s: a moved mapping harvested as if watched "
						     "(%d)", hm_backend_name(variant->backend), n);
			munmap(to, SPACE_BYTES);
			return;
		}
		ASSERT_EQ(1, n) TH_LOG("round %d", r);
		EXPECT_EQ(2, self->out[0]);
		if (variant->backend == HM_BACKEND_KMOD)
			break;		/* hm_space_addr() stays; the fixture unmaps it */
		EXPECT_EQ(to, hm_space_addr(self->s));
	}
	/* back where the fixture made it (uffd-sync: an even count) */
	if (variant->backend == HM_BACKEND_KMOD)
		munmap(at[1], SPACE_BYTES);
}

/*
 * mremap of part of a watched mapping (the table's "part of it" row): the
 * module records writes there (it is still a mapping of the space); a
 * userspace backend cannot place them and says so at the next harvest
 * (-EFAULT: uffd-sync from its REMAP event, uffd-async from the mapping's
 * last page gone, mprotect from the write its handler found in a mapping
 * of the space's memfd).
 */
TEST_F(watch, mremap_part_refused)
{
	const uint64_t half = SPACE_BYTES / 2;
	void *to;
	int n;

	NEED_SPACE();
	ASSERT_EQ(0, hm_space_arm(self->s, 0, NR_CHUNKS));
	to = mmap(NULL, half, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	ASSERT_NE(MAP_FAILED, to);
	ASSERT_EQ(to, mremap((void *)(self->p + half), half, half,
			     MREMAP_MAYMOVE | MREMAP_FIXED, to));
	((volatile uint8_t *)to)[(4ull << CHUNK_SHIFT) + 8] = 1;
	AT(2, 8) = 1;					/* the part that stayed */
	n = harvest_all(self->s, self->out, MAX_OUT);
	if (variant->backend == HM_BACKEND_KMOD) {
		ASSERT_EQ(2, n) TH_LOG("a write in the moved part went unseen");
		EXPECT_EQ(2, self->out[0]);
		EXPECT_EQ(NR_CHUNKS / 2 + 4, self->out[1]);
	} else {
		EXPECT_EQ(-EFAULT, n) TH_LOG("%s: a partly moved mapping harvested as if watched (%d)",
					     hm_backend_name(variant->backend), n);
	}
	EXPECT_TRUE(hm_space_addr(self->s) == (void *)self->p);	/* not followed */
	munmap(to, half);
}

/*
 * HM_CAP_KERNEL_TRIP: a trip is resolved in the kernel.  The writer never
 * sleeps for one (its voluntary context switches, counted by the kernel,
 * stay where they were), where a synchronous userfaultfd trip waits for
 * the handler thread every time.  Pages populated before arming, so no
 * trip allocates.
 */
TEST_F(watch, kernel_trip_never_waits)
{
	enum { TRIPS = 64 };
	struct rusage r0, r1;
	long waits;

	NEED_SPACE();
	ASSERT_LE(TRIPS, (int)NR_CHUNKS);
	for (uint64_t c = 0; c < TRIPS; c++)
		AT(c, 0) = 1;
	ASSERT_EQ(0, hm_space_arm(self->s, 0, NR_CHUNKS));
	ASSERT_EQ(0, getrusage(RUSAGE_THREAD, &r0));
	for (uint64_t c = 0; c < TRIPS; c++)
		AT(c, 8) = 2;
	ASSERT_EQ(0, getrusage(RUSAGE_THREAD, &r1));
	waits = r1.ru_nvcsw - r0.ru_nvcsw;
	ASSERT_EQ(TRIPS, harvest_all(self->s, self->out, MAX_OUT));
	TH_LOG("%s: %d trips, the writer slept %ld times", hm_backend_name(variant->backend),
	       TRIPS, waits);
	if (hm_space_caps(self->s) & HM_CAP_KERNEL_TRIP) {
		EXPECT_GT(TRIPS / 4, waits);
	} else if (variant->backend == HM_BACKEND_UFFD_SYNC) {
		/* the measure tells them apart: nearly every trip sleeps (63 of
		 * 64 seen on 6.1: a handler can answer before the writer is
		 * switched out) */
		EXPECT_LE(TRIPS / 2, waits);
	}
}

/*
 * uffd-async scans a long range in parts on several threads
 * (watch_uffd.c, HM_SCAN_PAR_MIN; HMIRROR_SCAN_THREADS=4 here, as a
 * machine of fewer than four CPUs scans on one): a 1 GiB space of page chunks, written
 * at every part's edges (for 2, 3 and 4 parts) and at random, reports
 * exactly what was written, ascending and once, through a harvest into a
 * large array, one into a small one (the pending path) and the
 * generations of the whole space (a scan that keeps what it finds).
 */
static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

TEST(uffd_async_long_scans_are_exact)
{
	const uint64_t size = 1ull << 30, nr = size >> 12;
	struct hm_space_params p = { .size = size, .chunk_shift = 12,
				     .backend = HM_BACKEND_UFFD_ASYNC };
	uint64_t *want = malloc(4096 * sizeof(*want)), *got = malloc(nr * sizeof(*got));
	uint64_t *gens = malloc(nr * sizeof(*gens)), *gens1 = malloc(nr * sizeof(*gens1));
	uint64_t rng = 0x9e3779b97f4a7c15ull;
	const char *why = NULL;
	struct hm_space *s;
	volatile uint8_t *m;
	size_t nw = 0, k;
	int err;

	ASSERT_TRUE(want && got && gens && gens1);
	/* parts on every machine of two CPUs or more, this test's process only */
	setenv("HMIRROR_SCAN_THREADS", "4", 1);
	err = hm_test_backend_probe(HM_BACKEND_UFFD_ASYNC, &why);
	if (err)
		SKIP(goto out, "uffd-async unavailable: %s", why);
	ASSERT_EQ(0, hm_space_new(&p, &s));
	m = hm_space_addr(s);
	ASSERT_EQ(0, hm_space_arm(s, 0, nr));
	for (uint64_t d = 2; d <= 4; d++)
		for (uint64_t i = 1; i < d; i++)
			for (int64_t e = -1; e <= 0; e++)
				want[nw++] = nr * i / d + (uint64_t)e;
	want[nw++] = 0;
	want[nw++] = nr - 1;
	while (nw < 3000) {
		rng ^= rng << 13; rng ^= rng >> 7; rng ^= rng << 17;
		want[nw++] = rng % nr;
	}
	qsort(want, nw, sizeof(*want), cmp_u64);
	for (size_t i = k = 0; i < nw; i++)
		if (!k || want[k - 1] != want[i])
			want[k++] = want[i];
	nw = k;
	for (int round = 0; round < 3; round++) {
		size_t total = 0, n;
		bool more = true;

		for (size_t i = 0; i < nw; i++)
			m[(want[i] << 12) + 8 * round] = (uint8_t)(round + 1);
		if (round == 2) {
			/* the generations of the whole space: the written ones move */
			ASSERT_EQ(0, hm_space_generations_range(s, 0, nr, 0, gens1));
			for (size_t i = 0, j = 0; i < nr; i++) {
				bool w = j < nw && want[j] == i;

				ASSERT_EQ(gens[i] + (w ? 2 : 0), gens1[i]);
				j += w;
			}
		}
		/* round 0: one large harvest; 1 and 2: 100 chunks at a time */
		while (more) {
			size_t cap = round ? 100 : nr - total;

			ASSERT_EQ(0, hm_space_harvest(s, got + total, cap, &n, &more));
			total += n;
			ASSERT_LE(total, nr);
		}
		ASSERT_EQ(nw, total);
		for (size_t i = 0; i < nw; i++)
			ASSERT_EQ(want[i], got[i]);
		ASSERT_EQ(0, hm_space_harvest(s, got, nr, &n, &more));
		ASSERT_EQ(0, n);
		ASSERT_EQ(0, hm_space_generations_range(s, 0, nr, 0, gens));
	}
	TH_LOG("1 GiB of page chunks: %zu written chunks reported exactly, three times", nw);
	hm_space_free(s);
out:
	free(want);
	free(got);
	free(gens);
	free(gens1);
}

TEST(auto_picks_best)
{
	struct hm_space_params p = { .size = 1 << 20 };
	static const enum hm_backend order[] = {
		HM_BACKEND_KMOD, HM_BACKEND_UFFD_ASYNC, HM_BACKEND_UFFD_SYNC, HM_BACKEND_MPROTECT,
	};
	enum hm_backend want = HM_BACKEND_AUTO;
	struct hm_space *s;

	for (unsigned i = 0; i < 4 && want == HM_BACKEND_AUTO; i++)
		if (!hm_backend_probe(order[i], NULL))
			want = order[i];
	ASSERT_EQ(0, hm_space_new(&p, &s));
	EXPECT_EQ(want, hm_space_backend(s));
	EXPECT_NE(NULL, strstr(hm_space_backend_reason(s), "auto"));
	TH_LOG("auto: %s", hm_space_backend_reason(s));
	hm_space_free(s);
}

/* a SIGSEGV that is not ours reaches the caller's handler (mprotect chains) */
static volatile sig_atomic_t caller_saw;
static sigjmp_buf caller_jmp;

static void caller_handler(int sig)
{
	caller_saw = 1;
	siglongjmp(caller_jmp, 1);
}

TEST(mprotect_chains_foreign_faults)
{
	struct hm_space_params p = { .size = 1 << 20, .backend = HM_BACKEND_MPROTECT };
	struct sigaction sa = { .sa_handler = caller_handler }, cur;
	struct hm_space *s;
	volatile uint8_t *ro;

	sigemptyset(&sa.sa_mask);
	ASSERT_EQ(0, sigaction(SIGSEGV, &sa, NULL));
	ASSERT_EQ(0, hm_space_new(&p, &s));
	ASSERT_EQ(0, hm_space_arm(s, 0, hm_space_nr_chunks(s)));
	ro = mmap(NULL, 4096, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	ASSERT_NE(MAP_FAILED, ro);
	if (!sigsetjmp(caller_jmp, 1))
		ro[0] = 1;			/* not the library's */
	EXPECT_EQ(1, caller_saw);
	((volatile uint8_t *)hm_space_addr(s))[0] = 1;	/* the library's */
	hm_space_free(s);
	/* the caller's handler is back once the last mprotect space is gone */
	ASSERT_EQ(0, sigaction(SIGSEGV, NULL, &cur));
	EXPECT_EQ((void *)caller_handler, (void *)cur.sa_handler);
}

/* the per-process limit of live mprotect spaces */
TEST(mprotect_space_limit)
{
	struct hm_space_params p = { .size = 1 << 16, .backend = HM_BACKEND_MPROTECT };
	struct hm_space *s[HM_MPROTECT_MAX_SPACES + 1];

	for (int i = 0; i < HM_MPROTECT_MAX_SPACES; i++)
		ASSERT_EQ(0, hm_space_new(&p, &s[i]));
	EXPECT_EQ(-EMFILE, hm_space_new(&p, &s[HM_MPROTECT_MAX_SPACES]));
	hm_space_free(s[0]);
	ASSERT_EQ(0, hm_space_new(&p, &s[0]));
	for (int i = 0; i < HM_MPROTECT_MAX_SPACES; i++)
		hm_space_free(s[i]);
}

TEST_HARNESS_MAIN
