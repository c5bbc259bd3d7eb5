/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * hmirror daemon protocol (hmirrord <-> libhmirror client), version 1.
 *
 * Transport: an AF_UNIX SOCK_SEQPACKET socket; one message = one datagram,
 * at most HM_PROTO_MAX_MSG bytes, header included.  Spaces and large SPIR-V
 * modules travel as file descriptors (SCM_RIGHTS) beside their message.
 *
 * Every integer is little-endian; every struct has fixed size, explicit
 * padding (which must be zero) and a size that is a multiple of 8.
 * A message is: struct hm_msg_hdr, then a payload of exactly
 * hdr.len - sizeof(hdr) bytes, whose layout is fixed by hdr.type.
 *
 * Requests carry a client-chosen seq; the daemon answers each request with
 * exactly one reply of the same type and seq, HM_MSGF_REPLY set, status 0
 * or a negative errno.  A message the daemon cannot parse at all is answered
 * by HM_MSG_ERROR with the offending seq (0 when unreadable).  Replies may
 * come out of order (dispatch completions come when the device is done).
 * See daemon.rst (hmirror(7) says where the documentation is installed).
 */
#ifndef HMIRROR_PROTOCOL_H
#define HMIRROR_PROTOCOL_H

#include <endian.h>
#include <stdint.h>
#include <linux/hmirror_table.h>
#include <hmirror/advice.h>

#define HM_PROTO_MAGIC		0x524d4d48u	/* "HMMR" */
#define HM_PROTO_VERSION	1u
#define HM_PROTO_MAX_MSG	65536u		/* bytes, header included */
#define HM_PROTO_MAX_FDS	4u		/* fds beside one message */
/* user push words a pipeline may declare: the engine's limit (20,
 * hmirror_table.h); PIPELINE_NEW beyond it is refused with -E2BIG, and
 * HELLO's reply says it (max_push_words) */
#define HM_PROTO_MAX_PUSH	HM_USER_PUSH_WORDS_MAX
#define HM_PROTO_PUSH_SLOTS	32u		/* push words a DISPATCH message holds */
#define HM_PROTO_ENTRY_MAX	64u		/* entry point name, NUL included */
#define HM_PROTO_BLOB_MAX	64u		/* == sizeof(hm_space_handoff.blob) */
#define HM_PROTO_SOCKET		"/run/hmirror/hmirrord.sock"
#define HM_PROTO_SOCKET_ENV	"HMIRROR_SOCKET"

enum hm_msg_type {
	HM_MSG_INVALID = 0,
	HM_MSG_HELLO = 1,		/* must be first; version handshake */
	HM_MSG_PING = 2,
	HM_MSG_SPACE_ADD = 3,		/* + the space's fds */
	HM_MSG_SPACE_REMOVE = 4,
	HM_MSG_ADVISE = 5,
	HM_MSG_PIPELINE_NEW = 6,	/* SPIR-V inline, or + one sealed memfd */
	HM_MSG_PIPELINE_FREE = 7,
	HM_MSG_DISPATCH = 8,		/* reply comes when writes are home */
	HM_MSG_STATS = 9,
	HM_MSG_ERROR = 10,		/* daemon -> client only */
	HM_MSG_CONSUMER = 11,		/* the client's own consumer of a space */
	HM_MSG_COMPLETION_FD = 12,	/* reply + an eventfd (HM_FEAT_COMPLETION_FD) */
	HM_MSG_MAP = 13,		/* a range of a space at a guest address (HM_FEAT_GUEST_MAP) */
	HM_MSG_UNMAP = 14,		/* a guest range (HM_FEAT_GUEST_MAP) */
	HM_MSG_PREFETCH = 15,		/* empty: upload what is wanted now (HM_FEAT_PREFETCH) */
	HM_MSG_TIMELINE = 16,		/* reply + a timeline semaphore's opaque fd (HM_FEAT_TIMELINE) */
	HM_MSG_NR
};

#define HM_MSGF_REPLY		0x1u
#define HM_MSGF_ALL		HM_MSGF_REPLY

struct hm_msg_hdr {
	uint32_t magic;		/* HM_PROTO_MAGIC */
	uint16_t type;		/* enum hm_msg_type */
	uint16_t flags;		/* HM_MSGF_* */
	uint32_t seq;		/* request id chosen by the client, echoed */
	uint32_t len;		/* bytes of the whole message */
	int32_t status;		/* replies: 0 or -errno; requests: 0 */
	uint32_t pad;		/* 0 */
};

