// SPDX-License-Identifier: LGPL-2.1-or-later
/*
 * libhmirror: the client side of hmirrord's protocol (protocol.h).
 *
 * Synchronous calls send one request and read until its reply arrives;
 * dispatch completions that arrive meanwhile are kept in a small table
 * (at most HM_CLIENT_MAX_PENDING outstanding dispatches) for
 * hm_client_wait().  A hang-up marks the connection dead: every pending
 * dispatch completes with -ECONNRESET and every later call fails with
 * -ENOTCONN.  MSG_NOSIGNAL everywhere: a dead daemon never raises SIGPIPE.
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include <hmirror/client.h>
#include "client_raw.h"

#ifndef HMIRROR_CLIENT_HAVE_WATCH
#define HMIRROR_CLIENT_HAVE_WATCH 0
#endif
#if HMIRROR_CLIENT_HAVE_WATCH
#include <hmirror/watch.h>
#else
struct hm_space_handoff { int fds[4]; unsigned nr_fds; uint8_t blob[64]; unsigned blob_len; };
#endif

#define HM_CLIENT_MAX_PENDING	256

struct pending {
	uint32_t seq;
	uint64_t tl_value;		/* the value it reaches (HM_MSG_TIMELINE) */
	bool used, done;
	struct hm_client_result res;
};

struct hm_client {
	int fd;
	int efd;			/* HM_MSG_COMPLETION_FD's, -1 until asked */
	int got_fd;			/* an fd beside the reply call() waits for */
	int tl_fd;			/* HM_MSG_TIMELINE's, -1 until asked */
	uint64_t tl_value0;		/* its value when the daemon made it */
	bool dead;
	uint32_t seq;
	uint64_t nr_dispatches;		/* DISPATCH requests sent: the last one's value */
	struct hm_msg_hello_reply info;
	struct pending pend[HM_CLIENT_MAX_PENDING];
	unsigned nr_pend;
	/* the reply a synchronous call waits for */
	uint32_t want_seq;
	bool got_want;
	int want_status;
	uint8_t *want_buf;
	size_t want_cap, want_len;
	uint8_t rx[HM_PROTO_MAX_MSG] __attribute__((aligned(8)));
};

static uint64_t now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

static void mark_dead(struct hm_client *c)
{
	c->dead = true;
	for (unsigned i = 0; i < HM_CLIENT_MAX_PENDING; i++) {
		if (c->pend[i].used && !c->pend[i].done) {
			c->pend[i].done = true;
			c->pend[i].res.status = -ECONNRESET;
		}
	}
}

static int send_msg(struct hm_client *c, uint16_t type, uint32_t seq,
		    const void *p, size_t len, const void *p2, size_t len2,
		    const int *fds, unsigned nr_fds)
{
	struct hm_msg_hdr h = {
		.magic = hm_le32(HM_PROTO_MAGIC),
		.type = hm_le16(type),
		.seq = hm_le32(seq),
		.len = hm_le32((uint32_t)(sizeof(h) + len + len2)),
	};
	struct iovec iov[3] = {
		{ &h, sizeof(h) }, { (void *)p, len }, { (void *)p2, len2 },
	};
	union {
		struct cmsghdr align;
		char buf[CMSG_SPACE(sizeof(int) * HM_PROTO_MAX_FDS)];
	} cbuf;
	struct msghdr mh = { .msg_iov = iov, .msg_iovlen = 3 };
	ssize_t n;

	if (c->dead)
		return -ENOTCONN;
	if (sizeof(h) + len + len2 > HM_PROTO_MAX_MSG)
		return -EMSGSIZE;
	if (nr_fds) {
		struct cmsghdr *cm;

		if (nr_fds > HM_PROTO_MAX_FDS)
			return -EINVAL;
		memset(&cbuf, 0, sizeof(cbuf));
		mh.msg_control = cbuf.buf;
		mh.msg_controllen = CMSG_SPACE(sizeof(int) * nr_fds);
		cm = CMSG_FIRSTHDR(&mh);
		cm->cmsg_level = SOL_SOCKET;
		cm->cmsg_type = SCM_RIGHTS;
		cm->cmsg_len = CMSG_LEN(sizeof(int) * nr_fds);
		memcpy(CMSG_DATA(cm), fds, sizeof(int) * nr_fds);
	}
	do {
		n = sendmsg(c->fd, &mh, MSG_NOSIGNAL);
	} while (n < 0 && errno == EINTR);
	if (n < 0) {
		int r = -errno;

		if (r == -EPIPE || r == -ECONNRESET || r == -ENOTCONN) {
			mark_dead(c);
			return -ENOTCONN;
		}
		return r;
	}
	return 0;
}

static struct pending *pending_find(struct hm_client *c, uint32_t seq)
{
	for (unsigned i = 0; i < HM_CLIENT_MAX_PENDING; i++)
		if (c->pend[i].used && c->pend[i].seq == seq)
			return &c->pend[i];
	return NULL;
}

/* read one message if one is there within timeout_ms; 0, -ETIMEDOUT, or
 * -ENOTCONN */
