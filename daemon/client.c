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
 * device thread hold a reference.  A disconnect (hang-up, kill, protocol
 * violation, shutdown) drops the source, cancels the client's queued
 * dispatches and queues a teardown job behind whatever is running, which
 * frees the client's pipelines, spaces and engine on the device thread.
 */
#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "hmirrord.h"

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
	hmd.stats[HM_DSTAT_CLIENTS] = hmd.nr_clients;
	if (c->fd >= 0)
		close(c->fd);
	if (c->efd >= 0)
		close(c->efd);
	pthread_mutex_destroy(&c->park_lock);
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

int hmd_client_accept(int lfd)
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
	hmd.stats[HM_DSTAT_CLIENTS] = hmd.nr_clients;
	hmd.stats[HM_DSTAT_CLIENTS_TOTAL]++;
	r = hm_loop_add(hmd.loop, fd, POLLIN, hmd_client_readable, c,
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

int hmd_client_send_raw(struct hmd_client *c, uint16_t type, uint32_t seq,
			int status, const void *payload, size_t len)
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
	struct msghdr mh = { .msg_iov = iov, .msg_iovlen = len ? 2 : 1 };
	ssize_t n;

	if (c->dead || c->fd < 0)
		return -ENOTCONN;
	n = sendmsg(c->fd, &mh, MSG_DONTWAIT | MSG_NOSIGNAL);
	return n < 0 ? -errno : 0;
}

int hmd_client_send_fd(struct hmd_client *c, uint16_t type, uint32_t seq,
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
	struct msghdr mh = { .msg_iov = iov, .msg_iovlen = len ? 2 : 1,
			     .msg_control = cbuf.buf, .msg_controllen = sizeof(cbuf.buf) };
	struct cmsghdr *cm = CMSG_FIRSTHDR(&mh);
	ssize_t n;

	if (c->dead || c->fd < 0)
		return -ENOTCONN;
	memset(&cbuf, 0, sizeof(cbuf));
	cm->cmsg_level = SOL_SOCKET;
	cm->cmsg_type = SCM_RIGHTS;
	cm->cmsg_len = CMSG_LEN(sizeof(int));
	memcpy(CMSG_DATA(cm), &fd, sizeof(int));
	n = sendmsg(c->fd, &mh, MSG_DONTWAIT | MSG_NOSIGNAL);
	if (n < 0) {
		int r = -errno;

		hmd_client_disconnect(c, r == -EAGAIN ? "not reading replies" : "send failed");
		return r;
	}
	return 0;
}

int hmd_client_send(struct hmd_client *c, uint16_t type, uint32_t seq,
		    int status, const void *payload, size_t len)
{
	int r = hmd_client_send_raw(c, type, seq, status, payload, len);

	if (r < 0 && r != -ENOTCONN) {

		/*
		 * The replies a client can have outstanding are bounded by
		 * HMD_MAX_INFLIGHT, far below the socket buffer: EAGAIN
		 * means it stopped reading.  Drop it rather than block.
		 */
		hmd_client_disconnect(c, r == -EAGAIN ? "not reading replies" :
				      "send failed");
	}
	return r;
}

/* device thread */
static void teardown_run(struct hmd_job *j)
{
	struct hmd_client *c = j->client;

	for (unsigned i = 0; i < HMD_MAX_PIPELINES; i++)
		if (c->pipes[i].used)
			hmd_eng_pipeline_free(c, &c->pipes[i]);
	for (unsigned i = 0; i < HMD_MAX_SPACES; i++)
		if (c->spaces[i].used)
			hmd_eng_space_remove(c, &c->spaces[i]);
	hmd_eng_client_free(c);
}

/* loop thread */
static void teardown_done(struct hmd_job *j)
{
	struct hmd_client *c = j->client;

	for (unsigned i = 0; i < HMD_MAX_PIPELINES; i++) {
		if (c->pipes[i].used) {
			hmd_module_put(c->pipes[i].mod);
			c->pipes[i].used = false;
			hmd.stats[HM_DSTAT_PIPELINES]--;
		}
	}
	for (unsigned i = 0; i < HMD_MAX_SPACES; i++) {
		if (c->spaces[i].used) {
			c->spaces[i].used = false;
			hmd.stats[HM_DSTAT_SPACES]--;
		}
	}
	pthread_mutex_lock(&hmd_estats_lock);
	if (c->has_estats)
		for (unsigned k = 0; k < HM_ESTAT_NR; k++)
			hmd.retired_estats[k] += c->estats[k];
	c->has_estats = false;
	pthread_mutex_unlock(&hmd_estats_lock);
	hmd_log(LOG_INFO_, "client %u: freed", c->id);
	hmd_client_put(c);
	free(j);
}

void hmd_client_disconnect(struct hmd_client *c, const char *why)
{
	struct hmd_job *j;

	if (c->dead)
		return;
	c->dead = true;
	hmd_log(LOG_INFO_, "client %u: disconnected (%s)", c->id, why);
	/* the peer sees EOF at once, even while the teardown waits */
	shutdown(c->fd, SHUT_RDWR);
	hmd_worker_cancel(c, -ECANCELED);
	j = calloc(1, sizeof(*j));
	if (j) {
		j->run = teardown_run;
		j->done = teardown_done;
		j->client = c;
		hmd_client_get(c);
		hmd_worker_queue(j);
	}
	hm_loop_remove(c->src);		/* drops the source's reference */
}

void hmd_clients_shutdown(void)
{
	struct hmd_client *c, *next;

	for (c = hmd.clients; c; c = next) {
		next = c->next;
		if (!c->dead)
			hmd_client_disconnect(c, "daemon shutting down");
	}
}