/* HM_MSG_HELLO */
#define HM_FEAT_MEMFD_SPIRV	(1ull << 0)	/* PIPELINE_NEW by memfd */
#define HM_FEAT_ENGINE		(1ull << 1)	/* dispatches run (else -ENOSYS) */
#define HM_FEAT_NETLINK		(1ull << 2)	/* module events received */
/* push blocks carry the table's and the mirror window's words
 * (HM_PUSH_LAYOUT_VERSION 2, HM_DEVICE_TABLE_PUSH_WORDS 12).  A client whose
 * modules expect another layout does not announce it, and its HELLO is
 * refused with -EPROTONOSUPPORT: no module runs with the wrong words. */
#define HM_FEAT_PUSH_LAYOUT2	(1ull << 3)
/* PIPELINE_NEW builds the two tiers of a module with load functions
 * (engine.h, "Two tiers") and honours HM_PIPEF_*_ONLY */
#define HM_FEAT_TIERS		(1ull << 4)
/* HM_MSG_COMPLETION_FD: the reply (empty payload) carries one eventfd
 * (SCM_RIGHTS), the same one for every such request of a connection.  The
 * daemon adds 1 to it after each of this client's DISPATCH replies is on
 * the socket (the dispatch's writes are home then), and only then: a
 * poller of it wakes for completions, never for other replies.  Whoever
 * holds it may read it (the count since the last read) and then read the
 * replies from the socket. */
/* HM_MSG_CONSUMER */
#define HM_FEAT_CONSUMER	(1ull << 5)
#define HM_FEAT_COMPLETION_FD	(1ull << 6)
/* HM_MSG_MAP, HM_MSG_UNMAP, and SPACE_ADD at HM_PROTO_UNMAPPED: the
 * client's guest address space (engine.h, hm_engine_map()) */
#define HM_FEAT_GUEST_MAP	(1ull << 7)
/* HM_MSG_PREFETCH: the client's engine uploads now what its next dispatch
 * would (engine.h, hm_engine_prefetch()); the reply comes once it did */
#define HM_FEAT_PREFETCH	(1ull << 8)
/* HM_MSG_TIMELINE: the daemon's device exports timeline semaphores as
 * opaque fds (VK_KHR_external_semaphore_fd); offered only where it does */
#define HM_FEAT_TIMELINE	(1ull << 9)
#define HM_FEAT_ALL		(HM_FEAT_MEMFD_SPIRV | HM_FEAT_ENGINE | HM_FEAT_NETLINK | \
				 HM_FEAT_PUSH_LAYOUT2 | HM_FEAT_TIMELINE | HM_FEAT_TIERS | \
				 HM_FEAT_CONSUMER | HM_FEAT_COMPLETION_FD | HM_FEAT_GUEST_MAP | \
				 HM_FEAT_PREFETCH)

struct hm_msg_hello {
	uint32_t version_min;
	uint32_t version_max;
	uint64_t features;	/* what the client understands */
};

struct hm_msg_hello_reply {
	uint32_t version;	/* chosen, within [min, max] */
	uint32_t client_id;
	uint64_t features;	/* what this daemon offers */
	uint32_t max_msg;
	uint32_t max_spaces;
	uint32_t max_pipelines;
	uint32_t max_inflight;
	uint64_t max_space_bytes;	/* per client, all spaces */
	uint32_t max_spirv_words;
	uint32_t daemon_pid;
	char device[64];	/* NUL-terminated device name */
	uint32_t max_push_words;	/* user push words a pipeline (HM_PROTO_MAX_PUSH) */
	uint32_t pad;
};

/* HM_MSG_SPACE_ADD: nr_fds fds ride along (SCM_RIGHTS) */
#define HM_PROTO_UNMAPPED	UINT64_MAX	/* guest_addr: map nothing (HM_FEAT_GUEST_MAP) */
struct hm_msg_space_add {
	uint64_t guest_addr;	/* guest address all of the space is mapped at */
	uint32_t nr_fds;	/* must equal the fds received */
	uint32_t blob_len;	/* <= HM_PROTO_BLOB_MAX */
	uint8_t blob[HM_PROTO_BLOB_MAX];	/* hm_space_export()'s blob */
};

struct hm_msg_space_add_reply {
	uint32_t space;		/* handle, valid for this client only */
	uint32_t chunk_shift;
	uint64_t size;
};