static int read_one(struct hm_client *c, int timeout_ms)
{
	struct pollfd pfd = { .fd = c->fd, .events = POLLIN };
	struct hm_msg_hdr h;
	ssize_t n;
	int r, rx_fd;

	if (c->dead)
		return -ENOTCONN;
	r = poll(&pfd, 1, timeout_ms);
	if (r < 0)
		return errno == EINTR ? -ETIMEDOUT : -errno;
	if (r == 0)
		return -ETIMEDOUT;
	{
		union {
			struct cmsghdr align;
			char buf[CMSG_SPACE(sizeof(int) * HM_PROTO_MAX_FDS)];
		} cbuf;
		struct iovec iov = { .iov_base = c->rx, .iov_len = sizeof(c->rx) };
		struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1,
				     .msg_control = cbuf.buf,
				     .msg_controllen = sizeof(cbuf.buf) };
		struct cmsghdr *cm;

		n = recvmsg(c->fd, &mh, MSG_DONTWAIT | MSG_CMSG_CLOEXEC);
		rx_fd = -1;
		for (cm = n > 0 ? CMSG_FIRSTHDR(&mh) : NULL; cm; cm = CMSG_NXTHDR(&mh, cm)) {
			if (cm->cmsg_level != SOL_SOCKET || cm->cmsg_type != SCM_RIGHTS)
				continue;
			for (size_t i = 0; i < (cm->cmsg_len - CMSG_LEN(0)) / sizeof(int); i++) {
				int fd;

				memcpy(&fd, CMSG_DATA(cm) + i * sizeof(int), sizeof(int));
				if (rx_fd < 0)
					rx_fd = fd;
				else
					close(fd);
			}
		}
	}
	if (n < 0) {
		if (errno == EAGAIN || errno == EINTR)
			return 0;
		mark_dead(c);
		return -ENOTCONN;
	}
	if (n == 0) {
		mark_dead(c);
		return -ENOTCONN;
	}
	if ((size_t)n < sizeof(h))
		goto out_drop_fd;	/* not from a daemon we understand; ignore */
	memcpy(&h, c->rx, sizeof(h));
	if (hm_from_le32(h.magic) != HM_PROTO_MAGIC ||
	    hm_from_le32(h.len) != (uint32_t)n)
		goto out_drop_fd;
	uint32_t seq = hm_from_le32(h.seq);
	int status = (int32_t)hm_from_le32((uint32_t)h.status);
	uint16_t type = hm_from_le16(h.type);
	const uint8_t *p = c->rx + sizeof(h);
	size_t plen = (size_t)n - sizeof(h);

	if (type == HM_MSG_DISPATCH) {
		struct pending *pd = pending_find(c, seq);

		if (pd && !pd->done) {
			struct hm_msg_dispatch_reply a = { 0 };

			memcpy(&a, p, plen < sizeof(a) ? plen : sizeof(a));
			pd->done = true;
			pd->res.status = status;
			pd->res.queued_ns = hm_from_le64(a.queued_ns);
			pd->res.run_ns = hm_from_le64(a.run_ns);
			pd->res.dispatch_id = hm_from_le64(a.dispatch_id);
			goto out_drop_fd;
		}
	}
	if (seq == c->want_seq && !c->got_want &&
	    (type != HM_MSG_DISPATCH || !pending_find(c, seq))) {
		c->got_want = true;
		c->want_status = status;
		c->want_len = plen < c->want_cap ? plen : c->want_cap;
		if (c->want_buf)
			memcpy(c->want_buf, p, c->want_len);
		if ((type == HM_MSG_COMPLETION_FD || type == HM_MSG_TIMELINE) &&
		    c->got_fd < 0) {
			c->got_fd = rx_fd;
			rx_fd = -1;
		}
	}
out_drop_fd:
	if (rx_fd >= 0)
		close(rx_fd);
	return 0;
}

/* one request, one reply */
static int call(struct hm_client *c, uint16_t type, const void *p, size_t len,
		const void *p2, size_t len2, const int *fds, unsigned nr_fds,
		void *ret, size_t ret_cap, size_t *ret_len)
{
	uint32_t seq = ++c->seq;
	uint64_t deadline = now_ms() + 30000;
	int r;

	if (!seq)
		seq = ++c->seq;
	c->want_seq = seq;
	c->got_want = false;
	c->want_buf = ret;
	c->want_cap = ret_cap;
	c->want_len = 0;
	r = send_msg(c, type, seq, p, len, p2, len2, fds, nr_fds);
	if (r < 0)
		return r;
	while (!c->got_want) {
		int64_t left = (int64_t)(deadline - now_ms());

		if (left <= 0)
			return -ETIMEDOUT;
		r = read_one(c, (int)left);
		if (r < 0 && r != -ETIMEDOUT)
			return r;
	}
	c->want_buf = NULL;
	if (ret_len)
		*ret_len = c->want_len;
	return c->want_status;
}

