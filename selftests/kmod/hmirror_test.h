/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Helpers for the hmirror.ko selftests (run in the VM, as root, with the
 * module loadable by modprobe).
 */
#ifndef HMIRROR_TEST_H
#define HMIRROR_TEST_H

#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include <linux/hmirror.h>

#define HMT_DEV		"/dev/hmirror"
#define HMT_DEBUGFS	"/sys/kernel/debug/hmirror"
#define HMT_PARAMS	"/sys/module/hmirror/parameters"

/* open /dev/hmirror, loading the module first if needed; -errno on error */
static inline int hmt_open_dev(void)
{
	int fd = open(HMT_DEV, O_RDWR | O_CLOEXEC);

	if (fd < 0 && errno == ENOENT) {
		if (system("modprobe hmirror") == 0)
			fd = open(HMT_DEV, O_RDWR | O_CLOEXEC);
	}
	return fd < 0 ? -errno : fd;
}

/* create a space; returns the space fd or -errno */
static inline int hmt_create(int dev, uint64_t size, unsigned int shift,
			     unsigned int flags)
{
	struct hmirror_create c = {
		.size = size, .chunk_shift = shift, .flags = flags,
	};

	if (ioctl(dev, HMIRROR_IOC_CREATE, &c))
		return -errno;
	return c.fd;
}

static inline int hmt_arm(int sfd, uint64_t first, uint64_t count)
{
	struct hmirror_arm a = { .first = first, .count = count };

	return ioctl(sfd, HMIRROR_IOC_ARM, &a) ? -errno : 0;
}

static inline int hmt_disarm(int sfd, uint64_t first, uint64_t count)
{
	struct hmirror_arm a = {
		.first = first, .count = count, .flags = HMIRROR_ARM_DISARM,
	};

	return ioctl(sfd, HMIRROR_IOC_ARM, &a) ? -errno : 0;
}

/* harvest into chunks[cap]; returns the number stored or -errno */
static inline long hmt_harvest(int sfd, uint64_t *chunks, uint64_t cap,
			       int *ret_more)
{
	struct hmirror_harvest h = {
		.chunks = (uintptr_t)chunks, .cap = cap,
	};

	if (ioctl(sfd, HMIRROR_IOC_HARVEST, &h))
		return -errno;
	if (ret_more)
		*ret_more = !!(h.out_flags & HMIRROR_HARVEST_MORE);
	return (long)h.nr;
}

static inline int hmt_gen(int sfd, uint64_t chunk, uint64_t *ret_gen)
{
	struct hmirror_generations g = {
		.chunks = (uintptr_t)&chunk, .gens = (uintptr_t)ret_gen,
		.count = 1,
	};

	return ioctl(sfd, HMIRROR_IOC_GENERATIONS, &g) ? -errno : 0;
}

/* read counter NAME from <debugfs>/hmirror/FILE: -1 if absent */
static inline long long hmt_file_stat(const char *file, const char *name)
{
	char line[256], key[128], path[256];
	long long v, ret = -1;
	FILE *f;

	snprintf(path, sizeof(path), HMT_DEBUGFS "/%s", file);
	f = fopen(path, "r");

	if (!f)
		return -1;
	while (fgets(line, sizeof(line), f))
		if (sscanf(line, "%127s %lld", key, &v) == 2 && !strcmp(key, name))
			ret = v;
	fclose(f);
	return ret;
}

/* a counter of <debugfs>/hmirror/stats; -1 if absent */
static inline long long hmt_stat(const char *name)
{
	return hmt_file_stat("stats", name);
}

static inline int hmt_param_get(const char *name, char *buf, size_t len)
{
	char path[256];
	ssize_t n;
	int fd;

	snprintf(path, sizeof(path), HMT_PARAMS "/%s", name);
	fd = open(path, O_RDONLY);
	if (fd < 0)
		return -errno;
	n = read(fd, buf, len - 1);
	close(fd);
	if (n < 0)
		return -errno;
	buf[n] = 0;
	return 0;
}

static inline int hmt_param_set(const char *name, const char *val)
{
	char path[256];
	ssize_t n;
	int fd;

	snprintf(path, sizeof(path), HMT_PARAMS "/%s", name);
	fd = open(path, O_WRONLY);
	if (fd < 0)
		return -errno;
	n = write(fd, val, strlen(val));
	close(fd);
	return n < 0 ? -errno : 0;
}

static inline uint64_t hmt_now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + ts.tv_nsec;
}

static inline int hmt_cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

#endif /* HMIRROR_TEST_H */
