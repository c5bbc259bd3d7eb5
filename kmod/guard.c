// SPDX-License-Identifier: GPL-2.0
/*
 * hmirror guards: arm (write-protect chunks), trip (->page_mkwrite records
 * the first write to an armed chunk), harvest (read the written set and
 * re-arm it), write generations.  Documentation/design.rst, "Guards".
 */
#define pr_fmt(fmt) KBUILD_MODNAME ": " fmt

#include <linux/bitmap.h>
#include <linux/ktime.h>
#include <linux/mm.h>
#include <linux/pagemap.h>
#include <linux/poll.h>
#include <linux/sched.h>
#include <linux/slab.h>
#include <linux/uaccess.h>
#include <linux/vmalloc.h>

#include "hmirror.h"

/* chunks an arm handles per s->lock hold */
#define HMIRROR_ARM_WINDOW	32768

int hmirror_guard_alloc(struct hmirror_space *s)
{
	unsigned long words = BITS_TO_LONGS(s->nr_chunks);
	u64 i;

	s->armed = kvcalloc(words, sizeof(long), GFP_KERNEL_ACCOUNT);
	s->written = kvcalloc(words, sizeof(long), GFP_KERNEL_ACCOUNT);
	s->summary = kvcalloc(BITS_TO_LONGS(words), sizeof(long),
			      GFP_KERNEL_ACCOUNT);
	s->batch = kmalloc_array(HMIRROR_BATCH, sizeof(u64), GFP_KERNEL_ACCOUNT);
	s->gens_bytes = PAGE_ALIGN(s->nr_chunks * sizeof(u64));
	s->gens = vmalloc_user(s->gens_bytes);
	if (!s->armed || !s->written || !s->summary || !s->batch || !s->gens) {
		hmirror_guard_free(s);
		return -ENOMEM;
	}
	/* never armed: odd, "not clean" */
	for (i = 0; i < s->nr_chunks; i++)
		s->gens[i] = 1;
	return 0;
}

void hmirror_guard_free(struct hmirror_space *s)
{
	kvfree(s->armed);
	kvfree(s->written);
	kvfree(s->summary);
	kfree(s->batch);
	vfree(s->gens);
	s->armed = NULL;
	s->written = NULL;
	s->summary = NULL;
	s->batch = NULL;
	s->gens = NULL;
}

static void hmirror_gen_bump(struct hmirror_space *s, u64 chunk)
{
	lockdep_assert_held(&s->lock);
	WRITE_ONCE(s->gens[chunk], s->gens[chunk] + 1);
}

/* the first write after arming: record @chunk; s->lock */
static void hmirror_guard_record(struct hmirror_space *s, u64 chunk)
{
	lockdep_assert_held(&s->lock);
	__clear_bit(chunk, s->armed);
	if (!__test_and_set_bit(chunk, s->written)) {
		__set_bit(BIT_WORD(chunk), s->summary);
		WRITE_ONCE(s->nr_written, s->nr_written + 1);
	}
	if (HMIRROR_GEN_CLEAN(s->gens[chunk]))
		hmirror_gen_bump(s, chunk);
}

/*
 * ->page_mkwrite of the guarded mapping: every first write to a read-only
 * PTE of it (and every write fault on a missing one) comes here, whether
 * from a CPU store or from the kernel writing through GUP.  The page lock
 * is held from the armed check until the core has made the PTE writable
 * (VM_FAULT_LOCKED), which is what a re-arm waits for: see
 * hmirror_guard_drain().
 */