int hm_client_connect(const char *path, struct hm_client **ret)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	struct hm_msg_hello h = {
		.version_min = hm_le32(HM_PROTO_VERSION),
		.version_max = hm_le32(HM_PROTO_VERSION),
		.features = hm_le64(HM_FEAT_ALL),
	};
	struct hm_client *c;
	size_t got = 0;
	int r;

	*ret = NULL;	/* callers may hm_client_free() it on failure */
	if (!path)
		path = getenv(HM_PROTO_SOCKET_ENV);
	if (!path || !*path)
		path = HM_PROTO_SOCKET;
	if (strlen(path) >= sizeof(sa.sun_path))
		return -ENAMETOOLONG;
	strcpy(sa.sun_path, path);
	c = calloc(1, sizeof(*c));
	if (c)
		c->efd = c->got_fd = c->tl_fd = -1;
	if (!c)
		return -ENOMEM;
	c->fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
	if (c->fd < 0) {
		r = -errno;
		free(c);
		return r;
	}
	if (connect(c->fd, (struct sockaddr *)&sa, sizeof(sa)) < 0) {
		r = -errno;
		hm_client_free(c);
		return r;
	}
	r = call(c, HM_MSG_HELLO, &h, sizeof(h), NULL, 0, NULL, 0, &c->info,
		 sizeof(c->info), &got);
	if (r == 0 && got != sizeof(c->info))
		r = -EPROTO;
	if (r < 0) {
		hm_client_free(c);
		return r;
	}
	c->info.version = hm_from_le32(c->info.version);
	c->info.client_id = hm_from_le32(c->info.client_id);
	c->info.features = hm_from_le64(c->info.features);
	c->info.max_msg = hm_from_le32(c->info.max_msg);
	c->info.max_spaces = hm_from_le32(c->info.max_spaces);
	c->info.max_pipelines = hm_from_le32(c->info.max_pipelines);
	c->info.max_inflight = hm_from_le32(c->info.max_inflight);
	c->info.max_space_bytes = hm_from_le64(c->info.max_space_bytes);
	c->info.max_spirv_words = hm_from_le32(c->info.max_spirv_words);
	c->info.daemon_pid = hm_from_le32(c->info.daemon_pid);
	c->info.max_push_words = hm_from_le32(c->info.max_push_words);
	c->info.device[sizeof(c->info.device) - 1] = 0;
	*ret = c;
	return 0;
}

void hm_client_free(struct hm_client *c)
{
	if (!c)
		return;
	if (c->fd >= 0)
		close(c->fd);
	if (c->efd >= 0)
		close(c->efd);
	if (c->tl_fd >= 0)
		close(c->tl_fd);
	free(c);
}

const struct hm_msg_hello_reply *hm_client_info(const struct hm_client *c)
{
	return &c->info;
}

int hm_client_fd(const struct hm_client *c)
{
	return c->fd;
}

int hm_client_process(struct hm_client *c)
{
	uint64_t count;

	/* the completion fd first: a completion arriving after the socket
	 * was read leaves it readable */
	if (c->efd >= 0 && read(c->efd, &count, sizeof(count)) < 0 && errno != EAGAIN)
		return -errno;
	for (;;) {
		int r = read_one(c, 0);

		if (r == -ETIMEDOUT)
			return 0;
		if (r < 0)
			return r;
	}
}

int hm_client_completion_fd(struct hm_client *c)
{
	int r;

	if (!c)
		return -EINVAL;
	if (c->efd >= 0)
		return c->efd;
	if (!(c->info.features & HM_FEAT_COMPLETION_FD))
		return -EOPNOTSUPP;
	c->got_fd = -1;
	r = call(c, HM_MSG_COMPLETION_FD, NULL, 0, NULL, 0, NULL, 0, NULL, 0, NULL);
	if (r == 0 && c->got_fd < 0)
		r = -EPROTO;    /* a reply without its fd */
	if (r < 0) {
		if (c->got_fd >= 0)
			close(c->got_fd);
		c->got_fd = -1;
		return r;
	}
	c->efd = c->got_fd;
	c->got_fd = -1;
	return c->efd;
}

/* the daemon's semaphore, asked for once; the library keeps one fd of it
 * and hands out duplicates */
static int timeline_get(struct hm_client *c, const uint8_t *device_uuid,
			const uint8_t *driver_uuid)
{
	struct hm_msg_timeline m = { .handle_type = hm_le32(HM_TIMELINE_OPAQUE_FD) };
	struct hm_msg_timeline_reply a = { 0 };
	uint64_t daemon_count;
	size_t got = 0;
	int r;

	if (!(c->info.features & HM_FEAT_TIMELINE))
		return -EOPNOTSUPP;
	memcpy(m.device_uuid, device_uuid, sizeof(m.device_uuid));
	memcpy(m.driver_uuid, driver_uuid, sizeof(m.driver_uuid));
	c->got_fd = -1;
	r = call(c, HM_MSG_TIMELINE, &m, sizeof(m), NULL, 0, NULL, 0, &a, sizeof(a), &got);
	if (r == 0 && (c->got_fd < 0 || got != sizeof(a)))
		r = -EPROTO;	/* a reply without its fd */
	if (r < 0) {
		if (c->got_fd >= 0)
			close(c->got_fd);
		c->got_fd = -1;
		return r;
	}
	c->tl_fd = c->got_fd;
	c->got_fd = -1;
	c->tl_value0 = hm_from_le64(a.value);
	/* the daemon's count rules (raw DISPATCH datagrams count there too):
	 * dispatches still pending move with it */
	daemon_count = hm_from_le64(a.dispatches);
	for (unsigned i = 0; i < HM_CLIENT_MAX_PENDING; i++)
		if (c->pend[i].used)
			c->pend[i].tl_value += daemon_count - c->nr_dispatches;
	c->nr_dispatches = daemon_count;
	return 0;
}

