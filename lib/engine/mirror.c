// SPDX-License-Identifier: LGPL-2.1-or-later
/*
 * A mirror's life: the class a chunk is wanted in (advice, device-write
 * history) and the want list; the pool slot it takes (evicting a lower
 * class when the budget is full); its table entry (published: the table
 * names the mirror; home again when dropped, stale or unpublished for a
 * dispatch shared with the CPU, rule 5).  upload.c decides whether it may
 * be published (rule 3), twin.c fills it and its twin from home, harvest.c
 * drops what the CPU wrote (rule 2).
 *
 * The pool: device-local slabs carved into slots of two chunks (a mirror
 * in the slab's first half, its twin at the same place in the second
 * half, so the uploads of consecutive slots merge into one copy region
 * each way), allocated lazily up to the budget; an LRU list per priority
 * class picks eviction victims.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"

#define HM_POOL_SLAB_MAX (256ull << 20)

int hm_pool_init(struct hm_engine *e, uint64_t budget)
{
	struct hm_pool *pl = &e->pool;
	uint64_t slot = 2 * e->chunk;

	memset(pl, 0, sizeof(*pl));
	pl->chunk = e->chunk;
	pl->budget = budget / slot * slot;
	pl->slab_bytes = HM_POOL_SLAB_MAX < pl->budget ? HM_POOL_SLAB_MAX : pl->budget;
	if (pl->slab_bytes > e->vk->max_buffer)
		pl->slab_bytes = e->vk->max_buffer;
	pl->slab_bytes = pl->slab_bytes / slot * slot;
	pl->slots_per_slab = pl->slab_bytes / slot;
	for (int i = 0; i < HM_NR_PRIO; i++)
		pl->head[i] = pl->tail[i] = HM_NO_MIRROR;
	return 0;
}

void hm_pool_finish(struct hm_engine *e)
{
	struct hm_pool *pl = &e->pool;

	for (uint32_t i = 0; i < pl->nr_slabs; i++)
		hm_vk_buffer_free(e->vk, &pl->slabs[i]);
	free(pl->slabs);
	free(pl->m);
	free(pl->free_ids);
	memset(pl, 0, sizeof(*pl));
}

static int pool_add_slab(struct hm_engine *e)
{
	struct hm_pool *pl = &e->pool;
	uint64_t have = (uint64_t)pl->nr_slabs * pl->slab_bytes;
	uint32_t n = pl->slots_per_slab, first;
	size_t cap;
	int err;

	if (!pl->slots_per_slab || have + pl->slab_bytes > pl->budget)
		return -ENOSPC;
	if (pl->nr_slabs == pl->cap_slabs) {
		void *s, *m, *f;

		cap = pl->cap_slabs ? 2 * pl->cap_slabs : 8;
		s = realloc(pl->slabs, cap * sizeof(*pl->slabs));
		if (!s)
			return -ENOMEM;
		pl->slabs = s;
		m = realloc(pl->m, cap * n * sizeof(*pl->m));
		if (!m)
			return -ENOMEM;
		pl->m = m;
		f = realloc(pl->free_ids, cap * n * sizeof(*pl->free_ids));
		if (!f)
			return -ENOMEM;
		pl->free_ids = f;
		pl->cap_slabs = cap;
	}
	err = hm_vk_buffer_new(e->vk, pl->slab_bytes, HM_VK_MEM_DEVICE, &pl->slabs[pl->nr_slabs]);
	if (err) {
		e->st.alloc_failures++;
		return err;
	}
	first = pl->nr_slabs * n;
	pl->nr_slabs++;
	/* hand out low ids first */
	for (uint32_t i = n; i-- > 0;) {
		pl->m[first + i] = (struct hm_mirror){ .space = UINT32_MAX,
			.prev = HM_NO_MIRROR, .next = HM_NO_MIRROR };
		pl->free_ids[pl->nr_free++] = first + i;
	}
	return 0;
}

int hm_pool_alloc(struct hm_engine *e, uint32_t *ret_id)
{
	struct hm_pool *pl = &e->pool;
	uint64_t slot = 2 * pl->chunk;
	int err;

	if (pl->used + slot > pl->budget)
		return -ENOSPC;
	if (!pl->nr_free) {
		err = pool_add_slab(e);
		if (err)
			return err;
	}
	*ret_id = pl->free_ids[--pl->nr_free];
	pl->used += slot;
	return 0;
}

void hm_pool_free_slot(struct hm_engine *e, uint32_t id)
{
	struct hm_pool *pl = &e->pool;

	pl->m[id].space = UINT32_MAX;
	pl->free_ids[pl->nr_free++] = id;
	pl->used -= 2 * pl->chunk;
}

