// SPDX-License-Identifier: GPL-2.0
/*
 * hmirror.ko: every path that could make an armed page writable, or write
 * it, behind the guard (mprotect, userfaultfd, madvise, mremap, fork, GUP
 * pins, ftruncate), harvest without re-arm, and the bounds on one ioctl's
 * work and locks.  Run in the VM on each test kernel:
 *   tools/vm/run --kernel 6.12 -- build/bin/test-kmod-guard-paths
 */
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <sys/utsname.h>
#include <sys/wait.h>

#include "hmirror_test.h"
#include "kselftest_harness.h"
#include "../../lib/uffd_compat.h"

#define CHUNK_SHIFT	16
#define CHUNK		(1UL << CHUNK_SHIFT)
#define NR_CHUNKS	64
#define SPACE		(NR_CHUNKS * CHUNK)

#ifndef MADV_COLD
#define MADV_COLD	20
#endif
#ifndef MADV_PAGEOUT
#define MADV_PAGEOUT	21
#endif
#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE 23
#endif

static long page_size;

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

/* every recorded chunk, re-arming; -E2BIG if more than cap */
static long harvest_all(int sfd, uint64_t *chunks, uint64_t cap)
{
	int more = 0;
	long n = hmt_harvest(sfd, chunks, cap, &more);

	return (n >= 0 && more) ? -E2BIG : n;
}

static long harvest_norearm(int sfd, uint64_t *chunks, uint64_t cap,
			    int *ret_more)
{
	struct hmirror_harvest h = {
		.chunks = (uintptr_t)chunks, .cap = cap,
		.flags = HMIRROR_HARVEST_NO_REARM,
	};

	if (ioctl(sfd, HMIRROR_IOC_HARVEST, &h))
		return -errno;
	if (ret_more)
		*ret_more = !!(h.out_flags & HMIRROR_HARVEST_MORE);
	return (long)h.nr;
}

/* harvest and expect exactly chunk c */
#define EXPECT_ONLY(sfd, c) do {					\
	uint64_t _got[NR_CHUNKS];					\
	long _n = harvest_all((sfd), _got, NR_CHUNKS);			\
	EXPECT_EQ(1, _n);						\
	if (_n >= 1)							\
		EXPECT_EQ((uint64_t)(c), _got[0]);			\
} while (0)

#define EXPECT_NONE(sfd) do {						\
	uint64_t _got[NR_CHUNKS];					\
	EXPECT_EQ(0, harvest_all((sfd), _got, NR_CHUNKS));		\
} while (0)

/* arm everything, trip chunk 5 and harvest it: its PTEs are re-armed now */
static int tripped_and_rearmed(int sfd, char *p)
{
	uint64_t got[NR_CHUNKS];

	memset(p, 0, SPACE);	/* every page resident and dirty */
	if (hmt_arm(sfd, 0, NR_CHUNKS))
		return -1;
	p[5 * CHUNK + 1] = 1;
	if (harvest_all(sfd, got, NR_CHUNKS) != 1 || got[0] != 5)
		return -1;
	return 0;
}

/* ---- mprotect ------------------------------------------------------------ */

/*
 * A re-armed PTE left dirty is made writable again by mprotect() without
 * ->page_mkwrite: the second write would go unrecorded.
 */
TEST_F(space, mprotect_after_harvest)
{
	uint64_t g;

	ASSERT_EQ(0, tripped_and_rearmed(self->sfd, self->p));
	ASSERT_EQ(0, mprotect(self->p, SPACE, PROT_READ));
	ASSERT_EQ(0, mprotect(self->p, SPACE, PROT_READ | PROT_WRITE));
	self->p[5 * CHUNK + 2] = 2;
	ASSERT_EQ(0, hmt_gen(self->sfd, 5, &g));
	EXPECT_FALSE(HMIRROR_GEN_CLEAN(g));
	EXPECT_ONLY(self->sfd, 5);
}

