// SPDX-License-Identifier: GPL-2.0
/*
 * Consumers of a space's writes (watch.h "Consumers"), the same tests
 * against every backend: consumers never take each other's records, a
 * random sequence of writes, watches, unwatches and harvests agrees with a
 * reference model, a chunk nobody watches is disarmed (its writer pays no
 * fault), range callbacks, limits, and bad arguments that change nothing.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <hmirror/watch.h>

#include "kselftest_harness.h"
#include "backend_test.h"

#undef TEST_TIMEOUT_DEFAULT
#define TEST_TIMEOUT_DEFAULT 120

#define SPACE_BYTES (8ull << 20)
#define CHUNK_SHIFT 16
#define CHUNK (1ull << CHUNK_SHIFT)
#define NR_CHUNKS (SPACE_BYTES >> CHUNK_SHIFT)
#define MAX_OUT 4096
#define NR_MODEL 4	/* [0] the built-in consumer, [1..3] consumers */

FIXTURE(cons) {
	struct hm_space *s;
	volatile uint8_t *p;
	uint64_t out[MAX_OUT];
};

FIXTURE_VARIANT(cons) {
	enum hm_backend backend;
};

FIXTURE_VARIANT_ADD(cons, kmod) { .backend = HM_BACKEND_KMOD };
FIXTURE_VARIANT_ADD(cons, uffd_async) { .backend = HM_BACKEND_UFFD_ASYNC };
FIXTURE_VARIANT_ADD(cons, uffd_sync) { .backend = HM_BACKEND_UFFD_SYNC };
FIXTURE_VARIANT_ADD(cons, mprotect) { .backend = HM_BACKEND_MPROTECT };

FIXTURE_SETUP(cons)
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
}

FIXTURE_TEARDOWN(cons)
{
	hm_space_free(self->s);
}

#define NEED_SPACE() do { if (!self->s) return; } while (0)
#define AT(c, off) (self->p[((uint64_t)(c) << CHUNK_SHIFT) + (off)])

/* every chunk consumer k (NULL: the built-in one) has to report now */
static int drain(struct hm_space *s, struct hm_consumer *k, unsigned flags, uint64_t *out)
{
	size_t total = 0;
	bool more = true;

	while (more) {
		size_t n = 0;
		int err = k ? hm_consumer_harvest(k, flags, out + total, MAX_OUT - total, &n, &more) :
			  hm_space_harvest(s, out + total, MAX_OUT - total, &n, &more);

		if (err)
			return err;
		total += n;
		if (total == MAX_OUT && more)
			return -ENOSPC;
	}
	return (int)total;
}

TEST_F(cons, two_consumers_never_steal)
{
	static const uint64_t w[] = { 0, 5, 6, 64, NR_CHUNKS - 1 };
	struct hm_consumer *a, *b;
	struct hm_consumer_stats st;
	int n;

	NEED_SPACE();
	ASSERT_EQ(0, hm_consumer_new(self->s, HM_CONSUMER_WATCH_ALL, &a));
	ASSERT_EQ(0, hm_consumer_new(self->s, 0, &b));
	ASSERT_EQ(0, hm_consumer_watch(b, 0, SPACE_BYTES));
	ASSERT_EQ(0, hm_space_arm(self->s, 0, NR_CHUNKS));	/* the built-in one too */
	ASSERT_EQ(0, drain(self->s, a, 0, self->out));
	ASSERT_EQ(0, drain(self->s, b, 0, self->out));
	ASSERT_EQ(0, drain(self->s, NULL, 0, self->out));
	for (unsigned i = 0; i < sizeof(w) / sizeof(w[0]); i++)
		AT(w[i], 100 + i) = (uint8_t)i;
	/* each of the three sees every write, whoever harvests first */
	for (int who = 0; who < 3; who++) {
		struct hm_consumer *k = who == 0 ? a : who == 1 ? NULL : b;

		n = drain(self->s, k, 0, self->out);
		ASSERT_EQ((int)(sizeof(w) / sizeof(w[0])), n);
		for (int i = 0; i < n; i++)
			EXPECT_EQ(w[i], self->out[i]);
		/* reported once */
		ASSERT_EQ(0, drain(self->s, k, 0, self->out));
	}
	/* the harvests re-armed: the next write is seen by all */
	AT(6, 0) = 1;
	ASSERT_EQ(1, drain(self->s, b, 0, self->out));
	ASSERT_EQ(1, drain(self->s, a, 0, self->out));
	ASSERT_EQ(1, drain(self->s, NULL, 0, self->out));
	ASSERT_EQ(0, hm_consumer_stats(a, &st));
	EXPECT_EQ(NR_CHUNKS, st.chunks_watched);
	EXPECT_EQ(0, st.chunks_pending);
	EXPECT_EQ(6, st.chunks_reported);
	hm_consumer_free(a);
	hm_consumer_free(b);
	/* the built-in consumer keeps watching after they are gone */
	AT(7, 0) = 1;
	ASSERT_EQ(1, drain(self->s, NULL, 0, self->out));
	EXPECT_EQ(7, self->out[0]);
}

