// SPDX-License-Identifier: LGPL-2.1-or-later
/*
 * Two tiers of a pipeline (D969a; Dolphin's hybrid ubershaders are the
 * precedent).  From the one module a caller gives, hm_spirv_tier_form()
 * makes the compact form (every load calls the helper) and the speculative
 * one (loads read the mirror window first).  The compact pipeline is built
 * on the caller's thread and used at once; the speculative one is built on
 * the engine's compile thread, through the engine's pipeline cache, and
 * the first dispatch after it is ready switches to it (hm_tier_switch(),
 * under the engine lock, before anything of that dispatch is recorded).
 * Both forms answer the same for the same table and window, so the switch
 * changes no result.  A module whose speculative form was compiled before
 * (its hash is in the cache's list) is built in that form directly.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"
#include "hmirror/lookup.h"

struct hm_tier_job {
	struct hm_tier_job *next;
	uint32_t pipe, gen;
	uint32_t push_bytes;
	uint64_t hash;
	uint32_t *words;
	size_t nr;
	char entry[64];
};

static uint64_t module_hash(const uint32_t *w, size_t n)
{
	uint64_t h = 0xcbf29ce484222325ull;     /* FNV-1a over the words */

	for (size_t i = 0; i < n; i++) {
		h ^= w[i];
		h *= 0x100000001b3ull;
	}
	return h ^ n;
}

static bool hash_known(struct hm_tiers *t, uint64_t h)
{
	for (size_t i = 0; i < t->nr_hashes; i++)
		if (t->hashes[i] == h)
			return true;
	return false;
}

static void *compile_thread(void *arg)
{
	struct hm_engine *e = arg;
	struct hm_tiers *t = &e->tiers;

	for (;;) {
		struct hm_tier_job *j;
		struct hm_vk_pipeline p;
		uint64_t t0, ns;
		int err;

		pthread_mutex_lock(&t->lock);
		while (!t->head && !t->stop)
			pthread_cond_wait(&t->wake, &t->lock);
		if (t->stop) {
			pthread_mutex_unlock(&t->lock);
			return NULL;
		}
		j = t->head;
		t->head = j->next;
		if (!t->head)
			t->tail = &t->head;
		pthread_mutex_unlock(&t->lock);

		t0 = hm_now_ns();
		err = hm_vk_pipeline_new_cached(e->vk, t->cache, j->words, j->nr, j->entry,
						j->push_bytes, &p);
		ns = hm_now_ns() - t0;

		pthread_mutex_lock(&e->lock);
		{
			struct hm_pipe *pp = &e->pipes[j->pipe];

			if (pp->used && pp->gen == j->gen && pp->pending) {
				pp->pending = false;
				pp->ns_compile[HM_TIER_SPECULATIVE] = ns;
				pp->next_err = err;
				if (!err) {
					pp->next = p;
					memset(&p, 0, sizeof(p));
				}
			}
			if (!err && !hash_known(t, j->hash) &&
			    !hm_grow((void **)&t->hashes, &t->cap_hashes, t->nr_hashes + 1,
				     sizeof(*t->hashes)))
				t->hashes[t->nr_hashes++] = j->hash;
		}
		pthread_mutex_unlock(&e->lock);
		hm_vk_pipeline_free(e->vk, &p);         /* zeroed if taken */
		free(j->words);
		free(j);
		pthread_mutex_lock(&t->lock);
		pthread_cond_broadcast(&t->done);
		pthread_mutex_unlock(&t->lock);
	}
}

int hm_tiers_init(struct hm_engine *e)
{
	struct hm_tiers *t = &e->tiers;
	VkPipelineCacheCreateInfo ci = { .sType = VK_STRUCTURE_TYPE_PIPELINE_CACHE_CREATE_INFO };

	memset(t, 0, sizeof(*t));
	t->tail = &t->head;
	pthread_mutex_init(&t->lock, NULL);
	pthread_cond_init(&t->wake, NULL);
	pthread_cond_init(&t->done, NULL);
	if (vkCreatePipelineCache(e->vk->dev, &ci, NULL, &t->cache))
		t->cache = VK_NULL_HANDLE;      /* compiles still work, never cached */
	return 0;
}

