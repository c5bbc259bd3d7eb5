// SPDX-License-Identifier: LGPL-2.1-or-later
/*
 * The lookup helper as SPIR-V (D969), a small module builder to append it
 * to a translator's module, the library module for spirv-link, and the
 * shared-lookup plan for accesses of up to 64 bytes.  See hmirror/lookup.h.
 *
 * The helper, written as SPIR-V assembly:
 *
 *   chunk = guest >> shift
 *   h     = lo32(chunk) * MUL_LO + hi32(chunk) * MUL_HI      (32 bits)
 *   home  = hi32(h * nr_home)                              (OpUMulExtended)
 *   base  = table + home * 16
 *   s[i]  = *(u64vec2 *)(base + 16 * i), i < 4   four independent loads
 *   hit i = s[i].x == chunk                        first hit wins
 *   dev   = hit ? guest + s[i].y : 0
 *   mark  = marks + 4 * (hit ? 1 + home + i : 0)
 *   return { lo32(dev), hi32(dev), lo32(mark), hi32(mark) }
 *
 * without branches: every probe is loaded, the answer selected.  That is
 * the default form; the others (uvec4 slots, a shift home slot, a select
 * chain, and two references that break D969 for measurement,
 * lookup_reference.h) are listed in hm_lookup_variants[] and
 * Documentation/table.rst ("Emission variants").
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <spirv/unified1/spirv.h>

#include "hmirror/lookup.h"
#include "lookup_internal.h"
#include "lookup_reference.h"

static void set_err(struct hm_spirv_module *m, int e)
{
	if (!m->err)
		m->err = e;
}

static int buf_put(struct hm_spirv_module *m, struct spv_buf *b, const uint32_t *w, size_t n)
{
	if (m->err)
		return m->err;
	if (m->total + n > HM_SPV_MAX_WORDS) {
		set_err(m, -E2BIG);
		return m->err;
	}
	if (b->n + n > b->cap) {
		size_t cap = b->cap ? b->cap : 64;
		uint32_t *nw;

		while (cap < b->n + n)
			cap *= 2;
		nw = realloc(b->w, cap * sizeof(*nw));
		if (!nw) {
			set_err(m, -ENOMEM);
			return m->err;
		}
		b->w = nw;
		b->cap = cap;
	}
	memcpy(b->w + b->n, w, n * sizeof(*w));
	b->n += n;
	m->total += n;
	return 0;
}

int hm_spirv_error(const struct hm_spirv_module *m)
{
	return m->err;
}

uint32_t hm_spirv_id(struct hm_spirv_module *m)
{
	if (m->err)
		return 0;
	if (m->bound >= HM_SPV_MAX_WORDS) {
		set_err(m, -E2BIG);
		return 0;
	}
	return m->bound++;
}

uint32_t hm_spirv_bound(const struct hm_spirv_module *m)
{
	return m->bound;
}

void hm_spirv_inst(struct hm_spirv_module *m, enum hm_spv_section sec,
		   uint16_t opcode, const uint32_t *operands, size_t nr)
{
	uint32_t head;

	if ((unsigned)sec >= HM_SPV_NR_SECTIONS || nr + 1 > 0xffff) {
		set_err(m, -EINVAL);
		return;
	}
	head = (uint32_t)(nr + 1) << 16 | opcode;
	if (buf_put(m, &m->sec[sec], &head, 1) == 0 && nr)
		buf_put(m, &m->sec[sec], operands, nr);
}

uint32_t hm_spirv_op(struct hm_spirv_module *m, enum hm_spv_section sec,
		     uint16_t opcode, uint32_t result_type,
		     const uint32_t *operands, size_t nr)
{
	uint32_t w[nr + 2];
	uint32_t id = hm_spirv_id(m);

	if (!id)
		return 0;
	w[0] = result_type;
	w[1] = id;
	if (nr)
		memcpy(w + 2, operands, nr * sizeof(*w));
	hm_spirv_inst(m, sec, opcode, w, nr + 2);
	return m->err ? 0 : id;
}

size_t hm_spirv_string_words(const char *s)
{
	return strlen(s) / 4 + 1;
}

size_t hm_spirv_put_string(uint32_t *dst, const char *s)
{
	size_t n = hm_spirv_string_words(s);

	memset(dst, 0, n * 4);
	memcpy(dst, s, strlen(s));
	return n;
}

uint32_t hm_spirv_compute_main(struct hm_spirv_module *m, uint32_t nr_push, uint32_t local_x,
			       uint32_t *push, uint32_t *ret_gidx)
{
	uint32_t mem[HM_SPIRV_MAX_PUSH_WORDS], u32, pt, pv, pcu, v3, gid, voidt, fnt, main_fn;
	uint32_t ep[16], label;
	size_t n;

	if (!m || m->err)
		return 0;
	if (!nr_push || nr_push > HM_SPIRV_MAX_PUSH_WORDS || !push) {
		m->err = -EINVAL;
		return 0;
	}
	u32 = hm_spirv_type_int(m, 32, false);
	v3 = hm_spirv_type_vector(m, u32, 3);
	voidt = hm_spirv_type_void(m);
	fnt = hm_spirv_type_function(m, voidt, NULL, 0);
	for (uint32_t i = 0; i < nr_push; i++)
		mem[i] = u32;
	pt = hm_spirv_type_struct_unique(m, mem, nr_push);
	HM_SPV(m, HM_SPV_SEC_ANNOTATION, SpvOpDecorate, pt, SpvDecorationBlock);
	for (uint32_t i = 0; i < nr_push; i++)
		HM_SPV(m, HM_SPV_SEC_ANNOTATION, SpvOpMemberDecorate, pt, i,
		       SpvDecorationOffset, 4 * i);
	pv = HM_SPV_OP(m, HM_SPV_SEC_GLOBAL, SpvOpVariable,
		       hm_spirv_type_pointer(m, SpvStorageClassPushConstant, pt),
		       SpvStorageClassPushConstant);
	pcu = hm_spirv_type_pointer(m, SpvStorageClassPushConstant, u32);
	gid = HM_SPV_OP(m, HM_SPV_SEC_GLOBAL, SpvOpVariable,
			hm_spirv_type_pointer(m, SpvStorageClassInput, v3), SpvStorageClassInput);
	HM_SPV(m, HM_SPV_SEC_ANNOTATION, SpvOpDecorate, gid, SpvDecorationBuiltIn,
	       SpvBuiltInGlobalInvocationId);
	main_fn = hm_spirv_id(m);
	ep[0] = SpvExecutionModelGLCompute;
	ep[1] = main_fn;
	n = 2 + hm_spirv_put_string(ep + 2, "main");
	ep[n++] = gid;
	ep[n++] = pv;
	hm_spirv_inst(m, HM_SPV_SEC_ENTRY_POINT, SpvOpEntryPoint, ep, n);
	HM_SPV(m, HM_SPV_SEC_EXEC_MODE, SpvOpExecutionMode, main_fn,
	       SpvExecutionModeLocalSize, local_x, 1, 1);
	HM_SPV(m, HM_SPV_SEC_FUNCTION, SpvOpFunction, voidt, main_fn,
	       SpvFunctionControlMaskNone, fnt);
	label = hm_spirv_id(m);
	HM_SPV(m, HM_SPV_SEC_FUNCTION, SpvOpLabel, label);
	for (uint32_t i = 0; i < nr_push; i++)
		push[i] = HM_SPV_OP(m, HM_SPV_SEC_FUNCTION, SpvOpLoad, u32,
				    HM_SPV_OP(m, HM_SPV_SEC_FUNCTION, SpvOpAccessChain, pcu, pv,
					      hm_spirv_const_u32(m, i)));
	if (ret_gidx)
		*ret_gidx = HM_SPV_OP(m, HM_SPV_SEC_FUNCTION, SpvOpCompositeExtract, u32,
				      HM_SPV_OP(m, HM_SPV_SEC_FUNCTION, SpvOpLoad, v3, gid), 0);
	return m->err ? 0 : label;
}

/* Add a key: (op, w[n]) is declared as id. */
static struct spv_key *key_add(struct hm_spirv_module *m, uint16_t op, const uint32_t *w,
			       size_t n, uint32_t id)
{
	struct spv_key *k;

	if (m->nr_keys == m->cap_keys) {
		size_t cap = m->cap_keys ? m->cap_keys * 2 : 32;
		struct spv_key *nk = realloc(m->keys, cap * sizeof(*nk));

		if (!nk) {
			set_err(m, -ENOMEM);
			return NULL;
		}
		m->keys = nk;
		m->cap_keys = cap;
	}
	k = &m->keys[m->nr_keys];
	k->w = malloc((n ? n : 1) * sizeof(*w));
	if (!k->w) {
		set_err(m, -ENOMEM);
		return NULL;
	}
	memcpy(k->w, w, n * sizeof(*w));
	k->op = op;
	k->n = (uint16_t)n;
	k->id = id;
	m->nr_keys++;
	return k;
}