VkBuffer hm_pool_slab(const struct hm_engine *e, uint32_t id, uint64_t *ret_off)
{
	const struct hm_pool *pl = &e->pool;

	*ret_off = (uint64_t)(id % pl->slots_per_slab) * pl->chunk;
	return pl->slabs[id / pl->slots_per_slab].buf;
}

uint64_t hm_pool_mirror_addr(const struct hm_engine *e, uint32_t id)
{
	const struct hm_pool *pl = &e->pool;

	return pl->slabs[id / pl->slots_per_slab].addr +
	       (uint64_t)(id % pl->slots_per_slab) * pl->chunk;
}

uint64_t hm_pool_twin_offset(const struct hm_engine *e)
{
	return (uint64_t)e->pool.slots_per_slab * e->pool.chunk;
}

uint64_t hm_pool_twin_addr(const struct hm_engine *e, uint32_t id)
{
	return hm_pool_mirror_addr(e, id) + hm_pool_twin_offset(e);
}

/* ---- LRU lists, one per priority class --------------------------------- */

void hm_pool_lru_add(struct hm_engine *e, uint32_t id, uint32_t space, uint64_t idx, uint8_t prio)
{
	struct hm_pool *pl = &e->pool;
	struct hm_mirror *m = &pl->m[id];

	m->space = space;
	m->idx = idx;
	m->prio = prio;
	m->next = HM_NO_MIRROR;
	m->prev = pl->tail[prio];
	if (m->prev != HM_NO_MIRROR)
		pl->m[m->prev].next = id;
	else
		pl->head[prio] = id;
	pl->tail[prio] = id;
	pl->nr_live++;
}

void hm_pool_lru_del(struct hm_engine *e, uint32_t id)
{
	struct hm_pool *pl = &e->pool;
	struct hm_mirror *m = &pl->m[id];

	if (m->prev != HM_NO_MIRROR)
		pl->m[m->prev].next = m->next;
	else
		pl->head[m->prio] = m->next;
	if (m->next != HM_NO_MIRROR)
		pl->m[m->next].prev = m->prev;
	else
		pl->tail[m->prio] = m->prev;
	m->prev = m->next = HM_NO_MIRROR;
	pl->nr_live--;
}

/* Used again (device wrote it): move to the young end. */
void hm_pool_lru_touch(struct hm_engine *e, uint32_t id)
{
	struct hm_mirror *m = &e->pool.m[id];
	uint32_t space = m->space, idx = m->idx;
	uint8_t prio = m->prio;

	if (e->pool.tail[prio] == id)
		return;
	hm_pool_lru_del(e, id);
	hm_pool_lru_add(e, id, space, idx, prio);
}

/* Oldest mirror of the lowest class below below_prio, or HM_NO_MIRROR. */
uint32_t hm_pool_victim(struct hm_engine *e, uint8_t below_prio)
{
	for (uint8_t p = HM_PRIO_HOT; p < below_prio && p < HM_NR_PRIO; p++)
		if (e->pool.head[p] != HM_NO_MIRROR)
			return e->pool.head[p];
	return HM_NO_MIRROR;
}

static inline unsigned hist_now(const struct hm_engine *e, const struct hm_chunk *c)
{
	uint32_t age = e->seq - c->hist_seq;

	return age >= 8 ? 0 : (uint8_t)(c->hist << age);
}

/* The class a chunk is wanted in, HM_PRIO_NONE if it should stay home. */
uint8_t hm_chunk_prio(const struct hm_engine *e, const struct hm_chunk *c)
{
	if (c->flags & HM_CH_HOME_ONLY)
		return HM_PRIO_NONE;    /* unmapped or aliased (gmap.c) */
	switch (c->advice) {
	case HM_ADVICE_PREFER_DEVICE:
		return HM_PRIO_DEVICE;
	case HM_ADVICE_READ_MOSTLY:
		return HM_PRIO_READ_MOSTLY;
	case HM_ADVICE_NEVER_MIRROR:
		return HM_PRIO_NONE;
	default:
		if (e->p.hot_marks <= 8 &&
		    (unsigned)__builtin_popcount(hist_now(e, c)) >= e->p.hot_marks)
			return HM_PRIO_HOT;
		return HM_PRIO_NONE;
	}
}

void hm_engine_queue(struct hm_engine *e, uint32_t space, uint64_t idx)
{
	struct hm_chunk *c = &e->spaces[space].ch[idx];

	if (!e->mirrors || (c->flags & HM_CH_QUEUED) ||
	    (c->mirror != HM_NO_MIRROR && !(c->flags & HM_CH_STALE)))
		return;
	if (hm_grow((void **)&e->queue, &e->cap_queue, e->nr_queue + 1, sizeof(*e->queue)))
		return;         /* not queued: wanted again later */
	e->queue[e->nr_queue++] = hm_ref(space, idx);
	c->flags |= HM_CH_QUEUED;
}