void hm_tiers_finish(struct hm_engine *e)
{
	struct hm_tiers *t = &e->tiers;

	if (!t->tail)
		return;         /* never initialised */
	pthread_mutex_lock(&t->lock);
	t->stop = true;
	pthread_cond_broadcast(&t->wake);
	pthread_mutex_unlock(&t->lock);
	if (t->started)
		pthread_join(t->thread, NULL);
	while (t->head) {
		struct hm_tier_job *j = t->head;

		t->head = j->next;
		free(j->words);
		free(j);
	}
	if (t->cache)
		vkDestroyPipelineCache(e->vk->dev, t->cache, NULL);
	free(t->hashes);
	pthread_cond_destroy(&t->wake);
	pthread_cond_destroy(&t->done);
	pthread_mutex_destroy(&t->lock);
	memset(t, 0, sizeof(*t));
}

/* engine lock held */
void hm_tier_switch(struct hm_engine *e, struct hm_pipe *pp)
{
	if (!pp->next.pipe)
		return;
	hm_vk_pipeline_free(e->vk, &pp->p);     /* every dispatch of it has completed */
	pp->p = pp->next;
	memset(&pp->next, 0, sizeof(pp->next));
	pp->tier = HM_TIER_SPECULATIVE;
	e->st.tier_switches++;
}

/* engine lock held: the slot is being freed */
void hm_tier_forget(struct hm_engine *e, struct hm_pipe *pp)
{
	hm_vk_pipeline_free(e->vk, &pp->next);
	pp->pending = false;
	pp->gen++;
}

/* Queue spec (taken over) for pipeline slot id; engine lock held. */
static int queue_job(struct hm_engine *e, uint32_t id, uint32_t *spec, size_t nr,
		     const char *entry, uint64_t hash)
{
	struct hm_tiers *t = &e->tiers;
	struct hm_pipe *pp = &e->pipes[id];
	struct hm_tier_job *j = calloc(1, sizeof(*j));
	int err = 0;

	if (!j) {
		free(spec);
		return -ENOMEM;
	}
	j->pipe = id;
	j->gen = pp->gen;
	j->push_bytes = pp->p.push_bytes;
	j->hash = hash;
	j->words = spec;
	j->nr = nr;
	snprintf(j->entry, sizeof(j->entry), "%s", entry ? entry : "main");
	pthread_mutex_lock(&t->lock);
	if (!t->started) {
		err = -pthread_create(&t->thread, NULL, compile_thread, e);
		t->started = !err;
	}
	if (!err) {
		*t->tail = j;
		t->tail = &j->next;
		pp->pending = true;
		pthread_cond_signal(&t->wake);
	}
	pthread_mutex_unlock(&t->lock);
	if (err) {
		free(j->words);
		free(j);
	}
	return err;
}

int hm_engine_pipeline_queue_tier(struct hm_engine *e, uint32_t id, const uint32_t *spirv,
				  size_t nr_words, const char *entry)
{
	uint32_t *spec;
	size_t nr;
	int err;

	if (!e || !spirv || id >= HM_ENGINE_MAX_PIPELINES)
		return -EINVAL;
	err = hm_spirv_tier_form(spirv, nr_words, HM_TIER_SPECULATIVE, &spec, &nr);
	if (err)
		return err;
	pthread_mutex_lock(&e->lock);
	err = -ENOENT;
	if (e->pipes[id].used && !e->pipes[id].pending && e->pipes[id].tier != HM_TIER_SPECULATIVE) {
		e->pipes[id].tier = HM_TIER_COMPACT;
		err = queue_job(e, id, spec, nr, entry, module_hash(spec, nr));
		spec = NULL;
	}
	pthread_mutex_unlock(&e->lock);
	free(spec);
	return err;
}

