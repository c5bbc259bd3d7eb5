// SPDX-License-Identifier: GPL-2.0
/*
 * hmirror-demo: the main job end to end (README.md, Documentation/daemon.rst).
 *
 * An "emulator" process builds a bounding-volume hierarchy of a few hundred
 * MiB in a guest space (the watch API: the module where it is loaded, else
 * userfaultfd), hands the space to hmirrord over its socket (SCM_RIGHTS),
 * and runs ray-traversal dispatches through the daemon: a translated
 * program (tools/demo/traverse.comp, linked with the lookup helper) reads
 * nodes, primitives and rays from guest memory and writes hit records into
 * guest memory.  Meanwhile a CPU thread acts as the guest:
 *  - between dispatches it moves some primitives away (z grows) and raises
 *    their leaves' zmin: guest writes to mirrored chunks, which the guards
 *    must catch so that no dispatch reads a stale mirror;
 *  - during each dispatch it writes words the traversal never reads, in
 *    the same chunks the device reads and writes: a scratch word of nodes
 *    and primitives, and the "cpu word" of each hit record of the running
 *    dispatch, the word beside the three the device writes (false sharing:
 *    the copy home must not undo a CPU write).
 * After each dispatch every hit (id, z, nodes visited) is checked against a
 * CPU traversal of the scene as it was during the dispatch (computed on
 * every core but one while the dispatch runs), and every CPU write made
 * during it must still be there.  The last line reads
 * "demo: ... mismatches=0" when all is right.  SIGINT/SIGTERM: the
 * dispatch in flight finishes, the summary is printed (INTERRUPTED), the
 * exit status is 128 + the signal.
 *
 *   hmirror-demo [--socket PATH] [--size MIB] [--rays N] [--dispatches N]
 *                [--mods N] [--small] [--plot FILE.png] [--backend NAME]
 *                [--threads N]
 */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <hmirror/client.h>
#include <hmirror/watch.h>

#include "demo/traverse.spv.h"	/* hm_demo_traverse_spv: linked module */
#include "demo/traverse_spec.spv.h"	/* hm_demo_traverse_spec_spv: loads at the window */
#include "scene.h"

#define GUEST_BASE	((uint64_t)0x100000000)	/* where the "guest" sees the space */
#define USER_PUSH	DEMO_USER_PUSH

/* ---- SIGINT / SIGTERM: stop after the dispatch in flight, report ---------- */

static volatile sig_atomic_t stop_sig;

static void on_stop(int sig)
{
	stop_sig = sig;
}

/* ---- main ---------------------------------------------------------------- */

static void progress(uint32_t done, uint32_t total, double rays_s, bool tty)
{
	int w = 40, filled = total ? (int)((uint64_t)done * w / total) : w;

	if (!tty) {
		if (done == total || (done * 4 / total) != ((done - 1) * 4 / total))
			fprintf(stderr, "demo: %u/%u dispatches, %.0f rays/s\n",
				done, total, rays_s);
		return;
	}
	fprintf(stderr, "\r[%.*s%*s] %u/%u dispatches  %.3g Mrays/s ",
		filled, "########################################", w - filled,
		"", done, total, rays_s / 1e6);
	if (done == total)
		fputc('\n', stderr);
}

static void usage(FILE *f)
{
	fprintf(f, "usage: hmirror-demo [--socket PATH] [--size MIB] [--rays N]\n"
		"       [--dispatches N] [--mods N] [--small] [--plot FILE.png]\n"
		"       [--backend kmod|uffd-async|uffd-sync|mprotect]\n"
		"  --size MIB        guest memory for the hierarchy (default: 256;\n"
		"                    --small: 16)\n"
		"  --advice N        for the hierarchy: 0 default, 1 read-mostly\n"
		"                    (default), 2 prefer device, 3 never mirror\n"
		"  --hits-advice N   for the hit records (default 0: the engine decides)\n"
		"  --watch-shift N   the guest space's watch unit (default 12, pages)\n"
		"  --rays N          rays per dispatch (default: 1M on a GPU, 8K on\n"
		"                    a CPU device)\n"
		"  --dispatches N    (default: 24 on a GPU, 16 on a CPU device)\n"
		"  --threads N       CPU reference threads (default: cores - 1)\n"
		"  --loads window|helper  the hierarchy's loads at the mirror window\n"
		"                    (D969a, two tiers; default) or each through the\n"
		"                    lookup helper (the form a daemon's isolation\n"
		"                    check takes, used when it refuses the other)\n"
		"SIGINT/SIGTERM: stops after the dispatch in flight, reports, exits\n"
		"128 + the signal number.\n");
}

