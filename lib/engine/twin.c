// SPDX-License-Identifier: LGPL-2.1-or-later
/*
 * Twins: the copy of a mirror as uploaded.  The upload's one command
 * buffer fills each candidate's mirror and twin from home, in one of three
 * modes (hm_engine_params.twin_mode): HM_TWIN_COPY, vkCmdCopyBuffer home
 * -> mirror then mirror -> twin; HM_TWIN_SHADER, home -> mirror copies
 * and twin.comp filling the twins, in batches; HM_TWIN_GATHER, gather.comp
 * writing mirror and twin from home, no copy region per chunk.
 * copyback.c diffs mirror against twin (diff.comp) to find exactly the
 * bytes the device changed (rule 4).
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"
#include "engine/twin.spv.h"
#include "engine/gather.spv.h"

/* AUTO: on a GPU, one gather shader writes mirror and twin from home (no
 * copy region per scattered chunk: Documentation/performance.rst); on a CPU
 * device (lavapipe) vkCmdCopyBuffer, where a shader's every access is
 * emulated (measured: 0.47 vs 2.92 GB/s for the whole upload,
 * Documentation/engine.rst) */
uint32_t hm_twin_mode(const struct hm_vk *vk, uint32_t mode)
{
	if (mode != HM_TWIN_AUTO)
		return mode;
	return vk->props.deviceType == VK_PHYSICAL_DEVICE_TYPE_CPU ? HM_TWIN_COPY : HM_TWIN_GATHER;
}

int hm__engine_set_twin_mode(struct hm_engine *e, uint32_t mode)
{
	if (!e || mode > HM_TWIN_GATHER)
		return -EINVAL;
	pthread_mutex_lock(&e->lock);
	e->p.twin_mode = hm_twin_mode(e->vk, mode);
	pthread_mutex_unlock(&e->lock);
	return 0;
}

/* Append a copy region, merged with the previous one when contiguous. */
static void add_region(VkBufferCopy *reg, size_t *k, uint64_t so, uint64_t dof, uint64_t size)
{
	if (*k && reg[*k - 1].srcOffset + reg[*k - 1].size == so &&
	    reg[*k - 1].dstOffset + reg[*k - 1].size == dof) {
		reg[*k - 1].size += size;
		return;
	}
	reg[(*k)++] = (VkBufferCopy){ .srcOffset = so, .dstOffset = dof, .size = size };
}

#define HM_TWIN_BLOCK_MAX (16u << 10)   /* bytes one workgroup of twin.comp copies */
#define HM_UPLOAD_BATCHES 8             /* batches of an upload (twin shader mode) */
#define HM_UPLOAD_BATCH_MIN (16u << 20) /* bytes, at least, a batch */

int hm_engine_twin_init(struct hm_engine *e)
{
	int err = hm_vk_pipeline_new(e->vk, hm_twin_spv, sizeof(hm_twin_spv) / 4, "main", 24,
				     &e->twin);

	if (!err)
		err = hm_vk_pipeline_new(e->vk, hm_gather_spv, sizeof(hm_gather_spv) / 4, "main",
					 32, &e->gather);
	return err;
}

#define HM_GATHER_BLOCK_MAX (4u << 10)  /* bytes one workgroup of gather.comp copies */

/*
 * Rows of gather.comp's grid for an upload beside the walk (the side
 * queue): HMIRROR_SIDE_GATHER_GROUPS, 0 (the default) one row a unit as
 * at the boundary, else at most that many rows, each looping over the
 * units.  A grid of a row a unit (80,000 workgroups for the workload's
 * pass) takes the device's workgroup slots as the walk's retire, and the
 * walk beside it ran 2 ms longer on the lent H100 (9.5 against 7.4 ms);
 * a few rows keep a bus-bound copy's loads in flight with fewer slots.
 * A measurement knob until a lent host has measured it.
 */
static uint32_t side_gather_rows(void)
{
	static int rows = -1;

	return hm_env_knob("HMIRROR_SIDE_GATHER_GROUPS", 0, 1u << 16, &rows);
}

