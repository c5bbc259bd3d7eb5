// SPDX-License-Identifier: GPL-2.0
/*
 * Isolation of client programs, checked once per module before any
 * pipeline is built from it (Documentation/daemon.rst, "Isolation").
 *
 * A client's module runs on a device the daemon shares between clients:
 * every physical pointer it forms could name another client's mirrors,
 * table or marks (on lavapipe: any byte of the daemon).  So a module is
 * taken only where every PhysicalStorageBuffer pointer it can form comes
 * from the lookup helper's answer, within the access's bounds:
 *
 *  - a function that forms pointers must be one the daemon wrote into the
 *    module itself (the re-link of validate.c: the helper and the load
 *    functions, their ids in @own), or the lookup helper exactly as
 *    lib/lookup_spirv.c writes it (one of its non-reference variants),
 *    compared instruction by instruction up to the renaming of ids, with
 *    its types, constants and member offsets;
 *  - a load function is called with the daemon's table, marks and window
 *    bounds (its address is clamped into the window) and a 4-byte aligned
 *    guest address; only functions an entry point reaches are checked;
 *  - the helper is called with the daemon's own push words (table, home
 *    slots, chunk shift, marks) and a 4-byte aligned guest address;
 *  - anywhere else, a pointer is made only by OpConvertUToPtr of: the
 *    helper's mark address, the marks' sink word (push words 4, 5), or
 *    "dev != 0 ? dev : mark" with dev the helper's device address; and only
 *    to at most 64 bytes (a scalar, vector or struct of them, no array),
 *    reached from there by constant OpAccessChain indices; a pointer to N
 *    bytes from dev needs a guest address known to be N-aligned;
 *  - no pointer is stored, loaded, passed, selected, bitcast or undefined;
 *    no descriptor-backed storage, no VariablePointers.
 *
 * A dev answered for an N-byte aligned guest address g lies in g's chunk
 * (a chunk is at least a page), so N bytes from it stay in memory of that
 * chunk: the client's own home page or mirror.  A mark address lies in the
 * client's marks, which have HM_MARKS_SLACK bytes past their last word.
 *
 * On a CPU device (lavapipe) Workgroup, Private and Function memory is
 * the daemon's heap and stacks: an index into an array there must be a
 * constant or masked/reduced below its length (x & K, x % K).
 */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <hmirror/lookup.h>
#include <hmirror/table.h>
#include "isolate.h"
#include "spirv.h"

/* the widest access through one pointer: a mark address + this stays in
 * the marks (hmirror/table.h) */
#define HM_ISOLATE_MAX_ACCESS HM_MARKS_SLACK

static int64_t member_offset(const struct hmd_spv *m, uint32_t st, uint32_t member)
{
	for (size_t i = 0; i < m->nr_moff; i++)
		if (m->moff[i].id == st && m->moff[i].member == member)
			return m->moff[i].offset;
	return -1;
}

static uint32_t array_stride(const struct hmd_spv *m, uint32_t ty)
{
	for (size_t i = 5; i < m->n;) {
		uint32_t wc = m->w[i] >> 16;

		if ((m->w[i] & 0xffff) == OP_Decorate && wc >= 4 && m->w[i + 1] == ty &&
		    m->w[i + 2] == DEC_ArrayStride)
			return m->w[i + 3];
		if ((m->w[i] & 0xffff) == OP_Function)
			break;
		i += wc;
	}
	return 0;
}

static bool is_psb_ptr(const struct hmd_spv *m, uint32_t ty)
{
	const uint32_t *d = hmd_spv_def(m, ty);

	return d && (d[0] & 0xffff) == OP_TypePointer && d[2] == SC_PSB;
}

/* does type ty hold a PhysicalStorageBuffer pointer anywhere (a pointer to
 * one included)?  depth-bounded */
