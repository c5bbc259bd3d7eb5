// SPDX-License-Identifier: GPL-2.0
/*
 * hmirror.ko pin tests: long-term pins of anonymous and memfd memory,
 * RLIMIT_MEMLOCK, invalidation sources, fork + COW, exit with pins and
 * exports outstanding.  Run in the VM on each test kernel:
 *   tools/vm/run --kernel 6.1 -- build/bin/test-kmod-pin
 */
#include <pthread.h>
#include <sys/prctl.h>

#include "device_access_test.h"
#include "kselftest_harness.h"

#define NR_PAGES	16

static long ps;

FIXTURE(pin) {
	int dev;
	char *mem;
	size_t size;
};

FIXTURE_SETUP(pin)
{
	ps = sysconf(_SC_PAGESIZE);
	self->dev = hmt_open_dev();
	if (self->dev < 0)
		SKIP(return, "no /dev/hmirror (%s)", strerror(-self->dev));
	self->size = NR_PAGES * ps;
	self->mem = mmap(NULL, self->size, PROT_READ | PROT_WRITE,
			 MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	ASSERT_NE(MAP_FAILED, self->mem);
	for (size_t i = 0; i < self->size; i++)
		self->mem[i] = (char)(i * 7 + 1);
}

FIXTURE_TEARDOWN(pin)
{
	if (self->dev >= 0)
		close(self->dev);
}

TEST_F(pin, api_advertises)
{
	if (self->dev < 0)
		SKIP(return, "no /dev/hmirror");
	struct hmirror_api a = { .api = HMIRROR_API };

	ASSERT_EQ(0, ioctl(self->dev, HMIRROR_IOC_API, &a));
	EXPECT_TRUE(a.features & HMIRROR_FEATURE_PIN);
	EXPECT_TRUE(a.features & HMIRROR_FEATURE_DMABUF);
	EXPECT_TRUE(a.features & HMIRROR_FEATURE_NETLINK);
	EXPECT_TRUE(a.ioctls & (1ULL << HMIRROR_NR_PIN));
	EXPECT_TRUE(a.ioctls & (1ULL << HMIRROR_NR_EXPORT_DMABUF));
}

/* pin, see the same frames through a dma-buf of the pin, unpin on close */
TEST_F(pin, pin_export_unpin)
{
	if (self->dev < 0)
		SKIP(return, "no /dev/hmirror");
	long long pins0 = hmt_dev_stat("pins"), bytes0 = hmt_dev_stat("pinned_bytes");
	struct hmirror_pin_state st;
	uint32_t id = 0;
	int pfd, dfd;
	char *view;

	ASSERT_LE(0, pins0);
	pfd = hmt_pin(self->dev, self->mem, self->size, HMIRROR_PIN_WRITE, &id);
	ASSERT_LE(0, pfd) TH_LOG("pin: %s", strerror(-pfd));
	EXPECT_NE(0, id);
	EXPECT_EQ(pins0 + 1, hmt_dev_stat("pins"));
	EXPECT_EQ(bytes0 + (long long)self->size, hmt_dev_stat("pinned_bytes"));

	ASSERT_EQ(0, hmt_pin_state(pfd, &st));
	EXPECT_EQ(HMIRROR_PIN_STATE_ACTIVE, st.state);
	EXPECT_EQ((uintptr_t)self->mem, st.addr);
	EXPECT_EQ(self->size, st.size);
	EXPECT_EQ(id, st.id);
	EXPECT_EQ(0, st.inval_size);
	EXPECT_FALSE(hmt_pin_invalidated(pfd, 0));

	/* the pinned frames, seen through a dma-buf of pages 2..5 */
	dfd = hmt_export(pfd, 2 * ps, 4 * ps, HMIRROR_DMABUF_CLOEXEC);
	ASSERT_LE(0, dfd) TH_LOG("export: %s", strerror(-dfd));
	view = mmap(NULL, 4 * ps, PROT_READ | PROT_WRITE, MAP_SHARED, dfd, 0);
	ASSERT_NE(MAP_FAILED, view);
	EXPECT_EQ(0, memcmp(view, self->mem + 2 * ps, 4 * ps));
	self->mem[3 * ps + 5] = 0x5a;
	EXPECT_EQ(0x5a, view[ps + 5]);
	view[2 * ps] = 0x33;		/* a "device" write */
	EXPECT_EQ(0x33, self->mem[4 * ps]);

	/* the dma-buf keeps the pin: closing the pin fd does not unpin */
	close(pfd);
	EXPECT_EQ(pins0 + 1, hmt_dev_stat("pins"));
	munmap(view, 4 * ps);
	close(dfd);
	EXPECT_TRUE(hmt_wait_dev_idle(2000));
	EXPECT_EQ(bytes0, hmt_dev_stat("pinned_bytes"));
}

TEST_F(pin, memfd_shared)
{
	if (self->dev < 0)
		SKIP(return, "no /dev/hmirror");
	int mfd = memfd_create("hmt-pin", MFD_CLOEXEC), pfd;
	struct hmirror_pin_state st;
	char *m;

	ASSERT_LE(0, mfd);
	ASSERT_EQ(0, ftruncate(mfd, self->size));
	m = mmap(NULL, self->size, PROT_READ | PROT_WRITE, MAP_SHARED, mfd, 0);
	ASSERT_NE(MAP_FAILED, m);
	memset(m, 0x11, self->size);
	pfd = hmt_pin(self->dev, m, self->size, HMIRROR_PIN_WRITE, NULL);
	ASSERT_LE(0, pfd) TH_LOG("pin memfd: %s", strerror(-pfd));
	ASSERT_EQ(0, hmt_pin_state(pfd, &st));
	EXPECT_EQ(HMIRROR_PIN_STATE_ACTIVE, st.state);
	close(pfd);
	munmap(m, self->size);
	close(mfd);
}

TEST_F(pin, bad_requests)
{
	if (self->dev < 0)
		SKIP(return, "no /dev/hmirror");
	struct hmirror_pin_create p = {
		.addr = (uintptr_t)self->mem, .size = self->size,
	};
	int tfd, sfd;
	void *f, *g;

	p.addr++;
	EXPECT_EQ(-1, ioctl(self->dev, HMIRROR_IOC_PIN, &p));
	EXPECT_EQ(EINVAL, errno);
	p.addr--;
	p.size = 0;
	EXPECT_EQ(-1, ioctl(self->dev, HMIRROR_IOC_PIN, &p));
	EXPECT_EQ(EINVAL, errno);
	p.size = self->size - 1;
	EXPECT_EQ(-1, ioctl(self->dev, HMIRROR_IOC_PIN, &p));
	EXPECT_EQ(EINVAL, errno);
	p.size = self->size;
	p.flags = 1u << 7;
	EXPECT_EQ(-1, ioctl(self->dev, HMIRROR_IOC_PIN, &p));
	EXPECT_EQ(EINVAL, errno);
	p.flags = 0;
	p.__pad = 1;
	EXPECT_EQ(-1, ioctl(self->dev, HMIRROR_IOC_PIN, &p));
	EXPECT_EQ(EINVAL, errno);
	p.__pad = 0;
	p.addr = ~0ULL << 12;	/* past TASK_SIZE */
	EXPECT_EQ(-1, ioctl(self->dev, HMIRROR_IOC_PIN, &p));
	EXPECT_EQ(EINVAL, errno);

	/* a hole */
	ASSERT_EQ(0, munmap(self->mem + 8 * ps, ps));
	EXPECT_EQ(-EFAULT, hmt_pin(self->dev, self->mem, self->size, 0, NULL));

	/* a file's mapping is neither anonymous nor shmem (this program's
	 * file: /tmp is tmpfs, which is shmem and may be pinned) */
	tfd = open("/proc/self/exe", O_RDONLY | O_CLOEXEC);
	ASSERT_LE(0, tfd);
	f = mmap(NULL, ps, PROT_READ, MAP_PRIVATE, tfd, 0);
	ASSERT_NE(MAP_FAILED, f);
	EXPECT_EQ(-EINVAL, hmt_pin(self->dev, f, ps, 0, NULL));
	munmap(f, ps);
	close(tfd);

	/* nor a guarded mapping of a space (pin its device path instead) */
	sfd = hmt_create(self->dev, 1 << 16, 16, 0);
	ASSERT_LE(0, sfd);
	g = mmap(NULL, 1 << 16, PROT_READ | PROT_WRITE, MAP_SHARED, sfd, 0);
	ASSERT_NE(MAP_FAILED, g);
	EXPECT_EQ(-EINVAL, hmt_pin(self->dev, g, 1 << 16, HMIRROR_PIN_WRITE, NULL));
	munmap(g, 1 << 16);
	close(sfd);

	/* on a pin fd: only its own ioctls; unknown ones are ENOTTY */
	tfd = hmt_pin(self->dev, self->mem, 4 * ps, 0, NULL);
	ASSERT_LE(0, tfd);
	EXPECT_EQ(-1, ioctl(tfd, HMIRROR_IOC_API, &p));
	EXPECT_EQ(ENOTTY, errno);
	/* a writable export of a read-only pin */
	EXPECT_EQ(-EACCES, hmt_export(tfd, 0, 0, 0));
	EXPECT_EQ(-EINVAL, hmt_export(tfd, ps / 2, 0, HMIRROR_DMABUF_RDONLY));
	EXPECT_EQ(-EINVAL, hmt_export(tfd, 4 * ps, 0, HMIRROR_DMABUF_RDONLY));
	EXPECT_EQ(-EINVAL, hmt_export(tfd, 0, 5 * ps, HMIRROR_DMABUF_RDONLY));
	EXPECT_EQ(-EINVAL, hmt_export(tfd, 0, 0, 1u << 9));
	close(tfd);
	/* the pin ioctl is not a space or pin fd ioctl */
	EXPECT_EQ(-ENOTTY, hmt_export(self->dev, 0, 0, 0));
}

/* more pages than one chunk of the page array (512): every boundary */
TEST(multi_chunk)
{
	long ps = sysconf(_SC_PAGESIZE);
	size_t nr = 2 * 1024 + 3, size;
	const size_t probe[] = { 0, 511, 512, 513, 1023, 1024, 2047, 2048, 2050 };
	struct hmirror_pin_state st;
	int dev, pfd, dfd;
	char *m, *v;

	dev = hmt_open_dev();
	if (dev < 0)
		SKIP(return, "no /dev/hmirror (%s)", strerror(-dev));
	size = nr * ps;
	m = mmap(NULL, size, PROT_READ | PROT_WRITE,
		 MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	ASSERT_NE(MAP_FAILED, m);
	for (size_t i = 0; i < nr; i++)
		memcpy(m + i * ps, &i, sizeof(i));
	pfd = hmt_pin(dev, m, size, HMIRROR_PIN_WRITE, NULL);
	ASSERT_LE(0, pfd) TH_LOG("pin: %s", strerror(-pfd));
	ASSERT_EQ(0, hmt_pin_state(pfd, &st));
	EXPECT_EQ(size, st.size);
	dfd = hmt_export(pfd, 0, 0, 0);
	ASSERT_LE(0, dfd);
	v = mmap(NULL, size, PROT_READ, MAP_SHARED, dfd, 0);
	ASSERT_NE(MAP_FAILED, v);
	for (size_t k = 0; k < sizeof(probe) / sizeof(probe[0]); k++) {
		size_t got;

		memcpy(&got, v + probe[k] * ps, sizeof(got));
		EXPECT_EQ(probe[k], got);
	}
	munmap(v, size);
	close(dfd);
	/* a range across a chunk boundary, from the middle of a chunk */
	dfd = hmt_export(pfd, 500 * ps, 30 * ps, HMIRROR_DMABUF_RDONLY);
	ASSERT_LE(0, dfd);
	v = mmap(NULL, 30 * ps, PROT_READ, MAP_SHARED, dfd, 0);
	ASSERT_NE(MAP_FAILED, v);
	for (size_t i = 0; i < 30; i++) {
		size_t got;

		memcpy(&got, v + i * ps, sizeof(got));
		EXPECT_EQ(500 + i, got);
	}
	munmap(v, 30 * ps);
	close(dfd);
	close(pfd);
	munmap(m, size);
	close(dev);
	EXPECT_TRUE(hmt_wait_dev_idle(2000));
}

struct racer {
	char *mem;
	size_t size;
	volatile int stop;
};

static void *dontneed_loop(void *arg)
{
	struct racer *r = arg;

	while (!r->stop)
		madvise(r->mem, r->size, MADV_DONTNEED);
	return NULL;
}

/* invalidations racing the pinning: success (maybe invalidated at once)
 * or EAGAIN, nothing else, and nothing left behind */
TEST(race_with_dontneed)
{
	struct racer r = { .size = 64 * sysconf(_SC_PAGESIZE) };
	int dev, ok = 0, again = 0, other = 0;
	struct hmirror_pin_state st;
	pthread_t t;

	dev = hmt_open_dev();
	if (dev < 0)
		SKIP(return, "no /dev/hmirror (%s)", strerror(-dev));
	r.mem = mmap(NULL, r.size, PROT_READ | PROT_WRITE,
		     MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	ASSERT_NE(MAP_FAILED, r.mem);
	ASSERT_EQ(0, pthread_create(&t, NULL, dontneed_loop, &r));
	for (int i = 0; i < 100; i++) {
		int pfd = hmt_pin(dev, r.mem, r.size, HMIRROR_PIN_WRITE, NULL);

		if (pfd >= 0) {
			ok++;
			EXPECT_EQ(0, hmt_pin_state(pfd, &st));
			EXPECT_TRUE(st.state == HMIRROR_PIN_STATE_ACTIVE ||
				    st.state == HMIRROR_PIN_STATE_INVALIDATED);
			close(pfd);
		} else if (pfd == -EAGAIN) {
			again++;
		} else {
			other++;
		}
	}
	r.stop = 1;
	pthread_join(t, NULL);
	TH_LOG("%d pinned, %d EAGAIN, %lld retries", ok, again,
	       hmt_dev_stat("pin_retries"));
	EXPECT_EQ(0, other);
	EXPECT_LT(0, ok + again);
	close(dev);
	EXPECT_TRUE(hmt_wait_dev_idle(2000));
}

/* the module's own limits: pins alive per user, size of one pin */
TEST_F(pin, module_limits)
{
	char old_pins[32], old_mib[32];
	int a, b;

	if (self->dev < 0)
		SKIP(return, "no /dev/hmirror");
	ASSERT_EQ(0, hmt_param_get("max_pins_per_user", old_pins, sizeof(old_pins)));
	ASSERT_EQ(0, hmt_param_get("max_pin_mib", old_mib, sizeof(old_mib)));
	ASSERT_EQ(0, hmt_param_set("max_pins_per_user", "2"));
	a = hmt_pin(self->dev, self->mem, ps, 0, NULL);
	b = hmt_pin(self->dev, self->mem + ps, ps, 0, NULL);
	EXPECT_LE(0, a);
	EXPECT_LE(0, b);
	EXPECT_EQ(-EMFILE, hmt_pin(self->dev, self->mem + 2 * ps, ps, 0, NULL));
	EXPECT_EQ(2, hmt_user_stat(0, "pins"));
	close(b);
	b = hmt_pin(self->dev, self->mem + ps, ps, 0, NULL);
	EXPECT_LE(0, b);
	close(a);
	close(b);
	EXPECT_EQ(0, hmt_param_set("max_pins_per_user", old_pins));

	ASSERT_EQ(0, hmt_param_set("max_pin_mib", "0"));
	EXPECT_EQ(-ENOMEM, hmt_pin(self->dev, self->mem, ps, 0, NULL));
	EXPECT_EQ(0, hmt_param_set("max_pin_mib", old_mib));
	a = hmt_pin(self->dev, self->mem, ps, 0, NULL);
	EXPECT_LE(0, a);
	close(a);
}

/* RLIMIT_MEMLOCK, for a process without CAP_IPC_LOCK */
TEST_F(pin, memlock_limit)
{
	if (self->dev < 0)
		SKIP(return, "no /dev/hmirror");
	long long failed0 = hmt_dev_stat("pins_failed");
	int status;
	pid_t pid;

	pid = fork();
	ASSERT_LE(0, pid);
	if (pid == 0) {
		struct rlimit rl = { 8 * ps, 8 * ps };
		int a, b;

		if (hmt_drop_ipc_lock() || setrlimit(RLIMIT_MEMLOCK, &rl))
			_exit(10);
		/* over the limit at once */
		if (hmt_pin(self->dev, self->mem, 9 * ps, 0, NULL) != -ENOMEM)
			_exit(11);
		/* within it */
		a = hmt_pin(self->dev, self->mem, 6 * ps, 0, NULL);
		if (a < 0)
			_exit(12);
		/* cumulative: 6 + 3 > 8 */
		if (hmt_pin(self->dev, self->mem + 6 * ps, 3 * ps, 0, NULL) != -ENOMEM)
			_exit(13);
		b = hmt_pin(self->dev, self->mem + 6 * ps, 2 * ps, 0, NULL);
		if (b < 0)
			_exit(14);
		/* unpinning gives the budget back */
		close(a);
		close(b);
		a = hmt_pin(self->dev, self->mem, 8 * ps, 0, NULL);
		if (a < 0)
			_exit(15);
		_exit(0);
	}
	ASSERT_EQ(pid, waitpid(pid, &status, 0));
	ASSERT_TRUE(WIFEXITED(status));
	EXPECT_EQ(0, WEXITSTATUS(status));
	EXPECT_EQ(failed0 + 2, hmt_dev_stat("pins_failed"));
	EXPECT_TRUE(hmt_wait_dev_idle(2000));
}

/*
 * RLIMIT_MEMLOCK is the user's, not the process's: a forked child that
 * pins, passes the pin fd on and exits leaves its pages charged to the
 * user it ran as, so the receiver cannot pin past the limit.
 */
TEST_F(pin, memlock_per_user_fork_pass_fd)
{
	if (self->dev < 0)
		SKIP(return, "no /dev/hmirror");
	int status;
	pid_t pid;

	pid = fork();
	ASSERT_LE(0, pid);
	if (pid == 0) {
		struct rlimit rl = { 8 * ps, 8 * ps };
		int sv[2], pfd, a;
		pid_t child;

		if (hmt_become(40010) || setrlimit(RLIMIT_MEMLOCK, &rl))
			_exit(10);
		if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv))
			_exit(11);
		child = fork();
		if (child < 0)
			_exit(12);
		if (child == 0) {
			/* its own mm, the same user: the whole budget */
			pfd = hmt_pin(self->dev, self->mem, 8 * ps, 0, NULL);
			if (pfd < 0 || hmt_send_fd(sv[1], pfd))
				_exit(1);
			_exit(0);
		}
		pfd = hmt_recv_fd(sv[0]);
		if (waitpid(child, &status, 0) != child || !WIFEXITED(status) ||
		    WEXITSTATUS(status) || pfd < 0)
			_exit(13);
		/* the exited child's pin is still the user's */
		if (hmt_pin(self->dev, self->mem + 8 * ps, ps, 0, NULL) != -ENOMEM)
			_exit(14);
		/*
		 * until it is closed (the release may wait for the report
		 * of the exited child's invalidation, on a workqueue)
		 */
		close(pfd);
		for (int i = 0; i < 200; i++) {
			a = hmt_pin(self->dev, self->mem + 8 * ps, 8 * ps, 0, NULL);
			if (a != -ENOMEM)
				break;
			usleep(10000);
		}
		if (a < 0)
			_exit(15);
		close(a);
		_exit(0);
	}
	ASSERT_EQ(pid, waitpid(pid, &status, 0));
	ASSERT_TRUE(WIFEXITED(status));
	EXPECT_EQ(0, WEXITSTATUS(status));
	EXPECT_TRUE(hmt_wait_dev_idle(2000));
}

/* ---- invalidation sources: one report each, for the right range -------- */

enum source { SRC_MUNMAP, SRC_MREMAP, SRC_DONTNEED, SRC_COW, SRC_MIGRATE };

FIXTURE(inval) {
	int dev;
	int mfd;
	char *mem;
	bool skip;
};

FIXTURE_VARIANT(inval) {
	enum source src;
	const char *counter;	/* debugfs counter that must grow by one */
	uint32_t cause;
	unsigned int first, nr;	/* expected invalidated pages */
};

FIXTURE_VARIANT_ADD(inval, munmap) {
	.src = SRC_MUNMAP, .counter = "inval_unmap",
	.cause = HMIRROR_INVAL_UNMAP, .first = 4, .nr = 4,
};

FIXTURE_VARIANT_ADD(inval, mremap) {
	.src = SRC_MREMAP, .counter = "inval_unmap",
	.cause = HMIRROR_INVAL_UNMAP, .first = 4, .nr = 4,
};

FIXTURE_VARIANT_ADD(inval, madv_dontneed) {
	.src = SRC_DONTNEED, .counter = "inval_clear",
	.cause = HMIRROR_INVAL_CLEAR, .first = 4, .nr = 4,
};

/* read-only pin of a private memfd mapping: the first write copies */
FIXTURE_VARIANT_ADD(inval, cow) {
	.src = SRC_COW, .counter = "inval_clear",
	.cause = HMIRROR_INVAL_CLEAR, .first = 4, .nr = 1,
};

FIXTURE_VARIANT_ADD(inval, migrate) {
	.src = SRC_MIGRATE, .counter = "inval_clear",
	.cause = HMIRROR_INVAL_CLEAR, .first = 4, .nr = 1,
};

FIXTURE_SETUP(inval)
{
	ps = sysconf(_SC_PAGESIZE);
	self->mfd = -1;
	self->dev = hmt_open_dev();
	if (self->dev < 0)
		SKIP(return, "no /dev/hmirror (%s)", strerror(-self->dev));
	if (variant->src == SRC_MIGRATE && hmt_numa_nodes() < 2) {
		self->skip = true;
		SKIP(return, "one NUMA node (boot with numa=fake=2)");
	}
	if (variant->src == SRC_COW) {
		self->mfd = memfd_create("hmt-cow", MFD_CLOEXEC);
		ASSERT_LE(0, self->mfd);
		ASSERT_EQ(0, ftruncate(self->mfd, NR_PAGES * ps));
		self->mem = mmap(NULL, NR_PAGES * ps, PROT_READ | PROT_WRITE,
				 MAP_PRIVATE, self->mfd, 0);
	} else {
		self->mem = mmap(NULL, NR_PAGES * ps, PROT_READ | PROT_WRITE,
				 MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	}
	ASSERT_NE(MAP_FAILED, self->mem);
	if (variant->src != SRC_COW)
		memset(self->mem, 0x42, NR_PAGES * ps);
}

FIXTURE_TEARDOWN(inval)
{
	if (self->mfd >= 0)
		close(self->mfd);
	if (self->dev >= 0)
		close(self->dev);
}

static int do_source(enum source src, char *mem, int *ret_moved)
{
	char *dst;
	void *page;
	int node, status = -1, cur = -1;

	*ret_moved = 1;
	switch (src) {
	case SRC_MUNMAP:
		return munmap(mem + 4 * ps, 4 * ps);
	case SRC_MREMAP:
		dst = mmap(NULL, 4 * ps, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
		if (dst == MAP_FAILED)
			return -1;
		return mremap(mem + 4 * ps, 4 * ps, 4 * ps,
			      MREMAP_MAYMOVE | MREMAP_FIXED, dst) == dst ? 0 : -1;
	case SRC_DONTNEED:
		return madvise(mem + 4 * ps, 4 * ps, MADV_DONTNEED);
	case SRC_COW:
		mem[4 * ps] = 1;
		return 0;
	case SRC_MIGRATE:
		page = mem + 4 * ps;
		if (syscall(SYS_move_pages, 0, 1, &page, NULL, &cur, 0))
			return -1;
		node = !cur;
		syscall(SYS_move_pages, 0, 1, &page, &node, &status, 2 /* MPOL_MF_MOVE */);
		*ret_moved = status == node;
		return 0;
	}
	return -1;
}

TEST_F(inval, exactly_once)
{
	long long n0 = hmt_dev_stat(variant->counter);
	unsigned int flags = variant->src == SRC_COW ? 0 : HMIRROR_PIN_WRITE;
	struct hmirror_pin_state st;
	int pfd, moved;

	if (self->skip)
		SKIP(return, "one NUMA node (boot with numa=fake=2)");
	pfd = hmt_pin(self->dev, self->mem, NR_PAGES * ps, flags, NULL);
	ASSERT_LE(0, pfd) TH_LOG("pin: %s", strerror(-pfd));
	ASSERT_EQ(0, hmt_pin_state(pfd, &st));
	ASSERT_EQ(HMIRROR_PIN_STATE_ACTIVE, st.state);

	ASSERT_EQ(0, do_source(variant->src, self->mem, &moved));
	if (variant->src == SRC_COW && !hmt_pin_invalidated(pfd, 200)) {
		/* the kernel unshared at pin time (6.12): no copy, coherent */
		int dfd = hmt_export(pfd, 0, 0, HMIRROR_DMABUF_RDONLY);
		char *v;

		TH_LOG("no copy-on-write of the pinned page: checking coherence");
		ASSERT_LE(0, dfd);
		v = mmap(NULL, NR_PAGES * ps, PROT_READ, MAP_SHARED, dfd, 0);
		ASSERT_NE(MAP_FAILED, v);
		EXPECT_EQ(1, v[4 * ps]);
		EXPECT_EQ(n0, hmt_dev_stat(variant->counter));
		munmap(v, NR_PAGES * ps);
		close(dfd);
		close(pfd);
		return;
	}
	if (variant->src == SRC_MIGRATE && !hmt_pin_invalidated(pfd, 200)) {
		/* a pinned page cannot move; if it did, it must be reported */
		TH_LOG("migration of the pinned page refused, nothing to report");
		EXPECT_FALSE(moved);
		close(pfd);
		return;
	}
	EXPECT_TRUE(hmt_pin_invalidated(pfd, 1000));
	if (variant->src == SRC_MIGRATE)
		TH_LOG("migration attempt reported (page moved: %d)", moved);
	ASSERT_EQ(0, hmt_pin_state(pfd, &st));
	EXPECT_EQ(HMIRROR_PIN_STATE_INVALIDATED, st.state);
	EXPECT_EQ(variant->cause, st.cause);
	EXPECT_EQ((uintptr_t)self->mem + variant->first * ps, st.inval_addr);
	EXPECT_EQ(variant->nr * ps, st.inval_size);
	EXPECT_EQ(n0 + 1, hmt_dev_stat(variant->counter));

	/* a second invalidation reports nothing new */
	EXPECT_EQ(0, madvise(self->mem, ps, MADV_DONTNEED));
	ASSERT_EQ(0, hmt_pin_state(pfd, &st));
	EXPECT_EQ(variant->cause, st.cause);
	EXPECT_EQ((uintptr_t)self->mem + variant->first * ps, st.inval_addr);
	EXPECT_EQ(n0 + 1, hmt_dev_stat(variant->counter));
	close(pfd);
}

/* protection changes keep the frames: not an invalidation */
TEST_F(pin, mprotect_ignored)
{
	if (self->dev < 0)
		SKIP(return, "no /dev/hmirror");
	long long ign0 = hmt_dev_stat("inval_ignored");
	struct hmirror_pin_state st;
	int pfd;

	pfd = hmt_pin(self->dev, self->mem, self->size, HMIRROR_PIN_WRITE, NULL);
	ASSERT_LE(0, pfd);
	ASSERT_EQ(0, mprotect(self->mem, self->size, PROT_READ));
	ASSERT_EQ(0, mprotect(self->mem, self->size, PROT_READ | PROT_WRITE));
	ASSERT_EQ(0, hmt_pin_state(pfd, &st));
	EXPECT_EQ(HMIRROR_PIN_STATE_ACTIVE, st.state);
	EXPECT_LT(ign0, hmt_dev_stat("inval_ignored"));
	close(pfd);
}

/* fork: pinned anonymous pages are copied for the child, never shared, so
 * the parent's pin stays coherent and is not invalidated; the child's
 * writes go to its own copy. */
TEST_F(pin, fork_cow)
{
	if (self->dev < 0)
		SKIP(return, "no /dev/hmirror");
	struct hmirror_pin_state st;
	int pfd, dfd, status;
	char *view;
	pid_t pid;

	pfd = hmt_pin(self->dev, self->mem, self->size, HMIRROR_PIN_WRITE, NULL);
	ASSERT_LE(0, pfd);
	dfd = hmt_export(pfd, 0, 0, 0);
	ASSERT_LE(0, dfd);
	view = mmap(NULL, self->size, PROT_READ | PROT_WRITE, MAP_SHARED, dfd, 0);
	ASSERT_NE(MAP_FAILED, view);

	pid = fork();
	ASSERT_LE(0, pid);
	if (pid == 0) {
		/* the child writes its copy: the pinned frame must not change */
		memset(self->mem, 0x77, self->size);
		_exit(view[0] == 0x77 ? 1 : 0);
	}
	ASSERT_EQ(pid, waitpid(pid, &status, 0));
	EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
	EXPECT_NE(0x77, view[0]);

	/* the parent's writes land in the pinned frames */
	self->mem[5] = 0x66;
	EXPECT_EQ(0x66, view[5]);
	view[ps + 1] = 0x55;
	EXPECT_EQ(0x55, self->mem[ps + 1]);
	ASSERT_EQ(0, hmt_pin_state(pfd, &st));
	EXPECT_EQ(HMIRROR_PIN_STATE_ACTIVE, st.state);
	munmap(view, self->size);
	close(dfd);
	close(pfd);
}

/* exit with pins and dma-bufs (and a space export) outstanding: nothing
 * is left, and the module unloads */
TEST(exit_leaves_nothing)
{
	long long rel0;
	int dev, status;
	pid_t pid;

	ps = sysconf(_SC_PAGESIZE);
	dev = hmt_open_dev();
	if (dev < 0)
		SKIP(return, "no /dev/hmirror (%s)", strerror(-dev));
	close(dev);
	rel0 = hmt_dev_stat("inval_release");

	pid = fork();
	ASSERT_LE(0, pid);
	if (pid == 0) {
		size_t size = 64 * ps;
		char *m = mmap(NULL, size, PROT_READ | PROT_WRITE,
			       MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
		int d = hmt_open_dev(), p, b, s;

		if (m == MAP_FAILED || d < 0)
			_exit(10);
		memset(m, 1, size);
		p = hmt_pin(d, m, size, HMIRROR_PIN_WRITE, NULL);
		if (p < 0)
			_exit(11);
		b = hmt_export(p, 0, 0, 0);
		if (b < 0 || mmap(NULL, size, PROT_READ, MAP_SHARED, b, 0) == MAP_FAILED)
			_exit(12);
		s = hmt_create(d, 1 << 20, 16, 0);
		if (s < 0 || hmt_export(s, 0, 0, 0) < 0)
			_exit(13);
		if (hmt_dev_stat("pins") < 1 || hmt_dev_stat("dmabufs") < 2)
			_exit(14);
		_exit(0);	/* everything still open */
	}
	ASSERT_EQ(pid, waitpid(pid, &status, 0));
	ASSERT_TRUE(WIFEXITED(status));
	ASSERT_EQ(0, WEXITSTATUS(status));

	EXPECT_TRUE(hmt_wait_dev_idle(3000));
	/* the address space went before the fds: one RELEASE report */
	EXPECT_EQ(rel0 + 1, hmt_dev_stat("inval_release"));
	EXPECT_EQ(0, hmt_dev_stat("pins"));
	EXPECT_EQ(0, hmt_dev_stat("pinned_bytes"));
	EXPECT_EQ(0, hmt_dev_stat("dmabufs"));
	EXPECT_EQ(0, hmt_stat("spaces"));
	/* unload and load again: no reference was left behind */
	EXPECT_EQ(0, system("rmmod hmirror"));
	EXPECT_EQ(0, system("modprobe hmirror"));
}

TEST_HARNESS_MAIN