static const struct spv_key *key_find(const struct hm_spirv_module *m, uint16_t op,
				      const uint32_t *w, size_t n)
{
	for (size_t i = 0; i < m->nr_keys; i++) {
		const struct spv_key *k = &m->keys[i];

		if (k->op == op && k->n == n && !memcmp(k->w, w, n * sizeof(*w)))
			return k;
	}
	return NULL;
}

bool hm_spirv_known(const struct hm_spirv_module *m, uint16_t op, const uint32_t *w, size_t n)
{
	return key_find(m, op, w, n) != NULL;
}

int hm_spirv_adopt_key(struct hm_spirv_module *m, uint16_t op, const uint32_t *w, size_t n,
		       uint32_t id)
{
	if (m->err)
		return m->err;
	if (n > 0xffff)
		return -EINVAL;
	if (key_find(m, op, w, n))
		return 0;	/* the first declaration stays the one used */
	return key_add(m, op, w, n, id) ? 0 : m->err;
}

/* Find or declare a deduplicated global instruction.  with_type: operand 0
 * is a result type, the result id goes after it. */
static uint32_t dedup(struct hm_spirv_module *m, enum hm_spv_section sec, uint16_t op,
		      bool with_type, const uint32_t *w, size_t n)
{
	const struct spv_key *k;
	uint32_t id;

	if (m->err)
		return 0;
	k = key_find(m, op, w, n);
	if (k)
		return k->id;
	if (sec == HM_SPV_SEC_GLOBAL) {
		uint32_t o[n + 1];

		id = hm_spirv_id(m);
		if (!id)
			return 0;
		if (with_type) {
			o[0] = w[0];
			o[1] = id;
			memcpy(o + 2, w + 1, (n - 1) * sizeof(*w));
		} else {
			o[0] = id;
			memcpy(o + 1, w, n * sizeof(*w));
		}
		hm_spirv_inst(m, sec, op, o, n + 1);
	} else {
		id = 1; /* a marker: capability/extension seen */
		hm_spirv_inst(m, sec, op, w, n);
	}
	if (m->err || !key_add(m, op, w, n, id))
		return 0;
	return id;
}

void hm_spirv_capability(struct hm_spirv_module *m, uint32_t cap)
{
	dedup(m, HM_SPV_SEC_CAPABILITY, SpvOpCapability, false, &cap, 1);
}

void hm_spirv_extension(struct hm_spirv_module *m, const char *name)
{
	size_t n = hm_spirv_string_words(name);
	uint32_t w[n];

	hm_spirv_put_string(w, name);
	dedup(m, HM_SPV_SEC_EXTENSION, SpvOpExtension, false, w, n);
}

void hm_spirv_name(struct hm_spirv_module *m, uint32_t id, const char *name)
{
	size_t n = hm_spirv_string_words(name);
	uint32_t w[n + 1];

	w[0] = id;
	hm_spirv_put_string(w + 1, name);
	hm_spirv_inst(m, HM_SPV_SEC_DEBUG, SpvOpName, w, n + 1);
}

uint32_t hm_spirv_type_void(struct hm_spirv_module *m)
{
	return dedup(m, HM_SPV_SEC_GLOBAL, SpvOpTypeVoid, false, NULL, 0);
}

uint32_t hm_spirv_type_bool(struct hm_spirv_module *m)
{
	return dedup(m, HM_SPV_SEC_GLOBAL, SpvOpTypeBool, false, NULL, 0);
}

uint32_t hm_spirv_type_int(struct hm_spirv_module *m, uint32_t width, bool is_signed)
{
	uint32_t w[2] = { width, is_signed };

	if (width == 64)
		hm_spirv_capability(m, SpvCapabilityInt64);
	return dedup(m, HM_SPV_SEC_GLOBAL, SpvOpTypeInt, false, w, 2);
}

uint32_t hm_spirv_type_vector(struct hm_spirv_module *m, uint32_t component, uint32_t n)
{
	uint32_t w[2] = { component, n };

	return dedup(m, HM_SPV_SEC_GLOBAL, SpvOpTypeVector, false, w, 2);
}

uint32_t hm_spirv_type_struct(struct hm_spirv_module *m, const uint32_t *members, size_t n)
{
	return dedup(m, HM_SPV_SEC_GLOBAL, SpvOpTypeStruct, false, members, n);
}

uint32_t hm_spirv_type_struct_unique(struct hm_spirv_module *m, const uint32_t *members, size_t n)
{
	uint32_t id = hm_spirv_id(m);
	uint32_t w[n + 1];

	if (!id)
		return 0;
	w[0] = id;
	memcpy(w + 1, members, n * sizeof(*w));
	hm_spirv_inst(m, HM_SPV_SEC_GLOBAL, SpvOpTypeStruct, w, n + 1);
	return m->err ? 0 : id;
}

uint32_t hm_spirv_type_pointer(struct hm_spirv_module *m, uint32_t storage_class, uint32_t pointee)
{
	uint32_t w[2] = { storage_class, pointee };

	return dedup(m, HM_SPV_SEC_GLOBAL, SpvOpTypePointer, false, w, 2);
}

uint32_t hm_spirv_type_function(struct hm_spirv_module *m, uint32_t ret_type,
				const uint32_t *params, size_t n)
{
	uint32_t w[n + 1];

	w[0] = ret_type;
	memcpy(w + 1, params, n * sizeof(*w));
	return dedup(m, HM_SPV_SEC_GLOBAL, SpvOpTypeFunction, false, w, n + 1);
}

uint32_t hm_spirv_const_u32(struct hm_spirv_module *m, uint32_t v)
{
	uint32_t w[2] = { hm_spirv_type_int(m, 32, false), v };

	return dedup(m, HM_SPV_SEC_GLOBAL, SpvOpConstant, true, w, 2);
}

