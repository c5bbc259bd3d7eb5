// SPDX-License-Identifier: GPL-2.0
/*
 * hmirror-bench workload: the demo's job (tools/demo: the same scene, the
 * same traversal, the same guest writes) in every way a user could run it,
 * side by side, each verified against the CPU reference:
 *
 *   ideal          the scene in a plain device-local buffer, raw device
 *                  addresses (traverse.comp built with HM_RAW: no helper, no
 *                  table, no marks); the guest's changes between dispatches
 *                  copied word by word, the hit words copied back: the limit
 *   zero-copy      the engine without mirrors: every access reads home
 *   buffer-cache   what emulators do today (shadPS4, yuzu/Eden, Ryujinx): a
 *                  device-local copy of the whole space, guest pages tracked
 *                  by mprotect + SIGSEGV at 4 KiB, every written page copied
 *                  again (through a staging buffer) before the next
 *                  dispatch, the dispatch's whole output range downloaded
 *                  after it; a CPU write to that range while the dispatch
 *                  runs waits for the download (as a buffer cache's "GPU
 *                  modified" pages do), so that nothing is lost
 *   hmirror        the engine in-process, the demo's advice (hierarchy
 *                  read-mostly, hit records prefer-device), default policy
 *   hmirror-daemon the same through hmirrord (started here on a private
 *                  socket unless --socket answers)
 *   uvm            CUDA (hmirror-bench-uvm.so, where built): the same walk
 *                  over cudaMallocManaged memory advised read-mostly and
 *                  prefetched, the CPU writing the same words
 *   uvm-hmm        the same over plain host memory, where the device reports
 *                  pageable memory access
 *
 * The scene evolves the same way in every mode (one seed), so the
 * reference hits of every dispatch are computed once, up front, on a copy
 * of their own.  Every mode fills device memory with the scene before its
 * first dispatch (ideal and buffer-cache copy it, uvm prefetches it, the
 * engine modes call hm_engine_prefetch() after their advice; that time is
 * populate_ms).  Per mode and round: rays/s over the dispatches' time
 * (from the first byte a mode moves for a dispatch to its outputs home),
 * median, p99 and per-quarter median of the dispatch time, bytes moved
 * each way, CPU time spent tracking guest writes, the engine's phases and,
 * for the engine modes, a per-dispatch timeline (--timeline).
 *
 *   hmirror-bench workload [--modes LIST] [--rounds R] [--size MIB]
 *       [--rays N] [--dispatches N] [--mods N] [--write-every K]
 *       [--scratch-max N] [--constant] [--backend NAME] [--socket PATH]
 *       [--threads N] [--plot FILE.png] [--timeline] [--twin-mode M] [--json]
 */
#include <dlfcn.h>
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <limits.h>
#include <math.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <hmirror/client.h>
#include <hmirror/engine.h>
#include <hmirror/vkctx.h>

#include "demo/traverse.spv.h"		/* hm_demo_traverse_spv */
#include "demo/traverse_raw.spv.h"	/* hm_demo_traverse_raw_spv */
#include "demo/traverse_spec.spv.h"	/* hm_demo_traverse_spec_spv: loads at the window */
#include "../demo/scene.h"
#include "../../lib/engine/test_hooks.h"	/* HM_ENGINE_NO_AHEAD */
#include "workload.h"
#include "common.h"

#define GUEST_BASE	((uint64_t)0x100000000)
#define PAGE		4096u

pid_t bench_spawn_daemon(const char *sock);	/* dispatch.c */

enum wl_mode {
	M_IDEAL, M_ZERO_COPY, M_BUFFER_CACHE, M_HMIRROR, M_HMIRROR_DAEMON, M_HMIRROR_HELPER,
	M_HMIRROR_BOUNDARY, M_HMIRROR_EARLY, M_UVM, M_UVM_HMM, M_NR
};
static const char *const mode_name[M_NR] = {
	"ideal", "zero-copy", "buffer-cache", "hmirror", "hmirror-daemon", "hmirror-helper",
	"hmirror-boundary", "hmirror-early", "uvm", "uvm-hmm",
};

/* per dispatch of an engine mode: the engine's counters' differences */
struct wl_tl {
	uint64_t harvested, uploads, discarded, dropped, refreshed, evicted, backoffs,
		 refusals, marks, copied, bytes_up, bytes_home, mirrored;
	uint64_t ns_harvest, ns_upload, ns_upload_copy, ns_dispatch, ns_gpu, ns_marks,
		 ns_up_select, ns_up_gens, ns_up_publish, ns_win_sync,
		 ns_copy_back, ns_up_check, retries, win_binds, win_fills, win_copies,
		 ahead_up, ahead_disc, ns_ahead, ns_ahead_wait, ns_ahead_harvest, ns_ahead_copy,
		 ns_ahead_check, ns_ahead_select, ns_ahead_gens, ns_ahead_publish, ns_ahead_finish,
		 ns_win_plan, ns_win_record;
};

struct wl_result {
	enum wl_mode mode;
	unsigned round;
	bool ran;
	char note[256];
	uint32_t done;
	double *t_ms;			/* per dispatch */
	double *gpu_ms;			/* per dispatch, device time of the walk (0: unknown) */
	struct wl_tl *tl;		/* engine modes */
	double rays_s, med, p99, q[4], gpu_med;
	uint64_t bytes_up, bytes_down, trips;
	double track_ms, stall_ms;	/* CPU time tracking writes; writer stalled */
	double populate_ms;		/* device memory filled before the first dispatch */
	double *pf_ms, pf_med;		/* --prefetch-each: after each dispatch but the last */
	uint64_t mismatches, lost;
	struct wl_tl sum;
};

struct wl {
	/* options */
	uint64_t size_mib;
	uint32_t rays, dispatches, mods, write_every, scratch_max, threads, rounds, chunk_shift;
	uint32_t hits_advice;		/* the hit records' (default: none) */
	uint32_t watch_shift;		/* the guest space's watch unit (default: pages) */
	bool constant, json, timeline;
	bool no_prefetch;		/* engine modes: the first dispatch uploads */
	uint32_t twin_mode;		/* in-process engines' hm_engine_params.twin_mode */
	bool prefetch_each;		/* engine modes: a prefetch after each dispatch, timed apart */
	const char *socket, *plot, *backend;
	bool modes[M_NR];
	/* the scene as built, and the reference hits of every dispatch */
	struct demo_scene tmpl;
	struct demo_hit *want;		/* dispatches * rays */
	double t_build, t_ref;
	/* devices */
	struct hm_vk *vk;
	char device[256];
	struct hm_vk_pipeline raw;
	const struct wl_uvm_ops *uvm;
	char uvm_why[256], uvm_device[128];
	int uvm_pageable;
	char daemon_sock[108];
	pid_t daemon;
};

/* ---- small helpers ---------------------------------------------------------- */


static double quantile(const double *v, size_t n, double p)
{
	double *t;
	double r;

	if (!n)
		return 0;
	t = malloc(n * sizeof(*t));
	if (!t)
		return NAN;
	memcpy(t, v, n * sizeof(*t));
	r = bench_pct(t, n, p);
	free(t);
	return r;
}


static void *map_anon(uint64_t size)
{
	void *p = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

	return p == MAP_FAILED ? NULL : p;
}

/* the user push words of traverse.comp for one dispatch */
static void push_words(const struct demo_scene *sc, uint64_t base, uint32_t first, uint32_t n,
		       uint32_t *w)
{
	uint64_t a[4] = { base + sc->off_nodes, base + sc->off_prims, base + sc->off_rays,
			  base + sc->off_hits };

	for (int i = 0; i < 4; i++) {
		w[2 * i] = (uint32_t)a[i];
		w[2 * i + 1] = (uint32_t)(a[i] >> 32);
	}
	w[8] = first;
	w[9] = n;
}

/* ---- one run of one mode ----------------------------------------------------- */

struct wl_run {
	struct wl *w;
	struct wl_result *res;
	struct demo_scene sc;
	struct demo_guest g;
	uint8_t *mem;			/* guest memory of ideal, buffer-cache, uvm */
	/* Vulkan modes */
	struct hm_vk_buffer dev, host, stage, down, marks;
	struct hm_vk_cmd cmd;
	VkQueryPool qp;
	/* engine modes */
	struct hm_space *space;
	struct hm_engine *e;
	uint32_t pipe;
	struct hm_client *cl;
	struct hm_engine_stats est0;
	uint64_t cst0[HM_ESTAT_NR];
	/* uvm */
	enum wl_uvm_kind kind;
};

static void guest_go(struct wl_run *r, uint32_t k, uint32_t first)
{
	demo_guest_during_start(&r->g, k + 1, first, r->w->rays);
}

static int gpu_time(struct wl_run *r, double *ret_ms)
{
	uint64_t ts[2];
	uint64_t mask = r->w->vk->timestamp_valid_bits >= 64 ? ~0ull :
			(1ull << r->w->vk->timestamp_valid_bits) - 1;

	*ret_ms = 0;
	if (!r->qp)
		return 0;
	if (vkGetQueryPoolResults(r->w->vk->dev, r->qp, 0, 2, sizeof(ts), ts, 8,
				  VK_QUERY_RESULT_64_BIT | VK_QUERY_RESULT_WAIT_BIT))
		return 0;
	*ret_ms = (double)((ts[1] - ts[0]) & mask) * r->w->vk->timestamp_period_ns * 1e-6;
	return 0;
}

static void query_pool(struct wl_run *r)
{
	VkQueryPoolCreateInfo qi = {
		.sType = VK_STRUCTURE_TYPE_QUERY_POOL_CREATE_INFO,
		.queryType = VK_QUERY_TYPE_TIMESTAMP,
		.queryCount = 2,
	};

	if (r->w->vk->timestamp_valid_bits && r->w->vk->props.limits.timestampComputeAndGraphics &&
	    vkCreateQueryPool(r->w->vk->dev, &qi, NULL, &r->qp))
		r->qp = VK_NULL_HANDLE;
}