/* a consumer's take (HM_HARVEST_UNWATCH) leaves the others their watch */
TEST_F(cons, take_unwatches_only_the_taker)
{
	struct hm_consumer *a, *b;
	struct hm_consumer_stats st;

	NEED_SPACE();
	ASSERT_EQ(0, hm_consumer_new(self->s, 0, &a));
	ASSERT_EQ(0, hm_consumer_new(self->s, 0, &b));
	ASSERT_EQ(0, hm_consumer_watch(a, 10 * CHUNK, 4 * CHUNK));
	ASSERT_EQ(0, hm_consumer_watch(b, 10 * CHUNK + 1, 1));	/* chunk 10 */
	AT(10, 0) = 1;
	AT(12, 0) = 1;
	ASSERT_EQ(2, drain(self->s, a, HM_HARVEST_UNWATCH, self->out));
	ASSERT_EQ(0, hm_consumer_stats(a, &st));
	EXPECT_EQ(2, st.chunks_watched);	/* 11 and 13 */
	AT(10, 8) = 2;
	AT(12, 8) = 2;
	AT(13, 8) = 2;
	ASSERT_EQ(1, drain(self->s, a, 0, self->out));
	EXPECT_EQ(13, self->out[0]);
	/* b saw both writes of chunk 10, once */
	ASSERT_EQ(1, drain(self->s, b, 0, self->out));
	EXPECT_EQ(10, self->out[0]);
	hm_consumer_free(a);
	hm_consumer_free(b);
}

static uint64_t rnd(uint64_t *x)
{
	*x ^= *x << 13;
	*x ^= *x >> 7;
	*x ^= *x << 17;
	return *x;
}

/*
 * Random writes, watches, unwatches, takes and harvests by the built-in
 * consumer and three others, against a reference: a harvest reports every
 * chunk the consumer watches that was written since it last reported it
 * (need), and nothing else but chunks it started watching since (may).
 */
