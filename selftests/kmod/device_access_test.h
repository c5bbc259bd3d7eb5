/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Helpers for the device-access selftests (pins, dma-buf, netlink), on top
 * of hmirror_test.h.  Run in the VM as root.
 */
#ifndef HMIRROR_DEVICE_ACCESS_TEST_H
#define HMIRROR_DEVICE_ACCESS_TEST_H

#include <dirent.h>
#include <grp.h>
#include <linux/capability.h>
#include <poll.h>
#include <sys/resource.h>
#include <sys/socket.h>
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

/*
 * Become @uid (and gid @uid): every capability goes with root.  File
 * descriptors stay, so open /dev/hmirror (0660, root's) first.
 */
static inline int hmt_become(unsigned int uid)
{
	if (setgroups(0, NULL) || setresgid(uid, uid, uid) ||
	    setresuid(uid, uid, uid))
		return -errno;
	return 0;
}

/*
 * Field @key ("bytes", "spaces", "pins") of @uid's line in
 * <debugfs>/hmirror/users; 0 when the user holds nothing (no line),
 * -1 without the file.
 */
static inline long long hmt_user_stat(unsigned int uid, const char *key)
{
	char line[256];
	unsigned int u;
	long long bytes, ret = 0;
	int spaces, pins;
	FILE *f = fopen(HMT_DEBUGFS "/users", "r");

	if (!f)
		return -1;
	while (fgets(line, sizeof(line), f)) {
		if (sscanf(line, "uid %u bytes %lld spaces %d pins %d", &u,
			   &bytes, &spaces, &pins) != 4 || u != uid)
			continue;
		if (!strcmp(key, "bytes"))
			ret = bytes;
		else if (!strcmp(key, "spaces"))
			ret = spaces;
		else if (!strcmp(key, "pins"))
			ret = pins;
	}
	fclose(f);
	return ret;
}

/* pass @fd over the unix socket @sock (SCM_RIGHTS); 0 or -errno */
static inline int hmt_send_fd(int sock, int fd)
{
	char c = 0, buf[CMSG_SPACE(sizeof(int))] = { 0 };
	struct iovec iov = { .iov_base = &c, .iov_len = 1 };
	struct msghdr m = {
		.msg_iov = &iov, .msg_iovlen = 1,
		.msg_control = buf, .msg_controllen = sizeof(buf),
	};
	struct cmsghdr *cm = CMSG_FIRSTHDR(&m);

	cm->cmsg_level = SOL_SOCKET;
	cm->cmsg_type = SCM_RIGHTS;
	cm->cmsg_len = CMSG_LEN(sizeof(int));
	memcpy(CMSG_DATA(cm), &fd, sizeof(int));
	return sendmsg(sock, &m, 0) == 1 ? 0 : -errno;
}

/* the fd hmt_send_fd() passed, or -errno */
static inline int hmt_recv_fd(int sock)
{
	char c, buf[CMSG_SPACE(sizeof(int))];
	struct iovec iov = { .iov_base = &c, .iov_len = 1 };
	struct msghdr m = {
		.msg_iov = &iov, .msg_iovlen = 1,
		.msg_control = buf, .msg_controllen = sizeof(buf),
	};
	struct cmsghdr *cm;
	int fd;

	if (recvmsg(sock, &m, MSG_CMSG_CLOEXEC) != 1)
		return -errno;
	cm = CMSG_FIRSTHDR(&m);
	if (!cm || cm->cmsg_type != SCM_RIGHTS)
		return -EBADMSG;
	memcpy(&fd, CMSG_DATA(cm), sizeof(int));
	return fd;
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

#endif /* HMIRROR_DEVICE_ACCESS_TEST_H */