static bool holds_psb_ptr(const struct hmd_spv *m, uint32_t ty, int depth)
{
	const uint32_t *d = hmd_spv_def(m, ty);
	uint32_t wc;

	if (!d || depth > 16)
		return depth > 16;
	wc = d[0] >> 16;
	switch (d[0] & 0xffff) {
	case OP_TypePointer:
		return d[2] == SC_PSB || holds_psb_ptr(m, d[3], depth + 1);
	case OP_TypeVector: case OP_TypeMatrix: case OP_TypeArray: case OP_TypeRuntimeArray:
		return holds_psb_ptr(m, d[2], depth + 1);
	case OP_TypeStruct:
		for (uint32_t k = 2; k < wc; k++)
			if (holds_psb_ptr(m, d[k], depth + 1))
				return true;
		return false;
	case OP_TypeFunction:
		for (uint32_t k = 2; k < wc; k++)
			if (holds_psb_ptr(m, d[k], depth + 1))
				return true;
		return false;
	default:
		return false;
	}
}

/* bytes a pointer to ty may reach: scalars, vectors of them, structs of
 * those with explicit offsets; -1 for anything else (arrays: no bound) */
static int64_t extent(const struct hmd_spv *m, uint32_t ty, int depth)
{
	const uint32_t *d = hmd_spv_def(m, ty);
	int64_t e = 0, x;

	if (!d || depth > 8)
		return -1;
	switch (d[0] & 0xffff) {
	case OP_TypeInt: case OP_TypeFloat:
		return d[2] / 8;
	case OP_TypeVector:
		x = extent(m, d[2], depth + 1);
		return x < 0 ? -1 : x * d[3];
	case OP_TypeStruct:
		for (uint32_t k = 2; k < (d[0] >> 16); k++) {
			int64_t off = member_offset(m, ty, k - 2);

			x = extent(m, d[k], depth + 1);
			if (off < 0 || x < 0)
				return -1;
			if (off + x > e)
				e = off + x;
		}
		return e;
	default:
		return -1;
	}
}

/* ---- the canonical helper ------------------------------------------------ */

struct cmp {
	const struct hmd_spv *a, *b;	/* canonical, client */
	uint32_t *map;			/* a's id -> b's id */
};

static bool same_id(struct cmp *c, uint32_t ia, uint32_t ib, int depth);

/* two global definitions (types, constants) alike */
static bool same_global(struct cmp *c, uint32_t ia, uint32_t ib, int depth)
{
	const uint32_t *da = hmd_spv_def(c->a, ia), *db = hmd_spv_def(c->b, ib);
	uint32_t op, wc;

	if (!da || !db || depth > 16 || da[0] != db[0])
		return false;
	op = da[0] & 0xffff;
	wc = da[0] >> 16;
	switch (op) {
	case OP_TypeVoid: case OP_TypeBool:
		return true;
	case OP_TypeInt: case OP_TypeFloat:
		return !memcmp(da + 2, db + 2, (wc - 2) * 4);
	case OP_TypeVector:
		return da[3] == db[3] && same_id(c, da[2], db[2], depth + 1);
	case OP_TypePointer:
		return da[2] == db[2] && same_id(c, da[3], db[3], depth + 1);
	case OP_TypeStruct:
		for (uint32_t k = 2; k < wc; k++)
			if (!same_id(c, da[k], db[k], depth + 1) ||
			    member_offset(c->a, ia, k - 2) != member_offset(c->b, ib, k - 2))
				return false;
		return true;
	case OP_TypeFunction:
		for (uint32_t k = 2; k < wc; k++)
			if (!same_id(c, da[k], db[k], depth + 1))
				return false;
		return true;
	case OP_Constant:
		return same_id(c, da[1], db[1], depth + 1) && !memcmp(da + 3, db + 3, (wc - 3) * 4);
	case 41: case 42:	/* OpConstantTrue/False */
		return same_id(c, da[1], db[1], depth + 1);
	default:
		return false;
	}
}

static bool same_id(struct cmp *c, uint32_t ia, uint32_t ib, int depth)
{
	if (ia >= c->a->bound || ib >= c->b->bound)
		return false;
	if (c->map[ia])
		return c->map[ia] == ib;
	/* an id not yet seen: a global of the canonical module (the helper's
	 * own results are mapped where they are defined) */
	if (c->a->fn_of[ia] || c->b->fn_of[ib] || !same_global(c, ia, ib, depth))
		return false;
	c->map[ia] = ib;
	return true;
}

