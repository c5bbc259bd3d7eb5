// SPDX-License-Identifier: GPL-2.0
/*
 * hmirror-bench dispatch [--rounds R] [--n N] [--socket PATH] [--json]
 *
 * The round trip of an empty dispatch (selftests/daemon/empty.comp: no
 * memory access, 2 user push words) through hmirrord -- client submit,
 * socket, device thread, engine, reply -- against the same dispatch
 * submitted in-process to an engine of our own on the same device kind,
 * in the same run: R rounds, each N dispatches of both, alternating.
 * Median and p99 of each and the median difference (what the daemon adds;
 * target < 30 us on lavapipe).
 *
 * Without --socket (or $HMIRROR_SOCKET answering), it starts the hmirrord
 * next to this program on a private socket for the run.
 *
 * Where the time goes (so that one run on a GPU says what to fix):
 *  - the engine's own phase statistics (hm_engine_stats() ns_*) over the
 *    in-process dispatches, per dispatch: harvest, upload, dispatch
 *    (submit + wait), the same on the GPU's timestamps, marks, copy back,
 *    and what the call costs outside them;
 *  - back to back: N through the daemon in a row, then N in-process in a
 *    row (alternating, the daemon's threads are always asleep when the
 *    next request comes: that figure includes two wake-ups);
 *  - plain Vulkan on the same device and pipeline: a one-shot command
 *    buffer and fence per submission (hm_vk_dispatch_sync(), as the
 *    engine did until 2026-12-01), one recorded command buffer and one
 *    fence reused with vkWaitForFences(), the same polling
 *    vkGetFenceStatus(), and hm_vk_cmd (the engine's submitter now: a
 *    command buffer and fence created once, re-recorded every time).
 */
#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <hmirror/client.h>
#include <hmirror/engine.h>
#include <hmirror/vkctx.h>

#include "daemon/empty.spv.h"
#include "common.h"

/* plain Vulkan: one recorded command buffer and fence, reused */
enum { RAW_ONESHOT, RAW_ONESHOT_TS, RAW_REUSE_WAIT, RAW_REUSE_SPIN, RAW_SUBMITTER, RAW_NR };
static const char *const raw_name[RAW_NR] = {
	"oneshot", "oneshot_ts", "reuse_wait", "reuse_spin", "submitter",
};

