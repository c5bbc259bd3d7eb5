// SPDX-License-Identifier: LGPL-2.1-or-later
/*
 * Mirror pool: device-local slabs carved into slots of two chunks (a
 * mirror in the slab's first half, its twin at the same place in the
 * second half, so the uploads of consecutive slots merge into one copy
 * region each way), allocated lazily up to the budget; an LRU list per
 * priority class picks eviction victims.
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
