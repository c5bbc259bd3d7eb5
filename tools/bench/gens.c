// SPDX-License-Identifier: GPL-2.0
/*
 * hmirror-bench gens: what rule 3's check of many scattered spans costs on
 * the uffd-async backend, the way the engine asks it at a dispatch
 * boundary (Documentation/decisions.rst, "The check over the spans'
 * cover"), against the other ways of learning the same generations, in one
 * run.  A space of --size MiB, one page a chunk, every page resident and
 * armed; --spans spans of 16 chunks, one in each equal stretch of the
 * space at a random offset; before each timed call the first page of every
 * --every'th span is written.  Per round, each call after its own writes:
 *
 *   spans_ms    hm_space_generations_spans() of all spans
 *   each_ms     hm_space_generations_range() a span, one after the other
 *   whole_ms    hm_space_generations_range() of the whole space
 *   harvest_ms  hm_space_harvest() until nothing is left
 *
 * each with the check's two flags: take (0: a write-protecting scan, the
 * check before a retry) and peek (HM_GEN_PEEK: read-only, the last try's).
 * The knobs that choose how the library scans are read once a process, so
 * every configuration runs in a child of its own with its environment:
 * HMIRROR_GEN_COVER 0 and 1 (a call a span, or one scan over the spans'
 * cover) and HMIRROR_SPAN_THREADS=1 (a call a span, the spans spread over
 * the scan threads) by HMIRROR_SCAN_THREADS 1 and the default (how many
 * threads a long scan, or the spans, are split among).  Medians of
 * --rounds rounds.
 */
#include <errno.h>
#include <getopt.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/wait.h>

#include <hmirror/watch.h>

#include "common.h"

#define SPAN_CHUNKS 16

struct gens_opts {
	uint64_t size_mib;
	unsigned spans, every, rounds;
	bool json;
};

/* write the first page of every o->every'th span (value v) */
static void gens_write(volatile uint8_t *m, const struct hm_gen_span *sp,
		       const struct gens_opts *o, uint8_t v)
{
	for (unsigned i = 0; i < o->spans; i += o->every)
		m[(sp[i].first << 12) + 64] = v;
}

static int gens_drain(struct hm_space *s, uint64_t *out, uint64_t cap)
{
	size_t n;
	bool more = true;
	int err = 0;

	while (more && !err)
		err = hm_space_harvest(s, out, cap, &n, &more);
	return err;
}

/* one configuration, in this (child) process: a line of results on stdout */
static int gens_config(const struct gens_opts *o, const char *cover, const char *threads,
		       bool span_threads)
{
	struct hm_space_params p = {
		.size = o->size_mib << 20, .chunk_shift = 12, .backend = HM_BACKEND_UFFD_ASYNC,
	};
	uint64_t nc = p.size >> 12, step = nc / o->spans, *out, *g, *whole;
	double *t[4][2];
	struct hm_gen_span *sp;
	struct hm_space *s;
	volatile uint8_t *m;
	uint8_t v = 1;
	int err;

	err = hm_space_new(&p, &s);
	if (err) {
		fprintf(stderr, "gens: hm_space_new: %s\n", strerror(-err));
		return err;
	}
	m = hm_space_addr(s);
	for (uint64_t off = 0; off < p.size; off += 4096)
		m[off] = 1;
	out = malloc(nc * sizeof(*out));
	whole = malloc(nc * sizeof(*whole));
	g = malloc((size_t)o->spans * SPAN_CHUNKS * sizeof(*g));
	sp = malloc(o->spans * sizeof(*sp));
	err = !out || !whole || !g || !sp ? -ENOMEM : 0;
	for (int k = 0; k < 4; k++)
		for (int f = 0; f < 2; f++)
			if (!(t[k][f] = calloc(o->rounds, sizeof(double))))
				err = -ENOMEM;
	if (err) {
		fprintf(stderr, "gens: %s\n", strerror(-err));
		return err;
	}
	err = hm_space_arm(s, 0, nc);
	if (!err)
		err = gens_drain(s, out, nc);
	srand(1);
	for (unsigned i = 0; i < o->spans; i++)
		sp[i] = (struct hm_gen_span){
			.first = i * step + (uint64_t)rand() % (step - SPAN_CHUNKS + 1),
			.count = SPAN_CHUNKS, .gens = g + (size_t)i * SPAN_CHUNKS,
		};
	for (unsigned r = 0; r < o->rounds && !err; r++) {
		for (int f = 0; f < 2 && !err; f++) {
			unsigned flags = f ? HM_GEN_PEEK : 0;
			double t0;

			gens_write(m, sp, o, v++);
			t0 = bench_now_us();
			err = hm_space_generations_spans(s, sp, o->spans, flags);
			t[0][f][r] = (bench_now_us() - t0) * 1e-3;
			gens_write(m, sp, o, v++);
			t0 = bench_now_us();
			for (unsigned i = 0; i < o->spans && !err; i++)
				err = hm_space_generations_range(s, sp[i].first, sp[i].count, flags,
								 sp[i].gens);
			t[1][f][r] = (bench_now_us() - t0) * 1e-3;
			gens_write(m, sp, o, v++);
			t0 = bench_now_us();
			if (!err)
				err = hm_space_generations_range(s, 0, nc, flags, whole);
			t[2][f][r] = (bench_now_us() - t0) * 1e-3;
			gens_write(m, sp, o, v++);
			t0 = bench_now_us();
			if (!err)
				err = gens_drain(s, out, nc);
			t[3][f][r] = (bench_now_us() - t0) * 1e-3;
		}
	}
	if (err) {
		fprintf(stderr, "gens: %s\n", strerror(-err));
		return err;
	}
	for (int f = 0; f < 2; f++) {
		double med[4];

		for (int k = 0; k < 4; k++)
			med[k] = bench_median(t[k][f], o->rounds);
		if (o->json)
			printf("{\"bench\":\"gens\",\"flags\":\"%s\",\"gen_cover\":%s,"
			       "\"scan_threads\":\"%s\",\"span_threads\":%d,\"size_mib\":%llu,"
			       "\"spans\":%u,\"written_every\":%u,\"rounds\":%u,\"spans_ms\":%.3f,"
			       "\"each_ms\":%.3f,\"whole_ms\":%.3f,\"harvest_ms\":%.3f}\n",
			       f ? "peek" : "take", cover, threads, span_threads,
			       (unsigned long long)o->size_mib,
			       o->spans, o->every, o->rounds, med[0], med[1], med[2], med[3]);
		else
			printf("gens %s cover=%s threads=%-7s span-threads=%d spans %7.3f  each %7.3f"
			       "  whole %7.3f  harvest %7.3f ms\n", f ? "peek" : "take", cover,
			       threads, span_threads, med[0], med[1], med[2], med[3]);
	}
	fflush(stdout);
	hm_space_free(s);
	return 0;
}

