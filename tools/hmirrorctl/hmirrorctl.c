// SPDX-License-Identifier: GPL-2.0
/*
 * hmirrorctl: look at hmirror from the outside.
 *
 *   hmirrorctl [--socket PATH] status
 *   hmirrorctl [--socket PATH] stats [--json]
 *   hmirrorctl [--socket PATH] top [-d SECONDS] [-n COUNT]
 *
 * status: is hmirrord there (pid, device, protocol, features), is the
 *         module's netlink family there.  Exit 0 when the daemon answers.
 * stats:  the module's counters (generic netlink, STATS_GET), the daemon's
 *         and the engines' (summed over clients) over the daemon's socket.
 *         --json: one object per line.
 * top:    one line a period, like nvidia-smi dmon: rates over the period,
 *         then the period's dispatches on average (the per-dispatch
 *         timeline): chunks uploaded, uploads discarded (written during
 *         their copy), uploads made beside the dispatch (ahead: published
 *         / discarded), mirrors dropped by guards / refreshed / evicted,
 *         thrash back-offs, and ms in harvest, upload, the dispatch (its
 *         submit and wait) and copy-back.
 */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <hmirror/client.h>

#include "daemon/netlink_stats.h"

#define MAX_NL 64

static const char *sock;

static int cmd_status(void)
{
	struct hm_client *c = NULL;
	struct hm_nl_stat nl[MAX_NL];
	unsigned n = 0;
	int r = hm_client_connect(sock, &c), rn;

	if (r < 0) {
		printf("hmirrord: not reachable on %s (%s)\n",
		       sock ? sock : "the default socket", strerror(-r));
	} else {
		const struct hm_msg_hello_reply *i = hm_client_info(c);
		struct hm_client_stats s;

		printf("hmirrord: pid %u, protocol %u, device %s\n", i->daemon_pid,
		       i->version, i->device);
		printf("  features:%s%s%s%s%s%s%s\n",
		       i->features & HM_FEAT_ENGINE ? " engine" : " NO-ENGINE",
		       i->features & HM_FEAT_NETLINK ? " netlink-events" : "",
		       i->features & HM_FEAT_MEMFD_SPIRV ? " memfd-spirv" : "",
		       i->features & HM_FEAT_PUSH_LAYOUT2 ? " push-layout-2" : "",
		       i->features & HM_FEAT_TIERS ? " two-tiers" : "",
		       i->features & HM_FEAT_COMPLETION_FD ? " completion-fd" : "",
		       i->features & HM_FEAT_TIMELINE ? " timeline-semaphore" : "");
		printf("  limits: %u spaces, %u pipelines, %u dispatches in flight "
		       "a client; %u user push words; %u-byte messages\n", i->max_spaces,
		       i->max_pipelines, i->max_inflight, i->max_push_words, i->max_msg);
		if (hm_client_stats(c, &s) == 0)
			printf("  clients %" PRIu64 " (this one included), "
			       "dispatches %" PRIu64 ", up %.0f s\n",
			       s.daemon[HM_DSTAT_CLIENTS], s.daemon[HM_DSTAT_DISPATCHES],
			       s.daemon[HM_DSTAT_UPTIME_NS] / 1e9);
		hm_client_free(c);
	}
	rn = hm_nl_stats_get(nl, MAX_NL, &n);
	if (rn < 0)
		printf("module: %s\n", rn == -ENOENT ?
		       "no \"hmirror\" netlink family (module not loaded)" :
		       strerror(-rn));
	else
		printf("module: netlink family \"hmirror\" present, %u counters\n", n);
	return r < 0 ? 1 : 0;
}

