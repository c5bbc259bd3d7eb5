// SPDX-License-Identifier: GPL-2.0
/*
 * hmirror: the generic netlink family "hmirror"
 * (Documentation/netlink/specs/hmirror.yaml).
 *
 * Requests: STATS_GET (global counters: every user's activity, so
 * CAP_NET_ADMIN, GENL_ADMIN_PERM) and SPACE_GET (one space, or a dump of
 * every space the caller may see: all with CAP_SYS_ADMIN, else those its
 * uid created), with pids and uids as the caller's namespaces see them.
 * Every operation is validated strictly (resv_start_op is 0) against its
 * own policy; one without a policy takes no attributes.
 *
 * Events, multicast to the "events" group (CAP_NET_ADMIN to join, pids of
 * the initial pid namespace, as the proc connector's): space
 * created and destroyed, pin range invalidated, and chunks written.  The
 * last come from the guard's fault path: records are appended to a bounded
 * batch under a spinlock, only while someone listens, and a delayed work
 * sends them at most every event_interval_ms, one message per space run;
 * records that do not fit are counted, and the next message says how many
 * were lost (the listener then harvests instead).
 */
#define pr_fmt(fmt) KBUILD_MODNAME ": " fmt

#include <linux/cred.h>
#include <linux/module.h>
#include <linux/mutex.h>
#include <linux/pid.h>
#include <linux/pid_namespace.h>
#include <linux/spinlock.h>
#include <linux/workqueue.h>
#include <net/genetlink.h>
#include <net/netlink.h>
#include <net/sock.h>

#include "hmirror.h"

static unsigned int event_interval_ms = 10;
module_param(event_interval_ms, uint, 0644);
MODULE_PARM_DESC(event_interval_ms, "Least interval between chunks-written events, ms (default 10)");

/* chunk-written records held between two sends */
#define HMIRROR_NL_BATCH	512

struct hmirror_nl_rec {
	u32 space_id;
	u64 chunk;
	u64 gen;
};

static struct {
	spinlock_t lock;		/* protects the fields below */
	unsigned int nr;
	u64 lost;			/* records dropped since the last send */
	bool live;			/* family registered, work may run */
	struct hmirror_nl_rec rec[HMIRROR_NL_BATCH];
} hmirror_nl_batch = {
	.lock = __SPIN_LOCK_UNLOCKED(hmirror_nl_batch.lock),
};

static void hmirror_nl_flush(struct work_struct *work);
static DECLARE_DELAYED_WORK(hmirror_nl_work, hmirror_nl_flush);

enum hmirror_nl_group { HMIRROR_NL_GRP_EVENTS };

/*
 * Without the flag any user could join the events group and watch every
 * user's spaces; kmod/configure.sh probes for it, and a probe that misses
 * it must fail the build rather than drop it.  A kernel that lacks it
 * (before 6.7 and the stable backports: Debian 12's 6.1.0-50, say) gets
 * no events group at all: STATS_GET and SPACE_GET work, hmirrord runs
 * without events.
 */
#if defined(GENL_MCAST_CAP_NET_ADMIN) && !defined(HAVE_GENL_MCAST_CAP_NET_ADMIN)
#error "kmod/configure.sh missed GENL_MCAST_CAP_NET_ADMIN in net/genetlink.h"
#endif

#ifdef HAVE_GENL_MCAST_CAP_NET_ADMIN
static const struct genl_multicast_group hmirror_nl_mcgrps[] = {
	[HMIRROR_NL_GRP_EVENTS] = {
		.name = HMIRROR_GENL_MCGRP_EVENTS,
		.flags = GENL_MCAST_CAP_NET_ADMIN,
	},
};
#endif

/*
 * STATS_GET takes no attribute: every one is refused by validation.  An
 * explicit policy, never a NULL one beside a non-zero maxattr (7.3's
 * validation then hit BUG() in lib/nlattr.c under the netlink fuzzer).
 */
static const struct nla_policy hmirror_nl_no_attrs_policy[HMIRROR_A_MAX + 1] = {
	[0 ... HMIRROR_A_MAX] = { .type = NLA_REJECT },
};

static const struct nla_policy hmirror_nl_space_get_policy[HMIRROR_A_MAX + 1] = {
	[HMIRROR_A_SPACE_ID] = NLA_POLICY_MIN(NLA_U32, 1),
};

