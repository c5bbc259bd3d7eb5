// SPDX-License-Identifier: GPL-2.0
/*
 * The engine host.  One shared VkDevice (hm_vk); each client gets its own
 * engine (own table, marks and mirrors) on it, lazily, on the device
 * thread: guest addresses of two emulators overlap, and a client must
 * never reach another's memory through the table.  The compile thread
 * builds a validated module's pipeline on the shared device
 * (hmd_eng_pipeline_build()) for the client's engine to adopt; a client's
 * freed pipelines stay parked in its engine for the next PIPELINE_NEW of
 * the same module.
 */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <hmirror/engine.h>
#include <hmirror/lookup.h>
#include <hmirror/vkctx.h>
#include <hmirror/watch.h>

#include "client.h"
#include "device.h"
#include "engine_host.h"
#include "state.h"
#include "validate.h"
#include "worker.h"

static struct hm_vk *vk;

/* HM_MSG_TIMELINE: what the shared device is and whether it exports
 * timeline semaphores as opaque fds (set once at init) */
static uint8_t dev_uuid[VK_UUID_SIZE], drv_uuid[VK_UUID_SIZE];
static bool timeline_export;
static PFN_vkGetSemaphoreFdKHR get_semaphore_fd;

struct hmd_timeline {
	VkSemaphore sem;
};

static void timeline_probe(void)
{
	VkPhysicalDeviceIDProperties id = {
		.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_ID_PROPERTIES,
	};
	VkPhysicalDeviceProperties2 p2 = {
		.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_PROPERTIES_2, .pNext = &id,
	};
	VkSemaphoreTypeCreateInfo type = {
		.sType = VK_STRUCTURE_TYPE_SEMAPHORE_TYPE_CREATE_INFO,
		.semaphoreType = VK_SEMAPHORE_TYPE_TIMELINE,
	};
	VkPhysicalDeviceExternalSemaphoreInfo info = {
		.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_EXTERNAL_SEMAPHORE_INFO,
		.pNext = &type,
		.handleType = VK_EXTERNAL_SEMAPHORE_HANDLE_TYPE_OPAQUE_FD_BIT,
	};
	VkExternalSemaphoreProperties props = {
		.sType = VK_STRUCTURE_TYPE_EXTERNAL_SEMAPHORE_PROPERTIES,
	};

	vkGetPhysicalDeviceProperties2(vk->phys, &p2);
	memcpy(dev_uuid, id.deviceUUID, sizeof(dev_uuid));
	memcpy(drv_uuid, id.driverUUID, sizeof(drv_uuid));
	timeline_export = false;
	if (!vk->has_semaphore_fd)
		return;		/* lavapipe of Mesa 22.3: no VK_KHR_external_semaphore_fd */
	vkGetPhysicalDeviceExternalSemaphoreProperties(vk->phys, &info, &props);
	get_semaphore_fd = (PFN_vkGetSemaphoreFdKHR)vkGetDeviceProcAddr(vk->dev,
									"vkGetSemaphoreFdKHR");
	timeline_export = get_semaphore_fd &&
			  (props.externalSemaphoreFeatures &
			   VK_EXTERNAL_SEMAPHORE_FEATURE_EXPORTABLE_BIT);
}

int hmd_engine_host_init(const struct hmd_device_choice *dev, char *why,
			 size_t cap)
{
	struct hm_vk_params p = { .validation = -1 };
	char idx[16];
	int r;

	/* the index device.c matched (render node, PCI address or name) */
	snprintf(idx, sizeof(idx), "%d", dev->vk_index);
	p.device = idx;
	r = hm_vk_new(&p, &vk);
	if (r < 0) {
		snprintf(why, cap, "hm_vk_new: %s", strerror(-r));
		vk = NULL;
		return r;
	}
	timeline_probe();
	return 0;
}

void hmd_engine_host_finish(void)
{
	hm_vk_free(vk);
	vk = NULL;
}

