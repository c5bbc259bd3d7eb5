// SPDX-License-Identifier: LGPL-2.1-or-later
/*
 * libhmirror watch backend "uffd-async": userfaultfd write-protect with
 * UFFD_FEATURE_WP_ASYNC (Linux 6.7+) and PAGEMAP_SCAN.
 *
 * The space is a memfd mapped MAP_SHARED (MADV_NOHUGEPAGE, so that a
 * written page is a page, not 2 MiB).  Every watched mapping (primary and
 * aliases) is registered with UFFDIO_REGISTER_MODE_WP on one uffd opened
 * with UFFD_USER_MODE_ONLY, which needs no privilege.  Arming is
 * UFFDIO_WRITEPROTECT; on shmem it also installs uffd-wp pte markers over
 * pages that were never faulted, so the first touch of such a page is
 * recorded as well.  A write to an armed page is resolved by the kernel in
 * the fault path (it clears the pte's uffd-wp bit: no message, no thread);
 * kernel writes (read(2), process_vm_writev) go the same way.  A harvest is
 * one PAGEMAP_SCAN per watched mapping (of a long mapping, one a part, the
 * parts on threads at once) with PM_SCAN_WP_MATCHING |
 * PM_SCAN_CHECK_WPASYNC and category PAGE_IS_WRITTEN: it returns the
 * written page runs and write-protects exactly those pages again, atomically
 * under the page-table lock, so a store racing the scan either lands before
 * (reported now) or faults after (reported next time).  The runs are
 * coalesced into chunks here; the library adds nothing proportional to the
 * size of the space.
 *
 * Shared helpers for watch_uffd_sync.c live here too.
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <stdlib.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/syscall.h>

#include "env.h"
#include "uffd_compat.h"
#include "watch_internal.h"

#define HM_SCAN_VEC 4096

struct hm_uffd_async {
	int uffd;
	int pagemap;
	struct hm_page_region vec[HM_SCAN_VEC];
};

/* ---- helpers shared with uffd-sync -------------------------------------- */

int hm_uffd_open(uint64_t features, bool user_only, int *ret_fd, uint64_t *ret_features)
{
	struct uffdio_api api = { .api = UFFD_API, .features = features };
	int flags = O_CLOEXEC | O_NONBLOCK | (user_only ? UFFD_USER_MODE_ONLY : 0);
	int fd = (int)syscall(SYS_userfaultfd, flags);

	if (fd < 0)
		return -errno;
	if (ioctl(fd, UFFDIO_API, &api) < 0) {
		int err = -errno;

		close(fd);
		return err == -EINVAL ? -EOPNOTSUPP : err;
	}
	if ((api.features & features) != features) {
		close(fd);
		return -EOPNOTSUPP;
	}
	*ret_fd = fd;
	if (ret_features)
		*ret_features = api.features;
	return 0;
}

int hm_uffd_register(int uffd, uintptr_t addr, uint64_t len)
{
	struct uffdio_register r = {
		.range = { .start = addr, .len = len },
		.mode = UFFDIO_REGISTER_MODE_WP,
	};

	if (ioctl(uffd, UFFDIO_REGISTER, &r) < 0)
		return -errno;
	return 0;
}

int hm_uffd_wp(int uffd, uintptr_t addr, uint64_t len, bool wp)
{
	struct uffdio_writeprotect w = {
		.range = { .start = addr, .len = len },
		.mode = wp ? UFFDIO_WRITEPROTECT_MODE_WP : 0,
	};

	while (ioctl(uffd, UFFDIO_WRITEPROTECT, &w) < 0) {
		if (errno != EAGAIN && errno != EINTR)
			return -errno;
	}
	return 0;
}

/* ---- probe --------------------------------------------------------------- */

static const uint64_t hm_async_features = UFFD_FEATURE_WP_ASYNC | UFFD_FEATURE_WP_HUGETLBFS_SHMEM;

static int hm_pagemap_scan_works(int pagemap)
{
	struct hm_pm_scan_arg a = { .size = sizeof(a) };

	/* an empty range: 0 on a kernel with PAGEMAP_SCAN, ENOTTY before */
	if (ioctl(pagemap, HM_PAGEMAP_SCAN, &a) < 0)
		return errno == ENOTTY || errno == EINVAL ? -EOPNOTSUPP : -errno;
	return 0;
}

