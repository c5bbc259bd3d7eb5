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

/* bytes one workgroup diffs (H200, the workload's 257 hit chunks a
 * dispatch: 8.1 ms in 64 KiB blocks, 12.6 ms in 4 KiB ones) */
#define HM_DIFF_BLOCK_MAX (64u << 10)

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
	sp = hm_engine_space_of_chunk(e, chunk, &id);
	if (!sp)
		return;
	idx = chunk - sp->first_chunk;
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
	e->cap_descs = 0;
	err = hm_vk_buffer_new(e->vk, cap * 32, HM_VK_MEM_HOST, &e->descs);
	if (err)
		return err;
	err = hm_vk_buffer_new(e->vk, cap * blocks * 4, HM_VK_MEM_HOST, &e->counts);
	if (err) {
		hm_vk_buffer_free(e->vk, &e->descs);
		return err;
	}
	e->cap_descs = cap;
	return 0;
}

int hm_engine_copy_back(struct hm_engine *e)
{
	uint32_t block = e->chunk < HM_DIFF_BLOCK_MAX ? e->chunk : HM_DIFF_BLOCK_MAX;
	uint32_t blocks = e->chunk / block;
	uint32_t max_y = e->vk->props.limits.maxComputeWorkGroupCount[1];
	size_t n = e->nr_back;
	uint64_t *d, sum = 0;
	uint32_t *cnt;
	VkCommandBuffer cb;
	int err;
	struct {
		uint64_t descs, counts;
		uint32_t block_bytes, blocks_per_chunk;
	} push;

	if (!n)
		return 0;
	err = ensure_descs(e, n, blocks);
	if (err)
		return err;
	d = e->descs.map;
	for (size_t i = 0; i < n; i++) {
		struct hm_espace *sp = &e->spaces[hm_ref_space(e->back[i])];
		uint64_t idx = hm_ref_idx(e->back[i]);
		uint32_t m = sp->ch[idx].mirror;

		d[4 * i + 0] = hm_pool_mirror_addr(e, m);
		d[4 * i + 1] = hm_pool_twin_addr(e, m);
		d[4 * i + 2] = hm_espace_home_addr(e, sp, idx);
		d[4 * i + 3] = 0;
	}
	err = hm_vk_cmd_start(e->vk, &e->cmd_back, &cb);
	if (err)
		return err;
	push.block_bytes = block;
	push.blocks_per_chunk = blocks;
	for (size_t first = 0; first < n; first += max_y) {
		size_t k = n - first < max_y ? n - first : max_y;

		push.descs = e->descs.addr + first * 32;
		push.counts = e->counts.addr + first * blocks * 4;
		hm_vk_cmd_dispatch(cb, &e->diff, &push, sizeof(push), blocks, k, 1);
	}
	hm_vk_cmd_barrier(cb);
	err = hm_vk_cmd_run(e->vk, &e->cmd_back, e->p.timeout_ns);
	if (err)
		return err;
	cnt = e->counts.map;
	for (size_t i = 0; i < n * blocks; i++)
		sum += cnt[i];
	e->st.chunks_copied_home += n;
	e->st.bytes_copied_home += sum;
	return 0;
}

int hm_engine_diff_init(struct hm_engine *e)
{
	return hm_vk_pipeline_new(e->vk, hm_diff_spv, sizeof(hm_diff_spv) / 4, "main",
				  24, &e->diff);
}
