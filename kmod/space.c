// SPDX-License-Identifier: GPL-2.0
/*
 * hmirror guest spaces: module-owned pages behind a file of a private
 * pseudo filesystem, its mappings (guarded CPU mapping, device view,
 * generation array), and its lifetime.
 */
#define pr_fmt(fmt) KBUILD_MODNAME ": " fmt

#include <linux/file.h>
#include <linux/fs.h>
#include <linux/gfp.h>
#include <linux/highmem.h>
#include <linux/memcontrol.h>
#include <linux/mm.h>
#include <linux/module.h>
#include <linux/mount.h>
#include <linux/pagemap.h>
#include <linux/pid.h>
#include <linux/poll.h>
#include <linux/pseudo_fs.h>
#include <linux/sched/mm.h>
#include <linux/sched/signal.h>
#include <linux/slab.h>
#include <linux/vmalloc.h>
#include <linux/xarray.h>

#include "hmirror.h"

#define HMIRROR_FS_MAGIC	0x686d6972	/* "hmir" */
#define HMIRROR_VIEW_PGOFF	(HMIRROR_MMAP_VIEW >> PAGE_SHIFT)
#define HMIRROR_GENS_PGOFF	(HMIRROR_MMAP_GENERATIONS >> PAGE_SHIFT)

static struct vfsmount *hmirror_mnt;
static LIST_HEAD(hmirror_owners);	/* hmirror_lock */
/*
 * Space ids, allocated cyclically (hmirror_lock): an id comes back only
 * after 2^32 creations, so a batched event naming a destroyed space is
 * never taken for a newer one.
 */
static DEFINE_XARRAY_ALLOC(hmirror_space_ids);
static u32 hmirror_space_next_id;	/* hmirror_lock */

static unsigned long hmirror_max_space_bytes = 64UL << 30;
module_param_named(max_space_bytes, hmirror_max_space_bytes, ulong, 0644);
MODULE_PARM_DESC(max_space_bytes, "Largest space, bytes (default 64 GiB)");

static unsigned int hmirror_max_spaces_per_process = 64;
module_param_named(max_spaces_per_process, hmirror_max_spaces_per_process,
		   uint, 0644);
MODULE_PARM_DESC(max_spaces_per_process,
		 "Live spaces one process may have created (default 64)");

/* the limits that hold: a forked child or another process is the same user */
static unsigned int hmirror_max_spaces_per_user = 256;
module_param_named(max_spaces_per_user, hmirror_max_spaces_per_user,
		   uint, 0644);
MODULE_PARM_DESC(max_spaces_per_user,
		 "Live spaces the processes of one user may have created (default 256)");

static unsigned long hmirror_max_space_chunks = 1UL << 22;
module_param_named(max_space_chunks, hmirror_max_space_chunks, ulong, 0644);
MODULE_PARM_DESC(max_space_chunks,
		 "Most chunks in one space, bounds per-chunk metadata (default 4Mi)");

static void hmirror_vma_flags_set(struct vm_area_struct *vma, vm_flags_t set,
				  vm_flags_t clear)
{
#ifdef HAVE_VM_FLAGS_SET
	vm_flags_mod(vma, set, clear);
#else
	vma->vm_flags = (vma->vm_flags | set) & ~clear;
#endif
}

/* ---- pages -------------------------------------------------------------- */

/*
 * Never the OOM killer on a space's behalf: faults and dma-buf exports
 * reclaim hard and then fail (__GFP_RETRY_MAYFAIL), POPULATE gives up
 * early (__GFP_NORETRY).  Charged to the creator's memory cgroup.
 */
static struct page *hmirror_alloc_page(struct hmirror_space *s, gfp_t how)
{
	struct mem_cgroup *old;
	struct page *page;

	old = set_active_memcg(s->memcg);
	page = alloc_page(GFP_HIGHUSER | __GFP_ZERO | __GFP_ACCOUNT |
			  __GFP_NOWARN | how);
	set_active_memcg(old);
	return page;
}

