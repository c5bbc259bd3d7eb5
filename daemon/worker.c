// SPDX-License-Identifier: GPL-2.0
/*
 * The worker threads.  The device thread runs everything that touches the
 * queue or an engine, one job at a time, in submission order: the engine
 * and the queue need no locks, a long dispatch never stalls the loop
 * (handshakes, stats, other clients' messages go on), and a client's
 * teardown, queued behind its running dispatch, can never free what that
 * dispatch uses.  Completions return to the loop through an eventfd (the
 * loop's "device completion" source); the loop thread then runs each
 * job's done().
 *
 * A job's owner (a client, for protocol.c) is a key: jobs of one owner
 * stay in order, owners take turns, and cancel drops one owner's jobs.
 */
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <stdlib.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "loop.h"
#include "state.h"
#include "worker.h"

/*
 * Two workers run jobs: the device thread (everything on the queue and the
 * engines, in submission order) and the compile thread (SPIR-V validation
 * and pipeline compilation, which can take a driver seconds: done there, a
 * client's new pipeline stalls neither the loop nor any other client's
 * dispatches).  The compile thread touches only the module cache (locked)
 * and the shared VkDevice's create functions, never an engine.
 */
struct hmd_worker {
	bool spin;			/* look for the next job before sleeping */
	/* never the same owner twice in a row while another's job waits
	 * (one client's compiles or dispatches, seconds each, cannot hold up
	 * another's); an owner's own jobs stay in submission order */
	bool fair;
	const void *last;		/* whose job ran last */
	pthread_t thread;
	pthread_mutex_t lock;
	pthread_cond_t cond;
	/* protected by lock: */
	struct hmd_job *queue_head, **queue_tail;
	struct hmd_job *done_head, **done_tail;
	bool running_job, stopping, started;
	int efd;
};

static struct hmd_worker dev_worker = {
	.spin = true,
	/* one client's queue of long dispatches delays another's by one
	 * dispatch at most; each client's own jobs stay in order */
	.fair = true,
	.lock = PTHREAD_MUTEX_INITIALIZER, .cond = PTHREAD_COND_INITIALIZER,
	.queue_tail = &dev_worker.queue_head, .done_tail = &dev_worker.done_head,
	.efd = -1,
};
static struct hmd_worker compile_worker = {
	.fair = true,
	.lock = PTHREAD_MUTEX_INITIALIZER, .cond = PTHREAD_COND_INITIALIZER,
	.queue_tail = &compile_worker.queue_head, .done_tail = &compile_worker.done_head,
	.efd = -1,
};

/* the next job off w's queue (w->lock held, the queue not empty) */
static struct hmd_job *take_next(struct hmd_worker *w)
{
	struct hmd_job **pp = &w->queue_head, *j;

	if (w->fair && w->last && (*pp)->owner == w->last) {
		/* the earliest job of another owner, if one waits */
		struct hmd_job **q = &(*pp)->next;

		while (*q && (*q)->owner == w->last)
			q = &(*q)->next;
		if (*q)
			pp = q;
	}
	j = *pp;
	*pp = j->next;
	if (w->queue_tail == &j->next)
		w->queue_tail = pp;
	w->last = j->owner;
	return j;
}

static void *worker_main(void *arg)
{
	struct hmd_worker *w = arg;

	pthread_mutex_lock(&w->lock);
	for (;;) {
		struct hmd_job *j;
		uint64_t one = 1;

		if (!w->queue_head && !w->stopping && w->spin) {
			/*
			 * A client that waits for each dispatch submits the next
			 * right after our reply: look for it a little while
			 * before sleeping (a futex wake costs more than the
			 * whole daemon's share of a round trip).
			 */
			uint64_t until = hmd_now_ns() + hmd.spin_ns;

			pthread_mutex_unlock(&w->lock);
			while (!__atomic_load_n(&w->queue_head, __ATOMIC_ACQUIRE) &&
			       hmd_now_ns() < until)
				__builtin_ia32_pause();
			pthread_mutex_lock(&w->lock);
		}
		while (!w->queue_head && !w->stopping)
			pthread_cond_wait(&w->cond, &w->lock);
		if (!w->queue_head)
			break;
		j = take_next(w);
		w->running_job = true;
		pthread_mutex_unlock(&w->lock);

		j->t_started = hmd_now_ns();
		if (j->cancelable)
			__atomic_store_n(&hmd.stats[HM_DSTAT_RUNNING], 1, __ATOMIC_RELAXED);
		if (j->run)
			j->run(j);
		j->t_done = hmd_now_ns();
		if (j->cancelable)
			__atomic_store_n(&hmd.stats[HM_DSTAT_RUNNING], 0, __ATOMIC_RELAXED);
		/* the reply leaves from here: one thread hop less */
		if (j->reply)
			j->reply(j);

		pthread_mutex_lock(&w->lock);
		w->running_job = false;
		j->next = NULL;
		*w->done_tail = j;
		w->done_tail = &j->next;
		if (write(w->efd, &one, sizeof(one)) < 0) {
			/* the counter cannot overflow in practice */
		}
	}
	pthread_mutex_unlock(&w->lock);
	return NULL;
}

