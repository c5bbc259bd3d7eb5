/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * libhmirror: the client side of hmirrord.
 *
 * One struct hm_client is one connection.  It is not thread-safe: use one
 * per thread, or lock around it.  Every call returns 0 or a negative errno;
 * when the daemon dies or restarts, calls fail with -ENOTCONN (or
 * -ECONNRESET for dispatches that were in flight), never crash and never
 * raise SIGPIPE; free the client and connect again.
 */
#ifndef HMIRROR_CLIENT_H
#define HMIRROR_CLIENT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <hmirror/protocol.h>

#ifdef __cplusplus
extern "C" {
#endif

struct hm_client;
struct hm_space;
struct hm_space_handoff;

/* path NULL: $HMIRROR_SOCKET, else HM_PROTO_SOCKET */
int  hm_client_connect(const char *path, struct hm_client **ret);
void hm_client_free(struct hm_client *c);		/* NULL ok */

/* what the daemon said in the handshake */
const struct hm_msg_hello_reply *hm_client_info(const struct hm_client *c);

/* readable when a dispatch completion (or a daemon hang-up) is waiting;
 * call hm_client_process() then, or hm_client_wait() */
int  hm_client_fd(const struct hm_client *c);
/*
 * A pollable fd that becomes readable when a dispatch of this client
 * completed (its writes are home), and for nothing else: an eventfd of the
 * daemon's (HM_MSG_COMPLETION_FD, HM_FEAT_COMPLETION_FD), the same one on
 * every call, owned by the client (closed by hm_client_free()).  Unlike
 * hm_client_fd() it is not woken by other replies, it may be polled by
 * another thread or process (dup or pass it) while the client's thread
 * does other calls, and its value counts the completions.  When readable:
 * hm_client_process() (which reads it back to 0 first), then
 * hm_client_wait(ticket, 0, ...).  -EOPNOTSUPP from a daemon without it.
 */
int  hm_client_completion_fd(struct hm_client *c);
/*
 * A timeline semaphore of the daemon's device that the caller imports into
 * its own VkDevice on the same physical device (HM_MSG_TIMELINE,
 * HM_FEAT_TIMELINE).  device_uuid, driver_uuid: the caller's device's
 * VkPhysicalDeviceIDProperties, HM_PROTO_UUID_SIZE bytes each.  *ret_fd:
 * a new fd of it on every call, the caller's: import it into a semaphore
 * created VK_SEMAPHORE_TYPE_TIMELINE (vkImportSemaphoreFdKHR,
 * VK_EXTERNAL_SEMAPHORE_HANDLE_TYPE_OPAQUE_FD_BIT), which takes it, or
 * close it.  *ret_value (NULL ok): its value when the daemon made it.
 * Dispatch ticket's value is hm_client_timeline_value(); the semaphore
 * reaches it once that dispatch (and every one before it) is answered,
 * its device writes home.  -EOPNOTSUPP where the daemon's device cannot
 * export one, -EXDEV where the caller's device is another: wait on
 * hm_client_completion_fd() instead.
 */
int  hm_client_timeline(struct hm_client *c, const uint8_t *device_uuid,
			const uint8_t *driver_uuid, int *ret_fd, uint64_t *ret_value);
/* the value dispatch ticket reaches on that semaphore; between
 * hm_client_submit() and its hm_client_wait() (-ENOENT else).  Valid
 * whether or not the semaphore was asked for yet. */
int  hm_client_timeline_value(struct hm_client *c, uint64_t ticket, uint64_t *ret_value);
/* read whatever has arrived, without blocking; completed dispatches are
 * kept for hm_client_wait() */
int  hm_client_process(struct hm_client *c);

int  hm_client_ping(struct hm_client *c);

/* hand a space to the daemon (hm_space_export() + SCM_RIGHTS) */
int  hm_client_space_add(struct hm_client *c, struct hm_space *s,
			 uint64_t guest_addr, uint32_t *ret_space);
/* the same from an export the caller already made */
int  hm_client_space_add_handoff(struct hm_client *c,
				 const struct hm_space_handoff *h,
				 uint64_t guest_addr, uint32_t *ret_space);
int  hm_client_space_remove(struct hm_client *c, uint32_t space);

/*
 * The client's guest address space (HM_MSG_MAP, HM_MSG_UNMAP; engine.h,
 * hm_engine_map() says what mapping means).  A space added at
 * HM_PROTO_UNMAPPED is mapped nowhere until mapped here.  flags
 * HM_MAPF_REPLACE: a remap.  -EOPNOTSUPP from a daemon without
 * HM_FEAT_GUEST_MAP.
 */
int  hm_client_map(struct hm_client *c, uint32_t space, uint64_t offset, uint64_t size,
		   uint64_t guest_addr, uint32_t flags);
int  hm_client_unmap(struct hm_client *c, uint64_t guest_addr, uint64_t size);

int  hm_client_advise(struct hm_client *c, uint64_t guest_addr,
		      uint64_t size, uint32_t advice);
/* hm_engine_prefetch() on the client's engine in the daemon: returns once
 * what its next dispatch would upload is uploaded (0 or -errno; no count).
 * -EOPNOTSUPP without HM_FEAT_PREFETCH. */
int  hm_client_prefetch(struct hm_client *c);

/*
 * The client's own consumer of a space it handed to the daemon (watch.h
 * "Consumers", HM_MSG_CONSUMER): what its caches watch, by byte range of
 * the space; a harvest returns the chunks written since this consumer
 * last reported them, ascending, at most cap a call (more: call again).
 * The daemon's engine keeps its own records.  -EOPNOTSUPP from a daemon
 * without HM_FEAT_CONSUMER.
 */
int  hm_client_watch(struct hm_client *c, uint32_t space, uint64_t off, uint64_t len);
int  hm_client_unwatch(struct hm_client *c, uint32_t space, uint64_t off, uint64_t len);
int  hm_client_harvest(struct hm_client *c, uint32_t space, unsigned flags,
		       uint64_t *ret_chunks, size_t cap, size_t *ret_n, bool *ret_more);

/* a SPIR-V module already linked with hm_lookup; validated by the daemon */
int  hm_client_pipeline_new(struct hm_client *c, const uint32_t *spirv,
			    size_t nr_words, const char *entry,
			    uint32_t user_push_words, uint32_t *ret_pipeline);
/* the same with one tier only: flags HM_PIPEF_COMPACT_ONLY or
 * HM_PIPEF_SPECULATIVE_ONLY (protocol.h); 0: both tiers where the module has
 * load functions (HM_FEAT_TIERS) */
int  hm_client_pipeline_new_tiered(struct hm_client *c, const uint32_t *spirv,
				   size_t nr_words, const char *entry,
				   uint32_t user_push_words, uint32_t flags,
				   uint32_t *ret_pipeline);
int  hm_client_pipeline_free(struct hm_client *c, uint32_t pipeline);

struct hm_client_dispatch {
	uint32_t pipeline;
	uint32_t groups[3];
	uint32_t flags;			/* HM_DISPF_* */
	uint32_t nr_push;
	const uint32_t *push;
};

struct hm_client_result {
	int status;			/* 0 or -errno of the dispatch */
	uint64_t queued_ns, run_ns, dispatch_id;
};

/* queue a dispatch; *ret_ticket names it for hm_client_wait() */
int  hm_client_submit(struct hm_client *c, const struct hm_client_dispatch *d,
		      uint64_t *ret_ticket);
/* wait for a ticket: timeout_ms < 0 forever, 0 poll; -ETIMEDOUT when not
 * yet done; the dispatch's own status is in ret->status (and returned) */
int  hm_client_wait(struct hm_client *c, uint64_t ticket, int timeout_ms,
		    struct hm_client_result *ret);
/* submit + wait */
int  hm_client_dispatch(struct hm_client *c, const struct hm_client_dispatch *d,
			int timeout_ms, struct hm_client_result *ret);

struct hm_client_stats {
	uint32_t nr_daemon, nr_engine;
	uint64_t daemon[HM_DSTAT_NR];	/* enum hm_daemon_stat */
	uint64_t engine[HM_ESTAT_NR];	/* enum hm_engine_stat; this client's */
};
int  hm_client_stats(struct hm_client *c, struct hm_client_stats *ret);
const char *hm_daemon_stat_name(unsigned i);
const char *hm_engine_stat_name(unsigned i);

#ifdef __cplusplus
}
#endif
#endif /* HMIRROR_CLIENT_H */