bool hmd_engine_available(void)
{
	return vk != NULL;
}

unsigned hmd_engine_validation_count(void)
{
	return vk ? hm_vk_validation_count(vk) : 0;
}

static int client_engine(struct hmd_client *c, struct hm_engine **ret)
{
	struct hm_engine_params p = {
		.timeout_ns = hmd.dispatch_timeout_ns,
		.chunk_shift = __builtin_ctzll(HM_PROTO_MAP_ALIGN),
		/* mapped chunks, aliases counted (the table costs ~150 B each) */
		.max_chunks = HM_PROTO_MAX_MAPPED_BYTES / HM_PROTO_MAP_ALIGN,
	};
	int r;

	if (!vk)
		return -ENOSYS;
	/* device timestamps time the walk, which the uploads beside it wait
	 * on to start late (ahead.c); on a CPU device they doubled an empty
	 * dispatch and there is no second queue to wait on (daemon.rst) */
	if (vk->props.deviceType == VK_PHYSICAL_DEVICE_TYPE_CPU)
		p.flags |= HM_ENGINE_NO_TIMESTAMPS;
	if (!c->engine) {
		struct hm_engine *e;

		r = hm_engine_new(vk, &p, &e);
		if (r < 0)
			return r;
		c->engine = e;
	}
	*ret = c->engine;
	return 0;
}

int hmd_eng_space_add(struct hmd_client *c, struct hmd_space *sp)
{
	struct hm_engine *e;
	int r = client_engine(c, &e);

	if (r < 0)
		return r;
	r = hm_engine_add_space(e, sp->space, sp->guest_addr == HM_PROTO_UNMAPPED ?
				HM_ENGINE_UNMAPPED : sp->guest_addr, &sp->engine_id);
	sp->in_engine = r == 0;
	return r;
}

void hmd_eng_space_remove(struct hmd_client *c, struct hmd_space *sp)
{
	if (c->engine && sp->in_engine)
		hm_engine_remove_space(c->engine, sp->engine_id);
	sp->in_engine = false;
	sp->engine_id = 0;
	hm_consumer_free(sp->consumer);
	sp->consumer = NULL;
	hm_space_free(sp->space);
	sp->space = NULL;
}

int hmd_eng_advise(struct hmd_client *c, uint64_t addr, uint64_t size,
		   uint32_t advice)
{
	struct hm_engine *e;
	int r = client_engine(c, &e);

	if (r < 0)
		return r;
	r = hm_engine_advise(e, addr, size, (enum hm_advice)advice);
	return r == -ENOENT ? -EFAULT : r;      /* nothing mapped there */
}

int hmd_eng_prefetch(struct hmd_client *c)
{
	struct hm_engine *e;
	int r = client_engine(c, &e);

	return r < 0 ? r : hm_engine_prefetch(e);
}

/* the protocol states the engine's limit and chunk */
_Static_assert(HM_PROTO_MAX_MAPPINGS == HM_ENGINE_MAX_MAPPINGS, "HM_PROTO_MAX_MAPPINGS");
_Static_assert(HM_PROTO_MAP_ALIGN == 1ull << HM_CHUNK_SHIFT_DEFAULT, "HM_PROTO_MAP_ALIGN");

int hmd_eng_map(struct hmd_client *c, struct hmd_space *sp, uint64_t offset, uint64_t size,
		uint64_t guest_addr, uint32_t flags)
{
	if (!c->engine || !sp->in_engine)
		return -ENOENT;
	return hm_engine_map(c->engine, sp->engine_id, offset, size, guest_addr,
			     flags & HM_MAPF_REPLACE ? HM_MAP_REPLACE : 0);
}

int hmd_eng_unmap(struct hmd_client *c, uint64_t guest_addr, uint64_t size)
{
	if (!c->engine)
		return -ENOENT;
	return hm_engine_unmap(c->engine, guest_addr, size);
}

