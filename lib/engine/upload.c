// SPDX-License-Identifier: LGPL-2.1-or-later
/*
 * Step 2 of a dispatch: how wanted chunks get their mirrors (rule 3).
 *
 * The want list is walked: each wanted chunk gets a pool slot (mirror.c,
 * evicting a mirror of a lower priority class when the budget is full),
 * its guard is armed, its write generation noted, and one command buffer
 * copies every candidate home -> mirror -> twin.  A candidate is published
 * (the table names its mirror) only if its generation did not move
 * meanwhile; one written while it was copied stays home and is tried again.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"

/*
 * Race control: a chunk the CPU wrote during its copy on every try of a
 * dispatch, for the second time without a publish between, is not tried
 * for the next 1, 3, 7, ... 63 dispatches (it stays home, read there); a
 * publish forgets it.  This follows the chunk's own writes, never its
 * neighbours' guard drops, so it cannot blacklist read-mostly data that is
 * merely written beside.  One dispatch is not enough to back off: under
 * the demo's pattern a chunk that lost its tries usually wins the next.
 * Without it a writer that never stops made every dispatch copy the whole
 * hierarchy three times for nothing (Documentation/performance.rst).
 */
#define HM_RACE_BACKOFF_MAX 6

static void race_note(struct hm_engine *e, struct hm_chunk *c)
{
	unsigned k;

	if (c->raced < UINT8_MAX)
		c->raced++;
	if (c->raced < 2)
		return;
	k = c->raced - 1u < HM_RACE_BACKOFF_MAX ? c->raced - 1u : HM_RACE_BACKOFF_MAX;
	c->backoff_until = e->seq + (1u << k);
	e->st.thrash_backoffs++;
}

static int ensure_cand(struct hm_engine *e, size_t n)
{
	size_t cap = e->cap_cand;

	if (n <= cap)
		return 0;
	cap = cap ? cap : 256;
	while (cap < n)
		cap *= 2;
#define G(f) do { void *p = realloc(e->f, cap * sizeof(*e->f)); if (!p) return -ENOMEM; e->f = p; } while (0)
	G(cand); G(cand_slot); G(idxs); G(uoff);
#undef G
	e->cap_cand = cap;
	return 0;
}

/*
 * In place, a copy beside the walk moves a page from home for each page
 * the CPU wrote; into a fresh slot it moves the whole chunk, and its twin,
 * again (the workload's pass: 5,900 chunks of 16 pages, 80,000 gather
 * workgroups beside the walk, where in place they are about 6,000).
 * HMIRROR_AHEAD_IN_PLACE=0 turns it off: a measurement's control.
 */
static unsigned in_place_knob(void)
{
	static int on = -1;

	return hm_env_knob("HMIRROR_AHEAD_IN_PLACE", 1, 1, &on);
}

/* may pending chunk idx of sp be copied again in its own slot (ahead.c)? */
static bool in_place_ok(const struct hm_engine *e, const struct hm_espace *sp, uint64_t idx)
{
	return e->p.twin_mode == HM_TWIN_GATHER && e->gather.pipe && in_place_knob() &&
	       hm_window_holds(e, sp, idx);
}

/* candidate i, copied in place and ready: its copied units' twins listed
 * (e->twin_catch, a HM_TWIN_CATCH_PIECE each: a watch unit is a page or
 * more) for the catch-up that copyback.c records behind its diff */
static int twin_list(struct hm_engine *e, size_t i, const struct hm_espace *sp)
{
	uint64_t idx = hm_ref_idx(e->cand[i]), su = e->chunk >> sp->wshift;
	uint64_t mirror = hm_pool_mirror_addr(e, e->cand_slot[i]);
	uint64_t twin = hm_pool_twin_addr(e, e->cand_slot[i]);
	uint64_t need = e->nr_twin_catch + e->chunk / HM_TWIN_CATCH_PIECE;      /* at most */
	uint64_t *d;

	if (e->twin_catch.size < need * 16) {
		struct hm_vk_buffer nb;
		size_t cap = 256;
		int err;

		while (cap < need)
			cap *= 2;
		err = hm_vk_buffer_new(e->vk, cap * 16, HM_VK_MEM_HOST, &nb);
		if (err)
			return err;
		if (e->nr_twin_catch)
			memcpy(nb.map, e->twin_catch.map, e->nr_twin_catch * 16);
		hm_vk_buffer_free(e->vk, &e->twin_catch);
		e->twin_catch = nb;
	}
	d = e->twin_catch.map;
	for (uint64_t u = 0; u < (1ull << sp->wshift); u++) {
		if (!hm_unit_wanted(e, i, sp, idx, u))
			continue;       /* not copied: mirror and twin agree */
		for (uint64_t o = u * su; o < (u + 1) * su; o += HM_TWIN_CATCH_PIECE) {
			d[2 * e->nr_twin_catch] = mirror + o;
			d[2 * e->nr_twin_catch + 1] = twin + o;
			e->nr_twin_catch++;
		}
	}
	return 0;
}