static int hm_uffd_async_probe(const char **ret_reason)
{
	int uffd, pm, err;

	err = hm_uffd_open(hm_async_features, true, &uffd, NULL);
	if (err) {
		*ret_reason = err == -EOPNOTSUPP ?
			"the kernel lacks UFFD_FEATURE_WP_ASYNC on shmem (Linux < 6.7)" :
			err == -ENOSYS ? "no userfaultfd(2) in this kernel" :
			"userfaultfd(UFFD_USER_MODE_ONLY) refused";
		return err == -ENOSYS ? -EOPNOTSUPP : err;
	}
	close(uffd);
	pm = open("/proc/self/pagemap", O_RDONLY | O_CLOEXEC);
	if (pm < 0) {
		*ret_reason = "cannot open /proc/self/pagemap";
		return -errno;
	}
	err = hm_pagemap_scan_works(pm);
	close(pm);
	if (err) {
		*ret_reason = "the kernel lacks the PAGEMAP_SCAN ioctl (Linux < 6.7)";
		return err;
	}
	*ret_reason = "userfaultfd UFFD_FEATURE_WP_ASYNC and PAGEMAP_SCAN available";
	return 0;
}

/* ---- scan ---------------------------------------------------------------- */

/* where a scan puts what it finds: pending (hm_record), or straight into
   the caller's harvest array while it has room (then pending); or, a peek
   (peek != NULL), bits (c - base) of the armed chunks c in [first,
   first + count) that were written, leaving the page tables as they are */
struct hm_sink {
	uint64_t *out;
	size_t cap, n;
	uint64_t *peek, base, first, count;
};

static bool hm_sink_peeks(const struct hm_sink *k)
{
	return k && k->peek;
}

/* one PAGEMAP_SCAN of [start, end) into vec[0..vlen): the written
   runs it found and (wp) write-protected again (>= 0; EINTR and EAGAIN are
   retried) or -errno; *ret_next: where the next one starts, end once the
   range is done.  Without wp the scan only reads the page tables: it
   changes no pte, so it flushes no TLB (a write-protecting scan flushes
   every 2 MiB table it re-protected a page of, an IPI to each CPU the
   process runs on: on the lent H200 a 4,096-page scan took 307 us alone
   and 1,475 us beside 15 busy threads, a read-only one 175 and 123 us) */
static long hm_scan_once(int pagemap, uint64_t start, uint64_t end, bool wp,
			 struct hm_page_region *vec, uint64_t vlen, uint64_t *ret_next)
{
	for (;;) {
		struct hm_pm_scan_arg a = {
			.size = sizeof(a),
			.flags = (wp ? PM_SCAN_WP_MATCHING : 0) | PM_SCAN_CHECK_WPASYNC,
			.start = start,
			.end = end,
			.vec = (uintptr_t)vec,
			.vec_len = vlen,
			.category_mask = PAGE_IS_WRITTEN,
			.return_mask = PAGE_IS_WRITTEN,
		};
		long n = ioctl(pagemap, HM_PAGEMAP_SCAN, &a);

		if (n < 0) {
			if (errno == EINTR || errno == EAGAIN)
				continue;
			return -errno;
		}
		*ret_next = a.walk_end >= end || a.walk_end <= start ? end : a.walk_end;
		return n;
	}
}

/* the written runs v[0..n) of a scan of the mapping at base, in ascending
   order, into chunks: pending (hm_record), or the sink while it has room */
static void hm_scan_runs(struct hm_space *s, uintptr_t base, const struct hm_page_region *v,
			 long n, uint64_t *last, struct hm_sink *k)
{
	for (long i = 0; i < n; i++) {
		uint64_t c0 = (v[i].start - base) >> s->chunk_shift;
		uint64_t c1 = (v[i].end - 1 - base) >> s->chunk_shift;

		for (uint64_t c = c0; c <= c1; c++) {
			if (c == *last || !hm_test_bit(s->armed, c))
				continue;
			*last = c;
			if (hm_sink_peeks(k)) {
				if (c >= k->first && c - k->first < k->count)
					hm_set_bit(k->peek, c - k->base);
			} else if (k && k->n < k->cap) {
				hm_set_bit(s->gdirty, c);
				k->out[k->n++] = c;
			} else {
				hm_record(s, c);
			}
		}
	}
}

