// SPDX-License-Identifier: GPL-2.0
/*
 * hmirror.ko guard tests: spaces, arm, trip, harvest, generations, poll,
 * the device view, limits, teardown.  Run in the VM on each test kernel:
 *   tools/vm/run --kernel 6.1 -- build/bin/test-kmod-guards
 */
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdatomic.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <sys/wait.h>

#include "hmirror_test.h"
#include "kselftest_harness.h"

#define CHUNK_SHIFT	16
#define CHUNK		(1UL << CHUNK_SHIFT)
#define NR_CHUNKS	64
#define SPACE		(NR_CHUNKS * CHUNK)

static long page_size;

/* ---- the handshake and errors on /dev/hmirror --------------------------- */

FIXTURE(dev) {
	int dev;
};

FIXTURE_SETUP(dev)
{
	self->dev = hmt_open_dev();
	/* a SKIP in setup would still run the test body: leave instead */
	if (self->dev < 0)
		SKIP(_exit(255), "no /dev/hmirror (%s)", strerror(-self->dev));
}

FIXTURE_TEARDOWN(dev)
{
	if (self->dev >= 0)
		close(self->dev);
}

TEST_F(dev, api)
{
	struct hmirror_api a = { .api = HMIRROR_API };

	ASSERT_EQ(0, ioctl(self->dev, HMIRROR_IOC_API, &a));
	EXPECT_TRUE(a.features & HMIRROR_FEATURE_DEVICE_VIEW);
	EXPECT_TRUE(a.features & HMIRROR_FEATURE_GEN_MMAP);
	EXPECT_TRUE(a.features & HMIRROR_FEATURE_POLL);
	EXPECT_TRUE(a.ioctls & (1ULL << HMIRROR_NR_API));
	EXPECT_TRUE(a.ioctls & (1ULL << HMIRROR_NR_CREATE));
	EXPECT_TRUE(a.ioctls & (1ULL << HMIRROR_NR_ARM));
	EXPECT_TRUE(a.ioctls & (1ULL << HMIRROR_NR_HARVEST));
	EXPECT_TRUE(a.ioctls & (1ULL << HMIRROR_NR_GENERATIONS));
	EXPECT_TRUE(a.ioctls & (1ULL << HMIRROR_NR_SPACE_INFO));
	EXPECT_FALSE(a.ioctls & (1ULL << 0x0f));
}

TEST_F(dev, api_bad_version)
{
	struct hmirror_api a = { .api = HMIRROR_API + 1, .features = 5 };

	ASSERT_EQ(-1, ioctl(self->dev, HMIRROR_IOC_API, &a));
	EXPECT_EQ(EINVAL, errno);
	EXPECT_EQ(0, a.features);	/* outputs zeroed on error */
	EXPECT_EQ(0, a.ioctls);
}

TEST_F(dev, unknown_ioctl)
{
	uint64_t buf[8] = { 0 };

	EXPECT_EQ(-1, ioctl(self->dev, _IOWR(HMIRROR_IOC_MAGIC, 0x0f, uint64_t), buf));
	EXPECT_EQ(ENOTTY, errno);
	/* right number, wrong size */
	EXPECT_EQ(-1, ioctl(self->dev, _IOWR(HMIRROR_IOC_MAGIC, HMIRROR_NR_API, uint64_t), buf));
	EXPECT_EQ(ENOTTY, errno);
	EXPECT_EQ(-1, ioctl(self->dev, _IO('x', 1), 0));
	EXPECT_EQ(ENOTTY, errno);
	/* a space ioctl on /dev/hmirror */
	EXPECT_EQ(-1, ioctl(self->dev, HMIRROR_IOC_SPACE_INFO, buf));
	EXPECT_EQ(ENOTTY, errno);
}

TEST_F(dev, api_efault)
{
	EXPECT_EQ(-1, ioctl(self->dev, HMIRROR_IOC_API, (void *)16));
	EXPECT_EQ(EFAULT, errno);
}

TEST_F(dev, create_bad_flags)
{
	struct hmirror_create c = { .size = SPACE, .flags = 1u << 7 };

	EXPECT_EQ(-1, ioctl(self->dev, HMIRROR_IOC_CREATE, &c));
	EXPECT_EQ(EINVAL, errno);
	EXPECT_EQ(0, c.fd);
}

TEST_F(dev, create_bad_chunk_shift)
{
	EXPECT_EQ(-EINVAL, hmt_create(self->dev, SPACE, 11, 0));
	EXPECT_EQ(-EINVAL, hmt_create(self->dev, SPACE, 31, 0));
}

TEST_F(dev, create_bad_size)
{
	EXPECT_EQ(-EINVAL, hmt_create(self->dev, 0, 0, 0));
	EXPECT_EQ(-EINVAL, hmt_create(self->dev, CHUNK + page_size, 0, 0));
	EXPECT_EQ(-EFBIG, hmt_create(self->dev, HMIRROR_MAX_SPACE_BYTES, 0, 0));
}

TEST_F(dev, create_space_info)
{
	struct hmirror_space_info i;
	struct hmirror_create c = { .size = SPACE, .chunk_shift = 0 };

	ASSERT_EQ(0, ioctl(self->dev, HMIRROR_IOC_CREATE, &c));
	EXPECT_GT(c.fd, 2);
	EXPECT_GT(c.id, 0);
	EXPECT_EQ(NR_CHUNKS, c.nr_chunks);
	EXPECT_EQ(HMIRROR_MMAP_VIEW, c.view_offset);
	EXPECT_EQ(HMIRROR_MMAP_GENERATIONS, c.gen_offset);
	EXPECT_EQ(FD_CLOEXEC, fcntl(c.fd, F_GETFD) & FD_CLOEXEC);
	memset(&i, 0xff, sizeof(i));
	ASSERT_EQ(0, ioctl(c.fd, HMIRROR_IOC_SPACE_INFO, &i));
	EXPECT_EQ(SPACE, i.size);
	EXPECT_EQ(CHUNK_SHIFT, i.chunk_shift);
	EXPECT_EQ(c.id, i.id);
	EXPECT_EQ(NR_CHUNKS, i.nr_chunks);
	EXPECT_EQ(0, i.written);
	/* a dev ioctl on a space fd */
	EXPECT_EQ(-1, ioctl(c.fd, HMIRROR_IOC_CREATE, &c));
	EXPECT_EQ(ENOTTY, errno);
	close(c.fd);
}

/* ---- limits -------------------------------------------------------------- */

struct saved_param {
	const char *name;
	char val[64];
};

static void restore_param(struct saved_param *p)
{
	hmt_param_set(p->name, p->val);
}