int hm_client_timeline(struct hm_client *c, const uint8_t *device_uuid,
		       const uint8_t *driver_uuid, int *ret_fd, uint64_t *ret_value)
{
	int fd, r;

	if (!c || !device_uuid || !driver_uuid || !ret_fd)
		return -EINVAL;
	*ret_fd = -1;
	if (c->tl_fd < 0) {
		r = timeline_get(c, device_uuid, driver_uuid);
		if (r < 0)
			return r;
	}
	fd = fcntl(c->tl_fd, F_DUPFD_CLOEXEC, 0);
	if (fd < 0)
		return -errno;
	*ret_fd = fd;
	if (ret_value)
		*ret_value = c->tl_value0;
	return 0;
}

int hm_client_timeline_value(struct hm_client *c, uint64_t ticket, uint64_t *ret_value)
{
	struct pending *pd = ticket <= UINT32_MAX ? pending_find(c, (uint32_t)ticket) : NULL;

	if (!pd)
		return -ENOENT;
	*ret_value = pd->tl_value;
	return 0;
}

int hm_client_ping(struct hm_client *c)
{
	return call(c, HM_MSG_PING, NULL, 0, NULL, 0, NULL, 0, NULL, 0, NULL);
}

int hm_client_space_add_handoff(struct hm_client *c,
				const struct hm_space_handoff *h,
				uint64_t guest_addr, uint32_t *ret_space)
{
	struct hm_msg_space_add m = { 0 };
	struct hm_msg_space_add_reply a = { 0 };
	size_t got = 0;
	int r;

	if (h->nr_fds == 0 || h->nr_fds > HM_PROTO_MAX_FDS ||
	    h->blob_len > HM_PROTO_BLOB_MAX)
		return -EINVAL;
	m.guest_addr = hm_le64(guest_addr);
	m.nr_fds = hm_le32(h->nr_fds);
	m.blob_len = hm_le32(h->blob_len);
	memcpy(m.blob, h->blob, h->blob_len);
	r = call(c, HM_MSG_SPACE_ADD, &m, sizeof(m), NULL, 0, h->fds, h->nr_fds,
		 &a, sizeof(a), &got);
	if (r < 0)
		return r;
	if (got != sizeof(a))
		return -EPROTO;
	*ret_space = hm_from_le32(a.space);
	return 0;
}

int hm_client_space_add(struct hm_client *c, struct hm_space *s,
			uint64_t guest_addr, uint32_t *ret_space)
{
#if HMIRROR_CLIENT_HAVE_WATCH
	struct hm_space_handoff h;
	int r = hm_space_export(s, &h);

	if (r < 0)
		return r;
	r = hm_client_space_add_handoff(c, &h, guest_addr, ret_space);
	hm_handoff_close(&h);
	return r;
#else
	return -ENOSYS;
#endif
}

static int handle_call(struct hm_client *c, uint16_t type, uint32_t handle)
{
	struct hm_msg_handle m = { .handle = hm_le32(handle) };

	return call(c, type, &m, sizeof(m), NULL, 0, NULL, 0, NULL, 0, NULL);
}

int hm_client_space_remove(struct hm_client *c, uint32_t space)
{
	return handle_call(c, HM_MSG_SPACE_REMOVE, space);
}

int hm_client_map(struct hm_client *c, uint32_t space, uint64_t offset, uint64_t size,
		  uint64_t guest_addr, uint32_t flags)
{
	struct hm_msg_map m = {
		.space = hm_le32(space), .flags = hm_le32(flags),
		.offset = hm_le64(offset), .size = hm_le64(size),
		.guest_addr = hm_le64(guest_addr),
	};

	if (!(c->info.features & HM_FEAT_GUEST_MAP))
		return -EOPNOTSUPP;
	return call(c, HM_MSG_MAP, &m, sizeof(m), NULL, 0, NULL, 0, NULL, 0, NULL);
}

int hm_client_unmap(struct hm_client *c, uint64_t guest_addr, uint64_t size)
{
	struct hm_msg_unmap m = { .guest_addr = hm_le64(guest_addr), .size = hm_le64(size) };

	if (!(c->info.features & HM_FEAT_GUEST_MAP))
		return -EOPNOTSUPP;
	return call(c, HM_MSG_UNMAP, &m, sizeof(m), NULL, 0, NULL, 0, NULL, 0, NULL);
}