/*
 * A scan of a long range is split among threads, each scanning a part
 * with PAGEMAP_SCAN into runs of its own; the calling thread then takes
 * the runs of every part in order, as one scan would have.  The kernel
 * walks page tables at 3-5 ns a page (most of a harvest of a large,
 * little-written space) under the mmap lock taken for reading, so parts
 * can scan at once on several CPUs (on the lent H200 the workload's
 * harvest took 2.2-2.6 ms on four threads, 3.2-3.8 ms on one, write
 * protection included: HMIRROR_SCAN_THREADS=1 in the same device call).
 * A part's runs always have room before its next PAGEMAP_SCAN (the scan
 * re-protects what it reports, so a run it could not store would be a
 * lost write): a part that cannot grow stops before scanning further, and
 * the rest of the range is not touched.  Below HM_SCAN_PAR_MIN bytes, or
 * on one CPU, one thread scans.
 */
#define HM_SCAN_PAR_MIN		(256ull << 20)
#define HM_SCAN_THREADS		4
#define HM_SCAN_THREADS_MAX	8
#define HM_SCAN_PAR_CPUS	4

struct hm_scan_part {
	int pagemap;
	uint64_t start, end;
	struct hm_page_region *runs;
	size_t nr, cap;
	int err;
	pthread_t th;
	bool threaded, wp;
};

static void *hm_scan_part_main(void *arg)
{
	struct hm_scan_part *p = arg;
	uint64_t start = p->start;

	p->err = 0;
	while (start < p->end) {
		long n;

		if (p->cap - p->nr < HM_SCAN_VEC) {
			void *q = realloc(p->runs, (p->cap + HM_SCAN_VEC) * sizeof(*p->runs));

			if (!q) {
				p->err = -ENOMEM;
				break;
			}
			p->runs = q;
			p->cap += HM_SCAN_VEC;
		}
		n = hm_scan_once(p->pagemap, start, p->end, p->wp, p->runs + p->nr, HM_SCAN_VEC,
				 &start);
		if (n < 0) {
			p->err = (int)n;
			break;
		}
		p->nr += (size_t)n;
	}
	return NULL;
}

/*
 * Threads for a scan: HM_SCAN_THREADS where the machine has
 * HM_SCAN_PAR_CPUS CPUs or more, else one; or what HMIRROR_SCAN_THREADS
 * says (1 to HM_SCAN_THREADS_MAX); never more than the CPUs.  On this
 * project's 2-core machine two threads made a harvest that re-protects
 * 1,143 pages of 1.5 GiB take 6.4 ms against 0.45 on one (hmirror-bench
 * gens), and the pass's harvest beside the workload's walk on lavapipe
 * 3.2 against 0.56 ms: each part's flush interrupts the other part's CPU.
 */
static unsigned hm_scan_threads(void)
{
	static unsigned nr;
	static int knob = -1;
	unsigned n = __atomic_load_n(&nr, __ATOMIC_RELAXED);

	if (!n) {
		long c = sysconf(_SC_NPROCESSORS_ONLN);
		unsigned want = hm_env_knob("HMIRROR_SCAN_THREADS", 0, HM_SCAN_THREADS_MAX, &knob);

		n = want ? want : c >= HM_SCAN_PAR_CPUS ? HM_SCAN_THREADS : 1;
		if (c < 1)
			n = 1;
		else if ((long)n > c)
			n = (unsigned)c;
		__atomic_store_n(&nr, n, __ATOMIC_RELAXED);
	}
	return n;
}

/* the parallel scan of [start, end) (a multiple of the chunk);
   -EAGAIN: not worth it (a short range, or one CPU), nothing scanned */
