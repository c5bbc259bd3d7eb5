// SPDX-License-Identifier: GPL-2.0
/*
 * hmirror-bench gmap [--space-gib G] [--mappings M] [--rounds R] [--n N]
 *                    [--json]
 *
 * The guest GPU address space of the in-process engine (hm_engine_map()),
 * the figures of issue #15, on the device at hand:
 *
 *   residency  a G GiB space (default 16), added and mapped whole but never
 *              touched: the time to add it, the bytes imported (none:
 *              import is lazy), the guest pages resident (mincore() over
 *              its device view) and the process's RSS growth (the
 *              engine's table, marks and mapping state), against the
 *              G GiB an eager import would make resident;
 *   touch      then one 64 KiB chunk in the middle of the space mapped
 *              alone and a dispatch boundary (hm_engine_prefetch()): the
 *              piece it imports, how long that took, the guest pages
 *              resident and the RSS growth after it (a driver that pins
 *              imports, NVIDIA, makes the piece resident);
 *   map/unmap  64 KiB mapped, then unmapped, among M mappings of 64 KiB
 *              (default 4,096; every other 64 KiB of guest space), median
 *              of R rounds of N pairs; the baseline is the CPU side of the
 *              same remap, an mmap(MAP_FIXED) and munmap() of 64 KiB of a
 *              memfd, timed the same way.  Page allocation on first touch
 *              is not counted (nothing is touched).
 *
 * Checked: nothing imported and no guest page resident before the touch,
 * map and unmap under 50 us (the bound); the exit status is 1
 * otherwise.
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

#include <hmirror/engine.h>
#include <hmirror/vkctx.h>
#include <hmirror/watch.h>

#include "common.h"

#define CHUNK		(64ull << 10)
#define GUEST_WHOLE	(1ull << 40)    /* where the whole space is mapped */
#define BOUND_NS	50000.0

static long rss_kib(void)
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

/* guest pages resident in [p, p + size), a GiB of mincore() at a time */
static int resident_pages(void *p, uint64_t size, uint64_t *ret)
{
	const uint64_t step = 1ull << 30, page = (uint64_t)sysconf(_SC_PAGESIZE);
	unsigned char *vec = malloc(step / page);
	uint64_t n = 0;

	if (!vec)
		return -ENOMEM;
	for (uint64_t off = 0; off < size; off += step) {
		uint64_t len = size - off < step ? size - off : step;

		if (mincore((char *)p + off, len, vec) < 0) {
			free(vec);
			return -errno;
		}
		for (uint64_t i = 0; i < (len + page - 1) / page; i++)
			n += vec[i] & 1;
	}
	free(vec);
	*ret = n;
	return 0;
}

struct figures {
	uint64_t space_bytes, guest_pages;
	uint64_t import_add, import_map;        /* bytes imported after add, after the map */
	uint64_t touch_import, touch_pages;     /* imported, resident after the touch */
	long rss_add_kib, rss_map_kib, rss_touch_kib;
	double add_us, map_whole_us, touch_us;
	double map_ns, unmap_ns, map_min_ns, unmap_min_ns;  /* medians, minima */
	double mmap_ns, munmap_ns;                          /* the baseline */
};

