// SPDX-License-Identifier: LGPL-2.1-or-later
/*
 * The engine: adding and removing spaces, pipelines, the dispatch sequence
 * and its statistics.  See lib/include/hmirror/engine.h and
 * Documentation/engine.rst.
 *
 * hm_engine_dispatch() visits each file of lib/engine in turn:
 *   0 home pieces the table names imported; tier two if ready (space.c, tier.c)
 *   1 harvest CPU writes; drop the mirrors they hit        (harvest.c, rule 2)
 *   2 upload wanted clean chunks, publish if generation held (upload.c, rule 3;
 *     the slots and table entries it takes: mirror.c; the copies: twin.c)
 *   3 the window made to agree with the table; the dispatch (window.c, here)
 *   4 scan marks, copy changed mirror bytes home            (copyback.c, rule 4)
 * A dispatch flagged HM_DISPATCH_SHARED_WITH_CPU skips 2, repoints every
 * mirror home for its duration (mirror.c) and drops the mirrors it stored
 * into (rule 5).
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"

#define HM_HARVEST_BATCH 4096

/* The event a recorded work sets last, and the engine's timeline. */
static int work_sync_init(struct hm_engine *e)
{
	VkEventCreateInfo ei = { .sType = VK_STRUCTURE_TYPE_EVENT_CREATE_INFO };
	VkSemaphoreTypeCreateInfo ti = {
		.sType = VK_STRUCTURE_TYPE_SEMAPHORE_TYPE_CREATE_INFO,
		.semaphoreType = VK_SEMAPHORE_TYPE_TIMELINE,
	};
	VkSemaphoreCreateInfo si = { .sType = VK_STRUCTURE_TYPE_SEMAPHORE_CREATE_INFO, .pNext = &ti };
	int err;

	err = hm_vk_errno(vkCreateEvent(e->vk->dev, &ei, NULL, &e->work_done));
	if (!err)
		err = hm_vk_errno(vkCreateSemaphore(e->vk->dev, &si, NULL, &e->timeline));
	return err;
}

int hm_engine_new(struct hm_vk *vk, const struct hm_engine_params *p, struct hm_engine **ret)
{
	static const struct hm_engine_params defaults;
	struct hm_engine *e;
	uint64_t budget;
	uint32_t type;
	int err;

	if (!ret)
		return -EINVAL;
	*ret = NULL;
	if (!vk)
		return -EINVAL;
	if (!p)
		p = &defaults;
	if (p->flags & ~(HM_ENGINE_FLAGS_ALL | HM_ENGINE_NO_WINDOW | HM_ENGINE_NO_AHEAD |
			 HM_ENGINE_AHEAD_EARLY) ||
	    p->max_chunks > HM_ENGINE_MAX_CHUNKS_LIMIT ||
	    p->twin_mode > HM_TWIN_GATHER || p->reserved[0] || p->reserved[1] || p->reserved[2])
		return -EINVAL;
	if (p->chunk_shift && (p->chunk_shift < HM_TABLE_MIN_CHUNK_SHIFT ||
			       p->chunk_shift > HM_CHUNK_SHIFT_MAX))
		return -EINVAL;
	if (vk->lost)
		return -ENODEV;
	e = calloc(1, sizeof(*e));
	if (!e)
		return -ENOMEM;
	pthread_mutex_init(&e->lock, NULL);
	e->vk = vk;
	e->p = *p;
	e->shift = p->chunk_shift ? p->chunk_shift : HM_CHUNK_SHIFT_DEFAULT;
	e->chunk = 1ull << e->shift;
	if (!e->p.hot_marks)
		e->p.hot_marks = 2;
	if (!e->p.thrash_drops)
		e->p.thrash_drops = 3;
	if (!e->p.thrash_window)
		e->p.thrash_window = 16;
	if (!e->p.thrash_backoff)
		e->p.thrash_backoff = 64;
	if (!e->p.max_chunks)
		e->p.max_chunks = HM_ENGINE_MAX_CHUNKS;
	e->p.twin_mode = hm_twin_mode(vk, p->twin_mode);
	e->mirrors = !(p->flags & HM_ENGINE_NO_MIRRORS);
	if (e->mirrors && (!vk->has_8bit_storage || !vk->has_int8)) {
		/* the copy-back stores single bytes home (diff.comp) */
		err = -EOPNOTSUPP;
		goto out_free;
	}

	budget = p->mirror_budget;
	if (!budget && !hm_vk_memory_type(vk, ~0u, HM_VK_MEM_DEVICE, &type))
		budget = hm_vk_heap_size(vk, type) / 4;
	if (!e->mirrors)
		budget = 0;
	err = hm_pool_init(e, budget);
	if (err)
		goto out_free;
	e->st.mirror_budget = e->pool.budget;

	e->harvest_cap = HM_HARVEST_BATCH;
	e->harvest_buf = calloc(e->harvest_cap, sizeof(*e->harvest_buf));
	if (!e->harvest_buf) {
		err = -ENOMEM;
		goto out_free;
	}
	if (e->mirrors) {
		err = hm_engine_diff_init(e);
		if (!err)
			err = hm_engine_twin_init(e);
		if (err)
			goto out_free;
	}
	err = hm_engine_table_rebuild(e, 1);
	if (!err)
		err = hm_window_init(e);
	if (!err)
		err = hm_tiers_init(e);
	if (err)
		goto out_free;
	err = hm_vk_cmd_new(vk, &e->cmd_dispatch);
	if (!err && e->mirrors)
		err = hm_vk_cmd_new(vk, &e->cmd_upload);
	if (!err && e->mirrors)
		err = hm_vk_cmd_new(vk, &e->cmd_back);
	if (!err)
		err = work_sync_init(e);
	if (err)
		goto out_free;
	if (vk->timestamp_valid_bits && vk->props.limits.timestampComputeAndGraphics &&
	    !(p->flags & HM_ENGINE_NO_TIMESTAMPS)) {
		VkQueryPoolCreateInfo qi = {
			.sType = VK_STRUCTURE_TYPE_QUERY_POOL_CREATE_INFO,
			.queryType = VK_QUERY_TYPE_TIMESTAMP,
			.queryCount = 2,
		};

		if (vkCreateQueryPool(vk->dev, &qi, NULL, &e->timestamps))
			e->timestamps = VK_NULL_HANDLE;        /* timing on the host only */
	}
	*ret = e;
	return 0;

out_free:
	hm_engine_free(e);
	return err;
}

