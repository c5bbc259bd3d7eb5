// SPDX-License-Identifier: LGPL-2.1-or-later
/*
 * Home imports of guest spaces.
 *
 * A space's home pages reach the device through its device view
 * (hm_space_device_view(): the same pages, never write-protected by the
 * guards), imported with VK_EXT_external_memory_host in pieces, each a
 * multiple of the chunk size, so no chunk straddles two imports.  A piece
 * is imported at the first dispatch boundary after a mapping named one of
 * its chunks, before the table reaches the device (table.c): adding or
 * mapping a space imports nothing, and a driver that pins what it imports
 * (NVIDIA) pins only what the guest mapped.  dma-buf import is not used:
 * neither lavapipe nor the H200's NVIDIA driver offers
 * VK_EXT_external_memory_dma_buf, and the watch API exports no dma-buf
 * (Documentation/engine.rst).  table.c names each chunk's home (or
 * mirror) in the device table.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "internal.h"

/* Lazy import: a space is imported in pieces of HM_IMPORT_PIECE, or of a
 * 256th of a space larger than 256 of them (Documentation/decisions.rst) */
#define HM_IMPORT_PIECE		(64ull << 20)
#define HM_IMPORT_MAX_PIECES	256

#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE 23
#endif

int hm__engine_populate_view(void *view, uint64_t size)
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