/* HM_MSG_SPACE_REMOVE, HM_MSG_PIPELINE_FREE */
struct hm_msg_handle {
	uint32_t handle;
	uint32_t pad;
};

/*
 * HM_MSG_MAP: bytes [offset, offset + size) of space `space` at guest
 * [guest_addr, guest_addr + size) of the client's engine; HM_MAPF_REPLACE
 * unmaps what is there first (a remap).  offset, size and guest_addr
 * multiples of HM_PROTO_MAP_ALIGN, size > 0, the range inside the space,
 * no wrap, pad 0, known flags: else -EINVAL.  The engine's refusals:
 * -EEXIST (mapped there, no REPLACE), -EMFILE (HM_PROTO_MAX_MAPPINGS),
 * -E2BIG (HM_PROTO_MAX_MAPPED_BYTES mapped).  Nothing changes on an error.
 * HM_MSG_UNMAP: every mapped chunk of [guest_addr, guest_addr + size)
 * (aligned the same); -ENOENT where nothing there is mapped.
 */
#define HM_PROTO_MAP_ALIGN	(1ull << 16)	/* the daemon engines' chunk */
#define HM_PROTO_MAX_MAPPINGS	65536u		/* per client */
#define HM_PROTO_MAX_MAPPED_BYTES (128ull << 30)	/* per client, aliases counted */
#define HM_MAPF_REPLACE		0x1u
#define HM_MAPF_ALL		HM_MAPF_REPLACE
struct hm_msg_map {
	uint32_t space;		/* handle */
	uint32_t flags;		/* HM_MAPF_* */
	uint64_t offset;
	uint64_t size;
	uint64_t guest_addr;
};

struct hm_msg_unmap {
	uint64_t guest_addr;
	uint64_t size;
};

/* HM_MSG_ADVISE */
struct hm_msg_advise {
	uint64_t guest_addr;
	uint64_t size;
	uint32_t advice;	/* enum hm_advice (advice.h) */
	uint32_t pad;
};

/*
 * HM_MSG_CONSUMER: a consumer of one of the client's spaces that the
 * daemon keeps for the client (watch.h "Consumers"), so that the
 * emulator's own caches see every write its engine sees and take none of
 * its records (the client's hm_space_harvest() of a handed-over space is
 * -EBUSY).  Created by the first WATCH, freed with the space.
 *   HM_CONS_WATCH, HM_CONS_UNWATCH: [off, off + len) of the space, every
 *     chunk it touches; cap and flags 0.
 *   HM_CONS_HARVEST: reply = struct hm_msg_consumer_reply, then nr chunk
 *     numbers (u64), ascending; at most cap (<= HM_PROTO_MAX_HARVEST);
 *     flags HM_HARVEST_UNWATCH (watch.h) takes; off and len 0.
 * Errors: ENOENT (no such space), EINVAL (op, flags, pad, cap, len 0),
 * ERANGE (outside the space), ENOSPC (consumers of the space).
 */
#define HM_CONS_WATCH		1u
#define HM_CONS_UNWATCH		2u
#define HM_CONS_HARVEST		3u
#define HM_PROTO_MAX_HARVEST	8000u	/* chunks in one reply */

struct hm_msg_consumer {
	uint32_t space;		/* handle */
	uint32_t op;		/* HM_CONS_* */
	uint32_t flags;
	uint32_t cap;
	uint64_t off;
	uint64_t len;
};

struct hm_msg_consumer_reply {
	uint32_t nr;
	uint32_t more;		/* 1: more chunks are pending */
	/* uint64_t chunks[nr]; */
};

/* HM_MSG_PIPELINE_NEW: payload = this struct, then nr_words SPIR-V words
 * inline, unless HM_PIPEF_MEMFD: then one sealed memfd (F_SEAL_WRITE |
 * F_SEAL_SHRINK | F_SEAL_GROW) holding exactly nr_words words rides along.
 * The reply comes once the module is validated and compiled; a client
 * with 4 such requests unanswered gets -EBUSY for a fifth. */
#define HM_PIPEF_MEMFD		0x1u
/* one tier only (both set: -EINVAL); without either, two tiers: the reply
 * comes with the compact pipeline built, the speculative one follows and
 * is switched to at a dispatch boundary */
