// SPDX-License-Identifier: LGPL-2.1-or-later
/*
 * After a dispatch (rule 4): scan the marks; each marked slot is a chunk
 * the device stored into.  Marked mirrored chunks are diffed against their
 * twins on the device (lib/engine/diff.comp) and exactly the changed bytes
 * are written home, all in one submission, before the dispatch returns.
 * The marks also feed the hotness history of unadvised chunks.
 */
#include <errno.h>
#include <string.h>

#include "internal.h"
#include "engine/diff.spv.h"
#include "engine/compact.spv.h"

/* bytes one workgroup diffs (H200, the workload's 257 hit chunks a
 * dispatch: 8.1 ms in 64 KiB blocks, 12.6 ms in 4 KiB ones) */
#define HM_DIFF_BLOCK_MAX (64u << 10)
/* a chunk's entry (diff.comp): mirror, twin, home, mark; pool copy, pad */
#define HM_DIFF_DESC_WORDS 8
#define HM_DIFF_DESC_BYTES (8 * HM_DIFF_DESC_WORDS)

struct scan_ctx {
	struct hm_engine *e;
	bool shared;
	int err;
};

static void on_mark(uint32_t slot, void *arg)
{
	struct scan_ctx *x = arg;
	struct hm_engine *e = x->e;
	struct hm_espace *sp;
	struct hm_chunk *c;
	uint64_t chunk, idx;
	int64_t delta;
	uint32_t id;
	uint32_t age;

	e->st.marks_scanned++;
	if (!hm_table_slot_get(e->table, slot, &chunk, &delta))
		return;
	sp = hm_engine_space_of_chunk(e, chunk, &id, &idx);
	if (!sp)
		return;
	c = &sp->ch[idx];

	/* hotness: one bit per dispatch, bit 0 = this one */
	age = e->seq - c->hist_seq;
	c->hist = age >= 8 ? 1 : (uint8_t)((c->hist << age) | 1);
	c->hist_seq = e->seq;

	if (c->mirror != HM_NO_MIRROR) {
		if (x->shared) {
			/* the device wrote home: the mirror is stale */
			hm_engine_drop_mirror(e, id, idx);
			e->st.mirrors_dropped_shared++;
			hm_engine_queue(e, id, idx);
			return;
		}
		if (c->flags & HM_CH_STALE) {
			/* home during the dispatch, and the device wrote it
			 * there, unseen by the guards: its refresh copies
			 * every unit */
			for (uint64_t u = 0; u < (1ull << sp->wshift); u++)
				sp->ugen[(idx << sp->wshift) + u] = UINT64_MAX;
			return;
		}
		if (!(c->flags & HM_CH_PUBLISHED))
			return;
		if (hm_grow((void **)&e->back, &e->cap_back, e->nr_back + 1, sizeof(*e->back))) {
			x->err = -ENOMEM;
			return;
		}
		e->back[e->nr_back++] = hm_ref(id, idx);
		hm_pool_lru_touch(e, c->mirror);
	} else if (hm_chunk_prio(e, c) != HM_PRIO_NONE) {
		hm_engine_queue(e, id, idx);
	}
}

int hm_engine_scan_marks(struct hm_engine *e, bool shared)
{
	struct scan_ctx x = { .e = e, .shared = shared };
	uint32_t *marks = e->marks_imported ? e->marks_mem : e->marks_buf.map;
	int n;

	e->nr_back = 0;
	if (hm_marks_take_sink(marks))
		e->st.sink_marks++;
	n = hm_marks_scan(marks, hm_table_nr_slots(e->table), on_mark, &x);
	if (n < 0)
		return n;
	return x.err;
}

static int ensure_descs(struct hm_engine *e, size_t n, uint32_t blocks)
{
	size_t cap = e->cap_descs ? e->cap_descs : 64;
	int err;

	if (n <= e->cap_descs && e->counts.size >= (uint64_t)n * blocks * 4)
		return 0;
	while (cap < n)
		cap *= 2;
	hm_vk_buffer_free(e->vk, &e->descs);
	hm_vk_buffer_free(e->vk, &e->counts);
	hm_vk_buffer_free(e->vk, &e->descs_out);
	e->cap_descs = 0;
	err = hm_vk_buffer_new(e->vk, cap * HM_DIFF_DESC_BYTES, HM_VK_MEM_HOST, &e->descs);
	if (!err)
		err = hm_vk_buffer_new(e->vk, cap * blocks * 4, HM_VK_MEM_HOST, &e->counts);
	if (!err)
		err = hm_vk_buffer_new(e->vk, cap * HM_DIFF_DESC_BYTES, HM_VK_MEM_DEVICE,
				       &e->descs_out);
	if (err) {
		hm_vk_buffer_free(e->vk, &e->descs);
		hm_vk_buffer_free(e->vk, &e->counts);
		return err;
	}
	e->cap_descs = cap;
	return 0;
}