/* the upload's submission: beside the caller's dispatch on the side queue */
static int run_upload(struct hm_engine *e)
{
	return e->in_walk ? hm_vk_cmd_run_side(e->vk, &e->cmd_upload, e->p.timeout_ns) :
	       hm_vk_cmd_run(e->vk, &e->cmd_upload, e->p.timeout_ns);
}

/*
 * Record gather.comp over the nd descriptors (source, destination) at
 * descs, piece bytes each, written at the destination and at destination +
 * twin_off (the window passes 0: one copy).  rows: at most that many rows
 * of workgroups, each looping over the pieces; 0, a row a piece.  Returns
 * the dispatches recorded.
 */
unsigned hm_gather_record(struct hm_engine *e, VkCommandBuffer cb, uint64_t descs,
			  uint64_t twin_off, uint64_t piece, uint64_t nd, uint32_t rows)
{
	uint32_t max_y = e->vk->props.limits.maxComputeWorkGroupCount[1];
	struct {
		uint64_t descs, twin_off;
		uint32_t block_bytes, first, count, pad;
	} push = { descs, twin_off, 0, 0, 0, 0 };
	unsigned calls = 0;

	push.block_bytes = piece < HM_GATHER_BLOCK_MAX ? (uint32_t)piece : HM_GATHER_BLOCK_MAX;
	if (rows && rows < max_y)
		max_y = rows;
	for (uint64_t first = 0; first < nd; first += push.count, calls++) {
		push.first = (uint32_t)first;
		push.count = (uint32_t)(rows || nd - first < max_y ? nd - first : max_y);
		hm_vk_cmd_dispatch(cb, &e->gather, &push, sizeof(push),
				   (uint32_t)(piece / push.block_bytes),
				   push.count < max_y ? push.count : max_y, 1);
	}
	return calls;
}

/*
 * Candidate i's descriptors for gather.comp at d + 2 * *nd, a piece of
 * unit bytes each; *nd_home counts those read from home.  A pending
 * chunk copied into a fresh slot takes its unwritten units from its old
 * mirror; one copied in place (ahead.c) keeps them where they are.
 */
static void gather_list(struct hm_engine *e, size_t i, uint64_t unit, uint64_t *d, size_t *nd,
			size_t *nd_home)
{
	struct hm_espace *sp = &e->spaces[hm_ref_space(e->cand[i])];
	uint64_t idx = hm_ref_idx(e->cand[i]), su = e->chunk >> sp->wshift;
	uint64_t home = hm_espace_home_addr(e, sp, idx);
	uint64_t mirror = hm_pool_mirror_addr(e, e->cand_slot[i]);
	bool from_old = (sp->ch[idx].flags & HM_CH_PENDING) && !hm_cand_in_place(e, i);
	uint64_t old = from_old ? hm_pool_mirror_addr(e, sp->ch[idx].mirror) : 0;

	for (uint64_t u = 0; u < (1ull << sp->wshift); u++) {
		uint64_t src = home;

		if (!hm_unit_wanted(e, i, sp, idx, u)) {
			if (!from_old)
				continue;
			src = old;      /* device to device */
		} else {
			hm_window_fresh(e, sp, idx, u);
			*nd_home += su / unit;
		}
		for (uint64_t o = 0; o < su; o += unit) {
			d[2 * *nd] = src + u * su + o;
			d[2 * *nd + 1] = mirror + u * su + o;
			(*nd)++;
		}
	}
}

/*
 * HMIRROR_AHEAD_REGIONS=1: the copies made in place beside a walk by
 * vkCmdCopyBuffer, a region a run of the units to copy (home piece ->
 * the chunk's own slot), instead of gather.comp's second dispatch.  A
 * measurement knob: the gather's workgroups beside the walk are what
 * lengthen it (7.80 ms with the pass copying nothing against 8.66 with its
 * copies, Documentation/decisions.rst), and a copy command may take none
 * of the walk's slots.  Not measured on a GPU yet.
 */
static bool ahead_regions(void)
{
	static int v = -1;

	return hm_env_knob("HMIRROR_AHEAD_REGIONS", 0, 1, &v);
}

