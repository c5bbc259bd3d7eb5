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
#include <linux/module.h>
#include <linux/pagemap.h>
#include <linux/poll.h>
#include <linux/sched.h>
#include <linux/sched/signal.h>
#include <linux/slab.h>
#include <linux/uaccess.h>
#include <linux/userfaultfd_k.h>
#include <linux/vmalloc.h>

#include "hmirror.h"

/* chunks a harvest that re-arms nothing takes per s->lock hold (on stack) */
#define HMIRROR_TAKE_BATCH	128
/* chunks an arm handles per s->lock hold */
#define HMIRROR_ARM_WINDOW	32768
/* pages the drain looks at between two cond_resched() */
#define HMIRROR_DRAIN_RESCHED	4096

static unsigned long hmirror_rearm_merge_pages = 64;
module_param_named(rearm_merge_pages, hmirror_rearm_merge_pages, ulong, 0644);
MODULE_PARM_DESC(rearm_merge_pages,
		 "Harvest re-arms written runs up to this many pages apart with one write-protect (default 64)");

int hmirror_guard_alloc(struct hmirror_space *s)
{
	unsigned long words = BITS_TO_LONGS(s->nr_chunks);
	u64 i;

	s->armed = kvcalloc(words, sizeof(long), GFP_KERNEL_ACCOUNT);
	s->written = kvcalloc(words, sizeof(long), GFP_KERNEL_ACCOUNT);
	s->summary = kvcalloc(BITS_TO_LONGS(words), sizeof(long),
			      GFP_KERNEL_ACCOUNT);
	s->clean = bitmap_zalloc(HMIRROR_CLEAN_PAGES, GFP_KERNEL_ACCOUNT);
	s->gens_bytes = PAGE_ALIGN(s->nr_chunks * sizeof(u64));
	s->gens = vmalloc_user(s->gens_bytes);
	if (!s->armed || !s->written || !s->summary || !s->clean || !s->gens) {
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
	bitmap_free(s->clean);
	vfree(s->gens);
	s->armed = NULL;
	s->written = NULL;
	s->summary = NULL;
	s->clean = NULL;
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

#ifdef HAVE_APPLY_TO_EXISTING_PAGE_RANGE
struct hmirror_open_walk {
	struct vm_area_struct *vma;
	unsigned long skip;		/* the faulting address: the core's */
	unsigned int opened;
};

static int hmirror_guard_open_pte(pte_t *ptep, unsigned long addr, void *data)
{
	struct hmirror_open_walk *w = data;
	pte_t pte = ptep_get(ptep);

	/* only clean read-only PTEs: what arming left */
	if (addr == w->skip || !pte_present(pte) || pte_write(pte) ||
	    pte_dirty(pte))
		return 0;
#ifdef HAVE_PTE_MKWRITE_NOVMA
	pte = pte_mkwrite_novma(pte);
#else
	pte = pte_mkwrite(pte);
#endif
	set_pte_at(w->vma->vm_mm, addr, ptep, pte_mkdirty(pte_mkyoung(pte)));
	w->opened++;
	return 0;
}

/*
 * A trip recorded the chunk: make the rest of its present PTEs in this
 * VMA writable now, so that filling a 64 KiB chunk takes one fault, not
 * sixteen.  The page lock held here keeps a re-arm's write-protect after
 * this (it drains every page of the chunk first).  Left alone where
 * someone else needs the write faults: userfaultfd-wp, soft-dirty.
 */
static void hmirror_guard_open_chunk(struct vm_fault *vmf, u64 chunk)
{
	struct vm_area_struct *vma = vmf->vma;
	struct hmirror_space *s = vma->vm_private_data;
	struct hmirror_open_walk w = {
		.vma = vma, .skip = vmf->address & PAGE_MASK,
	};
	pgoff_t first = hmirror_chunk_to_pgoff(s, chunk);
	pgoff_t last = first + (1UL << s->chunk_page_shift);
	unsigned long start, end;

	if (!s->chunk_page_shift || userfaultfd_wp(vma))
		return;
	if (IS_ENABLED(CONFIG_MEM_SOFT_DIRTY) && !(vma->vm_flags & VM_SOFTDIRTY))
		return;
	first = max(first, vma->vm_pgoff);
	last = min(last, vma->vm_pgoff + vma_pages(vma));
	if (first >= last)
		return;
	start = vma->vm_start + ((first - vma->vm_pgoff) << PAGE_SHIFT);
	end = vma->vm_start + ((last - vma->vm_pgoff) << PAGE_SHIFT);
	apply_to_existing_page_range(vma->vm_mm, start, end - start,
				     hmirror_guard_open_pte, &w);
	hmirror_stat_add(s, HMIRROR_STAT_TRIP_OPENED, w.opened);
}
#else
/* no exported PTE walker (7.3): each page of a chunk takes its own trip */
static void hmirror_guard_open_chunk(struct vm_fault *vmf, u64 chunk)
{
}
#endif

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
		hmirror_guard_open_chunk(vmf, chunk);
		hmirror_stat_inc(s, HMIRROR_STAT_TRIPS);
		/* a netlink event: cheap without listeners */
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
	unsigned int seen = 0;

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
		if (PageLocked(page)) {
			xas_pause(&xas);
			rcu_read_unlock();
			lock_page(page);
			unlock_page(page);
			rcu_read_lock();
		} else if (++seen % HMIRROR_DRAIN_RESCHED == 0) {
			xas_pause(&xas);
			rcu_read_unlock();
			cond_resched();
			rcu_read_lock();
		}
	}
	rcu_read_unlock();
}