TEST_F(dev, limit_space_bytes)
{
	struct saved_param p = { "max_space_bytes" };
	char v[32];

	ASSERT_EQ(0, hmt_param_get(p.name, p.val, sizeof(p.val)));
	snprintf(v, sizeof(v), "%lu", 2 * CHUNK);
	ASSERT_EQ(0, hmt_param_set(p.name, v));
	EXPECT_EQ(-EFBIG, hmt_create(self->dev, 3 * CHUNK, 0, 0));
	int fd = hmt_create(self->dev, 2 * CHUNK, 0, 0);

	EXPECT_GE(fd, 0);
	close(fd);
	restore_param(&p);
}

TEST_F(dev, limit_space_chunks)
{
	struct saved_param p = { "max_space_chunks" };

	ASSERT_EQ(0, hmt_param_get(p.name, p.val, sizeof(p.val)));
	ASSERT_EQ(0, hmt_param_set(p.name, "4"));
	EXPECT_EQ(-EFBIG, hmt_create(self->dev, 5 * CHUNK, 0, 0));
	EXPECT_EQ(-EFBIG, hmt_create(self->dev, 4 * CHUNK, 12, 0));
	int fd = hmt_create(self->dev, 4 * CHUNK, 0, 0);

	EXPECT_GE(fd, 0);
	close(fd);
	restore_param(&p);
}

/* memory is limited per user (limits.c has the rest), not by a global total */
TEST_F(dev, limit_user_bytes)
{
	struct saved_param p = { "max_user_bytes" };
	int a, b;

	ASSERT_EQ(0, hmt_param_get(p.name, p.val, sizeof(p.val)));
	ASSERT_EQ(0, hmt_param_set(p.name, "1048576"));
	EXPECT_EQ(-ENOMEM, hmt_create(self->dev, 16 * CHUNK, 0,
				      HMIRROR_CREATE_POPULATE));
	a = hmt_create(self->dev, 4 * CHUNK, 0, HMIRROR_CREATE_POPULATE);
	EXPECT_GE(a, 0);
	EXPECT_EQ(-ENOMEM, hmt_create(self->dev, 12 * CHUNK, 0,
				      HMIRROR_CREATE_POPULATE));
	close(a);
	/* freed: room again */
	b = hmt_create(self->dev, 12 * CHUNK, 0, HMIRROR_CREATE_POPULATE);
	EXPECT_GE(b, 0);
	close(b);
	restore_param(&p);
}

TEST_F(dev, limit_spaces_per_process)
{
	struct saved_param p = { "max_spaces_per_process" };
	int fds[3], i, st;
	pid_t pid;

	ASSERT_EQ(0, hmt_param_get(p.name, p.val, sizeof(p.val)));
	ASSERT_EQ(0, hmt_param_set(p.name, "2"));
	for (i = 0; i < 2; i++) {
		fds[i] = hmt_create(self->dev, CHUNK, 0, 0);
		EXPECT_GE(fds[i], 0);
	}
	EXPECT_EQ(-EMFILE, hmt_create(self->dev, CHUNK, 0, 0));
	/* another process has its own count */
	pid = fork();
	ASSERT_GE(pid, 0);
	if (pid == 0)
		_exit(hmt_create(self->dev, CHUNK, 0, 0) >= 0 ? 0 : 1);
	ASSERT_EQ(pid, waitpid(pid, &st, 0));
	EXPECT_EQ(0, WEXITSTATUS(st));
	close(fds[0]);
	fds[2] = hmt_create(self->dev, CHUNK, 0, 0);
	EXPECT_GE(fds[2], 0);
	close(fds[1]);
	close(fds[2]);
	restore_param(&p);
}

/* ---- one space, mapped --------------------------------------------------- */

FIXTURE(space) {
	int dev;
	int sfd;
	char *p;
};

FIXTURE_SETUP(space)
{
	self->sfd = -1;
	self->p = MAP_FAILED;
	self->dev = hmt_open_dev();
	/* a SKIP in setup would still run the test body: leave instead */
	if (self->dev < 0)
		SKIP(_exit(255), "no /dev/hmirror (%s)", strerror(-self->dev));
	self->sfd = hmt_create(self->dev, SPACE, CHUNK_SHIFT, 0);
	ASSERT_GE(self->sfd, 0);
	self->p = mmap(NULL, SPACE, PROT_READ | PROT_WRITE, MAP_SHARED,
		       self->sfd, 0);
	ASSERT_NE(MAP_FAILED, self->p);
}

FIXTURE_TEARDOWN(space)
{
	if (self->p != MAP_FAILED)
		munmap(self->p, SPACE);
	if (self->sfd >= 0)
		close(self->sfd);
	if (self->dev >= 0)
		close(self->dev);
}

static long harvest_all(int sfd, uint64_t *chunks, uint64_t cap)
{
	int more = 0;
	long n = hmt_harvest(sfd, chunks, cap, &more);

	return (n >= 0 && more) ? -E2BIG : n;
}

TEST_F(space, arm_bad_flags)
{
	struct hmirror_arm a = { .first = 0, .count = 1, .flags = 1u << 5 };

	EXPECT_EQ(-1, ioctl(self->sfd, HMIRROR_IOC_ARM, &a));
	EXPECT_EQ(EINVAL, errno);
}

TEST_F(space, arm_count_zero)
{
	EXPECT_EQ(-EINVAL, hmt_arm(self->sfd, 0, 0));
}

TEST_F(space, arm_overflow)
{
	EXPECT_EQ(-EINVAL, hmt_arm(self->sfd, UINT64_MAX, 2));
}

TEST_F(space, arm_out_of_range)
{
	EXPECT_EQ(-ERANGE, hmt_arm(self->sfd, NR_CHUNKS - 1, 2));
	EXPECT_EQ(-ERANGE, hmt_arm(self->sfd, NR_CHUNKS, 1));
	EXPECT_EQ(0, hmt_arm(self->sfd, NR_CHUNKS - 1, 1));
}

TEST_F(space, arm_both_forms)
{
	struct hmirror_range r = { 0, 1 };
	struct hmirror_arm a = {
		.first = 1, .count = 1, .ranges = (uintptr_t)&r, .nr_ranges = 1,
	};

	EXPECT_EQ(-1, ioctl(self->sfd, HMIRROR_IOC_ARM, &a));
	EXPECT_EQ(EINVAL, errno);
	a.nr_ranges = 0;	/* ranges pointer without a count */
	EXPECT_EQ(-1, ioctl(self->sfd, HMIRROR_IOC_ARM, &a));
	EXPECT_EQ(EINVAL, errno);
}

