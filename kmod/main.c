// SPDX-License-Identifier: GPL-2.0
/*
 * hmirror.ko: module init/exit, and the fds: /dev/hmirror, space fds and
 * pin fds, their file operations and the one ioctl table and dispatcher
 * they share.  Documentation/userspace-api.rst.
 */
#define pr_fmt(fmt) KBUILD_MODNAME ": " fmt

#include <linux/compat.h>
#include <linux/fs.h>
#include <linux/miscdevice.h>
#include <linux/module.h>
#include <linux/overflow.h>
#include <linux/slab.h>
#include <linux/sort.h>
#include <linux/uaccess.h>

#include "hmirror.h"

#define HMIRROR_FEATURES						\
	(HMIRROR_FEATURE_POPULATE | HMIRROR_FEATURE_DEVICE_VIEW |	\
	 HMIRROR_FEATURE_GEN_MMAP | HMIRROR_FEATURE_POLL |		\
	 HMIRROR_FEATURE_ARM_RANGES | HMIRROR_FEATURE_DISARM |		\
	 HMIRROR_FEATURE_HARVEST_NO_REARM | HMIRROR_FEATURE_STRICT_ARM |	\
	 HMIRROR_FEATURE_TRIP_OPENS | HMIRROR_FEATURE_PIN |		\
	 HMIRROR_FEATURE_DMABUF | HMIRROR_FEATURE_NETLINK)

#ifdef HAVE_APPLY_TO_EXISTING_PAGE_RANGE
#define HMIRROR_FEATURE_TRIP_OPENS	HMIRROR_FEATURE_TRIP_OPENS_CHUNK
#else
#define HMIRROR_FEATURE_TRIP_OPENS	0
#endif

static const struct file_operations hmirror_space_fops;
static const struct file_operations hmirror_pin_fops;

/* ---- ioctls ------------------------------------------------------------- */

/* the kinds of fd an ioctl may be issued on, a bit each */
enum hmirror_fd_kind {
	HMIRROR_FD_DEV = 1 << 0,	/* /dev/hmirror */
	HMIRROR_FD_SPACE = 1 << 1,
	HMIRROR_FD_PIN = 1 << 2,
};

/*
 * One entry per command, indexed by _IOC_NR.  The dispatcher copies the
 * argument struct in (_IOC_WRITE) and out (_IOC_READ); on error it zeroes
 * the output fields, from out_off to the end, before copying out.
 */
struct hmirror_ioctl_desc {
	unsigned int cmd;
	unsigned int kinds;		/* HMIRROR_FD_* */
	unsigned int out_off;
	long (*fn)(struct file *file, void *data);
};

/* _name: HMIRROR_IOC_<_name> and HMIRROR_NR_<_name> */
#define HMIRROR_IOCTL(_name, _kind, _type, _first_out, _fn)		\
	[HMIRROR_NR_##_name] = {					\
		.cmd = HMIRROR_IOC_##_name,				\
		.kinds = (_kind),					\
		.out_off = offsetof(_type, _first_out),			\
		.fn = (_fn),						\
	}

#define HMIRROR_IOCTL_NOOUT(_name, _kind, _type, _fn)			\
	[HMIRROR_NR_##_name] = {					\
		.cmd = HMIRROR_IOC_##_name,				\
		.kinds = (_kind),					\
		.out_off = sizeof(_type),				\
		.fn = (_fn),						\
	}

static long hmirror_ioctl_api(struct file *file, void *data);
static long hmirror_ioctl_create(struct file *file, void *data);
static long hmirror_ioctl_space_info(struct file *file, void *data);
static long hmirror_ioctl_arm(struct file *file, void *data);
static long hmirror_ioctl_harvest(struct file *file, void *data);
static long hmirror_ioctl_generations(struct file *file, void *data);
static long hmirror_ioctl_pin(struct file *file, void *data);
static long hmirror_ioctl_export(struct file *file, void *data);

