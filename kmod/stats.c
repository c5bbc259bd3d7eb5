// SPDX-License-Identifier: GPL-2.0
/*
 * hmirror counters: the global ones and every counter's name (one table,
 * for debugfs and netlink), and the registry of live spaces through which
 * the per-space ones are read.  debugfs is for people and tests: generic
 * netlink is the ABI.
 */
#define pr_fmt(fmt) KBUILD_MODNAME ": " fmt

#include <linux/cpumask.h>
#include <linux/percpu.h>

#include "hmirror.h"

DEFINE_PER_CPU(struct hmirror_stats, hmirror_global_stats);

/* protects hmirror_spaces, the owners and the space ids (space.c) */
DEFINE_MUTEX(hmirror_lock);
LIST_HEAD(hmirror_spaces);

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
	[HMIRROR_STAT_PINS] = "pins",
	[HMIRROR_STAT_PINNED_BYTES] = "pinned_bytes",
	[HMIRROR_STAT_PINS_CREATED] = "pins_created",
	[HMIRROR_STAT_PINS_FAILED] = "pins_failed",
	[HMIRROR_STAT_PIN_RETRIES] = "pin_retries",
	[HMIRROR_STAT_INVAL_UNMAP] = "inval_unmap",
	[HMIRROR_STAT_INVAL_CLEAR] = "inval_clear",
	[HMIRROR_STAT_INVAL_RELEASE] = "inval_release",
	[HMIRROR_STAT_INVAL_MIGRATE] = "inval_migrate",
	[HMIRROR_STAT_INVAL_EXCLUSIVE] = "inval_exclusive",
	[HMIRROR_STAT_INVAL_OTHER] = "inval_other",
	[HMIRROR_STAT_INVAL_IGNORED] = "inval_ignored",
	[HMIRROR_STAT_DMABUFS] = "dmabufs",
	[HMIRROR_STAT_DMABUFS_EXPORTED] = "dmabufs_exported",
	[HMIRROR_STAT_DMABUF_BYTES] = "dmabuf_bytes",
	[HMIRROR_STAT_DMABUF_MAPS] = "dmabuf_maps",
	[HMIRROR_STAT_EVENTS_SENT] = "events_sent",
	[HMIRROR_STAT_EVENTS_DROPPED] = "events_dropped",
	[HMIRROR_STAT_CHUNKS_LOST] = "chunks_lost",
};

s64 hmirror_stat_read(struct hmirror_stats __percpu *st, enum hmirror_stat i)
{
	u64 sum = 0;
	int cpu;

	for_each_possible_cpu(cpu)
		sum += per_cpu_ptr(st, cpu)->v[i];
	return (s64)sum;
}