static int cmd_stats(bool json)
{
	struct hm_client *c = NULL;
	struct hm_client_stats s;
	struct hm_nl_stat nl[MAX_NL];
	unsigned n = 0;
	int r, rn;

	rn = hm_nl_stats_get(nl, MAX_NL, &n);
	if (json) {
		printf("{\"source\":\"module\",\"present\":%s", rn < 0 ? "false" : "true");
		for (unsigned i = 0; rn == 0 && i < n; i++)
			printf(",\"%s\":%" PRIu64, nl[i].name, nl[i].value);
		printf("}\n");
	} else if (rn < 0) {
		printf("module: %s\n", rn == -ENOENT ? "not loaded (no netlink family)" :
		       strerror(-rn));
	} else {
		printf("module:\n");
		for (unsigned i = 0; i < n; i++)
			printf("  %-28s %" PRIu64 "\n", nl[i].name, nl[i].value);
	}
	r = hm_client_connect(sock, &c);
	if (r == 0)
		r = hm_client_stats(c, &s);
	if (r < 0) {
		if (json)
			printf("{\"source\":\"daemon\",\"present\":false,\"error\":\"%s\"}\n",
			       strerror(-r));
		else
			printf("daemon: not reachable (%s)\n", strerror(-r));
		hm_client_free(c);
		return 1;
	}
	if (json) {
		printf("{\"source\":\"daemon\",\"present\":true,\"pid\":%u,\"device\":\"%s\"",
		       hm_client_info(c)->daemon_pid, hm_client_info(c)->device);
		for (unsigned i = 0; i < s.nr_daemon; i++)
			printf(",\"%s\":%" PRIu64, hm_daemon_stat_name(i), s.daemon[i]);
		printf("}\n{\"source\":\"engine\",\"clients_summed\":true");
		for (unsigned i = 0; i < HM_ESTAT_NR; i++)
			printf(",\"%s\":%" PRIu64, hm_engine_stat_name(i), s.engine[i]);
		printf("}\n");
	} else {
		printf("daemon (pid %u, %s):\n", hm_client_info(c)->daemon_pid,
		       hm_client_info(c)->device);
		for (unsigned i = 0; i < s.nr_daemon; i++)
			printf("  %-28s %" PRIu64 "\n", hm_daemon_stat_name(i), s.daemon[i]);
		printf("engine (all clients):\n");
		for (unsigned i = 0; i < HM_ESTAT_NR; i++)
			printf("  %-28s %" PRIu64 "\n", hm_engine_stat_name(i),
			       i < s.nr_engine ? s.engine[i] : 0);
	}
	hm_client_free(c);
	return 0;
}

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static int cmd_top(double period, long count)
{
	struct hm_client *c = NULL;
	struct hm_client_stats prev, cur;
	double t_prev, t;
	int r = hm_client_connect(sock, &c);

	if (r < 0) {
		fprintf(stderr, "hmirrorctl: hmirrord not reachable: %s\n", strerror(-r));
		return 1;
	}
	setvbuf(stdout, NULL, _IOLBF, 0);
	r = hm_client_stats(c, &prev);
	t_prev = now_s();
	for (long line = 0; r == 0 && (count <= 0 || line < count); line++) {
		if (line % 20 == 0) {
			printf("# %8s %4s %8s %5s %7s %7s %7s %9s %9s %6s | per dispatch: %6s %5s "
			       "%5s %5s %6s %6s %5s %5s %6s %7s %7s %7s %7s %7s %7s\n", "time",
			       "cli", "disp/s", "infl", "mirr", "trips/s", "drops/s",
			       "up MB/s", "home KB/s", "bad/s", "upl", "disc", "ahd", "ahdsc", "drop", "refr",
			       "evict", "back", "marks", "harv_ms", "upl_ms", "disp_ms", "gpu_ms", "ahd_ms",
			       "home_ms");
		}
		usleep((useconds_t)(period * 1e6));
		r = hm_client_stats(c, &cur);
		if (r < 0)
			break;
		t = now_s();
		double dt = t - t_prev;
		time_t wall = time(NULL);
		struct tm tm;
		char ts[16];

		localtime_r(&wall, &tm);
		strftime(ts, sizeof(ts), "%H:%M:%S", &tm);
#define RATE(a) ((double)(cur.a - prev.a) / dt)
		uint64_t nd = cur.engine[HM_ESTAT_DISPATCHES] - prev.engine[HM_ESTAT_DISPATCHES];
#define PER(k) (nd ? (double)(cur.engine[HM_ESTAT_##k] - prev.engine[HM_ESTAT_##k]) / nd : 0.0)
		printf("  %8s %4" PRIu64 " %8.1f %5" PRIu64 " %7" PRIu64 " %7.1f %7.1f "
		       "%9.2f %9.2f %6.1f | %19.0f %5.0f %5.0f %5.0f %6.0f %6.0f %5.0f %5.0f %6.0f %7.2f "
		       "%7.2f %7.2f %7.2f %7.2f %7.2f\n", ts, cur.daemon[HM_DSTAT_CLIENTS] - 1,
		       RATE(daemon[HM_DSTAT_DISPATCHES]), cur.daemon[HM_DSTAT_INFLIGHT],
		       cur.engine[HM_ESTAT_CHUNKS_MIRRORED],
		       RATE(engine[HM_ESTAT_GUARD_TRIPS]),
		       RATE(engine[HM_ESTAT_MIRRORS_DROPPED]),
		       RATE(engine[HM_ESTAT_BYTES_UPLOADED]) / 1e6,
		       RATE(engine[HM_ESTAT_BYTES_COPIED_HOME]) / 1e3,
		       RATE(daemon[HM_DSTAT_BAD_MSGS]), PER(UPLOADS), PER(UPLOADS_DISCARDED),
		       PER(AHEAD_UPLOADS), PER(AHEAD_DISCARDED), PER(MIRRORS_DROPPED), PER(REFRESHES), PER(MIRRORS_EVICTED),
		       PER(THRASH_BACKOFFS), PER(MARKS_SCANNED), PER(NS_HARVEST) * 1e-6,
		       PER(NS_UPLOAD) * 1e-6, PER(NS_DISPATCH) * 1e-6, PER(NS_DISPATCH_GPU) * 1e-6,
		       PER(NS_AHEAD) * 1e-6, PER(NS_COPY_BACK) * 1e-6);
#undef PER
#undef RATE
		prev = cur;
		t_prev = t;
	}
	hm_client_free(c);
	if (r < 0) {
		fprintf(stderr, "hmirrorctl: %s\n", strerror(-r));
		return 1;
	}
	return 0;
}

