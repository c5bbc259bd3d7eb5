// SPDX-License-Identifier: LGPL-2.1-or-later
/*
 * libhmirror watch backend "mprotect": the last resort.  Armed chunks are
 * mapped PROT_READ; a write raises SIGSEGV, whose handler records the chunk
 * and makes it writable in the faulting mapping, then returns so the write
 * is retried.  Costs (Documentation/watch.rst): a signal round trip per
 * trip, and one VMA split per scattered trip or re-arm, up to
 * vm.max_map_count.
 *
 * The SIGSEGV handler: installed by the library only when the caller
 * creates the first mprotect space, removed (the previous one restored)
 * when the last one is freed, if nobody replaced it meanwhile.  A fault
 * that is not a write to an armed chunk of a live mprotect space is passed
 * to the handler that was installed before ours (SA_SIGINFO or not); where
 * that was SIG_DFL or SIG_IGN the default action is restored and the fault
 * repeats, so the process dies as it would have without the library.
 *
 * The VMA wall: when hm_space_arm() needs a split the kernel refuses
 * (mprotect fails with ENOMEM at vm.max_map_count), it returns -ENOMEM.
 * When the trip handler cannot un-protect one chunk for the same reason, it
 * makes every watched mapping writable (whole mappings: no split, the VMAs
 * merge) and records every armed chunk as written: nothing is lost, the
 * next harvest reports them all and re-arms them in a few large runs
 * (hm_space_stats().overflows counts these events).
 *
 * A watched mapping the application moves (mremap, whole or part) is
 * refused, not followed: a write fault outside every watched mapping is
 * looked up in /proc/self/maps, and one in a mapping of a space's memfd
 * records the chunk, marks that space moved and proceeds (the page made
 * writable there); a re-arm that finds the first or last page of a
 * watched mapping gone marks it too.  A moved space's harvests (but one
 * with nothing recorded: nothing armed was written) and refreshes answer
 * -EFAULT from then on, as uffd-async's do (Documentation/watch.rst).
 *
 * Kernel writes into armed memory (read(2) into the space) are not seen:
 * they fail with EFAULT, no signal is raised (no HM_CAP_KERNEL_WRITES).
 * The space cannot be handed to another process (no HM_CAP_HANDOFF): the
 * handler has to run in the writer's process.
 */
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>

#include "watch_internal.h"

static _Atomic(struct hm_space *) hm_mp_spaces[HM_MPROTECT_MAX_SPACES];
/* pages (of the space, in any mapping) the application made read-only
   through hm_space_protect(), by slot; a write there is the application's
   fault, not a trip.  Allocated on first use, under the space lock. */
static uint64_t *hm_mp_app_ro[HM_MPROTECT_MAX_SPACES];
/* each slot's memfd, as /proc/self/maps names it (major, minor, inode) */
static struct hm_mp_file {
	unsigned major, minor;
	uint64_t ino;
} hm_mp_file[HM_MPROTECT_MAX_SPACES];
/* a watched mapping of the slot's space was moved: harvests refuse */
static atomic_bool hm_mp_moved[HM_MPROTECT_MAX_SPACES];
static atomic_int hm_mp_inflight;
static pthread_mutex_t hm_mp_reg_lock = PTHREAD_MUTEX_INITIALIZER;
static unsigned hm_mp_nr;		/* live spaces; under hm_mp_reg_lock */
static struct sigaction hm_mp_prev;	/* the caller's handler before ours */

static int hm_mprotect_probe(const char **ret_reason)
{
	*ret_reason = "mprotect + SIGSEGV (last resort: a signal a trip, VMA splits)";
	return 0;
}

static int hm_mp_protect_all_maps(struct hm_space *s, uint64_t first, uint64_t count, int prot)
{
	for (unsigned i = 0; i < HM_SPACE_MAX_MAPS; i++) {
		if (!s->maps[i].addr)
			continue;
		if (mprotect((void *)(s->maps[i].addr + (first << s->chunk_shift)),
			     count << s->chunk_shift, prot) < 0)
			return -errno;
	}
	return 0;
}

static uint64_t *hm_mp_ro_of(const struct hm_space *s)
{
	return hm_mp_app_ro[(uintptr_t)s->priv - 1];
}