TEST_F(cons, random_model)
{
	static bool watch[NR_MODEL][NR_CHUNKS], need[NR_MODEL][NR_CHUNKS], may[NR_MODEL][NR_CHUNKS];
	struct hm_consumer *k[NR_MODEL] = { NULL };
	uint64_t x = 0x9e3779b97f4a7c15ull;
	unsigned steps = 4000, harvests = 0, reported = 0;

	NEED_SPACE();
	memset(watch, 0, sizeof(watch));
	memset(need, 0, sizeof(need));
	memset(may, 0, sizeof(may));
	for (int i = 1; i < NR_MODEL; i++)
		ASSERT_EQ(0, hm_consumer_new(self->s, 0, &k[i]));
	for (unsigned step = 0; step < steps; step++) {
		unsigned op = rnd(&x) % 16, who = rnd(&x) % NR_MODEL;
		uint64_t c = rnd(&x) % NR_CHUNKS, len = 1 + rnd(&x) % 8;

		if (c + len > NR_CHUNKS)
			len = NR_CHUNKS - c;
		if (op < 8) {			/* a CPU write */
			AT(c, rnd(&x) % CHUNK) = (uint8_t)step;
			for (int i = 0; i < NR_MODEL; i++)
				if (watch[i][c])
					need[i][c] = true;
		} else if (op < 10) {		/* watch */
			int err = who ? hm_consumer_watch(k[who], c * CHUNK, len * CHUNK) :
					hm_space_arm(self->s, c, len);

			ASSERT_EQ(0, err);
			for (uint64_t i = c; i < c + len; i++) {
				if (!watch[who][i])
					may[who][i] = true;
				watch[who][i] = true;
			}
		} else if (op < 11 && who) {	/* unwatch */
			ASSERT_EQ(0, hm_consumer_unwatch(k[who], c * CHUNK, len * CHUNK));
			for (uint64_t i = c; i < c + len; i++)
				watch[who][i] = need[who][i] = may[who][i] = false;
		} else {			/* harvest, or take */
			bool take = op == 15 && (who || (hm_space_caps(self->s) & HM_CAP_HARVEST_TAKE));
			bool got[NR_CHUNKS] = { false };
			int n;

			if (who)
				n = drain(self->s, k[who], take ? HM_HARVEST_UNWATCH : 0, self->out);
			else if (take)
				n = ({ size_t m = 0; bool more;
				       int e = hm_space_harvest_take(self->s, self->out, MAX_OUT, &m, &more);
				       e ? e : (int)m; });
			else
				n = drain(self->s, NULL, 0, self->out);
			ASSERT_LE(0, n);
			for (int i = 0; i < n; i++) {
				ASSERT_LT(self->out[i], NR_CHUNKS);
				if (i) {
					ASSERT_LT(self->out[i - 1], self->out[i]);
				}
				got[self->out[i]] = true;
			}
			for (uint64_t i = 0; i < NR_CHUNKS; i++) {
				if (need[who][i] && !got[i])
					TH_LOG("step %u: consumer %u missed chunk %llu", step, who,
					       (unsigned long long)i);
				ASSERT_FALSE(need[who][i] && !got[i]);
				if (got[i] && !need[who][i] && !may[who][i])
					TH_LOG("step %u: consumer %u got chunk %llu, not written", step,
					       who, (unsigned long long)i);
				ASSERT_FALSE(got[i] && !need[who][i] && !may[who][i]);
				need[who][i] = may[who][i] = false;
				if (take && got[i])
					watch[who][i] = false;
			}
			harvests++;
			reported += n;
		}
	}
	TH_LOG("%u steps, %u harvests, %u chunks reported", steps, harvests, reported);
	for (int i = 1; i < NR_MODEL; i++)
		hm_consumer_free(k[i]);
}

/* uffd-async: is the page at p write-protected (pagemap bit 57)? */
static int page_uffd_wp(const volatile void *p)
{
	int fd = open("/proc/self/pagemap", O_RDONLY | O_CLOEXEC);
	uint64_t e = 0;
	ssize_t r;

	if (fd < 0)
		return -errno;
	r = pread(fd, &e, sizeof(e), (off_t)((uintptr_t)p / 4096 * 8));
	close(fd);
	if (r != sizeof(e))
		return -EIO;
	return (int)((e >> 57) & 1);
}

/* kmod: a counter of /sys/kernel/debug/hmirror/stats (the VM), -1 if absent */
static long long kmod_stat(const char *name)
{
	FILE *f = fopen("/sys/kernel/debug/hmirror/stats", "r");
	char key[128];
	long long v, ret = -1;

	if (!f)
		return -1;
	while (fscanf(f, "%127s %lld", key, &v) == 2)
		if (!strcmp(key, name))
			ret = v;
	fclose(f);
	return ret;
}

