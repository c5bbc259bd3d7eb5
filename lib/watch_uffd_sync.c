// SPDX-License-Identifier: LGPL-2.1-or-later
/*
 * libhmirror watch backend "uffd-sync": synchronous userfaultfd
 * write-protect faults, for kernels without UFFD_FEATURE_WP_ASYNC (< 6.7).
 *
 * A memfd mapped MAP_SHARED, every watched mapping registered with
 * UFFDIO_REGISTER_MODE_WP.  A write to an armed page blocks the writer and
 * queues a message; the space's handler thread reads it and, under the
 * space lock, records the chunk (pending + generation), marks it open and
 * un-protects the whole chunk in that mapping (UFFDIO_WRITEPROTECT mode 0,
 * which wakes the writer).  The thread never reads or writes guarded memory.
 * Harvest, arm and generation re-protect open chunks under the same lock,
 * so a write either trips again or was covered by the record.
 *
 * Kernel writes: without UFFD_USER_MODE_ONLY the kernel's own faults
 * (read(2) into the space) are delivered and resolved the same way; that
 * needs privilege (CAP_SYS_PTRACE or vm.unprivileged_userfaultfd=1).
 * Unprivileged, the library falls back to UFFD_USER_MODE_ONLY and clears
 * HM_CAP_KERNEL_WRITES: such writes then fail with EFAULT.
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/eventfd.h>
#include <sys/mman.h>

#include "uffd_compat.h"
#include "watch_internal.h"

struct hm_uffd_sync {
	int uffd;
	int stop_fd;
	pthread_t thread;
	bool running;
	/* part of a watched mapping was moved (mremap): writes there can no
	   longer be placed; harvests fail with -EFAULT (lock held) */
	bool broken;
};

/* EVENT_REMAP: an mremap of a watched mapping waits until the handler
   thread has read where it went, and the registration moves with it */
static const uint64_t hm_sync_features = UFFD_FEATURE_WP_HUGETLBFS_SHMEM |
					 UFFD_FEATURE_EVENT_REMAP;

static int hm_uffd_sync_probe(const char **ret_reason)
{
	int uffd, err;

	err = hm_uffd_open(hm_sync_features, false, &uffd, NULL);
	if (err == -EPERM)
		err = hm_uffd_open(hm_sync_features, true, &uffd, NULL);
	if (err) {
		*ret_reason = err == -EOPNOTSUPP ?
			"the kernel lacks userfaultfd write-protect on shmem (Linux < 5.19)" :
			err == -ENOSYS ? "no userfaultfd(2) in this kernel" :
			"userfaultfd refused";
		return err == -ENOSYS ? -EOPNOTSUPP : err;
	}
	close(uffd);
	*ret_reason = "synchronous userfaultfd write-protect, one handler thread";
	return 0;
}

/* a trip (handler thread, lock held) */
static void hm_uffd_sync_handle(struct hm_space *s, struct hm_uffd_sync *u, uint64_t addr)
{
	uint64_t c;
	int m;

	m = hm_map_lookup(s, (uintptr_t)addr, &c);
	if (m >= 0) {
		if (hm_test_bit(s->armed, c)) {
			hm_record(s, c);
			hm_set_bit(s->open, c);
		}
		s->stats.trips++;
		hm_uffd_wp(u->uffd, s->maps[m].addr + (c << s->chunk_shift),
			   1ull << s->chunk_shift, false);
	} else {
		/* not a mapping we know (a part moved away by mremap: the space
		   is broken, harvests say so): let the writer go */
		long pg = sysconf(_SC_PAGESIZE);

		hm_uffd_wp(u->uffd, addr & ~(uint64_t)(pg - 1), (uint64_t)pg, false);
	}
}

/* a watched mapping moved (handler thread, lock held): follow it when it
   moved whole */
static void hm_uffd_sync_remap(struct hm_space *s, struct hm_uffd_sync *u, uint64_t from,
			       uint64_t to, uint64_t len)
{
	for (unsigned i = 0; i < HM_SPACE_MAX_MAPS; i++) {
		uintptr_t a = s->maps[i].addr;

		if (!a || from >= a + s->size || from + len <= a)
			continue;
		if (from == a && len == s->size) {
			if (!s->imported && s->cpu_addr == (void *)a)
				s->cpu_addr = (void *)(uintptr_t)to;
			s->maps[i].addr = (uintptr_t)to;
		} else {
			u->broken = true;
		}
	}
}