/* record: the walk with its timestamps and a full barrier after it */
static void record_walk(struct wl_run *r, VkCommandBuffer cb, uint32_t first)
{
	uint32_t push[HM_DEVICE_TABLE_PUSH_WORDS + DEMO_USER_PUSH] = { 0 };

	push[HM_PUSH_MARKS_ADDR_LO] = (uint32_t)r->marks.addr;
	push[HM_PUSH_MARKS_ADDR_HI] = (uint32_t)(r->marks.addr >> 32);
	push_words(&r->sc, r->dev.addr, first, r->w->rays, push + HM_DEVICE_TABLE_PUSH_WORDS);
	hm_vk_cmd_barrier(cb);
	if (r->qp) {
		vkCmdResetQueryPool(cb, r->qp, 0, 2);
		vkCmdWriteTimestamp(cb, VK_PIPELINE_STAGE_TOP_OF_PIPE_BIT, r->qp, 0);
	}
	hm_vk_cmd_dispatch(cb, &r->w->raw, push, sizeof(push), (r->w->rays + 63) / 64, 1, 1);
	if (r->qp)
		vkCmdWriteTimestamp(cb, VK_PIPELINE_STAGE_BOTTOM_OF_PIPE_BIT, r->qp, 1);
	hm_vk_cmd_barrier(cb);
}

static int vk_common_setup(struct wl_run *r, uint64_t stage_bytes)
{
	struct hm_vk *vk = r->w->vk;
	int err;

	err = hm_vk_buffer_new(vk, r->sc.size, HM_VK_MEM_DEVICE, &r->dev);
	if (!err)
		err = hm_vk_buffer_new(vk, 256, HM_VK_MEM_DEVICE, &r->marks);
	if (!err)
		err = hm_vk_buffer_new(vk, (uint64_t)r->w->rays * sizeof(struct demo_hit),
				       HM_VK_MEM_HOST, &r->down);
	if (!err && stage_bytes)
		err = hm_vk_buffer_new(vk, stage_bytes, HM_VK_MEM_HOST, &r->stage);
	if (!err)
		err = hm_vk_cmd_new(vk, &r->cmd);
	query_pool(r);
	return err;
}

static void vk_common_teardown(struct wl_run *r)
{
	struct hm_vk *vk = r->w->vk;

	if (r->qp)
		vkDestroyQueryPool(vk->dev, r->qp, NULL);
	hm_vk_cmd_free(vk, &r->cmd);
	hm_vk_buffer_free(vk, &r->dev);
	hm_vk_buffer_free(vk, &r->host);
	hm_vk_buffer_free(vk, &r->stage);
	hm_vk_buffer_free(vk, &r->down);
	hm_vk_buffer_free(vk, &r->marks);
}

/* the device's hit words (not the guest's cpu word) into guest memory */
static void hits_home(struct wl_run *r, uint32_t first)
{
	const struct demo_hit *d = r->down.map;

	for (uint32_t i = 0; i < r->w->rays; i++) {
		struct demo_hit *h = &r->sc.hits[first + i];

		h->id = d[i].id;
		h->z = d[i].z;
		h->visits = d[i].visits;
	}
}

/* ---- ideal ---- */

static int ideal_setup(struct wl_run *r)
{
	int err;

	r->mem = map_anon(r->sc.size);
	if (!r->mem)
		return -ENOMEM;
	demo_scene_clone(&r->sc, &r->w->tmpl, r->mem);
	err = vk_common_setup(r, 0);
	if (!err)
		err = hm_vk_import_host(r->w->vk, r->mem, r->sc.size, &r->host);
	if (!err) {
		uint64_t t0 = bench_clock_ns();

		err = hm_vk_copy_sync(r->w->vk, r->host.buf, 0, r->dev.buf, 0, r->sc.size);
		r->res->populate_ms = (double)(bench_clock_ns() - t0) * 1e-6;
	}
	return err;
}

static int ideal_dispatch(struct wl_run *r, uint32_t k, uint32_t first, double *ret_gpu)
{
	struct demo_guest *g = &r->g;
	uint64_t out = r->sc.off_hits + (uint64_t)first * sizeof(struct demo_hit);
	VkBufferCopy *reg = NULL, down = { out, 0, (uint64_t)r->w->rays * sizeof(struct demo_hit) };
	VkCommandBuffer cb;
	int err;

	err = hm_vk_cmd_start(r->w->vk, &r->cmd, &cb);
	if (err)
		return err;
	if (k && g->nr_changed) {
		reg = malloc(g->nr_changed * sizeof(*reg));
		if (!reg)
			return -ENOMEM;
		for (uint32_t i = 0; i < g->nr_changed; i++)
			reg[i] = (VkBufferCopy){ g->changed[i], g->changed[i], 4 };
		vkCmdCopyBuffer(cb, r->host.buf, r->dev.buf, g->nr_changed, reg);
		r->res->bytes_up += 4ull * g->nr_changed;
		free(reg);
	}
	record_walk(r, cb, first);
	vkCmdCopyBuffer(cb, r->dev.buf, r->down.buf, 1, &down);
	hm_vk_cmd_barrier(cb);
	guest_go(r, k, first);
	err = hm_vk_cmd_run(r->w->vk, &r->cmd, 0);
	if (err)
		return err;
	hits_home(r, first);
	r->res->bytes_down += down.size;
	return gpu_time(r, ret_gpu);
}

static void ideal_teardown(struct wl_run *r)
{
	vk_common_teardown(r);
	if (r->mem)
		munmap(r->mem, r->sc.size);
}

/* ---- buffer-cache: mprotect + SIGSEGV at 4 KiB ---- */

static struct {
	uintptr_t base, size;
	_Atomic uint8_t *dirty;		/* a byte a page */
	atomic_uintptr_t out_lo, out_hi;	/* pages of the output range in flight */
	atomic_int busy;		/* its download not done yet */
	atomic_uint_fast64_t trips, ns, stall_ns;
	struct sigaction old;
} bc;

static void bc_segv(int sig, siginfo_t *si, void *uc)
{
	uintptr_t a = (uintptr_t)si->si_addr, page;
	uint64_t t0, t1;

	if (a < bc.base || a >= bc.base + bc.size) {
		/* not ours: whoever was there before, or the default */
		if (bc.old.sa_flags & SA_SIGINFO && bc.old.sa_sigaction) {
			bc.old.sa_sigaction(sig, si, uc);
			return;
		}
		signal(SIGSEGV, SIG_DFL);
		return;
	}
	t0 = bench_clock_ns();
	page = (a - bc.base) / PAGE;
	t1 = t0;
	if (page >= atomic_load(&bc.out_lo) && page < atomic_load(&bc.out_hi)) {
		/* the device is writing this range: the CPU's write waits for
		 * its download, then lands on top of it */
		while (atomic_load(&bc.busy))
			__builtin_ia32_pause();
		t1 = bench_clock_ns();
		atomic_fetch_add(&bc.stall_ns, t1 - t0);
	}
	atomic_store(&bc.dirty[page], 1);
	mprotect((void *)(bc.base + page * PAGE), PAGE, PROT_READ | PROT_WRITE);
	atomic_fetch_add(&bc.trips, 1);
	atomic_fetch_add(&bc.ns, bench_clock_ns() - t1);
}

static int bc_setup(struct wl_run *r)
{
	uint64_t chunk = 64ull << 20;
	struct sigaction sa = { .sa_sigaction = bc_segv, .sa_flags = SA_SIGINFO | SA_RESTART };
	uint64_t t0;
	int err;

	r->mem = map_anon(r->sc.size);
	if (!r->mem)
		return -ENOMEM;
	demo_scene_clone(&r->sc, &r->w->tmpl, r->mem);
	err = vk_common_setup(r, chunk < r->sc.size ? chunk : r->sc.size);
	if (err)
		return err;
	t0 = bench_clock_ns();
	for (uint64_t off = 0; off < r->sc.size; off += r->stage.size) {
		uint64_t n = r->sc.size - off < r->stage.size ? r->sc.size - off : r->stage.size;

		memcpy(r->stage.map, r->mem + off, n);
		err = hm_vk_copy_sync(r->w->vk, r->stage.buf, 0, r->dev.buf, off, n);
		if (err)
			return err;
	}
	r->res->populate_ms = (double)(bench_clock_ns() - t0) * 1e-6;
	bc.dirty = calloc(r->sc.size / PAGE, 1);
	if (!bc.dirty)
		return -ENOMEM;
	bc.base = (uintptr_t)r->mem;
	bc.size = r->sc.size;
	atomic_store(&bc.out_lo, 0);
	atomic_store(&bc.out_hi, 0);
	atomic_store(&bc.trips, 0);
	atomic_store(&bc.ns, 0);
	atomic_store(&bc.stall_ns, 0);
	sigemptyset(&sa.sa_mask);
	if (sigaction(SIGSEGV, &sa, &bc.old))
		return -errno;
	if (mprotect(r->mem, r->sc.size, PROT_READ))
		return -errno;
	return 0;
}

