// SPDX-License-Identifier: LGPL-2.1-or-later
/*
 * Uploads ahead: the next dispatch's harvest and uploads, made while the
 * caller's dispatch runs, so that the CPU's part of a dispatch boundary
 * overlaps the device's walk instead of following it.
 *
 * hm_engine_dispatch() submits the caller's dispatch, then calls
 * hm_engine_ahead(): a harvest, and one upload try whose copy runs on the
 * side queue (hm_vk_cmd_run_side(); a device with one queue runs it after
 * the dispatch).  What the dispatch may read or write is left alone:
 *
 *  - a published mirror the CPU wrote stays published (the dispatch reads
 *    it, and its stores into it go home through it after the dispatch);
 *    it is listed pending (HM_CH_PENDING) and copied again.  Where the
 *    dispatch reads and writes the chunk in the dense window (window.c),
 *    its pool slot is the engine's alone until the dispatch ends: its
 *    written units are copied from home into the slot in place, and its
 *    twin is left as it was, so that the copy-back of a dispatch that
 *    stores into the chunk still diffs against the bytes the dispatch
 *    started with.  After that copy-back the twins of the copied units
 *    are brought level (copyback.c, record_twin_catch()).  Elsewhere (no
 *    dense window, or a chunk past it: the dispatch reads the slot) it
 *    is copied into a fresh slot, its written units from home, the
 *    others from its mirror;
 *  - a stale mirror is refreshed in place (the table names home, the
 *    window holds the sentinel: the dispatch reads neither slot);
 *  - a wanted chunk without one gets a free slot, never an evicted one.
 *
 * Each copy is checked as any upload (rule 3): a CPU write during it
 * discards it.  Clean copies wait on e->ready.  After the dispatch and its
 * copy-back, hm_engine_ahead_finish() publishes each one the dispatch did
 * not store into (its marks: such a copy lacks the device's bytes); the
 * others are discarded.  A pending chunk whose copy was not published is
 * then dropped or made stale, as the harvest would have.  Writes after
 * the copies' checks are the next harvest's, as any.
 *
 * The table and the window change only at the boundary (the table's
 * device slots at its flush, the window at its sync): the dispatch sees
 * one consistent state from its start to its end.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "internal.h"

bool hm_engine_ahead_enabled(const struct hm_engine *e, bool shared)
{
	/* sparse: the window's pages are the pool's, a refresh in place
	 * would be read by the dispatch */
	return e->mirrors && !shared && !(e->p.flags & HM_ENGINE_NO_AHEAD) && !e->win.sparse;
}

/*
 * When the pass starts.  The guest writes while its dispatch runs (a CPU
 * that goes on as it submits): what the pass harvests is copied beside the
 * walk, what is written after its harvest waits for the next boundary,
 * where the caller waits for it.  So the pass starts late: when the walk
 * is expected to end in HM_AHEAD_LEAD percent of the last pass's time
 * (the last walk's device time from the submission; HMIRROR_AHEAD_LEAD
 * overrides it, 0 to 1000, a measurement).  Started at once, the pass met
 * the guest's writes mid-way: a short boundary let it start early, so the
 * next boundary took what it had missed, was long, and let the next pass
 * start late -- dispatches alternated 13.5 / 19.7 ms on the lent H100;
 * started late they took 15.4 ms each (Documentation/performance.rst).
 * Less than the whole pass: one that ends a little after the walk takes
 * more of the writes for the next boundary than the wait costs (100: 18.0
 * ms median, the alternation back; 80: 15.4).  A pass as long as the
 * walk (a host with a slower CPU) starts almost at once, and the
 * alternation may come back: the pass's own length is what is left.  At
 * once without a side queue (the copy waits for the walk), without
 * timestamps, on the first dispatch, and with HM_ENGINE_AHEAD_EARLY (the
 * control of the measurement above, hmirror-bench workload's
 * hmirror-early).  The wait ends with the walk, whatever the estimate.
 */
#define HM_AHEAD_LEAD 80u

static unsigned ahead_lead(void)
{
	static int lead = -1;

	return hm_env_knob("HMIRROR_AHEAD_LEAD", HM_AHEAD_LEAD, 1000, &lead);
}

/*
 * The walk's and the pass's figures the start is taken from: running
 * averages in which the newest weighs a quarter (HMIRROR_AHEAD_AVERAGE=0,
 * a measurement's control: the last ones).  The last ones make a loop:
 * the pass lengthens the walk it overlaps, so a walk lengthened by an
 * early pass starts the next one late and the short walk after it starts
 * the next one early (13.9 / 17.8 ms alternating on one H100 host); the
 * averages damp it: 0.78x ideal against 0.72x in one device call on
 * another (Documentation/decisions.rst).
 */
static uint64_t ahead_figure(uint64_t avg, uint64_t x)
{
	static int on = -1;

	return hm_env_knob("HMIRROR_AHEAD_AVERAGE", 1, 1, &on) ?
		(uint64_t)hm_cost_average((double)avg, (double)x) : x;
}

static void ahead_wait_start(struct hm_engine *e, uint64_t t_submit)
{
	uint64_t need, until, t0, now;

	if (e->walk_ns)
		e->walk_est_ns = ahead_figure(e->walk_est_ns, e->walk_ns);
	need = e->pass_est_ns * ahead_lead() / 100;
	if ((e->p.flags & HM_ENGINE_AHEAD_EARLY) || !e->vk->side || !e->walk_est_ns ||
	    !e->pass_est_ns || e->walk_est_ns <= need)
		return;
	until = t_submit + (e->walk_est_ns - need);
	t0 = hm_now_ns();
	for (now = t0; now < until &&
	     vkGetFenceStatus(e->vk->dev, e->cmd_dispatch.fence) == VK_NOT_READY;
	     now = hm_now_ns()) {
		struct timespec ts = { 0, 100000 };

		nanosleep(&ts, NULL);
	}
	e->st.ns_ahead_wait += now - t0;
}

