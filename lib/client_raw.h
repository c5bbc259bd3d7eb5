/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * Raw datagrams of a client: not installed, not exported.  The daemon's
 * tests (selftests/daemon/daemon_test.c) link lib/client.o and speak the
 * protocol below hm_client_* with these, to send what no client of the
 * API can (malformed, truncated, hostile messages) and read the answer.
 */
#ifndef HMIRROR_CLIENT_RAW_H
#define HMIRROR_CLIENT_RAW_H
#include <stddef.h>

struct hm_client;

/* Send one datagram buf[0..len) with nr_fds (at most 16) descriptors;
 * bytes sent or -errno (-ENOTCONN once the connection is dead). */
int hm__client_send_raw(struct hm_client *c, const void *buf, size_t len,
			const int *fds, unsigned nr_fds);
/* Receive the next message into buf (cap bytes), waiting timeout_ms
 * (poll(2)'s); bytes received, -ETIMEDOUT, or -errno. */
int hm__client_recv_raw(struct hm_client *c, void *buf, size_t cap,
			int timeout_ms);

#endif /* HMIRROR_CLIENT_RAW_H */