#define HM_PIPEF_COMPACT_ONLY	0x2u
#define HM_PIPEF_SPECULATIVE_ONLY 0x4u
#define HM_PIPEF_ALL		(HM_PIPEF_MEMFD | HM_PIPEF_COMPACT_ONLY | HM_PIPEF_SPECULATIVE_ONLY)

struct hm_msg_pipeline_new {
	uint32_t nr_words;
	uint32_t user_push_words;	/* <= HM_PROTO_MAX_PUSH */
	uint32_t flags;			/* HM_PIPEF_* */
	uint32_t pad;
	char entry[HM_PROTO_ENTRY_MAX];	/* NUL-terminated, NUL-padded */
};

struct hm_msg_pipeline_new_reply {
	uint32_t pipeline;	/* handle, valid for this client only */
	uint32_t cached;	/* 1: the module was validated before */
};

/* HM_MSG_DISPATCH */
#define HM_DISPF_SHARED_WITH_CPU	0x1u	/* rule 5: read home pages */
#define HM_DISPF_ALL			HM_DISPF_SHARED_WITH_CPU

struct hm_msg_dispatch {
	uint32_t pipeline;
	uint32_t groups[3];
	uint32_t flags;		/* HM_DISPF_* */
	uint32_t nr_push;	/* == the pipeline's user_push_words */
	uint32_t push[HM_PROTO_PUSH_SLOTS];	/* past nr_push: 0 */
};

struct hm_msg_dispatch_reply {
	uint64_t queued_ns;	/* received -> started on the device thread */
	uint64_t run_ns;	/* started -> writes home */
	uint64_t dispatch_id;	/* daemon-wide sequence number */
};

/*
 * HM_MSG_TIMELINE: a timeline semaphore of the daemon's device, exported as
 * VK_EXTERNAL_SEMAPHORE_HANDLE_TYPE_OPAQUE_FD_BIT and passed beside the
 * reply (SCM_RIGHTS), for the client to import into its own VkDevice on the
 * same physical device.  One a connection.
 *
 * Values: the Nth request of this connection answered by a DISPATCH reply
 * (refused ones included, ERROR-answered ones not) is dispatch N, counted
 * from the connection's start.  The semaphore reaches N once dispatches
 * 1..N are all answered and each that ran has its device writes home (the
 * point its reply and the completion fd report); a dispatch that failed or
 * never ran reaches its value too, in order: its reply says how it ended.
 * The daemon signals from the host; the value never goes back.
 *
 * device_uuid, driver_uuid: VkPhysicalDeviceIDProperties of the client's
 * device; handle_type VK_EXTERNAL_SEMAPHORE_HANDLE_TYPE_OPAQUE_FD_BIT (1).
 * Errors, nothing changed by any: -EBADMSG (size), -EINVAL (flags, a
 * handle_type of no single bit), -EOPNOTSUPP (another handle type, no
 * engine, or a device that cannot export), -EXDEV (not the daemon's
 * device), -EALREADY (this connection has its semaphore).
 */
#define HM_TIMELINE_OPAQUE_FD	0x1u	/* == VK_EXTERNAL_SEMAPHORE_HANDLE_TYPE_OPAQUE_FD_BIT */
#define HM_PROTO_UUID_SIZE	16u	/* == VK_UUID_SIZE */
struct hm_msg_timeline {
	uint8_t device_uuid[HM_PROTO_UUID_SIZE];
	uint8_t driver_uuid[HM_PROTO_UUID_SIZE];
	uint32_t handle_type;	/* HM_TIMELINE_OPAQUE_FD */
	uint32_t flags;		/* 0 */
};

struct hm_msg_timeline_reply {
	uint64_t value;		/* the semaphore's value when it was made */
	uint64_t dispatches;	/* dispatches of this connection before this request */
};