static bool skip_ins(uint32_t op)
{
	return op == OP_Line || op == OP_NoLine || op == OP_Nop;
}

/* is the client's function at instruction j the canonical one at i? */
static bool same_function(const struct hmd_spv *a, size_t i, const struct hmd_spv *b, size_t j)
{
	struct cmp c = { a, b, calloc(a->bound, sizeof(uint32_t)) };
	bool ok = false;

	if (!c.map)
		return false;
	for (;;) {
		while (i < a->nr_ins && skip_ins(a->w[a->ins[i].at] & 0xffff))
			i++;
		while (j < b->nr_ins && skip_ins(b->w[b->ins[j].at] & 0xffff))
			j++;
		if (i >= a->nr_ins || j >= b->nr_ins)
			break;
		const struct hmd_spv_insn *ia = &a->ins[i], *ib = &b->ins[j];
		const uint32_t *x = a->w + ia->at, *y = b->w + ib->at;
		uint32_t wc = x[0] >> 16;
		bool bad = x[0] != y[0] || wc > 64 || ia->idmask != ib->idmask;

		for (uint32_t k = 1; k < wc && !bad; k++) {
			if (!(ia->idmask & (1ull << k))) {
				bad = x[k] != y[k];		/* a literal */
			} else if (ia->result && x[k] == ia->result && k == (ia->type ? 2u : 1u)) {
				/* the result: defined here, mapped once */
				if (c.map[x[k]] || ib->result != y[k])
					bad = true;
				else
					c.map[x[k]] = y[k];
			} else {
				bad = !same_id(&c, x[k], y[k], 0);
			}
		}
		if (bad)
			break;
		if ((x[0] & 0xffff) == OP_FunctionEnd) {
			ok = true;
			break;
		}
		i++;
		j++;
	}
	free(c.map);
	return ok;
}

static struct hmd_spv canon[16];
static unsigned nr_canon;
static uint32_t *canon_words[16];
static size_t canon_fn[16];
static pthread_once_t canon_once = PTHREAD_ONCE_INIT;

static void canon_init(void)
{
	for (unsigned v = 0; v < hm_lookup_nr_variants && nr_canon < 16; v++) {
		uint32_t *w;
		size_t n;

		if (hm_spirv_lookup_library_variant(hm_lookup_variants[v].flags, &w, &n) < 0)
			continue;
		if (hmd_spv_parse(&canon[nr_canon], w, n) < 0) {
			hmd_spv_free(&canon[nr_canon]);
			free(w);
			continue;
		}
		for (size_t i = 0; i < canon[nr_canon].nr_ins; i++)
			if ((w[canon[nr_canon].ins[i].at] & 0xffff) == OP_Function) {
				canon_fn[nr_canon] = i;
				break;
			}
		canon_words[nr_canon++] = w;
	}
}

/* ---- the client's functions ---------------------------------------------- */

struct chk {
	const struct hmd_spv *m;
	uint8_t *helper;	/* function id -> 1: a helper the check trusts */
	uint8_t *load;		/* function id -> N: the daemon's N-word load function */
	uint8_t *live;		/* function id -> 1: an entry point may call it */
	bool cpu;
	char *msg;
	size_t cap;
};

static int refuse(struct chk *k, size_t at, const char *why)
{
	snprintf(k->msg, k->cap, "isolation: %s (instruction at word %zu)", why, at);
	return -EACCES;
}