TEST_F(space, arm_too_many_ranges)
{
	struct hmirror_range r = { 0, 1 };
	struct hmirror_arm a = {
		.ranges = (uintptr_t)&r, .nr_ranges = HMIRROR_MAX_ARM_RANGES + 1,
	};

	EXPECT_EQ(-1, ioctl(self->sfd, HMIRROR_IOC_ARM, &a));
	EXPECT_EQ(E2BIG, errno);
}

TEST_F(space, arm_ranges_efault)
{
	struct hmirror_arm a = { .ranges = 8, .nr_ranges = 2 };

	EXPECT_EQ(-1, ioctl(self->sfd, HMIRROR_IOC_ARM, &a));
	EXPECT_EQ(EFAULT, errno);
}

TEST_F(space, arm_ranges)
{
	struct hmirror_range r[3] = { { 1, 2 }, { 10, 1 }, { 60, 4 } };
	struct hmirror_arm a = { .ranges = (uintptr_t)r, .nr_ranges = 3 };
	uint64_t got[NR_CHUNKS], c;
	uint64_t want[] = { 1, 2, 10, 60, 61, 62, 63 };
	unsigned int i;

	ASSERT_EQ(0, ioctl(self->sfd, HMIRROR_IOC_ARM, &a));
	for (c = 0; c < NR_CHUNKS; c++)
		self->p[c * CHUNK + 5] = 1;
	ASSERT_EQ(7, harvest_all(self->sfd, got, NR_CHUNKS));
	for (i = 0; i < 7; i++)
		EXPECT_EQ(want[i], got[i]);
}

TEST_F(space, arm_ranges_bad_one_arms_nothing)
{
	struct hmirror_range r[2] = { { 1, 2 }, { 63, 2 } };
	struct hmirror_arm a = { .ranges = (uintptr_t)r, .nr_ranges = 2 };
	uint64_t got[NR_CHUNKS], g;

	EXPECT_EQ(-1, ioctl(self->sfd, HMIRROR_IOC_ARM, &a));
	EXPECT_EQ(ERANGE, errno);
	ASSERT_EQ(0, hmt_gen(self->sfd, 1, &g));
	EXPECT_FALSE(HMIRROR_GEN_CLEAN(g));
	self->p[CHUNK] = 1;
	EXPECT_EQ(0, harvest_all(self->sfd, got, NR_CHUNKS));
}

TEST_F(space, harvest_bad_flags)
{
	uint64_t got[4];
	struct hmirror_harvest h = {
		.chunks = (uintptr_t)got, .cap = 4, .flags = 1u << 1,	/* unknown; bit 0 is NO_REARM */
	};

	EXPECT_EQ(-1, ioctl(self->sfd, HMIRROR_IOC_HARVEST, &h));
	EXPECT_EQ(EINVAL, errno);
}

TEST_F(space, harvest_bad_pad)
{
	uint64_t got[4];
	struct hmirror_harvest h = {
		.chunks = (uintptr_t)got, .cap = 4, .__pad = 1,
	};

	EXPECT_EQ(-1, ioctl(self->sfd, HMIRROR_IOC_HARVEST, &h));
	EXPECT_EQ(EINVAL, errno);
}

TEST_F(space, harvest_efault_keeps_record)
{
	uint64_t got[4];

	ASSERT_EQ(0, hmt_arm(self->sfd, 0, NR_CHUNKS));
	self->p[3 * CHUNK] = 1;
	EXPECT_EQ(-EFAULT, hmt_harvest(self->sfd, (uint64_t *)8, 4, NULL));
	ASSERT_EQ(1, harvest_all(self->sfd, got, 4));
	EXPECT_EQ(3, got[0]);
}

TEST_F(space, generations_errors)
{
	uint64_t chunk = 0, gen;
	struct hmirror_generations g = {
		.chunks = (uintptr_t)&chunk, .gens = (uintptr_t)&gen,
		.count = 1, .flags = 1,
	};

	EXPECT_EQ(-1, ioctl(self->sfd, HMIRROR_IOC_GENERATIONS, &g));
	EXPECT_EQ(EINVAL, errno);
	g.flags = 0;
	g.count = HMIRROR_MAX_GEN_BATCH + 1;
	EXPECT_EQ(-1, ioctl(self->sfd, HMIRROR_IOC_GENERATIONS, &g));
	EXPECT_EQ(E2BIG, errno);
	g.count = 1;
	chunk = NR_CHUNKS;
	EXPECT_EQ(-1, ioctl(self->sfd, HMIRROR_IOC_GENERATIONS, &g));
	EXPECT_EQ(ERANGE, errno);
	chunk = 0;
	g.gens = 8;
	EXPECT_EQ(-1, ioctl(self->sfd, HMIRROR_IOC_GENERATIONS, &g));
	EXPECT_EQ(EFAULT, errno);
}

TEST_F(space, mmap_errors)
{
	void *q;

	q = mmap(NULL, SPACE, PROT_READ | PROT_WRITE, MAP_PRIVATE, self->sfd, 0);
	EXPECT_EQ(MAP_FAILED, q);
	EXPECT_EQ(EINVAL, errno);
	q = mmap(NULL, 2 * SPACE, PROT_READ, MAP_SHARED, self->sfd, 0);
	EXPECT_EQ(MAP_FAILED, q);
	EXPECT_EQ(EINVAL, errno);
	q = mmap(NULL, CHUNK, PROT_READ, MAP_SHARED, self->sfd, SPACE);
	EXPECT_EQ(MAP_FAILED, q);
	EXPECT_EQ(EINVAL, errno);
	q = mmap(NULL, page_size, PROT_READ | PROT_WRITE, MAP_SHARED, self->sfd,
		 HMIRROR_MMAP_GENERATIONS);
	EXPECT_EQ(MAP_FAILED, q);
	EXPECT_EQ(EPERM, errno);
	q = mmap(NULL, 2 * page_size, PROT_READ, MAP_SHARED, self->sfd,
		 HMIRROR_MMAP_GENERATIONS);
	EXPECT_EQ(MAP_FAILED, q);	/* 64 chunks: one page of generations */
	q = mmap(NULL, page_size, PROT_READ, MAP_SHARED, self->sfd,
		 HMIRROR_MMAP_GENERATIONS);
	ASSERT_NE(MAP_FAILED, q);
	EXPECT_EQ(-1, mprotect(q, page_size, PROT_READ | PROT_WRITE));
	EXPECT_EQ(EACCES, errno);
	munmap(q, page_size);
	/* mremap cannot grow a mapping past the space */
	q = mremap(self->p, SPACE, 2 * SPACE, 0);
	EXPECT_EQ(MAP_FAILED, q);
}

