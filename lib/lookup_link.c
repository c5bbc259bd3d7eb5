// SPDX-License-Identifier: LGPL-2.1-or-later
/*
 * Linking a finished module against the lookup helper, in C, at run time
 * (hm_spirv_link_lookup(), hmirror/lookup.h): the module is read into the
 * builder of lib/lookup_spirv.c section by section, its types and
 * constants adopted so that the helper reuses them (SPIR-V forbids a
 * second declaration of the same scalar type), the helper is written, and
 * its import or its GLSL stand-in is rewired to it.  What spirv-link does
 * for this one function, without SPIRV-Tools' C++ linker.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <spirv/unified1/spirv.h>

#include "hmirror/lookup.h"
#include "lookup_internal.h"

enum {
	OP_SOURCE_CONTINUED = 2, OP_SOURCE = 3, OP_SOURCE_EXTENSION = 4, OP_NAME = 5,
	OP_MEMBER_NAME = 6, OP_STRING = 7, OP_LINE = 8, OP_EXTENSION = 10,
	OP_EXT_INST_IMPORT = 11, OP_MEMORY_MODEL = 14,
	OP_ENTRY_POINT = 15, OP_EXECUTION_MODE = 16, OP_CAPABILITY = 17,
	OP_TYPE_VOID = 19, OP_TYPE_BOOL = 20, OP_TYPE_INT = 21, OP_TYPE_VECTOR = 23,
	OP_TYPE_STRUCT = 30, OP_TYPE_POINTER = 32, OP_TYPE_FUNCTION = 33,
	OP_CONSTANT_TRUE = 41, OP_CONSTANT_FALSE = 42, OP_CONSTANT = 43,
	OP_FUNCTION = 54, OP_FUNCTION_PARAMETER = 55, OP_FUNCTION_END = 56,
	OP_FUNCTION_CALL = 57, OP_LOAD = 61, OP_STORE = 62,
	OP_DECORATE = 71, OP_MEMBER_DECORATE = 72,
	OP_DECORATION_GROUP = 73, OP_GROUP_DECORATE = 74, OP_GROUP_MEMBER_DECORATE = 75,
	OP_COMPOSITE_CONSTRUCT = 80, OP_COMPOSITE_EXTRACT = 81, OP_LABEL = 248,
	OP_COPY_MEMORY = 63, OP_CONTROL_BARRIER = 224, OP_MEMORY_BARRIER = 225,
	OP_ATOMIC_STORE = 228, OP_LOOP_MERGE = 246, OP_SELECTION_MERGE = 247,
	OP_BRANCH = 249, OP_BRANCH_CONDITIONAL = 250, OP_SWITCH = 251, OP_KILL = 252,
	OP_RETURN = 253, OP_RETURN_VALUE = 254, OP_UNREACHABLE = 255, OP_NO_LINE = 317,
	OP_MODULE_PROCESSED = 330, OP_EXECUTION_MODE_ID = 331, OP_DECORATE_ID = 332,
	OP_DECORATE_STRING = 5632, OP_MEMBER_DECORATE_STRING = 5633,
};

#define DECORATION_LINKAGE_ATTRIBUTES	41
#define LINKAGE_IMPORT			1
#define ADDRESSING_LOGICAL		0
#define SPIRV_MAGIC			0x07230203u
#define HM_RELINK_MAX_HELPERS		8

struct ptr_type {
	uint32_t id, storage, pointee;
};

struct link {
	const uint32_t *w;
	size_t nr;
	size_t first_fn;                /* word index of the first OpFunction */
	uint32_t import_id;             /* the Import of hm_lookup, 0 if none */
	uint32_t import_fnty;
	uint32_t stub_id;               /* the GLSL stand-in, 0 if none */
	uint32_t stub_rtype;
	struct load_stub {              /* hm_loadN_stub of hmirror/lookup.glsl */
		uint32_t id, rtype, words;
	} loads[HM_ACCESS_MAX_BYTES / 4];
	unsigned nr_loads;
	unsigned other_linkage;         /* linkage decorations that stay */
	uint32_t *gone;                 /* ids the link removes */
	size_t nr_gone, cap_gone;
	uint32_t *decorated;            /* ids some decoration targets */
	size_t nr_decorated, cap_decorated;
	struct ptr_type *ptrs;
	size_t nr_ptrs, cap_ptrs;
	/* the re-link: the library's functions the module holds, by form
	 * (compact, speculative) and width, and its helpers */
	uint32_t rl_load[2][HM_ACCESS_MAX_BYTES / 4];
	uint32_t rl_helper[HM_RELINK_MAX_HELPERS];
	unsigned nr_rl_helper;
};

