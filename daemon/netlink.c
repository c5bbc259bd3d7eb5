// SPDX-License-Identifier: GPL-2.0
/*
 * The module's generic netlink family "hmirror" (uapi/linux/hmirror.h,
 * Documentation/netlink/specs/hmirror.yaml), through libnl-3/genl:
 *  - hmirrord subscribes to the "events" multicast group; CHUNKS_WRITTEN
 *    (a guard trip) and RANGE_INVALIDATED reach the engine host at once,
 *    so a mirror of a written chunk is dropped without waiting for the
 *    next dispatch's harvest;
 *  - hmirrorctl asks STATS_GET for the module's counters.
 * Without the module (no family) both report -ENOENT and go on.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <netlink/genl/ctrl.h>
#include <netlink/genl/genl.h>
#include <netlink/netlink.h>

#include <linux/hmirror.h>

#include "netlink.h"
#include "netlink_stats.h"

struct hmd_netlink {
	struct nl_sock *sk;
	int family;
	hmd_nl_event_cb cb;
	void *data;
};

static int nl_err(int e)
{
	switch (e < 0 ? -e : e) {
	case NLE_OBJ_NOTFOUND: return -ENOENT;
	case NLE_NOMEM: return -ENOMEM;
	case NLE_PERM: return -EPERM;
	case NLE_AGAIN: return -EAGAIN;
	default: return -EIO;
	}
}

static int on_event(struct nl_msg *msg, void *arg)
{
	struct hmd_netlink *n = arg;
	struct genlmsghdr *g = nlmsg_data(nlmsg_hdr(msg));
	struct nlattr *tb[HMIRROR_A_MAX + 1];
	uint64_t space = 0;

	if (genlmsg_parse(nlmsg_hdr(msg), 0, tb, HMIRROR_A_MAX, NULL) < 0)
		return NL_SKIP;
	if (tb[HMIRROR_A_SPACE_ID])
		space = nla_get_u32(tb[HMIRROR_A_SPACE_ID]);
	if (g->cmd == HMIRROR_CMD_CHUNKS_WRITTEN) {
		struct nlattr *a;
		int rem;

		nla_for_each_attr(a, genlmsg_attrdata(g, 0),
				  genlmsg_attrlen(g, 0), rem) {
			struct nlattr *c[HMIRROR_A_CHUNK_MAX + 1];

			if (nla_type(a) != HMIRROR_A_CHUNK)
				continue;
			if (nla_parse_nested(c, HMIRROR_A_CHUNK_MAX, a, NULL) < 0 ||
			    !c[HMIRROR_A_CHUNK_INDEX])
				continue;
			n->cb(g->cmd, space, nla_get_u64(c[HMIRROR_A_CHUNK_INDEX]),
			      n->data);
		}
		if (tb[HMIRROR_A_CHUNKS_LOST])
			n->cb(g->cmd, space, UINT64_MAX, n->data); /* all */
	} else {
		n->cb(g->cmd, space, UINT64_MAX, n->data);
	}
	return NL_OK;
}

int hmd_netlink_new(hmd_nl_event_cb cb, void *data, struct hmd_netlink **ret)
{
	struct hmd_netlink *n = calloc(1, sizeof(*n));
	int r, grp;

	if (!n)
		return -ENOMEM;
	n->cb = cb;
	n->data = data;
	n->sk = nl_socket_alloc();
	if (!n->sk) {
		free(n);
		return -ENOMEM;
	}
	r = genl_connect(n->sk);
	if (r < 0)
		goto fail;
	n->family = genl_ctrl_resolve(n->sk, HMIRROR_GENL_NAME);
	if (n->family < 0) {
		r = n->family;
		goto fail;
	}
	grp = genl_ctrl_resolve_grp(n->sk, HMIRROR_GENL_NAME,
				    HMIRROR_GENL_MCGRP_EVENTS);
	if (grp < 0) {
		r = grp;
		goto fail;
	}
	nl_socket_disable_seq_check(n->sk);
	nl_socket_modify_cb(n->sk, NL_CB_VALID, NL_CB_CUSTOM, on_event, n);
	r = nl_socket_add_membership(n->sk, grp);
	if (r < 0)
		goto fail;
	r = nl_socket_set_nonblocking(n->sk);
	if (r < 0)
		goto fail;
	*ret = n;
	return 0;
fail:
	nl_socket_free(n->sk);
	free(n);
	return nl_err(r);
}