void hm__test_engine_hooks(struct hm_engine *e, const struct hm_engine_test_hooks *h)
{
	pthread_mutex_lock(&e->lock);
	e->test = h ? *h : (struct hm_engine_test_hooks){ 0 };
	pthread_mutex_unlock(&e->lock);
}

size_t hm__engine_nr_published(const struct hm_engine *e)
{
	size_t n = 0;

	for (uint32_t id = 0; id < e->spaces_end; id++)
		for (uint64_t idx = 0; e->spaces[id].used && idx < e->spaces[id].nr_chunks; idx++) {
			const struct hm_chunk *c = &e->spaces[id].ch[idx];

			n += c->mirror != HM_NO_MIRROR && (c->flags & HM_CH_PUBLISHED);
		}
	return n;
}

void hm_engine_free(struct hm_engine *e)
{
	if (!e)
		return;
	if (e->work.mode == HM_WORK_SUBMITTED)
		hm_vk_cmd_wait(e->vk, &e->cmd_dispatch, UINT64_MAX);
	else if (e->work.mode == HM_WORK_RECORDED && !e->vk->lost)
		vkDeviceWaitIdle(e->vk->dev);   /* the caller's buffer, if it was submitted */
	hm_tiers_finish(e);     /* the compile thread first: it takes the lock */
	for (uint32_t i = 0; i < HM_ENGINE_MAX_PIPELINES; i++)
		if (e->pipes[i].used) {
			hm_tier_forget(e, &e->pipes[i]);
			hm_vk_pipeline_free(e->vk, &e->pipes[i].p);
		}
	hm_window_finish(e);
	for (uint32_t i = 0; i < HM_ENGINE_MAX_SPACES; i++)
		if (e->spaces[i].used)
			hm_espace_release(e, &e->spaces[i]);
	hm_pool_finish(e);
	hm_engine_table_free(e);
	hm_gmap_finish(e);
	hm_vk_buffer_free(e->vk, &e->descs);
	hm_vk_buffer_free(e->vk, &e->counts);
	hm_vk_buffer_free(e->vk, &e->descs_out);
	hm_vk_buffer_free(e->vk, &e->indirect);
	hm_vk_pipeline_free(e->vk, &e->diff);
	hm_vk_pipeline_free(e->vk, &e->compact);
	hm_vk_pipeline_free(e->vk, &e->twin);
	hm_vk_buffer_free(e->vk, &e->twin_addrs);
	hm_vk_pipeline_free(e->vk, &e->gather);
	hm_vk_buffer_free(e->vk, &e->gather_descs);
	free(e->span_gen);
	free(e->gen_spans);
	free(e->ahead_regs);
	if (e->timestamps)
		vkDestroyQueryPool(e->vk->dev, e->timestamps, NULL);
	if (e->work_done)
		vkDestroyEvent(e->vk->dev, e->work_done, NULL);
	if (e->timeline)
		vkDestroySemaphore(e->vk->dev, e->timeline, NULL);
	hm_vk_cmd_free(e->vk, &e->cmd_dispatch);
	hm_vk_cmd_free(e->vk, &e->cmd_upload);
	hm_vk_cmd_free(e->vk, &e->cmd_back);
	free(e->queue);
	free(e->harvest_buf);
	free(e->cand);
	free(e->cand_slot);
	free(e->idxs);
	free(e->uoff);
	free(e->ug0);
	free(e->ug1);
	free(e->back);
	hm_engine_ahead_free(e);
	pthread_mutex_destroy(&e->lock);
	free(e);
}