/* u32 push word k: OpLoad of an OpAccessChain into the push block at byte 4k */
static bool push_word(const struct hmd_spv *m, uint32_t id, uint32_t k)
{
	const uint32_t *ld = hmd_spv_def(m, id), *ac, *var;
	uint64_t off = 0, idx;
	uint32_t ty;

	if (!ld || (ld[0] & 0xffff) != OP_Load || !m->pc_var)
		return false;
	ac = hmd_spv_def(m, ld[3]);
	if (!ac || ((ac[0] & 0xffff) != OP_AccessChain &&
		    (ac[0] & 0xffff) != OP_InBoundsAccessChain) || ac[3] != m->pc_var)
		return false;
	var = hmd_spv_def(m, m->pc_var);
	ty = hmd_spv_def(m, var[1])[3];	/* the block's type */
	for (uint32_t a = 4; a < (ac[0] >> 16); a++) {
		const uint32_t *t = hmd_spv_def(m, ty);

		if (!t || !hmd_spv_const(m, ac[a], &idx))
			return false;
		if ((t[0] & 0xffff) == OP_TypeStruct) {
			int64_t mo = member_offset(m, ty, (uint32_t)idx);

			if (mo < 0 || 2 + idx >= (t[0] >> 16))
				return false;
			off += (uint64_t)mo;
			ty = t[2 + idx];
		} else if ((t[0] & 0xffff) == OP_TypeArray) {
			uint32_t st = array_stride(m, ty);

			if (!st)
				return false;
			off += idx * st;
			ty = t[2];
		} else {
			return false;
		}
	}
	return off == 4ull * k && extent(m, ty, 0) == 4;
}

/* lo | (hi << 32) of two u32 values; their ids in *lo, *hi */
static bool join64(const struct hmd_spv *m, uint32_t id, uint32_t *lo, uint32_t *hi)
{
	const uint32_t *o = hmd_spv_def(m, id), *a, *b, *s, *ua, *ub;
	uint64_t k;

	if (!o || (o[0] & 0xffff) != OP_BitwiseOr)
		return false;
	for (int sw = 0; sw < 2; sw++) {
		a = hmd_spv_def(m, o[3 + sw]);
		b = hmd_spv_def(m, o[4 - sw]);
		if (!a || !b || (a[0] & 0xffff) != OP_UConvert || (b[0] & 0xffff) != OP_ShiftLeftLogical)
			continue;
		s = b;
		if (!hmd_spv_const(m, s[4], &k) || k != 32)
			continue;
		ua = a;
		ub = hmd_spv_def(m, s[3]);
		if (!ub || (ub[0] & 0xffff) != OP_UConvert)
			continue;
		*lo = ua[3];
		*hi = ub[3];
		return true;
	}
	return false;
}

static bool push_u64(const struct hmd_spv *m, uint32_t id, uint32_t k)
{
	uint32_t lo, hi;

	return join64(m, id, &lo, &hi) && push_word(m, lo, k) && push_word(m, hi, k + 1);
}

/* half h of the helper call's answer: OpCompositeExtract of the call */
static uint32_t call_half(struct chk *k, uint32_t id, uint32_t h)
{
	const uint32_t *x = hmd_spv_def(k->m, id), *c;

	if (!x || (x[0] & 0xffff) != OP_CompositeExtract || (x[0] >> 16) != 5 || x[4] != h)
		return 0;
	c = hmd_spv_def(k->m, x[3]);
	if (!c || (c[0] & 0xffff) != OP_FunctionCall || c[3] >= k->m->bound || !k->helper[c[3]])
		return 0;
	return x[3];
}

/* the helper call whose half pair (h, h+1) id joins, 0 if none */
static uint32_t helper_pair(struct chk *k, uint32_t id, uint32_t h)
{
	uint32_t lo, hi, c;

	if (!join64(k->m, id, &lo, &hi))
		return 0;
	c = call_half(k, lo, h);
	return c && call_half(k, hi, h + 1) == c ? c : 0;
}

/*
 * How many low bits of integer @id are known to be 0 (at most
 * ALIGN_BITS_MAX): constants, masks, shifts, sums, products, conversions
 * and selects of such values.
 */