static struct page *__hmirror_space_page(struct hmirror_space *s,
					 pgoff_t idx, gfp_t how)
{
	struct page *page, *cur;
	int ret;

	page = xa_load(&s->pages, idx);
	if (page)
		return page;

	/* the creator pays, whoever touches the page */
	ret = hmirror_user_charge(s->user, PAGE_SIZE);
	if (ret)
		return ERR_PTR(ret);
	page = hmirror_alloc_page(s, how);
	if (!page) {
		ret = -ENOMEM;
		goto err_uncharge;
	}
	cur = xa_cmpxchg(&s->pages, idx, NULL, page, GFP_KERNEL_ACCOUNT);
	if (xa_is_err(cur) || cur) {
		__free_page(page);
		hmirror_user_uncharge(s->user, PAGE_SIZE);
		/* an error, or the page another fault put there first */
		return xa_is_err(cur) ? ERR_PTR(xa_err(cur)) : cur;
	}
	hmirror_stat_inc(s, HMIRROR_STAT_PAGES_RESIDENT);
	return page;

err_uncharge:
	hmirror_user_uncharge(s->user, PAGE_SIZE);
	return ERR_PTR(ret);
}

/*
 * The page at @idx, allocated on first use; ERR_PTR(-ENOMEM) past the
 * user's limit or when memory is short.  Returns it without an extra
 * reference: pages live until the space is freed.
 */
struct page *hmirror_space_page(struct hmirror_space *s, pgoff_t idx)
{
	return __hmirror_space_page(s, idx, __GFP_RETRY_MAYFAIL);
}

static int hmirror_space_populate(struct hmirror_space *s)
{
	struct page *page;
	pgoff_t idx;

	for (idx = 0; idx < s->nr_pages; idx++) {
		if (fatal_signal_pending(current))
			return -EINTR;
		page = __hmirror_space_page(s, idx, __GFP_NORETRY);
		if (IS_ERR(page))
			return PTR_ERR(page);
		cond_resched();
	}
	return 0;
}

/* ---- faults ------------------------------------------------------------- */

static vm_fault_t hmirror_fault_common(struct vm_fault *vmf, pgoff_t base,
				       enum hmirror_stat kind)
{
	struct hmirror_space *s = vmf->vma->vm_private_data;
	pgoff_t idx = vmf->pgoff - base;
	struct page *page;

	if (vmf->pgoff < base || idx >= s->nr_pages) {
		hmirror_stat_inc(s, HMIRROR_STAT_FAULT_SIGBUS);
		return VM_FAULT_SIGBUS;
	}
	page = hmirror_space_page(s, idx);
	/*
	 * Not VM_FAULT_OOM: no OOM kill is pending for the fault to wait
	 * on, so the core would retry it in a loop (pagefault_out_of_memory).
	 * A space out of memory is like a full tmpfs.
	 */
	if (IS_ERR(page)) {
		hmirror_stat_inc(s, HMIRROR_STAT_FAULT_OOM);
		return VM_FAULT_SIGBUS;
	}
	hmirror_stat_inc(s, kind);
	get_page(page);
	vmf->page = page;
	return 0;
}

static vm_fault_t hmirror_guard_fault(struct vm_fault *vmf)
{
	return hmirror_fault_common(vmf, 0, (vmf->flags & FAULT_FLAG_WRITE) ?
				    HMIRROR_STAT_FAULT_WRITE :
				    HMIRROR_STAT_FAULT_READ);
}

static vm_fault_t hmirror_view_fault(struct vm_fault *vmf)
{
	return hmirror_fault_common(vmf, HMIRROR_VIEW_PGOFF,
				    HMIRROR_STAT_FAULT_VIEW);
}

#ifdef HAVE_FAULT_FLAG_VMA_LOCK
/*
 * Without ->map_pages, a kernel that handles faults under the per-VMA lock
 * retries every fault of this VMA (and every guard trip) under the mmap
 * lock (vmf_can_call_fault()).  Mapping nothing here is allowed: the
 * fault then goes on to ->fault, still under the VMA lock.
 */
static vm_fault_t hmirror_guard_map_pages(struct vm_fault *vmf,
					  pgoff_t start_pgoff,
					  pgoff_t end_pgoff)
{
	struct hmirror_space *s = vmf->vma->vm_private_data;

	hmirror_stat_inc(s, HMIRROR_STAT_FAULT_MAP_PAGES);
	return 0;
}
#endif

static void hmirror_vm_open(struct vm_area_struct *vma)
{
	struct hmirror_space *s = vma->vm_private_data;

	hmirror_stat_inc(s, HMIRROR_STAT_MAPPINGS);
}

static void hmirror_vm_close(struct vm_area_struct *vma)
{
	struct hmirror_space *s = vma->vm_private_data;

	hmirror_stat_add(s, HMIRROR_STAT_MAPPINGS, -1);
}