/*
 * Write-protect pages [pfirst, pfirst + pnr) in every mapping of the space,
 * and clean them.  Read-only alone is not enough: the core makes a dirty
 * shared PTE writable again without ->page_mkwrite (mprotect, NUMA hinting,
 * userfaultfd un-protect: can_change_pte_writable()).  Cleaning after the
 * write-protect is race-free: a read-only PTE cannot be dirtied by a store,
 * only by the next ->page_mkwrite, which records.  The pages have no
 * ->mapping and are never written back, so nothing reads the dirty bit.
 */
static void hmirror_guard_wp_pages(struct hmirror_space *s, pgoff_t pfirst,
				   pgoff_t pnr)
{
	pgoff_t off, n, start, end;
	unsigned long ptes;
	u64 t0;

	lockdep_assert_held(&s->arm_lock);
	if (!s->mapping)
		return;
	t0 = ktime_get_ns();
	ptes = wp_shared_mapping_range(s->mapping, pfirst, pnr);
	for (off = 0; off < pnr; off += n) {
		n = min_t(pgoff_t, pnr - off, HMIRROR_CLEAN_PAGES);
		start = n;
		end = 0;
		clean_record_shared_mapping_range(s->mapping, pfirst + off, n,
						  pfirst + off, s->clean,
						  &start, &end);
	}
	hmirror_stat_add(s, HMIRROR_STAT_REARM_NS, ktime_get_ns() - t0);
	hmirror_stat_inc(s, HMIRROR_STAT_REARM_CALLS);
	hmirror_stat_add(s, HMIRROR_STAT_REARM_PTES, ptes);
}

/*
 * Does a page of chunk @c hold a GUP pin (FOLL_PIN: O_DIRECT on 6.5+,
 * process_vm_writev, RDMA)?  A write through a pin lands after the fault
 * that recorded it, so a chunk with one cannot be called clean.  Pins of
 * the device view (a GPU's host-pointer import) look the same and are
 * long-term, so a space whose view was ever mapped skips the check
 * (Documentation/design.rst, "Kernel writes").
 */
static bool hmirror_guard_chunk_pinned(struct hmirror_space *s, u64 c)
{
	pgoff_t first = hmirror_chunk_to_pgoff(s, c);
	XA_STATE(xas, &s->pages, first);
	struct page *page;
	bool pinned = false;

	if (READ_ONCE(s->view_mapped))
		return false;
	if (!s->chunk_page_shift) {
		/* one-page chunk: a plain lookup is cheaper than a range walk */
		page = xa_load(&s->pages, first);
		return page && folio_maybe_dma_pinned(page_folio(page));
	}
	rcu_read_lock();
	xas_for_each(&xas, page, first + (1UL << s->chunk_page_shift) - 1) {
		if (xas_retry(&xas, page))
			continue;
		if (folio_maybe_dma_pinned(page_folio(page))) {
			pinned = true;
			break;
		}
	}
	rcu_read_unlock();
	return pinned;
}

/* chunks settled per s->lock hold */
#define HMIRROR_SETTLE_BATCH	BITS_PER_LONG

struct hmirror_settle {
	u64 chunk[HMIRROR_SETTLE_BATCH];
	unsigned long pinned;		/* bit i: chunk[i] has a pinned page */
	unsigned int n;
	u64 kept;
};

static void hmirror_guard_settle_flush(struct hmirror_space *s,
				       struct hmirror_settle *st)
{
	unsigned int i;
	u64 c;