static struct genl_family hmirror_nl_family;

/* ---- replies ------------------------------------------------------------ */

static int hmirror_nl_put_counter(struct sk_buff *skb, const char *name,
				  u64 value)
{
	struct nlattr *nest;

	nest = nla_nest_start(skb, HMIRROR_A_COUNTER);
	if (!nest)
		return -EMSGSIZE;
	if (nla_put_string(skb, HMIRROR_A_COUNTER_NAME, name) ||
	    nla_put_u64_64bit(skb, HMIRROR_A_COUNTER_VALUE, value,
			      HMIRROR_A_COUNTER_PAD)) {
		nla_nest_cancel(skb, nest);
		return -EMSGSIZE;
	}
	nla_nest_end(skb, nest);
	return 0;
}

/* counters [0, @end) of @st */
static int hmirror_nl_put_stats(struct sk_buff *skb,
				struct hmirror_stats __percpu *st, int end)
{
	int i;

	for (i = 0; i < end; i++)
		if (hmirror_nl_put_counter(skb, hmirror_stat_names[i],
					   hmirror_stat_read(st, i)))
			return -EMSGSIZE;
	return 0;
}

static int hmirror_nl_stats_get(struct sk_buff *skb, struct genl_info *info)
{
	struct sk_buff *msg;
	void *hdr;

	msg = genlmsg_new(NLMSG_GOODSIZE, GFP_KERNEL);
	if (!msg)
		return -ENOMEM;
	hdr = genlmsg_put_reply(msg, info, &hmirror_nl_family, 0,
				HMIRROR_CMD_STATS_GET);
	if (!hdr)
		goto fail;
	if (hmirror_nl_put_stats(msg, &hmirror_global_stats, HMIRROR_NR_STATS))
		goto fail;
	genlmsg_end(msg, hdr);
	return genlmsg_reply(msg, info);

fail:
	nlmsg_free(msg);
	return -EMSGSIZE;
}

/* the requester may see @s: CAP_SYS_ADMIN, or its uid created it */
static bool hmirror_nl_visible(const struct sk_buff *skb,
			       const struct hmirror_space *s)
{
	if (netlink_capable(skb, CAP_SYS_ADMIN))
		return true;
	return uid_eq(sk_uid(NETLINK_CB(skb).sk), s->owner_uid);
}

/*
 * A space's attributes; the owner's pid and uid as @pid_ns and @user_ns
 * see them (pid 0: not in that namespace).  hmirror_lock (s->owner).
 */
static int hmirror_nl_fill_space(struct sk_buff *skb, struct hmirror_space *s,
				 u32 portid, u32 seq, int flags, u8 cmd,
				 struct pid_namespace *pid_ns,
				 struct user_namespace *user_ns)
{
	void *hdr;

	lockdep_assert_held(&hmirror_lock);
	hdr = genlmsg_put(skb, portid, seq, &hmirror_nl_family, flags, cmd);
	if (!hdr)
		return -EMSGSIZE;
	if (nla_put_u32(skb, HMIRROR_A_SPACE_ID, s->id) ||
	    nla_put_u32(skb, HMIRROR_A_OWNER_PID,
			pid_nr_ns(s->owner->tgid, pid_ns)) ||
	    nla_put_u32(skb, HMIRROR_A_OWNER_UID,
			from_kuid_munged(user_ns, s->owner_uid)) ||
	    nla_put_u64_64bit(skb, HMIRROR_A_SPACE_SIZE, s->size,
			      HMIRROR_A_PAD) ||
	    nla_put_u32(skb, HMIRROR_A_CHUNK_SHIFT, s->chunk_shift))
		goto cancel;
	if (cmd == HMIRROR_CMD_SPACE_GET &&
	    (nla_put_u64_64bit(skb, HMIRROR_A_SPACE_WRITTEN,
			       READ_ONCE(s->nr_written), HMIRROR_A_PAD) ||
	     hmirror_nl_put_stats(skb, s->stats, HMIRROR_NR_SPACE_STATS)))
		goto cancel;
	genlmsg_end(skb, hdr);
	return 0;

cancel:
	genlmsg_cancel(skb, hdr);
	return -EMSGSIZE;
}