static int hm_scan_parallel(struct hm_space *s, struct hm_uffd_async *u, uintptr_t base,
			    uint64_t start, uint64_t end, struct hm_sink *k)
{
	struct hm_scan_part part[HM_SCAN_THREADS_MAX];
	unsigned nr = hm_scan_threads(), i;
	uint64_t step, last = UINT64_MAX;
	int err = 0;

	if (nr < 2 || end - start < HM_SCAN_PAR_MIN)
		return -EAGAIN;
	step = ((end - start) / nr + (1ull << s->chunk_shift) - 1) &
	       ~((1ull << s->chunk_shift) - 1);
	for (i = 0; i < nr; i++) {
		part[i] = (struct hm_scan_part){
			.pagemap = u->pagemap,
			.start = start + i * step < end ? start + i * step : end,
			.end = start + (i + 1) * step < end ? start + (i + 1) * step : end,
			.wp = !hm_sink_peeks(k),
		};
	}
	for (i = 1; i < nr; i++)
		part[i].threaded = !pthread_create(&part[i].th, NULL, hm_scan_part_main, &part[i]);
	hm_scan_part_main(&part[0]);
	for (i = 1; i < nr; i++) {
		if (part[i].threaded)
			pthread_join(part[i].th, NULL);
		else
			hm_scan_part_main(&part[i]);    /* no thread: here */
	}
	/* every run found is taken, whatever failed: each was re-protected */
	for (i = 0; i < nr; i++) {
		hm_scan_runs(s, base, part[i].runs, (long)part[i].nr, &last, k);
		if (part[i].err && !err)
			err = part[i].err;
		free(part[i].runs);
	}
	return err;
}

/* one PAGEMAP_SCAN over chunks [first, first+count) of the mapping at base
   (repeated only when more runs were written than fit the vector), or its
   parts in parallel */
static int hm_scan_map(struct hm_space *s, struct hm_uffd_async *u, uintptr_t base,
		       uint64_t first, uint64_t count, struct hm_sink *k)
{
	uint64_t start = base + (first << s->chunk_shift);
	uint64_t end = start + (count << s->chunk_shift);
	uint64_t last = UINT64_MAX;
	int err = hm_scan_parallel(s, u, base, start, end, k);

	if (err != -EAGAIN)
		return err;
	while (start < end) {
		long n = hm_scan_once(u->pagemap, start, end, !hm_sink_peeks(k), u->vec, HM_SCAN_VEC,
				      &start);

		if (n < 0)
			return (int)n;
		hm_scan_runs(s, base, u->vec, n, &last, k);
	}
	return 0;
}

static int hm_uffd_async_scan_maps(struct hm_space *s, uint64_t first, uint64_t count,
				   struct hm_sink *k)
{
	struct hm_uffd_async *u = s->priv;

	for (unsigned i = 0; i < HM_SPACE_MAX_MAPS; i++) {
		int err;

		if (!s->maps[i].addr)
			continue;
		err = hm_scan_map(s, u, s->maps[i].addr, first, count, k);
		if (err)
			return err;
	}
	return 0;
}

static int hm_uffd_async_refresh(struct hm_space *s, uint64_t first, uint64_t count)
{
	return hm_uffd_async_scan_maps(s, first, count, NULL);
}

/*
 * Many spans' scans at once (the engine's check after a copy: at the
 * workload's boundary 1,000-1,650 spans over 1.5 GiB, a PAGEMAP_SCAN call
 * each, 1.5-2.7 ms a dispatch on one CPU of the lent H100 hosts).  The
 * spans are cut into consecutive groups of about equal cost, a call
 * counted as HM_SPAN_CALL_PAGES pages, one group a thread; each thread
 * keeps the runs it found with the span they came from, and the calling
 * thread then takes them in order, as the scans one after the other would
 * have (a write-protecting scan re-protected every run it reports: all
 * are taken, whatever failed).
 */
#define HM_SPAN_CALL_PAGES	256
#define HM_SPAN_VEC		256	/* runs a span's PAGEMAP_SCAN call returns at most */

struct hm_span_run {
	struct hm_page_region r;
	uint32_t span;
	uint8_t map;
};

struct hm_span_part {
	struct hm_space *s;
	const struct hm_scan_span *spans;
	size_t from, to;
	bool wp, threaded;
	struct hm_span_run *runs;
	size_t nr, cap;
	int err;
	pthread_t th;
};

