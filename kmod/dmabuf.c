// SPDX-License-Identifier: GPL-2.0
/*
 * hmirror: dma-buf export of a space, or of a pin, or a range of either.
 *
 * The dma-buf holds a reference on each of its pages (and on the pin it
 * came from), so it outlives the space or pin fd safely.  Importers get a
 * scatter list built from the page array (physically contiguous runs
 * merged) and mapped for their device; CPU mappings of the dma-buf insert
 * the page frames directly (VM_PFNMAP), so guards never see them and
 * nothing can long-term pin them.  Writes through the dma-buf are not
 * recorded by guards: it is the device's path, like the device view.
 */
#define pr_fmt(fmt) KBUILD_MODNAME ": " fmt

#include <linux/dma-buf.h>
#include <linux/dma-mapping.h>
#include <linux/fcntl.h>
#include <linux/list.h>
#include <linux/mm.h>
#include <linux/module.h>
#include <linux/mutex.h>
#include <linux/overflow.h>
#include <linux/sched/signal.h>
#include <linux/scatterlist.h>
#include <linux/slab.h>

#include <linux/hmirror.h>

#include "hmirror.h"

#ifdef HAVE_MODULE_IMPORT_NS_STRING
MODULE_IMPORT_NS("DMA_BUF");
#else
MODULE_IMPORT_NS(DMA_BUF);
#endif

unsigned int hmirror_max_dmabufs_per_space = 64;
module_param_named(max_dmabufs_per_space, hmirror_max_dmabufs_per_space,
		   uint, 0644);
MODULE_PARM_DESC(max_dmabufs_per_space,
		 "Live dma-bufs exported from one space or one pin (default 64)");

static unsigned long max_dmabuf_mib = 1024 * 1024;	/* 1 TiB */
module_param(max_dmabuf_mib, ulong, 0644);
MODULE_PARM_DESC(max_dmabuf_mib, "Largest dma-buf export, in MiB (default 1 TiB)");

static unsigned long hmirror_pv_bytes(unsigned long nr_pages)
{
	unsigned long nr_chunks = DIV_ROUND_UP(nr_pages, HMIRROR_PV_PER_CHUNK);

	return nr_chunks * (sizeof(struct page **) + PAGE_SIZE);
}

/*
 * A page array the user pays for: one byte in 512 of what it maps, which
 * at max_dmabuf_mib is 2 GiB of kernel memory, so it counts.
 */
int hmirror_pv_alloc(struct hmirror_page_vec *pv, unsigned long nr_pages,
		     struct hmirror_user *user)
{
	unsigned long nr_chunks = DIV_ROUND_UP(nr_pages, HMIRROR_PV_PER_CHUNK);
	unsigned long i;
	int ret;

	pv->nr_pages = nr_pages;
	pv->chunks = NULL;
	pv->user = NULL;
	ret = hmirror_user_charge(user, hmirror_pv_bytes(nr_pages));
	if (ret)
		return ret;
	hmirror_user_hold(user);
	pv->user = user;
	ret = -ENOMEM;
	pv->chunks = kvcalloc(nr_chunks, sizeof(*pv->chunks),
			      GFP_KERNEL_ACCOUNT);
	if (!pv->chunks)
		goto err_free;
	for (i = 0; i < nr_chunks; i++) {
		pv->chunks[i] = kzalloc(PAGE_SIZE, GFP_KERNEL_ACCOUNT);
		if (!pv->chunks[i])
			goto err_free;
		if (fatal_signal_pending(current)) {
			ret = -EINTR;
			goto err_free;
		}
		cond_resched();
	}
	return 0;

err_free:
	hmirror_pv_free(pv);
	return ret;
}

void hmirror_pv_free(struct hmirror_page_vec *pv)
{
	unsigned long i, nr_chunks = DIV_ROUND_UP(pv->nr_pages,
						  HMIRROR_PV_PER_CHUNK);

	if (pv->chunks) {
		for (i = 0; i < nr_chunks; i++)
			kfree(pv->chunks[i]);
		kvfree(pv->chunks);
		pv->chunks = NULL;
	}
	if (pv->user) {
		hmirror_user_uncharge(pv->user, hmirror_pv_bytes(pv->nr_pages));
		hmirror_user_put(pv->user);
		pv->user = NULL;
	}
}