static void take_done(struct hm_loop_source *src, uint32_t revents, void *data)
{
	struct hmd_worker *w = data;
	struct hmd_job *list;
	uint64_t v;

	if (read(w->efd, &v, sizeof(v)) < 0 && errno != EAGAIN)
		return;
	pthread_mutex_lock(&w->lock);
	list = w->done_head;
	w->done_head = NULL;
	w->done_tail = &w->done_head;
	pthread_mutex_unlock(&w->lock);
	while (list) {
		struct hmd_job *j = list;

		list = j->next;
		j->done(j);		/* frees j, drops what it holds */
	}
}

static int worker_start(struct hmd_worker *w, struct hm_loop *l)
{
	int r;

	w->efd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
	if (w->efd < 0)
		return -errno;
	r = hm_loop_add(l, w->efd, POLLIN, take_done, w, NULL, NULL);
	if (r < 0)
		return r;
	r = -pthread_create(&w->thread, NULL, worker_main, w);
	if (r < 0)
		return r;
	w->started = true;
	return 0;
}

static void worker_stop(struct hmd_worker *w)
{
	if (!w->started)
		return;
	pthread_mutex_lock(&w->lock);
	w->stopping = true;
	pthread_cond_signal(&w->cond);
	pthread_mutex_unlock(&w->lock);
	pthread_join(w->thread, NULL);
	w->started = false;
}

static void worker_queue(struct hmd_worker *w, struct hmd_job *j)
{
	j->t_queued = hmd_now_ns();
	j->next = NULL;
	pthread_mutex_lock(&w->lock);
	*w->queue_tail = j;
	w->queue_tail = &j->next;
	pthread_cond_signal(&w->cond);
	pthread_mutex_unlock(&w->lock);
}

static bool worker_idle(struct hmd_worker *w)
{
	bool idle;

	pthread_mutex_lock(&w->lock);
	idle = !w->queue_head && !w->running_job && !w->done_head;
	pthread_mutex_unlock(&w->lock);
	return idle;
}

int hmd_worker_start(struct hm_loop *l)
{
	int r = worker_start(&dev_worker, l);

	return r < 0 ? r : worker_start(&compile_worker, l);
}

void hmd_worker_stop(void)
{
	/* the compile thread first: what it finishes goes on to the device */
	worker_stop(&compile_worker);
	worker_stop(&dev_worker);
}

void hmd_worker_queue(struct hmd_job *j)
{
	worker_queue(&dev_worker, j);
}

void hmd_compile_queue(struct hmd_job *j)
{
	worker_queue(&compile_worker, j);
}

/* the device thread's jobs only: a compile is never cancelled (it frees
 * what it made when its client is gone) */
void hmd_worker_cancel(const void *owner, int status)
{
	struct hmd_worker *w = &dev_worker;
	struct hmd_job **pp, *cancelled = NULL, **ct = &cancelled;
	uint64_t one = 1;

	pthread_mutex_lock(&w->lock);
	for (pp = &w->queue_head; *pp;) {
		struct hmd_job *j = *pp;

		if (j->cancelable && (!owner || j->owner == owner)) {
			*pp = j->next;
			j->status = status;
			j->run = NULL;
			j->reply = NULL;
			j->next = NULL;
			*ct = j;
			ct = &j->next;
		} else {
			pp = &j->next;
		}
	}
	w->queue_tail = &w->queue_head;
	while (*w->queue_tail)
		w->queue_tail = &(*w->queue_tail)->next;
	/* completed through the same path, so replies keep one code path */
	if (cancelled) {
		*w->done_tail = cancelled;
		w->done_tail = ct;
		if (write(w->efd, &one, sizeof(one)) < 0) {
			/* see worker_main */
		}
	}
	pthread_mutex_unlock(&w->lock);
}

bool hmd_worker_idle(void)
{
	return worker_idle(&compile_worker) && worker_idle(&dev_worker);
}
