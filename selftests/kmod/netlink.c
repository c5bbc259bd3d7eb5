// SPDX-License-Identifier: GPL-2.0
/*
 * hmirror.ko generic netlink tests, as a libnl-3 genl client: statistics
 * (global, per space, dump), events (space created/destroyed, chunks
 * written with generations, pin range invalidated: exactly one each),
 * malformed requests, and what an unprivileged process may see.  Run in
 * the VM:  tools/vm/run --kernel 6.1 -- build/bin/test-kmod-netlink
 */
#include <netlink/genl/ctrl.h>
#include <netlink/genl/genl.h>
#include <netlink/netlink.h>
#include <sched.h>

#include "device_access_test.h"
#include "kselftest_harness.h"

#define CHUNK_SHIFT	16
#define CHUNK		(1UL << CHUNK_SHIFT)

/* one received message, flattened */
struct msg {
	uint8_t cmd;
	uint32_t space_id, pin_id, cause, chunk_shift, owner_pid, owner_uid;
	uint64_t size, addr, space_size, lost;
	unsigned int nr_chunks, nr_counters;
	uint64_t chunk[64], gen[64];
	char counter_name[64][32];
	uint64_t counter[64];
};

struct msgs {
	unsigned int n;
	struct msg m[256];
	int err;		/* from the ack */
};

static int on_valid(struct nl_msg *nm, void *arg)
{
	struct msgs *ms = arg;
	struct nlmsghdr *nlh = nlmsg_hdr(nm);
	struct genlmsghdr *gh = nlmsg_data(nlh);
	struct nlattr *a[HMIRROR_A_MAX + 1], *n;
	struct msg *m;
	int rem;

	if (ms->n >= 256)
		return NL_SKIP;
	m = &ms->m[ms->n++];
	memset(m, 0, sizeof(*m));
	m->cmd = gh->cmd;
	if (genlmsg_parse(nlh, 0, a, HMIRROR_A_MAX, NULL))
		return NL_SKIP;
	if (a[HMIRROR_A_SPACE_ID])
		m->space_id = nla_get_u32(a[HMIRROR_A_SPACE_ID]);
	if (a[HMIRROR_A_PIN_ID])
		m->pin_id = nla_get_u32(a[HMIRROR_A_PIN_ID]);
	if (a[HMIRROR_A_OWNER_PID])
		m->owner_pid = nla_get_u32(a[HMIRROR_A_OWNER_PID]);
	if (a[HMIRROR_A_OWNER_UID])
		m->owner_uid = nla_get_u32(a[HMIRROR_A_OWNER_UID]);
	if (a[HMIRROR_A_INVAL_CAUSE])
		m->cause = nla_get_u32(a[HMIRROR_A_INVAL_CAUSE]);
	if (a[HMIRROR_A_CHUNK_SHIFT])
		m->chunk_shift = nla_get_u32(a[HMIRROR_A_CHUNK_SHIFT]);
	if (a[HMIRROR_A_ADDR])
		m->addr = nla_get_u64(a[HMIRROR_A_ADDR]);
	if (a[HMIRROR_A_SIZE])
		m->size = nla_get_u64(a[HMIRROR_A_SIZE]);
	if (a[HMIRROR_A_SPACE_SIZE])
		m->space_size = nla_get_u64(a[HMIRROR_A_SPACE_SIZE]);
	if (a[HMIRROR_A_CHUNKS_LOST])
		m->lost = nla_get_u64(a[HMIRROR_A_CHUNKS_LOST]);
	nla_for_each_attr(n, genlmsg_attrdata(gh, 0), genlmsg_attrlen(gh, 0), rem) {
		struct nlattr *c[HMIRROR_A_COUNTER_MAX + 1];
		struct nlattr *k[HMIRROR_A_CHUNK_MAX + 1];

		/* counts every chunk, stores the first 64 */
		if (nla_type(n) == HMIRROR_A_CHUNK &&
		    !nla_parse_nested(k, HMIRROR_A_CHUNK_MAX, n, NULL) &&
		    k[HMIRROR_A_CHUNK_INDEX] && k[HMIRROR_A_CHUNK_GEN]) {
			if (m->nr_chunks < 64) {
				m->chunk[m->nr_chunks] = nla_get_u64(k[HMIRROR_A_CHUNK_INDEX]);
				m->gen[m->nr_chunks] = nla_get_u64(k[HMIRROR_A_CHUNK_GEN]);
			}
			m->nr_chunks++;
		}
		if (nla_type(n) == HMIRROR_A_COUNTER && m->nr_counters < 64 &&
		    !nla_parse_nested(c, HMIRROR_A_COUNTER_MAX, n, NULL) &&
		    c[HMIRROR_A_COUNTER_NAME] && c[HMIRROR_A_COUNTER_VALUE]) {
			snprintf(m->counter_name[m->nr_counters], 32, "%s",
				 nla_get_string(c[HMIRROR_A_COUNTER_NAME]));
			m->counter[m->nr_counters++] =
				nla_get_u64(c[HMIRROR_A_COUNTER_VALUE]);
		}
	}
	return NL_OK;
}

