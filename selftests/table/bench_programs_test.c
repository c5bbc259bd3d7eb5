// SPDX-License-Identifier: GPL-2.0
/*
 * The programs of hmirror-bench lookup (tools/bench/lookup.c, linked in;
 * tools/bench/lookup_bench.h): valid SPIR-V for Vulkan 1.2 and 1.3, and
 * every chain, raw (plain and with the call site's guard) and through the
 * helper in every emission variant, ends where the host says, for both
 * tables (a new chunk every step, one chunk), on lavapipe with the
 * validation layers on.
 */
#include <stdlib.h>
#include <string.h>

#include "kselftest_harness.h"
#include "spv_check.h"
#include "hmirror/lookup.h"
#include "hmirror/table.h"
#include "../../lib/lookup_reference.h"
#include "../../tools/bench/lookup_bench.h"

/* every form's chain on lavapipe, shared with other jobs: more than the
 * harness's 30 s */
#undef TEST_TIMEOUT_DEFAULT
#define TEST_TIMEOUT_DEFAULT 300

TEST(bench_programs_are_valid)
{
	uint32_t *w;
	size_t n;

	if (!spv_have_val())
		SKIP(return, "spirv-val not installed");
	for (int path = 0; path < NR_PATHS; path++) {
		for (int op = 0; op < NR_OPS; op++) {
			if (!lk_path_has_op(path, op)) {
				/* load-only paths refuse a store program */
				ASSERT_EQ(-EINVAL, lk_build(path, op, HM_LOOKUP_DEFAULT_VARIANT, &w, &n));
				continue;
			}
			ASSERT_EQ(0, lk_build(path, op, HM_LOOKUP_DEFAULT_VARIANT, &w, &n))
				TH_LOG("path %s", lk_path_name[path]);
			ASSERT_EQ(0, spv_validate(w, n, "vulkan1.2"));
			ASSERT_EQ(0, spv_validate(w, n, "vulkan1.3"));
			free(w);
		}
	}
	for (unsigned v = 0; v < hm__lookup_nr_forms; v++) {
		for (int op = 0; op < NR_OPS; op++) {
			ASSERT_EQ(0, lk_build(PATH_HELPER, op, hm_lookup_variants[v].flags, &w, &n));
			ASSERT_EQ(0, spv_validate(w, n, "vulkan1.2")) TH_LOG("%s", hm_lookup_variants[v].name);
			ASSERT_EQ(0, spv_validate(w, n, "vulkan1.3"));
			free(w);
		}
	}
	/* the compile-time modules: straight-line accesses of every form */
	for (unsigned f = 0; f < NR_COMPILE_FORMS; f++) {
		ASSERT_EQ(0, lk_build_sites(lk_compile_forms[f].path, lk_compile_forms[f].flags, 3, 7, &w, &n));
		ASSERT_EQ(0, spv_validate(w, n, "vulkan1.2")) TH_LOG("%s", lk_compile_forms[f].name);
		ASSERT_EQ(0, spv_validate(w, n, "vulkan1.3"));
		free(w);
	}
	ASSERT_EQ(-EINVAL, lk_build_sites(PATH_RAW_GUARD + 100, 0, 3, 7, &w, &n));
	ASSERT_EQ(0, lk_build_touch(&w, &n));
	ASSERT_EQ(0, spv_validate(w, n, "vulkan1.2"));
	ASSERT_EQ(0, spv_validate(w, n, "vulkan1.3"));
	free(w);
}