uint32_t hm_spirv_const_u64(struct hm_spirv_module *m, uint64_t v)
{
	uint32_t w[3] = { hm_spirv_type_int(m, 64, false), (uint32_t)v, (uint32_t)(v >> 32) };

	return dedup(m, HM_SPV_SEC_GLOBAL, SpvOpConstant, true, w, 3);
}

uint32_t hm_spirv_const_bool(struct hm_spirv_module *m, bool v)
{
	uint32_t t = hm_spirv_type_bool(m);

	return dedup(m, HM_SPV_SEC_GLOBAL, v ? SpvOpConstantTrue : SpvOpConstantFalse,
		     true, &t, 1);
}

int hm_spirv_module_new(struct hm_spirv_module **ret)
{
	struct hm_spirv_module *m;

	if (!ret)
		return -EINVAL;
	m = calloc(1, sizeof(*m));
	if (!m)
		return -ENOMEM;
	m->bound = 1;
	m->version = HM_SPIRV_VERSION_1_5;
	m->variant = HM_LOOKUP_DEFAULT_VARIANT;
	hm_spirv_capability(m, SpvCapabilityShader);
	hm_spirv_capability(m, SpvCapabilityInt64);
	hm_spirv_capability(m, SpvCapabilityPhysicalStorageBufferAddresses);
	hm_spirv_extension(m, "SPV_KHR_physical_storage_buffer");
	HM_SPV(m, HM_SPV_SEC_MEMORY_MODEL, SpvOpMemoryModel,
	       SpvAddressingModelPhysicalStorageBuffer64, SpvMemoryModelGLSL450);
	if (m->err) {
		int e = m->err;

		hm_spirv_module_free(m);
		return e;
	}
	*ret = m;
	return 0;
}

void hm_spirv_module_free(struct hm_spirv_module *m)
{
	if (!m)
		return;
	for (int i = 0; i < HM_SPV_NR_SECTIONS; i++)
		free(m->sec[i].w);
	for (size_t i = 0; i < m->nr_keys; i++)
		free(m->keys[i].w);
	free(m->keys);
	free(m);
}

int hm_spirv_module_finish(struct hm_spirv_module *m, uint32_t **ret_words, size_t *ret_nr)
{
	uint32_t *w;
	size_t n = 5;

	if (!ret_words || !ret_nr)
		return -EINVAL;
	*ret_words = NULL;
	*ret_nr = 0;
	if (m->err)
		return m->err;
	for (int i = 0; i < HM_SPV_NR_SECTIONS; i++)
		n += m->sec[i].n;
	w = malloc(n * sizeof(*w));
	if (!w)
		return -ENOMEM;
	w[0] = 0x07230203;
	w[1] = m->version;      /* SPIR-V 1.5 (Vulkan 1.2) unless linked */
	w[2] = 0;               /* generator: unregistered */
	w[3] = m->bound;
	w[4] = 0;
	n = 5;
	for (int i = 0; i < HM_SPV_NR_SECTIONS; i++) {
		if (m->sec[i].n)
			memcpy(w + n, m->sec[i].w, m->sec[i].n * sizeof(*w));
		n += m->sec[i].n;
	}
	*ret_words = w;
	*ret_nr = n;
	return 0;
}

/* ---- the helper ---------------------------------------------------------- */
uint32_t hm_spirv_lookup_result_type(struct hm_spirv_module *m)
{
	uint32_t u32 = hm_spirv_type_int(m, 32, false);
	uint32_t mem[4] = { u32, u32, u32, u32 };

	return hm_spirv_type_struct(m, mem, 4);
}

uint32_t hm_spirv_lookup_fn_type(struct hm_spirv_module *m)
{
	uint32_t u32 = hm_spirv_type_int(m, 32, false);
	uint32_t u64 = hm_spirv_type_int(m, 64, false);
	uint32_t params[5] = { u64, u64, u32, u32, u64 };

	return hm_spirv_type_function(m, hm_spirv_lookup_result_type(m), params, 5);
}

#define H HM_SPV_SEC_HELPER

/* The public variants, then the reference ones (lookup_reference.h), which
 * hm_lookup_nr_variants does not count. */
const struct hm_lookup_variant hm_lookup_variants[] = {
	{ "u64x2", HM_LOOKUP_V_U64X2 | HM_LOOKUP_V_NONWRITABLE, false, false,
	  "default: one u64vec2 load a slot (64-bit compare and delta) through a "
	  "NonWritable+Restrict Block, multiply-high, select tree" },
	{ "nonwritable", HM_LOOKUP_V_NONWRITABLE, false, false,
	  "one uvec4 load a slot through a NonWritable+Restrict Block, multiply-high, select tree" },
	{ "base", 0, false, false,
	  "the first H200 run's form: one uvec4 load a slot, multiply-high, select tree" },
	{ "pow2", HM_LOOKUP_V_POW2 | HM_LOOKUP_V_NONWRITABLE, false, true,
	  "nonwritable, home slot by a shift of the 32-bit hash (power-of-two nr_home)" },
	{ "chain", HM_LOOKUP_V_CHAIN | HM_LOOKUP_V_U64X2 | HM_LOOKUP_V_NONWRITABLE, false, false,
	  "u64x2, first hit by a chain of selects instead of a tree" },
	{ "pow2+u64x2", HM_LOOKUP_V_POW2 | HM_LOOKUP_V_U64X2 | HM_LOOKUP_V_NONWRITABLE, false, true,
	  "u64x2, home slot by a shift (power-of-two nr_home)" },
	{ "ref-split", HM_LOOKUP_V_REF_SPLIT | HM_LOOKUP_V_NONWRITABLE, false, false,
	  "REFERENCE (breaks D969: one load a slot): two 8-byte loads a slot" },
	{ "ref-inline", HM_LOOKUP_V_REF_INLINE | HM_LOOKUP_V_U64X2 | HM_LOOKUP_V_NONWRITABLE, false, false,
	  "REFERENCE (breaks D969: DontInline): the default form, inlined" },
};
#define NR_REFERENCE_FORMS 2        /* the last ones; table_test.c checks */
const unsigned hm__lookup_nr_forms = sizeof(hm_lookup_variants) / sizeof(hm_lookup_variants[0]);
const unsigned hm_lookup_nr_variants = sizeof(hm_lookup_variants) / sizeof(hm_lookup_variants[0]) -
				       NR_REFERENCE_FORMS;

static const struct hm_lookup_variant *variant_by_name(const char *name, unsigned n)
{
	for (unsigned i = 0; name && i < n; i++)
		if (!strcmp(hm_lookup_variants[i].name, name))
			return &hm_lookup_variants[i];
	return NULL;
}

const struct hm_lookup_variant *hm_lookup_variant_by_name(const char *name)
{
	return variant_by_name(name, hm_lookup_nr_variants);
}

const struct hm_lookup_variant *hm__lookup_form_by_name(const char *name)
{
	return variant_by_name(name, hm__lookup_nr_forms);
}

int hm_spirv_set_lookup_variant(struct hm_spirv_module *m, uint32_t flags)
{
	if (!m || (flags & ~HM_LOOKUP_V_ALL_FORMS) ||
	    ((flags & HM_LOOKUP_V_REF_SPLIT) && (flags & HM_LOOKUP_V_U64X2)))
		return -EINVAL;
	if (m->lookup_fn)
		return -EBUSY;
	m->variant = flags;
	return 0;
}