static const struct vm_operations_struct hmirror_guard_vm_ops = {
	.open = hmirror_vm_open,
	.close = hmirror_vm_close,
	.fault = hmirror_guard_fault,
#ifdef HAVE_FAULT_FLAG_VMA_LOCK
	.map_pages = hmirror_guard_map_pages,
#endif
	.page_mkwrite = hmirror_guard_page_mkwrite,
};

/* no ->page_mkwrite: no write-notify, so FOLL_LONGTERM | FOLL_WRITE works */
static const struct vm_operations_struct hmirror_view_vm_ops = {
	.open = hmirror_vm_open,
	.close = hmirror_vm_close,
	.fault = hmirror_view_fault,
};

static const struct vm_operations_struct hmirror_gens_vm_ops = {
	.open = hmirror_vm_open,
	.close = hmirror_vm_close,
};

/* ---- the space file ----------------------------------------------------- */

static int hmirror_mmap_window(struct vm_area_struct *vma, pgoff_t base,
			       pgoff_t nr_pages)
{
	unsigned long nr = vma_pages(vma);

	if (vma->vm_pgoff < base || vma->vm_pgoff - base >= nr_pages ||
	    nr > nr_pages - (vma->vm_pgoff - base))
		return -EINVAL;
	return 0;
}

int hmirror_space_mmap(struct file *file, struct vm_area_struct *vma)
{
	struct hmirror_space *s = file->private_data;
	int ret;

	if (vma->vm_pgoff >= HMIRROR_GENS_PGOFF) {
		if (hmirror_mmap_window(vma, HMIRROR_GENS_PGOFF,
					s->gens_bytes >> PAGE_SHIFT))
			return -EINVAL;
		if (vma->vm_flags & VM_WRITE)
			return -EPERM;
		hmirror_vma_flags_set(vma, VM_DONTEXPAND, VM_MAYWRITE);
		ret = remap_vmalloc_range(vma, s->gens,
					  vma->vm_pgoff - HMIRROR_GENS_PGOFF);
		if (ret)
			return ret;
		vma->vm_ops = &hmirror_gens_vm_ops;
	} else {
		bool view = vma->vm_pgoff >= HMIRROR_VIEW_PGOFF;

		if (hmirror_mmap_window(vma, view ? HMIRROR_VIEW_PGOFF : 0,
					s->nr_pages))
			return -EINVAL;
		/* a private mapping would copy on write, behind the guard */
		if (!(vma->vm_flags & VM_SHARED))
			return -EINVAL;
		hmirror_vma_flags_set(vma, VM_DONTEXPAND | VM_DONTDUMP, 0);
		vma->vm_ops = view ? &hmirror_view_vm_ops :
				     &hmirror_guard_vm_ops;
		if (view)
			WRITE_ONCE(s->view_mapped, true);
	}
	vma->vm_private_data = s;
	hmirror_vm_open(vma);
	return 0;
}

__poll_t hmirror_space_poll(struct file *file, poll_table *wait)
{
	struct hmirror_space *s = file->private_data;

	poll_wait(file, &s->wq, wait);
	return READ_ONCE(s->nr_written) ? EPOLLIN | EPOLLRDNORM : 0;
}

int hmirror_space_release(struct inode *inode, struct file *file)
{
	struct hmirror_space *s = file->private_data;

	s->file = NULL;
	s->mapping = NULL;
	hmirror_space_put(s);
	return 0;
}

/* ---- lifetime ----------------------------------------------------------- */

static void hmirror_owner_put(struct hmirror_owner *o)
{
	lockdep_assert_held(&hmirror_lock);
	if (--o->nr_spaces)
		return;
	list_del(&o->node);
	put_pid(o->tgid);
	kfree(o);
}

/* the calling process's owner entry, with a space counted; hmirror_lock */
static int hmirror_owner_get(struct hmirror_owner **ret)
{
	struct pid *tgid = task_tgid(current);
	struct hmirror_owner *o;

	lockdep_assert_held(&hmirror_lock);
	list_for_each_entry(o, &hmirror_owners, node) {
		if (o->tgid != tgid)
			continue;
		if (o->nr_spaces >= hmirror_max_spaces_per_process)
			return -EMFILE;
		o->nr_spaces++;
		*ret = o;
		return 0;
	}
	if (!hmirror_max_spaces_per_process)
		return -EMFILE;
	o = kzalloc(sizeof(*o), GFP_KERNEL);
	if (!o)
		return -ENOMEM;
	o->tgid = get_pid(tgid);
	o->nr_spaces = 1;
	list_add(&o->node, &hmirror_owners);
	*ret = o;
	return 0;
}