/* what the compile thread builds: the pipeline first (the engine adopts
 * it as a struct hm_vk_pipeline), then which tier it is */
struct hmd_prebuilt {
	struct hm_vk_pipeline p;
	enum hm_tier tier;
};

/*
 * Compile thread: tier one of a module with load functions (the compact
 * form; the client's engine builds tier two on its own compile thread,
 * queued by hmd_eng_pipeline()), the speculative form where the client
 * asked for it alone or where this daemon built it before for the same
 * module (the driver's shader cache holds it: tier one is skipped), or a
 * module of one form as it is.
 */
int hmd_eng_pipeline_build(const struct hmd_module *m, uint32_t flags,
			   struct hmd_prebuilt **ret)
{
	struct hmd_prebuilt *p;
	uint32_t *form = NULL;
	size_t nr = 0;
	int r;

	*ret = NULL;
	if (!vk)
		return 0;
	p = calloc(1, sizeof(*p));
	if (!p)
		return -ENOMEM;
	p->tier = !(flags & HM_PIPEF_COMPACT_ONLY) &&
		  ((flags & HM_PIPEF_SPECULATIVE_ONLY) ||
		   __atomic_load_n(&m->spec_built, __ATOMIC_RELAXED)) ?
		  HM_TIER_SPECULATIVE : HM_TIER_COMPACT;
	r = hm_spirv_tier_form(m->words, m->nr_words, p->tier, &form, &nr);
	if (r == -ENOENT)
		p->tier = HM_TIER_NONE;
	else if (r < 0)
		goto out_free;
	r = hm_vk_pipeline_new(vk, form ? form : m->words, form ? nr : m->nr_words, m->entry,
			       4 * (HM_DEVICE_TABLE_PUSH_WORDS + m->user_push_words), &p->p);
	free(form);
	if (r < 0)
		goto out_free;
	*ret = p;
	return 0;

out_free:
	free(p);
	return r;
}

void hmd_eng_pipeline_discard(struct hmd_prebuilt *prebuilt)
{
	if (prebuilt)
		hm_vk_pipeline_free(vk, &prebuilt->p);
	free(prebuilt);
}

bool hmd_eng_pipeline_parked(struct hmd_client *c, const struct hmd_module *m)
{
	bool found = false;

	pthread_mutex_lock(&c->park_lock);
	for (unsigned i = 0; i < c->nr_parked && !found; i++)
		found = c->parked[i].mod == m;
	pthread_mutex_unlock(&c->park_lock);
	return found;
}

/* device thread: the engine id of a parked pipeline of m, taken out of
 * the parked list; false if none */
static bool unpark(struct hmd_client *c, const struct hmd_module *m, uint32_t *ret_id)
{
	bool found = false;

	pthread_mutex_lock(&c->park_lock);
	for (unsigned i = 0; i < c->nr_parked; i++) {
		if (c->parked[i].mod != m)
			continue;
		*ret_id = c->parked[i].engine_id;
		hmd_module_put(c->parked[i].mod);
		c->parked[i] = c->parked[--c->nr_parked];
		found = true;
		break;
	}
	pthread_mutex_unlock(&c->park_lock);
	return found;
}

/* device thread: keep a freed pipeline built; the oldest parked one goes
 * when the list is full */
static void park(struct hmd_client *c, struct hmd_module *m, uint32_t engine_id)
{
	pthread_mutex_lock(&c->park_lock);
	if (c->nr_parked == HMD_MAX_PARKED) {
		hm_engine_pipeline_free(c->engine, c->parked[0].engine_id);
		hmd_module_put(c->parked[0].mod);
		memmove(c->parked, c->parked + 1, --c->nr_parked * sizeof(c->parked[0]));
	}
	hmd_module_ref(m);
	c->parked[c->nr_parked++] = (struct hmd_parked){ .mod = m, .engine_id = engine_id };
	pthread_mutex_unlock(&c->park_lock);
}

/* device thread: adopt what the compile thread built, or a parked
 * pipeline of the same module, or build it here */
