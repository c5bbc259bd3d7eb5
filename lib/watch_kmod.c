// SPDX-License-Identifier: LGPL-2.1-or-later
/*
 * libhmirror watch backend "kmod": the hmirror module's guest spaces
 * (uapi/linux/hmirror.h).  The module owns the pages, resolves a trip in
 * its page_mkwrite (no signal, no thread), keeps the written set, the
 * pending records and the generations itself, and watches every mapping of
 * the space in every process.  The library is a thin layer: create + mmap,
 * HMIRROR_IOC_ARM, HMIRROR_IOC_HARVEST, the read-only generation mapping,
 * poll() on the space fd, the device view at HMIRROR_MMAP_VIEW.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/ioctl.h>
#include <sys/mman.h>

#include <linux/hmirror.h>

#include "watch_internal.h"

#define HM_KMOD_DEV "/dev/hmirror"

struct hm_kmod {
	const volatile uint64_t *gens;	/* HMIRROR_MMAP_GENERATIONS, read-only */
	size_t gens_bytes;
	uint64_t view_offset;
	uint64_t features;		/* HMIRROR_FEATURE_* of the module */
};

static int hm_kmod_open(int *ret_fd, struct hmirror_api *ret_api, const char **ret_reason)
{
	struct hmirror_api api = { .api = HMIRROR_API };
	int fd = open(HM_KMOD_DEV, O_RDWR | O_CLOEXEC);

	if (fd < 0) {
		int err = -errno;

		*ret_reason = err == -ENOENT ? HM_KMOD_DEV " does not exist (module not loaded)" :
			      err == -EACCES || err == -EPERM ? HM_KMOD_DEV ": permission denied" :
			      HM_KMOD_DEV ": cannot open";
		return err == -ENOENT || err == -ENXIO || err == -ENODEV ? -ENODEV : err;
	}
	if (ioctl(fd, HMIRROR_IOC_API, &api) < 0) {
		*ret_reason = "the module refused the API handshake (version mismatch)";
		close(fd);
		return -EPROTO;
	}
	*ret_fd = fd;
	if (ret_api)
		*ret_api = api;
	return 0;
}

/* the module's generation array, read in place */
static int hm_kmod_generations_range(struct hm_space *s, uint64_t first, uint64_t count,
				     uint64_t *ret_gens)
{
	struct hm_kmod *k = s->priv;

	for (uint64_t i = 0; i < count; i++)
		ret_gens[i] = __atomic_load_n(&k->gens[first + i], __ATOMIC_ACQUIRE);
	return 0;
}

static int hm_kmod_device_view(struct hm_space *s, void **ret_addr);

static int hm_kmod_probe(const char **ret_reason)
{
	struct hmirror_api api;
	int fd, err;

	err = hm_kmod_open(&fd, &api, ret_reason);
	if (err)
		return err;
	close(fd);
	if (!(api.features & HMIRROR_FEATURE_GEN_MMAP) || !(api.features & HMIRROR_FEATURE_DEVICE_VIEW)) {
		*ret_reason = "the module lacks the generation mapping or the device view";
		return -EPROTO;
	}
	*ret_reason = "the hmirror module (" HM_KMOD_DEV ", API handshake matched)";
	return 0;
}

/* the module's features decide what this space can do */
static void hm_kmod_features(struct hm_space *s, uint64_t features)
{
	struct hm_kmod *k = s->priv;

	k->features = features;
	if (!(features & HMIRROR_FEATURE_HARVEST_NO_REARM))
		s->caps &= ~HM_CAP_HARVEST_TAKE;
}

static int hm_kmod_map_gens(struct hm_space *s, uint64_t gen_offset)
{
	struct hm_kmod *k = s->priv;
	long pg = sysconf(_SC_PAGESIZE);
	size_t bytes = (s->nr_chunks * sizeof(uint64_t) + pg - 1) & ~(size_t)(pg - 1);
	void *g = mmap(NULL, bytes, PROT_READ, MAP_SHARED, s->memfd, (off_t)gen_offset);

	if (g == MAP_FAILED)
		return -errno;
	k->gens = g;
	k->gens_bytes = bytes;
	return 0;
}

