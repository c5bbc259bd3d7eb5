// SPDX-License-Identifier: GPL-2.0
/*
 * hmirror.ko limits: what one local user may take.  The device node is not
 * world-accessible; memory charged per user (pages, metadata, page arrays)
 * stops at max_user_bytes with ENOMEM or SIGBUS, never the OOM killer; a
 * forked child is the same user; one user's spaces never refuse another's;
 * hostile ioctl sequences from two processes reach no OOM kill, and the
 * module unloads once they are gone.  Run in the VM (as root; the tests
 * become other users themselves):
 *   tools/vm/run --kernel 6.12 -- build/bin/test-kmod-limits
 */
#include <setjmp.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/syscall.h>

#include "device_access_test.h"
#include "kselftest_harness.h"

#define MIB		(1ULL << 20)
#define GIB		(1ULL << 30)

static long ps;
/* <debugfs>/hmirror/users, opened as root: readable after hmt_become() */
static int users_fd = -1;

/* @key of @uid's line in the users file: 0 without one, -1 on error */
static long long user_stat(unsigned int uid, const char *key)
{
	char buf[8192], *line, *save;
	unsigned int u;
	long long bytes, ret = 0;
	int spaces, pins;
	ssize_t n;

	n = users_fd < 0 ? -1 : pread(users_fd, buf, sizeof(buf) - 1, 0);
	if (n < 0)
		return -1;
	buf[n] = 0;
	for (line = strtok_r(buf, "\n", &save); line;
	     line = strtok_r(NULL, "\n", &save)) {
		if (sscanf(line, "uid %u bytes %lld spaces %d pins %d", &u,
			   &bytes, &spaces, &pins) != 4 || u != uid)
			continue;
		ret = !strcmp(key, "bytes") ? bytes :
		      !strcmp(key, "spaces") ? spaces : pins;
	}
	return ret;
}

/* the params a test may change, restored by the teardown */
static const char *const saved_params[] = {
	"max_user_bytes", "max_spaces_per_user", "max_spaces_per_process",
	"max_dmabufs_per_space",
};
#define NR_SAVED	(sizeof(saved_params) / sizeof(saved_params[0]))

FIXTURE(limits) {
	int dev;
	char saved[NR_SAVED][32];	/* "" where the module lacks it */
};

FIXTURE_SETUP(limits)
{
	ps = sysconf(_SC_PAGESIZE);
	self->dev = hmt_open_dev();
	if (self->dev < 0)
		SKIP(return, "no /dev/hmirror (%s)", strerror(-self->dev));
	users_fd = open(HMT_DEBUGFS "/users", O_RDONLY | O_CLOEXEC);
	for (unsigned int i = 0; i < NR_SAVED; i++)
		if (hmt_param_get(saved_params[i], self->saved[i],
				  sizeof(self->saved[i])))
			self->saved[i][0] = 0;
}

static void restore_params(char saved[NR_SAVED][32])
{
	for (unsigned int i = 0; i < NR_SAVED; i++)
		if (saved[i][0])
			hmt_param_set(saved_params[i], saved[i]);
}

FIXTURE_TEARDOWN(limits)
{
	if (self->dev < 0)
		return;
	restore_params(self->saved);
	close(self->dev);
	if (users_fd >= 0)
		close(users_fd);
}

static long long vmstat(const char *name)
{
	char key[64];
	long long v, ret = -1;
	FILE *f = fopen("/proc/vmstat", "r");

	if (!f)
		return -1;
	while (fscanf(f, "%63s %lld", key, &v) == 2)
		if (!strcmp(key, name))
			ret = v;
	fclose(f);
	return ret;
}

static unsigned long long mem_total(void)
{
	return (unsigned long long)sysconf(_SC_PHYS_PAGES) * ps;
}

/* wait for child @pid; its exit code, 128 + signal, or -1 */
static int reap(pid_t pid)
{
	int status;

	if (waitpid(pid, &status, 0) != pid)
		return -1;
	if (WIFSIGNALED(status))
		return 128 + WTERMSIG(status);
	return WEXITSTATUS(status);
}

static sigjmp_buf bus_jmp;

static void on_sigbus(int sig)
{
	siglongjmp(bus_jmp, 1);
}