static int hmirror_nl_space_get(struct sk_buff *skb, struct genl_info *info)
{
	struct hmirror_space *s, *found = NULL;
	struct sk_buff *msg;
	u32 id;
	int ret;

	if (GENL_REQ_ATTR_CHECK(info, HMIRROR_A_SPACE_ID))
		return -EINVAL;
	id = nla_get_u32(info->attrs[HMIRROR_A_SPACE_ID]);

	msg = genlmsg_new(NLMSG_GOODSIZE, GFP_KERNEL);
	if (!msg)
		return -ENOMEM;
	mutex_lock(&hmirror_lock);
	list_for_each_entry(s, &hmirror_spaces, node) {
		if (s->id == id && hmirror_nl_visible(skb, s)) {
			found = s;
			break;
		}
	}
	/* a request is handled in the sender's context: its namespaces */
	ret = found ? hmirror_nl_fill_space(msg, found, info->snd_portid,
					    info->snd_seq, 0,
					    HMIRROR_CMD_SPACE_GET,
					    task_active_pid_ns(current),
					    current_user_ns()) : -ENOENT;
	mutex_unlock(&hmirror_lock);
	if (ret) {
		if (ret == -ENOENT)
			NL_SET_ERR_MSG_ATTR(info->extack,
					    info->attrs[HMIRROR_A_SPACE_ID],
					    "no such space");
		nlmsg_free(msg);
		return ret;
	}
	return genlmsg_reply(msg, info);
}

/* cb->args[0]: spaces already dumped (visible ones, in list order) */
static int hmirror_nl_space_dump(struct sk_buff *skb,
				 struct netlink_callback *cb)
{
	struct hmirror_space *s;
	long idx = 0, start = cb->args[0];
	int ret = 0;

	mutex_lock(&hmirror_lock);
	list_for_each_entry(s, &hmirror_spaces, node) {
		if (!hmirror_nl_visible(cb->skb, s))
			continue;
		if (idx++ < start)
			continue;
		/* dumps run in the context of the socket's reader */
		ret = hmirror_nl_fill_space(skb, s,
					    NETLINK_CB(cb->skb).portid,
					    cb->nlh->nlmsg_seq, NLM_F_MULTI,
					    HMIRROR_CMD_SPACE_GET,
					    task_active_pid_ns(current),
					    current_user_ns());
		if (ret) {
			idx--;
			break;
		}
	}
	mutex_unlock(&hmirror_lock);
	cb->args[0] = idx;
	/* a full skb ends this part of the dump; the next call resumes */
	if (ret && !skb->len)
		return ret;
	return skb->len;
}

static const struct genl_ops hmirror_nl_ops[] = {
	{
		.cmd = HMIRROR_CMD_STATS_GET,
		.doit = hmirror_nl_stats_get,
		/* every user's activity: CAP_NET_ADMIN (init_net's user ns) */
		.flags = GENL_ADMIN_PERM,
		.policy = hmirror_nl_no_attrs_policy,
		.maxattr = HMIRROR_A_MAX,
	},
	{
		.cmd = HMIRROR_CMD_SPACE_GET,
		.doit = hmirror_nl_space_get,
		.dumpit = hmirror_nl_space_dump,
		.policy = hmirror_nl_space_get_policy,
		.maxattr = HMIRROR_A_MAX,
	},
};

static struct genl_family hmirror_nl_family __ro_after_init = {
	.name = HMIRROR_GENL_NAME,
	.version = HMIRROR_GENL_VERSION,
	.maxattr = HMIRROR_A_MAX,
	.netnsok = false,	/* spaces are not per network namespace */
	.parallel_ops = true,
	.module = THIS_MODULE,
	.ops = hmirror_nl_ops,
	.n_ops = ARRAY_SIZE(hmirror_nl_ops),
#ifdef HAVE_GENL_MCAST_CAP_NET_ADMIN
	.mcgrps = hmirror_nl_mcgrps,
	.n_mcgrps = ARRAY_SIZE(hmirror_nl_mcgrps),
#endif
	/* .resv_start_op 0: every op validated strictly, header included */
};

/* ---- events ------------------------------------------------------------- */

static bool hmirror_nl_listened(void)
{
#ifdef HAVE_GENL_MCAST_CAP_NET_ADMIN
	return READ_ONCE(hmirror_nl_batch.live) &&
	       genl_has_listeners(&hmirror_nl_family, &init_net,
				  HMIRROR_NL_GRP_EVENTS);
#else
	return false;	/* no events group */
#endif
}