/* the written pages: re-protected (first), then copied through staging */
static int bc_upload(struct wl_run *r, VkCommandBuffer *cb)
{
	uint64_t pages = r->sc.size / PAGE, used = 0, t0 = bench_clock_ns(), track = 0;
	VkBufferCopy *reg = malloc(r->stage.size / PAGE * sizeof(*reg));
	size_t nreg = 0;
	int err = 0;

	if (!reg)
		return -ENOMEM;
	for (uint64_t p = 0; p < pages; p++) {
		uint64_t run = 0, t1;

		if (!atomic_load_explicit(&bc.dirty[p], memory_order_relaxed))
			continue;
		while (p + run < pages && atomic_load(&bc.dirty[p + run]) &&
		       used + (run + 1) * PAGE <= r->stage.size)
			run++;
		if (!run) {
			/* staging full: copy what it holds, go on */
			vkCmdCopyBuffer(*cb, r->stage.buf, r->dev.buf, nreg, reg);
			err = hm_vk_cmd_run(r->w->vk, &r->cmd, 0);
			if (!err)
				err = hm_vk_cmd_start(r->w->vk, &r->cmd, cb);
			if (err)
				break;
			nreg = 0;
			used = 0;
			p--;
			continue;
		}
		t1 = bench_clock_ns();
		for (uint64_t i = 0; i < run; i++)
			atomic_store(&bc.dirty[p + i], 0);
		mprotect(r->mem + p * PAGE, run * PAGE, PROT_READ);
		track += bench_clock_ns() - t1;
		memcpy((uint8_t *)r->stage.map + used, r->mem + p * PAGE, run * PAGE);
		reg[nreg++] = (VkBufferCopy){ used, p * PAGE, run * PAGE };
		used += run * PAGE;
		r->res->bytes_up += run * PAGE;
		p += run - 1;
	}
	if (!err && nreg)
		vkCmdCopyBuffer(*cb, r->stage.buf, r->dev.buf, nreg, reg);
	free(reg);
	/* the scan counts as tracking too: the list of written pages */
	r->res->track_ms += (double)track * 1e-6;
	(void)t0;
	return err;
}

static int bc_dispatch(struct wl_run *r, uint32_t k, uint32_t first, double *ret_gpu)
{
	uint64_t out = r->sc.off_hits + (uint64_t)first * sizeof(struct demo_hit);
	uint64_t out_bytes = (uint64_t)r->w->rays * sizeof(struct demo_hit);
	uint64_t lo = out / PAGE, hi = (out + out_bytes + PAGE - 1) / PAGE;
	VkBufferCopy down = { out, 0, out_bytes };
	VkCommandBuffer cb;
	int err;

	err = hm_vk_cmd_start(r->w->vk, &r->cmd, &cb);
	if (err)
		return err;
	err = bc_upload(r, &cb);
	if (err)
		return err;
	record_walk(r, cb, first);
	vkCmdCopyBuffer(cb, r->dev.buf, r->down.buf, 1, &down);
	hm_vk_cmd_barrier(cb);
	atomic_store(&bc.busy, 1);
	atomic_store(&bc.out_lo, lo);
	atomic_store(&bc.out_hi, hi);
	guest_go(r, k, first);
	err = hm_vk_cmd_run(r->w->vk, &r->cmd, 0);
	if (err)
		return err;
	/* the whole output range home, then tracked again */
	mprotect(r->mem + lo * PAGE, (hi - lo) * PAGE, PROT_READ | PROT_WRITE);
	memcpy(r->mem + out, r->down.map, out_bytes);
	mprotect(r->mem + lo * PAGE, (hi - lo) * PAGE, PROT_READ);
	atomic_store(&bc.busy, 0);
	r->res->bytes_down += out_bytes;
	return gpu_time(r, ret_gpu);
}

static void bc_teardown(struct wl_run *r)
{
	if (r->mem) {
		mprotect(r->mem, r->sc.size, PROT_READ | PROT_WRITE);
		sigaction(SIGSEGV, &bc.old, NULL);
	}
	r->res->trips = atomic_load(&bc.trips);
	r->res->track_ms += (double)atomic_load(&bc.ns) * 1e-6;
	r->res->stall_ms = (double)atomic_load(&bc.stall_ns) * 1e-6;
	free((void *)bc.dirty);
	bc.dirty = NULL;
	bc.base = bc.size = 0;
	vk_common_teardown(r);
	if (r->mem)
		munmap(r->mem, r->sc.size);
}

/* ---- the engine, in-process (hmirror, zero-copy) and through hmirrord ---- */

static int space_setup(struct wl_run *r)
{
	struct hm_space_params sp = { .size = r->w->tmpl.size };

	/* the watch unit: pages by default, so that a written mirror is
	 * refreshed page by page; never coarser than the engine's chunk
	 * (the daemon's engines have the default one) */
	sp.chunk_shift = r->w->watch_shift;
	if (r->res->mode != M_HMIRROR_DAEMON && r->w->chunk_shift && sp.chunk_shift > r->w->chunk_shift)
		sp.chunk_shift = r->w->chunk_shift;
	int err;

	if (r->w->backend) {
		err = hm_backend_from_name(r->w->backend, &sp.backend);
		if (err)
			return err;
	}
	err = hm_space_new(&sp, &r->space);
	if (err)
		return err;
	demo_scene_clone(&r->sc, &r->w->tmpl, hm_space_addr(r->space));
	snprintf(r->res->note, sizeof(r->res->note), "backend %s",
		 hm_backend_name(hm_space_backend(r->space)));
	return 0;
}

static int engine_setup(struct wl_run *r)
{
	struct hm_engine_params p = { .chunk_shift = r->w->chunk_shift,
				      .twin_mode = r->w->twin_mode };
	bool zc = r->res->mode == M_ZERO_COPY;
	int err;

	err = space_setup(r);
	if (err)
		return err;
	if (zc)
		p.flags |= HM_ENGINE_NO_MIRRORS;
	if (r->res->mode == M_HMIRROR_BOUNDARY)
		p.flags |= HM_ENGINE_NO_AHEAD;
	if (r->res->mode == M_HMIRROR_EARLY)
		p.flags |= HM_ENGINE_AHEAD_EARLY;
	err = hm_engine_new(r->w->vk, &p, &r->e);
	if (!err)
		err = hm_engine_add_space(r->e, r->space, GUEST_BASE, NULL);
	if (!err && !zc) {
		/* the demo's advice */
		err = hm_engine_advise(r->e, GUEST_BASE + r->sc.off_nodes,
				       r->sc.off_rays - r->sc.off_nodes, HM_ADVICE_READ_MOSTLY);
		if (!err)
			err = hm_engine_advise(r->e, GUEST_BASE + r->sc.off_hits,
					       (uint64_t)r->sc.nr_rays * sizeof(struct demo_hit),
					       r->w->hits_advice);
	}
	/* hmirror, hmirror-boundary, hmirror-early: the hierarchy's loads at
	 * the mirror window (two tiers); hmirror-helper and zero-copy: every
	 * load through the helper */
	if (!err && (r->res->mode == M_HMIRROR || r->res->mode == M_HMIRROR_BOUNDARY ||
		     r->res->mode == M_HMIRROR_EARLY))
		err = hm_engine_pipeline_new(r->e, hm_demo_traverse_spec_spv,
					     sizeof(hm_demo_traverse_spec_spv) / 4, "main",
					     DEMO_USER_PUSH, &r->pipe);
	else if (!err)
		err = hm_engine_pipeline_new(r->e, hm_demo_traverse_spv,
					     sizeof(hm_demo_traverse_spv) / 4, "main",
					     DEMO_USER_PUSH, &r->pipe);
	/* the advised hierarchy uploaded before the first dispatch, as the
	 * other modes fill device memory before theirs */
	if (!err && !zc && !r->w->no_prefetch) {
		uint64_t t0 = bench_clock_ns();

		err = hm_engine_prefetch(r->e);
		err = err < 0 ? err : 0;
		r->res->populate_ms = (double)(bench_clock_ns() - t0) * 1e-6;
	}
	if (!err)
		err = hm_engine_stats(r->e, &r->est0);
	return err;
}

static void tl_from_engine(struct wl_tl *t, const struct hm_engine_stats *a,
			   const struct hm_engine_stats *b)
{
	t->harvested = b->chunks_harvested - a->chunks_harvested;
	t->uploads = b->uploads - a->uploads;
	t->discarded = b->uploads_discarded - a->uploads_discarded;
	t->dropped = b->mirrors_dropped_by_guard - a->mirrors_dropped_by_guard;
	t->refreshed = b->mirrors_refreshed - a->mirrors_refreshed;
	t->evicted = b->mirrors_evicted - a->mirrors_evicted;
	t->backoffs = b->thrash_backoffs - a->thrash_backoffs;
	t->refusals = b->budget_refusals - a->budget_refusals;
	t->marks = b->marks_scanned - a->marks_scanned;
	t->copied = b->chunks_copied_home - a->chunks_copied_home;
	t->bytes_up = b->upload_bytes - a->upload_bytes;
	t->bytes_home = b->bytes_copied_home - a->bytes_copied_home;
	t->mirrored = b->chunks_mirrored;
	t->ns_harvest = b->ns_harvest - a->ns_harvest;
	t->ns_upload = b->ns_upload - a->ns_upload;
	t->ns_upload_copy = b->ns_upload_copy - a->ns_upload_copy;
	t->ns_up_select = b->ns_upload_select - a->ns_upload_select;
	t->ns_up_gens = b->ns_upload_gens - a->ns_upload_gens;
	t->ns_up_check = b->ns_upload_check - a->ns_upload_check;
	t->retries = b->upload_retries - a->upload_retries;
	t->win_binds = b->window_binds - a->window_binds;
	t->win_fills = b->window_fills - a->window_fills;
	t->win_copies = b->window_copies - a->window_copies;
	t->ns_up_publish = b->ns_upload_publish - a->ns_upload_publish;
	t->ns_win_sync = b->ns_window_sync - a->ns_window_sync;
	t->ns_dispatch = b->ns_dispatch - a->ns_dispatch;
	t->ns_gpu = b->ns_dispatch_gpu - a->ns_dispatch_gpu;
	t->ns_marks = b->ns_marks - a->ns_marks;
	t->ns_copy_back = b->ns_copy_back - a->ns_copy_back;
	t->ahead_up = b->ahead_uploads - a->ahead_uploads;
	t->ahead_disc = b->ahead_discarded - a->ahead_discarded;
	t->ns_ahead = b->ns_ahead - a->ns_ahead;
	t->ns_ahead_wait = b->ns_ahead_wait - a->ns_ahead_wait;
	t->ns_ahead_harvest = b->ns_ahead_harvest - a->ns_ahead_harvest;
	t->ns_ahead_copy = b->ns_ahead_copy - a->ns_ahead_copy;
	t->ns_ahead_check = b->ns_ahead_check - a->ns_ahead_check;
	t->ns_ahead_select = b->ns_ahead_select - a->ns_ahead_select;
	t->ns_ahead_gens = b->ns_ahead_gens - a->ns_ahead_gens;
	t->ns_ahead_publish = b->ns_ahead_publish - a->ns_ahead_publish;
	t->ns_ahead_finish = b->ns_ahead_finish - a->ns_ahead_finish;
	t->ns_win_plan = b->ns_window_plan - a->ns_window_plan;
	t->ns_win_record = b->ns_window_record - a->ns_window_record;
}