int hmd_eng_pipeline(struct hmd_client *c, struct hmd_pipeline *p)
{
	struct hm_engine *e;
	int r = client_engine(c, &e);

	if (r < 0) {
		hmd_eng_pipeline_discard(p->prebuilt);
		p->prebuilt = NULL;
		return r;
	}
	if (p->prebuilt) {
		enum hm_tier tier = p->prebuilt->tier;

		r = hm_engine_pipeline_adopt(e, &p->prebuilt->p, p->mod->user_push_words,
					     &p->engine_id);
		hmd_eng_pipeline_discard(p->prebuilt);	/* zeroed if adopted */
		p->prebuilt = NULL;
		/* tier two on the engine's compile thread; the dispatch after
		 * it is ready switches (a failure leaves tier one) */
		if (r == 0 && tier == HM_TIER_COMPACT && !(p->tier_flags & HM_PIPEF_COMPACT_ONLY))
			hm_engine_pipeline_queue_tier(e, p->engine_id, p->mod->words,
						      p->mod->nr_words, p->mod->entry);
	} else if (unpark(c, p->mod, &p->engine_id)) {
		r = 0;
	} else {
		r = hm_engine_pipeline_new(e, p->mod->words, p->mod->nr_words,
					   p->mod->entry, p->mod->user_push_words,
					   &p->engine_id);
	}
	if (r == 0)
		p->engine_ready = true;
	return r;
}

void hmd_eng_pipeline_free(struct hmd_client *c, struct hmd_pipeline *p)
{
	if (c->engine && p->engine_ready && !c->dead)
		park(c, p->mod, p->engine_id);
	else if (c->engine && p->engine_ready)
		hm_engine_pipeline_free(c->engine, p->engine_id);
	p->engine_ready = false;
	hmd_eng_pipeline_discard(p->prebuilt);
	p->prebuilt = NULL;
}

int hmd_eng_dispatch(struct hmd_client *c, struct hmd_pipeline *p,
		     const struct hm_msg_dispatch *d)
{
	int r;

	if (!c->engine)
		return -ENOSYS;
	if (!p->engine_ready) {
		r = hmd_eng_pipeline(c, p);
		if (r < 0)
			return r;
	}
	r = hm_engine_dispatch(c->engine, p->engine_id, d->groups[0],
			       d->groups[1], d->groups[2], d->push,
			       d->nr_push, d->flags);
	if (r == 0 && !__atomic_load_n(&p->mod->spec_built, __ATOMIC_RELAXED)) {
		struct hm_engine_pipeline_info pi;

		/* its speculative form compiled once: later pipelines of the
		 * same module skip tier one */
		if (!hm_engine_pipeline_info(c->engine, p->engine_id, &pi) &&
		    pi.tier == HM_TIER_SPECULATIVE)
			__atomic_store_n(&p->mod->spec_built, true, __ATOMIC_RELAXED);
	}
	return r;
}

