// SPDX-License-Identifier: GPL-2.0
/*
 * hmirror-bench stream [--rounds R] [--n N] [--json]
 *
 * The emulator's command stream against hm_engine_dispatch(), per
 * dispatch, in the same run on one engine: the example's translated
 * kernel (tools/examples/buffer-cache.comp: 4096 lanes load a mirrored
 * chunk and store into another) with
 *
 *   dispatch   hm_engine_dispatch(): submits and waits by itself, copies
 *              back in a second submission it waits for;
 *   record     hm_engine_record() into the caller's command buffer, the
 *              caller's vkQueueSubmit() signalling its timeline semaphore,
 *              vkWaitSemaphores(), hm_engine_complete();
 *   submit     hm_engine_submit() on the engine's timeline, the wait,
 *              hm_engine_complete().
 *
 * Each with 2 chunks mirrored (the two the kernel touches) and with 64
 * (62 the kernel never stores into: the recorded copy-back lists every
 * published mirror and keeps the marked ones on the device).  R x N
 * dispatches of each, the three taken in turn dispatch by dispatch (so
 * that other load on the machine falls on all alike); the median of each
 * one's times and the ratios to dispatch.  Every dispatch's output is
 * checked.
 */
#include <errno.h>
#include <getopt.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <hmirror/engine.h>
#include <hmirror/vkctx.h>
#include <hmirror/watch.h>

#include "examples/buffer-cache.spv.h"  /* example_kernel_spv */
#include "common.h"

#define GUEST_BASE	0x40000000ull
#define CHUNK		(64u << 10)
#define NR_CHUNKS	64
#define NR_VERTS	4096
#define USER_WORDS	5
#define WAIT_NS		(30ull * 1000000000)

enum { M_DISPATCH, M_RECORD, M_SUBMIT, M_NR };
static const char *const mode_name[M_NR] = { "dispatch", "record", "submit" };

struct run {
	struct hm_vk *vk;
	struct hm_engine *e;
	struct hm_space *s;
	uint32_t *mem, pipe, x;
	VkCommandPool pool;
	VkCommandBuffer cb;
	VkSemaphore timeline;
	uint64_t value;
	unsigned bad;
};

static int one(struct run *r, int mode)
{
	uint64_t x = GUEST_BASE, y = GUEST_BASE + CHUNK;
	uint32_t push[USER_WORDS] = { (uint32_t)x, (uint32_t)(x >> 32), (uint32_t)y,
				      (uint32_t)(y >> 32), NR_VERTS };
	struct hm_engine_dispatch d = { .pipeline = r->pipe, .groups = { NR_VERTS / 64, 1, 1 },
					.push = push, .nr_push = USER_WORDS };
	VkCommandBufferBeginInfo bi = { .sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO,
					.flags = VK_COMMAND_BUFFER_USAGE_ONE_TIME_SUBMIT_BIT };
	VkTimelineSemaphoreSubmitInfo tsi = {
		.sType = VK_STRUCTURE_TYPE_TIMELINE_SEMAPHORE_SUBMIT_INFO,
		.signalSemaphoreValueCount = 1,
	};
	VkSubmitInfo si = { .sType = VK_STRUCTURE_TYPE_SUBMIT_INFO, .pNext = &tsi,
			    .commandBufferCount = 1, .pCommandBuffers = &r->cb,
			    .signalSemaphoreCount = 1, .pSignalSemaphores = &r->timeline };
	VkSemaphoreWaitInfo wi = { .sType = VK_STRUCTURE_TYPE_SEMAPHORE_WAIT_INFO,
				   .semaphoreCount = 1 };
	struct hm_engine_work *w;
	VkSemaphore sem;
	uint64_t value;
	int err;

	switch (mode) {
	case M_DISPATCH:
		return hm_engine_dispatch(r->e, r->pipe, NR_VERTS / 64, 1, 1, push, USER_WORDS, 0);
	case M_RECORD:
		if (vkResetCommandBuffer(r->cb, 0) || vkBeginCommandBuffer(r->cb, &bi))
			return -EIO;
		err = hm_engine_record(r->e, r->cb, &d, &w);
		if (err)
			return err;
		if (vkEndCommandBuffer(r->cb))
			return -EIO;
		value = ++r->value;
		tsi.pSignalSemaphoreValues = &value;
		hm_vk_queue_lock(r->vk);
		err = hm_vk_errno(vkQueueSubmit(r->vk->queue, 1, &si, VK_NULL_HANDLE));
		hm_vk_queue_unlock(r->vk);
		sem = r->timeline;
		break;
	default:
		err = hm_engine_submit(r->e, &d, &w);
		if (!err)
			err = hm_engine_work_timeline(w, &sem, &value);
		break;
	}
	if (err)
		return err;
	wi.pSemaphores = &sem;
	wi.pValues = &value;
	err = hm_vk_errno(vkWaitSemaphores(r->vk->dev, &wi, WAIT_NS));
	if (!err)
		err = hm_engine_complete(w, WAIT_NS);
	return err;
}