/*
 * Beside the caller's dispatch (e->in_walk) the written published chunks
 * come first, each into its own slot where the dispatch reads the dense
 * window (ahead.c), else into a fresh slot (the dispatch reads its
 * mirror), and no slot is taken by eviction: the mirror evicted may be
 * the one the dispatch reads.
 */
static size_t select_pending(struct hm_engine *e, uint64_t *bytes)
{
	size_t n = 0;

	for (size_t p = 0; p < e->nr_pend; p++) {
		uint64_t r = e->pend[p];
		struct hm_espace *sp = &e->spaces[hm_ref_space(r)];
		struct hm_chunk *c = &sp->ch[hm_ref_idx(r)];
		uint32_t slot = c->mirror;

		if (hm_chunk_prio(e, c) == HM_PRIO_NONE ||
		    (int32_t)(c->backoff_until - e->seq) > 0)
			continue;       /* dropped or made stale at the end */
		if ((e->p.max_upload_bytes && *bytes + e->chunk > e->p.max_upload_bytes) ||
		    ensure_cand(e, n + 1) ||
		    (!in_place_ok(e, sp, hm_ref_idx(r)) && hm_pool_alloc(e, &slot)))
			break;
		e->cand[n] = r;
		e->cand_slot[n] = slot;
		n++;
		*bytes += e->chunk;
	}
	return n;
}

/* Pick this dispatch's candidates off the want list. */
static int select_candidates(struct hm_engine *e, size_t *ret_n)
{
	size_t keep = 0, n = 0;
	uint64_t bytes = 0;
	uint8_t blocked = HM_PRIO_NONE;   /* budget full for classes <= blocked */
	uint64_t *evicted = NULL;
	size_t nr_evicted = 0, cap_evicted = 0;
	int err = 0;

	if (e->in_walk)
		n = select_pending(e, &bytes);
	for (size_t q = 0; q < e->nr_queue; q++) {
		uint64_t r = e->queue[q];
		struct hm_espace *sp = &e->spaces[hm_ref_space(r)];
		struct hm_chunk *c;
		uint8_t prio;
		uint32_t slot;

		if (!sp->used || hm_ref_idx(r) >= sp->nr_chunks)
			continue;
		c = &sp->ch[hm_ref_idx(r)];
		prio = hm_chunk_prio(e, c);
		if (prio == HM_PRIO_NONE && (c->flags & HM_CH_STALE))
			hm_engine_drop_mirror(e, hm_ref_space(r), hm_ref_idx(r));
		if (prio == HM_PRIO_NONE || (c->mirror != HM_NO_MIRROR && !(c->flags & HM_CH_STALE))) {
			c->flags &= ~HM_CH_QUEUED;
			continue;
		}
		if (c->flags & HM_CH_STALE) {
			/* its own slot: refreshed in place */
			if ((int32_t)(c->backoff_until - e->seq) > 0 ||
			    (e->p.max_upload_bytes && bytes + e->chunk > e->p.max_upload_bytes)) {
				e->queue[keep++] = r;
				continue;
			}
			err = ensure_cand(e, n + 1);
			if (err) {
				e->queue[keep++] = r;
				err = 0;
				continue;
			}
			c->flags &= ~HM_CH_QUEUED;
			e->cand[n] = r;
			e->cand_slot[n] = c->mirror;
			n++;
			bytes += e->chunk;
			continue;
		}
		if ((int32_t)(c->backoff_until - e->seq) > 0 || prio <= blocked || err ||
		    (e->p.max_upload_bytes && bytes + e->chunk > e->p.max_upload_bytes)) {
			e->queue[keep++] = r;
			continue;
		}
		err = ensure_cand(e, n + 1);
		if (!err)
			err = hm_grow((void **)&evicted, &cap_evicted, nr_evicted + 1, sizeof(*evicted));
		if (!err && e->in_walk) {
			err = hm_pool_alloc(e, &slot);
		} else if (!err) {
			uint64_t ev;

			err = hm_pool_take_slot(e, prio, &slot, &ev);
			if (ev != UINT64_MAX)
				evicted[nr_evicted++] = ev;
		}
		if (err == -ENOSPC || (err && err != -ENOMEM)) {
			/* budget (or device memory) exhausted for this class */
			e->st.budget_refusals++;
			blocked = prio;
			err = 0;
			e->queue[keep++] = r;
			continue;
		}
		if (err) {
			e->queue[keep++] = r;
			continue;
		}
		c->flags &= ~HM_CH_QUEUED;
		if (!e->in_walk)
			c->mirror = slot;       /* beside a dispatch: at its end */
		e->cand[n] = r;
		e->cand_slot[n] = slot;
		n++;
		bytes += e->chunk;
	}
	e->nr_queue = keep;
	/* evicted chunks are wanted again, behind the others */
	for (size_t i = 0; i < nr_evicted; i++)
		hm_engine_queue(e, hm_ref_space(evicted[i]), hm_ref_idx(evicted[i]));
	free(evicted);
	*ret_n = n;
	return 0;       /* -ENOMEM above only shortens this dispatch's list */
}

