// SPDX-License-Identifier: LGPL-2.1-or-later
/*
 * The mirror window (D969a): one device buffer over the engine's guest
 * spaces at one delta, in which a speculative load finds a mirrored
 * chunk's bytes at guest + delta and every other word reads
 * HM_WINDOW_SENTINEL.
 *
 * Layout: [guard][lo, hi) of the mapped guest chunks][guard], each guard
 * HM_WINDOW_GUARD_BYTES of sentinel, so that a guest address outside the
 * spaces, clamped into the window, reads the sentinel too.
 *
 * Sparse form, where the engine's hm_vk binds sparse with aliasing
 * (HM_VK_SPARSE, sparseResidencyAliased; not HM_ENGINE_WINDOW_DENSE): the
 * window is a sparse buffer; a published mirror's pool memory is bound at
 * its window offset (the same memory the pool's slab names: nothing is
 * copied), every other block to one sentinel region, aliased.  The binds
 * are made at the dispatch boundary, one vkQueueBindSparse waited for.
 * A sparse setup the device refuses falls back to the dense form.
 *
 * Dense form, for devices without sparse binding (lavapipe):
 * the buffer holds real memory for the whole span.  A published mirror
 * lives in the window: the table names its window bytes, so that the
 * device's loads (speculative or through the helper) and its stores see
 * one copy.  The pool slot keeps the copy the engine uploads into, diffs
 * and copies home from (twin.c, copyback.c, unchanged): sync copies it
 * into the window when the chunk is published, and after a dispatch the
 * chunks the device wrote are copied back out of the window into it.
 *
 * The window changes only at dispatch boundaries, with the table (rule 1):
 * mirror.c and upload.c note each chunk whose table entry changed
 * (hm_window_note(), kept in mirror.c so that the window reads the
 * mirrors and not the other way round); hm_window_sync(), just before the dispatch, makes
 * the window agree with the table for exactly those chunks: a published
 * mirror copied in (and the table repointed at it), anything else filled
 * with the sentinel.  A dispatch shared with the CPU (rule 5) is given the
 * guard alone as its window, so that every speculative load misses and
 * reads home.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"
#include "../bits.h"

#define HM_WINDOW_GUARD_ONLY_BYTES 4096

static uint64_t window_limit(struct hm_engine *e)
{
	uint32_t type;
	uint64_t lim = e->vk->max_buffer;

	if (!hm_vk_memory_type(e->vk, ~0u, HM_VK_MEM_DEVICE, &type) &&
	    hm_vk_heap_size(e->vk, type) / 4 < lim)
		lim = hm_vk_heap_size(e->vk, type) / 4;
	if (e->p.max_window_bytes && e->p.max_window_bytes < lim)
		lim = e->p.max_window_bytes;
	return lim;
}

#define HM_WINDOW_SPARSE_FLAGS (VK_BUFFER_CREATE_SPARSE_BINDING_BIT | \
				VK_BUFFER_CREATE_SPARSE_RESIDENCY_BIT | \
				VK_BUFFER_CREATE_SPARSE_ALIASED_BIT)
#define HM_WINDOW_SENTINEL_MAX (64ull << 20)   /* one bind covers this much */

/* A sparse buffer of bytes, unbound, with its device address. */
static int sparse_buffer_new(struct hm_engine *e, VkDeviceSize bytes, struct hm_vk_buffer *ret,
			     VkMemoryRequirements *ret_req)
{
	VkBufferCreateInfo bci = {
		.sType = VK_STRUCTURE_TYPE_BUFFER_CREATE_INFO,
		.flags = HM_WINDOW_SPARSE_FLAGS,
		.size = bytes,
		.usage = VK_BUFFER_USAGE_STORAGE_BUFFER_BIT | VK_BUFFER_USAGE_TRANSFER_SRC_BIT |
			 VK_BUFFER_USAGE_TRANSFER_DST_BIT | VK_BUFFER_USAGE_SHADER_DEVICE_ADDRESS_BIT,
		.sharingMode = VK_SHARING_MODE_EXCLUSIVE,
	};
	VkBufferDeviceAddressInfo bai = { .sType = VK_STRUCTURE_TYPE_BUFFER_DEVICE_ADDRESS_INFO };
	int err;

	memset(ret, 0, sizeof(*ret));
	err = hm_vk_errno(vkCreateBuffer(e->vk->dev, &bci, NULL, &ret->buf));
	if (err)
		return err;
	if (ret_req)
		vkGetBufferMemoryRequirements(e->vk->dev, ret->buf, ret_req);
	bai.buffer = ret->buf;
	ret->addr = vkGetBufferDeviceAddress(e->vk->dev, &bai);
	ret->size = bytes;
	if (!ret->addr) {
		hm_vk_buffer_free(e->vk, ret);
		return -EIO;
	}
	return 0;
}