static const struct hmirror_ioctl_desc hmirror_ioctls[] = {
	HMIRROR_IOCTL(API, HMIRROR_FD_DEV,
		      struct hmirror_api, features, hmirror_ioctl_api),
	HMIRROR_IOCTL(CREATE, HMIRROR_FD_DEV,
		      struct hmirror_create, fd, hmirror_ioctl_create),
	HMIRROR_IOCTL(SPACE_INFO, HMIRROR_FD_SPACE,
		      struct hmirror_space_info, size,
		      hmirror_ioctl_space_info),
	HMIRROR_IOCTL_NOOUT(ARM, HMIRROR_FD_SPACE,
			    struct hmirror_arm, hmirror_ioctl_arm),
	HMIRROR_IOCTL(HARVEST, HMIRROR_FD_SPACE,
		      struct hmirror_harvest, nr, hmirror_ioctl_harvest),
	HMIRROR_IOCTL_NOOUT(GENERATIONS, HMIRROR_FD_SPACE,
			    struct hmirror_generations,
			    hmirror_ioctl_generations),
	HMIRROR_IOCTL(PIN, HMIRROR_FD_DEV,
		      struct hmirror_pin_create, fd, hmirror_ioctl_pin),
	HMIRROR_IOCTL(PIN_STATE, HMIRROR_FD_PIN,
		      struct hmirror_pin_state, addr, hmirror_ioctl_pin_state),
	HMIRROR_IOCTL(EXPORT_DMABUF, HMIRROR_FD_SPACE | HMIRROR_FD_PIN,
		      struct hmirror_dmabuf_export, fd, hmirror_ioctl_export),
};

/* largest argument struct of any ioctl */
#define HMIRROR_IOCTL_MAX_SIZE	256

static u64 hmirror_ioctl_mask(void)
{
	u64 mask = 0;
	unsigned int i;

	for (i = 0; i < ARRAY_SIZE(hmirror_ioctls); i++)
		if (hmirror_ioctls[i].fn && i < 64)
			mask |= 1ULL << i;
	return mask;
}

static long hmirror_ioctl_api(struct file *file, void *data)
{
	struct hmirror_api *a = data;

	if (a->api != HMIRROR_API)
		return -EINVAL;
	a->features = HMIRROR_FEATURES;
	a->ioctls = hmirror_ioctl_mask();
	return 0;
}

static long hmirror_ioctl_create(struct file *file, void *data)
{
	struct hmirror_create *c = data;
	struct hmirror_space *s;
	int ret, fd;

	ret = hmirror_space_create(c, &hmirror_space_fops, &s, &fd);
	if (ret)
		return ret;
	c->fd = fd;
	c->id = s->id;
	c->nr_chunks = s->nr_chunks;
	c->view_offset = HMIRROR_MMAP_VIEW;
	c->gen_offset = HMIRROR_MMAP_GENERATIONS;
	return 0;
}

static long hmirror_ioctl_space_info(struct file *file, void *data)
{
	struct hmirror_space *s = file->private_data;
	struct hmirror_space_info *i = data;

	i->size = s->size;
	i->chunk_shift = s->chunk_shift;
	i->id = s->id;
	i->nr_chunks = s->nr_chunks;
	i->view_offset = HMIRROR_MMAP_VIEW;
	i->gen_offset = HMIRROR_MMAP_GENERATIONS;
	i->written = READ_ONCE(s->nr_written);
	return 0;
}

static int hmirror_check_range(struct hmirror_space *s,
			       const struct hmirror_range *r)
{
	u64 end;

	if (!r->count || check_add_overflow(r->first, r->count, &end))
		return -EINVAL;
	if (end > s->nr_chunks)
		return -ERANGE;
	return 0;
}

static int hmirror_range_cmp(const void *a, const void *b)
{
	const struct hmirror_range *x = a, *y = b;

	return x->first < y->first ? -1 : x->first > y->first;
}

/*
 * Sort validated ranges and merge overlapping and adjacent ones in place,
 * so that an ARM's work is bounded by the space, not by how many times
 * the caller named each chunk.  Returns the number of runs left.
 */
static u32 hmirror_ranges_merge(struct hmirror_range *r, u32 nr)
{
	u32 i, n = 0;

	/* callers mostly pass ascending runs (libhmirror does): skip the sort */
	for (i = 1; i < nr && r[i - 1].first < r[i].first; i++)
		;
	if (i < nr)
		sort(r, nr, sizeof(*r), hmirror_range_cmp, NULL);
	for (i = 0; i < nr; i++) {
		if (n && r[i].first <= r[n - 1].first + r[n - 1].count) {
			u64 end = max(r[n - 1].first + r[n - 1].count,
				      r[i].first + r[i].count);

			r[n - 1].count = end - r[n - 1].first;
			continue;
		}
		r[n++] = r[i];
	}
	return n;
}