static int build(struct hm_engine *e, const uint32_t *w, size_t n, const char *entry,
		 uint32_t user_push_words, bool cached, struct hm_vk_pipeline *p, uint64_t *ret_ns)
{
	uint64_t t0 = hm_now_ns();
	int err = hm_vk_pipeline_new_cached(e->vk, cached ? e->tiers.cache : VK_NULL_HANDLE, w, n,
					    entry, 4 * (HM_DEVICE_TABLE_PUSH_WORDS +
							user_push_words), p);

	*ret_ns = hm_now_ns() - t0;
	return err;
}

/* A built pipeline takes a free slot of the engine's (either tier, or a
 * module with one form; the daemon's prebuilt ones too). */
int hm_engine_pipeline_adopt(struct hm_engine *e, struct hm_vk_pipeline *p,
			     uint32_t user_push_words, uint32_t *ret_id)
{
	int err = -EMFILE;

	if (user_push_words > HM_ENGINE_MAX_USER_PUSH_WORDS)
		return -E2BIG;
	if (!e || !p || !p->pipe || !ret_id ||
	    p->push_bytes != 4 * (HM_DEVICE_TABLE_PUSH_WORDS + user_push_words))
		return -EINVAL;
	pthread_mutex_lock(&e->lock);
	for (uint32_t i = 0; i < HM_ENGINE_MAX_PIPELINES; i++) {
		struct hm_pipe *pp = &e->pipes[i];

		if (!pp->used) {
			pp->p = *p;
			pp->used = true;
			pp->user_words = user_push_words;
			pp->tier = HM_TIER_NONE;
			pp->skipped = false;
			pp->next_err = 0;
			memset(pp->ns_compile, 0, sizeof(pp->ns_compile));
			memset(p, 0, sizeof(*p));
			*ret_id = i;
			err = 0;
			break;
		}
	}
	pthread_mutex_unlock(&e->lock);
	return err;
}

int hm_engine_pipeline_new_tiered(struct hm_engine *e, const uint32_t *spirv, size_t nr_words,
				  const char *entry, uint32_t user_push_words, uint32_t flags,
				  uint32_t *ret_id)
{
	uint32_t *compact = NULL, *spec = NULL;
	size_t nc = 0, ns = 0;
	struct hm_vk_pipeline p;
	uint8_t tier;
	uint64_t ns_compile, hash = 0;
	bool skip = false;
	int err;

	if (user_push_words > HM_ENGINE_MAX_USER_PUSH_WORDS)
		return -E2BIG;
	if (!e || !spirv || !ret_id ||
	    (flags & ~HM_PIPELINE_FLAGS_ALL) || flags == HM_PIPELINE_FLAGS_ALL)
		return -EINVAL;
	err = hm_spirv_tier_form(spirv, nr_words, HM_TIER_COMPACT, &compact, &nc);
	if (err == -ENOENT) {
		/* one form: the module as it is (compiled without the lock:
		 * a dispatch of the same engine on another thread goes on) */
		err = build(e, spirv, nr_words, entry, user_push_words, false, &p, &ns_compile);
		if (err)
			return err;
		err = hm_engine_pipeline_adopt(e, &p, user_push_words, ret_id);
		if (err)
			hm_vk_pipeline_free(e->vk, &p);
		return err;
	}
	if (err)
		return err;
	err = hm_spirv_tier_form(spirv, nr_words, HM_TIER_SPECULATIVE, &spec, &ns);
	if (err)
		goto out_free;
	hash = module_hash(spec, ns);
	pthread_mutex_lock(&e->lock);
	skip = hash_known(&e->tiers, hash);
	pthread_mutex_unlock(&e->lock);
	if (flags & HM_PIPELINE_COMPACT_ONLY) {
		tier = HM_TIER_COMPACT;
		err = build(e, compact, nc, entry, user_push_words, false, &p, &ns_compile);
	} else if ((flags & HM_PIPELINE_SPECULATIVE_ONLY) || skip) {
		tier = HM_TIER_SPECULATIVE;
		err = build(e, spec, ns, entry, user_push_words, true, &p, &ns_compile);
	} else {
		tier = HM_TIER_COMPACT;
		err = build(e, compact, nc, entry, user_push_words, false, &p, &ns_compile);
	}
	if (err)
		goto out_free;
	err = hm_engine_pipeline_adopt(e, &p, user_push_words, ret_id);
	if (err) {
		hm_vk_pipeline_free(e->vk, &p);
		goto out_free;
	}
	pthread_mutex_lock(&e->lock);
	{
		struct hm_pipe *pp = &e->pipes[*ret_id];

		pp->tier = tier;
		pp->ns_compile[tier] = ns_compile;
		/* built speculative through the cache: later ones skip tier one */
		if (tier == HM_TIER_SPECULATIVE && !hash_known(&e->tiers, hash) &&
		    !hm_grow((void **)&e->tiers.hashes, &e->tiers.cap_hashes,
			     e->tiers.nr_hashes + 1, sizeof(*e->tiers.hashes)))
			e->tiers.hashes[e->tiers.nr_hashes++] = hash;
		if (tier == HM_TIER_SPECULATIVE && !(flags & HM_PIPELINE_SPECULATIVE_ONLY)) {
			pp->skipped = true;
			e->st.tier_one_skipped++;
		}
		if (!flags && tier == HM_TIER_COMPACT) {
			/* a queueing failure leaves the pipeline on tier one */
			pp->next_err = queue_job(e, *ret_id, spec, ns, entry, hash);
			spec = NULL;
		}
	}
	pthread_mutex_unlock(&e->lock);
out_free:
	free(compact);
	free(spec);
	return err;
}