static int setup(struct run *r, unsigned mirrored)
{
	struct hm_vk_params vp = { .validation = 0 };
	struct hm_space_params sp = { .size = (uint64_t)NR_CHUNKS * CHUNK,
				      .flags = HM_SPACE_POPULATE };
	struct hm_engine_params ep = { .flags = HM_ENGINE_NO_TIMESTAMPS };
	VkCommandPoolCreateInfo pci = { .sType = VK_STRUCTURE_TYPE_COMMAND_POOL_CREATE_INFO,
					.flags = VK_COMMAND_POOL_CREATE_RESET_COMMAND_BUFFER_BIT };
	VkCommandBufferAllocateInfo ai = { .sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_ALLOCATE_INFO,
					   .level = VK_COMMAND_BUFFER_LEVEL_PRIMARY,
					   .commandBufferCount = 1 };
	VkSemaphoreTypeCreateInfo ti = { .sType = VK_STRUCTURE_TYPE_SEMAPHORE_TYPE_CREATE_INFO,
					 .semaphoreType = VK_SEMAPHORE_TYPE_TIMELINE };
	VkSemaphoreCreateInfo sci = { .sType = VK_STRUCTURE_TYPE_SEMAPHORE_CREATE_INFO, .pNext = &ti };
	int err;

	memset(r, 0, sizeof(*r));
	err = hm_vk_new(&vp, &r->vk);
	if (!err)
		err = hm_space_new(&sp, &r->s);
	if (err)
		return err;
	r->mem = hm_space_addr(r->s);
	for (uint32_t i = 0; i < NR_VERTS; i++)
		r->mem[i] = i;
	err = hm_engine_new(r->vk, &ep, &r->e);
	if (!err)
		err = hm_engine_add_space(r->e, r->s, GUEST_BASE, NULL);
	if (!err)
		err = hm_engine_advise(r->e, GUEST_BASE, (uint64_t)mirrored * CHUNK,
				       HM_ADVICE_PREFER_DEVICE);
	if (!err)
		err = hm_engine_pipeline_new(r->e, example_kernel_spv,
					     sizeof(example_kernel_spv) / 4, "main", USER_WORDS,
					     &r->pipe);
	if (err)
		return err;
	pci.queueFamilyIndex = r->vk->queue_family;
	if (vkCreateCommandPool(r->vk->dev, &pci, NULL, &r->pool))
		return -EIO;
	ai.commandPool = r->pool;
	if (vkAllocateCommandBuffers(r->vk->dev, &ai, &r->cb) ||
	    vkCreateSemaphore(r->vk->dev, &sci, NULL, &r->timeline))
		return -EIO;
	/* warm: the advised chunks uploaded, the pipeline run once */
	for (int i = 0; i < 3; i++) {
		err = one(r, M_DISPATCH);
		if (err)
			return err;
	}
	return 0;
}

static void teardown(struct run *r)
{
	if (r->timeline)
		vkDestroySemaphore(r->vk->dev, r->timeline, NULL);
	if (r->pool)
		vkDestroyCommandPool(r->vk->dev, r->pool, NULL);
	hm_engine_free(r->e);
	hm_space_free(r->s);
	hm_vk_free(r->vk);
}