/* ---- guard semantics ----------------------------------------------------- */

TEST_F(space, trip_and_harvest)
{
	uint64_t got[NR_CHUNKS];
	int more = 1;

	ASSERT_EQ(0, hmt_arm(self->sfd, 0, NR_CHUNKS));
	EXPECT_EQ(0, harvest_all(self->sfd, got, NR_CHUNKS));
	self->p[7 * CHUNK + 100] = 1;
	self->p[3 * CHUNK] = 2;
	self->p[3 * CHUNK + 5 * page_size] = 3;	/* same chunk, other page */
	ASSERT_EQ(2, hmt_harvest(self->sfd, got, NR_CHUNKS, &more));
	EXPECT_EQ(0, more);
	EXPECT_EQ(3, got[0]);
	EXPECT_EQ(7, got[1]);
	/* re-armed: nothing now, the next write again */
	EXPECT_EQ(0, harvest_all(self->sfd, got, NR_CHUNKS));
	self->p[7 * CHUNK + 200] = 4;
	ASSERT_EQ(1, harvest_all(self->sfd, got, NR_CHUNKS));
	EXPECT_EQ(7, got[0]);
	/* reads do not trip */
	EXPECT_EQ(4, self->p[7 * CHUNK + 200]);
	EXPECT_EQ(0, harvest_all(self->sfd, got, NR_CHUNKS));
}

TEST_F(space, unarmed_not_reported)
{
	uint64_t got[NR_CHUNKS];

	self->p[0] = 1;
	ASSERT_EQ(0, hmt_arm(self->sfd, 5, 1));
	self->p[4 * CHUNK] = 1;
	self->p[6 * CHUNK] = 1;
	EXPECT_EQ(0, harvest_all(self->sfd, got, NR_CHUNKS));
	self->p[5 * CHUNK + 9] = 1;
	ASSERT_EQ(1, harvest_all(self->sfd, got, NR_CHUNKS));
	EXPECT_EQ(5, got[0]);
}

TEST_F(space, disarm)
{
	uint64_t got[NR_CHUNKS], g;

	ASSERT_EQ(0, hmt_arm(self->sfd, 0, NR_CHUNKS));
	ASSERT_EQ(0, hmt_disarm(self->sfd, 2, 2));
	ASSERT_EQ(0, hmt_gen(self->sfd, 2, &g));
	EXPECT_FALSE(HMIRROR_GEN_CLEAN(g));
	self->p[2 * CHUNK] = 1;
	self->p[3 * CHUNK] = 1;
	self->p[4 * CHUNK] = 1;
	ASSERT_EQ(1, harvest_all(self->sfd, got, NR_CHUNKS));
	EXPECT_EQ(4, got[0]);
}

TEST_F(space, harvest_cap_more)
{
	uint64_t got[NR_CHUNKS], all[NR_CHUNKS];
	int more = 0, i, n = 0;
	long r;

	ASSERT_EQ(0, hmt_arm(self->sfd, 0, NR_CHUNKS));
	for (i = 0; i < 10; i++)
		self->p[(i * 6) * CHUNK] = 1;
	r = hmt_harvest(self->sfd, got, 0, &more);
	EXPECT_EQ(0, r);
	EXPECT_EQ(1, more);
	do {
		r = hmt_harvest(self->sfd, got, 4, &more);
		ASSERT_GE(r, 0);
		memcpy(all + n, got, r * sizeof(*got));
		n += r;
		EXPECT_EQ(n < 10, more);
	} while (more);
	ASSERT_EQ(10, n);
	for (i = 0; i < 10; i++)
		EXPECT_EQ((uint64_t)i * 6, all[i]);
}

TEST_F(space, generations)
{
	uint64_t got[NR_CHUNKS], g0, g1, g2, g3, *gm;

	gm = mmap(NULL, page_size, PROT_READ, MAP_SHARED, self->sfd,
		  HMIRROR_MMAP_GENERATIONS);
	ASSERT_NE(MAP_FAILED, gm);
	ASSERT_EQ(0, hmt_gen(self->sfd, 9, &g0));
	EXPECT_FALSE(HMIRROR_GEN_CLEAN(g0));	/* never armed */
	ASSERT_EQ(0, hmt_arm(self->sfd, 0, NR_CHUNKS));
	ASSERT_EQ(0, hmt_gen(self->sfd, 9, &g1));
	EXPECT_TRUE(HMIRROR_GEN_CLEAN(g1));
	EXPECT_GT(g1, g0);
	EXPECT_EQ(g1, gm[9]);
	self->p[9 * CHUNK + 1] = 1;
	ASSERT_EQ(0, hmt_gen(self->sfd, 9, &g2));	/* moved before any harvest */
	EXPECT_FALSE(HMIRROR_GEN_CLEAN(g2));
	EXPECT_GT(g2, g1);
	EXPECT_EQ(g2, gm[9]);
	self->p[9 * CHUNK + 2] = 1;		/* no change until re-armed */
	EXPECT_EQ(g2, gm[9]);
	ASSERT_EQ(1, harvest_all(self->sfd, got, NR_CHUNKS));
	ASSERT_EQ(0, hmt_gen(self->sfd, 9, &g3));
	EXPECT_TRUE(HMIRROR_GEN_CLEAN(g3));
	EXPECT_GT(g3, g2);
	EXPECT_EQ(g1, gm[10]);			/* untouched chunk */
	munmap(gm, page_size);
}

TEST_F(space, poll)
{
	struct pollfd pfd = { .fd = self->sfd, .events = POLLIN };
	uint64_t got[NR_CHUNKS];

	ASSERT_EQ(0, hmt_arm(self->sfd, 0, NR_CHUNKS));
	EXPECT_EQ(0, poll(&pfd, 1, 0));
	self->p[CHUNK] = 1;
	EXPECT_EQ(1, poll(&pfd, 1, 0));
	EXPECT_TRUE(pfd.revents & POLLIN);
	ASSERT_EQ(1, harvest_all(self->sfd, got, NR_CHUNKS));
	EXPECT_EQ(0, poll(&pfd, 1, 0));
}

struct poke {
	char *addr;
	int delay_ms;
};

static void *poke_later(void *arg)
{
	struct poke *pk = arg;

	usleep(pk->delay_ms * 1000);
	*(volatile char *)pk->addr = 1;
	return NULL;
}