static int push_id(uint32_t **a, size_t *n, size_t *cap, uint32_t id)
{
	if (*n == *cap) {
		size_t c = *cap ? *cap * 2 : 16;
		uint32_t *na = realloc(*a, c * sizeof(*na));

		if (!na)
			return -ENOMEM;
		*a = na;
		*cap = c;
	}
	(*a)[(*n)++] = id;
	return 0;
}

static bool has_id(const uint32_t *a, size_t n, uint32_t id)
{
	for (size_t i = 0; i < n; i++)
		if (a[i] == id)
			return true;
	return false;
}

/* The literal string at operand word o of the instruction at i (nr words),
 * or NULL when it is not terminated inside the instruction. */
static const char *inst_string(const uint32_t *w, size_t i, size_t nr, size_t o)
{
	const char *s = (const char *)&w[i + o];
	size_t max = (nr - o) * 4;

	if (o >= nr || !memchr(s, 0, max))
		return NULL;
	return s;
}

static size_t string_words_at(const uint32_t *w, size_t i, size_t nr, size_t o)
{
	const char *s = inst_string(w, i, nr, o);

	return s ? strlen(s) / 4 + 1 : 0;
}

static bool is_debug(uint16_t op)
{
	return op == OP_SOURCE_CONTINUED || op == OP_SOURCE || op == OP_SOURCE_EXTENSION ||
	       op == OP_NAME || op == OP_MEMBER_NAME || op == OP_STRING ||
	       op == OP_MODULE_PROCESSED;
}

static bool is_annotation(uint16_t op)
{
	return op == OP_DECORATE || op == OP_MEMBER_DECORATE || op == OP_DECORATION_GROUP ||
	       op == OP_GROUP_DECORATE || op == OP_GROUP_MEMBER_DECORATE ||
	       op == OP_DECORATE_ID || op == OP_DECORATE_STRING ||
	       op == OP_MEMBER_DECORATE_STRING;
}

/* Is the OpName string at w (n words) one of the library's functions:
 * the helper (HM_LOOKUP_EXPORT_NAME) or a load function? */
static bool library_name(const uint32_t *w, size_t n)
{
	int form;
	uint32_t words;

	if (hm_spirv_load_name(w, n, &form, &words))
		return true;
	return n * 4 > strlen(HM_LOOKUP_EXPORT_NAME) &&
	       !memcmp(w, HM_LOOKUP_EXPORT_NAME, strlen(HM_LOOKUP_EXPORT_NAME) + 1);
}

/* Result id of an instruction of a function body, 0 for none: a label's
 * is its first operand, a value's its second (after the result type); the
 * few without a result that a body like the stand-in's can hold are
 * listed. */
static uint32_t body_result(const uint32_t *w, size_t i, uint16_t op, size_t nr)
{
	switch (op) {
	case OP_LABEL:
		return nr >= 2 ? w[i + 1] : 0;
	case OP_STORE: case OP_RETURN: case OP_RETURN_VALUE: case OP_LINE: case OP_NO_LINE:
	case OP_SELECTION_MERGE: case OP_LOOP_MERGE: case OP_BRANCH:
	case OP_BRANCH_CONDITIONAL: case OP_SWITCH: case OP_KILL: case OP_UNREACHABLE:
	case OP_CONTROL_BARRIER: case OP_MEMORY_BARRIER: case OP_ATOMIC_STORE:
	case OP_COPY_MEMORY:
		return 0;
	default:
		return nr >= 3 ? w[i + 2] : 0;
	}
}

static struct load_stub *load_stub_of(struct link *l, uint32_t id)
{
	for (unsigned i = 0; id && i < l->nr_loads; i++)
		if (l->loads[i].id == id)
			return &l->loads[i];
	return NULL;
}

/* Pass 1: find the import and the stand-in, what the link removes, which
 * ids are decorated, the pointer and result-struct types. */