int hmd_eng_stats(struct hmd_client *c, uint64_t *v, unsigned nr)
{
	struct hm_engine_stats s;
	int r;

	if (!c->engine)
		return 0;
	r = hm_engine_stats(c->engine, &s);
	if (r < 0)
		return r;
	v[HM_ESTAT_DISPATCHES] = s.dispatches;
	v[HM_ESTAT_CHUNKS_MIRRORED] = s.chunks_mirrored;
	/* chunks the CPU was seen writing (a guard trip each, harvested) */
	v[HM_ESTAT_GUARD_TRIPS] = s.chunks_harvested;
	v[HM_ESTAT_MIRRORS_DROPPED] = s.mirrors_dropped_by_guard +
				      s.mirrors_dropped_shared;
	v[HM_ESTAT_BYTES_UPLOADED] = s.upload_bytes;
	v[HM_ESTAT_BYTES_COPIED_HOME] = s.bytes_copied_home;
	v[HM_ESTAT_TIER_SWITCHES] = s.tier_switches;
	v[HM_ESTAT_TIER_ONE_SKIPPED] = s.tier_one_skipped;
	v[HM_ESTAT_UPLOADS] = s.uploads;
	v[HM_ESTAT_UPLOADS_DISCARDED] = s.uploads_discarded;
	v[HM_ESTAT_MIRRORS_EVICTED] = s.mirrors_evicted;
	v[HM_ESTAT_THRASH_BACKOFFS] = s.thrash_backoffs;
	v[HM_ESTAT_BUDGET_REFUSALS] = s.budget_refusals;
	v[HM_ESTAT_REFRESHES] = s.mirrors_refreshed;
	v[HM_ESTAT_MARKS_SCANNED] = s.marks_scanned;
	v[HM_ESTAT_CHUNKS_COPIED_HOME] = s.chunks_copied_home;
	v[HM_ESTAT_NS_HARVEST] = s.ns_harvest;
	v[HM_ESTAT_NS_UPLOAD] = s.ns_upload;
	v[HM_ESTAT_NS_UPLOAD_COPY] = s.ns_upload_copy;
	v[HM_ESTAT_NS_DISPATCH] = s.ns_dispatch;
	v[HM_ESTAT_NS_DISPATCH_GPU] = s.ns_dispatch_gpu;
	v[HM_ESTAT_NS_MARKS] = s.ns_marks;
	v[HM_ESTAT_NS_COPY_BACK] = s.ns_copy_back;
	v[HM_ESTAT_NS_TOTAL] = s.ns_total;
	v[HM_ESTAT_SHARED_DISPATCHES] = s.shared_dispatches;
	v[HM_ESTAT_MIRROR_BYTES] = s.mirror_bytes;
	v[HM_ESTAT_MIRROR_BUDGET] = s.mirror_budget;
	v[HM_ESTAT_UPLOAD_REGIONS] = s.upload_regions;
	v[HM_ESTAT_UPLOAD_RETRIES] = s.upload_retries;
	v[HM_ESTAT_MIRRORS_DROPPED_EARLY] = s.mirrors_dropped_early;
	v[HM_ESTAT_EARLY_HARVESTS] = s.early_harvests;
	v[HM_ESTAT_MIRRORS_DROPPED_SHARED] = s.mirrors_dropped_shared;
	v[HM_ESTAT_ALLOC_FAILURES] = s.alloc_failures;
	v[HM_ESTAT_SINK_MARKS] = s.sink_marks;
	v[HM_ESTAT_IMPORT_PIECES] = s.import_pieces;
	v[HM_ESTAT_NS_UPLOAD_SELECT] = s.ns_upload_select;
	v[HM_ESTAT_NS_UPLOAD_GENS] = s.ns_upload_gens;
	v[HM_ESTAT_NS_UPLOAD_CHECK] = s.ns_upload_check;
	v[HM_ESTAT_NS_UPLOAD_PUBLISH] = s.ns_upload_publish;
	v[HM_ESTAT_NS_WINDOW_SYNC] = s.ns_window_sync;
	v[HM_ESTAT_WINDOW_BYTES] = s.window_bytes;
	v[HM_ESTAT_WINDOW_SYNCS] = s.window_syncs;
	v[HM_ESTAT_WINDOW_COPIES] = s.window_copies;
	v[HM_ESTAT_WINDOW_FILLS] = s.window_fills;
	v[HM_ESTAT_WINDOW_REFUSALS] = s.window_refusals;
	v[HM_ESTAT_WINDOW_UNCOVERED_BYTES] = s.window_uncovered_bytes;
	v[HM_ESTAT_WINDOW_BINDS] = s.window_binds;
	v[HM_ESTAT_DISPATCHES_RECORDED] = s.dispatches_recorded;
	v[HM_ESTAT_DISPATCHES_SUBMITTED] = s.dispatches_submitted;
	v[HM_ESTAT_PREFETCHES] = s.prefetches;
	v[HM_ESTAT_NS_PREFETCH] = s.ns_prefetch;
	v[HM_ESTAT_IMPORT_BYTES] = s.import_bytes;
	v[HM_ESTAT_IMPORT_FAILURES] = s.import_failures;
	v[HM_ESTAT_NS_IMPORT] = s.ns_import;
	v[HM_ESTAT_AHEAD_PASSES] = s.ahead_passes;
	v[HM_ESTAT_AHEAD_UPLOADS] = s.ahead_uploads;
	v[HM_ESTAT_AHEAD_DISCARDED] = s.ahead_discarded;
	v[HM_ESTAT_NS_AHEAD] = s.ns_ahead;
	v[HM_ESTAT_NS_AHEAD_WAIT] = s.ns_ahead_wait;
	v[HM_ESTAT_NS_AHEAD_HARVEST] = s.ns_ahead_harvest;
	v[HM_ESTAT_NS_AHEAD_COPY] = s.ns_ahead_copy;
	v[HM_ESTAT_NS_AHEAD_CHECK] = s.ns_ahead_check;
	v[HM_ESTAT_NS_AHEAD_SELECT] = s.ns_ahead_select;
	v[HM_ESTAT_NS_AHEAD_GENS] = s.ns_ahead_gens;
	v[HM_ESTAT_NS_AHEAD_PUBLISH] = s.ns_ahead_publish;
	v[HM_ESTAT_NS_AHEAD_FINISH] = s.ns_ahead_finish;
	v[HM_ESTAT_NS_WINDOW_PLAN] = s.ns_window_plan;
	v[HM_ESTAT_NS_WINDOW_RECORD] = s.ns_window_record;
	return HM_ESTAT_NR;
}