TEST_F(space, poll_wakes)
{
	struct pollfd pfd = { .fd = self->sfd, .events = POLLIN };
	struct poke pk = { self->p + 11 * CHUNK, 50 };
	pthread_t t;

	ASSERT_EQ(0, hmt_arm(self->sfd, 0, NR_CHUNKS));
	ASSERT_EQ(0, pthread_create(&t, NULL, poke_later, &pk));
	EXPECT_EQ(1, poll(&pfd, 1, 10000));
	pthread_join(t, NULL);
}

TEST_F(space, two_mappings)
{
	uint64_t got[NR_CHUNKS];
	char *q;

	q = mmap(NULL, SPACE, PROT_READ | PROT_WRITE, MAP_SHARED, self->sfd, 0);
	ASSERT_NE(MAP_FAILED, q);
	self->p[12 * CHUNK] = 5;	/* resident and writable before arming */
	q[13 * CHUNK] = 6;
	ASSERT_EQ(0, hmt_arm(self->sfd, 0, NR_CHUNKS));
	q[12 * CHUNK + 1] = 7;
	self->p[13 * CHUNK + 1] = 8;
	ASSERT_EQ(2, harvest_all(self->sfd, got, NR_CHUNKS));
	EXPECT_EQ(12, got[0]);
	EXPECT_EQ(13, got[1]);
	EXPECT_EQ(7, self->p[12 * CHUNK + 1]);
	EXPECT_EQ(8, q[13 * CHUNK + 1]);
	/* both re-armed */
	self->p[12 * CHUNK + 2] = 1;
	ASSERT_EQ(1, harvest_all(self->sfd, got, NR_CHUNKS));
	q[12 * CHUNK + 3] = 1;
	ASSERT_EQ(1, harvest_all(self->sfd, got, NR_CHUNKS));
	EXPECT_EQ(12, got[0]);
	munmap(q, SPACE);
}

TEST_F(space, two_processes_fork)
{
	uint64_t got[NR_CHUNKS];
	int st;
	pid_t pid;

	memset(self->p, 0, SPACE);
	ASSERT_EQ(0, hmt_arm(self->sfd, 0, NR_CHUNKS));
	pid = fork();
	ASSERT_GE(pid, 0);
	if (pid == 0) {
		char *q;

		/* the inherited mapping, and a new one of the inherited fd */
		self->p[20 * CHUNK] = 42;
		q = mmap(NULL, SPACE, PROT_READ | PROT_WRITE, MAP_SHARED,
			 self->sfd, 0);
		if (q == MAP_FAILED)
			_exit(2);
		q[21 * CHUNK] = 43;
		_exit(0);
	}
	ASSERT_EQ(pid, waitpid(pid, &st, 0));
	ASSERT_EQ(0, WEXITSTATUS(st));
	EXPECT_EQ(42, self->p[20 * CHUNK]);
	EXPECT_EQ(43, self->p[21 * CHUNK]);
	ASSERT_EQ(2, harvest_all(self->sfd, got, NR_CHUNKS));
	EXPECT_EQ(20, got[0]);
	EXPECT_EQ(21, got[1]);
	/* the parent's PTEs were re-armed by the child's harvest too */
	self->p[22 * CHUNK] = 1;
	pid = fork();
	ASSERT_GE(pid, 0);
	if (pid == 0) {
		uint64_t c[NR_CHUNKS];

		_exit(harvest_all(self->sfd, c, NR_CHUNKS) == 1 && c[0] == 22 ?
		      0 : 1);
	}
	ASSERT_EQ(pid, waitpid(pid, &st, 0));
	EXPECT_EQ(0, WEXITSTATUS(st));
	self->p[22 * CHUNK + 1] = 1;
	ASSERT_EQ(1, harvest_all(self->sfd, got, NR_CHUNKS));
	EXPECT_EQ(22, got[0]);
}

TEST_F(space, munmap_remap)
{
	uint64_t got[NR_CHUNKS];

	self->p[30 * CHUNK] = 9;
	ASSERT_EQ(0, hmt_arm(self->sfd, 0, NR_CHUNKS));
	ASSERT_EQ(0, munmap(self->p, SPACE));
	self->p = mmap(NULL, SPACE, PROT_READ | PROT_WRITE, MAP_SHARED,
		       self->sfd, 0);
	ASSERT_NE(MAP_FAILED, self->p);
	EXPECT_EQ(9, self->p[30 * CHUNK]);
	EXPECT_EQ(0, harvest_all(self->sfd, got, NR_CHUNKS));
	self->p[30 * CHUNK] = 10;
	ASSERT_EQ(1, harvest_all(self->sfd, got, NR_CHUNKS));
	EXPECT_EQ(30, got[0]);
	/* a partial unmap splits the VMA; both halves stay guarded */
	ASSERT_EQ(0, munmap(self->p + 8 * CHUNK, CHUNK));
	self->p[7 * CHUNK] = 1;
	self->p[9 * CHUNK] = 1;
	ASSERT_EQ(2, harvest_all(self->sfd, got, NR_CHUNKS));
	EXPECT_EQ(7, got[0]);
	EXPECT_EQ(9, got[1]);
	/* the fd closed: the mapping keeps the space alive */
	close(self->sfd);
	self->sfd = -1;
	self->p[1] = 3;
	EXPECT_EQ(3, self->p[1]);
}

TEST_F(space, kernel_writes_read_and_process_vm_writev)
{
	uint64_t got[NR_CHUNKS];
	char buf[64] = "written by the kernel";
	struct iovec local = { buf, sizeof(buf) };
	struct iovec remote = { self->p + 9 * CHUNK + 77, sizeof(buf) };
	int pfd[2];

	ASSERT_EQ(0, hmt_arm(self->sfd, 0, NR_CHUNKS));
	ASSERT_EQ(0, pipe(pfd));
	ASSERT_EQ(sizeof(buf), write(pfd[1], buf, sizeof(buf)));
	ASSERT_EQ(sizeof(buf), read(pfd[0], self->p + 5 * CHUNK + 3, sizeof(buf)));
	EXPECT_EQ(0, memcmp(self->p + 5 * CHUNK + 3, buf, sizeof(buf)));
	ASSERT_EQ(sizeof(buf), process_vm_writev(getpid(), &local, 1, &remote, 1, 0));
	EXPECT_EQ(0, memcmp(self->p + 9 * CHUNK + 77, buf, sizeof(buf)));
	ASSERT_EQ(2, harvest_all(self->sfd, got, NR_CHUNKS));
	EXPECT_EQ(5, got[0]);
	EXPECT_EQ(9, got[1]);
	close(pfd[0]);
	close(pfd[1]);
}

/* ---- races --------------------------------------------------------------- */

