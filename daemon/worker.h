/* SPDX-License-Identifier: GPL-2.0 */
/*
 * The two worker threads (worker.c): the device thread (everything that
 * touches the queue or an engine) and the compile thread (validation,
 * pipeline compiles).  A job belongs to an owner the worker never looks
 * into: it only keeps one owner's jobs in order and takes turns between
 * owners.  Completions come back to the loop thread.
 */
#ifndef HMIRRORD_WORKER_H
#define HMIRRORD_WORKER_H

#include <stdbool.h>
#include <stdint.h>

struct hm_loop;
struct hmd_job;
typedef void (*hmd_job_fn)(struct hmd_job *j);
struct hmd_job {
	hmd_job_fn run;		/* worker thread */
	hmd_job_fn reply;	/* worker thread, right after run (optional) */
	hmd_job_fn done;	/* loop thread */
	void *owner;		/* whose job (kept alive by the queuer while
				 * queued); compared, never dereferenced */
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
/* drop not-started cancelable jobs (of one owner or, with NULL, all) */
void hmd_worker_cancel(const void *owner, int status);
bool hmd_worker_idle(void);

#endif