static int check(struct run *r)
{
	for (uint32_t i = 0; i < NR_VERTS; i++)
		if (r->mem[CHUNK / 4 + i] != r->mem[i] * 3u + 1u)
			return 1;
	return 0;
}

int bench_stream(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "rounds", required_argument, NULL, 'r' },
		{ "n", required_argument, NULL, 'n' },
		{ "json", no_argument, NULL, 'j' },
		{ "help", no_argument, NULL, 'h' },
		{ 0 }
	};
	static const unsigned mirrored[] = { 2, NR_CHUNKS };
	unsigned rounds = 7, n = 50;
	bool json = false;
	int c, err = 0;

	while ((c = getopt_long(argc, argv, "r:n:jh", opts, NULL)) != -1) {
		switch (c) {
		case 'r': rounds = (unsigned)atoi(optarg); break;
		case 'n': n = (unsigned)atoi(optarg); break;
		case 'j': json = true; break;
		default:
			fprintf(c == 'h' ? stdout : stderr,
				"usage: hmirror-bench stream [--rounds R] [--n N] [--json]\n");
			return c == 'h' ? 0 : 1;
		}
	}
	if (!rounds || !n)
		return 1;
	for (unsigned k = 0; k < sizeof(mirrored) / sizeof(mirrored[0]); k++) {
		double *t[M_NR], med[M_NR];
		struct hm_engine_stats st;
		struct run r;

		err = setup(&r, mirrored[k]);
		if (err) {
			fprintf(stderr, "hmirror-bench stream: setup: %s\n", strerror(-err));
			teardown(&r);
			return 1;
		}
		for (int m = 0; m < M_NR; m++)
			t[m] = calloc((size_t)rounds * n, sizeof(double));
		/* the three one after the other, dispatch by dispatch, so that
		 * other load on the machine falls on all three alike */
		for (unsigned i = 0; i < rounds * n && !err; i++) {
			for (int m = 0; m < M_NR && !err; m++) {
				double t0 = bench_now_us();

				r.mem[i % NR_VERTS] = i;        /* the CPU writes x */
				err = one(&r, m);
				t[m][i] = bench_now_us() - t0;
				if (!err && check(&r))
					r.bad++;
			}
		}
		hm_engine_stats(r.e, &st);
		for (int m = 0; m < M_NR; m++)
			med[m] = bench_pct(t[m], (size_t)rounds * n, 0.5);
		if (err) {
			fprintf(stderr, "hmirror-bench stream: %s\n", strerror(-err));
		} else if (json) {
			printf("{\"bench\":\"stream\",\"device\":\"%s\",\"mirrored\":%u,\"rounds\":%u,"
			       "\"n\":%u,\"dispatch_us\":%.1f,\"record_us\":%.1f,\"submit_us\":%.1f,"
			       "\"record_ratio\":%.3f,\"submit_ratio\":%.3f,\"mismatches\":%u}\n",
			       r.vk->props.deviceName, mirrored[k], rounds, n, med[M_DISPATCH],
			       med[M_RECORD], med[M_SUBMIT], med[M_RECORD] / med[M_DISPATCH],
			       med[M_SUBMIT] / med[M_DISPATCH], r.bad);
		} else {
			printf("stream: %s, %u chunks mirrored (%llu now), %u x %u dispatches each, "
			       "medians\n", r.vk->props.deviceName, mirrored[k],
			       (unsigned long long)st.chunks_mirrored, rounds, n);
			for (int m = 0; m < M_NR; m++)
				printf("  %-9s %8.1f us  %.2fx\n", mode_name[m], med[m],
				       med[m] / med[M_DISPATCH]);
			printf("  outputs wrong: %u\n", r.bad);
		}
		if (r.bad)
			err = -EIO;
		for (int m = 0; m < M_NR; m++)
			free(t[m]);
		teardown(&r);
		if (err)
			return 1;
	}
	return 0;
}