int hm_client_advise(struct hm_client *c, uint64_t guest_addr, uint64_t size,
		     uint32_t advice)
{
	struct hm_msg_advise m = {
		.guest_addr = hm_le64(guest_addr),
		.size = hm_le64(size),
		.advice = hm_le32(advice),
	};

	return call(c, HM_MSG_ADVISE, &m, sizeof(m), NULL, 0, NULL, 0, NULL, 0,
		    NULL);
}

int hm_client_prefetch(struct hm_client *c)
{
	if (!c)
		return -EINVAL;
	if (!(c->info.features & HM_FEAT_PREFETCH))
		return -EOPNOTSUPP;
	return call(c, HM_MSG_PREFETCH, NULL, 0, NULL, 0, NULL, 0, NULL, 0, NULL);
}

static int consumer_call(struct hm_client *c, uint32_t space, uint32_t op, uint64_t off,
			 uint64_t len)
{
	struct hm_msg_consumer m = {
		.space = hm_le32(space), .op = hm_le32(op),
		.off = hm_le64(off), .len = hm_le64(len),
	};

	if (!c)
		return -EINVAL;
	return call(c, HM_MSG_CONSUMER, &m, sizeof(m), NULL, 0, NULL, 0, NULL, 0, NULL);
}

int hm_client_watch(struct hm_client *c, uint32_t space, uint64_t off, uint64_t len)
{
	return consumer_call(c, space, HM_CONS_WATCH, off, len);
}

int hm_client_unwatch(struct hm_client *c, uint32_t space, uint64_t off, uint64_t len)
{
	return consumer_call(c, space, HM_CONS_UNWATCH, off, len);
}

int hm_client_harvest(struct hm_client *c, uint32_t space, unsigned flags,
		      uint64_t *ret_chunks, size_t cap, size_t *ret_n, bool *ret_more)
{
	struct hm_msg_consumer m = { .space = hm_le32(space), .op = hm_le32(HM_CONS_HARVEST),
				     .flags = hm_le32(flags) };
	struct hm_msg_consumer_reply a;
	size_t got = 0, n;
	uint64_t *buf;
	int r;

	if (!c || !ret_n || (cap && !ret_chunks))
		return -EINVAL;
	*ret_n = 0;
	if (ret_more)
		*ret_more = false;
	if (cap > HM_PROTO_MAX_HARVEST)
		cap = HM_PROTO_MAX_HARVEST;
	m.cap = hm_le32((uint32_t)cap);
	buf = malloc(sizeof(a) + cap * sizeof(uint64_t));
	if (!buf)
		return -ENOMEM;
	r = call(c, HM_MSG_CONSUMER, &m, sizeof(m), NULL, 0, NULL, 0, buf,
		 sizeof(a) + cap * sizeof(uint64_t), &got);
	if (r >= 0 && got < sizeof(a))
		r = -EPROTO;
	if (r >= 0) {
		memcpy(&a, buf, sizeof(a));
		n = hm_from_le32(a.nr);
		if (n > cap || got != sizeof(a) + n * sizeof(uint64_t)) {
			r = -EPROTO;
		} else {
			for (size_t i = 0; i < n; i++) {
				uint64_t v;

				memcpy(&v, (uint8_t *)buf + sizeof(a) + i * sizeof(v), sizeof(v));
				ret_chunks[i] = hm_from_le64(v);
			}
			*ret_n = n;
			if (ret_more)
				*ret_more = hm_from_le32(a.more) != 0;
		}
	}
	free(buf);
	return r < 0 ? r : 0;
}

int hm_client_pipeline_new(struct hm_client *c, const uint32_t *spirv,
			   size_t nr_words, const char *entry,
			   uint32_t user_push_words, uint32_t *ret_pipeline)
{
	return hm_client_pipeline_new_tiered(c, spirv, nr_words, entry, user_push_words, 0,
					     ret_pipeline);
}

int hm_client_pipeline_new_tiered(struct hm_client *c, const uint32_t *spirv,
				  size_t nr_words, const char *entry,
				  uint32_t user_push_words, uint32_t flags,
				  uint32_t *ret_pipeline)
{
	struct hm_msg_pipeline_new m = { 0 };
	struct hm_msg_pipeline_new_reply a = { 0 };
	size_t got = 0, bytes = nr_words * 4;
	int r, fd = -1;

	if (!entry || strlen(entry) >= HM_PROTO_ENTRY_MAX || !nr_words ||
	    nr_words > UINT32_MAX / 4 ||
	    (flags & ~(HM_PIPEF_COMPACT_ONLY | HM_PIPEF_SPECULATIVE_ONLY)))
		return -EINVAL;
	if (user_push_words > c->info.max_push_words)
		return -E2BIG;          /* the daemon's engine's limit (HELLO) */
	m.flags = hm_le32(flags);
	m.nr_words = hm_le32((uint32_t)nr_words);
	m.user_push_words = hm_le32(user_push_words);
	strcpy(m.entry, entry);
	if (sizeof(struct hm_msg_hdr) + sizeof(m) + bytes <= HM_PROTO_MAX_MSG) {
		r = call(c, HM_MSG_PIPELINE_NEW, &m, sizeof(m), spirv, bytes,
			 NULL, 0, &a, sizeof(a), &got);
	} else {
		/* too big for one datagram: a sealed memfd */
		fd = memfd_create("hmirror-spirv", MFD_CLOEXEC | MFD_ALLOW_SEALING);
		if (fd < 0)
			return -errno;
		if (ftruncate(fd, (off_t)bytes) < 0 ||
		    pwrite(fd, spirv, bytes, 0) != (ssize_t)bytes ||
		    fcntl(fd, F_ADD_SEALS, F_SEAL_WRITE | F_SEAL_SHRINK |
			  F_SEAL_GROW | F_SEAL_SEAL) < 0) {
			r = -errno;
			close(fd);
			return r;
		}
		m.flags = hm_le32(HM_PIPEF_MEMFD | flags);
		r = call(c, HM_MSG_PIPELINE_NEW, &m, sizeof(m), NULL, 0, &fd, 1,
			 &a, sizeof(a), &got);
		close(fd);
	}
	if (r < 0)
		return r;
	if (got != sizeof(a))
		return -EPROTO;
	*ret_pipeline = hm_from_le32(a.pipeline);
	return 0;
}