vm_fault_t hmirror_guard_page_mkwrite(struct vm_fault *vmf)
{
	struct hmirror_space *s = vmf->vma->vm_private_data;
	struct page *page = vmf->page;
	u64 chunk = vmf->pgoff >> s->chunk_page_shift;
	bool tripped = false;

	hmirror_stat_inc(s, HMIRROR_STAT_FAULT_MKWRITE);
	lock_page(page);
	if (unlikely(chunk >= s->nr_chunks)) {
		unlock_page(page);
		hmirror_stat_inc(s, HMIRROR_STAT_FAULT_SIGBUS);
		return VM_FAULT_SIGBUS;
	}
	spin_lock(&s->lock);
	if (test_bit(chunk, s->armed)) {
		hmirror_guard_record(s, chunk);
		tripped = true;
	}
	spin_unlock(&s->lock);
	if (tripped) {
		hmirror_stat_inc(s, HMIRROR_STAT_TRIPS);
		/* kmod-device: netlink event, cheap without listeners */
		hmirror_nl_chunk_written(s->id, chunk, READ_ONCE(s->gens[chunk]));
		if (wq_has_sleeper(&s->wq))
			wake_up_interruptible_poll(&s->wq, EPOLLIN | EPOLLRDNORM);
	}
	/* the page has no ->mapping: returning 0 here would retry forever */
	return VM_FAULT_LOCKED;
}

/*
 * Wait for every ->page_mkwrite in flight over pages [first, first + nr):
 * one that looked at the armed bit before the caller set it holds the page
 * lock until its PTE is writable.  After this, a write-protect of the range
 * catches those PTEs too, and any later ->page_mkwrite sees the bit set.
 * A page not resident now cannot have such a fault in flight: ->fault
 * inserts the page before ->page_mkwrite takes s->lock.
 */
static void hmirror_guard_drain(struct hmirror_space *s, pgoff_t first,
				pgoff_t nr)
{
	XA_STATE(xas, &s->pages, first);
	struct page *page;

	if (nr == 1) {
		/* one-page chunk: a plain lookup is cheaper than a range walk */
		page = xa_load(&s->pages, first);
		if (page && PageLocked(page)) {
			lock_page(page);
			unlock_page(page);
		}
		return;
	}
	rcu_read_lock();
	xas_for_each(&xas, page, first + nr - 1) {
		if (xas_retry(&xas, page))
			continue;
		/*
		 * Unlocked now: a ->page_mkwrite that saw the bit clear has
		 * finished, and a later one will see it set.  Pages live as
		 * long as the space, so no reference is needed.
		 */
		if (!PageLocked(page))
			continue;
		xas_pause(&xas);
		rcu_read_unlock();
		lock_page(page);
		unlock_page(page);
		rcu_read_lock();
	}
	rcu_read_unlock();
}

/* write-protect pages [pfirst, pfirst + pnr) in every mapping of the space */
static void hmirror_guard_wp_pages(struct hmirror_space *s, pgoff_t pfirst,
				   pgoff_t pnr)
{
	unsigned long ptes;
	u64 t0;

	lockdep_assert_held(&s->arm_lock);
	if (!s->mapping)
		return;
	t0 = ktime_get_ns();
	ptes = wp_shared_mapping_range(s->mapping, pfirst, pnr);
	hmirror_stat_add(s, HMIRROR_STAT_REARM_NS, ktime_get_ns() - t0);
	hmirror_stat_inc(s, HMIRROR_STAT_REARM_CALLS);
	hmirror_stat_add(s, HMIRROR_STAT_REARM_PTES, ptes);
}

static void hmirror_guard_wp(struct hmirror_space *s, u64 first, u64 count)
{
	pgoff_t pfirst = hmirror_chunk_to_pgoff(s, first);
	pgoff_t pnr = hmirror_chunk_to_pgoff(s, count);
	u64 t0 = ktime_get_ns();

	/* order the caller's armed-bit stores before the PG_locked loads */
	smp_mb();
	hmirror_guard_drain(s, pfirst, pnr);
	hmirror_stat_add(s, HMIRROR_STAT_DRAIN_NS, ktime_get_ns() - t0);
	hmirror_guard_wp_pages(s, pfirst, pnr);
}

/* after the write-protect: still armed (no trip since) -> clean (even) */
static void hmirror_guard_settle(struct hmirror_space *s, u64 first,
				 u64 count)
{
	u64 c;

	spin_lock(&s->lock);
	for (c = first; c < first + count; c++)
		if (test_bit(c, s->armed) && !HMIRROR_GEN_CLEAN(s->gens[c]))
			hmirror_gen_bump(s, c);
	spin_unlock(&s->lock);
}