static void hmirror_pv_put_pages(struct hmirror_page_vec *pv)
{
	unsigned long i;

	for (i = 0; i < pv->nr_pages; i++) {
		put_page(hmirror_pv_page(pv, i));
		if (i % HMIRROR_PV_PER_CHUNK == HMIRROR_PV_PER_CHUNK - 1)
			cond_resched();
	}
}

struct hmirror_dmabuf_map {
	struct list_head node;
	struct device *dev;
	struct sg_table sgt;
	enum dma_data_direction dir;
};

struct hmirror_dmabuf {
	struct hmirror_page_vec pv;	/* one reference held on each page */
	void (*release)(void *owner);
	void *owner;
	bool rdonly;
	struct mutex lock;		/* protects @maps */
	struct list_head maps;		/* struct hmirror_dmabuf_map, mapped */
};

/* pages [i, i + n) are physically contiguous, n as large as allowed */
static unsigned long hmirror_run(const struct hmirror_page_vec *pv,
				 unsigned long i, unsigned long max_pages)
{
	unsigned long pfn = page_to_pfn(hmirror_pv_page(pv, i)), n = 1;

	while (i + n < pv->nr_pages && n < max_pages &&
	       page_to_pfn(hmirror_pv_page(pv, i + n)) == pfn + n)
		n++;
	return n;
}

static int hmirror_build_sgt(struct hmirror_dmabuf *hb, struct device *dev,
			     struct sg_table *sgt)
{
	unsigned long max_pages = min_t(unsigned long,
					dma_get_max_seg_size(dev),
					UINT_MAX) >> PAGE_SHIFT;
	unsigned long i, n, nents = 0;
	struct scatterlist *sg;
	int ret;

	max_pages = max(max_pages, 1UL);
	for (i = 0; i < hb->pv.nr_pages; i += n) {
		n = hmirror_run(&hb->pv, i, max_pages);
		nents++;
	}
	if (nents > UINT_MAX)
		return -E2BIG;

	ret = sg_alloc_table(sgt, nents, GFP_KERNEL);
	if (ret)
		return ret;
	sg = sgt->sgl;
	for (i = 0; i < hb->pv.nr_pages; i += n) {
		n = hmirror_run(&hb->pv, i, max_pages);
		sg_set_page(sg, hmirror_pv_page(&hb->pv, i), n << PAGE_SHIFT, 0);
		sg = sg_next(sg);
	}
	return 0;
}

static struct sg_table *hmirror_dmabuf_map(struct dma_buf_attachment *at,
					   enum dma_data_direction dir)
{
	struct hmirror_dmabuf *hb = at->dmabuf->priv;
	struct hmirror_dmabuf_map *m;
	int ret;

	if (hb->rdonly && dir != DMA_TO_DEVICE)
		return ERR_PTR(-EACCES);
	m = kzalloc(sizeof(*m), GFP_KERNEL);
	if (!m)
		return ERR_PTR(-ENOMEM);
	ret = hmirror_build_sgt(hb, at->dev, &m->sgt);
	if (ret)
		goto fail_build;
	ret = dma_map_sgtable(at->dev, &m->sgt, dir, 0);
	if (ret)
		goto fail_map;
	m->dev = at->dev;
	m->dir = dir;
	mutex_lock(&hb->lock);
	list_add(&m->node, &hb->maps);
	mutex_unlock(&hb->lock);
	hmirror_count_inc(HMIRROR_STAT_DMABUF_MAPS);
	return &m->sgt;

fail_map:
	sg_free_table(&m->sgt);
fail_build:
	kfree(m);
	return ERR_PTR(ret);
}

static void hmirror_dmabuf_unmap(struct dma_buf_attachment *at,
				 struct sg_table *sgt,
				 enum dma_data_direction dir)
{
	struct hmirror_dmabuf *hb = at->dmabuf->priv;
	struct hmirror_dmabuf_map *m = container_of(sgt, struct hmirror_dmabuf_map,
						    sgt);

	mutex_lock(&hb->lock);
	list_del(&m->node);
	mutex_unlock(&hb->lock);
	dma_unmap_sgtable(at->dev, sgt, dir, 0);
	sg_free_table(sgt);
	kfree(m);
}

