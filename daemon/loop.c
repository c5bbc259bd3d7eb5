// SPDX-License-Identifier: GPL-2.0
/*
 * hmirrord's event loop: one io_uring, one-shot POLL_ADD per source, re-armed
 * after its callback (level-triggered semantics: a callback may leave data
 * unread and is called again).  A source is freed only when the ring holds
 * no request naming it: either right after its callback (it was not armed)
 * or when the cancelled poll's completion arrives.  So hm_loop_remove() is
 * safe from anywhere on the loop thread, including the source's callback.
 */
#include <errno.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>

#include <liburing.h>

#include "loop.h"

struct hm_loop_source {
	struct hm_loop *loop;
	int fd;
	uint32_t events;
	hm_loop_cb cb;
	void *data;
	void (*destroy)(void *data);
	bool armed;		/* a POLL_ADD names us in the ring */
	bool in_cb;
	bool dead;
	bool cancel_sent;
	struct hm_loop_source *prev, *next;	/* the loop's list, for hm_loop_free() */
};

struct hm_loop {
	struct io_uring ring;
	unsigned nr_sources;
	struct hm_loop_source *sources;
	bool quit;
	int code;
};

int hm_loop_new(unsigned entries, struct hm_loop **ret)
{
	struct hm_loop *l = calloc(1, sizeof(*l));
	int r;

	if (!l)
		return -ENOMEM;
	r = io_uring_queue_init(entries ? entries : 256, &l->ring, 0);
	if (r < 0) {
		free(l);
		return r;
	}
	*ret = l;
	return 0;
}

static void source_free(struct hm_loop_source *s);

/* Frees the sources still registered too (their destroy runs). */
void hm_loop_free(struct hm_loop *l)
{
	if (!l)
		return;
	while (l->sources)
		source_free(l->sources);
	io_uring_queue_exit(&l->ring);
	free(l);
}

static struct io_uring_sqe *get_sqe(struct hm_loop *l)
{
	struct io_uring_sqe *sqe = io_uring_get_sqe(&l->ring);

	if (!sqe) {
		io_uring_submit(&l->ring);
		sqe = io_uring_get_sqe(&l->ring);
	}
	return sqe;
}

static int arm(struct hm_loop_source *s)
{
	struct io_uring_sqe *sqe = get_sqe(s->loop);

	if (!sqe)
		return -EBUSY;
	io_uring_prep_poll_add(sqe, s->fd, s->events);
	io_uring_sqe_set_data(sqe, s);
	s->armed = true;
	return 0;
}

static void source_free(struct hm_loop_source *s)
{
	if (s->prev)
		s->prev->next = s->next;
	else
		s->loop->sources = s->next;
	if (s->next)
		s->next->prev = s->prev;
	s->loop->nr_sources--;
	if (s->destroy)
		s->destroy(s->data);
	free(s);
}

int hm_loop_add(struct hm_loop *l, int fd, uint32_t events, hm_loop_cb cb,
		void *data, void (*destroy)(void *data),
		struct hm_loop_source **ret)
{
	struct hm_loop_source *s;
	int r;

	if (fd < 0 || !cb)
		return -EINVAL;
	s = calloc(1, sizeof(*s));
	if (!s)
		return -ENOMEM;
	s->loop = l;
	s->fd = fd;
	s->events = events;
	s->cb = cb;
	s->data = data;
	s->destroy = destroy;
	r = arm(s);
	if (r < 0) {
		free(s);
		return r;
	}
	l->nr_sources++;
	s->next = l->sources;
	if (s->next)
		s->next->prev = s;
	l->sources = s;
	if (ret)
		*ret = s;
	return 0;
}

void hm_loop_remove(struct hm_loop_source *s)
{
	struct io_uring_sqe *sqe;

	if (!s || s->dead)
		return;
	s->dead = true;
	if (s->in_cb)
		return;		/* freed when the callback returns */
	if (!s->armed) {
		source_free(s);
		return;
	}
	sqe = get_sqe(s->loop);
	if (sqe) {
		io_uring_prep_poll_remove(sqe, (uint64_t)(uintptr_t)s);
		io_uring_sqe_set_data(sqe, NULL);
		s->cancel_sent = true;
	}
	/* freed when the poll's completion (-ECANCELED or an event) arrives */
}

int hm_loop_source_fd(const struct hm_loop_source *s)
{
	return s->fd;
}

unsigned hm_loop_nr_sources(const struct hm_loop *l)
{
	return l->nr_sources;
}

void hm_loop_quit(struct hm_loop *l, int code)
{
	l->quit = true;
	l->code = code;
}

static void complete(struct hm_loop_source *s, int res)
{
	s->armed = false;
	if (s->dead) {
		source_free(s);
		return;
	}
	if (res < 0) {
		/* the fd is unusable; report it as an error event */
		res = POLLERR;
	}
	s->in_cb = true;
	s->cb(s, (uint32_t)res, s->data);
	s->in_cb = false;
	if (s->dead) {
		source_free(s);
		return;
	}
	if (arm(s) < 0) {
		/* cannot re-arm: drop the source rather than spin */
		s->dead = true;
		source_free(s);
	}
}

int hm_loop_run(struct hm_loop *l)
{
	while (!l->quit) {
		struct io_uring_cqe *cqe;
		unsigned head, n = 0;
		int r;

		r = io_uring_submit_and_wait(&l->ring, 1);
		if (r < 0 && r != -EINTR && r != -EBUSY)
			return r;
		/* collect first: callbacks may queue SQEs, never reap CQEs */
		int res[64];
		void *ud[64];

		io_uring_for_each_cqe(&l->ring, head, cqe) {
			if (n == 64)
				break;
			ud[n] = io_uring_cqe_get_data(cqe);
			res[n] = cqe->res;
			n++;
		}
		io_uring_cq_advance(&l->ring, n);
		for (unsigned i = 0; i < n; i++) {
			if (!ud[i])
				continue;	/* a POLL_REMOVE's own completion */
			complete(ud[i], res[i]);
		}
	}
	return l->code;
}
