// SPDX-License-Identifier: GPL-2.0
/*
 * hmirror: long-term pins of ordinary process memory for device use.
 *
 * HMIRROR_IOC_PIN pins a range of the caller's anonymous or memfd (shmem)
 * memory with FOLL_LONGTERM, charges it to the caller's user against
 * RLIMIT_MEMLOCK (user_struct->locked_vm, as io_uring does: a forked child
 * or the receiver of the fd shares the budget) and returns a pin fd;
 * closing the fd and every dma-buf of it unpins.  The page array is
 * kept in page-sized chunks and filled in batches, so a huge request never
 * needs one giant allocation.
 *
 * An mmu_interval_notifier watches the range.  Events after which the
 * process's page tables may no longer map the pinned frames (munmap,
 * mremap, MADV_DONTNEED, copy-on-write, migration attempts, exit) mark the
 * pin invalidated, once: the fd polls EPOLLPRI, HMIRROR_IOC_PIN_STATE reports
 * cause and range, and a netlink event is sent, so the daemon drops its
 * import instead of reading stale frames.  Protection changes (mprotect,
 * fork's write-protect of the parent, soft-dirty, write-protect by this
 * module's guards) keep the same frames mapped and are ignored.
 */
#define pr_fmt(fmt) KBUILD_MODNAME ": " fmt

#include <linux/anon_inodes.h>
#include <linux/file.h>
#include <linux/fs.h>
#include <linux/mm.h>
#include <linux/mmu_notifier.h>
#include <linux/module.h>
#include <linux/overflow.h>
#include <linux/poll.h>
#include <linux/sched/mm.h>
#include <linux/sched/signal.h>
#include <linux/shmem_fs.h>
#include <linux/slab.h>
#include <linux/wait.h>
#include <linux/workqueue.h>
#include <linux/xarray.h>

#include <linux/hmirror.h>

#include "hmirror.h"

static unsigned long max_pin_mib = 1024 * 1024;	/* 1 TiB */
module_param(max_pin_mib, ulong, 0644);
MODULE_PARM_DESC(max_pin_mib, "Largest single pin, in MiB (default 1 TiB; RLIMIT_MEMLOCK applies too)");

static unsigned int max_pins_per_user = 4096;
module_param(max_pins_per_user, uint, 0644);
MODULE_PARM_DESC(max_pins_per_user, "Most pins the processes of one user may hold at once (default 4096)");

/* pages pinned by one pin_user_pages_fast() call, between signal checks */
#define HMIRROR_PIN_BATCH	HMIRROR_PV_PER_CHUNK
/* pins redone because an invalidation raced the pinning, before -EAGAIN */
#define HMIRROR_PIN_TRIES	3

enum hmirror_pin_phase {
	HMIRROR_PIN_PINNING,	/* being pinned: an invalidation forces a redo */
	HMIRROR_PIN_LIVE,
	HMIRROR_PIN_DEAD,	/* invalidated */
};

struct hmirror_pin {
	struct kref ref;		/* the pin fd, each dma-buf, event work */
	struct mmu_interval_notifier notifier;
	struct mm_struct *mm;		/* mmgrab()ed; pinned_vm shows the pin */
	const struct cred *locked_cred;	/* its user RLIMIT_MEMLOCK charged; or NULL */
	struct hmirror_user *user;	/* counts the pin, charged for @pv */
	atomic_t nr_dmabufs;		/* live dma-bufs of the pin */
	pid_t tgid;			/* of the pinning process, init pid ns */
	u32 id;
	unsigned long start;
	unsigned long nr_pages;
	unsigned long nr_pinned;	/* pages in @pv holding a pin */
	bool writable;
	struct hmirror_page_vec pv;
	struct work_struct event_work;
	wait_queue_head_t wq;		/* pollers of the pin fd */

	spinlock_t lock;		/* protects the fields below */
	enum hmirror_pin_phase phase;
	bool raced;			/* invalidated while PINNING */
	u32 cause;			/* HMIRROR_INVAL_* */
	unsigned long inval_start;
	unsigned long inval_end;
};

/* cyclic, as space ids: an invalidation event never names a newer pin */
static DEFINE_XARRAY_ALLOC(hmirror_pin_ids);
static u32 hmirror_pin_next_id;		/* the xarray's lock */
static struct workqueue_struct *hmirror_pin_wq;