static int cmp_key(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

/*
 * Sort n records of stride words at a, ascending by their first word.
 * The engine's lists are a few ascending runs (the window's dirty list:
 * the harvest's drops, then each upload try's publishes; an upload's
 * candidates: the harvest's order), so the runs are merged pairwise: one
 * pass over a list of two runs, none over a sorted one.  qsort() took
 * 150-180 us over 5,800 candidates in one or two runs on the development
 * machine (500 us shuffled), and the window sync's planning 1.0 of its
 * 2.3 ms on the H200 host.  Any order is sorted (each pass halves the
 * runs); qsort() where there is no memory for the merge.
 */
void hm_sort_runs(uint64_t *a, size_t n, size_t stride)
{
	size_t runs = 1, bytes = stride * sizeof(*a);
	uint64_t *tmp, *src = a, *dst;

	for (size_t i = 1; i < n; i++)
		runs += a[i * stride] < a[(i - 1) * stride];
	if (runs == 1)
		return;
	tmp = malloc(n * bytes);
	if (!tmp) {
		qsort(a, n, bytes, cmp_key);
		return;
	}
	dst = tmp;
	while (runs > 1) {
		size_t i = 0, k = 0;
		uint64_t *t;

		runs = 0;
		while (i < n) {
			size_t m = i + 1, j;

			while (m < n && src[m * stride] >= src[(m - 1) * stride])
				m++;            /* [i, m): a run */
			j = m;
			while (j < n && (j == m || src[j * stride] >= src[(j - 1) * stride]))
				j++;            /* [m, j): the next, maybe empty */
			for (size_t x = i, y = m; x < m || y < j; k++) {
				size_t f = y >= j || (x < m && src[x * stride] <= src[y * stride]) ?
					   x++ : y++;

				for (size_t w = 0; w < stride; w++)
					dst[k * stride + w] = src[f * stride + w];
			}
			runs++;
			i = j;
		}
		t = src;
		src = dst;
		dst = t;
	}
	if (src != a)
		memcpy(a, src, n * bytes);
	free(tmp);
}

static void free_pieces(struct hm_engine *e, struct hm_espace *sp)
{
	for (unsigned i = 0; i < sp->nr_pieces; i++) {
		struct hm_import_piece *pc = &sp->pieces[i];

		if (pc->buf.buf) {
			e->st.import_pieces--;
			e->st.import_bytes -= pc->buf.size;
		} else if (pc->nr_mapped) {
			e->nr_import_pending--;
		}
		hm_vk_buffer_free(e->vk, &pc->buf);
	}
	free(sp->pieces);
	sp->pieces = NULL;
	sp->nr_pieces = 0;
}

/*
 * The piece size of a space: HM_IMPORT_PIECE (a chunk if that is more),
 * or a 256th of a larger space (so that no space takes more than 256 of
 * the driver's maxMemoryAllocationCount), at most what one import may be;
 * 0 where that is less than a chunk.
 */
static uint64_t piece_bytes_for(const struct hm_engine *e, uint64_t size, uint64_t align)
{
	uint64_t piece = HM_IMPORT_PIECE, limit = e->vk->max_buffer;

	if (piece < e->chunk)
		piece = e->chunk;
	while (piece < size / HM_IMPORT_MAX_PIECES)
		piece *= 2;
	if (e->p.max_import_bytes && e->p.max_import_bytes < limit)
		limit = e->p.max_import_bytes;
	if (piece > limit)
		piece = limit;
	if (piece > size)
		piece = size;
	piece = piece / e->chunk * e->chunk;
	return piece / align * align;
}

int hm_espace_import(struct hm_engine *e, struct hm_espace *sp)
{
	uint64_t align = e->vk->min_import_align ? e->vk->min_import_align : 4096;
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
	sp->piece_bytes = piece_bytes_for(e, sp->size, align);
	if (!sp->piece_bytes)
		return -EINVAL;
	sp->piece_chunks = sp->piece_bytes >> e->shift;
	sp->nr_pieces = (sp->size + sp->piece_bytes - 1) / sp->piece_bytes;
	/* nothing is imported yet: hm_engine_import_named() (table.c) does it
	 * at the first dispatch boundary after the table names a chunk of a
	 * piece */
	sp->pieces = calloc(sp->nr_pieces, sizeof(*sp->pieces));
	if (!sp->pieces) {
		sp->nr_pieces = 0;
		return -ENOMEM;
	}
	return 0;
}

void hm_espace_release(struct hm_engine *e, struct hm_espace *sp)
{
	free_pieces(e, sp);
	hm_consumer_free(sp->cons);
	free(sp->ch);
	free(sp->ugen);
	free(sp->wfresh);
	free(sp->nmap);
	free(sp->gchunk);
	memset(sp, 0, sizeof(*sp));
}

/*
 * Chunks [idx, idx + n) of space id gained (delta 1) or lost (-1) one
 * mapping: the count of mapped chunks of each piece they lie in follows,
 * and so does the count of pieces the table names without an import.
 */
void hm_espace_note_mapped(struct hm_engine *e, uint32_t id, uint64_t idx, uint64_t n, int delta)
{
	struct hm_espace *sp = &e->spaces[id];

	while (n) {
		uint64_t i = idx / sp->piece_chunks;
		uint64_t k = sp->piece_chunks - idx % sp->piece_chunks;
		struct hm_import_piece *pc = &sp->pieces[i];
		bool named = pc->nr_mapped;

		if (k > n)
			k = n;
		if (delta > 0)
			pc->nr_mapped += k;
		else
			pc->nr_mapped -= k;
		if (!pc->buf.buf && named != !!pc->nr_mapped) {
			if (pc->nr_mapped)
				e->nr_import_pending++;
			else
				e->nr_import_pending--;
		}
		idx += k;
		n -= k;
	}
}

/* Import piece i of sp; a driver that refuses a view with pages missing
 * gets the piece again with its every page made to exist. */
int hm_espace_import_piece(struct hm_engine *e, struct hm_espace *sp, uint64_t i)
{
	uint64_t off = i * sp->piece_bytes;
	uint64_t len = sp->size - off < sp->piece_bytes ? sp->size - off : sp->piece_bytes;
	struct hm_import_piece *pc = &sp->pieces[i];
	void *p = (char *)sp->view + off;
	int err;

	err = hm_vk_import_host(e->vk, p, len, &pc->buf);
	if (err && err != -EINVAL && err != -EOPNOTSUPP) {
		err = hm__engine_populate_view(p, len);
		if (!err)
			err = hm_vk_import_host(e->vk, p, len, &pc->buf);
	}
	if (err)
		return err;
	e->st.import_pieces++;
	e->st.import_bytes += len;
	if (pc->nr_mapped)
		e->nr_import_pending--;
	return 0;
}

bool hm_espace_imported(const struct hm_engine *e, const struct hm_espace *sp, uint64_t idx)
{
	return sp->pieces[(idx << e->shift) / sp->piece_bytes].buf.buf != VK_NULL_HANDLE;
}

int hm_espace_home_loc(const struct hm_engine *e, const struct hm_espace *sp, uint64_t idx,
		       VkBuffer *ret_buf, uint64_t *ret_off)
{
	uint64_t off = idx << e->shift;
	unsigned i = off / sp->piece_bytes;

	if (i >= sp->nr_pieces || !sp->pieces[i].buf.buf)
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