/* diff.comp over the first n entries of e->descs */
static void record_diff(struct hm_engine *e, VkCommandBuffer cb, size_t n)
{
	uint32_t block = e->chunk < HM_DIFF_BLOCK_MAX ? e->chunk : HM_DIFF_BLOCK_MAX;
	uint32_t blocks = e->chunk / block;
	uint32_t max_y = e->vk->props.limits.maxComputeWorkGroupCount[1];
	struct {
		uint64_t descs, counts;
		uint32_t block_bytes, blocks_per_chunk;
	} push;

	push.block_bytes = block;
	push.blocks_per_chunk = blocks;
	for (size_t first = 0; first < n; first += max_y) {
		size_t k = n - first < max_y ? n - first : max_y;

		push.descs = e->descs.addr + first * HM_DIFF_DESC_BYTES;
		push.counts = e->counts.addr + first * blocks * 4;
		hm_vk_cmd_dispatch(cb, &e->diff, &push, sizeof(push), blocks, k, 1);
	}
}

/*
 * After the copy-back's diff (in its command buffer, behind a barrier):
 * the twins of the units copied in place take their mirror's bytes.  A
 * copy that is published then has mirror and twin equal, as an upload
 * leaves them.  One the dispatch stored into was overwritten from the
 * window before the diff, which made its twin equal to it: the copy
 * changes nothing there.
 */
static bool record_twin_catch(struct hm_engine *e, VkCommandBuffer cb)
{
	if (!e->nr_twin_catch)
		return false;
	hm_gather_record(e, cb, e->twin_catch.addr, 0, HM_TWIN_CATCH_PIECE, e->nr_twin_catch, 0);
	return true;
}

/*
 * The diff of the marked mirrors (e->back), then, behind a barrier, the
 * twins of the copies made in place beside the dispatch brought level
 * (record_twin_catch(); ahead.c says why): one submission, waited for.
 */
int hm_engine_copy_back(struct hm_engine *e)
{
	uint32_t block = e->chunk < HM_DIFF_BLOCK_MAX ? e->chunk : HM_DIFF_BLOCK_MAX;
	uint32_t blocks = e->chunk / block;
	size_t n = e->nr_back;
	uint64_t *d;
	VkCommandBuffer cb;
	int err;

	if (!n && !e->nr_twin_catch)
		return 0;
	if (n) {
		err = ensure_descs(e, n, blocks);
		if (err)
			return err;
		d = e->descs.map;
		memset(d, 0, n * HM_DIFF_DESC_BYTES);
		for (size_t i = 0; i < n; i++) {
			struct hm_espace *sp = &e->spaces[hm_ref_space(e->back[i])];
			uint64_t idx = hm_ref_idx(e->back[i]);
			uint32_t m = sp->ch[idx].mirror;

			d[HM_DIFF_DESC_WORDS * i + 0] = hm_pool_mirror_addr(e, m);
			d[HM_DIFF_DESC_WORDS * i + 1] = hm_pool_twin_addr(e, m);
			d[HM_DIFF_DESC_WORDS * i + 2] = hm_espace_home_addr(e, sp, idx);
		}
	}
	err = hm_vk_cmd_start(e->vk, &e->cmd_back, &cb);
	if (err)
		return err;
	if (n) {
		record_diff(e, cb, n);
		hm_vk_cmd_barrier(cb);
	}
	if (record_twin_catch(e, cb))
		hm_vk_cmd_barrier(cb);
	err = hm_vk_cmd_run(e->vk, &e->cmd_back, e->p.timeout_ns);
	if (err || !n)
		return err;
	e->st.chunks_copied_home += n;
	e->st.bytes_copied_home += hm_engine_copied_bytes(e, n);
	return 0;
}

uint64_t hm_engine_copied_bytes(struct hm_engine *e, size_t n)
{
	uint32_t block = e->chunk < HM_DIFF_BLOCK_MAX ? e->chunk : HM_DIFF_BLOCK_MAX;
	const uint32_t *cnt = e->counts.map;
	uint64_t sum = 0;

	for (size_t i = 0; i < n * (e->chunk / block); i++)
		sum += cnt[i];
	return sum;
}

/*
 * The copy-back of a dispatch recorded into a command buffer before it
 * runs (hm_engine_record()): the marks are not known yet, so every
 * published mirror is listed with its mark word, and diff.comp skips the
 * ones the device did not store into.  Where the table names a mirror's
 * bytes in the dense window, those are diffed, and the changed units
 * written to the pool copy too.  Returns the number listed (>= 0; the
 * counts of that many are summed by hm_engine_copied_bytes()).
 *
 * compact.comp first keeps the marked ones and writes the indirect
 * dispatch of diff.comp over them: with 64 mirrors of which 2 written, the
 * diff gated by each workgroup's mark cost lavapipe 2.5x
 * hm_engine_dispatch(), the compacted one 0.99x (Documentation/engine.rst,
 * "Your command stream").
 */