static u32 hmirror_inval_cause(enum mmu_notifier_event event)
{
	switch (event) {
	case MMU_NOTIFY_UNMAP:
		return HMIRROR_INVAL_UNMAP;
	case MMU_NOTIFY_CLEAR:
		return HMIRROR_INVAL_CLEAR;
	case MMU_NOTIFY_RELEASE:
		return HMIRROR_INVAL_RELEASE;
	case MMU_NOTIFY_MIGRATE:
		return HMIRROR_INVAL_MIGRATE;
	case MMU_NOTIFY_EXCLUSIVE:
		return HMIRROR_INVAL_EXCLUSIVE;
	default:
		return HMIRROR_INVAL_OTHER;
	}
}

/*
 * Whether after @range the page tables may map other frames than the
 * pinned ones.  Protection changes leave the same frames mapped: mprotect,
 * the write-protect fork applies to the parent's private mappings (pinned
 * anonymous pages are copied for the child at fork, never shared), the
 * soft-dirty clear, userfaultfd write-protect, and this module's guards
 * (wp_shared_mapping_range).  A device migration that this module started
 * would carry its owner cookie; it starts none, so every MIGRATE counts.
 */
static bool hmirror_range_stales_frames(const struct mmu_notifier_range *range)
{
	switch (range->event) {
	case MMU_NOTIFY_PROTECTION_VMA:
	case MMU_NOTIFY_PROTECTION_PAGE:
	case MMU_NOTIFY_SOFT_DIRTY:
		return false;
	case MMU_NOTIFY_MIGRATE:
		return range->owner != &hmirror_pin_ids;
	default:
		return true;
	}
}

static void hmirror_pin_get(struct hmirror_pin *pin)
{
	kref_get(&pin->ref);
}

static void hmirror_pin_unpin_pages(struct hmirror_pin *pin)
{
	unsigned long i, n;

	for (i = 0; i < pin->nr_pinned; i += n) {
		n = min_t(unsigned long, pin->nr_pinned - i,
			  HMIRROR_PV_PER_CHUNK - i % HMIRROR_PV_PER_CHUNK);
		unpin_user_pages_dirty_lock(hmirror_pv_slot(&pin->pv, i), n,
					    pin->writable);
	}
	pin->nr_pinned = 0;
}

/*
 * Charge the pin to the caller: the per-user count, and RLIMIT_MEMLOCK
 * for the pages.  The page array is charged when it is allocated.
 */
static int hmirror_pin_charge(struct hmirror_pin *pin)
{
	int ret;

	pin->user = hmirror_user_get();
	if (!pin->user)
		return -ENOMEM;
	ret = hmirror_user_count_inc(&pin->user->nr_pins, max_pins_per_user);
	if (ret)
		goto err_user;
	pin->locked_cred = hmirror_memlock_charge(pin->nr_pages);
	if (IS_ERR(pin->locked_cred)) {
		ret = PTR_ERR(pin->locked_cred);
		goto err_count;
	}
	atomic64_add(pin->nr_pages, &pin->mm->pinned_vm);
	return 0;

err_count:
	atomic_dec(&pin->user->nr_pins);
err_user:
	hmirror_user_put(pin->user);
	return ret;
}

static void hmirror_pin_uncharge(struct hmirror_pin *pin)
{
	atomic64_sub(pin->nr_pages, &pin->mm->pinned_vm);
	hmirror_memlock_uncharge(pin->locked_cred, pin->nr_pages);
	atomic_dec(&pin->user->nr_pins);
	hmirror_user_put(pin->user);
}

static void hmirror_pin_release(struct kref *ref)
{
	struct hmirror_pin *pin = container_of(ref, struct hmirror_pin, ref);

	mmu_interval_notifier_remove(&pin->notifier);
	hmirror_pin_unpin_pages(pin);
	hmirror_pv_free(&pin->pv);
	hmirror_pin_uncharge(pin);
	mmdrop(pin->mm);
	hmirror_count_add(HMIRROR_STAT_PINS, -1);
	hmirror_count_add(HMIRROR_STAT_PINNED_BYTES,
			  -(s64)(pin->nr_pages << PAGE_SHIFT));
	xa_erase(&hmirror_pin_ids, pin->id);
	kfree(pin);
}

static void hmirror_pin_put(struct hmirror_pin *pin)
{
	if (pin)
		kref_put(&pin->ref, hmirror_pin_release);
}