static void hmirror_space_free(struct kref *kref)
{
	struct hmirror_space *s = container_of(kref, struct hmirror_space, kref);
	unsigned long idx, nr = 0;
	struct page *page;

	mutex_lock(&hmirror_lock);
	list_del(&s->node);
	hmirror_nl_space_event(s, HMIRROR_NL_SPACE_DEL);
	hmirror_owner_put(s->owner);
	xa_erase(&hmirror_space_ids, s->id);
	mutex_unlock(&hmirror_lock);

	xa_for_each(&s->pages, idx, page) {
		put_page(page);
		nr++;
		cond_resched();
	}
	xa_destroy(&s->pages);
	hmirror_stat_add(s, HMIRROR_STAT_PAGES_RESIDENT, -(s64)nr);
	hmirror_stat_add(s, HMIRROR_STAT_SPACE_BYTES, -(s64)s->size);
	hmirror_count_add(HMIRROR_STAT_SPACES, -1);

	hmirror_guard_free(s);
	if (s->memcg)
		mem_cgroup_put(s->memcg);
	hmirror_user_uncharge(s->user, nr * PAGE_SIZE + s->meta_bytes);
	atomic_dec(&s->user->nr_spaces);
	hmirror_user_put(s->user);
	free_percpu(s->stats);
	kfree(s);
}

void hmirror_space_get(struct hmirror_space *s)
{
	kref_get(&s->kref);
}

void hmirror_space_put(struct hmirror_space *s)
{
	if (s)
		kref_put(&s->kref, hmirror_space_free);
}

static int hmirror_space_check(const struct hmirror_create *args,
			       unsigned int *ret_shift)
{
	unsigned int shift = args->chunk_shift ?: HMIRROR_DEFAULT_CHUNK_SHIFT;

	if (args->flags & ~(HMIRROR_CREATE_POPULATE | HMIRROR_CREATE_NONBLOCK))
		return -EINVAL;
	if (shift < PAGE_SHIFT || shift > HMIRROR_MAX_CHUNK_SHIFT)
		return -EINVAL;
	if (!args->size || !IS_ALIGNED(args->size, 1ULL << shift))
		return -EINVAL;
	if (args->size > hmirror_max_space_bytes ||
	    args->size >= HMIRROR_MAX_SPACE_BYTES ||
	    (args->size >> shift) > hmirror_max_space_chunks)
		return -EFBIG;
	*ret_shift = shift;
	return 0;
}

/* register @s: per-process limit, owner, id; hmirror_lock */
static int hmirror_space_register(struct hmirror_space *s)
{
	int ret;

	lockdep_assert_held(&hmirror_lock);
	ret = hmirror_owner_get(&s->owner);
	if (ret)
		return ret;
	ret = xa_alloc_cyclic(&hmirror_space_ids, &s->id, s,
			      XA_LIMIT(1, U32_MAX), &hmirror_space_next_id,
			      GFP_KERNEL);
	if (ret < 0) {
		hmirror_owner_put(s->owner);
		return ret;
	}
	list_add_tail(&s->node, &hmirror_spaces);
	hmirror_nl_space_event(s, HMIRROR_NL_SPACE_NEW);
	hmirror_stat_add(s, HMIRROR_STAT_SPACE_BYTES, s->size);
	hmirror_count_inc(HMIRROR_STAT_SPACES);
	return 0;
}

/*
 * What a space costs beyond its pages: the struct, its counters (a copy
 * per CPU), and as guard.c allocates them three bitmaps, the clean
 * scratch bitmap and the generation array.
 */
static unsigned long hmirror_space_meta_bytes(const struct hmirror_space *s)
{
	unsigned long words = BITS_TO_LONGS(s->nr_chunks);

	return sizeof(*s) + nr_cpu_ids * sizeof(struct hmirror_stats) +
	       (2 * words + BITS_TO_LONGS(words)) * sizeof(long) +
	       BITS_TO_LONGS(HMIRROR_CLEAN_PAGES) * sizeof(long) +
	       PAGE_ALIGN(s->nr_chunks * sizeof(u64));
}

int hmirror_space_create(const struct hmirror_create *args,
			 const struct file_operations *fops,
			 struct hmirror_space **ret_space, int *ret_fd)
{
	struct hmirror_space *s;
	struct inode *inode;
	struct file *file;
	unsigned int shift;
	int fd, ret;

