// SPDX-License-Identifier: GPL-2.0
/*
 * hmirror device paths (pins, dma-bufs, netlink): start and stop, and
 * their counters, one "name value" line each in <debugfs>/hmirror/device
 * and the same names in the netlink STATS_GET reply.  debugfs is for
 * people and tests: generic netlink is the ABI.
 */
#define pr_fmt(fmt) KBUILD_MODNAME ": " fmt

#include <linux/debugfs.h>
#include <linux/seq_file.h>

#include "hmirror.h"

struct hmirror_dev_stats hmirror_dev_stats;

#define C(n, f)	{ .name = n, .v = &hmirror_dev_stats.f }
const struct hmirror_dev_counter hmirror_dev_counters[] = {
	C("pins", pins),
	C("pinned_bytes", pinned_bytes),
	C("pins_created", pins_created),
	C("pins_failed", pins_failed),
	C("pin_retries", pin_retries),
	C("inval_unmap", inval[HMIRROR_DEV_INVAL_UNMAP]),
	C("inval_clear", inval[HMIRROR_DEV_INVAL_CLEAR]),
	C("inval_release", inval[HMIRROR_DEV_INVAL_RELEASE]),
	C("inval_migrate", inval[HMIRROR_DEV_INVAL_MIGRATE]),
	C("inval_exclusive", inval[HMIRROR_DEV_INVAL_EXCLUSIVE]),
	C("inval_other", inval[HMIRROR_DEV_INVAL_OTHER]),
	C("inval_ignored", inval_ignored),
	C("dmabufs", dmabufs),
	C("dmabufs_exported", dmabufs_exported),
	C("dmabuf_bytes", dmabuf_bytes),
	C("dmabuf_maps", dmabuf_maps),
	C("events_sent", events_sent),
	C("events_dropped", events_dropped),
	C("chunks_lost", chunks_lost),
	{ }
};

#undef C

static int hmirror_dev_stats_show(struct seq_file *m, void *v)
{
	const struct hmirror_dev_counter *c;

	for (c = hmirror_dev_counters; c->name; c++)
		seq_printf(m, "%s %lld\n", c->name, atomic64_read(c->v));
	return 0;
}
DEFINE_SHOW_ATTRIBUTE(hmirror_dev_stats);

/* after the core's debugfs directory exists; debugfs_remove_recursive() of it removes ours */
int hmirror_devpath_init(void)
{
	int ret;

	BUILD_BUG_ON(sizeof(struct hmirror_pin_create) % 8);
	BUILD_BUG_ON(sizeof(struct hmirror_pin_state) % 8);
	BUILD_BUG_ON(sizeof(struct hmirror_dmabuf_export) % 8);

	ret = hmirror_pin_init();
	if (ret)
		return ret;
	ret = hmirror_nl_init();
	if (ret) {
		hmirror_pin_exit();
		return ret;
	}
	debugfs_create_file("device", 0444, hmirror_debugfs_root(), NULL,
			    &hmirror_dev_stats_fops);
	return 0;
}

/* netlink first: nothing may read the state the rest frees */
void hmirror_devpath_exit(void)
{
	hmirror_nl_exit();
	hmirror_pin_exit();
}
