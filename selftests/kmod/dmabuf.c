// SPDX-License-Identifier: GPL-2.0
/*
 * hmirror.ko dma-buf export tests: a space (or a range of it) exported as
 * a dma-buf, imported by a real importer (vgem, through libdrm's PRIME
 * import), its CPU mapping and DMA_BUF_IOCTL_SYNC, guard interplay,
 * read-only exports, bad requests and lifetimes.  Run in the VM:
 *   tools/vm/run --kernel 6.1 -- build/bin/test-kmod-dmabuf
 */
#include <linux/dma-buf.h>
#include <sys/stat.h>
#include <xf86drm.h>

#include "device_access_test.h"
#include "kselftest_harness.h"

#define CHUNK_SHIFT	16
#define CHUNK		(1UL << CHUNK_SHIFT)
#define NR_CHUNKS	16
#define SPACE		(NR_CHUNKS * CHUNK)

/* the vgem primary node (card), loading vgem first; -1 if none */
static int open_vgem(void)
{
	char path[64];
	int i, fd;

	if (system("modprobe vgem 2>/dev/null"))
		return -1;
	for (i = 0; i < 16; i++) {
		drmVersionPtr v;

		snprintf(path, sizeof(path), "/dev/dri/card%d", i);
		fd = open(path, O_RDWR | O_CLOEXEC);
		if (fd < 0)
			continue;
		v = drmGetVersion(fd);
		if (v && !strcmp(v->name, "vgem")) {
			drmFreeVersion(v);
			return fd;
		}
		if (v)
			drmFreeVersion(v);
		close(fd);
	}
	return -1;
}

/*
 * Does vgem build an sg table when it imports?  Kernels whose shmem
 * helpers import without one (drm_gem_shmem_prime_import_no_map, loaded
 * with vgem) only attach; read from the kernel's symbols, not a version.
 */
static bool vgem_maps_on_import(void)
{
	char line[256];
	bool maps = true;
	FILE *f = fopen("/proc/kallsyms", "r");

	if (!f)
		return true;
	while (maps && fgets(line, sizeof(line), f))
		if (strstr(line, " drm_gem_shmem_prime_import_no_map"))
			maps = false;
	fclose(f);
	return maps;
}

static int dmabuf_sync(int fd, uint64_t flags)
{
	struct dma_buf_sync s = { .flags = flags };

	return ioctl(fd, DMA_BUF_IOCTL_SYNC, &s) ? -errno : 0;
}

FIXTURE(space) {
	int dev, sfd;
	char *g;		/* the guarded CPU mapping */
	bool skip;
};

FIXTURE_SETUP(space)
{
	self->sfd = -1;
	self->dev = hmt_open_dev();
	if (self->dev < 0) {
		self->skip = true;
		SKIP(return, "no /dev/hmirror (%s)", strerror(-self->dev));
	}
	self->sfd = hmt_create(self->dev, SPACE, CHUNK_SHIFT, 0);
	ASSERT_LE(0, self->sfd) TH_LOG("create: %s", strerror(-self->sfd));
	self->g = mmap(NULL, SPACE, PROT_READ | PROT_WRITE, MAP_SHARED,
		       self->sfd, 0);
	ASSERT_NE(MAP_FAILED, self->g);
}

FIXTURE_TEARDOWN(space)
{
	if (self->sfd >= 0) {
		munmap(self->g, SPACE);
		close(self->sfd);
	}
	if (self->dev >= 0)
		close(self->dev);
}

/* a real importer: vgem attaches and maps the dma-buf for its device; a
 * CPU write through the guarded mapping is seen through the import and
 * recorded by the guard */