/*
 * Generations of every watch unit of the candidate chunks idxs[0..k) of
 * one space (ascending) into ug (1 << sp->wshift a chunk, in order).
 * Candidates are joined into spans across gaps of at most HM_GEN_GAP armed
 * chunks, and each span is asked for in one hm_space_generations_range()
 * call (the userspace backends: one PAGEMAP_SCAN): the workload's 6,900
 * scattered candidates a dispatch cost a few calls, not thousands.  The
 * gaps' generations are read and dropped; scanning an armed chunk keeps any
 * write it finds for the next harvest (watch.h), so nothing is lost.  The
 * gap is where a call costs what scanning the gap would: a PAGEMAP_SCAN
 * call about 1.8 us, a page of an armed range 3-5 ns (Linux 6.18, this
 * project's 2-core machine), so 24 chunks of 16 pages; a retry's few
 * hundred candidates then scan themselves, not the whole hierarchy.
 */
#define HM_GEN_GAP 24

/* HM_GEN_GAP, or HMIRROR_GEN_GAP (0 to 1024 chunks: a measurement; the
 * lent hosts' costs of a call and of a page were never measured apart) */
static uint64_t gen_gap(void)
{
	static int gap = -1;

	return hm_env_knob("HMIRROR_GEN_GAP", HM_GEN_GAP, 1024, &gap);
}

/* may one call ask for prev and next, at most gap armed chunks apart? */
static bool gen_joinable(const struct hm_espace *sp, uint64_t prev, uint64_t next, uint64_t gap)
{
	if (next - prev - 1 > gap)
		return false;
	for (uint64_t c = prev + 1; c < next; c++)
		if (!(sp->ch[c].flags & HM_CH_ARMED))
			return false;
	return true;
}

/*
 * A scan's generations (the check after a copy, or a refresh) are asked
 * span by span as above, or with HMIRROR_CHECK_WHOLE in one call over the
 * whole space.  Spread-out candidates split into many spans (the
 * workload's boundary: 1,650 candidates over 1.5 GiB, 60% of it armed,
 * about a call each: 1.72 ms a dispatch on the fourth H100 host), where
 * the whole space's one scan costs what a harvest's does (1.10 ms there,
 * the kernel's walk on several CPUs).  Only a backend with
 * HM_CAP_RANGE_SCAN goes whole (uffd-async: the watch layer takes its
 * range across unarmed chunks in one PAGEMAP_SCAN); the others split it.
 * Scanning the whole space keeps every write it finds for the next harvest
 * (watch.h), as a span's gap does.  HMIRROR_CHECK_WHOLE=1 goes whole
 * always; =2 chooses by what each last cost, a span's call against a unit
 * of the whole scan (the first check of HM_WHOLE_MIN_SPANS spans or more
 * goes whole once, the next one span by span once, the figures decide
 * from then on); 0, the default, span by span, until a lent host measures
 * it: on this project's 2-core machine the whole space's check costs 2.0
 * ms against 0.4 span by span (Documentation/decisions.rst).
 */
#define HM_WHOLE_MIN_SPANS 64

static unsigned check_whole_knob(void)
{
	static int v = -1;

	return hm_env_knob("HMIRROR_CHECK_WHOLE", 0, 2, &v);
}