/* a ? b : c over n-bit ids */
static uint32_t sel(struct hm_spirv_module *m, uint32_t ty, uint32_t a, uint32_t b, uint32_t c)
{
	return HM_SPV_OP(m, H, SpvOpSelect, ty, a, b, c);
}

/* First hit wins: of v[0..3] under hit[0..3] (else `none`). */
static uint32_t pick(struct hm_spirv_module *m, bool chain, uint32_t ty, const uint32_t *hit,
		     uint32_t h01, const uint32_t *v, uint32_t none, uint32_t any)
{
	if (chain) {
		/* without `none` the last probe's value stands for a miss (the
		 * caller selects on `any` itself) */
		uint32_t r = none ? sel(m, ty, hit[HM_TABLE_PROBES - 1], v[HM_TABLE_PROBES - 1], none)
				  : v[HM_TABLE_PROBES - 1];

		for (int i = HM_TABLE_PROBES - 2; i >= 0; i--)
			r = sel(m, ty, hit[i], v[i], r);
		return r;
	}
	/* a tree: two levels, not four, on the path from the loads */
	uint32_t r = sel(m, ty, h01, sel(m, ty, hit[0], v[0], v[1]), sel(m, ty, hit[2], v[2], v[3]));

	return none ? sel(m, ty, any, r, none) : r;
}

uint32_t hm_spirv_lookup_fn(struct hm_spirv_module *m)
{
	uint32_t u32, u64, bl, v4, v2, ldty, ptr, res, fnty, fn;
	uint32_t guest, table, nr_home, shift, marks;
	uint32_t c32, c4, k0, k64_0, chunk, t, home64, home, base, clo, chi;
	uint32_t hit[HM_TABLE_PROBES], lo[HM_TABLE_PROBES], hi[HM_TABLE_PROBES];
	uint32_t d64[HM_TABLE_PROBES], blk = 0, pblk = 0, k0m = 0;
	uint32_t midx, any, h01, delta, dev, mark, r;
	uint32_t f;

	if (m->err)
		return 0;
	if (m->lookup_fn)
		return m->lookup_fn;
	f = m->variant;

	u32 = hm_spirv_type_int(m, 32, false);
	u64 = hm_spirv_type_int(m, 64, false);
	bl = hm_spirv_type_bool(m);
	v4 = hm_spirv_type_vector(m, u32, 4);
	v2 = (f & HM_LOOKUP_V_U64X2) ? hm_spirv_type_vector(m, u64, 2) : 0;
	ldty = (f & HM_LOOKUP_V_U64X2) ? v2 : (f & HM_LOOKUP_V_REF_SPLIT) ? u64 : v4;
	ptr = hm_spirv_type_pointer(m, SpvStorageClassPhysicalStorageBuffer, ldty);
	res = hm_spirv_lookup_result_type(m);
	fnty = hm_spirv_lookup_fn_type(m);
	c32 = hm_spirv_const_u32(m, 32);
	c4 = hm_spirv_const_u32(m, 4);
	k0 = hm_spirv_const_u32(m, 0);
	k64_0 = hm_spirv_const_u64(m, 0);
	uint32_t kmul_lo = hm_spirv_const_u32(m, HM_TABLE_HASH_MUL_LO);
	uint32_t kmul_hi = hm_spirv_const_u32(m, HM_TABLE_HASH_MUL_HI);
	uint32_t u32x2 = hm_spirv_type_struct(m, (const uint32_t[]){ u32, u32 }, 2);
	uint32_t c2 = hm_spirv_const_u32(m, 2);
	uint32_t kidx[HM_TABLE_PROBES];

	for (uint32_t i = 0; i < HM_TABLE_PROBES; i++)
		kidx[i] = hm_spirv_const_u32(m, i + 1);
	if (f & HM_LOOKUP_V_NONWRITABLE) {
		/* struct { slot } Block, member 0 NonWritable Restrict Offset 0
		 * (glslang's readonly restrict buffer_reference) */
		blk = hm_spirv_type_struct_unique(m, &ldty, 1);
		HM_SPV(m, HM_SPV_SEC_ANNOTATION, SpvOpDecorate, blk, SpvDecorationBlock);
		HM_SPV(m, HM_SPV_SEC_ANNOTATION, SpvOpMemberDecorate, blk, 0,
		       SpvDecorationOffset, 0);
		HM_SPV(m, HM_SPV_SEC_ANNOTATION, SpvOpMemberDecorate, blk, 0,
		       SpvDecorationNonWritable);
		HM_SPV(m, HM_SPV_SEC_ANNOTATION, SpvOpMemberDecorate, blk, 0,
		       SpvDecorationRestrict);
		pblk = hm_spirv_type_pointer(m, SpvStorageClassPhysicalStorageBuffer, blk);
		k0m = k0;
	}
	if (m->err)
		return 0;

	fn = hm_spirv_id(m);
	HM_SPV(m, H, SpvOpFunction, res, fn,
	       (f & HM_LOOKUP_V_REF_INLINE) ? SpvFunctionControlInlineMask :
					      SpvFunctionControlDontInlineMask, fnty);
	guest = HM_SPV_OP(m, H, SpvOpFunctionParameter, u64);
	table = HM_SPV_OP(m, H, SpvOpFunctionParameter, u64);
	nr_home = HM_SPV_OP(m, H, SpvOpFunctionParameter, u32);
	shift = HM_SPV_OP(m, H, SpvOpFunctionParameter, u32);
	marks = HM_SPV_OP(m, H, SpvOpFunctionParameter, u64);
	HM_SPV(m, H, SpvOpLabel, hm_spirv_id(m));

	chunk = HM_SPV_OP(m, H, SpvOpShiftRightLogical, u64, guest, shift);
	clo = HM_SPV_OP(m, H, SpvOpUConvert, u32, chunk);
	chi = HM_SPV_OP(m, H, SpvOpUConvert, u32,
			HM_SPV_OP(m, H, SpvOpShiftRightLogical, u64, chunk, c32));
	t = HM_SPV_OP(m, H, SpvOpIAdd, u32,
		      HM_SPV_OP(m, H, SpvOpIMul, u32, clo, kmul_lo),
		      HM_SPV_OP(m, H, SpvOpIMul, u32, chi, kmul_hi));
	if (f & HM_LOOKUP_V_POW2) {
		/* nr_home = 2^k: hi32(t * 2^k) = t >> (32 - k); k = popcount(nr_home - 1),
		 * computed from the argument alone, beside the hash */
		uint32_t k = HM_SPV_OP(m, H, SpvOpBitCount, u32,
				       HM_SPV_OP(m, H, SpvOpISub, u32, nr_home,
						 hm_spirv_const_u32(m, 1)));

		home = HM_SPV_OP(m, H, SpvOpShiftRightLogical, u32, t,
				 HM_SPV_OP(m, H, SpvOpISub, u32, c32, k));
	} else {
		home = HM_SPV_OP(m, H, SpvOpCompositeExtract, u32,
				 HM_SPV_OP(m, H, SpvOpUMulExtended, u32x2, t, nr_home), 1);
	}
	home64 = HM_SPV_OP(m, H, SpvOpUConvert, u64, home);
	base = HM_SPV_OP(m, H, SpvOpIAdd, u64, table,
			 HM_SPV_OP(m, H, SpvOpShiftLeftLogical, u64, home64, c4));

	/* Four independent loads from one base. */
	for (uint32_t i = 0; i < HM_TABLE_PROBES; i++) {
		uint32_t a = base, p, s, x, y;

		if (i)
			a = HM_SPV_OP(m, H, SpvOpIAdd, u64, base,
				      hm_spirv_const_u64(m, (uint64_t)i * HM_TABLE_SLOT_BYTES));
		if (f & HM_LOOKUP_V_REF_SPLIT) {
			uint32_t a8 = HM_SPV_OP(m, H, SpvOpIAdd, u64, a, hm_spirv_const_u64(m, 8));
			uint32_t p8;

			if (pblk) {
				p = HM_SPV_OP(m, H, SpvOpAccessChain, ptr,
					      HM_SPV_OP(m, H, SpvOpConvertUToPtr, pblk, a), k0m);
				p8 = HM_SPV_OP(m, H, SpvOpAccessChain, ptr,
					       HM_SPV_OP(m, H, SpvOpConvertUToPtr, pblk, a8), k0m);
			} else {
				p = HM_SPV_OP(m, H, SpvOpConvertUToPtr, ptr, a);
				p8 = HM_SPV_OP(m, H, SpvOpConvertUToPtr, ptr, a8);
			}
			x = HM_SPV_OP(m, H, SpvOpLoad, u64, p, SpvMemoryAccessAlignedMask, 16);
			d64[i] = HM_SPV_OP(m, H, SpvOpLoad, u64, p8, SpvMemoryAccessAlignedMask, 8);
			hit[i] = HM_SPV_OP(m, H, SpvOpIEqual, bl, x, chunk);
			continue;
		}
		if (pblk)
			p = HM_SPV_OP(m, H, SpvOpAccessChain, ptr,
				      HM_SPV_OP(m, H, SpvOpConvertUToPtr, pblk, a), k0m);
		else
			p = HM_SPV_OP(m, H, SpvOpConvertUToPtr, ptr, a);
		s = HM_SPV_OP(m, H, SpvOpLoad, ldty, p, SpvMemoryAccessAlignedMask,
			      HM_TABLE_SLOT_BYTES);
		if (f & HM_LOOKUP_V_U64X2) {
			x = HM_SPV_OP(m, H, SpvOpCompositeExtract, u64, s, 0);
			d64[i] = HM_SPV_OP(m, H, SpvOpCompositeExtract, u64, s, 1);
			hit[i] = HM_SPV_OP(m, H, SpvOpIEqual, bl, x, chunk);
			continue;
		}
		x = HM_SPV_OP(m, H, SpvOpCompositeExtract, u32, s, 0);
		y = HM_SPV_OP(m, H, SpvOpCompositeExtract, u32, s, 1);
		lo[i] = HM_SPV_OP(m, H, SpvOpCompositeExtract, u32, s, 2);
		hi[i] = HM_SPV_OP(m, H, SpvOpCompositeExtract, u32, s, 3);
		d64[i] = 0;
		hit[i] = HM_SPV_OP(m, H, SpvOpLogicalAnd, bl,
				   HM_SPV_OP(m, H, SpvOpIEqual, bl, x, clo),
				   HM_SPV_OP(m, H, SpvOpIEqual, bl, y, chi));
	}

	bool chain = f & HM_LOOKUP_V_CHAIN;

	h01 = HM_SPV_OP(m, H, SpvOpLogicalOr, bl, hit[0], hit[1]);
	any = HM_SPV_OP(m, H, SpvOpLogicalOr, bl, h01,
			HM_SPV_OP(m, H, SpvOpLogicalOr, bl, hit[2], hit[3]));
	if (d64[0]) {
		delta = pick(m, chain, u64, hit, h01, d64, 0, any);
	} else {
		uint32_t dlo = pick(m, chain, u32, hit, h01, lo, 0, any);
		uint32_t dhi = pick(m, chain, u32, hit, h01, hi, 0, any);

		delta = HM_SPV_OP(m, H, SpvOpBitwiseOr, u64,
				  HM_SPV_OP(m, H, SpvOpUConvert, u64, dlo),
				  HM_SPV_OP(m, H, SpvOpShiftLeftLogical, u64,
					    HM_SPV_OP(m, H, SpvOpUConvert, u64, dhi), c32));
	}
	/* 1 + i + home where slot home + i hits, 0 (the sink) where none does */
	if (chain) {
		uint32_t kh[HM_TABLE_PROBES];

		for (uint32_t i = 0; i < HM_TABLE_PROBES; i++)
			kh[i] = HM_SPV_OP(m, H, SpvOpIAdd, u32, home, kidx[i]);
		midx = pick(m, true, u32, hit, h01, kh, k0, any);
	} else {
		midx = sel(m, u32, any,
			   HM_SPV_OP(m, H, SpvOpIAdd, u32, home,
				     pick(m, false, u32, hit, h01, kidx, 0, any)), k0);
	}
	dev = HM_SPV_OP(m, H, SpvOpSelect, u64, any,
			HM_SPV_OP(m, H, SpvOpIAdd, u64, guest, delta), k64_0);
	mark = HM_SPV_OP(m, H, SpvOpIAdd, u64, marks,
			 HM_SPV_OP(m, H, SpvOpShiftLeftLogical, u64,
				   HM_SPV_OP(m, H, SpvOpUConvert, u64, midx), c2));
	r = HM_SPV_OP(m, H, SpvOpCompositeConstruct, res,
		      HM_SPV_OP(m, H, SpvOpUConvert, u32, dev),
		      HM_SPV_OP(m, H, SpvOpUConvert, u32,
				HM_SPV_OP(m, H, SpvOpShiftRightLogical, u64, dev, c32)),
		      HM_SPV_OP(m, H, SpvOpUConvert, u32, mark),
		      HM_SPV_OP(m, H, SpvOpUConvert, u32,
				HM_SPV_OP(m, H, SpvOpShiftRightLogical, u64, mark, c32)));
	HM_SPV(m, H, SpvOpReturnValue, r);
	hm_spirv_inst(m, H, SpvOpFunctionEnd, NULL, 0);
	if (m->err)
		return 0;
	m->lookup_fn = fn;
	return fn;
}