/*
 * HMIRROR_AHEAD_COPY=0 (a measurement): the pass harvests and makes no
 * copy; its pending chunks are dropped or made stale at the dispatch's
 * end and refreshed at the boundary.  The walk beside the pass runs
 * 8.5-8.7 ms against 7.6 without one even with its copies in place
 * (Documentation/decisions.rst): this tells the harvest's part (its
 * write protection, beside a device that reads the same pages' imports)
 * from the copy's.
 */
static unsigned ahead_copy_knob(void)
{
	static int on = -1;

	return hm_env_knob("HMIRROR_AHEAD_COPY", 1, 1, &on);
}

void hm_engine_ahead(struct hm_engine *e, uint64_t t_submit)
{
	/* the upload step's own phase times stay the boundary's */
	uint64_t keep[5] = { e->st.ns_upload_copy, e->st.ns_upload_select, e->st.ns_upload_gens,
			     e->st.ns_upload_publish, e->st.ns_upload_check };
	uint64_t t0, t1;
	int err;

	if (e->test.during_dispatch)
		e->test.during_dispatch(e->test.arg);
	ahead_wait_start(e, t_submit);
	t0 = hm_now_ns();
	e->in_walk = true;
	/* an error leaves what it reached listed, and the rest for the
	 * boundary's harvest and upload, which report it */
	err = hm_engine_harvest(e);
	t1 = hm_now_ns();
	if (!err && ahead_copy_knob())
		hm_engine_upload_ahead(e);
	e->st.ns_ahead_harvest += t1 - t0;
	e->st.ns_ahead_copy += e->st.ns_upload_copy - keep[0];
	e->st.ns_ahead_check += e->st.ns_upload_check - keep[4];
	e->st.ns_ahead_select += e->st.ns_upload_select - keep[1];
	e->st.ns_ahead_gens += e->st.ns_upload_gens - keep[2];
	e->st.ns_ahead_publish += e->st.ns_upload_publish - keep[3];
	e->in_walk = false;
	e->st.ns_upload_copy = keep[0];
	e->st.ns_upload_select = keep[1];
	e->st.ns_upload_gens = keep[2];
	e->st.ns_upload_publish = keep[3];
	e->st.ns_upload_check = keep[4];
	e->st.ahead_passes++;
	e->ahead_pass_ns = hm_now_ns() - t0;
	e->pass_est_ns = ahead_figure(e->pass_est_ns, e->ahead_pass_ns);
	e->st.ns_ahead += e->ahead_pass_ns;
}

/* chunk c was stored into by this dispatch (copyback.c's marks) */
static bool stored_into(const struct hm_engine *e, const struct hm_chunk *c)
{
	return c->hist_seq == e->seq && (c->hist & 1);
}

static void resolve_pending(struct hm_engine *e, uint64_t r)
{
	uint32_t space = hm_ref_space(r);
	uint64_t idx = hm_ref_idx(r);
	struct hm_chunk *c = &e->spaces[space].ch[idx];

	if (!(c->flags & HM_CH_PENDING))
		return;
	c->flags &= ~HM_CH_PENDING;
	hm_engine_guard_hit(e, space, idx);
}

/*
 * After the dispatch and its copy-back (ok: both succeeded): the copies
 * made beside it published or discarded, the pending chunks resolved.
 */
void hm_engine_ahead_finish(struct hm_engine *e, bool ok)
{
	uint64_t t0 = hm_now_ns();

	for (size_t i = 0; i < e->nr_ready; i++) {
		const struct hm_ready *rd = &e->ready[i];
		uint32_t space = hm_ref_space(rd->ref);
		uint64_t idx = hm_ref_idx(rd->ref);
		struct hm_chunk *c = &e->spaces[space].ch[idx];
		bool pending = c->flags & HM_CH_PENDING;

		if (ok && !stored_into(e, c) &&
		    !hm_engine_publish(e, space, idx, rd->slot, e->ready_gen + rd->uoff)) {
			e->st.ahead_uploads++;
			continue;
		}
		e->st.ahead_discarded++;
		if (!(c->flags & HM_CH_STALE) && rd->slot != c->mirror)
			hm_pool_free_slot(e, rd->slot);         /* a fresh slot */
		if (!pending)
			hm_engine_queue(e, space, idx);         /* wanted again */
	}
	e->nr_ready = e->nr_ready_gen = e->nr_twin_catch = 0;
	for (size_t i = 0; i < e->nr_pend; i++)
		resolve_pending(e, e->pend[i]);
	e->nr_pend = 0;
	if (e->pend_lost) {
		/* one was not listed: find it by its flag */
		for (uint32_t id = 0; id < e->spaces_end; id++)
			for (uint64_t idx = 0; e->spaces[id].used && idx < e->spaces[id].nr_chunks; idx++)
				resolve_pending(e, hm_ref(id, idx));
		e->pend_lost = false;
	}
	t0 = hm_now_ns() - t0;
	e->st.ns_ahead += t0;
	e->st.ns_ahead_finish += t0;
}

void hm_engine_ahead_free(struct hm_engine *e)
{
	free(e->pend);
	free(e->ready);
	free(e->ready_gen);
	hm_vk_buffer_free(e->vk, &e->twin_catch);
}