static void tl_from_daemon(struct wl_tl *t, const uint64_t *a, const uint64_t *b)
{
#define D(f, k) t->f = b[HM_ESTAT_##k] - a[HM_ESTAT_##k]
	D(harvested, GUARD_TRIPS); D(uploads, UPLOADS); D(discarded, UPLOADS_DISCARDED);
	D(dropped, MIRRORS_DROPPED); D(refreshed, REFRESHES); D(evicted, MIRRORS_EVICTED);
	D(backoffs, THRASH_BACKOFFS); D(refusals, BUDGET_REFUSALS); D(marks, MARKS_SCANNED);
	D(copied, CHUNKS_COPIED_HOME); D(bytes_up, BYTES_UPLOADED);
	D(bytes_home, BYTES_COPIED_HOME); D(ns_harvest, NS_HARVEST); D(ns_upload, NS_UPLOAD);
	D(ns_upload_copy, NS_UPLOAD_COPY); D(ns_dispatch, NS_DISPATCH);
	D(ns_gpu, NS_DISPATCH_GPU); D(ns_marks, NS_MARKS); D(ns_copy_back, NS_COPY_BACK);
	D(ns_up_select, NS_UPLOAD_SELECT); D(ns_up_gens, NS_UPLOAD_GENS);
	D(ns_up_check, NS_UPLOAD_CHECK); D(ns_up_publish, NS_UPLOAD_PUBLISH);
	D(ns_win_sync, NS_WINDOW_SYNC); D(retries, UPLOAD_RETRIES); D(win_binds, WINDOW_BINDS);
	D(win_fills, WINDOW_FILLS); D(win_copies, WINDOW_COPIES); D(ahead_up, AHEAD_UPLOADS);
	D(ahead_disc, AHEAD_DISCARDED); D(ns_ahead, NS_AHEAD); D(ns_ahead_wait, NS_AHEAD_WAIT);
	D(ns_ahead_harvest, NS_AHEAD_HARVEST); D(ns_ahead_copy, NS_AHEAD_COPY);
	D(ns_ahead_check, NS_AHEAD_CHECK); D(ns_ahead_select, NS_AHEAD_SELECT);
	D(ns_ahead_gens, NS_AHEAD_GENS); D(ns_ahead_publish, NS_AHEAD_PUBLISH);
	D(ns_ahead_finish, NS_AHEAD_FINISH); D(ns_win_plan, NS_WINDOW_PLAN);
	D(ns_win_record, NS_WINDOW_RECORD);
#undef D
	t->mirrored = b[HM_ESTAT_CHUNKS_MIRRORED];
}

static int engine_dispatch(struct wl_run *r, uint32_t k, uint32_t first, double *ret_gpu)
{
	uint32_t push[DEMO_USER_PUSH];
	struct hm_engine_stats st;
	int err;

	push_words(&r->sc, GUEST_BASE, first, r->w->rays, push);
	guest_go(r, k, first);
	err = hm_engine_dispatch(r->e, r->pipe, (r->w->rays + 63) / 64, 1, 1, push,
				 DEMO_USER_PUSH, 0);
	if (err)
		return err;
	err = hm_engine_stats(r->e, &st);
	if (err)
		return err;
	tl_from_engine(&r->res->tl[k], &r->est0, &st);
	if (st.tier_switches && !r->est0.tier_switches) {
		struct hm_engine_pipeline_info pi;

		/* when the loads went to the window: the note says */
		if (!hm_engine_pipeline_info(r->e, r->pipe, &pi))
			snprintf(r->res->note + strlen(r->res->note),
				 sizeof(r->res->note) - strlen(r->res->note),
				 "; tier two from dispatch %u (compiles %.0f / %.0f ms)", k + 1,
				 pi.ns_compile_compact * 1e-6, pi.ns_compile_speculative * 1e-6);
	}
	r->est0 = st;
	*ret_gpu = (double)r->res->tl[k].ns_gpu * 1e-6;
	return 0;
}

static void engine_teardown(struct wl_run *r)
{
	hm_engine_free(r->e);
	hm_space_free(r->space);
}

static int daemon_setup(struct wl_run *r)
{
	struct hm_client_stats st;
	uint32_t id;
	int err;

	err = hm_client_connect(r->w->daemon_sock, &r->cl);
	if (err)
		return err;
	err = space_setup(r);
	if (!err)
		err = hm_client_space_add(r->cl, r->space, GUEST_BASE, &id);
	if (!err)
		err = hm_client_advise(r->cl, GUEST_BASE + r->sc.off_nodes,
				       r->sc.off_rays - r->sc.off_nodes, HM_ADVICE_READ_MOSTLY);
	if (!err)
		err = hm_client_advise(r->cl, GUEST_BASE + r->sc.off_hits,
				       (uint64_t)r->sc.nr_rays * sizeof(struct demo_hit),
				       r->w->hits_advice);
	if (!err)
		err = hm_client_pipeline_new(r->cl, hm_demo_traverse_spec_spv,
					     sizeof(hm_demo_traverse_spec_spv) / 4, "main",
					     DEMO_USER_PUSH, &r->pipe);
	if (!err && !r->w->no_prefetch) {
		uint64_t t0 = bench_clock_ns();

		err = hm_client_prefetch(r->cl);
		r->res->populate_ms = (double)(bench_clock_ns() - t0) * 1e-6;
		if (err == -EOPNOTSUPP) {	/* a daemon of before HM_FEAT_PREFETCH */
			snprintf(r->res->note + strlen(r->res->note),
				 sizeof(r->res->note) - strlen(r->res->note),
				 ", no prefetch (daemon)");
			err = 0;
		}
	}
	if (!err)
		err = hm_client_stats(r->cl, &st);
	if (!err) {
		if (st.nr_engine < HM_ESTAT_NR)
			snprintf(r->res->note + strlen(r->res->note),
				 sizeof(r->res->note) - strlen(r->res->note),
				 ", daemon sends %u engine counters of %u", st.nr_engine,
				 HM_ESTAT_NR);
		memcpy(r->cst0, st.engine, sizeof(r->cst0));
	}
	return err;
}

static int daemon_dispatch(struct wl_run *r, uint32_t k, uint32_t first, double *ret_gpu)
{
	uint32_t push[DEMO_USER_PUSH];
	struct hm_client_dispatch d = {
		.pipeline = r->pipe,
		.groups = { (r->w->rays + 63) / 64, 1, 1 },
		.nr_push = DEMO_USER_PUSH, .push = push,
	};
	struct hm_client_result res;
	struct hm_client_stats st;
	uint64_t ticket;
	int err;

	push_words(&r->sc, GUEST_BASE, first, r->w->rays, push);
	err = hm_client_submit(r->cl, &d, &ticket);
	if (err)
		return err;
	guest_go(r, k, first);
	err = hm_client_wait(r->cl, ticket, 600000, &res);
	if (err)
		return err;
	err = hm_client_stats(r->cl, &st);
	if (err)
		return err;
	tl_from_daemon(&r->res->tl[k], r->cst0, st.engine);
	memcpy(r->cst0, st.engine, sizeof(r->cst0));
	*ret_gpu = (double)r->res->tl[k].ns_gpu * 1e-6;
	return 0;
}

static void daemon_teardown(struct wl_run *r)
{
	hm_client_free(r->cl);
	hm_space_free(r->space);
}

/* ---- CUDA ---- */

static int uvm_setup(struct wl_run *r)
{
	const struct wl_uvm_ops *u = r->w->uvm;
	char msg[256] = "";
	int err;

	r->kind = r->res->mode == M_UVM ? WL_UVM_MANAGED : WL_UVM_PAGEABLE;
	err = u->alloc(r->kind, r->w->tmpl.size, (void **)&r->mem);
	if (err)
		return err;
	demo_scene_clone(&r->sc, &r->w->tmpl, r->mem);
	/* the hierarchy and the rays read-mostly; the hit records as they are */
	err = u->prepare(r->kind, r->mem, r->sc.size, r->sc.off_hits, msg, sizeof(msg));
	snprintf(r->res->note, sizeof(r->res->note), "%s%s%s", r->w->uvm_device,
		 msg[0] ? "; " : "", msg);
	return err;
}

static int uvm_dispatch(struct wl_run *r, uint32_t k, uint32_t first, double *ret_gpu)
{
	uint64_t b = (uint64_t)(uintptr_t)r->mem;
	struct wl_uvm_launch l = {
		.nodes = b + r->sc.off_nodes, .prims = b + r->sc.off_prims,
		.rays = b + r->sc.off_rays, .hits = b + r->sc.off_hits,
		.first_ray = first, .nr_rays = r->w->rays,
	};
	int err;

	err = r->w->uvm->launch(&l);
	if (err)
		return err;
	guest_go(r, k, first);
	return r->w->uvm->wait(ret_gpu);
}

static void uvm_teardown(struct wl_run *r)
{
	if (r->mem)
		r->w->uvm->free(r->kind, r->mem, r->sc.size);
}

struct wl_mode_ops {
	int (*setup)(struct wl_run *r);
	int (*dispatch)(struct wl_run *r, uint32_t k, uint32_t first, double *ret_gpu_ms);
	void (*teardown)(struct wl_run *r);
};