/* HM_MSG_STATS: reply = header of counts, then nr_daemon + nr_engine u64 */
enum hm_daemon_stat {
	HM_DSTAT_CLIENTS,		/* connected now (a client that hung up is not) */
	HM_DSTAT_CLIENTS_TOTAL,
	HM_DSTAT_CLIENTS_REFUSED,	/* peer credentials refused */
	HM_DSTAT_MSGS,
	HM_DSTAT_BAD_MSGS,		/* malformed messages (not errors a request earned) */
	HM_DSTAT_SPACES,		/* registered now */
	HM_DSTAT_PIPELINES,		/* client handles now */
	HM_DSTAT_VALIDATIONS,		/* SPIR-V modules validated */
	HM_DSTAT_VALIDATION_FAILS,
	HM_DSTAT_CACHE_HITS,		/* pipeline cache */
	HM_DSTAT_DISPATCHES,		/* completed */
	HM_DSTAT_DISPATCH_FAILS,
	HM_DSTAT_INFLIGHT,		/* queued or running now */
	HM_DSTAT_NL_EVENTS,		/* module events received */
	HM_DSTAT_NL_DROPS,		/* mirrors dropped early on an event */
	HM_DSTAT_UPTIME_NS,
	HM_DSTAT_RUNNING,		/* dispatches on the device now (0/1) */
	HM_DSTAT_VK_MESSAGES,		/* validation layer messages (tests: 0) */
	/* appended: clients gone (not in CLIENTS, their spaces and pipelines
	 * not in SPACES, PIPELINES) whose teardown still holds their engine,
	 * fds and memory, behind their last jobs */
	HM_DSTAT_CLIENTS_CLOSING,
	HM_DSTAT_NR
};

enum hm_engine_stat {
	HM_ESTAT_DISPATCHES,
	HM_ESTAT_CHUNKS_MIRRORED,
	HM_ESTAT_GUARD_TRIPS,
	HM_ESTAT_MIRRORS_DROPPED,
	HM_ESTAT_BYTES_UPLOADED,
	HM_ESTAT_BYTES_COPIED_HOME,
	/* appended: a reply's nr_engine says how many a daemon sends */
	HM_ESTAT_TIER_SWITCHES,		/* pipelines switched to tier two */
	HM_ESTAT_TIER_ONE_SKIPPED,	/* built speculative at once */
	HM_ESTAT_UPLOADS,		/* chunks copied home -> mirror */
	HM_ESTAT_UPLOADS_DISCARDED,		/* written during their copy: left home */
	HM_ESTAT_MIRRORS_EVICTED,		/* over budget, for a chunk of a higher class */
	HM_ESTAT_THRASH_BACKOFFS,		/* chunks left home a while: dropped too often */
	HM_ESTAT_BUDGET_REFUSALS,		/* wanted chunks left home: budget full */
	HM_ESTAT_REFRESHES,		/* written mirrors copied again in place */
	HM_ESTAT_MARKS_SCANNED,		/* marked slots seen after dispatches */
	HM_ESTAT_CHUNKS_COPIED_HOME,		/* marked mirrored chunks diffed */
	HM_ESTAT_NS_HARVEST,		/* engine phase times, ns summed over dispatches */
	HM_ESTAT_NS_UPLOAD,
	HM_ESTAT_NS_UPLOAD_COPY,
	HM_ESTAT_NS_DISPATCH,
	HM_ESTAT_NS_DISPATCH_GPU,
	HM_ESTAT_NS_MARKS,
	HM_ESTAT_NS_COPY_BACK,
	HM_ESTAT_NS_TOTAL,
	/* appended: the rest of struct hm_engine_stats (engine.h says what
	 * each is); "now" marks a gauge, the rest count up */
	HM_ESTAT_SHARED_DISPATCHES,
	HM_ESTAT_MIRROR_BYTES,		/* now */
	HM_ESTAT_MIRROR_BUDGET,		/* now */
	HM_ESTAT_UPLOAD_REGIONS,
	HM_ESTAT_UPLOAD_RETRIES,
	HM_ESTAT_MIRRORS_DROPPED_EARLY,
	HM_ESTAT_EARLY_HARVESTS,
	HM_ESTAT_MIRRORS_DROPPED_SHARED,
	HM_ESTAT_ALLOC_FAILURES,
	HM_ESTAT_SINK_MARKS,
	HM_ESTAT_IMPORT_PIECES,		/* now */
	HM_ESTAT_NS_UPLOAD_SELECT,
	HM_ESTAT_NS_UPLOAD_GENS,
	HM_ESTAT_NS_UPLOAD_PUBLISH,
	HM_ESTAT_NS_WINDOW_SYNC,
	HM_ESTAT_WINDOW_BYTES,		/* now */
	HM_ESTAT_WINDOW_SYNCS,
	HM_ESTAT_WINDOW_COPIES,
	HM_ESTAT_WINDOW_FILLS,
	HM_ESTAT_WINDOW_REFUSALS,
	HM_ESTAT_WINDOW_UNCOVERED_BYTES,	/* now */
	HM_ESTAT_WINDOW_BINDS,
	HM_ESTAT_DISPATCHES_RECORDED,
	HM_ESTAT_DISPATCHES_SUBMITTED,
	HM_ESTAT_PREFETCHES,
	HM_ESTAT_NS_PREFETCH,
	HM_ESTAT_IMPORT_BYTES,		/* now */
	HM_ESTAT_IMPORT_FAILURES,
	HM_ESTAT_NS_IMPORT,
	HM_ESTAT_NS_UPLOAD_CHECK,
	HM_ESTAT_AHEAD_PASSES,		/* dispatches with uploads beside them */
	HM_ESTAT_AHEAD_UPLOADS,		/* mirrors those published (also in UPLOADS) */
	HM_ESTAT_AHEAD_DISCARDED,		/* their copies written meanwhile */
	HM_ESTAT_NS_AHEAD,
	HM_ESTAT_NS_AHEAD_WAIT,		/* the late start's waits, before the passes */
	HM_ESTAT_NS_AHEAD_HARVEST,		/* of NS_AHEAD: the passes' harvests */
	HM_ESTAT_NS_AHEAD_COPY,		/* of NS_AHEAD: their copies */
	HM_ESTAT_NS_AHEAD_CHECK,		/* of NS_AHEAD: their checks after the copies */
	HM_ESTAT_NS_AHEAD_SELECT,		/* of NS_AHEAD: picking their candidates */
	HM_ESTAT_NS_AHEAD_GENS,		/* of NS_AHEAD: arming, noting, the checks */
	HM_ESTAT_NS_AHEAD_PUBLISH,		/* of NS_AHEAD: the clean copies listed ready */
	HM_ESTAT_NS_AHEAD_FINISH,		/* of NS_AHEAD: after the dispatch, published */
	HM_ESTAT_NS_WINDOW_PLAN,		/* of NS_WINDOW_SYNC: planning, the table repointed */
	HM_ESTAT_NS_WINDOW_RECORD,		/* of NS_WINDOW_SYNC: recording the copies and fills */
	HM_ESTAT_NR
};