int hm_engine_add_space(struct hm_engine *e, struct hm_space *s, uint64_t guest_addr,
			uint32_t *ret_id)
{
	struct hm_espace *sp = NULL;
	uint64_t size, nr;
	uint32_t id;
	int err;

	if (!e || !s)
		return -EINVAL;
	size = hm_space_size(s);
	/* the space's watch unit: the engine's chunk or finer, at most 64 a chunk */
	if (hm_space_chunk_shift(s) > e->shift || e->shift - hm_space_chunk_shift(s) > 6 ||
	    !size || size & (e->chunk - 1) ||
	    (guest_addr != HM_ENGINE_UNMAPPED &&
	     (guest_addr & (e->chunk - 1) || guest_addr + size < guest_addr)))
		return -EINVAL;
	nr = size >> e->shift;
	pthread_mutex_lock(&e->lock);
	err = -ENODEV;
	if (e->vk->lost)
		goto out_unlock;
	err = -EBUSY;
	if (e->work.mode)
		goto out_unlock;
	err = -E2BIG;
	if (e->total_chunks + nr > e->p.max_chunks)
		goto out_unlock;
	for (id = 0; id < HM_ENGINE_MAX_SPACES; id++) {
		struct hm_espace *o = &e->spaces[id];

		if (!o->used) {
			if (!sp)
				sp = o;
			continue;
		}
		if (o->s == s) {
			err = -EEXIST;
			goto out_unlock;
		}
	}
	err = -EMFILE;
	if (!sp)
		goto out_unlock;
	id = sp - e->spaces;
	memset(sp, 0, sizeof(*sp));
	sp->s = s;
	sp->size = size;
	sp->nr_chunks = nr;
	sp->wshift = e->shift - hm_space_chunk_shift(s);
	sp->ch = malloc(nr * sizeof(*sp->ch));
	sp->ugen = malloc((nr << sp->wshift) * sizeof(*sp->ugen));
	/* calloc: untouched pages of a large space cost nothing */
	sp->nmap = calloc(nr, sizeof(*sp->nmap));
	sp->gchunk = calloc(nr, sizeof(*sp->gchunk));
	err = -ENOMEM;
	if (!sp->ch || !sp->ugen || !sp->nmap || !sp->gchunk)
		goto out_release;
	for (uint64_t i = 0; i < nr; i++)
		sp->ch[i] = (struct hm_chunk){ .mirror = HM_NO_MIRROR, .flags = HM_CH_HOME_ONLY };
	err = hm_espace_import(e, sp);
	if (err)
		goto out_release;
	sp->used = true;
	if (id >= e->spaces_end)
		e->spaces_end = id + 1;
	e->total_chunks += nr;
	if (guest_addr != HM_ENGINE_UNMAPPED) {
		err = hm_engine_map_space(e, id, guest_addr);
		if (err) {
			e->total_chunks -= nr;
			goto out_release;
		}
	}
	if (ret_id)
		*ret_id = id;
	pthread_mutex_unlock(&e->lock);
	return 0;

out_release:
	hm_espace_release(e, sp);
out_unlock:
	pthread_mutex_unlock(&e->lock);
	return err;
}

int hm_engine_remove_space(struct hm_engine *e, uint32_t id)
{
	struct hm_espace *sp;

	if (!e || id >= HM_ENGINE_MAX_SPACES)
		return -EINVAL;
	pthread_mutex_lock(&e->lock);
	sp = &e->spaces[id];
	if (!sp->used || e->work.mode) {
		pthread_mutex_unlock(&e->lock);
		return e->work.mode ? -EBUSY : -ENOENT;
	}
	/* mirrors hold nothing that is not home: every dispatch copied back */
	hm_engine_unmap_space(e, id);
	hm_window_maps_changed(e);
	{
		size_t keep = 0;

		for (size_t q = 0; q < e->nr_queue; q++)
			if (hm_ref_space(e->queue[q]) != id)
				e->queue[keep++] = e->queue[q];
		e->nr_queue = keep;
	}
	e->total_chunks -= sp->nr_chunks;
	hm_espace_release(e, sp);
	while (e->spaces_end && !e->spaces[e->spaces_end - 1].used)
		e->spaces_end--;
	pthread_mutex_unlock(&e->lock);
	return 0;
}