	spin_lock(&s->lock);
	for (i = 0; i < st->n; i++) {
		c = st->chunk[i];
		if (!test_bit(c, s->armed) || HMIRROR_GEN_CLEAN(s->gens[c]))
			continue;
		if (st->pinned & (1UL << i)) {
			hmirror_guard_record(s, c);
			st->kept++;
		} else {
			hmirror_gen_bump(s, c);
		}
	}
	spin_unlock(&s->lock);
	st->n = 0;
	st->pinned = 0;
	cond_resched();
}

/*
 * After the write-protect: a chunk of runs[0..n) still armed (no trip
 * since) becomes clean (even), or, holding a pin, stays recorded as
 * written.  Chunks that are clean already were checked when they became
 * so: a pin taken since needed a writable PTE, so a trip.  Pins are looked
 * up outside s->lock, and s->lock is taken once per HMIRROR_SETTLE_BATCH
 * chunks.
 */
static void hmirror_guard_settle_runs(struct hmirror_space *s,
				      const struct hmirror_range *runs,
				      unsigned int n)
{
	struct hmirror_settle st = { .n = 0 };
	unsigned int i;
	u64 c;

	/* the write-protect (and its TLB flush) before the pin counts */
	smp_mb();
	for (i = 0; i < n; i++) {
		for (c = runs[i].first; c < runs[i].first + runs[i].count; c++) {
			if (HMIRROR_GEN_CLEAN(READ_ONCE(s->gens[c])))
				continue;
			if (hmirror_guard_chunk_pinned(s, c))
				st.pinned |= 1UL << st.n;
			st.chunk[st.n++] = c;
			if (st.n == HMIRROR_SETTLE_BATCH)
				hmirror_guard_settle_flush(s, &st);
		}
	}
	if (st.n)
		hmirror_guard_settle_flush(s, &st);
	if (st.kept) {
		hmirror_stat_add(s, HMIRROR_STAT_PINNED_KEPT, st.kept);
		if (wq_has_sleeper(&s->wq))
			wake_up_interruptible_poll(&s->wq, EPOLLIN | EPOLLRDNORM);
	}
}

