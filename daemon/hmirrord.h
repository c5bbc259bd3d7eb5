/* SPDX-License-Identifier: GPL-2.0 */
/* hmirrord internals: one io_uring loop, clients, the device thread. */
#ifndef HMIRRORD_H
#define HMIRRORD_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <pthread.h>
#include <sys/types.h>

#include <hmirror/protocol.h>

struct hm_consumer;
struct hm_engine;
struct hm_space;
struct hmd_prebuilt;

/* ---- loop.c: one io_uring, event sources (fd, callback, data, destroy) */
struct hm_loop;
struct hm_loop_source;
typedef void (*hm_loop_cb)(struct hm_loop_source *src, uint32_t revents,
			   void *data);

int  hm_loop_new(unsigned entries, struct hm_loop **ret);
void hm_loop_free(struct hm_loop *l);
/* poll fd for events (POLLIN, ...); cb runs on the loop thread; destroy(data)
 * runs once the ring holds no reference to the source any more */
int  hm_loop_add(struct hm_loop *l, int fd, uint32_t events, hm_loop_cb cb,
		 void *data, void (*destroy)(void *data),
		 struct hm_loop_source **ret);
/* safe from anywhere on the loop thread, including src's own callback */
void hm_loop_remove(struct hm_loop_source *src);
int  hm_loop_source_fd(const struct hm_loop_source *src);
int  hm_loop_run(struct hm_loop *l);		/* until hm_loop_quit() */
void hm_loop_quit(struct hm_loop *l, int code);
unsigned hm_loop_nr_sources(const struct hm_loop *l);

/* ---- validate.c: SPIR-V validation and the module cache */
struct hmd_module {
	uint64_t hash;
	uint32_t *words;
	size_t nr_words;
	char entry[HM_PROTO_ENTRY_MAX];
	uint32_t user_push_words;
	bool isolated;		/* passed hmd_isolation_check() */
	unsigned refs;
	bool spec_built;		/* its speculative form was compiled (atomic) */
	struct hmd_module *next;
};
int  hmd_validate_init(void);
void hmd_validate_finish(void);
/* validate (or find in the cache) and return a referenced module; words are
 * copied.  *ret_cached = true when found.  *ret_msg gets SPIRV-Tools' text */
int  hmd_module_get(const uint32_t *words, size_t nr_words, const char *entry,
		    uint32_t user_push_words, struct hmd_module **ret,
		    bool *ret_cached, char *ret_msg, size_t msg_cap);
void hmd_module_put(struct hmd_module *m);
void hmd_module_ref(struct hmd_module *m);	/* one more reference */
int  hmd_spirv_check(const uint32_t *words, size_t nr_words, const char *entry,
		     char *ret_msg, size_t msg_cap);

/* ---- isolate.c: every device pointer a module forms comes from the lookup
 * helper (compile thread); 0 or -EACCES with the reason in ret_msg */
int  hmd_isolation_check(const uint32_t *words, size_t nr_words, bool cpu_device,
			 char *ret_msg, size_t msg_cap);

/* ---- device.c: libdrm render nodes <-> Vulkan physical devices */
struct hmd_device_choice {
	int vk_index;			/* physical device index, -1: none */
	char name[64];
	char render_node[64];		/* "" when none (lavapipe) */
	uint32_t vendor_id, device_id;
	bool is_cpu;
	/* the limits a module is checked against before a pipeline is built
	 * (validate.c): past them a driver may fail in any way (lavapipe
	 * overflows a compile thread's stack at 513^3 invocations) */
	uint32_t max_wg_size[3], max_wg_invocations, max_shared_bytes;
};
int  hmd_device_pick(const char *want, struct hmd_device_choice *ret,
		     char *ret_why, size_t why_cap);
int  hmd_device_list(void);		/* prints the table; for --list-devices */

/* ---- netlink.c: the module's "hmirror" generic netlink family */
struct hmd_netlink;
typedef void (*hmd_nl_event_cb)(uint32_t cmd, uint64_t space, uint64_t chunk,
				void *data);
int  hmd_netlink_new(hmd_nl_event_cb cb, void *data, struct hmd_netlink **ret);
void hmd_netlink_free(struct hmd_netlink *n);
int  hmd_netlink_fd(const struct hmd_netlink *n);
int  hmd_netlink_process(struct hmd_netlink *n);