/* Can the window be sparse here?  Its block must divide a chunk and the
 * guard, the pool's and the sentinel's memory types must be bindable. */
static int sparse_init(struct hm_engine *e)
{
	struct hm_window *w = &e->win;
	struct hm_vk_buffer probe;
	VkMemoryRequirements req;
	uint64_t bytes;
	uint32_t type;
	int err;

	err = sparse_buffer_new(e, HM_WINDOW_GUARD_BYTES, &probe, &req);
	if (err)
		return err;
	hm_vk_buffer_free(e->vk, &probe);
	if (!req.alignment || e->chunk % req.alignment || HM_WINDOW_GUARD_BYTES % req.alignment ||
	    hm_vk_memory_type(e->vk, req.memoryTypeBits, HM_VK_MEM_DEVICE, &type))
		return -EOPNOTSUPP;
	bytes = HM_WINDOW_SENTINEL_MAX / req.alignment * req.alignment;
	err = hm_vk_buffer_new(e->vk, bytes, HM_VK_MEM_DEVICE, &w->sentinel);
	if (err)
		return err;
	if (!(req.memoryTypeBits & (1u << w->sentinel.mem_type))) {
		hm_vk_buffer_free(e->vk, &w->sentinel);
		return -EOPNOTSUPP;
	}
	w->align = req.alignment;
	w->type_bits = req.memoryTypeBits;
	w->sparse = true;
	e->st.window_sparse = true;
	return 0;
}

static int add_bind(struct hm_window *w, uint64_t off, uint64_t size, VkDeviceMemory mem,
		    uint64_t mem_off)
{
	if (hm_grow((void **)&w->binds, &w->cap_binds, w->nr_binds + 1, sizeof(*w->binds)))
		return -ENOMEM;
	w->binds[w->nr_binds++] = (VkSparseMemoryBind){ .resourceOffset = off, .size = size,
							.memory = mem, .memoryOffset = mem_off };
	return 0;
}

/* The sentinel region bound over [off, off + size) of the window. */
static int bind_sentinel(struct hm_window *w, uint64_t off, uint64_t size)
{
	while (size) {
		uint64_t n = size < w->sentinel.size ? size : w->sentinel.size;
		int err = add_bind(w, off, n, w->sentinel.mem, 0);

		if (err)
			return err;
		off += n;
		size -= n;
	}
	return 0;
}

/* Make the planned binds, and wait for them (the dispatch follows). */
static int sparse_submit(struct hm_engine *e)
{
	struct hm_window *w = &e->win;
	VkSparseBufferMemoryBindInfo bi = { .buffer = w->buf.buf, .bindCount = w->nr_binds,
					    .pBinds = w->binds };
	VkBindSparseInfo si = { .sType = VK_STRUCTURE_TYPE_BIND_SPARSE_INFO,
				.bufferBindCount = 1, .pBufferBinds = &bi };
	VkFenceCreateInfo fci = { .sType = VK_STRUCTURE_TYPE_FENCE_CREATE_INFO };
	VkFence fence;
	int err;

	if (!w->nr_binds)
		return 0;
	err = hm_vk_errno(vkCreateFence(e->vk->dev, &fci, NULL, &fence));
	if (err)
		return err;
	pthread_mutex_lock(&e->vk->lock);
	err = hm_vk_errno(vkQueueBindSparse(e->vk->queue, 1, &si, fence));
	pthread_mutex_unlock(&e->vk->lock);
	if (!err)
		err = hm_vk_errno(vkWaitForFences(e->vk->dev, 1, &fence, VK_TRUE,
						  e->p.timeout_ns ? e->p.timeout_ns :
								    10000000000ull));
	vkDestroyFence(e->vk->dev, fence, NULL);
	if (!err)
		e->st.window_binds += w->nr_binds;
	w->nr_binds = 0;
	return err;
}