static void hmirror_pin_event_work(struct work_struct *work)
{
	struct hmirror_pin *pin = container_of(work, struct hmirror_pin,
					       event_work);
	unsigned long start, end;
	u32 cause;

	spin_lock(&pin->lock);
	start = pin->inval_start;
	end = pin->inval_end;
	cause = pin->cause;
	spin_unlock(&pin->lock);

	hmirror_nl_range_invalidated(pin->id, pin->tgid, start, end - start,
				     cause);
	hmirror_pin_put(pin);
}

static bool hmirror_pin_invalidate(struct mmu_interval_notifier *mni,
				   const struct mmu_notifier_range *range,
				   unsigned long cur_seq)
{
	struct hmirror_pin *pin = container_of(mni, struct hmirror_pin,
					       notifier);
	unsigned long end = pin->start + (pin->nr_pages << PAGE_SHIFT);
	bool first = false;
	u32 cause;

	if (!hmirror_range_stales_frames(range)) {
		hmirror_count_inc(HMIRROR_STAT_INVAL_IGNORED);
		return true;
	}
	cause = hmirror_inval_cause(range->event);

	/* Never sleeps, so the non-blockable case (OOM reaper) is fine. */
	spin_lock(&pin->lock);
	mmu_interval_set_seq(mni, cur_seq);
	if (pin->phase == HMIRROR_PIN_PINNING) {
		pin->raced = true;
	} else if (pin->phase == HMIRROR_PIN_LIVE) {
		pin->phase = HMIRROR_PIN_DEAD;
		pin->cause = cause;
		pin->inval_start = max(range->start, pin->start);
		pin->inval_end = min(range->end, end);
		first = true;
	}
	spin_unlock(&pin->lock);

	if (first) {
		/* HMIRROR_STAT_INVAL_* are in HMIRROR_INVAL_*'s order */
		hmirror_count_inc(HMIRROR_STAT_INVAL_UNMAP + cause -
				  HMIRROR_INVAL_UNMAP);
		wake_up_interruptible_poll(&pin->wq, EPOLLPRI);
		/*
		 * The last reference may be gone already: the release is then
		 * waiting in mmu_interval_notifier_remove() for this callback
		 * to return, and nobody is left to tell.
		 */
		if (kref_get_unless_zero(&pin->ref) &&
		    !queue_work(hmirror_pin_wq, &pin->event_work))
			hmirror_pin_put(pin);
	}
	return true;
}

static const struct mmu_interval_notifier_ops hmirror_pin_mn_ops = {
	.invalidate = hmirror_pin_invalidate,
};

/* Only anonymous and shmem (memfd) memory; never a space of this module. */
static int hmirror_pin_check_vmas(struct mm_struct *mm, unsigned long start,
				  unsigned long end)
{
	struct vm_area_struct *vma;
	unsigned long addr = start;

	mmap_assert_locked(mm);
	while (addr < end) {
		vma = find_vma(mm, addr);
		if (!vma || vma->vm_start > addr)
			return -EFAULT;
		if (vma->vm_flags & (VM_IO | VM_PFNMAP))
			return -EINVAL;
		if (!vma_is_anonymous(vma) &&
		    !(vma->vm_file && shmem_file(vma->vm_file)))
			return -EINVAL;
		addr = vma->vm_end;
	}
	return 0;
}

/*
 * Check the mappings under the mmap lock, then pin without it through the
 * lockless fast path (which falls back to the slow one by itself).  The
 * notifier is live before the check: a mapping changed after it (munmap,
 * MAP_FIXED over it, mremap) invalidates the range, which makes the
 * caller pin again and so check again.
 */
static int hmirror_pin_pages(struct hmirror_pin *pin)
{
	unsigned int gup_flags = FOLL_LONGTERM |
				 (pin->writable ? FOLL_WRITE : 0);
	struct mm_struct *mm = pin->mm;
	unsigned long n;
	int got, ret;

	mmap_read_lock(mm);
	ret = hmirror_pin_check_vmas(mm, pin->start,
				     pin->start + (pin->nr_pages << PAGE_SHIFT));
	mmap_read_unlock(mm);
	while (!ret && pin->nr_pinned < pin->nr_pages) {
		n = min_t(unsigned long, pin->nr_pages - pin->nr_pinned,
			  HMIRROR_PIN_BATCH -
			  pin->nr_pinned % HMIRROR_PV_PER_CHUNK);
		got = pin_user_pages_fast(pin->start +
					  (pin->nr_pinned << PAGE_SHIFT), n,
					  gup_flags,
					  hmirror_pv_slot(&pin->pv,
							  pin->nr_pinned));
		if (got <= 0) {
			ret = got ? got : -EFAULT;
			break;
		}
		pin->nr_pinned += got;
		if (fatal_signal_pending(current)) {
			ret = -EINTR;
			break;
		}
		cond_resched();
	}
	return ret;
}