int hm_client_pipeline_free(struct hm_client *c, uint32_t pipeline)
{
	return handle_call(c, HM_MSG_PIPELINE_FREE, pipeline);
}

int hm_client_submit(struct hm_client *c, const struct hm_client_dispatch *d,
		     uint64_t *ret_ticket)
{
	struct hm_msg_dispatch m = { 0 };
	struct pending *pd = NULL;
	uint32_t seq;
	int r;

	if (d->nr_push > HM_PROTO_MAX_PUSH || (d->nr_push && !d->push))
		return -EINVAL;
	if (c->dead)
		return -ENOTCONN;
	for (unsigned i = 0; i < HM_CLIENT_MAX_PENDING; i++)
		if (!c->pend[i].used) {
			pd = &c->pend[i];
			break;
		}
	if (!pd)
		return -EBUSY;	/* wait for some first */
	m.pipeline = hm_le32(d->pipeline);
	for (unsigned i = 0; i < 3; i++)
		m.groups[i] = hm_le32(d->groups[i]);
	m.flags = hm_le32(d->flags);
	m.nr_push = hm_le32(d->nr_push);
	for (unsigned i = 0; i < d->nr_push; i++)
		m.push[i] = hm_le32(d->push[i]);
	seq = ++c->seq;
	if (!seq)
		seq = ++c->seq;
	memset(pd, 0, sizeof(*pd));
	pd->used = true;
	pd->seq = seq;
	r = send_msg(c, HM_MSG_DISPATCH, seq, &m, sizeof(m), NULL, 0, NULL, 0);
	if (r < 0) {
		pd->used = false;
		return r;
	}
	pd->tl_value = ++c->nr_dispatches;	/* the daemon counts it the same */
	*ret_ticket = seq;
	return 0;
}

int hm_client_wait(struct hm_client *c, uint64_t ticket, int timeout_ms,
		   struct hm_client_result *ret)
{
	struct pending *pd = pending_find(c, (uint32_t)ticket);
	uint64_t deadline = now_ms() + (timeout_ms > 0 ? (uint64_t)timeout_ms : 0);
	int r;

	if (!pd || ticket > UINT32_MAX)
		return -ENOENT;
	while (!pd->done) {
		int left = -1;

		if (timeout_ms >= 0) {
			int64_t l = (int64_t)(deadline - now_ms());

			left = l > 0 ? (int)l : 0;
		}
		r = read_one(c, left);
		if (pd->done)
			break;
		if (r == -ETIMEDOUT && timeout_ms >= 0 && left == 0)
			return -ETIMEDOUT;
		if (r < 0 && r != -ETIMEDOUT)
			break;
	}
	if (!pd->done)
		return -ENOTCONN;
	if (ret)
		*ret = pd->res;
	pd->used = false;
	return pd->res.status;
}

int hm_client_dispatch(struct hm_client *c, const struct hm_client_dispatch *d,
		       int timeout_ms, struct hm_client_result *ret)
{
	uint64_t t;
	int r = hm_client_submit(c, d, &t);

	if (r < 0)
		return r;
	return hm_client_wait(c, t, timeout_ms, ret);
}

int hm_client_stats(struct hm_client *c, struct hm_client_stats *ret)
{
	uint8_t buf[sizeof(struct hm_msg_stats_reply) + 256 * 8]
		__attribute__((aligned(8)));
	struct hm_msg_stats_reply h;
	size_t got = 0;
	int r;

	r = call(c, HM_MSG_STATS, NULL, 0, NULL, 0, NULL, 0, buf, sizeof(buf),
		 &got);
	if (r < 0)
		return r;
	if (got < sizeof(h))
		return -EPROTO;
	memcpy(&h, buf, sizeof(h));
	uint32_t nd = hm_from_le32(h.nr_daemon), ne = hm_from_le32(h.nr_engine);

	if (sizeof(h) + ((size_t)nd + ne) * 8 > got)
		return -EPROTO;
	memset(ret, 0, sizeof(*ret));
	ret->nr_daemon = nd < HM_DSTAT_NR ? nd : HM_DSTAT_NR;
	ret->nr_engine = ne < HM_ESTAT_NR ? ne : HM_ESTAT_NR;
	for (uint32_t i = 0; i < ret->nr_daemon; i++) {
		uint64_t v;

		memcpy(&v, buf + sizeof(h) + i * 8, 8);
		ret->daemon[i] = hm_from_le64(v);
	}
	for (uint32_t i = 0; i < ret->nr_engine; i++) {
		uint64_t v;

		memcpy(&v, buf + sizeof(h) + (nd + i) * 8, 8);
		ret->engine[i] = hm_from_le64(v);
	}
	return 0;
}