int hm_window_init(struct hm_engine *e)
{
	struct hm_window *w = &e->win;
	VkCommandBuffer cb;
	int err;

	memset(w, 0, sizeof(*w));
	w->enabled = e->mirrors && !(e->p.flags & HM_ENGINE_NO_WINDOW);
	w->limit = window_limit(e);
	err = hm_vk_buffer_new(e->vk, HM_WINDOW_GUARD_ONLY_BYTES, HM_VK_MEM_DEVICE, &w->guard);
	if (!err)
		err = hm_vk_cmd_new(e->vk, &w->cmd);
	if (err)
		return err;
	err = hm_vk_cmd_start(e->vk, &w->cmd, &cb);
	if (err)
		return err;
	vkCmdFillBuffer(cb, w->guard.buf, 0, VK_WHOLE_SIZE, HM_WINDOW_SENTINEL);
	if (w->enabled && e->vk->sparse && e->vk->sparse_aliased &&
	    !(e->p.flags & HM_ENGINE_WINDOW_DENSE) && !sparse_init(e))
		vkCmdFillBuffer(cb, w->sentinel.buf, 0, VK_WHOLE_SIZE, HM_WINDOW_SENTINEL);
	hm_vk_cmd_barrier(cb);
	return hm_vk_cmd_run(e->vk, &w->cmd, e->p.timeout_ns);
}

void hm_window_finish(struct hm_engine *e)
{
	struct hm_window *w = &e->win;

	hm_vk_buffer_free(e->vk, &w->buf);
	hm_vk_buffer_free(e->vk, &w->guard);
	hm_vk_buffer_free(e->vk, &w->sentinel);
	hm_vk_cmd_free(e->vk, &w->cmd);
	free(w->dirty);
	free(w->ops);
	free(w->regs);
	hm_vk_buffer_free(e->vk, &w->descs);
	free(w->binds);
	free(w->held);
	memset(w, 0, sizeof(*w));
}

/* The span of the mapped guest chunks, bytes [*lo, *hi) (lo >= hi: none). */
static void mapped_span(const struct hm_engine *e, uint64_t *lo, uint64_t *hi)
{
	*lo = UINT64_MAX;
	*hi = 0;
	if (!e->nr_maps)
		return;
	*lo = e->maps[0].gchunk << e->shift;
	*hi = (e->maps[e->nr_maps - 1].gchunk + e->maps[e->nr_maps - 1].nr) << e->shift;
}

/* A window covers more than the mapped span after an unmap: still right
 * (the unmapped chunks' bytes became sentinel with their mirrors' drops),
 * so only a span grown past the one built for makes a new window. */
void hm_window_maps_changed(struct hm_engine *e)
{
	struct hm_window *w = &e->win;
	uint64_t lo, hi;

	mapped_span(e, &lo, &hi);
	if (lo < hi && (lo < w->span_lo || hi > w->span_hi))
		w->rebuild = true;
}

/*
 * The flagged units are bits of sp->wfresh, a chunk's 1 << wshift of them
 * consecutive from idx << wshift.  They are found, counted and cleared a
 * word at a time: a window sync visits thousands of chunks (the
 * workload's 6,100 copies a dispatch on the H100), 16 page units each.
 */

/*
 * Does the dispatch read and write chunk idx of sp in the dense window,
 * never at its pool slot?  True where the window holds the chunk's
 * published mirror (held: the table names its window bytes), until the
 * next sync.
 */
bool hm_window_holds(const struct hm_engine *e, const struct hm_espace *sp, uint64_t idx)
{
	const struct hm_window *w = &e->win;
	uint64_t guest = hm_espace_gchunk(sp, idx) << e->shift, k;

	if (!w->enabled || !w->buf.buf || w->sparse || guest < w->guest_lo ||
	    guest - w->guest_lo >= w->covered)
		return false;
	k = (guest - w->guest_lo) >> e->shift;
	return k < w->nr_held && w->held[k];
}

/* Chunk idx's units copied into the window, or never to be: unflagged. */
static void fresh_clear(struct hm_espace *sp, uint64_t idx)
{
	uint64_t from, end;

	if (!sp || !sp->wfresh)
		return;
	from = idx << sp->wshift;
	end = (idx + 1) << sp->wshift;
	for (uint64_t w = from / 64; w * 64 < end; w++)
		sp->wfresh[w] &= ~hm_range_mask(w, from, end);
}

/*
 * The runs of op's chunk to copy into the window, bytes from the chunk's
 * start: the whole chunk, or (op->part) each run of flagged units.  From
 * *from (start at 0) to the next run, *ret_off and *ret_len; false: none left.
 */
static bool op_run(const struct hm_engine *e, const struct hm_window_op *op, uint64_t *from,
		   uint64_t *ret_off, uint64_t *ret_len)
{
	const struct hm_espace *sp;
	uint64_t base, end, ub, u, v;

	if (!op->part) {
		if (*from)
			return false;
		*ret_off = 0;
		*ret_len = e->chunk;
		*from = 1;
		return true;
	}
	sp = &e->spaces[op->space];
	base = op->idx << sp->wshift;
	end = base + (1ull << sp->wshift);
	ub = e->chunk >> sp->wshift;
	u = hm_next_bit(sp->wfresh, base + *from, end, true);
	if (u == end)
		return false;
	v = hm_next_bit(sp->wfresh, u, end, false);
	*ret_off = (u - base) * ub;
	*ret_len = (v - u) * ub;
	*from = v - base;
	return true;
}