/* multicast @msg; false if a listener did not get it */
static bool hmirror_nl_send(struct sk_buff *msg, void *hdr, gfp_t gfp)
{
	int ret;

	genlmsg_end(msg, hdr);
	ret = genlmsg_multicast(&hmirror_nl_family, msg, 0,
				HMIRROR_NL_GRP_EVENTS, gfp);
	/*
	 * -ESRCH: the last listener just left, nobody missed it.  -ENOBUFS:
	 * some listener's receive buffer overflowed (it sees ENOBUFS on its
	 * socket, and resynchronizes by a harvest or a dump).
	 */
	if (!ret || ret == -ESRCH) {
		if (!ret)
			hmirror_count_inc(HMIRROR_STAT_EVENTS_SENT);
		return true;
	}
	hmirror_count_inc(HMIRROR_STAT_EVENTS_DROPPED);
	return false;
}

static struct sk_buff *hmirror_nl_event_new(u8 cmd, gfp_t gfp, void **ret_hdr)
{
	struct sk_buff *msg;

	msg = genlmsg_new(NLMSG_GOODSIZE, gfp);
	if (!msg) {
		hmirror_count_inc(HMIRROR_STAT_EVENTS_DROPPED);
		return NULL;
	}
	*ret_hdr = genlmsg_put(msg, 0, 0, &hmirror_nl_family, 0, cmd);
	if (!*ret_hdr) {
		nlmsg_free(msg);
		hmirror_count_inc(HMIRROR_STAT_EVENTS_DROPPED);
		return NULL;
	}
	return msg;
}

static void hmirror_nl_event_fail(struct sk_buff *msg)
{
	nlmsg_free(msg);
	hmirror_count_inc(HMIRROR_STAT_EVENTS_DROPPED);
}

void hmirror_nl_range_invalidated(u32 pin_id, pid_t tgid, u64 addr, u64 size,
				  u32 cause)
{
	struct sk_buff *msg;
	void *hdr;

	if (!hmirror_nl_listened())
		return;
	msg = hmirror_nl_event_new(HMIRROR_CMD_RANGE_INVALIDATED, GFP_KERNEL,
				   &hdr);
	if (!msg)
		return;
	if (nla_put_u32(msg, HMIRROR_A_PIN_ID, pin_id) ||
	    nla_put_u32(msg, HMIRROR_A_OWNER_PID, tgid) ||
	    nla_put_u64_64bit(msg, HMIRROR_A_ADDR, addr, HMIRROR_A_PAD) ||
	    nla_put_u64_64bit(msg, HMIRROR_A_SIZE, size, HMIRROR_A_PAD) ||
	    nla_put_u32(msg, HMIRROR_A_INVAL_CAUSE, cause))
		return hmirror_nl_event_fail(msg);
	hmirror_nl_send(msg, hdr, GFP_KERNEL);
}

/* Called by space.c under hmirror_lock (a mutex). */
void hmirror_nl_space_event(struct hmirror_space *s,
			    enum hmirror_nl_space_what what)
{
	u8 cmd = what == HMIRROR_NL_SPACE_NEW ? HMIRROR_CMD_SPACE_NEW :
						HMIRROR_CMD_SPACE_DEL;
	struct sk_buff *msg;
	void *hdr;

	lockdep_assert_held(&hmirror_lock);
	if (what == HMIRROR_NL_SPACE_NEW)
		s->owner_uid = current_euid();
	if (!hmirror_nl_listened())
		return;
	msg = hmirror_nl_event_new(cmd, GFP_KERNEL, &hdr);
	if (!msg)
		return;
	if (nla_put_u32(msg, HMIRROR_A_SPACE_ID, s->id) ||
	    nla_put_u32(msg, HMIRROR_A_OWNER_PID, pid_nr(s->owner->tgid)) ||
	    nla_put_u32(msg, HMIRROR_A_OWNER_UID,
			from_kuid_munged(&init_user_ns, s->owner_uid)) ||
	    nla_put_u64_64bit(msg, HMIRROR_A_SPACE_SIZE, s->size,
			      HMIRROR_A_PAD) ||
	    nla_put_u32(msg, HMIRROR_A_CHUNK_SHIFT, s->chunk_shift))
		return hmirror_nl_event_fail(msg);
	hmirror_nl_send(msg, hdr, GFP_KERNEL);
}