static int hmirror_dmabuf_sync(struct dma_buf *buf, bool for_cpu)
{
	struct hmirror_dmabuf *hb = buf->priv;
	struct hmirror_dmabuf_map *m;

	mutex_lock(&hb->lock);
	list_for_each_entry(m, &hb->maps, node) {
		if (for_cpu)
			dma_sync_sgtable_for_cpu(m->dev, &m->sgt, m->dir);
		else
			dma_sync_sgtable_for_device(m->dev, &m->sgt, m->dir);
	}
	mutex_unlock(&hb->lock);
	return 0;
}

static int hmirror_dmabuf_begin_cpu(struct dma_buf *buf,
				    enum dma_data_direction dir)
{
	return hmirror_dmabuf_sync(buf, true);
}

static int hmirror_dmabuf_end_cpu(struct dma_buf *buf,
				  enum dma_data_direction dir)
{
	return hmirror_dmabuf_sync(buf, false);
}

static vm_fault_t hmirror_dmabuf_fault(struct vm_fault *vmf)
{
	struct hmirror_dmabuf *hb = vmf->vma->vm_private_data;

	if (vmf->pgoff >= hb->pv.nr_pages)
		return VM_FAULT_SIGBUS;
	return vmf_insert_pfn(vmf->vma, vmf->address,
			      page_to_pfn(hmirror_pv_page(&hb->pv, vmf->pgoff)));
}

static const struct vm_operations_struct hmirror_dmabuf_vm_ops = {
	.fault = hmirror_dmabuf_fault,
};

static int hmirror_dmabuf_mmap(struct dma_buf *buf, struct vm_area_struct *vma)
{
	struct hmirror_dmabuf *hb = buf->priv;
	const vm_flags_t set = VM_PFNMAP | VM_DONTEXPAND | VM_DONTDUMP;

	/* a read-only file's MAP_SHARED mapping has VM_MAYSHARE only */
	if (!(vma->vm_flags & (VM_SHARED | VM_MAYSHARE)))
		return -EINVAL;
	if (hb->rdonly && (vma->vm_flags & VM_WRITE))
		return -EACCES;
#ifdef HAVE_VM_FLAGS_SET
	vm_flags_set(vma, set);
	if (hb->rdonly)
		vm_flags_clear(vma, VM_MAYWRITE);
#else
	vma->vm_flags |= set;
	if (hb->rdonly)
		vma->vm_flags &= ~VM_MAYWRITE;
#endif
	vma->vm_ops = &hmirror_dmabuf_vm_ops;
	vma->vm_private_data = hb;
	return 0;
}

static void hmirror_dmabuf_free(struct hmirror_dmabuf *hb)
{
	hmirror_pv_put_pages(&hb->pv);
	hmirror_pv_free(&hb->pv);
	if (hb->release)
		hb->release(hb->owner);
	mutex_destroy(&hb->lock);
	kfree(hb);
}

static void hmirror_dmabuf_release(struct dma_buf *buf)
{
	struct hmirror_dmabuf *hb = buf->priv;

	hmirror_count_add(HMIRROR_STAT_DMABUFS, -1);
	hmirror_count_add(HMIRROR_STAT_DMABUF_BYTES,
			  -(s64)(hb->pv.nr_pages << PAGE_SHIFT));
	hmirror_dmabuf_free(hb);
}

static const struct dma_buf_ops hmirror_dmabuf_ops = {
	.map_dma_buf		= hmirror_dmabuf_map,
	.unmap_dma_buf		= hmirror_dmabuf_unmap,
	.release		= hmirror_dmabuf_release,
	.mmap			= hmirror_dmabuf_mmap,
	.begin_cpu_access	= hmirror_dmabuf_begin_cpu,
	.end_cpu_access		= hmirror_dmabuf_end_cpu,
};

/*
 * Export @pv (its page references and the owner reference @release drops
 * are handed over, also on failure).  Returns the new dma-buf fd.
 */