static void *hm_uffd_sync_thread(void *arg)
{
	struct hm_space *s = arg;
	struct hm_uffd_sync *u = s->priv;
	struct uffd_msg msg[16];

	for (;;) {
		struct pollfd pfd[2] = {
			{ .fd = u->uffd, .events = POLLIN },
			{ .fd = u->stop_fd, .events = POLLIN },
		};
		ssize_t n;

		if (poll(pfd, 2, -1) < 0) {
			if (errno == EINTR)
				continue;
			break;
		}
		if (pfd[1].revents)
			break;
		if (pfd[0].revents & (POLLERR | POLLHUP | POLLNVAL))
			break;
		/*
		 * Read and apply under the lock: an mremap returns once its
		 * REMAP event is read, so the application's next locked call
		 * (a harvest) must wait for the new address to be applied, not
		 * re-arm at the old one (the uffd is non-blocking).
		 */
		hm_lock(s);
		n = read(u->uffd, msg, sizeof(msg));
		if (n < 0) {
			int err = errno;

			hm_unlock(s);
			if (err == EAGAIN || err == EINTR)
				continue;
			break;
		}
		for (size_t i = 0; i < (size_t)n / sizeof(msg[0]); i++) {
			if (msg[i].event == UFFD_EVENT_REMAP)
				hm_uffd_sync_remap(s, u, msg[i].arg.remap.from, msg[i].arg.remap.to,
						   msg[i].arg.remap.len);
			if (msg[i].event != UFFD_EVENT_PAGEFAULT)
				continue;
			hm_uffd_sync_handle(s, u, msg[i].arg.pagefault.address);
		}
		hm_unlock(s);
	}
	return NULL;
}

static int hm_uffd_sync_start(struct hm_space *s)
{
	struct hm_uffd_sync *u = s->priv;
	sigset_t all, old;
	int err;

	u->stop_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	if (u->stop_fd < 0)
		return -errno;
	/* the thread takes no signals: they stay the caller's */
	sigfillset(&all);
	pthread_sigmask(SIG_BLOCK, &all, &old);
	err = -pthread_create(&u->thread, NULL, hm_uffd_sync_thread, s);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	if (err)
		return err;
	u->running = true;
	return 0;
}

static void hm_uffd_sync_stop(struct hm_uffd_sync *u)
{
	uint64_t one = 1;

	if (!u->running)
		return;
	if (write(u->stop_fd, &one, sizeof(one)) < 0) {
		/* an eventfd write cannot fail here */
	}
	pthread_join(u->thread, NULL);
	u->running = false;
}

static struct hm_uffd_sync *hm_uffd_sync_alloc(struct hm_space *s)
{
	struct hm_uffd_sync *u = calloc(1, sizeof(*u));

	if (!u)
		return NULL;
	u->uffd = -1;
	u->stop_fd = -1;
	s->priv = u;
	return u;
}

static int hm_uffd_sync_create(struct hm_space *s, const struct hm_space_params *p)
{
	struct hm_uffd_sync *u = hm_uffd_sync_alloc(s);
	void *a;
	int err;

	if (!u)
		return -ENOMEM;
	err = hm_memfd_create(s, p);
	if (err)
		return err;
	err = hm_uffd_open(hm_sync_features, false, &u->uffd, NULL);
	if (err == -EPERM) {
		err = hm_uffd_open(hm_sync_features, true, &u->uffd, NULL);
		s->caps &= ~HM_CAP_KERNEL_WRITES;
		hm_set_reason(s, "[UFFD_USER_MODE_ONLY: kernel writes into armed memory fail with EFAULT] ");
	}
	if (err)
		return err;
	err = hm_notify_init(s);
	if (err)
		return err;
	err = hm_memfd_map(s, p->addr, p->addr != NULL, PROT_READ | PROT_WRITE, &a);
	if (err)
		return err;
	s->maps[0].addr = (uintptr_t)a;
	err = hm_uffd_register(u->uffd, (uintptr_t)a, s->size);
	if (err)
		return err;
	return hm_uffd_sync_start(s);
}

