/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * The module builder's state (lib/lookup_spirv.c), shared with the linker
 * (lib/lookup_link.c), which fills a builder from an existing module.
 */
#ifndef HMIRROR_LOOKUP_INTERNAL_H
#define HMIRROR_LOOKUP_INTERNAL_H
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "hmirror/lookup.h"

#define HM_SPIRV_VERSION_1_3	0x00010300u
#define HM_SPIRV_VERSION_1_5	0x00010500u
#define HM_SPIRV_VERSION_1_6	0x00010600u

struct spv_buf {
	uint32_t *w;
	size_t n, cap;
};

/* A deduplicated declaration: (op, operands) was declared as id. */
struct spv_key {
	uint32_t id;
	uint16_t op;
	uint16_t n;
	uint32_t *w;     /* operands (result type first for constants) */
};

struct hm_spirv_module {
	struct spv_buf sec[HM_SPV_NR_SECTIONS];
	struct spv_key *keys;
	size_t nr_keys, cap_keys;
	uint32_t bound;
	uint32_t version;       /* of the module written (header word 1) */
	int err;
	uint32_t lookup_fn;
	uint32_t load_fn[HM_ACCESS_MAX_BYTES / 4];     /* compact form, by width */
	uint32_t load_spec_fn[HM_ACCESS_MAX_BYTES / 4]; /* speculative form */
	uint32_t variant;       /* HM_LOOKUP_V_* of the helper */
	size_t total;
};

/* Whether (op, operands) is declared; and declare that it is, as id (a
 * module's own declaration, adopted by the linker: the first one of each
 * stays the one the builder uses). */
bool hm_spirv_known(const struct hm_spirv_module *m, uint16_t op, const uint32_t *w, size_t n);
int  hm_spirv_adopt_key(struct hm_spirv_module *m, uint16_t op, const uint32_t *w, size_t n,
			uint32_t id);

/* Does the OpName string at w (n words) name a load function
 * (hm_load.compact.N, hm_load.spec.N)?  Its form (0 compact, 1 spec) and N. */
bool hm_spirv_load_name(const uint32_t *w, size_t n, int *ret_form, uint32_t *ret_words);

#endif /* HMIRROR_LOOKUP_INTERNAL_H */
