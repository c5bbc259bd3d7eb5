/* SPDX-License-Identifier: GPL-2.0 */
/* The module's counters over generic netlink (daemon/netlink.c); used by
 * hmirrorctl without the rest of the daemon. */
#ifndef HMIRROR_NETLINK_STATS_H
#define HMIRROR_NETLINK_STATS_H

#include <stdint.h>

struct hm_nl_stat {
	char name[32];
	uint64_t value;
};
/* -ENOENT: no "hmirror" family (module not loaded) */
int hm_nl_stats_get(struct hm_nl_stat *out, unsigned cap, unsigned *ret_n);

#endif
