// SPDX-License-Identifier: GPL-2.0
/*
 * The programs of hmirror-bench lookup (tools/bench/lookup.c, included
 * here for its static builders): valid SPIR-V for Vulkan 1.2 and 1.3, and
 * every chain, raw and through the helper, ends where the host says, on
 * lavapipe with the validation layers on.
 */
#include "kselftest_harness.h"
#include "spv_check.h"
#include "../../tools/bench/lookup.c"

TEST(bench_programs_are_valid)
{
	uint32_t *w;
	size_t n;

	if (!spv_have_val())
		SKIP(return, "spirv-val not installed");
	for (int path = 0; path < 2; path++) {
		for (int op = 0; op < NR_OPS; op++) {
			ASSERT_EQ(0, build(path, op, &w, &n));
			ASSERT_EQ(0, spv_validate(w, n, "vulkan1.2"));
			ASSERT_EQ(0, spv_validate(w, n, "vulkan1.3"));
			free(w);
		}
	}
	ASSERT_EQ(0, build_touch(&w, &n));
	ASSERT_EQ(0, spv_validate(w, n, "vulkan1.2"));
	ASSERT_EQ(0, spv_validate(w, n, "vulkan1.3"));
	free(w);
}

TEST(bench_chains_end_where_they_should)
{
	struct bench b = { .rounds = 1, .nr_lanes = GROUPS * LANES, .flush_mib = 16 };
	struct hm_vk_params vp = { .validation = 1 };
	struct hm_vk_pipeline pipes[2][NR_OPS];
	int r = hm_vk_new(&vp, &b.vk);
	double ns;

	if (r == -EOPNOTSUPP || r == -ENODEV || r == -ENXIO)
		SKIP(return, "no Vulkan device with validation layers (%d)", r);
	ASSERT_EQ(0, r);
	memset(pipes, 0, sizeof(pipes));
	ASSERT_EQ(0, setup(&b));
	for (int path = 0; path < 2; path++) {
		for (int op = 0; op < NR_OPS; op++) {
			uint32_t *w;
			size_t n;

			ASSERT_EQ(0, build(path, op, &w, &n));
			ASSERT_EQ(0, hm_vk_pipeline_new(b.vk, w, n, "main", 4 * PUSH_WORDS,
							&pipes[path][op]));
			free(w);
		}
	}
	for (int data = 0; data < 2; data++) {
		ASSERT_EQ(0, point_tables(&b, data));
		for (int fp = 0; fp < 2; fp++) {
			/* measure() checks every lane's end offset (-EIO otherwise) */
			ASSERT_EQ(0, measure(&b, &pipes[PATH_RAW][OP_LOAD], PATH_RAW, data, 0,
					     fp == 0, &ns));
			for (int op = 0; op < NR_OPS; op++)
				ASSERT_EQ(0, measure(&b, &pipes[PATH_HELPER][op], PATH_HELPER, data,
						     op == OP_STORE_MARK, fp == 0, &ns));
		}
	}
	/* stores with marks marked slots; none landed in the sink */
	ASSERT_EQ(0, ((uint32_t *)b.marks_mem)[HM_MARK_SINK]);
	ASSERT_GT(hm_marks_scan(b.marks_mem, hm_table_nr_slots_for(b.nr_home), NULL, NULL), 0);
	if (hm_vk_validation_count(b.vk))
		TH_LOG("validation: %s", b.vk->last_message);
	ASSERT_EQ(0, hm_vk_validation_count(b.vk));
	for (int path = 0; path < 2; path++)
		for (int op = 0; op < NR_OPS; op++)
			hm_vk_pipeline_free(b.vk, &pipes[path][op]);
	teardown(&b);
}

TEST_HARNESS_MAIN