int hm_engine_record_copy_back(struct hm_engine *e, VkCommandBuffer cb)
{
	uint32_t block = e->chunk < HM_DIFF_BLOCK_MAX ? e->chunk : HM_DIFF_BLOCK_MAX;
	uint32_t blocks = e->chunk / block;
	uint32_t nr_slots = e->pool.nr_slabs * e->pool.slots_per_slab;
	size_t n = 0;
	uint64_t *d;
	int err;

	err = ensure_descs(e, e->pool.nr_live ? e->pool.nr_live : 1, blocks);
	if (err)
		return err;
	d = e->descs.map;
	for (uint32_t m = 0; m < nr_slots && n < e->cap_descs; m++) {
		const struct hm_mirror *mi = &e->pool.m[m];
		struct hm_espace *sp;
		struct hm_chunk *c;
		uint64_t chunk, live, pool;
		uint32_t slot;

		if (mi->space == UINT32_MAX)
			continue;
		sp = &e->spaces[mi->space];
		c = &sp->ch[mi->idx];
		if (c->mirror != m || !(c->flags & HM_CH_PUBLISHED) || (c->flags & HM_CH_STALE))
			continue;
		chunk = hm_espace_gchunk(sp, mi->idx);  /* a mirrored chunk is mapped once */
		if (hm_table_find(e->table, chunk, &slot) ||
		    hm_table_lookup(e->table, chunk << e->shift, &live, NULL))
			continue;
		pool = hm_pool_mirror_addr(e, m);
		memset(d + HM_DIFF_DESC_WORDS * n, 0, HM_DIFF_DESC_BYTES);
		d[HM_DIFF_DESC_WORDS * n + 0] = live;
		d[HM_DIFF_DESC_WORDS * n + 1] = hm_pool_twin_addr(e, m);
		d[HM_DIFF_DESC_WORDS * n + 2] = hm_espace_home_addr(e, sp, mi->idx);
		d[HM_DIFF_DESC_WORDS * n + 3] = hm_table_mark_addr(e->marks_buf.addr, slot);
		d[HM_DIFF_DESC_WORDS * n + 4] = live != pool ? pool : 0;
		n++;
	}
	if (!n)
		return 0;               /* nothing mirrored: nothing to copy */
	memset(e->counts.map, 0, n * blocks * 4);
	if (n > e->vk->props.limits.maxComputeWorkGroupCount[1]) {
		record_diff(e, cb, n);  /* too many for one indirect dispatch: gated */
		return (int)n;
	}
	if (!e->indirect.buf) {
		err = hm_vk_buffer_new(e->vk, 16, HM_VK_MEM_DEVICE, &e->indirect);
		if (err)
			return err;
	}
	{
		struct {
			uint64_t descs_in, descs_out, indirect;
			uint32_t n, blocks_per_chunk;
		} cpush = { e->descs.addr, e->descs_out.addr, e->indirect.addr, (uint32_t)n, blocks };
		struct {
			uint64_t descs, counts;
			uint32_t block_bytes, blocks_per_chunk;
		} dpush = { e->descs_out.addr, e->counts.addr, block, blocks };
		VkMemoryBarrier mb = {
			.sType = VK_STRUCTURE_TYPE_MEMORY_BARRIER,
			.srcAccessMask = VK_ACCESS_SHADER_WRITE_BIT,
			.dstAccessMask = VK_ACCESS_INDIRECT_COMMAND_READ_BIT | VK_ACCESS_SHADER_READ_BIT,
		};

		hm_vk_cmd_dispatch(cb, &e->compact, &cpush, sizeof(cpush), 1, 1, 1);
		vkCmdPipelineBarrier(cb, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT,
				     VK_PIPELINE_STAGE_DRAW_INDIRECT_BIT |
				     VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT, 0, 1, &mb, 0, NULL, 0, NULL);
		vkCmdBindPipeline(cb, VK_PIPELINE_BIND_POINT_COMPUTE, e->diff.pipe);
		vkCmdPushConstants(cb, e->diff.layout, VK_SHADER_STAGE_COMPUTE_BIT, 0,
				   sizeof(dpush), &dpush);
		vkCmdDispatchIndirect(cb, e->indirect.buf, 0);
	}
	return (int)n;
}

int hm_engine_diff_init(struct hm_engine *e)
{
	int err = hm_vk_pipeline_new(e->vk, hm_diff_spv, sizeof(hm_diff_spv) / 4, "main",
				     24, &e->diff);

	if (!err)
		err = hm_vk_pipeline_new(e->vk, hm_compact_spv, sizeof(hm_compact_spv) / 4,
					 "main", 32, &e->compact);
	return err;
}