#define ALIGN_BITS_MAX 12
static unsigned int align_bits(const struct hmd_spv *m, uint32_t id, int depth)
{
	const uint32_t *d = hmd_spv_def(m, id);
	unsigned int a, b;
	uint64_t v;

	if (!d || depth > 12)
		return 0;
	switch (d[0] & 0xffff) {
	case OP_Constant:
		if (!hmd_spv_const(m, id, &v))
			return 0;
		return v ? (unsigned int)__builtin_ctzll(v) < ALIGN_BITS_MAX ?
			   (unsigned int)__builtin_ctzll(v) : ALIGN_BITS_MAX : ALIGN_BITS_MAX;
	case OP_BitwiseAnd:
		a = align_bits(m, d[3], depth + 1);
		b = align_bits(m, d[4], depth + 1);
		return a > b ? a : b;
	case OP_BitwiseOr:
	case OP_IAdd:
	case OP_Select:
		a = align_bits(m, d[(d[0] & 0xffff) == OP_Select ? 4 : 3], depth + 1);
		b = align_bits(m, d[(d[0] & 0xffff) == OP_Select ? 5 : 4], depth + 1);
		return a < b ? a : b;
	case OP_ShiftLeftLogical:
		a = align_bits(m, d[3], depth + 1);
		if (hmd_spv_const(m, d[4], &v) && v < 64)
			a += (unsigned int)v;
		return a < ALIGN_BITS_MAX ? a : ALIGN_BITS_MAX;
	case OP_IMul:
		a = align_bits(m, d[3], depth + 1) + align_bits(m, d[4], depth + 1);
		return a < ALIGN_BITS_MAX ? a : ALIGN_BITS_MAX;
	case OP_UConvert:
		return align_bits(m, d[3], depth + 1);
	default:
		return 0;
	}
}

/* the helper's mark address, or the marks' sink word */
static bool mark_addr(struct chk *k, uint32_t id)
{
	return helper_pair(k, id, 2) || push_u64(k->m, id, HM_PUSH_MARKS_ADDR_LO);
}

/* where OpConvertUToPtr may point: see the top of this file */
static int check_convert(struct chk *k, size_t at)
{
	const uint32_t *w = k->m->w + at, *sel, *cond, *pt, *call;
	uint64_t zero;
	unsigned int bits;
	int64_t e;

	pt = hmd_spv_def(k->m, w[1]);
	e = pt ? extent(k->m, pt[3], 0) : -1;
	if (e < 0 || e > HM_ISOLATE_MAX_ACCESS)
		return refuse(k, at, "a pointer to an array, or to more than 64 bytes");
	if (mark_addr(k, w[3]))
		return 0;	/* the marks have HM_MARKS_SLACK bytes past their last word */
	sel = hmd_spv_def(k->m, w[3]);
	if (!sel || (sel[0] & 0xffff) != OP_Select || !helper_pair(k, sel[4], 0) ||
	    !mark_addr(k, sel[5]))
		return refuse(k, at, "a pointer not made from the lookup helper's answer "
			      "(dev != 0 ? dev : mark, or a mark)");
	cond = hmd_spv_def(k->m, sel[3]);
	if (!cond || (cond[0] & 0xffff) != OP_INotEqual ||
	    !((cond[3] == sel[4] && hmd_spv_const(k->m, cond[4], &zero) && !zero) ||
	      (cond[4] == sel[4] && hmd_spv_const(k->m, cond[3], &zero) && !zero)))
		return refuse(k, at, "a device address used without its dev != 0 test");
	/* e bytes from dev stay in the chunk where the guest address is e-aligned */
	call = hmd_spv_def(k->m, helper_pair(k, sel[4], 0));
	bits = align_bits(k->m, call[4], 0);
	if (e > (1ll << bits))
		return refuse(k, at, "an access wider than the guest address is known to "
			      "be aligned (mask it: g & ~(size - 1))");
	return 0;
}

/*
 * A call of one of the daemon's load functions (either form): its table,
 * marks and window bounds the daemon's push words, the guest address
 * 4-byte aligned.  The window delta may be anything: the address it gives
 * is clamped into [first, last], and last is the window's last 64 bytes.
 */