int hm_engine_pipeline_new(struct hm_engine *e, const uint32_t *spirv, size_t nr_words,
			   const char *entry, uint32_t user_push_words, uint32_t *ret_id)
{
	return hm_engine_pipeline_new_tiered(e, spirv, nr_words, entry, user_push_words, 0, ret_id);
}

void hm_engine_pipeline_free(struct hm_engine *e, uint32_t id)
{
	if (!e || id >= HM_ENGINE_MAX_PIPELINES)
		return;
	pthread_mutex_lock(&e->lock);
	if (e->pipes[id].used && e->work.mode && e->work.pipeline == id) {
		e->work.free_pipeline = true;   /* freed when the work completes */
	} else if (e->pipes[id].used) {
		hm_tier_forget(e, &e->pipes[id]);
		hm_vk_pipeline_free(e->vk, &e->pipes[id].p);
		e->pipes[id].used = false;
	}
	pthread_mutex_unlock(&e->lock);
}

/* The push block: the table's and window's words, then the caller's. */
static uint32_t push_words(struct hm_engine *e, bool shared, const uint32_t *push,
			   uint32_t nr_push, uint32_t *words)
{
	uint64_t marks = e->marks_buf.addr;

	words[HM_PUSH_TABLE_ADDR_LO] = (uint32_t)e->table_buf.addr;
	words[HM_PUSH_TABLE_ADDR_HI] = (uint32_t)(e->table_buf.addr >> 32);
	words[HM_PUSH_TABLE_NR_HOME] = hm_table_nr_home(e->table);
	words[HM_PUSH_CHUNK_SHIFT] = e->shift;
	words[HM_PUSH_MARKS_ADDR_LO] = (uint32_t)marks;
	words[HM_PUSH_MARKS_ADDR_HI] = (uint32_t)(marks >> 32);
	hm_window_push(e, shared, words);
	if (nr_push)
		memcpy(words + HM_DEVICE_TABLE_PUSH_WORDS, push, 4 * nr_push);
	return 4 * (HM_DEVICE_TABLE_PUSH_WORDS + nr_push);
}

/* The caller's dispatch submitted, the uploads ahead made meanwhile
 * (ahead.c), then waited for as hm_vk_cmd_run() waits. */
static int run_with_ahead(struct hm_engine *e)
{
	uint64_t t0 = hm_now_ns();
	int err = hm_vk_cmd_submit(e->vk, &e->cmd_dispatch, NULL);

	if (err)
		return err;
	hm_engine_ahead(e, t0);
	return hm_vk_cmd_finish(e->vk, &e->cmd_dispatch, e->p.timeout_ns);
}

static int run_dispatch(struct hm_engine *e, struct hm_pipe *pp, uint32_t gx, uint32_t gy,
			uint32_t gz, const uint32_t *push, uint32_t nr_push, bool shared)
{
	uint32_t words[HM_DEVICE_TABLE_PUSH_WORDS + HM_ENGINE_MAX_USER_PUSH_WORDS];
	uint32_t bytes = push_words(e, shared, push, nr_push, words);
	VkCommandBuffer cb;
	int err;

	err = hm_vk_cmd_start(e->vk, &e->cmd_dispatch, &cb);
	if (err)
		return err;
	if (e->timestamps) {
		vkCmdResetQueryPool(cb, e->timestamps, 0, 2);
		vkCmdWriteTimestamp(cb, VK_PIPELINE_STAGE_TOP_OF_PIPE_BIT, e->timestamps, 0);
	}
	hm_vk_cmd_dispatch(cb, &pp->p, words, bytes, gx, gy, gz);
	if (e->timestamps)
		vkCmdWriteTimestamp(cb, VK_PIPELINE_STAGE_BOTTOM_OF_PIPE_BIT, e->timestamps, 1);
	hm_vk_cmd_barrier(cb);
	if (hm_engine_ahead_enabled(e, shared))
		err = run_with_ahead(e);
	else
		err = hm_vk_cmd_run(e->vk, &e->cmd_dispatch, e->p.timeout_ns);
	if (!err && e->timestamps) {
		uint64_t ts[2];
		uint64_t mask = e->vk->timestamp_valid_bits >= 64 ? ~0ull :
				(1ull << e->vk->timestamp_valid_bits) - 1;

		if (!vkGetQueryPoolResults(e->vk->dev, e->timestamps, 0, 2, sizeof(ts), ts, 8,
					   VK_QUERY_RESULT_64_BIT | VK_QUERY_RESULT_WAIT_BIT)) {
			e->walk_ns = (uint64_t)((double)((ts[1] - ts[0]) & mask) *
						e->vk->timestamp_period_ns);
			e->st.ns_dispatch_gpu += e->walk_ns;
		}
	}
	return err;
}