/* Queue the window change of guest chunk g: a published mirror -> copy
 * it in and name its window bytes in the table; else (home, or unmapped
 * since it was noted) -> sentinel.  The table's entry is repointed for
 * the flush after the sync (hm_engine_repoint()): a mirror refreshed in
 * place names the window bytes it named before, and the device's table,
 * host-visible device memory on a GPU, is not written for it at all. */
static int plan_chunk(struct hm_engine *e, uint64_t g)
{
	struct hm_window *w = &e->win;
	struct hm_window_op *op;
	struct hm_espace *sp;
	uint64_t guest = g << e->shift, off, idx, k;
	uint32_t space, mirror = HM_NO_MIRROR;

	sp = hm_engine_space_of_chunk(e, g, &space, &idx);
	if (sp && sp->ch[idx].mirror != HM_NO_MIRROR && (sp->ch[idx].flags & HM_CH_PUBLISHED))
		mirror = sp->ch[idx].mirror;
	off = HM_WINDOW_GUARD_BYTES + (guest - w->guest_lo);
	k = (guest - w->guest_lo) >> e->shift;
	if (w->sparse || guest - w->guest_lo >= w->covered || mirror == HM_NO_MIRROR)
		fresh_clear(sp, idx);   /* no copy into the window follows */
	if (guest - w->guest_lo >= w->covered) {
		/* past the window (or below it): its mirror is named at its pool slot */
		if (mirror != HM_NO_MIRROR)
			return hm_engine_repoint(e, g,
						 (int64_t)(hm_pool_mirror_addr(e, mirror) - guest));
		return 0;
	}
	if (w->sparse) {
		const struct hm_vk_buffer *slab;
		int err;

		if (mirror == HM_NO_MIRROR)
			return bind_sentinel(w, off, e->chunk);
		slab = &e->pool.slabs[mirror / e->pool.slots_per_slab];
		if (!(w->type_bits & (1u << slab->mem_type)))
			return -EOPNOTSUPP;     /* the pool's memory cannot be bound here */
		err = add_bind(w, off, e->chunk, slab->mem,
			       (uint64_t)(mirror % e->pool.slots_per_slab) * e->chunk);
		if (!err)
			err = hm_engine_repoint(e, g, (int64_t)(w->buf.addr + off - guest));
		return err;
	}
	if (hm_grow((void **)&w->ops, &w->cap_ops, w->nr_ops + 1, sizeof(*w->ops)))
		return -ENOMEM;
	op = &w->ops[w->nr_ops++];
	op->off = off;
	op->mirror = HM_NO_MIRROR;
	op->part = false;
	if (mirror != HM_NO_MIRROR) {
		int err = hm_engine_repoint(e, g, (int64_t)(w->buf.addr + off - guest));

		if (err)
			return err;
		op->mirror = mirror;
		op->space = space;
		op->idx = idx;
		/* the window held the rest of it: its flagged units alone */
		op->part = k < w->nr_held && w->held[k] && sp->wfresh && sp->wshift;
	}
	if (k < w->nr_held)
		w->held[k] = mirror != HM_NO_MIRROR;
	return 0;
}

/* Every published mirror, in the window's terms (after a rebuild). */
static int plan_all(struct hm_engine *e)
{
	for (uint8_t p = HM_PRIO_HOT; p < HM_NR_PRIO; p++) {
		for (uint32_t id = e->pool.head[p]; id != HM_NO_MIRROR; id = e->pool.m[id].next) {
			const struct hm_mirror *m = &e->pool.m[id];
			int err = plan_chunk(e, hm_espace_gchunk(&e->spaces[m->space], m->idx));

			if (err)
				return err;
		}
	}
	return 0;
}

/* Point every published mirror's table entry at its pool copy: the
 * window is gone (too big, or its buffer refused). */
static int unwindow_all(struct hm_engine *e)
{
	for (uint8_t p = HM_PRIO_HOT; p < HM_NR_PRIO; p++) {
		for (uint32_t id = e->pool.head[p]; id != HM_NO_MIRROR; id = e->pool.m[id].next) {
			struct hm_mirror *m = &e->pool.m[id];
			struct hm_espace *sp = &e->spaces[m->space];
			uint64_t g = hm_espace_gchunk(sp, m->idx);
			int err;

			if (!(sp->ch[m->idx].flags & HM_CH_PUBLISHED))
				continue;
			err = hm_table_update(e->table, g,
					      (int64_t)(hm_pool_mirror_addr(e, id) - (g << e->shift)));
			if (err)
				return err;
		}
	}
	return 0;
}