/*
 * The window's list of chunks whose table entry changed since its last
 * hm_window_sync() (window.c reads it): noted here, where the entries
 * change, so that the window depends on the mirrors and not back.
 */
void hm_window_note(struct hm_engine *e, uint32_t space, uint64_t idx)
{
	struct hm_window *w = &e->win;

	if (!w->buf.buf || w->rebuild)
		return;         /* nothing in it yet, or rebuilt whole anyway */
	if (hm_grow((void **)&w->dirty, &w->cap_dirty, w->nr_dirty + 1, sizeof(*w->dirty))) {
		w->rebuild = true;      /* cannot remember it: redo them all */
		return;
	}
	/* by guest chunk: the chunk may be unmapped before the sync, and its
	 * window bytes at this address must still become sentinel */
	w->dirty[w->nr_dirty++] = hm_espace_gchunk(&e->spaces[space], idx);
}

/*
 * Unit u of chunk idx was written into the chunk's pool copy (an upload):
 * the dense window's copy of the chunk lacks it until the next sync, which
 * copies only the flagged units of a chunk whose window bytes it held
 * (window.c).  Without memory for the flags nothing is flagged, and the
 * sync trusts no held chunk of that space: its copies stay whole.
 */
void hm_window_fresh(struct hm_engine *e, struct hm_espace *sp, uint64_t idx, uint64_t u)
{
	uint64_t unit = (idx << sp->wshift) + u;

	if (!e->win.buf.buf || e->win.sparse)
		return;         /* no dense window: nothing copied in at the sync */
	if (!sp->wfresh) {
		sp->wfresh = calloc(((sp->nr_chunks << sp->wshift) + 63) / 64, sizeof(uint64_t));
		if (!sp->wfresh)
			return;
	}
	sp->wfresh[unit / 64] |= 1ull << (unit % 64);
}

/*
 * The table's device slots are written at the dispatch boundary
 * (hm_table_flush() before the dispatch): a mirror dropped by the harvest
 * and refreshed in place by the upload names the same slot again, so its
 * two updates cost the device memory none.  Without memory to defer, at
 * once.
 */
int hm_engine_repoint(struct hm_engine *e, uint64_t chunk, int64_t delta)
{
	int err = hm_table_update_deferred(e->table, chunk, delta);

	return err == -ENOMEM ? hm_table_update(e->table, chunk, delta) : err;
}

static int repoint_home(struct hm_engine *e, struct hm_espace *sp, uint64_t idx)
{
	uint64_t g = hm_espace_gchunk(sp, idx);

	hm_window_note(e, sp - e->spaces, idx);
	return hm_engine_repoint(e, g, (int64_t)(hm_espace_home_addr(e, sp, idx) - (g << e->shift)));
}

/* Forget a chunk's mirror: the table names home again. */
void hm_engine_drop_mirror(struct hm_engine *e, uint32_t space, uint64_t idx)
{
	struct hm_espace *sp = &e->spaces[space];
	struct hm_chunk *c = &sp->ch[idx];

	if (c->mirror == HM_NO_MIRROR)
		return;
	if (c->flags & HM_CH_PUBLISHED)
		repoint_home(e, sp, idx);
	if (!(c->flags & HM_CH_STALE))
		hm_pool_lru_del(e, c->mirror);
	hm_pool_free_slot(e, c->mirror);
	c->mirror = HM_NO_MIRROR;
	c->flags &= ~(HM_CH_PUBLISHED | HM_CH_STALE);
}

/* A read-mostly mirror the CPU wrote: home for now (rule 2), slot kept for
 * its refresh in place. */
void hm_engine_stale_mirror(struct hm_engine *e, uint32_t space, uint64_t idx)
{
	struct hm_espace *sp = &e->spaces[space];
	struct hm_chunk *c = &sp->ch[idx];

	if (c->flags & HM_CH_PUBLISHED)
		repoint_home(e, sp, idx);
	hm_pool_lru_del(e, c->mirror);
	c->flags = (c->flags & ~HM_CH_PUBLISHED) | HM_CH_STALE;
}

/* Repoint every live mirror home (before a dispatch shared with the CPU). */
int hm_engine_unpublish_all(struct hm_engine *e)
{
	for (uint8_t p = HM_PRIO_HOT; p < HM_NR_PRIO; p++) {
		for (uint32_t id = e->pool.head[p]; id != HM_NO_MIRROR; id = e->pool.m[id].next) {
			struct hm_mirror *m = &e->pool.m[id];
			struct hm_espace *sp = &e->spaces[m->space];
			struct hm_chunk *c = &sp->ch[m->idx];

			if (!(c->flags & HM_CH_PUBLISHED))
				continue;
			repoint_home(e, sp, m->idx);
			c->flags &= ~HM_CH_PUBLISHED;
			e->need_republish = true;
		}
	}
	return 0;
}