/*
 * A chunk nobody watches is disarmed: writing it costs no trip (uffd-sync,
 * mprotect: the trip counter stays; uffd-async: its pages stay writable
 * through harvests, even next to a watched chunk), and it is not reported.
 * While one consumer still watches a chunk, it stays armed.
 */
TEST_F(cons, unwatched_range_is_disarmed)
{
	struct hm_space_stats s0, s1;
	struct hm_consumer *a, *b;
	long long trips0 = 0, mkwrite1 = 0;

	NEED_SPACE();
	ASSERT_EQ(0, hm_consumer_new(self->s, 0, &a));
	ASSERT_EQ(0, hm_consumer_new(self->s, 0, &b));
	ASSERT_EQ(0, hm_consumer_watch(a, 20 * CHUNK, 3 * CHUNK));	/* 20..22 */
	ASSERT_EQ(0, hm_consumer_watch(b, 22 * CHUNK, CHUNK));		/* 22 */
	for (unsigned pg = 0; pg < 16; pg++) {
		AT(20, pg * 4096) = 1;
		AT(21, pg * 4096) = 1;
		AT(22, pg * 4096) = 1;
	}
	ASSERT_EQ(3, drain(self->s, a, 0, self->out));
	ASSERT_EQ(0, hm_consumer_unwatch(a, 21 * CHUNK, 2 * CHUNK));	/* 21, 22 */
	/* uffd-async: the harvest write-protected 21 again; the unwatch undid it */
	if (variant->backend == HM_BACKEND_UFFD_ASYNC) {
		ASSERT_EQ(0, page_uffd_wp(&AT(21, 0)));
		ASSERT_EQ(1, page_uffd_wp(&AT(22, 0)));	/* b's */
	}
	ASSERT_EQ(0, hm_space_stats(self->s, &s0));
	if (variant->backend == HM_BACKEND_KMOD)
		trips0 = kmod_stat("guard_trips");
	for (int round = 0; round < 5; round++) {
		for (unsigned pg = 0; pg < 16; pg++)
			AT(21, pg * 4096) = (uint8_t)round;	/* nobody watches 21 */
		/* kmod: the first pass may fault once a page, unrecorded */
		if (round == 0 && variant->backend == HM_BACKEND_KMOD)
			mkwrite1 = kmod_stat("faults_mkwrite");
		ASSERT_EQ(0, drain(self->s, a, 0, self->out));
		ASSERT_EQ(round ? 0 : 1, drain(self->s, b, 0, self->out));	/* 22: b's first */
	}
	ASSERT_EQ(0, hm_space_stats(self->s, &s1));
	switch (variant->backend) {
	case HM_BACKEND_UFFD_SYNC:
	case HM_BACKEND_MPROTECT:
		EXPECT_EQ(s0.trips, s1.trips);
		break;
	case HM_BACKEND_UFFD_ASYNC:
		for (unsigned pg = 0; pg < 16; pg++)
			ASSERT_EQ(0, page_uffd_wp(&AT(21, pg * 4096)));
		/* control: the watched neighbours were write-protected again */
		ASSERT_EQ(1, page_uffd_wp(&AT(20, 0)));
		ASSERT_EQ(1, page_uffd_wp(&AT(22, 0)));
		break;
	default:	/* kmod: the module's counters, where debugfs is there */
		if (trips0 < 0 || mkwrite1 < 0) {
			TH_LOG("kmod: no debugfs counters here, trips not checked");
			break;
		}
		EXPECT_EQ(trips0, kmod_stat("guard_trips"));
		EXPECT_EQ(mkwrite1, kmod_stat("faults_mkwrite"));
		break;
	}
	/* b still watches 22: armed, seen */
	AT(22, 4) = 9;
	ASSERT_EQ(1, drain(self->s, b, 0, self->out));
	EXPECT_EQ(22, self->out[0]);
	ASSERT_EQ(0, drain(self->s, a, 0, self->out));
	/* freeing a consumer disarms what only it watched */
	hm_consumer_free(b);
	ASSERT_EQ(0, hm_space_stats(self->s, &s0));
	AT(22, 8) = 1;
	ASSERT_EQ(0, drain(self->s, a, 0, self->out));
	ASSERT_EQ(0, hm_space_stats(self->s, &s1));
	if (variant->backend == HM_BACKEND_UFFD_SYNC || variant->backend == HM_BACKEND_MPROTECT)
		EXPECT_EQ(s0.trips, s1.trips);
	/* watching again arms again: the next write is seen */
	ASSERT_EQ(0, hm_consumer_watch(a, 21 * CHUNK, CHUNK));
	AT(21, 0) = 7;
	ASSERT_EQ(1, drain(self->s, a, 0, self->out));
	EXPECT_EQ(21, self->out[0]);
	hm_consumer_free(a);
}

