// SPDX-License-Identifier: GPL-2.0
/*
 * hmirror-bench guards: the cost of write-watch guards, for every watch
 * backend, through libhmirror's watch API, in one run:
 *
 *   arm_us            hm_space_arm() of the whole space (pages resident)
 *   harvest_empty_us  hm_space_harvest() with nothing written
 *   trip_ns           first store to K armed, resident, scattered pages: the
 *                     median of the K stores, each timed on its own
 *   trip_mean_ns      the same K stores: total time / K (carries preemption)
 *   vmas              lines of /proc/self/maps after the K trips
 *   harvest_us        hm_space_harvest() of the K written chunks
 *   store_ns          the same K stores to the pages once unarmed (baseline)
 *   take_us           hm_space_harvest_take() of the same K chunks written
 *                     again: the written set taken, nothing re-armed
 *                     (backends with HM_CAP_HARVEST_TAKE; else -1)
 *   arm_k_us          then hm_space_arm_chunks() of exactly those K chunks, as
 *                     the engine arms what it uploads
 *   pagemap_scan_us / pagemap_scan_empty_us  (uffd-async only)
 *                     one raw PAGEMAP_SCAN (WP_MATCHING, PAGE_IS_WRITTEN) of
 *                     the same space with the same K pages written / none:
 *                     what the kernel costs alone, so that the library's
 *                     own share of harvest_us is visible
 *   pagemap_read_us   (uffd-async only) the same K pages found by a
 *                     PAGEMAP_SCAN that write-protects nothing: the walk
 *                     without the per-PMD TLB flush that WP_MATCHING costs
 *
 * --spin N starts N threads of the same process that spin on the CPU for
 * the whole run, as a GPU driver's threads and a guest's CPU threads keep
 * an emulator's address space live on other CPUs: every TLB flush of the
 * space then reaches them by IPI.  The ratio of pagemap_scan_us with and
 * without them is what a flush costs per CPU.
 *
 * Several rounds (a fresh space each), medians.  Chunks default to one page
 * so that K scattered pages are K trips and K chunks on every backend.
 */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <pthread.h>
#include <time.h>
#include <unistd.h>
#include <sys/ioctl.h>

#include <hmirror/watch.h>

#include "../../lib/uffd_compat.h"
#include "common.h"

int bench_guards(int argc, char **argv);

struct guards_opts {
	uint64_t space_bytes;
	uint64_t written;
	unsigned rounds;
	unsigned chunk_shift;
	unsigned spin;
	bool json;
	bool want[HM_BACKEND_COUNT];
};

struct guards_round {
	double arm_us, harvest_empty_us, trip_ns, harvest_us, store_ns;
	double pagemap_scan_us, pagemap_scan_empty_us, trip_mean_ns, take_us, arm_k_us;
	double pagemap_read_us;
	int vmas, vmas_before;
	size_t reported;
};

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

/* harvest everything recorded; returns the count or -errno */
static long harvest_all(struct hm_space *s, uint64_t *out, size_t cap)
{
	size_t total = 0;
	bool more = true;

	while (more) {
		size_t n = 0;
		int err = hm_space_harvest(s, out + total, cap - total, &n, &more);

		if (err)
			return err;
		total += n;
		if (total == cap)
			break;
	}
	return (long)total;
}

static volatile bool spin_stop;

static void *spin_thread(void *arg)
{
	(void)arg;
	while (!spin_stop)
		__asm__ __volatile__("" ::: "memory");
	return NULL;
}

/* one raw PAGEMAP_SCAN over [addr, addr+len), vec of cap; WP_MATCHING
   write-protects what it reports, else it only reads */
static double raw_scan_us(int pm, void *addr, uint64_t len, struct hm_page_region *vec,
			  size_t cap, bool wp, long *ret_regions)
{
	struct hm_pm_scan_arg a = {
		.size = sizeof(a),
		.flags = wp ? PM_SCAN_WP_MATCHING | PM_SCAN_CHECK_WPASYNC : 0,
		.start = (uintptr_t)addr,
		.end = (uintptr_t)addr + len,
		.vec = (uintptr_t)vec,
		.vec_len = cap,
		.category_mask = PAGE_IS_WRITTEN,
		.return_mask = PAGE_IS_WRITTEN,
	};
	double t0 = bench_now_us();
	long n = ioctl(pm, HM_PAGEMAP_SCAN, &a);
	double t = bench_now_us() - t0;

	*ret_regions = n;
	return t;
}