static int scan(struct link *l)
{
	const uint32_t *w = l->w;
	uint32_t cur_fn = 0;
	bool in_body = false;
	int r;

	l->first_fn = 0;
	for (size_t i = 5; i < l->nr; ) {
		uint16_t op = w[i] & 0xffff, nr = w[i] >> 16;

		if (!nr || i + nr > l->nr)
			return -EBADMSG;
		if (op == OP_DECORATE && nr >= 3 && w[i + 2] == DECORATION_LINKAGE_ATTRIBUTES) {
			const char *s = inst_string(w, i, nr, 3);
			size_t sw = string_words_at(w, i, nr, 3);

			if (!s || 3 + sw >= nr)
				return -EBADMSG;
			if (!strcmp(s, HM_LOOKUP_EXPORT_NAME) && w[i + 3 + sw] == LINKAGE_IMPORT)
				l->import_id = w[i + 1];
			else
				l->other_linkage++;
		} else if (op == OP_NAME && nr >= 3) {
			const char *s = inst_string(w, i, nr, 2);
			size_t k = strlen(HM_LOOKUP_GLSL_STUB);

			unsigned words;
			int end = 0;

			if (s && !strncmp(s, HM_LOOKUP_GLSL_STUB, k) && (s[k] == '(' || !s[k]))
				l->stub_id = w[i + 1];
			/* hm_load<N>_stub: the load stand-ins */
			if (s && sscanf(s, HM_LOAD_GLSL_STUB_FMT "%n", &words, &end) == 1 && end &&
			    (s[end] == '(' || !s[end]) && words >= 1 &&
			    words <= HM_ACCESS_MAX_BYTES / 4) {
				bool dup = false;

				for (unsigned j = 0; j < l->nr_loads; j++)
					dup |= l->loads[j].id == w[i + 1] ||
					       l->loads[j].words == words;
				if (dup || l->nr_loads == HM_ACCESS_MAX_BYTES / 4)
					return -EINVAL;
				l->loads[l->nr_loads++] = (struct load_stub){ w[i + 1], 0, words };
			}
		}
		if (is_annotation(op) && nr >= 2 && op != OP_DECORATION_GROUP) {
			r = push_id(&l->decorated, &l->nr_decorated, &l->cap_decorated, w[i + 1]);
			if (r)
				return r;
		}
		if (op == OP_TYPE_POINTER && nr == 4) {
			if (l->nr_ptrs == l->cap_ptrs) {
				size_t c = l->cap_ptrs ? l->cap_ptrs * 2 : 16;
				struct ptr_type *np = realloc(l->ptrs, c * sizeof(*np));

				if (!np)
					return -ENOMEM;
				l->ptrs = np;
				l->cap_ptrs = c;
			}
			l->ptrs[l->nr_ptrs++] = (struct ptr_type){ w[i + 1], w[i + 2], w[i + 3] };
		}
		if (op == OP_FUNCTION) {
			if (nr != 5)
				return -EBADMSG;
			if (!l->first_fn)
				l->first_fn = i;
			cur_fn = w[i + 2];
			in_body = false;
		} else if (op == OP_FUNCTION_END) {
			cur_fn = 0;
		} else if (cur_fn && op == OP_LABEL) {
			in_body = true;
		}
		i += nr;
	}
	if (!l->first_fn)
		l->first_fn = l->nr;
	/* the declaration and parameters of the import, the stand-in's body */
	for (size_t i = l->first_fn; i < l->nr; i += l->w[i] >> 16) {
		uint16_t op = w[i] & 0xffff, nr = w[i] >> 16;

		if (op == OP_FUNCTION) {
			cur_fn = w[i + 2];
			in_body = false;
			if (cur_fn == l->import_id) {
				l->import_fnty = w[i + 4];
				r = push_id(&l->gone, &l->nr_gone, &l->cap_gone, cur_fn);
				if (r)
					return r;
			}
			if (cur_fn == l->stub_id)
				l->stub_rtype = w[i + 1];
			if (load_stub_of(l, cur_fn))
				load_stub_of(l, cur_fn)->rtype = w[i + 1];
			continue;
		}
		if (op == OP_FUNCTION_END) {
			cur_fn = 0;
			continue;
		}
		if (op == OP_LABEL)
			in_body = true;
		if (cur_fn && cur_fn == l->import_id) {
			if (op == OP_LABEL)
				return -EINVAL;		/* an import has no body */
			if (op == OP_FUNCTION_PARAMETER && nr == 3) {
				r = push_id(&l->gone, &l->nr_gone, &l->cap_gone, w[i + 2]);
				if (r)
					return r;
			}
		} else if (cur_fn && (cur_fn == l->stub_id || load_stub_of(l, cur_fn)) && in_body) {
			uint32_t id = body_result(w, i, op, nr);

			if (id) {
				r = push_id(&l->gone, &l->nr_gone, &l->cap_gone, id);
				if (r)
					return r;
			}
		}
	}
	return 0;
}

static const struct ptr_type *find_ptr(const struct link *l, uint32_t id)
{
	for (size_t i = 0; i < l->nr_ptrs; i++)
		if (l->ptrs[i].id == id)
			return &l->ptrs[i];
	return NULL;
}