static int raw_vk(struct hm_vk *vk, unsigned n, double ret_med[RAW_NR], double *ret_gpu_us)
{
	double gpu_ns = 0;
	unsigned gpu_n = 0;
	struct hm_vk_pipeline p;
	VkCommandPool pool = VK_NULL_HANDLE;
	VkCommandBuffer cb = VK_NULL_HANDLE;
	VkFence fence = VK_NULL_HANDLE;
	VkQueryPool qp = VK_NULL_HANDLE;
	struct hm_vk_cmd sub = { 0 };
	uint32_t push[8] = { 0 };
	double *t = calloc(n, sizeof(double));
	int r;

	if (!t)
		return -ENOMEM;
	r = hm_vk_pipeline_new(vk, hm_test_empty_spv, sizeof(hm_test_empty_spv) / 4, "main",
			       sizeof(push), &p);
	if (r < 0) {
		free(t);
		return r;
	}
	VkCommandPoolCreateInfo pci = {
		.sType = VK_STRUCTURE_TYPE_COMMAND_POOL_CREATE_INFO,
		.queueFamilyIndex = vk->queue_family,
	};
	VkCommandBufferAllocateInfo ai = {
		.sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_ALLOCATE_INFO,
		.level = VK_COMMAND_BUFFER_LEVEL_PRIMARY, .commandBufferCount = 1,
	};
	VkCommandBufferBeginInfo bi = { .sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO };
	VkFenceCreateInfo fci = { .sType = VK_STRUCTURE_TYPE_FENCE_CREATE_INFO };

	r = -EIO;
	if (vkCreateCommandPool(vk->dev, &pci, NULL, &pool))
		goto out;
	ai.commandPool = pool;
	if (vkAllocateCommandBuffers(vk->dev, &ai, &cb) || vkBeginCommandBuffer(cb, &bi))
		goto out;
	hm_vk_cmd_dispatch(cb, &p, push, sizeof(push), 1, 1, 1);
	hm_vk_cmd_barrier(cb);
	if (vkEndCommandBuffer(cb) || vkCreateFence(vk->dev, &fci, NULL, &fence))
		goto out;
	VkQueryPoolCreateInfo qi = {
		.sType = VK_STRUCTURE_TYPE_QUERY_POOL_CREATE_INFO,
		.queryType = VK_QUERY_TYPE_TIMESTAMP, .queryCount = 2,
	};

	if (vk->timestamp_valid_bits && vkCreateQueryPool(vk->dev, &qi, NULL, &qp))
		qp = VK_NULL_HANDLE;
	VkSubmitInfo si = {
		.sType = VK_STRUCTURE_TYPE_SUBMIT_INFO, .commandBufferCount = 1, .pCommandBuffers = &cb,
	};

	for (int v = 0; v < RAW_NR; v++) {
		for (unsigned i = 0; i < n + 10; i++) {
			double t0 = bench_now_us();

			if (v == RAW_ONESHOT) {
				r = hm_vk_dispatch_sync(vk, &p, push, sizeof(push), 1, 1, 1);
				if (r < 0)
					goto out;
			} else if (v == RAW_SUBMITTER) {
				/* the engine's path: hm_vk_cmd, re-recorded each time */
				VkCommandBuffer c1;

				if (!sub.cb && (r = hm_vk_cmd_new(vk, &sub)) < 0)
					goto out;
				r = hm_vk_cmd_start(vk, &sub, &c1);
				if (r < 0)
					goto out;
				hm_vk_cmd_dispatch(c1, &p, push, sizeof(push), 1, 1, 1);
				hm_vk_cmd_barrier(c1);
				r = hm_vk_cmd_run(vk, &sub, 0);
				if (r < 0)
					goto out;
			} else if (v == RAW_ONESHOT_TS) {
				/* as the engine's run_dispatch(): GPU timestamps */
				VkCommandBuffer c1;
				uint64_t ts[2];

				if (!qp)
					break;
				r = hm_vk_cmd_begin(vk, &c1);
				if (r < 0)
					goto out;
				vkCmdResetQueryPool(c1, qp, 0, 2);
				vkCmdWriteTimestamp(c1, VK_PIPELINE_STAGE_TOP_OF_PIPE_BIT, qp, 0);
				hm_vk_cmd_dispatch(c1, &p, push, sizeof(push), 1, 1, 1);
				vkCmdWriteTimestamp(c1, VK_PIPELINE_STAGE_BOTTOM_OF_PIPE_BIT, qp, 1);
				hm_vk_cmd_barrier(c1);
				r = hm_vk_submit_wait(vk, c1, 0);
				if (r < 0)
					goto out;
				if (!vkGetQueryPoolResults(vk->dev, qp, 0, 2, sizeof(ts), ts, 8,
							   VK_QUERY_RESULT_64_BIT |
							   VK_QUERY_RESULT_WAIT_BIT)) {
					uint64_t m = vk->timestamp_valid_bits >= 64 ? ~0ull :
						     (1ull << vk->timestamp_valid_bits) - 1;

					gpu_ns += (double)((ts[1] - ts[0]) & m) *
						  vk->timestamp_period_ns;
					gpu_n++;
				}
			} else {
				VkResult vr;

				vkResetFences(vk->dev, 1, &fence);
				if (vkQueueSubmit(vk->queue, 1, &si, fence))
					goto out;
				if (v == RAW_REUSE_WAIT)
					vr = vkWaitForFences(vk->dev, 1, &fence, VK_TRUE,
							     10000000000ull);
				else
					while ((vr = vkGetFenceStatus(vk->dev, fence)) == VK_NOT_READY)
						;
				if (vr != VK_SUCCESS)
					goto out;
			}
			if (i >= 10)	/* the first ones warm up */
				t[i - 10] = bench_now_us() - t0;
		}
		ret_med[v] = bench_pct(t, n, 0.5);
	}
	*ret_gpu_us = gpu_n ? gpu_ns / gpu_n / 1e3 : 0;
	r = 0;
out:
	if (qp)
		vkDestroyQueryPool(vk->dev, qp, NULL);
	hm_vk_cmd_free(vk, &sub);
	if (fence)
		vkDestroyFence(vk->dev, fence, NULL);
	if (pool)
		vkDestroyCommandPool(vk->dev, pool, NULL);
	hm_vk_pipeline_free(vk, &p);
	free(t);
	return r;
}

