// SPDX-License-Identifier: LGPL-2.1-or-later
/*
 * libhmirror watch: what the backends share (watch_internal.h), below both
 * the common part (watch.c) and the backends (watch_kmod.c, watch_uffd.c,
 * watch_uffd_sync.c, watch_mprotect.c) and the consumers
 * (watch_consumer.c): the space lock, the record of a write, the arm of a
 * checked range, the re-protection of open chunks, the watched mapping of
 * an address, the memfd of the pages and the reason text.  watch.c picks
 * a backend by its ops; a backend calls nothing of watch.c.
 */
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>
#include <sys/eventfd.h>
#include <sys/mman.h>

#include "watch_internal.h"

int hm_set_reason(struct hm_space *s, const char *fmt, ...)
{
	size_t len = strlen(s->reason);
	va_list ap;

	if (len >= sizeof(s->reason) - 1)
		return 0;
	va_start(ap, fmt);
	vsnprintf(s->reason + len, sizeof(s->reason) - len, fmt, ap);
	va_end(ap);
	return 0;
}

/* ---- lock ---------------------------------------------------------------- */

void hm_lock(struct hm_space *s)
{
	if (s->spin) {
		sigset_t all, old;

		sigfillset(&all);
		pthread_sigmask(SIG_BLOCK, &all, &old);
		while (atomic_flag_test_and_set_explicit(&s->spinlock, memory_order_acquire))
			sched_yield();
		s->saved_mask = old;
	} else {
		pthread_mutex_lock(&s->mutex);
	}
}

void hm_unlock(struct hm_space *s)
{
	if (s->spin) {
		sigset_t old = s->saved_mask;

		atomic_flag_clear_explicit(&s->spinlock, memory_order_release);
		pthread_sigmask(SIG_SETMASK, &old, NULL);
	} else {
		pthread_mutex_unlock(&s->mutex);
	}
}

void hm_notify(struct hm_space *s)
{
	uint64_t one = 1;
	ssize_t r = write(s->notify_fd, &one, sizeof(one));

	(void)r;
}

int hm_map_lookup(const struct hm_space *s, uintptr_t addr, uint64_t *ret_chunk)
{
	for (unsigned i = 0; i < HM_SPACE_MAX_MAPS; i++) {
		uintptr_t a = s->maps[i].addr;

		if (a && addr >= a && addr - a < s->size) {
			*ret_chunk = (addr - a) >> s->chunk_shift;
			return (int)i;
		}
	}
	return -1;
}

/* ---- memfd helpers ------------------------------------------------------- */

int hm_memfd_create(struct hm_space *s, const struct hm_space_params *p)
{
	int fd = memfd_create("hmirror-space", MFD_CLOEXEC | MFD_ALLOW_SEALING);

	if (fd < 0)
		return -errno;
	/* sealed against shrinking: an importer (the daemon) refuses pages
	 * that could vanish under its mappings */
	if (ftruncate(fd, (off_t)s->size) < 0 ||
	    fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK) < 0)
		goto fail;
	if ((p->flags & HM_SPACE_POPULATE) && fallocate(fd, 0, 0, (off_t)s->size) < 0)
		goto fail;
	s->memfd = fd;
	return 0;
fail:;
	int err = -errno;

	close(fd);
	return err;
}

int hm_memfd_map(struct hm_space *s, void *hint, bool fixed, int prot, void **ret_addr)
{
	int flags = MAP_SHARED | (fixed ? MAP_FIXED_NOREPLACE : 0);
	void *a = mmap(hint, s->size, prot, flags, s->memfd, 0);

	if (a == MAP_FAILED)
		return -errno;
	if (fixed && a != hint) {	/* a kernel without MAP_FIXED_NOREPLACE */
		munmap(a, s->size);
		return -EEXIST;
	}
	madvise(a, s->size, MADV_NOHUGEPAGE);
	/* fork: the child gets no mapping of the space (watch.h) */
	madvise(a, s->size, MADV_DONTFORK);
	*ret_addr = a;
	return 0;
}

int hm_memfd_import(struct hm_space *s, const struct hm_space_handoff *h)
{
	void *a;
	int err;

	s->memfd = fcntl(h->fds[0], F_DUPFD_CLOEXEC, 3);
	if (s->memfd < 0)
		return -errno;
	err = hm_memfd_map(s, NULL, false, PROT_READ | PROT_WRITE, &a);
	if (err)
		return err;
	s->cpu_addr = a;
	return 0;
}

/* hm_space_arm() of a checked range, lock held */
int hm_arm_locked(struct hm_space *s, uint64_t first, uint64_t count)
{
	int err = 0;

	if (s->ops->arm) {
		err = s->ops->arm(s, first, count);
		if (!err)
			for (uint64_t c = first; c < first + count; c++)
				hm_set_bit(s->armed, c);
		return err;
	}
	/* runs of armed chunks: bring their writes into pending and re-arm
	   them; runs of unarmed chunks: write-protect for the first time */
	for (uint64_t c = first; c < first + count;) {
		bool armed = hm_test_bit(s->armed, c);
		uint64_t e;

		for (e = c + 1; e < first + count && hm_test_bit(s->armed, e) == armed; e++)
			;
		err = armed ? s->ops->refresh(s, c, e - c) : s->ops->protect(s, c, e - c);
		if (err)
			return err;
		if (!armed)
			for (uint64_t i = c; i < e; i++)
				hm_set_bit(s->armed, i);
		c = e;
	}
	return 0;
}

/* eventfd for backends whose trip handlers record (uffd-sync, mprotect) */
int hm_notify_init(struct hm_space *s)
{
	s->notify_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	return s->notify_fd < 0 ? -errno : 0;
}

int hm_rearm_open(struct hm_space *s, const uint64_t *chunks, size_t n, hm_protect_fn *protect)
{
	for (size_t i = 0; i < n;) {
		size_t j = i;
		int err;

		if (!hm_test_bit(s->open, chunks[i])) {
			i++;
			continue;
		}
		while (j + 1 < n && chunks[j + 1] == chunks[j] + 1 && hm_test_bit(s->open, chunks[j + 1]))
			j++;
		err = protect(s, chunks[i], chunks[j] - chunks[i] + 1);
		if (err)
			return err;
		for (size_t k = i; k <= j; k++)
			hm_clear_bit(s->open, chunks[k]);
		i = j + 1;
	}
	return 0;
}

int hm_refresh_open(struct hm_space *s, uint64_t first, uint64_t count, hm_protect_fn *protect)
{
	for (uint64_t c = first; c < first + count; c++) {
		if (hm_test_bit(s->open, c)) {
			int err = protect(s, c, 1);

			if (err)
				return err;
			hm_clear_bit(s->open, c);
		}
	}
	return 0;
}