int hm_engine_pipeline_info(struct hm_engine *e, uint32_t id, struct hm_engine_pipeline_info *ret)
{
	struct hm_pipe *pp;
	int err = 0;

	if (!e || !ret || id >= HM_ENGINE_MAX_PIPELINES)
		return -EINVAL;
	pthread_mutex_lock(&e->lock);
	pp = &e->pipes[id];
	if (!pp->used) {
		err = -ENOENT;
	} else {
		*ret = (struct hm_engine_pipeline_info){
			.tier = pp->tier,
			.pending = pp->pending,
			.tier_one_skipped = pp->skipped,
			.tier_two_error = pp->next_err,
			.ns_compile_compact = pp->ns_compile[HM_TIER_COMPACT],
			.ns_compile_speculative = pp->ns_compile[HM_TIER_SPECULATIVE],
		};
	}
	pthread_mutex_unlock(&e->lock);
	return err;
}

int hm_engine_pipeline_wait(struct hm_engine *e, uint32_t id, uint64_t timeout_ns)
{
	struct hm_tiers *t;
	uint64_t end;

	if (!e || id >= HM_ENGINE_MAX_PIPELINES)
		return -EINVAL;
	t = &e->tiers;
	end = hm_now_ns() + (timeout_ns ? timeout_ns : 10000000000ull);
	for (;;) {
		bool pending;
		struct timespec ts;

		pthread_mutex_lock(&e->lock);
		pending = e->pipes[id].used && e->pipes[id].pending;
		pthread_mutex_unlock(&e->lock);
		if (!pending)
			return 0;
		if (hm_now_ns() >= end)
			return -ETIMEDOUT;
		clock_gettime(CLOCK_REALTIME, &ts);
		ts.tv_nsec += 10000000;
		if (ts.tv_nsec >= 1000000000) {
			ts.tv_sec++;
			ts.tv_nsec -= 1000000000;
		}
		pthread_mutex_lock(&t->lock);
		pthread_cond_timedwait(&t->done, &t->lock, &ts);
		pthread_mutex_unlock(&t->lock);
	}
}