/* hmirrord beside this program on a private socket (workload.c too) */
pid_t bench_spawn_daemon(const char *sock)
{
	char path[PATH_MAX];
	ssize_t n = readlink("/proc/self/exe", path, sizeof(path) - 16);
	pid_t pid;

	if (n < 0)
		return -1;
	path[n] = 0;
	strcpy(strrchr(path, '/') + 1, "hmirrord");
	pid = fork();
	if (pid == 0) {
		freopen("/dev/null", "w", stderr);
		execl(path, "hmirrord", "--socket", sock, "--no-netlink", (char *)NULL);
		_exit(127);
	}
	for (int i = 0; i < 2000; i++) {
		struct hm_client *c;

		if (hm_client_connect(sock, &c) == 0) {
			hm_client_free(c);
			return pid;
		}
		if (waitpid(pid, NULL, WNOHANG) == pid)
			return -1;
		usleep(5000);
	}
	kill(pid, SIGKILL);
	return -1;
}

int bench_dispatch(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "rounds", required_argument, NULL, 'r' },
		{ "n", required_argument, NULL, 'n' },
		{ "socket", required_argument, NULL, 's' },
		{ "json", no_argument, NULL, 'j' },
		{ NULL, 0, NULL, 0 },
	};
	const char *sock = getenv(HM_PROTO_SOCKET_ENV);
	unsigned rounds = 5, n = 200;
	bool json = false;
	char priv[64] = "";
	pid_t daemon = 0;
	int c, r;

	optind = 1;
	while ((c = getopt_long(argc, argv, "", opts, NULL)) != -1) {
		switch (c) {
		case 'r': rounds = (unsigned)atoi(optarg); break;
		case 'n': n = (unsigned)atoi(optarg); break;
		case 's': sock = optarg; break;
		case 'j': json = true; break;
		default:
			fprintf(stderr, "usage: hmirror-bench dispatch [--rounds R] "
				"[--n N] [--socket PATH] [--json]\n");
			return 2;
		}
	}
	if (!rounds || !n)
		return 2;

	struct hm_client *cl = NULL;

	if (!sock || hm_client_connect(sock, &cl) < 0) {
		snprintf(priv, sizeof(priv), "/tmp/hmirror-bench.%d.sock", (int)getpid());
		daemon = bench_spawn_daemon(priv);
		if (daemon <= 0) {
			fprintf(stderr, "bench dispatch: could not start hmirrord\n");
			return 1;
		}
		sock = priv;
		r = hm_client_connect(sock, &cl);
		if (r < 0)
			return 1;
	}
	if (!(hm_client_info(cl)->features & HM_FEAT_ENGINE)) {
		fprintf(stderr, "bench dispatch: the daemon has no engine\n");
		return 1;
	}

	/* in-process: our own context and engine */
	struct hm_vk_params vp = { .validation = 0 };
	/* as hmirrord's engines (daemon/engine_host.c): no device timestamps */
	struct hm_engine_params ep = { .flags = HM_ENGINE_NO_TIMESTAMPS };
	struct hm_vk *vk;
	struct hm_engine *e;
	uint32_t ip, dp, push[2] = { 0, 0 };

	r = hm_vk_new(&vp, &vk);
	if (r < 0) {
		fprintf(stderr, "bench dispatch: hm_vk_new: %s\n", strerror(-r));
		return 1;
	}
	r = hm_engine_new(vk, &ep, &e);
	if (r == 0)
		r = hm_engine_pipeline_new(e, hm_test_empty_spv,
					   sizeof(hm_test_empty_spv) / 4, "main", 2, &ip);
	if (r == 0)
		r = hm_client_pipeline_new(cl, hm_test_empty_spv,
					   sizeof(hm_test_empty_spv) / 4, "main", 2, &dp);
	if (r < 0) {
		fprintf(stderr, "bench dispatch: setup: %s\n", strerror(-r));
		return 1;
	}
	struct hm_client_dispatch d = {
		.pipeline = dp, .groups = { 1, 1, 1 }, .nr_push = 2, .push = push,
	};
	size_t total = (size_t)rounds * n;
	double *tin = calloc(total, sizeof(double)), *tdm = calloc(total, sizeof(double));
	double *med_in = calloc(rounds, sizeof(double)), *med_dm = calloc(rounds, sizeof(double));

	/* warm up both paths (first submissions compile and allocate) */
	for (int i = 0; i < 10; i++) {
		hm_engine_dispatch(e, ip, 1, 1, 1, push, 2, 0);
		hm_client_dispatch(cl, &d, 10000, NULL);
	}
	struct hm_engine_stats st0 = { 0 }, st1 = { 0 };

	hm_engine_stats(e, &st0);
	for (unsigned k = 0; k < rounds; k++) {
		for (unsigned i = 0; i < n; i++) {
			double t0 = bench_now_us();

			r = hm_engine_dispatch(e, ip, 1, 1, 1, push, 2, 0);
			tin[k * n + i] = bench_now_us() - t0;
			if (r < 0)
				break;
			t0 = bench_now_us();
			r = hm_client_dispatch(cl, &d, 10000, NULL);
			tdm[k * n + i] = bench_now_us() - t0;
			if (r < 0)
				break;
		}
		if (r < 0) {
			fprintf(stderr, "bench dispatch: %s\n", strerror(-r));
			break;
		}
		double *a = malloc(n * sizeof(double)), *b = malloc(n * sizeof(double));

		memcpy(a, tin + k * n, n * sizeof(double));
		memcpy(b, tdm + k * n, n * sizeof(double));
		med_in[k] = bench_pct(a, n, 0.5);
		med_dm[k] = bench_pct(b, n, 0.5);
		free(a);
		free(b);
	}
	hm_engine_stats(e, &st1);

	/* the engine's phases, per in-process dispatch */
	double nd = st1.dispatches > st0.dispatches ? (double)(st1.dispatches - st0.dispatches) : 1;