/* Adopt a global declaration the builder deduplicates (types, constants). */
static int adopt(struct hm_spirv_module *m, const struct link *l, const uint32_t *w,
		 uint16_t op, uint16_t nr)
{
	switch (op) {
	case OP_TYPE_VOID: case OP_TYPE_BOOL: case OP_TYPE_INT: case OP_TYPE_VECTOR:
	case OP_TYPE_POINTER: case OP_TYPE_FUNCTION:
		return hm_spirv_adopt_key(m, op, w + 2, nr - 2, w[1]);
	case OP_TYPE_STRUCT:
		/* a decorated struct (Block, Offset) is nobody else's */
		if (has_id(l->decorated, l->nr_decorated, w[1]))
			return 0;
		return hm_spirv_adopt_key(m, op, w + 2, nr - 2, w[1]);
	case OP_CONSTANT: case OP_CONSTANT_TRUE: case OP_CONSTANT_FALSE: {
		uint32_t k[nr - 2];

		if (nr < 3)
			return -EBADMSG;
		k[0] = w[1];
		memcpy(k + 1, w + 3, (nr - 3) * sizeof(*k));
		return hm_spirv_adopt_key(m, op, k, nr - 2, w[2]);
	}
	default:
		return 0;
	}
}

/* Whether a debug or annotation instruction names an id the link removes
 * or is the import's linkage. */
static bool dropped(const struct link *l, const uint32_t *w, uint16_t op, uint16_t nr)
{
	if (nr < 2 || op == OP_SOURCE || op == OP_STRING || op == OP_SOURCE_EXTENSION ||
	    op == OP_SOURCE_CONTINUED || op == OP_MODULE_PROCESSED || op == OP_DECORATION_GROUP)
		return false;
	return has_id(l->gone, l->nr_gone, w[1]);
}

/* The stand-in's new body: load the parameters glslang passed by pointer,
 * call the helper, hand its four words back in the stand-in's own type. */
static void write_stub_body(struct hm_spirv_module *m, const struct link *l,
			    const uint32_t *params, const uint32_t *ptypes, uint32_t fn)
{
	const enum hm_spv_section F = HM_SPV_SEC_FUNCTION;
	uint32_t u32 = hm_spirv_type_int(m, 32, false), u64 = hm_spirv_type_int(m, 64, false);
	uint32_t want[5] = { u64, u64, u32, u32, u64 };
	uint32_t args[5], res = hm_spirv_lookup_result_type(m), r, part[4];
	uint32_t call[7];

	HM_SPV(m, F, OP_LABEL, hm_spirv_id(m));
	for (int k = 0; k < 5; k++) {
		const struct ptr_type *p = find_ptr(l, ptypes[k]);

		if (ptypes[k] == want[k]) {
			args[k] = params[k];
		} else if (p && p->storage == SpvStorageClassFunction && p->pointee == want[k]) {
			args[k] = HM_SPV_OP(m, F, OP_LOAD, want[k], params[k]);
		} else {
			m->err = m->err ? m->err : -EINVAL;
			return;
		}
	}
	call[0] = fn;
	memcpy(call + 1, args, sizeof(args));
	r = hm_spirv_op(m, F, OP_FUNCTION_CALL, res, call, 6);
	if (l->stub_rtype != res) {
		for (uint32_t k = 0; k < 4; k++)
			part[k] = HM_SPV_OP(m, F, OP_COMPOSITE_EXTRACT, u32, r, k);
		r = hm_spirv_op(m, F, OP_COMPOSITE_CONSTRUCT, l->stub_rtype, part, 4);
	}
	HM_SPV(m, F, OP_RETURN_VALUE, r);
}

/* The words of a load stand-in's return type, or 0 where it is not one of
 * u32, a vector of u32 or a struct of u32 of that many words. */
static uint32_t load_rtype_words(const struct link *l, uint32_t rtype, uint32_t u32,
				 bool *is_vector)
{
	const uint32_t *w = l->w;

	*is_vector = false;
	if (rtype == u32)
		return 1;
	for (size_t i = 5; i < l->first_fn; i += w[i] >> 16) {
		uint16_t op = w[i] & 0xffff, nr = w[i] >> 16;

		if (nr < 2 || w[i + 1] != rtype)
			continue;
		if (op == OP_TYPE_VECTOR && nr == 4 && w[i + 2] == u32) {
			*is_vector = true;
			return w[i + 3];
		}
		if (op == OP_TYPE_STRUCT) {
			for (uint16_t k = 2; k < nr; k++)
				if (w[i + k] != u32)
					return 0;
			return nr - 2;
		}
	}
	return 0;
}

/* A load stand-in's new body: load the eight parameters glslang passed by
 * pointer, call the load function, its words back in the stand-in's type. */