static int hm_kmod_create(struct hm_space *s, const struct hm_space_params *p)
{
	struct hmirror_create c = {
		.size = s->size,
		.chunk_shift = s->chunk_shift,
		.flags = (p->flags & HM_SPACE_POPULATE) ? HMIRROR_CREATE_POPULATE : 0,
	};
	struct hmirror_api api;
	const char *r;
	struct hm_kmod *k = calloc(1, sizeof(*k));
	void *a;
	int dev, err;

	if (!k)
		return -ENOMEM;
	s->priv = k;
	err = hm_kmod_open(&dev, &api, &r);
	if (err)
		return err;
	hm_kmod_features(s, api.features);
	err = ioctl(dev, HMIRROR_IOC_CREATE, &c) < 0 ? -errno : 0;
	close(dev);
	if (err)
		return err;
	s->memfd = c.fd;
	k->view_offset = c.view_offset;
	err = hm_kmod_map_gens(s, c.gen_offset);
	if (err)
		return err;
	err = hm_memfd_map(s, p->addr, p->addr != NULL, PROT_READ | PROT_WRITE, &a);
	if (err)
		return err;
	s->maps[0].addr = (uintptr_t)a;
	return 0;
}

static int hm_kmod_import(struct hm_space *s, const struct hm_space_handoff *h)
{
	struct hmirror_space_info info;
	struct hmirror_api api;
	struct hm_kmod *k = calloc(1, sizeof(*k));
	const char *r;
	void *a;
	int dev, err;

	if (!k)
		return -ENOMEM;
	s->priv = k;
	if (h->nr_fds != 1)
		return -EINVAL;
	/* the importer may run where /dev/hmirror is not open to it */
	if (hm_kmod_open(&dev, &api, &r)) {
		s->caps &= ~HM_CAP_HARVEST_TAKE;
	} else {
		close(dev);
		hm_kmod_features(s, api.features);
	}
	s->memfd = fcntl(h->fds[0], F_DUPFD_CLOEXEC, 3);
	if (s->memfd < 0)
		return -errno;
	memset(&info, 0, sizeof(info));
	if (ioctl(s->memfd, HMIRROR_IOC_SPACE_INFO, &info) < 0)
		return -errno;
	if (info.size != s->size || info.chunk_shift != s->chunk_shift)
		return -EINVAL;
	k->view_offset = info.view_offset;
	/* the importer's CPU mapping is unwatched on every backend: here it
	   is the module's device view (a guarded mapping would be watched,
	   the module watches every mapping of offset 0) */
	err = hm_kmod_device_view(s, &a);
	if (err)
		return err;
	s->cpu_addr = a;
	return hm_kmod_map_gens(s, info.gen_offset);
}

static void hm_kmod_destroy(struct hm_space *s)
{
	struct hm_kmod *k = s->priv;

	if (!k)
		return;
	if (k->gens)
		munmap((void *)k->gens, k->gens_bytes);
	free(k);
	s->priv = NULL;
}

static int hm_kmod_cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

static int hm_kmod_arm(struct hm_space *s, uint64_t first, uint64_t count)
{
	struct hmirror_arm a = { .first = first, .count = count };

	return ioctl(s->memfd, HMIRROR_IOC_ARM, &a) < 0 ? -errno : 0;
}

/* HMIRROR_ARM_DISARM: the module stops recording the chunks; their PTEs
   stay read-only until the next write of each page, which costs one fault
   and is not recorded */
static int hm_kmod_disarm(struct hm_space *s, uint64_t first, uint64_t count)
{
	struct hmirror_arm a = { .first = first, .count = count, .flags = HMIRROR_ARM_DISARM };
	struct hm_kmod *k = s->priv;

	if (!(k->features & HMIRROR_FEATURE_DISARM))
		return -EOPNOTSUPP;
	return ioctl(s->memfd, HMIRROR_IOC_ARM, &a) < 0 ? -errno : 0;
}

/* one ARM with ranges per HMIRROR_MAX_ARM_RANGES runs of the list */
static int hm_kmod_arm_chunks(struct hm_space *s, const uint64_t *chunks, size_t n)
{
	size_t cap = n < HMIRROR_MAX_ARM_RANGES ? n : HMIRROR_MAX_ARM_RANGES;
	struct hmirror_range *r = malloc(cap * sizeof(*r));
	int err = 0;

	if (!r)
		return -ENOMEM;
	for (size_t i = 0; i < n && !err;) {
		struct hmirror_arm a = { .ranges = (uintptr_t)r };
		size_t nr = 0;

		for (; i < n && nr < cap; i++) {
			if (nr && r[nr - 1].first + r[nr - 1].count == chunks[i]) {
				r[nr - 1].count++;
				continue;
			}
			r[nr].first = chunks[i];
			r[nr].count = 1;
			nr++;
		}
		a.nr_ranges = (uint32_t)nr;
		if (ioctl(s->memfd, HMIRROR_IOC_ARM, &a) < 0)
			err = -errno;
	}
	free(r);
	return err;
}