TEST_F(space, vgem_import)
{
	long long maps0 = hmt_dev_stat("dmabuf_maps");
	uint64_t chunks[NR_CHUNKS];
	struct stat a, b;
	uint32_t handle = 0;
	int card, dfd, back;
	char *v;
	long n;

	if (self->skip)
		SKIP(return, "no /dev/hmirror");
	card = open_vgem();
	if (card < 0)
		SKIP(return, "no vgem (modprobe vgem failed)");

	memset(self->g, 0x10, SPACE);
	ASSERT_EQ(0, hmt_arm(self->sfd, 0, NR_CHUNKS));
	/* chunks 2..5 as a dma-buf */
	dfd = hmt_export(self->sfd, 2 * CHUNK, 4 * CHUNK, HMIRROR_DMABUF_CLOEXEC);
	ASSERT_LE(0, dfd) TH_LOG("export: %s", strerror(-dfd));
	ASSERT_EQ(0, drmPrimeFDToHandle(card, dfd, &handle));
	EXPECT_NE(0, handle);
	/* the import mapped an sg table of our pages for vgem's device */
	if (vgem_maps_on_import())
		EXPECT_LT(maps0, hmt_dev_stat("dmabuf_maps"));

	/* the importer hands back the same dma-buf */
	ASSERT_EQ(0, drmPrimeHandleToFD(card, handle, DRM_CLOEXEC, &back));
	ASSERT_EQ(0, fstat(dfd, &a));
	ASSERT_EQ(0, fstat(back, &b));
	EXPECT_EQ(a.st_ino, b.st_ino);

	v = mmap(NULL, 4 * CHUNK, PROT_READ | PROT_WRITE, MAP_SHARED, back, 0);
	ASSERT_NE(MAP_FAILED, v);
	EXPECT_EQ(0x10, v[0]);

	/* CPU write through the guard: visible through the import, recorded */
	self->g[3 * CHUNK + 100] = 0x5a;
	ASSERT_EQ(0, dmabuf_sync(back, DMA_BUF_SYNC_START | DMA_BUF_SYNC_READ));
	EXPECT_EQ(0x5a, v[CHUNK + 100]);
	ASSERT_EQ(0, dmabuf_sync(back, DMA_BUF_SYNC_END | DMA_BUF_SYNC_READ));
	n = hmt_harvest(self->sfd, chunks, NR_CHUNKS, NULL);
	ASSERT_EQ(1, n);
	EXPECT_EQ(3, chunks[0]);

	/* a write through the dma-buf (the device's path) is not a CPU
	 * write: it reaches the home page, and no guard records it */
	ASSERT_EQ(0, dmabuf_sync(back, DMA_BUF_SYNC_START | DMA_BUF_SYNC_WRITE));
	v[2 * CHUNK + 7] = 0x6b;
	ASSERT_EQ(0, dmabuf_sync(back, DMA_BUF_SYNC_END | DMA_BUF_SYNC_WRITE));
	EXPECT_EQ(0x6b, self->g[4 * CHUNK + 7]);
	EXPECT_EQ(0, hmt_harvest(self->sfd, chunks, NR_CHUNKS, NULL));

	munmap(v, 4 * CHUNK);
	close(back);
	{
		struct drm_gem_close c = { .handle = handle };

		EXPECT_EQ(0, drmIoctl(card, DRM_IOCTL_GEM_CLOSE, &c));
	}
	close(dfd);
	close(card);
	EXPECT_TRUE(hmt_wait_dev_idle(2000));
}