/* may pipeline pp be dispatched now (engine lock held)?  -EINVAL not a
 * live pipeline or another push size, -ENODEV device lost, -EBUSY a
 * recorded or submitted work in flight */
static int dispatch_allowed(struct hm_engine *e, const struct hm_pipe *pp, uint32_t nr_push)
{
	if (!pp->used || nr_push != pp->user_words)
		return -EINVAL;
	if (e->vk->lost)
		return -ENODEV;
	if (e->work.mode)
		return -EBUSY;
	return 0;
}

/* Arguments every dispatch path checks; the pipeline under e->lock. */
static int check_args(struct hm_engine *e, uint32_t pipeline, const uint32_t groups[3],
		      const uint32_t *push, uint32_t nr_push, uint32_t flags)
{
	const uint32_t *max = e->vk->props.limits.maxComputeWorkGroupCount;

	if (pipeline >= HM_ENGINE_MAX_PIPELINES || (flags & ~HM_DISPATCH_FLAGS_ALL) ||
	    (nr_push && !push) || groups[0] > max[0] || groups[1] > max[1] || groups[2] > max[2])
		return -EINVAL;
	return 0;
}

/* step 2: the uploads or rule 5's repointing, then the window; under e->lock */
static int upload_and_sync(struct hm_engine *e, bool shared)
{
	uint64_t t0;
	int err;

	err = shared ? hm_engine_unpublish_all(e) : hm_engine_republish(e);
	if (!err && !shared)
		err = hm_engine_upload(e);
	if (err)
		return err;
	t0 = hm_now_ns();
	err = hm_window_sync(e, shared);
	e->st.ns_window_sync += hm_now_ns() - t0;
	return err;
}

/*
 * Steps 1 and 2 of a dispatch (harvest, uploads or rule 5's repointing,
 * the window, the table flushed), under e->lock: what the device reads is
 * final when it returns 0.  *t[0..2]: harvest start, its end, the end.
 */
static int prepare(struct hm_engine *e, struct hm_pipe *pp, bool shared, uint64_t t[3])
{
	int err;

	/* first, so that a refused import leaves no trace of the dispatch */
	err = hm_engine_import_named(e);
	if (err)
		return err;
	hm_tier_switch(e, pp);          /* a dispatch boundary: tier two if ready */
	e->seq++;
	t[0] = hm_now_ns();
	err = hm_engine_harvest(e);
	if (err)
		return err;
	t[1] = hm_now_ns();
	err = upload_and_sync(e, shared);
	if (err)
		return err;
	if (e->test.before_dispatch)
		e->test.before_dispatch(e->test.arg);
	hm_table_flush(e->table);
	t[2] = hm_now_ns();
	return 0;
}

int hm_engine_prefetch(struct hm_engine *e)
{
	uint64_t uploads, t0;
	int err;

	if (!e)
		return -EINVAL;
	pthread_mutex_lock(&e->lock);
	err = hm_engine_idle(e);
	if (!err) {
		/* prepare()'s steps; the tier switch and the dispatch sequence
		 * (thrash control's clock) are the next dispatch's own */
		uploads = e->st.uploads;
		t0 = hm_now_ns();
		err = hm_engine_import_named(e);
		if (!err)
			err = hm_engine_harvest(e);
		if (!err)
			err = upload_and_sync(e, false);
		if (!err)
			hm_table_flush(e->table);
		e->st.ns_prefetch += hm_now_ns() - t0;
		e->st.prefetches++;
		if (!err)
			err = hm_count_ret(e->st.uploads - uploads);
	}
	pthread_mutex_unlock(&e->lock);
	return err;
}

/*
 * A dispatch that ran but could not copy its writes home (the marks scan,
 * the window or the copy-back failed: an allocation the device refused):
 * the mirrors it may have written are dropped, so that none of its bytes
 * reaches home later, through the next dispatch's copy-back, after this
 * one was answered with an error.  Home keeps each byte's old value, and
 * every earlier dispatch's writes are home already (rule 4).
 */