/* A new buffer for the spaces as they are now, all sentinel. */
static int rebuild(struct hm_engine *e, VkCommandBuffer cb, bool *ret_filled)
{
	struct hm_window *w = &e->win;
	uint64_t lo = UINT64_MAX, hi = 0, bytes;
	int err;

	*ret_filled = false;
	mapped_span(e, &lo, &hi);
	w->span_lo = lo;
	w->span_hi = hi;
	/* the old buffer is freed only after the table no longer names it:
	 * plan_all() below or unwindow_all() repoints every mirror (plan_all()
	 * for the flush before the dispatch: no device work reads the table
	 * before it) */
	hm_vk_buffer_free(e->vk, &w->old);
	w->old = w->buf;
	memset(&w->buf, 0, sizeof(w->buf));
	w->nr_dirty = 0;
	w->rebuild = false;
	free(w->held);          /* all sentinel: nothing held */
	w->held = NULL;
	w->nr_held = 0;
	if (lo >= hi)
		return 0;
	/* at most w->limit bytes (NVIDIA 580: maxBufferSize 4094 MiB): a span
	 * beyond it is covered from its start, and the chunks past the
	 * window are served by the helper (their clamped loads read the
	 * guard's sentinel) */
	if (w->limit < 2 * (uint64_t)HM_WINDOW_GUARD_BYTES + e->chunk) {
		e->st.window_refusals++;
		return 0;
	}
	w->covered = hi - lo;
	if (w->covered > w->limit - 2 * (uint64_t)HM_WINDOW_GUARD_BYTES)
		w->covered = (w->limit - 2 * (uint64_t)HM_WINDOW_GUARD_BYTES) & ~(e->chunk - 1);
	e->st.window_uncovered_bytes = hi - lo - w->covered;
	bytes = w->covered + 2 * (uint64_t)HM_WINDOW_GUARD_BYTES;
	if (w->sparse) {
		bytes = (bytes + w->align - 1) / w->align * w->align;
		if (bytes > e->vk->props.limits.sparseAddressSpaceSize ||
		    sparse_buffer_new(e, bytes, &w->buf, NULL)) {
			memset(&w->buf, 0, sizeof(w->buf));
			e->st.window_refusals++;
			return 0;
		}
		w->guest_lo = lo;
		w->nr_binds = 0;
		return bind_sentinel(w, 0, bytes);      /* before any mirror's bind */
	}
	err = hm_vk_buffer_new(e->vk, bytes, HM_VK_MEM_DEVICE, &w->buf);
	if (err) {
		memset(&w->buf, 0, sizeof(w->buf));
		e->st.window_refusals++;
		return 0;       /* loads go to the helper, as without a window */
	}
	w->guest_lo = lo;
	vkCmdFillBuffer(cb, w->buf.buf, 0, VK_WHOLE_SIZE, HM_WINDOW_SENTINEL);
	*ret_filled = true;
	/* without the memory, every copy into the window is whole */
	w->held = calloc(w->covered >> e->shift, 1);
	w->nr_held = w->held ? w->covered >> e->shift : 0;
	return 0;
}

/* Copies first (by pool slot: one slab after another), then fills (by
 * window offset). */
static int cmp_op(const void *a, const void *b)
{
	const struct hm_window_op *x = a, *y = b;

	if (x->mirror != y->mirror)
		return x->mirror < y->mirror ? -1 : 1;
	return x->off < y->off ? -1 : x->off > y->off;
}

/*
 * The copies [0, n) of the sorted ops by gather.comp (the upload's
 * one-pass shader, its twin offset 0: mirror -> window), one dispatch for
 * them all: on the H200 a vkCmdCopyBuffer region cost about 2 us however
 * it was merged, 6,500 scattered chunks 14.5 ms.  False: not done (no
 * memory for the list), the caller copies.
 */
/* the gather's descriptors from d[2 * nd] on for bytes [off, off + len)
   of a chunk, mirror m -> window win, a piece each; the new count */
static uint64_t put_descs(uint64_t *d, uint64_t nd, uint64_t m, uint64_t win, uint64_t off,
			  uint64_t len, uint64_t piece)
{
	for (uint64_t o = off; o < off + len; o += piece, nd++) {
		d[2 * nd] = m + o;
		d[2 * nd + 1] = win + o;
	}
	return nd;
}