#undef H

int hm_spirv_lookup_library(uint32_t **ret_words, size_t *ret_nr)
{
	return hm_spirv_lookup_library_variant(HM_LOOKUP_DEFAULT_VARIANT, ret_words, ret_nr);
}

int hm_spirv_lookup_library_variant(uint32_t flags, uint32_t **ret_words, size_t *ret_nr)
{
	struct hm_spirv_module *m;
	uint32_t fn, w[8];
	size_t n;
	int r;

	r = hm_spirv_module_new(&m);
	if (r)
		return r;
	r = hm_spirv_set_lookup_variant(m, flags);
	if (r) {
		hm_spirv_module_free(m);
		return r;
	}
	hm_spirv_capability(m, SpvCapabilityLinkage);
	fn = hm_spirv_lookup_fn(m);
	if (fn) {
		hm_spirv_name(m, fn, HM_LOOKUP_EXPORT_NAME);
		w[0] = fn;
		w[1] = SpvDecorationLinkageAttributes;
		n = 2 + hm_spirv_put_string(w + 2, HM_LOOKUP_EXPORT_NAME);
		w[n++] = SpvLinkageTypeExport;
		hm_spirv_inst(m, HM_SPV_SEC_ANNOTATION, SpvOpDecorate, w, n);
	}
	r = hm_spirv_module_finish(m, ret_words, ret_nr);
	hm_spirv_module_free(m);
	return r;
}

