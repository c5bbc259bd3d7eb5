/* SPDX-License-Identifier: GPL-2.0 */
/*
 * The daemon side of the protocol (protocol.c): a client's messages, its
 * replies, its disconnect and teardown.  The top layer under main.c.
 */
#ifndef HMIRRORD_PROTOCOL_H
#define HMIRRORD_PROTOCOL_H

#include <stdint.h>

#include "client.h"
#include "loop.h"

/* the loop source of each client (hmd_client_accept()'s readable) */
void hmd_client_readable(struct hm_loop_source *src, uint32_t revents,
			 void *data);
/* drop a client: the peer sees EOF at once, its queued dispatches are
 * cancelled, a teardown job frees its engine (loop thread) */
void hmd_client_disconnect(struct hmd_client *c, const char *why);
void hmd_clients_shutdown(void);

#endif