static const char *const dstat_names[HM_DSTAT_NR] = {
	[HM_DSTAT_CLIENTS] = "clients",
	[HM_DSTAT_CLIENTS_TOTAL] = "clients_total",
	[HM_DSTAT_CLIENTS_REFUSED] = "clients_refused",
	[HM_DSTAT_MSGS] = "messages",
	[HM_DSTAT_BAD_MSGS] = "bad_messages",
	[HM_DSTAT_SPACES] = "spaces",
	[HM_DSTAT_PIPELINES] = "pipelines",
	[HM_DSTAT_VALIDATIONS] = "validations",
	[HM_DSTAT_VALIDATION_FAILS] = "validation_failures",
	[HM_DSTAT_CACHE_HITS] = "pipeline_cache_hits",
	[HM_DSTAT_DISPATCHES] = "dispatches",
	[HM_DSTAT_DISPATCH_FAILS] = "dispatch_failures",
	[HM_DSTAT_INFLIGHT] = "inflight",
	[HM_DSTAT_NL_EVENTS] = "netlink_events",
	[HM_DSTAT_NL_DROPS] = "netlink_mirror_drops",
	[HM_DSTAT_UPTIME_NS] = "uptime_ns",
	[HM_DSTAT_RUNNING] = "running",
	[HM_DSTAT_VK_MESSAGES] = "vulkan_validation_messages",
	[HM_DSTAT_CLIENTS_CLOSING] = "clients_closing",
};

