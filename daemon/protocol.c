// SPDX-License-Identifier: GPL-2.0
/*
 * The daemon side of the protocol (lib/include/hmirror/protocol.h).
 *
 * One datagram is one message, so framing can never be lost: every
 * malformed message (garbage, truncated, oversized, bad flags or padding,
 * wrong payload size, stray fds, unknown handles, a module validation
 * refuses) is answered with an error and the connection is kept.  An
 * error a well-formed request earns (-EEXIST, -ENOENT from the engine's
 * mappings, a limit, the device's failure) is an answer, not a bad
 * message.  The connection is closed deliberately only for: a first
 * message that is not HELLO, a client past HMD_MAX_BAD malformed
 * messages, a hang-up, or a client that stops reading its replies.
 * Everything is validated before any state is touched.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <linux/magic.h>
#include <unistd.h>

#include <hmirror/watch.h>

#include "client.h"
#include "engine_host.h"
#include "protocol.h"
#include "state.h"
#include "validate.h"
#include "worker.h"

#define HMD_MAX_BAD	64
#define HMD_MSGS_PER_WAKEUP	16

/* ---- the connection: replies, disconnect, teardown ---- */

/* a reply, with fd passed along when fd >= 0; a client that cannot take
 * it is disconnected */
static int hmd_client_send_fd(struct hmd_client *c, uint16_t type, uint32_t seq,
			      int status, const void *payload, size_t len, int fd)
{
	int r = hmd_client_send_raw_fd(c, type, seq, status, payload, len, fd);

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

static int hmd_client_send(struct hmd_client *c, uint16_t type, uint32_t seq,
			   int status, const void *payload, size_t len)
{
	return hmd_client_send_fd(c, type, seq, status, payload, len, -1);
}

/* device thread */
static void teardown_run(struct hmd_job *j)
{
	struct hmd_client *c = hmd_job_client(j);

	for (unsigned i = 0; i < HMD_MAX_PIPELINES; i++)
		if (c->pipes[i].used)
			hmd_eng_pipeline_free(c, &c->pipes[i]);
	for (unsigned i = 0; i < HMD_MAX_SPACES; i++)
		if (c->spaces[i].used)
			hmd_eng_space_remove(c, &c->spaces[i]);
	hmd_eng_client_free(c);
	pthread_mutex_lock(&c->tl_lock);
	hmd_eng_timeline_free(c->tl);
	c->tl = NULL;
	pthread_mutex_unlock(&c->tl_lock);
}

/* loop thread */
static void teardown_done(struct hmd_job *j)
{
	struct hmd_client *c = hmd_job_client(j);

	for (unsigned i = 0; i < HMD_MAX_PIPELINES; i++) {
		if (c->pipes[i].used) {
			hmd_module_put(c->pipes[i].mod);
			c->pipes[i].used = false;
		}
	}
	for (unsigned i = 0; i < HMD_MAX_SPACES; i++)
		c->spaces[i].used = false;
	hmd_log(LOG_INFO_, "client %u: freed", c->id);
	hmd_client_put(c);
	free(j);
}

/* loop thread */
void hmd_client_disconnect(struct hmd_client *c, const char *why)
{
	struct hmd_job *j;

	if (c->dead)
		return;
	c->dead = true;
	hmd_log(LOG_INFO_, "client %u: disconnected (%s)", c->id, why);
	/*
	 * STATS counts it as gone from now on, not once its teardown ran
	 * (behind its dispatches, seconds later): its engine's counters move
	 * to those of clients gone, and what its last jobs add follows them
	 * there (hmd_client_refresh_estats()).
	 */
	pthread_mutex_lock(&hmd_estats_lock);
	if (c->has_estats)
		for (unsigned k = 0; k < HM_ESTAT_NR; k++)
			if (!HM_ESTAT_IS_GAUGE(k))
				hmd.retired_estats[k] += c->estats[k];
	c->estats_retired = true;
	pthread_mutex_unlock(&hmd_estats_lock);
	/* the peer sees EOF at once, even while the teardown waits */
	shutdown(c->fd, SHUT_RDWR);
	hmd_worker_cancel(c, -ECANCELED);
	j = calloc(1, sizeof(*j));
	if (j) {
		j->run = teardown_run;
		j->done = teardown_done;
		j->owner = c;
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

/* ---- requests ---- */

struct hmd_req {
	struct hmd_job job;
	uint16_t type;
	uint32_t seq;
	struct hmd_space *space;
	struct hmd_pipeline *pipe;
	union {
		struct {
			uint64_t addr, size;
			uint32_t advice;
		} adv;
		struct hm_msg_dispatch disp;
		struct {		/* MAP, UNMAP */
			uint64_t offset, size, guest_addr;
			uint32_t flags;
		} map;
		struct {		/* PIPELINE_NEW on the compile thread */
			uint32_t *words;
			size_t nr;
			char entry[HM_PROTO_ENTRY_MAX];
			uint32_t push;
			uint32_t flags;		/* HM_PIPEF_*_ONLY */
			struct hmd_module *mod;
			struct hmd_prebuilt *prebuilt;
			bool cached;
			char msg[256];
		} pl;
	};
	uint64_t estats[HM_ESTAT_NR];
	int nr_estats;
	uint64_t tl_value;		/* DISPATCH: its timeline value */
	bool replied;
	int send_status;
};

static uint8_t rxbuf[HM_PROTO_MAX_MSG] __attribute__((aligned(8)));

/* an answer: success, or an error a well-formed request earned (a mapping
 * that exists, nothing mapped there, a limit reached, the device's
 * failure); a client may earn those without end */
static void reply(struct hmd_client *c, uint16_t type, uint32_t seq, int status,
		  const void *p, size_t len)
{
	hmd_client_send(c, type, seq, status, p, len);
}

/* a malformed message (the list at the top, a module validation refused):
 * answered, and counted against the connection (HMD_MAX_BAD) */
static void refuse(struct hmd_client *c, uint16_t type, uint32_t seq, int status,
		   const void *p, size_t len)
{
	hmd.stats[HM_DSTAT_BAD_MSGS]++;
	hmd_client_send(c, type, seq, status, p, len);
	if (++c->bad_msgs > HMD_MAX_BAD)
		hmd_client_disconnect(c, "too many bad messages");
}

/* the refusals of a well-formed request that the loop thread gives itself:
 * a limit or a resource, not the message's fault */
static bool refusal_is_answer(int err)
{
	return err == -ENOMEM || err == -ENOSPC || err == -EBUSY || err == -EAGAIN ||
	       err == -EMFILE || err == -ENFILE;
}

static void error_msg(struct hmd_client *c, uint32_t seq, int status,
		      uint32_t bad_type, uint32_t bad_len)
{
	struct hm_msg_error e = {
		.bad_type = hm_le32(bad_type),
		.bad_len = hm_le32(bad_len),
	};

	refuse(c, HM_MSG_ERROR, seq, status, &e, sizeof(e));
}

static struct hmd_req *req_new(struct hmd_client *c, uint16_t type,
			       uint32_t seq, hmd_job_fn run, hmd_job_fn done)
{
	struct hmd_req *r = calloc(1, sizeof(*r));

	if (!r)
		return NULL;
	r->type = type;
	r->seq = seq;
	r->job.run = run;
	r->job.done = done;
	r->job.owner = c;
	hmd_client_get(c);
	return r;
}

static void req_finish(struct hmd_req *r)
{
	hmd_client_put(hmd_job_client(&r->job));
	free(r);
}

static struct hmd_space *space_by_handle(struct hmd_client *c, uint32_t h)
{
	if (h == 0 || h > HMD_MAX_SPACES || !c->spaces[h - 1].used ||
	    c->spaces[h - 1].removing || c->spaces[h - 1].adding)
		return NULL;
	return &c->spaces[h - 1];
}

static struct hmd_pipeline *pipe_by_handle(struct hmd_client *c, uint32_t h)
{
	if (h == 0 || h > HMD_MAX_PIPELINES || !c->pipes[h - 1].used ||
	    c->pipes[h - 1].removing || !c->pipes[h - 1].mod /* compiling */)
		return NULL;
	return &c->pipes[h - 1];
}

/* ---- HELLO, PING ---- */

static int on_hello(struct hmd_client *c, uint32_t seq, const void *p,
		    size_t len)
{
	struct hm_msg_hello h;
	struct hm_msg_hello_reply r = { 0 };
	uint32_t vmin, vmax;

	if (len != sizeof(h))
		return -EBADMSG;
	memcpy(&h, p, sizeof(h));
	if (c->hello)
		return -EALREADY;
	vmin = hm_from_le32(h.version_min);
	vmax = hm_from_le32(h.version_max);
	if (vmin > vmax)
		return -EINVAL;
	if (vmin > HM_PROTO_VERSION || vmax < HM_PROTO_VERSION)
		return -EPROTONOSUPPORT;
	if (!(hm_from_le64(h.features) & HM_FEAT_PUSH_LAYOUT2))
		return -EPROTONOSUPPORT;	/* its modules read other push words */
	c->hello = true;
	r.version = hm_le32(HM_PROTO_VERSION);
	r.client_id = hm_le32(c->id);
	r.features = hm_le64(HM_FEAT_MEMFD_SPIRV | HM_FEAT_PUSH_LAYOUT2 | HM_FEAT_CONSUMER |
			     HM_FEAT_COMPLETION_FD |
			     (hmd_eng_timeline_supported() ? HM_FEAT_TIMELINE : 0) |
			     (hmd_engine_available() ? HM_FEAT_ENGINE | HM_FEAT_TIERS |
			      HM_FEAT_GUEST_MAP | HM_FEAT_PREFETCH : 0) |
			     (hmd.netlink ? HM_FEAT_NETLINK : 0));
	r.max_msg = hm_le32(HM_PROTO_MAX_MSG);
	r.max_spaces = hm_le32(HMD_MAX_SPACES);
	r.max_pipelines = hm_le32(HMD_MAX_PIPELINES);
	r.max_inflight = hm_le32(HMD_MAX_INFLIGHT);
	r.max_space_bytes = hm_le64(HMD_MAX_SPACE_BYTES);
	r.max_spirv_words = hm_le32(HMD_MAX_SPIRV_WORDS);
	r.max_push_words = hm_le32(HM_PROTO_MAX_PUSH);
	r.daemon_pid = hm_le32((uint32_t)getpid());
	snprintf(r.device, sizeof(r.device), "%s", hmd.dev.name);
	reply(c, HM_MSG_HELLO, seq, 0, &r, sizeof(r));
	return 0;
}

/* ---- SPACE_ADD / SPACE_REMOVE ---- */

static void space_add_run(struct hmd_job *j)
{
	struct hmd_req *r = (struct hmd_req *)j;

	j->status = hmd_eng_space_add(hmd_job_client(j), r->space);
	hmd_client_refresh_estats(hmd_job_client(j));
}

static void space_add_done(struct hmd_job *j)
{
	struct hmd_req *r = (struct hmd_req *)j;
	struct hmd_client *c = hmd_job_client(j);
	struct hmd_space *sp = r->space;
	struct hm_msg_space_add_reply a = { 0 };

	if (j->status < 0 || c->dead) {
		/* not in the engine: free here (teardown skips unused slots) */
		if (sp->used && !c->dead) {
			hmd_eng_space_remove(c, sp);
			sp->used = false;
			c->nr_spaces--;
			c->space_bytes -= sp->size;
		}
		if (!c->dead)
			reply(c, HM_MSG_SPACE_ADD, r->seq, j->status, NULL, 0);
		req_finish(r);
		return;
	}
	sp->adding = false;	/* the handle exists from this reply on */
	a.space = hm_le32((uint32_t)(sp - c->spaces) + 1);
	a.chunk_shift = hm_le32(sp->chunk_shift);
	a.size = hm_le64(sp->size);
	reply(c, HM_MSG_SPACE_ADD, r->seq, 0, &a, sizeof(a));
	req_finish(r);
}

static void close_fds(int *fds, unsigned n)
{
	for (unsigned i = 0; i < n; i++)
		if (fds[i] >= 0) {
			close(fds[i]);
			fds[i] = -1;
		}
}

/*
 * The fds of a space, checked before the import keeps any: the pages (a
 * memfd sealed against shrinking, so they cannot vanish under the
 * daemon's mappings; or the module's space fd, alone, which the import
 * proves with its ioctl), a userfaultfd, /proc/PID/pagemap.  Anything
 * else (a socket, above all the client's own connection, which would
 * never see its hang-up; a pipe, a directory, a plain file beside other
 * fds) is refused.  *ret_pages: the memfd, or -1.
 */
static int space_fds_check(const int *fds, unsigned n, int *ret_pages)
{
	unsigned nr_pages = 0;

	*ret_pages = -1;
	for (unsigned i = 0; i < n; i++) {
		char link[64], target[256];
		struct statfs sfs;
		struct stat st;
		ssize_t len;
		int seals;

		snprintf(link, sizeof(link), "/proc/self/fd/%d", fds[i]);
		len = readlink(link, target, sizeof(target) - 1);
		if (len < 0 || fstat(fds[i], &st) < 0)
			return -EBADF;
		target[len] = 0;
		if (S_ISSOCK(st.st_mode) || S_ISFIFO(st.st_mode) || S_ISDIR(st.st_mode))
			return -EBADF;
		if (!strncmp(target, "/memfd:", 7)) {
			seals = fcntl(fds[i], F_GET_SEALS);
			if (seals < 0 || !(seals & F_SEAL_SHRINK))
				return -EPERM;
			*ret_pages = fds[i];
			nr_pages++;
		} else if (!strcmp(target, "anon_inode:[userfaultfd]")) {
			continue;
		} else if (fstatfs(fds[i], &sfs) == 0 && sfs.f_type == PROC_SUPER_MAGIC &&
			   len >= 8 && !strcmp(target + len - 8, "/pagemap")) {
			continue;
		} else if (n == 1) {
			/* the module's space fd (an inode of its own file
			 * system): the import proves it by its ioctl */
			nr_pages++;
		} else {
			return -EBADF;
		}
	}
	return nr_pages == 1 ? 0 : -EBADF;
}

static int on_space_add(struct hmd_client *c, uint32_t seq, const void *p,
			size_t len, int *fds, unsigned nr_fds)
{
	struct hm_msg_space_add m;
	struct hmd_space *sp = NULL;
	struct hmd_req *r;
	uint64_t gaddr, end;
	uint32_t blob_len, want_fds;

	if (len != sizeof(m))
		return -EBADMSG;
	memcpy(&m, p, sizeof(m));
	gaddr = hm_from_le64(m.guest_addr);
	blob_len = hm_from_le32(m.blob_len);
	want_fds = hm_from_le32(m.nr_fds);
	if (want_fds != nr_fds || nr_fds == 0 || blob_len > HM_PROTO_BLOB_MAX)
		return -EINVAL;
	if (c->nr_spaces >= HMD_MAX_SPACES)
		return -ENOSPC;
	struct hm_space_handoff h = { 0 };
	struct hm_space *s;
	int rr, pages_fd;

	rr = space_fds_check(fds, nr_fds, &pages_fd);
	if (rr < 0)
		return rr;

	for (unsigned i = 0; i < nr_fds; i++)
		h.fds[i] = fds[i];
	h.nr_fds = nr_fds;
	memcpy(h.blob, m.blob, blob_len);
	h.blob_len = blob_len;
	rr = hm_space_import(&h, &s);
	if (rr < 0)
		return rr;
	/* the import took what it needs (dup or own); ours are closed below */
	uint64_t size = hm_space_size(s);
	struct stat st;

	/* a mapping past the file's end would fault with SIGBUS */
	if (pages_fd >= 0 && (fstat(pages_fd, &st) < 0 ||
			      (uint64_t)st.st_size < size)) {
		hm_space_free(s);
		return -EINVAL;
	}
	if ((gaddr != HM_PROTO_UNMAPPED && __builtin_add_overflow(gaddr, size, &end)) ||
	    size == 0) {
		hm_space_free(s);
		return -EOVERFLOW;
	}
	if (c->space_bytes + size > HMD_MAX_SPACE_BYTES) {
		hm_space_free(s);
		return -ENOSPC;
	}
	/* a range mapped already: the engine's -EEXIST, in the reply */
	for (unsigned i = 0; i < HMD_MAX_SPACES; i++)
		if (!c->spaces[i].used) {
			sp = &c->spaces[i];
			break;
		}
	if (!sp) {
		hm_space_free(s);
		return -ENOSPC;
	}
	memset(sp, 0, sizeof(*sp));
	sp->used = true;
	sp->adding = true;
	sp->guest_addr = gaddr;
	sp->size = size;
	sp->chunk_shift = hm_space_chunk_shift(s);
	sp->space = s;
	c->nr_spaces++;
	c->space_bytes += size;
	r = req_new(c, HM_MSG_SPACE_ADD, seq, space_add_run, space_add_done);
	if (!r) {
		hmd_eng_space_remove(c, sp);
		sp->used = false;
		c->nr_spaces--;
		c->space_bytes -= size;
			return -ENOMEM;
	}
	r->space = sp;
	hmd_worker_queue(&r->job);
	return 0;
}

static void space_remove_run(struct hmd_job *j)
{
	struct hmd_req *r = (struct hmd_req *)j;

	hmd_eng_space_remove(hmd_job_client(j), r->space);
}

static void simple_done(struct hmd_job *j)
{
	struct hmd_req *r = (struct hmd_req *)j;

	if (!hmd_job_client(j)->dead)
		reply(hmd_job_client(j), r->type, r->seq, j->status, NULL, 0);
	req_finish(r);
}

static void space_remove_done(struct hmd_job *j)
{
	struct hmd_req *r = (struct hmd_req *)j;
	struct hmd_client *c = hmd_job_client(j);

	r->space->used = false;
	c->nr_spaces--;
	c->space_bytes -= r->space->size;
	simple_done(j);
}

/* a message that is one handle: exact size, zero padding */
static int msg_handle(const void *p, size_t len, uint32_t *ret_handle)
{
	struct hm_msg_handle m;

	if (len != sizeof(m))
		return -EBADMSG;
	memcpy(&m, p, sizeof(m));
	if (m.pad)
		return -EINVAL;
	*ret_handle = hm_from_le32(m.handle);
	return 0;
}

static int on_space_remove(struct hmd_client *c, uint32_t seq, const void *p,
			   size_t len)
{
	struct hmd_space *sp;
	struct hmd_req *r;
	uint32_t h;
	int err = msg_handle(p, len, &h);

	if (err)
		return err;
	sp = space_by_handle(c, h);
	if (!sp || !sp->space)
		return -ENOENT;
	r = req_new(c, HM_MSG_SPACE_REMOVE, seq, space_remove_run,
		    space_remove_done);
	if (!r)
		return -ENOMEM;
	r->space = sp;
	sp->removing = true;	/* the handle is gone from now on */
	hmd_worker_queue(&r->job);
	return 0;
}

/* ---- ADVISE ---- */

static void advise_run(struct hmd_job *j)
{
	struct hmd_req *r = (struct hmd_req *)j;

	j->status = hmd_eng_advise(hmd_job_client(j), r->adv.addr, r->adv.size,
				   r->adv.advice);
}

static int on_advise(struct hmd_client *c, uint32_t seq, const void *p,
		     size_t len)
{
	struct hm_msg_advise m;
	struct hmd_req *r;
	uint64_t addr, size, end;
	uint32_t advice;
	bool inside = false;

	if (len != sizeof(m))
		return -EBADMSG;
	memcpy(&m, p, sizeof(m));
	addr = hm_from_le64(m.guest_addr);
	size = hm_from_le64(m.size);
	advice = hm_from_le32(m.advice);
	if (m.pad || advice > 3 || size == 0 ||
	    __builtin_add_overflow(addr, size, &end))
		return -EINVAL;
	/* what is mapped is the engine's: nothing there -> -EFAULT from it */
	for (unsigned i = 0; i < HMD_MAX_SPACES; i++)
		inside |= c->spaces[i].used;
	if (!inside)
		return -EFAULT;
	r = req_new(c, HM_MSG_ADVISE, seq, advise_run, simple_done);
	if (!r)
		return -ENOMEM;
	r->adv.addr = addr;
	r->adv.size = size;
	r->adv.advice = advice;
	hmd_worker_queue(&r->job);
	return 0;
}

/* ---- PREFETCH ---- */

static void prefetch_run(struct hmd_job *j)
{
	int r = hmd_eng_prefetch(hmd_job_client(j));

	j->status = r < 0 ? r : 0;
	hmd_client_refresh_estats(hmd_job_client(j));
}

static int on_prefetch(struct hmd_client *c, uint32_t seq, size_t len)
{
	struct hmd_req *r;

	if (len)
		return -EBADMSG;
	if (!hmd_engine_available())
		return -ENOSYS;
	r = req_new(c, HM_MSG_PREFETCH, seq, prefetch_run, simple_done);
	if (!r)
		return -ENOMEM;
	hmd_worker_queue(&r->job);
	return 0;
}

/* ---- MAP, UNMAP ---- */

static void map_run(struct hmd_job *j)
{
	struct hmd_req *r = (struct hmd_req *)j;
	struct hmd_client *c = hmd_job_client(j);

	if (r->type == HM_MSG_MAP)
		j->status = hmd_eng_map(c, r->space, r->map.offset, r->map.size,
					r->map.guest_addr, r->map.flags);
	else
		j->status = hmd_eng_unmap(c, r->map.guest_addr, r->map.size);
}

static bool map_range_ok(uint64_t guest_addr, uint64_t size)
{
	uint64_t end;

	return size && !(guest_addr % HM_PROTO_MAP_ALIGN) && !(size % HM_PROTO_MAP_ALIGN) &&
	       !__builtin_add_overflow(guest_addr, size, &end);
}

/* Validated here, on the loop thread; what is mapped is the engine's
 * (-EEXIST, -ENOENT, the limits), on the worker, in order with the
 * client's other jobs: a DISPATCH after a MAP sees it. */
static int on_map(struct hmd_client *c, uint16_t type, uint32_t seq, const void *p,
		  size_t len)
{
	struct hmd_space *sp = NULL;
	struct hmd_req *r;
	uint64_t offset = 0, size, gaddr;
	uint32_t flags = 0;

	if (type == HM_MSG_MAP) {
		struct hm_msg_map m;

		if (len != sizeof(m))
			return -EBADMSG;
		memcpy(&m, p, sizeof(m));
		flags = hm_from_le32(m.flags);
		offset = hm_from_le64(m.offset);
		size = hm_from_le64(m.size);
		gaddr = hm_from_le64(m.guest_addr);
		if (flags & ~HM_MAPF_ALL || !map_range_ok(gaddr, size) ||
		    offset % HM_PROTO_MAP_ALIGN)
			return -EINVAL;
		sp = space_by_handle(c, hm_from_le32(m.space));
		if (!sp || !sp->space)
			return -ENOENT;
		if (offset >= sp->size || size > sp->size - offset)
			return -EINVAL;
	} else {
		struct hm_msg_unmap m;

		if (len != sizeof(m))
			return -EBADMSG;
		memcpy(&m, p, sizeof(m));
		size = hm_from_le64(m.size);
		gaddr = hm_from_le64(m.guest_addr);
		if (!map_range_ok(gaddr, size))
			return -EINVAL;
	}
	r = req_new(c, type, seq, map_run, simple_done);
	if (!r)
		return -ENOMEM;
	r->space = sp;
	r->map.offset = offset;
	r->map.size = size;
	r->map.guest_addr = gaddr;
	r->map.flags = flags;
	hmd_worker_queue(&r->job);
	return 0;
}

/* ---- CONSUMER ---- */

/*
 * On the loop thread, at once: a harvest never waits behind a dispatch.
 * The space cannot go meanwhile: only a SPACE_REMOVE job frees it, and
 * that is queued after the handle stops resolving (sp->removing).  The
 * worker's engine harvests the same space under the space's own lock.
 */
static int on_consumer(struct hmd_client *c, uint32_t seq, const void *p,
		       size_t len)
{
	/* the reply, built in place (loop thread only) */
	static uint64_t buf[1 + HM_PROTO_MAX_HARVEST];
	uint64_t *chunks = buf + 1;
	struct hm_msg_consumer m;
	struct hm_msg_consumer_reply a = { 0 };
	struct hmd_space *sp;
	size_t n = 0;
	bool more = false;
	uint32_t op, flags, cap;
	uint64_t off, size;
	int r;

	if (len != sizeof(m))
		return -EBADMSG;
	memcpy(&m, p, sizeof(m));
	op = hm_from_le32(m.op);
	flags = hm_from_le32(m.flags);
	cap = hm_from_le32(m.cap);
	off = hm_from_le64(m.off);
	size = hm_from_le64(m.len);
	sp = space_by_handle(c, hm_from_le32(m.space));
	if (!sp || !sp->space)
		return -ENOENT;
	switch (op) {
	case HM_CONS_WATCH:
	case HM_CONS_UNWATCH:
		if (flags || cap || !size)
			return -EINVAL;
		if (!sp->consumer) {
			if (op == HM_CONS_UNWATCH)
				return off < sp->size && size <= sp->size - off ? 0 : -ERANGE;
			r = hm_consumer_new(sp->space, 0, &sp->consumer);
			if (r < 0)
				return r;
		}
		r = op == HM_CONS_WATCH ? hm_consumer_watch(sp->consumer, off, size) :
					  hm_consumer_unwatch(sp->consumer, off, size);
		if (r < 0)
			return r;
		reply(c, HM_MSG_CONSUMER, seq, 0, NULL, 0);
		return 0;
	case HM_CONS_HARVEST:
		if ((flags & ~HM_HARVEST_UNWATCH) || off || size || cap > HM_PROTO_MAX_HARVEST)
			return -EINVAL;
		if (sp->consumer) {
			r = hm_consumer_harvest(sp->consumer, flags, chunks, cap, &n, &more);
			if (r < 0)
				return r;
		}
		_Static_assert(sizeof(a) == sizeof(buf[0]), "reply header");
		a.nr = hm_le32((uint32_t)n);
		a.more = hm_le32(more);
		memcpy(buf, &a, sizeof(a));
		for (size_t i = 0; i < n; i++)
			chunks[i] = hm_le64(chunks[i]);
		reply(c, HM_MSG_CONSUMER, seq, 0, buf, sizeof(a) + n * sizeof(uint64_t));
		return 0;
	default:
		return -EINVAL;
	}
}

/* ---- PIPELINE_NEW / PIPELINE_FREE ---- */

/* a pipeline slot given back (loop thread) */
static void pipe_slot_release(struct hmd_client *c, struct hmd_pipeline *pp)
{
	pp->used = false;
	c->nr_pipes--;
}

static void pipeline_run(struct hmd_job *j)
{
	struct hmd_req *r = (struct hmd_req *)j;

	j->status = hmd_eng_pipeline(hmd_job_client(j), r->pipe);
	hmd_client_refresh_estats(hmd_job_client(j));
}

static void pipeline_done(struct hmd_job *j)
{
	struct hmd_req *r = (struct hmd_req *)j;
	struct hmd_client *c = hmd_job_client(j);
	struct hm_msg_pipeline_new_reply a = { 0 };
	struct hmd_pipeline *pp = r->pipe;

	if (c->dead) {
		req_finish(r);
		return;
	}
	if (j->status < 0) {
		hmd_module_put(pp->mod);
		pipe_slot_release(c, pp);
		reply(c, HM_MSG_PIPELINE_NEW, r->seq, j->status, NULL, 0);
		req_finish(r);
		return;
	}
	a.pipeline = hm_le32((uint32_t)(pp - c->pipes) + 1);
	a.cached = hm_le32(r->nr_estats);	/* reused as the cached flag */
	reply(c, HM_MSG_PIPELINE_NEW, r->seq, 0, &a, sizeof(a));
	req_finish(r);
}

/*
 * A module that fails the isolation check (isolate.c) runs only for a
 * client that could reach the daemon's memory anyway: root, or the
 * daemon's own uid (ptrace).  --isolate-all refuses it to those too.
 */
static bool client_trusted(const struct hmd_client *c)
{
	return !hmd.isolate_all && (c->uid == 0 || c->uid == geteuid());
}

/*
 * PIPELINE_NEW in two steps: the compile thread validates the module and
 * builds its pipeline on the shared device (seconds, for a big module on
 * some drivers: no other client waits for it, nor the loop), then the
 * device thread hands it to the client's engine (pipeline_run).
 */
static void compile_run(struct hmd_job *j)
{
	struct hmd_req *r = (struct hmd_req *)j;

	j->status = hmd_module_get(r->pl.words, r->pl.nr, r->pl.entry, r->pl.push,
				   &r->pl.mod, &r->pl.cached, r->pl.msg, sizeof(r->pl.msg));
	free(r->pl.words);
	r->pl.words = NULL;
	if (j->status < 0) {
		r->pl.mod = NULL;
		return;
	}
	if (!r->pl.mod->isolated && !client_trusted(hmd_job_client(j))) {
		if (r->pl.cached)
			snprintf(r->pl.msg, sizeof(r->pl.msg), "isolation: refused before");
		hmd_module_put(r->pl.mod);
		r->pl.mod = NULL;
		j->status = -EACCES;
		return;
	}
	/* built before for this client and parked: the device thread takes
	 * that one (and builds it itself in the rare case it went since) */
	if (r->pl.cached && hmd_eng_pipeline_parked(hmd_job_client(j), r->pl.mod))
		return;
	j->status = hmd_eng_pipeline_build(r->pl.mod, r->pl.flags, &r->pl.prebuilt);
}

static void compile_done(struct hmd_job *j)
{
	struct hmd_req *r = (struct hmd_req *)j;
	struct hmd_client *c = hmd_job_client(j);
	struct hmd_pipeline *pp = r->pipe;

	c->nr_compiling--;
	if (j->status < 0 && !r->pl.mod)
		hmd_log(LOG_INFO_, "client %u: SPIR-V refused: %s", c->id, r->pl.msg);
	if (c->dead || j->status < 0) {
		hmd_module_put(r->pl.mod);
		hmd_eng_pipeline_discard(r->pl.prebuilt);
		if (!c->dead) {
			/* the slot stays the teardown's once the client is dead */
			pipe_slot_release(c, pp);
			/* a module validation refused is a malformed message;
			 * a build that failed is the device's answer */
			if (!r->pl.mod && !refusal_is_answer(j->status))
				refuse(c, HM_MSG_PIPELINE_NEW, r->seq, j->status, NULL, 0);
			else
				reply(c, HM_MSG_PIPELINE_NEW, r->seq, j->status, NULL, 0);
		}
		req_finish(r);
		return;
	}
	pp->mod = r->pl.mod;
	pp->prebuilt = r->pl.prebuilt;
	pp->tier_flags = r->pl.flags;
	r->nr_estats = r->pl.cached;
	if (!hmd_engine_available()) {
		j->status = 0;		/* validated only; nothing to build */
		pipeline_done(j);
		return;
	}
	j->run = pipeline_run;
	j->done = pipeline_done;
	hmd_worker_queue(j);
}

static int on_pipeline_new(struct hmd_client *c, uint32_t seq, const void *p,
			   size_t len, int *fds, unsigned nr_fds)
{
	struct hm_msg_pipeline_new m;
	const uint32_t *words;
	void *map = NULL;
	size_t nr, map_len = 0;
	uint32_t flags, push;
	struct hmd_pipeline *pp = NULL;
	struct hmd_req *r;

	if (len < sizeof(m))
		return -EBADMSG;
	memcpy(&m, p, sizeof(m));
	nr = hm_from_le32(m.nr_words);
	flags = hm_from_le32(m.flags);
	push = hm_from_le32(m.user_push_words);
	if (push > HM_PROTO_MAX_PUSH) {
		/* the engine's limit: HELLO said it; -E2BIG also means a
		 * module too big, so the log says which */
		hmd_log(LOG_INFO_, "client %u: PIPELINE_NEW refused: %u user push words, "
			"the limit is %u (HM_PROTO_MAX_PUSH, HELLO's max_push_words)", c->id,
			push, HM_PROTO_MAX_PUSH);
		return -E2BIG;
	}
	if ((flags & ~HM_PIPEF_ALL) || m.pad ||
	    (flags & HM_PIPEF_COMPACT_ONLY && flags & HM_PIPEF_SPECULATIVE_ONLY))
		return -EINVAL;
	if (!memchr(m.entry, 0, sizeof(m.entry)) || !m.entry[0])
		return -EINVAL;
	if (nr == 0 || nr > HMD_MAX_SPIRV_WORDS) {
		hmd_log(LOG_INFO_, "client %u: PIPELINE_NEW refused: %zu SPIR-V words, "
			"the limit is %u", c->id, nr, (unsigned)HMD_MAX_SPIRV_WORDS);
		return -E2BIG;
	}
	if (c->nr_pipes >= HMD_MAX_PIPELINES)
		return -ENOSPC;
	if (c->nr_compiling >= HMD_MAX_COMPILES)
		return -EBUSY;
	if (flags & HM_PIPEF_MEMFD) {
		struct stat st;
		int seals;

		if (nr_fds != 1 || len != sizeof(m))
			return -EINVAL;
		seals = fcntl(fds[0], F_GET_SEALS);
		if (seals < 0 || (seals & (F_SEAL_WRITE | F_SEAL_SHRINK |
					   F_SEAL_GROW)) !=
		    (F_SEAL_WRITE | F_SEAL_SHRINK | F_SEAL_GROW))
			return -EPERM;	/* the client could change it under us */
		if (fstat(fds[0], &st) < 0 || (uint64_t)st.st_size != nr * 4)
			return -EINVAL;
		map_len = nr * 4;
		map = mmap(NULL, map_len, PROT_READ, MAP_SHARED, fds[0], 0);
		if (map == MAP_FAILED)
			return -errno;
		words = map;
	} else {
		if (nr_fds || len != sizeof(m) + nr * 4)
			return -EBADMSG;
		words = (const uint32_t *)((const uint8_t *)p + sizeof(m));
	}
	for (unsigned i = 0; i < HMD_MAX_PIPELINES; i++)
		if (!c->pipes[i].used) {
			pp = &c->pipes[i];
			break;
		}
	r = pp ? req_new(c, HM_MSG_PIPELINE_NEW, seq, compile_run, compile_done) : NULL;
	/* the words outlive the message (and the mapping) until validated */
	if (r)
		r->pl.words = malloc(nr * 4);
	if (r && r->pl.words)
		memcpy(r->pl.words, words, nr * 4);
	if (map)
		munmap(map, map_len);
	if (!pp)
		return -ENOSPC;
	if (!r || !r->pl.words) {
		if (r)
			req_finish(r);
		return -ENOMEM;
	}
	r->pl.nr = nr;
	memcpy(r->pl.entry, m.entry, sizeof(r->pl.entry));
	r->pl.push = push;
	r->pl.flags = flags & (HM_PIPEF_COMPACT_ONLY | HM_PIPEF_SPECULATIVE_ONLY);
	memset(pp, 0, sizeof(*pp));
	pp->used = true;		/* mod NULL: compiling, no handle yet */
	r->pipe = pp;
	c->nr_pipes++;
	c->nr_compiling++;
	hmd_compile_queue(&r->job);
	return 0;
}

static void pipeline_free_run(struct hmd_job *j)
{
	struct hmd_req *r = (struct hmd_req *)j;

	hmd_eng_pipeline_free(hmd_job_client(j), r->pipe);
}

static void pipeline_free_done(struct hmd_job *j)
{
	struct hmd_req *r = (struct hmd_req *)j;
	struct hmd_client *c = hmd_job_client(j);

	if (r->pipe->used) {
		hmd_module_put(r->pipe->mod);
		pipe_slot_release(c, r->pipe);
	}
	simple_done(j);
}

static int on_pipeline_free(struct hmd_client *c, uint32_t seq, const void *p,
			    size_t len)
{
	struct hmd_pipeline *pp;
	struct hmd_req *r;
	uint32_t h;
	int err = msg_handle(p, len, &h);

	if (err)
		return err;
	pp = pipe_by_handle(c, h);
	if (!pp)
		return -ENOENT;
	r = req_new(c, HM_MSG_PIPELINE_FREE, seq, pipeline_free_run,
		    pipeline_free_done);
	if (!r)
		return -ENOMEM;
	r->pipe = pp;
	pp->removing = true;
	hmd_worker_queue(&r->job);
	return 0;
}

/* ---- DISPATCH ---- */

/*
 * The client's timeline reaches v (HM_MSG_TIMELINE, protocol.h): every
 * dispatch up to v is answered, and each that ran has its writes home.
 * The device thread advances it for a dispatch that ran, right after the
 * engine returned (the copy-back done); the loop thread for dispatches
 * that never ran, once none of the client's is in flight.  A client's
 * dispatches run in order, so the value only grows; one that would not
 * is a dispatch already passed.
 */
static void timeline_advance(struct hmd_client *c, uint64_t v)
{
	int r;

	pthread_mutex_lock(&c->tl_lock);
	if (v > c->tl_value) {
		c->tl_value = v;
		r = c->tl ? hmd_eng_timeline_signal(c->tl, v) : 0;
		if (r < 0)
			hmd_log(LOG_DEBUG_, "client %u: timeline %llu: %s", c->id,
				(unsigned long long)v, strerror(-r));
	}
	pthread_mutex_unlock(&c->tl_lock);
}

/* loop thread: dispatch v never ran (refused, cancelled).  Reached once
 * nothing before it is in flight: at once if nothing is, else when the
 * client's last dispatch in flight is done, or by a later one's value. */
static void timeline_skip(struct hmd_client *c, uint64_t v)
{
	if (v > c->tl_skipped)
		c->tl_skipped = v;
	if (!c->inflight && c->tl_skipped && !c->dead) {
		timeline_advance(c, c->tl_skipped);
		c->tl_skipped = 0;
	}
}

static void dispatch_run(struct hmd_job *j)
{
	struct hmd_req *r = (struct hmd_req *)j;
	struct hmd_client *c = hmd_job_client(j);

	/* the loop disconnects a client over its budget when it sees that
	 * dispatch done; until then this thread would run what the client
	 * queued behind it (on lavapipe each one to its end): drop it here */
	if (c->over_budget) {
		j->status = -ECANCELED;
		timeline_advance(c, r->tl_value);
		return;
	}
	j->status = hmd_eng_dispatch(c, r->pipe, &r->disp);
	/* its writes are home (rule 4): the value may be reached now */
	timeline_advance(c, r->tl_value);
	if (j->status == -ETIMEDOUT || hmd_now_ns() - j->t_started > hmd.dispatch_timeout_ns)
		c->over_budget = true;
	hmd_client_refresh_estats(c);
}

/* device thread (ran) or loop thread (cancelled): the reply itself */
static void dispatch_reply(struct hmd_job *j)
{
	struct hmd_req *r = (struct hmd_req *)j;
	struct hmd_client *c = hmd_job_client(j);
	struct hm_msg_dispatch_reply a = { 0 };
	uint64_t one = 1;
	int efd;

	if (__atomic_load_n(&c->dead, __ATOMIC_RELAXED))
		return;
	a.queued_ns = hm_le64(j->t_started > j->t_queued ?
			      j->t_started - j->t_queued : 0);
	a.run_ns = hm_le64(j->t_done > j->t_started ? j->t_done - j->t_started : 0);
	a.dispatch_id = hm_le64(__atomic_add_fetch(&hmd.dispatch_seq, 1,
						   __ATOMIC_RELAXED));
	/* a failed dispatch is the device's answer, not a bad message; the
	 * fd stays open while this job holds the client */
	r->send_status = hmd_client_send_raw(c, HM_MSG_DISPATCH, r->seq,
					     j->status, &a, sizeof(a));
	r->replied = true;
	/* the reply is on the socket: now the completion fd (protocol.h) */
	efd = __atomic_load_n(&c->efd, __ATOMIC_ACQUIRE);
	if (efd >= 0 && r->send_status == 0 && write(efd, &one, sizeof(one)) < 0)
		hmd_log(LOG_DEBUG_, "client %u: completion fd: %s", c->id, strerror(errno));
}

static void dispatch_done(struct hmd_job *j)
{
	struct hmd_req *r = (struct hmd_req *)j;
	struct hmd_client *c = hmd_job_client(j);
	bool ran = r->replied;

	c->inflight--;
	hmd.stats[HM_DSTAT_INFLIGHT]--;
	if (j->status < 0)
		hmd.stats[HM_DSTAT_DISPATCH_FAILS]++;
	else
		hmd.stats[HM_DSTAT_DISPATCHES]++;
	if (!r->replied)		/* cancelled before it ran */
		dispatch_reply(j);
	/* a value that never ran, and those refused while this one was in
	 * flight, are reached once nothing is */
	timeline_skip(c, ran ? 0 : r->tl_value);
	if (r->send_status < 0 && r->send_status != -ENOTCONN && !c->dead)
		hmd_client_disconnect(c, r->send_status == -EAGAIN ?
				      "not reading replies" : "send failed");
	/* a dispatch past the client's time budget (--timeout; the device
	 * may not say so: lavapipe runs a submission to its end inside
	 * vkQueueSubmit): end what can be ended, the client's queued work
	 * and its connection (Documentation/daemon.rst) */
	if ((j->status == -ETIMEDOUT || (r->replied &&
	     j->t_done - j->t_started > hmd.dispatch_timeout_ns)) && !c->dead)
		hmd_client_disconnect(c, "dispatch over its time budget");
	req_finish(r);
}

static int on_dispatch(struct hmd_client *c, uint32_t seq, const void *p,
		       size_t len, uint64_t tl_value)
{
	struct hm_msg_dispatch m;
	struct hmd_pipeline *pp;
	struct hmd_req *r;
	uint32_t flags, nr_push;

	if (len != sizeof(m))
		return -EBADMSG;
	memcpy(&m, p, sizeof(m));
	flags = hm_from_le32(m.flags);
	nr_push = hm_from_le32(m.nr_push);
	if (flags & ~HM_DISPF_ALL)
		return -EINVAL;
	pp = pipe_by_handle(c, hm_from_le32(m.pipeline));
	if (!pp)
		return -ENOENT;
	if (nr_push != pp->mod->user_push_words)
		return -EINVAL;
	uint64_t total = 1;

	for (unsigned i = 0; i < 3; i++) {
		uint32_t g = hm_from_le32(m.groups[i]);

		if (g == 0 || g > 65535)
			return -EINVAL;
		m.groups[i] = g;
		total *= g;
	}
	if (total > HMD_MAX_GROUPS)
		return -E2BIG;
	for (unsigned i = nr_push; i < HM_PROTO_PUSH_SLOTS; i++)
		if (m.push[i])
			return -EINVAL;
	if (!hmd_engine_available())
		return -ENOSYS;
	if (c->inflight >= HMD_MAX_INFLIGHT)
		return -EBUSY;
	if (hmd.shutting_down)
		return -ESHUTDOWN;
	r = req_new(c, HM_MSG_DISPATCH, seq, dispatch_run, dispatch_done);
	if (!r)
		return -ENOMEM;
	r->job.reply = dispatch_reply;
	m.pipeline = hm_from_le32(m.pipeline);
	m.flags = flags;
	m.nr_push = nr_push;
	for (unsigned i = 0; i < nr_push; i++)
		m.push[i] = hm_from_le32(m.push[i]);
	r->pipe = pp;
	r->disp = m;
	r->tl_value = tl_value;
	r->job.cancelable = true;
	c->inflight++;
	hmd.stats[HM_DSTAT_INFLIGHT]++;
	hmd_worker_queue(&r->job);
	return 0;
}

/* ---- COMPLETION_FD ---- */

static int on_completion_fd(struct hmd_client *c, uint32_t seq, const void *p, size_t len)
{
	int efd;

	if (len != 0)
		return -EBADMSG;
	if (c->efd < 0) {
		efd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
		if (efd < 0)
			return -errno;
		__atomic_store_n(&c->efd, efd, __ATOMIC_RELEASE);
	}
	hmd_client_send_fd(c, HM_MSG_COMPLETION_FD, seq, 0, NULL, 0, c->efd);
	return 0;
}

/* ---- TIMELINE ---- */

/*
 * One semaphore a connection, made at the value the client's timeline has
 * reached, under tl_lock so that no advance falls between.  Answers, not
 * bad messages: a device that cannot share one with this client
 * (-EOPNOTSUPP, -EXDEV) and the device's own failure; a repeat is a bad
 * message.  Nothing is kept on an error.
 */
static int on_timeline(struct hmd_client *c, uint32_t seq, const void *p, size_t len)
{
	struct hm_msg_timeline m;
	struct hm_msg_timeline_reply a = { 0 };
	struct hmd_timeline *t = NULL;
	uint32_t type_bits;
	int fd = -1, r;

	if (len != sizeof(m))
		return -EBADMSG;
	memcpy(&m, p, sizeof(m));
	type_bits = hm_from_le32(m.handle_type);
	if (m.flags || !type_bits || (type_bits & (type_bits - 1)))
		return -EINVAL;
	if (c->tl)
		return -EALREADY;
	if (type_bits != HM_TIMELINE_OPAQUE_FD || !hmd_engine_available())
		r = -EOPNOTSUPP;
	else if (!hmd_eng_same_device(m.device_uuid, m.driver_uuid))
		r = -EXDEV;
	else if (!hmd_eng_timeline_supported())
		r = -EOPNOTSUPP;
	else
		r = 0;
	if (r == 0) {
		pthread_mutex_lock(&c->tl_lock);
		r = hmd_eng_timeline_new(c->tl_value, &t, &fd);
		if (r == 0) {
			c->tl = t;
			a.value = hm_le64(c->tl_value);
		}
		pthread_mutex_unlock(&c->tl_lock);
	}
	if (r < 0) {
		reply(c, HM_MSG_TIMELINE, seq, r, NULL, 0);
		return 0;
	}
	a.dispatches = hm_le64(c->tl_requests);
	hmd_client_send_fd(c, HM_MSG_TIMELINE, seq, 0, &a, sizeof(a), fd);
	close(fd);		/* the client has its own now */
	return 0;
}

/* ---- STATS ---- */

static void send_stats(struct hmd_client *c, uint32_t seq, const uint64_t *e,
		       unsigned nr_e)
{
	uint8_t buf[sizeof(struct hm_msg_stats_reply) +
		    (HM_DSTAT_NR + HM_ESTAT_NR) * 8];
	struct hm_msg_stats_reply h = {
		.nr_daemon = hm_le32(HM_DSTAT_NR),
		.nr_engine = hm_le32(nr_e),
	};
	uint64_t *v = (uint64_t *)(buf + sizeof(h));
	uint64_t clients = 0, closing = 0, spaces = 0, pipes = 0;

	/* the gauges of clients connected now: one that hung up is gone at
	 * once, while its teardown may wait behind its last dispatch */
	for (const struct hmd_client *o = hmd.clients; o; o = o->next) {
		if (o->dead) {
			closing++;
			continue;
		}
		clients++;
		spaces += o->nr_spaces;
		pipes += o->nr_pipes;
	}
	hmd.stats[HM_DSTAT_CLIENTS] = clients;
	hmd.stats[HM_DSTAT_CLIENTS_CLOSING] = closing;
	hmd.stats[HM_DSTAT_SPACES] = spaces;
	hmd.stats[HM_DSTAT_PIPELINES] = pipes;
	hmd.stats[HM_DSTAT_UPTIME_NS] = hmd_now_ns() - hmd.t_start;
	hmd.stats[HM_DSTAT_VK_MESSAGES] = hmd_engine_validation_count();
	memcpy(buf, &h, sizeof(h));
	for (unsigned i = 0; i < HM_DSTAT_NR; i++)
		v[i] = hm_le64(__atomic_load_n(&hmd.stats[i], __ATOMIC_RELAXED));
	for (unsigned i = 0; i < nr_e; i++)
		v[HM_DSTAT_NR + i] = hm_le64(e[i]);
	hmd_client_send(c, HM_MSG_STATS, seq, 0, buf,
			sizeof(h) + (HM_DSTAT_NR + nr_e) * 8);
}

/* answered at once from the counters the device thread left after each
 * client's last job: STATS never waits behind a dispatch.  A client with an
 * engine sees its own; one without (hmirrorctl) the sum over all. */
static int on_stats(struct hmd_client *c, uint32_t seq, const void *p,
		    size_t len)
{
	uint64_t e[HM_ESTAT_NR] = { 0 };
	unsigned nr = 0;

	if (len != 0)
		return -EBADMSG;
	pthread_mutex_lock(&hmd_estats_lock);
	if (!c->has_estats) {
		/* engines of clients gone count too (monotonic counters) */
		for (unsigned k = 0; k < HM_ESTAT_NR; k++)
			e[k] = hmd.retired_estats[k];	/* no gauges among them */
		nr = HM_ESTAT_NR;
	}
	for (struct hmd_client *o = hmd.clients; o; o = o->next) {
		if ((o != c && c->has_estats) || !o->has_estats || o->dead)
			continue;
		for (unsigned k = 0; k < HM_ESTAT_NR; k++)
			e[k] += o->estats[k];
		nr = HM_ESTAT_NR;
	}
	pthread_mutex_unlock(&hmd_estats_lock);
	send_stats(c, seq, e, nr);
	return 0;
}

/* ---- one message ---- */

/* a DISPATCH: its timeline value is taken whether or not it runs */
static void handle_dispatch(struct hmd_client *c, uint32_t seq, const void *payload,
			    size_t plen, unsigned nr_fds)
{
	uint64_t v = ++c->tl_requests;
	int r;

	if (nr_fds) {
		refuse(c, HM_MSG_DISPATCH, seq, -EINVAL, NULL, 0);
	} else if (hmd.shutting_down) {
		reply(c, HM_MSG_DISPATCH, seq, -ESHUTDOWN, NULL, 0);
	} else {
		r = on_dispatch(c, seq, payload, plen, v);
		if (r == 0)
			return;		/* queued: the device thread advances it */
		if (refusal_is_answer(r))
			reply(c, HM_MSG_DISPATCH, seq, r, NULL, 0);
		else
			refuse(c, HM_MSG_DISPATCH, seq, r, NULL, 0);
	}
	timeline_skip(c, v);
}

static void handle(struct hmd_client *c, size_t n, int msg_flags, int *fds,
		   unsigned nr_fds)
{
	struct hm_msg_hdr h;
	uint16_t type, flags;
	uint32_t seq, hlen;
	const void *payload = rxbuf + sizeof(h);
	size_t plen;
	int r;

	hmd.stats[HM_DSTAT_MSGS]++;
	if (msg_flags & MSG_CTRUNC) {
		error_msg(c, 0, -ETOOMANYREFS, 0, (uint32_t)n);
		return;
	}
	if (msg_flags & MSG_TRUNC) {
		error_msg(c, 0, -EMSGSIZE, 0, (uint32_t)n);
		return;
	}
	if (n < sizeof(h)) {
		error_msg(c, 0, -EBADMSG, 0, (uint32_t)n);
		return;
	}
	memcpy(&h, rxbuf, sizeof(h));
	type = hm_from_le16(h.type);
	flags = hm_from_le16(h.flags);
	seq = hm_from_le32(h.seq);
	hlen = hm_from_le32(h.len);
	if (hm_from_le32(h.magic) != HM_PROTO_MAGIC || hlen != n) {
		error_msg(c, seq, -EBADMSG, type, (uint32_t)n);
		return;
	}
	if (flags || h.status || h.pad || type == HM_MSG_INVALID ||
	    type >= HM_MSG_NR || type == HM_MSG_ERROR) {
		error_msg(c, seq, type >= HM_MSG_NR || type == HM_MSG_ERROR ||
			  type == HM_MSG_INVALID ? -EOPNOTSUPP : -EINVAL,
			  type, (uint32_t)n);
		return;
	}
	if (!c->hello && type != HM_MSG_HELLO) {
		reply(c, type, seq, -EPROTO, NULL, 0);
		hmd_client_disconnect(c, "no handshake");
		return;
	}
	plen = n - sizeof(h);
	if (type == HM_MSG_DISPATCH) {
		handle_dispatch(c, seq, payload, plen, nr_fds);
		return;
	}
	if (nr_fds && type != HM_MSG_SPACE_ADD && type != HM_MSG_PIPELINE_NEW) {
		refuse(c, type, seq, -EINVAL, NULL, 0);
		return;
	}
	if (hmd.shutting_down && type != HM_MSG_STATS && type != HM_MSG_PING) {
		reply(c, type, seq, -ESHUTDOWN, NULL, 0);
		return;
	}
	switch (type) {
	case HM_MSG_HELLO:
		r = on_hello(c, seq, payload, plen);
		break;
	case HM_MSG_PING:
		r = plen ? -EBADMSG : 0;
		if (!r)
			reply(c, type, seq, 0, NULL, 0);
		break;
	case HM_MSG_SPACE_ADD:
		r = on_space_add(c, seq, payload, plen, fds, nr_fds);
		break;
	case HM_MSG_SPACE_REMOVE:
		r = on_space_remove(c, seq, payload, plen);
		break;
	case HM_MSG_ADVISE:
		r = on_advise(c, seq, payload, plen);
		break;
	case HM_MSG_PREFETCH:
		r = on_prefetch(c, seq, plen);
		break;
	case HM_MSG_PIPELINE_NEW:
		r = on_pipeline_new(c, seq, payload, plen, fds, nr_fds);
		break;
	case HM_MSG_PIPELINE_FREE:
		r = on_pipeline_free(c, seq, payload, plen);
		break;
	case HM_MSG_STATS:
		r = on_stats(c, seq, payload, plen);
		break;
	case HM_MSG_CONSUMER:
		r = on_consumer(c, seq, payload, plen);
		break;
	case HM_MSG_COMPLETION_FD:
		r = on_completion_fd(c, seq, payload, plen);
		break;
	case HM_MSG_TIMELINE:
		r = on_timeline(c, seq, payload, plen);
		break;
	case HM_MSG_MAP:
	case HM_MSG_UNMAP:
		r = on_map(c, type, seq, payload, plen);
		break;
	default:
		r = -EOPNOTSUPP;
		break;
	}
	if (r < 0 && refusal_is_answer(r))
		reply(c, type, seq, r, NULL, 0);
	else if (r < 0)
		refuse(c, type, seq, r, NULL, 0);
}

void hmd_client_readable(struct hm_loop_source *src, uint32_t revents,
			 void *data)
{
	struct hmd_client *c = data;

	for (unsigned i = 0; i < HMD_MSGS_PER_WAKEUP && !c->dead; i++) {
		union {
			struct cmsghdr align;
			char buf[CMSG_SPACE(sizeof(int) * (HM_PROTO_MAX_FDS + 4))];
		} cbuf;
		struct iovec iov = { .iov_base = rxbuf, .iov_len = sizeof(rxbuf) };
		struct msghdr mh = {
			.msg_iov = &iov, .msg_iovlen = 1,
			.msg_control = cbuf.buf, .msg_controllen = sizeof(cbuf.buf),
		};
		int fds[HM_PROTO_MAX_FDS + 4];
		unsigned nr_fds = 0;
		bool too_many = false;
		ssize_t n;

		n = recvmsg(c->fd, &mh, MSG_DONTWAIT | MSG_CMSG_CLOEXEC | MSG_TRUNC);
		if (n < 0) {
			if (errno == EAGAIN || errno == EINTR)
				return;
			hmd_client_disconnect(c, "receive error");
			return;
		}
		for (struct cmsghdr *cm = CMSG_FIRSTHDR(&mh); cm;
		     cm = CMSG_NXTHDR(&mh, cm)) {
			if (cm->cmsg_level != SOL_SOCKET ||
			    cm->cmsg_type != SCM_RIGHTS)
				continue;
			unsigned k = (cm->cmsg_len - CMSG_LEN(0)) / sizeof(int);
			int *in = (int *)CMSG_DATA(cm);

			for (unsigned j = 0; j < k; j++) {
				if (nr_fds < HM_PROTO_MAX_FDS + 4)
					fds[nr_fds++] = in[j];
				else
					close(in[j]);
			}
		}
		if (n == 0) {
			/* end of file, or an empty datagram: fds may ride on
			 * either (found by the protocol fuzzer) */
			close_fds(fds, nr_fds);
			hmd_client_disconnect(c, "hang-up");
			return;
		}
		if (nr_fds > HM_PROTO_MAX_FDS)
			too_many = true;
		if (too_many) {
			close_fds(fds, nr_fds);
			error_msg(c, 0, -ETOOMANYREFS, 0, (uint32_t)n);
			continue;
		}
		handle(c, (size_t)n, mh.msg_flags, fds, nr_fds);
		close_fds(fds, nr_fds);
	}
}