struct runs {
	uint64_t off[16], len[16];
	unsigned n, stop_at;
};

static int note_run(void *user, uint64_t off, uint64_t len)
{
	struct runs *r = user;

	if (r->n == r->stop_at)
		return -ECANCELED;
	r->off[r->n] = off;
	r->len[r->n++] = len;
	return 0;
}

TEST_F(cons, range_callbacks)
{
	struct hm_consumer *a;
	struct hm_consumer_stats st;
	struct runs r = { .stop_at = 1 };

	NEED_SPACE();
	ASSERT_EQ(0, hm_consumer_new(self->s, HM_CONSUMER_WATCH_ALL, &a));
	AT(3, 0) = 1;
	AT(4, 0) = 1;
	AT(5, 0) = 1;
	AT(10, 0) = 1;
	/* fn stops at the second run: that one stays pending */
	ASSERT_EQ(-ECANCELED, hm_consumer_harvest_ranges(a, HM_HARVEST_UNWATCH, note_run, &r));
	ASSERT_EQ(1, r.n);
	EXPECT_EQ(3 * CHUNK, r.off[0]);
	EXPECT_EQ(3 * CHUNK, r.len[0]);
	ASSERT_EQ(0, hm_consumer_stats(a, &st));
	EXPECT_EQ(NR_CHUNKS - 3, st.chunks_watched);	/* what fn took is unwatched */
	EXPECT_EQ(1, st.chunks_pending);
	r.stop_at = 16;
	ASSERT_EQ(0, hm_consumer_harvest_ranges(a, 0, note_run, &r));
	ASSERT_EQ(2, r.n);
	EXPECT_EQ(10 * CHUNK, r.off[1]);
	EXPECT_EQ(CHUNK, r.len[1]);
	/* unwatched by the take: not reported */
	AT(4, 0) = 2;
	ASSERT_EQ(0, hm_consumer_harvest_ranges(a, 0, note_run, &r));
	ASSERT_EQ(2, r.n);
	hm_consumer_free(a);
}

TEST_F(cons, limit)
{
	struct hm_consumer *k[HM_CONSUMER_MAX + 1] = { NULL }, *x = NULL;

	NEED_SPACE();
	for (int i = 0; i < HM_CONSUMER_MAX; i++)
		ASSERT_EQ(0, hm_consumer_new(self->s, 0, &k[i]));
	ASSERT_EQ(-ENOSPC, hm_consumer_new(self->s, 0, &x));
	ASSERT_EQ(NULL, x);
	hm_consumer_free(k[3]);
	ASSERT_EQ(0, hm_consumer_new(self->s, 0, &k[3]));
	for (int i = 0; i < HM_CONSUMER_MAX; i++)
		hm_consumer_free(k[i]);
	hm_consumer_free(NULL);
}

