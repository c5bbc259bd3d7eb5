/* SPDX-License-Identifier: GPL-2.0 */
/*
 * The module's "hmirror" generic netlink family (netlink.c): its events
 * for the daemon's loop (hmirrorctl's counters: netlink_stats.h).
 */
#ifndef HMIRRORD_NETLINK_H
#define HMIRRORD_NETLINK_H

#include <stdint.h>

struct hmd_netlink;
typedef void (*hmd_nl_event_cb)(uint32_t cmd, uint64_t space, uint64_t chunk,
				void *data);
int  hmd_netlink_new(hmd_nl_event_cb cb, void *data, struct hmd_netlink **ret);
void hmd_netlink_free(struct hmd_netlink *n);
int  hmd_netlink_fd(const struct hmd_netlink *n);
int  hmd_netlink_process(struct hmd_netlink *n);

#endif