int hmirror_dmabuf_export(struct hmirror_page_vec *pv, u32 flags,
			  void (*release)(void *owner), void *owner)
{
	DEFINE_DMA_BUF_EXPORT_INFO(exp_info);
	struct hmirror_dmabuf *hb;
	struct dma_buf *buf;
	int fd;

	hb = kzalloc(sizeof(*hb), GFP_KERNEL);
	if (!hb) {
		hmirror_pv_put_pages(pv);
		hmirror_pv_free(pv);
		if (release)
			release(owner);
		return -ENOMEM;
	}
	hb->pv = *pv;
	hb->release = release;
	hb->owner = owner;
	hb->rdonly = flags & HMIRROR_DMABUF_RDONLY;
	mutex_init(&hb->lock);
	INIT_LIST_HEAD(&hb->maps);

	exp_info.ops = &hmirror_dmabuf_ops;
	exp_info.size = hb->pv.nr_pages << PAGE_SHIFT;
	exp_info.flags = hb->rdonly ? O_RDONLY : O_RDWR;
	exp_info.priv = hb;
	buf = dma_buf_export(&exp_info);
	if (IS_ERR(buf)) {
		hmirror_dmabuf_free(hb);
		return PTR_ERR(buf);
	}
	hmirror_count_inc(HMIRROR_STAT_DMABUFS);
	hmirror_count_add(HMIRROR_STAT_DMABUF_BYTES,
			  hb->pv.nr_pages << PAGE_SHIFT);

	/* From here the dma-buf owns @hb: dma_buf_put() releases it. */
	fd = dma_buf_fd(buf, flags & HMIRROR_DMABUF_CLOEXEC ? O_CLOEXEC : 0);
	if (fd < 0) {
		dma_buf_put(buf);
		return fd;
	}
	hmirror_count_inc(HMIRROR_STAT_DMABUFS_EXPORTED);
	return fd;
}

/*
 * Validate @ex against an object of @bytes: flags, pad, alignment, range;
 * size 0 means "to the end".  Returns the page range in @ret_first and
 * @ret_count.
 */
int hmirror_dmabuf_check(struct hmirror_dmabuf_export *ex, u64 bytes,
			 unsigned long *ret_first, unsigned long *ret_count)
{
	u64 end;

	if ((ex->flags & ~HMIRROR_DMABUF_FLAGS) || ex->__pad || ex->fd ||
	    ex->__pad2)
		return -EINVAL;
	if (!IS_ALIGNED(ex->offset, PAGE_SIZE) ||
	    !IS_ALIGNED(ex->size, PAGE_SIZE) || ex->offset >= bytes)
		return -EINVAL;
	if (!ex->size)
		ex->size = bytes - ex->offset;
	if (check_add_overflow(ex->offset, ex->size, &end) || end > bytes)
		return -EINVAL;
	if (ex->size > (u64)max_dmabuf_mib << 20)
		return -E2BIG;
	*ret_first = ex->offset >> PAGE_SHIFT;
	*ret_count = ex->size >> PAGE_SHIFT;
	return 0;
}

static void hmirror_dmabuf_space_release(void *owner)
{
	struct hmirror_space *s = owner;

	atomic_dec(&s->nr_dmabufs);
	hmirror_space_put(s);
}

/* HMIRROR_IOC_EXPORT_DMABUF on a space fd; the dispatcher copies @data */
long hmirror_ioctl_space_export(struct file *file, void *data)
{
	struct hmirror_space *s = file->private_data;
	struct hmirror_dmabuf_export *ex = data;
	struct hmirror_page_vec pv;
	unsigned long first, count, i;
	struct page *page;
	int ret;

	ret = hmirror_dmabuf_check(ex, s->size, &first, &count);
	if (ret)
		return ret;
	ret = hmirror_user_count_inc(&s->nr_dmabufs,
				     hmirror_max_dmabufs_per_space);
	if (ret)
		return ret;
	/* the space's creator pays for the array, as for the pages */
	ret = hmirror_pv_alloc(&pv, count, s->user);
	if (ret)
		goto err_count;
	for (i = 0; i < count; i++) {
		page = fatal_signal_pending(current) ? ERR_PTR(-EINTR) :
			hmirror_space_page(s, first + i);
		if (IS_ERR(page)) {
			ret = PTR_ERR(page);
			goto err_pages;
		}
		get_page(page);
		*hmirror_pv_slot(&pv, i) = page;
		if (i % HMIRROR_PV_PER_CHUNK == HMIRROR_PV_PER_CHUNK - 1)
			cond_resched();
	}

	hmirror_space_get(s);
	ret = hmirror_dmabuf_export(&pv, ex->flags,
				    hmirror_dmabuf_space_release, s);
	if (ret < 0)
		return ret;	/* the export put the pages, space and count */
	ex->fd = ret;
	return 0;

err_pages:
	pv.nr_pages = i;
	hmirror_pv_put_pages(&pv);
	pv.nr_pages = count;
	hmirror_pv_free(&pv);
err_count:
	atomic_dec(&s->nr_dmabufs);
	return ret;
}
