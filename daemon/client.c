// SPDX-License-Identifier: GPL-2.0
/*
 * Per-client state.  A client is one connection: it owns its spaces and
 * pipelines through handle tables indexed by small integers that mean
 * nothing outside that connection, so one client cannot name another's
 * objects.  Peer credentials (SO_PEERCRED) are checked at accept: root, the
 * daemon's own uid, and --allow-uid may connect (or anyone the socket's
 * mode lets in, with --allow-any).
 *
 * Lifetime: the connection's loop source and every job queued on the
 * device thread hold a reference; the last put closes the connection and
 * frees the client.  Its disconnect and teardown are protocol.c's.
 */
#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "client.h"
#include "loop.h"
#include "state.h"

void hmd_client_get(struct hmd_client *c)
{
	c->refs++;
}

void hmd_client_put(struct hmd_client *c)
{
	struct hmd_client **pp;

	if (!c || --c->refs)
		return;
	for (pp = &hmd.clients; *pp; pp = &(*pp)->next) {
		if (*pp == c) {
			*pp = c->next;
			break;
		}
	}
	hmd.nr_clients--;
	if (c->fd >= 0)
		close(c->fd);
	if (c->efd >= 0)
		close(c->efd);
	pthread_mutex_destroy(&c->park_lock);
	pthread_mutex_destroy(&c->tl_lock);
	free(c);
}

static void source_destroy(void *data)
{
	hmd_client_put(data);
}

static bool peer_allowed(const struct ucred *cr)
{
	if (hmd.allow_any)
		return true;
	return cr->uid == 0 || cr->uid == geteuid() ||
	       (hmd.allow_uid != (uid_t)-1 && cr->uid == hmd.allow_uid);
}

int hmd_client_accept(int lfd, hm_loop_cb readable)
{
	struct hmd_client *c;
	struct ucred cr;
	socklen_t crlen = sizeof(cr);
	int fd, r;

	fd = accept4(lfd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
	if (fd < 0)
		return -errno;
	if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cr, &crlen) < 0) {
		r = -errno;
		close(fd);
		return r;
	}
	if (!peer_allowed(&cr)) {
		hmd.stats[HM_DSTAT_CLIENTS_REFUSED]++;
		hmd_log(LOG_WARN_, "refused pid %d uid %u", (int)cr.pid,
			(unsigned)cr.uid);
		close(fd);
		return -EPERM;
	}
	if (hmd.nr_clients >= HMD_MAX_CLIENTS || hmd.shutting_down) {
		hmd.stats[HM_DSTAT_CLIENTS_REFUSED]++;
		close(fd);
		return -EMFILE;
	}
	c = calloc(1, sizeof(*c));
	if (!c) {
		close(fd);
		return -ENOMEM;
	}
	pthread_mutex_init(&c->park_lock, NULL);
	pthread_mutex_init(&c->tl_lock, NULL);
	c->fd = fd;
	c->pid = cr.pid;
	c->uid = cr.uid;
	c->gid = cr.gid;
	c->id = ++hmd.next_client_id;
	c->efd = -1;
	c->refs = 1;			/* the loop source's */
	c->next = hmd.clients;
	hmd.clients = c;
	hmd.nr_clients++;
	hmd.stats[HM_DSTAT_CLIENTS_TOTAL]++;
	r = hm_loop_add(hmd.loop, fd, POLLIN, readable, c,
			source_destroy, &c->src);
	if (r < 0) {
		c->fd = -1;
		close(fd);
		hmd_client_put(c);
		return r;
	}
	hmd_log(LOG_INFO_, "client %u: pid %d uid %u connected", c->id,
		(int)c->pid, (unsigned)c->uid);
	return 0;
}

int hmd_client_send_raw_fd(struct hmd_client *c, uint16_t type, uint32_t seq,
			   int status, const void *payload, size_t len, int fd)
{
	struct hm_msg_hdr h = {
		.magic = hm_le32(HM_PROTO_MAGIC),
		.type = hm_le16(type),
		.flags = hm_le16(HM_MSGF_REPLY),
		.seq = hm_le32(seq),
		.len = hm_le32((uint32_t)(sizeof(h) + len)),
		.status = (int32_t)hm_le32((uint32_t)status),
	};
	struct iovec iov[2] = {
		{ .iov_base = &h, .iov_len = sizeof(h) },
		{ .iov_base = (void *)payload, .iov_len = len },
	};
	union {
		struct cmsghdr align;
		char buf[CMSG_SPACE(sizeof(int))];
	} cbuf;
	struct msghdr mh = { .msg_iov = iov, .msg_iovlen = len ? 2 : 1 };
	ssize_t n;

	if (c->dead || c->fd < 0)
		return -ENOTCONN;
	if (fd >= 0) {
		struct cmsghdr *cm;

		memset(&cbuf, 0, sizeof(cbuf));
		mh.msg_control = cbuf.buf;
		mh.msg_controllen = sizeof(cbuf.buf);
		cm = CMSG_FIRSTHDR(&mh);
		cm->cmsg_level = SOL_SOCKET;
		cm->cmsg_type = SCM_RIGHTS;
		cm->cmsg_len = CMSG_LEN(sizeof(int));
		memcpy(CMSG_DATA(cm), &fd, sizeof(int));
	}
	n = sendmsg(c->fd, &mh, MSG_DONTWAIT | MSG_NOSIGNAL);
	return n < 0 ? -errno : 0;
}

int hmd_client_send_raw(struct hmd_client *c, uint16_t type, uint32_t seq,
			int status, const void *payload, size_t len)
{
	return hmd_client_send_raw_fd(c, type, seq, status, payload, len, -1);
}