static int on_error(struct sockaddr_nl *nla, struct nlmsgerr *e, void *arg)
{
	((struct msgs *)arg)->err = e->error;
	return NL_STOP;
}

static int on_ack(struct nl_msg *nm, void *arg)
{
	((struct msgs *)arg)->err = 0;
	return NL_STOP;
}

static int no_seq_check(struct nl_msg *nm, void *arg)
{
	return NL_OK;
}

static long long counter(const struct msg *m, const char *name)
{
	for (unsigned int i = 0; i < m->nr_counters; i++)
		if (!strcmp(m->counter_name[i], name))
			return (long long)m->counter[i];
	return -1;
}

struct genl {
	struct nl_sock *sk;
	int family;
	int group;
};

static int genl_open(struct genl *g)
{
	g->sk = nl_socket_alloc();
	if (!g->sk || genl_connect(g->sk))
		return -1;
	g->family = genl_ctrl_resolve(g->sk, HMIRROR_GENL_NAME);
	g->group = genl_ctrl_resolve_grp(g->sk, HMIRROR_GENL_NAME,
					 HMIRROR_GENL_MCGRP_EVENTS);
	return g->family < 0 || g->group < 0 ? -1 : 0;
}

static void genl_close(struct genl *g)
{
	if (g->sk)
		nl_socket_free(g->sk);
	g->sk = NULL;
}

static struct nl_msg *req_new(struct genl *g, uint8_t cmd, int flags)
{
	struct nl_msg *nm = nlmsg_alloc();

	genlmsg_put(nm, NL_AUTO_PORT, NL_AUTO_SEQ, g->family, 0,
		    flags | NLM_F_ACK, cmd, HMIRROR_GENL_VERSION);
	return nm;
}

/* send @nm (freed), collect the replies; returns the ack's error */
static int request(struct genl *g, struct nl_msg *nm, struct msgs *ms)
{
	struct nl_cb *cb = nl_cb_alloc(NL_CB_DEFAULT);
	int ret;

	ms->n = 0;
	ms->err = 1;
	nl_cb_set(cb, NL_CB_VALID, NL_CB_CUSTOM, on_valid, ms);
	nl_cb_set(cb, NL_CB_ACK, NL_CB_CUSTOM, on_ack, ms);
	nl_cb_set(cb, NL_CB_FINISH, NL_CB_CUSTOM, on_ack, ms);
	nl_cb_err(cb, NL_CB_CUSTOM, on_error, ms);
	ret = nl_send_auto(g->sk, nm);
	nlmsg_free(nm);
	while (ret >= 0 && ms->err == 1)
		ret = nl_recvmsgs(g->sk, cb);
	nl_cb_put(cb);
	return ms->err == 1 ? -EIO : ms->err;
}