/* Name again every live mirror that a shared dispatch left unpublished. */
int hm_engine_republish(struct hm_engine *e)
{
	int err;

	if (!e->need_republish)
		return 0;
	for (uint8_t p = HM_PRIO_HOT; p < HM_NR_PRIO; p++) {
		for (uint32_t id = e->pool.head[p]; id != HM_NO_MIRROR; id = e->pool.m[id].next) {
			struct hm_mirror *m = &e->pool.m[id];
			struct hm_espace *sp = &e->spaces[m->space];
			struct hm_chunk *c = &sp->ch[m->idx];
			uint64_t g = hm_espace_gchunk(sp, m->idx);

			if (c->flags & HM_CH_PUBLISHED)
				continue;
			err = hm_engine_repoint(e, g, (int64_t)(hm_pool_mirror_addr(e, id) -
							       (g << e->shift)));
			if (err)
				return err;
			c->flags |= HM_CH_PUBLISHED;
			hm_window_note(e, m->space, m->idx);
		}
	}
	e->need_republish = false;
	return 0;
}

/* Make room for a chunk of class prio: a free slot, or evict a lower class. */
int hm_pool_take_slot(struct hm_engine *e, uint8_t prio, uint32_t *ret_id,
		      uint64_t *ret_evicted)
{
	uint32_t victim;
	int err;

	*ret_evicted = UINT64_MAX;
	err = hm_pool_alloc(e, ret_id);
	if (err != -ENOSPC)
		return err;
	victim = hm_pool_victim(e, prio);
	if (victim == HM_NO_MIRROR)
		return -ENOSPC;
	*ret_evicted = hm_ref(e->pool.m[victim].space, e->pool.m[victim].idx);
	hm_engine_drop_mirror(e, e->pool.m[victim].space, e->pool.m[victim].idx);
	e->st.mirrors_evicted++;
	return hm_pool_alloc(e, ret_id);
}

/* Advice for chunks [lo, hi) of space id. */
static void advise_chunks(struct hm_engine *e, uint32_t id, uint64_t lo, uint64_t hi,
			  enum hm_advice a)
{
	struct hm_espace *sp = &e->spaces[id];

	for (uint64_t i = lo; i < hi; i++) {
		struct hm_chunk *c = &sp->ch[i];

		c->advice = a;
		if (a == HM_ADVICE_NEVER_MIRROR) {
			hm_engine_drop_mirror(e, id, i);
		} else if (c->flags & HM_CH_STALE) {
			/* off the LRU lists: its class is read when published */
		} else if (c->mirror != HM_NO_MIRROR) {
			/* same mirror, new class */
			uint8_t prio = hm_chunk_prio(e, c);

			hm_pool_lru_del(e, c->mirror);
			hm_pool_lru_add(e, c->mirror, id, i, prio ? prio : HM_PRIO_HOT);
		} else if (hm_chunk_prio(e, c) != HM_PRIO_NONE) {
			hm_engine_queue(e, id, i);
		}
	}
}

int hm_engine_advise(struct hm_engine *e, uint64_t guest_addr, uint64_t size, enum hm_advice a)
{
	uint64_t end = guest_addr + size, g0, g1;
	bool hit = false;

	if (!e || !size || end < guest_addr || (unsigned)a > HM_ADVICE_NEVER_MIRROR)
		return -EINVAL;
	g0 = guest_addr >> e->shift;
	g1 = (end - 1) >> e->shift;     /* last chunk */
	pthread_mutex_lock(&e->lock);
	if (e->work.mode) {
		pthread_mutex_unlock(&e->lock);
		return -EBUSY;
	}
	/* the mappings in order, from the one holding (or after) g0 */
	for (size_t k = 0; k < e->nr_maps; k++) {
		const struct hm_emap *m = &e->maps[k];
		uint64_t lo, hi;

		if (m->gchunk + m->nr <= g0)
			continue;
		if (m->gchunk > g1)
			break;
		hit = true;
		lo = m->gchunk > g0 ? m->gchunk : g0;
		hi = m->gchunk + m->nr - 1 < g1 ? m->gchunk + m->nr : g1 + 1;
		advise_chunks(e, m->space, m->idx + (lo - m->gchunk), m->idx + (hi - m->gchunk), a);
	}
	pthread_mutex_unlock(&e->lock);
	return hit ? 0 : -ENOENT;
}