TEST(bench_chains_end_where_they_should)
{
	struct bench b = { .rounds = 1, .nr_lanes = GROUPS * LANES, .flush_mib = 16 };
	struct hm_vk_params vp = { .validation = 1 };
	struct hm_vk_pipeline pipes[NR_PATHS][NR_OPS];
	int r = hm_vk_new(&vp, &b.vk);
	double ns;

	if (r == -EOPNOTSUPP || r == -ENODEV || r == -ENXIO)
		SKIP(return, "no Vulkan device with validation layers (%d)", r);
	ASSERT_EQ(0, r);
	memset(pipes, 0, sizeof(pipes));
	ASSERT_EQ(0, lk_setup(&b));
	/* the bench's table is a power of two, so that every variant runs on it */
	ASSERT_EQ(0, b.nr_home & (b.nr_home - 1));
	for (int path = 0; path < NR_PATHS; path++)
		for (int op = 0; op < NR_OPS; op++)
			if (lk_path_has_op(path, op))
				ASSERT_EQ(0, lk_make_pipe(&b, path, op, HM_LOOKUP_DEFAULT_VARIANT,
						       &pipes[path][op]));
	for (int data = 0; data < 2; data++) {
		ASSERT_EQ(0, lk_point_tables(&b, data));
		for (int fp = 0; fp < 2; fp++) {
			/* lk_measure() checks every lane's end offset (-EIO otherwise) */
			ASSERT_EQ(0, lk_measure(&b, &pipes[PATH_RAW][OP_LOAD], PATH_RAW, data, 0,
					     fp == 0, &ns));
			ASSERT_EQ(0, lk_measure(&b, &pipes[PATH_RAW_GUARD][OP_LOAD], PATH_RAW_GUARD, data, 0,
					     fp == 0, &ns));
			for (int op = 0; op < NR_OPS; op++)
				ASSERT_EQ(0, lk_measure(&b, &pipes[PATH_HELPER][op], PATH_HELPER, data,
						     op == OP_STORE_MARK, fp == 0, &ns));
			/* the one-chunk table */
			ASSERT_EQ(0, lk_measure(&b, &pipes[PATH_HELPER][OP_LOAD], PATH_HELPER, data, 2,
					     fp == 0, &ns));
			/* the flat arrays, both chunk sizes; the call site with
			 * the guard as selects; the speculative call site when
			 * every guess is right and when every guess misses (the
			 * word beside the chain's: the helper's answer must win) */
			for (int table = 0; table <= 2; table += 2) {
				ASSERT_EQ(0, lk_measure(&b, &pipes[PATH_FLAT][OP_LOAD], PATH_FLAT, data,
						     table, fp == 0, &ns));
				ASSERT_EQ(0, lk_measure(&b, &pipes[PATH_SELGUARD][OP_LOAD], PATH_SELGUARD,
						     data, table, fp == 0, &ns));
				for (b.spec_skew = 0; b.spec_skew <= 8; b.spec_skew += 8) {
					for (int sp = PATH_SPEC; sp < NR_PATHS; sp++) {
						/* mmu has no confirmation: its guess is
						 * its answer */
						if (sp == PATH_SELGUARD ||
						    (sp == PATH_MMU && b.spec_skew))
							continue;
						ASSERT_EQ(0, lk_measure(&b, &pipes[sp][OP_LOAD], sp, data,
								     table, fp == 0, &ns))
							TH_LOG("%s, skew %u", lk_path_name[sp],
							       b.spec_skew);
					}
				}
				b.spec_skew = 0;
			}
		}
	}
	/* every variant's chain, both tables, both footprints (device data) */
	ASSERT_EQ(0, lk_point_tables(&b, 0));
	for (unsigned v = 0; v < hm__lookup_nr_forms; v++) {
		struct hm_vk_pipeline p;

		ASSERT_EQ(0, lk_make_pipe(&b, PATH_HELPER, OP_LOAD, hm_lookup_variants[v].flags, &p));
		for (int fp = 0; fp < 2; fp++)
			for (int table = 0; table <= 2; table += 2)
				ASSERT_EQ(0, lk_measure(&b, &p, PATH_HELPER, 0, table, fp == 0, &ns))
					TH_LOG("variant %s", hm_lookup_variants[v].name);
		hm_vk_pipeline_free(b.vk, &p);
	}
	/* every form of the variants section, every configuration (the wide
	 * touch included); lk_measure_vconf() answers -EIO for a wrong chain */
	for (unsigned x = 0; x < NR_EXTRA_FORMS; x++) {
		const struct vform *f = &lk_extra_forms[x];
		struct hm_vk_pipeline p;

		ASSERT_EQ(0, lk_make_pipe(&b, f->path, OP_LOAD, f->flags, &p));
		for (unsigned vc = 0; vc < NR_VCONFS; vc++) {
			if (lk_vconfs[vc].op != OP_LOAD)
				continue;
			ASSERT_EQ(0, lk_measure_vconf(&b, &lk_vconfs[vc], &p, f->path, f->spec_skew, &ns))
				TH_LOG("%s %s", f->name, lk_vconfs[vc].name);
		}
		hm_vk_pipeline_free(b.vk, &p);
	}
	/* the compile-time section builds a pipeline of every form */
	ASSERT_EQ(0, lk_run_compile(&b, "2,5"));
	ASSERT_EQ(-EINVAL, lk_run_compile(&b, "0"));
	/* stores with marks marked slots; none landed in the sink */
	ASSERT_EQ(0, ((uint32_t *)b.marks_mem)[HM_MARK_SINK]);
	ASSERT_GT(hm_marks_scan(b.marks_mem, hm_table_nr_slots_for(b.nr_home), NULL, NULL), 0);
	if (hm_vk_validation_count(b.vk))
		TH_LOG("validation: %s", b.vk->last_message);
	ASSERT_EQ(0, hm_vk_validation_count(b.vk));
	for (int path = 0; path < NR_PATHS; path++)
		for (int op = 0; op < NR_OPS; op++)
			hm_vk_pipeline_free(b.vk, &pipes[path][op]);
	lk_teardown(&b);
}

TEST_HARNESS_MAIN