static const struct wl_mode_ops mode_ops[M_NR] = {
	[M_IDEAL] = { ideal_setup, ideal_dispatch, ideal_teardown },
	[M_ZERO_COPY] = { engine_setup, engine_dispatch, engine_teardown },
	[M_BUFFER_CACHE] = { bc_setup, bc_dispatch, bc_teardown },
	[M_HMIRROR] = { engine_setup, engine_dispatch, engine_teardown },
	[M_HMIRROR_DAEMON] = { daemon_setup, daemon_dispatch, daemon_teardown },
	[M_HMIRROR_HELPER] = { engine_setup, engine_dispatch, engine_teardown },
	[M_HMIRROR_BOUNDARY] = { engine_setup, engine_dispatch, engine_teardown },
	[M_HMIRROR_EARLY] = { engine_setup, engine_dispatch, engine_teardown },
	[M_UVM] = { uvm_setup, uvm_dispatch, uvm_teardown },
	[M_UVM_HMM] = { uvm_setup, uvm_dispatch, uvm_teardown },
};

static void summarize(struct wl *w, struct wl_result *res)
{
	uint32_t n = res->done, q = n / 4;
	double sum = 0;

	for (uint32_t i = 0; i < n; i++)
		sum += res->t_ms[i];
	res->rays_s = sum > 0 ? (double)n * w->rays / (sum * 1e-3) : 0;
	res->med = quantile(res->t_ms, n, 0.5);
	res->p99 = quantile(res->t_ms, n, 0.99);
	res->gpu_med = quantile(res->gpu_ms, n, 0.5);
	if (res->pf_ms && n > 1)
		res->pf_med = quantile(res->pf_ms, n - 1 < w->dispatches - 1 ? n - 1 : w->dispatches - 1,
				       0.5);
	for (int i = 0; i < 4; i++)
		res->q[i] = q ? quantile(res->t_ms + i * q, i == 3 ? n - 3 * q : q, 0.5) : res->med;
	memset(&res->sum, 0, sizeof(res->sum));
	if (!res->tl)
		return;
	for (uint32_t i = 0; i < n; i++) {
		struct wl_tl *t = &res->tl[i], *s = &res->sum;

#define A(f) s->f += t->f
		A(harvested); A(uploads); A(discarded); A(dropped); A(refreshed); A(evicted);
		A(backoffs); A(refusals); A(marks); A(copied); A(bytes_up); A(bytes_home);
		A(ns_harvest); A(ns_upload); A(ns_upload_copy); A(ns_dispatch); A(ns_gpu);
		A(ns_marks); A(ns_copy_back); A(ns_up_select); A(ns_up_gens); A(ns_up_publish);
		A(ns_win_sync); A(ns_up_check); A(retries); A(win_binds); A(win_fills);
		A(win_copies); A(ahead_up); A(ahead_disc); A(ns_ahead); A(ns_ahead_wait);
		A(ns_ahead_harvest); A(ns_ahead_copy); A(ns_ahead_check); A(ns_ahead_select);
		A(ns_ahead_gens); A(ns_ahead_publish); A(ns_ahead_finish); A(ns_win_plan);
		A(ns_win_record);
#undef A
		s->mirrored = t->mirrored;
	}
	res->bytes_up = res->sum.bytes_up;
	res->bytes_down = res->sum.bytes_home;
	res->track_ms = (double)res->sum.ns_harvest * 1e-6;
}

static int run_mode(struct wl *w, enum wl_mode m, unsigned round, struct wl_result *res)
{
	const struct wl_mode_ops *ops = &mode_ops[m];
	struct wl_run r = { .w = w, .res = res };
	int err;

	memset(res, 0, sizeof(*res));
	res->mode = m;
	res->round = round;
	res->t_ms = calloc(w->dispatches, sizeof(double));
	res->gpu_ms = calloc(w->dispatches, sizeof(double));
	if (m == M_ZERO_COPY || m == M_HMIRROR || m == M_HMIRROR_DAEMON || m == M_HMIRROR_HELPER ||
	    m == M_HMIRROR_BOUNDARY || m == M_HMIRROR_EARLY) {
		res->tl = calloc(w->dispatches, sizeof(*res->tl));
		if (w->prefetch_each && m != M_ZERO_COPY &&
		    !(res->pf_ms = calloc(w->dispatches, sizeof(double))))
			return -ENOMEM;
	}
	if (!res->t_ms || !res->gpu_ms || (m != M_IDEAL && m != M_BUFFER_CACHE &&
					   m != M_UVM && m != M_UVM_HMM && !res->tl))
		return -ENOMEM;
	r.sc = w->tmpl;
	err = ops->setup(&r);
	if (err) {
		snprintf(res->note + strlen(res->note), sizeof(res->note) - strlen(res->note),
			 "%ssetup: %s", res->note[0] ? "; " : "", strerror(-err));
		goto out;
	}
	r.g.mods = w->mods;
	r.g.write_every = w->write_every;
	r.g.scratch_max = w->scratch_max;
	r.g.constant = w->constant;
	err = demo_guest_init(&r.g, &r.sc);
	if (err)
		goto out;
	res->ran = true;
	for (uint32_t k = 0; k < w->dispatches; k++) {
		uint32_t first = k * w->rays;
		uint64_t t0;

		if (k)
			demo_guest_modify(&r.g);
		t0 = bench_clock_ns();
		err = ops->dispatch(&r, k, first, &res->gpu_ms[k]);
		res->t_ms[k] = (double)(bench_clock_ns() - t0) * 1e-6;
		demo_guest_during_wait(&r.g);
		if (!err && w->prefetch_each && res->pf_ms && k + 1 < w->dispatches) {
			/* what the next dispatch would upload, once the guest's
			 * writes of this one are done, apart from its timing:
			 * what an upload during the walk could take off the
			 * next dispatch's critical path */
			t0 = bench_clock_ns();
			err = r.cl ? hm_client_prefetch(r.cl) : hm_engine_prefetch(r.e);
			res->pf_ms[k] = (double)(bench_clock_ns() - t0) * 1e-6;
			err = err < 0 ? err : 0;
		}
		if (err) {
			snprintf(res->note + strlen(res->note),
				 sizeof(res->note) - strlen(res->note), "%sdispatch %u: %s",
				 res->note[0] ? "; " : "", k + 1, strerror(-err));
			break;
		}
		demo_check_hits(&r.sc, w->want + (size_t)k * w->rays, first, w->rays, k + 1,
				&res->mismatches, &res->lost, NULL, mode_name[m]);
		res->done++;
	}
out:
	if (r.g.sc) {
		/* the constant writer stops first: then every word is final */
		demo_guest_stop_constant(&r.g);
		if (res->done)
			res->lost += demo_check_scratch(&r.g);
		demo_guest_fini(&r.g);
	}
	ops->teardown(&r);
	summarize(w, res);
	return err;
}

/* ---- the reference, once ------------------------------------------------------ */

static int reference(struct wl *w)
{
	struct demo_scene sc;
	struct demo_guest g = { 0 };
	struct demo_refpool rp;
	uint8_t *mem = map_anon(w->tmpl.size);
	long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
	double t0 = demo_now_s();
	int err;

	w->want = malloc((size_t)w->dispatches * w->rays * sizeof(*w->want));
	if (!mem || !w->want)
		return -ENOMEM;
	demo_scene_clone(&sc, &w->tmpl, mem);
	g.mods = w->mods;
	/* the moves alone (this guest's thread never writes during) */
	err = demo_guest_init(&g, &sc);
	if (!err)
		err = demo_ref_init(&rp, &sc, w->threads ? w->threads : (unsigned)(ncpu > 0 ? ncpu : 1),
				    0);
	if (err)
		return err;
	for (uint32_t k = 0; k < w->dispatches; k++) {
		if (k)
			demo_guest_modify(&g);
		demo_ref_start(&rp, &sc, k * w->rays, w->rays, w->want + (size_t)k * w->rays);
		demo_ref_wait(&rp);
	}
	demo_ref_fini(&rp);
	demo_guest_fini(&g);
	munmap(mem, w->tmpl.size);
	w->t_ref = demo_now_s() - t0;
	return 0;
}

/*
 * The device idles while the scene and its reference are built (~25 s at
 * 1 GiB) and a GPU then clocks down: the first mode's first dispatches ran
 * up to 6x slower (H200: the walk 37 ms, then 24, 13.5, 6.5).  So the walk
 * runs on a device-local copy of the scene for WARM_S seconds first.
 */
#define WARM_S 2.0

static void warm_up(struct wl *w)
{
	struct wl_result res = { .mode = M_IDEAL };
	struct wl_run r = { .w = w, .res = &res, .sc = w->tmpl };
	double t0 = demo_now_s(), gpu;
	unsigned n = 0;

	if (ideal_setup(&r) == 0) {
		while (demo_now_s() - t0 < WARM_S) {
			VkCommandBuffer cb;

			if (hm_vk_cmd_start(w->vk, &r.cmd, &cb))
				break;
			record_walk(&r, cb, (n % w->dispatches) * w->rays);
			if (hm_vk_cmd_run(w->vk, &r.cmd, 0) || gpu_time(&r, &gpu))
				break;
			n++;
		}
	}
	ideal_teardown(&r);
	fprintf(stderr, "workload: warm-up: %u walks in %.1f s\n", n, demo_now_s() - t0);
}

/* ---- output ------------------------------------------------------------------ */