static void drop_unreturned(struct hm_engine *e, bool scanned)
{
	uint32_t nr_slots = e->pool.nr_slabs * e->pool.slots_per_slab;

	if (scanned) {
		for (size_t i = 0; i < e->nr_back; i++)
			hm_engine_drop_mirror(e, hm_ref_space(e->back[i]), hm_ref_idx(e->back[i]));
	} else {
		/* which ones it wrote is not known: all of them */
		for (uint32_t m = 0; m < nr_slots; m++)
			if (e->pool.m[m].space != UINT32_MAX)
				hm_engine_drop_mirror(e, e->pool.m[m].space, e->pool.m[m].idx);
	}
	e->nr_back = 0;
}

int hm_engine_dispatch(struct hm_engine *e, uint32_t pipeline, uint32_t gx, uint32_t gy,
		       uint32_t gz, const uint32_t *push, uint32_t nr_push, uint32_t flags)
{
	bool scanned = false;
	bool shared = flags & HM_DISPATCH_SHARED_WITH_CPU;
	const uint32_t groups[3] = { gx, gy, gz };
	uint64_t t[3], t3, t4, t5;
	struct hm_pipe *pp;
	int err;

	if (!e || check_args(e, pipeline, groups, push, nr_push, flags))
		return -EINVAL;
	pthread_mutex_lock(&e->lock);
	pp = &e->pipes[pipeline];
	err = dispatch_allowed(e, pp, nr_push);
	if (err)
		goto out_unlock;
	err = prepare(e, pp, shared, t);
	if (err)
		goto out_unlock;
	err = run_dispatch(e, pp, gx, gy, gz, push, nr_push, shared);
	t3 = hm_now_ns();
	if (err) {
		hm_engine_ahead_finish(e, false);
		goto out_unlock;        /* device lost: nothing is copied home */
	}
	err = hm_engine_scan_marks(e, shared);
	scanned = !err;
	if (!err)
		err = hm_window_after_dispatch(e, shared);
	t4 = hm_now_ns();
	if (!err && !shared)
		err = hm_engine_copy_back(e);
	/* the marks are scanned: the copies made beside the dispatch */
	hm_engine_ahead_finish(e, !err);
	if (err && !e->vk->lost)
		drop_unreturned(e, scanned);
	t5 = hm_now_ns();
	e->st.dispatches++;
	if (shared)
		e->st.shared_dispatches++;
	e->st.ns_harvest += t[1] - t[0];
	e->st.ns_upload += t[2] - t[1];
	e->st.ns_dispatch += t3 - t[2];
	e->st.ns_marks += t4 - t3;
	e->st.ns_copy_back += t5 - t4;
	e->st.ns_total += t5 - t[0];
out_unlock:
	pthread_mutex_unlock(&e->lock);
	return err;
}

/*
 * The device's part of a dispatch, recorded into cb: a barrier after the
 * caller's earlier commands, the dispatch, a barrier, the copy-back of
 * every published mirror the device stores into (diff.comp, gated by the
 * marks: the writes are home before anything after cb runs, rule 4), a
 * barrier, and the event hm_engine_complete() reads.
 */
static int record_work(struct hm_engine *e, VkCommandBuffer cb, struct hm_pipe *pp,
		       const struct hm_engine_dispatch *d, bool shared)
{
	uint32_t words[HM_DEVICE_TABLE_PUSH_WORDS + HM_ENGINE_MAX_USER_PUSH_WORDS];
	uint32_t bytes = push_words(e, shared, d->push, d->nr_push, words);
	/* against the caller's commands before and after, of any stage */
	VkMemoryBarrier full = {
		.sType = VK_STRUCTURE_TYPE_MEMORY_BARRIER,
		.srcAccessMask = VK_ACCESS_MEMORY_WRITE_BIT,
		.dstAccessMask = VK_ACCESS_MEMORY_READ_BIT | VK_ACCESS_MEMORY_WRITE_BIT,
	};
	int n = 0;

	vkCmdPipelineBarrier(cb, VK_PIPELINE_STAGE_ALL_COMMANDS_BIT,
			     VK_PIPELINE_STAGE_ALL_COMMANDS_BIT, 0, 1, &full, 0, NULL, 0, NULL);
	hm_vk_cmd_dispatch(cb, &pp->p, words, bytes, d->groups[0], d->groups[1], d->groups[2]);
	if (e->mirrors && !shared) {
		hm_vk_cmd_barrier(cb);
		n = hm_engine_record_copy_back(e, cb);
		if (n < 0)
			return n;
	}
	/* and the host's reads of home once the submission is signalled */
	full.dstAccessMask |= VK_ACCESS_HOST_READ_BIT;
	vkCmdPipelineBarrier(cb, VK_PIPELINE_STAGE_ALL_COMMANDS_BIT,
			     VK_PIPELINE_STAGE_ALL_COMMANDS_BIT | VK_PIPELINE_STAGE_HOST_BIT,
			     0, 1, &full, 0, NULL, 0, NULL);
	vkCmdSetEvent(cb, e->work_done, VK_PIPELINE_STAGE_ALL_COMMANDS_BIT);
	e->work.nr_descs = n;
	return 0;
}