/* the same through ARM: a chunk written while unarmed, then armed */
TEST_F(space, mprotect_after_arm)
{
	memset(self->p, 1, SPACE);
	ASSERT_EQ(0, hmt_arm(self->sfd, 0, NR_CHUNKS));
	ASSERT_EQ(0, mprotect(self->p + 4 * CHUNK, 4 * CHUNK, PROT_READ));
	ASSERT_EQ(0, mprotect(self->p + 4 * CHUNK, 4 * CHUNK,
			      PROT_READ | PROT_WRITE));
	self->p[6 * CHUNK] = 2;
	EXPECT_ONLY(self->sfd, 6);
}

/* a written chunk re-armed by ARM (record kept), then mprotect */
TEST_F(space, mprotect_after_rearm_by_arm)
{
	uint64_t got[NR_CHUNKS], g0, g1;

	ASSERT_EQ(0, tripped_and_rearmed(self->sfd, self->p));
	self->p[9 * CHUNK] = 1;		/* tripped, writable, dirty */
	ASSERT_EQ(0, hmt_arm(self->sfd, 9, 1));	/* re-armed, record kept */
	ASSERT_EQ(0, hmt_gen(self->sfd, 9, &g0));
	EXPECT_TRUE(HMIRROR_GEN_CLEAN(g0));
	ASSERT_EQ(0, mprotect(self->p, SPACE, PROT_READ));
	ASSERT_EQ(0, mprotect(self->p, SPACE, PROT_READ | PROT_WRITE));
	self->p[9 * CHUNK + 3] = 1;
	/* rule 3 reads the generation: it must have moved */
	ASSERT_EQ(0, hmt_gen(self->sfd, 9, &g1));
	EXPECT_GT(g1, g0);
	EXPECT_FALSE(HMIRROR_GEN_CLEAN(g1));
	ASSERT_EQ(1, harvest_all(self->sfd, got, NR_CHUNKS));
	EXPECT_EQ(9, got[0]);
}

/* ---- userfaultfd write-protect on the guarded mapping -------------------- */

static int uffd_open(uint64_t features, uint64_t *ret_features)
{
	struct uffdio_api api = { .api = UFFD_API, .features = features };
	int fd = syscall(__NR_userfaultfd, O_CLOEXEC | O_NONBLOCK);

	if (fd < 0)
		return -errno;
	if (ioctl(fd, UFFDIO_API, &api)) {
		close(fd);
		return -EOPNOTSUPP;
	}
	if (ret_features)
		*ret_features = api.features;
	return fd;
}

static int uffd_wp(int uffd, void *addr, size_t len, bool wp)
{
	struct uffdio_writeprotect w = {
		.range = { (uintptr_t)addr, len },
		.mode = wp ? UFFDIO_WRITEPROTECT_MODE_WP : 0,
	};

	return ioctl(uffd, UFFDIO_WRITEPROTECT, &w) ? -errno : 0;
}

/*
 * Async uffd-wp accepts any VMA (6.7+).  Its un-protect upgrades dirty
 * PTEs to writable (MM_CP_TRY_CHANGE_WRITABLE): with armed PTEs clean, the
 * write still reaches ->page_mkwrite.  Synchronous uffd-wp refuses the
 * mapping (not anon, shmem or hugetlb): uffd_wp_sync_refused.
 */
TEST_F(space, uffd_wp_async_unprotect)
{
	struct uffdio_register reg = {
		.range = { (uintptr_t)self->p, SPACE },
		.mode = UFFDIO_REGISTER_MODE_WP,
	};
	uint64_t feat = 0;
	int uffd;

	uffd = uffd_open(UFFD_FEATURE_WP_ASYNC, &feat);
	if (uffd < 0)
		SKIP(return, "no userfaultfd async write-protect here");
	ASSERT_EQ(0, tripped_and_rearmed(self->sfd, self->p));
	if (ioctl(uffd, UFFDIO_REGISTER, &reg)) {
		close(uffd);
		SKIP(return, "UFFDIO_REGISTER refused: %s", strerror(errno));
	}
	ASSERT_EQ(0, uffd_wp(uffd, self->p, SPACE, true));
	ASSERT_EQ(0, uffd_wp(uffd, self->p, SPACE, false));
	self->p[5 * CHUNK + 7] = 7;
	EXPECT_ONLY(self->sfd, 5);
	/* and a write-protected, then written chunk is recorded too */
	ASSERT_EQ(0, uffd_wp(uffd, self->p, SPACE, true));
	self->p[8 * CHUNK] = 8;
	EXPECT_ONLY(self->sfd, 8);
	close(uffd);
}

