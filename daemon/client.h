/* SPDX-License-Identifier: GPL-2.0 */
/*
 * A client (client.c): one connection, its credentials and its handle
 * tables of spaces and pipelines, references and the raw send.  What a
 * client's messages do is protocol.c's; what its engine does is
 * engine_host.c's.
 */
#ifndef HMIRRORD_CLIENT_H
#define HMIRRORD_CLIENT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <pthread.h>
#include <sys/types.h>

#include <hmirror/protocol.h>

#include "loop.h"
#include "worker.h"

struct hm_consumer;
struct hm_engine;
struct hm_space;
struct hmd_module;
struct hmd_prebuilt;
struct hmd_timeline;

#define HMD_MAX_CLIENTS		64
#define HMD_MAX_SPACES		16
#define HMD_MAX_PIPELINES	64
/* PIPELINE_NEWs of one client validated or compiled at once (each holds a
 * copy of its words until validated); more are refused with -EBUSY */
#define HMD_MAX_COMPILES	4
#define HMD_MAX_INFLIGHT	64
/* pipelines a client freed, kept built in its engine for the next
 * PIPELINE_NEW of the same module: a driver may keep memory of every
 * pipeline it ever compiled (lavapipe: 19 KiB), so the same module is
 * never compiled twice for one client */
#define HMD_MAX_PARKED		64
#define HMD_MAX_SPACE_BYTES	(64ull << 30)
/* workgroups a dispatch (x * y * z): the protocol's 65535^3 would keep a
 * CPU device busy for days with an empty program */
#define HMD_MAX_GROUPS		(1u << 24)

struct hmd_space {
	bool used, removing;
	bool adding;		/* SPACE_ADD not answered yet: no handle */
	bool in_engine;		/* engine_id names it (ids start at 0) */
	uint64_t guest_addr, size;
	uint32_t chunk_shift;
	uint32_t engine_id;
	struct hm_space *space;
	struct hm_consumer *consumer;	/* the client's own (HM_MSG_CONSUMER), or NULL */
};
struct hmd_pipeline {
	bool used, removing;
	struct hmd_module *mod;		/* NULL while its compile runs */
	struct hmd_prebuilt *prebuilt;	/* built by the compile thread, not
					 * yet adopted by the client's engine */
	bool engine_ready;
	uint32_t engine_id;
	uint32_t tier_flags;		/* HM_PIPEF_*_ONLY asked for */
};

struct hmd_client {
	unsigned refs;
	uint32_t id;
	int fd;
	int efd;			/* HM_MSG_COMPLETION_FD's eventfd, -1: none
					 * (set on the loop thread, read by the
					 * device thread: atomic) */
	pid_t pid;
	uid_t uid;
	gid_t gid;
	bool hello, dead;
	/* device thread only: a dispatch of this client ran past its time
	 * budget; what it queued behind that one is dropped, not run */
	bool over_budget;
	struct hm_loop_source *src;
	struct hm_engine *engine;	/* lazily */
	struct hmd_space spaces[HMD_MAX_SPACES];
	struct hmd_pipeline pipes[HMD_MAX_PIPELINES];
	unsigned nr_spaces, nr_pipes, inflight;
	unsigned nr_compiling;		/* loop thread: PIPELINE_NEWs queued */
	uint64_t space_bytes;
	unsigned bad_msgs;		/* malformed messages, this connection */
	/* freed pipelines still built in the engine: written on the device
	 * thread, read by the compile thread, under park_lock */
	pthread_mutex_t park_lock;
	struct hmd_parked {
		struct hmd_module *mod;	/* referenced */
		uint32_t engine_id;
	} parked[HMD_MAX_PARKED];
	unsigned nr_parked;
	/* the engine's counters after its last job: written by the device
	 * thread, read by STATS on the loop thread, under hmd_estats_lock */
	uint64_t estats[HM_ESTAT_NR];
	bool has_estats;
	bool estats_retired;		/* counted in retired_estats (disconnected) */
	/* HM_MSG_TIMELINE (protocol.h says what a dispatch's value is) */
	uint64_t tl_requests;		/* loop thread: the last dispatch's value */
	uint64_t tl_skipped;		/* loop thread: the highest value of a dispatch
					 * that never ran, reached once none of the
					 * client's dispatches is in flight */
	pthread_mutex_t tl_lock;	/* protects tl_value and tl (device and loop
					 * threads advance it) */
	uint64_t tl_value;		/* reached: dispatches up to it answered */
	struct hmd_timeline *tl;	/* the exported semaphore, or NULL */
	struct hmd_client *next;
};

void hmd_client_get(struct hmd_client *c);
void hmd_client_put(struct hmd_client *c);
/* accept one connection of the listening socket lfd; readable runs on the
 * loop thread for each of its messages (protocol.c's handler) */
int  hmd_client_accept(int lfd, hm_loop_cb readable);
/* send one reply; any thread; never disconnects (-ENOTCONN once dead) */
int  hmd_client_send_raw(struct hmd_client *c, uint16_t type, uint32_t seq,
			 int status, const void *payload, size_t len);
/* the same with fd passed along (SCM_RIGHTS); fd < 0: none */
int  hmd_client_send_raw_fd(struct hmd_client *c, uint16_t type, uint32_t seq,
			    int status, const void *payload, size_t len, int fd);

/* the client a job of a client was queued for */
static inline struct hmd_client *hmd_job_client(const struct hmd_job *j)
{
	return j->owner;
}

#endif