static void write_load_stub_body(struct hm_spirv_module *m, const struct link *l,
				 const struct load_stub *ls, const uint32_t *params,
				 const uint32_t *ptypes)
{
	const enum hm_spv_section F = HM_SPV_SEC_FUNCTION;
	uint32_t u32 = hm_spirv_type_int(m, 32, false), u64 = hm_spirv_type_int(m, 64, false);
	uint32_t want[8] = { u64, u64, u32, u32, u64, u64, u64, u64 };
	uint32_t call[9], part[HM_ACCESS_MAX_BYTES / 4], res, r;
	bool vec;

	call[0] = hm_spirv_load_fn(m, ls->words);
	res = hm_spirv_load_result_type(m, ls->words);
	if (!call[0] || !res || load_rtype_words(l, ls->rtype, u32, &vec) != ls->words) {
		m->err = m->err ? m->err : -EINVAL;
		return;
	}
	HM_SPV(m, F, OP_LABEL, hm_spirv_id(m));
	for (int k = 0; k < 8; k++) {
		const struct ptr_type *p = find_ptr(l, ptypes[k]);

		if (ptypes[k] == want[k]) {
			call[1 + k] = params[k];
		} else if (p && p->storage == SpvStorageClassFunction && p->pointee == want[k]) {
			call[1 + k] = HM_SPV_OP(m, F, OP_LOAD, want[k], params[k]);
		} else {
			m->err = m->err ? m->err : -EINVAL;
			return;
		}
	}
	r = hm_spirv_op(m, F, OP_FUNCTION_CALL, res, call, 9);
	if (ls->rtype != res) {
		for (uint32_t k = 0; k < ls->words; k++)
			part[k] = HM_SPV_OP(m, F, OP_COMPOSITE_EXTRACT, u32, r, k);
		r = ls->words == 1 && !vec ? part[0] :
			hm_spirv_op(m, F, OP_COMPOSITE_CONSTRUCT, ls->rtype, part, ls->words);
	}
	HM_SPV(m, F, OP_RETURN_VALUE, r);
}

/* Everything before the first function, in its section; the memory model
 * made PhysicalStorageBuffer64 (the helper needs 64-bit physical pointers;
 * a logical module gets them).  relink: every name of the library's
 * functions goes (the builder writes its own). */
static int copy_globals(struct hm_spirv_module *m, struct link *l, bool relink)
{
	const uint32_t *w = l->w;
	uint32_t addressing = ADDRESSING_LOGICAL, model = SpvMemoryModelGLSL450;
	int r;

	for (size_t i = 5; i < l->first_fn; i += w[i] >> 16) {
		uint16_t op = w[i] & 0xffff, nr = w[i] >> 16;
		enum hm_spv_section sec;

		if (op == OP_CAPABILITY && nr == 2) {
			if (w[i + 1] != SpvCapabilityLinkage || l->other_linkage)
				hm_spirv_capability(m, w[i + 1]);
			continue;
		}
		if (op == OP_EXTENSION) {
			const char *s = inst_string(w, i, nr, 1);

			if (!s)
				return -EBADMSG;
			hm_spirv_extension(m, s);
			continue;
		}
		if (op == OP_MEMORY_MODEL && nr == 3) {
			addressing = w[i + 1];
			model = w[i + 2];
			continue;
		}
		if (op == OP_EXT_INST_IMPORT)
			sec = HM_SPV_SEC_EXT_IMPORT;
		else if (op == OP_ENTRY_POINT)
			sec = HM_SPV_SEC_ENTRY_POINT;
		else if (op == OP_EXECUTION_MODE || op == OP_EXECUTION_MODE_ID)
			sec = HM_SPV_SEC_EXEC_MODE;
		else if (is_debug(op))
			sec = HM_SPV_SEC_DEBUG;
		else if (is_annotation(op))
			sec = HM_SPV_SEC_ANNOTATION;
		else
			sec = HM_SPV_SEC_GLOBAL;
		if (sec == HM_SPV_SEC_DEBUG || sec == HM_SPV_SEC_ANNOTATION) {
			if (dropped(l, w + i, op, nr))
				continue;
			/* a linked module has no stand-in left to link again */
			if (op == OP_NAME && ((l->stub_id && w[i + 1] == l->stub_id) ||
					      load_stub_of(l, w[i + 1])))
				continue;
			if (op == OP_DECORATE && nr >= 3 &&
			    w[i + 2] == DECORATION_LINKAGE_ATTRIBUTES && w[i + 1] == l->import_id)
				continue;
			if (relink && op == OP_NAME && nr >= 3 && library_name(w + i + 2, nr - 2))
				continue;
		}
		if (sec == HM_SPV_SEC_GLOBAL) {
			r = adopt(m, l, w + i, op, nr);
			if (r)
				return r;
		}
		hm_spirv_inst(m, sec, op, w + i + 1, nr - 1);
	}
	if (addressing != ADDRESSING_LOGICAL &&
	    addressing != SpvAddressingModelPhysicalStorageBuffer64)
		return -ENOTSUP;
	m->sec[HM_SPV_SEC_MEMORY_MODEL].n = 0;
	HM_SPV(m, HM_SPV_SEC_MEMORY_MODEL, OP_MEMORY_MODEL,
	       SpvAddressingModelPhysicalStorageBuffer64, model);
	return m->err;
}