static int start_work(struct hm_engine *e, VkCommandBuffer cb, const struct hm_engine_dispatch *d,
		      enum hm_work_mode mode, struct hm_engine_work **ret)
{
	bool shared;
	struct hm_pipe *pp;
	uint64_t t[3];
	int err;

	if (ret)
		*ret = NULL;
	if (!e || !d || !ret || (mode == HM_WORK_RECORDED && !cb) ||
	    check_args(e, d->pipeline, d->groups, d->push, d->nr_push, d->flags) ||
	    (mode == HM_WORK_RECORDED && (d->wait_sem || d->signal_sem)))
		return -EINVAL;
	shared = d->flags & HM_DISPATCH_SHARED_WITH_CPU;
	pthread_mutex_lock(&e->lock);
	pp = &e->pipes[d->pipeline];
	err = dispatch_allowed(e, pp, d->nr_push);
	if (err)
		goto out_unlock;
	err = hm_vk_errno(vkResetEvent(e->vk->dev, e->work_done));
	if (!err)
		err = prepare(e, pp, shared, t);
	if (err)
		goto out_unlock;
	e->work = (struct hm_engine_work){ .e = e, .mode = mode, .shared = shared,
					   .pipeline = d->pipeline, .t0 = t[0] };
	e->st.ns_harvest += t[1] - t[0];
	e->st.ns_upload += t[2] - t[1];
	if (mode == HM_WORK_SUBMITTED) {
		struct hm_vk_sync sync = { .wait_sem = d->wait_sem, .wait_value = d->wait_value,
					   .signal_sem = d->signal_sem,
					   .signal_value = d->signal_value };

		if (!sync.signal_sem) {
			sync.signal_sem = e->timeline;
			sync.signal_value = ++e->timeline_value;
		}
		err = hm_vk_cmd_start(e->vk, &e->cmd_dispatch, &cb);
		if (!err)
			err = record_work(e, cb, pp, d, shared);
		if (!err)
			err = hm_vk_cmd_submit(e->vk, &e->cmd_dispatch, &sync);
		e->work.sem = sync.signal_sem;
		e->work.value = sync.signal_value;
	} else {
		err = record_work(e, cb, pp, d, shared);
	}
	if (err) {
		/* nothing of it runs: the marks stay clear, the mirrors as
		 * they are (they hold nothing that is not home) */
		e->work.mode = HM_WORK_NONE;
		goto out_unlock;
	}
	e->work.ns_host = hm_now_ns() - t[0];
	*ret = &e->work;
	if (mode == HM_WORK_SUBMITTED)
		e->st.dispatches_submitted++;
	else
		e->st.dispatches_recorded++;
out_unlock:
	pthread_mutex_unlock(&e->lock);
	return err;
}

int hm_engine_record(struct hm_engine *e, VkCommandBuffer cb, const struct hm_engine_dispatch *d,
		     struct hm_engine_work **ret)
{
	return start_work(e, cb, d, HM_WORK_RECORDED, ret);
}

int hm_engine_submit(struct hm_engine *e, const struct hm_engine_dispatch *d,
		     struct hm_engine_work **ret)
{
	return start_work(e, VK_NULL_HANDLE, d, HM_WORK_SUBMITTED, ret);
}

int hm_engine_work_timeline(const struct hm_engine_work *w, VkSemaphore *ret_sem,
			    uint64_t *ret_value)
{
	if (!w || !ret_sem || !ret_value || w->mode != HM_WORK_SUBMITTED)
		return -EINVAL;
	*ret_sem = w->sem;
	*ret_value = w->value;
	return 0;
}