/* candidate i (copied in place) as copy regions into e->ahead_regs from
   *nr on, its home at so in its piece and its slot at dof in its slab,
   merged where both sides run on (the caller keeps one (piece, slab) pair
   in the array); *nd_home counts the pieces of unit bytes read from home,
   as gather_list() does */
static int region_list(struct hm_engine *e, size_t i, uint64_t unit, uint64_t so, uint64_t dof,
		       size_t *nr, size_t *nd_home)
{
	struct hm_espace *sp = &e->spaces[hm_ref_space(e->cand[i])];
	uint64_t idx = hm_ref_idx(e->cand[i]), su = e->chunk >> sp->wshift;

	for (uint64_t u = 0; u < (1ull << sp->wshift); u++) {
		int err;

		if (!hm_unit_wanted(e, i, sp, idx, u))
			continue;
		hm_window_fresh(e, sp, idx, u);
		*nd_home += su / unit;
		err = hm_grow((void **)&e->ahead_regs, &e->cap_ahead_regs, *nr + 1,
			      sizeof(*e->ahead_regs));
		if (err)
			return err;
		add_region(e->ahead_regs, nr, so + u * su, dof + u * su, su);
	}
	return 0;
}

/* the in-place candidates' copies, one vkCmdCopyBuffer a run of candidates
   sharing a (home piece, slab) pair; *ret_regions: the regions recorded */
static int record_regions(struct hm_engine *e, VkCommandBuffer cb, size_t n, uint64_t unit,
			  size_t *nd_home, size_t *ret_regions)
{
	VkBuffer src = VK_NULL_HANDLE, dst = VK_NULL_HANDLE;
	size_t nr = 0;
	int err = 0;

	*ret_regions = 0;
	for (size_t i = 0; i < n && !err; i++) {
		const struct hm_espace *sp = &e->spaces[hm_ref_space(e->cand[i])];
		uint64_t so, dof;
		VkBuffer s2, d2;

		if (!hm_cand_in_place(e, i))
			continue;
		err = hm_espace_home_loc(e, sp, hm_ref_idx(e->cand[i]), &s2, &so);
		if (err)
			break;
		d2 = hm_pool_slab(e, e->cand_slot[i], &dof);
		if (nr && (s2 != src || d2 != dst)) {
			/* a new pair: what the last one holds goes now */
			vkCmdCopyBuffer(cb, src, dst, (uint32_t)nr, e->ahead_regs);
			*ret_regions += nr;
			nr = 0;
		}
		src = s2;
		dst = d2;
		err = region_list(e, i, unit, so, dof, &nr, nd_home);
	}
	if (!err && nr) {
		vkCmdCopyBuffer(cb, src, dst, (uint32_t)nr, e->ahead_regs);
		*ret_regions += nr;
	}
	return err;
}

/*
 * HM_TWIN_GATHER: every unit to copy home -> mirror and twin by one
 * shader; the copies made in place beside a walk (ahead.c) by a second
 * dispatch of it that writes no twin, or with HMIRROR_AHEAD_REGIONS=1 by
 * copy commands (above).
 */