void hmd_netlink_free(struct hmd_netlink *n)
{
	if (!n)
		return;
	nl_socket_free(n->sk);
	free(n);
}

int hmd_netlink_fd(const struct hmd_netlink *n)
{
	return nl_socket_get_fd(n->sk);
}

int hmd_netlink_process(struct hmd_netlink *n)
{
	int r = nl_recvmsgs_default(n->sk);

	return r < 0 && r != -NLE_AGAIN ? nl_err(r) : 0;
}

/* ---- STATS_GET, for hmirrorctl: repeated COUNTER {NAME, VALUE} nests ---- */

struct stats_ctx {
	struct hm_nl_stat *out;
	unsigned cap, n;
};

static int on_stats(struct nl_msg *msg, void *arg)
{
	struct stats_ctx *s = arg;
	struct genlmsghdr *g = nlmsg_data(nlmsg_hdr(msg));
	struct nlattr *a;
	int rem;

	nla_for_each_attr(a, genlmsg_attrdata(g, 0), genlmsg_attrlen(g, 0), rem) {
		struct nlattr *c[HMIRROR_A_COUNTER_MAX + 1];

		if (nla_type(a) != HMIRROR_A_COUNTER || s->n >= s->cap)
			continue;
		if (nla_parse_nested(c, HMIRROR_A_COUNTER_MAX, a, NULL) < 0 ||
		    !c[HMIRROR_A_COUNTER_NAME] || !c[HMIRROR_A_COUNTER_VALUE])
			continue;
		snprintf(s->out[s->n].name, sizeof(s->out[s->n].name), "%s",
			 nla_get_string(c[HMIRROR_A_COUNTER_NAME]));
		s->out[s->n].value = nla_get_u64(c[HMIRROR_A_COUNTER_VALUE]);
		s->n++;
	}
	return NL_OK;
}

int hm_nl_stats_get(struct hm_nl_stat *out, unsigned cap, unsigned *ret_n)
{
	struct stats_ctx s = { .out = out, .cap = cap };
	struct nl_sock *sk = nl_socket_alloc();
	struct nl_msg *msg = NULL;
	int fam, r;

	*ret_n = 0;
	if (!sk)
		return -ENOMEM;
	r = genl_connect(sk);
	if (r < 0)
		goto out;
	fam = genl_ctrl_resolve(sk, HMIRROR_GENL_NAME);
	if (fam < 0) {
		r = fam;
		goto out;
	}
	msg = nlmsg_alloc();
	if (!msg) {
		r = -NLE_NOMEM;
		goto out;
	}
	if (!genlmsg_put(msg, NL_AUTO_PORT, NL_AUTO_SEQ, fam, 0, 0,
			 HMIRROR_CMD_STATS_GET, HMIRROR_GENL_VERSION)) {
		r = -NLE_NOMEM;
		goto out;
	}
	nl_socket_modify_cb(sk, NL_CB_VALID, NL_CB_CUSTOM, on_stats, &s);
	r = nl_send_auto(sk, msg);
	if (r < 0)
		goto out;
	r = nl_recvmsgs_default(sk);
	if (r < 0)
		goto out;
	nl_wait_for_ack(sk);
	*ret_n = s.n;
	r = 0;
out:
	nlmsg_free(msg);
	nl_socket_free(sk);
	return r < 0 ? nl_err(r) : 0;
}