static void gens_usage(FILE *f)
{
	fprintf(f, "usage: hmirror-bench gens [--json] [--size MiB (1536)] [--spans N (8000)]\n"
		   "       [--every N (7)] [--rounds N (9)]\n");
}

int bench_gens(int argc, char **argv)
{
	static const struct option lo[] = {
		{ "json", no_argument, NULL, 'j' },
		{ "size", required_argument, NULL, 's' },
		{ "spans", required_argument, NULL, 'n' },
		{ "every", required_argument, NULL, 'e' },
		{ "rounds", required_argument, NULL, 'r' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	/* the third way: a call a span, the spans on the scan threads */
	static const char *const covers[] = { "0", "1", "0" }, *const threads[] = { "1", NULL };
	struct gens_opts o = { .size_mib = 1536, .spans = 8000, .every = 7, .rounds = 9 };
	const char *why = NULL;
	int c, bad = 0;

	while ((c = getopt_long(argc, argv, "", lo, NULL)) != -1) {
		switch (c) {
		case 'j': o.json = true; break;
		case 's': o.size_mib = strtoull(optarg, NULL, 0); break;
		case 'n': o.spans = (unsigned)strtoul(optarg, NULL, 0); break;
		case 'e': o.every = (unsigned)strtoul(optarg, NULL, 0); break;
		case 'r': o.rounds = (unsigned)strtoul(optarg, NULL, 0); break;
		case 'h': gens_usage(stdout); return 0;
		default: gens_usage(stderr); return 1;
		}
	}
	if (!o.size_mib || o.size_mib > (1u << 20) || !o.spans || !o.every || !o.rounds ||
	    o.rounds > 1000 || ((o.size_mib << 20) >> 12) / o.spans < SPAN_CHUNKS) {
		fprintf(stderr, "gens: --spans of %d chunks must fit --size; --every, --rounds "
				"(1-1000) at least 1\n", SPAN_CHUNKS);
		return 1;
	}
	c = hm_backend_probe(HM_BACKEND_UFFD_ASYNC, &why);
	if (c) {
		fprintf(stderr, "gens: uffd-async unavailable: %s (%s)\n", why, strerror(-c));
		return 1;
	}
	for (int i = 0; i < 3; i++) {
		for (int k = 0; k < 2; k++) {
			pid_t pid;
			int st;

			fflush(stdout);
			pid = fork();
			if (pid < 0)
				return 1;
			if (!pid) {
				setenv("HMIRROR_GEN_COVER", covers[i], 1);
				setenv("HMIRROR_SPAN_THREADS", i == 2 ? "1" : "0", 1);
				if (threads[k])
					setenv("HMIRROR_SCAN_THREADS", threads[k], 1);
				else
					unsetenv("HMIRROR_SCAN_THREADS");
				_exit(gens_config(&o, covers[i], threads[k] ? threads[k] : "default",
						  i == 2) ? 1 : 0);
			}
			if (waitpid(pid, &st, 0) < 0 || !WIFEXITED(st) || WEXITSTATUS(st))
				bad = 1;
		}
	}
	return bad;
}