struct racer {
	char *p;
	atomic_int stop;
	unsigned int seed;
	unsigned int first, nr;	/* chunks this thread writes */
	size_t chunk;		/* chunk bytes; 0: CHUNK */
	unsigned long writes;
};

static void *racer_main(void *arg)
{
	struct racer *r = arg;
	unsigned int x = r->seed | 1;

	while (!atomic_load_explicit(&r->stop, memory_order_relaxed)) {
		unsigned int c, off;

		x ^= x << 13;
		x ^= x >> 17;
		x ^= x << 5;
		size_t chunk = r->chunk ?: CHUNK;

		c = r->first + x % r->nr;
		off = (x >> 8) % (chunk / sizeof(uint32_t));
		((volatile uint32_t *)(r->p + (size_t)c * chunk))[off] = x;
		__atomic_store_n(&r->writes, r->writes + 1, __ATOMIC_RELAXED);
	}
	return NULL;
}

/*
 * A writer stores random words while the main thread harvests and copies
 * the reported chunks into a mirror.  After the writer stops and a last
 * harvest, the mirror must equal the space: a write lost by a harvest
 * would leave its chunk stale in the mirror.
 */
TEST_F(space, write_during_harvest)
{
	char *mirror = malloc(SPACE);
	uint64_t got[NR_CHUNKS];
	struct racer r = { .p = self->p, .seed = 12345, .nr = NR_CHUNKS };
	pthread_t t;
	uint64_t t0;
	long n, i, unordered = 0;
	int round;

	ASSERT_NE(NULL, mirror);
	memset(self->p, 0, SPACE);
	ASSERT_EQ(0, hmt_arm(self->sfd, 0, NR_CHUNKS));
	memcpy(mirror, self->p, SPACE);
	ASSERT_EQ(0, pthread_create(&t, NULL, racer_main, &r));
	/* under TCG the writer may start after 2,000 empty harvests */
	t0 = hmt_now_ns();
	while (!__atomic_load_n(&r.writes, __ATOMIC_RELAXED) &&
	       hmt_now_ns() - t0 < 10000000000ull)
		usleep(1000);
	t0 = hmt_now_ns();
	for (round = 0; round < 2000 && hmt_now_ns() - t0 < 3000000000ull;
	     round++) {
		/* "more" may be set: the writer does not stop */
		n = hmt_harvest(self->sfd, got, NR_CHUNKS, NULL);
		if (n < 0)
			atomic_store(&r.stop, 1);
		ASSERT_GE(n, 0);
		for (i = 0; i < n; i++) {
			/* one call: strictly ascending, even when racing */
			if (i && got[i] <= got[i - 1])
				unordered++;
			memcpy(mirror + got[i] * CHUNK, self->p + got[i] * CHUNK,
			       CHUNK);
		}
	}
	atomic_store(&r.stop, 1);
	pthread_join(t, NULL);
	n = harvest_all(self->sfd, got, NR_CHUNKS);
	ASSERT_GE(n, 0);
	for (i = 0; i < n; i++)
		memcpy(mirror + got[i] * CHUNK, self->p + got[i] * CHUNK, CHUNK);
	for (i = 0; i < NR_CHUNKS; i++)
		EXPECT_EQ(0, memcmp(mirror + i * CHUNK, self->p + i * CHUNK, CHUNK))
			TH_LOG("chunk %ld stale after %lu writes", i, r.writes);
	TH_LOG("%d harvests, %lu writes", round, r.writes);
	EXPECT_GT(r.writes, 0);
	EXPECT_GT(round, 10);
	EXPECT_EQ(0, unordered);
	free(mirror);
}

/*
 * The same with one-page chunks and two writers: a write lost by a
 * harvest (a ->page_mkwrite that saw the chunk unarmed making its PTE
 * writable after the re-arm's write-protect) leaves the whole chunk
 * writable yet armed, never reported again, so it shows at the end.
 */
TEST_F(dev, write_during_harvest_page_chunks)
{
	enum { NR = 256, T = 2 };
	size_t size = NR * page_size;
	char *p, *mirror = malloc(size);
	struct racer r[T];
	uint64_t got[NR], t0;
	pthread_t t[T];
	long n, i, stale = 0;
	int sfd, round;

	ASSERT_NE(NULL, mirror);
	sfd = hmt_create(self->dev, size, __builtin_ctzl(page_size), 0);
	ASSERT_GE(sfd, 0);
	p = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, sfd, 0);
	ASSERT_NE(MAP_FAILED, p);
	memset(p, 0, size);
	ASSERT_EQ(0, hmt_arm(sfd, 0, NR));
	memcpy(mirror, p, size);
	for (i = 0; i < T; i++) {
		r[i] = (struct racer){ .p = p, .seed = 99 + 7 * i, .nr = NR,
				       .chunk = page_size };
		ASSERT_EQ(0, pthread_create(&t[i], NULL, racer_main, &r[i]));
	}
	t0 = hmt_now_ns();
	for (round = 0; hmt_now_ns() - t0 < 3000000000ull; round++) {
		n = hmt_harvest(sfd, got, NR, NULL);
		if (n < 0)
			break;
		for (i = 0; i < n; i++)
			memcpy(mirror + got[i] * page_size,
			       p + got[i] * page_size, page_size);
	}
	for (i = 0; i < T; i++) {
		atomic_store(&r[i].stop, 1);
		pthread_join(t[i], NULL);
	}
	ASSERT_GE(n, 0);
	n = hmt_harvest(sfd, got, NR, NULL);
	ASSERT_GE(n, 0);
	for (i = 0; i < n; i++)
		memcpy(mirror + got[i] * page_size, p + got[i] * page_size,
		       page_size);
	for (i = 0; i < NR; i++)
		stale += !!memcmp(mirror + i * page_size, p + i * page_size,
				  page_size);
	TH_LOG("%d harvests, %lu + %lu writes, %ld stale chunks", round,
	       r[0].writes, r[1].writes, stale);
	EXPECT_EQ(0, stale);
	munmap(p, size);
	close(sfd);
	free(mirror);
}