__poll_t hmirror_pin_poll(struct file *file, poll_table *wait)
{
	struct hmirror_pin *pin = file->private_data;
	__poll_t mask = 0;

	poll_wait(file, &pin->wq, wait);
	spin_lock(&pin->lock);
	if (pin->phase == HMIRROR_PIN_DEAD)
		mask = EPOLLPRI;
	spin_unlock(&pin->lock);
	return mask;
}

/* HMIRROR_IOC_PIN_STATE (pin fd); the dispatcher copies @data */
long hmirror_ioctl_pin_state(struct file *file, void *data)
{
	struct hmirror_pin *pin = file->private_data;
	struct hmirror_pin_state *st = data;

	if (st->flags || st->__pad)
		return -EINVAL;
	st->addr = pin->start;
	st->size = (u64)pin->nr_pages << PAGE_SHIFT;
	st->id = pin->id;
	st->__pad2 = 0;
	spin_lock(&pin->lock);
	if (pin->phase == HMIRROR_PIN_DEAD) {
		st->state = HMIRROR_PIN_STATE_INVALIDATED;
		st->cause = pin->cause;
		st->inval_addr = pin->inval_start;
		st->inval_size = pin->inval_end - pin->inval_start;
	} else {
		st->state = HMIRROR_PIN_STATE_ACTIVE;
		st->cause = HMIRROR_INVAL_NONE;
		st->inval_addr = 0;
		st->inval_size = 0;
	}
	spin_unlock(&pin->lock);
	return 0;
}

static void hmirror_pin_dmabuf_release(void *owner)
{
	struct hmirror_pin *pin = owner;

	atomic_dec(&pin->nr_dmabufs);
	hmirror_pin_put(pin);
}

/* HMIRROR_IOC_EXPORT_DMABUF on a pin fd; the dispatcher copies @data */
long hmirror_ioctl_pin_export(struct file *file, void *data)
{
	struct hmirror_pin *pin = file->private_data;
	struct hmirror_dmabuf_export *ex = data;
	struct hmirror_page_vec pv;
	unsigned long first, count, i;
	int ret;

	ret = hmirror_dmabuf_check(ex, (u64)pin->nr_pages << PAGE_SHIFT,
				   &first, &count);
	if (ret)
		return ret;
	if (!pin->writable && !(ex->flags & HMIRROR_DMABUF_RDONLY))
		return -EACCES;
	ret = hmirror_user_count_inc(&pin->nr_dmabufs,
				     hmirror_max_dmabufs_per_space);
	if (ret)
		return ret;
	ret = hmirror_pv_alloc(&pv, count, pin->user);
	if (ret) {
		atomic_dec(&pin->nr_dmabufs);
		return ret;
	}
	for (i = 0; i < count; i++) {
		*hmirror_pv_slot(&pv, i) = hmirror_pv_page(&pin->pv, first + i);
		get_page(*hmirror_pv_slot(&pv, i));
	}

	hmirror_pin_get(pin);
	ret = hmirror_dmabuf_export(&pv, ex->flags, hmirror_pin_dmabuf_release,
				    pin);
	if (ret < 0)
		return ret;	/* the export put the pages, the pin and the count */
	ex->fd = ret;
	return 0;
}

int hmirror_pin_file_release(struct inode *inode, struct file *file)
{
	hmirror_pin_put(file->private_data);
	return 0;
}

/* Pin, registering the notifier first; redo when an invalidation raced. */
static int hmirror_pin_establish(struct hmirror_pin *pin)
{
	unsigned int tries;
	bool raced;
	int ret;

	ret = mmu_interval_notifier_insert(&pin->notifier, pin->mm, pin->start,
					   pin->nr_pages << PAGE_SHIFT,
					   &hmirror_pin_mn_ops);
	if (ret)
		return ret;

	for (tries = 0; tries < HMIRROR_PIN_TRIES; tries++) {
		ret = hmirror_pin_pages(pin);
		if (ret)
			break;
		spin_lock(&pin->lock);
		raced = pin->raced;
		pin->raced = false;
		if (!raced)
			pin->phase = HMIRROR_PIN_LIVE;
		spin_unlock(&pin->lock);
		if (!raced)
			return 0;
		hmirror_count_inc(HMIRROR_STAT_PIN_RETRIES);
		hmirror_pin_unpin_pages(pin);
	}
	if (!ret)
		ret = -EAGAIN;
	hmirror_pin_unpin_pages(pin);
	mmu_interval_notifier_remove(&pin->notifier);
	return ret;
}

