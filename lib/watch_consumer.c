// SPDX-License-Identifier: LGPL-2.1-or-later
/*
 * libhmirror watch: consumers of a space's writes (watch.h "Consumers",
 * Documentation/watch.rst).
 *
 * The backend keeps one record a space, as it always did: the kernel's
 * written set (kmod), the page tables' write-protect bits (uffd-async), or
 * the space's pending list that trip handlers fill (uffd-sync, mprotect).
 * A harvest by any consumer collects that record once, makes the chunks
 * someone still watches trip again, and fans each chunk out to the pending
 * set of every consumer watching it; then it hands out its own pending
 * set.  So each consumer sees every write to what it watches, whoever
 * harvested first, and the cost of a harvest is one collect of what was
 * written plus this consumer's pending chunks.
 *
 * The space's armed bitmap is the union of the watch sets (cons[0], the
 * built-in consumer of hm_space_arm/harvest, included): a chunk nobody
 * watches any more is disarmed at once (ops->disarm) and marked unwp, so
 * that a uffd-async scan never write-protects it again.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/mman.h>

#include "watch_internal.h"

#define HM_CONS_BATCH 512

static size_t bm_bytes(uint64_t n)
{
	return ((n + 63) / 64) * 8;
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

/* a consumer's state; extra_bm more bitmaps after it (the built-in one
   carries the space's unwp) */
static struct hm_consumer *cons_alloc(struct hm_space *s, unsigned extra_bm)
{
	struct hm_consumer *k = calloc(1, sizeof(*k));
	size_t bm = bm_bytes(s->nr_chunks);
	long pg = sysconf(_SC_PAGESIZE);
	size_t total = (2 + extra_bm) * bm + s->nr_chunks * sizeof(uint64_t);
	uint8_t *p;