TEST_F(space, many_threads_scattered)
{
	enum { T = 4 };
	struct racer r[T];
	pthread_t t[T];
	uint64_t got[NR_CHUNKS], seen = 0;
	long n, i;

	ASSERT_EQ(0, hmt_arm(self->sfd, 0, NR_CHUNKS));
	/* threads write chunks [8i, 8i + 6): chunks 8i+6, 8i+7 stay clean */
	for (i = 0; i < T; i++) {
		r[i] = (struct racer){ .p = self->p, .seed = 77 * (i + 1),
				       .first = 8 * i, .nr = 6 };
		ASSERT_EQ(0, pthread_create(&t[i], NULL, racer_main, &r[i]));
	}
	usleep(200 * 1000);
	/*
	 * under TCG a thread may start late: wait until each has stored
	 * enough times to have hit each of its 6 chunks (at most 10 s)
	 */
	for (i = 0; i < T; i++) {
		uint64_t t0 = hmt_now_ns();

		while (__atomic_load_n(&r[i].writes, __ATOMIC_RELAXED) < 1000 &&
		       hmt_now_ns() - t0 < 10000000000ull)
			usleep(1000);
	}
	for (i = 0; i < T; i++)
		atomic_store(&r[i].stop, 1);
	for (i = 0; i < T; i++)
		pthread_join(t[i], NULL);
	n = harvest_all(self->sfd, got, NR_CHUNKS);
	ASSERT_EQ(T * 6, n);
	for (i = 0; i < n; i++) {
		EXPECT_LT(got[i] % 8, 6);
		EXPECT_LT(got[i], 8 * T);
		seen |= 1ULL << got[i];
	}
	EXPECT_EQ(T * 6, __builtin_popcountll(seen));
}

/* ---- the device view ----------------------------------------------------- */

TEST_F(space, device_view)
{
	uint64_t got[NR_CHUNKS];
	long long faults;
	char *v;
	int round;

	v = mmap(NULL, SPACE, PROT_READ | PROT_WRITE, MAP_SHARED, self->sfd,
		 HMIRROR_MMAP_VIEW);
	ASSERT_NE(MAP_FAILED, v);
	ASSERT_EQ(0, hmt_arm(self->sfd, 0, NR_CHUNKS));
	/* same pages both ways */
	self->p[4 * CHUNK] = 'g';
	EXPECT_EQ('g', v[4 * CHUNK]);
	ASSERT_EQ(1, harvest_all(self->sfd, got, NR_CHUNKS));
	/* writes through the view are not recorded, and land in the space */
	v[5 * CHUNK] = 'v';
	v[4 * CHUNK + 1] = 'w';
	EXPECT_EQ('v', self->p[5 * CHUNK]);
	EXPECT_EQ(0, harvest_all(self->sfd, got, NR_CHUNKS));
	/* harvests never write-protect the view: no new faults through it */
	v[6 * CHUNK] = 0;
	faults = hmt_stat("faults_view");
	for (round = 0; round < 10; round++) {
		self->p[6 * CHUNK + round] = 1;
		v[6 * CHUNK + 100 + round] = 2;
		v[5 * CHUNK + round] = 3;
		ASSERT_EQ(1, harvest_all(self->sfd, got, NR_CHUNKS));
		EXPECT_EQ(6, got[0]);
	}
	if (faults >= 0)
		EXPECT_EQ(faults + 0, hmt_stat("faults_view"));
	EXPECT_EQ(0, memcmp(v, self->p, SPACE));
	/* the view window is bounded by the space too */
	EXPECT_EQ(MAP_FAILED, mmap(NULL, 2 * SPACE, PROT_READ, MAP_SHARED,
				   self->sfd, HMIRROR_MMAP_VIEW));
	munmap(v, SPACE);
}

#ifndef __NR_io_uring_setup
#define __NR_io_uring_setup 425
#define __NR_io_uring_register 427
#endif
#define IORING_REGISTER_BUFFERS_ 0
#define IORING_UNREGISTER_BUFFERS_ 1

struct uring_params_ {
	uint32_t sq_entries, cq_entries, flags, sq_thread_cpu, sq_thread_idle;
	uint32_t features, wq_fd, resv[3];
	uint64_t sq_off[5], cq_off[5];
};

/* io_uring buffer registration pins FOLL_WRITE | FOLL_LONGTERM */
static int longterm_pin(void *addr, size_t len)
{
	struct uring_params_ prm;
	struct iovec iov = { addr, len };
	int ring, ret;

	memset(&prm, 0, sizeof(prm));
	ring = syscall(__NR_io_uring_setup, 4, &prm);
	if (ring < 0)
		return -1000 - errno;
	ret = syscall(__NR_io_uring_register, ring, IORING_REGISTER_BUFFERS_, &iov, 1);
	ret = ret < 0 ? -errno : 0;
	close(ring);
	return ret;
}

TEST_F(space, device_view_longterm_pin)
{
	char *v;
	int r;

	v = mmap(NULL, SPACE, PROT_READ | PROT_WRITE, MAP_SHARED, self->sfd,
		 HMIRROR_MMAP_VIEW);
	ASSERT_NE(MAP_FAILED, v);
	r = longterm_pin(v, SPACE);
	if (r <= -1000)
		SKIP(goto out, "no io_uring (%s)", strerror(-r - 1000));
	if (r == -EOPNOTSUPP)	/* 6.1's io_uring refuses file mappings */
		SKIP(goto out, "io_uring pins no file-backed memory here");
	EXPECT_EQ(0, r);
	/* 6.5+: the guarded mapping (write-notify) cannot be pinned so */
	r = longterm_pin(self->p, SPACE);
	EXPECT_NE(0, r);
out:
	munmap(v, SPACE);
}

/* ---- size: 16 GiB on a small guest --------------------------------------- */

TEST_F(dev, huge_space_untouched_costs_nothing)
{
	const uint64_t size = 16ULL << 30, nr = size >> CHUNK_SHIFT;
	long long res0 = hmt_stat("pages_resident");
	uint64_t got[128], t0, t_empty;
	char *p;
	int sfd, i;
	long n;

	sfd = hmt_create(self->dev, size, CHUNK_SHIFT, 0);
	ASSERT_GE(sfd, 0);
	p = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_NORESERVE,
		 sfd, 0);
	ASSERT_NE(MAP_FAILED, p);
	ASSERT_EQ(0, hmt_arm(sfd, 0, nr));
	t0 = hmt_now_ns();
	for (i = 0; i < 100; i++)
		ASSERT_EQ(0, hmt_harvest(sfd, got, 128, NULL));
	t_empty = (hmt_now_ns() - t0) / 100;
	TH_LOG("harvest of an untouched 16 GiB space: %llu ns",
	       (unsigned long long)t_empty);
	for (i = 0; i < 64; i++)
		p[(uint64_t)i * (nr / 64) * CHUNK + 8] = 1;
	if (res0 >= 0)
		EXPECT_EQ(res0 + 64, hmt_stat("pages_resident"));
	n = hmt_harvest(sfd, got, 128, NULL);
	ASSERT_EQ(64, n);
	for (i = 0; i < 64; i++)
		EXPECT_EQ((uint64_t)i * (nr / 64), got[i]);
	munmap(p, size);
	close(sfd);
	if (res0 >= 0)
		EXPECT_EQ(res0, hmt_stat("pages_resident"));
}

