// SPDX-License-Identifier: LGPL-2.1-or-later
/*
 * Table placement: the engine's device table (lib/table.c: slots of
 * {chunk number, delta}) and the marks beside it, built for every mapped
 * guest chunk (gmap.c) and rebuilt bigger when a new mapping does not fit.  A chunk's
 * delta names its published mirror, else its home import (space.c), which
 * hm_engine_import_named() makes at the first dispatch boundary after the
 * chunk is mapped, before the table is flushed for the device.
 *
 * The table lies in device-local host-visible memory when the device has
 * such a type and the allocation succeeds, else in host-visible memory;
 * the host alone writes it, between dispatches.  The marks lie in host
 * memory the device imports (host-visible memory where the import fails).
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "internal.h"

/* Current delta of chunk idx of sp, mapped at guest chunk g: its
 * published mirror (mapped once), else home; a home not imported yet has
 * a placeholder (device address 0 at the chunk's start), replaced when
 * its piece is imported at the next dispatch boundary, before the device
 * reads the table (space.c). */
int64_t hm_engine_chunk_delta(const struct hm_engine *e, const struct hm_espace *sp,
			      uint64_t idx, uint64_t g)
{
	const struct hm_chunk *c = &sp->ch[idx];
	uint64_t dev;

	if (c->mirror != HM_NO_MIRROR && (c->flags & HM_CH_PUBLISHED))
		dev = hm_pool_mirror_addr(e, c->mirror);
	else if (hm_espace_imported(e, sp, idx))
		dev = hm_espace_home_addr(e, sp, idx);
	else
		dev = 0;
	return (int64_t)(dev - (g << e->shift));
}

/* One pass over the mappings: the entries of chunks in pieces just
 * imported, placeholders until now (hm_engine_chunk_delta()), name the
 * import. */
static int name_fresh(struct hm_engine *e)
{
	int err = 0;

	for (size_t k = 0; k < e->nr_maps && !err; k++) {
		const struct hm_emap *m = &e->maps[k];
		struct hm_espace *sp = &e->spaces[m->space];

		for (uint64_t c = m->idx; c < m->idx + m->nr && !err; ) {
			struct hm_import_piece *pc = &sp->pieces[c / sp->piece_chunks];
			uint64_t end = (c / sp->piece_chunks + 1) * sp->piece_chunks;

			if (end > m->idx + m->nr)
				end = m->idx + m->nr;
			for (; pc->fresh && c < end && !err; c++) {
				uint64_t g = m->gchunk + (c - m->idx);

				err = hm_engine_repoint(e, g, hm_engine_chunk_delta(e, sp, c, g));
			}
			c = end;
		}
	}
	return err;
}

/*
 * At a dispatch boundary, before the table is flushed: import every piece
 * that a table entry names and that is not imported, and point those
 * entries at it.  On error the pieces imported so far stay (their entries
 * final), the rest keep their placeholders and are tried at the next
 * boundary; the caller runs nothing on the device.
 */
int hm_engine_import_named(struct hm_engine *e)
{
	uint64_t t0;
	int err = 0, err2;

	if (!e->nr_import_pending)
		return 0;
	t0 = hm_now_ns();
	for (uint32_t id = 0; id < e->spaces_end && e->nr_import_pending && !err; id++) {
		struct hm_espace *sp = &e->spaces[id];

		if (!sp->used)
			continue;
		for (uint64_t i = 0; i < sp->nr_pieces && !err; i++) {
			struct hm_import_piece *pc = &sp->pieces[i];

			if (pc->buf.buf || !pc->nr_mapped)
				continue;
			err = hm_espace_import_piece(e, sp, i);
			pc->fresh = !err;
		}
	}
	/* what was imported is named even when a later piece was refused */
	err2 = name_fresh(e);
	for (uint32_t id = 0; id < e->spaces_end; id++)
		for (uint64_t i = 0; e->spaces[id].used && i < e->spaces[id].nr_pieces; i++)
			e->spaces[id].pieces[i].fresh = false;
	if (!err)
		err = err2;
	e->st.ns_import += hm_now_ns() - t0;
	if (err)
		e->st.import_failures++;
	return err;
}

static int insert_maps(struct hm_engine *e, struct hm_table *t)
{
	for (size_t k = 0; k < e->nr_maps; k++) {
		const struct hm_emap *m = &e->maps[k];
		const struct hm_espace *sp = &e->spaces[m->space];

		for (uint64_t i = 0; i < m->nr; i++) {
			int err = hm_table_set(t, m->gchunk + i,
					       hm_engine_chunk_delta(e, sp, m->idx + i,
								     m->gchunk + i), NULL);

			if (err)
				return err;
		}
	}
	return 0;
}

void hm_engine_table_free(struct hm_engine *e)
{
	hm_table_free(e->table);
	e->table = NULL;
	hm_vk_buffer_free(e->vk, &e->table_buf);
	hm_vk_buffer_free(e->vk, &e->marks_buf);
	if (e->marks_mem)
		munmap(e->marks_mem, e->marks_map_bytes);
	e->marks_mem = NULL;
}