static int gather_candidates(struct hm_engine *e, size_t n, uint64_t *ret_bytes)
{
	uint64_t unit = e->chunk, *d;
	size_t nd = 0, nd_twin, nd_home = 0, cap;
	uint32_t rows = e->in_walk ? side_gather_rows() : 0;
	bool regions = e->in_walk && ahead_regions();
	size_t nr_regions = 0, in_place = 0;
	VkCommandBuffer cb;
	int err;

	for (size_t i = 0; i < n; i++) {
		const struct hm_espace *sp = &e->spaces[hm_ref_space(e->cand[i])];

		if ((e->chunk >> sp->wshift) < unit)
			unit = e->chunk >> sp->wshift;
	}
	cap = n * (e->chunk / unit);    /* at most a whole chunk each */
	if (e->gather_descs.size < cap * 16) {
		size_t c = 256;

		while (c < cap)
			c *= 2;
		hm_vk_buffer_free(e->vk, &e->gather_descs);
		err = hm_vk_buffer_new(e->vk, c * 16, HM_VK_MEM_HOST, &e->gather_descs);
		if (err)
			return err;
	}
	/* one descriptor a unit of the finest space among the candidates:
	 * those with a twin first, then those copied in place */
	d = e->gather_descs.map;
	for (size_t i = 0; i < n; i++)
		if (!hm_cand_in_place(e, i))
			gather_list(e, i, unit, d, &nd, &nd_home);
	nd_twin = nd;
	for (size_t i = 0; i < n; i++) {
		if (!hm_cand_in_place(e, i))
			continue;
		if (regions)
			in_place++;
		else
			gather_list(e, i, unit, d, &nd, &nd_home);
	}
	if (!nd && !in_place) {
		*ret_bytes = nd_home * unit;
		return 0;
	}
	err = hm_vk_cmd_start(e->vk, &e->cmd_upload, &cb);
	if (!err && in_place)
		err = record_regions(e, cb, n, unit, &nd_home, &nr_regions);
	if (err)
		return err;
	e->st.upload_regions += nr_regions;
	/* what crossed the bus: a pending chunk's units from its old
	 * mirror are the device's own */
	*ret_bytes = nd_home * unit;
	/* one gather dispatch a region */
	if (nd_twin)
		e->st.upload_regions += hm_gather_record(e, cb, e->gather_descs.addr,
							 hm_pool_twin_offset(e), unit, nd_twin,
							 rows);
	if (nd > nd_twin)
		e->st.upload_regions += hm_gather_record(e, cb, e->gather_descs.addr +
							 16 * nd_twin, 0, unit, nd - nd_twin,
							 rows);
	hm_vk_cmd_barrier(cb);
	return run_upload(e);
}

/* home -> mirror copies of candidates [i, end), regions merged where contiguous */
static void record_uploads(struct hm_engine *e, VkCommandBuffer cb, VkBufferCopy *reg,
			   size_t i, size_t end)
{
	/* consecutive candidates sharing a (home piece, slab) pair: one copy */
	while (i < end) {
		struct hm_espace *sp = &e->spaces[hm_ref_space(e->cand[i])];
		VkBuffer src, dst, s2, d2;
		uint64_t so, dof;
		size_t k = 0;

		hm_espace_home_loc(e, sp, hm_ref_idx(e->cand[i]), &src, &so);
		dst = hm_pool_slab(e, e->cand_slot[i], &dof);
		while (i < end) {
			struct hm_espace *sj = &e->spaces[hm_ref_space(e->cand[i])];

			hm_espace_home_loc(e, sj, hm_ref_idx(e->cand[i]), &s2, &so);
			d2 = hm_pool_slab(e, e->cand_slot[i], &dof);
			if (s2 != src || d2 != dst)
				break;
			add_region(reg, &k, so, dof, e->chunk);
			i++;
		}
		vkCmdCopyBuffer(cb, src, dst, k, reg);
		e->st.upload_regions += k;
	}
}

/*
 * HM_TWIN_SHADER: in batches, home -> mirror (copy), a barrier from the
 * transfer to the compute stage only, then twin.comp fills the batch's
 * twins from its mirrors; the next batch's transfer is outside that
 * barrier's second scope, so it can run while the shader copies.
 * HM_TWIN_COPY: every home -> mirror copy, a transfer barrier, then every
 * mirror -> twin copy.  One command buffer, one wait, either way.
 */