static int hm_kmod_harvest_flags(struct hm_space *s, uint64_t *ret_chunks, size_t cap,
				 uint32_t flags, size_t *ret_n, bool *ret_more)
{
	struct hmirror_harvest h = {
		.chunks = (uintptr_t)ret_chunks, .cap = cap, .flags = flags,
	};
	bool sorted = true;

	if (ioctl(s->memfd, HMIRROR_IOC_HARVEST, &h) < 0)
		return -errno;
	if (h.nr > cap)
		return -EIO;
	*ret_n = (size_t)h.nr;
	if (ret_more)
		*ret_more = !!(h.out_flags & HMIRROR_HARVEST_MORE);
	/* the API promises a strictly ascending list; the module (as of this
	   writing) can return a chunk twice or out of order when writers race
	   the harvest: sort and drop duplicates, O(n) when already in order */
	for (size_t i = 1; i < *ret_n && sorted; i++)
		sorted = ret_chunks[i - 1] < ret_chunks[i];
	if (!sorted) {
		size_t n = 0;

		qsort(ret_chunks, *ret_n, sizeof(uint64_t), hm_kmod_cmp_u64);
		for (size_t i = 0; i < *ret_n; i++)
			if (!n || ret_chunks[n - 1] != ret_chunks[i])
				ret_chunks[n++] = ret_chunks[i];
		*ret_n = n;
	}
	return 0;
}

static int hm_kmod_harvest(struct hm_space *s, uint64_t *ret_chunks, size_t cap,
			   size_t *ret_n, bool *ret_more)
{
	return hm_kmod_harvest_flags(s, ret_chunks, cap, 0, ret_n, ret_more);
}

static int hm_kmod_take(struct hm_space *s, uint64_t *ret_chunks, size_t cap,
			size_t *ret_n, bool *ret_more)
{
	return hm_kmod_harvest_flags(s, ret_chunks, cap, HMIRROR_HARVEST_NO_REARM,
				     ret_n, ret_more);
}

static int hm_kmod_generations(struct hm_space *s, const uint64_t *chunks, size_t n,
			       uint64_t *ret_gens)
{
	struct hm_kmod *k = s->priv;

	for (size_t i = 0; i < n; i++)
		ret_gens[i] = __atomic_load_n(&k->gens[chunks[i]], __ATOMIC_ACQUIRE);
	return 0;
}

static int hm_kmod_device_view(struct hm_space *s, void **ret_addr)
{
	struct hm_kmod *k = s->priv;
	void *a = mmap(NULL, s->size, PROT_READ | PROT_WRITE, MAP_SHARED, s->memfd,
		       (off_t)k->view_offset);

	if (a == MAP_FAILED)
		return -errno;
	madvise(a, s->size, MADV_DONTFORK);
	*ret_addr = a;
	return 0;
}

static int hm_kmod_poll_fd(struct hm_space *s)
{
	return s->memfd;
}

static int hm_kmod_export(struct hm_space *s, struct hm_space_handoff *h)
{
	h->fds[0] = fcntl(s->memfd, F_DUPFD_CLOEXEC, 3);
	if (h->fds[0] < 0)
		return -errno;
	h->nr_fds = 1;
	return 0;
}

const struct hm_backend_ops hm_kmod_ops = {
	.backend = HM_BACKEND_KMOD,
	.caps = HM_CAP_KERNEL_WRITES | HM_CAP_POLL | HM_CAP_HANDOFF | HM_CAP_NO_VMA_SPLIT |
		HM_CAP_KERNEL_TRIP | HM_CAP_RECLAIM_SAFE | HM_CAP_HARVEST_TAKE |
		HM_CAP_MPROTECT | HM_CAP_MADVISE,
	.probe = hm_kmod_probe,
	.create = hm_kmod_create,
	.import = hm_kmod_import,
	.destroy = hm_kmod_destroy,
	.arm = hm_kmod_arm,
	.arm_chunks = hm_kmod_arm_chunks,
	.disarm = hm_kmod_disarm,
	.harvest = hm_kmod_harvest,
	.take = hm_kmod_take,
	.generations = hm_kmod_generations,
	.generations_range = hm_kmod_generations_range,
	.device_view = hm_kmod_device_view,
	.poll_fd = hm_kmod_poll_fd,
	.export = hm_kmod_export,
};
