// SPDX-License-Identifier: GPL-2.0
/*
 * hmirror-bench consumers: what consumers of one space's writes cost, per
 * watch backend available here, in one run (several rounds, medians).
 *
 * 1. Harvest cost follows the consumer's written chunks.  Consumers A and B
 *    watch the two halves of one space; the CPU writes K chunks of A's
 *    half.  B harvests first (it collects the backend's record for both,
 *    hands out nothing), then A (hands out its K), then B again.  Baseline:
 *    hm_space_harvest() of a space without consumers, the same K written.
 * 2. A writer on a range nobody watches pays no faults.  The CPU stores
 *    once into each page of a 1 MiB range, then a harvest runs (by a
 *    consumer of another range); writes a millisecond, armed (the range
 *    watched, as every range the engine ever uploaded stayed before
 *    consumers) against unwatched (disarmed).
 */
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <hmirror/watch.h>
#include "common.h"

#define PAGE 4096ull

struct opts {
	uint64_t space_bytes;
	unsigned rounds;
	bool json;
};

/* drain consumer k (NULL: the space's hm_space_harvest); chunks handed out */
static long drain(struct hm_space *s, struct hm_consumer *k, uint64_t *buf, size_t cap)
{
	long total = 0;
	bool more = true;

	while (more) {
		size_t n = 0;
		int err = k ? hm_consumer_harvest(k, 0, buf, cap, &n, &more) :
			  hm_space_harvest(s, buf, cap, &n, &more);

		if (err)
			return err;
		total += (long)n;
	}
	return total;
}

static int new_space(enum hm_backend b, uint64_t bytes, struct hm_space **ret)
{
	struct hm_space_params p = { .size = bytes, .chunk_shift = 12, .backend = b };

	return hm_space_new(&p, ret);
}

/* write K chunks (pages) spread over [first, first + span) */
static void write_k(volatile uint8_t *p, uint64_t first, uint64_t span, uint64_t k, uint8_t v)
{
	uint64_t step = span / k;

	for (uint64_t i = 0; i < k; i++)
		p[(first + i * step) * PAGE + 8] = v;
}

static int bench_harvest(enum hm_backend b, const struct opts *o)
{
	static const uint64_t ks[] = { 16, 256, 4096 };
	uint64_t nr = o->space_bytes / PAGE, half = nr / 2;
	size_t cap = 65536;
	uint64_t *buf = malloc(cap * sizeof(*buf));
	int err = 0;

	if (!buf)
		return -ENOMEM;
	for (unsigned ki = 0; ki < sizeof(ks) / sizeof(ks[0]) && !err; ki++) {
		double tb1[64], ta[64], tb2[64], tl[64];
		uint64_t k = ks[ki];

		for (unsigned r = 0; r < o->rounds && !err; r++) {
			struct hm_consumer *a = NULL, *c = NULL;
			struct hm_space *s = NULL, *l = NULL;
			volatile uint8_t *p;
			double t0;
			long n;

			/* ours: two consumers, disjoint halves */
			err = new_space(b, o->space_bytes, &s);
			if (!err)
				err = hm_consumer_new(s, 0, &a);
			if (!err)
				err = hm_consumer_new(s, 0, &c);
			if (!err)
				err = hm_consumer_watch(a, 0, half * PAGE);
			if (!err)
				err = hm_consumer_watch(c, half * PAGE, half * PAGE);
			if (err)
				goto round_out;
			p = hm_space_addr(s);
			write_k(p, 0, half, k, 1);	/* first touch: page allocation out */
			drain(s, c, buf, cap);
			drain(s, a, buf, cap);
			write_k(p, 0, half, k, 2);
			t0 = bench_now_us();
			n = drain(s, c, buf, cap);
			tb1[r] = bench_now_us() - t0;
			t0 = bench_now_us();
			if (n == 0)
				n = drain(s, a, buf, cap);
			ta[r] = bench_now_us() - t0;
			if (n != (long)k) {
				fprintf(stderr, "consumers: %s: A got %ld of %llu\n", hm_backend_name(b),
					n, (unsigned long long)k);
				err = -EIO;
				goto round_out;
			}
			t0 = bench_now_us();
			drain(s, c, buf, cap);
			tb2[r] = bench_now_us() - t0;

			/* baseline: no consumers, hm_space_harvest of the same K */
			err = new_space(b, o->space_bytes, &l);
			if (!err)
				err = hm_space_arm(l, 0, half);
			if (err)
				goto round_out;
			p = hm_space_addr(l);
			write_k(p, 0, half, k, 1);
			drain(l, NULL, buf, cap);
			write_k(p, 0, half, k, 2);
			t0 = bench_now_us();
			n = drain(l, NULL, buf, cap);
			tl[r] = bench_now_us() - t0;
round_out:
			hm_consumer_free(a);
			hm_consumer_free(c);
			hm_space_free(s);
			hm_space_free(l);
		}
		if (err)
			break;
		{
			double mb1 = bench_median(tb1, o->rounds), ma = bench_median(ta, o->rounds);
			double mb2 = bench_median(tb2, o->rounds), ml = bench_median(tl, o->rounds);

			if (o->json)
				printf("{\"bench\":\"consumers\",\"part\":\"harvest\",\"backend\":\"%s\","
				       "\"space_bytes\":%llu,\"written\":%llu,\"rounds\":%u,"
				       "\"b_first_us\":%.1f,\"a_us\":%.1f,\"b_again_us\":%.1f,"
				       "\"baseline_us\":%.1f,\"ratio\":%.2f}\n",
				       hm_backend_name(b), (unsigned long long)o->space_bytes,
				       (unsigned long long)k, o->rounds, mb1, ma, mb2, ml,
				       (mb1 + ma) / ml);
			else
				printf("  %-10s K=%-5llu B first %9.1f us  A (its K) %8.1f us  "
				       "B again %6.1f us | no consumers %9.1f us  (B+A)/base %.2f\n",
				       hm_backend_name(b), (unsigned long long)k, mb1, ma, mb2, ml,
				       (mb1 + ma) / ml);
		}
	}
	free(buf);
	return err;
}