static int copy_module(struct hm_spirv_module *m, struct link *l, uint32_t variant)
{
	const uint32_t *w = l->w;
	uint32_t fn, res, u32;
	int r;

	r = copy_globals(m, l, false);
	if (r)
		return r;
	r = hm_spirv_set_lookup_variant(m, variant);
	if (r)
		return r;
	fn = hm_spirv_lookup_fn(m);
	res = hm_spirv_lookup_result_type(m);
	u32 = hm_spirv_type_int(m, 32, false);
	if (!fn)
		return m->err ? m->err : -EINVAL;
	if (l->import_id && l->import_fnty != hm_spirv_lookup_fn_type(m))
		return -EINVAL;
	if (l->stub_id && l->stub_rtype != res) {
		/* a struct of four u32 of the module's own (checked member-wise) */
		bool ok = false;

		for (size_t i = 5; i < l->first_fn && !ok; i += w[i] >> 16)
			if ((w[i] & 0xffff) == OP_TYPE_STRUCT && w[i] >> 16 == 6 &&
			    w[i + 1] == l->stub_rtype)
				ok = w[i + 2] == u32 && w[i + 3] == u32 &&
				     w[i + 4] == u32 && w[i + 5] == u32;
		if (!ok)
			return -EINVAL;
	}

	/* the functions: the import's declaration goes, the stand-in gets its
	 * new body, calls of the import call the helper */
	uint32_t cur = 0, params[8], ptypes[8];
	unsigned nr_params = 0;
	bool skipping = false;
	struct load_stub *ls = NULL;

	for (size_t i = l->first_fn; i < l->nr; i += w[i] >> 16) {
		uint16_t op = w[i] & 0xffff, nr = w[i] >> 16;

		if (op == OP_FUNCTION) {
			cur = w[i + 2];
			nr_params = 0;
			skipping = cur == l->import_id;
			ls = load_stub_of(l, cur);
		}
		if (ls) {
			if (op == OP_FUNCTION_PARAMETER && nr == 3) {
				if (nr_params == 8)
					return -EINVAL;
				ptypes[nr_params] = w[i + 1];
				params[nr_params++] = w[i + 2];
			} else if (op == OP_FUNCTION_END) {
				if (nr_params != 8)
					return -EINVAL;
				write_load_stub_body(m, l, ls, params, ptypes);
				if (m->err)
					return m->err;
			} else if (op != OP_FUNCTION) {
				continue;	/* the old body */
			}
			hm_spirv_inst(m, HM_SPV_SEC_FUNCTION, op, w + i + 1, nr - 1);
			if (op == OP_FUNCTION_END)
				ls = NULL;
			continue;
		}
		if (skipping) {
			if (op == OP_FUNCTION_END)
				skipping = false;
			continue;
		}
		if (cur && cur == l->stub_id) {
			if (op == OP_FUNCTION_PARAMETER && nr == 3) {
				if (nr_params == 5)
					return -EINVAL;
				ptypes[nr_params] = w[i + 1];
				params[nr_params++] = w[i + 2];
			} else if (op == OP_FUNCTION_END) {
				if (nr_params != 5)
					return -EINVAL;
				write_stub_body(m, l, params, ptypes, fn);
				if (m->err)
					return m->err;
			} else if (op != OP_FUNCTION) {
				continue;	/* the old body */
			}
		}
		if (op == OP_FUNCTION_CALL && nr >= 4 && w[i + 3] == l->import_id && l->import_id) {
			uint32_t o[nr - 1];

			memcpy(o, w + i + 1, (nr - 1) * sizeof(*o));
			o[2] = fn;
			hm_spirv_inst(m, HM_SPV_SEC_FUNCTION, op, o, nr - 1);
			continue;
		}
		hm_spirv_inst(m, HM_SPV_SEC_FUNCTION, op, w + i + 1, nr - 1);
	}
	return m->err;
}

int hm_spirv_link_lookup(const uint32_t *words, size_t nr_words, uint32_t variant,
			 uint32_t **ret_words, size_t *ret_nr)
{
	struct link l = { .w = words, .nr = nr_words };
	struct hm_spirv_module *m = NULL;
	int r;

	if (!ret_words || !ret_nr)
		return -EINVAL;
	*ret_words = NULL;
	*ret_nr = 0;
	if (!words || nr_words < 5 || nr_words > HM_SPV_MAX_WORDS || words[0] != SPIRV_MAGIC)
		return -EBADMSG;
	if (words[3] == 0 || words[3] > HM_SPV_MAX_WORDS)
		return -EBADMSG;
	if (words[1] < HM_SPIRV_VERSION_1_3 || words[1] > HM_SPIRV_VERSION_1_6)
		return -ENOTSUP;
	r = scan(&l);
	if (r)
		goto out;
	if (!l.import_id && !l.stub_id && !l.nr_loads) {
		r = -ENOENT;
		goto out;
	}
	r = hm_spirv_module_new(&m);
	if (r)
		goto out;
	m->bound = words[3];
	m->version = words[1];
	r = copy_module(m, &l, variant);
	if (!r)
		r = hm_spirv_module_finish(m, ret_words, ret_nr);
out:
	hm_spirv_module_free(m);
	free(l.gone);
	free(l.decorated);
	free(l.ptrs);
	return r;
}

