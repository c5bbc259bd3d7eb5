// SPDX-License-Identifier: GPL-2.0
/*
 * hmirror.ko guard costs, against the baselines in the same run:
 * trip cost (vs a plain store and mprotect + SIGSEGV), harvest of an
 * untouched space (64 MiB vs 16 GiB), harvest + re-arm of K scattered
 * pages (vs userfaultfd async write-protect + PAGEMAP_SCAN where the
 * kernel has it), VMA count after scattered trips, the harvest that
 * re-arms nothing ("take") against the same PAGEMAP_SCAN, and take + arm
 * of exactly the K chunks against the re-arming harvest, with the
 * module's counters saying where the time goes.  Medians of rounds;
 * figures as "# perf key=value" lines, each target of issue 3 as a
 * "# perf ..._target ... met|missed" line: a test asserts what is
 * correct, never how long it took (a loaded host moves every figure).
 *   tools/vm/run --kernel 6.12 -- build/bin/test-kmod-guards-perf
 */
#include <linux/userfaultfd.h>
#include <setjmp.h>
#include <stdbool.h>
#include <signal.h>
#include <sys/syscall.h>

#include "hmirror_test.h"
#include "kselftest_harness.h"

#define ROUNDS	5
#define PAGES	1024

static long psz;

static uint64_t median(uint64_t *v, int n)
{
	qsort(v, n, sizeof(*v), hmt_cmp_u64);
	return v[n / 2];
}

static int count_vmas(void)
{
	FILE *f = fopen("/proc/self/maps", "r");
	int n = 0, c;

	if (!f)
		return -1;
	while ((c = fgetc(f)) != EOF)
		n += c == '\n';
	fclose(f);
	return n;
}

/* ---- kmod ---------------------------------------------------------------- */

struct kspace {
	int dev, sfd;
	char *p;
	uint64_t size;
};

static int kspace_new(struct kspace *k, uint64_t size, unsigned int shift)
{
	k->size = size;
	k->dev = hmt_open_dev();
	if (k->dev < 0)
		return k->dev;
	k->sfd = hmt_create(k->dev, size, shift, 0);
	if (k->sfd < 0)
		return k->sfd;
	k->p = mmap(NULL, size, PROT_READ | PROT_WRITE,
		    MAP_SHARED | MAP_NORESERVE, k->sfd, 0);
	return k->p == MAP_FAILED ? -errno : 0;
}

static void kspace_free(struct kspace *k)
{
	munmap(k->p, k->size);
	close(k->sfd);
	close(k->dev);
}

/* ns per first write to each of PAGES armed, resident pages; 0 if a
   harvest after the writes missed one of them */
static uint64_t kmod_trip_ns(struct kspace *k)
{
	uint64_t t[ROUNDS], got[PAGES];
	bool missed = false;
	int r, i;

	for (r = 0; r < ROUNDS; r++) {
		memset(k->p, 1, PAGES * psz);
		hmt_arm(k->sfd, 0, PAGES);
		hmt_harvest(k->sfd, got, PAGES, NULL);
		t[r] = hmt_now_ns();
		for (i = 0; i < PAGES; i++)
			((volatile char *)k->p)[i * psz] = 2;
		t[r] = (hmt_now_ns() - t[r]) / PAGES;
		if (hmt_harvest(k->sfd, got, PAGES, NULL) != PAGES)
			missed = true;
	}
	return missed ? 0 : median(t, ROUNDS);
}

static uint64_t plain_store_ns(char *p)
{
	uint64_t t[ROUNDS];
	int r, i;

	for (r = 0; r < ROUNDS; r++) {
		t[r] = hmt_now_ns();
		for (i = 0; i < PAGES; i++)
			((volatile char *)p)[i * psz] = 3;
		t[r] = (hmt_now_ns() - t[r]) / PAGES;
	}
	return median(t, ROUNDS);
}

/* ---- mprotect + SIGSEGV baseline ----------------------------------------- */

static char *segv_base;
static size_t segv_len;

static void segv_handler(int sig, siginfo_t *si, void *uc)
{
	char *a = si->si_addr;

	if (a < segv_base || a >= segv_base + segv_len)
		abort();
	mprotect((void *)((uintptr_t)a & ~(psz - 1)), psz, PROT_READ | PROT_WRITE);
}

