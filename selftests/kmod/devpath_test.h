/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Helpers for the device-path selftests (pins, dma-buf, netlink), on top
 * of hmirror_test.h.  Run in the VM as root.
 */
#ifndef HMIRROR_DEVPATH_TEST_H
#define HMIRROR_DEVPATH_TEST_H

#include <dirent.h>
#include <linux/capability.h>
#include <poll.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <sys/wait.h>

#include "hmirror_test.h"

/* a counter of <debugfs>/hmirror/device; -1 if absent */
static inline long long hmt_dev_stat(const char *name)
{
	return hmt_file_stat("device", name);
}

/* pin [addr, addr + size); returns the pin fd or -errno, *ret_id its id */
static inline int hmt_pin(int dev, void *addr, uint64_t size, unsigned int flags,
			  uint32_t *ret_id)
{
	struct hmirror_pin_create p = {
		.addr = (uintptr_t)addr, .size = size, .flags = flags,
	};

	if (ioctl(dev, HMIRROR_IOC_PIN, &p))
		return -errno;
	if (ret_id)
		*ret_id = p.id;
	return p.fd;
}

static inline int hmt_pin_state(int pfd, struct hmirror_pin_state *st)
{
	memset(st, 0, sizeof(*st));
	return ioctl(pfd, HMIRROR_IOC_PIN_STATE, st) ? -errno : 0;
}

/* dma-buf of [offset, offset + size) of a space or pin fd; fd or -errno */
static inline int hmt_export(int fd, uint64_t offset, uint64_t size,
			     unsigned int flags)
{
	struct hmirror_dmabuf_export e = {
		.offset = offset, .size = size, .flags = flags,
	};

	if (ioctl(fd, HMIRROR_IOC_EXPORT_DMABUF, &e))
		return -errno;
	return e.fd;
}

/* EPOLLPRI on a pin fd within @ms */
static inline int hmt_pin_invalidated(int pfd, int ms)
{
	struct pollfd p = { .fd = pfd, .events = POLLPRI };

	return poll(&p, 1, ms) == 1 && (p.revents & POLLPRI);
}

/* drop CAP_IPC_LOCK (effective and permitted) so RLIMIT_MEMLOCK applies */
static inline int hmt_drop_ipc_lock(void)
{
	struct __user_cap_header_struct h = { .version = _LINUX_CAPABILITY_VERSION_3 };
	struct __user_cap_data_struct d[2];

	if (syscall(SYS_capget, &h, d))
		return -errno;
	d[CAP_IPC_LOCK / 32].effective &= ~(1u << (CAP_IPC_LOCK % 32));
	d[CAP_IPC_LOCK / 32].permitted &= ~(1u << (CAP_IPC_LOCK % 32));
	return syscall(SYS_capset, &h, d) ? -errno : 0;
}

/* number of online NUMA nodes */
static inline int hmt_numa_nodes(void)
{
	DIR *d = opendir("/sys/devices/system/node");
	struct dirent *e;
	int n = 0;
	unsigned int i;

	if (!d)
		return 1;
	while ((e = readdir(d)))
		if (sscanf(e->d_name, "node%u", &i) == 1)
			n++;
	closedir(d);
	return n ? n : 1;
}

/* wait for every pin and dma-buf to be gone (releases may be deferred) */
static inline int hmt_wait_dev_idle(int ms)
{
	for (; ms > 0; ms -= 10) {
		if (hmt_dev_stat("pins") == 0 && hmt_dev_stat("pinned_bytes") == 0 &&
		    hmt_dev_stat("dmabufs") == 0 && hmt_dev_stat("dmabuf_bytes") == 0)
			return 1;
		usleep(10000);
	}
	return 0;
}

#endif /* HMIRROR_DEVPATH_TEST_H */