static int bench_writer(enum hm_backend b, const struct opts *o)
{
	const uint64_t pages = (1ull << 20) / PAGE, loops = 8;
	double armed[64], unw[64];
	size_t cap = 65536;
	uint64_t *buf = malloc(cap * sizeof(*buf));
	int err = 0;

	if (!buf)
		return -ENOMEM;
	for (unsigned r = 0; r < o->rounds && !err; r++) {
		for (int mode = 0; mode < 2 && !err; mode++) {
			struct hm_consumer *w = NULL, *other = NULL;
			struct hm_space *s = NULL;
			volatile uint8_t *p;
			double spent = 0;

			err = new_space(b, 64ull << 20, &s);
			if (!err)
				err = hm_consumer_new(s, 0, &w);
			if (!err)
				err = hm_consumer_new(s, 0, &other);
			/* the writer's range [0, 1 MiB), another consumer's far away */
			if (!err)
				err = hm_consumer_watch(w, 0, pages * PAGE);
			if (!err)
				err = hm_consumer_watch(other, 32ull << 20, 1ull << 20);
			if (err)
				goto out;
			p = hm_space_addr(s);
			for (uint64_t i = 0; i < pages; i++)
				p[i * PAGE] = 1;
			drain(s, w, buf, cap);
			if (mode == 1)
				err = hm_consumer_unwatch(w, 0, pages * PAGE);
			/* steady state: the first pass after the unwatch may take
			   one fault a page (uffd: the PTE is read-only without
			   its uffd-wp bit; kmod: read-only until written) */
			for (uint64_t l = 0; l <= loops && !err; l++) {
				double t0 = bench_now_us();

				for (uint64_t i = 0; i < pages; i++)
					p[i * PAGE + 64] = (uint8_t)l;
				if (l)
					spent += bench_now_us() - t0;
				drain(s, other, buf, cap);	/* collects for both */
				drain(s, w, buf, cap);
			}
			(mode ? unw : armed)[r] = (double)(pages * loops) / (spent / 1000.0);
out:
			hm_consumer_free(w);
			hm_consumer_free(other);
			hm_space_free(s);
		}
	}
	if (!err) {
		double ma = bench_median(armed, o->rounds), mu = bench_median(unw, o->rounds);

		if (o->json)
			printf("{\"bench\":\"consumers\",\"part\":\"writer\",\"backend\":\"%s\","
			       "\"rounds\":%u,\"armed_writes_per_ms\":%.0f,"
			       "\"unwatched_writes_per_ms\":%.0f,\"ratio\":%.1f}\n",
			       hm_backend_name(b), o->rounds, ma, mu, mu / ma);
		else
			printf("  %-10s a store a page, harvest between: armed %9.0f writes/ms  "
			       "unwatched %9.0f writes/ms  (x%.1f)\n", hm_backend_name(b), ma, mu,
			       mu / ma);
	}
	free(buf);
	return err;
}

int bench_consumers(int argc, char **argv)
{
	static const struct option lo[] = {
		{ "space-bytes", required_argument, NULL, 's' },
		{ "rounds", required_argument, NULL, 'r' },
		{ "json", no_argument, NULL, 'j' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	struct opts o = { .space_bytes = 256ull << 20, .rounds = 7 };
	static const enum hm_backend bs[] = {
		HM_BACKEND_KMOD, HM_BACKEND_UFFD_ASYNC, HM_BACKEND_UFFD_SYNC, HM_BACKEND_MPROTECT,
	};
	int ch, err = 0;

	while ((ch = getopt_long(argc, argv, "", lo, NULL)) != -1) {
		switch (ch) {
		case 's': o.space_bytes = strtoull(optarg, NULL, 0); break;
		case 'r': o.rounds = (unsigned)strtoul(optarg, NULL, 0); break;
		case 'j': o.json = true; break;
		case 'h':
			printf("usage: hmirror-bench consumers [--space-bytes N] [--rounds R] [--json]\n"
			       "  defaults: --space-bytes 268435456 --rounds 7 (chunks of one page)\n");
			return 0;
		default:
			return -EINVAL;
		}
	}
	if (!o.rounds || o.rounds > 64 || o.space_bytes < (64ull << 20) ||
	    o.space_bytes % (2 * PAGE)) {
		fprintf(stderr, "consumers: --rounds 1..64, --space-bytes >= 64 MiB\n");
		return -EINVAL;
	}
	if (!o.json)
		printf("consumers: harvest cost by who wrote what (%llu MiB space, chunk 4 KiB, "
		       "medians of %u rounds)\n", (unsigned long long)(o.space_bytes >> 20), o.rounds);
	for (unsigned i = 0; i < sizeof(bs) / sizeof(bs[0]) && !err; i++) {
		const char *why;

		if (hm_backend_probe(bs[i], &why)) {
			if (!o.json)
				printf("  %-10s not available here: %s\n", hm_backend_name(bs[i]), why);
			continue;
		}
		err = bench_harvest(bs[i], &o);
	}
	if (!o.json)
		printf("consumers: a writer on a 1 MiB range, 8 passes a round, a harvest between\n");
	for (unsigned i = 0; i < sizeof(bs) / sizeof(bs[0]) && !err; i++)
		if (!hm_backend_probe(bs[i], NULL))
			err = bench_writer(bs[i], &o);
	if (err)
		fprintf(stderr, "consumers: %s\n", strerror(-err));
	return err;
}