static bool gather_copies(struct hm_engine *e, VkCommandBuffer cb, size_t n, bool filled)
{
	struct hm_window *w = &e->win;
	uint64_t piece = e->chunk, nd = 0, *d, from, ro, rl, need;

	if (e->p.twin_mode != HM_TWIN_GATHER || !n)
		return false;
	/* one descriptor a unit of the finest space among the partial copies */
	for (size_t i = 0; i < n; i++)
		if (w->ops[i].part && (e->chunk >> e->spaces[w->ops[i].space].wshift) < piece)
			piece = e->chunk >> e->spaces[w->ops[i].space].wshift;
	/* room for every chunk whole: the list is written in one pass */
	need = n * (e->chunk / piece);
	if (w->descs.size < need * 16) {
		size_t c = 256;

		while (c < need)
			c *= 2;
		hm_vk_buffer_free(e->vk, &w->descs);
		if (hm_vk_buffer_new(e->vk, c * 16, HM_VK_MEM_HOST, &w->descs)) {
			memset(&w->descs, 0, sizeof(w->descs));
			return false;
		}
	}
	d = w->descs.map;
	for (size_t i = 0; i < n; i++) {
		const struct hm_window_op *op = &w->ops[i];
		const struct hm_espace *sp = &e->spaces[op->space];
		uint64_t m = hm_pool_mirror_addr(e, op->mirror);
		uint64_t win = w->buf.addr + op->off;

		if (op->part && (1u << sp->wshift) <= 64) {
			/* a chunk's flags lie in one word: its flagged units by bit */
			uint64_t base = op->idx << sp->wshift, ub = e->chunk >> sp->wshift;
			uint64_t bits = sp->wfresh[base / 64] >> (base % 64);

			if (sp->wshift < 6)
				bits &= (1ull << (1u << sp->wshift)) - 1;
			for (; bits; bits &= bits - 1)
				nd = put_descs(d, nd, m, win, (uint64_t)__builtin_ctzll(bits) * ub, ub,
					       piece);
			continue;
		}
		for (from = 0; op_run(e, op, &from, &ro, &rl);)
			nd = put_descs(d, nd, m, win, ro, rl, piece);
	}
	e->st.window_copies += n;
	if (!nd)
		return true;    /* held, and nothing written since */
	if (filled)
		hm_vk_cmd_barrier(cb);  /* the whole fill before the copies */
	hm_gather_record(e, cb, w->descs.addr, 0, piece, nd, 0);
	return true;
}

/*
 * For gather.comp, whose one dispatch copies in any order: the copies
 * first as they were planned, then the fills by window offset (they are
 * merged into runs), without sorting the copies by slot as the
 * vkCmdCopyBuffer path must (its regions merge along a slab); the fills
 * come in offset order from the dirty list's planning and are sorted only
 * where they do not (a rebuild plans by pool list).  False: no memory,
 * the caller sorts.
 */
static bool partition_ops(struct hm_window *w)
{
	struct hm_window_op *tmp;
	size_t nc = 0, nf = 0, nr = w->nr_ops;
	bool sorted = true;

	for (size_t i = 0; i < nr; i++)
		nc += w->ops[i].mirror != HM_NO_MIRROR;
	if (nc == nr || !nc) {
		if (!nc)
			qsort(w->ops, nr, sizeof(*w->ops), cmp_op);
		return true;
	}
	tmp = malloc((nr - nc) * sizeof(*tmp));
	if (!tmp)
		return false;
	for (size_t i = 0, k = 0; i < nr; i++) {
		if (w->ops[i].mirror != HM_NO_MIRROR) {
			w->ops[k++] = w->ops[i];
			continue;
		}
		if (nf && tmp[nf - 1].off > w->ops[i].off)
			sorted = false;
		tmp[nf++] = w->ops[i];
	}
	if (!sorted)
		qsort(tmp, nf, sizeof(*tmp), cmp_op);
	memcpy(w->ops + nc, tmp, nf * sizeof(*tmp));
	free(tmp);
	return true;
}

/*
 * Record the planned fills and copies, after a barrier on what came before.
 * Each guest chunk is planned once (hm_window_sync() drops repeats), so the
 * ops touch disjoint window bytes and their order does not matter: they
 * are sorted so that the copies go first, by gather.comp in one dispatch
 * where the engine uploads that way (GPUs), else one vkCmdCopyBuffer a
 * slab (regions merged where both sides run on), then one vkCmdFillBuffer
 * a run of neighbouring sentinel chunks.  One command a chunk cost the
 * H200 about 7 us a chunk (the workload's 6,500 refreshes a dispatch: 51
 * of its 61 ms, Documentation/performance.rst).
 */