static void print_json(const struct wl *w, const struct wl_result *res)
{
	const struct wl_tl *s = &res->sum;
	double n = res->done ? res->done : 1;

	printf("{\"bench\":\"workload\",\"mode\":\"%s\",\"round\":%u,\"ran\":%s,"
	       "\"device\":\"%s\",\"note\":\"%s\",\"size_mib\":%" PRIu64 ",\"scene_bytes\":%" PRIu64
	       ",\"rays\":%u,\"dispatches\":%u,\"done\":%u,\"mods\":%u,\"write_every\":%u,"
	       "\"chunk_shift\":%u,\"watch_shift\":%u,\"hits_advice\":%u,\"constant_writer\":%s,\"rays_per_s\":%.0f,\"median_ms\":%.3f,\"p99_ms\":%.3f,"
	       "\"quarter_ms\":[%.3f,%.3f,%.3f,%.3f],\"gpu_median_ms\":%.3f,"
	       "\"bytes_up\":%" PRIu64 ",\"bytes_down\":%" PRIu64 ",\"cpu_track_ms\":%.3f,"
	       "\"writer_stall_ms\":%.3f,\"trips\":%" PRIu64 ",\"mismatches\":%" PRIu64
	       ",\"lost_writes\":%" PRIu64 ",\"populate_ms\":%.3f,\"prefetch\":%s"
	       ",\"prefetch_each_ms\":%.3f",
	       mode_name[res->mode], res->round, res->ran ? "true" : "false",
	       res->mode == M_UVM || res->mode == M_UVM_HMM ? w->uvm_device : w->device,
	       res->note, w->size_mib, w->tmpl.size, w->rays, w->dispatches, res->done, w->mods,
	       w->write_every, w->chunk_shift, w->watch_shift, w->hits_advice, w->constant ? "true" : "false", res->rays_s, res->med, res->p99,
	       res->q[0], res->q[1], res->q[2], res->q[3], res->gpu_med, res->bytes_up,
	       res->bytes_down, res->track_ms, res->stall_ms, res->trips, res->mismatches,
	       res->lost, res->populate_ms, w->no_prefetch ? "false" : "true", res->pf_med);
	if (res->tl)
		printf(",\"engine\":{\"harvested\":%" PRIu64 ",\"uploads\":%" PRIu64
		       ",\"uploads_discarded\":%" PRIu64 ",\"mirrors_dropped\":%" PRIu64
		       ",\"mirrors_refreshed\":%" PRIu64 ",\"mirrors_evicted\":%" PRIu64
		       ",\"thrash_backoffs\":%" PRIu64 ",\"budget_refusals\":%" PRIu64
		       ",\"marks_scanned\":%" PRIu64 ",\"chunks_copied_home\":%" PRIu64
		       ",\"chunks_mirrored_end\":%" PRIu64 ",\"ms_per_dispatch\":{\"harvest\":%.3f,"
		       "\"upload\":%.3f,\"upload_copy\":%.3f,\"dispatch\":%.3f,\"dispatch_gpu\":%.3f,"
		       "\"marks\":%.3f,\"copy_back\":%.3f,\"upload_select\":%.3f,"
		       "\"upload_gens\":%.3f,\"upload_check\":%.3f,"
		       "\"upload_publish\":%.3f,\"window_sync\":%.3f,\"ahead\":%.3f,"
		       "\"ahead_wait\":%.3f,\"ahead_harvest\":%.3f,\"ahead_copy\":%.3f,"
		       "\"ahead_check\":%.3f,\"ahead_select\":%.3f,\"ahead_gens\":%.3f,"
		       "\"ahead_publish\":%.3f,\"ahead_finish\":%.3f,\"ahead_rest\":%.3f,"
		       "\"window_plan\":%.3f,\"window_record\":%.3f},"
		       "\"upload_retries\":%" PRIu64
		       ",\"window_binds\":%" PRIu64 ",\"window_fills\":%" PRIu64
		       ",\"window_copies\":%" PRIu64 ",\"ahead_uploads\":%" PRIu64
		       ",\"ahead_discarded\":%" PRIu64 "}",
		       s->harvested, s->uploads, s->discarded, s->dropped, s->refreshed, s->evicted,
		       s->backoffs, s->refusals, s->marks, s->copied, s->mirrored,
		       s->ns_harvest * 1e-6 / n, s->ns_upload * 1e-6 / n, s->ns_upload_copy * 1e-6 / n,
		       s->ns_dispatch * 1e-6 / n, s->ns_gpu * 1e-6 / n, s->ns_marks * 1e-6 / n,
		       s->ns_copy_back * 1e-6 / n, s->ns_up_select * 1e-6 / n,
		       s->ns_up_gens * 1e-6 / n, s->ns_up_check * 1e-6 / n,
		       s->ns_up_publish * 1e-6 / n,
		       s->ns_win_sync * 1e-6 / n, s->ns_ahead * 1e-6 / n, s->ns_ahead_wait * 1e-6 / n,
		       s->ns_ahead_harvest * 1e-6 / n, s->ns_ahead_copy * 1e-6 / n,
		       s->ns_ahead_check * 1e-6 / n, s->ns_ahead_select * 1e-6 / n,
		       s->ns_ahead_gens * 1e-6 / n, s->ns_ahead_publish * 1e-6 / n,
		       s->ns_ahead_finish * 1e-6 / n,
		       /* the pass's untimed rest (ahead_gens holds its checks):
			* its candidates' pending compare, its buffers */
		       (double)(s->ns_ahead - s->ns_ahead_harvest - s->ns_ahead_copy -
				s->ns_ahead_select - s->ns_ahead_gens - s->ns_ahead_publish -
				s->ns_ahead_finish) * 1e-6 / n,
		       s->ns_win_plan * 1e-6 / n, s->ns_win_record * 1e-6 / n, s->retries, s->win_binds,
		       s->win_fills, s->win_copies, s->ahead_up, s->ahead_disc);
	printf(",\"t_ms\":[");
	for (uint32_t i = 0; i < res->done; i++)
		printf("%s%.3f", i ? "," : "", res->t_ms[i]);
	printf("],\"gpu_ms\":[");
	for (uint32_t i = 0; i < res->done; i++)
		printf("%s%.3f", i ? "," : "", res->gpu_ms[i]);
	printf("]");
	if (res->tl && w->timeline) {
		/* one array per counter, one entry per dispatch */
#define TL(name, f, scale) do { \
		printf(",\"tl_%s\":[", name); \
		for (uint32_t i = 0; i < res->done; i++) \
			printf(scale == 1 ? "%s%.0f" : "%s%.3f", i ? "," : "", \
			       (double)res->tl[i].f * scale); \
		printf("]"); \
	} while (0)
		TL("harvested", harvested, 1); TL("uploads", uploads, 1);
		TL("discarded", discarded, 1); TL("dropped", dropped, 1);
		TL("refreshed", refreshed, 1); TL("evicted", evicted, 1);
		TL("backoffs", backoffs, 1); TL("mirrored", mirrored, 1);
		TL("marks", marks, 1); TL("copied", copied, 1);
		TL("harvest_ms", ns_harvest, 1e-6); TL("upload_ms", ns_upload, 1e-6);
		TL("gpu_ms", ns_gpu, 1e-6); TL("copy_back_ms", ns_copy_back, 1e-6);
		TL("ahead_uploads", ahead_up, 1); TL("ahead_ms", ns_ahead, 1e-6);
		TL("ahead_discarded", ahead_disc, 1); TL("retries", retries, 1);
		TL("check_ms", ns_up_check, 1e-6); TL("win_sync_ms", ns_win_sync, 1e-6);
		TL("up_copy_ms", ns_upload_copy, 1e-6);
		TL("ahead_wait_ms", ns_ahead_wait, 1e-6);
		TL("ahead_harvest_ms", ns_ahead_harvest, 1e-6);
		TL("ahead_copy_ms", ns_ahead_copy, 1e-6);
		TL("ahead_check_ms", ns_ahead_check, 1e-6);
		TL("ahead_select_ms", ns_ahead_select, 1e-6);
		TL("ahead_gens_ms", ns_ahead_gens, 1e-6);
		TL("ahead_publish_ms", ns_ahead_publish, 1e-6);
		TL("ahead_finish_ms", ns_ahead_finish, 1e-6);
		TL("win_plan_ms", ns_win_plan, 1e-6);
		TL("win_record_ms", ns_win_record, 1e-6);
#undef TL
	}
	printf("}\n");
	fflush(stdout);
}

static void print_text_timeline(const struct wl_result *res)
{
	fprintf(stderr, "  %-3s %9s %8s %8s %6s %6s %6s %6s %6s %7s %8s %8s %8s %8s\n", "#",
		"ms", "harvest", "uploads", "disc", "drop", "refr", "evict", "backof",
		"mirror", "up_ms", "gpu_ms", "marks", "back_ms");
	for (uint32_t i = 0; i < res->done; i++) {
		const struct wl_tl *t = &res->tl[i];

		fprintf(stderr, "  %-3u %9.2f %8" PRIu64 " %8" PRIu64 " %6" PRIu64 " %6" PRIu64
			" %6" PRIu64 " %6" PRIu64 " %6" PRIu64 " %7" PRIu64 " %8.2f %8.2f %8" PRIu64
			" %8.2f\n", i + 1, res->t_ms[i], t->harvested, t->uploads, t->discarded,
			t->dropped, t->refreshed, t->evicted, t->backoffs, t->mirrored,
			t->ns_upload * 1e-6, t->ns_gpu * 1e-6, t->marks, t->ns_copy_back * 1e-6);
	}
}

static void print_text(const struct wl *w, const struct wl_result *res)
{
	char pf[48] = "";

	if (!res->ran) {
		fprintf(stderr, "workload: %-14s round %u: not run (%s)\n", mode_name[res->mode],
			res->round, res->note);
		return;
	}
	if (res->pf_ms)
		snprintf(pf, sizeof(pf), "  prefetch-each %.2f ms", res->pf_med);
	fprintf(stderr, "workload: %-14s round %u: %10.0f rays/s  median %8.2f ms  p99 %8.2f  "
		"quarters %.2f %.2f %.2f %.2f  gpu %.2f  up %.1f MiB  down %.1f MiB  "
		"track %.1f ms  populate %.1f ms%s  mismatches %" PRIu64 " lost %" PRIu64 "%s%s\n",
		mode_name[res->mode], res->round, res->rays_s, res->med, res->p99, res->q[0],
		res->q[1], res->q[2], res->q[3], res->gpu_med, res->bytes_up / 1048576.0,
		res->bytes_down / 1048576.0, res->track_ms, res->populate_ms, pf, res->mismatches,
		res->lost, res->note[0] ? "  " : "", res->note);
	if (res->tl && w->timeline)
		print_text_timeline(res);
}

