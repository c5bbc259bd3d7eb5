/* SPDX-License-Identifier: GPL-2.0 */
/*
 * The engine host (engine_host.c): the shared VkDevice, each client's own
 * engine on it, and the pipelines the compile thread builds for them.
 * Everything with a client runs on the device thread unless it says
 * otherwise.
 */
#ifndef HMIRRORD_ENGINE_HOST_H
#define HMIRRORD_ENGINE_HOST_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <hmirror/protocol.h>

#include "client.h"

struct hmd_device_choice;
struct hmd_module;
struct hmd_prebuilt;

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

int  hmd_eng_space_add(struct hmd_client *c, struct hmd_space *sp);
void hmd_eng_space_remove(struct hmd_client *c, struct hmd_space *sp);
/* the client's guest address space (HM_MSG_MAP, HM_MSG_UNMAP) */
int  hmd_eng_map(struct hmd_client *c, struct hmd_space *sp, uint64_t offset, uint64_t size,
		 uint64_t guest_addr, uint32_t flags);
int  hmd_eng_unmap(struct hmd_client *c, uint64_t guest_addr, uint64_t size);
int  hmd_eng_prefetch(struct hmd_client *c);
int  hmd_eng_advise(struct hmd_client *c, uint64_t addr, uint64_t size,
		    uint32_t advice);
int  hmd_eng_pipeline(struct hmd_client *c, struct hmd_pipeline *p);
void hmd_eng_pipeline_free(struct hmd_client *c, struct hmd_pipeline *p);
int  hmd_eng_dispatch(struct hmd_client *c, struct hmd_pipeline *p,
		      const struct hm_msg_dispatch *d);
int  hmd_eng_stats(struct hmd_client *c, uint64_t *ret, unsigned nr);
/* snapshot c's engine counters for STATS (under hmd_estats_lock) */
void hmd_client_refresh_estats(struct hmd_client *c);
void hmd_eng_client_free(struct hmd_client *c);

/*
 * HM_MSG_TIMELINE (any thread).  A timeline semaphore of the shared device
 * at value, exportable as an opaque fd; *ret_fd is that fd (the caller's
 * to pass on and close).  Signalled from the host; the caller orders the
 * values (hmd_timeline_advance() in protocol.c).
 */
struct hmd_timeline;
bool hmd_eng_timeline_supported(void);
bool hmd_eng_same_device(const uint8_t *device_uuid, const uint8_t *driver_uuid);
int  hmd_eng_timeline_new(uint64_t value, struct hmd_timeline **ret, int *ret_fd);
int  hmd_eng_timeline_signal(struct hmd_timeline *t, uint64_t value);
void hmd_eng_timeline_free(struct hmd_timeline *t);	/* NULL ok */
/* loop thread: a guard trip the module reported; every engine harvests */
void hmd_eng_guard_event(uint64_t space, uint64_t chunk);

#endif
