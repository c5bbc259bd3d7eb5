/* SPDX-License-Identifier: GPL-2.0 */
/*
 * The daemon's state (state.c): options, the client list, its counters,
 * and the logger and clock every other file uses.  Below everything but
 * the loop and the device table: it calls nothing.
 */
#ifndef HMIRRORD_STATE_H
#define HMIRRORD_STATE_H

#include <stdbool.h>
#include <stdint.h>
#include <pthread.h>
#include <sys/types.h>

#include <hmirror/protocol.h>

#include "device.h"

struct hm_loop;
struct hm_loop_source;
struct hmd_client;

struct hmd_state {
	struct hm_loop *loop;
	int listen_fd;
	struct hm_loop_source *listen_src;
	struct hmd_client *clients;
	unsigned nr_clients;
	uint32_t next_client_id;
	uid_t allow_uid;		/* besides root and the daemon's euid */
	bool allow_any;			/* --allow-any: socket mode decides */
	bool isolate_all;		/* --isolate-all: check root's and our
					   own uid's modules too */
	bool shutting_down;
	uint64_t t_start;
	uint64_t dispatch_seq;
	uint64_t stats[HM_DSTAT_NR];
	struct hmd_device_choice dev;
	bool netlink;
	int verbose;
	uint64_t dispatch_timeout_ns;	/* per engine submission */
	uint64_t spin_ns;		/* device thread: look for the next job this
					   long before sleeping (--spin-us, 50) */
	uint64_t retired_estats[HM_ESTAT_NR];	/* of clients gone; estats lock */
};
extern struct hmd_state hmd;
/* retired_estats and each client's estats (written on the device thread,
 * read by STATS on the loop thread) */
extern pthread_mutex_t hmd_estats_lock;

uint64_t hmd_now_ns(void);
void hmd_log(int level, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));
#define LOG_ERR_ 3
#define LOG_WARN_ 4
#define LOG_INFO_ 6
#define LOG_DEBUG_ 7

#endif