static const char *const estat_names[HM_ESTAT_NR] = {
	[HM_ESTAT_DISPATCHES] = "dispatches",
	[HM_ESTAT_CHUNKS_MIRRORED] = "chunks_mirrored",
	[HM_ESTAT_GUARD_TRIPS] = "guard_trips",
	[HM_ESTAT_MIRRORS_DROPPED] = "mirrors_dropped",
	[HM_ESTAT_BYTES_UPLOADED] = "bytes_uploaded",
	[HM_ESTAT_BYTES_COPIED_HOME] = "bytes_copied_home",
	[HM_ESTAT_TIER_SWITCHES] = "tier_switches",
	[HM_ESTAT_TIER_ONE_SKIPPED] = "tier_one_skipped",
	[HM_ESTAT_UPLOADS] = "uploads",
	[HM_ESTAT_UPLOADS_DISCARDED] = "uploads_discarded",
	[HM_ESTAT_MIRRORS_EVICTED] = "mirrors_evicted",
	[HM_ESTAT_THRASH_BACKOFFS] = "thrash_backoffs",
	[HM_ESTAT_BUDGET_REFUSALS] = "budget_refusals",
	[HM_ESTAT_REFRESHES] = "mirrors_refreshed",
	[HM_ESTAT_MARKS_SCANNED] = "marks_scanned",
	[HM_ESTAT_CHUNKS_COPIED_HOME] = "chunks_copied_home",
	[HM_ESTAT_NS_HARVEST] = "ns_harvest",
	[HM_ESTAT_NS_UPLOAD] = "ns_upload",
	[HM_ESTAT_NS_UPLOAD_COPY] = "ns_upload_copy",
	[HM_ESTAT_NS_DISPATCH] = "ns_dispatch",
	[HM_ESTAT_NS_DISPATCH_GPU] = "ns_dispatch_gpu",
	[HM_ESTAT_NS_MARKS] = "ns_marks",
	[HM_ESTAT_NS_COPY_BACK] = "ns_copy_back",
	[HM_ESTAT_NS_TOTAL] = "ns_total",
	[HM_ESTAT_SHARED_DISPATCHES] = "shared_dispatches",
	[HM_ESTAT_MIRROR_BYTES] = "mirror_bytes",
	[HM_ESTAT_MIRROR_BUDGET] = "mirror_budget",
	[HM_ESTAT_UPLOAD_REGIONS] = "upload_regions",
	[HM_ESTAT_UPLOAD_RETRIES] = "upload_retries",
	[HM_ESTAT_MIRRORS_DROPPED_EARLY] = "mirrors_dropped_early",
	[HM_ESTAT_EARLY_HARVESTS] = "early_harvests",
	[HM_ESTAT_MIRRORS_DROPPED_SHARED] = "mirrors_dropped_shared",
	[HM_ESTAT_ALLOC_FAILURES] = "alloc_failures",
	[HM_ESTAT_SINK_MARKS] = "sink_marks",
	[HM_ESTAT_IMPORT_PIECES] = "import_pieces",
	[HM_ESTAT_NS_UPLOAD_SELECT] = "ns_upload_select",
	[HM_ESTAT_NS_UPLOAD_GENS] = "ns_upload_gens",
	[HM_ESTAT_NS_UPLOAD_CHECK] = "ns_upload_check",
	[HM_ESTAT_AHEAD_PASSES] = "ahead_passes",
	[HM_ESTAT_AHEAD_UPLOADS] = "ahead_uploads",
	[HM_ESTAT_AHEAD_DISCARDED] = "ahead_discarded",
	[HM_ESTAT_NS_AHEAD] = "ns_ahead",
	[HM_ESTAT_NS_AHEAD_WAIT] = "ns_ahead_wait",
	[HM_ESTAT_NS_AHEAD_HARVEST] = "ns_ahead_harvest",
	[HM_ESTAT_NS_AHEAD_COPY] = "ns_ahead_copy",
	[HM_ESTAT_NS_AHEAD_CHECK] = "ns_ahead_check",
	[HM_ESTAT_NS_AHEAD_SELECT] = "ns_ahead_select",
	[HM_ESTAT_NS_AHEAD_GENS] = "ns_ahead_gens",
	[HM_ESTAT_NS_AHEAD_PUBLISH] = "ns_ahead_publish",
	[HM_ESTAT_NS_AHEAD_FINISH] = "ns_ahead_finish",
	[HM_ESTAT_NS_WINDOW_PLAN] = "ns_window_plan",
	[HM_ESTAT_NS_WINDOW_RECORD] = "ns_window_record",
	[HM_ESTAT_NS_UPLOAD_PUBLISH] = "ns_upload_publish",
	[HM_ESTAT_NS_WINDOW_SYNC] = "ns_window_sync",
	[HM_ESTAT_WINDOW_BYTES] = "window_bytes",
	[HM_ESTAT_WINDOW_SYNCS] = "window_syncs",
	[HM_ESTAT_WINDOW_COPIES] = "window_copies",
	[HM_ESTAT_WINDOW_FILLS] = "window_fills",
	[HM_ESTAT_WINDOW_REFUSALS] = "window_refusals",
	[HM_ESTAT_WINDOW_UNCOVERED_BYTES] = "window_uncovered_bytes",
	[HM_ESTAT_WINDOW_BINDS] = "window_binds",
	[HM_ESTAT_DISPATCHES_RECORDED] = "dispatches_recorded",
	[HM_ESTAT_DISPATCHES_SUBMITTED] = "dispatches_submitted",
	[HM_ESTAT_PREFETCHES] = "prefetches",
	[HM_ESTAT_NS_PREFETCH] = "ns_prefetch",
	[HM_ESTAT_IMPORT_BYTES] = "import_bytes",
	[HM_ESTAT_IMPORT_FAILURES] = "import_failures",
	[HM_ESTAT_NS_IMPORT] = "ns_import",
};

const char *hm_daemon_stat_name(unsigned i)
{
	return i < HM_DSTAT_NR ? dstat_names[i] : NULL;
}

const char *hm_engine_stat_name(unsigned i)
{
	return i < HM_ESTAT_NR ? estat_names[i] : NULL;
}

int hm__client_send_raw(struct hm_client *c, const void *buf, size_t len,
			const int *fds, unsigned nr_fds)
{
	union {
		struct cmsghdr align;
		char b[CMSG_SPACE(sizeof(int) * 16)];
	} cbuf;
	struct iovec iov = { (void *)buf, len };
	struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1 };
	ssize_t n;

	if (c->dead)
		return -ENOTCONN;
	if (nr_fds) {
		struct cmsghdr *cm;

		if (nr_fds > 16)
			return -EINVAL;
		memset(&cbuf, 0, sizeof(cbuf));
		mh.msg_control = cbuf.b;
		mh.msg_controllen = CMSG_SPACE(sizeof(int) * nr_fds);
		cm = CMSG_FIRSTHDR(&mh);
		cm->cmsg_level = SOL_SOCKET;
		cm->cmsg_type = SCM_RIGHTS;
		cm->cmsg_len = CMSG_LEN(sizeof(int) * nr_fds);
		memcpy(CMSG_DATA(cm), fds, sizeof(int) * nr_fds);
	}
	n = sendmsg(c->fd, &mh, MSG_NOSIGNAL);
	return n < 0 ? -errno : (int)n;
}

int hm__client_recv_raw(struct hm_client *c, void *buf, size_t cap,
			int timeout_ms)
{
	struct pollfd pfd = { .fd = c->fd, .events = POLLIN };
	ssize_t n;
	int r;

	r = poll(&pfd, 1, timeout_ms);
	if (r < 0)
		return -errno;
	if (r == 0)
		return -ETIMEDOUT;
	n = recv(c->fd, buf, cap, MSG_DONTWAIT);
	if (n == 0) {
		mark_dead(c);
		return -ENOTCONN;
	}
	return n < 0 ? -errno : (int)n;
}