/* ---- shared lookups ------------------------------------------------------ */
int hm_access_plan(uint64_t guest_addr, uint32_t nr_bytes, unsigned chunk_shift,
		   struct hm_access_plan *ret)
{
	uint64_t c0;

	if (!ret || nr_bytes < 4 || nr_bytes > HM_ACCESS_MAX_BYTES || nr_bytes % 4 ||
	    chunk_shift < HM_TABLE_MIN_CHUNK_SHIFT || chunk_shift > HM_TABLE_MAX_CHUNK_SHIFT)
		return -EINVAL;
	memset(ret, 0, sizeof(*ret));
	ret->nr_words = nr_bytes / 4;
	ret->lookup_guest[0] = guest_addr;
	ret->lookup_guest[1] = guest_addr + nr_bytes - 4;
	c0 = guest_addr >> chunk_shift;
	ret->split = ret->nr_words;
	for (uint32_t i = 0; i < ret->nr_words; i++) {
		bool first = ((guest_addr + 4ull * i) >> chunk_shift) == c0;

		ret->lookup_of_word[i] = first ? 0 : 1;
		if (!first && ret->split == ret->nr_words)
			ret->split = i;
	}
	ret->nr_lookups = ret->split == ret->nr_words ? 1 : 2;
	return 0;
}

#define F HM_SPV_SEC_FUNCTION

static uint32_t join64(struct hm_spirv_module *m, int sec, uint32_t lo, uint32_t hi)
{
	uint32_t u64 = hm_spirv_type_int(m, 64, false);

	return HM_SPV_OP(m, sec, SpvOpBitwiseOr, u64,
			 HM_SPV_OP(m, sec, SpvOpUConvert, u64, lo),
			 HM_SPV_OP(m, sec, SpvOpShiftLeftLogical, u64,
				   HM_SPV_OP(m, sec, SpvOpUConvert, u64, hi),
				   hm_spirv_const_u32(m, 32)));
}

static int emit_lookup_in(struct hm_spirv_module *m, int sec, const struct hm_spirv_table_ids *t,
			  uint32_t guest, uint32_t *ret_dev, uint32_t *ret_mark)
{
	uint32_t u32 = hm_spirv_type_int(m, 32, false);
	uint32_t fn = hm_spirv_lookup_fn(m);
	uint32_t res = hm_spirv_lookup_result_type(m);
	uint32_t r, h[4];

	if (!t || !ret_dev || !ret_mark)
		return -EINVAL;
	r = HM_SPV_OP(m, sec, SpvOpFunctionCall, res, fn, guest, t->table, t->nr_home,
		      t->chunk_shift, t->marks);
	for (uint32_t i = 0; i < 4; i++)
		h[i] = HM_SPV_OP(m, sec, SpvOpCompositeExtract, u32, r, i);
	*ret_dev = join64(m, sec, h[0], h[1]);
	*ret_mark = join64(m, sec, h[2], h[3]);
	return m->err;
}

static int emit_access_in(struct hm_spirv_module *m, int sec, const struct hm_spirv_table_ids *t,
			  uint32_t guest, uint32_t nr_words, uint32_t *ret_dev, uint32_t *ret_mark)
{
	uint32_t u64, bl, k0, d[2], mk[2], nz[2], last, c0;
	int r;

	if (!t || !ret_dev || !ret_mark || nr_words < 1 || nr_words > HM_ACCESS_MAX_BYTES / 4)
		return -EINVAL;
	u64 = hm_spirv_type_int(m, 64, false);
	bl = hm_spirv_type_bool(m);
	k0 = hm_spirv_const_u64(m, 0);
	r = emit_lookup_in(m, sec, t, guest, &d[0], &mk[0]);
	if (r)
		return r;
	if (nr_words == 1) {
		ret_dev[0] = d[0];
		ret_mark[0] = mk[0];
		return m->err;
	}
	last = HM_SPV_OP(m, sec, SpvOpIAdd, u64, guest,
			 hm_spirv_const_u64(m, 4ull * (nr_words - 1)));
	r = emit_lookup_in(m, sec, t, last, &d[1], &mk[1]);
	if (r)
		return r;
	for (int j = 0; j < 2; j++)
		nz[j] = HM_SPV_OP(m, sec, SpvOpINotEqual, bl, d[j], k0);
	c0 = HM_SPV_OP(m, sec, SpvOpShiftRightLogical, u64, guest, t->chunk_shift);
	for (uint32_t i = 0; i < nr_words; i++) {
		uint32_t a0, a1, gi, same;

		if (i == 0) {
			ret_dev[i] = d[0];
			ret_mark[i] = mk[0];
			continue;
		}
		if (i == nr_words - 1) {
			gi = last;
		} else {
			gi = HM_SPV_OP(m, sec, SpvOpIAdd, u64, guest,
				       hm_spirv_const_u64(m, 4ull * i));
		}
		same = HM_SPV_OP(m, sec, SpvOpIEqual, bl,
				 HM_SPV_OP(m, sec, SpvOpShiftRightLogical, u64, gi, t->chunk_shift),
				 c0);
		/* word i from the first lookup: d0 + 4i; from the last: d1 - 4(n-1-i);
		 * 0 stays 0 (unmapped). */
		a0 = HM_SPV_OP(m, sec, SpvOpSelect, u64, nz[0],
			       HM_SPV_OP(m, sec, SpvOpIAdd, u64, d[0],
					 hm_spirv_const_u64(m, 4ull * i)), k0);
		if (i == nr_words - 1)
			a1 = d[1];
		else
			a1 = HM_SPV_OP(m, sec, SpvOpSelect, u64, nz[1],
				       HM_SPV_OP(m, sec, SpvOpISub, u64, d[1],
						 hm_spirv_const_u64(m, 4ull * (nr_words - 1 - i))),
				       k0);
		ret_dev[i] = HM_SPV_OP(m, sec, SpvOpSelect, u64, same, a0, a1);
		ret_mark[i] = HM_SPV_OP(m, sec, SpvOpSelect, u64, same, mk[0], mk[1]);
	}
	return m->err;
}

int hm_spirv_emit_lookup(struct hm_spirv_module *m, const struct hm_spirv_table_ids *t,
			 uint32_t guest, uint32_t *ret_dev, uint32_t *ret_mark)
{
	return emit_lookup_in(m, F, t, guest, ret_dev, ret_mark);
}

int hm_spirv_emit_access(struct hm_spirv_module *m, const struct hm_spirv_table_ids *t,
			 uint32_t guest, uint32_t nr_words,
			 uint32_t *ret_dev, uint32_t *ret_mark)
{
	return emit_access_in(m, F, t, guest, nr_words, ret_dev, ret_mark);
}

int hm_spirv_push_ids(struct hm_spirv_module *m, const uint32_t *push,
		      struct hm_spirv_table_ids *ret_t, struct hm_spirv_window_ids *ret_w)
{
	if (!m || !push || !ret_t)
		return -EINVAL;
	ret_t->table = join64(m, F, push[HM_PUSH_TABLE_ADDR_LO], push[HM_PUSH_TABLE_ADDR_HI]);
	ret_t->nr_home = push[HM_PUSH_TABLE_NR_HOME];
	ret_t->chunk_shift = push[HM_PUSH_CHUNK_SHIFT];
	ret_t->marks = join64(m, F, push[HM_PUSH_MARKS_ADDR_LO], push[HM_PUSH_MARKS_ADDR_HI]);
	if (ret_w) {
		ret_w->delta = join64(m, F, push[HM_PUSH_WINDOW_DELTA_LO],
				      push[HM_PUSH_WINDOW_DELTA_HI]);
		ret_w->first = join64(m, F, push[HM_PUSH_WINDOW_FIRST_LO],
				      push[HM_PUSH_WINDOW_FIRST_HI]);
		ret_w->last = join64(m, F, push[HM_PUSH_WINDOW_LAST_LO],
				     push[HM_PUSH_WINDOW_LAST_HI]);
	}
	return m->err;
}