/* an events listener */
static int listen_open(struct genl *g)
{
	if (genl_open(g))
		return -1;
	nl_socket_disable_seq_check(g->sk);
	return nl_socket_add_membership(g->sk, g->group);
}

/* events for up to @ms milliseconds of quiet */
static void listen_collect(struct genl *g, struct msgs *out, int ms)
{
	struct nl_cb *cb = nl_cb_alloc(NL_CB_DEFAULT);
	struct pollfd p = { .fd = nl_socket_get_fd(g->sk), .events = POLLIN };

	nl_cb_set(cb, NL_CB_SEQ_CHECK, NL_CB_CUSTOM, no_seq_check, NULL);
	nl_cb_set(cb, NL_CB_VALID, NL_CB_CUSTOM, on_valid, out);
	while (poll(&p, 1, ms) == 1)
		nl_recvmsgs(g->sk, cb);
	nl_cb_put(cb);
}

FIXTURE(nl) {
	int dev;
	struct genl g;
	bool skip;
};

FIXTURE_SETUP(nl)
{
	self->dev = hmt_open_dev();
	if (self->dev < 0) {
		self->skip = true;
		SKIP(return, "no /dev/hmirror (%s)", strerror(-self->dev));
	}
	ASSERT_EQ(0, genl_open(&self->g)) TH_LOG("no genl family \"hmirror\"");
}

FIXTURE_TEARDOWN(nl)
{
	genl_close(&self->g);
	if (self->dev >= 0)
		close(self->dev);
}

TEST_F(nl, stats_get)
{
	static struct msgs ms;
	uint32_t id;
	char *m;
	int pfd;

	if (self->skip)
		SKIP(return, "no /dev/hmirror");
	m = mmap(NULL, 1 << 16, PROT_READ | PROT_WRITE,
		 MAP_PRIVATE | MAP_ANONYMOUS | MAP_POPULATE, -1, 0);
	ASSERT_NE(MAP_FAILED, m);
	pfd = hmt_pin(self->dev, m, 1 << 16, 0, &id);
	ASSERT_LE(0, pfd);

	ASSERT_EQ(0, request(&self->g, req_new(&self->g, HMIRROR_CMD_STATS_GET, 0), &ms));
	ASSERT_EQ(1, ms.n);
	EXPECT_EQ(HMIRROR_CMD_STATS_GET, ms.m[0].cmd);
	EXPECT_EQ(hmt_dev_stat("pins"), counter(&ms.m[0], "pins"));
	EXPECT_EQ(hmt_dev_stat("pinned_bytes"), counter(&ms.m[0], "pinned_bytes"));
	EXPECT_LE(1 << 16, counter(&ms.m[0], "pinned_bytes"));
	EXPECT_LE(0, counter(&ms.m[0], "spaces"));
	EXPECT_LE(0, counter(&ms.m[0], "guard_trips"));
	EXPECT_LE(0, counter(&ms.m[0], "inval_unmap"));
	EXPECT_LE(0, counter(&ms.m[0], "events_dropped"));
	close(pfd);
}