static int hm_uffd_sync_import(struct hm_space *s, const struct hm_space_handoff *h)
{
	struct hm_uffd_sync *u = hm_uffd_sync_alloc(s);
	int err;

	if (!u)
		return -ENOMEM;
	if (h->nr_fds != 2)
		return -EINVAL;
	err = hm_memfd_import(s, h);
	if (err)
		return err;
	u->uffd = fcntl(h->fds[1], F_DUPFD_CLOEXEC, 3);
	if (u->uffd < 0)
		return -errno;
	err = hm_notify_init(s);
	if (err)
		return err;
	return hm_uffd_sync_start(s);
}

static void hm_uffd_sync_destroy(struct hm_space *s)
{
	struct hm_uffd_sync *u = s->priv;

	if (!u)
		return;
	hm_uffd_sync_stop(u);
	if (u->uffd >= 0)
		close(u->uffd);
	if (u->stop_fd >= 0)
		close(u->stop_fd);
	free(u);
	s->priv = NULL;
}

static int hm_uffd_sync_protect_range(struct hm_space *s, uint64_t first, uint64_t count)
{
	struct hm_uffd_sync *u = s->priv;

	return hm_uffd_wp_maps(s, u->uffd, first, count);
}

static int hm_uffd_sync_disarm(struct hm_space *s, uint64_t first, uint64_t count)
{
	struct hm_uffd_sync *u = s->priv;

	return hm_uffd_unwp_maps(s, u->uffd, first, count);
}

static int hm_uffd_sync_watch_map(struct hm_space *s, uintptr_t addr)
{
	struct hm_uffd_sync *u = s->priv;
	int err = hm_uffd_register(u->uffd, addr, s->size);

	for (uint64_t c = 0; !err && c < s->nr_chunks; c++)
		if (hm_test_bit(s->armed, c))
			err = hm_uffd_wp(u->uffd, addr + (c << s->chunk_shift),
					 1ull << s->chunk_shift, true);
	return err;
}

static int hm_uffd_sync_rearm(struct hm_space *s, const uint64_t *chunks, size_t n)
{
	struct hm_uffd_sync *u = s->priv;

	if (u->broken)
		return -EFAULT;
	return hm_rearm_open(s, chunks, n, hm_uffd_sync_protect_range);
}

static int hm_uffd_sync_refresh(struct hm_space *s, uint64_t first, uint64_t count)
{
	struct hm_uffd_sync *u = s->priv;

	if (u->broken)
		return -EFAULT;
	return hm_refresh_open(s, first, count, hm_uffd_sync_protect_range);
}

static int hm_uffd_sync_export(struct hm_space *s, struct hm_space_handoff *h)
{
	struct hm_uffd_sync *u = s->priv;

	h->fds[0] = fcntl(s->memfd, F_DUPFD_CLOEXEC, 3);
	if (h->fds[0] < 0)
		return -errno;
	h->nr_fds = 1;
	h->fds[1] = fcntl(u->uffd, F_DUPFD_CLOEXEC, 3);
	if (h->fds[1] < 0)
		return -errno;
	h->nr_fds = 2;
	return 0;
}

/* from now on the importer's thread resolves the faults; until it runs,
   writers to armed chunks wait (the thread takes the lock: not held here) */
static void hm_uffd_sync_exported(struct hm_space *s)
{
	hm_uffd_sync_stop(s->priv);
}

const struct hm_backend_ops hm_uffd_sync_ops = {
	.backend = HM_BACKEND_UFFD_SYNC,
	.caps = HM_CAP_KERNEL_WRITES | HM_CAP_POLL | HM_CAP_HANDOFF | HM_CAP_NO_VMA_SPLIT |
		HM_CAP_RECLAIM_SAFE | HM_CAP_HARVEST_TAKE | HM_CAP_MPROTECT | HM_CAP_MREMAP |
		HM_CAP_MADVISE,
	.probe = hm_uffd_sync_probe,
	.create = hm_uffd_sync_create,
	.import = hm_uffd_sync_import,
	.destroy = hm_uffd_sync_destroy,
	.watch_map = hm_uffd_sync_watch_map,
	.protect = hm_uffd_sync_protect_range,
	.refresh = hm_uffd_sync_refresh,
	.rearm = hm_uffd_sync_rearm,
	.disarm = hm_uffd_sync_disarm,
	.export = hm_uffd_sync_export,
	.exported = hm_uffd_sync_exported,
};