/*
 * The end of the span that starts at candidate i of idxs[0, k), across at
 * most gap armed chunks: gen_gap() where the call scans (a scan a span),
 * else (HM_CAP_GEN_DEFER with HM_GEN_DEFER: no kernel call) 0, consecutive
 * candidates only, as a gap's units would be filled for nothing: the
 * workload's pass beside the walk, about 1,760 candidates in 1 GiB,
 * noted them in 0.157 ms across gaps and 0.107 ms without (medians of 42
 * passes, six runs each, alternating; the first pass 1.9-15.3 ms against
 * 1.4-6.7; lavapipe, this project's 2-core machine).
 */
static size_t span_end(const struct hm_espace *sp, const uint64_t *idxs, size_t i, size_t k,
		       uint64_t gap)
{
	size_t j = i + 1;

	while (j < k && gen_joinable(sp, idxs[j - 1], idxs[j], gap))
		j++;
	return j;
}

static size_t count_spans(const struct hm_espace *sp, const uint64_t *idxs, size_t k)
{
	size_t spans = 0;

	for (size_t i = 0; i < k; i = span_end(sp, idxs, i, k, gen_gap()))
		spans++;
	return spans;
}

static bool check_whole(const struct hm_engine *e, size_t spans, uint64_t units)
{
	if (check_whole_knob() == 1)
		return true;
	if (spans < HM_WHOLE_MIN_SPANS)
		return false;
	if (!e->check_unit_ns)
		return true;            /* never measured: once */
	if (!e->check_span_ns)
		return false;           /* likewise */
	return (double)units * e->check_unit_ns < (double)spans * e->check_span_ns;
}

static int note_whole(struct hm_engine *e, struct hm_espace *sp, const uint64_t *idxs, size_t k,
		      unsigned flags, uint64_t *ug, uint64_t units)
{
	uint64_t per = 1ull << sp->wshift, t0 = hm_now_ns();
	int err;

	err = hm_grow((void **)&e->span_gen, &e->cap_span_gen, units, sizeof(*e->span_gen));
	if (!err)
		err = hm_space_generations_range(sp->s, 0, units, flags, e->span_gen);
	if (err)
		return err;
	for (size_t t = 0; t < k; t++)
		memcpy(ug + t * per, e->span_gen + idxs[t] * per, per * sizeof(*ug));
	e->check_unit_ns = hm_cost_average(e->check_unit_ns,
					   (double)(hm_now_ns() - t0) / (double)units);
	return 0;
}

static int note_generations(struct hm_engine *e, struct hm_espace *sp, const uint64_t *idxs,
			    size_t k, unsigned flags, uint64_t *ug)
{
	uint64_t per = 1ull << sp->wshift, t0 = 0, gap_units;
	size_t spans = 0, nspan;
	uint64_t gap = (flags & HM_GEN_DEFER) && (hm_space_caps(sp->s) & HM_CAP_GEN_DEFER) ?
		       0 : gen_gap();
	int err;

	/* HM_CAP_RANGE_SCAN: the watch layer scans a range in one call
	 * (uffd-async: one PAGEMAP_SCAN); the other backends split it */
	if (!(flags & HM_GEN_DEFER) && k && check_whole_knob() &&
	    (hm_space_caps(sp->s) & HM_CAP_RANGE_SCAN)) {
		uint64_t units = hm_space_nr_chunks(sp->s);

		spans = count_spans(sp, idxs, k);
		if (check_whole(e, spans, units))
			return note_whole(e, sp, idxs, k, flags, ug, units);
		t0 = hm_now_ns();
	}
	/* every span in one call (one lock; the watch layer may scan their
	 * cover instead, HMIRROR_GEN_COVER): a span without gaps straight
	 * into ug, one with gaps into span_gen (its gens set once span_gen
	 * has its room), its candidates' units copied out after */
	nspan = 0;
	gap_units = 0;
	for (size_t i = 0, j; i < k; i = j) {
		uint64_t len;

		j = span_end(sp, idxs, i, k, gap);
		len = idxs[j - 1] - idxs[i] + 1;
		err = hm_grow((void **)&e->gen_spans, &e->cap_gen_spans, nspan + 1,
			      sizeof(*e->gen_spans));
		if (err)
			return err;
		e->gen_spans[nspan++] = (struct hm_gen_span){
			.first = idxs[i] * per, .count = len * per,
			.gens = len == j - i ? ug + i * per : NULL,
		};
		if (len != j - i)
			gap_units += len * per;
	}
	if (gap_units) {
		err = hm_grow((void **)&e->span_gen, &e->cap_span_gen, gap_units,
			      sizeof(*e->span_gen));
		if (err)
			return err;
		gap_units = 0;
		for (size_t t = 0; t < nspan; t++) {
			if (e->gen_spans[t].gens)
				continue;
			e->gen_spans[t].gens = e->span_gen + gap_units;
			gap_units += e->gen_spans[t].count;
		}
	}
	err = hm_space_generations_spans(sp->s, e->gen_spans, nspan, flags);
	if (err)
		return err;
	for (size_t t = 0, i = 0; t < nspan; t++) {
		const struct hm_gen_span *g = &e->gen_spans[t];
		uint64_t from = g->first / per, end = from + g->count / per;
		size_t j = i;

		while (j < k && idxs[j] < end)
			j++;
		if (g->count / per != j - i)    /* gaps: out of span_gen */
			for (size_t c = i; c < j; c++)
				memcpy(ug + c * per, g->gens + (idxs[c] - from) * per,
				       per * sizeof(*ug));
		i = j;
	}
	if (t0 && spans)
		e->check_span_ns = hm_cost_average(e->check_span_ns,
						   (double)(hm_now_ns() - t0) / (double)spans);
	return 0;
}