/* the baseline: the CPU side of one remap of 64 KiB among M mappings */
static int baseline(unsigned mappings, unsigned rounds, unsigned n, struct figures *f)
{
	double *tm = calloc(rounds, sizeof(double)), *tu = calloc(rounds, sizeof(double));
	size_t span = (size_t)2 * mappings * CHUNK;
	int fd = memfd_create("hmirror-bench-gmap", MFD_CLOEXEC), err = 0;
	char *base = MAP_FAILED;

	if (fd < 0 || !tm || !tu || ftruncate(fd, (off_t)(mappings * CHUNK)) < 0) {
		err = -ENOMEM;
		goto out;
	}
	base = mmap(NULL, span, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	if (base == MAP_FAILED) {
		err = -errno;
		goto out;
	}
	for (unsigned i = 0; i < mappings; i++)
		if (mmap(base + 2 * i * CHUNK, CHUNK, PROT_READ | PROT_WRITE,
			 MAP_SHARED | MAP_FIXED, fd, (off_t)(i * CHUNK)) == MAP_FAILED) {
			err = -errno;
			goto out;
		}
	for (unsigned r = 0; r < rounds && !err; r++) {
		double m = 0, u = 0;

		for (unsigned k = 0; k < n; k++) {
			char *g = base + (2 * (size_t)(k % mappings) + 1) * CHUNK;
			double t0 = bench_now_ns(), t1;

			if (mmap(g, CHUNK, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_FIXED, fd,
				 (off_t)((k % mappings) * CHUNK)) == MAP_FAILED) {
				err = -errno;
				break;
			}
			t1 = bench_now_ns();
			/* back to the reservation, as unmapped guest space is */
			if (mmap(g, CHUNK, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED |
				 MAP_NORESERVE, -1, 0) == MAP_FAILED) {
				err = -errno;
				break;
			}
			m += t1 - t0;
			u += bench_now_ns() - t1;
		}
		tm[r] = m / n;
		tu[r] = u / n;
	}
	f->mmap_ns = bench_pct(tm, rounds, 0.5);
	f->munmap_ns = bench_pct(tu, rounds, 0.5);
out:
	if (base != MAP_FAILED)
		munmap(base, span);
	if (fd >= 0)
		close(fd);
	free(tm);
	free(tu);
	return err;
}

static int measure(struct hm_engine *e, struct hm_space *s, uint32_t id, unsigned mappings,
		   unsigned rounds, unsigned n, struct figures *f)
{
	double *tm = calloc(rounds, sizeof(double)), *tu = calloc(rounds, sizeof(double));
	int err = 0;

	if (!tm || !tu) {
		err = -ENOMEM;
		goto out;
	}
	for (uint64_t i = 0; i < mappings && !err; i++)
		err = hm_engine_map(e, id, i * CHUNK, CHUNK, 2 * i * CHUNK, 0);
	for (unsigned r = 0; r < rounds && !err; r++) {
		double m = 0, u = 0;

		for (unsigned k = 0; k < n; k++) {
			uint64_t g = (2 * (uint64_t)(k % mappings) + 1) * CHUNK;
			uint64_t off = ((uint64_t)k * CHUNK) % f->space_bytes;
			double t0 = bench_now_ns(), t1;

			err = hm_engine_map(e, id, off, CHUNK, g, 0);
			t1 = bench_now_ns();
			if (!err)
				err = hm_engine_unmap(e, g, CHUNK);
			if (err)
				break;
			m += t1 - t0;
			u += bench_now_ns() - t1;
		}
		tm[r] = m / n;
		tu[r] = u / n;
	}
	if (!err)
		err = hm_engine_unmap(e, 0, 2 * (uint64_t)mappings * CHUNK);
	f->map_ns = bench_pct(tm, rounds, 0.5);
	f->unmap_ns = bench_pct(tu, rounds, 0.5);
	f->map_min_ns = tm[0];          /* sorted by bench_pct(, 0.5) */
	f->unmap_min_ns = tu[0];
out:
	free(tm);
	free(tu);
	return err;
}

static uint64_t imported(struct hm_engine *e)
{
	struct hm_engine_stats st = { 0 };

	hm_engine_stats(e, &st);
	return st.import_bytes;
}

/* one chunk mid-space mapped alone, then a dispatch boundary: what it imports */
static int touch(struct hm_engine *e, uint32_t id, void *view, long rss0, struct figures *f)
{
	uint64_t off = f->space_bytes / 2 + 3 * CHUNK;
	double t0;
	int err;

	err = hm_engine_map(e, id, off, CHUNK, GUEST_WHOLE, 0);
	if (err)
		return err;
	t0 = bench_now_ns();
	err = hm_engine_prefetch(e);
	f->touch_us = (bench_now_ns() - t0) / 1e3;
	if (err < 0)
		return err;
	f->touch_import = imported(e);
	f->rss_touch_kib = rss_kib() - rss0;
	err = resident_pages(view, f->space_bytes, &f->touch_pages);
	if (!err)
		err = hm_engine_unmap(e, GUEST_WHOLE, CHUNK);
	return err;
}

int bench_gmap(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "space-gib", required_argument, NULL, 'g' },
		{ "mappings", required_argument, NULL, 'm' },
		{ "rounds", required_argument, NULL, 'r' },
		{ "n", required_argument, NULL, 'n' },
		{ "json", no_argument, NULL, 'j' },
		{ "help", no_argument, NULL, 'h' },
		{ 0 }
	};
	struct hm_vk_params vp = { .validation = 0 };
	struct hm_engine_params ep = { .chunk_shift = 16, .flags = HM_ENGINE_NO_TIMESTAMPS };
	struct hm_space_params sp = { .chunk_shift = 16 };
	unsigned gib = 16, mappings = 4096, rounds = 7, n = 1000;
	struct figures f = { 0 };
	struct hm_engine *e = NULL;
	struct hm_space *s = NULL;
	struct hm_vk *vk = NULL;
	bool json = false, ok;
	const char *what = "";
	void *view;
	uint32_t id;
	long rss0;
	double t0;
	int c, err;

	while ((c = getopt_long(argc, argv, "g:m:r:n:jh", opts, NULL)) != -1) {
		switch (c) {
		case 'g': gib = (unsigned)atoi(optarg); break;
		case 'm': mappings = (unsigned)atoi(optarg); break;
		case 'r': rounds = (unsigned)atoi(optarg); break;
		case 'n': n = (unsigned)atoi(optarg); break;
		case 'j': json = true; break;
		default:
			fprintf(c == 'h' ? stdout : stderr,
				"usage: hmirror-bench gmap [--space-gib G] [--mappings M] "
				"[--rounds R] [--n N] [--json]\n");
			return c == 'h' ? 0 : 1;
		}
	}
	if (!gib || !mappings || !rounds || !n || (uint64_t)mappings * CHUNK > (uint64_t)gib << 30) {
		fprintf(stderr, "hmirror-bench gmap: M x 64 KiB must fit the G GiB space\n");
		return 1;
	}
	f.space_bytes = sp.size = (uint64_t)gib << 30;
	err = hm_vk_new(&vp, &vk);
	what = "hm_vk_new";
	if (!err) {
		err = hm_engine_new(vk, &ep, &e);
		what = "hm_engine_new";
	}
	if (!err) {
		err = hm_space_new(&sp, &s);
		what = "hm_space_new";
	}
	if (err)
		goto out;
	rss0 = rss_kib();
	t0 = bench_now_ns();
	err = hm_engine_add_space(e, s, HM_ENGINE_UNMAPPED, &id);
	what = "hm_engine_add_space";
	if (err)
		goto out;
	f.add_us = (bench_now_ns() - t0) / 1e3;
	f.rss_add_kib = rss_kib() - rss0;
	f.import_add = imported(e);
	t0 = bench_now_ns();
	err = hm_engine_map(e, id, 0, sp.size, GUEST_WHOLE, 0);
	what = "hm_engine_map (whole space)";
	if (err)
		goto out;
	f.map_whole_us = (bench_now_ns() - t0) / 1e3;
	f.rss_map_kib = rss_kib() - rss0 - f.rss_add_kib;
	f.import_map = imported(e);
	what = "mincore";
	err = hm_space_device_view(s, &view);
	if (!err)
		err = resident_pages(view, sp.size, &f.guest_pages);
	if (!err) {
		what = "map/unmap";
		err = hm_engine_unmap(e, GUEST_WHOLE, sp.size);
	}
	if (!err)
		err = measure(e, s, id, mappings, rounds, n, &f);
	if (!err) {
		what = "touch (one chunk, a dispatch boundary)";
		err = touch(e, id, view, rss0, &f);
	}
	if (!err) {
		what = "baseline (mmap)";
		err = baseline(mappings, rounds, n, &f);
	}
