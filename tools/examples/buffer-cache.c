// SPDX-License-Identifier: GPL-2.0
/*
 * buffer-cache: hmirror inside an emulator's buffer cache, in one file
 * (Documentation/userspace-api.rst walks through it).
 *
 * The "emulator" owns guest memory (an hm_space: a watched mapping the
 * guest CPU writes), a translated guest kernel (buffer-cache.comp, every
 * access through the lookup helper), and its own command stream: each
 * frame it begins its own command buffer, records a command of its own,
 * lets the engine record its work (uploads are done, the dispatch and the
 * copy-back of device writes are recorded), submits under the queue lock
 * signalling its own timeline semaphore, and lets a guest CPU thread write
 * next to the device's bytes while the frame runs (and stops it, as at a
 * sync point, before the next frame).  When the timeline
 * value is reached every device write is home: the frame's output is
 * checked there, before hm_engine_complete() retires the work.
 *
 * The emulator keeps a cache of its own beside the engine (a CPU-side copy
 * of the vertex buffer, as a vertex decoder would): its own consumer of
 * the space's writes tells it which ranges to copy again before each
 * frame.  That consumer and the engine each see every write (neither takes
 * the other's records): the cache stays exact, and so does the mirror the
 * engine drops and uploads again when the vertices change.
 *
 * Output: TAP, one result; exit status 0 when every frame was exact.
 *   example-buffer-cache [frames]
 */
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <hmirror/engine.h>
#include <hmirror/vkctx.h>
#include <hmirror/watch.h>

#include "examples/buffer-cache.spv.h"  /* example_kernel_spv */

#define GUEST_BASE	0x40000000ull   /* where the guest sees its memory */
#define GUEST_BYTES	(1u << 20)
#define NR_VERTS	4096
#define X_OFF		0u              /* the vertex buffer: chunk 0 (64 KiB chunks) */
#define Y_OFF		(64u << 10)     /* the output: chunk 1 ... */
#define CPU_OFF		(Y_OFF + 4u * NR_VERTS) /* ... shared with the guest CPU's words */
#define CPU_WORDS	1024
#define USER_WORDS	5
#define WAIT_NS		(30ull * 1000000000)

struct guest_cpu {
	uint32_t *mem;
	atomic_bool run;
	atomic_bool go;                 /* a frame is on the device */
	atomic_bool busy;               /* the thread is writing */
	atomic_uint frame;
	pthread_t thread;
};

/* The guest CPU: writes its own words, next to the device's, while a
 * frame runs on the device. */
static void *guest_cpu(void *arg)
{
	struct guest_cpu *g = arg;

	while (atomic_load(&g->run)) {
		uint32_t f = atomic_load(&g->frame);

		atomic_store(&g->busy, true);
		if (!atomic_load(&g->go)) {
			atomic_store(&g->busy, false);
			sched_yield();
			continue;
		}
		for (uint32_t i = 0; i < CPU_WORDS; i++)
			((volatile uint32_t *)g->mem)[CPU_OFF / 4 + i] = f * 100000u + i;
		atomic_store(&g->busy, false);
	}
	return NULL;
}

/* The guest CPU stops (an emulator's CPU thread at a sync point). */
static void guest_cpu_pause(struct guest_cpu *g)
{
	atomic_store(&g->go, false);
	while (atomic_load(&g->busy))
		sched_yield();
}

/* The emulator's own cache of the vertex buffer, kept by its own consumer
 * of the space's writes. */
struct vertex_cache {
	struct hm_consumer *cons;
	const uint32_t *mem;
	uint32_t copy[NR_VERTS];
	uint64_t ranges, bytes;
};

/* hm_consumer_harvest_ranges(): one run of written chunks, byte offsets in
 * the space; copy what of it the cache holds */
static int vertex_cache_refresh(void *user, uint64_t off, uint64_t len)
{
	struct vertex_cache *vc = user;
	uint64_t lo = off > X_OFF ? off : X_OFF, hi = off + len;

	if (hi > X_OFF + 4ull * NR_VERTS)
		hi = X_OFF + 4ull * NR_VERTS;
	if (lo < hi) {
		memcpy(&vc->copy[(lo - X_OFF) / 4], &vc->mem[lo / 4], hi - lo);
		vc->bytes += hi - lo;
	}
	vc->ranges++;
	return 0;
}

static int fail(const char *what, int err)
{
	printf("not ok 1 buffer-cache # %s: %s\n", what, strerror(-err));
	return 1;
}