/* Arm the guards of candidates not yet armed, then note the generations of
 * their units into ug (candidate i's at ug + e->uoff[i]).  flags: 0, or
 * HM_GEN_DEFER (uffd-async: no scan; a write since the harvest's scan then
 * moves the generation noted after the copy, and the candidate is
 * discarded, as rule 3 wants): one scan a try instead of two, at the price
 * of discarding what was written between the harvest and the copy. */
static int arm_and_note(struct hm_engine *e, size_t n, unsigned flags, uint64_t *ug)
{
	size_t i = 0;
	int err;

	while (i < n) {
		uint32_t space = hm_ref_space(e->cand[i]);
		struct hm_espace *sp = &e->spaces[space];
		size_t j = i, k = 0;

		while (j < n && hm_ref_space(e->cand[j]) == space) {
			uint64_t idx = hm_ref_idx(e->cand[j]), run = 1;

			e->idxs[k++] = idx;
			j++;
			if (sp->ch[idx].flags & HM_CH_ARMED)
				continue;
			/* one arm call for a run of consecutive unarmed chunks */
			while (j < n && hm_ref_space(e->cand[j]) == space &&
			       hm_ref_idx(e->cand[j]) == idx + run &&
			       !(sp->ch[idx + run].flags & HM_CH_ARMED)) {
				e->idxs[k++] = idx + run;
				run++;
				j++;
			}
			err = hm_consumer_watch(sp->cons, idx << e->shift, run << e->shift);
			if (err)
				return err;
			for (uint64_t r = 0; r < run; r++)
				sp->ch[idx + r].flags |= HM_CH_ARMED;
			sp->nr_armed += run;
		}
		err = note_generations(e, sp, e->idxs, k, flags, ug + e->uoff[i]);
		if (err)
			return err;
		i = j;
	}
	return 0;
}