TEST_F(nl, space_get_and_dump)
{
	static struct msgs ms;
	struct hmirror_space_info i1, i2;
	struct nl_msg *nm;
	int s1, s2, seen = 0;

	if (self->skip)
		SKIP(return, "no /dev/hmirror");
	s1 = hmt_create(self->dev, 4 * CHUNK, CHUNK_SHIFT, 0);
	s2 = hmt_create(self->dev, 8 * CHUNK, CHUNK_SHIFT + 1, 0);
	ASSERT_LE(0, s1);
	ASSERT_LE(0, s2);
	ASSERT_EQ(0, ioctl(s1, HMIRROR_IOC_SPACE_INFO, &i1));
	ASSERT_EQ(0, ioctl(s2, HMIRROR_IOC_SPACE_INFO, &i2));

	ASSERT_EQ(0, request(&self->g, req_new(&self->g, HMIRROR_CMD_SPACE_GET,
					       NLM_F_DUMP), &ms));
	for (unsigned int i = 0; i < ms.n; i++) {
		EXPECT_EQ(HMIRROR_CMD_SPACE_GET, ms.m[i].cmd);
		if (ms.m[i].space_id == i1.id) {
			EXPECT_EQ(4 * CHUNK, ms.m[i].space_size);
			EXPECT_EQ(CHUNK_SHIFT, ms.m[i].chunk_shift);
			seen++;
		}
		if (ms.m[i].space_id == i2.id) {
			EXPECT_EQ(8 * CHUNK, ms.m[i].space_size);
			EXPECT_EQ(CHUNK_SHIFT + 1, ms.m[i].chunk_shift);
			seen++;
		}
	}
	EXPECT_EQ(2, seen);

	nm = req_new(&self->g, HMIRROR_CMD_SPACE_GET, 0);
	nla_put_u32(nm, HMIRROR_A_SPACE_ID, i2.id);
	ASSERT_EQ(0, request(&self->g, nm, &ms));
	ASSERT_EQ(1, ms.n);
	EXPECT_EQ(i2.id, ms.m[0].space_id);
	EXPECT_EQ(8 * CHUNK, ms.m[0].space_size);
	EXPECT_LE(0, counter(&ms.m[0], "guard_trips"));

	nm = req_new(&self->g, HMIRROR_CMD_SPACE_GET, 0);
	nla_put_u32(nm, HMIRROR_A_SPACE_ID, 0x7fffffff);
	EXPECT_EQ(-ENOENT, request(&self->g, nm, &ms));
	close(s1);
	close(s2);
}

TEST_F(nl, events_space_and_chunks)
{
	static struct msgs ev;
	struct hmirror_space_info info;
	unsigned int news = 0, dels = 0, nchunks = 0;
	struct genl l = { 0 };
	uint64_t g2, g5;
	int sfd;
	char *p;

	if (self->skip)
		SKIP(return, "no /dev/hmirror");
	ASSERT_EQ(0, listen_open(&l));
	sfd = hmt_create(self->dev, 8 * CHUNK, CHUNK_SHIFT, 0);
	ASSERT_LE(0, sfd);
	ASSERT_EQ(0, ioctl(sfd, HMIRROR_IOC_SPACE_INFO, &info));
	p = mmap(NULL, 8 * CHUNK, PROT_READ | PROT_WRITE, MAP_SHARED, sfd, 0);
	ASSERT_NE(MAP_FAILED, p);
	ASSERT_EQ(0, hmt_arm(sfd, 0, 8));
	p[2 * CHUNK] = 1;
	p[5 * CHUNK + 9] = 1;
	p[5 * CHUNK + 10] = 1;	/* not a new trip */
	ASSERT_EQ(0, hmt_gen(sfd, 2, &g2));
	ASSERT_EQ(0, hmt_gen(sfd, 5, &g5));
	listen_collect(&l, &ev, 300);
	munmap(p, 8 * CHUNK);
	close(sfd);
	listen_collect(&l, &ev, 300);

	for (unsigned int i = 0; i < ev.n; i++) {
		struct msg *m = &ev.m[i];

		if (m->space_id != info.id)
			continue;
		if (m->cmd == HMIRROR_CMD_SPACE_NEW) {
			news++;
			EXPECT_EQ(8 * CHUNK, m->space_size);
			EXPECT_EQ(CHUNK_SHIFT, m->chunk_shift);
		} else if (m->cmd == HMIRROR_CMD_SPACE_DEL) {
			dels++;
		} else if (m->cmd == HMIRROR_CMD_CHUNKS_WRITTEN) {
			EXPECT_EQ(0, m->lost);
			for (unsigned int j = 0; j < m->nr_chunks && j < 64; j++, nchunks++) {
				EXPECT_TRUE(m->chunk[j] == 2 || m->chunk[j] == 5);
				EXPECT_EQ(m->chunk[j] == 2 ? g2 : g5, m->gen[j]);
			}
		}
	}
	EXPECT_EQ(1, news);
	EXPECT_EQ(1, dels);
	EXPECT_EQ(2, nchunks);
	genl_close(&l);
}