static void usage(FILE *f)
{
	fprintf(f, "usage: hmirrorctl [--socket PATH] status\n"
		"       hmirrorctl [--socket PATH] stats [--json]\n"
		"       hmirrorctl [--socket PATH] top [-d SECONDS] [-n COUNT]\n");
}

int main(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "socket", required_argument, NULL, 's' },
		{ "json", no_argument, NULL, 'j' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	bool json = false;
	double period = 1.0;
	long count = 0;
	int c;

	while ((c = getopt_long(argc, argv, "+hjd:n:", opts, NULL)) != -1) {
		switch (c) {
		case 's': sock = optarg; break;
		case 'j': json = true; break;
		case 'd': period = atof(optarg); break;
		case 'n': count = atol(optarg); break;
		case 'h': usage(stdout); return 0;
		default: usage(stderr); return 2;
		}
	}
	if (optind >= argc) {
		usage(stderr);
		return 2;
	}
	const char *cmd = argv[optind++];

	/* options may also follow the command */
	while ((c = getopt_long(argc, argv, "hjd:n:", opts, NULL)) != -1) {
		switch (c) {
		case 's': sock = optarg; break;
		case 'j': json = true; break;
		case 'd': period = atof(optarg); break;
		case 'n': count = atol(optarg); break;
		default: usage(stderr); return 2;
		}
	}
	if (period <= 0)
		period = 1;
	if (!strcmp(cmd, "status"))
		return cmd_status();
	if (!strcmp(cmd, "stats"))
		return cmd_stats(json);
	if (!strcmp(cmd, "top"))
		return cmd_top(period, count);
	usage(stderr);
	return 2;
}