/* median over rounds of a mode's figure */
static double over_rounds(const struct wl *w, struct wl_result *all, enum wl_mode m,
			  double (*get)(const struct wl_result *))
{
	double v[64];
	unsigned n = 0;

	for (unsigned r = 0; r < w->rounds && n < 64; r++) {
		const struct wl_result *x = &all[r * M_NR + m];

		if (x->ran && x->done == w->dispatches)
			v[n++] = get(x);
	}
	return n ? quantile(v, n, 0.5) : 0;
}

static double get_rays(const struct wl_result *x) { return x->rays_s; }
static double get_decay(const struct wl_result *x) { return x->q[1] > 0 ? x->q[3] / x->q[1] : 0; }

static void plot(const struct wl *w, struct wl_result *all)
{
	char dat[PATH_MAX], cmd[8192];
	size_t len = 0;
	FILE *f;

	snprintf(dat, sizeof(dat), "%s.dat", w->plot);
	f = fopen(dat, "w");
	if (!f)
		return;
	/* per dispatch: each mode's median over rounds */
	fprintf(f, "#dispatch");
	for (int m = 0; m < M_NR; m++)
		if (w->modes[m])
			fprintf(f, " %s", mode_name[m]);
	fprintf(f, "\n");
	for (uint32_t k = 0; k < w->dispatches; k++) {
		fprintf(f, "%u", k + 1);
		for (int m = 0; m < M_NR; m++) {
			double v[64];
			unsigned n = 0;

			if (!w->modes[m])
				continue;
			for (unsigned r = 0; r < w->rounds && n < 64; r++)
				if (all[r * M_NR + m].done > k)
					v[n++] = all[r * M_NR + m].t_ms[k];
			if (n)
				fprintf(f, " %.3f", quantile(v, n, 0.5));
			else
				fprintf(f, " NaN");
		}
		fprintf(f, "\n");
	}
	fclose(f);
	len = (size_t)snprintf(cmd, sizeof(cmd),
		"gnuplot -e \"set terminal png size 1000,560; set output '%s'; "
		"set xlabel 'dispatch'; set ylabel 'ms a dispatch (median of %u rounds)'; "
		"set logscale y; set key outside right; set grid; "
		"set title 'hmirror-bench workload: %s, %" PRIu64 " MiB, %u rays a dispatch'; plot ",
		w->plot, w->rounds, w->device, w->size_mib, w->rays);
	for (int m = 0, col = 2; m < M_NR; m++) {
		if (!w->modes[m])
			continue;
		len += (size_t)snprintf(cmd + len, sizeof(cmd) - len,
					"%s'%s' using 1:%d with linespoints title '%s'",
					col > 2 ? ", " : "", dat, col, mode_name[m]);
		col++;
	}
	snprintf(cmd + len, sizeof(cmd) - len, "\"");
	if (system(cmd) != 0)
		fprintf(stderr, "workload: gnuplot failed; data in %s\n", dat);
	else
		fprintf(stderr, "workload: plot in %s\n", w->plot);
}

/* ---- setup ------------------------------------------------------------------- */

static void uvm_load(struct wl *w)
{
	const char *env = getenv("HMIRROR_BENCH_UVM");
	char path[PATH_MAX];
	const struct wl_uvm_ops *(*get)(void);
	void *h;
	ssize_t n;

	if (env) {
		snprintf(path, sizeof(path), "%s", env);
	} else {
		n = readlink("/proc/self/exe", path, sizeof(path) - 32);
		if (n < 0) {
			snprintf(w->uvm_why, sizeof(w->uvm_why), "no /proc/self/exe");
			return;
		}
		path[n] = 0;
		strcpy(strrchr(path, '/') + 1, "hmirror-bench-uvm.so");
	}
	h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
	if (!h) {
		snprintf(w->uvm_why, sizeof(w->uvm_why), "%s", dlerror());
		return;
	}
	get = (const struct wl_uvm_ops *(*)(void))dlsym(h, "hm_bench_uvm_ops");
	if (!get || !get() || get()->version != WL_UVM_VERSION) {
		snprintf(w->uvm_why, sizeof(w->uvm_why), "%.200s: not a version %u plugin", path,
			 WL_UVM_VERSION);
		return;
	}
	if (get()->open(w->uvm_why, sizeof(w->uvm_why), &w->uvm_pageable, w->uvm_device,
			sizeof(w->uvm_device)))
		return;
	w->uvm = get();
}