static void catch_sigbus(void)
{
	struct sigaction sa = { .sa_handler = on_sigbus };

	sigaction(SIGBUS, &sa, NULL);
}

/* write a byte to each page of @p[0, @len); the bytes written before a SIGBUS */
static size_t touch(char *p, size_t len)
{
	static volatile size_t done;

	done = 0;
	if (sigsetjmp(bus_jmp, 1))
		return done;
	for (; done < len; done += ps)
		p[done] = 1;
	return done;
}

/* the node gives no access to others: 0660 root:root without udev */
TEST_F(limits, device_node_not_world_accessible)
{
	struct stat st;

	if (self->dev < 0)
		SKIP(return, "no /dev/hmirror");
	ASSERT_EQ(0, stat(HMT_DEV, &st));
	EXPECT_EQ(0, st.st_mode & 0007) TH_LOG("mode %o", st.st_mode & 0777);
}

/*
 * Resident pages are charged to the space's creator: POPULATE past the
 * limit fails with ENOMEM, a fault past it raises SIGBUS, whichever
 * process touches the page.
 */
TEST_F(limits, user_bytes_populate_and_fault)
{
	char lim[32];
	pid_t pid;

	if (self->dev < 0)
		SKIP(return, "no /dev/hmirror");
	snprintf(lim, sizeof(lim), "%llu", 8 * MIB);
	ASSERT_EQ(0, hmt_param_set("max_user_bytes", lim));
	pid = fork();
	ASSERT_LE(0, pid);
	if (pid == 0) {
		size_t n;
		char *g;
		int s;

		if (hmt_become(40001))
			_exit(10);
		if (hmt_create(self->dev, 16 * MIB, 16,
			       HMIRROR_CREATE_POPULATE) != -ENOMEM)
			_exit(11);
		/* the failed one gave everything back */
		if (user_stat(40001, "bytes") != 0)
			_exit(12);
		s = hmt_create(self->dev, 4 * MIB, 16, HMIRROR_CREATE_POPULATE);
		if (s < 0)
			_exit(13);
		if (user_stat(40001, "bytes") < (long long)(4 * MIB))
			_exit(14);
		s = hmt_create(self->dev, 8 * MIB, 16, 0);
		if (s < 0)
			_exit(15);
		g = mmap(NULL, 8 * MIB, PROT_READ | PROT_WRITE, MAP_SHARED, s, 0);
		if (g == MAP_FAILED)
			_exit(16);
		catch_sigbus();
		n = touch(g, 8 * MIB);
		/* about 4 MiB left, less the metadata */
		if (n >= 4 * MIB || n < 3 * MIB)
			_exit(17);
		/* the device view is the same pages and the same budget */
		_exit(0);
	}
	EXPECT_EQ(0, reap(pid));
	EXPECT_EQ(0, user_stat(40001, "bytes"));
}

/* per-chunk metadata (bitmaps, generations) is charged too */
TEST_F(limits, metadata_charged)
{
	char lim[32];
	pid_t pid;

	if (self->dev < 0)
		SKIP(return, "no /dev/hmirror");
	snprintf(lim, sizeof(lim), "%llu", 16 * MIB);
	ASSERT_EQ(0, hmt_param_set("max_user_bytes", lim));
	pid = fork();
	ASSERT_LE(0, pid);
	if (pid == 0) {
		int s;

		if (hmt_become(40002))
			_exit(10);
		/* 1 Mi chunks: 8 MiB of generations, nothing resident */
		s = hmt_create(self->dev, 4 * GIB, 12, 0);
		if (s < 0)
			_exit(11);
		if (user_stat(40002, "bytes") < (long long)(8 * MIB))
			_exit(12);
		/* a second one does not fit */
		if (hmt_create(self->dev, 4 * GIB, 12, 0) != -ENOMEM)
			_exit(13);
		close(s);
		if (user_stat(40002, "bytes") != 0)
			_exit(14);
		_exit(0);
	}
	EXPECT_EQ(0, reap(pid));
}