static int check_load_call(struct chk *k, size_t at)
{
	const uint32_t *w = k->m->w + at;

	if ((w[0] >> 16) != 12)
		return refuse(k, at, "a load function called with the wrong arguments");
	if (align_bits(k->m, w[4], 0) < 2)
		return refuse(k, at, "a load function called for a guest address not "
			      "known to be 4-byte aligned");
	if (!push_u64(k->m, w[5], HM_PUSH_TABLE_ADDR_LO) ||
	    !push_word(k->m, w[6], HM_PUSH_TABLE_NR_HOME) ||
	    !push_word(k->m, w[7], HM_PUSH_CHUNK_SHIFT) ||
	    !push_u64(k->m, w[8], HM_PUSH_MARKS_ADDR_LO) ||
	    !push_u64(k->m, w[10], HM_PUSH_WINDOW_FIRST_LO) ||
	    !push_u64(k->m, w[11], HM_PUSH_WINDOW_LAST_LO))
		return refuse(k, at, "a load function called with a table, shift, marks or "
			      "window other than the daemon's push words");
	return 0;
}

static int check_call(struct chk *k, size_t at)
{
	const uint32_t *w = k->m->w + at;

	if (w[3] < k->m->bound && k->load[w[3]])
		return check_load_call(k, at);
	if (w[3] >= k->m->bound || !k->helper[w[3]])
		return 0;	/* another function of the module's: checked itself */
	if ((w[0] >> 16) != 9)
		return refuse(k, at, "the lookup helper called with the wrong arguments");
	if (align_bits(k->m, w[4], 0) < 2)
		return refuse(k, at, "the lookup helper called for a guest address not "
			      "known to be 4-byte aligned");
	if (!push_u64(k->m, w[5], HM_PUSH_TABLE_ADDR_LO) ||
	    !push_word(k->m, w[6], HM_PUSH_TABLE_NR_HOME) ||
	    !push_word(k->m, w[7], HM_PUSH_CHUNK_SHIFT) ||
	    !push_u64(k->m, w[8], HM_PUSH_MARKS_ADDR_LO))
		return refuse(k, at, "the lookup helper called with a table, shift or marks "
			      "other than the daemon's push words");
	return 0;
}

/* an index into an array of Workgroup, Private or Function memory */
static bool index_in_range(const struct hmd_spv *m, uint32_t id, uint64_t len)
{
	const uint32_t *d = hmd_spv_def(m, id);
	uint64_t v;

	if (hmd_spv_const(m, id, &v))
		return v < len;
	if (!d)
		return false;
	if ((d[0] & 0xffff) == OP_BitwiseAnd)
		return (hmd_spv_const(m, d[3], &v) && v < len) || (hmd_spv_const(m, d[4], &v) && v < len);
	if ((d[0] & 0xffff) == OP_UMod)
		return hmd_spv_const(m, d[4], &v) && v && v <= len;
	return false;
}

static int check_local_chain(struct chk *k, size_t at)
{
	const uint32_t *w = k->m->w + at, *bp, *bt;
	uint32_t ty;
	uint64_t len;

	bp = hmd_spv_def(k->m, w[3]);
	if (!bp)
		return refuse(k, at, "an access chain of an unknown base");
	bt = hmd_spv_def(k->m, bp[1]);	/* the base's pointer type */
	if (!bt || (bt[0] & 0xffff) != OP_TypePointer)
		return refuse(k, at, "an access chain of a non-pointer");
	if (bt[2] != SC_Workgroup && bt[2] != SC_Private && bt[2] != SC_Function)
		return 0;
	ty = bt[3];
	for (uint32_t a = 4; a < (w[0] >> 16); a++) {
		const uint32_t *t = hmd_spv_def(k->m, ty);

		if (!t)
			return refuse(k, at, "an access chain through an unknown type");
		switch (t[0] & 0xffff) {
		case OP_TypeStruct:
			if (!hmd_spv_const(k->m, w[a], &len) || 2 + len >= (t[0] >> 16))
				return refuse(k, at, "a struct member out of range");
			ty = t[2 + len];
			break;
		case OP_TypeArray:
			if (!hmd_spv_const(k->m, t[3], &len) || !index_in_range(k->m, w[a], len))
				return refuse(k, at, "an index into local memory not known to be "
					      "in range (mask it, x & K, or x % K)");
			ty = t[2];
			break;
		case OP_TypeVector: case OP_TypeMatrix:
			if (!index_in_range(k->m, w[a], t[3]))
				return refuse(k, at, "a vector index not known to be in range");
			ty = t[2];
			break;
		default:
			return refuse(k, at, "an access chain through a non-composite");
		}
	}
	return 0;
}