/* set the armed bits of runs[0..n), one s->lock hold; returns the new ones */
static u64 hmirror_guard_mark_armed(struct hmirror_space *s,
				    const struct hmirror_range *runs,
				    unsigned int n)
{
	unsigned int i;
	u64 c, armed = 0;

	spin_lock(&s->lock);
	for (i = 0; i < n; i++)
		for (c = runs[i].first; c < runs[i].first + runs[i].count; c++)
			if (!__test_and_set_bit(c, s->armed))
				armed++;
	spin_unlock(&s->lock);
	return armed;
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
 * Re-arm runs[0..n) (ascending, disjoint chunk runs, armed bits set):
 * drain each run, then write-protect with one call per group of runs whose
 * gaps are at most hmirror_rearm_merge_pages pages, then settle.  Each call
 * costs a TLB flush and an mmu_notifier round, which dominates for
 * scattered chunks; walking the PTEs of a gap costs less up to some size
 * (Documentation/design.rst has the figures).  Write-protecting a gap is
 * harmless: its armed chunks are read-only already, and the others take
 * one unrecorded ->page_mkwrite on their next write.
 */
static void hmirror_guard_rearm_runs(struct hmirror_space *s,
				     const struct hmirror_range *runs,
				     unsigned int n)
{
	pgoff_t gap = READ_ONCE(hmirror_rearm_merge_pages);
	pgoff_t start = 0, end = 0, pfirst, pend;
	unsigned int i;
	u64 t0 = ktime_get_ns();

	lockdep_assert_held(&s->arm_lock);
	/* order the caller's armed-bit stores before the PG_locked loads */
	smp_mb();
	for (i = 0; i < n; i++)
		hmirror_guard_drain(s, hmirror_chunk_to_pgoff(s, runs[i].first),
				    hmirror_chunk_to_pgoff(s, runs[i].count));
	hmirror_stat_add(s, HMIRROR_STAT_DRAIN_NS, ktime_get_ns() - t0);

	for (i = 0; i < n; i++) {
		pfirst = hmirror_chunk_to_pgoff(s, runs[i].first);
		pend = pfirst + hmirror_chunk_to_pgoff(s, runs[i].count);
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

	hmirror_guard_settle_runs(s, runs, n);
}

/* runs one arm_lock hold of an ARM covers at most (as a harvest batch) */
#define HMIRROR_ARM_GROUP	2048

/* arm (or disarm) runs[0..n), one arm_lock hold; -EINTR if killed */
static int hmirror_guard_arm_group(struct hmirror_space *s,
				   const struct hmirror_range *runs,
				   unsigned int n, bool disarm)
{
	unsigned int i;

	if (mutex_lock_killable(&s->arm_lock))
		return -EINTR;
	if (disarm) {
		for (i = 0; i < n; i++)
			hmirror_guard_disarm(s, runs[i].first, runs[i].count);
	} else {
		hmirror_stat_add(s, HMIRROR_STAT_CHUNKS_ARMED,
				 hmirror_guard_mark_armed(s, runs, n));
		hmirror_guard_rearm_runs(s, runs, n);
	}
	mutex_unlock(&s->arm_lock);
	return 0;
}

/*
 * Arm (or disarm) runs[0..nr): validated, ascending and disjoint (the
 * ioctl sorts and merges them), so one call does at most one pass over the
 * space whatever the caller asked.  The work is cut into groups of at most
 * HMIRROR_ARM_WINDOW chunks and HMIRROR_ARM_GROUP runs; arm_lock is taken
 * per group, so harvests interleave, and a fatal signal stops between
 * groups (what was armed stays armed).  PTEs of a disarmed chunk stay
 * read-only until its next write, which is then not recorded.
 */
int hmirror_guard_arm(struct hmirror_space *s, const struct hmirror_range *runs,
		      unsigned int nr, bool disarm)
{
	struct hmirror_range piece;
	unsigned int i = 0, j;
	u64 total, c;
	int ret;

	while (i < nr) {
		if (runs[i].count > HMIRROR_ARM_WINDOW) {
			/* one long run: window by window */
			for (c = 0; c < runs[i].count; c += piece.count) {
				piece.first = runs[i].first + c;
				piece.count = min_t(u64, runs[i].count - c,
						    HMIRROR_ARM_WINDOW);
				ret = hmirror_guard_arm_group(s, &piece, 1,
							      disarm);
				if (ret)
					return ret;
				if (fatal_signal_pending(current))
					return -EINTR;
				cond_resched();
			}
			i++;
			continue;
		}
		total = 0;
		for (j = i; j < nr && j - i < HMIRROR_ARM_GROUP &&
		     runs[j].count <= HMIRROR_ARM_WINDOW - total; j++)
			total += runs[j].count;
		ret = hmirror_guard_arm_group(s, runs + i, j - i, disarm);
		if (ret)
			return ret;
		i = j;
		if (i < nr && fatal_signal_pending(current))
			return -EINTR;
		cond_resched();
	}
	return 0;
}

/*
 * Take up to @cap written chunks, ascending from *@cursor, into @out:
 * forget their record and, if @rearm, set their armed bit (so a write from
 * now on is recorded again).  *@cursor moves past the last one taken, so
 * one harvest call reports a strictly ascending list even when chunks it
 * re-armed are written again meanwhile (those wait for the next call).
 */
static unsigned int hmirror_guard_take(struct hmirror_space *s, u64 *out,
				       unsigned int cap, u64 *cursor,
				       bool rearm)
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
			if (rearm && !__test_and_set_bit(chunk, s->armed))
				armed++;
			out[n++] = chunk;
		}
		if (!s->written[w])
			__clear_bit(w, s->summary);
		w++;
	}
	if (n)
		*cursor = out[n - 1] + 1;
	WRITE_ONCE(s->nr_written, s->nr_written - n);
	hmirror_stat_add(s, HMIRROR_STAT_CHUNKS_ARMED, armed);
	return n;
}

/* is any chunk at or after @cursor recorded?  s->lock */
static bool hmirror_guard_written_from(struct hmirror_space *s, u64 cursor)
{
	unsigned long words = BITS_TO_LONGS(s->nr_chunks);
	unsigned long w = cursor / BITS_PER_LONG;

	lockdep_assert_held(&s->lock);
	if (w >= words)
		return false;
	if (s->written[w] & (~0UL << (cursor % BITS_PER_LONG)))
		return true;
	return find_next_bit(s->summary, words, w + 1) < words;
}

/* chunks[0..n) reported to nobody (EFAULT): give them their record back */
static void hmirror_guard_unreport(struct hmirror_space *s, const u64 *chunks,
				   unsigned int n)
{
	spin_lock(&s->lock);
	while (n--)
		hmirror_guard_record(s, chunks[n]);
	spin_unlock(&s->lock);
}

/* chunks[0..n), ascending, as runs of adjacent chunks; returns the count */
static unsigned int hmirror_chunks_to_runs(const u64 *chunks, unsigned int n,
					   struct hmirror_range *runs)
{
	unsigned int i, nr = 0;