/* a forked child is the same user: it does not get a budget of its own */
TEST_F(limits, forked_children_share_the_user_limit)
{
	pid_t pid;

	if (self->dev < 0)
		SKIP(return, "no /dev/hmirror");
	ASSERT_EQ(0, hmt_param_set("max_spaces_per_process", "2"));
	ASSERT_EQ(0, hmt_param_set("max_spaces_per_user", "4"));
	pid = fork();
	ASSERT_LE(0, pid);
	if (pid == 0) {
		pid_t kids[4];
		int made = 0;

		if (hmt_become(40003))
			_exit(10);
		/* each of 4 children makes what the per-process limit lets it */
		for (int c = 0; c < 4; c++) {
			int sv[2], n = 0;
			pid_t child;

			if (pipe(sv))
				_exit(11);
			child = fork();
			if (child < 0)
				_exit(12);
			if (child == 0) {
				while (hmt_create(self->dev, 1 << 16, 16, 0) >= 0)
					n++;
				if (write(sv[1], &n, sizeof(n)) != sizeof(n))
					_exit(1);
				pause();	/* keep them */
				_exit(0);
			}
			if (read(sv[0], &n, sizeof(n)) != sizeof(n))
				_exit(13);
			kids[c] = child;
			made += n;
		}
		for (int c = 0; c < 4; c++) {
			kill(kids[c], SIGKILL);
			waitpid(kids[c], NULL, 0);
		}
		_exit(made == 4 ? 0 : 20 + made);
	}
	EXPECT_EQ(0, reap(pid));
	/* the grandchildren held 4, not 8 */
	for (int i = 0; i < 200 && user_stat(40003, "spaces"); i++)
		usleep(10000);
	EXPECT_EQ(0, user_stat(40003, "spaces"));
}

/*
 * There is no total of all users to exhaust: a user that creates all the
 * spaces it may does not keep another user from creating one.
 */
TEST_F(limits, one_user_cannot_refuse_another)
{
	pid_t a, b;
	int sv[2];

	if (self->dev < 0)
		SKIP(return, "no /dev/hmirror");
	ASSERT_EQ(0, pipe(sv));
	a = fork();
	ASSERT_LE(0, a);
	if (a == 0) {
		int n = 0;

		if (hmt_become(40004))
			_exit(10);
		/* 64 GiB each, nothing resident: 8 MiB of metadata each */
		while (hmt_create(self->dev, 64 * GIB, 16, 0) >= 0)
			n++;
		if (write(sv[1], &n, sizeof(n)) != sizeof(n))
			_exit(11);
		pause();
		_exit(0);
	}
	{
		int n = 0;

		ASSERT_EQ(sizeof(n), read(sv[0], &n, sizeof(n)));
		TH_LOG("the first user made %d spaces of 64 GiB", n);
		EXPECT_LE(16, n);
	}
	b = fork();
	ASSERT_LE(0, b);
	if (b == 0) {
		if (hmt_become(40005))
			_exit(10);
		if (hmt_create(self->dev, 64 * GIB, 16, 0) < 0)
			_exit(11);
		if (hmt_create(self->dev, 4 * MIB, 16,
			       HMIRROR_CREATE_POPULATE) < 0)
			_exit(12);
		_exit(0);
	}
	EXPECT_EQ(0, reap(b));
	kill(a, SIGKILL);
	EXPECT_EQ(128 + SIGKILL, reap(a));
}

/* ---- hostile ioctl sequences ------------------------------------------- */

#define HOSTILE_FDS	48
#define HOSTILE_SECS	10
/* a hostile process not gone this long after its time is up is stuck */
#define HOSTILE_GRACE_SECS	60

struct hostile {
	int fd[HOSTILE_FDS];
	uint64_t size[HOSTILE_FDS];	/* of a space; 0 for other fds */
	char *map[HOSTILE_FDS];
	size_t map_len[HOSTILE_FDS];
	char *anon;			/* for pins */
	size_t anon_len;
	unsigned int seed;
};

static unsigned int rnd(struct hostile *h, unsigned int n)
{
	return n ? (unsigned int)rand_r(&h->seed) % n : 0;
}

static void hostile_close(struct hostile *h, int i)
{
	if (h->map[i])
		munmap(h->map[i], h->map_len[i]);
	if (h->fd[i] >= 0)
		close(h->fd[i]);
	h->fd[i] = -1;
	h->map[i] = NULL;
	h->size[i] = 0;
}