/* Fault path: may run under spinlocks.  Cheap when nobody listens. */
void hmirror_nl_chunk_written(u32 space_id, u64 chunk, u64 generation)
{
	struct hmirror_nl_rec *r;
	bool kick = false;

	if (!hmirror_nl_listened())
		return;
	spin_lock(&hmirror_nl_batch.lock);
	if (hmirror_nl_batch.nr < HMIRROR_NL_BATCH) {
		r = &hmirror_nl_batch.rec[hmirror_nl_batch.nr++];
		r->space_id = space_id;
		r->chunk = chunk;
		r->gen = generation;
		kick = hmirror_nl_batch.nr == 1;
	} else {
		hmirror_nl_batch.lost++;
		hmirror_count_inc(HMIRROR_STAT_CHUNKS_LOST);
	}
	spin_unlock(&hmirror_nl_batch.lock);
	if (kick)
		queue_delayed_work(system_wq, &hmirror_nl_work,
				   msecs_to_jiffies(event_interval_ms));
}

static void hmirror_nl_flush(struct work_struct *work)
{
	unsigned int nr, first, i = 0;
	struct hmirror_nl_rec *rec;
	struct nlattr *nest;
	struct sk_buff *msg;
	u64 lost;
	void *hdr;
	u32 id;

	rec = kmalloc_array(HMIRROR_NL_BATCH, sizeof(*rec), GFP_KERNEL);
	spin_lock(&hmirror_nl_batch.lock);
	nr = rec ? hmirror_nl_batch.nr : 0;
	if (rec)
		memcpy(rec, hmirror_nl_batch.rec, nr * sizeof(*rec));
	lost = hmirror_nl_batch.lost + (rec ? 0 : hmirror_nl_batch.nr);
	hmirror_nl_batch.nr = 0;
	hmirror_nl_batch.lost = 0;
	spin_unlock(&hmirror_nl_batch.lock);
	if (!rec)
		hmirror_count_add(HMIRROR_STAT_CHUNKS_LOST, lost);

	while (i < nr) {
		id = rec[i].space_id;
		msg = hmirror_nl_event_new(HMIRROR_CMD_CHUNKS_WRITTEN,
					   GFP_KERNEL, &hdr);
		if (!msg)
			break;
		if (nla_put_u32(msg, HMIRROR_A_SPACE_ID, id) ||
		    nla_put_u64_64bit(msg, HMIRROR_A_CHUNKS_LOST, lost,
				      HMIRROR_A_PAD)) {
			hmirror_nl_event_fail(msg);
			break;
		}
		lost = 0;
		for (first = i; i < nr && rec[i].space_id == id; i++) {
			nest = nla_nest_start(msg, HMIRROR_A_CHUNK);
			if (!nest)
				break;
			if (nla_put_u64_64bit(msg, HMIRROR_A_CHUNK_INDEX,
					      rec[i].chunk,
					      HMIRROR_A_CHUNK_PAD) ||
			    nla_put_u64_64bit(msg, HMIRROR_A_CHUNK_GEN,
					      rec[i].gen,
					      HMIRROR_A_CHUNK_PAD)) {
				nla_nest_cancel(msg, nest);
				break;
			}
			nla_nest_end(msg, nest);
		}
		if (i == first) {	/* not even one record fits: give up */
			hmirror_nl_event_fail(msg);
			break;
		}
		if (!hmirror_nl_send(msg, hdr, GFP_KERNEL))
			hmirror_count_add(HMIRROR_STAT_CHUNKS_LOST, i - first);
	}
	if (i < nr)
		hmirror_count_add(HMIRROR_STAT_CHUNKS_LOST, nr - i);
	kfree(rec);
}

int hmirror_nl_init(void)
{
	int ret;

	ret = genl_register_family(&hmirror_nl_family);
	if (ret)
		return ret;
	WRITE_ONCE(hmirror_nl_batch.live, true);
	return 0;
}

void hmirror_nl_exit(void)
{
	WRITE_ONCE(hmirror_nl_batch.live, false);
	cancel_delayed_work_sync(&hmirror_nl_work);
	genl_unregister_family(&hmirror_nl_family);
}
