// SPDX-License-Identifier: GPL-2.0
/*
 * hmirror debugfs: /sys/kernel/debug/hmirror/{stats,spaces}, for people
 * and tests (the ABI for tools is generic netlink).  Every file is listed
 * in Documentation/admin-guide.rst.
 */
#define pr_fmt(fmt) KBUILD_MODNAME ": " fmt

#include <linux/debugfs.h>
#include <linux/pid.h>
#include <linux/seq_file.h>

#include "hmirror.h"

const char *const hmirror_stat_names[HMIRROR_NR_STATS] = {
	[HMIRROR_STAT_SPACES] = "spaces",
	[HMIRROR_STAT_SPACE_BYTES] = "space_bytes",
	[HMIRROR_STAT_PAGES_RESIDENT] = "pages_resident",
	[HMIRROR_STAT_MAPPINGS] = "mappings",
	[HMIRROR_STAT_TRIPS] = "guard_trips",
	[HMIRROR_STAT_CHUNKS_ARMED] = "chunks_armed",
	[HMIRROR_STAT_CHUNKS_DISARMED] = "chunks_disarmed",
	[HMIRROR_STAT_HARVESTS] = "harvests",
	[HMIRROR_STAT_HARVESTS_EMPTY] = "harvests_empty",
	[HMIRROR_STAT_CHUNKS_REPORTED] = "chunks_reported",
	[HMIRROR_STAT_HARVEST_NS] = "harvest_ns",
	[HMIRROR_STAT_REARM_CALLS] = "rearm_calls",
	[HMIRROR_STAT_REARM_PTES] = "rearm_ptes",
	[HMIRROR_STAT_REARM_NS] = "rearm_ns",
	[HMIRROR_STAT_DRAIN_NS] = "drain_ns",
	[HMIRROR_STAT_FAULT_READ] = "faults_read",
	[HMIRROR_STAT_FAULT_WRITE] = "faults_write",
	[HMIRROR_STAT_FAULT_VIEW] = "faults_view",
	[HMIRROR_STAT_FAULT_MKWRITE] = "faults_mkwrite",
	[HMIRROR_STAT_FAULT_MAP_PAGES] = "faults_map_pages",
	[HMIRROR_STAT_FAULT_SIGBUS] = "faults_sigbus",
	[HMIRROR_STAT_FAULT_OOM] = "faults_oom",
	[HMIRROR_STAT_PINNED_KEPT] = "chunks_pinned_kept",
	[HMIRROR_STAT_TRIP_OPENED] = "trip_ptes_opened",
};

static struct dentry *hmirror_debugfs_dir;

static void hmirror_show_stats(struct seq_file *m, const char *indent,
			       struct hmirror_stats *st, bool global)
{
	int i;

	for (i = 0; i < HMIRROR_NR_STATS; i++) {
		if (!global && i == HMIRROR_STAT_SPACES)
			continue;
		seq_printf(m, "%s%s %lld\n", indent, hmirror_stat_names[i],
			   (long long)atomic64_read(&st->v[i]));
	}
}

static int hmirror_stats_show(struct seq_file *m, void *unused)
{
	hmirror_show_stats(m, "", &hmirror_global_stats, true);
	return 0;
}
DEFINE_SHOW_ATTRIBUTE(hmirror_stats);

static int hmirror_spaces_show(struct seq_file *m, void *unused)
{
	struct hmirror_space *s;

	mutex_lock(&hmirror_lock);
	list_for_each_entry(s, &hmirror_spaces, node) {
		seq_printf(m, "space %u size %llu chunk_shift %u nr_chunks %llu written %llu owner %d\n",
			   s->id, s->size, s->chunk_shift, s->nr_chunks,
			   READ_ONCE(s->nr_written),
			   pid_nr(s->owner->tgid));
		hmirror_show_stats(m, "  ", &s->stats, false);
	}
	mutex_unlock(&hmirror_lock);
	return 0;
}
DEFINE_SHOW_ATTRIBUTE(hmirror_spaces);

void hmirror_debugfs_init(void)
{
	hmirror_debugfs_dir = debugfs_create_dir("hmirror", NULL);
	debugfs_create_file("stats", 0444, hmirror_debugfs_dir, NULL,
			    &hmirror_stats_fops);
	debugfs_create_file("spaces", 0444, hmirror_debugfs_dir, NULL,
			    &hmirror_spaces_fops);
}

/* debugfs_lookup() of "hmirror" gives kmod-device the directory */
struct dentry *hmirror_debugfs_root(void)
{
	return hmirror_debugfs_dir;
}

void hmirror_debugfs_exit(void)
{
	debugfs_remove_recursive(hmirror_debugfs_dir);
	hmirror_debugfs_dir = NULL;
}