static long hmirror_ioctl_arm(struct file *file, void *data)
{
	struct hmirror_space *s = file->private_data;
	struct hmirror_arm *a = data;
	struct hmirror_range one, *ranges = &one;
	bool disarm = a->flags & HMIRROR_ARM_DISARM;
	u32 i, nr = 1;
	long ret = 0;

	if (a->flags & ~HMIRROR_ARM_DISARM)
		return -EINVAL;
	if (a->nr_ranges) {
		if (a->first || a->count)
			return -EINVAL;
		if (a->nr_ranges > HMIRROR_MAX_ARM_RANGES)
			return -E2BIG;
		nr = a->nr_ranges;
		ranges = vmemdup_user(u64_to_user_ptr(a->ranges),
				      array_size(nr, sizeof(*ranges)));
		if (IS_ERR(ranges))
			return PTR_ERR(ranges);
	} else {
		if (a->ranges)
			return -EINVAL;
		one.first = a->first;
		one.count = a->count;
	}
	/* validate all before touching any */
	for (i = 0; i < nr && !ret; i++)
		ret = hmirror_check_range(s, &ranges[i]);
	if (!ret) {
		nr = hmirror_ranges_merge(ranges, nr);
		ret = hmirror_guard_arm(s, ranges, nr, disarm);
	}
	if (ranges != &one)
		kvfree(ranges);
	return ret;
}

static long hmirror_ioctl_harvest(struct file *file, void *data)
{
	struct hmirror_space *s = file->private_data;
	struct hmirror_harvest *h = data;
	bool more;
	int ret;

	if ((h->flags & ~HMIRROR_HARVEST_NO_REARM) || h->__pad)
		return -EINVAL;
	ret = hmirror_guard_harvest(s, u64_to_user_ptr(h->chunks), h->cap,
				    h->flags, &h->nr, &more);
	h->out_flags = more ? HMIRROR_HARVEST_MORE : 0;
	h->__pad2 = 0;		/* an output: never the caller's bytes back */
	return ret;
}

static long hmirror_ioctl_generations(struct file *file, void *data)
{
	struct hmirror_space *s = file->private_data;
	struct hmirror_generations *g = data;
	u64 __user *uchunks = u64_to_user_ptr(g->chunks);
	u64 __user *ugens = u64_to_user_ptr(g->gens);
	u64 i, chunk;

	if (g->flags)
		return -EINVAL;
	if (g->count > HMIRROR_MAX_GEN_BATCH)
		return -E2BIG;
	for (i = 0; i < g->count; i++) {
		if (get_user(chunk, uchunks + i))
			return -EFAULT;
		if (chunk >= s->nr_chunks)
			return -ERANGE;
		if (put_user(hmirror_guard_generation(s, chunk), ugens + i))
			return -EFAULT;
	}
	return 0;
}

static long hmirror_ioctl_pin(struct file *file, void *data)
{
	return hmirror_pin_create(data, &hmirror_pin_fops);
}

/* on a space fd or a pin fd */
static long hmirror_ioctl_export(struct file *file, void *data)
{
	if (file->f_op == &hmirror_pin_fops)
		return hmirror_ioctl_pin_export(file, data);
	return hmirror_ioctl_space_export(file, data);
}

static enum hmirror_fd_kind hmirror_fd_kind(const struct file *file)
{
	if (file->f_op == &hmirror_space_fops)
		return HMIRROR_FD_SPACE;
	if (file->f_op == &hmirror_pin_fops)
		return HMIRROR_FD_PIN;
	return HMIRROR_FD_DEV;
}

/* the unlocked_ioctl of every fd kind */
static long hmirror_ioctl(struct file *file, unsigned int cmd,
			  unsigned long arg)
{
	unsigned int nr = _IOC_NR(cmd), size = _IOC_SIZE(cmd);
	void __user *uarg = (void __user *)arg;
	const struct hmirror_ioctl_desc *d;
	u64 kdata[HMIRROR_IOCTL_MAX_SIZE / sizeof(u64)];
	long ret;

	if (_IOC_TYPE(cmd) != HMIRROR_IOC_MAGIC || nr >= ARRAY_SIZE(hmirror_ioctls))
		return -ENOTTY;
	d = &hmirror_ioctls[nr];
	if (!d->fn || d->cmd != cmd || size > sizeof(kdata))
		return -ENOTTY;
	if (!(d->kinds & hmirror_fd_kind(file)))
		return -ENOTTY;

	if (_IOC_DIR(cmd) & _IOC_WRITE) {
		if (copy_from_user(kdata, uarg, size))
			return -EFAULT;
	} else {
		memset(kdata, 0, size);
	}
	/*
	 * An argument that cannot be written back fails before anything is
	 * made: no fd may be installed behind an -EFAULT.
	 */
	if ((_IOC_DIR(cmd) & _IOC_READ) && copy_to_user(uarg, kdata, size))
		return -EFAULT;
	ret = d->fn(file, kdata);
	if (ret && d->out_off < size)
		memset((u8 *)kdata + d->out_off, 0, size - d->out_off);
	if ((_IOC_DIR(cmd) & _IOC_READ) && d->out_off < size &&
	    copy_to_user(uarg, kdata, size) && !ret)
		ret = -EFAULT;
	return ret;
}