/* ---- engine host (dispatch.c): the device thread */
struct hmd_job;
typedef void (*hmd_job_fn)(struct hmd_job *j);
struct hmd_job {
	hmd_job_fn run;		/* device thread */
	hmd_job_fn reply;	/* device thread, right after run (optional) */
	hmd_job_fn done;	/* loop thread */
	struct hmd_client *client;	/* referenced while queued */
	int status;
	bool cancelable;	/* dropped with -ECANCELED if not started */
	uint64_t t_queued, t_started, t_done;
	struct hmd_job *next;
};
int  hmd_worker_start(struct hm_loop *l);
void hmd_worker_stop(void);
void hmd_worker_queue(struct hmd_job *j);
/* the compile thread (validation, pipeline compiles): nothing there may
 * touch an engine or the queue */
void hmd_compile_queue(struct hmd_job *j);
/* drop not-started cancelable jobs (of one client or, with NULL, all) */
void hmd_worker_cancel(struct hmd_client *c, int status);
bool hmd_worker_idle(void);

int  hmd_engine_host_init(const struct hmd_device_choice *dev, char *why,
			  size_t why_cap);
void hmd_engine_host_finish(void);
bool hmd_engine_available(void);
unsigned hmd_engine_validation_count(void);	/* messages so far */
/* compile thread: the pipeline of a validated module, built on the shared
 * device for any client's engine to adopt (hmd_eng_pipeline()); *ret NULL
 * without an engine */
int  hmd_eng_pipeline_build(const struct hmd_module *m, uint32_t flags,
			    struct hmd_prebuilt **ret);
/* compile thread: c has m built and parked (no compile needed) */
bool hmd_eng_pipeline_parked(struct hmd_client *c, const struct hmd_module *m);
void hmd_eng_pipeline_discard(struct hmd_prebuilt *prebuilt);	/* any thread */

/* ---- client.c: per-client state */
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
#define HMD_MAX_SPIRV_WORDS	(4u << 20)
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
	struct hm_loop_source *src;
	struct hm_engine *engine;	/* lazily */
	struct hmd_space spaces[HMD_MAX_SPACES];
	struct hmd_pipeline pipes[HMD_MAX_PIPELINES];
	unsigned nr_spaces, nr_pipes, inflight;
	unsigned nr_compiling;		/* loop thread: PIPELINE_NEWs queued */
	uint64_t space_bytes;
	unsigned bad_msgs;		/* answered with an error, this connection */
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
	struct hmd_client *next;
};

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
extern pthread_mutex_t hmd_estats_lock;
void hmd_client_refresh_estats(struct hmd_client *c);	/* device thread */

int  hmd_client_accept(int lfd);
void hmd_client_get(struct hmd_client *c);
void hmd_client_put(struct hmd_client *c);
void hmd_client_disconnect(struct hmd_client *c, const char *why);
int  hmd_client_send(struct hmd_client *c, uint16_t type, uint32_t seq,
		     int status, const void *payload, size_t len);
/* the same with one fd beside it (SCM_RIGHTS) */
int  hmd_client_send_fd(struct hmd_client *c, uint16_t type, uint32_t seq,
			int status, const void *payload, size_t len, int fd);
/* the same without disconnecting on failure: any thread */
int  hmd_client_send_raw(struct hmd_client *c, uint16_t type, uint32_t seq,
			 int status, const void *payload, size_t len);
void hmd_clients_shutdown(void);

/* ---- protocol.c */
void hmd_client_readable(struct hm_loop_source *src, uint32_t revents,
			 void *data);

/* engine host operations (dispatch.c); run on the device thread */
int  hmd_eng_space_add(struct hmd_client *c, struct hmd_space *sp);
void hmd_eng_space_remove(struct hmd_client *c, struct hmd_space *sp);
int  hmd_eng_advise(struct hmd_client *c, uint64_t addr, uint64_t size,
		    uint32_t advice);
int  hmd_eng_pipeline(struct hmd_client *c, struct hmd_pipeline *p);
void hmd_eng_pipeline_free(struct hmd_client *c, struct hmd_pipeline *p);
int  hmd_eng_dispatch(struct hmd_client *c, struct hmd_pipeline *p,
		      const struct hm_msg_dispatch *d);
int  hmd_eng_stats(struct hmd_client *c, uint64_t *ret, unsigned nr);
void hmd_eng_client_free(struct hmd_client *c);
void hmd_eng_guard_event(uint64_t space, uint64_t chunk);

uint64_t hmd_now_ns(void);
void hmd_log(int level, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));
#define LOG_ERR_ 3
#define LOG_WARN_ 4
#define LOG_INFO_ 6
#define LOG_DEBUG_ 7

#endif