/* Table memory: device-local host-visible where there is room, else host. */
static int alloc_table_mem(struct hm_engine *e, size_t bytes, struct hm_vk_buffer *ret,
			   bool *ret_device_local)
{
	uint32_t type;

	if (!(e->p.flags & HM_ENGINE_TABLE_HOST) &&
	    !hm_vk_memory_type(e->vk, ~0u, HM_VK_MEM_DEVICE_HOST, &type) &&
	    hm_vk_heap_size(e->vk, type) >= 4 * (uint64_t)bytes &&
	    !hm_vk_buffer_new(e->vk, bytes, HM_VK_MEM_DEVICE_HOST, ret)) {
		*ret_device_local = true;
		return 0;
	}
	*ret_device_local = false;
	return hm_vk_buffer_new(e->vk, bytes, HM_VK_MEM_HOST, ret);
}

static int alloc_marks(struct hm_engine *e, uint32_t nr_slots, struct hm_vk_buffer *ret,
		       void **ret_mem, size_t *ret_map, bool *ret_imported)
{
	/* 64 KiB granules: some drivers round imported buffers up to that */
	uint64_t align = e->vk->min_import_align > 65536 ? e->vk->min_import_align : 65536;
	size_t bytes = hm_marks_bytes_for(nr_slots);
	size_t map = (bytes + align - 1) / align * align;
	uint8_t *raw, *mem;
	int err;

	*ret_mem = NULL;
	*ret_imported = false;
	raw = mmap(NULL, map + align, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (raw != MAP_FAILED) {
		/* keep the aligned part only */
		mem = (uint8_t *)(((uintptr_t)raw + align - 1) & ~(uintptr_t)(align - 1));
		if (mem > raw)
			munmap(raw, mem - raw);
		munmap(mem + map, raw + align - mem);
		memset(mem, 0, map);
		if (e->vk->has_host_import && !hm_vk_import_host(e->vk, mem, map, ret)) {
			*ret_mem = mem;
			*ret_map = map;
			*ret_imported = true;
			return 0;
		}
		munmap(mem, map);
	}
	err = hm_vk_buffer_new(e->vk, bytes, HM_VK_MEM_HOST, ret);
	if (!err)
		memset(ret->map, 0, bytes);
	return err;
}

/* A table for nr_chunks (at least), holding every mapped chunk. */
int hm_engine_table_rebuild(struct hm_engine *e, uint64_t nr_chunks)
{
	uint32_t nr_home = hm_table_nr_home_for(nr_chunks ? nr_chunks : 1);
	struct hm_vk_buffer tb, mb;
	struct hm_table *t = NULL;
	bool dl, imported;
	void *mmem;
	size_t mmap_bytes = 0;
	int err;

	for (int tries = 0; tries < 8; tries++) {
		memset(&tb, 0, sizeof(tb));
		memset(&mb, 0, sizeof(mb));
		err = alloc_table_mem(e, hm_table_bytes_for(nr_home), &tb, &dl);
		if (err)
			return err;
		err = hm_table_new(tb.map, tb.size, nr_home, e->shift, &t);
		if (err) {
			hm_vk_buffer_free(e->vk, &tb);
			return err;
		}
		err = insert_maps(e, t);
		if (!err)
			break;
		hm_table_free(t);
		t = NULL;
		hm_vk_buffer_free(e->vk, &tb);
		if (err != -ENOSPC)
			return err;
		nr_home = hm_table_grow_nr_home(nr_home);
	}
	if (!t)
		return -ENOSPC;
	err = alloc_marks(e, hm_table_nr_slots(t), &mb, &mmem, &mmap_bytes, &imported);
	if (err) {
		hm_table_free(t);
		hm_vk_buffer_free(e->vk, &tb);
		return err;
	}
	hm_engine_table_free(e);
	e->table = t;
	e->table_buf = tb;
	e->table_device_local = dl;
	e->marks_buf = mb;
	e->marks_mem = mmem;
	e->marks_map_bytes = mmap_bytes;
	e->marks_imported = imported;
	e->st.table_nr_home = nr_home;
	e->st.table_device_local = dl;
	e->st.marks_imported = imported;
	e->table_gen++;                 /* the window follows the new table at its sync */
	return 0;
}

/* Room for nr_chunks entries: a bigger table (built from e->maps) where
 * this one is too small; the window then follows the new table.  On error
 * the table is as it was. */
int hm_engine_table_reserve(struct hm_engine *e, uint64_t nr_chunks)
{
	int err;

	if (e->table && hm_table_nr_home(e->table) >= hm_table_nr_home_for(nr_chunks))
		return 0;
	/* at least twice what is mapped: a rebuild is O(entries), amortised */
	err = hm_engine_table_rebuild(e, nr_chunks > 2 * e->mapped_chunks ? nr_chunks :
					 2 * e->mapped_chunks);
	return err;
}