static void record_ops(struct hm_engine *e, VkCommandBuffer cb, bool filled)
{
	struct hm_window *w = &e->win;
	VkBuffer cur = VK_NULL_HANDLE;
	uint64_t fo = 0, fl = 0;
	size_t nr = 0, nc = 0, i0 = 0;

	if (e->p.twin_mode != HM_TWIN_GATHER || !partition_ops(w))
		qsort(w->ops, w->nr_ops, sizeof(*w->ops), cmp_op);
	while (nc < w->nr_ops && w->ops[nc].mirror != HM_NO_MIRROR)
		nc++;           /* the copies sort first */
	if (gather_copies(e, cb, nc, filled))
		i0 = nc;
	for (size_t i = i0; i < w->nr_ops; i++) {
		struct hm_window_op *op = &w->ops[i];
		uint64_t so;
		VkBuffer slab;
		VkBufferCopy *r;

		if (op->mirror == HM_NO_MIRROR) {
			e->st.window_fills++;
			if (fl && fo + fl == op->off) {
				fl += e->chunk;
				continue;
			}
			if (fl)
				vkCmdFillBuffer(cb, w->buf.buf, fo, fl, HM_WINDOW_SENTINEL);
			fo = op->off;
			fl = e->chunk;
			continue;
		}
		e->st.window_copies++;
		slab = hm_pool_slab(e, op->mirror, &so);
		if (nr && slab != cur) {
			vkCmdCopyBuffer(cb, cur, w->buf.buf, (uint32_t)nr, w->regs);
			nr = 0;
		}
		cur = slab;
		for (uint64_t from = 0, ro, rl; op_run(e, op, &from, &ro, &rl);) {
			r = nr ? &w->regs[nr - 1] : NULL;
			if (r && r->srcOffset + r->size == so + ro &&
			    r->dstOffset + r->size == op->off + ro) {
				r->size += rl;
				continue;
			}
			if (hm_grow((void **)&w->regs, &w->cap_regs, nr + 1, sizeof(*w->regs)) ||
			    nr == UINT32_MAX) {
				/* no room for one more region: what is held goes now */
				if (nr)
					vkCmdCopyBuffer(cb, cur, w->buf.buf, (uint32_t)nr, w->regs);
				nr = 0;
				if (!w->cap_regs) {
					VkBufferCopy one = { .srcOffset = so + ro,
							     .dstOffset = op->off + ro, .size = rl };

					vkCmdCopyBuffer(cb, slab, w->buf.buf, 1, &one);
					continue;
				}
			}
			w->regs[nr++] = (VkBufferCopy){ .srcOffset = so + ro,
							.dstOffset = op->off + ro, .size = rl };
		}
	}
	if (nr)
		vkCmdCopyBuffer(cb, cur, w->buf.buf, (uint32_t)nr, w->regs);
	if (fl)
		vkCmdFillBuffer(cb, w->buf.buf, fo, fl, HM_WINDOW_SENTINEL);
}

int hm_window_sync(struct hm_engine *e, bool shared)
{
	struct hm_window *w = &e->win;
	VkCommandBuffer cb;
	bool filled = false;
	uint64_t t0;
	int err;

	if (!w->enabled || shared)
		return 0;       /* a shared dispatch sees the guard alone */
	if (w->table_gen != e->table_gen) {
		w->table_gen = e->table_gen;
		w->rebuild = true;      /* a new table: every mirror replanned */
	}
	if (w->maps_gen != e->maps_gen) {
		w->maps_gen = e->maps_gen;
		hm_window_maps_changed(e);
	}
	if (!w->rebuild && !w->nr_dirty)
		return 0;
	t0 = hm_now_ns();
	err = hm_vk_cmd_start(e->vk, &w->cmd, &cb);
	if (err)
		return err;
	w->nr_ops = 0;
	if (!w->rebuild)
		w->nr_binds = 0;
	if (w->rebuild) {
		err = rebuild(e, cb, &filled);
		if (!err)
			err = w->buf.buf ? plan_all(e) : unwindow_all(e);
	} else {
		/* a chunk dropped by the harvest and refreshed by the upload was
		 * noted twice: plan its final state once */
		size_t k = 0;

		hm_sort_runs(w->dirty, w->nr_dirty, 1);
		for (size_t i = 0; i < w->nr_dirty; i++)
			if (!k || w->dirty[k - 1] != w->dirty[i])
				w->dirty[k++] = w->dirty[i];
		for (size_t i = 0; i < k && !err; i++)
			err = plan_chunk(e, w->dirty[i]);
	}
	w->nr_dirty = 0;
	e->st.ns_window_plan += hm_now_ns() - t0;
	if (err == -EOPNOTSUPP && w->sparse) {
		/* the device will not bind the pool's memory: dense from now,
		 * rebuilt at once (the table may name the sparse window) */
		w->sparse = false;
		e->st.window_sparse = false;
		w->nr_binds = 0;
		w->rebuild = true;
		return hm_window_sync(e, shared);
	}
	if (err) {
		/* the table may name window bytes not yet filled: start over
		 * at the next dispatch, with every mirror replanned */
		w->rebuild = true;
		return err;
	}
	if (w->sparse) {
		err = sparse_submit(e);
		hm_vk_buffer_free(e->vk, &w->old);
		if (err) {
			w->rebuild = true;
			return err;
		}
		e->st.window_syncs++;
		return 0;
	}
	if (filled && w->nr_ops) {
		VkMemoryBarrier mb = {
			.sType = VK_STRUCTURE_TYPE_MEMORY_BARRIER,
			.srcAccessMask = VK_ACCESS_TRANSFER_WRITE_BIT,
			.dstAccessMask = VK_ACCESS_TRANSFER_WRITE_BIT,
		};

		vkCmdPipelineBarrier(cb, VK_PIPELINE_STAGE_TRANSFER_BIT,
				     VK_PIPELINE_STAGE_TRANSFER_BIT, 0, 1, &mb, 0, NULL, 0, NULL);
	}
	t0 = hm_now_ns();
	record_ops(e, cb, filled);
	for (size_t i = 0; i < w->nr_ops; i++)
		if (w->ops[i].mirror != HM_NO_MIRROR)
			fresh_clear(&e->spaces[w->ops[i].space], w->ops[i].idx);
	hm_vk_cmd_barrier(cb);
	e->st.ns_window_record += hm_now_ns() - t0;
	err = hm_vk_cmd_run(e->vk, &w->cmd, e->p.timeout_ns);
	hm_vk_buffer_free(e->vk, &w->old);
	if (err) {
		w->rebuild = true;
		return err;
	}
	e->st.window_syncs++;
	return 0;
}