static void hostile_put(struct hostile *h, int fd, uint64_t size)
{
	int i = rnd(h, HOSTILE_FDS);

	hostile_close(h, i);
	h->fd[i] = fd;
	h->size[i] = size;
}

/* a random space slot, or -1 */
static int hostile_space(struct hostile *h)
{
	int i = rnd(h, HOSTILE_FDS);

	for (int k = 0; k < HOSTILE_FDS; k++, i = (i + 1) % HOSTILE_FDS)
		if (h->size[i])
			return i;
	return -1;
}

static void hostile_step(struct hostile *h, int dev)
{
	unsigned long long ram = mem_total();
	int i = hostile_space(h), fd;

	switch (rnd(h, 10)) {
	case 0:
	case 1: {	/* a space of up to RAM / 8 or up to RAM, maybe populated */
		unsigned int shift = 12 + rnd(h, 10);
		uint64_t size = ((uint64_t)(rnd(h, 1000) + 1) *
				 (ram / (rnd(h, 4) ? 8000 : 1000))) &
				~((1ULL << shift) - 1);

		fd = hmt_create(dev, size ? size : 1ULL << shift, shift,
				rnd(h, 2) ? HMIRROR_CREATE_POPULATE : 0);
		if (fd >= 0)
			hostile_put(h, fd, size ? size : 1ULL << shift);
		break;
	}
	case 2:
	case 3: {	/* map and write a random stretch, guarded or the view */
		size_t off, len;
		char *p;

		if (i < 0)
			break;
		len = ((size_t)rnd(h, 64) + 1) * ps * (rnd(h, 2) ? 256 : 1);
		if (len > h->size[i])
			len = h->size[i];
		off = (size_t)rnd(h, (h->size[i] - len) / ps + 1) * ps;
		if (h->map[i])
			munmap(h->map[i], h->map_len[i]);
		p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED, h->fd[i],
			 (rnd(h, 2) ? HMIRROR_MMAP_VIEW : 0) + off);
		h->map[i] = p == MAP_FAILED ? NULL : p;
		h->map_len[i] = len;
		if (h->map[i])
			touch(h->map[i], len);
		break;
	}
	case 4:		/* a dma-buf of the whole space */
		if (i < 0)
			break;
		fd = hmt_export(h->fd[i], 0, 0, HMIRROR_DMABUF_CLOEXEC);
		if (fd >= 0)
			hostile_put(h, fd, 0);
		break;
	case 5:		/* a pin, and a dma-buf of it */
		fd = hmt_pin(dev, h->anon, (rnd(h, h->anon_len / ps) + 1) * ps,
			     HMIRROR_PIN_WRITE, NULL);
		if (fd >= 0) {
			int d = hmt_export(fd, 0, 0, HMIRROR_DMABUF_CLOEXEC);

			hostile_put(h, fd, 0);
			if (d >= 0)
				hostile_put(h, d, 0);
		}
		break;
	case 6: {	/* arm and harvest */
		uint64_t chunks[64];

		if (i < 0)
			break;
		hmt_arm(h->fd[i], 0, 1 + rnd(h, 4));
		hmt_harvest(h->fd[i], chunks, 64, NULL);
		break;
	}
	case 7: {	/* garbage: any command number, random bytes */
		uint64_t junk[32];
		unsigned int nr = rnd(h, 0x30), size = 8 * (1 + rnd(h, 32));

		for (unsigned int k = 0; k < 32; k++)
			junk[k] = ((uint64_t)rand_r(&h->seed) << 32) | rand_r(&h->seed);
		fd = i >= 0 && rnd(h, 2) ? h->fd[i] : dev;
		ioctl(fd, _IOC(rnd(h, 4), HMIRROR_IOC_MAGIC, nr, size), junk);
		break;
	}
	default:	/* close something */
		hostile_close(h, rnd(h, HOSTILE_FDS));
		break;
	}
}