/* re-protect the application's read-only pages of chunk c in mapping m */
static void hm_mp_keep_app_ro(struct hm_space *s, int m, uint64_t c)
{
	uint64_t *ro = hm_mp_ro_of(s);
	unsigned shift = 12, per = 1u << (s->chunk_shift - shift);

	if (!ro)
		return;
	for (uint64_t p = c * per; p < (c + 1) * per; p++)
		if (hm_test_bit(ro, p))
			mprotect((void *)(s->maps[m].addr + (p << shift)), 1ul << shift, PROT_READ);
}

/* a trip (lock held, in the signal handler) */
static void hm_mp_trip(struct hm_space *s, int m, uint64_t c)
{
	void *a = (void *)(s->maps[m].addr + (c << s->chunk_shift));

	if (hm_test_bit(s->armed, c)) {
		hm_record(s, c);
		hm_set_bit(s->open, c);
	}
	s->stats.trips++;
	if (!mprotect(a, 1ull << s->chunk_shift, PROT_READ | PROT_WRITE)) {
		hm_mp_keep_app_ro(s, m, c);
		return;
	}
	/* the VMA wall: open everything in whole mappings, record everything */
	s->stats.overflows++;
	hm_mp_protect_all_maps(s, 0, s->nr_chunks, PROT_READ | PROT_WRITE);
	for (uint64_t i = 0; i < s->nr_chunks; i++) {
		if (hm_test_bit(s->armed, i)) {
			hm_record(s, i);
			hm_set_bit(s->open, i);
		}
	}
}

/* a hexadecimal (base 16) or decimal number at *p, which moves past it */
static uint64_t hm_mp_num(const char **p, unsigned base)
{
	uint64_t v = 0;

	for (;; (*p)++) {
		unsigned d;

		if (**p >= '0' && **p <= '9')
			d = (unsigned)(**p - '0');
		else if (base == 16 && **p >= 'a' && **p <= 'f')
			d = (unsigned)(**p - 'a' + 10);
		else
			return v;
		v = v * base + d;
	}
}

/* one line of /proc/self/maps ("lo-hi perms offset major:minor inode
   path"): true if it holds addr, with the file offset of addr and the file */
static bool hm_mp_parse_vma(const char *l, uintptr_t addr, uint64_t *ret_off,
			    struct hm_mp_file *ret_f)
{
	uint64_t lo = hm_mp_num(&l, 16), hi, off;

	if (*l++ != '-')
		return false;
	hi = hm_mp_num(&l, 16);
	if (addr < lo || addr >= hi)
		return false;
	while (*l == ' ')
		l++;
	while (*l && *l != ' ')		/* the permissions */
		l++;
	while (*l == ' ')
		l++;
	off = hm_mp_num(&l, 16);
	while (*l == ' ')
		l++;
	ret_f->major = (unsigned)hm_mp_num(&l, 16);
	if (*l++ != ':')
		return false;
	ret_f->minor = (unsigned)hm_mp_num(&l, 16);
	while (*l == ' ')
		l++;
	ret_f->ino = hm_mp_num(&l, 10);
	*ret_off = off + (addr - lo);
	return true;
}

/* the file and offset mapped at addr, from /proc/self/maps (in the signal
   handler: open, read and close only, no allocation); false if none */
static bool hm_mp_file_at(uintptr_t addr, uint64_t *ret_off, struct hm_mp_file *ret_f)
{
	char buf[512], line[128];
	size_t ll = 0;
	bool found = false;
	ssize_t n;
	int fd = open("/proc/self/maps", O_RDONLY | O_CLOEXEC);

	if (fd < 0)
		return false;
	while (!found && (n = read(fd, buf, sizeof(buf))) > 0) {
		for (ssize_t i = 0; i < n && !found; i++) {
			if (buf[i] != '\n') {
				if (ll < sizeof(line) - 1)	/* the path may be cut */
					line[ll++] = buf[i];
				continue;
			}
			line[ll] = 0;
			ll = 0;
			found = hm_mp_parse_vma(line, addr, ret_off, ret_f);
		}
	}
	close(fd);
	return found && ret_f->ino;
}

/*
 * A write fault outside every watched mapping (in the signal handler,
 * hm_mp_inflight held): in a mapping of a space's memfd that the
 * application moved (mremap), it marks the space moved and lets the write
 * proceed; a page the application made read-only stays its own fault.
 */