void hm_window_push(const struct hm_engine *e, bool shared, uint32_t *words)
{
	const struct hm_window *w = &e->win;
	uint64_t delta = 0, first, last;

	if (w->enabled && !shared && w->buf.buf) {
		delta = w->buf.addr + HM_WINDOW_GUARD_BYTES - w->guest_lo;
		first = w->buf.addr;
		last = w->buf.addr + w->buf.size - HM_ACCESS_MAX_BYTES;
	} else {
		first = w->guard.addr;
		last = w->guard.addr + w->guard.size - HM_ACCESS_MAX_BYTES;
	}
	words[HM_PUSH_WINDOW_DELTA_LO] = (uint32_t)delta;
	words[HM_PUSH_WINDOW_DELTA_HI] = (uint32_t)(delta >> 32);
	words[HM_PUSH_WINDOW_FIRST_LO] = (uint32_t)first;
	words[HM_PUSH_WINDOW_FIRST_HI] = (uint32_t)(first >> 32);
	words[HM_PUSH_WINDOW_LAST_LO] = (uint32_t)last;
	words[HM_PUSH_WINDOW_LAST_HI] = (uint32_t)(last >> 32);
}

/* After the dispatch, before the copy-back: the chunks the device wrote
 * (e->back, found by the marks) copied out of the window into their pool
 * copies, which the copy-back diffs against the twins. */
int hm_window_after_dispatch(struct hm_engine *e, bool shared)
{
	struct hm_window *w = &e->win;
	VkCommandBuffer cb;
	int err;

	if (!w->enabled || shared || !w->buf.buf || !e->nr_back || w->sparse)
		return 0;       /* sparse: the window's pages are the pool's memory */
	err = hm_vk_cmd_start(e->vk, &w->cmd, &cb);
	if (err)
		return err;
	for (size_t i = 0; i < e->nr_back; i++) {
		struct hm_espace *sp = &e->spaces[hm_ref_space(e->back[i])];
		uint64_t idx = hm_ref_idx(e->back[i]);
		struct hm_chunk *c = &sp->ch[idx];
		uint64_t guest = hm_espace_gchunk(sp, idx) << e->shift, so;
		VkBuffer slab;
		VkBufferCopy r;

		if (c->mirror == HM_NO_MIRROR || !(c->flags & HM_CH_PUBLISHED) ||
		    guest - w->guest_lo >= w->covered)
			continue;
		slab = hm_pool_slab(e, c->mirror, &so);
		r = (VkBufferCopy){ .srcOffset = HM_WINDOW_GUARD_BYTES + (guest - w->guest_lo),
				    .dstOffset = so, .size = e->chunk };
		vkCmdCopyBuffer(cb, w->buf.buf, slab, 1, &r);
	}
	hm_vk_cmd_barrier(cb);
	return hm_vk_cmd_run(e->vk, &w->cmd, e->p.timeout_ns);
}
