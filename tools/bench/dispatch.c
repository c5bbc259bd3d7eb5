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

static double now_us(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec * 1e6 + (double)ts.tv_nsec * 1e-3;
}

static int cmp_d(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

static double pct(double *v, size_t n, double p)
{
	qsort(v, n, sizeof(*v), cmp_d);
	return v[(size_t)((double)(n - 1) * p + 0.5)];
}

static pid_t spawn_daemon(const char *sock)
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
		daemon = spawn_daemon(priv);
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
	struct hm_engine_params ep = { 0 };
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
	for (unsigned k = 0; k < rounds; k++) {
		for (unsigned i = 0; i < n; i++) {
			double t0 = now_us();

			r = hm_engine_dispatch(e, ip, 1, 1, 1, push, 2, 0);
			tin[k * n + i] = now_us() - t0;
			if (r < 0)
				break;
			t0 = now_us();
			r = hm_client_dispatch(cl, &d, 10000, NULL);
			tdm[k * n + i] = now_us() - t0;
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
		med_in[k] = pct(a, n, 0.5);
		med_dm[k] = pct(b, n, 0.5);
		free(a);
		free(b);
	}
	double in_med = pct(med_in, rounds, 0.5), dm_med = pct(med_dm, rounds, 0.5);
	double in_p99 = pct(tin, total, 0.99), dm_p99 = pct(tdm, total, 0.99);
	const char *dev = hm_client_info(cl)->device;

	if (json)
		printf("{\"bench\":\"dispatch\",\"device\":\"%s\",\"rounds\":%u,\"n\":%u,"
		       "\"inproc_median_us\":%.2f,\"inproc_p99_us\":%.2f,"
		       "\"daemon_median_us\":%.2f,\"daemon_p99_us\":%.2f,"
		       "\"added_median_us\":%.2f,\"ratio\":%.3f,\"target_added_us\":30,"
		       "\"ok\":%s}\n", dev, rounds, n, in_med, in_p99, dm_med, dm_p99,
		       dm_med - in_med, dm_med / in_med,
		       dm_med - in_med < 30 ? "true" : "false");
	else
		printf("dispatch (empty, %s; %u rounds x %u, medians of round medians):\n"
		       "  in-process      median %8.2f us   p99 %8.2f us\n"
		       "  through daemon  median %8.2f us   p99 %8.2f us\n"
		       "  daemon adds     %8.2f us (target < 30 us)  ratio %.2f\n",
		       dev, rounds, n, in_med, in_p99, dm_med, dm_p99, dm_med - in_med,
		       dm_med / in_med);
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
