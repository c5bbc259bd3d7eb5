// SPDX-License-Identifier: GPL-2.0
/*
 * hmirror debugfs: /sys/kernel/debug/hmirror/{stats,spaces,device,users},
 * for people and tests (the ABI for tools is generic netlink).  One
 * "name value" line per counter (names: stats.c).  Every file is listed
 * in Documentation/admin-guide.rst.
 */
#define pr_fmt(fmt) KBUILD_MODNAME ": " fmt

#include <linux/debugfs.h>
#include <linux/pid.h>
#include <linux/seq_file.h>

#include "hmirror.h"

static struct dentry *hmirror_debugfs_dir;

static void hmirror_show_stats(struct seq_file *m, const char *indent,
			       struct hmirror_stats __percpu *st, int first,
			       int end)
{
	int i;

	for (i = first; i < end; i++)
		seq_printf(m, "%s%s %lld\n", indent, hmirror_stat_names[i],
			   (long long)hmirror_stat_read(st, i));
}

static int hmirror_stats_show(struct seq_file *m, void *unused)
{
	hmirror_show_stats(m, "", &hmirror_global_stats, 0,
			   HMIRROR_NR_SPACE_STATS);
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
		/* "spaces" is global only */
		hmirror_show_stats(m, "  ", s->stats, HMIRROR_STAT_SPACES + 1,
				   HMIRROR_NR_SPACE_STATS);
	}
	mutex_unlock(&hmirror_lock);
	return 0;
}
DEFINE_SHOW_ATTRIBUTE(hmirror_spaces);

/* pins, dma-bufs, netlink events */
static int hmirror_device_show(struct seq_file *m, void *unused)
{
	hmirror_show_stats(m, "", &hmirror_global_stats,
			   HMIRROR_NR_SPACE_STATS, HMIRROR_NR_STATS);
	return 0;
}
DEFINE_SHOW_ATTRIBUTE(hmirror_device);

/* hmirror_users_show() is account.c's */
DEFINE_SHOW_ATTRIBUTE(hmirror_users);

void hmirror_debugfs_init(void)
{
	hmirror_debugfs_dir = debugfs_create_dir("hmirror", NULL);
	debugfs_create_file("stats", 0444, hmirror_debugfs_dir, NULL,
			    &hmirror_stats_fops);
	debugfs_create_file("spaces", 0444, hmirror_debugfs_dir, NULL,
			    &hmirror_spaces_fops);
	debugfs_create_file("device", 0444, hmirror_debugfs_dir, NULL,
			    &hmirror_device_fops);
	debugfs_create_file("users", 0444, hmirror_debugfs_dir, NULL,
			    &hmirror_users_fops);
}

void hmirror_debugfs_exit(void)
{
	debugfs_remove_recursive(hmirror_debugfs_dir);
	hmirror_debugfs_dir = NULL;
}