static int parse_modes(struct wl *w, const char *list)
{
	char buf[256], *save = NULL;

	memset(w->modes, 0, sizeof(w->modes));
	snprintf(buf, sizeof(buf), "%s", list);
	for (char *t = strtok_r(buf, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
		int m;

		if (!strcmp(t, "all")) {
			for (m = 0; m < M_NR; m++)
				w->modes[m] = true;
			continue;
		}
		for (m = 0; m < M_NR; m++)
			if (!strcmp(t, mode_name[m]))
				break;
		if (m == M_NR) {
			fprintf(stderr, "workload: unknown mode '%s'\n", t);
			return -EINVAL;
		}
		w->modes[m] = true;
	}
	return 0;
}

static void usage(FILE *f)
{
	fprintf(f, "usage: hmirror-bench workload [--modes LIST|all] [--rounds R] [--size MIB]\n"
		"       [--rays N] [--dispatches N] [--mods N] [--write-every K] [--scratch-max N]\n"
		"       [--constant] [--backend NAME] [--socket PATH] [--threads N]\n"
		"       [--plot FILE.png] [--timeline] [--chunk-shift S] [--twin-mode M]\n"
		"       [--no-prefetch] [--json]\n"
		"modes: ideal zero-copy buffer-cache hmirror hmirror-daemon hmirror-helper\n"
		"       hmirror-boundary hmirror-early uvm uvm-hmm\n"
		"  (hmirror, hmirror-daemon: loads at the mirror window, two tiers;\n"
		"  hmirror-helper and zero-copy: every load through the helper;\n"
		"  hmirror-boundary: hmirror with every upload at the dispatch boundary,\n"
		"  none beside the dispatch; hmirror-early: hmirror with the uploads beside\n"
		"  the dispatch started at once, not as late as the last walk allows)\n"
		"  (default all; the CUDA ones where hmirror-bench-uvm.so loads)\n"
		"  --size MIB       hierarchy (default 1024 on a GPU, 16 on a CPU device)\n"
		"  --rays N         a dispatch (default 1 Mi on a GPU, 8192 on a CPU device)\n"
		"  --dispatches N   (default 24 on a GPU, 8 on a CPU device)\n"
		"  --mods N         primitives moved between dispatches (default 256)\n"
		"  --write-every K  a scratch pair every K rays during a dispatch (16; 0 none)\n"
		"  --scratch-max N  scratch pairs a dispatch at most (4096)\n"
		"  --constant       a writer thread that never stops (pad words)\n"
		"  --chunk-shift S  the in-process engines' chunk (default the engine's)\n"
		"  --hits-advice A  the hit records' advice (0, none: the engine decides)\n"
		"  --watch-shift S  the guest space's watch unit (12, pages; 16 = the chunk)\n"
		"  --twin-mode M    the in-process engines' upload form: auto, shader, copy,\n"
		"                   gather (default auto: gather on a GPU, copy on a CPU device)\n"
		"  --no-prefetch    the engine modes' first dispatch uploads the hierarchy\n"
		"                   (default: hm_engine_prefetch() / hm_client_prefetch() first,\n"
		"                   as the other modes fill device memory before theirs)\n"
		"  --prefetch-each  engine modes: a prefetch after each dispatch once the guest's\n"
		"                   writes of it are done, timed apart (prefetch_each_ms): what\n"
		"                   an upload during the walk would leave the next dispatch\n"
		"Exit status 1 when any mode that ran mismatched, lost a write or failed.\n");
}

/* enum hm_twin_mode's values, by name */
static const char *const twin_mode_name[4] = { "auto", "shader", "copy", "gather" };

int bench_workload(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "modes", required_argument, NULL, 'M' },
		{ "rounds", required_argument, NULL, 'R' },
		{ "size", required_argument, NULL, 'm' },
		{ "rays", required_argument, NULL, 'r' },
		{ "dispatches", required_argument, NULL, 'd' },
		{ "mods", required_argument, NULL, 'k' },
		{ "write-every", required_argument, NULL, 'e' },
		{ "scratch-max", required_argument, NULL, 'x' },
		{ "constant", no_argument, NULL, 'c' },
		{ "backend", required_argument, NULL, 'b' },
		{ "socket", required_argument, NULL, 's' },
		{ "threads", required_argument, NULL, 't' },
		{ "plot", required_argument, NULL, 'p' },
		{ "timeline", no_argument, NULL, 'T' },
		{ "chunk-shift", required_argument, NULL, 'C' },
		{ "hits-advice", required_argument, NULL, 'H' },
		{ "watch-shift", required_argument, NULL, 'W' },
		{ "twin-mode", required_argument, NULL, 'G' },
		{ "no-prefetch", no_argument, NULL, 'P' },
		{ "prefetch-each", no_argument, NULL, 'E' },
		{ "json", no_argument, NULL, 'j' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	struct wl w = { .mods = 256, .write_every = DEMO_WRITE_EVERY,
			.hits_advice = HM_ADVICE_DEFAULT, .watch_shift = 12,
			.scratch_max = DEMO_SCRATCH_MAX, .rounds = 3 };
	struct hm_vk_params vp = { .validation = -1 };
	const char *modes = "all";
	struct wl_result *all;
	bool cpu_dev, bad = false;
	int c, err;

	optind = 1;
	while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
		switch (c) {
		case 'M': modes = optarg; break;
		case 'R': w.rounds = (uint32_t)strtoul(optarg, NULL, 0); break;
		case 'm': w.size_mib = strtoull(optarg, NULL, 0); break;
		case 'r': w.rays = (uint32_t)strtoul(optarg, NULL, 0); break;
		case 'd': w.dispatches = (uint32_t)strtoul(optarg, NULL, 0); break;
		case 'k': w.mods = (uint32_t)strtoul(optarg, NULL, 0); break;
		case 'e': w.write_every = (uint32_t)strtoul(optarg, NULL, 0); break;
		case 'x': w.scratch_max = (uint32_t)strtoul(optarg, NULL, 0); break;
		case 'c': w.constant = true; break;
		case 'b': w.backend = optarg; break;
		case 's': w.socket = optarg; break;
		case 't': w.threads = (uint32_t)strtoul(optarg, NULL, 0); break;
		case 'p': w.plot = optarg; break;
		case 'T': w.timeline = true; break;
		case 'C': w.chunk_shift = (uint32_t)strtoul(optarg, NULL, 0); break;
		case 'H': w.hits_advice = (uint32_t)strtoul(optarg, NULL, 0); break;
		case 'W': w.watch_shift = (uint32_t)strtoul(optarg, NULL, 0); break;
		case 'G':
			for (w.twin_mode = 0; w.twin_mode < 4; w.twin_mode++)
				if (!strcmp(optarg, twin_mode_name[w.twin_mode]))
					break;
			if (w.twin_mode == 4) {
				usage(stderr);
				return 2;
			}
			break;
		case 'P': w.no_prefetch = true; break;
		case 'E': w.prefetch_each = true; break;
		case 'j': w.json = true; break;
		case 'h': usage(stdout); return 0;
		default: usage(stderr); return 2;
		}
	}
	if (parse_modes(&w, modes) || !w.rounds || w.rounds > 64)
		return 2;
	err = hm_vk_new(&vp, &w.vk);
	if (err) {
		fprintf(stderr, "workload: no Vulkan device: %s\n", strerror(-err));
		return 1;
	}
	snprintf(w.device, sizeof(w.device), "%s", w.vk->props.deviceName);
	cpu_dev = w.vk->props.deviceType == VK_PHYSICAL_DEVICE_TYPE_CPU;
	if (!w.size_mib)
		w.size_mib = cpu_dev ? 16 : 1024;
	if (!w.rays)
		w.rays = cpu_dev ? 8192 : 1u << 20;
	if (!w.dispatches)
		w.dispatches = cpu_dev ? 8 : 24;
	if (w.size_mib < 1 || w.dispatches < 1 || (uint64_t)w.rays * w.dispatches > UINT32_MAX / 2)
		return 2;
	err = hm_vk_pipeline_new(w.vk, hm_demo_traverse_raw_spv,
				 sizeof(hm_demo_traverse_raw_spv) / 4, "main",
				 4 * (HM_DEVICE_TABLE_PUSH_WORDS + DEMO_USER_PUSH), &w.raw);
	if (err) {
		fprintf(stderr, "workload: raw pipeline: %s\n", strerror(-err));
		return 1;
	}
	if (w.modes[M_UVM] || w.modes[M_UVM_HMM])
		uvm_load(&w);
	if (w.modes[M_HMIRROR_DAEMON]) {
		struct hm_client *cl;

		if (w.socket && !hm_client_connect(w.socket, &cl)) {
			hm_client_free(cl);
			snprintf(w.daemon_sock, sizeof(w.daemon_sock), "%s", w.socket);
		} else {
			snprintf(w.daemon_sock, sizeof(w.daemon_sock),
				 "/tmp/hmirror-workload.%d.sock", (int)getpid());
			w.daemon = bench_spawn_daemon(w.daemon_sock);
			if (w.daemon <= 0) {
				fprintf(stderr, "workload: could not start hmirrord\n");
				return 1;
			}
		}
	}

	/* the scene, and the reference hits of every dispatch */
	demo_scene_layout(&w.tmpl, w.size_mib, (uint64_t)w.rays * w.dispatches);
	{
		uint8_t *mem = map_anon(w.tmpl.size);
		double t0 = demo_now_s();

		if (!mem || demo_scene_build(&w.tmpl, mem))
			return 1;
		w.t_build = demo_now_s() - t0;
	}
	err = reference(&w);
	if (err) {
		fprintf(stderr, "workload: reference: %s\n", strerror(-err));
		return 1;
	}
	fprintf(stderr, "workload: %s; scene %.1f MiB (%u nodes, %u primitives), %u rays x %u "
		"dispatches, %u rounds; built in %.2f s, reference in %.2f s\n", w.device,
		w.tmpl.size / 1048576.0, w.tmpl.nr_nodes, w.tmpl.nr_prims, w.rays, w.dispatches,
		w.rounds, w.t_build, w.t_ref);

	warm_up(&w);
	all = calloc((size_t)w.rounds * M_NR, sizeof(*all));
	if (!all)
		return 1;
	for (unsigned r = 0; r < w.rounds; r++) {
		for (int m = 0; m < M_NR; m++) {
			struct wl_result *res = &all[r * M_NR + m];

			if (!w.modes[m])
				continue;
			if ((m == M_UVM || m == M_UVM_HMM) &&
			    (!w.uvm || (m == M_UVM_HMM && !w.uvm_pageable))) {
				memset(res, 0, sizeof(*res));
				res->mode = m;
				res->round = r + 1;
				snprintf(res->note, sizeof(res->note), "%s",
					 !w.uvm ? w.uvm_why : "no pageable memory access");
			} else {
				err = run_mode(&w, m, r + 1, res);
				if (err || res->done < w.dispatches || res->mismatches || res->lost)
					bad = true;
			}
			print_text(&w, res);
			if (w.json)
				print_json(&w, res);
		}
	}

	/* the summary: medians over rounds and the ratios the targets name */
	{
		double rs[M_NR], dec[M_NR];

		for (int m = 0; m < M_NR; m++) {
			rs[m] = w.modes[m] ? over_rounds(&w, all, m, get_rays) : 0;
			dec[m] = w.modes[m] ? over_rounds(&w, all, m, get_decay) : 0;
		}
#define RATIO(a, b) (rs[b] > 0 ? rs[a] / rs[b] : 0)
		fprintf(stderr, "workload: median rays/s over %u rounds:", w.rounds);
		for (int m = 0; m < M_NR; m++)
			if (rs[m] > 0)
				fprintf(stderr, " %s %.0f (q4/q2 %.2f)", mode_name[m], rs[m], dec[m]);
		fprintf(stderr, "\nworkload: hmirror/ideal %.2f, hmirror/buffer-cache %.2f, "
			"hmirror/uvm %.2f, hmirror-daemon/ideal %.2f, hmirror/hmirror-helper %.2f, "
			"hmirror/hmirror-boundary %.2f, hmirror/hmirror-early %.2f\n",
			RATIO(M_HMIRROR, M_IDEAL), RATIO(M_HMIRROR, M_BUFFER_CACHE),
			RATIO(M_HMIRROR, M_UVM), RATIO(M_HMIRROR_DAEMON, M_IDEAL),
			RATIO(M_HMIRROR, M_HMIRROR_HELPER), RATIO(M_HMIRROR, M_HMIRROR_BOUNDARY),
			RATIO(M_HMIRROR, M_HMIRROR_EARLY));
		if (w.vk->validation)
			fprintf(stderr, "workload: %u validation messages%s%s\n",
				hm_vk_validation_count(w.vk), hm_vk_validation_count(w.vk) ? ", last: " : "",
				hm_vk_validation_count(w.vk) ? w.vk->last_message : "");
		if (w.json) {
			printf("{\"bench\":\"workload\",\"summary\":true,\"device\":\"%s\","
			       "\"rounds\":%u,\"rays_per_s\":{", w.device, w.rounds);
			for (int m = 0, first = 1; m < M_NR; m++) {
				if (!w.modes[m])
					continue;
				printf("%s\"%s\":%.0f", first ? "" : ",", mode_name[m], rs[m]);
				first = 0;
			}
			printf("},\"q4_over_q2\":{");
			for (int m = 0, first = 1; m < M_NR; m++) {
				if (!w.modes[m])
					continue;
				printf("%s\"%s\":%.3f", first ? "" : ",", mode_name[m], dec[m]);
				first = 0;
			}
			printf("},\"hmirror_over_ideal\":%.3f,\"hmirror_over_buffer_cache\":%.3f,"
			       "\"hmirror_over_uvm\":%.3f,\"daemon_over_ideal\":%.3f,"
			       "\"hmirror_over_helper\":%.3f,\"hmirror_over_boundary\":%.3f,"
			       "\"hmirror_over_early\":%.3f,"
			       "\"validation_messages\":%u,\"all_verified\":%s}\n",
			       RATIO(M_HMIRROR, M_IDEAL), RATIO(M_HMIRROR, M_BUFFER_CACHE),
			       RATIO(M_HMIRROR, M_UVM), RATIO(M_HMIRROR_DAEMON, M_IDEAL),
			       RATIO(M_HMIRROR, M_HMIRROR_HELPER), RATIO(M_HMIRROR, M_HMIRROR_BOUNDARY),
			       RATIO(M_HMIRROR, M_HMIRROR_EARLY),
			       hm_vk_validation_count(w.vk), bad ? "false" : "true");
		}
#undef RATIO
	}
	if (w.plot)
		plot(&w, all);

	for (unsigned i = 0; i < w.rounds * M_NR; i++) {
		free(all[i].t_ms);
		free(all[i].gpu_ms);
		free(all[i].tl);
		free(all[i].pf_ms);
	}
	free(all);
	free(w.want);
	munmap(w.tmpl.base, w.tmpl.size);
	demo_scene_fini(&w.tmpl);
	if (w.uvm)
		w.uvm->close();
	if (w.daemon > 0) {
		kill(w.daemon, SIGTERM);
		waitpid(w.daemon, NULL, 0);
		unlink(w.daemon_sock);
	}
	hm_vk_pipeline_free(w.vk, &w.raw);
	hm_vk_free(w.vk);
	return bad ? 1 : 0;
}