int hm_engine_copy_candidates(struct hm_engine *e, size_t n, uint64_t *ret_bytes)
{
	uint64_t twin = hm_pool_twin_offset(e);
	bool shader = e->p.twin_mode != HM_TWIN_COPY && e->twin.pipe;
	VkBufferCopy *reg;
	VkCommandBuffer cb;
	int err;

	if (e->p.twin_mode == HM_TWIN_GATHER && e->gather.pipe)
		return gather_candidates(e, n, ret_bytes);
	/* whole chunks (a stale mirror's too: always right) */
	*ret_bytes = n * e->chunk;
	for (size_t i = 0; i < n; i++) {
		struct hm_espace *sp = &e->spaces[hm_ref_space(e->cand[i])];

		for (uint64_t u = 0; u < (1ull << sp->wshift); u++)
			hm_window_fresh(e, sp, hm_ref_idx(e->cand[i]), u);
	}

	if (shader && e->twin_addrs.size < n * 8) {
		size_t cap = 256;

		while (cap < n)
			cap *= 2;
		hm_vk_buffer_free(e->vk, &e->twin_addrs);
		err = hm_vk_buffer_new(e->vk, cap * 8, HM_VK_MEM_HOST, &e->twin_addrs);
		if (err)
			shader = false;
	}
	reg = malloc(n * sizeof(*reg));
	if (!reg)
		return -ENOMEM;
	err = hm_vk_cmd_start(e->vk, &e->cmd_upload, &cb);
	if (err)
		goto out_free;
	if (shader) {
		uint32_t block = e->chunk < HM_TWIN_BLOCK_MAX ? e->chunk : HM_TWIN_BLOCK_MAX;
		uint32_t max_y = e->vk->props.limits.maxComputeWorkGroupCount[1];
		size_t per = (n + HM_UPLOAD_BATCHES - 1) / HM_UPLOAD_BATCHES;
		uint64_t *addrs = e->twin_addrs.map;
		struct {
			uint64_t addrs, twin_off;
			uint32_t block_bytes, first;
		} push = { e->twin_addrs.addr, twin, block, 0 };
		VkMemoryBarrier mb = {
			.sType = VK_STRUCTURE_TYPE_MEMORY_BARRIER,
			.srcAccessMask = VK_ACCESS_TRANSFER_WRITE_BIT,
			.dstAccessMask = VK_ACCESS_SHADER_READ_BIT,
		};

		if (per < HM_UPLOAD_BATCH_MIN / e->chunk)
			per = HM_UPLOAD_BATCH_MIN / e->chunk;
		if (per > max_y)
			per = max_y;
		if (!per)
			per = 1;
		for (size_t i = 0; i < n; i++)
			addrs[i] = hm_pool_mirror_addr(e, e->cand_slot[i]);
		for (size_t i = 0; i < n; i += per) {
			size_t end = n - i < per ? n : i + per;

			record_uploads(e, cb, reg, i, end);
			vkCmdPipelineBarrier(cb, VK_PIPELINE_STAGE_TRANSFER_BIT,
					     VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT, 0, 1, &mb,
					     0, NULL, 0, NULL);
			push.first = i;
			hm_vk_cmd_dispatch(cb, &e->twin, &push, sizeof(push), e->chunk / block,
					   end - i, 1);
			e->st.upload_regions++;         /* one twin batch */
		}
	} else {
		VkMemoryBarrier mb = {
			.sType = VK_STRUCTURE_TYPE_MEMORY_BARRIER,
			.srcAccessMask = VK_ACCESS_TRANSFER_WRITE_BIT,
			.dstAccessMask = VK_ACCESS_TRANSFER_READ_BIT,
		};

		record_uploads(e, cb, reg, 0, n);
		vkCmdPipelineBarrier(cb, VK_PIPELINE_STAGE_TRANSFER_BIT, VK_PIPELINE_STAGE_TRANSFER_BIT,
				     0, 1, &mb, 0, NULL, 0, NULL);
		/* twins: same slab, second half (device-local to device-local) */
		for (size_t i = 0; i < n;) {
			uint64_t off;
			VkBuffer slab = hm_pool_slab(e, e->cand_slot[i], &off);
			size_t k = 0;

			while (i < n) {
				VkBuffer s2 = hm_pool_slab(e, e->cand_slot[i], &off);

				if (s2 != slab)
					break;
				add_region(reg, &k, off, off + twin, e->chunk);
				i++;
			}
			vkCmdCopyBuffer(cb, slab, slab, k, reg);
			e->st.upload_regions += k;
		}
	}
	hm_vk_cmd_barrier(cb);
	err = run_upload(e);
out_free:
	free(reg);
	return err;
}