/* more trips in one interval than a batch holds: every trip is either
 * listed or counted as lost, none silently dropped */
TEST_F(nl, chunks_written_lost_counted)
{
	static struct msgs ev;
	long long lost0 = hmt_dev_stat("chunks_lost");
	unsigned int nr = 2048, listed = 0;
	struct hmirror_space_info info;
	struct genl l = { 0 };
	uint64_t lost = 0;
	long ps = sysconf(_SC_PAGESIZE);
	int sfd;
	char *p;

	if (self->skip)
		SKIP(return, "no /dev/hmirror");
	ASSERT_EQ(0, listen_open(&l));
	sfd = hmt_create(self->dev, nr * ps, __builtin_ctzl(ps), HMIRROR_CREATE_POPULATE);
	ASSERT_LE(0, sfd);
	ASSERT_EQ(0, ioctl(sfd, HMIRROR_IOC_SPACE_INFO, &info));
	p = mmap(NULL, nr * ps, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE,
		 sfd, 0);
	ASSERT_NE(MAP_FAILED, p);
	ASSERT_EQ(0, hmt_arm(sfd, 0, nr));
	for (unsigned int i = 0; i < nr; i++)
		p[i * ps] = 1;
	listen_collect(&l, &ev, 300);
	munmap(p, nr * ps);
	close(sfd);
	/* one more event carries the count lost after the last one */
	for (unsigned int i = 0; i < ev.n; i++) {
		if (ev.m[i].cmd != HMIRROR_CMD_CHUNKS_WRITTEN || ev.m[i].space_id != info.id)
			continue;
		listed += ev.m[i].nr_chunks;
		lost += ev.m[i].lost;
	}
	TH_LOG("%u chunks listed in %u events, %llu lost (batch full)", listed, ev.n,
	       (unsigned long long)lost);
	EXPECT_LT(0, listed);
	/* what was not listed was counted as lost */
	EXPECT_EQ(nr - listed, hmt_dev_stat("chunks_lost") - lost0);
	genl_close(&l);
}

/* ---- pin invalidations: exactly one event, for the right range --------- */

enum source { SRC_MUNMAP, SRC_MREMAP, SRC_DONTNEED };

FIXTURE(inval) {
	int dev;
	bool skip;
};

FIXTURE_VARIANT(inval) {
	enum source src;
	uint32_t cause;
};

FIXTURE_VARIANT_ADD(inval, munmap) { .src = SRC_MUNMAP, .cause = HMIRROR_INVAL_UNMAP };
FIXTURE_VARIANT_ADD(inval, mremap) { .src = SRC_MREMAP, .cause = HMIRROR_INVAL_UNMAP };
FIXTURE_VARIANT_ADD(inval, madv_dontneed) {
	.src = SRC_DONTNEED, .cause = HMIRROR_INVAL_CLEAR,
};

FIXTURE_SETUP(inval)
{
	self->dev = hmt_open_dev();
	if (self->dev < 0) {
		self->skip = true;
		SKIP(return, "no /dev/hmirror (%s)", strerror(-self->dev));
	}
}

FIXTURE_TEARDOWN(inval)
{
	if (self->dev >= 0)
		close(self->dev);
}