	ret = hmirror_space_check(args, &shift);
	if (ret)
		return ret;

	s = kzalloc(sizeof(*s), GFP_KERNEL_ACCOUNT);
	if (!s)
		return -ENOMEM;
	kref_init(&s->kref);
	s->size = args->size;
	s->chunk_shift = shift;
	s->chunk_page_shift = shift - PAGE_SHIFT;
	s->nr_chunks = args->size >> shift;
	s->nr_pages = args->size >> PAGE_SHIFT;
	xa_init(&s->pages);
	mutex_init(&s->arm_lock);
	spin_lock_init(&s->lock);
	init_waitqueue_head(&s->wq);
	INIT_LIST_HEAD(&s->node);
	s->stats = alloc_percpu_gfp(struct hmirror_stats, GFP_KERNEL_ACCOUNT);
	if (!s->stats) {
		ret = -ENOMEM;
		goto err_free;
	}

	s->user = hmirror_user_get();
	if (!s->user) {
		ret = -ENOMEM;
		goto err_free;
	}
	ret = hmirror_user_count_inc(&s->user->nr_spaces,
				     hmirror_max_spaces_per_user);
	if (ret)
		goto err_user;
	s->meta_bytes = hmirror_space_meta_bytes(s);
	ret = hmirror_user_charge(s->user, s->meta_bytes);
	if (ret)
		goto err_count;
	ret = hmirror_guard_alloc(s);
	if (ret)
		goto err_charge;

	mutex_lock(&hmirror_lock);
	ret = hmirror_space_register(s);
	mutex_unlock(&hmirror_lock);
	if (ret)
		goto err_guard;
	/* from here on the kref owns everything: errors put it */

	s->memcg = get_mem_cgroup_from_mm(current->mm);
	if (args->flags & HMIRROR_CREATE_POPULATE) {
		ret = hmirror_space_populate(s);
		if (ret)
			goto err_put;
	}

	fd = get_unused_fd_flags(O_CLOEXEC);
	if (fd < 0) {
		ret = fd;
		goto err_put;
	}
	inode = new_inode(hmirror_mnt->mnt_sb);
	if (!inode) {
		ret = -ENOMEM;
		goto err_fd;
	}
	inode->i_ino = get_next_ino();
	/*
	 * No file type, as anon inodes: truncate(2) and ftruncate(2) refuse
	 * it (EINVAL).  A space's size is fixed at create; a truncate would
	 * unmap every window of it, the generation array included.
	 */
	inode->i_mode = 0600;
	inode->i_size = s->size;
	file = alloc_file_pseudo(inode, hmirror_mnt, "[hmirror-space]",
				 O_RDWR | ((args->flags & HMIRROR_CREATE_NONBLOCK) ?
					   O_NONBLOCK : 0),
				 fops);
	if (IS_ERR(file)) {
		ret = PTR_ERR(file);
		iput(inode);
		goto err_fd;
	}
	/* alloc_file_pseudo() takes no module reference; the last fput drops one */
	__module_get(THIS_MODULE);
	file->private_data = s;
	s->file = file;
	s->mapping = file->f_mapping;
	fd_install(fd, file);

	*ret_space = s;
	*ret_fd = fd;
	return 0;

err_fd:
	put_unused_fd(fd);
err_put:
	hmirror_space_put(s);
	return ret;
err_guard:
	hmirror_guard_free(s);
err_charge:
	hmirror_user_uncharge(s->user, s->meta_bytes);
err_count:
	atomic_dec(&s->user->nr_spaces);
err_user:
	hmirror_user_put(s->user);
err_free:
	free_percpu(s->stats);
	kfree(s);
	return ret;
}

/* ---- pseudo filesystem -------------------------------------------------- */

static int hmirror_fs_init_fs_context(struct fs_context *fc)
{
	return init_pseudo(fc, HMIRROR_FS_MAGIC) ? 0 : -ENOMEM;
}

/* no .owner: a mounted filesystem would hold the module forever */
static struct file_system_type hmirror_fs_type = {
	.name = "hmirror",
	.init_fs_context = hmirror_fs_init_fs_context,
	.kill_sb = kill_anon_super,
};

int hmirror_fs_init(void)
{
	hmirror_mnt = kern_mount(&hmirror_fs_type);
	return PTR_ERR_OR_ZERO(hmirror_mnt);
}

void hmirror_fs_exit(void)
{
	kern_unmount(hmirror_mnt);
}
