// SPDX-License-Identifier: LGPL-2.1-or-later
/*
 * The harvest: step 1 of every dispatch, and hm_engine_harvest_now().
 *
 * The engine's consumer of each space with armed chunks takes the CPU
 * writes recorded since the last harvest (one call, cost following what
 * was written).  A written chunk's mirror is dropped (its slot repointed
 * home, rule 2; mirror.c) or, read-mostly and prefer-device chunks, made
 * stale to be refreshed in place; thrash control counts the drop, and a
 * chunk still wanted goes back on the want list for the upload.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"

/*
 * A guard drop of a mirror.  Read-mostly and prefer-device chunks were
 * advised as data the device wants near: a write (most often to a
 * neighbour of what the device reads, in the same chunk) makes them copy
 * again, never stay home -- thrash control would otherwise blacklist a
 * whole hierarchy whose bytes beside the hot ones the guest keeps writing
 * (Documentation/performance.rst, "thrash control").  Chunks mirrored
 * because they were measured hot back off after thrash_drops drops in
 * thrash_window dispatches.
 */
static bool refreshable(const struct hm_chunk *c)
{
	return c->advice == HM_ADVICE_READ_MOSTLY || c->advice == HM_ADVICE_PREFER_DEVICE;
}

#define HM_HARVEST_MAX (1u << 20)       /* entries of the harvest buffer, at most */

static void thrash_note(struct hm_engine *e, struct hm_chunk *c)
{
	if (e->seq - c->window_start > e->p.thrash_window) {
		c->window_start = e->seq;
		c->drops = 0;
	}
	if (++c->drops >= e->p.thrash_drops) {
		c->drops = 0;
		c->backoff_until = e->seq + e->p.thrash_backoff;
		e->st.thrash_backoffs++;
	}
}

void hm_engine_guard_hit(struct hm_engine *e, uint32_t space, uint64_t idx)
{
	struct hm_chunk *c = &e->spaces[space].ch[idx];

	e->st.mirrors_dropped_by_guard++;
	if (refreshable(c)) {
		hm_engine_stale_mirror(e, space, idx);
		e->st.mirrors_refreshed++;
	} else {
		hm_engine_drop_mirror(e, space, idx);
		thrash_note(e, c);
	}
	if (hm_chunk_prio(e, c) != HM_PRIO_NONE)
		hm_engine_queue(e, space, idx);
}

/*
 * During the caller's dispatch (ahead.c) a written published mirror is
 * still the one the dispatch reads, and copies home what it writes: it
 * stays published, listed for an upload beside the dispatch, until the
 * dispatch's end decides (hm_engine_ahead_finish()).
 */
static void pend(struct hm_engine *e, uint32_t space, uint64_t idx, struct hm_chunk *c)
{
	if (c->flags & HM_CH_PENDING)
		return;
	c->flags |= HM_CH_PENDING;
	if (hm_grow((void **)&e->pend, &e->cap_pend, e->nr_pend + 1, sizeof(*e->pend)))
		e->pend_lost = true;    /* found again by its flag at the end */
	else
		e->pend[e->nr_pend++] = hm_ref(space, idx);
}

int hm_engine_harvest(struct hm_engine *e)
{
	int err;

	for (uint32_t id = 0; id < e->spaces_end; id++) {
		struct hm_espace *sp = &e->spaces[id];
		bool more = true;
		bool take;

		if (!sp->used || !sp->nr_armed)
			continue;
		/* take where the backend can: a harvested chunk is unwatched (and,
		   nobody else watching it, disarmed: its writer runs free) until
		   arm_and_note() watches it for an upload */
		take = hm_space_caps(sp->s) & HM_CAP_HARVEST_TAKE;
		while (more) {
			size_t n = 0;

			err = hm_consumer_harvest(sp->cons, take ? HM_HARVEST_UNWATCH : 0,
						  e->harvest_buf, e->harvest_cap, &n, &more);
			if (err)
				return err;
			/* a batch that did not hold it all: take more at once
			 * next time (each call of the userspace backends moves
			 * what is left of its list: H200, a writer that never
			 * stops, ~1 M page units a dispatch in 4 Ki batches cost
			 * 1.3 s a harvest) */
			if (more && e->harvest_cap < HM_HARVEST_MAX) {
				uint64_t *b = realloc(e->harvest_buf,
						      2 * e->harvest_cap * sizeof(*b));

				if (b) {
					e->harvest_buf = b;
					e->harvest_cap *= 2;
				}
			}
			e->st.chunks_harvested += n;
			for (size_t i = 0; i < n; i++) {
				/* a watch unit; its chunk */
				uint64_t idx = e->harvest_buf[i] >> sp->wshift;
				struct hm_chunk *c;

				if (idx >= sp->nr_chunks)
					continue;
				c = &sp->ch[idx];
				if (take && (c->flags & HM_CH_ARMED)) {
					c->flags &= ~HM_CH_ARMED;
					sp->nr_armed--;
				}
				if (c->mirror != HM_NO_MIRROR && !(c->flags & HM_CH_STALE)) {
					if (e->in_walk)
						pend(e, id, idx, c);
					else
						hm_engine_guard_hit(e, id, idx);
				}
				/* uffd-async (no take): a written chunk left without a
				   mirror needs no watch until its next upload */
				if (!take && (c->flags & HM_CH_ARMED) && c->mirror == HM_NO_MIRROR) {
					err = hm_consumer_unwatch(sp->cons, idx << e->shift,
								  1ull << e->shift);
					if (err)
						return err;
					c->flags &= ~HM_CH_ARMED;
					sp->nr_armed--;
				}
			}
		}
	}
	return 0;
}

int hm_engine_harvest_now(struct hm_engine *e)
{
	uint64_t dropped, t0;
	int err;

	if (!e)
		return -EINVAL;
	pthread_mutex_lock(&e->lock);
	err = hm_engine_idle(e);
	if (!err) {
		dropped = e->st.mirrors_dropped_by_guard;
		t0 = hm_now_ns();
		err = hm_engine_harvest(e);
		e->st.ns_harvest += hm_now_ns() - t0;
		e->st.early_harvests++;
		dropped = e->st.mirrors_dropped_by_guard - dropped;
		e->st.mirrors_dropped_early += dropped;
		if (!err)
			err = hm_count_ret(dropped);
	}
	pthread_mutex_unlock(&e->lock);
	return err;
}
