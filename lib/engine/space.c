// SPDX-License-Identifier: LGPL-2.1-or-later
/*
 * Home imports of guest spaces.
 *
 * A space's home pages reach the device through its device view
 * (hm_space_device_view(): the same pages, never write-protected by the
 * guards), imported with VK_EXT_external_memory_host in pieces of at most
 * maxMemoryAllocationSize, each a multiple of the chunk size, so no chunk
 * straddles two imports.  dma-buf import is not used: neither lavapipe nor
 * the H200's NVIDIA driver offers VK_EXT_external_memory_dma_buf, and the
 * watch API exports no dma-buf (Documentation/engine.rst).  table.c
 * names each chunk's home (or mirror) in the device table.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "internal.h"

#define HM_IMPORT_MIN_PIECE (256ull << 20)

#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE 23
#endif

int hm_engine_populate_view(void *view, uint64_t size)
{
	long page = sysconf(_SC_PAGESIZE);
	uint64_t ps = page > 0 ? (uint64_t)page : 4096;

	if (!view || (uintptr_t)view % ps || size % ps)
		return -EINVAL;
	if (!size)
		return 0;
	if (!madvise(view, size, MADV_POPULATE_WRITE))
		return 0;
	if (errno != EINVAL && errno != ENOSYS)
		return -errno;
	/* old kernel, or a mapping populate does not handle (VM_PFNMAP/VM_IO):
	 * an atomic read-modify-write that adds nothing faults each page in
	 * for writing and cannot lose a concurrent store to the same word */
	for (uint64_t off = 0; off < size; off += ps)
		__atomic_fetch_add((volatile uint32_t *)((char *)view + off), 0u,
				   __ATOMIC_RELAXED);
	return 0;
}

int hm_grow(void **arr, size_t *cap, size_t need, size_t elem)
{
	size_t n = *cap ? *cap : 64;
	void *p;

	if (need <= *cap)
		return 0;
	while (n < need)
		n *= 2;
	p = realloc(*arr, n * elem);
	if (!p)
		return -ENOMEM;
	*arr = p;
	*cap = n;
	return 0;
}

static void free_pieces(struct hm_engine *e, struct hm_espace *sp)
{
	for (unsigned i = 0; i < sp->nr_pieces; i++)
		hm_vk_buffer_free(e->vk, &sp->pieces[i].buf);
	free(sp->pieces);
	sp->pieces = NULL;
	sp->nr_pieces = 0;
}

static int import_pieces(struct hm_engine *e, struct hm_espace *sp, uint64_t piece)
{
	unsigned n = (sp->size + piece - 1) / piece;
	int err;

	sp->pieces = calloc(n, sizeof(*sp->pieces));
	if (!sp->pieces)
		return -ENOMEM;
	sp->piece_bytes = piece;
	for (unsigned i = 0; i < n; i++) {
		uint64_t off = (uint64_t)i * piece;
		uint64_t len = sp->size - off < piece ? sp->size - off : piece;

		err = hm_vk_import_host(e->vk, (char *)sp->view + off, len, &sp->pieces[i].buf);
		if (err) {
			free_pieces(e, sp);
			return err;
		}
		sp->nr_pieces++;
	}
	return 0;
}

/* A driver may refuse one large import: halve, down to 256 MiB. */
static int import_halving(struct hm_engine *e, struct hm_espace *sp, uint64_t piece,
			  uint64_t align)
{
	int err;

	for (;;) {
		err = import_pieces(e, sp, piece);
		if (!err)
			return 0;
		if (err == -EINVAL || err == -EOPNOTSUPP || piece <= HM_IMPORT_MIN_PIECE)
			return err;
		piece = (piece / 2) / e->chunk * e->chunk;
		piece = piece / align * align;
		if (!piece)
			return err;
	}
}

int hm_espace_import(struct hm_engine *e, struct hm_espace *sp)
{
	uint64_t align = e->vk->min_import_align ? e->vk->min_import_align : 4096;
	uint64_t piece;
	int err;

	err = hm_consumer_new(sp->s, 0, &sp->cons);
	if (err)
		return err;
	err = hm_space_device_view(sp->s, &sp->view);
	if (err)
		return err;
	if (!e->vk->has_host_import)
		return -EOPNOTSUPP;
	if ((uintptr_t)sp->view % align || sp->size % align)
		return -EINVAL;
	piece = e->vk->max_buffer;
	if (e->p.max_import_bytes && e->p.max_import_bytes < piece)
		piece = e->p.max_import_bytes;
	if (piece > sp->size)
		piece = sp->size;
	piece = piece / e->chunk * e->chunk;
	piece = piece / align * align;
	if (!piece)
		return -EINVAL;
	/* lazy residency: the view as it is, pages missing; a driver that
	 * refuses that (NVIDIA 580: -ENOSPC for never-written pages) gets
	 * it again with every page made to exist */
	err = import_halving(e, sp, piece, align);
	if (err && err != -EINVAL && err != -EOPNOTSUPP) {
		err = hm_engine_populate_view(sp->view, sp->size);
		if (!err)
			err = import_halving(e, sp, piece, align);
	}
	if (err)
		return err;
	e->st.import_pieces += sp->nr_pieces;
	return 0;
}

void hm_espace_release(struct hm_engine *e, struct hm_espace *sp)
{
	if (sp->nr_pieces)
		e->st.import_pieces -= sp->nr_pieces;
	free_pieces(e, sp);
	hm_consumer_free(sp->cons);
	free(sp->ch);
	free(sp->ugen);
	free(sp->wfresh);
	free(sp->nmap);
	free(sp->gchunk);
	memset(sp, 0, sizeof(*sp));
}

int hm_espace_home_loc(const struct hm_engine *e, const struct hm_espace *sp, uint64_t idx,
		       VkBuffer *ret_buf, uint64_t *ret_off)
{
	uint64_t off = idx << e->shift;
	unsigned i = off / sp->piece_bytes;

	if (i >= sp->nr_pieces)
		return -EINVAL;
	*ret_buf = sp->pieces[i].buf.buf;
	*ret_off = off - (uint64_t)i * sp->piece_bytes;
	return 0;
}

uint64_t hm_espace_home_addr(const struct hm_engine *e, const struct hm_espace *sp, uint64_t idx)
{
	uint64_t off = idx << e->shift;
	unsigned i = off / sp->piece_bytes;

	return sp->pieces[i].buf.addr + (off - (uint64_t)i * sp->piece_bytes);
}
