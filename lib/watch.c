// SPDX-License-Identifier: LGPL-2.1-or-later
/*
 * libhmirror watch: the common part of every backend.  Backend choice
 * (AUTO: kmod, uffd-async, uffd-sync, mprotect, the first that works),
 * parameter checks, the chunk state machine (armed / open / pending /
 * generation, see watch_internal.h), aliases, device view, handoff.
 * What the backends call lies below, in watch_internal.c.
 */
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/uio.h>

#include "env.h"
#include "watch_internal.h"

static const struct hm_backend_ops *const hm_ops[HM_BACKEND_COUNT] = {
	[HM_BACKEND_KMOD] = &hm_kmod_ops,
	[HM_BACKEND_UFFD_ASYNC] = &hm_uffd_async_ops,
	[HM_BACKEND_UFFD_SYNC] = &hm_uffd_sync_ops,
	[HM_BACKEND_MPROTECT] = &hm_mprotect_ops,
};

static const char *const hm_names[HM_BACKEND_COUNT] = {
	[HM_BACKEND_AUTO] = "auto",
	[HM_BACKEND_KMOD] = "kmod",
	[HM_BACKEND_UFFD_ASYNC] = "uffd-async",
	[HM_BACKEND_UFFD_SYNC] = "uffd-sync",
	[HM_BACKEND_MPROTECT] = "mprotect",
};

const char *hm_backend_name(enum hm_backend b)
{
	if ((unsigned)b >= HM_BACKEND_COUNT)
		return "unknown";
	return hm_names[b];
}

int hm_backend_from_name(const char *name, enum hm_backend *ret)
{
	if (!name || !ret)
		return -EINVAL;
	for (unsigned i = 0; i < HM_BACKEND_COUNT; i++) {
		if (!strcmp(name, hm_names[i])) {
			*ret = (enum hm_backend)i;
			return 0;
		}
	}
	return -EINVAL;
}

unsigned hm_backend_caps(enum hm_backend b)
{
	if ((unsigned)b >= HM_BACKEND_COUNT || !hm_ops[b])
		return 0;
	return hm_ops[b]->caps;
}

int hm_backend_probe(enum hm_backend b, const char **ret_reason)
{
	const char *r = NULL;
	int err;

	if ((unsigned)b >= HM_BACKEND_COUNT || b == HM_BACKEND_AUTO) {
		if (ret_reason)
			*ret_reason = "not a backend";
		return -EINVAL;
	}
	err = hm_ops[b]->probe(&r);
	if (ret_reason)
		*ret_reason = r ? r : "";
	return err;
}

/* ---- chunk state --------------------------------------------------------- */

static size_t hm_bitmap_bytes(uint64_t n)
{
	return ((n + 63) / 64) * 8;
}