static int check_body(struct chk *k, size_t from, size_t to)
{
	const struct hmd_spv *m = k->m;

	for (size_t n = from; n <= to; n++) {
		size_t i = m->ins[n].at;
		const uint32_t *w = m->w + i;
		uint32_t op = w[0] & 0xffff, ty = m->ins[n].type;
		int r = 0;

		if (op == OP_PtrAccessChain || op == OP_InBoundsPtrAccessChain ||
		    op == OP_CopyMemory || op == OP_CopyMemorySized)
			return refuse(k, i, "pointer arithmetic or a memory copy");
		if (op == OP_FunctionCall)
			r = check_call(k, i);
		if (r == 0 && (op == OP_AccessChain || op == OP_InBoundsAccessChain)) {
			if (is_psb_ptr(m, ty)) {
				const uint32_t *b = hmd_spv_def(m, w[3]);
				uint64_t v;

				if (!b || !is_psb_ptr(m, b[1]))
					return refuse(k, i, "a device pointer from a logical one");
				for (uint32_t a = 4; a < (w[0] >> 16); a++)
					if (!hmd_spv_const(m, w[a], &v))
						return refuse(k, i, "a device access chain with a "
							      "variable index");
			} else if (k->cpu) {
				r = check_local_chain(k, i);
			}
		} else if (r == 0 && m->ins[n].result && ty && is_psb_ptr(m, ty)) {
			if (op != OP_ConvertUToPtr)
				return refuse(k, i, "a device pointer made other than by "
					      "OpConvertUToPtr");
			r = check_convert(k, i);
		}
		if (r)
			return r;
	}
	return 0;
}

/*
 * The functions an entry point reaches through calls: only they can run
 * (a linked module keeps the GLSL stand-ins and the functions spirv-opt
 * inlined, called by nobody).  The speculative tier calls the load
 * functions' other form, which the daemon wrote: no new caller.
 */
static int mark_live(struct chk *k)
{
	const struct hmd_spv *m = k->m;
	uint32_t *stack;
	size_t sp = 0;

	k->live = calloc(m->bound, 1);
	stack = calloc(m->bound, sizeof(*stack));
	if (!k->live || !stack) {
		free(stack);
		return -ENOMEM;
	}
	for (size_t n = 0; n < m->nr_ins; n++) {
		const uint32_t *w = m->w + m->ins[n].at;

		if ((w[0] & 0xffff) == OP_EntryPoint && (w[0] >> 16) >= 3 && w[2] < m->bound &&
		    !k->live[w[2]]) {
			k->live[w[2]] = 1;
			stack[sp++] = w[2];
		}
	}
	while (sp) {
		const uint32_t *d = hmd_spv_def(m, stack[--sp]);

		if (!d || (d[0] & 0xffff) != OP_Function)
			continue;
		for (const uint32_t *w = d; w < m->w + m->n && (w[0] >> 16); w += w[0] >> 16) {
			if ((w[0] & 0xffff) == OP_FunctionEnd)
				break;
			if ((w[0] & 0xffff) == OP_FunctionCall && (w[0] >> 16) >= 4 &&
			    w[3] < m->bound && !k->live[w[3]]) {
				k->live[w[3]] = 1;
				stack[sp++] = w[3];
			}
		}
	}
	free(stack);
	return 0;
}