static int cmp_slot(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

/*
 * Sort the fresh slots s[0..n), each a distinct pool slot, ascending: by a
 * bitmap of the pool's slots (n plus the pool's slots / 64 steps).  The
 * free list hands slots out in no useful order (a pass beside the walk:
 * 5,800 slots in as many runs), where qsort() took 350 us.
 */
static void sort_slots(const struct hm_engine *e, uint64_t *s, size_t n)
{
	uint64_t nr = (uint64_t)e->pool.nr_slabs * e->pool.slots_per_slab, words = (nr + 63) / 64;
	uint64_t *bits;
	size_t k = 0;

	if (n < 2)
		return;
	bits = calloc(words, sizeof(*bits));
	if (!bits) {
		qsort(s, n, sizeof(*s), cmp_slot);
		return;
	}
	for (size_t i = 0; i < n; i++)
		bits[s[i] / 64] |= 1ull << (s[i] % 64);
	for (uint64_t w = 0; w < words && k < n; w++)
		for (uint64_t x = bits[w]; x; x &= x - 1)
			s[k++] = w * 64 + (uint64_t)__builtin_ctzll(x);
	free(bits);
}

/*
 * Candidate i's units: all clean when noted, none moved during the copy.
 * *ret_rearm: a unit answered odd before or after the copy (kmod: written
 * since it was armed), so the next try must re-arm it first (watch.h's
 * rule-3 recipe) or it would be discarded once more for nothing.
 */
static bool cand_clean(const struct hm_engine *e, size_t i, const struct hm_espace *sp,
		       bool *ret_rearm)
{
	size_t o = e->uoff[i];
	bool clean = true, odd = false;

	*ret_rearm = false;
	for (uint64_t u = 0; u < (1ull << sp->wshift); u++) {
		if (!HM_GEN_CLEAN(e->ug0[o + u]))
			odd = true;
		if (!HM_GEN_CLEAN(e->ug1[o + u]))
			*ret_rearm = true;
		if (e->ug0[o + u] != e->ug1[o + u])
			clean = false;
	}
	*ret_rearm |= odd;
	return clean && !odd;
}

/* A candidate that is not published: a new one's slot goes back, a stale
 * one keeps its slot and is wanted again; a pending one's fresh slot goes
 * back (one copied in place keeps its own), and the dispatch's end
 * decides the rest (ahead.c). */
static void cand_unwind(struct hm_engine *e, size_t i)
{
	uint32_t space = hm_ref_space(e->cand[i]);
	uint64_t idx = hm_ref_idx(e->cand[i]);
	struct hm_chunk *c = &e->spaces[space].ch[idx];

	if (c->flags & HM_CH_PENDING) {
		if (!hm_cand_in_place(e, i))
			hm_pool_free_slot(e, e->cand_slot[i]);
		return;
	}
	if (!(c->flags & HM_CH_STALE)) {
		c->mirror = HM_NO_MIRROR;
		hm_pool_free_slot(e, e->cand_slot[i]);
	}
	hm_engine_queue(e, space, idx);
}

int hm_engine_publish(struct hm_engine *e, uint32_t space, uint64_t idx, uint32_t slot,
		      const uint64_t *gens)
{
	struct hm_espace *sp = &e->spaces[space];
	struct hm_chunk *c = &sp->ch[idx];
	uint64_t g = hm_espace_gchunk(sp, idx);
	uint8_t prio;
	int err;

	err = hm_engine_repoint(e, g, (int64_t)(hm_pool_mirror_addr(e, slot) - (g << e->shift)));
	if (err)
		return err;
	if (c->mirror != slot && c->mirror != HM_NO_MIRROR) {
		/* a pending chunk's copy beside the dispatch: its old mirror goes */
		hm_pool_lru_del(e, c->mirror);
		hm_pool_free_slot(e, c->mirror);
	} else if ((c->flags & HM_CH_PENDING) && c->mirror == slot) {
		hm_pool_lru_del(e, slot);       /* copied in place: listed again below */
	}
	c->mirror = slot;
	/* what every unit of the mirror now holds */
	memcpy(sp->ugen + (idx << sp->wshift), gens, sizeof(*sp->ugen) << sp->wshift);
	c->flags = (c->flags & ~(HM_CH_STALE | HM_CH_PENDING)) | HM_CH_PUBLISHED;
	c->raced = 0;
	hm_window_note(e, space, idx);
	prio = hm_chunk_prio(e, c);
	hm_pool_lru_add(e, slot, space, idx, prio == HM_PRIO_NONE ? HM_PRIO_HOT : prio);
	e->st.uploads++;
	return 0;
}

/* Beside a dispatch: candidate i's clean copy waits for the dispatch's end
 * (one made in place, its twins' catch-up listed too). */
static int ready_add(struct hm_engine *e, size_t i, const struct hm_espace *sp)
{
	size_t units = 1ull << sp->wshift;
	int err;

	err = hm_grow((void **)&e->ready, &e->cap_ready, e->nr_ready + 1, sizeof(*e->ready));
	if (!err)
		err = hm_grow((void **)&e->ready_gen, &e->cap_ready_gen, e->nr_ready_gen + units,
			      sizeof(*e->ready_gen));
	if (!err && hm_cand_in_place(e, i))
		err = twin_list(e, i, sp);      /* last: listed only if ready */
	if (err)
		return err;
	memcpy(e->ready_gen + e->nr_ready_gen, e->ug1 + e->uoff[i], units * sizeof(*e->ready_gen));
	e->ready[e->nr_ready++] = (struct hm_ready){ e->cand[i], e->cand_slot[i], e->nr_ready_gen };
	e->nr_ready_gen += units;
	return 0;
}

/*
 * Beside a dispatch: a pending candidate none of whose units moved since
 * its mirror was published holds what home holds -- the harvest reported a
 * write its copy already had (a write during an upload's copy is reported
 * again, watch.h) -- and stays as it is, uncopied; the others are
 * compacted to the front, their generations with them.  Returns how many.
 */
static size_t keep_unmoved(struct hm_engine *e, size_t n)
{
	size_t k = 0, units = 0;

	for (size_t i = 0; i < n; i++) {
		struct hm_espace *sp = &e->spaces[hm_ref_space(e->cand[i])];
		uint64_t idx = hm_ref_idx(e->cand[i]);
		struct hm_chunk *c = &sp->ch[idx];
		size_t per = 1ull << sp->wshift;

		if ((c->flags & HM_CH_PENDING) &&
		    !memcmp(e->ug0 + e->uoff[i], sp->ugen + (idx << sp->wshift),
			    per * sizeof(*e->ug0))) {
			if (!hm_cand_in_place(e, i))
				hm_pool_free_slot(e, e->cand_slot[i]);
			c->flags &= ~HM_CH_PENDING;
			continue;
		}
		memmove(e->ug0 + units, e->ug0 + e->uoff[i], per * sizeof(*e->ug0));
		e->cand[k] = e->cand[i];
		e->cand_slot[k] = e->cand_slot[i];
		e->uoff[k] = units;
		units += per;
		k++;
	}
	return k;
}

static int upload_once(struct hm_engine *e, bool last, size_t *ret_discarded)
{
	size_t n = 0, units = 0, nf = 0;
	uint64_t bytes = 0, t0;
	int err;

	*ret_discarded = 0;
	t0 = hm_now_ns();
	err = select_candidates(e, &n);
	if (err || !n) {
		e->st.ns_upload_select += hm_now_ns() - t0;
		return err;
	}
	/* sort by (space, idx): one generations call per space and copies that
	 * group by home piece; the slot follows its chunk */
	{
		uint64_t *pairs = malloc(3 * n * sizeof(*pairs)), *fresh = pairs + 2 * n;

		if (!pairs) {
			for (size_t i = 0; i < n; i++)
				cand_unwind(e, i);
			return -ENOMEM;
		}
		for (size_t i = 0; i < n; i++) {
			pairs[2 * i] = e->cand[i];
			pairs[2 * i + 1] = e->cand_slot[i];
		}
		hm_sort_runs(pairs, n, 2);
		for (size_t i = 0; i < n; i++) {
			const struct hm_espace *sp = &e->spaces[hm_ref_space(pairs[2 * i])];

			e->cand[i] = pairs[2 * i];
			e->cand_slot[i] = pairs[2 * i + 1];
			e->uoff[i] = units;
			units += 1ull << sp->wshift;
			if (!(sp->ch[hm_ref_idx(e->cand[i])].flags & HM_CH_STALE) &&
			    !hm_cand_in_place(e, i))
				fresh[nf++] = e->cand_slot[i];
		}
		/* the new mirrors' slots, ascending: consecutive chunks land in
		 * consecutive slots whatever order the free list gave them in,
		 * so their copies merge into few regions (a stale mirror keeps
		 * its slot: its clean units are there) */
		sort_slots(e, fresh, nf);
		for (size_t i = 0, f = 0; i < n; i++) {
			struct hm_espace *sp = &e->spaces[hm_ref_space(e->cand[i])];
			struct hm_chunk *c = &sp->ch[hm_ref_idx(e->cand[i])];

			if ((c->flags & HM_CH_STALE) || hm_cand_in_place(e, i))
				continue;
			e->cand_slot[i] = fresh[f++];
			if (!e->in_walk)
				c->mirror = e->cand_slot[i];
		}
		free(pairs);
	}
	e->st.ns_upload_select += hm_now_ns() - t0;
	err = hm_grow((void **)&e->ug0, &e->cap_ug0, units, sizeof(*e->ug0));
	if (!err)
		err = hm_grow((void **)&e->ug1, &e->cap_ug1, units, sizeof(*e->ug1));
	/* the generations before the copy are what the space last learnt
	 * (HM_GEN_DEFER): the harvest's scan, or the previous try's check,
	 * re-armed every unit it found written, so what it answered is a
	 * clean start; a write since moves the generation the check after
	 * the copy reads, and the candidate is discarded (rule 3).  A scan
	 * here would only move such writes from this try's discards to its
	 * copy, at the price of a scan of the candidates' spans (uffd-async:
	 * a PAGEMAP_SCAN over most of the hierarchy, as long as the check) */
	if (!err) {
		t0 = hm_now_ns();
		err = arm_and_note(e, n, HM_GEN_DEFER, e->ug0);
		e->st.ns_upload_gens += hm_now_ns() - t0;
	}
	if (!err && e->in_walk) {
		n = keep_unmoved(e, n);
		if (!n)
			return 0;
	}
	if (!err) {
		/* the copy's recording (the gather's descriptors: 5,800
		 * candidates of 16 units a pass beside the workload's walk)
		 * and its run */
		t0 = hm_now_ns();
		err = hm_engine_copy_candidates(e, n, &bytes);
		e->st.ns_upload_copy += hm_now_ns() - t0;
	}
	if (err)
		goto out_unwind;
	if (e->test.after_upload_copy)
		e->test.after_upload_copy(e->test.arg);
	/* the check after the copy.  Before a retry it takes what it finds
	 * (a write-protecting scan), so the retry's g0 starts from protected
	 * pages; the last try only looks (HM_GEN_PEEK, a read-only scan that
	 * flushes no TLB), and what it finds stays for the next harvest */
	t0 = hm_now_ns();
	err = arm_and_note(e, n, last ? HM_GEN_PEEK : 0, e->ug1);
	t0 = hm_now_ns() - t0;
	e->st.ns_upload_gens += t0;
	e->st.ns_upload_check += t0;
	if (err)
		goto out_unwind;
	e->st.upload_bytes += bytes;
	t0 = hm_now_ns();
	for (size_t i = 0; i < n; i++) {
		uint32_t space = hm_ref_space(e->cand[i]);
		uint64_t idx = hm_ref_idx(e->cand[i]);
		struct hm_espace *sp = &e->spaces[space];
		struct hm_chunk *c = &sp->ch[idx];
		bool rearm;

		if (!cand_clean(e, i, sp, &rearm)) {
			/* written while copying (or, kmod, since it was armed
			 * and not re-armed): stays home for now; the next try
			 * re-arms it first where the backend needs it */
			if (rearm && (c->flags & HM_CH_ARMED)) {
				c->flags &= ~HM_CH_ARMED;
				sp->nr_armed--;
			}
			if (e->in_walk) {
				e->st.ahead_discarded++;
			} else {
				e->st.uploads_discarded++;
				(*ret_discarded)++;
				if (last)
					race_note(e, c);
			}
			cand_unwind(e, i);
			continue;
		}
		err = e->in_walk ? ready_add(e, i, sp) :
		      hm_engine_publish(e, space, idx, e->cand_slot[i], e->ug1 + e->uoff[i]);
		if (err)
			cand_unwind(e, i);
	}
	e->st.ns_upload_publish += hm_now_ns() - t0;
	return 0;

out_unwind:
	/* nothing was published */
	for (size_t i = 0; i < n; i++)
		cand_unwind(e, i);
	return err;
}

/*
 * A candidate written while it was copied stays home (rule 3); it is tried
 * again at once, with the others written meanwhile, up to HM_UPLOAD_RETRIES
 * times: the next copy holds only those, so its window is short, and a
 * guest that writes in bursts (the demo's does, as the dispatch starts) has
 * usually moved on.  Without the retries such chunks waited for the next
 * dispatch and met the next burst.
 */
#define HM_UPLOAD_RETRIES 2

/* HM_UPLOAD_RETRIES, or HMIRROR_UPLOAD_RETRIES (0 to 2: a measurement) */
static unsigned upload_retries(void)
{
	static int nr = -1;

	return hm_env_knob("HMIRROR_UPLOAD_RETRIES", HM_UPLOAD_RETRIES, HM_UPLOAD_RETRIES, &nr);
}

int hm_engine_upload_ahead(struct hm_engine *e)
{
	size_t discarded;

	if (!e->nr_queue && !e->nr_pend)
		return 0;
	return upload_once(e, true, &discarded);
}

int hm_engine_upload(struct hm_engine *e)
{
	size_t discarded;
	int err;

	if (!e->mirrors || !e->nr_queue)
		return 0;
	for (unsigned t = 0, last = upload_retries();; t++) {
		err = upload_once(e, t == last, &discarded);
		if (err || !discarded || !e->nr_queue || t == last)
			return err;
		e->st.upload_retries++;
	}
}
