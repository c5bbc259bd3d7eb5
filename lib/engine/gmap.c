// SPDX-License-Identifier: LGPL-2.1-or-later
/*
 * The guest GPU address space: ranges of spaces mapped at guest addresses
 * (hm_engine_map(), hm_engine_unmap()).
 *
 * e->maps holds the mappings sorted by guest chunk, none overlapping.  A
 * guest chunk has a table entry exactly while a mapping covers it; the
 * entry names its space chunk's home, or that chunk's mirror.
 *
 * Every space chunk counts the mappings that cover it (sp->nmap).  Only a
 * chunk mapped at exactly one guest chunk (sp->gchunk) may be mirrored;
 * one mapped nowhere or at several guest addresses stays home
 * (HM_CH_HOME_ONLY), so that all its aliases read and write one copy: a
 * CPU write seen through any alias and a device write through any alias
 * are home for all of them.  A chunk gains its second mapping, or loses
 * its mapping, only after its mirror was dropped: between dispatches a
 * mirror holds nothing that is not home, so dropping loses nothing, and
 * no table entry is left naming a mirror of other memory.
 *
 * Mapping imports nothing: a chunk whose home piece is not imported yet
 * gets a placeholder entry, and the piece is imported at the next
 * dispatch boundary (table.c, hm_engine_import_named()).
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"

/* The first mapping that ends after guest chunk g. */
static size_t map_lower(const struct hm_engine *e, uint64_t g)
{
	size_t lo = 0, hi = e->nr_maps;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;

		if (e->maps[mid].gchunk + e->maps[mid].nr <= g)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

const struct hm_emap *hm_engine_map_find(const struct hm_engine *e, uint64_t g)
{
	size_t i = map_lower(e, g);

	if (i < e->nr_maps && e->maps[i].gchunk <= g)
		return &e->maps[i];
	return NULL;
}

struct hm_espace *hm_engine_space_of_chunk(struct hm_engine *e, uint64_t g,
					   uint32_t *ret_id, uint64_t *ret_idx)
{
	const struct hm_emap *m = hm_engine_map_find(e, g);

	if (!m)
		return NULL;
	if (ret_id)
		*ret_id = m->space;
	if (ret_idx)
		*ret_idx = m->idx + (g - m->gchunk);
	return &e->spaces[m->space];
}

/* Chunks [idx, idx + n) of a space gain the mapping at guest chunk g. */
static void count_add(struct hm_engine *e, uint32_t id, uint64_t idx, uint64_t n, uint64_t g)
{
	struct hm_espace *sp = &e->spaces[id];

	for (uint64_t i = 0; i < n; i++) {
		struct hm_chunk *c = &sp->ch[idx + i];

		if (sp->nmap[idx + i] == 1) {
			/* an alias: home from now on */
			hm_engine_drop_mirror(e, id, idx + i);
			c->flags |= HM_CH_HOME_ONLY;
		} else if (!sp->nmap[idx + i]) {
			sp->gchunk[idx + i] = g + i;
			c->flags &= ~HM_CH_HOME_ONLY;
		}
		sp->nmap[idx + i]++;
	}
	hm_espace_note_mapped(e, id, idx, n, 1);
}

/*
 * Chunks [idx, idx + n) of a space lost one mapping (no longer in
 * e->maps).  A chunk left with one mapping learns its guest chunk from
 * the space's remaining mappings: one pass over them, not one a chunk.
 */
static void count_del(struct hm_engine *e, uint32_t id, uint64_t idx, uint64_t n)
{
	struct hm_espace *sp = &e->spaces[id];
	bool sole = false;

	for (uint64_t i = 0; i < n; i++) {
		struct hm_chunk *c = &sp->ch[idx + i];

		if (sp->nmap[idx + i] == 1) {
			hm_engine_drop_mirror(e, id, idx + i);
			c->flags |= HM_CH_HOME_ONLY;
		} else if (sp->nmap[idx + i] == 2) {
			sole = true;
		}
		sp->nmap[idx + i]--;
	}
	hm_espace_note_mapped(e, id, idx, n, -1);
	if (!sole)
		return;
	for (size_t k = 0; k < e->nr_maps; k++) {
		const struct hm_emap *m = &e->maps[k];
		uint64_t lo, hi;

		if (m->space != id || m->idx >= idx + n || m->idx + m->nr <= idx)
			continue;
		lo = m->idx > idx ? m->idx : idx;
		hi = m->idx + m->nr < idx + n ? m->idx + m->nr : idx + n;
		for (uint64_t i = lo; i < hi; i++) {
			if (sp->nmap[i] != 1 || !(sp->ch[i].flags & HM_CH_HOME_ONLY))
				continue;
			sp->gchunk[i] = m->gchunk + (i - m->idx);
			sp->ch[i].flags &= ~HM_CH_HOME_ONLY;
		}
	}
}

/* Does [g, g + n) lie strictly inside one mapping (an unmap splits it)? */
static bool splits(const struct hm_engine *e, uint64_t g, uint64_t n)
{
	const struct hm_emap *m = hm_engine_map_find(e, g);

	return m && m->gchunk < g && m->gchunk + m->nr > g + n;
}

/* Mapped chunks in [g, g + n). */
static uint64_t mapped_in(const struct hm_engine *e, uint64_t g, uint64_t n)
{
	uint64_t sum = 0;

	for (size_t i = map_lower(e, g); i < e->nr_maps && e->maps[i].gchunk < g + n; i++) {
		const struct hm_emap *m = &e->maps[i];
		uint64_t lo = m->gchunk > g ? m->gchunk : g;
		uint64_t hi = m->gchunk + m->nr < g + n ? m->gchunk + m->nr : g + n;

		sum += hi - lo;
	}
	return sum;
}

/* Unmap [g, g + n); e->maps has room for one more (a split). */
static void unmap_range(struct hm_engine *e, uint64_t g, uint64_t n)
{
	size_t i = map_lower(e, g);

	while (i < e->nr_maps && e->maps[i].gchunk < g + n) {
		struct hm_emap m = e->maps[i];
		uint64_t a = m.gchunk > g ? m.gchunk : g;
		uint64_t b = m.gchunk + m.nr < g + n ? m.gchunk + m.nr : g + n;
		uint64_t end = m.gchunk + m.nr;

		/* each mirror of the range goes home (notes the window) first */
		for (uint64_t c = a; c < b; c++)
			if (e->spaces[m.space].nmap[m.idx + (c - m.gchunk)] == 1)
				hm_engine_drop_mirror(e, m.space, m.idx + (c - m.gchunk));
		for (uint64_t c = a; c < b; c++)
			hm_table_remove(e->table, c);
		if (a > m.gchunk && b < end) {
			memmove(&e->maps[i + 2], &e->maps[i + 1],
				(e->nr_maps - i - 1) * sizeof(*e->maps));
			e->maps[i].nr = a - m.gchunk;
			e->maps[i + 1] = (struct hm_emap){ .gchunk = b, .nr = end - b,
				.idx = m.idx + (b - m.gchunk), .space = m.space };
			e->nr_maps++;
			i += 2;
		} else if (a > m.gchunk) {
			e->maps[i].nr = a - m.gchunk;
			i++;
		} else if (b < end) {
			e->maps[i].gchunk = b;
			e->maps[i].idx += b - m.gchunk;
			e->maps[i].nr = end - b;
			i++;
		} else {
			memmove(&e->maps[i], &e->maps[i + 1],
				(e->nr_maps - i - 1) * sizeof(*e->maps));
			e->nr_maps--;
		}
		e->mapped_chunks -= b - a;
		count_del(e, m.space, m.idx + (a - m.gchunk), b - a);
	}
}

static bool joinable(const struct hm_emap *a, const struct hm_emap *b)
{
	return a->space == b->space && a->gchunk + a->nr == b->gchunk &&
	       a->idx + a->nr == b->idx;
}

/* Insert m into e->maps (room for it, nothing mapped in its range);
 * merged with a neighbour that continues it.  Returns its index. */
static size_t insert_map(struct hm_engine *e, const struct hm_emap *m)
{
	size_t i = map_lower(e, m->gchunk);

	if (i > 0 && joinable(&e->maps[i - 1], m)) {
		e->maps[i - 1].nr += m->nr;
		if (i < e->nr_maps && joinable(&e->maps[i - 1], &e->maps[i])) {
			e->maps[i - 1].nr += e->maps[i].nr;
			memmove(&e->maps[i], &e->maps[i + 1],
				(e->nr_maps - i - 1) * sizeof(*e->maps));
			e->nr_maps--;
		}
		return i - 1;
	}
	if (i < e->nr_maps && joinable(m, &e->maps[i])) {
		e->maps[i].gchunk = m->gchunk;
		e->maps[i].idx = m->idx;
		e->maps[i].nr += m->nr;
		return i;
	}
	memmove(&e->maps[i + 1], &e->maps[i], (e->nr_maps - i) * sizeof(*e->maps));
	e->maps[i] = *m;
	e->nr_maps++;
	return i;
}

/* Table entries of a new mapping's chunks, all home (none has a mirror). */
static int insert_entries(struct hm_engine *e, const struct hm_emap *m, uint64_t *ret_done)
{
	struct hm_espace *sp = &e->spaces[m->space];
	int err;

	for (*ret_done = 0; *ret_done < m->nr; (*ret_done)++) {
		uint64_t i = *ret_done;

		err = hm_table_insert(e->table, m->gchunk + i,
				      hm_engine_chunk_delta(e, sp, m->idx + i, m->gchunk + i), NULL);
		if (err)
			return err;
	}
	return 0;
}

/* The mapping m: the table is reserved for it, nothing is mapped in its
 * range; on error nothing changed. */
static int map_new(struct hm_engine *e, const struct hm_emap *m)
{
	uint64_t done;
	int err;

	insert_map(e, m);
	e->mapped_chunks += m->nr;
	count_add(e, m->space, m->idx, m->nr, m->gchunk);
	err = insert_entries(e, m, &done);
	if (err == -ENOSPC) {
		/* its neighbourhood in the table is full: a bigger table, built
		 * from e->maps (which holds m already); the window follows it */
		err = hm_engine_table_rebuild(e, 2 * e->mapped_chunks);
		if (!err)
			return 0;
	}
	if (!err)
		return 0;
	for (uint64_t i = 0; i < done; i++)
		hm_table_remove(e->table, m->gchunk + i);
	/* m as it went in (merged or not) comes out again: no split needed */
	{
		size_t i = map_lower(e, m->gchunk);
		struct hm_emap *o = &e->maps[i];

		if (o->gchunk == m->gchunk && o->nr == m->nr) {
			memmove(o, o + 1, (e->nr_maps - i - 1) * sizeof(*o));
			e->nr_maps--;
		} else if (o->gchunk == m->gchunk) {
			o->gchunk += m->nr;
			o->idx += m->nr;
			o->nr -= m->nr;
		} else if (o->gchunk + o->nr == m->gchunk + m->nr) {
			o->nr -= m->nr;
		} else {
			/* merged between two: they are two again */
			struct hm_emap tail = { .gchunk = m->gchunk + m->nr, .space = o->space,
				.idx = o->idx + (m->gchunk + m->nr - o->gchunk),
				.nr = o->gchunk + o->nr - (m->gchunk + m->nr) };

			o->nr = m->gchunk - o->gchunk;
			memmove(o + 2, o + 1, (e->nr_maps - i - 1) * sizeof(*o));
			o[1] = tail;
			e->nr_maps++;
		}
	}
	e->mapped_chunks -= m->nr;
	count_del(e, m->space, m->idx, m->nr);
	return err;
}

static bool aligned(const struct hm_engine *e, uint64_t v)
{
	return !(v & (e->chunk - 1));
}

/* A guest range of whole chunks the table can name. */
static bool guest_range_ok(const struct hm_engine *e, uint64_t guest, uint64_t size)
{
	return aligned(e, guest) && aligned(e, size) && size && guest + size > guest &&
	       ((guest + size - 1) >> e->shift) < (HM_TABLE_EMPTY_CHUNK >> e->shift);
}

static int lock_for_change(struct hm_engine *e)
{
	pthread_mutex_lock(&e->lock);
	if (e->vk->lost) {
		pthread_mutex_unlock(&e->lock);
		return -ENODEV;
	}
	if (e->work.mode) {
		pthread_mutex_unlock(&e->lock);
		return -EBUSY;
	}
	return 0;
}

/* Under the lock, validated: map [idx, idx + n) of space id at g. */
static int do_map(struct hm_engine *e, uint32_t id, uint64_t idx, uint64_t n, uint64_t g,
		  uint32_t flags)
{
	struct hm_emap m = { .gchunk = g, .nr = n, .idx = idx, .space = id };
	uint64_t old = mapped_in(e, g, n);
	int err;

	if (old && !(flags & HM_MAP_REPLACE))
		return -EEXIST;
	/* a replace may split one mapping and insert one: two more at most */
	if (e->nr_maps + 1 + (old && splits(e, g, n)) > HM_ENGINE_MAX_MAPPINGS)
		return -EMFILE;
	if (e->mapped_chunks - old + n > e->p.max_chunks)
		return -E2BIG;
	err = hm_grow((void **)&e->maps, &e->cap_maps, e->nr_maps + 2, sizeof(*e->maps));
	if (err)
		return err;
	err = hm_engine_table_reserve(e, e->mapped_chunks - old + n);
	if (err)
		return err;
	if (old)
		unmap_range(e, g, n);
	err = map_new(e, &m);
	if (!err)
		e->maps_gen++;  /* the window's next sync looks at the span */
	return err;
}

int hm_engine_map(struct hm_engine *e, uint32_t id, uint64_t offset, uint64_t size,
		  uint64_t guest_addr, uint32_t flags)
{
	struct hm_espace *sp;
	int err;

	if (!e || id >= HM_ENGINE_MAX_SPACES || flags & ~HM_MAP_FLAGS_ALL ||
	    !guest_range_ok(e, guest_addr, size) || !aligned(e, offset))
		return -EINVAL;
	err = lock_for_change(e);
	if (err)
		return err;
	sp = &e->spaces[id];
	if (!sp->used)
		err = -ENOENT;
	else if (offset >= sp->size || size > sp->size - offset)
		err = -EINVAL;
	else
		err = do_map(e, id, offset >> e->shift, size >> e->shift, guest_addr >> e->shift,
			     flags);
	pthread_mutex_unlock(&e->lock);
	return err;
}

int hm_engine_unmap(struct hm_engine *e, uint64_t guest_addr, uint64_t size)
{
	uint64_t g, n;
	int err;

	if (!e || !guest_range_ok(e, guest_addr, size))
		return -EINVAL;
	g = guest_addr >> e->shift;
	n = size >> e->shift;
	err = lock_for_change(e);
	if (err)
		return err;
	if (!mapped_in(e, g, n))
		err = -ENOENT;
	else if (splits(e, g, n) && e->nr_maps >= HM_ENGINE_MAX_MAPPINGS)
		err = -EMFILE;
	else
		err = hm_grow((void **)&e->maps, &e->cap_maps, e->nr_maps + 1, sizeof(*e->maps));
	if (!err)
		unmap_range(e, g, n);
	pthread_mutex_unlock(&e->lock);
	return err;
}

int hm_engine_translate(struct hm_engine *e, uint64_t guest_addr, uint32_t *ret_id,
			uint64_t *ret_offset)
{
	uint64_t idx;
	uint32_t id;
	int err = -ENOENT;

	if (!e)
		return -EINVAL;
	pthread_mutex_lock(&e->lock);
	if (hm_engine_space_of_chunk(e, guest_addr >> e->shift, &id, &idx)) {
		if (ret_id)
			*ret_id = id;
		if (ret_offset)
			*ret_offset = (idx << e->shift) | (guest_addr & (e->chunk - 1));
		err = 0;
	}
	pthread_mutex_unlock(&e->lock);
	return err;
}

/* Under the lock: every mapping of space id goes, in one pass over
 * e->maps (its counts are not kept: the space goes next). */
int hm_engine_unmap_space(struct hm_engine *e, uint32_t id)
{
	struct hm_espace *sp = &e->spaces[id];
	size_t keep = 0;

	for (size_t k = 0; k < e->nr_maps; k++) {
		const struct hm_emap m = e->maps[k];

		if (m.space != id) {
			e->maps[keep++] = m;
			continue;
		}
		for (uint64_t i = 0; i < m.nr; i++) {
			if (sp->nmap[m.idx + i] == 1)
				hm_engine_drop_mirror(e, id, m.idx + i);
			hm_table_remove(e->table, m.gchunk + i);
		}
		e->mapped_chunks -= m.nr;
	}
	e->nr_maps = keep;
	return 0;
}

/* Under the lock, for hm_engine_add_space(): map all of space id at g. */
int hm_engine_map_space(struct hm_engine *e, uint32_t id, uint64_t guest_addr)
{
	struct hm_espace *sp = &e->spaces[id];

	if (!guest_range_ok(e, guest_addr, sp->size))
		return -EINVAL;
	return do_map(e, id, 0, sp->nr_chunks, guest_addr >> e->shift, 0);
}

void hm_gmap_finish(struct hm_engine *e)
{
	free(e->maps);
	e->maps = NULL;
	e->nr_maps = e->cap_maps = 0;
}