/* HMIRROR_IOC_PIN (dev); the dispatcher copies @req in and out */
long hmirror_pin_create(struct hmirror_pin_create *req,
			const struct file_operations *fops)
{
	struct hmirror_pin *pin;
	unsigned long nr_pages;
	struct file *pfile;
	u64 end;
	int fd, ret;

	if ((req->flags & ~HMIRROR_PIN_FLAGS) || req->__pad || req->fd ||
	    req->id)
		return -EINVAL;
	if (!req->size || !IS_ALIGNED(req->addr, PAGE_SIZE) ||
	    !IS_ALIGNED(req->size, PAGE_SIZE) ||
	    check_add_overflow(req->addr, req->size, &end) || end > TASK_SIZE)
		return -EINVAL;
	if (req->size > (u64)max_pin_mib << 20) {
		ret = -ENOMEM;
		goto fail_count;
	}
	nr_pages = req->size >> PAGE_SHIFT;

	pin = kzalloc(sizeof(*pin), GFP_KERNEL_ACCOUNT);
	if (!pin) {
		ret = -ENOMEM;
		goto fail_count;
	}
	ret = xa_alloc_cyclic(&hmirror_pin_ids, &pin->id, pin,
			      XA_LIMIT(1, U32_MAX), &hmirror_pin_next_id,
			      GFP_KERNEL);
	if (ret < 0)
		goto fail_id;
	kref_init(&pin->ref);
	spin_lock_init(&pin->lock);
	init_waitqueue_head(&pin->wq);
	INIT_WORK(&pin->event_work, hmirror_pin_event_work);
	pin->phase = HMIRROR_PIN_PINNING;
	pin->start = req->addr;
	pin->nr_pages = nr_pages;
	pin->writable = req->flags & HMIRROR_PIN_WRITE;
	pin->tgid = task_tgid_nr(current);
	pin->mm = current->mm;
	mmgrab(pin->mm);

	/* the limits first: -EMFILE or -ENOMEM past them */
	ret = hmirror_pin_charge(pin);
	if (ret)
		goto fail_account;
	ret = hmirror_pv_alloc(&pin->pv, nr_pages, pin->user);
	if (ret)
		goto fail_pv;
	ret = hmirror_pin_establish(pin);
	if (ret)
		goto fail_pin;

	fd = get_unused_fd_flags(req->flags & HMIRROR_PIN_CLOEXEC ? O_CLOEXEC : 0);
	if (fd < 0) {
		ret = fd;
		goto fail_fd;
	}
	pfile = anon_inode_getfile("[hmirror-pin]", fops, pin, O_RDWR);
	if (IS_ERR(pfile)) {
		ret = PTR_ERR(pfile);
		goto fail_file;
	}

	/* from here the pin file's release undoes everything */
	hmirror_count_inc(HMIRROR_STAT_PINS);
	hmirror_count_add(HMIRROR_STAT_PINNED_BYTES, req->size);
	hmirror_count_inc(HMIRROR_STAT_PINS_CREATED);
	fd_install(fd, pfile);
	req->fd = fd;
	req->id = pin->id;
	return 0;

fail_file:
	put_unused_fd(fd);
fail_fd:
	mmu_interval_notifier_remove(&pin->notifier);
	hmirror_pin_unpin_pages(pin);
fail_pin:
	hmirror_pv_free(&pin->pv);
fail_pv:
	hmirror_pin_uncharge(pin);
fail_account:
	mmdrop(pin->mm);
	xa_erase(&hmirror_pin_ids, pin->id);
fail_id:
	kfree(pin);
fail_count:
	hmirror_count_inc(HMIRROR_STAT_PINS_FAILED);
	return ret;
}

int hmirror_pin_init(void)
{
	hmirror_pin_wq = alloc_workqueue("hmirror_pin", WQ_UNBOUND, 0);
	return hmirror_pin_wq ? 0 : -ENOMEM;
}

void hmirror_pin_exit(void)
{
	/* Every pin fd and dma-buf holds a module reference: none is left. */
	destroy_workqueue(hmirror_pin_wq);
	xa_destroy(&hmirror_pin_ids);
}