/* the gauges among them: of clients gone, none is kept */
#define HM_ESTAT_IS_GAUGE(k)						\
	((k) == HM_ESTAT_CHUNKS_MIRRORED || (k) == HM_ESTAT_MIRROR_BYTES ||	\
	 (k) == HM_ESTAT_MIRROR_BUDGET || (k) == HM_ESTAT_IMPORT_PIECES ||	\
	 (k) == HM_ESTAT_IMPORT_BYTES || (k) == HM_ESTAT_WINDOW_BYTES ||	\
	 (k) == HM_ESTAT_WINDOW_UNCOVERED_BYTES)

struct hm_msg_stats_reply {
	uint32_t nr_daemon;	/* counters that follow, daemon first */
	uint32_t nr_engine;	/* this client's engine (0 if none) */
	/* uint64_t values[nr_daemon + nr_engine]; */
};

/* HM_MSG_ERROR: status says why; this says what */
struct hm_msg_error {
	uint32_t bad_type;
	uint32_t bad_len;
};

/* little-endian helpers; the protocol is LE on every host */
static inline uint16_t hm_le16(uint16_t v) { return htole16(v); }
static inline uint32_t hm_le32(uint32_t v) { return htole32(v); }
static inline uint64_t hm_le64(uint64_t v) { return htole64(v); }
#define hm_from_le16(v) le16toh(v)
#define hm_from_le32(v) le32toh(v)
#define hm_from_le64(v) le64toh(v)

_Static_assert(sizeof(struct hm_msg_hdr) == 24, "hdr");
_Static_assert(sizeof(struct hm_msg_hello) % 8 == 0, "hello");
_Static_assert(sizeof(struct hm_msg_hello_reply) % 8 == 0, "hello reply");
_Static_assert(sizeof(struct hm_msg_space_add) % 8 == 0, "space add");
_Static_assert(sizeof(struct hm_msg_pipeline_new) % 8 == 0, "pipeline new");
_Static_assert(sizeof(struct hm_msg_dispatch) % 8 == 0, "dispatch");
_Static_assert(sizeof(struct hm_msg_dispatch_reply) % 8 == 0, "dispatch reply");
_Static_assert(sizeof(struct hm_msg_timeline) % 8 == 0, "timeline");
_Static_assert(sizeof(struct hm_msg_timeline_reply) % 8 == 0, "timeline reply");

#endif /* HMIRROR_PROTOCOL_H */