TEST_F(cons, bad_arguments)
{
	struct hm_consumer *a, *x = (void *)1;
	struct hm_consumer_stats st;
	uint64_t bad[2] = { 1, NR_CHUNKS };
	size_t n = 7;
	bool more;

	NEED_SPACE();
	ASSERT_EQ(-EINVAL, hm_consumer_new(NULL, 0, &x));
	ASSERT_EQ(NULL, x);
	ASSERT_EQ(-EINVAL, hm_consumer_new(self->s, 1u << 7, &x));
	ASSERT_EQ(-EINVAL, hm_consumer_new(self->s, 0, NULL));
	ASSERT_EQ(0, hm_consumer_new(self->s, 0, &a));
	ASSERT_EQ(0, hm_consumer_watch(a, 0, CHUNK));
	AT(0, 0) = 1;
	ASSERT_EQ(-EINVAL, hm_consumer_watch(NULL, 0, CHUNK));
	ASSERT_EQ(-EINVAL, hm_consumer_watch(a, 0, 0));
	ASSERT_EQ(-ERANGE, hm_consumer_watch(a, SPACE_BYTES, 1));
	ASSERT_EQ(-ERANGE, hm_consumer_watch(a, CHUNK, SPACE_BYTES));
	ASSERT_EQ(-ERANGE, hm_consumer_watch(a, 1, UINT64_MAX));
	ASSERT_EQ(-ERANGE, hm_consumer_unwatch(a, 0, SPACE_BYTES + 1));
	ASSERT_EQ(-ERANGE, hm_consumer_watch_chunks(a, bad, 2));
	ASSERT_EQ(-ERANGE, hm_consumer_unwatch_chunks(a, (uint64_t[]){ 0, NR_CHUNKS }, 2));
	ASSERT_EQ(-EINVAL, hm_consumer_watch_chunks(a, NULL, 1));
	ASSERT_EQ(-EINVAL, hm_consumer_harvest(a, 1u << 5, self->out, MAX_OUT, &n, &more));
	ASSERT_EQ(-EINVAL, hm_consumer_harvest(a, 0, NULL, 1, &n, &more));
	ASSERT_EQ(-EINVAL, hm_consumer_harvest(a, 0, self->out, 1, NULL, &more));
	ASSERT_EQ(-EINVAL, hm_consumer_harvest(NULL, 0, self->out, 1, &n, &more));
	ASSERT_EQ(-EINVAL, hm_consumer_harvest_ranges(a, 0, NULL, NULL));
	ASSERT_EQ(-EINVAL, hm_consumer_harvest_ranges(a, 1u << 5, note_run, NULL));
	ASSERT_EQ(-EINVAL, hm_consumer_stats(a, NULL));
	ASSERT_EQ(-EINVAL, hm_consumer_stats(NULL, &st));
	/* nothing changed: chunk 0 watched alone, its write still pending */
	ASSERT_EQ(0, hm_consumer_stats(a, &st));
	EXPECT_EQ(1, st.chunks_watched);
	ASSERT_EQ(1, drain(self->s, a, 0, self->out));
	EXPECT_EQ(0, self->out[0]);
	AT(1, 0) = 1;
	ASSERT_EQ(0, drain(self->s, a, 0, self->out));
	/* a space with consumers does not travel */
	if (hm_space_caps(self->s) & HM_CAP_HANDOFF) {
		struct hm_space_handoff h;

		ASSERT_EQ(-EBUSY, hm_space_export(self->s, &h));
	}
	hm_consumer_free(a);
}

/* an engine whose space was freed first: its consumer is detached, not dangling */
TEST_F(cons, space_freed_first)
{
	struct hm_consumer *a;
	struct hm_consumer_stats st;
	size_t n;
	bool more;

	NEED_SPACE();
	ASSERT_EQ(0, hm_consumer_new(self->s, HM_CONSUMER_WATCH_ALL, &a));
	AT(1, 0) = 1;
	hm_space_free(self->s);
	self->s = NULL;
	EXPECT_EQ(-ENODEV, hm_consumer_watch(a, 0, CHUNK));
	EXPECT_EQ(-ENODEV, hm_consumer_harvest(a, 0, self->out, MAX_OUT, &n, &more));
	EXPECT_EQ(-ENODEV, hm_consumer_stats(a, &st));
	hm_consumer_free(a);
}

TEST_HARNESS_MAIN
