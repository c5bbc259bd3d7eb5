/* SPDX-License-Identifier: GPL-2.0 */
/*
 * What every hmirror-bench subcommand shares: its entry point (main.c's
 * table), the clock and the order statistics of its rounds.
 */
#ifndef HMIRROR_BENCH_COMMON_H
#define HMIRROR_BENCH_COMMON_H
#include <stddef.h>
#include <stdint.h>

/* The subcommands, one file each (tools/bench/<name>.c): argv[0] is the
 * subcommand's name; 0 or an error the subcommand printed. */
int bench_guards(int argc, char **argv);
int bench_lookup(int argc, char **argv);
int bench_mirror(int argc, char **argv);
int bench_dispatch(int argc, char **argv);
int bench_workload(int argc, char **argv);
int bench_stream(int argc, char **argv);
int bench_consumers(int argc, char **argv);
int bench_gmap(int argc, char **argv);
int bench_gens(int argc, char **argv);

/* CLOCK_MONOTONIC in microseconds and in nanoseconds. */
double bench_now_us(void);
double bench_now_ns(void);

/* CLOCK_MONOTONIC in whole nanoseconds. */
uint64_t bench_clock_ns(void);

/* qsort() order of doubles, of uint64_t. */
int bench_cmp_double(const void *a, const void *b);
int bench_cmp_u64(const void *a, const void *b);
/* Sort v[n] and answer v[n / 2] (the upper middle one for an even n). */
uint64_t bench_pct50_u64(uint64_t *v, size_t n);
/* Sort v[n] and answer its median: the middle one, the mean of the two
 * middle ones for an even n; 0 for none. */
double bench_median(double *v, size_t n);
/* Sort v[n] and answer its p-quantile (0 <= p <= 1) by nearest rank,
 * v[round((n - 1) p)]; 0 for none.  bench_pct(v, n, 0.5) is v[n / 2]. */
double bench_pct(double *v, size_t n, double p);

#endif /* HMIRROR_BENCH_COMMON_H */