bool hmd_eng_timeline_supported(void)
{
	return vk && timeline_export;
}

bool hmd_eng_same_device(const uint8_t *device_uuid, const uint8_t *driver_uuid)
{
	return vk && !memcmp(device_uuid, dev_uuid, sizeof(dev_uuid)) &&
	       !memcmp(driver_uuid, drv_uuid, sizeof(drv_uuid));
}

int hmd_eng_timeline_new(uint64_t value, struct hmd_timeline **ret, int *ret_fd)
{
	VkExportSemaphoreCreateInfo exp = {
		.sType = VK_STRUCTURE_TYPE_EXPORT_SEMAPHORE_CREATE_INFO,
		.handleTypes = VK_EXTERNAL_SEMAPHORE_HANDLE_TYPE_OPAQUE_FD_BIT,
	};
	VkSemaphoreTypeCreateInfo type = {
		.sType = VK_STRUCTURE_TYPE_SEMAPHORE_TYPE_CREATE_INFO,
		.pNext = &exp,
		.semaphoreType = VK_SEMAPHORE_TYPE_TIMELINE,
		.initialValue = value,
	};
	VkSemaphoreCreateInfo ci = {
		.sType = VK_STRUCTURE_TYPE_SEMAPHORE_CREATE_INFO, .pNext = &type,
	};
	struct hmd_timeline *t;
	VkSemaphoreGetFdInfoKHR gi = {
		.sType = VK_STRUCTURE_TYPE_SEMAPHORE_GET_FD_INFO_KHR,
		.handleType = VK_EXTERNAL_SEMAPHORE_HANDLE_TYPE_OPAQUE_FD_BIT,
	};
	int fd = -1, r;

	if (!hmd_eng_timeline_supported())
		return -EOPNOTSUPP;
	t = calloc(1, sizeof(*t));
	if (!t)
		return -ENOMEM;
	r = hm_vk_errno(vkCreateSemaphore(vk->dev, &ci, NULL, &t->sem));
	if (r < 0)
		goto out_free;
	gi.semaphore = t->sem;
	r = hm_vk_errno(get_semaphore_fd(vk->dev, &gi, &fd));
	if (r < 0)
		goto out_destroy;
	*ret = t;
	*ret_fd = fd;
	return 0;

out_destroy:
	vkDestroySemaphore(vk->dev, t->sem, NULL);
out_free:
	free(t);
	return r;
}