/* a pin's dma-buf reaches the same importer: user memory, no host pointer */
TEST(vgem_import_pin)
{
	long long maps0 = hmt_dev_stat("dmabuf_maps");
	long ps = sysconf(_SC_PAGESIZE);
	uint32_t handle = 0;
	int dev, card, pfd, dfd, back;
	char *m, *v;

	dev = hmt_open_dev();
	if (dev < 0)
		SKIP(return, "no /dev/hmirror (%s)", strerror(-dev));
	card = open_vgem();
	if (card < 0) {
		close(dev);
		SKIP(return, "no vgem (modprobe vgem failed)");
	}
	m = mmap(NULL, 8 * ps, PROT_READ | PROT_WRITE,
		 MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	ASSERT_NE(MAP_FAILED, m);
	memset(m, 0x21, 8 * ps);
	pfd = hmt_pin(dev, m, 8 * ps, HMIRROR_PIN_WRITE, NULL);
	ASSERT_LE(0, pfd);
	dfd = hmt_export(pfd, 0, 0, HMIRROR_DMABUF_CLOEXEC);
	ASSERT_LE(0, dfd);
	ASSERT_EQ(0, drmPrimeFDToHandle(card, dfd, &handle));
	if (vgem_maps_on_import())
		EXPECT_LT(maps0, hmt_dev_stat("dmabuf_maps"));
	ASSERT_EQ(0, drmPrimeHandleToFD(card, handle, DRM_CLOEXEC, &back));
	v = mmap(NULL, 8 * ps, PROT_READ, MAP_SHARED, back, 0);
	ASSERT_NE(MAP_FAILED, v);
	m[7 * ps + 3] = 0x42;
	EXPECT_EQ(0x42, v[7 * ps + 3]);
	munmap(v, 8 * ps);
	close(back);
	{
		struct drm_gem_close c = { .handle = handle };

		EXPECT_EQ(0, drmIoctl(card, DRM_IOCTL_GEM_CLOSE, &c));
	}
	close(dfd);
	close(pfd);
	close(card);
	close(dev);
	EXPECT_TRUE(hmt_wait_dev_idle(2000));
}

TEST_F(space, whole_space_and_lifetime)
{
	long long exp0 = hmt_dev_stat("dmabufs_exported");
	int dfd;
	char *v;

	if (self->skip)
		SKIP(return, "no /dev/hmirror");
	/* size 0: to the end; pages not yet faulted in are allocated */
	dfd = hmt_export(self->sfd, 0, 0, 0);
	ASSERT_LE(0, dfd);
	EXPECT_EQ(exp0 + 1, hmt_dev_stat("dmabufs_exported"));
	EXPECT_EQ(1, hmt_dev_stat("dmabufs"));
	EXPECT_EQ(SPACE, hmt_dev_stat("dmabuf_bytes"));
	EXPECT_EQ(SPACE, lseek(dfd, 0, SEEK_END));
	v = mmap(NULL, SPACE, PROT_READ | PROT_WRITE, MAP_SHARED, dfd, 0);
	ASSERT_NE(MAP_FAILED, v);
	EXPECT_EQ(0, v[SPACE - 1]);
	self->g[SPACE - 1] = 9;
	EXPECT_EQ(9, v[SPACE - 1]);

	/* a private mapping, and one past the end, are refused */
	EXPECT_EQ(MAP_FAILED, mmap(NULL, CHUNK, PROT_READ, MAP_PRIVATE, dfd, 0));
	EXPECT_EQ(MAP_FAILED, mmap(NULL, CHUNK, PROT_READ, MAP_SHARED, dfd, SPACE));

	/* the space goes, the dma-buf keeps its pages */
	munmap(self->g, SPACE);
	close(self->sfd);
	self->sfd = -1;
	EXPECT_EQ(9, v[SPACE - 1]);
	v[0] = 3;
	EXPECT_EQ(3, v[0]);
	munmap(v, SPACE);
	close(dfd);
	EXPECT_TRUE(hmt_wait_dev_idle(2000));
	EXPECT_EQ(0, hmt_stat("spaces"));
}

TEST_F(space, read_only_export)
{
	int dfd;
	char *v;

	if (self->skip)
		SKIP(return, "no /dev/hmirror");
	self->g[0] = 4;
	dfd = hmt_export(self->sfd, 0, CHUNK, HMIRROR_DMABUF_RDONLY);
	ASSERT_LE(0, dfd);
	EXPECT_EQ(MAP_FAILED, mmap(NULL, CHUNK, PROT_READ | PROT_WRITE,
				   MAP_SHARED, dfd, 0));
	v = mmap(NULL, CHUNK, PROT_READ, MAP_SHARED, dfd, 0);
	ASSERT_NE(MAP_FAILED, v);
	EXPECT_EQ(4, v[0]);
	EXPECT_EQ(-1, mprotect(v, CHUNK, PROT_READ | PROT_WRITE));
	munmap(v, CHUNK);
	close(dfd);
}

TEST_F(space, bad_requests)
{
	struct hmirror_dmabuf_export e = { 0 };
	long ps = sysconf(_SC_PAGESIZE);

	if (self->skip)
		SKIP(return, "no /dev/hmirror");
	EXPECT_EQ(-EINVAL, hmt_export(self->sfd, ps / 2, 0, 0));
	EXPECT_EQ(-EINVAL, hmt_export(self->sfd, 0, ps + 1, 0));
	EXPECT_EQ(-EINVAL, hmt_export(self->sfd, SPACE, 0, 0));
	EXPECT_EQ(-EINVAL, hmt_export(self->sfd, CHUNK, SPACE, 0));
	EXPECT_EQ(-EINVAL, hmt_export(self->sfd, ~0ULL & ~(ps - 1), 2 * ps, 0));
	EXPECT_EQ(-EINVAL, hmt_export(self->sfd, 0, 0, 1u << 5));
	e.__pad = 1;
	EXPECT_EQ(-1, ioctl(self->sfd, HMIRROR_IOC_EXPORT_DMABUF, &e));
	EXPECT_EQ(EINVAL, errno);
	EXPECT_EQ(0, e.fd);	/* outputs zeroed on error */
	/* only on a space or a pin fd */
	EXPECT_EQ(-ENOTTY, hmt_export(self->dev, 0, 0, 0));
	EXPECT_EQ(0, hmt_dev_stat("dmabufs"));
}

/* live exports of one space, and of one pin, stop at max_dmabufs_per_space */
TEST_F(space, exports_limited_per_space)
{
	long ps = sysconf(_SC_PAGESIZE);
	int fd[4], pfd, extra;
	char old[32], *m;

	if (self->skip)
		SKIP(return, "no /dev/hmirror");
	ASSERT_EQ(0, hmt_param_get("max_dmabufs_per_space", old, sizeof(old)));
	ASSERT_EQ(0, hmt_param_set("max_dmabufs_per_space", "4"));
	for (int i = 0; i < 4; i++) {
		fd[i] = hmt_export(self->sfd, 0, CHUNK, HMIRROR_DMABUF_CLOEXEC);
		EXPECT_LE(0, fd[i]);
	}
	EXPECT_EQ(-EMFILE, hmt_export(self->sfd, 0, CHUNK, HMIRROR_DMABUF_CLOEXEC));
	/* another space has its own count */
	extra = hmt_create(self->dev, CHUNK, CHUNK_SHIFT, 0);
	ASSERT_LE(0, extra);
	pfd = hmt_export(extra, 0, 0, HMIRROR_DMABUF_CLOEXEC);
	EXPECT_LE(0, pfd);
	close(pfd);
	close(extra);
	/* a released one makes room */
	close(fd[0]);
	fd[0] = hmt_export(self->sfd, 0, CHUNK, HMIRROR_DMABUF_CLOEXEC);
	EXPECT_LE(0, fd[0]);
	for (int i = 0; i < 4; i++)
		close(fd[i]);

	m = mmap(NULL, 4 * ps, PROT_READ | PROT_WRITE,
		 MAP_PRIVATE | MAP_ANONYMOUS | MAP_POPULATE, -1, 0);
	ASSERT_NE(MAP_FAILED, m);
	pfd = hmt_pin(self->dev, m, 4 * ps, HMIRROR_PIN_WRITE, NULL);
	ASSERT_LE(0, pfd);
	for (int i = 0; i < 4; i++) {
		fd[i] = hmt_export(pfd, 0, 0, HMIRROR_DMABUF_CLOEXEC);
		EXPECT_LE(0, fd[i]);
	}
	EXPECT_EQ(-EMFILE, hmt_export(pfd, 0, 0, HMIRROR_DMABUF_CLOEXEC));
	for (int i = 0; i < 4; i++)
		close(fd[i]);
	close(pfd);
	munmap(m, 4 * ps);
	EXPECT_EQ(0, hmt_param_set("max_dmabufs_per_space", old));
	EXPECT_TRUE(hmt_wait_dev_idle(2000));
}

/*
 * An export's page array is charged to the space's creator, and given
 * back with the dma-buf; its pages stay the space's.
 */
TEST_F(space, export_page_array_charged)
{
	long ps = sysconf(_SC_PAGESIZE);
	long long before, during, after;
	/* one page of page pointers per 512 pages, and its pointer */
	long long array = ((SPACE / ps + ps / 8 - 1) / (ps / 8)) * (ps + 8);
	int dfd;

	if (self->skip)
		SKIP(return, "no /dev/hmirror");
	before = hmt_user_stat(0, "bytes");
	ASSERT_LT(0, before);		/* the fixture's space */
	dfd = hmt_export(self->sfd, 0, 0, HMIRROR_DMABUF_CLOEXEC);
	ASSERT_LE(0, dfd);
	during = hmt_user_stat(0, "bytes");
	close(dfd);
	EXPECT_TRUE(hmt_wait_dev_idle(2000));
	after = hmt_user_stat(0, "bytes");
	/* the export made every page resident; they stay */
	EXPECT_EQ(before + SPACE, after);
	EXPECT_EQ(array, during - after);
}

TEST_HARNESS_MAIN