int hmd_isolation_check(const uint32_t *words, size_t nr_words, bool cpu_device,
			const struct hm_spirv_relinked *own, char *msg, size_t cap)
{
	struct hmd_spv m;
	struct chk k = { .m = &m, .cpu = cpu_device, .msg = msg, .cap = cap };
	int r;

	pthread_once(&canon_once, canon_init);
	if (!nr_canon) {
		snprintf(msg, cap, "isolation: no canonical lookup helper");
		return -ENOMEM;
	}
	r = hmd_spv_parse(&m, words, nr_words);
	if (r < 0) {
		hmd_spv_free(&m);
		snprintf(msg, cap, "isolation: cannot parse the module");
		return r == -ENOMEM ? r : -EACCES;
	}
	k.helper = calloc(m.bound, 1);
	k.load = calloc(m.bound, 1);
	if (!k.helper || !k.load) {
		free(k.helper);
		free(k.load);
		hmd_spv_free(&m);
		return -ENOMEM;
	}
	/* what the daemon wrote itself (the re-link): trusted whole */
	if (own && own->helper < m.bound)
		k.helper[own->helper] = 1;
	for (unsigned f = 0; own && f < 2; f++)
		for (unsigned n = 0; n < HM_ACCESS_MAX_BYTES / 4; n++)
			if (own->load[f][n] && own->load[f][n] < m.bound)
				k.load[own->load[f][n]] = (uint8_t)(n + 1);
	/* module-wide: capabilities, storage, types, global values */
	for (size_t n = 0; n < m.nr_ins && !r; n++) {
		const struct hmd_spv_insn *in = &m.ins[n];
		const uint32_t *w = m.w + in->at;
		uint32_t op = w[0] & 0xffff, wc = w[0] >> 16;

		if (op == OP_Capability && (w[1] == 4439 /* VariablePointersStorageBuffer */ ||
					    w[1] == 4442 /* VariablePointers */ ||
					    w[1] == 5 /* Linkage */ || w[1] == 4 /* Addresses */))
			r = refuse(&k, in->at, "a capability that lets pointers escape");
		else if (op == OP_Variable && wc >= 4 && w[3] != SC_Input && w[3] != SC_Output &&
			 w[3] != SC_Workgroup && w[3] != SC_Private && w[3] != SC_Function &&
			 w[3] != SC_PushConstant)
			r = refuse(&k, in->at, "memory other than push constants, workgroup, "
				   "private and function variables (no descriptors)");
		else if ((op == OP_TypeStruct || op == OP_TypeArray || op == OP_TypeRuntimeArray ||
			  op == OP_TypeVector || op == OP_TypeMatrix || op == OP_TypeFunction) &&
			 holds_psb_ptr(&m, w[1], 0))
			r = refuse(&k, in->at, "a type that holds a device pointer");
		else if (op == OP_TypePointer && w[2] != SC_PSB && holds_psb_ptr(&m, w[3], 0))
			r = refuse(&k, in->at, "a pointer to a device pointer");
		else if (in->result && in->type && is_psb_ptr(&m, in->type) &&
			 m.fn_of[in->result] == 0)
			r = refuse(&k, in->at, "a device pointer constant, undef or variable");
		else if (op == OP_Function && wc >= 5) {
			for (unsigned v = 0; v < nr_canon; v++)
				if (same_function(&canon[v], canon_fn[v], &m, n)) {
					k.helper[w[2]] = 1;
					break;
				}
		}
	}
	/* every function an entry point reaches but the helpers, compared
	 * whole or the daemon's, and the daemon's load functions */
	if (!r)
		r = mark_live(&k);
	for (size_t n = 0, fn_at = 0; n < m.nr_ins && !r; n++) {
		uint32_t op = m.w[m.ins[n].at] & 0xffff, fn;

		if (op == OP_Function)
			fn_at = n;
		fn = m.w[m.ins[fn_at].at + 2];
		if (op == OP_FunctionEnd && fn < m.bound && k.live[fn] && !k.helper[fn] &&
		    !k.load[fn])
			r = check_body(&k, fn_at, n);
	}
	free(k.live);
	free(k.helper);
	free(k.load);
	hmd_spv_free(&m);
	return r;
}