static int guards_round(const struct guards_opts *o, enum hm_backend b, uint64_t *out,
			struct hm_page_region *vec, double *each, struct guards_round *r)
{
	struct hm_space_params p = {
		.size = o->space_bytes, .chunk_shift = o->chunk_shift,
		.flags = HM_SPACE_POPULATE, .backend = b,
	};
	long pg = sysconf(_SC_PAGESIZE);
	uint64_t pages = o->space_bytes / (uint64_t)pg;
	uint64_t stride = pages / o->written;
	uint64_t nr_chunks;
	struct hm_space *s;
	volatile uint8_t *m;
	double t0;
	long got, n;
	int err, pm = -1;

	err = hm_space_new(&p, &s);
	if (err)
		return err;
	m = hm_space_addr(s);
	nr_chunks = hm_space_nr_chunks(s);
	/* resident pages with PTEs: a trip is a write-protect fault, not a
	   missing-page fault */
	for (uint64_t i = 0; i < pages; i++)
		m[i * (uint64_t)pg] = 1;
	/* baseline: plain stores to the same scattered pages, writable */
	t0 = bench_now_us();
	for (uint64_t i = 0; i < o->written; i++)
		m[i * stride * (uint64_t)pg + 8] = (uint8_t)i;
	r->store_ns = (bench_now_us() - t0) * 1e3 / (double)o->written;

	t0 = bench_now_us();
	err = hm_space_arm(s, 0, nr_chunks);
	r->arm_us = bench_now_us() - t0;
	if (err)
		goto out;
	/* warm-up cycle: the library's per-chunk state is paged in lazily on
	   first use; measure the steady state */
	for (uint64_t i = 0; i < o->written; i++)
		m[i * stride * (uint64_t)pg + 4] = (uint8_t)i;
	got = harvest_all(s, out, nr_chunks);
	if (got < 0) {
		err = (int)got;
		goto out;
	}
	if (b == HM_BACKEND_UFFD_ASYNC)
		pm = open("/proc/self/pagemap", O_RDONLY | O_CLOEXEC);
	r->pagemap_scan_us = r->pagemap_scan_empty_us = r->pagemap_read_us = -1;
	if (pm >= 0)
		r->pagemap_scan_empty_us = raw_scan_us(pm, (void *)m, o->space_bytes, vec,
						       o->written + 1, true, &n);
	t0 = bench_now_us();
	got = harvest_all(s, out, nr_chunks);
	r->harvest_empty_us = bench_now_us() - t0;
	if (got < 0) {
		err = (int)got;
		goto out;
	}
	r->vmas_before = count_vmas();
	/* each trip timed on its own: the median is what a trip costs, the
	   mean also carries preemption by whatever else runs on the machine */
	t0 = bench_now_us();
	for (uint64_t i = 0; i < o->written; i++) {
		double t1 = bench_now_us();

		m[i * stride * (uint64_t)pg + 16] = (uint8_t)i;
		each[i] = (bench_now_us() - t1) * 1e3;
	}
	r->trip_mean_ns = (bench_now_us() - t0) * 1e3 / (double)o->written;
	r->trip_ns = bench_median(each, (unsigned)o->written);
	r->vmas = count_vmas();
	t0 = bench_now_us();
	got = harvest_all(s, out, nr_chunks);
	r->harvest_us = bench_now_us() - t0;
	if (got < 0) {
		err = (int)got;
		goto out;
	}
	r->reported = (size_t)got;
	r->take_us = r->arm_k_us = -1;
	if (hm_space_caps(s) & HM_CAP_HARVEST_TAKE) {
		size_t k = 0, total = 0;
		bool more = true;

		for (uint64_t i = 0; i < o->written; i++)
			m[i * stride * (uint64_t)pg + 32] = (uint8_t)i;
		t0 = bench_now_us();
		while (more && total < nr_chunks) {
			err = hm_space_harvest_take(s, out + total, nr_chunks - total, &k, &more);
			if (err)
				goto out;
			total += k;
		}
		r->take_us = bench_now_us() - t0;
		if (total != r->reported) {
			err = -EIO;
			goto out;
		}
		t0 = bench_now_us();
		err = hm_space_arm_chunks(s, out, total);
		r->arm_k_us = bench_now_us() - t0;
		if (err)
			goto out;
	}
	if (pm >= 0) {
		/* the same K pages written again, harvested by PAGEMAP_SCAN alone */
		for (uint64_t i = 0; i < o->written; i++)
			m[i * stride * (uint64_t)pg + 24] = (uint8_t)i;
		/* found without write-protecting (they stay written), then
		   found and write-protected */
		r->pagemap_read_us = raw_scan_us(pm, (void *)m, o->space_bytes, vec,
						 o->written + 1, false, &n);
		if (n != (long)o->written && o->chunk_shift == 12 && stride > 1)
			err = -EIO;
		r->pagemap_scan_us = raw_scan_us(pm, (void *)m, o->space_bytes, vec,
						 o->written + 1, true, &n);
		if (n != (long)o->written && o->chunk_shift == 12 && stride > 1)
			err = -EIO;	/* the baseline did not see the K pages */
	}
out:
	if (pm >= 0)
		close(pm);
	hm_space_free(s);
	return err;
}