/* ---- the re-link ---------------------------------------------------------- */

/* Which of the library's functions id is: 1 a helper, 2 + 16 form + (N - 1)
 * a load function, 0 none. */
static unsigned relink_kind(const struct link *l, uint32_t id)
{
	for (unsigned i = 0; id && i < l->nr_rl_helper; i++)
		if (l->rl_helper[i] == id)
			return 1;
	for (unsigned f = 0; id && f < 2; f++)
		for (unsigned k = 0; k < HM_ACCESS_MAX_BYTES / 4; k++)
			if (l->rl_load[f][k] == id)
				return 2 + 16 * f + k;
	return 0;
}

static int add_helper(struct link *l, uint32_t id)
{
	if (relink_kind(l, id))
		return relink_kind(l, id) == 1 ? 0 : -EINVAL;
	if (l->nr_rl_helper == HM_RELINK_MAX_HELPERS)
		return -EINVAL;
	l->rl_helper[l->nr_rl_helper++] = id;
	return 0;
}

/*
 * Pass 1 of the re-link: the library's functions by their names (a load
 * function's, the helper's), the functions the load functions call (the
 * helper they were linked with), the ids of their bodies (which go), and
 * what adopt() needs.
 */
static int relink_scan(struct link *l)
{
	const uint32_t *w = l->w;
	int r;

	for (size_t i = 5; i < l->nr; i += w[i] >> 16) {
		uint16_t op = w[i] & 0xffff, nr = w[i] >> 16;
		int form;
		uint32_t words;

		if (!nr || i + nr > l->nr)
			return -EBADMSG;
		if (op == OP_FUNCTION) {
			l->first_fn = i;
			break;
		}
		if (op == OP_NAME && nr >= 3 && hm_spirv_load_name(w + i + 2, nr - 2, &form, &words)) {
			if (l->rl_load[form][words - 1] || relink_kind(l, w[i + 1]))
				return -EINVAL;		/* two functions of one name */
			l->rl_load[form][words - 1] = w[i + 1];
		} else if (op == OP_NAME && nr >= 3 && library_name(w + i + 2, nr - 2)) {
			r = add_helper(l, w[i + 1]);
			if (r)
				return r;
		}
		if (is_annotation(op) && nr >= 2 && op != OP_DECORATION_GROUP) {
			r = push_id(&l->decorated, &l->nr_decorated, &l->cap_decorated, w[i + 1]);
			if (r)
				return r;
		}
	}
	if (!l->first_fn)
		l->first_fn = l->nr;
	for (size_t i = 5; i < l->first_fn; i += w[i] >> 16)
		if ((w[i] & 0xffff) == OP_ENTRY_POINT && (w[i] >> 16) >= 3 &&
		    relink_kind(l, w[i + 2]))
			return -EINVAL;			/* an entry point of that name */
	/* what the load functions call is their helper */
	for (size_t i = l->first_fn, cur = 0; i < l->nr; i += w[i] >> 16) {
		uint16_t op = w[i] & 0xffff, nr = w[i] >> 16;

		if (!nr || i + nr > l->nr)
			return -EBADMSG;
		if (op == OP_FUNCTION && nr >= 3)
			cur = relink_kind(l, w[i + 2]) >= 2;
		else if (op == OP_FUNCTION_END)
			cur = 0;
		else if (cur && op == OP_FUNCTION_CALL && nr >= 4) {
			r = add_helper(l, w[i + 3]);
			if (r)
				return r;
		}
	}
	/* the replaced functions' ids go, with their names and decorations */
	for (size_t i = l->first_fn, cur = 0; i < l->nr; i += w[i] >> 16) {
		uint16_t op = w[i] & 0xffff, nr = w[i] >> 16;
		uint32_t id = 0;

		if (op == OP_FUNCTION && nr >= 3) {
			cur = relink_kind(l, w[i + 2]) != 0;
			id = cur ? w[i + 2] : 0;
		} else if (op == OP_FUNCTION_END) {
			cur = 0;
		} else if (cur) {
			id = body_result(w, i, op, nr);
		}
		if (id) {
			r = push_id(&l->gone, &l->nr_gone, &l->cap_gone, id);
			if (r)
				return r;
		}
	}
	return 0;
}