/* Has the recorded work's last command run?  Polls its event. */
static int recorded_wait(struct hm_engine *e, uint64_t timeout_ns)
{
	uint64_t end = hm_now_ns() + timeout_ns;
	struct timespec ts = { 0, 20000 };

	for (;;) {
		VkResult r = vkGetEventStatus(e->vk->dev, e->work_done);

		if (r == VK_EVENT_SET)
			return 0;
		if (r != VK_EVENT_RESET) {
			if (r == VK_ERROR_DEVICE_LOST)
				e->vk->lost = true;
			return hm_vk_errno(r);
		}
		if (!timeout_ns || hm_now_ns() >= end)
			return -EAGAIN;
		nanosleep(&ts, NULL);
	}
}

static void retire(struct hm_engine *e)
{
	uint32_t id = e->work.pipeline;

	if (e->work.free_pipeline && e->pipes[id].used) {
		hm_tier_forget(e, &e->pipes[id]);
		hm_vk_pipeline_free(e->vk, &e->pipes[id].p);
		e->pipes[id].used = false;
	}
	e->work.mode = HM_WORK_NONE;
}

int hm_engine_complete(struct hm_engine_work *w, uint64_t timeout_ns)
{
	struct hm_engine *e;
	uint64_t t0, t1;
	int err;

	if (!w || !w->e || w != &w->e->work)
		return -EINVAL;
	e = w->e;
	pthread_mutex_lock(&e->lock);
	err = -EINVAL;
	if (!w->mode)
		goto out_unlock;
	t0 = hm_now_ns();
	if (w->mode == HM_WORK_SUBMITTED)
		err = hm_vk_cmd_wait(e->vk, &e->cmd_dispatch, timeout_ns);
	else
		err = recorded_wait(e, timeout_ns);
	if (err == -EAGAIN)
		goto out_unlock;        /* still running: call again */
	if (err) {
		retire(e);              /* device lost: nothing more is copied */
		goto out_unlock;
	}
	t1 = hm_now_ns();
	err = hm_engine_scan_marks(e, w->shared);
	if (!err && !w->shared) {
		e->st.chunks_copied_home += e->nr_back;
		e->st.bytes_copied_home += hm_engine_copied_bytes(e, w->nr_descs);
	}
	e->st.dispatches++;
	if (w->shared)
		e->st.shared_dispatches++;
	e->st.ns_marks += hm_now_ns() - t1;
	e->st.ns_total += w->ns_host + (hm_now_ns() - t0);
	retire(e);
out_unlock:
	pthread_mutex_unlock(&e->lock);
	return err;
}

int hm_engine_cancel(struct hm_engine_work *w)
{
	struct hm_engine *e;
	int err = 0;

	if (!w || !w->e || w != &w->e->work)
		return -EINVAL;
	e = w->e;
	pthread_mutex_lock(&e->lock);
	if (w->mode != HM_WORK_RECORDED)
		err = -EINVAL;          /* a submitted work runs: complete it */
	else if (vkGetEventStatus(e->vk->dev, e->work_done) == VK_EVENT_SET)
		err = -EALREADY;        /* it ran: complete it */
	else
		retire(e);
	pthread_mutex_unlock(&e->lock);
	return err;
}

int hm_engine_is_mirrored(struct hm_engine *e, uint64_t guest_addr, bool *ret)
{
	struct hm_espace *sp;
	uint64_t idx;
	int err = 0;

	if (!e || !ret)
		return -EINVAL;
	pthread_mutex_lock(&e->lock);
	sp = hm_engine_space_of_chunk(e, guest_addr >> e->shift, NULL, &idx);
	if (!sp) {
		err = -ENOENT;
	} else {
		struct hm_chunk *c = &sp->ch[idx];

		*ret = c->mirror != HM_NO_MIRROR && (c->flags & HM_CH_PUBLISHED);
	}
	pthread_mutex_unlock(&e->lock);
	return err;
}

int hm_engine_device_addr(struct hm_engine *e, uint64_t guest_addr, uint64_t *ret)
{
	int err;

	if (!e || !ret)
		return -EINVAL;
	pthread_mutex_lock(&e->lock);
	/* what the device would be given: the pieces named imported first */
	err = hm_engine_import_named(e);
	if (!err)
		err = hm_table_lookup(e->table, guest_addr, ret, NULL);
	else
		*ret = 0;
	pthread_mutex_unlock(&e->lock);
	return err;
}

int hm_engine_stats(struct hm_engine *e, struct hm_engine_stats *ret)
{
	if (!e || !ret)
		return -EINVAL;
	pthread_mutex_lock(&e->lock);
	e->st.chunks_mirrored = e->pool.nr_live;
	e->st.window_bytes = e->win.buf.size;
	e->st.mirror_bytes = e->pool.used;
	*ret = e->st;
	pthread_mutex_unlock(&e->lock);
	return 0;
}
