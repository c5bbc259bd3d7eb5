// SPDX-License-Identifier: GPL-2.0
/*
 * hmirror-bench: one program, one subcommand per benchmark, each in its own
 * file (tools/bench/<name>.c).
 */
#include <stdio.h>
#include <string.h>

#include "common.h"

static const struct {
	const char *name;
	int (*fn)(int argc, char **argv);
	const char *what;
} cmds[] = {
	{ "guards", bench_guards, "guard trip and harvest cost, per watch backend" },
	{ "lookup", bench_lookup, "device-table lookup helper against a baseline" },
	{ "mirror", bench_mirror, "device accesses through mirrors vs. home pages" },
	{ "dispatch", bench_dispatch, "end-to-end dispatch cost through the engine" },
	{ "workload", bench_workload, "the demo's job in every mode: ideal, buffer cache, UVM, ours" },
	{ "stream", bench_stream, "recorded and submitted dispatches vs hm_engine_dispatch()" },
	{ "consumers", bench_consumers, "per-consumer harvest cost; a writer on an unwatched range" },
	{ "gmap", bench_gmap, "guest address space: lazy residency, map/unmap of 64 KiB vs mmap" },
	{ "gens", bench_gens, "rule 3's check of many spans: a call a span vs their cover's scan" },
};

#define NR_CMDS (sizeof(cmds) / sizeof(cmds[0]))

static void usage(FILE *f)
{
	fprintf(f, "usage: hmirror-bench SUBCOMMAND [--json] [options]\n"
		   "       hmirror-bench SUBCOMMAND --help\n"
		   "Each subcommand compares hmirror against its baseline in the same run\n"
		   "(several rounds, medians, ratios); --json prints one object per line.\n\n"
		   "subcommands:\n");
	for (size_t i = 0; i < NR_CMDS; i++)
		fprintf(f, "  %-10s %s\n", cmds[i].name, cmds[i].what);
}

int main(int argc, char **argv)
{
	if (argc < 2 || !strcmp(argv[1], "--help") || !strcmp(argv[1], "-h") ||
	    !strcmp(argv[1], "help")) {
		usage(argc < 2 ? stderr : stdout);
		return argc < 2 ? 2 : 0;
	}
	if (!strcmp(argv[1], "--list")) {
		for (size_t i = 0; i < NR_CMDS; i++)
			printf("%s\n", cmds[i].name);
		return 0;
	}
	for (size_t i = 0; i < NR_CMDS; i++)
		if (!strcmp(argv[1], cmds[i].name))
			return cmds[i].fn(argc - 1, argv + 1) ? 1 : 0;
	fprintf(stderr, "hmirror-bench: unknown subcommand '%s'\n", argv[1]);
	usage(stderr);
	return 2;
}