static bool hm_mp_moved_fault(uintptr_t addr)
{
	const uintptr_t pg = 1ul << 12;	/* the page bitmaps' unit, as above */
	struct hm_mp_file f;
	uint64_t off;
	bool ours = false;

	if (!hm_mp_file_at(addr, &off, &f))
		return false;
	for (unsigned i = 0; i < HM_MPROTECT_MAX_SPACES && !ours; i++) {
		struct hm_space *s = atomic_load(&hm_mp_spaces[i]);

		if (!s || hm_mp_file[i].ino != f.ino || hm_mp_file[i].major != f.major ||
		    hm_mp_file[i].minor != f.minor || off >= s->size)
			continue;
		hm_lock(s);
		if (!hm_mp_app_ro[i] || !hm_test_bit(hm_mp_app_ro[i], off >> 12)) {
			atomic_store(&hm_mp_moved[i], true);
			/* recorded, so the next harvest re-arms, and refuses */
			if (hm_test_bit(s->armed, off >> s->chunk_shift))
				hm_record(s, off >> s->chunk_shift);
			ours = !mprotect((void *)(addr & ~(pg - 1)), pg, PROT_READ | PROT_WRITE);
		}
		hm_unlock(s);
	}
	return ours;
}

static void hm_mp_chain(int sig, siginfo_t *si, void *uc)
{
	struct sigaction prev = hm_mp_prev;

	if (prev.sa_flags & SA_SIGINFO) {
		if (prev.sa_sigaction)
			prev.sa_sigaction(sig, si, uc);
		return;
	}
	if (prev.sa_handler == SIG_DFL || prev.sa_handler == SIG_IGN) {
		struct sigaction dfl;

		memset(&dfl, 0, sizeof(dfl));
		dfl.sa_handler = SIG_DFL;
		sigaction(sig, &dfl, NULL);
		return;		/* the fault repeats and takes the default action */
	}
	prev.sa_handler(sig);
}

static void hm_mp_handler(int sig, siginfo_t *si, void *uc)
{
	int saved_errno = errno;
	bool ours = false;

	if (si->si_code == SEGV_ACCERR) {
		uintptr_t addr = (uintptr_t)si->si_addr;

		atomic_fetch_add(&hm_mp_inflight, 1);
		for (unsigned i = 0; i < HM_MPROTECT_MAX_SPACES && !ours; i++) {
			struct hm_space *s = atomic_load(&hm_mp_spaces[i]);
			uint64_t c;
			int m;

			if (!s)
				continue;
			hm_lock(s);
			m = hm_map_lookup(s, addr, &c);
			/* a page the application made read-only: its fault */
			if (m >= 0 && hm_mp_ro_of(s) &&
			    hm_test_bit(hm_mp_ro_of(s), (addr - s->maps[m].addr) >> 12))
				m = -1;
			if (m >= 0) {
				ours = true;
				hm_mp_trip(s, m, c);
			}
			hm_unlock(s);
		}
		if (!ours)
			ours = hm_mp_moved_fault(addr);
		atomic_fetch_sub(&hm_mp_inflight, 1);
	}
	errno = saved_errno;
	if (!ours)
		hm_mp_chain(sig, si, uc);
}

static int hm_mp_register(struct hm_space *s)
{
	int slot = -1, err = 0;
	struct stat st;

	pthread_mutex_lock(&hm_mp_reg_lock);
	for (unsigned i = 0; i < HM_MPROTECT_MAX_SPACES; i++) {
		if (!atomic_load(&hm_mp_spaces[i])) {
			slot = (int)i;
			break;
		}
	}
	if (slot < 0) {
		err = -EMFILE;
		goto out;
	}
	if (!hm_mp_nr) {
		struct sigaction sa;

		memset(&sa, 0, sizeof(sa));
		sa.sa_sigaction = hm_mp_handler;
		sa.sa_flags = SA_SIGINFO | SA_RESTART | SA_ONSTACK;
		sigfillset(&sa.sa_mask);
		if (sigaction(SIGSEGV, &sa, &hm_mp_prev) < 0) {
			err = -errno;
			goto out;
		}
	}
	hm_mp_nr++;
	if (!fstat(s->memfd, &st))
		hm_mp_file[slot] = (struct hm_mp_file){
			major(st.st_dev), minor(st.st_dev), (uint64_t)st.st_ino,
		};
	atomic_store(&hm_mp_moved[slot], false);
	atomic_store(&hm_mp_spaces[slot], s);
	s->priv = (void *)(uintptr_t)(slot + 1);
out:
	pthread_mutex_unlock(&hm_mp_reg_lock);
	return err;
}