/* ---- the fds: /dev/hmirror, spaces (space.c), pins (pin.c) ----------- */

static const struct file_operations hmirror_dev_fops = {
	.owner = THIS_MODULE,
	.unlocked_ioctl = hmirror_ioctl,
	.compat_ioctl = compat_ptr_ioctl,
	.llseek = noop_llseek,
};

static const struct file_operations hmirror_space_fops = {
	.owner = THIS_MODULE,
	.release = hmirror_space_release,
	.mmap = hmirror_space_mmap,
	.poll = hmirror_space_poll,
	.unlocked_ioctl = hmirror_ioctl,
	.compat_ioctl = compat_ptr_ioctl,
	.llseek = noop_llseek,
};

static const struct file_operations hmirror_pin_fops = {
	.owner = THIS_MODULE,
	.release = hmirror_pin_file_release,
	.poll = hmirror_pin_poll,
	.unlocked_ioctl = hmirror_ioctl,
	.compat_ioctl = compat_ptr_ioctl,
	.llseek = noop_llseek,
};

static struct miscdevice hmirror_misc = {
	.minor = MISC_DYNAMIC_MINOR,
	.name = "hmirror",
	.fops = &hmirror_dev_fops,
	/* tools/udev/60-hmirror.rules gives the group "hmirror" */
	.mode = 0660,
};

/*
 * Init in this order, exit in the reverse: the pseudo filesystem of
 * spaces, debugfs, the limits, the pins' workqueue, the netlink family,
 * and /dev/hmirror last, so that no request comes in before all the rest
 * is ready.  At exit, netlink goes before pins: nothing may read the
 * state the rest frees.  Every space, pin and dma-buf holds a module
 * reference, so none is left at exit.
 */
static int __init hmirror_init(void)
{
	int ret;

	BUILD_BUG_ON(sizeof(struct hmirror_create) > HMIRROR_IOCTL_MAX_SIZE);
	BUILD_BUG_ON(sizeof(struct hmirror_create) % 8);
	BUILD_BUG_ON(sizeof(struct hmirror_space_info) % 8);
	BUILD_BUG_ON(sizeof(struct hmirror_arm) % 8);
	BUILD_BUG_ON(sizeof(struct hmirror_harvest) % 8);
	BUILD_BUG_ON(sizeof(struct hmirror_generations) % 8);
	BUILD_BUG_ON(sizeof(struct hmirror_pin_create) % 8);
	BUILD_BUG_ON(sizeof(struct hmirror_pin_state) % 8);
	BUILD_BUG_ON(sizeof(struct hmirror_dmabuf_export) % 8);
	BUILD_BUG_ON(HMIRROR_STAT_INVAL_OTHER - HMIRROR_STAT_INVAL_UNMAP !=
		     HMIRROR_INVAL_OTHER - HMIRROR_INVAL_UNMAP);

	ret = hmirror_fs_init();
	if (ret)
		return ret;
	hmirror_debugfs_init();
	hmirror_account_init();
	ret = hmirror_pin_init();
	if (ret)
		goto err_debugfs;
	ret = hmirror_nl_init();
	if (ret)
		goto err_pin;
	ret = misc_register(&hmirror_misc);
	if (ret)
		goto err_nl;
	pr_info("api %#x, /dev/%s\n", HMIRROR_API, hmirror_misc.name);
	return 0;

err_nl:
	hmirror_nl_exit();
err_pin:
	hmirror_pin_exit();
err_debugfs:
	hmirror_debugfs_exit();
	hmirror_fs_exit();
	return ret;
}

static void __exit hmirror_exit(void)
{
	misc_deregister(&hmirror_misc);
	hmirror_nl_exit();
	hmirror_pin_exit();
	hmirror_debugfs_exit();
	hmirror_fs_exit();
}

module_init(hmirror_init);
module_exit(hmirror_exit);

MODULE_DESCRIPTION("hmirror: guest spaces with write-watch guards for GPU emulators");
MODULE_AUTHOR("hmirror developers");
MODULE_LICENSE("GPL");