static uint64_t mprotect_trip_ns(void)
{
	struct sigaction sa = { .sa_sigaction = segv_handler, .sa_flags = SA_SIGINFO };
	uint64_t t[ROUNDS];
	int r, i;

	segv_len = PAGES * psz;
	segv_base = mmap(NULL, segv_len, PROT_READ | PROT_WRITE,
			 MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	memset(segv_base, 1, segv_len);
	sigaction(SIGSEGV, &sa, NULL);
	for (r = 0; r < ROUNDS; r++) {
		mprotect(segv_base, segv_len, PROT_READ);
		t[r] = hmt_now_ns();
		for (i = 0; i < PAGES; i++)
			((volatile char *)segv_base)[i * psz] = 2;
		t[r] = (hmt_now_ns() - t[r]) / PAGES;
	}
	signal(SIGSEGV, SIG_DFL);
	munmap(segv_base, segv_len);
	return median(t, ROUNDS);
}

/* ---- userfaultfd async WP + PAGEMAP_SCAN (6.7+) -------------------------- */

#ifndef UFFD_FEATURE_WP_ASYNC
#define UFFD_FEATURE_WP_ASYNC (1 << 15)
#endif
#ifndef UFFD_FEATURE_WP_UNPOPULATED
#define UFFD_FEATURE_WP_UNPOPULATED (1 << 13)
#endif

struct pm_scan_arg_ {
	uint64_t size, flags, start, end, walk_end, vec, vec_len, max_pages;
	uint64_t category_inverted, category_mask, category_anyof_mask, return_mask;
};

struct page_region_ {
	uint64_t start, end, categories;
};

#define PAGEMAP_SCAN_ _IOWR('f', 16, struct pm_scan_arg_)
#define PM_SCAN_WP_MATCHING_ (1 << 0)
#define PM_SCAN_CHECK_WPASYNC_ (1 << 1)
#define PAGE_IS_WRITTEN_ (1 << 1)

struct uspace {
	int uffd, pagemap;
	char *p;
	uint64_t size;
	struct page_region_ *vec;
};

static int uspace_new(struct uspace *u, uint64_t size)
{
	struct uffdio_api api = {
		.api = UFFD_API,
		.features = UFFD_FEATURE_WP_ASYNC | UFFD_FEATURE_WP_UNPOPULATED,
	};
	struct uffdio_register reg;

	u->size = size;
	u->p = mmap(NULL, size, PROT_READ | PROT_WRITE,
		    MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	if (u->p == MAP_FAILED)
		return -errno;
	u->uffd = syscall(__NR_userfaultfd, O_CLOEXEC | O_NONBLOCK);
	if (u->uffd < 0)
		return -errno;
	if (ioctl(u->uffd, UFFDIO_API, &api))
		return -errno;
	reg.range.start = (uintptr_t)u->p;
	reg.range.len = size;
	reg.mode = UFFDIO_REGISTER_MODE_WP;
	if (ioctl(u->uffd, UFFDIO_REGISTER, &reg))
		return -errno;
	u->pagemap = open("/proc/self/pagemap", O_RDONLY);
	u->vec = calloc(PAGES * 8, sizeof(*u->vec));
	return u->pagemap < 0 ? -errno : 0;
}

/* harvest + re-arm; returns pages found written */
static long uspace_harvest(struct uspace *u)
{
	struct pm_scan_arg_ a = {
		.size = sizeof(a),
		.flags = PM_SCAN_WP_MATCHING_ | PM_SCAN_CHECK_WPASYNC_,
		.start = (uintptr_t)u->p, .end = (uintptr_t)u->p + u->size,
		.vec = (uintptr_t)u->vec, .vec_len = PAGES * 8,
		.category_mask = PAGE_IS_WRITTEN_,
		.return_mask = PAGE_IS_WRITTEN_,
	};
	long n, i, pages = 0;

	n = ioctl(u->pagemap, PAGEMAP_SCAN_, &a);
	if (n < 0)
		return -errno;
	for (i = 0; i < n; i++)
		pages += (u->vec[i].end - u->vec[i].start) / psz;
	return pages;
}

static void uspace_free(struct uspace *u)
{
	free(u->vec);
	if (u->pagemap >= 0)
		close(u->pagemap);
	if (u->uffd >= 0)
		close(u->uffd);
	munmap(u->p, u->size);
}

/* ---- tests --------------------------------------------------------------- */

#define REQUIRE_DEV() do {						\
	int _fd = hmt_open_dev();					\
	if (_fd < 0)							\
		SKIP(return, "no /dev/hmirror (%s)", strerror(-_fd));	\
	close(_fd);							\
} while (0)

TEST(trip_cost)
{
	struct kspace k;
	uint64_t kmod, plain, mprot;
	int v0;

	REQUIRE_DEV();

	ASSERT_EQ(0, kspace_new(&k, PAGES * psz, 12));
	kmod = kmod_trip_ns(&k);
	plain = plain_store_ns(k.p);
	mprot = mprotect_trip_ns();
	v0 = count_vmas();
	kspace_free(&k);
	printf("# perf trip_ns kmod=%llu plain_store=%llu mprotect_sigsegv=%llu\n",
	       (unsigned long long)kmod, (unsigned long long)plain,
	       (unsigned long long)mprot);
	fflush(stdout);
	EXPECT_GT(v0, 0);
	ASSERT_GT(kmod, 0) TH_LOG("a harvest missed a trip");
	ASSERT_GT(mprot, 0);
	/* issue 3's target: at most 1/5 of mprotect + SIGSEGV */
	printf("# perf trip_target kmod_over_mprotect=%.3f %s\n", (double)kmod / mprot,
	       kmod * 5 <= mprot ? "met" : "missed");
	fflush(stdout);	/* the harness ends the test with _exit() */
}

static uint64_t harvest_empty_ns(uint64_t size)
{
	struct kspace k;
	uint64_t t[ROUNDS], got[16];
	int r, i;

	if (kspace_new(&k, size, 16))
		return 0;
	hmt_arm(k.sfd, 0, size >> 16);
	for (r = 0; r < ROUNDS; r++) {
		t[r] = hmt_now_ns();
		for (i = 0; i < 100; i++)
			hmt_harvest(k.sfd, got, 16, NULL);
		t[r] = (hmt_now_ns() - t[r]) / 100;
	}
	kspace_free(&k);
	/* the fastest round: this compares two O(1) paths on a noisy host */
	qsort(t, ROUNDS, sizeof(*t), hmt_cmp_u64);
	return t[0];
}

TEST(harvest_empty_64m_vs_16g)
{
	uint64_t small, big;

	REQUIRE_DEV();
	small = harvest_empty_ns(64ULL << 20);
	big = harvest_empty_ns(16ULL << 30);

	printf("# perf harvest_empty_ns 64MiB=%llu 16GiB=%llu\n",
	       (unsigned long long)small, (unsigned long long)big);
	fflush(stdout);
	ASSERT_GT(small, 0);
	ASSERT_GT(big, 0);
	/* issue 3's target: an untouched space's harvest does not grow with
	 * its size (16 GiB at most twice 64 MiB) */
	printf("# perf harvest_empty_target 16GiB_over_64MiB=%.2f %s\n", (double)big / small,
	       big <= 2 * small ? "met" : "missed");
	fflush(stdout);	/* the harness ends the test with _exit() */
}

/*
 * K scattered pages (every (npages / K)th page, 4 KiB chunks) written,
 * then harvest + re-arm, in a space of @size.
 */
static uint64_t kmod_harvest_k_ns(uint64_t size, int K, int *ret_vmas_grew)
{
	uint64_t t[ROUNDS], *got = calloc(K, sizeof(*got));
	uint64_t npages = size / psz, stride = npages / K;
	struct kspace k;
	int r, i, v0;

	if (kspace_new(&k, size, 12))
		return 0;
	for (i = 0; i < K; i++)
		k.p[i * stride * psz] = 1;
	hmt_arm(k.sfd, 0, npages);
	v0 = count_vmas();
	for (r = 0; r < ROUNDS; r++) {
		for (i = 0; i < K; i++)
			k.p[i * stride * psz] = 2;
		t[r] = hmt_now_ns();
		if (hmt_harvest(k.sfd, got, K, NULL) != K)
			t[r] = 0;
		t[r] = hmt_now_ns() - t[r];
	}
	*ret_vmas_grew = count_vmas() != v0;
	kspace_free(&k);
	free(got);
	return median(t, ROUNDS);
}

static int64_t uffd_harvest_k_ns(uint64_t size, int K)
{
	uint64_t t[ROUNDS], npages = size / psz, stride = npages / K;
	struct uspace u = { .uffd = -1, .pagemap = -1 };
	int r, i, ret;

	ret = uspace_new(&u, size);
	if (ret)
		return ret;
	for (i = 0; i < K; i++)
		u.p[i * stride * psz] = 1;
	if (uspace_harvest(&u) < 0) {
		uspace_free(&u);
		return -EOPNOTSUPP;
	}
	for (r = 0; r < ROUNDS; r++) {
		for (i = 0; i < K; i++)
			u.p[i * stride * psz] = 2;
		t[r] = hmt_now_ns();
		if (uspace_harvest(&u) != K)
			t[r] = 0;
		t[r] = hmt_now_ns() - t[r];
	}
	uspace_free(&u);
	return median(t, ROUNDS);
}

TEST(harvest_k_written)
{
	static const int ks[] = { 1, 16, 256, 1024, 4096 };
	static const char *const all_merges[] = { "0", "16", "64", "256", "100000" };
	static const char *const merges_quick[] = { "0", "64" };
	/* HMT_ALL_MERGES=1: the whole rearm_merge_pages sweep of design.rst */
	bool all = getenv("HMT_ALL_MERGES") != NULL;
	const char *const *merges = all ? all_merges : merges_quick;
	unsigned int nr_merges = all ? 5 : 2;
	const uint64_t size = 64ULL << 20;
	char saved[64] = "";
	unsigned int i, m;
	int grew = 0;

	REQUIRE_DEV();

	hmt_param_get("rearm_merge_pages", saved, sizeof(saved));
	for (i = 0; i < sizeof(ks) / sizeof(ks[0]); i++) {
		int64_t uffd = uffd_harvest_k_ns(size, ks[i]);
		uint64_t kmod = 0;

		printf("# perf harvest_k_ns space=64MiB K=%d uffd_async_pagemap_scan=%lld",
		       ks[i], (long long)uffd);
		for (m = 0; m < nr_merges; m++) {
			const char *merge = getenv("HMT_MERGE") ?: merges[m];

			if (saved[0] && hmt_param_set("rearm_merge_pages", merge))
				break;
			kmod = kmod_harvest_k_ns(size, ks[i], &grew);
			printf(" kmod_merge%s=%llu", merge,
			       (unsigned long long)kmod);
			EXPECT_GT(kmod, 0);
			EXPECT_FALSE(grew);	/* no VMA growth from guards */
		}
		printf("\n");
		fflush(stdout);
	}
	if (saved[0])
		hmt_param_set("rearm_merge_pages", saved);
}

/*
 * The harvest that re-arms nothing (HMIRROR_HARVEST_NO_REARM) and the arm
 * of exactly the chunks taken, as the engine does, against the
 * re-arming harvest, and the take against uffd-async's PAGEMAP_SCAN (the
 * issue's target: at most 1/5).  K scattered pages, 4 KiB chunks.
 */
static long kmod_take(int sfd, uint64_t *chunks, uint64_t cap)
{
	struct hmirror_harvest h = {
		.chunks = (uintptr_t)chunks, .cap = cap,
		.flags = HMIRROR_HARVEST_NO_REARM,
	};

	return ioctl(sfd, HMIRROR_IOC_HARVEST, &h) ? -errno : (long)h.nr;
}

/* arm chunks[0..n), one range each, in one ioctl */
static int kmod_arm_chunks(int sfd, const uint64_t *chunks, long n,
			   struct hmirror_range *r)
{
	struct hmirror_arm a = { .ranges = (uintptr_t)r, .nr_ranges = n };
	long i;

	for (i = 0; i < n; i++) {
		r[i].first = chunks[i];
		r[i].count = 1;
	}
	return ioctl(sfd, HMIRROR_IOC_ARM, &a) ? -errno : 0;
}

/* the counters that say where an arm or a re-arming harvest spends time */
static const char *const split_names[] = {
	"rearm_calls", "rearm_ns", "drain_ns", "harvest_ns",
};
#define NR_SPLIT	4

static void split_read(long long *v)
{
	int i;

	for (i = 0; i < NR_SPLIT; i++)
		v[i] = hmt_stat(split_names[i]);
}

struct take_fig {
	uint64_t take, arm, harvest;		/* ns, medians */
	uint64_t h_split[NR_SPLIT], a_split[NR_SPLIT];	/* medians */
};

static int kmod_take_k(uint64_t size, int K, struct take_fig *f)
{
	uint64_t npages = size / psz, stride = npages / K;
	uint64_t t_take[ROUNDS], t_arm[ROUNDS], t_harv[ROUNDS];
	uint64_t hs[NR_SPLIT][ROUNDS], as[NR_SPLIT][ROUNDS];
	uint64_t *got = calloc(K, sizeof(*got));
	struct hmirror_range *ranges = calloc(K, sizeof(*ranges));
	long long v0[NR_SPLIT], v1[NR_SPLIT];
	struct kspace k;
	int r, i, j, ret = -EIO;
	uint64_t t0;

	if (!got || !ranges || kspace_new(&k, size, 12))
		goto out;
	for (i = 0; i < K; i++)
		k.p[i * stride * psz] = 1;
	hmt_arm(k.sfd, 0, npages);
	for (r = 0; r < ROUNDS; r++) {
		for (i = 0; i < K; i++)
			k.p[i * stride * psz] = 2;
		split_read(v0);
		t0 = hmt_now_ns();
		if (hmt_harvest(k.sfd, got, K, NULL) != K)
			goto out_free;
		t_harv[r] = hmt_now_ns() - t0;
		split_read(v1);
		for (j = 0; j < NR_SPLIT; j++)
			hs[j][r] = v1[j] - v0[j];

		for (i = 0; i < K; i++)
			k.p[i * stride * psz] = 3;
		t0 = hmt_now_ns();
		if (kmod_take(k.sfd, got, K) != K)
			goto out_free;
		t_take[r] = hmt_now_ns() - t0;
		split_read(v0);
		t0 = hmt_now_ns();
		if (kmod_arm_chunks(k.sfd, got, K, ranges))
			goto out_free;
		t_arm[r] = hmt_now_ns() - t0;
		split_read(v1);
		for (j = 0; j < NR_SPLIT; j++)
			as[j][r] = v1[j] - v0[j];
	}
	f->take = median(t_take, ROUNDS);
	f->arm = median(t_arm, ROUNDS);
	f->harvest = median(t_harv, ROUNDS);
	for (j = 0; j < NR_SPLIT; j++) {
		f->h_split[j] = median(hs[j], ROUNDS);
		f->a_split[j] = median(as[j], ROUNDS);
	}
	ret = 0;
out_free:
	kspace_free(&k);
out:
	free(got);
	free(ranges);
	return ret;
}

TEST(take_k_written)
{
	static const int ks[] = { 16, 1024, 4096 };
	const uint64_t size = 64ULL << 20;
	unsigned int i;
	int j;

	REQUIRE_DEV();
	if (hmt_stat("rearm_ns") < 0)
		SKIP(return, "no debugfs");
	for (i = 0; i < sizeof(ks) / sizeof(ks[0]); i++) {
		int64_t uffd = uffd_harvest_k_ns(size, ks[i]);
		struct take_fig f;

		ASSERT_EQ(0, kmod_take_k(size, ks[i], &f));
		printf("# perf take_k_ns space=64MiB K=%d take=%llu uffd_async_pagemap_scan=%lld take_over_scan=%.3f arm_k=%llu rearm_harvest=%llu take_arm_over_harvest=%.2f",
		       ks[i], (unsigned long long)f.take, (long long)uffd,
		       uffd > 0 ? (double)f.take / uffd : -1.0,
		       (unsigned long long)f.arm, (unsigned long long)f.harvest,
		       (double)(f.take + f.arm) / f.harvest);
		for (j = 0; j < NR_SPLIT; j++)
			printf(" harvest_%s=%llu", split_names[j],
			       (unsigned long long)f.h_split[j]);
		for (j = 0; j < NR_SPLIT; j++)
			printf(" arm_%s=%llu", split_names[j],
			       (unsigned long long)f.a_split[j]);
		printf("\n");
		fflush(stdout);
		/* issue 12's target, at most 1/5 of uffd-async's PAGEMAP_SCAN, is
		 * a figure reported here, not asserted: a timed assertion fails
		 * on a loaded machine (0.21 at K = 1,024 beside a second VM and
		 * a build, 0.065 on a quiet one) */
		if (uffd > 0)
			printf("# perf take_target K=%d take_over_scan=%.3f %s\n", ks[i],
			       (double)f.take / uffd, f.take * 5 <= (uint64_t)uffd ? "met" : "missed");
	}
}

static void __attribute__((constructor)) init_psz(void)
{
	psz = sysconf(_SC_PAGESIZE);
}

TEST_HARNESS_MAIN