static void *hm_span_part_main(void *arg)
{
	struct hm_span_part *p = arg;
	struct hm_uffd_async *u = p->s->priv;
	struct hm_page_region vec[HM_SPAN_VEC];

	for (size_t i = p->from; i < p->to && !p->err; i++) {
		for (unsigned m = 0; m < HM_SPACE_MAX_MAPS && !p->err; m++) {
			uintptr_t base = p->s->maps[m].addr;
			uint64_t start, end;

			if (!base)
				continue;
			start = base + (p->spans[i].first << p->s->chunk_shift);
			end = start + (p->spans[i].count << p->s->chunk_shift);
			while (start < end) {
				long n;

				/* room for what the scan can return, before it
				   re-protects it: a run it could not keep
				   would be a lost write */
				if (p->cap - p->nr < HM_SPAN_VEC) {
					void *q = realloc(p->runs, (p->cap + 4 * HM_SPAN_VEC) *
								   sizeof(*p->runs));

					if (!q) {
						p->err = -ENOMEM;
						break;
					}
					p->runs = q;
					p->cap += 4 * HM_SPAN_VEC;
				}
				n = hm_scan_once(u->pagemap, start, end, p->wp, vec, HM_SPAN_VEC,
						 &start);
				if (n < 0) {
					p->err = (int)n;
					break;
				}
				for (long k = 0; k < n; k++)
					p->runs[p->nr++] = (struct hm_span_run){
						.r = vec[k], .span = (uint32_t)i, .map = (uint8_t)m,
					};
			}
		}
	}
	return NULL;
}

static int hm_uffd_async_scan_spans(struct hm_space *s, const struct hm_scan_span *spans,
				    size_t n, uint64_t *bits)
{
	struct hm_span_part *part;
	unsigned nr = hm_scan_threads(), used = 0;
	uint64_t total = 0, acc = 0;
	size_t i = 0;
	int err = 0;

	if (nr < 2 || n > UINT32_MAX)
		return -EAGAIN;
	part = calloc(nr, sizeof(*part));
	if (!part)
		return -ENOMEM;
	for (size_t k = 0; k < n; k++)
		total += HM_SPAN_CALL_PAGES + (spans[k].count << s->chunk_shift) / 4096;
	/* group t ends where the running cost passes (t + 1) / nr of it */
	for (unsigned t = 0; t < nr && i < n; t++) {
		part[t] = (struct hm_span_part){
			.s = s, .spans = spans, .from = i, .wp = !bits,
		};
		while (i < n && (t == nr - 1 || acc * nr < total * (t + 1))) {
			acc += HM_SPAN_CALL_PAGES + (spans[i].count << s->chunk_shift) / 4096;
			i++;
		}
		part[t].to = i;
		used++;
	}
	for (unsigned t = 1; t < used; t++)
		part[t].threaded = !pthread_create(&part[t].th, NULL, hm_span_part_main, &part[t]);
	hm_span_part_main(&part[0]);
	for (unsigned t = 1; t < used; t++) {
		if (part[t].threaded)
			pthread_join(part[t].th, NULL);
		else
			hm_span_part_main(&part[t]);	/* no thread: here */
	}
	for (unsigned t = 0; t < used; t++) {
		for (size_t k = 0; k < part[t].nr; k++) {
			const struct hm_span_run *r = &part[t].runs[k];
			const struct hm_scan_span *sp = &spans[r->span];
			struct hm_sink sink = {
				.peek = bits, .base = sp->base, .first = sp->first, .count = sp->count,
			};
			uint64_t last = UINT64_MAX;

			hm_scan_runs(s, s->maps[r->map].addr, &r->r, 1, &last, bits ? &sink : NULL);
		}
		if (part[t].err && !err)
			err = part[t].err;
		free(part[t].runs);
	}
	free(part);
	return err;
}

/* the armed chunks c of [first, first+count) written since their last
   refresh, into bits (c - base), by read-only scans: each stays written
   in the page tables, for the next refresh or harvest to report and
   re-protect */
static int hm_uffd_async_peek(struct hm_space *s, uint64_t first, uint64_t count, uint64_t *bits,
			      uint64_t base)
{
	struct hm_sink k = { .peek = bits, .base = base, .first = first, .count = count };

	return hm_uffd_async_scan_maps(s, first, count, &k);
}

/*
 * An mremap of a watched mapping cannot be followed here (no thread reads
 * the userfaultfd's events, and the registration does not move with the
 * mapping without EVENT_REMAP): a harvest that finds the first or the last
 * page of a watched mapping gone refuses with -EFAULT (lock held).
 */
static int hm_uffd_async_maps_present(struct hm_space *s)
{
	long pg = sysconf(_SC_PAGESIZE);
	unsigned char v;

	/* an importer's maps are its exporter's: not ours to look at */
	if (s->imported)
		return 0;
	for (unsigned i = 0; i < HM_SPACE_MAX_MAPS; i++) {
		uintptr_t a = s->maps[i].addr;

		if (a && (mincore((void *)a, (size_t)pg, &v) < 0 ||
			  mincore((void *)(a + s->size - (uint64_t)pg), (size_t)pg, &v) < 0))
			return -EFAULT;
	}
	return 0;
}