out:
	if (err) {
		fprintf(stderr, "hmirror-bench gmap: %s: %s\n", what, strerror(-err));
	} else {
		ok = !f.guest_pages && !f.import_add && !f.import_map && f.map_ns < BOUND_NS &&
		     f.unmap_ns < BOUND_NS;
		if (json)
			printf("{\"bench\":\"gmap\",\"device\":\"%s\",\"backend\":\"%s\","
			       "\"space_bytes\":%llu,\"guest_pages_resident\":%llu,"
			       "\"rss_add_kib\":%ld,\"rss_map_kib\":%ld,\"add_us\":%.1f,"
			       "\"map_whole_us\":%.1f,\"import_bytes_add\":%llu,"
			       "\"import_bytes_map\":%llu,\"touch_import_bytes\":%llu,"
			       "\"touch_us\":%.1f,\"touch_guest_pages_resident\":%llu,"
			       "\"rss_touch_kib\":%ld,\"mappings\":%u,\"rounds\":%u,\"n\":%u,"
			       "\"map_ns\":%.0f,\"unmap_ns\":%.0f,\"map_min_ns\":%.0f,"
			       "\"unmap_min_ns\":%.0f,\"mmap_ns\":%.0f,\"munmap_ns\":%.0f,"
			       "\"map_ratio\":%.2f,\"unmap_ratio\":%.2f,\"ok\":%s}\n",
			       vk->props.deviceName, hm_backend_name(hm_space_backend(s)),
			       (unsigned long long)f.space_bytes,
			       (unsigned long long)f.guest_pages, f.rss_add_kib, f.rss_map_kib,
			       f.add_us, f.map_whole_us, (unsigned long long)f.import_add,
			       (unsigned long long)f.import_map,
			       (unsigned long long)f.touch_import, f.touch_us,
			       (unsigned long long)f.touch_pages, f.rss_touch_kib,
			       mappings, rounds, n, f.map_ns, f.unmap_ns,
			       f.map_min_ns, f.unmap_min_ns, f.mmap_ns, f.munmap_ns,
			       f.map_ns / f.mmap_ns, f.unmap_ns / f.munmap_ns, ok ? "true" : "false");
		else
			printf("gmap: %s, backend %s\n"
			       "  residency: %u GiB space added in %.1f us and mapped whole in "
			       "%.1f us, untouched: %llu guest pages resident (eager: %llu); "
			       "RSS +%ld KiB at add, +%ld KiB at map; imported %llu B at add, "
			       "%llu B at map\n"
			       "  touch: one 64 KiB chunk mapped, a dispatch boundary imported "
			       "%.1f MiB in %.1f us; %llu guest pages resident, RSS +%ld KiB\n"
			       "  64 KiB among %u mappings, median of %u rounds of %u (min):\n"
			       "    map    %8.2f us (%.2f)   mmap(MAP_FIXED) %6.2f us  %.2fx\n"
			       "    unmap  %8.2f us (%.2f)   munmap          %6.2f us  %.2fx\n"
			       "  %s: nothing imported or resident untouched, map and unmap "
			       "under %.0f us\n",
			       vk->props.deviceName, hm_backend_name(hm_space_backend(s)), gib,
			       f.add_us, f.map_whole_us, (unsigned long long)f.guest_pages,
			       (unsigned long long)(f.space_bytes / (uint64_t)sysconf(_SC_PAGESIZE)),
			       f.rss_add_kib, f.rss_map_kib, (unsigned long long)f.import_add,
			       (unsigned long long)f.import_map, f.touch_import / 1048576.0,
			       f.touch_us, (unsigned long long)f.touch_pages, f.rss_touch_kib,
			       mappings, rounds, n,
			       f.map_ns / 1e3, f.map_min_ns / 1e3, f.mmap_ns / 1e3,
			       f.map_ns / f.mmap_ns, f.unmap_ns / 1e3, f.unmap_min_ns / 1e3,
			       f.munmap_ns / 1e3, f.unmap_ns / f.munmap_ns, ok ? "ok" : "NOT MET",
			       BOUND_NS / 1e3);
		if (!ok)
			err = -ERANGE;
	}
	if (e && s)
		hm_engine_remove_space(e, id);
	hm_engine_free(e);
	hm_space_free(s);
	hm_vk_free(vk);
	return err ? 1 : 0;
}