int main(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "socket", required_argument, NULL, 's' },
		{ "size", required_argument, NULL, 'm' },
		{ "rays", required_argument, NULL, 'r' },
		{ "dispatches", required_argument, NULL, 'd' },
		{ "mods", required_argument, NULL, 'k' },
		{ "small", no_argument, NULL, 'S' },
		{ "plot", required_argument, NULL, 'p' },
		{ "backend", required_argument, NULL, 'b' },
		{ "spirv", required_argument, NULL, 'x' },	/* debugging */
		{ "advice", required_argument, NULL, 'a' },
		{ "hits-advice", required_argument, NULL, 'H' },
		{ "watch-shift", required_argument, NULL, 'W' },
		{ "threads", required_argument, NULL, 't' },
		{ "loads", required_argument, NULL, 'L' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	const char *sock = NULL, *plot = NULL, *backend = NULL, *spirv = NULL;
	uint64_t size_mib = 256, rays_per = 0;
	uint32_t dispatches = 0, mods = 256, advice = 1, threads = 0, hits_advice = 0;
	uint32_t watch_shift = 12;	/* pages: a written mirror is refreshed page by page */
	bool small = false, tty = isatty(2), window_loads = true;
	struct hm_space_params sp = { 0 };
	struct hm_space *space;
	struct hm_client *cl;
	struct demo_scene sc;
	struct demo_guest g = { 0 };
	uint32_t pipe, space_id;
	uint64_t mismatches = 0, lost_writes = 0, hit_rays = 0;
	double t_build, t_run = 0, *t_disp, t_start = demo_now_s();
	/* per-phase wall time of the dispatch loop (the summary's breakdown) */
	double t_modify = 0, t_guest = 0, t_ref = 0, t_refwait = 0, t_cmp = 0;
	struct demo_refpool rp;
	struct sigaction sa = { .sa_handler = on_stop };
	sigset_t stopset;
	int c, r;

	while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
		switch (c) {
		case 's': sock = optarg; break;
		case 'm': size_mib = strtoull(optarg, NULL, 0); break;
		case 'r': rays_per = strtoull(optarg, NULL, 0); break;
		case 'd': dispatches = (uint32_t)strtoul(optarg, NULL, 0); break;
		case 'k': mods = (uint32_t)strtoul(optarg, NULL, 0); break;
		case 'S': small = true; break;
		case 'p': plot = optarg; break;
		case 'b': backend = optarg; break;
		case 'x': spirv = optarg; break;
		case 'a': advice = (uint32_t)strtoul(optarg, NULL, 0); break;
		case 'H': hits_advice = (uint32_t)strtoul(optarg, NULL, 0); break;
		case 'W': watch_shift = (uint32_t)strtoul(optarg, NULL, 0); break;
		case 't': threads = (uint32_t)strtoul(optarg, NULL, 0); break;
		case 'L':
			if (strcmp(optarg, "window") && strcmp(optarg, "helper")) {
				usage(stderr);
				return 2;
			}
			window_loads = !strcmp(optarg, "window");
			break;
		case 'h': usage(stdout); return 0;
		default: usage(stderr); return 2;
		}
	}
	if (small && size_mib == 256)
		size_mib = 16;
	/* no SA_RESTART: a wait is cut short and the loop looks at stop_sig.
	 * Only the main thread takes them (the others block both). */
	sigemptyset(&sa.sa_mask);
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
	sigemptyset(&stopset);
	sigaddset(&stopset, SIGINT);
	sigaddset(&stopset, SIGTERM);

	r = hm_client_connect(sock, &cl);
	if (r < 0) {
		fprintf(stderr, "demo: cannot reach hmirrord (%s): %s\n",
			sock ? sock : "default socket", strerror(-r));
		printf("demo: FAILED no daemon mismatches=unknown\n");
		return 1;
	}
	const struct hm_msg_hello_reply *info = hm_client_info(cl);
	bool cpu_dev = strstr(info->device, "llvmpipe") || strstr(info->device, "lavapipe");

	if (!rays_per)
		rays_per = small ? 2048 : cpu_dev ? 8192 : 1u << 20;
	if (!dispatches)
		dispatches = small ? 6 : cpu_dev ? 16 : 24;
	fprintf(stderr, "demo: daemon pid %u, device %s, protocol %u\n",
		info->daemon_pid, info->device, info->version);
	if (!(info->features & HM_FEAT_ENGINE)) {
		fprintf(stderr, "demo: the daemon has no engine (built without "
			"it, or no usable device): nothing can be dispatched\n");
		printf("demo: FAILED daemon without engine, 0 dispatches run, "
		       "mismatches=unknown\n");
		return 1;
	}

	/* ---- the guest space and the scene in it ---- */
	demo_scene_layout(&sc, size_mib, rays_per * dispatches);
	sp.size = sc.size;
	sp.chunk_shift = watch_shift;
	if (backend && hm_backend_from_name(backend, &sp.backend) < 0) {
		fprintf(stderr, "demo: unknown backend %s\n", backend);
		return 2;
	}
	r = hm_space_new(&sp, &space);
	if (r < 0) {
		fprintf(stderr, "demo: hm_space_new(%" PRIu64 " MiB): %s\n",
			sc.size >> 20, strerror(-r));
		printf("demo: FAILED no guest space mismatches=unknown\n");
		return 1;
	}
	fprintf(stderr, "demo: guest space %.1f MiB at guest 0x%" PRIx64
		" (backend %s: %s)\n", (double)sc.size / (1 << 20), GUEST_BASE,
		hm_backend_name(hm_space_backend(space)),
		hm_space_backend_reason(space));

	t_build = demo_now_s();
	if (demo_scene_build(&sc, hm_space_addr(space)) < 0) {
		fprintf(stderr, "demo: no memory for the scene\n");
		printf("demo: FAILED no memory mismatches=unknown\n");
		return 1;
	}
	t_build = demo_now_s() - t_build;
	fprintf(stderr, "demo: hierarchy of %u nodes over %u primitives "
		"(%.0f MiB of nodes and primitives) built in %.2f s\n",
		sc.nr_nodes, sc.nr_prims,
		(double)sc.off_rays / (1 << 20), t_build);

	if (stop_sig) {
		fprintf(stderr, "demo: stopped by signal %d after building the scene\n",
			(int)stop_sig);
		printf("demo: INTERRUPTED dispatches=0 mismatches=0 device=\"%s\"\n",
		       info->device);
		hm_client_free(cl);
		hm_space_free(space);
		demo_scene_fini(&sc);
		return 128 + stop_sig;
	}

	/* ---- hand it to the daemon ---- */
	r = hm_client_space_add(cl, space, GUEST_BASE, &space_id);
	if (r < 0) {
		fprintf(stderr, "demo: space_add: %s\n", strerror(-r));
		printf("demo: FAILED space not registered mismatches=unknown\n");
		return 1;
	}
	/* the hierarchy is read-mostly: mirror it, drop on CPU writes
	 * (--advice: 0 default, 1 read-mostly, 2 prefer device, 3 never) */
	r = hm_client_advise(cl, GUEST_BASE + sc.off_nodes, sc.off_rays - sc.off_nodes,
			     advice);
	if (r < 0)
		fprintf(stderr, "demo: advise: %s (continuing)\n", strerror(-r));
	/* the hit records: the device writes them, the CPU writes the word
	 * beside each during the dispatch.  No advice by default: written
	 * once a dispatch, they are never hot, so the device stores them
	 * home (on the H200 cheaper than mirror, diff and copy-back:
	 * Documentation/performance.rst).  --hits-advice 2 (prefer device)
	 * mirrors them, so the device's writes come home by the diff against
	 * the twin and the CPU's words must survive it (rule 4, false
	 * sharing; test-demo does so). */
	if (advice != 3 && hits_advice) {
		r = hm_client_advise(cl, GUEST_BASE + sc.off_hits,
				     (uint64_t)sc.nr_rays * sizeof(struct demo_hit), hits_advice);
		if (r < 0)
			fprintf(stderr, "demo: advise hits: %s (continuing)\n",
				strerror(-r));
	}
	const uint32_t *words = window_loads ? hm_demo_traverse_spec_spv : hm_demo_traverse_spv;
	size_t nr_words = window_loads ? sizeof(hm_demo_traverse_spec_spv) / 4 :
		sizeof(hm_demo_traverse_spv) / 4;

	if (spirv) {
		/* another traversal module, same interface (debugging) */
		FILE *f = fopen(spirv, "rb");
		static uint32_t buf[1 << 20];

		nr_words = f ? fread(buf, 4, sizeof(buf) / 4, f) : 0;
		if (f)
			fclose(f);
		words = buf;
	}
	r = hm_client_pipeline_new(cl, words, nr_words, "main", USER_PUSH, &pipe);
	if (r == -EACCES && !spirv && window_loads) {
		/* a daemon older than its re-linking of load functions, which
		 * holds this client to its isolation check, takes no load call
		 * sites; today's re-links them and takes them
		 * (Documentation/daemon.rst, "Isolation") */
		fprintf(stderr, "demo: the daemon's isolation check refused the window loads: "
			"every load through the helper\n");
		window_loads = false;
		r = hm_client_pipeline_new(cl, hm_demo_traverse_spv,
					   sizeof(hm_demo_traverse_spv) / 4, "main", USER_PUSH,
					   &pipe);
	}
	if (r >= 0)
		fprintf(stderr, "demo: loads %s\n", window_loads ?
			"at the mirror window (D969a, two tiers)" : "through the lookup helper");
	if (r < 0) {
		fprintf(stderr, "demo: pipeline: %s\n", strerror(-r));
		printf("demo: FAILED pipeline refused mismatches=unknown\n");
		return 1;
	}

	g.mods = mods;
	g.write_every = DEMO_WRITE_EVERY;
	g.scratch_max = DEMO_SCRATCH_MAX;
	long ncpu = sysconf(_SC_NPROCESSORS_ONLN);

	/* every core but one: the daemon's device thread and the guest thread
	 * must not wait for a core while the reference runs */
	if (!threads)
		threads = ncpu > 1 ? (uint32_t)ncpu - 1 : 1;
	/* the helper threads never take SIGINT/SIGTERM */
	pthread_sigmask(SIG_BLOCK, &stopset, NULL);
	r = demo_guest_init(&g, &sc);
	if (!r)
		r = demo_ref_init(&rp, &sc, threads, (uint32_t)rays_per);
	pthread_sigmask(SIG_UNBLOCK, &stopset, NULL);
	if (r < 0) {
		fprintf(stderr, "demo: reference threads: %s\n", strerror(-r));
		printf("demo: FAILED no guest or reference threads mismatches=unknown\n");
		return 1;
	}
	t_disp = calloc(dispatches, sizeof(*t_disp));
	/* the daemon's engine counters after each dispatch: the plot's timeline */
	uint64_t (*tl)[HM_ESTAT_NR] = calloc(dispatches + 1, sizeof(*tl));
	struct hm_client_stats st0;

	if (!tl || !t_disp)
		return 1;
	if (!hm_client_stats(cl, &st0))
		memcpy(tl[0], st0.engine, sizeof(tl[0]));

	uint32_t done;

	for (done = 0; done < dispatches; done++) {
		uint32_t first = (uint32_t)(done * rays_per);
		uint64_t nodes_g = GUEST_BASE + sc.off_nodes, prims_g = GUEST_BASE + sc.off_prims;
		uint64_t rays_g = GUEST_BASE + sc.off_rays, hits_g = GUEST_BASE + sc.off_hits;
		uint32_t push[USER_PUSH] = {
			(uint32_t)nodes_g, (uint32_t)(nodes_g >> 32),
			(uint32_t)prims_g, (uint32_t)(prims_g >> 32),
			(uint32_t)rays_g, (uint32_t)(rays_g >> 32),
			(uint32_t)hits_g, (uint32_t)(hits_g >> 32),
			first, (uint32_t)rays_per,
		};
		struct hm_client_dispatch d = {
			.pipeline = pipe,
			.groups = { (uint32_t)((rays_per + 63) / 64), 1, 1 },
			.nr_push = USER_PUSH, .push = push,
		};
		struct hm_client_result res;
		uint64_t ticket;
		double t0, t1, t2;
		bool submitted;

		if (stop_sig)
			break;
		/* the guest writes the scene between dispatches */
		t0 = demo_now_s();
		if (done)
			demo_guest_modify(&g);
		t_modify += demo_now_s() - t0;
		t0 = demo_now_s();
		r = hm_client_submit(cl, &d, &ticket);
		submitted = r == 0;
		if (submitted) {
			/* ... and beside what the device reads and writes; the
			 * reference walks the same scene meanwhile */
			demo_guest_during_start(&g, done + 1, first, (uint32_t)rays_per);
			demo_ref_start(&rp, NULL, first, (uint32_t)rays_per, NULL);
			/* in slices, so that a signal is seen; once stopping,
			 * the dispatch in flight still gets 30 s to finish */
			double give_up = 0;

			for (;;) {
				r = hm_client_wait(cl, ticket, 200, &res);
				if (r != -ETIMEDOUT)
					break;
				if (stop_sig && !give_up)
					give_up = demo_now_s() + 30;
				if ((give_up && demo_now_s() > give_up) ||
				    (!give_up && demo_now_s() - t0 > 600))
					break;
			}
		}
		t_disp[done] = demo_now_s() - t0;
		if (!hm_client_stats(cl, &st0))
			memcpy(tl[done + 1], st0.engine, sizeof(tl[0]));
		t1 = demo_now_s();
		if (submitted)
			demo_guest_during_wait(&g);
		t_guest += demo_now_s() - t1;
		t1 = demo_now_s();
		if (submitted)
			demo_ref_wait(&rp);
		t2 = demo_now_s();
		t_refwait += t2 - t1;
		if (submitted)
			t_ref += rp.t_end - rp.t_begin;
		t_run += t_disp[done];
		if (r < 0) {
			fprintf(stderr, "\ndemo: dispatch %u: %s\n", done + 1, strerror(-r));
			break;
		}
		/* every hit against the CPU's walk of the same scene */
		demo_check_hits(&sc, rp.want, first, (uint32_t)rays_per, done + 1, &mismatches,
				&lost_writes, &hit_rays, "demo");
		t_cmp += demo_now_s() - t2;
		progress(done + 1, dispatches, (double)rays_per * (done + 1) / t_run, tty);
	}
	lost_writes += demo_check_scratch(&g);
	demo_ref_fini(&rp);
	if (stop_sig)
		fprintf(stderr, "%sdemo: stopped by signal %d after %u of %u dispatches\n",
			tty ? "\n" : "", (int)stop_sig, done, dispatches);

	struct hm_client_stats st = { 0 };

	hm_client_stats(cl, &st);
	uint64_t rays_done = (uint64_t)done * rays_per;
	double rays_s = t_run > 0 ? (double)rays_done / t_run : 0;

	fprintf(stderr, "demo: %u dispatches of %" PRIu64 " rays, %" PRIu64
		" hit something; guest wrote %" PRIu64 " primitives between "
		"dispatches and %" PRIu64 " words during them\n", done, rays_per,
		hit_rays, g.modified, g.writes);
	/* where the time went: the loop's phases (wall time; the reference
	 * overlaps the dispatch, "reference after reply" is what it adds) */
	double t_total = demo_now_s() - t_start;

	fprintf(stderr, "demo: time: total %.2f s; build %.2f s; loop: modify %.3f s, "
		"dispatch (submit to writes home) %.2f s, guest writes after reply %.3f s, "
		"reference %.2f s on %u threads (%.2f s after the reply), compare %.3f s; "
		"%.1f us a ray on the CPU\n", t_total, t_build, t_modify, t_run, t_guest,
		t_ref, rp.nr_threads, t_refwait, t_cmp,
		done ? t_ref * rp.nr_threads * 1e6 / ((double)done * rays_per) : 0.0);
	if (plot) {
		char dat[1024];
		FILE *f;

		snprintf(dat, sizeof(dat), "%s.dat", plot);
		f = fopen(dat, "w");
		if (f) {
			/* dispatch, ms: total, harvest, upload, dispatch, copy
			 * back; chunks: uploaded, discarded, dropped by guards,
			 * refreshed, evicted; thrash back-offs */
			fprintf(f, "n total harvest upload dispatch copyback uploads discarded "
				"dropped refreshed evicted backoffs\n");
			for (uint32_t i = 0; i < done; i++) {
				const uint64_t *a = tl[i], *b = tl[i + 1];
#define D(k) (b[HM_ESTAT_##k] - a[HM_ESTAT_##k])
				fprintf(f, "%u %.3f %.3f %.3f %.3f %.3f %" PRIu64 " %" PRIu64 " %" PRIu64
					" %" PRIu64 " %" PRIu64 " %" PRIu64 "\n", i + 1, t_disp[i] * 1e3,
					D(NS_HARVEST) * 1e-6, D(NS_UPLOAD) * 1e-6, D(NS_DISPATCH) * 1e-6,
					D(NS_COPY_BACK) * 1e-6, D(UPLOADS), D(UPLOADS_DISCARDED),
					D(MIRRORS_DROPPED), D(REFRESHES), D(MIRRORS_EVICTED),
					D(THRASH_BACKOFFS));
#undef D
			}
			fclose(f);
			char cmd[8192];

			snprintf(cmd, sizeof(cmd),
				 "gnuplot -e \"set terminal png size 1000,700; "
				 "set output '%s'; set multiplot layout 2,1 "
				 "title 'hmirror demo: %s, %" PRIu64 " rays a dispatch'; "
				 "set key outside right; set grid; set ylabel 'ms'; "
				 "plot for [c=2:6] '%s' using 1:c with linespoints title columnhead(c); "
				 "set xlabel 'dispatch'; set ylabel 'chunks'; "
				 "plot for [c=7:12] '%s' using 1:c with linespoints title columnhead(c); "
				 "unset multiplot\"",
				 plot, info->device, rays_per, dat, dat);
			if (system(cmd) != 0)
				fprintf(stderr, "demo: gnuplot failed; data in %s\n", dat);
			else
				fprintf(stderr, "demo: plot written to %s\n", plot);
		}
	}
	printf("demo: dispatches=%u rays=%" PRIu64 " rays_per_s=%.0f "
	       "chunks_mirrored=%" PRIu64 " guard_trips=%" PRIu64
	       " mirrors_dropped=%" PRIu64 " bytes_uploaded=%" PRIu64
	       " bytes_copied_home=%" PRIu64 " lost_cpu_writes=%" PRIu64
	       " mismatches=%" PRIu64 "%s device=\"%s\" backend=%s"
	       " t_total=%.2f t_build=%.2f t_dispatch=%.2f t_ref=%.2f t_ref_after=%.2f"
	       " ref_threads=%u\n",
	       done, rays_done, rays_s, st.engine[HM_ESTAT_CHUNKS_MIRRORED],
	       st.engine[HM_ESTAT_GUARD_TRIPS], st.engine[HM_ESTAT_MIRRORS_DROPPED],
	       st.engine[HM_ESTAT_BYTES_UPLOADED], st.engine[HM_ESTAT_BYTES_COPIED_HOME],
	       lost_writes, mismatches + lost_writes,
	       stop_sig ? " INTERRUPTED" : done < dispatches ? " INCOMPLETE" : "",
	       info->device, hm_backend_name(hm_space_backend(space)),
	       t_total, t_build, t_run, t_ref, t_refwait, rp.nr_threads);
	hm_client_free(cl);
	hm_space_free(space);
	free(t_disp);
	free(tl);
	demo_guest_fini(&g);
	demo_scene_fini(&sc);
	if (stop_sig)
		return 128 + stop_sig;
	return mismatches || lost_writes || done < dispatches ? 1 : 0;
}