static int hostile_run(int dev, unsigned int seed)
{
	struct hostile h = { .seed = seed };
	uint64_t end = hmt_now_ns() + HOSTILE_SECS * 1000000000ull;
	unsigned long steps = 0;

	for (int i = 0; i < HOSTILE_FDS; i++)
		h.fd[i] = -1;
	h.anon_len = 4 * MIB;
	h.anon = mmap(NULL, h.anon_len, PROT_READ | PROT_WRITE,
		      MAP_PRIVATE | MAP_ANONYMOUS | MAP_POPULATE, -1, 0);
	if (h.anon == MAP_FAILED)
		return 1;
	catch_sigbus();
	while (hmt_now_ns() < end) {
		hostile_step(&h, dev);
		steps++;
	}
	fprintf(stderr, "# hostile %u: %lu steps\n", seed, steps);
	return 0;	/* exit closes the rest */
}

static long long module_refcnt(void)
{
	long long v = -1;
	FILE *f = fopen("/sys/module/hmirror/refcnt", "r");

	if (f) {
		if (fscanf(f, "%lld", &v) != 1)
			v = -1;
		fclose(f);
	}
	return v;
}

/*
 * Reap a hostile process within its grace time; past it, show where it
 * is stuck in the kernel, kill it and return -1.
 */
static int reap_hostile(pid_t pid, struct __test_metadata *_metadata)
{
	uint64_t end = hmt_now_ns() +
		       (HOSTILE_SECS + HOSTILE_GRACE_SECS) * 1000000000ull;
	char path[64], line[256];
	int status;
	FILE *f;

	while (hmt_now_ns() < end) {
		if (waitpid(pid, &status, WNOHANG) == pid)
			return WIFSIGNALED(status) ? 128 + WTERMSIG(status) :
						     WEXITSTATUS(status);
		usleep(20000);
	}
	snprintf(path, sizeof(path), "/proc/%d/stack", pid);
	f = fopen(path, "r");
	TH_LOG("hostile process %d stuck; kernel stack:", pid);
	while (f && fgets(line, sizeof(line), f))
		TH_LOG("  %s", line);
	if (f)
		fclose(f);
	kill(pid, SIGKILL);
	waitpid(pid, &status, 0);
	return -1;
}

/*
 * Two processes of one user, each a random mix of creates (up to all of
 * RAM, three in four up to RAM / 8, half populated), faults,
 * exports, pins, arms, harvests, garbage ioctls and closes, at default
 * limits: no OOM kill, both live to exit, everything is given back, and
 * the module unloads afterwards.
 */
TEST_F_TIMEOUT(limits, hostile_two_processes_then_unload,
	       2 * (HOSTILE_SECS + HOSTILE_GRACE_SECS))
{
	long long oom0 = vmstat("oom_kill"), spaces0 = hmt_stat("spaces");
	pid_t pid[2];

	if (self->dev < 0)
		SKIP(return, "no /dev/hmirror");
	ASSERT_LE(0, oom0);
	for (int k = 0; k < 2; k++) {
		pid[k] = fork();
		ASSERT_LE(0, pid[k]);
		if (pid[k] == 0) {
			if (hmt_become(40006))
				_exit(10);
			_exit(hostile_run(self->dev, 12345 + k));
		}
	}
	EXPECT_EQ(0, reap_hostile(pid[0], _metadata));
	EXPECT_EQ(0, reap_hostile(pid[1], _metadata));
	EXPECT_EQ(oom0, vmstat("oom_kill"));
	EXPECT_TRUE(hmt_wait_dev_idle(5000));
	for (int i = 0; i < 500 && user_stat(40006, "bytes"); i++)
		usleep(10000);
	EXPECT_EQ(0, user_stat(40006, "bytes"));
	EXPECT_EQ(spaces0, hmt_stat("spaces"));

	/* nothing of theirs holds the module: it unloads, and loads again */
	restore_params(self->saved);
	close(self->dev);
	self->dev = -1;
	close(users_fd);
	users_fd = -1;
	for (int i = 0; i < 500 && module_refcnt() > 0; i++)
		usleep(10000);
	EXPECT_EQ(0, module_refcnt());
	EXPECT_EQ(0, syscall(SYS_delete_module, "hmirror", O_NONBLOCK))
		TH_LOG("rmmod: %s", strerror(errno));
	self->dev = hmt_open_dev();
	EXPECT_LE(0, self->dev);
	if (self->dev >= 0)
		for (unsigned int i = 0; i < NR_SAVED; i++)
			hmt_param_get(saved_params[i], self->saved[i],
				      sizeof(self->saved[i]));
}

TEST_HARNESS_MAIN