/* set the armed bits of [first, first + count); returns how many were new */
static u64 hmirror_guard_mark_armed(struct hmirror_space *s, u64 first,
				    u64 count)
{
	u64 c, n = 0;

	spin_lock(&s->lock);
	for (c = first; c < first + count; c++)
		if (!__test_and_set_bit(c, s->armed))
			n++;
	spin_unlock(&s->lock);
	return n;
}

static void hmirror_guard_disarm(struct hmirror_space *s, u64 first,
				 u64 count)
{
	u64 c, n = 0;

	spin_lock(&s->lock);
	for (c = first; c < first + count; c++) {
		if (__test_and_clear_bit(c, s->armed))
			n++;
		if (HMIRROR_GEN_CLEAN(s->gens[c]))
			hmirror_gen_bump(s, c);
	}
	spin_unlock(&s->lock);
	hmirror_stat_add(s, HMIRROR_STAT_CHUNKS_DISARMED, n);
}

/*
 * Arm (or disarm) chunks [first, first + count), already validated.  Set
 * the bits, drain in-flight ->page_mkwrite, write-protect, then mark the
 * chunks clean if nothing tripped meanwhile.  PTEs of a disarmed chunk
 * stay read-only until its next write, which is then not recorded.
 */
int hmirror_guard_arm(struct hmirror_space *s, u64 first, u64 count,
		      bool disarm)
{
	u64 end = first + count, c, n;

	mutex_lock(&s->arm_lock);
	for (c = first; c < end; c += n) {
		n = min_t(u64, end - c, HMIRROR_ARM_WINDOW);
		if (disarm) {
			hmirror_guard_disarm(s, c, n);
		} else {
			hmirror_stat_add(s, HMIRROR_STAT_CHUNKS_ARMED,
					 hmirror_guard_mark_armed(s, c, n));
			hmirror_guard_wp(s, c, n);
			hmirror_guard_settle(s, c, n);
		}
		if (fatal_signal_pending(current)) {
			mutex_unlock(&s->arm_lock);
			return -EINTR;
		}
		cond_resched();
	}
	mutex_unlock(&s->arm_lock);
	return 0;
}

/*
 * Take up to @cap written chunks, ascending from *@cursor, into s->batch:
 * forget their record and set their armed bit (so a write from now on is
 * recorded again).  *@cursor moves past the last one taken, so one harvest
 * call reports a strictly ascending list even when chunks it re-armed are
 * written again meanwhile (those wait for the next call).  s->lock.
 */
static unsigned int hmirror_guard_take(struct hmirror_space *s,
				       unsigned int cap, u64 *cursor)
{
	unsigned long words = BITS_TO_LONGS(s->nr_chunks);
	unsigned long w0 = *cursor / BITS_PER_LONG, w = w0, bits;
	unsigned int n = 0, armed = 0;
	u64 chunk;

	lockdep_assert_held(&s->lock);
	while (n < cap) {
		w = find_next_bit(s->summary, words, w);
		if (w >= words)
			break;
		bits = s->written[w];
		if (w == w0)
			bits &= ~0UL << (*cursor % BITS_PER_LONG);
		while (bits && n < cap) {
			chunk = (u64)w * BITS_PER_LONG + __ffs(bits);
			bits &= bits - 1;
			__clear_bit(chunk, s->written);
			if (!__test_and_set_bit(chunk, s->armed))
				armed++;
			s->batch[n++] = chunk;
		}
		if (!s->written[w])
			__clear_bit(w, s->summary);
		w++;
	}
	if (n)
		*cursor = s->batch[n - 1] + 1;
	WRITE_ONCE(s->nr_written, s->nr_written - n);
	hmirror_stat_add(s, HMIRROR_STAT_CHUNKS_ARMED, armed);
	return n;
}

/*
 * Re-arm s->batch[0..n) (ascending): drain each run of adjacent chunks,
 * then write-protect with one call per group of runs whose gaps are at
 * most hmirror_rearm_merge_pages pages.  Each call costs a TLB flush and
 * an mmu_notifier round, which dominates for scattered chunks; walking
 * the PTEs of a gap costs less up to some size (Documentation/design.rst
 * has the figures).  Write-protecting a gap is harmless: its armed chunks
 * are read-only already, and the others take one unrecorded
 * ->page_mkwrite on their next write.
 */