int main(int argc, char **argv)
{
	struct hm_vk_params vp = { .validation = 1 };
	struct hm_space_params sp = { .size = GUEST_BYTES, .flags = HM_SPACE_POPULATE };
	struct hm_engine_params ep = { .flags = HM_ENGINE_NO_TIMESTAMPS };
	unsigned frames = argc > 1 ? (unsigned)atoi(argv[1]) : 16, mismatches = 0;
	static uint32_t snap[CPU_WORDS];
	struct guest_cpu cpu = { 0 };
	static struct vertex_cache vc;
	struct hm_engine_stats st;
	struct hm_engine *e;
	struct hm_space *s;
	struct hm_vk *vk;
	uint32_t *mem, pipe;
	int err;

	printf("1..1\n");
	err = hm_vk_new(&vp, &vk);
	if (err) {
		vp.validation = 0;      /* no validation layers here: run without */
		err = hm_vk_new(&vp, &vk);
	}
	if (err)
		return fail("hm_vk_new", err);

	/* guest memory: the engine imports its device view */
	err = hm_space_new(&sp, &s);
	if (err)
		return fail("hm_space_new", err);
	mem = hm_space_addr(s);
	for (uint32_t i = 0; i < NR_VERTS; i++)
		mem[X_OFF / 4 + i] = i;
	err = hm_engine_new(vk, &ep, &e);
	if (!err)
		err = hm_engine_add_space(e, s, GUEST_BASE, NULL);
	/* the vertex buffer is read by every frame: a mirror, dropped and
	 * copied again when the guest CPU writes it */
	if (!err)
		err = hm_engine_advise(e, GUEST_BASE + X_OFF, 4 * NR_VERTS, HM_ADVICE_READ_MOSTLY);
	if (!err)
		err = hm_engine_advise(e, GUEST_BASE + Y_OFF, 4 * NR_VERTS + 4 * CPU_WORDS,
				       HM_ADVICE_PREFER_DEVICE);
	if (!err)
		err = hm_engine_pipeline_new(e, example_kernel_spv,
					     sizeof(example_kernel_spv) / 4, "main", USER_WORDS,
					     &pipe);
	if (err)
		return fail("engine setup", err);

	/* the emulator's own consumer: it watches the vertex buffer alone,
	 * and its cache starts as a copy */
	err = hm_consumer_new(s, 0, &vc.cons);
	if (!err)
		err = hm_consumer_watch(vc.cons, X_OFF, 4 * NR_VERTS);
	if (err)
		return fail("hm_consumer_new", err);
	vc.mem = mem;
	memcpy(vc.copy, &mem[X_OFF / 4], sizeof(vc.copy));

	/* the emulator's own command stream: a pool, a buffer, a timeline */
	VkCommandPoolCreateInfo pci = {
		.sType = VK_STRUCTURE_TYPE_COMMAND_POOL_CREATE_INFO,
		.flags = VK_COMMAND_POOL_CREATE_RESET_COMMAND_BUFFER_BIT,
		.queueFamilyIndex = vk->queue_family,
	};
	VkSemaphoreTypeCreateInfo ti = {
		.sType = VK_STRUCTURE_TYPE_SEMAPHORE_TYPE_CREATE_INFO,
		.semaphoreType = VK_SEMAPHORE_TYPE_TIMELINE,
	};
	VkSemaphoreCreateInfo si = { .sType = VK_STRUCTURE_TYPE_SEMAPHORE_CREATE_INFO,
				     .pNext = &ti };
	VkCommandBufferAllocateInfo ai = {
		.sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_ALLOCATE_INFO,
		.level = VK_COMMAND_BUFFER_LEVEL_PRIMARY, .commandBufferCount = 1,
	};
	struct hm_vk_buffer scratch;    /* stands for the emulator's own resources */
	VkCommandPool pool;
	VkCommandBuffer cb;
	VkSemaphore timeline;

	if (vkCreateCommandPool(vk->dev, &pci, NULL, &pool) ||
	    (ai.commandPool = pool, vkAllocateCommandBuffers(vk->dev, &ai, &cb)) ||
	    vkCreateSemaphore(vk->dev, &si, NULL, &timeline))
		return fail("command pool", -EIO);
	err = hm_vk_buffer_new(vk, 4096, HM_VK_MEM_DEVICE, &scratch);
	if (err)
		return fail("scratch buffer", err);

	cpu.mem = mem;
	atomic_store(&cpu.run, true);
	if (pthread_create(&cpu.thread, NULL, guest_cpu, &cpu))
		return fail("guest CPU thread", -errno);

	for (unsigned f = 1; f <= frames; f++) {
		uint64_t x = GUEST_BASE + X_OFF, y = GUEST_BASE + Y_OFF;
		uint32_t push[USER_WORDS] = { (uint32_t)x, (uint32_t)(x >> 32),
					      (uint32_t)y, (uint32_t)(y >> 32), NR_VERTS };
		struct hm_engine_dispatch d = {
			.pipeline = pipe, .groups = { NR_VERTS / 64, 1, 1 },
			.push = push, .nr_push = USER_WORDS,
		};
		VkCommandBufferBeginInfo bi = {
			.sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO,
			.flags = VK_COMMAND_BUFFER_USAGE_ONE_TIME_SUBMIT_BIT,
		};
		uint64_t value = f;
		VkTimelineSemaphoreSubmitInfo tsi = {
			.sType = VK_STRUCTURE_TYPE_TIMELINE_SEMAPHORE_SUBMIT_INFO,
			.signalSemaphoreValueCount = 1, .pSignalSemaphoreValues = &value,
		};
		VkSubmitInfo sub = {
			.sType = VK_STRUCTURE_TYPE_SUBMIT_INFO, .pNext = &tsi,
			.commandBufferCount = 1, .pCommandBuffers = &cb,
			.signalSemaphoreCount = 1, .pSignalSemaphores = &timeline,
		};
		VkSemaphoreWaitInfo wi = {
			.sType = VK_STRUCTURE_TYPE_SEMAPHORE_WAIT_INFO,
			.semaphoreCount = 1, .pSemaphores = &timeline, .pValues = &value,
		};
		struct hm_engine_work *w;
		VkResult r;

		/* the guest program changes its vertices between frames */
		for (uint32_t i = f % 7; i < NR_VERTS; i += 7)
			mem[X_OFF / 4 + i] = i + f;
		atomic_store(&cpu.frame, f);

		/* the emulator's cache catches up on what the guest wrote;
		 * the engine's own harvest (in hm_engine_record()) still sees
		 * the same writes */
		uint64_t seen = vc.ranges;

		err = hm_consumer_harvest_ranges(vc.cons, 0, vertex_cache_refresh, &vc);
		if (err)
			return fail("hm_consumer_harvest_ranges", err);
		if (vc.ranges == seen ||
		    memcmp(vc.copy, (const void *)&mem[X_OFF / 4], sizeof(vc.copy)))
			mismatches++;

		vkResetCommandBuffer(cb, 0);
		vkBeginCommandBuffer(cb, &bi);
		vkCmdFillBuffer(cb, scratch.buf, 0, VK_WHOLE_SIZE, f);  /* the emulator's own */
		err = hm_engine_record(e, cb, &d, &w);
		if (err)
			return fail("hm_engine_record", err);
		vkEndCommandBuffer(cb);
		for (uint32_t i = 0; i < CPU_WORDS; i++)
			snap[i] = ((volatile uint32_t *)mem)[CPU_OFF / 4 + i];
		hm_vk_queue_lock(vk);   /* the engine submits to this queue too */
		r = vkQueueSubmit(vk->queue, 1, &sub, VK_NULL_HANDLE);
		hm_vk_queue_unlock(vk);
		if (r)
			return fail("vkQueueSubmit", hm_vk_errno(r));
		atomic_store(&cpu.go, true);    /* the guest CPU runs beside the frame */
		r = vkWaitSemaphores(vk->dev, &wi, WAIT_NS);
		if (r)
			return fail("vkWaitSemaphores", hm_vk_errno(r));

		/* the value is signalled: every device write is home */
		for (uint32_t i = 0; i < NR_VERTS; i++)
			if (mem[Y_OFF / 4 + i] != mem[X_OFF / 4 + i] * 3u + 1u)
				mismatches++;
		/* and the guest CPU's words beside them were not overwritten by
		 * the copy-back (they only grow) */
		for (uint32_t i = 0; i < CPU_WORDS; i++) {
			uint32_t v = ((volatile uint32_t *)mem)[CPU_OFF / 4 + i];

			if (v < snap[i] || (v && v % 100000u != i))
				mismatches++;
		}
		err = hm_engine_complete(w, 0);
		if (err)
			return fail("hm_engine_complete", err);
		guest_cpu_pause(&cpu);
	}
	atomic_store(&cpu.run, false);
	pthread_join(cpu.thread, NULL);

	hm_engine_stats(e, &st);
	printf("%s 1 buffer-cache: %u frames, %u mismatches, %llu chunks mirrored, "
	       "%llu uploads, %llu bytes copied home, the emulator's cache refreshed "
	       "%llu ranges (%llu bytes), validation %s, %u messages\n",
	       mismatches || hm_vk_validation_count(vk) ? "not ok" : "ok", frames, mismatches,
	       (unsigned long long)st.chunks_mirrored, (unsigned long long)st.uploads,
	       (unsigned long long)st.bytes_copied_home, (unsigned long long)vc.ranges,
	       (unsigned long long)vc.bytes, vk->validation ? "on" : "off",
	       hm_vk_validation_count(vk));
	if (hm_vk_validation_count(vk))
		printf("# %s\n", vk->last_message);

	vkDestroySemaphore(vk->dev, timeline, NULL);
	vkDestroyCommandPool(vk->dev, pool, NULL);
	hm_vk_buffer_free(vk, &scratch);
	hm_consumer_free(vc.cons);      /* consumers go before their space */
	hm_engine_free(e);
	hm_space_free(s);
	hm_vk_free(vk);
	return mismatches ? 1 : 0;
}