static int hm_uffd_async_collect(struct hm_space *s)
{
	int err = hm_uffd_async_maps_present(s);

	return err ? err : hm_uffd_async_refresh(s, 0, s->nr_chunks);
}

/* the common case of a harvest: nothing pending, one watched mapping: the
   scan's runs are ascending and distinct, so they go straight to the
   caller (no pending bookkeeping, no copy); what does not fit is pending */
static int hm_uffd_async_collect_direct(struct hm_space *s, uint64_t *out, size_t cap,
					size_t *ret_n)
{
	struct hm_sink k = { .out = out, .cap = cap };
	int err;

	if (s->nr_pend || s->nr_maps != 1 || !s->maps[0].addr)
		return -EAGAIN;
	err = hm_uffd_async_maps_present(s);
	if (err)
		return err;
	err = hm_scan_map(s, s->priv, s->maps[0].addr, 0, s->nr_chunks, &k);
	*ret_n = k.n;
	return err;
}

/* write-protect chunks [first, first+count) in every watched mapping */
int hm_uffd_wp_maps(struct hm_space *s, int uffd, uint64_t first, uint64_t count)
{
	for (unsigned i = 0; i < HM_SPACE_MAX_MAPS; i++) {
		int err;

		if (!s->maps[i].addr)
			continue;
		err = hm_uffd_wp(uffd, s->maps[i].addr + (first << s->chunk_shift),
				 count << s->chunk_shift, true);
		if (err)
			return err;
	}
	return 0;
}

int hm_uffd_unwp_maps(struct hm_space *s, int uffd, uint64_t first, uint64_t count)
{
	for (unsigned i = 0; i < HM_SPACE_MAX_MAPS; i++) {
		int err;

		if (!s->maps[i].addr)
			continue;
		err = hm_uffd_wp(uffd, s->maps[i].addr + (first << s->chunk_shift),
				 count << s->chunk_shift, false);
		if (err)
			return err;
	}
	return 0;
}

static int hm_uffd_async_protect(struct hm_space *s, uint64_t first, uint64_t count)
{
	struct hm_uffd_async *u = s->priv;

	return hm_uffd_wp_maps(s, u->uffd, first, count);
}

/* write-protect off over chunks [first, first+count) of every watched
   mapping (pte markers of untouched pages go too): writes cost nothing */
static int hm_uffd_async_disarm(struct hm_space *s, uint64_t first, uint64_t count)
{
	struct hm_uffd_async *u = s->priv;

	return hm_uffd_unwp_maps(s, u->uffd, first, count);
}

/* ---- life ---------------------------------------------------------------- */

/*
 * Reclaim: a written (no longer write-protected) shmem pte that reclaim
 * unmaps becomes pte_none -- only write-protected ptes get a uffd-wp marker
 * (pte_install_uffd_wp_if_needed) -- and PAGEMAP_SCAN would not report the
 * write.  So the watched mappings are mlock2(MLOCK_ONFAULT)ed: pages are
 * locked as they are faulted, nothing is populated.  Where that is refused
 * (RLIMIT_MEMLOCK) the space works unlocked, without HM_CAP_RECLAIM_SAFE,
 * and its reason says so.
 */
static void hm_uffd_async_lock(struct hm_space *s, uintptr_t addr)
{
	if (!syscall(SYS_mlock2, addr, s->size, 1 /* MLOCK_ONFAULT */))
		return;
	if (s->caps & HM_CAP_RECLAIM_SAFE)
		hm_set_reason(s, "[mlock refused (%s): a written page reclaimed before the harvest "
			      "is not reported] ", strerror(errno));
	s->caps &= ~HM_CAP_RECLAIM_SAFE;
}

static int hm_uffd_async_create(struct hm_space *s, const struct hm_space_params *p)
{
	struct hm_uffd_async *u = calloc(1, sizeof(*u));
	void *a;
	int err;

	if (!u)
		return -ENOMEM;
	u->uffd = -1;
	u->pagemap = -1;
	s->priv = u;
	err = hm_memfd_create(s, p);
	if (err)
		return err;
	err = hm_uffd_open(hm_async_features, true, &u->uffd, NULL);
	if (err)
		return err;
	u->pagemap = open("/proc/self/pagemap", O_RDONLY | O_CLOEXEC);
	if (u->pagemap < 0)
		return -errno;
	err = hm_memfd_map(s, p->addr, p->addr != NULL, PROT_READ | PROT_WRITE, &a);
	if (err)
		return err;
	s->maps[0].addr = (uintptr_t)a;
	hm_uffd_async_lock(s, (uintptr_t)a);
	return hm_uffd_register(u->uffd, (uintptr_t)a, s->size);
}

