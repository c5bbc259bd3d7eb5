/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * The helper's REFERENCE forms: not installed, not exported.  Each breaks
 * a rule of the data path (table.rst, "Variants") and exists only so that
 * hmirror-bench lookup can measure what the rule costs, and the tests can
 * check that the bench's programs stay valid; never use one in a real
 * module.  The bench and the tests link the library's objects.
 */
#ifndef HMIRROR_LOOKUP_REFERENCE_H
#define HMIRROR_LOOKUP_REFERENCE_H
#include <stdbool.h>
#include <stdint.h>

#include "hmirror/lookup.h"

/* breaks the helper's one load a slot: two 8-byte loads */
#define HM_LOOKUP_V_REF_SPLIT	(1u << 4)
/* breaks the helper's DontInline: FunctionControl Inline */
#define HM_LOOKUP_V_REF_INLINE	(1u << 5)
#define HM_LOOKUP_V_REFERENCE	(HM_LOOKUP_V_REF_SPLIT | HM_LOOKUP_V_REF_INLINE)
/* every flag hm_spirv_set_lookup_variant() takes */
#define HM_LOOKUP_V_ALL_FORMS	(HM_LOOKUP_V_ALL | HM_LOOKUP_V_REFERENCE)

/* hm_lookup_variants[] holds every named form: the public ones
 * (hm_lookup_nr_variants), then the reference ones; hm__lookup_nr_forms in
 * all. */
extern const unsigned hm__lookup_nr_forms;
/* The form named name (reference ones too), or NULL. */
const struct hm_lookup_variant *hm__lookup_form_by_name(const char *name);

static inline bool hm__lookup_is_reference(uint32_t flags)
{
	return flags & HM_LOOKUP_V_REFERENCE;
}

#endif /* HMIRROR_LOOKUP_REFERENCE_H */