/* ---- the load call site (D969a) ----------------------------------------- */

#define H HM_SPV_SEC_HELPER

static const char *const load_name_fmt[2] = { "hm_load.compact.%u", "hm_load.spec.%u" };

uint32_t hm_spirv_load_result_type(struct hm_spirv_module *m, uint32_t nr_words)
{
	uint32_t u32 = hm_spirv_type_int(m, 32, false);
	uint32_t mem[HM_ACCESS_MAX_BYTES / 4];

	if (nr_words < 1 || nr_words > HM_ACCESS_MAX_BYTES / 4) {
		set_err(m, -EINVAL);
		return 0;
	}
	for (uint32_t i = 0; i < nr_words; i++)
		mem[i] = u32;
	return hm_spirv_type_struct(m, mem, nr_words);
}

static uint32_t load_fn_type(struct hm_spirv_module *m, uint32_t nr_words)
{
	uint32_t u32 = hm_spirv_type_int(m, 32, false);
	uint32_t u64 = hm_spirv_type_int(m, 64, false);
	uint32_t params[8] = { u64, u64, u32, u32, u64, u64, u64, u64 };

	return hm_spirv_type_function(m, hm_spirv_load_result_type(m, nr_words), params, 8);
}

/* Open a load function in the helper section: its parameters in p[8]. */
static uint32_t load_fn_open(struct hm_spirv_module *m, uint32_t nr_words, bool spec,
			     uint32_t *p)
{
	uint32_t u32 = hm_spirv_type_int(m, 32, false);
	uint32_t u64 = hm_spirv_type_int(m, 64, false);
	uint32_t pty[8] = { u64, u64, u32, u32, u64, u64, u64, u64 };
	uint32_t fnty = load_fn_type(m, nr_words);
	uint32_t fn = hm_spirv_id(m);
	char name[32];

	snprintf(name, sizeof(name), load_name_fmt[spec], nr_words);
	hm_spirv_name(m, fn, name);
	/* the compact form compiles fastest as one function called at every
	 * access; the speculative one is meant to be inlined at each (a call
	 * on a load's path costs it 0.15-0.25x, table.rst) */
	HM_SPV(m, H, SpvOpFunction, hm_spirv_load_result_type(m, nr_words), fn,
	       spec ? SpvFunctionControlInlineMask : SpvFunctionControlDontInlineMask, fnty);
	for (int i = 0; i < 8; i++)
		p[i] = HM_SPV_OP(m, H, SpvOpFunctionParameter, pty[i]);
	return fn;
}

/* D969's load of nr_words at guest: the shared lookups, then each word
 * loaded where its device address is not 0 (else 0).  The guard is a
 * select (an unmapped word reads the table's first word, which is always
 * there, and answers 0): one block, no branch. */
static int compact_words(struct hm_spirv_module *m, const struct hm_spirv_table_ids *t,
			 uint32_t guest, uint32_t nr_words, uint32_t *ret_v)
{
	uint32_t u32 = hm_spirv_type_int(m, 32, false);
	uint32_t u64 = hm_spirv_type_int(m, 64, false);
	uint32_t bl = hm_spirv_type_bool(m);
	uint32_t psb = hm_spirv_type_pointer(m, SpvStorageClassPhysicalStorageBuffer, u32);
	uint32_t dev[HM_ACCESS_MAX_BYTES / 4], mark[HM_ACCESS_MAX_BYTES / 4];
	uint32_t k0 = hm_spirv_const_u64(m, 0), z = hm_spirv_const_u32(m, 0);
	int r;

	r = emit_access_in(m, H, t, guest, nr_words, dev, mark);
	if (r)
		return r;
	for (uint32_t i = 0; i < nr_words; i++) {
		uint32_t nz = HM_SPV_OP(m, H, SpvOpINotEqual, bl, dev[i], k0);
		uint32_t a = HM_SPV_OP(m, H, SpvOpSelect, u64, nz, dev[i], t->table);
		uint32_t v = HM_SPV_OP(m, H, SpvOpLoad, u32,
				       HM_SPV_OP(m, H, SpvOpConvertUToPtr, psb, a),
				       SpvMemoryAccessAlignedMask, 4);

		ret_v[i] = HM_SPV_OP(m, H, SpvOpSelect, u32, nz, v, z);
	}
	return m->err;
}

static uint32_t write_load_fns(struct hm_spirv_module *m, uint32_t nr_words)
{
	uint32_t u32 = hm_spirv_type_int(m, 32, false);
	uint32_t u64 = hm_spirv_type_int(m, 64, false);
	uint32_t bl = hm_spirv_type_bool(m);
	uint32_t psb = hm_spirv_type_pointer(m, SpvStorageClassPhysicalStorageBuffer, u32);
	uint32_t res = hm_spirv_load_result_type(m, nr_words);
	uint32_t sentinel = hm_spirv_const_u32(m, HM_WINDOW_SENTINEL);
	uint32_t p[8], v[HM_ACCESS_MAX_BYTES / 4], ws[HM_ACCESS_MAX_BYTES / 4];
	uint32_t vsl[HM_ACCESS_MAX_BYTES / 4];
	uint32_t fn, a, miss = 0, entry, slow, merge, fast_r, slow_r;
	struct hm_spirv_table_ids t;

	hm_spirv_lookup_fn(m);          /* the helper first: written whole */
	if (m->err)
		return 0;

	/* compact: D969, every access calls the helper */
	fn = load_fn_open(m, nr_words, false, p);
	HM_SPV(m, H, SpvOpLabel, hm_spirv_id(m));
	t = (struct hm_spirv_table_ids){ p[1], p[2], p[3], p[4] };
	if (compact_words(m, &t, p[0], nr_words, v))
		return 0;
	HM_SPV(m, H, SpvOpReturnValue,
	       hm_spirv_op(m, H, SpvOpCompositeConstruct, res, v, nr_words));
	hm_spirv_inst(m, H, SpvOpFunctionEnd, NULL, 0);
	m->load_fn[nr_words - 1] = fn;

	/* speculative: clamp(guest + delta) into the window, one load a word;
	 * no word SENTINEL: the answer; else the compact form's lookups and
	 * loads at home.  One test for the whole access: a window holds
	 * whole chunks, so only an access that straddles into a chunk
	 * without a mirror (or a guest word equal to SENTINEL) goes slow. */
	m->load_spec_fn[nr_words - 1] = load_fn_open(m, nr_words, true, p);
	t = (struct hm_spirv_table_ids){ p[1], p[2], p[3], p[4] };
	entry = hm_spirv_id(m);
	HM_SPV(m, H, SpvOpLabel, entry);
	a = HM_SPV_OP(m, H, SpvOpIAdd, u64, p[0], p[5]);
	a = HM_SPV_OP(m, H, SpvOpSelect, u64,
		      HM_SPV_OP(m, H, SpvOpULessThan, bl, a, p[6]), p[6], a);
	a = HM_SPV_OP(m, H, SpvOpSelect, u64,
		      HM_SPV_OP(m, H, SpvOpULessThan, bl, p[7], a), p[7], a);
	for (uint32_t i = 0; i < nr_words; i++) {
		uint32_t ai = i ? HM_SPV_OP(m, H, SpvOpIAdd, u64, a,
					    hm_spirv_const_u64(m, 4ull * i)) : a;
		uint32_t s;

		ws[i] = HM_SPV_OP(m, H, SpvOpLoad, u32,
				  HM_SPV_OP(m, H, SpvOpConvertUToPtr, psb, ai),
				  SpvMemoryAccessAlignedMask, 4);
		s = HM_SPV_OP(m, H, SpvOpIEqual, bl, ws[i], sentinel);
		miss = i ? HM_SPV_OP(m, H, SpvOpLogicalOr, bl, miss, s) : s;
	}
	fast_r = hm_spirv_op(m, H, SpvOpCompositeConstruct, res, ws, nr_words);
	slow = hm_spirv_id(m);
	merge = hm_spirv_id(m);
	HM_SPV(m, H, SpvOpSelectionMerge, merge, SpvSelectionControlMaskNone);
	HM_SPV(m, H, SpvOpBranchConditional, miss, slow, merge);
	HM_SPV(m, H, SpvOpLabel, slow);
	if (compact_words(m, &t, p[0], nr_words, vsl))
		return 0;
	slow_r = hm_spirv_op(m, H, SpvOpCompositeConstruct, res, vsl, nr_words);
	HM_SPV(m, H, SpvOpBranch, merge);
	HM_SPV(m, H, SpvOpLabel, merge);
	HM_SPV(m, H, SpvOpReturnValue,
	       HM_SPV_OP(m, H, SpvOpPhi, res, fast_r, entry, slow_r, slow));
	hm_spirv_inst(m, H, SpvOpFunctionEnd, NULL, 0);
	(void)u32;
	return m->err ? 0 : fn;
}