static void hm_mp_unregister(struct hm_space *s)
{
	int slot = (int)(uintptr_t)s->priv - 1;

	if (slot < 0)
		return;
	pthread_mutex_lock(&hm_mp_reg_lock);
	atomic_store(&hm_mp_spaces[slot], NULL);
	/* a handler that saw s before the store is done with it after this */
	while (atomic_load(&hm_mp_inflight))
		sched_yield();
	free(hm_mp_app_ro[slot]);
	hm_mp_app_ro[slot] = NULL;
	if (!--hm_mp_nr) {
		struct sigaction cur;

		if (!sigaction(SIGSEGV, NULL, &cur) && (cur.sa_flags & SA_SIGINFO) &&
		    cur.sa_sigaction == hm_mp_handler)
			sigaction(SIGSEGV, &hm_mp_prev, NULL);
	}
	pthread_mutex_unlock(&hm_mp_reg_lock);
	s->priv = NULL;
}

static int hm_mprotect_create(struct hm_space *s, const struct hm_space_params *p)
{
	void *a;
	int err;

	s->spin = true;
	err = hm_memfd_create(s, p);
	if (err)
		return err;
	err = hm_notify_init(s);
	if (err)
		return err;
	err = hm_memfd_map(s, p->addr, p->addr != NULL, PROT_READ | PROT_WRITE, &a);
	if (err)
		return err;
	s->maps[0].addr = (uintptr_t)a;
	return hm_mp_register(s);
}

static void hm_mprotect_destroy(struct hm_space *s)
{
	hm_mp_unregister(s);
}

static int hm_mprotect_protect(struct hm_space *s, uint64_t first, uint64_t count)
{
	return hm_mp_protect_all_maps(s, first, count, PROT_READ);
}

static int hm_mprotect_watch_map(struct hm_space *s, uintptr_t addr)
{
	for (uint64_t c = 0; c < s->nr_chunks;) {
		uint64_t e;

		if (!hm_test_bit(s->armed, c)) {
			c++;
			continue;
		}
		for (e = c + 1; e < s->nr_chunks && hm_test_bit(s->armed, e); e++)
			;
		if (mprotect((void *)(addr + (c << s->chunk_shift)),
			     (e - c) << s->chunk_shift, PROT_READ) < 0)
			return -errno;
		c = e;
	}
	return 0;
}

/* the VMA wall while re-arming: protect whole mappings (no split) */
static int hm_mp_rearm_fallback(struct hm_space *s)
{
	int err = hm_mp_protect_all_maps(s, 0, s->nr_chunks, PROT_READ);

	if (err)
		return err;
	memset(s->open, 0, ((s->nr_chunks + 63) / 64) * 8);
	s->stats.overflows++;
	return 0;
}

/* a watched mapping's first or last page gone: moved (mremap; lock held) */
static bool hm_mp_maps_gone(struct hm_space *s)
{
	long pg = sysconf(_SC_PAGESIZE);
	unsigned char v;

	for (unsigned i = 0; i < HM_SPACE_MAX_MAPS; i++) {
		uintptr_t a = s->maps[i].addr;

		if (a && (mincore((void *)a, (size_t)pg, &v) < 0 ||
			  mincore((void *)(a + s->size - (uint64_t)pg), (size_t)pg, &v) < 0))
			return true;
	}
	return false;
}

/*
 * Re-protect a run of open chunks read-only; at the VMA wall, everything.
 * mprotect's ENOMEM is also a mapping moved away with no write at its new
 * address yet: then -EFAULT, as for one the handler found.
 */