static int parse_backends(const char *list, bool *want)
{
	char *dup = strdup(list), *save = NULL, *tok;
	int err = 0;

	if (!dup)
		return -ENOMEM;
	memset(want, 0, sizeof(bool) * HM_BACKEND_COUNT);
	for (tok = strtok_r(dup, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
		enum hm_backend b;

		if (!strcmp(tok, "all")) {
			for (unsigned i = 1; i < HM_BACKEND_COUNT; i++)
				want[i] = true;
			continue;
		}
		if (hm_backend_from_name(tok, &b) || b == HM_BACKEND_AUTO) {
			err = -EINVAL;
			break;
		}
		want[b] = true;
	}
	free(dup);
	return err;
}

static void guards_usage(FILE *f)
{
	fprintf(f, "usage: hmirror-bench guards [--backend LIST] [--space-bytes N] [--written K]\n"
		   "                            [--rounds R] [--chunk-shift S] [--spin N] [--json]\n"
		   "  LIST: comma-separated of kmod,uffd-async,uffd-sync,mprotect (default all)\n"
		   "  defaults: --space-bytes 268435456 --written 4096 --rounds 5 --chunk-shift 12\n");
}

int bench_guards(int argc, char **argv)
{
	static const struct option lo[] = {
		{ "backend", required_argument, NULL, 'b' },
		{ "space-bytes", required_argument, NULL, 's' },
		{ "written", required_argument, NULL, 'k' },
		{ "rounds", required_argument, NULL, 'r' },
		{ "chunk-shift", required_argument, NULL, 'c' },
		{ "spin", required_argument, NULL, 'p' },
		{ "json", no_argument, NULL, 'j' },
		{ "help", no_argument, NULL, 'h' },
		{ 0 }
	};
	struct guards_opts o = {
		.space_bytes = 256ull << 20, .written = 4096, .rounds = 5, .chunk_shift = 12,
	};
	double trip[HM_BACKEND_COUNT] = { 0 }, harv[HM_BACKEND_COUNT] = { 0 }, scan = -1;
	double take[HM_BACKEND_COUNT] = { 0 }, armk[HM_BACKEND_COUNT] = { 0 };
	struct hm_page_region *vec;
	pthread_t spinner[1024];
	unsigned spinning = 0;
	uint64_t *out;
	double *each;
	int opt, rc = 0;

	parse_backends("all", o.want);
	optind = 1;
	while ((opt = getopt_long(argc, argv, "b:s:k:r:c:p:jh", lo, NULL)) != -1) {
		switch (opt) {
		case 'b':
			if (parse_backends(optarg, o.want)) {
				fprintf(stderr, "guards: bad --backend '%s'\n", optarg);
				return 2;
			}
			break;
		case 's': o.space_bytes = strtoull(optarg, NULL, 0); break;
		case 'k': o.written = strtoull(optarg, NULL, 0); break;
		case 'r': o.rounds = (unsigned)strtoul(optarg, NULL, 0); break;
		case 'c': o.chunk_shift = (unsigned)strtoul(optarg, NULL, 0); break;
		case 'p': o.spin = (unsigned)strtoul(optarg, NULL, 0); break;
		case 'j': o.json = true; break;
		case 'h': guards_usage(stdout); return 0;
		default: guards_usage(stderr); return 2;
		}
	}
	if (!o.rounds || o.rounds > 1000 || !o.written || o.spin > 1024 ||
	    o.written > o.space_bytes / (uint64_t)sysconf(_SC_PAGESIZE)) {
		guards_usage(stderr);
		return 2;
	}
	out = calloc(o.space_bytes >> o.chunk_shift, sizeof(*out));
	vec = calloc(o.written + 1, sizeof(*vec));
	each = calloc(o.written, sizeof(*each));
	if (!out || !vec || !each) {
		free(out);
		free(vec);
		free(each);
		return 1;
	}
	spin_stop = false;
	while (spinning < o.spin && !pthread_create(&spinner[spinning], NULL, spin_thread, NULL))
		spinning++;
	if (spinning < o.spin) {
		fprintf(stderr, "guards: started %u of %u spinning threads\n", spinning, o.spin);
		rc = 1;
		goto stop;
	}
	if (!o.json)
		printf("%-10s %12s %8s %10s %10s %11s %9s %8s %8s %9s %9s %9s %9s %9s %5s\n", "backend",
		       "space_bytes", "written", "arm_us", "trip_ns", "h_empty_us", "harv_us", "vmas",
		       "store_ns", "scan_us", "scan_e_us", "take_us", "arm_k_us", "read_us", "spin");
	for (unsigned b = 1; b < HM_BACKEND_COUNT; b++) {
		static double v[11][1000];
		int vm[1000];
		const char *why = "";
		struct guards_round r;
		int err;

		if (!o.want[b])
			continue;
		err = hm_backend_probe((enum hm_backend)b, &why);
		if (err) {
			if (o.json)
				printf("{\"backend\":\"%s\",\"available\":false,\"reason\":\"%s\"}\n",
				       hm_backend_name(b), why);
			else
				printf("%-10s unavailable: %s\n", hm_backend_name(b), why);
			continue;
		}
		for (unsigned i = 0; i < o.rounds; i++) {
			memset(&r, 0, sizeof(r));
			err = guards_round(&o, (enum hm_backend)b, out, vec, each, &r);
			if (err)
				break;
			if (r.reported != o.written && o.chunk_shift == 12)
				err = -EIO;
			v[0][i] = r.arm_us;
			v[1][i] = r.harvest_empty_us;
			v[2][i] = r.trip_ns;
			v[3][i] = r.harvest_us;
			v[4][i] = r.store_ns;
			v[5][i] = r.pagemap_scan_us;
			v[6][i] = r.pagemap_scan_empty_us;
			v[7][i] = r.trip_mean_ns;
			v[8][i] = r.take_us;
			v[9][i] = r.arm_k_us;
			v[10][i] = r.pagemap_read_us;
			vm[i] = r.vmas;
		}
		if (err) {
			fprintf(stderr, "guards: %s: %s\n", hm_backend_name(b), strerror(-err));
			rc = 1;
			continue;
		}
		double med[11];

		for (unsigned k = 0; k < 11; k++)
			med[k] = bench_median(v[k], o.rounds);
		trip[b] = med[2];
		harv[b] = med[3];
		take[b] = med[8];
		armk[b] = med[9];
		if (b == HM_BACKEND_UFFD_ASYNC)
			scan = med[5];
		if (o.json) {
			printf("{\"backend\":\"%s\",\"available\":true,\"space_bytes\":%llu,"
			       "\"written\":%llu,\"chunk_shift\":%u,\"rounds\":%u,\"arm_us\":%.1f,"
			       "\"trip_ns\":%.0f,\"harvest_empty_us\":%.1f,\"harvest_us\":%.1f,"
			       "\"vmas\":%d,\"store_ns\":%.1f,\"trip_mean_ns\":%.0f,\"spin\":%u",
			       hm_backend_name(b), (unsigned long long)o.space_bytes,
			       (unsigned long long)o.written, o.chunk_shift, o.rounds, med[0], med[2],
			       med[1], med[3], vm[o.rounds - 1], med[4], med[7], o.spin);
			if (med[5] >= 0)
				printf(",\"pagemap_scan_us\":%.1f,\"pagemap_scan_empty_us\":%.1f,"
				       "\"pagemap_read_us\":%.1f", med[5], med[6], med[10]);
			if (med[8] >= 0)
				printf(",\"take_us\":%.1f,\"arm_k_us\":%.1f", med[8], med[9]);
			printf("}\n");
		} else {
			printf("%-10s %12llu %8llu %10.1f %10.0f %11.1f %9.1f %8d %8.1f", hm_backend_name(b),
			       (unsigned long long)o.space_bytes, (unsigned long long)o.written, med[0],
			       med[2], med[1], med[3], vm[o.rounds - 1], med[4]);
			printf(" %9.1f %9.1f", med[5], med[6]);
			printf(" %9.1f %9.1f %9.1f %5u\n", med[8], med[9], med[10], o.spin);
		}
		fflush(stdout);
	}
	/* the targets, as ratios of this run */
	if (trip[HM_BACKEND_UFFD_ASYNC] > 0 && trip[HM_BACKEND_MPROTECT] > 0) {
		double t = trip[HM_BACKEND_MPROTECT] / trip[HM_BACKEND_UFFD_ASYNC];
		double h = scan > 0 ? harv[HM_BACKEND_UFFD_ASYNC] / scan : -1;

		if (o.json)
			printf("{\"summary\":true,\"mprotect_over_uffd_async_trip\":%.2f,"
			       "\"uffd_async_harvest_over_pagemap_scan\":%.2f}\n", t, h);
		else
			printf("trip: mprotect / uffd-async = %.1fx (target >= 5); "
			       "harvest: uffd-async / raw PAGEMAP_SCAN = %.2f (target ~1)\n", t, h);
	}
	if (trip[HM_BACKEND_KMOD] > 0) {
		for (unsigned b = HM_BACKEND_UFFD_ASYNC; b < HM_BACKEND_COUNT; b++) {
			if (trip[b] <= 0)
				continue;
			if (o.json)
				printf("{\"summary\":true,\"%s_over_kmod_trip\":%.2f,"
				       "\"kmod_harvest_over_%s_harvest\":%.2f}\n", hm_backend_name(b),
				       trip[b] / trip[HM_BACKEND_KMOD], hm_backend_name(b),
				       harv[HM_BACKEND_KMOD] / harv[b]);
			else
				printf("trip: %s / kmod = %.1fx; harvest: kmod / %s = %.2f\n",
				       hm_backend_name(b), trip[b] / trip[HM_BACKEND_KMOD],
				       hm_backend_name(b), harv[HM_BACKEND_KMOD] / harv[b]);
		}
	}
	/* harvest that re-arms nothing against the baselines of this run */
	if (take[HM_BACKEND_KMOD] > 0 && harv[HM_BACKEND_KMOD] > 0) {
		double a = harv[HM_BACKEND_UFFD_ASYNC] > 0 ?
			   take[HM_BACKEND_KMOD] / harv[HM_BACKEND_UFFD_ASYNC] : -1;
		double c = scan > 0 ? take[HM_BACKEND_KMOD] / scan : -1;
		double r = (take[HM_BACKEND_KMOD] + armk[HM_BACKEND_KMOD]) / harv[HM_BACKEND_KMOD];

		if (o.json)
			printf("{\"summary\":true,\"kmod_take_over_uffd_async_harvest\":%.3f,"
			       "\"kmod_take_over_pagemap_scan\":%.3f,"
			       "\"kmod_take_arm_over_kmod_harvest\":%.2f}\n", a, c, r);
		else
			printf("take: kmod take / uffd-async harvest = %.3f, / raw PAGEMAP_SCAN = %.3f "
			       "(target <= 0.2); kmod (take + arm K) / kmod harvest = %.2f (target <= 1)\n",
			       a, c, r);
	}
stop:
	spin_stop = true;
	while (spinning)
		pthread_join(spinner[--spinning], NULL);
	free(out);
	free(vec);
	free(each);
	return rc;
}