#define PH(f) ((double)(st1.f - st0.f) / nd / 1e3)
	double ph_harvest = PH(ns_harvest), ph_upload = PH(ns_upload),
	       ph_dispatch = PH(ns_dispatch), ph_gpu = PH(ns_dispatch_gpu),
	       ph_marks = PH(ns_marks), ph_copy = PH(ns_copy_back), ph_total = PH(ns_total);
#undef PH
	double in_mean = 0;

	for (size_t i = 0; i < total; i++)
		in_mean += tin[i] / (double)total;

	/* back to back: the daemon's threads stay awake between requests */
	double b2b_dm = 0, b2b_in = 0;

	if (r >= 0) {
		double *a = calloc(n, sizeof(double)), *b = calloc(n, sizeof(double));

		for (unsigned i = 0; i < n && r >= 0; i++) {
			double t0 = bench_now_us();

			r = hm_client_dispatch(cl, &d, 10000, NULL);
			a[i] = bench_now_us() - t0;
		}
		for (unsigned i = 0; i < n && r >= 0; i++) {
			double t0 = bench_now_us();

			r = hm_engine_dispatch(e, ip, 1, 1, 1, push, 2, 0);
			b[i] = bench_now_us() - t0;
		}
		b2b_dm = bench_pct(a, n, 0.5);
		b2b_in = bench_pct(b, n, 0.5);
		free(a);
		free(b);
	}
	/* plain Vulkan on the same device */
	double raw[RAW_NR] = { 0 }, empty_gpu = 0;
	int rr = r >= 0 ? raw_vk(vk, n, raw, &empty_gpu) : -1;
	const char *spin = getenv("HMIRROR_FENCE_SPIN_US");
	char spin_s[32];

	/* hm_vk_submit_wait()'s fence spin: the default is 0 on a CPU device */
	snprintf(spin_s, sizeof(spin_s), "%s", spin && *spin ? spin :
		 vk->props.deviceType == VK_PHYSICAL_DEVICE_TYPE_CPU ? "0" : "200");

	double in_med = bench_pct(med_in, rounds, 0.5), dm_med = bench_pct(med_dm, rounds, 0.5);
	double in_p99 = bench_pct(tin, total, 0.99), dm_p99 = bench_pct(tdm, total, 0.99);
	const char *dev = hm_client_info(cl)->device;

	if (json)
		printf("{\"bench\":\"dispatch\",\"device\":\"%s\",\"rounds\":%u,\"n\":%u,"
		       "\"inproc_median_us\":%.2f,\"inproc_p99_us\":%.2f,"
		       "\"daemon_median_us\":%.2f,\"daemon_p99_us\":%.2f,"
		       "\"added_median_us\":%.2f,\"ratio\":%.3f,\"target_added_us\":30,"
		       "\"ok\":%s,\"b2b_inproc_median_us\":%.2f,\"b2b_daemon_median_us\":%.2f,"
		       "\"b2b_added_us\":%.2f,\"fence_spin_us\":%s}\n",
		       dev, rounds, n, in_med, in_p99, dm_med, dm_p99,
		       dm_med - in_med, dm_med / in_med,
		       dm_med - in_med < 30 ? "true" : "false", b2b_in, b2b_dm,
		       b2b_dm - b2b_in, spin_s);
	else
		printf("dispatch (empty, %s; %u rounds x %u, medians of round medians):\n"
		       "  in-process      median %8.2f us   p99 %8.2f us\n"
		       "  through daemon  median %8.2f us   p99 %8.2f us\n"
		       "  daemon adds     %8.2f us (target < 30 us)  ratio %.2f\n",
		       dev, rounds, n, in_med, in_p99, dm_med, dm_p99, dm_med - in_med,
		       dm_med / in_med);
	if (json) {
		printf("{\"bench\":\"dispatch-phases\",\"device\":\"%s\",\"dispatches\":%.0f,"
		       "\"inproc_mean_us\":%.2f,\"harvest_us\":%.2f,\"upload_us\":%.2f,"
		       "\"dispatch_us\":%.2f,\"dispatch_gpu_us\":%.2f,\"marks_us\":%.2f,"
		       "\"copy_back_us\":%.2f,\"engine_total_us\":%.2f,\"outside_us\":%.2f}\n",
		       dev, nd, in_mean, ph_harvest, ph_upload, ph_dispatch, ph_gpu, ph_marks,
		       ph_copy, ph_total, in_mean - ph_total);
		if (rr == 0)
			printf("{\"bench\":\"dispatch-vk\",\"device\":\"%s\",\"n\":%u,"
			       "\"oneshot_median_us\":%.2f,\"oneshot_ts_median_us\":%.2f,"
			       "\"reuse_wait_median_us\":%.2f,\"reuse_spin_median_us\":%.2f,"
			       "\"submitter_median_us\":%.2f,\"empty_gpu_us\":%.2f}\n",
			       dev, n, raw[RAW_ONESHOT], raw[RAW_ONESHOT_TS],
			       raw[RAW_REUSE_WAIT], raw[RAW_REUSE_SPIN], raw[RAW_SUBMITTER],
			       empty_gpu);
	} else {
		printf("  back to back:   in-process %8.2f us, through daemon %8.2f us "
		       "(adds %.2f us)\n", b2b_in, b2b_dm, b2b_dm - b2b_in);
		printf("  engine phases a dispatch (mean of %.0f, in-process mean %.2f us):\n"
		       "    harvest %.2f  upload %.2f  dispatch %.2f (gpu %.2f)  marks %.2f"
		       "  copy back %.2f  total %.2f  outside %.2f us\n", nd, in_mean,
		       ph_harvest, ph_upload, ph_dispatch, ph_gpu, ph_marks, ph_copy, ph_total,
		       in_mean - ph_total);
		if (rr == 0) {
			for (int v = 0; v < RAW_NR; v++)
				printf("  plain vulkan %-11s median %8.2f us\n", raw_name[v], raw[v]);
			printf("  an empty dispatch on the device's timestamps: %.2f us; "
			       "fence spin %s us\n", empty_gpu, spin_s);
		}
	}
	hm_client_free(cl);
	hm_engine_free(e);
	hm_vk_free(vk);
	if (daemon > 0) {
		kill(daemon, SIGTERM);
		waitpid(daemon, NULL, 0);
		unlink(priv);
	}
	free(tin);
	free(tdm);
	free(med_in);
	free(med_dm);
	return r < 0 ? 1 : 0;
}
