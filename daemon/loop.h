/* SPDX-License-Identifier: GPL-2.0 */
/*
 * hmirrord's event loop (loop.c): one io_uring, event sources (fd,
 * callback, data, destroy).  The bottom layer: it knows nothing else.
 */
#ifndef HMIRRORD_LOOP_H
#define HMIRRORD_LOOP_H

#include <stdint.h>

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

#endif