int hmd_eng_timeline_signal(struct hmd_timeline *t, uint64_t value)
{
	VkSemaphoreSignalInfo si = {
		.sType = VK_STRUCTURE_TYPE_SEMAPHORE_SIGNAL_INFO,
		.semaphore = t->sem,
		.value = value,
	};

	return hm_vk_errno(vkSignalSemaphore(vk->dev, &si));
}

void hmd_eng_timeline_free(struct hmd_timeline *t)
{
	if (!t)
		return;
	vkDestroySemaphore(vk->dev, t->sem, NULL);
	free(t);
}

void hmd_eng_client_free(struct hmd_client *c)
{
	hm_engine_free(c->engine);	/* with every parked pipeline */
	c->engine = NULL;
	pthread_mutex_lock(&c->park_lock);
	while (c->nr_parked)
		hmd_module_put(c->parked[--c->nr_parked].mod);
	pthread_mutex_unlock(&c->park_lock);
}

/*
 * A guard trip reported by the module (netlink CHUNKS_WRITTEN): harvest
 * every engine now (hm_engine_harvest_now()), so a mirror of the written
 * chunk is dropped before the next dispatch is even submitted
 * (Documentation/daemon.rst).  One job at a time: events that come while
 * it is queued are covered by it.
 */
struct harvest_job {
	struct hmd_job job;
	struct hmd_client *snap[HMD_MAX_CLIENTS];
	unsigned nr;
	unsigned drops;
};
static bool harvest_queued;

static void harvest_run(struct hmd_job *j)
{
	struct harvest_job *h = (struct harvest_job *)j;

	for (unsigned i = 0; i < h->nr; i++)
		if (h->snap[i]->engine && hm_engine_harvest_now(h->snap[i]->engine) > 0)
			h->drops++;
}

static void harvest_done(struct hmd_job *j)
{
	struct harvest_job *h = (struct harvest_job *)j;

	hmd.stats[HM_DSTAT_NL_DROPS] += h->drops;
	for (unsigned i = 0; i < h->nr; i++)
		hmd_client_put(h->snap[i]);
	harvest_queued = false;
	free(h);
}

void hmd_eng_guard_event(uint64_t space, uint64_t chunk)
{
	struct harvest_job *h;

	if (harvest_queued)
		return;
	h = calloc(1, sizeof(*h));
	if (!h)
		return;
	for (struct hmd_client *c = hmd.clients; c; c = c->next) {
		if (c->dead || !c->engine || h->nr >= HMD_MAX_CLIENTS)
			continue;
		hmd_client_get(c);
		h->snap[h->nr++] = c;
	}
	if (!h->nr) {
		free(h);
		return;
	}
	h->job.run = harvest_run;
	h->job.done = harvest_done;
	harvest_queued = true;
	hmd_worker_queue(&h->job);
}

/* device thread: snapshot a client's engine counters for STATS */
void hmd_client_refresh_estats(struct hmd_client *c)
{
	uint64_t v[HM_ESTAT_NR] = { 0 };
	int n = hmd_eng_stats(c, v, HM_ESTAT_NR);

	if (n <= 0)
		return;
	pthread_mutex_lock(&hmd_estats_lock);
	/* a client gone is counted among those gone (hmd_client_disconnect()):
	 * what its last jobs added goes there too */
	if (c->estats_retired)
		for (unsigned k = 0; k < HM_ESTAT_NR; k++)
			if (!HM_ESTAT_IS_GAUGE(k))
				hmd.retired_estats[k] += v[k] - (c->has_estats ? c->estats[k] : 0);
	memcpy(c->estats, v, sizeof(v));
	c->has_estats = true;
	pthread_mutex_unlock(&hmd_estats_lock);
}