TEST_F(space, uffd_wp_sync_refused)
{
	struct uffdio_register reg = {
		.range = { (uintptr_t)self->p, SPACE },
		.mode = UFFDIO_REGISTER_MODE_WP,
	};
	int uffd = uffd_open(0, NULL);

	if (uffd < 0)
		SKIP(return, "no userfaultfd");
	ASSERT_EQ(0, hmt_arm(self->sfd, 0, NR_CHUNKS));
	EXPECT_EQ(-1, ioctl(uffd, UFFDIO_REGISTER, &reg));
	EXPECT_EQ(EINVAL, errno);
	close(uffd);
}

/* ---- madvise ------------------------------------------------------------- */

TEST_F(space, madvise_dontneed_refault)
{
	ASSERT_EQ(0, tripped_and_rearmed(self->sfd, self->p));
	ASSERT_EQ(0, madvise(self->p, SPACE, MADV_DONTNEED));
	/* the pages are the module's: contents survive, refault read-only */
	EXPECT_EQ(1, self->p[5 * CHUNK + 1]);
	EXPECT_NONE(self->sfd);
	self->p[5 * CHUNK + 2] = 2;
	EXPECT_ONLY(self->sfd, 5);
	/* a write fault on a zapped PTE is a trip as well */
	ASSERT_EQ(0, madvise(self->p, SPACE, MADV_DONTNEED));
	self->p[6 * CHUNK] = 2;
	EXPECT_ONLY(self->sfd, 6);
	/* the refaulted, written, re-armed PTEs: mprotect keeps them armed */
	ASSERT_EQ(0, mprotect(self->p, SPACE, PROT_READ));
	ASSERT_EQ(0, mprotect(self->p, SPACE, PROT_READ | PROT_WRITE));
	self->p[6 * CHUNK + 1] = 3;
	EXPECT_ONLY(self->sfd, 6);
}

TEST_F(space, madvise_cold_pageout_populate)
{
	int r;

	ASSERT_EQ(0, tripped_and_rearmed(self->sfd, self->p));
	/* not on the LRU: nothing to age or reclaim, PTEs stay armed */
	ASSERT_EQ(0, madvise(self->p, SPACE, MADV_COLD));
	ASSERT_EQ(0, madvise(self->p, SPACE, MADV_PAGEOUT));
	ASSERT_EQ(0, mprotect(self->p, SPACE, PROT_READ));
	ASSERT_EQ(0, mprotect(self->p, SPACE, PROT_READ | PROT_WRITE));
	self->p[5 * CHUNK + 2] = 2;
	EXPECT_ONLY(self->sfd, 5);
	/* a kernel write fault (GUP) of an armed chunk is a trip */
	r = madvise(self->p + 7 * CHUNK, page_size, MADV_POPULATE_WRITE);
	if (r && errno == EINVAL)
		return;	/* no MADV_POPULATE_WRITE */
	ASSERT_EQ(0, r);
	EXPECT_ONLY(self->sfd, 7);
}

/* ---- mremap and fork ----------------------------------------------------- */