static int hm_state_alloc(struct hm_space *s)
{
	size_t bm = hm_bitmap_bytes(s->nr_chunks);
	size_t arr = s->nr_chunks * sizeof(uint64_t);
	long pg = sysconf(_SC_PAGESIZE);
	size_t total = 4 * bm + 2 * arr;
	uint8_t *p;

	total = (total + pg - 1) & ~(size_t)(pg - 1);
	/* untouched pages cost nothing: the arrays are paged in as used */
	p = mmap(NULL, total, PROT_READ | PROT_WRITE,
		 MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	if (p == MAP_FAILED)
		return -ENOMEM;
	madvise(p, total, MADV_DONTFORK);
	s->state_bytes = total;
	s->armed = (uint64_t *)p;
	s->open = (uint64_t *)(p + bm);
	s->pend_bits = (uint64_t *)(p + 2 * bm);
	s->pend = (uint64_t *)(p + 3 * bm);
	s->gen = (uint64_t *)(p + 3 * bm + arr);
	s->gdirty = (uint64_t *)(p + 3 * bm + 2 * arr);
	s->pend_sorted = true;
	return 0;
}

static int hm_cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

/* ---- space life ---------------------------------------------------------- */

static struct hm_space *hm_space_alloc(void)
{
	struct hm_space *s = calloc(1, sizeof(*s));

	if (!s)
		return NULL;
	s->memfd = -1;
	s->notify_fd = -1;
	pthread_mutex_init(&s->mutex, NULL);
	atomic_flag_clear(&s->spinlock);
	return s;
}

static void hm_space_release(struct hm_space *s)
{
	hm_cons_release_all(s);
	if (s->ops && s->ops->destroy)
		s->ops->destroy(s);
	for (unsigned i = 0; i < HM_SPACE_MAX_MAPS; i++)
		if (s->maps[i].addr && !s->imported)
			munmap((void *)s->maps[i].addr, s->size);
	if (s->imported && s->cpu_addr)
		munmap(s->cpu_addr, s->size);
	if (s->device_view)
		munmap(s->device_view, s->size);
	if (s->memfd >= 0)
		close(s->memfd);
	if (s->notify_fd >= 0)
		close(s->notify_fd);
	if (s->armed)
		munmap(s->armed, s->state_bytes);
	pthread_mutex_destroy(&s->mutex);
	free(s);
}

static int hm_space_try(const struct hm_space_params *p, enum hm_backend b,
			uint64_t nr_chunks, unsigned shift, struct hm_space **ret)
{
	const struct hm_backend_ops *ops = hm_ops[b];
	struct hm_space *s = hm_space_alloc();
	int err;

	if (!s)
		return -ENOMEM;
	s->ops = ops;
	s->backend = b;
	s->size = p->size;
	s->chunk_shift = shift;
	s->nr_chunks = nr_chunks;
	s->flags = p->flags;
	s->caps = ops->caps;
	err = hm_state_alloc(s);
	if (err)
		goto fail;
	err = ops->create(s, p);
	if (err)
		goto fail;
	s->cpu_addr = (void *)s->maps[0].addr;
	s->nr_maps = 1;
	*ret = s;
	return 0;
fail:
	hm_space_release(s);
	return err;
}

int hm_space_new(const struct hm_space_params *p, struct hm_space **ret)
{
	static const enum hm_backend order[] = {
		HM_BACKEND_KMOD, HM_BACKEND_UFFD_ASYNC, HM_BACKEND_UFFD_SYNC, HM_BACKEND_MPROTECT,
	};
	long pg = sysconf(_SC_PAGESIZE);
	unsigned page_shift = (unsigned)__builtin_ctzl((unsigned long)pg);
	char why[320] = "";
	unsigned shift;
	uint64_t nr;
	int err = -EOPNOTSUPP;

	if (!ret)
		return -EINVAL;
	*ret = NULL;
	if (!p || (p->flags & ~HM_SPACE_FLAGS_ALL) || (unsigned)p->backend >= HM_BACKEND_COUNT)
		return -EINVAL;
	shift = p->chunk_shift ? p->chunk_shift : HM_CHUNK_SHIFT_DEFAULT;
	if (shift < page_shift || shift > HM_CHUNK_SHIFT_MAX)
		return -EINVAL;
	if (!p->size || (p->size & ((1ull << shift) - 1)))
		return -EINVAL;
	if (p->addr && ((uintptr_t)p->addr & (uintptr_t)(pg - 1)))
		return -EINVAL;
	nr = p->size >> shift;
	if (p->size > HM_SPACE_MAX_BYTES || nr > HM_SPACE_MAX_CHUNKS)
		return -E2BIG;

	if (p->backend != HM_BACKEND_AUTO) {
		const char *r = "";

		err = hm_ops[p->backend]->probe(&r);
		if (err)
			return err;
		err = hm_space_try(p, p->backend, nr, shift, ret);
		if (err)
			return err;
		hm_set_reason(*ret, "%s: requested by the caller; %s",
			      hm_backend_name(p->backend), r);
		return 0;
	}
	for (unsigned i = 0; i < sizeof(order) / sizeof(order[0]); i++) {
		const char *r = "";
		size_t len = strlen(why);

		err = hm_ops[order[i]]->probe(&r);
		if (!err)
			err = hm_space_try(p, order[i], nr, shift, ret);
		if (!err) {
			hm_set_reason(*ret, "%s: auto; %s%s%s", hm_backend_name(order[i]), r,
				      why[0] ? "; passed over: " : "", why);
			return 0;
		}
		/* a caller error (bad address...) is not a reason to fall back */
		if (err == -EEXIST || err == -E2BIG)
			return err;
		snprintf(why + len, sizeof(why) - len, "%s%s (%s)", len ? ", " : "",
			 hm_backend_name(order[i]), r && r[0] ? r : strerror(-err));
	}
	return err;
}

void hm_space_free(struct hm_space *s)
{
	if (s)
		hm_space_release(s);
}

void *hm_space_addr(const struct hm_space *s) { return s ? s->cpu_addr : NULL; }
uint64_t hm_space_size(const struct hm_space *s) { return s ? s->size : 0; }
unsigned hm_space_chunk_shift(const struct hm_space *s) { return s ? s->chunk_shift : 0; }
uint64_t hm_space_nr_chunks(const struct hm_space *s) { return s ? s->nr_chunks : 0; }
enum hm_backend hm_space_backend(const struct hm_space *s) { return s ? s->backend : HM_BACKEND_AUTO; }
const char *hm_space_backend_reason(const struct hm_space *s) { return s ? s->reason : ""; }
unsigned hm_space_caps(const struct hm_space *s) { return s ? s->caps : 0; }

int hm_space_protect(struct hm_space *s, void *addr, size_t len, int prot)
{
	uintptr_t a = (uintptr_t)addr;
	long pg = sysconf(_SC_PAGESIZE);
	uint64_t c, c2;
	int m, err;

	if (!s || !len || (a | len) & (uintptr_t)(pg - 1) || !(prot & PROT_READ) ||
	    (prot & ~(PROT_READ | PROT_WRITE)))
		return -EINVAL;
	hm_lock(s);
	m = hm_map_lookup(s, a, &c);
	if (m < 0 || hm_map_lookup(s, a + len - 1, &c2) != m) {
		hm_unlock(s);
		return -EINVAL;	/* one watched mapping, whole */
	}
	if (s->ops->app_protect)
		err = s->ops->app_protect(s, m, a, len, prot);
	else
		err = mprotect(addr, len, prot) < 0 ? -errno : 0;
	hm_unlock(s);
	return err;
}

int hm_space_stats(const struct hm_space *s, struct hm_space_stats *ret)
{
	if (!s || !ret)
		return -EINVAL;
	*ret = s->stats;
	return 0;
}

/* ---- aliases, device view ------------------------------------------------ */

int hm_space_map_alias(struct hm_space *s, void *hint, void **ret_addr)
{
	void *a = NULL;
	int slot = -1, err;

	if (!s || !ret_addr || s->imported)
		return -EINVAL;
	hm_lock(s);
	err = -EBUSY;
	if (s->exported)
		goto out;
	for (unsigned i = 1; i < HM_SPACE_MAX_MAPS; i++) {
		if (!s->maps[i].addr) {
			slot = (int)i;
			break;
		}
	}
	err = -ENOSPC;
	if (slot < 0)
		goto out;
	err = hm_memfd_map(s, hint, false, PROT_READ | PROT_WRITE, &a);
	if (err)
		goto out;
	err = s->ops->watch_map ? s->ops->watch_map(s, (uintptr_t)a) : 0;
	if (err) {
		munmap(a, s->size);
		goto out;
	}
	s->maps[slot].addr = (uintptr_t)a;
	s->nr_maps++;
	*ret_addr = a;
out:
	hm_unlock(s);
	return err;
}

int hm_space_unmap_alias(struct hm_space *s, void *addr)
{
	int err = -EINVAL;

	if (!s || !addr || s->imported)
		return -EINVAL;
	hm_lock(s);
	if (s->exported) {
		err = -EBUSY;
		goto out;
	}
	for (unsigned i = 1; i < HM_SPACE_MAX_MAPS; i++) {
		if (s->maps[i].addr == (uintptr_t)addr) {
			if (s->ops->unwatch_map)
				s->ops->unwatch_map(s, (uintptr_t)addr);
			s->maps[i].addr = 0;
			s->nr_maps--;
			munmap(addr, s->size);
			err = 0;
			break;
		}
	}
out:
	hm_unlock(s);
	return err;
}

int hm_space_device_view(struct hm_space *s, void **ret_addr)
{
	int err = 0;

	if (!s || !ret_addr)
		return -EINVAL;
	hm_lock(s);
	if (!s->device_view) {
		void *a = NULL;

		if (s->ops->device_view)
			err = s->ops->device_view(s, &a);
		else
			err = hm_memfd_map(s, NULL, false, PROT_READ | PROT_WRITE, &a);
		if (!err)
			s->device_view = a;
	}
	if (!err)
		*ret_addr = s->device_view;
	hm_unlock(s);
	return err;
}

/* ---- arm, harvest, generations ------------------------------------------ */

static int hm_check_range(const struct hm_space *s, uint64_t first, uint64_t count)
{
	if (!count)
		return -EINVAL;
	if (first >= s->nr_chunks || count > s->nr_chunks - first)
		return -ERANGE;
	return 0;
}

int hm_space_arm(struct hm_space *s, uint64_t first, uint64_t count)
{
	int err;

	if (!s)
		return -EINVAL;
	err = hm_check_range(s, first, count);
	if (err)
		return err;
	hm_lock(s);
	if (s->exported)
		err = -EBUSY;
	else if (s->cons[0])	/* the built-in consumer watches it */
		err = hm_cons_watch_locked(s->cons[0], first, count);
	else
		err = hm_arm_locked(s, first, count);
	hm_unlock(s);
	return err;
}

int hm_space_arm_chunks(struct hm_space *s, const uint64_t *chunks, size_t n)
{
	int err = 0;

	if (!s || (n && !chunks))
		return -EINVAL;
	for (size_t i = 0; i < n; i++)
		if (chunks[i] >= s->nr_chunks)
			return -ERANGE;
	if (!n)
		return 0;
	hm_lock(s);
	if (s->exported) {
		err = -EBUSY;
	} else if (s->cons[0]) {
		err = hm_cons_watch_chunks_locked(s->cons[0], chunks, n);
	} else if (s->ops->arm_chunks) {
		err = s->ops->arm_chunks(s, chunks, n);
		for (size_t i = 0; !err && i < n; i++)
			hm_set_bit(s->armed, chunks[i]);
	} else {
		for (size_t i = 0, j; !err && i < n; i = j) {
			for (j = i + 1; j < n && chunks[j] == chunks[j - 1] + 1; j++)
				;
			err = hm_arm_locked(s, chunks[i], chunks[j - 1] - chunks[i] + 1);
		}
	}
	hm_unlock(s);
	return err;
}

static void hm_notify_drain(struct hm_space *s)
{
	uint64_t v;

	if (s->notify_fd < 0)
		return;
	while (read(s->notify_fd, &v, sizeof(v)) == sizeof(v))
		;
	if (s->nr_pend) {
		v = 1;
		if (write(s->notify_fd, &v, sizeof(v)) < 0)
			return;
	}
}

/* The pending list sorted; how many of it a harvest of cap hands out. */
static size_t pend_sorted_count(struct hm_space *s, size_t cap)
{
	if (!s->pend_sorted) {
		qsort(s->pend, s->nr_pend, sizeof(uint64_t), hm_cmp_u64);
		s->pend_sorted = true;
	}
	return s->nr_pend < cap ? s->nr_pend : cap;
}

/* Hand the first n pending chunks out and forget them (unarm: they are
 * also no longer armed, as a take leaves them). */
static void pend_hand_out(struct hm_space *s, uint64_t *ret_chunks, size_t n, bool unarm,
			  size_t *ret_n, bool *ret_more)
{
	if (n)
		memcpy(ret_chunks, s->pend, n * sizeof(uint64_t));
	for (size_t i = 0; i < n; i++) {
		hm_clear_bit(s->pend_bits, s->pend[i]);
		if (unarm) {
			hm_clear_bit(s->armed, s->pend[i]);
			hm_clear_bit(s->open, s->pend[i]);
		}
	}
	memmove(s->pend, s->pend + n, (s->nr_pend - n) * sizeof(uint64_t));
	s->nr_pend -= n;
	*ret_n = n;
	if (ret_more)
		*ret_more = s->nr_pend != 0;
	s->stats.harvests++;
	s->stats.chunks_reported += n;
	hm_notify_drain(s);
}

int hm_space_harvest(struct hm_space *s, uint64_t *ret_chunks, size_t cap,
		     size_t *ret_n, bool *ret_more)
{
	size_t n;
	int err;

	if (!s || !ret_n || (cap && !ret_chunks))
		return -EINVAL;
	*ret_n = 0;
	if (ret_more)
		*ret_more = false;
	hm_lock(s);
	if (s->exported) {
		err = -EBUSY;
		goto out;
	}
	if (s->cons[0]) {
		err = hm_cons_harvest_locked(s->cons[0], 0, ret_chunks, cap, ret_n, ret_more);
		goto out;
	}
	if (s->ops->harvest) {
		err = s->ops->harvest(s, ret_chunks, cap, ret_n, ret_more);
		if (!err) {
			s->stats.harvests++;
			s->stats.chunks_reported += *ret_n;
		}
		goto out;
	}
	if (s->ops->collect_direct) {
		err = s->ops->collect_direct(s, ret_chunks, cap, &n);
		if (!err) {
			*ret_n = n;
			if (ret_more)
				*ret_more = s->nr_pend != 0;
			s->stats.harvests++;
			s->stats.chunks_reported += n;
			goto out;
		}
		if (err != -EAGAIN)
			goto out;
	}
	if (s->ops->collect) {
		err = s->ops->collect(s);
		if (err)
			goto out;
	}
	n = pend_sorted_count(s, cap);
	if (n && s->ops->rearm) {
		err = s->ops->rearm(s, s->pend, n);
		if (err)
			goto out;	/* all of them stay recorded */
	}
	pend_hand_out(s, ret_chunks, n, false, ret_n, ret_more);
	err = 0;
out:
	hm_unlock(s);
	return err;
}

int hm_space_harvest_take(struct hm_space *s, uint64_t *ret_chunks, size_t cap,
			  size_t *ret_n, bool *ret_more)
{
	size_t n;
	int err;

	if (!s || !ret_n || (cap && !ret_chunks))
		return -EINVAL;
	*ret_n = 0;
	if (ret_more)
		*ret_more = false;
	if (!(s->caps & HM_CAP_HARVEST_TAKE))
		return -EOPNOTSUPP;
	hm_lock(s);
	if (s->exported) {
		err = -EBUSY;
		goto out;
	}
	if (s->cons[0]) {
		err = hm_cons_harvest_locked(s->cons[0], HM_HARVEST_UNWATCH, ret_chunks, cap,
					     ret_n, ret_more);
		goto out;
	}
	if (s->ops->take) {
		err = s->ops->take(s, ret_chunks, cap, ret_n, ret_more);
		if (!err) {
			s->stats.harvests++;
			s->stats.chunks_reported += *ret_n;
			/* unarmed now, as the common path leaves them */
			for (size_t i = 0; i < *ret_n; i++)
				hm_clear_bit(s->armed, ret_chunks[i]);
		}
		goto out;
	}
	/* trip handlers record directly (uffd-sync, mprotect): hand pending
	   out; the chunks stay writable as their trip left them, unarmed */
	if (s->ops->collect) {
		err = s->ops->collect(s);
		if (err)
			goto out;
	}
	n = pend_sorted_count(s, cap);
	pend_hand_out(s, ret_chunks, n, true, ret_n, ret_more);
	err = 0;
out:
	hm_unlock(s);
	return err;
}

int hm_space_generations(struct hm_space *s, const uint64_t *chunks, size_t n,
			 uint64_t *ret_gens)
{
	int err = 0;

	if (!s || (n && (!chunks || !ret_gens)))
		return -EINVAL;
	for (size_t i = 0; i < n; i++)
		if (chunks[i] >= s->nr_chunks)
			return -ERANGE;
	hm_lock(s);
	if (s->exported) {
		err = -EBUSY;
		goto out;
	}
	if (s->ops->generations) {
		err = s->ops->generations(s, chunks, n, ret_gens);
		goto out;
	}
	for (size_t i = 0; i < n;) {
		size_t j = i + 1;

		/* one scan for a run of consecutive chunks */
		while (j < n && chunks[j] == chunks[j - 1] + 1)
			j++;
		for (size_t k = i; k < j;) {
			size_t e = k;

			if (!hm_test_bit(s->armed, chunks[k])) {
				k++;
				continue;
			}
			while (e < j && hm_test_bit(s->armed, chunks[e]))
				e++;
			err = s->ops->refresh(s, chunks[k], e - k);
			if (err)
				goto out;
			k = e;
		}
		for (size_t k = i; k < j; k++) {
			uint64_t c = chunks[k];

			if (hm_test_bit(s->gdirty, c)) {
				hm_clear_bit(s->gdirty, c);
				s->gen[c] += 2;
			}
			ret_gens[k] = s->gen[c] | !hm_test_bit(s->armed, c);
		}
		i = j;
	}
out:
	hm_unlock(s);
	return err;
}

/* the n bits (1 to 64) of b from bit i on, bit i lowest; reads no word
   past bit i + n - 1 */
static uint64_t hm_bits_n(const uint64_t *b, uint64_t i, unsigned n)
{
	unsigned sh = i & 63;
	uint64_t x = b[i >> 6] >> sh;

	if (sh && sh + n > 64)
		x |= b[(i >> 6) + 1] << (64 - sh);
	return n == 64 ? x : x & ((1ull << n) - 1);
}

/* [*c, *e) cut to its armed part, from its first armed chunk to its last
   (empty: *c == *e) */
static void hm_armed_trim(const struct hm_space *s, uint64_t *c, uint64_t *e)
{
	while (*c < *e && !hm_test_bit(s->armed, *c))
		(*c)++;
	while (*e > *c && !hm_test_bit(s->armed, *e - 1))
		(*e)--;
}

/* the scans that [first, first+count)'s generations need (lock held): a
   refresh, or, with seen, a peek into bits (c - base) of seen.  One
   refresh or peek (uffd-async: one PAGEMAP_SCAN) a run of armed chunks,
   or where the backend scans across unarmed ones (HM_CAP_RANGE_SCAN), one
   from the first armed chunk to the last: a caller that asks for a long,
   sparsely armed range (the engine's check over a whole space) pays one
   scan, not one a run */
static int hm_gens_scan(struct hm_space *s, uint64_t first, uint64_t count, uint64_t *seen,
			uint64_t base)
{
	uint64_t end = first + count;

	for (uint64_t c = first; c < end;) {
		uint64_t e = c + 1;
		int err;

		if (!hm_test_bit(s->armed, c)) {
			c++;
			continue;
		}
		if (s->caps & HM_CAP_RANGE_SCAN) {
			e = end;
			while (e > c + 1 && !hm_test_bit(s->armed, e - 1))
				e--;
		} else {
			while (e < end && hm_test_bit(s->armed, e))
				e++;
		}
		err = seen ? s->ops->peek(s, c, e - c, seen, base) : s->ops->refresh(s, c, e - c);
		if (err)
			return err;
		c = e;
	}
	return 0;
}

/* the generations of [first, first+count) into ret_gens once its scans are
   done (lock held); seen: what a peek found, bits (c - base) */
static void hm_gens_fill(struct hm_space *s, uint64_t first, uint64_t count,
			 const uint64_t *seen, uint64_t base, uint64_t *ret_gens)
{
	uint64_t end = first + count;

	for (uint64_t c = first; c < end;) {
		uint64_t w = c >> 6, stop = (w + 1) * 64 < end ? (w + 1) * 64 : end;
		unsigned n = (unsigned)(stop - c);
		uint64_t m = (n == 64 ? ~0ull : (1ull << n) - 1) << (c & 63);

		/* the chunks of one word, all armed, none recorded (nor seen
		   written): their generations as they are (a 64 KiB chunk's
		   page units are a quarter word) */
		if (!(s->gdirty[w] & m) && (s->armed[w] & m) == m &&
		    (!seen || !hm_bits_n(seen, c - base, n))) {
			memcpy(ret_gens + (c - first), s->gen + c, n * sizeof(*ret_gens));
			c = stop;
			continue;
		}
		for (; c < stop; c++) {
			if (hm_test_bit(s->gdirty, c)) {
				hm_clear_bit(s->gdirty, c);
				s->gen[c] += 2;
			}
			ret_gens[c - first] = s->gen[c] | !hm_test_bit(s->armed, c);
			/* seen written: what the refresh that records it will
			   make the generation, not stored, as the write is not
			   taken */
			if (seen && hm_test_bit(seen, c - base))
				ret_gens[c - first] += 2;
		}
	}
}

/* what a generations call with flags does (lock held): scan and refresh
   (HM_GEN_SCAN_TAKE), scan and only look (HM_GEN_SCAN_PEEK: the backend
   peeks), or answer from what the space knows (HM_GEN_SCAN_NONE) */
enum { HM_GEN_SCAN_NONE, HM_GEN_SCAN_TAKE, HM_GEN_SCAN_PEEK };

static int hm_gens_how(const struct hm_space *s, unsigned flags)
{
	if ((flags & HM_GEN_PEEK) && s->ops->peek)
		return HM_GEN_SCAN_PEEK;
	/* HM_CAP_GEN_DEFER: HM_GEN_DEFER may skip the refresh, as every write
	   since the last one stays visible to the next (uffd-async: the page
	   stays written in the page table until a scan reports it) */
	if ((flags & HM_GEN_DEFER) && (s->caps & HM_CAP_GEN_DEFER))
		return HM_GEN_SCAN_NONE;
	return HM_GEN_SCAN_TAKE;
}

static int hm_gens_flags_ok(unsigned flags)
{
	return !(flags & ~(HM_GEN_DEFER | HM_GEN_PEEK)) &&
	       !(flags & HM_GEN_DEFER && flags & HM_GEN_PEEK);
}

/* one range's generations (lock held) */
static int hm_gens_range_locked(struct hm_space *s, uint64_t first, uint64_t count,
				unsigned flags, uint64_t *ret_gens)
{
	int how = hm_gens_how(s, flags), err = 0;
	uint64_t *seen = NULL;

	if (s->ops->generations_range)
		return s->ops->generations_range(s, first, count, ret_gens);
	/* a peek: which armed chunks the kernel saw written, left as they are */
	if (how == HM_GEN_SCAN_PEEK) {
		seen = calloc((count + 63) / 64, sizeof(*seen));
		if (!seen)
			return -ENOMEM;
	}
	if (how != HM_GEN_SCAN_NONE)
		err = hm_gens_scan(s, first, count, seen, first);
	if (!err)
		hm_gens_fill(s, first, count, seen, first, ret_gens);
	free(seen);
	return err;
}

int hm_space_generations_range(struct hm_space *s, uint64_t first, uint64_t count,
			       unsigned flags, uint64_t *ret_gens)
{
	int err;

	if (!s || !ret_gens || !hm_gens_flags_ok(flags))
		return -EINVAL;
	err = hm_check_range(s, first, count);
	if (err)
		return err;
	hm_lock(s);
	err = s->exported ? -EBUSY : hm_gens_range_locked(s, first, count, flags, ret_gens);
	hm_unlock(s);
	return err;
}

/*
 * Many ranges' generations in one call, under one lock: each span is
 * hm_space_generations_range().  With HMIRROR_GEN_COVER=1, where the
 * backend scans across unarmed chunks (HM_CAP_RANGE_SCAN: uffd-async), the
 * spans' cover is instead scanned once, from the first armed chunk of any
 * to the last, when its pages cost less than a call a span (a call counted
 * as HM_SPAN_CALL_PAGES pages), and the spans' generations are filled
 * after.  Writes it finds outside the spans are kept for the next harvest
 * (a refresh records them, a peek only looks), as a span's own unarmed
 * gaps are.  Alone it is much the cheaper (8,000 spans of 16 pages in 1.5
 * GiB: 10.0-14.1 ms a call a span, 0.8-3.2 ms in one scan, on a lent H100
 * host), but beside the workload's walk the boundary's checks took 3.26
 * ms a dispatch with it against 2.23 without (Documentation/decisions.rst),
 * so it is not the default.
 */
#define HM_SPAN_CALL_PAGES	256

static bool gen_cover(void)
{
	static int v = -1;

	return hm_env_knob("HMIRROR_GEN_COVER", 0, 1, &v);
}

/*
 * Or, with HMIRROR_SPAN_THREADS=1 where the backend scans spans on several
 * CPUs (scan_spans: uffd-async, its scan threads), every span's scan is
 * made first, spread over the threads, and the generations filled after
 * (the spans' chunks are their own: a scan of one span changes no other
 * span's generations).  Each span's peek bits start at a word of their
 * own.  From HM_SPANS_PAR_MIN spans.
 */
#define HM_SPANS_PAR_MIN	32

static bool span_threads(void)
{
	static int v = -1;

	return hm_env_knob("HMIRROR_SPAN_THREADS", 0, 1, &v);
}

/* the spans' scans on the backend's threads, then their generations
   (lock held); -EAGAIN: the backend did not, nothing scanned */
static int hm_gens_spans_par(struct hm_space *s, const struct hm_gen_span *spans, size_t n,
			     bool peek)
{
	struct hm_scan_span *scan = malloc(n * sizeof(*scan));
	uint64_t *seen = NULL, words = 0;
	size_t nscan = 0;
	int err;

	if (!scan)
		return -ENOMEM;
	/* each span's scan from its first armed chunk to its last (the
	   backend scans across unarmed ones), its peek bits at words of
	   their own from words * 64 on */
	for (size_t i = 0; i < n; i++) {
		uint64_t c = spans[i].first, e = c + spans[i].count;

		hm_armed_trim(s, &c, &e);
		if (c < e)
			scan[nscan++] = (struct hm_scan_span){
				.first = c, .count = e - c, .base = spans[i].first - words * 64,
			};
		words += (spans[i].count + 63) / 64;
	}
	err = peek && !(seen = calloc(words ? words : 1, sizeof(*seen))) ? -ENOMEM : 0;
	if (!err && nscan)
		err = s->ops->scan_spans(s, scan, nscan, seen);
	words = 0;
	for (size_t i = 0; i < n && !err; i++) {
		hm_gens_fill(s, spans[i].first, spans[i].count, seen,
			     spans[i].first - words * 64, spans[i].gens);
		words += (spans[i].count + 63) / 64;
	}
	free(scan);
	free(seen);
	return err;
}

int hm_space_generations_spans(struct hm_space *s, const struct hm_gen_span *spans, size_t n,
			       unsigned flags)
{
	uint64_t *seen = NULL, lo = UINT64_MAX, hi = 0, alo = UINT64_MAX, ahi = 0, calls = 0;
	int err = 0, how;

	if (!s || (n && !spans) || !hm_gens_flags_ok(flags))
		return -EINVAL;
	for (size_t i = 0; i < n; i++) {
		if (!spans[i].gens)
			return -EINVAL;
		err = hm_check_range(s, spans[i].first, spans[i].count);
		if (err)
			return err;
	}
	hm_lock(s);
	if (s->exported) {
		err = -EBUSY;
		goto out;
	}
	how = hm_gens_how(s, flags);
	if (how == HM_GEN_SCAN_NONE || s->ops->generations_range ||
	    !(s->caps & HM_CAP_RANGE_SCAN) || n < 2)
		goto one_by_one;
	/* the cover, and its armed part: what one scan of it would walk */
	for (size_t i = 0; i < n; i++) {
		uint64_t c = spans[i].first, e = c + spans[i].count;

		lo = c < lo ? c : lo;
		hi = e > hi ? e : hi;
		hm_armed_trim(s, &c, &e);
		if (c == e)
			continue;
		calls++;
		alo = c < alo ? c : alo;
		ahi = e > ahi ? e : ahi;
	}
	if (calls && gen_cover() &&
	    calls * HM_SPAN_CALL_PAGES > ((ahi - alo) << s->chunk_shift) / 4096) {
		if (how == HM_GEN_SCAN_PEEK &&
		    !(seen = calloc((hi - lo + 63) / 64, sizeof(*seen)))) {
			err = -ENOMEM;
			goto out;
		}
		err = hm_gens_scan(s, alo, ahi - alo, seen, lo);
		if (err)
			goto out;
		for (size_t i = 0; i < n; i++)
			hm_gens_fill(s, spans[i].first, spans[i].count, seen, lo, spans[i].gens);
		goto out;
	}
	if (span_threads() && s->ops->scan_spans && n >= HM_SPANS_PAR_MIN) {
		err = hm_gens_spans_par(s, spans, n, how == HM_GEN_SCAN_PEEK);
		if (err != -EAGAIN)
			goto out;
		err = 0;
	}
one_by_one:
	for (size_t i = 0; i < n && !err; i++)
		err = hm_gens_range_locked(s, spans[i].first, spans[i].count, flags,
					   spans[i].gens);
out:
	hm_unlock(s);
	free(seen);
	return err;
}

int hm_space_generation(struct hm_space *s, uint64_t chunk, uint64_t *ret_gen)
{
	return hm_space_generations(s, &chunk, 1, ret_gen);
}

int hm_space_poll_fd(struct hm_space *s)
{
	if (!s)
		return -EINVAL;
	if (s->exported)
		return -EBUSY;
	if (s->ops->poll_fd)
		return s->ops->poll_fd(s);
	if (s->notify_fd >= 0)
		return s->notify_fd;
	return -EOPNOTSUPP;
}

/* ---- handoff ------------------------------------------------------------- */

int hm_space_export(struct hm_space *s, struct hm_space_handoff *ret)
{
	struct hm_blob b;
	bool again = false;
	int err;

	if (!s || !ret)
		return -EINVAL;
	memset(ret, 0, sizeof(*ret));
	for (unsigned i = 0; i < 4; i++)
		ret->fds[i] = -1;
	if (!s->ops->export)
		return -EOPNOTSUPP;
	if (s->imported)
		return -EINVAL;
	hm_lock(s);
	/* a second export hands the same watch to a new importer (a restarted
	 * daemon): the kernel keeps what was written since, the userspace
	 * backends had nothing pending when the first export was taken */
	err = -EBUSY;
	/* consumers' cursors live in this process: they do not travel */
	if ((!s->exported && s->nr_pend) || s->cons[0])
		goto out;
	memset(&b, 0, sizeof(b));
	b.magic = HM_HANDOFF_MAGIC;
	b.backend = (uint8_t)s->backend;
	b.chunk_shift = (uint8_t)s->chunk_shift;
	b.size = s->size;
	for (unsigned i = 0; i < HM_SPACE_MAX_MAPS; i++)
		if (s->maps[i].addr)
			b.maps[b.nr_maps++] = s->maps[i].addr;
	err = s->ops->export(s, ret);
	if (err) {
		hm_handoff_close(ret);
		goto out;
	}
	memcpy(ret->blob, &b, sizeof(b));
	ret->blob_len = sizeof(b);
	again = s->exported;
	s->exported = true;
out:
	hm_unlock(s);
	if (!err && !again && s->ops->exported)
		s->ops->exported(s);
	return err;
}

int hm_space_import(const struct hm_space_handoff *h, struct hm_space **ret)
{
	const struct hm_backend_ops *ops;
	struct hm_space *s;
	struct hm_blob b;
	long pg = sysconf(_SC_PAGESIZE);
	int err;

	if (!ret)
		return -EINVAL;
	*ret = NULL;
	if (!h || h->blob_len != sizeof(b) || h->nr_fds > 4)
		return -EINVAL;
	memcpy(&b, h->blob, sizeof(b));
	if (b.magic != HM_HANDOFF_MAGIC || b.backend == HM_BACKEND_AUTO ||
	    b.backend >= HM_BACKEND_COUNT || b.nr_maps == 0 || b.nr_maps > HM_SPACE_MAX_MAPS ||
	    b.chunk_shift < __builtin_ctzl((unsigned long)pg) || b.chunk_shift > HM_CHUNK_SHIFT_MAX ||
	    !b.size || (b.size & ((1ull << b.chunk_shift) - 1)) || b.size > HM_SPACE_MAX_BYTES ||
	    (b.size >> b.chunk_shift) > HM_SPACE_MAX_CHUNKS)
		return -EINVAL;
	ops = hm_ops[b.backend];
	if (!ops->import)
		return -EOPNOTSUPP;
	s = hm_space_alloc();
	if (!s)
		return -ENOMEM;
	s->ops = ops;
	s->backend = (enum hm_backend)b.backend;
	s->size = b.size;
	s->chunk_shift = b.chunk_shift;
	s->nr_chunks = b.size >> b.chunk_shift;
	s->caps = ops->caps;
	s->imported = true;
	for (unsigned i = 0; i < b.nr_maps; i++)
		s->maps[i].addr = (uintptr_t)b.maps[i];
	s->nr_maps = b.nr_maps;
	err = hm_state_alloc(s);
	if (err)
		goto fail;
	err = ops->import(s, h);
	if (err)
		goto fail;
	hm_set_reason(s, "%s: imported from another process", hm_backend_name(s->backend));
	*ret = s;
	return 0;
fail:
	hm_space_release(s);
	return err;
}

struct hm_handoff_wire {
	uint32_t nr_fds;
	uint32_t blob_len;
	uint8_t blob[64];
};

int hm_handoff_send(int sock, const struct hm_space_handoff *h)
{
	struct hm_handoff_wire w;
	union {
		char buf[CMSG_SPACE(4 * sizeof(int))];
		struct cmsghdr align;
	} u;
	struct iovec iov = { .iov_base = &w, .iov_len = sizeof(w) };
	struct msghdr msg = { .msg_iov = &iov, .msg_iovlen = 1 };
	struct cmsghdr *cm;
	ssize_t r;

	if (!h || h->nr_fds > 4 || h->blob_len > sizeof(w.blob))
		return -EINVAL;
	memset(&w, 0, sizeof(w));
	w.nr_fds = h->nr_fds;
	w.blob_len = h->blob_len;
	memcpy(w.blob, h->blob, h->blob_len);
	if (h->nr_fds) {
		memset(&u, 0, sizeof(u));
		msg.msg_control = u.buf;
		msg.msg_controllen = CMSG_SPACE(h->nr_fds * sizeof(int));
		cm = CMSG_FIRSTHDR(&msg);
		cm->cmsg_level = SOL_SOCKET;
		cm->cmsg_type = SCM_RIGHTS;
		cm->cmsg_len = CMSG_LEN(h->nr_fds * sizeof(int));
		memcpy(CMSG_DATA(cm), h->fds, h->nr_fds * sizeof(int));
	}
	do
		r = sendmsg(sock, &msg, MSG_NOSIGNAL);
	while (r < 0 && errno == EINTR);
	if (r < 0)
		return -errno;
	return r == sizeof(w) ? 0 : -EIO;
}

int hm_handoff_recv(int sock, struct hm_space_handoff *ret)
{
	struct hm_handoff_wire w;
	union {
		char buf[CMSG_SPACE(4 * sizeof(int))];
		struct cmsghdr align;
	} u;
	struct iovec iov = { .iov_base = &w, .iov_len = sizeof(w) };
	struct msghdr msg = { .msg_iov = &iov, .msg_iovlen = 1,
			      .msg_control = u.buf, .msg_controllen = sizeof(u.buf) };
	struct cmsghdr *cm;
	unsigned got = 0;
	ssize_t r;

	if (!ret)
		return -EINVAL;
	memset(ret, 0, sizeof(*ret));
	for (unsigned i = 0; i < 4; i++)
		ret->fds[i] = -1;
	do
		r = recvmsg(sock, &msg, MSG_CMSG_CLOEXEC);
	while (r < 0 && errno == EINTR);
	if (r < 0)
		return -errno;
	for (cm = CMSG_FIRSTHDR(&msg); cm; cm = CMSG_NXTHDR(&msg, cm)) {
		if (cm->cmsg_level == SOL_SOCKET && cm->cmsg_type == SCM_RIGHTS) {
			unsigned n = (unsigned)((cm->cmsg_len - CMSG_LEN(0)) / sizeof(int));

			for (unsigned i = 0; i < n; i++) {
				int fd;

				memcpy(&fd, CMSG_DATA(cm) + i * sizeof(int), sizeof(int));
				if (got < 4)
					ret->fds[got++] = fd;
				else
					close(fd);
			}
		}
	}
	ret->nr_fds = got;
	if (r != sizeof(w) || (msg.msg_flags & MSG_CTRUNC) || w.nr_fds != got ||
	    w.blob_len > sizeof(w.blob)) {
		hm_handoff_close(ret);
		return -EPROTO;
	}
	ret->blob_len = w.blob_len;
	memcpy(ret->blob, w.blob, w.blob_len);
	return 0;
}

void hm_handoff_close(struct hm_space_handoff *h)
{
	if (!h)
		return;
	for (unsigned i = 0; i < h->nr_fds && i < 4; i++) {
		if (h->fds[i] >= 0)
			close(h->fds[i]);
		h->fds[i] = -1;
	}
	h->nr_fds = 0;
}