static int hm_uffd_async_import(struct hm_space *s, const struct hm_space_handoff *h)
{
	struct hm_uffd_async *u = calloc(1, sizeof(*u));
	int err;

	if (!u)
		return -ENOMEM;
	u->uffd = -1;
	u->pagemap = -1;
	s->priv = u;
	if (h->nr_fds != 3)
		return -EINVAL;
	err = hm_memfd_import(s, h);
	if (err)
		return err;
	u->uffd = fcntl(h->fds[1], F_DUPFD_CLOEXEC, 3);
	u->pagemap = fcntl(h->fds[2], F_DUPFD_CLOEXEC, 3);
	if (u->uffd < 0 || u->pagemap < 0)
		return -errno;
	return 0;
}

static void hm_uffd_async_destroy(struct hm_space *s)
{
	struct hm_uffd_async *u = s->priv;

	if (!u)
		return;
	if (u->uffd >= 0)
		close(u->uffd);
	if (u->pagemap >= 0)
		close(u->pagemap);
	free(u);
	s->priv = NULL;
}

static int hm_uffd_async_watch_map(struct hm_space *s, uintptr_t addr)
{
	struct hm_uffd_async *u = s->priv;
	int err = hm_uffd_register(u->uffd, addr, s->size);
	uint64_t first;

	if (err)
		return err;
	hm_uffd_async_lock(s, addr);
	/* the alias starts with every armed chunk armed */
	for (uint64_t c = 0; c < s->nr_chunks; c = first) {
		uint64_t e;

		if (!hm_test_bit(s->armed, c)) {
			first = c + 1;
			continue;
		}
		for (e = c + 1; e < s->nr_chunks && hm_test_bit(s->armed, e); e++)
			;
		err = hm_uffd_wp(u->uffd, addr + (c << s->chunk_shift),
				 (e - c) << s->chunk_shift, true);
		if (err)
			return err;
		first = e;
	}
	return 0;
}

/* an alias goes away: what its page tables say was written is all there is
   of those writes, so bring it into pending first */
static void hm_uffd_async_unwatch_map(struct hm_space *s, uintptr_t addr)
{
	hm_scan_map(s, s->priv, addr, 0, s->nr_chunks, NULL);
}

static int hm_uffd_async_export(struct hm_space *s, struct hm_space_handoff *h)
{
	struct hm_uffd_async *u = s->priv;
	int src[3] = { s->memfd, u->uffd, u->pagemap };

	for (unsigned i = 0; i < 3; i++) {
		h->fds[i] = fcntl(src[i], F_DUPFD_CLOEXEC, 3);
		if (h->fds[i] < 0)
			return -errno;
		h->nr_fds = i + 1;
	}
	return 0;
}

const struct hm_backend_ops hm_uffd_async_ops = {
	.backend = HM_BACKEND_UFFD_ASYNC,
	.caps = HM_CAP_KERNEL_WRITES | HM_CAP_HANDOFF | HM_CAP_NO_VMA_SPLIT | HM_CAP_KERNEL_TRIP |
		HM_CAP_RECLAIM_SAFE | HM_CAP_MPROTECT | HM_CAP_MADVISE | HM_CAP_RANGE_SCAN |
		HM_CAP_GEN_DEFER,
	.probe = hm_uffd_async_probe,
	.create = hm_uffd_async_create,
	.import = hm_uffd_async_import,
	.destroy = hm_uffd_async_destroy,
	.watch_map = hm_uffd_async_watch_map,
	.unwatch_map = hm_uffd_async_unwatch_map,
	.protect = hm_uffd_async_protect,
	.refresh = hm_uffd_async_refresh,
	.peek = hm_uffd_async_peek,
	.scan_spans = hm_uffd_async_scan_spans,
	.disarm = hm_uffd_async_disarm,
	.collect = hm_uffd_async_collect,
	.collect_direct = hm_uffd_async_collect_direct,
	.export = hm_uffd_async_export,
};