TEST_F(space, mremap_move_and_expand)
{
	char *q, *hole;

	ASSERT_EQ(0, tripped_and_rearmed(self->sfd, self->p));
	hole = mmap(NULL, SPACE, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	ASSERT_NE(MAP_FAILED, hole);
	/* moved PTEs keep their protection */
	q = mremap(self->p, SPACE, SPACE, MREMAP_MAYMOVE | MREMAP_FIXED, hole);
	ASSERT_NE(MAP_FAILED, q);
	self->p = q;
	EXPECT_EQ(1, q[5 * CHUNK + 1]);
	ASSERT_EQ(0, mprotect(q, SPACE, PROT_READ));
	ASSERT_EQ(0, mprotect(q, SPACE, PROT_READ | PROT_WRITE));
	q[5 * CHUNK + 3] = 3;
	EXPECT_ONLY(self->sfd, 5);
	/* VM_DONTEXPAND: growing is refused, shrinking is an unmap */
	EXPECT_EQ(MAP_FAILED, mremap(q, SPACE, 2 * SPACE, MREMAP_MAYMOVE));
	EXPECT_EQ(EFAULT, errno);
	q = mremap(self->p, SPACE, SPACE - CHUNK, 0);
	ASSERT_EQ(self->p, q);
	ASSERT_EQ(0, munmap(self->p, SPACE - CHUNK));
	self->p = MAP_FAILED;
}

/* a child's PTEs of the shared mapping are faulted afresh: armed too */
TEST_F(space, fork_child_mprotect)
{
	int st;
	pid_t pid;

	ASSERT_EQ(0, tripped_and_rearmed(self->sfd, self->p));
	pid = fork();
	ASSERT_GE(pid, 0);
	if (pid == 0) {
		if (mprotect(self->p, SPACE, PROT_READ) ||
		    mprotect(self->p, SPACE, PROT_READ | PROT_WRITE))
			_exit(2);
		self->p[5 * CHUNK + 4] = 4;
		_exit(0);
	}
	ASSERT_EQ(pid, waitpid(pid, &st, 0));
	ASSERT_EQ(0, WEXITSTATUS(st));
	EXPECT_ONLY(self->sfd, 5);
	/* the parent's own mprotect after the child's write */
	ASSERT_EQ(0, mprotect(self->p, SPACE, PROT_READ));
	ASSERT_EQ(0, mprotect(self->p, SPACE, PROT_READ | PROT_WRITE));
	self->p[5 * CHUNK + 5] = 5;
	EXPECT_ONLY(self->sfd, 5);
}

/* ---- ftruncate ----------------------------------------------------------- */

TEST_F(space, ftruncate_refused)
{
	uint64_t *gm, g5, g6;
	char path[64], *view;

	gm = mmap(NULL, page_size, PROT_READ, MAP_SHARED, self->sfd,
		  HMIRROR_MMAP_GENERATIONS);
	ASSERT_NE(MAP_FAILED, gm);
	view = mmap(NULL, SPACE, PROT_READ | PROT_WRITE, MAP_SHARED, self->sfd,
		    HMIRROR_MMAP_VIEW);
	ASSERT_NE(MAP_FAILED, view);
	ASSERT_EQ(0, tripped_and_rearmed(self->sfd, self->p));
	self->p[6 * CHUNK] = 6;
	g5 = gm[5];
	g6 = gm[6];
	EXPECT_EQ(-1, ftruncate(self->sfd, 0));
	EXPECT_EQ(EINVAL, errno);
	EXPECT_EQ(-1, ftruncate(self->sfd, 2 * SPACE));
	EXPECT_EQ(EINVAL, errno);
	snprintf(path, sizeof(path), "/proc/self/fd/%d", self->sfd);
	EXPECT_EQ(-1, truncate(path, 0));
	/* nothing changed: generations, view, guarded mapping, records */
	EXPECT_EQ(g5, gm[5]);
	EXPECT_EQ(g6, gm[6]);
	EXPECT_EQ(6, view[6 * CHUNK]);
	EXPECT_EQ(1, view[5 * CHUNK + 1]);
	EXPECT_EQ(6, self->p[6 * CHUNK]);
	EXPECT_ONLY(self->sfd, 6);
	munmap(view, SPACE);
	munmap(gm, page_size);
}

/* ---- GUP pins ------------------------------------------------------------ */

#define __NR_io_uring_setup_ 425
#define __NR_io_uring_register_ 427
#define IORING_REGISTER_BUFFERS_ 0
#define IORING_UNREGISTER_BUFFERS_ 1

/* an io_uring with @addr registered (FOLL_PIN | FOLL_LONGTERM), or -errno */
static int pin_longterm(void *addr, size_t len)
{
	struct iovec iov = { addr, len };
	uint32_t params[30] = { 0 };	/* struct io_uring_params, zeroed */
	int ring = syscall(__NR_io_uring_setup_, 1, params);

	if (ring < 0)
		return -errno;
	if (syscall(__NR_io_uring_register_, ring, IORING_REGISTER_BUFFERS_,
		    &iov, 1)) {
		int err = -errno;

		close(ring);
		return err;
	}
	return ring;
}

struct odirect {
	int fd;
	void *buf;
	ssize_t ret;
};

static void *odirect_read(void *arg)
{
	struct odirect *o = arg;

	o->ret = pread(o->fd, o->buf, 4096, 0);
	return NULL;
}

/*
 * Does this kernel's block layer pin O_DIRECT pages (FOLL_PIN, 6.5+)?
 * Before, it takes plain references: no page flag says so, so the test
 * can only read the kernel's version.
 */
static bool odirect_pins(void)
{
	struct utsname u;
	unsigned int major = 0, minor = 0;

	if (uname(&u) || sscanf(u.release, "%u.%u", &major, &minor) != 2)
		return false;
	return major > 6 || (major == 6 && minor >= 5);
}

/* /dev/nullb0 completing each request after @ms, or -1 */
static int nullb_open(unsigned int ms)
{
	char cmd[160];
	int fd;

	system("rmmod null_blk 2>/dev/null");
	snprintf(cmd, sizeof(cmd),
		 "modprobe null_blk nr_devices=1 irqmode=2 completion_nsec=%u000000 2>/dev/null",
		 ms);
	if (system(cmd))
		return -1;
	for (int i = 0; i < 50; i++) {
		fd = open("/dev/nullb0", O_RDONLY | O_DIRECT);
		if (fd >= 0)
			return fd;
		usleep(20000);
	}
	return -1;
}

/*
 * A chunk whose page is pinned for writing cannot be called clean at
 * re-arm: the data lands after the fault that recorded it.  The pin is an
 * io_uring fixed buffer where the kernel lets one pin the guarded mapping,
 * else an O_DIRECT read from a null_blk device that completes late.
 */
TEST_F(space, pinned_chunk_stays_written)
{
	uint64_t got[NR_CHUNKS], g;
	struct odirect o = { .fd = -1 };
	pthread_t t;
	int ring, i, more;
	bool odirect = false;

	ASSERT_EQ(0, hmt_arm(self->sfd, 0, NR_CHUNKS));
	ring = pin_longterm(self->p + 5 * CHUNK, page_size);
	if (ring < 0) {
		if (!odirect_pins())
			SKIP(return, "no long-term pin of the guarded mapping, and O_DIRECT takes plain references here (Documentation/design.rst)");
		o.fd = nullb_open(1500);
		if (o.fd < 0)
			SKIP(return, "no long-term pin of the guarded mapping and no null_blk");
		o.buf = self->p + 5 * CHUNK;
		ASSERT_EQ(0, pthread_create(&t, NULL, odirect_read, &o));
		odirect = true;
		usleep(300000);	/* the read is submitted, its pin held */
	}
	/* recorded by the write fault of the pin */
	ASSERT_EQ(1, harvest_all(self->sfd, got, NR_CHUNKS));
	EXPECT_EQ(5, got[0]);
	/* still pinned: reported again, never clean, also after an ARM */
	for (i = 0; i < 2; i++) {
		more = 1;
		ASSERT_EQ(1, hmt_harvest(self->sfd, got, NR_CHUNKS, &more));
		EXPECT_EQ(5, got[0]);
		EXPECT_EQ(0, more);	/* kept behind the cursor: no MORE */
	}
	ASSERT_EQ(0, hmt_arm(self->sfd, 5, 1));
	ASSERT_EQ(0, hmt_gen(self->sfd, 5, &g));
	EXPECT_FALSE(HMIRROR_GEN_CLEAN(g));
	if (odirect) {
		pthread_join(t, NULL);
		EXPECT_EQ(4096, o.ret);
		close(o.fd);
		system("rmmod null_blk 2>/dev/null");
	} else {
		close(ring);	/* unpins */
	}
	/* unpinned: one last report, then clean */
	ASSERT_EQ(1, harvest_all(self->sfd, got, NR_CHUNKS));
	EXPECT_EQ(5, got[0]);
	ASSERT_EQ(0, hmt_gen(self->sfd, 5, &g));
	EXPECT_TRUE(HMIRROR_GEN_CLEAN(g));
	EXPECT_NONE(self->sfd);
}

/*
 * process_vm_writev pins, writes and unpins inside the call: recorded by
 * the GUP write fault, also after an mprotect of the re-armed chunk.
 */
TEST_F(space, process_vm_writev_rearmed)
{
	char buf[256] = "from another process";
	struct iovec local = { buf, sizeof(buf) };
	struct iovec remote = { self->p + 5 * CHUNK + 64, sizeof(buf) };
	int st;
	pid_t pid, me = getpid();

	ASSERT_EQ(0, tripped_and_rearmed(self->sfd, self->p));
	ASSERT_EQ(0, mprotect(self->p, SPACE, PROT_READ));
	ASSERT_EQ(0, mprotect(self->p, SPACE, PROT_READ | PROT_WRITE));
	pid = fork();
	ASSERT_GE(pid, 0);
	if (pid == 0)
		_exit(process_vm_writev(me, &local, 1, &remote, 1, 0) ==
		      sizeof(buf) ? 0 : 1);
	ASSERT_EQ(pid, waitpid(pid, &st, 0));
	ASSERT_EQ(0, WEXITSTATUS(st));
	EXPECT_EQ(0, memcmp(self->p + 5 * CHUNK + 64, buf, sizeof(buf)));
	EXPECT_ONLY(self->sfd, 5);
	EXPECT_NONE(self->sfd);
}

/* ---- harvest without re-arm ---------------------------------------------- */

TEST_F(space, harvest_no_rearm)
{
	struct hmirror_api a = { .api = HMIRROR_API };
	uint64_t got[NR_CHUNKS], g;
	int more = 1;

	ASSERT_EQ(0, ioctl(self->dev, HMIRROR_IOC_API, &a));
	EXPECT_TRUE(a.features & HMIRROR_FEATURE_HARVEST_NO_REARM);
	EXPECT_TRUE(a.features & HMIRROR_FEATURE_STRICT_ARM);
	memset(self->p, 0, SPACE);
	ASSERT_EQ(0, hmt_arm(self->sfd, 0, NR_CHUNKS));
	self->p[7 * CHUNK] = 1;
	self->p[3 * CHUNK] = 1;
	ASSERT_EQ(2, harvest_norearm(self->sfd, got, NR_CHUNKS, &more));
	EXPECT_EQ(3, got[0]);
	EXPECT_EQ(7, got[1]);
	EXPECT_EQ(0, more);
	/* not re-armed: odd, and a second write is nobody's business */
	ASSERT_EQ(0, hmt_gen(self->sfd, 3, &g));
	EXPECT_FALSE(HMIRROR_GEN_CLEAN(g));
	self->p[3 * CHUNK + 1] = 1;
	EXPECT_EQ(0, harvest_norearm(self->sfd, got, NR_CHUNKS, NULL));
	/* the other chunks stay armed */
	self->p[9 * CHUNK] = 1;
	ASSERT_EQ(1, harvest_norearm(self->sfd, got, NR_CHUNKS, NULL));
	EXPECT_EQ(9, got[0]);
	/* whoever needs the guard arms it: clean, then recorded again */
	ASSERT_EQ(0, hmt_arm(self->sfd, 3, 1));
	ASSERT_EQ(0, hmt_gen(self->sfd, 3, &g));
	EXPECT_TRUE(HMIRROR_GEN_CLEAN(g));
	ASSERT_EQ(0, mprotect(self->p, SPACE, PROT_READ));
	ASSERT_EQ(0, mprotect(self->p, SPACE, PROT_READ | PROT_WRITE));
	self->p[3 * CHUNK + 2] = 1;
	ASSERT_EQ(1, harvest_norearm(self->sfd, got, NR_CHUNKS, NULL));
	EXPECT_EQ(3, got[0]);
}

TEST_F(space, harvest_no_rearm_cap_and_errors)
{
	struct hmirror_harvest h = { .cap = 1, .flags = 1u << 1 };
	uint64_t got[NR_CHUNKS], all[NR_CHUNKS];
	int more, i, n = 0;
	long r;

	h.chunks = (uintptr_t)got;
	EXPECT_EQ(-1, ioctl(self->sfd, HMIRROR_IOC_HARVEST, &h));
	EXPECT_EQ(EINVAL, errno);
	ASSERT_EQ(0, hmt_arm(self->sfd, 0, NR_CHUNKS));
	for (i = 0; i < 10; i++)
		self->p[(i * 6) * CHUNK] = 1;
	/* EFAULT keeps the record */
	EXPECT_EQ(-EFAULT, harvest_norearm(self->sfd, (uint64_t *)8, 4, NULL));
	do {
		r = harvest_norearm(self->sfd, got, 3, &more);
		ASSERT_GE(r, 0);
		memcpy(all + n, got, r * sizeof(*got));
		n += r;
		EXPECT_EQ(n < 10, more);
	} while (more);
	ASSERT_EQ(10, n);
	for (i = 0; i < 10; i++)
		EXPECT_EQ((uint64_t)i * 6, all[i]);
}

/* ---- locks and bounds ---------------------------------------------------- */

struct blocked_harvest {
	int sfd;
	uint64_t *buf;
	long n;
	int flags;
};

static void *harvest_into(void *arg)
{
	struct blocked_harvest *b = arg;
	struct hmirror_harvest h = {
		.chunks = (uintptr_t)b->buf, .cap = NR_CHUNKS, .flags = b->flags,
	};

	b->n = ioctl(b->sfd, HMIRROR_IOC_HARVEST, &h) ? -errno : (long)h.nr;
	return NULL;
}

/*
 * A harvest whose output buffer is a userfaultfd page nobody resolves must
 * not hold up another process's harvest or arm of the same space.
 */
static void harvest_blocked_by_uffd(struct __test_metadata *_metadata,
				    int sfd, char *p, int flags)
{
	struct blocked_harvest b = { .sfd = sfd, .n = -1, .flags = flags };
	struct uffdio_register reg = { .mode = UFFDIO_REGISTER_MODE_MISSING };
	struct uffdio_zeropage zp;
	struct pollfd pfd;
	pthread_t t;
	int uffd, st;
	pid_t pid;

	uffd = uffd_open(0, NULL);
	if (uffd < 0)
		SKIP(return, "no userfaultfd");
	b.buf = mmap(NULL, page_size, PROT_READ | PROT_WRITE,
		     MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	ASSERT_NE(MAP_FAILED, b.buf);
	reg.range.start = (uintptr_t)b.buf;
	reg.range.len = page_size;
	ASSERT_EQ(0, ioctl(uffd, UFFDIO_REGISTER, &reg));
	ASSERT_EQ(0, hmt_arm(sfd, 0, NR_CHUNKS));
	p[2 * CHUNK] = 1;
	ASSERT_EQ(0, pthread_create(&t, NULL, harvest_into, &b));
	pfd.fd = uffd;
	pfd.events = POLLIN;
	ASSERT_EQ(1, poll(&pfd, 1, 10000));	/* the harvest is stuck */

	pid = fork();
	ASSERT_GE(pid, 0);
	if (pid == 0) {
		uint64_t got[NR_CHUNKS];

		alarm(20);
		p[3 * CHUNK] = 1;
		if (hmt_arm(sfd, 10, 4))
			_exit(2);
		_exit(harvest_all(sfd, got, NR_CHUNKS) == 1 && got[0] == 3 ?
		      0 : 3);
	}
	ASSERT_EQ(pid, waitpid(pid, &st, 0));
	EXPECT_TRUE(WIFEXITED(st)) TH_LOG("other harvest blocked (signal %d)",
					  WTERMSIG(st));
	EXPECT_EQ(0, WEXITSTATUS(st));

	zp.range.start = (uintptr_t)b.buf;
	zp.range.len = page_size;
	zp.mode = 0;
	ASSERT_EQ(0, ioctl(uffd, UFFDIO_ZEROPAGE, &zp));
	pthread_join(t, NULL);
	EXPECT_EQ(1, b.n);
	EXPECT_EQ(2, b.buf[0]);
	close(uffd);
	munmap(b.buf, page_size);
}

TEST_F(space, harvest_copy_out_holds_no_lock)
{
	harvest_blocked_by_uffd(_metadata, self->sfd, self->p, 0);
}

TEST_F(space, harvest_no_rearm_copy_out_holds_no_lock)
{
	harvest_blocked_by_uffd(_metadata, self->sfd, self->p,
				HMIRROR_HARVEST_NO_REARM);
}

/*
 * HMIRROR_MAX_ARM_RANGES ranges, each the whole space: the union is armed
 * in one pass (one write-protect), not 65,536.
 */
TEST_F(space, arm_many_ranges_one_pass)
{
	struct hmirror_range *r;
	struct hmirror_arm a = { .nr_ranges = HMIRROR_MAX_ARM_RANGES };
	long long calls;
	uint32_t i;

	memset(self->p, 0, SPACE);
	r = calloc(HMIRROR_MAX_ARM_RANGES, sizeof(*r));
	ASSERT_NE(NULL, r);
	for (i = 0; i < HMIRROR_MAX_ARM_RANGES; i++) {
		/* every chunk, in pieces, overlapping, out of order */
		r[i].first = (i * 7) % NR_CHUNKS;
		r[i].count = i % 3 ? NR_CHUNKS - r[i].first : 1;
	}
	a.ranges = (uintptr_t)r;
	calls = hmt_stat("rearm_calls");
	ASSERT_GE(calls, 0);
	ASSERT_EQ(0, ioctl(self->sfd, HMIRROR_IOC_ARM, &a));
	EXPECT_EQ(1, hmt_stat("rearm_calls") - calls);
	self->p[NR_CHUNKS / 2 * CHUNK] = 1;
	EXPECT_ONLY(self->sfd, NR_CHUNKS / 2);
	free(r);
}

/*
 * A trip opens the whole chunk: filling a re-armed 64 KiB chunk takes one
 * ->page_mkwrite, not one per page, and the next re-arm closes it again.
 */
TEST_F(space, trip_opens_whole_chunk)
{
	struct hmirror_api a = { .api = HMIRROR_API };
	long long mk0, mk1;
	unsigned long pg, per = CHUNK / page_size;

	ASSERT_EQ(0, ioctl(self->dev, HMIRROR_IOC_API, &a));
	if (!(a.features & HMIRROR_FEATURE_TRIP_OPENS_CHUNK))
		SKIP(return, "the kernel exports no PTE walker: a trip opens its page alone");
	ASSERT_EQ(0, tripped_and_rearmed(self->sfd, self->p));
	for (int round = 0; round < 2; round++) {
		mk0 = hmt_stat("faults_mkwrite");
		ASSERT_GE(mk0, 0);
		for (pg = 0; pg < per; pg++)
			self->p[5 * CHUNK + pg * page_size + 9] = 9;
		mk1 = hmt_stat("faults_mkwrite");
		EXPECT_EQ(1, mk1 - mk0) TH_LOG("round %d", round);
		EXPECT_ONLY(self->sfd, 5);
		/* every page re-armed: the last one trips alone */
		self->p[5 * CHUNK + (per - 1) * page_size] = 1;
		EXPECT_ONLY(self->sfd, 5);
	}
	/* an mprotect after the re-arm of opened PTEs still sees the write */
	ASSERT_EQ(0, mprotect(self->p, SPACE, PROT_READ));
	ASSERT_EQ(0, mprotect(self->p, SPACE, PROT_READ | PROT_WRITE));
	self->p[5 * CHUNK + 3 * page_size] = 1;
	EXPECT_ONLY(self->sfd, 5);
}

static void __attribute__((constructor)) init_page_size(void)
{
	page_size = sysconf(_SC_PAGESIZE);
}

TEST_HARNESS_MAIN