TEST_F(dev, populate)
{
	long long res0 = hmt_stat("pages_resident");
	int sfd = hmt_create(self->dev, SPACE, 0, HMIRROR_CREATE_POPULATE);

	ASSERT_GE(sfd, 0);
	if (res0 >= 0)
		EXPECT_EQ(res0 + SPACE / page_size, hmt_stat("pages_resident"));
	close(sfd);
	if (res0 >= 0)
		EXPECT_EQ(res0, hmt_stat("pages_resident"));
}

/* ---- counters: a copy per CPU, read summed ------------------------------ */

static int run_on_cpu(int cpu)
{
	cpu_set_t set;

	CPU_ZERO(&set);
	CPU_SET(cpu, &set);
	return sched_setaffinity(0, sizeof(set), &set);
}

/* counter @name of space @id in <debugfs>/hmirror/spaces; -1 if absent */
static long long space_stat(uint32_t id, const char *name)
{
	char line[256], key[128];
	long long v, ret = -1;
	bool mine = false;
	unsigned int sid;
	FILE *f;

	f = fopen(HMT_DEBUGFS "/spaces", "r");
	if (!f)
		return -1;
	while (fgets(line, sizeof(line), f)) {
		if (sscanf(line, "space %u", &sid) == 1)
			mine = sid == id;
		else if (mine && sscanf(line, " %127s %lld", key, &v) == 2 &&
			 !strcmp(key, name))
			ret = v;
	}
	fclose(f);
	return ret;
}

/*
 * Trips on two CPUs, pages made resident on one and freed on the other:
 * every counter (global, per space, gauges) reads the sum of the copies.
 */
TEST_F(dev, counters_summed_over_cpus)
{
	long long trips0 = hmt_stat("guard_trips");
	long long res0 = hmt_stat("pages_resident");
	long long bytes0 = hmt_stat("space_bytes");
	struct hmirror_space_info info;
	cpu_set_t all;
	int sfd, i;
	char *p;

	if (sysconf(_SC_NPROCESSORS_ONLN) < 2)
		SKIP(return, "one CPU");
	if (trips0 < 0)
		SKIP(return, "no debugfs");
	ASSERT_EQ(0, sched_getaffinity(0, sizeof(all), &all));
	ASSERT_EQ(0, run_on_cpu(0));
	sfd = hmt_create(self->dev, SPACE, CHUNK_SHIFT, 0);
	ASSERT_GE(sfd, 0);
	memset(&info, 0, sizeof(info));
	ASSERT_EQ(0, ioctl(sfd, HMIRROR_IOC_SPACE_INFO, &info));
	p = mmap(NULL, SPACE, PROT_READ | PROT_WRITE, MAP_SHARED, sfd, 0);
	ASSERT_NE(MAP_FAILED, p);
	for (i = 0; i < NR_CHUNKS; i++)
		p[(size_t)i * CHUNK] = 1;	/* one page resident each, CPU 0 */
	ASSERT_EQ(0, hmt_arm(sfd, 0, NR_CHUNKS));
	for (i = 0; i < NR_CHUNKS; i++) {
		ASSERT_EQ(0, run_on_cpu(i % 2));
		p[(size_t)i * CHUNK + 8] = 2;	/* a trip each, on CPU i % 2 */
	}
	EXPECT_EQ(trips0 + NR_CHUNKS, hmt_stat("guard_trips"));
	EXPECT_EQ(NR_CHUNKS, space_stat(info.id, "guard_trips"));
	EXPECT_EQ(res0 + NR_CHUNKS, hmt_stat("pages_resident"));
	EXPECT_EQ(NR_CHUNKS, space_stat(info.id, "pages_resident"));
	munmap(p, SPACE);
	ASSERT_EQ(0, run_on_cpu(1));
	close(sfd);			/* freed on CPU 1 */
	EXPECT_EQ(res0, hmt_stat("pages_resident"));
	EXPECT_EQ(bytes0, hmt_stat("space_bytes"));
	sched_setaffinity(0, sizeof(all), &all);
}

/* ---- teardown: last, since it unloads the module ------------------------- */

/* its own fixture, defined last, so that it runs after all the others */
FIXTURE(teardown) {
	int dev;
};

FIXTURE_SETUP(teardown)
{
	self->dev = hmt_open_dev();
	/* a SKIP in setup would still run the test body: leave instead */
	if (self->dev < 0)
		SKIP(_exit(255), "no /dev/hmirror (%s)", strerror(-self->dev));
}

FIXTURE_TEARDOWN(teardown)
{
	if (self->dev >= 0)
		close(self->dev);
}

TEST_F(teardown, exit_with_spaces_armed_then_unload)
{
	int st;
	pid_t pid;

	if (hmt_stat("spaces") < 0)
		SKIP(return, "no debugfs");
	pid = fork();
	ASSERT_GE(pid, 0);
	if (pid == 0) {
		int i;

		for (i = 0; i < 4; i++) {
			int s = hmt_create(self->dev, SPACE, 0, 0);
			char *p, *v;

			if (s < 0)
				_exit(1);
			p = mmap(NULL, SPACE, PROT_READ | PROT_WRITE,
				 MAP_SHARED, s, 0);
			v = mmap(NULL, SPACE, PROT_READ | PROT_WRITE,
				 MAP_SHARED, s, HMIRROR_MMAP_VIEW);
			if (p == MAP_FAILED || v == MAP_FAILED)
				_exit(2);
			memset(p, 1, SPACE / 2);
			if (hmt_arm(s, 0, NR_CHUNKS))
				_exit(3);
			p[0] = 2;
			v[SPACE - 1] = 3;
		}
		_exit(0);	/* fds, mappings: all left to the kernel */
	}
	ASSERT_EQ(pid, waitpid(pid, &st, 0));
	ASSERT_EQ(0, WEXITSTATUS(st));
	EXPECT_EQ(0, hmt_stat("spaces"));
	EXPECT_EQ(0, hmt_stat("space_bytes"));
	EXPECT_EQ(0, hmt_stat("pages_resident"));
	EXPECT_EQ(0, hmt_stat("mappings"));
	close(self->dev);
	self->dev = -1;
	EXPECT_EQ(0, system("rmmod hmirror"));
	EXPECT_EQ(0, system("modprobe hmirror"));
}

static void __attribute__((constructor)) init_page_size(void)
{
	page_size = sysconf(_SC_PAGESIZE);
}

TEST_HARNESS_MAIN