TEST_F(inval, range_invalidated_once)
{
	static struct msgs ev;
	long ps = sysconf(_SC_PAGESIZE);
	struct genl l = { 0 };
	unsigned int seen = 0;
	static uint32_t id;	/* static: kept across the harness's longjmp */
	char *m, *dst;
	int pfd;

	if (self->skip)
		SKIP(return, "no /dev/hmirror");
	ASSERT_EQ(0, listen_open(&l));
	m = mmap(NULL, 16 * ps, PROT_READ | PROT_WRITE,
		 MAP_PRIVATE | MAP_ANONYMOUS | MAP_POPULATE, -1, 0);
	ASSERT_NE(MAP_FAILED, m);
	pfd = hmt_pin(self->dev, m, 16 * ps, HMIRROR_PIN_WRITE, &id);
	ASSERT_LE(0, pfd);

	switch (variant->src) {
	case SRC_MUNMAP:
		ASSERT_EQ(0, munmap(m + 4 * ps, 4 * ps));
		break;
	case SRC_MREMAP:
		dst = mmap(NULL, 4 * ps, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
		ASSERT_NE(MAP_FAILED, dst);
		ASSERT_EQ(dst, mremap(m + 4 * ps, 4 * ps, 4 * ps,
				      MREMAP_MAYMOVE | MREMAP_FIXED, dst));
		break;
	case SRC_DONTNEED:
		ASSERT_EQ(0, madvise(m + 4 * ps, 4 * ps, MADV_DONTNEED));
		break;
	}
	/* more invalidations of the same pin add nothing */
	ASSERT_EQ(0, madvise(m + 10 * ps, ps, MADV_DONTNEED));
	listen_collect(&l, &ev, 300);
	close(pfd);
	listen_collect(&l, &ev, 100);

	for (unsigned int i = 0; i < ev.n; i++) {
		if (ev.m[i].cmd != HMIRROR_CMD_RANGE_INVALIDATED || ev.m[i].pin_id != id)
			continue;
		seen++;
		EXPECT_EQ((uintptr_t)m + 4 * ps, ev.m[i].addr);
		EXPECT_EQ(4 * ps, ev.m[i].size);
		EXPECT_EQ(variant->cause, ev.m[i].cause);
	}
	EXPECT_EQ(1, seen);
	genl_close(&l);
}

/* ---- malformed requests ------------------------------------------------ */

TEST_F(nl, malformed)
{
	static struct msgs ms;
	struct nl_msg *nm;
	struct genlmsghdr *gh;

	if (self->skip)
		SKIP(return, "no /dev/hmirror");
	/* an unknown attribute (strict validation) */
	nm = req_new(&self->g, HMIRROR_CMD_SPACE_GET, 0);
	nla_put_u32(nm, HMIRROR_A_SPACE_ID, 1);
	nla_put_u32(nm, HMIRROR_A_MAX + 5, 1);
	EXPECT_EQ(-EINVAL, request(&self->g, nm, &ms));
	/* a u32 sent as a u8 */
	nm = req_new(&self->g, HMIRROR_CMD_SPACE_GET, 0);
	nla_put_u8(nm, HMIRROR_A_SPACE_ID, 1);
	EXPECT_EQ(-EINVAL, request(&self->g, nm, &ms));
	/* out of the policy's range */
	nm = req_new(&self->g, HMIRROR_CMD_SPACE_GET, 0);
	nla_put_u32(nm, HMIRROR_A_SPACE_ID, 0);
	EXPECT_EQ(-ERANGE, request(&self->g, nm, &ms));
	/* a required attribute missing */
	EXPECT_EQ(-EINVAL, request(&self->g, req_new(&self->g, HMIRROR_CMD_SPACE_GET, 0), &ms));
	/* an attribute where none is accepted */
	nm = req_new(&self->g, HMIRROR_CMD_STATS_GET, 0);
	nla_put_u32(nm, HMIRROR_A_SPACE_ID, 1);
	EXPECT_EQ(-EINVAL, request(&self->g, nm, &ms));
	/* an attribute of the reply set, sent in a request */
	nm = req_new(&self->g, HMIRROR_CMD_SPACE_GET, 0);
	nla_put_u32(nm, HMIRROR_A_SPACE_ID, 1);
	nla_put_u64(nm, HMIRROR_A_ADDR, 1);
	EXPECT_EQ(-EINVAL, request(&self->g, nm, &ms));
	/* unknown and event-only commands */
	EXPECT_EQ(-EOPNOTSUPP, request(&self->g, req_new(&self->g, 99, 0), &ms));
	EXPECT_EQ(-EOPNOTSUPP, request(&self->g, req_new(&self->g,
				HMIRROR_CMD_CHUNKS_WRITTEN, 0), &ms));
	/* STATS_GET has no dump */
	EXPECT_EQ(-EOPNOTSUPP, request(&self->g, req_new(&self->g,
				HMIRROR_CMD_STATS_GET, NLM_F_DUMP), &ms));
	/* the genl header's reserved field */
	nm = req_new(&self->g, HMIRROR_CMD_STATS_GET, 0);
	gh = nlmsg_data(nlmsg_hdr(nm));
	gh->reserved = 1;
	EXPECT_EQ(-EINVAL, request(&self->g, nm, &ms));
	/* an attribute longer than the message */
	nm = req_new(&self->g, HMIRROR_CMD_SPACE_GET, 0);
	nla_put_u32(nm, HMIRROR_A_SPACE_ID, 1);
	((struct nlattr *)genlmsg_data(nlmsg_data(nlmsg_hdr(nm))))->nla_len = 64;
	EXPECT_EQ(-EINVAL, request(&self->g, nm, &ms));
	/* and still answering */
	EXPECT_EQ(0, request(&self->g, req_new(&self->g, HMIRROR_CMD_STATS_GET, 0), &ms));
}

/* ---- unprivileged callers see only their own spaces -------------------- */

TEST_F(nl, unprivileged_sees_own)
{
	struct hmirror_space_info info;
	int sfd, status;
	pid_t pid;

	if (self->skip)
		SKIP(return, "no /dev/hmirror");
	sfd = hmt_create(self->dev, 4 * CHUNK, CHUNK_SHIFT, 0);
	ASSERT_LE(0, sfd);
	ASSERT_EQ(0, ioctl(sfd, HMIRROR_IOC_SPACE_INFO, &info));

	pid = fork();
	ASSERT_LE(0, pid);
	if (pid == 0) {
		static struct msgs ms;
		struct hmirror_space_info mine;
		struct genl g = { 0 };
		struct nl_msg *nm;
		int dev, s, own = 0;

		/* /dev/hmirror is 0660: opened while still root */
		dev = open(HMT_DEV, O_RDWR | O_CLOEXEC);
		if (dev < 0)
			_exit(11);
		if (hmt_become(65534))
			_exit(10);
		s = hmt_create(dev, 4 * CHUNK, CHUNK_SHIFT, 0);
		if (s < 0 || ioctl(s, HMIRROR_IOC_SPACE_INFO, &mine))
			_exit(12);
		if (genl_open(&g))
			_exit(13);
		if (request(&g, req_new(&g, HMIRROR_CMD_SPACE_GET, NLM_F_DUMP), &ms))
			_exit(14);
		for (unsigned int i = 0; i < ms.n; i++) {
			if (ms.m[i].space_id == info.id)
				_exit(15);	/* root's space */
			own += ms.m[i].space_id == mine.id;
		}
		if (own != 1)
			_exit(16);
		nm = req_new(&g, HMIRROR_CMD_SPACE_GET, 0);
		nla_put_u32(nm, HMIRROR_A_SPACE_ID, info.id);
		if (request(&g, nm, &ms) != -ENOENT)
			_exit(17);
		/* global counters tell of every user: CAP_NET_ADMIN */
		if (request(&g, req_new(&g, HMIRROR_CMD_STATS_GET, 0), &ms) != -EPERM)
			_exit(18);
		/* the events group needs CAP_NET_ADMIN */
		nl_socket_disable_seq_check(g.sk);
		if (nl_socket_add_membership(g.sk, g.group) == 0)
			_exit(19);
		_exit(0);
	}
	ASSERT_EQ(pid, waitpid(pid, &status, 0));
	ASSERT_TRUE(WIFEXITED(status));
	EXPECT_EQ(0, WEXITSTATUS(status));
	close(sfd);
}

/* ---- ids and pids ------------------------------------------------------ */

/*
 * A destroyed space's id is not given to the next one: its chunk events,
 * sent in batches up to event_interval_ms later, must not name a newer
 * space.
 */
TEST_F(nl, space_ids_not_reused)
{
	struct hmirror_space_info info;
	uint32_t ids[8];
	int sfd;

	if (self->skip)
		SKIP(return, "no /dev/hmirror");
	for (int i = 0; i < 8; i++) {
		int again = 0;

		sfd = hmt_create(self->dev, 4 * CHUNK, CHUNK_SHIFT, 0);
		ASSERT_LE(0, sfd);
		ASSERT_EQ(0, ioctl(sfd, HMIRROR_IOC_SPACE_INFO, &info));
		close(sfd);
		ids[i] = info.id;
		for (int j = 0; j < i; j++)
			again |= ids[j] == ids[i];
		ASSERT_FALSE(again) TH_LOG("space id %u again", ids[i]);
	}
}

/* the owner's pid in SPACE_GET as the requester's pid namespace sees it */
TEST_F(nl, owner_pid_in_callers_pid_ns)
{
	int sv[2], status;
	pid_t pid;

	if (self->skip)
		SKIP(return, "no /dev/hmirror");
	ASSERT_EQ(0, socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv));
	ASSERT_EQ(0, unshare(CLONE_NEWPID)) TH_LOG("unshare: %s", strerror(errno));
	pid = fork();		/* pid 1 of a new pid namespace */
	ASSERT_LE(0, pid);
	if (pid == 0) {
		static struct msgs ms;
		struct hmirror_space_info info;
		struct genl g = { 0 };
		struct nl_msg *nm;
		int s;

		if (getpid() != 1)
			_exit(10);
		s = hmt_create(self->dev, 4 * CHUNK, CHUNK_SHIFT, 0);
		if (s < 0 || ioctl(s, HMIRROR_IOC_SPACE_INFO, &info))
			_exit(11);
		if (genl_open(&g))
			_exit(12);
		nm = req_new(&g, HMIRROR_CMD_SPACE_GET, 0);
		nla_put_u32(nm, HMIRROR_A_SPACE_ID, info.id);
		if (request(&g, nm, &ms) || ms.n != 1)
			_exit(13);
		if (ms.m[0].owner_pid != 1)
			_exit(14);
		if (write(sv[1], &info.id, sizeof(info.id)) != sizeof(info.id))
			_exit(15);
		/* hold the space until the parent has looked */
		if (read(sv[1], &status, 1) != 1)
			_exit(16);
		_exit(0);
	}
	{
		static struct msgs ms;
		struct nl_msg *nm;
		uint32_t id;

		ASSERT_EQ(sizeof(id), read(sv[0], &id, sizeof(id)));
		nm = req_new(&self->g, HMIRROR_CMD_SPACE_GET, 0);
		nla_put_u32(nm, HMIRROR_A_SPACE_ID, id);
		ASSERT_EQ(0, request(&self->g, nm, &ms));
		ASSERT_EQ(1, ms.n);
		/* the same process, as the parent's namespace numbers it */
		EXPECT_EQ((uint32_t)pid, ms.m[0].owner_pid);
		EXPECT_EQ(0, ms.m[0].owner_uid);
		ASSERT_EQ(1, write(sv[0], "x", 1));
	}
	ASSERT_EQ(pid, waitpid(pid, &status, 0));
	ASSERT_TRUE(WIFEXITED(status));
	EXPECT_EQ(0, WEXITSTATUS(status));
}

TEST_HARNESS_MAIN