static int hm_mp_reprotect(struct hm_space *s, uint64_t first, uint64_t count)
{
	int err = hm_mp_protect_all_maps(s, first, count, PROT_READ);

	if (err == -ENOMEM && hm_mp_maps_gone(s)) {
		atomic_store(&hm_mp_moved[(uintptr_t)s->priv - 1], true);
		return -EFAULT;
	}
	return err == -ENOMEM ? hm_mp_rearm_fallback(s) : err;
}

/* read-write again, but for the application's own read-only pages */
static int hm_mprotect_disarm(struct hm_space *s, uint64_t first, uint64_t count)
{
	int err = hm_mp_protect_all_maps(s, first, count, PROT_READ | PROT_WRITE);

	if (err)
		return err;
	if (hm_mp_ro_of(s))
		for (unsigned m = 0; m < HM_SPACE_MAX_MAPS; m++)
			for (uint64_t c = first; s->maps[m].addr && c < first + count; c++)
				hm_mp_keep_app_ro(s, (int)m, c);
	return 0;
}

/* a watched mapping of s was moved (lock held) */
static bool hm_mp_is_moved(struct hm_space *s)
{
	return atomic_load(&hm_mp_moved[(uintptr_t)s->priv - 1]);
}

static int hm_mprotect_rearm(struct hm_space *s, const uint64_t *chunks, size_t n)
{
	if (hm_mp_is_moved(s))
		return -EFAULT;
	return hm_rearm_open(s, chunks, n, hm_mp_reprotect);
}

static int hm_mprotect_refresh(struct hm_space *s, uint64_t first, uint64_t count)
{
	if (hm_mp_is_moved(s))
		return -EFAULT;
	return hm_refresh_open(s, first, count, hm_mp_reprotect);
}

/*
 * The application's mprotect through the library: the pages get prot, and
 * every armed chunk that is not open stays read-only (a raw mprotect to
 * PROT_WRITE would make it writable unseen).  Pages made read-only this
 * way fault as the application's own (chained to its handler), never as
 * trips.  Lock held.
 */
static int hm_mprotect_app_protect(struct hm_space *s, int m, uintptr_t addr, size_t len,
				   int prot)
{
	int slot = (int)(uintptr_t)s->priv - 1;
	uint64_t first = (addr - s->maps[m].addr) >> 12, n = len >> 12;
	uint64_t c0 = (first << 12) >> s->chunk_shift;
	uint64_t c1 = (((first + n) << 12) - 1) >> s->chunk_shift;
	uint64_t *ro;

	if (slot < 0)
		return -EINVAL;
	ro = hm_mp_app_ro[slot];
	if (!ro && !(prot & PROT_WRITE)) {
		ro = calloc((s->size >> 12) / 64 + 1, 8);
		if (!ro)
			return -ENOMEM;
		hm_mp_app_ro[slot] = ro;
	}
	for (uint64_t p = first; ro && p < first + n; p++) {
		if (prot & PROT_WRITE)
			hm_clear_bit(ro, p);
		else
			hm_set_bit(ro, p);
	}
	if (mprotect((void *)addr, len, prot) < 0)
		return -errno;
	if (!(prot & PROT_WRITE))
		return 0;
	for (uint64_t c = c0; c <= c1; c++) {
		uintptr_t lo = s->maps[m].addr + (c << s->chunk_shift);
		uintptr_t hi = lo + (1ull << s->chunk_shift);

		if (!hm_test_bit(s->armed, c) || hm_test_bit(s->open, c))
			continue;
		lo = lo < addr ? addr : lo;
		hi = hi > addr + len ? addr + len : hi;
		if (mprotect((void *)lo, hi - lo, PROT_READ) < 0)
			return -errno;
	}
	return 0;
}

const struct hm_backend_ops hm_mprotect_ops = {
	.backend = HM_BACKEND_MPROTECT,
	.caps = HM_CAP_POLL | HM_CAP_RECLAIM_SAFE | HM_CAP_HARVEST_TAKE | HM_CAP_MADVISE,
	.probe = hm_mprotect_probe,
	.create = hm_mprotect_create,
	.destroy = hm_mprotect_destroy,
	.watch_map = hm_mprotect_watch_map,
	.protect = hm_mprotect_protect,
	.refresh = hm_mprotect_refresh,
	.rearm = hm_mprotect_rearm,
	.disarm = hm_mprotect_disarm,
	.app_protect = hm_mprotect_app_protect,
};
