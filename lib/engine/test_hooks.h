/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * Test hooks of the engine: not installed, not exported.  The engine's
 * tests link the library's objects and call these to make a CPU write land
 * at the one moment a rule is about (selftests/engine/engine_test.c).
 */
#ifndef HMIRROR_ENGINE_TEST_HOOKS_H
#define HMIRROR_ENGINE_TEST_HOOKS_H

struct hm_engine;

struct hm_engine_test_hooks {
	/* after an upload's copy completed and before its generations are
	 * checked (a CPU write here must discard it, rule 3) */
	void (*after_upload_copy)(void *arg);
	/* once the table is final, just before the submission */
	void (*before_dispatch)(void *arg);
	void *arg;
};

/* Install h (a copy; NULL: none) on e, before its first dispatch. */
void hm__test_engine_hooks(struct hm_engine *e, const struct hm_engine_test_hooks *h);

#endif /* HMIRROR_ENGINE_TEST_HOOKS_H */