	for (i = 0; i < n; i++) {
		if (nr && runs[nr - 1].first + runs[nr - 1].count == chunks[i]) {
			runs[nr - 1].count++;
			continue;
		}
		runs[nr].first = chunks[i];
		runs[nr].count = 1;
		nr++;
	}
	return nr;
}

/*
 * One batch of a re-arming harvest into @buf: take and re-arm under
 * arm_lock.  Returns the number taken, or -EINTR.
 */
static int hmirror_guard_harvest_rearm(struct hmirror_space *s, u64 *buf,
				       struct hmirror_range *runs,
				       unsigned int cap, u64 *cursor)
{
	unsigned int n;

	if (mutex_lock_killable(&s->arm_lock))
		return -EINTR;
	spin_lock(&s->lock);
	n = hmirror_guard_take(s, buf, cap, cursor, true);
	spin_unlock(&s->lock);
	if (n)
		hmirror_guard_rearm_runs(s, runs,
					 hmirror_chunks_to_runs(buf, n, runs));
	mutex_unlock(&s->arm_lock);
	return n;
}

/*
 * Harvest: report up to @cap written chunks, ascending, into @uchunks and
 * forget their record; re-arm them unless HMIRROR_HARVEST_NO_REARM.  The
 * chunks are copied out with no lock held (the buffer may fault, even
 * into userfaultfd), one batch at a time.  A harvest that re-arms nothing
 * takes no arm_lock and touches no page table: its cost is the bits.
 */
int hmirror_guard_harvest(struct hmirror_space *s, u64 __user *uchunks,
			  u64 cap, u32 flags, u64 *ret_nr, bool *ret_more)
{
	bool rearm = !(flags & HMIRROR_HARVEST_NO_REARM);
	u64 stack_buf[HMIRROR_TAKE_BATCH];
	struct hmirror_range *runs = NULL;
	u64 t0, done = 0, cursor = 0, *buf = stack_buf;
	unsigned int bcap = HMIRROR_TAKE_BATCH;
	int n, ret = 0;

	*ret_nr = 0;
	*ret_more = false;
	hmirror_stat_inc(s, HMIRROR_STAT_HARVESTS);
	/* untouched: O(1), no lock */
	if (!READ_ONCE(s->nr_written) || !cap) {
		*ret_more = READ_ONCE(s->nr_written) != 0;
		hmirror_stat_inc(s, HMIRROR_STAT_HARVESTS_EMPTY);
		return 0;
	}

	t0 = ktime_get_ns();
	if (rearm) {
		/* sized by what is recorded now: small harvests stay in the slab */
		bcap = min_t(u64, min_t(u64, cap, HMIRROR_BATCH),
			     max_t(u64, READ_ONCE(s->nr_written), 16));
		buf = kvmalloc_array(bcap, sizeof(*buf), GFP_KERNEL);
		runs = kvmalloc_array(bcap, sizeof(*runs), GFP_KERNEL);
		if (!buf || !runs) {
			ret = -ENOMEM;
			goto out_free;
		}
	}
	while (done < cap) {
		if (rearm) {
			n = hmirror_guard_harvest_rearm(s, buf, runs,
							min_t(u64, cap - done, bcap),
							&cursor);
			if (n < 0) {
				if (!done)
					ret = n;
				break;
			}
		} else {
			spin_lock(&s->lock);
			n = hmirror_guard_take(s, buf,
					       min_t(u64, cap - done, bcap),
					       &cursor, false);
			spin_unlock(&s->lock);
		}
		if (!n)
			break;
		if (copy_to_user(uchunks + done, buf, n * sizeof(u64))) {
			/* nothing is lost: report what was stored before */
			hmirror_guard_unreport(s, buf, n);
			if (!done)
				ret = -EFAULT;
			break;
		}
		done += n;
		if (done < cap)
			cond_resched();
	}
	/* more past the cursor; chunks recorded behind it wait for the next */
	spin_lock(&s->lock);
	*ret_more = hmirror_guard_written_from(s, cursor);
	spin_unlock(&s->lock);

	*ret_nr = done;
	hmirror_stat_add(s, HMIRROR_STAT_CHUNKS_REPORTED, done);
	hmirror_stat_add(s, HMIRROR_STAT_HARVEST_NS, ktime_get_ns() - t0);
out_free:
	if (buf != stack_buf)
		kvfree(buf);
	kvfree(runs);
	return ret;
}

u64 hmirror_guard_generation(struct hmirror_space *s, u64 chunk)
{
	return READ_ONCE(s->gens[chunk]);
}
