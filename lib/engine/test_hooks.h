/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * Test and measurement hooks of the engine: not installed, not exported.
 * The engine's tests and hmirror-bench link the library's objects and use
 * these: to make a CPU write land at the one moment a rule is about
 * (selftests/engine/engine_test.c), to populate a view as the engine does,
 * to turn the mirror window off, and to switch the twin mode between
 * measurements (tools/bench/mirror.c).
 */
#ifndef HMIRROR_ENGINE_TEST_HOOKS_H
#define HMIRROR_ENGINE_TEST_HOOKS_H
#include <stddef.h>
#include <stdint.h>

struct hm_engine;

/* hm_engine_params.flags, beside engine.h's HM_ENGINE_FLAGS_ALL: no mirror
 * window, so every speculative load misses and takes the helper */
#define HM_ENGINE_NO_WINDOW	(1u << 3)
/* no uploads beside the caller's dispatch (ahead.c): every upload is made
 * at the next dispatch boundary, as before them */
#define HM_ENGINE_NO_AHEAD	(1u << 5)
/* the uploads beside the caller's dispatch start at once, not as late as
 * the last walk's device time allows (ahead.c): the control measured
 * beside the default by hmirror-bench workload's hmirror-early */
#define HM_ENGINE_AHEAD_EARLY	(1u << 6)

struct hm_engine_test_hooks {
	/* after an upload's copy completed and before its generations are
	 * checked (a CPU write here must discard it, rule 3) */
	void (*after_upload_copy)(void *arg);
	/* once the table is final, just before the submission */
	void (*before_dispatch)(void *arg);
	/* the caller's dispatch submitted, before the uploads beside it */
	void (*during_dispatch)(void *arg);
	void *arg;
};

/* Install h (a copy; NULL: none) on e, before its first dispatch. */
void hm__test_engine_hooks(struct hm_engine *e, const struct hm_engine_test_hooks *h);

/* The published mirrors of e, from a hook (the engine's lock is held
 * there; nowhere else). */
size_t hm__engine_nr_published(const struct hm_engine *e);

/*
 * Make the pages of [view, view + size) (a device view: writes through it
 * are not recorded) exist without changing a byte: MADV_POPULATE_WRITE
 * (Linux 5.14+); where the kernel or the mapping does not support it
 * (-EINVAL), one atomic add of 0 to a word of each page.  A never-written
 * page becomes a zero page of the space's memory; a written one is left as
 * it is.  view and size page-aligned.  The engine calls it (space.c) for
 * a driver that refuses a view with pages missing.
 */
int hm__engine_populate_view(void *view, uint64_t size);

/* Change how later uploads fill twins (enum hm_twin_mode); -EINVAL for
 * another value. */
int hm__engine_set_twin_mode(struct hm_engine *e, uint32_t mode);

/* Sort n records of stride words at a ascending by their first word
 * (space.c; the engine's candidate and window lists): any order, records
 * kept whole, equal keys allowed. */
void hm_sort_runs(uint64_t *a, size_t n, size_t stride);

#endif /* HMIRROR_ENGINE_TEST_HOOKS_H */