	if (!k)
		return NULL;
	total = (total + pg - 1) & ~(size_t)(pg - 1);
	/* untouched pages cost nothing: the array is paged in as used */
	p = mmap(NULL, total, PROT_READ | PROT_WRITE,
		 MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	if (p == MAP_FAILED) {
		free(k);
		return NULL;
	}
	madvise(p, total, MADV_DONTFORK);
	k->s = s;
	k->bytes = total;
	k->watch = (uint64_t *)p;
	k->pend_bits = (uint64_t *)(p + bm);
	k->pend = (uint64_t *)(p + (2 + extra_bm) * bm);
	k->pend_sorted = true;
	return k;
}

static void cons_free_mem(struct hm_consumer *k)
{
	if (!k)
		return;
	munmap(k->watch, k->bytes);
	free(k);
}

/* the space goes: its consumers' state goes with it, and a consumer the
   caller still holds is left detached (every call -ENODEV but the free) */
void hm_cons_release_all(struct hm_space *s)
{
	for (unsigned i = 0; i <= HM_CONSUMER_MAX; i++) {
		struct hm_consumer *k = s->cons[i];

		s->cons[i] = NULL;
		if (!k)
			continue;
		if (i == 0) {
			cons_free_mem(k);
			continue;
		}
		munmap(k->watch, k->bytes);
		k->watch = k->pend_bits = k->pend = NULL;
		k->s = NULL;
	}
	s->unwp = NULL;
	s->unarmed = NULL;
	s->nr_unarmed = 0;
	s->nr_cons = 0;
}

static void cons_pend_add(struct hm_consumer *k, uint64_t c)
{
	if (hm_test_bit(k->pend_bits, c))
		return;
	hm_set_bit(k->pend_bits, c);
	if (k->nr_pend && k->pend[k->nr_pend - 1] > c)
		k->pend_sorted = false;
	k->pend[k->nr_pend++] = c;
}

static bool anyone_watches(const struct hm_space *s, uint64_t c)
{
	for (unsigned i = 0; i <= HM_CONSUMER_MAX; i++)
		if (s->cons[i] && hm_test_bit(s->cons[i]->watch, c))
			return true;
	return false;
}

/* disarm the chunks of [first, first+count) that are armed and watched by
   nobody, one backend call a run (lock held) */
static int disarm_unwatched(struct hm_space *s, uint64_t first, uint64_t count)
{
	uint64_t end = first + count;

	for (uint64_t c = first; c < end;) {
		uint64_t e;
		int err;

		if (!hm_test_bit(s->armed, c) || anyone_watches(s, c)) {
			c++;
			continue;
		}
		for (e = c + 1; e < end && hm_test_bit(s->armed, e) && !anyone_watches(s, e); e++)
			;
		err = s->ops->disarm ? s->ops->disarm(s, c, e - c) : -EOPNOTSUPP;
		if (err == -EOPNOTSUPP) {	/* stays armed; its records are dropped */
			c = e;
			continue;
		}
		if (err)
			return err;
		for (uint64_t i = c; i < e; i++) {
			hm_clear_bit(s->armed, i);
			hm_clear_bit(s->open, i);
			hm_set_bit(s->unwp, i);
		}
		c = e;
	}
	return 0;
}

static void cons_set_watch(struct hm_consumer *k, uint64_t c)
{
	if (!hm_test_bit(k->watch, c)) {
		hm_set_bit(k->watch, c);
		k->nr_watched++;
	}
	hm_clear_bit(k->s->unwp, c);
}

static void cons_clear_watch(struct hm_consumer *k, uint64_t c)
{
	if (hm_test_bit(k->watch, c)) {
		hm_clear_bit(k->watch, c);
		k->nr_watched--;
	}
}

/* watch a checked range: the backend arms it as hm_space_arm() does (lock
   held) */
int hm_cons_watch_locked(struct hm_consumer *k, uint64_t first, uint64_t count)
{
	int err = hm_arm_locked(k->s, first, count);

	if (err)
		return err;
	for (uint64_t c = first; c < first + count; c++)
		cons_set_watch(k, c);
	return 0;
}

/* watch checked chunks (any order), as hm_space_arm_chunks() (lock held) */
int hm_cons_watch_chunks_locked(struct hm_consumer *k, const uint64_t *chunks, size_t n)
{
	struct hm_space *s = k->s;
	int err = 0;

	if (s->ops->arm_chunks) {
		err = s->ops->arm_chunks(s, chunks, n);
		for (size_t i = 0; !err && i < n; i++) {
			hm_set_bit(s->armed, chunks[i]);
			cons_set_watch(k, chunks[i]);
		}
		return err;
	}
	for (size_t i = 0, j; !err && i < n; i = j) {
		for (j = i + 1; j < n && chunks[j] == chunks[j - 1] + 1; j++)
			;
		err = hm_cons_watch_locked(k, chunks[i], chunks[j - 1] - chunks[i] + 1);
	}
	return err;
}

static int cons_unwatch_locked(struct hm_consumer *k, uint64_t first, uint64_t count)
{
	for (uint64_t c = first; c < first + count; c++)
		cons_clear_watch(k, c);
	return disarm_unwatched(k->s, first, count);
}

/* the ascending chunks[0..n): unwatch, and disarm runs nobody watches */
static int cons_unwatch_list(struct hm_consumer *k, const uint64_t *chunks, size_t n)
{
	int err = 0;

	for (size_t i = 0, j; !err && i < n; i = j) {
		for (j = i + 1; j < n && chunks[j] == chunks[j - 1] + 1; j++)
			;
		err = cons_unwatch_locked(k, chunks[i], chunks[j - 1] - chunks[i] + 1);
	}
	return err;
}

/* ---- collect and fan out ------------------------------------------------- */

static void space_pend_add(struct hm_space *s, uint64_t c)
{
	if (hm_test_bit(s->pend_bits, c))
		return;
	hm_set_bit(s->pend_bits, c);
	if (s->nr_pend && s->pend[s->nr_pend - 1] > c)
		s->pend_sorted = false;
	s->pend[s->nr_pend++] = c;
}

/*
 * kmod: the module's record.  Take it without re-arming where the module
 * can, then re-arm what someone watches (a write between the two is
 * covered by this report: the harvest has not returned yet); else harvest
 * (re-arms all) and disarm what nobody watches.
 */
/*
 * Watched chunks the take left writable and whose re-arm failed (EINTR,
 * ENOMEM): a write to them is recorded nowhere, so each is reported
 * written at every harvest until a re-arm succeeds, that harvest included
 * (a write before it was not recorded either).  Over-reporting is safe;
 * a lost write is not.
 */
static void unarmed_retry(struct hm_space *s)
{
	uint64_t buf[HM_CONS_BATCH];

	for (uint64_t c = 0; s->nr_unarmed && c < s->nr_chunks; c++) {
		size_t m = 0;

		for (; c < s->nr_chunks && m < HM_CONS_BATCH; c++) {
			if (!hm_test_bit(s->unarmed, c))
				continue;
			space_pend_add(s, c);	/* written, as far as anyone knows */
			if (anyone_watches(s, c))
				buf[m++] = c;
			else {
				hm_clear_bit(s->unarmed, c);
				s->nr_unarmed--;
			}
		}
		if (m && !s->ops->arm_chunks(s, buf, m))
			for (size_t i = 0; i < m; i++) {
				hm_clear_bit(s->unarmed, buf[i]);
				s->nr_unarmed--;
			}
		c--;
	}
}

static int collect_kmod(struct hm_space *s)
{
	bool take = s->ops->take && (s->caps & HM_CAP_HARVEST_TAKE);
	uint64_t buf[HM_CONS_BATCH], again[HM_CONS_BATCH];
	uint64_t total = 0;
	bool more = true;

	if (take && s->nr_unarmed)
		unarmed_retry(s);
	while (more && total <= s->nr_chunks) {
		size_t n = 0, m = 0;
		int err;

		err = take ? s->ops->take(s, buf, HM_CONS_BATCH, &n, &more) :
			     s->ops->harvest(s, buf, HM_CONS_BATCH, &n, &more);
		if (err)
			return err;
		for (size_t i = 0; i < n; i++) {
			space_pend_add(s, buf[i]);
			if (!take)
				continue;
			if (anyone_watches(s, buf[i]))
				again[m++] = buf[i];
			else	/* the take disarmed it (a module without DISARM too) */
				hm_clear_bit(s->armed, buf[i]);
		}
		if (take && m && s->ops->arm_chunks(s, again, m)) {
			/* the record of this round is in s->pend; what comes
			   after it is covered by unarmed_retry() */
			for (size_t i = 0; i < m; i++)
				if (!hm_test_bit(s->unarmed, again[i])) {
					hm_set_bit(s->unarmed, again[i]);
					s->nr_unarmed++;
				}
		}
		for (size_t i = 0; !take && !err && i < n; i++)
			if (!anyone_watches(s, buf[i]) && s->ops->disarm)
				err = s->ops->disarm(s, buf[i], 1);
		if (err && err != -EOPNOTSUPP)
			return err;
		total += n ? n : 1;
	}
	return 0;
}

/* the next chunk at or after c set in bitmap b, or nr_chunks */
static uint64_t next_set(const struct hm_space *s, const uint64_t *b, uint64_t c)
{
	return hm_next_bit(b, c, s->nr_chunks, true);
}

/*
 * uffd-async: the record is in the page tables, chunk by chunk, so a
 * harvest scans only what its consumer watches (the records of the rest
 * wait there for their own consumers), and never a disarmed chunk, whose
 * written pages would be write-protected again.  Runs are joined across
 * at most HM_CONSUMER_SCAN_GAP chunks that were never disarmed (one
 * PAGEMAP_SCAN for scattered watched chunks, as the engine's are).
 */
static int collect_scan(struct hm_space *s, const uint64_t *watch)
{
	uint64_t nr = s->nr_chunks;

	for (uint64_t c = next_set(s, watch, 0); c < nr;) {
		uint64_t e = c;
		int err;

		for (;;) {
			uint64_t n;
			bool clean = true;

			while (e < nr && hm_test_bit(watch, e))
				e++;
			n = next_set(s, watch, e);
			if (n >= nr || n - e > HM_CONSUMER_SCAN_GAP)
				break;
			for (uint64_t g = e; g < n && clean; g++)
				clean = !hm_test_bit(s->unwp, g);
			if (!clean)
				break;
			e = n;
		}
		err = s->ops->refresh(s, c, e - c);
		if (err)
			return err;
		c = next_set(s, watch, e);
	}
	return 0;
}

/* collect the backend's record (uffd-async: of what k watches) and hand
   each chunk to every consumer watching it (lock held) */
static int fanout(struct hm_space *s, const struct hm_consumer *k)
{
	int err = 0;

	if (s->ops->harvest)
		err = collect_kmod(s);
	else if (s->ops->collect)
		err = collect_scan(s, k->watch);
	if (err || !s->nr_pend)
		return err;
	if (!s->pend_sorted) {
		qsort(s->pend, s->nr_pend, sizeof(uint64_t), cmp_u64);
		s->pend_sorted = true;
	}
	/* uffd-sync, mprotect: the recorded chunks trip again (the open ones;
	   a disarmed chunk is not open).  On failure all stay recorded. */
	if (s->ops->rearm) {
		err = s->ops->rearm(s, s->pend, s->nr_pend);
		if (err)
			return err;
	}
	for (uint64_t i = 0; i < s->nr_pend; i++) {
		uint64_t c = s->pend[i];

		hm_clear_bit(s->pend_bits, c);
		for (unsigned j = 0; j <= HM_CONSUMER_MAX; j++) {
			struct hm_consumer *k = s->cons[j];

			if (k && hm_test_bit(k->watch, c))
				cons_pend_add(k, c);
		}
	}
	s->nr_pend = 0;
	return 0;
}

/* hm_consumer_harvest() of consumer k, lock held */
int hm_cons_harvest_locked(struct hm_consumer *k, unsigned flags, uint64_t *ret_chunks,
			   size_t cap, size_t *ret_n, bool *ret_more)
{
	struct hm_space *s = k->s;
	size_t i = 0, n = 0;
	int err;

	*ret_n = 0;
	if (ret_more)
		*ret_more = false;
	err = fanout(s, k);
	if (err)
		return err;
	if (!k->pend_sorted) {
		qsort(k->pend, k->nr_pend, sizeof(uint64_t), cmp_u64);
		k->pend_sorted = true;
	}
	/* what it stopped watching since is dropped here */
	for (; i < k->nr_pend && n < cap; i++) {
		uint64_t c = k->pend[i];

		hm_clear_bit(k->pend_bits, c);
		if (hm_test_bit(k->watch, c))
			ret_chunks[n++] = c;
	}
	memmove(k->pend, k->pend + i, (k->nr_pend - i) * sizeof(uint64_t));
	k->nr_pend -= i;
	if (flags & HM_HARVEST_UNWATCH) {
		err = cons_unwatch_list(k, ret_chunks, n);
		if (err) {	/* nothing handed out: all of it stays pending,
				   watched and armed again */
			for (size_t j = 0; j < n; j++)
				cons_pend_add(k, ret_chunks[j]);
			hm_cons_watch_chunks_locked(k, ret_chunks, n);
			return err;
		}
	}
	*ret_n = n;
	if (ret_more)
		*ret_more = k->nr_pend != 0;
	k->stats.harvests++;
	k->stats.chunks_reported += n;
	if (k->slot == 0) {
		s->stats.harvests++;
		s->stats.chunks_reported += n;
		/* hm_space_poll_fd() is the built-in consumer's */
		if (s->notify_fd >= 0) {
			uint64_t v;

			while (read(s->notify_fd, &v, sizeof(v)) == sizeof(v))
				;
			v = 1;
			if (k->nr_pend && write(s->notify_fd, &v, sizeof(v)) < 0)
				return 0;
		}
	}
	return 0;
}

/* ---- API ----------------------------------------------------------------- */

int hm_consumer_new(struct hm_space *s, unsigned flags, struct hm_consumer **ret)
{
	struct hm_consumer *k, *b = NULL;
	int err = 0;

	if (!ret)
		return -EINVAL;
	*ret = NULL;
	if (!s || (flags & ~HM_CONSUMER_WATCH_ALL))
		return -EINVAL;
	k = cons_alloc(s, 0);
	if (!k)
		return -ENOMEM;
	hm_lock(s);
	if (!s->cons[0]) {
		/* memory outside the lock (mprotect's is a spinlock with every
		   signal blocked) */
		hm_unlock(s);
		b = cons_alloc(s, 2);
		hm_lock(s);
		if (!b) {
			err = -ENOMEM;
			goto out;
		}
	}
	if (s->exported) {
		err = -EBUSY;
		goto out;
	}
	if (s->nr_cons >= HM_CONSUMER_MAX) {
		err = -ENOSPC;
		goto out;
	}
	if (!s->cons[0]) {
		/* the built-in consumer watches what was armed; what is recorded
		   for it now is fanned out to it by the next harvest */
		memcpy(b->watch, s->armed, bm_bytes(s->nr_chunks));
		for (uint64_t w = 0; w < (s->nr_chunks + 63) / 64; w++)
			b->nr_watched += (uint64_t)__builtin_popcountll(s->armed[w]);
		s->unwp = (uint64_t *)((uint8_t *)b->watch + 2 * bm_bytes(s->nr_chunks));
		s->unarmed = (uint64_t *)((uint8_t *)b->watch + 3 * bm_bytes(s->nr_chunks));
		s->nr_unarmed = 0;
		s->cons[0] = b;
		b = NULL;
	}
	for (unsigned i = 1; i <= HM_CONSUMER_MAX; i++) {
		if (!s->cons[i]) {
			k->slot = i;
			break;
		}
	}
	if (flags & HM_CONSUMER_WATCH_ALL) {
		err = hm_cons_watch_locked(k, 0, s->nr_chunks);
		if (err) {
			/* watched chunks nobody else wants go back */
			s->cons[k->slot] = k;
			cons_unwatch_locked(k, 0, s->nr_chunks);
			s->cons[k->slot] = NULL;
			goto out;
		}
	}
	s->cons[k->slot] = k;
	s->nr_cons++;
	*ret = k;
	k = NULL;
out:
	hm_unlock(s);
	cons_free_mem(b);
	cons_free_mem(k);
	return err;
}

void hm_consumer_free(struct hm_consumer *k)
{
	struct hm_space *s;

	if (!k)
		return;
	s = k->s;
	if (!s) {	/* its space was freed first */
		free(k);
		return;
	}
	hm_lock(s);
	s->cons[k->slot] = NULL;
	s->nr_cons--;
	/* what only it watched is disarmed (an error leaves it armed: safe) */
	for (uint64_t w = 0; w < (s->nr_chunks + 63) / 64; w++) {
		uint64_t first = w * 64, count = s->nr_chunks - first < 64 ? s->nr_chunks - first : 64;

		if (k->watch[w])
			disarm_unwatched(s, first, count);
	}
	hm_unlock(s);
	cons_free_mem(k);
}

static int byte_range(const struct hm_consumer *k, uint64_t off, uint64_t len,
		      uint64_t *ret_first, uint64_t *ret_count)
{
	const struct hm_space *s = k->s;

	if (!s)
		return -ENODEV;
	if (!len)
		return -EINVAL;
	if (off >= s->size || len > s->size - off)
		return -ERANGE;
	*ret_first = off >> s->chunk_shift;
	*ret_count = ((off + len - 1) >> s->chunk_shift) - *ret_first + 1;
	return 0;
}

int hm_consumer_watch(struct hm_consumer *k, uint64_t off, uint64_t len)
{
	uint64_t first, count;
	int err;

	if (!k)
		return -EINVAL;
	err = byte_range(k, off, len, &first, &count);
	if (err)
		return err;
	hm_lock(k->s);
	err = k->s->exported ? -EBUSY : hm_cons_watch_locked(k, first, count);
	hm_unlock(k->s);
	return err;
}

int hm_consumer_unwatch(struct hm_consumer *k, uint64_t off, uint64_t len)
{
	uint64_t first, count;
	int err;

	if (!k)
		return -EINVAL;
	err = byte_range(k, off, len, &first, &count);
	if (err)
		return err;
	hm_lock(k->s);
	err = k->s->exported ? -EBUSY : cons_unwatch_locked(k, first, count);
	hm_unlock(k->s);
	return err;
}

static int check_chunks(const struct hm_consumer *k, const uint64_t *chunks, size_t n)
{
	if (!k || (n && !chunks))
		return -EINVAL;
	if (!k->s)
		return -ENODEV;
	for (size_t i = 0; i < n; i++)
		if (chunks[i] >= k->s->nr_chunks)
			return -ERANGE;
	return 0;
}

int hm_consumer_watch_chunks(struct hm_consumer *k, const uint64_t *chunks, size_t n)
{
	int err = check_chunks(k, chunks, n);

	if (err || !n)
		return err;
	hm_lock(k->s);
	err = k->s->exported ? -EBUSY : hm_cons_watch_chunks_locked(k, chunks, n);
	hm_unlock(k->s);
	return err;
}

int hm_consumer_unwatch_chunks(struct hm_consumer *k, const uint64_t *chunks, size_t n)
{
	int err = check_chunks(k, chunks, n);

	if (err || !n)
		return err;
	hm_lock(k->s);
	if (k->s->exported) {
		err = -EBUSY;
	} else {
		for (size_t i = 0; i < n; i++)
			cons_clear_watch(k, chunks[i]);
		for (size_t i = 0; !err && i < n; i++)
			err = disarm_unwatched(k->s, chunks[i], 1);
	}
	hm_unlock(k->s);
	return err;
}

int hm_consumer_harvest(struct hm_consumer *k, unsigned flags, uint64_t *ret_chunks,
			size_t cap, size_t *ret_n, bool *ret_more)
{
	int err;

	if (!k || !ret_n || (cap && !ret_chunks) || (flags & ~HM_HARVEST_UNWATCH))
		return -EINVAL;
	*ret_n = 0;
	if (ret_more)
		*ret_more = false;
	if (!k->s)
		return -ENODEV;
	hm_lock(k->s);
	err = k->s->exported ? -EBUSY :
	      hm_cons_harvest_locked(k, flags, ret_chunks, cap, ret_n, ret_more);
	hm_unlock(k->s);
	return err;
}

int hm_consumer_harvest_ranges(struct hm_consumer *k, unsigned flags,
			       hm_consumer_range_fn *fn, void *user)
{
	uint64_t buf[HM_CONS_BATCH];
	bool more = true;

	if (!k || !fn || (flags & ~HM_HARVEST_UNWATCH))
		return -EINVAL;
	if (!k->s)
		return -ENODEV;
	while (more) {
		struct hm_space *s = k->s;
		size_t n = 0, i, j, done;
		int err, r = 0;

		hm_lock(s);
		/* unwatch after the callbacks: what they did not take stays
		   pending and watched */
		err = s->exported ? -EBUSY : hm_cons_harvest_locked(k, 0, buf, HM_CONS_BATCH, &n, &more);
		hm_unlock(s);
		if (err)
			return err;
		for (i = 0; i < n; i = j) {
			for (j = i + 1; j < n && buf[j] == buf[j - 1] + 1; j++)
				;
			r = fn(user, buf[i] << s->chunk_shift,
			       (buf[j - 1] - buf[i] + 1) << s->chunk_shift);
			if (r)
				break;
		}
		done = r ? i : n;
		if (!r && !(flags & HM_HARVEST_UNWATCH))
			continue;
		hm_lock(s);
		if (flags & HM_HARVEST_UNWATCH)
			err = cons_unwatch_list(k, buf, done);
		/* the run fn refused and those after it: pending again */
		for (size_t t = done; t < n; t++)
			cons_pend_add(k, buf[t]);
		k->stats.chunks_reported -= n - done;
		hm_unlock(s);
		if (r)
			return r;
		if (err)
			return err;
	}
	return 0;
}

int hm_consumer_stats(const struct hm_consumer *k, struct hm_consumer_stats *ret)
{
	struct hm_space *s;

	if (!k || !ret)
		return -EINVAL;
	s = k->s;
	if (!s)
		return -ENODEV;
	hm_lock(s);
	*ret = k->stats;
	ret->chunks_watched = k->nr_watched;
	ret->chunks_pending = k->nr_pend;
	hm_unlock(s);
	return 0;
}