/* A replaced function's type must be the library's: the module's calls of
 * it were validated against that type, and now call the library's. */
static bool relink_type_ok(struct hm_spirv_module *m, unsigned kind, const uint32_t *fw)
{
	uint32_t u32 = hm_spirv_type_int(m, 32, false), u64 = hm_spirv_type_int(m, 64, false);
	uint32_t params[8] = { u64, u64, u32, u32, u64, u64, u64, u64 };
	uint32_t words = (kind - 2) % 16 + 1, res;

	if (kind == 1)
		return fw[1] == hm_spirv_lookup_result_type(m) &&
		       fw[4] == hm_spirv_lookup_fn_type(m);
	res = hm_spirv_load_result_type(m, words);
	return fw[1] == res && fw[4] == hm_spirv_type_function(m, res, params, 8);
}

int hm_spirv_relink_lookup(const uint32_t *words, size_t nr_words, uint32_t variant,
			   uint32_t **ret_words, size_t *ret_nr, struct hm_spirv_relinked *ret_fns)
{
	struct link l = { .w = words, .nr = nr_words };
	struct hm_spirv_module *m = NULL;
	const uint32_t *w = words;
	bool skipping = false;
	int r;

	if (!ret_words || !ret_nr || !ret_fns)
		return -EINVAL;
	*ret_words = NULL;
	*ret_nr = 0;
	memset(ret_fns, 0, sizeof(*ret_fns));
	if (!words || nr_words < 5 || nr_words > HM_SPV_MAX_WORDS || words[0] != SPIRV_MAGIC)
		return -EBADMSG;
	if (words[3] == 0 || words[3] > HM_SPV_MAX_WORDS)
		return -EBADMSG;
	if (words[1] < HM_SPIRV_VERSION_1_3 || words[1] > HM_SPIRV_VERSION_1_6)
		return -ENOTSUP;
	r = relink_scan(&l);
	if (r)
		goto out;
	{
		bool any = l.nr_rl_helper != 0;

		for (unsigned f = 0; f < 2; f++)
			for (unsigned k = 0; k < HM_ACCESS_MAX_BYTES / 4; k++)
				any |= l.rl_load[f][k] != 0;
		if (!any) {
			r = -ENOENT;
			goto out;
		}
	}
	r = hm_spirv_module_new(&m);
	if (r)
		goto out;
	m->bound = words[3];
	m->version = words[1];
	r = copy_globals(m, &l, true);
	if (!r)
		r = hm_spirv_set_lookup_variant(m, variant);
	if (r)
		goto out;
	ret_fns->helper = hm_spirv_lookup_fn(m);
	for (unsigned k = 0; k < HM_ACCESS_MAX_BYTES / 4; k++)
		if (l.rl_load[0][k] || l.rl_load[1][k]) {
			ret_fns->load[0][k] = hm_spirv_load_fn(m, k + 1);
			ret_fns->load[1][k] = m->load_spec_fn[k];
		}
	if (m->err) {
		r = m->err;
		goto out;
	}
	/* the module's functions but the replaced ones; calls of those call
	 * the library's */
	for (size_t i = l.first_fn; i < l.nr; i += w[i] >> 16) {
		uint16_t op = w[i] & 0xffff, nr = w[i] >> 16;
		unsigned kind;

		if (op == OP_FUNCTION && (kind = relink_kind(&l, w[i + 2]))) {
			if (!relink_type_ok(m, kind, w + i)) {
				r = -EINVAL;
				goto out;
			}
			skipping = true;
			continue;
		}
		if (skipping) {
			skipping = op != OP_FUNCTION_END;
			continue;
		}
		if (op == OP_FUNCTION_CALL && nr >= 4 && (kind = relink_kind(&l, w[i + 3]))) {
			uint32_t o[nr - 1];

			memcpy(o, w + i + 1, (nr - 1) * sizeof(*o));
			o[2] = kind == 1 ? ret_fns->helper :
				ret_fns->load[(kind - 2) / 16][(kind - 2) % 16];
			hm_spirv_inst(m, HM_SPV_SEC_FUNCTION, op, o, nr - 1);
			continue;
		}
		hm_spirv_inst(m, HM_SPV_SEC_FUNCTION, op, w + i + 1, nr - 1);
	}
	r = m->err;
	if (!r)
		r = hm_spirv_module_finish(m, ret_words, ret_nr);
out:
	if (r)
		memset(ret_fns, 0, sizeof(*ret_fns));
	hm_spirv_module_free(m);
	free(l.gone);
	free(l.decorated);
	free(l.ptrs);
	return r;
}