uint32_t hm_spirv_load_fn(struct hm_spirv_module *m, uint32_t nr_words)
{
	if (!m || m->err)
		return 0;
	if (nr_words < 1 || nr_words > HM_ACCESS_MAX_BYTES / 4) {
		set_err(m, -EINVAL);
		return 0;
	}
	if (m->load_fn[nr_words - 1])
		return m->load_fn[nr_words - 1];
	return write_load_fns(m, nr_words);
}

#undef H

int hm_spirv_emit_load(struct hm_spirv_module *m, const struct hm_spirv_table_ids *t,
		       const struct hm_spirv_window_ids *w, uint32_t guest, uint32_t nr_words,
		       uint32_t *ret_words)
{
	uint32_t u32, fn, r;

	if (!m || !t || !w || !ret_words || nr_words < 1 || nr_words > HM_ACCESS_MAX_BYTES / 4)
		return -EINVAL;
	if (m->err)
		return m->err;
	u32 = hm_spirv_type_int(m, 32, false);
	fn = hm_spirv_load_fn(m, nr_words);
	r = HM_SPV_OP(m, F, SpvOpFunctionCall, hm_spirv_load_result_type(m, nr_words), fn,
		      guest, t->table, t->nr_home, t->chunk_shift, t->marks, w->delta, w->first,
		      w->last);
	for (uint32_t i = 0; i < nr_words; i++)
		ret_words[i] = HM_SPV_OP(m, F, SpvOpCompositeExtract, u32, r, i);
	return m->err;
}

#undef F

/* ---- the two tiers ------------------------------------------------------- */

/* lookup_internal.h */
bool hm_spirv_load_name(const uint32_t *w, size_t n, int *ret_form, uint32_t *ret_words)
{
	char name[64];
	unsigned words;
	char tail;
	size_t len = n * 4 < sizeof(name) - 1 ? n * 4 : sizeof(name) - 1;

	memcpy(name, w, len);
	name[len] = 0;
	for (int f = 0; f < 2; f++) {
		if (sscanf(name, load_name_fmt[f], &words) == 1 &&
		    sscanf(name, f ? "hm_load.spec.%*u%c" : "hm_load.compact.%*u%c", &tail) != 1 &&
		    words >= 1 && words <= HM_ACCESS_MAX_BYTES / 4) {
			*ret_form = f;
			*ret_words = words;
			return true;
		}
	}
	return false;
}

int hm_spirv_tier_form(const uint32_t *words, size_t nr, enum hm_tier tier,
		       uint32_t **ret_words, size_t *ret_nr)
{
	uint32_t fn_of[2][HM_ACCESS_MAX_BYTES / 4] = { { 0 } };
	uint32_t *out;
	size_t i, n = 0;
	bool any = false, skip = false;
	int drop;

	if (!ret_words || !ret_nr)
		return -EINVAL;
	*ret_words = NULL;
	*ret_nr = 0;
	if (!words || nr < 5 || words[0] != 0x07230203 ||
	    (tier != HM_TIER_COMPACT && tier != HM_TIER_SPECULATIVE))
		return -EINVAL;
	drop = tier == HM_TIER_COMPACT ? 1 : 0;
	for (i = 5; i < nr;) {
		uint32_t wc = words[i] >> 16, op = words[i] & 0xffff;
		int f;
		uint32_t k;

		if (!wc || i + wc > nr)
			return -EINVAL;
		if (op == SpvOpName && wc >= 3 && hm_spirv_load_name(words + i + 2, wc - 2, &f, &k)) {
			if (fn_of[f][k - 1])
				return -EINVAL;
			fn_of[f][k - 1] = words[i + 1];
			any = true;
		}
		i += wc;
	}
	if (!any)
		return -ENOENT;
	for (uint32_t k = 0; k < HM_ACCESS_MAX_BYTES / 4; k++)
		if (!fn_of[0][k] != !fn_of[1][k])
			return -EINVAL;         /* a form without its twin */
	out = malloc(nr * sizeof(*out));
	if (!out)
		return -ENOMEM;
	memcpy(out, words, 5 * sizeof(*out));
	n = 5;
	for (i = 5; i < nr;) {
		uint32_t wc = words[i] >> 16, op = words[i] & 0xffff;
		bool keep = !skip;

		if (op == SpvOpFunction && wc >= 5) {
			for (uint32_t k = 0; k < HM_ACCESS_MAX_BYTES / 4; k++)
				if (fn_of[drop][k] && words[i + 2] == fn_of[drop][k])
					skip = true;
			keep = !skip;
		} else if (op == SpvOpFunctionEnd && skip) {
			skip = false;
			keep = false;
		} else if (op == SpvOpName && wc >= 2) {
			for (uint32_t k = 0; k < HM_ACCESS_MAX_BYTES / 4; k++)
				if (fn_of[drop][k] && words[i + 1] == fn_of[drop][k])
					keep = false;
		}
		if (keep) {
			memcpy(out + n, words + i, wc * sizeof(*out));
			if (op == SpvOpFunctionCall && wc >= 4 && tier == HM_TIER_SPECULATIVE)
				for (uint32_t k = 0; k < HM_ACCESS_MAX_BYTES / 4; k++)
					if (fn_of[0][k] && out[n + 3] == fn_of[0][k])
						out[n + 3] = fn_of[1][k];
			n += wc;
		}
		i += wc;
	}
	*ret_words = out;
	*ret_nr = n;
	return 0;
}