static void hmirror_guard_rearm_batch(struct hmirror_space *s, unsigned int n)
{
	pgoff_t gap = READ_ONCE(hmirror_rearm_merge_pages);
	pgoff_t start = 0, end = 0, pfirst, pend;
	unsigned int i, j;
	u64 t0 = ktime_get_ns();

	/* order the armed-bit stores of hmirror_guard_take() before drain */
	smp_mb();
	for (i = 0; i < n; i = j) {
		for (j = i + 1; j < n && s->batch[j] == s->batch[j - 1] + 1; j++)
			;
		pfirst = hmirror_chunk_to_pgoff(s, s->batch[i]);
		pend = hmirror_chunk_to_pgoff(s, s->batch[j - 1] + 1);
		hmirror_guard_drain(s, pfirst, pend - pfirst);
	}
	hmirror_stat_add(s, HMIRROR_STAT_DRAIN_NS, ktime_get_ns() - t0);

	for (i = 0; i < n; i = j) {
		for (j = i + 1; j < n && s->batch[j] == s->batch[j - 1] + 1; j++)
			;
		pfirst = hmirror_chunk_to_pgoff(s, s->batch[i]);
		pend = hmirror_chunk_to_pgoff(s, s->batch[j - 1] + 1);
		if (i && pfirst - end <= gap) {
			end = pend;
			continue;
		}
		if (i)
			hmirror_guard_wp_pages(s, start, end - start);
		start = pfirst;
		end = pend;
	}
	if (n)
		hmirror_guard_wp_pages(s, start, end - start);

	spin_lock(&s->lock);
	for (i = 0; i < n; i++) {
		u64 c = s->batch[i];

		if (test_bit(c, s->armed) && !HMIRROR_GEN_CLEAN(s->gens[c]))
			hmirror_gen_bump(s, c);
	}
	spin_unlock(&s->lock);
}

int hmirror_guard_harvest(struct hmirror_space *s, u64 __user *uchunks,
			  u64 cap, u64 *ret_nr, bool *ret_more)
{
	u64 t0, done = 0, cursor = 0;
	unsigned int n;
	int ret = 0;

	*ret_nr = 0;
	/* untouched: O(1), no lock */
	if (!READ_ONCE(s->nr_written) || !cap) {
		*ret_more = READ_ONCE(s->nr_written) != 0;
		hmirror_stat_inc(s, HMIRROR_STAT_HARVESTS);
		hmirror_stat_inc(s, HMIRROR_STAT_HARVESTS_EMPTY);
		return 0;
	}

	t0 = ktime_get_ns();
	mutex_lock(&s->arm_lock);
	while (done < cap) {
		spin_lock(&s->lock);
		n = hmirror_guard_take(s, min_t(u64, cap - done, HMIRROR_BATCH),
				       &cursor);
		spin_unlock(&s->lock);
		if (!n)
			break;
		hmirror_guard_rearm_batch(s, n);
		if (copy_to_user(uchunks + done, s->batch, n * sizeof(u64))) {
			/*
			 * The chunks are re-armed but not reported: give them
			 * back their record so that nothing is lost, and
			 * report what was stored before, if anything.
			 */
			spin_lock(&s->lock);
			while (n--)
				hmirror_guard_record(s, s->batch[n]);
			spin_unlock(&s->lock);
			if (!done)
				ret = -EFAULT;
			break;
		}
		done += n;
	}
	mutex_unlock(&s->arm_lock);

	*ret_nr = done;
	*ret_more = READ_ONCE(s->nr_written) != 0;
	hmirror_stat_inc(s, HMIRROR_STAT_HARVESTS);
	hmirror_stat_add(s, HMIRROR_STAT_CHUNKS_REPORTED, done);
	hmirror_stat_add(s, HMIRROR_STAT_HARVEST_NS, ktime_get_ns() - t0);
	return ret;
}

u64 hmirror_guard_generation(struct hmirror_space *s, u64 chunk)
{
	return READ_ONCE(s->gens[chunk]);
}
