// SPDX-License-Identifier: GPL-2.0
/*
 * hmirror-bench lookup: the cost of a device-addressed access through the
 * lookup helper against the same access through a raw device address
 * (D969's device_addressed_access_cost method).
 *
 * 128 groups of 64 lanes (one invocation per lane); each lane runs a
 * dependent chain of loads: the word it loads is the offset of its next
 * load.  A dispatch of 4 steps and one of 36 steps are timed (device
 * timestamps) and the difference over the 32 extra steps is the cost of a
 * step (all 8192 lanes).  Variants:
 *   path       raw (device address = base + offset) | helper (guest address
 *              through hm_lookup, the guarded load at the call site)
 *   data       device-local | imported host memory
 *   footprint  cache: each step 64 KiB further (2.3 MiB in all) |
 *              past: each step 2 MiB further (72 MiB in all)
 *   table      device-local (host-visible where there is such memory) | host
 *   op         load | load + store beside it (same lookup) with | without
 *              the mark store
 * then, with --variants (default: all), every emission variant of the
 * helper (hm_lookup_variants[], lib/lookup_spirv.c) side by side in the
 * same run, for device-local data and table: load in the cache and past
 * it, each for a new chunk at every step (64 KiB chunks, as above) and for
 * one chunk under the whole chain (128 MiB chunks: the table window is
 * read again at every step, so it can stay in the SM's L1), and load +
 * store in the cache.  Next to the raw chain each row also gives the raw
 * chain with the call site's guard (branch on dev != 0, phi), so that
 * helper - raw_guard is the lookup alone.
 * Every program is built at run time with the append API (lib/lookup_spirv.c),
 * so the binary needs no file.  Several rounds, medians, ratios; --json
 * prints one object per line.
 */
#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <spirv/unified1/spirv.h>

#include "hmirror/vkctx.h"
#include "hmirror/table.h"
#include "hmirror/lookup.h"
#include "../../lib/lookup_reference.h"
#include "common.h"
#include "lookup_bench.h"

const char *const lk_path_name[NR_PATHS] = { "raw", "helper", "raw+guard", "flat", "spec",
					     "selguard", "mmu", "sentinel", "site",
					     "site-compact" };
const char *const lk_op_name[NR_OPS] = { "load", "load+store", "load+store,no-marks" };

/* which ops a path's program has */
bool lk_path_has_op(enum path path, enum op op)
{
	return path < NR_PATHS && (path <= PATH_RAW_GUARD || op == OP_LOAD);
}

/* ---- programs ------------------------------------------------------------ */
#define FN HM_SPV_SEC_FUNCTION

struct kb {
	struct hm_spirv_module *m;
	uint32_t u32, u64, bl, psb_u32, label;
	enum path path;                 /* of the chain (PATH_SITE: its speculative tier) */
	uint32_t width;                 /* PATH_SITE*: words a load (SITE_WIDTH()) */
};

static void kb_label(struct kb *k, uint32_t id)
{
	HM_SPV(k->m, FN, SpvOpLabel, id);
	k->label = id;
}

/* a 64-bit id from two u32 ids, in section sec */
static uint32_t join_in(struct kb *k, int sec, uint32_t lo, uint32_t hi)
{
	return HM_SPV_OP(k->m, sec, SpvOpBitwiseOr, k->u64,
			 HM_SPV_OP(k->m, sec, SpvOpUConvert, k->u64, lo),
			 HM_SPV_OP(k->m, sec, SpvOpShiftLeftLogical, k->u64,
				   HM_SPV_OP(k->m, sec, SpvOpUConvert, k->u64, hi),
				   hm_spirv_const_u32(k->m, 32)));
}

static uint32_t kb_join(struct kb *k, uint32_t lo, uint32_t hi)
{
	return join_in(k, FN, lo, hi);
}

static void kb_store32(struct kb *k, uint32_t addr, uint32_t v)
{
	HM_SPV(k->m, FN, SpvOpStore,
	       HM_SPV_OP(k->m, FN, SpvOpConvertUToPtr, k->psb_u32, addr), v,
	       SpvMemoryAccessAlignedMask, 4);
}

/*
 * The compute entry point both benchmark programs share (a push block of
 * PUSH_WORDS u32, LANES lanes): hm_spirv_compute_main(), with the open
 * block recorded in k; answers the lane index.
 */
static uint32_t kb_main(struct kb *k, uint32_t push[PUSH_WORDS])
{
	uint32_t gidx = 0;

	k->label = hm_spirv_compute_main(k->m, PUSH_WORDS, LANES, push, &gidx);
	return gidx;
}

/* The speculative address (PATH_SPEC and after): sdev + min(guest - sbase,
 * lim), in section sec. */
static uint32_t spec_addr(struct kb *k, int sec, uint32_t guest, uint32_t sdev, uint32_t sbase,
			  uint32_t lim)
{
	struct hm_spirv_module *m = k->m;
	uint32_t rel = HM_SPV_OP(m, sec, SpvOpISub, k->u64, guest, sbase);

	rel = HM_SPV_OP(m, sec, SpvOpSelect, k->u64,
			HM_SPV_OP(m, sec, SpvOpULessThan, k->bl, rel, lim), rel, lim);
	return HM_SPV_OP(m, sec, SpvOpIAdd, k->u64, sdev, rel);
}

/* Confirm a speculative word: vs where hit, else the guarded load at dev
 * (0 where dev is 0).  *label: the block open on entry, then the merge
 * block open on return; the word is answered. */
static uint32_t spec_confirm(struct kb *k, int sec, uint32_t *label, uint32_t hit, uint32_t vs,
			     uint32_t dev)
{
	struct hm_spirv_module *m = k->m;
	uint32_t slow = hm_spirv_id(m), ld = hm_spirv_id(m), m1 = hm_spirv_id(m);
	uint32_t m2 = hm_spirv_id(m), nz, v, vslow;

	HM_SPV(m, sec, SpvOpSelectionMerge, m1, SpvSelectionControlMaskNone);
	HM_SPV(m, sec, SpvOpBranchConditional, hit, m1, slow);
	HM_SPV(m, sec, SpvOpLabel, slow);
	nz = HM_SPV_OP(m, sec, SpvOpINotEqual, k->bl, dev, hm_spirv_const_u64(m, 0));
	HM_SPV(m, sec, SpvOpSelectionMerge, m2, SpvSelectionControlMaskNone);
	HM_SPV(m, sec, SpvOpBranchConditional, nz, ld, m2);
	HM_SPV(m, sec, SpvOpLabel, ld);
	v = HM_SPV_OP(m, sec, SpvOpLoad, k->u32,
		      HM_SPV_OP(m, sec, SpvOpConvertUToPtr, k->psb_u32, dev),
		      SpvMemoryAccessAlignedMask, 4);
	HM_SPV(m, sec, SpvOpBranch, m2);
	HM_SPV(m, sec, SpvOpLabel, m2);
	vslow = HM_SPV_OP(m, sec, SpvOpPhi, k->u32, v, ld, hm_spirv_const_u32(m, 0), slow);
	HM_SPV(m, sec, SpvOpBranch, m1);
	HM_SPV(m, sec, SpvOpLabel, m1);
	v = HM_SPV_OP(m, sec, SpvOpPhi, k->u32, vs, *label, vslow, m2);
	*label = m1;
	return v;
}

/* The dev address of a call of the helper, in section sec */
static uint32_t call_lookup(struct kb *k, int sec, uint32_t guest, uint32_t table,
			    uint32_t nr_home, uint32_t shift, uint32_t marks)
{
	struct hm_spirv_module *m = k->m;
	uint32_t fn = hm_spirv_lookup_fn(m);
	uint32_t r = HM_SPV_OP(m, sec, SpvOpFunctionCall, hm_spirv_lookup_result_type(m), fn,
			       guest, table, nr_home, shift, marks);

	return join_in(k, sec, HM_SPV_OP(m, sec, SpvOpCompositeExtract, k->u32, r, 0),
		       HM_SPV_OP(m, sec, SpvOpCompositeExtract, k->u32, r, 1));
}

/* vs where hit; else the helper, called there only, and the guarded load
 * at its answer (PATH_SENTINEL); answers the word */
static uint32_t trusted_or_slow(struct kb *k, const struct hm_spirv_table_ids *t,
				uint32_t addr, uint32_t hit, uint32_t vs)
{
	struct hm_spirv_module *m = k->m;
	uint32_t pre = k->label, slow = hm_spirv_id(m), m1 = hm_spirv_id(m), v, dev, slow_end;

	HM_SPV(m, FN, SpvOpSelectionMerge, m1, SpvSelectionControlMaskNone);
	HM_SPV(m, FN, SpvOpBranchConditional, hit, m1, slow);
	kb_label(k, slow);
	dev = call_lookup(k, FN, addr, t->table, t->nr_home, t->chunk_shift, t->marks);
	v = spec_confirm(k, FN, &k->label, hm_spirv_const_bool(m, false), vs, dev);
	HM_SPV(m, FN, SpvOpBranch, m1);
	slow_end = k->label;
	kb_label(k, m1);
	return HM_SPV_OP(m, FN, SpvOpPhi, k->u32, vs, pre, v, slow_end);
}

/*
 * One access of a chain at guest (or raw) address addr, in the form of
 * path: the lookup and the guarded load (and for op != OP_LOAD the store
 * beside it, of s); *ret_val: the word loaded.  Emitted into the open
 * block of the open function; k->label is the block open on return.
 */
static int emit_access(struct kb *k, enum path path, enum op op,
		       const struct hm_spirv_table_ids *t, const uint32_t *push, uint32_t addr,
		       uint32_t s, uint32_t *ret_val)
{
	struct hm_spirv_module *m = k->m;
	uint32_t val, dev = addr, mark = 0;
	int r = 0;

	if (path == PATH_FLAT) {
		/* t->table: the flat array, biased so that chunk number c's
		 * delta lies at t->table + 8c */
		uint32_t psb_u64 = hm_spirv_type_pointer(m, SpvStorageClassPhysicalStorageBuffer,
							 k->u64);
		uint32_t e = HM_SPV_OP(m, FN, SpvOpIAdd, k->u64, t->table,
				       HM_SPV_OP(m, FN, SpvOpShiftLeftLogical, k->u64,
						 HM_SPV_OP(m, FN, SpvOpShiftRightLogical, k->u64,
							   addr, t->chunk_shift),
						 hm_spirv_const_u32(m, 3)));
		uint32_t delta = HM_SPV_OP(m, FN, SpvOpLoad, k->u64,
					   HM_SPV_OP(m, FN, SpvOpConvertUToPtr, psb_u64, e),
					   SpvMemoryAccessAlignedMask, 8);

		dev = HM_SPV_OP(m, FN, SpvOpIAdd, k->u64, addr, delta);
		val = HM_SPV_OP(m, FN, SpvOpLoad, k->u32,
				HM_SPV_OP(m, FN, SpvOpConvertUToPtr, k->psb_u32, dev),
				SpvMemoryAccessAlignedMask, 4);
	} else if (path == PATH_SPEC) {
		/* the speculative load: push 12-13 the device address of the
		 * space's first byte, 14-15 its guest address, 16-17 its size
		 * less 4 (the clamp keeps any guest address inside it) */
		uint32_t sa = spec_addr(k, FN, addr, kb_join(k, push[12], push[13]),
					kb_join(k, push[14], push[15]),
					kb_join(k, push[16], push[17]));
		uint32_t vs = HM_SPV_OP(m, FN, SpvOpLoad, k->u32,
					HM_SPV_OP(m, FN, SpvOpConvertUToPtr, k->psb_u32, sa),
					SpvMemoryAccessAlignedMask, 4);

		r = hm_spirv_emit_lookup(m, t, addr, &dev, &mark);
		if (r)
			return r;
		val = spec_confirm(k, FN, &k->label,
				   HM_SPV_OP(m, FN, SpvOpIEqual, k->bl, dev, sa), vs, dev);
	} else if (path == PATH_MMU) {
		dev = spec_addr(k, FN, addr, kb_join(k, push[12], push[13]),
				kb_join(k, push[14], push[15]), kb_join(k, push[16], push[17]));
		val = HM_SPV_OP(m, FN, SpvOpLoad, k->u32,
				HM_SPV_OP(m, FN, SpvOpConvertUToPtr, k->psb_u32, dev),
				SpvMemoryAccessAlignedMask, 4);
	} else if (path == PATH_SENTINEL) {
		/* push 20-21: a page of SENTINEL words */
		uint32_t sbase = kb_join(k, push[14], push[15]);
		uint32_t rel = HM_SPV_OP(m, FN, SpvOpISub, k->u64, addr, sbase);
		uint32_t sa = HM_SPV_OP(m, FN, SpvOpSelect, k->u64,
					HM_SPV_OP(m, FN, SpvOpULessThan, k->bl, rel,
						  kb_join(k, push[16], push[17])),
					HM_SPV_OP(m, FN, SpvOpIAdd, k->u64,
						  kb_join(k, push[12], push[13]), rel),
					kb_join(k, push[20], push[21]));
		uint32_t vs = HM_SPV_OP(m, FN, SpvOpLoad, k->u32,
					HM_SPV_OP(m, FN, SpvOpConvertUToPtr, k->psb_u32, sa),
					SpvMemoryAccessAlignedMask, 4);
		uint32_t hit = HM_SPV_OP(m, FN, SpvOpINotEqual, k->bl, vs,
					 hm_spirv_const_u32(m, SENTINEL));
		val = trusted_or_slow(k, t, addr, hit, vs);
	} else if (path == PATH_SITE || path == PATH_SITE_COMPACT) {
		/* the window: [sdev, sdev + lim] (lim: the last word's offset;
		 * the data buffer has 64 bytes more, so a clamped access of up
		 * to 16 words stays in it), or
		 * the sentinel page where lim is 0 (every load misses) */
		uint32_t sdev = kb_join(k, push[12], push[13]), lim = kb_join(k, push[16], push[17]);
		uint32_t sent = kb_join(k, push[20], push[21]);
		uint32_t miss = HM_SPV_OP(m, FN, SpvOpIEqual, k->bl, lim, hm_spirv_const_u64(m, 0));
		struct hm_spirv_window_ids w;

		w.delta = HM_SPV_OP(m, FN, SpvOpISub, k->u64, sdev, kb_join(k, push[14], push[15]));
		w.first = HM_SPV_OP(m, FN, SpvOpSelect, k->u64, miss, sent, sdev);
		w.last = HM_SPV_OP(m, FN, SpvOpSelect, k->u64, miss,
				   HM_SPV_OP(m, FN, SpvOpIAdd, k->u64, sent,
					     hm_spirv_const_u64(m, SENTINEL_BYTES - HM_ACCESS_MAX_BYTES)),
				   HM_SPV_OP(m, FN, SpvOpIAdd, k->u64, sdev, lim));
		uint32_t words[HM_ACCESS_MAX_BYTES / 4];

		r = hm_spirv_emit_load(m, t, &w, addr, k->width, words);
		if (r)
			return r;
		val = words[0];
		for (uint32_t i = 1; i < k->width; i++)
			val = HM_SPV_OP(m, FN, SpvOpIAdd, k->u32, val,
					HM_SPV_OP(m, FN, SpvOpShiftRightLogical, k->u32, words[i],
						  hm_spirv_const_u32(m, 31)));
	} else if (path == PATH_SELGUARD) {
		uint32_t nz, a;

		r = hm_spirv_emit_lookup(m, t, addr, &dev, &mark);
		if (r)
			return r;
		nz = HM_SPV_OP(m, FN, SpvOpINotEqual, k->bl, dev, hm_spirv_const_u64(m, 0));
		a = HM_SPV_OP(m, FN, SpvOpSelect, k->u64, nz, dev, t->table);
		val = HM_SPV_OP(m, FN, SpvOpSelect, k->u32, nz,
				HM_SPV_OP(m, FN, SpvOpLoad, k->u32,
					  HM_SPV_OP(m, FN, SpvOpConvertUToPtr, k->psb_u32, a),
					  SpvMemoryAccessAlignedMask, 4),
				hm_spirv_const_u32(m, 0));
	} else if (path == PATH_HELPER || path == PATH_RAW_GUARD) {
		uint32_t pre, then, nz, v, guard_end;

		/* the raw chain with the helper's call site: the same guard and
		 * phi (and guarded store), no lookup: helper - raw_guard is the
		 * lookup alone */
		if (path == PATH_HELPER)
			r = hm_spirv_emit_lookup(m, t, addr, &dev, &mark);
		if (r)
			return r;
		nz = HM_SPV_OP(m, FN, SpvOpINotEqual, k->bl, dev, hm_spirv_const_u64(m, 0));
		pre = k->label;
		then = hm_spirv_id(m);
		guard_end = hm_spirv_id(m);
		HM_SPV(m, FN, SpvOpSelectionMerge, guard_end, SpvSelectionControlMaskNone);
		HM_SPV(m, FN, SpvOpBranchConditional, nz, then, guard_end);
		kb_label(k, then);
		v = HM_SPV_OP(m, FN, SpvOpLoad, k->u32,
			      HM_SPV_OP(m, FN, SpvOpConvertUToPtr, k->psb_u32, dev),
			      SpvMemoryAccessAlignedMask, 4);
		HM_SPV(m, FN, SpvOpBranch, guard_end);
		kb_label(k, guard_end);
		val = HM_SPV_OP(m, FN, SpvOpPhi, k->u32, v, then, hm_spirv_const_u32(m, 0), pre);
		if (op != OP_LOAD) {
			uint32_t st = hm_spirv_id(m), st_end = hm_spirv_id(m);

			HM_SPV(m, FN, SpvOpSelectionMerge, st_end, SpvSelectionControlMaskNone);
			HM_SPV(m, FN, SpvOpBranchConditional, nz, st, st_end);
			kb_label(k, st);
			kb_store32(k, HM_SPV_OP(m, FN, SpvOpIAdd, k->u64, dev,
						 hm_spirv_const_u64(m, 4)), s);
			HM_SPV(m, FN, SpvOpBranch, st_end);
			kb_label(k, st_end);
			if (op == OP_STORE_MARK && path == PATH_HELPER)
				kb_store32(k, mark, hm_spirv_const_u32(m, 1));
		}
	} else {
		val = HM_SPV_OP(m, FN, SpvOpLoad, k->u32,
				HM_SPV_OP(m, FN, SpvOpConvertUToPtr, k->psb_u32, dev),
				SpvMemoryAccessAlignedMask, 4);
		if (op != OP_LOAD)
			kb_store32(k, HM_SPV_OP(m, FN, SpvOpIAdd, k->u64, dev,
						 hm_spirv_const_u64(m, 4)), s);
	}
	*ret_val = val;
	return r;
}

/*
 * What every chain program starts with: the helper's form, the scalar
 * types, the entry point with its push words (push[]), the table's ids
 * (*t), the lane index, the chain's base and the output array (u64 ids).
 * -EINVAL for a path without that op.
 */
static int chain_prologue(struct kb *k, enum path path, enum op op, uint32_t variant,
			  uint32_t push[PUSH_WORDS], struct hm_spirv_table_ids *t,
			  uint32_t *ret_gidx, uint32_t *ret_base, uint32_t *ret_out)
{
	struct hm_spirv_module *m = k->m;
	int r = lk_path_has_op(path, op) ?
		hm_spirv_set_lookup_variant(m, variant & ~SITE_WIDTH_MASK) : -EINVAL;

	if (r)
		return r;
	k->path = path;
	k->width = SITE_WIDTH_OF(variant);
	k->u32 = hm_spirv_type_int(m, 32, false);
	k->u64 = hm_spirv_type_int(m, 64, false);
	k->bl = hm_spirv_type_bool(m);
	k->psb_u32 = hm_spirv_type_pointer(m, SpvStorageClassPhysicalStorageBuffer, k->u32);
	*ret_gidx = kb_main(k, push);
	t->table = kb_join(k, push[0], push[1]);
	t->nr_home = push[2];
	t->chunk_shift = push[3];
	t->marks = kb_join(k, push[4], push[5]);
	*ret_base = kb_join(k, push[6], push[7]);
	*ret_out = kb_join(k, push[8], push[9]);
	return 0;
}

/* ... and what it ends with: the lane's last offset stored to out[lane],
 * the function closed, the module serialised. */
static int chain_epilogue(struct kb *k, uint32_t out, uint32_t gidx, uint32_t off,
			  uint32_t **ret_w, size_t *ret_n)
{
	struct hm_spirv_module *m = k->m;
	int r;

	kb_store32(k, HM_SPV_OP(m, FN, SpvOpIAdd, k->u64, out,
				HM_SPV_OP(m, FN, SpvOpShiftLeftLogical, k->u64,
					  HM_SPV_OP(m, FN, SpvOpUConvert, k->u64, gidx),
					  hm_spirv_const_u32(m, 2))), off);
	HM_SPV(m, FN, SpvOpReturn);
	hm_spirv_inst(m, FN, SpvOpFunctionEnd, NULL, 0);
	r = hm_spirv_module_finish(m, ret_w, ret_n);
	if (!r && k->path == PATH_SITE) {
		/* the module as built is the compact tier: the speculative one */
		uint32_t *w;
		size_t n;

		r = hm_spirv_tier_form(*ret_w, *ret_n, HM_TIER_SPECULATIVE, &w, &n);
		free(*ret_w);
		*ret_w = r ? NULL : w;
		*ret_n = r ? 0 : n;
	}
	return r;
}

/*
 * Push: 6 table words, base lo/hi (device base for raw, guest base for the
 * helper), out lo/hi, steps, slot mask.  Lane l starts at offset
 * scatter(l) * 8 and follows the chain for `steps` loads; it writes the
 * last offset to out[l].
 */
int lk_build(enum path path, enum op op, uint32_t variant, uint32_t **ret_w, size_t *ret_n)
{
	struct kb k = { 0 };
	struct hm_spirv_module *m;
	uint32_t push[PUSH_WORDS];
	uint32_t gidx, base, out, steps, off0, header, body, cont, merge, off, s, next, s1;
	struct hm_spirv_table_ids t;
	int r = hm_spirv_module_new(&k.m);

	if (r)
		return r;
	m = k.m;
	r = chain_prologue(&k, path, op, variant, push, &t, &gidx, &base, &out);
	if (r)
		goto out_free;
	steps = push[10];
	/* off0 = scatter(l) * 8 = ((l * 0x9e3779b1) & mask) * 8: distinct
	 * for every lane (odd multiplier), spread over the first step */
	off0 = HM_SPV_OP(m, FN, SpvOpShiftLeftLogical, k.u32,
			 HM_SPV_OP(m, FN, SpvOpBitwiseAnd, k.u32,
				   HM_SPV_OP(m, FN, SpvOpIMul, k.u32, gidx,
					     hm_spirv_const_u32(m, 0x9e3779b1u)),
				   push[11]),
			 hm_spirv_const_u32(m, 3));
	uint32_t entry = k.label;

	header = hm_spirv_id(m);
	body = hm_spirv_id(m);
	cont = hm_spirv_id(m);
	merge = hm_spirv_id(m);
	off = hm_spirv_id(m);
	s = hm_spirv_id(m);
	next = hm_spirv_id(m);
	s1 = hm_spirv_id(m);
	HM_SPV(m, FN, SpvOpBranch, header);
	kb_label(&k, header);
	HM_SPV(m, FN, SpvOpPhi, k.u32, off, off0, entry, next, cont);
	HM_SPV(m, FN, SpvOpPhi, k.u32, s, hm_spirv_const_u32(m, 0), entry, s1, cont);
	uint32_t more = HM_SPV_OP(m, FN, SpvOpULessThan, k.bl, s, steps);

	HM_SPV(m, FN, SpvOpLoopMerge, merge, cont, SpvLoopControlMaskNone);
	HM_SPV(m, FN, SpvOpBranchConditional, more, body, merge);
	kb_label(&k, body);
	uint32_t addr = HM_SPV_OP(m, FN, SpvOpIAdd, k.u64, base,
				  HM_SPV_OP(m, FN, SpvOpUConvert, k.u64, off));
	uint32_t val;

	r = emit_access(&k, path, op, &t, push, addr, s, &val);
	if (r)
		goto out_free;
	HM_SPV(m, FN, SpvOpBranch, cont);
	kb_label(&k, cont);
	/* next = val (the loaded word is the next offset) */
	HM_SPV(m, FN, SpvOpBitwiseOr, k.u32, next, val, hm_spirv_const_u32(m, 0));
	HM_SPV(m, FN, SpvOpIAdd, k.u32, s1, s, hm_spirv_const_u32(m, 1));
	HM_SPV(m, FN, SpvOpBranch, header);
	kb_label(&k, merge);
	r = chain_epilogue(&k, out, gidx, off, ret_w, ret_n);
out_free:
	hm_spirv_module_free(m);
	return r;
}

/*
 * The compile-time programs: nr_sites accesses of the form of path in
 * straight-line code (no loop), each address the last word loaded plus a
 * constant (salt + i: every module is new to a driver's shader cache),
 * the last word stored to out.  Never dispatched; what they cost is the
 * driver's compile (--compile-sites).
 */
int lk_build_sites(enum path path, uint32_t variant, uint32_t nr_sites, uint32_t salt,
		       uint32_t **ret_w, size_t *ret_n)
{
	struct kb k = { 0 };
	struct hm_spirv_module *m;
	uint32_t push[PUSH_WORDS], gidx, base, out, off;
	struct hm_spirv_table_ids t;
	int r = hm_spirv_module_new(&k.m);

	if (r)
		return r;
	m = k.m;
	r = chain_prologue(&k, path, OP_LOAD, variant, push, &t, &gidx, &base, &out);
	if (r)
		goto out_free;
	off = HM_SPV_OP(m, FN, SpvOpShiftLeftLogical, k.u32, gidx, hm_spirv_const_u32(m, 3));
	for (uint32_t i = 0; i < nr_sites && !r; i++) {
		uint32_t addr = HM_SPV_OP(m, FN, SpvOpIAdd, k.u64, base,
					  HM_SPV_OP(m, FN, SpvOpUConvert, k.u64, off));
		uint32_t val;

		r = emit_access(&k, path, OP_LOAD, &t, push, addr, hm_spirv_const_u32(m, 0), &val);
		if (!r)
			off = HM_SPV_OP(m, FN, SpvOpIAdd, k.u32, val,
					hm_spirv_const_u32(m, salt + i));
	}
	if (!r)
		r = chain_epilogue(&k, out, gidx, off, ret_w, ret_n);
out_free:
	hm_spirv_module_free(m);
	return r;
}

/* Touch every slot of a table (brings it into the device cache after a
 * flush): push[10] slots, push[11] lanes (a multiple of it: copies of the
 * touch spread over more of the device's SMs); lane i loads slot
 * i % push[10] and stores a word of it to out[i % LANES] (keeps the load). */
int lk_build_touch(uint32_t **ret_w, size_t *ret_n)
{
	struct kb k = { 0 };
	struct hm_spirv_module *m;
	uint32_t push[PUSH_WORDS];
	uint32_t v4, psb_v4, gidx, tab, out, slot, x, merge, then, cond;
	int r = hm_spirv_module_new(&k.m);

	if (r)
		return r;
	m = k.m;
	k.u32 = hm_spirv_type_int(m, 32, false);
	k.u64 = hm_spirv_type_int(m, 64, false);
	k.bl = hm_spirv_type_bool(m);
	k.psb_u32 = hm_spirv_type_pointer(m, SpvStorageClassPhysicalStorageBuffer, k.u32);
	v4 = hm_spirv_type_vector(m, k.u32, 4);
	psb_v4 = hm_spirv_type_pointer(m, SpvStorageClassPhysicalStorageBuffer, v4);
	gidx = kb_main(&k, push);
	tab = kb_join(&k, push[0], push[1]);
	out = kb_join(&k, push[8], push[9]);
	cond = HM_SPV_OP(m, FN, SpvOpULessThan, k.bl, gidx, push[11]);
	then = hm_spirv_id(m);
	merge = hm_spirv_id(m);
	HM_SPV(m, FN, SpvOpSelectionMerge, merge, SpvSelectionControlMaskNone);
	HM_SPV(m, FN, SpvOpBranchConditional, cond, then, merge);
	kb_label(&k, then);
	slot = HM_SPV_OP(m, FN, SpvOpLoad, v4,
			 HM_SPV_OP(m, FN, SpvOpConvertUToPtr, psb_v4,
				   HM_SPV_OP(m, FN, SpvOpIAdd, k.u64, tab,
					     HM_SPV_OP(m, FN, SpvOpShiftLeftLogical, k.u64,
						       HM_SPV_OP(m, FN, SpvOpUConvert, k.u64,
								 HM_SPV_OP(m, FN, SpvOpUMod, k.u32,
									   gidx, push[10])),
						       hm_spirv_const_u32(m, 4)))),
			 SpvMemoryAccessAlignedMask, 16);
	x = HM_SPV_OP(m, FN, SpvOpBitwiseXor, k.u32,
		      HM_SPV_OP(m, FN, SpvOpCompositeExtract, k.u32, slot, 0),
		      HM_SPV_OP(m, FN, SpvOpCompositeExtract, k.u32, slot, 2));
	kb_store32(&k, HM_SPV_OP(m, FN, SpvOpIAdd, k.u64, out,
				 HM_SPV_OP(m, FN, SpvOpShiftLeftLogical, k.u64,
					   HM_SPV_OP(m, FN, SpvOpUConvert, k.u64,
						     HM_SPV_OP(m, FN, SpvOpBitwiseAnd, k.u32, gidx,
							       hm_spirv_const_u32(m, LANES - 1))),
					   hm_spirv_const_u32(m, 2))), x);
	HM_SPV(m, FN, SpvOpBranch, merge);
	kb_label(&k, merge);
	HM_SPV(m, FN, SpvOpReturn);
	hm_spirv_inst(m, FN, SpvOpFunctionEnd, NULL, 0);
	r = hm_spirv_module_finish(m, ret_w, ret_n);
	hm_spirv_module_free(m);
	return r;
}

#undef FN

/* ---- setup ---------------------------------------------------------------- */
static void *host_alloc(struct hm_vk *vk, size_t *size)
{
	size_t a = vk->min_import_align > 4096 ? vk->min_import_align : 4096;
	void *p;

	*size = (*size + a - 1) / a * a;
	p = mmap(NULL, *size, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	return p == MAP_FAILED ? NULL : p;
}

/* Lane l's word in each step: distinct per lane, scattered over the step
 * (mask + 1 eight-byte slots: 8192 for the cache footprint, 2^18 past it). */
static uint32_t scatter(uint32_t lane, uint32_t mask)
{
	return (lane * 0x9e3779b1u) & mask;
}

#define CACHE_MASK ((CACHE_STRIDE / 8) - 1)
#define PAST_MASK ((PAST_STRIDE / 8) - 1)
#define PAST_BYTES ((size_t)LONG_STEPS * PAST_STRIDE)
#define CACHE_BYTES ((size_t)LONG_STEPS * CACHE_STRIDE)

/* Step s of lane l at s * stride + scatter(l) * 8 holds the offset of
 * step s + 1 (the last step points back to the first). */
static void fill_chains(uint32_t *w, uint32_t stride, uint32_t mask, uint32_t nr_lanes)
{
	for (uint32_t l = 0; l < nr_lanes; l++) {
		for (uint32_t s = 0; s < LONG_STEPS; s++) {
			uint32_t here = s * stride + scatter(l, mask) * 8;
			uint32_t next = (s + 1) % LONG_STEPS * stride + scatter(l, mask) * 8;

			w[here / 4] = next;
		}
	}
}

static int upload(struct bench *b, struct hm_vk_buffer *dst, const void *src, size_t bytes)
{
	struct hm_vk_buffer st;
	int r = hm_vk_buffer_new(b->vk, bytes, HM_VK_MEM_HOST, &st);

	if (r)
		return r;
	memcpy(st.map, src, bytes);
	r = hm_vk_copy_sync(b->vk, st.buf, 0, dst->buf, 0, bytes);
	hm_vk_buffer_free(b->vk, &st);
	return r;
}

/* Fill the table image: every chunk of the guest space -> data[which]. */
static int fill_table(struct bench *b, void *mem, uint64_t dev_base)
{
	struct hm_table *t;
	uint64_t nr_chunks = b->data_bytes >> CHUNK_SHIFT;
	int r = hm_table_new(mem, b->table_bytes, b->nr_home, CHUNK_SHIFT, &t);

	if (r)
		return r;
	for (uint64_t c = 0; c < nr_chunks && !r; c++)
		r = hm_table_insert(t, (GUEST_BASE >> CHUNK_SHIFT) + c,
				    (int64_t)(dev_base - GUEST_BASE), NULL);
	hm_table_free(t);
	return r;
}

/* Device-local host-visible memory where there is such memory, else
 * device-local (filled by upload()). */
static int device_table_new(struct bench *b, size_t bytes, struct hm_vk_buffer *ret)
{
	int r = hm_vk_buffer_new(b->vk, bytes, HM_VK_MEM_DEVICE_HOST, ret);

	if (!r && (b->vk->mem.memoryTypes[ret->mem_type].propertyFlags &
		   VK_MEMORY_PROPERTY_DEVICE_LOCAL_BIT))
		return 0;
	hm_vk_buffer_free(b->vk, ret);
	return hm_vk_buffer_new(b->vk, bytes, HM_VK_MEM_DEVICE, ret);
}

/* Write bytes of src into a buffer device_table_new() made. */
static int table_write(struct bench *b, struct hm_vk_buffer *dst, const void *src, size_t bytes)
{
	if (dst->map) {
		memcpy(dst->map, src, bytes);
		return 0;
	}
	return upload(b, dst, src, bytes);
}

/* Bind (memory) or unbind (VK_NULL_HANDLE) chunks [first, first + n) of a
 * sparse buffer: chunk i to memory offset off(i), one vkQueueBindSparse;
 * answers the wall time of the bind, fence wait included, in *ret_us. */
static int sparse_bind(struct bench *b, VkBuffer buf, VkDeviceMemory mem, uint32_t first,
		       uint32_t n, bool scatter_order, double *ret_us)
{
	uint32_t nr = (uint32_t)(b->data_bytes >> CHUNK_SHIFT);
	VkSparseMemoryBind *mb = calloc(n, sizeof(*mb));
	VkSparseBufferMemoryBindInfo bi = { .buffer = buf, .bindCount = n, .pBinds = mb };
	VkBindSparseInfo si = { .sType = VK_STRUCTURE_TYPE_BIND_SPARSE_INFO,
				.bufferBindCount = 1, .pBufferBinds = &bi };
	VkFenceCreateInfo fci = { .sType = VK_STRUCTURE_TYPE_FENCE_CREATE_INFO };
	VkFence fence = VK_NULL_HANDLE;
	double t0;
	int r;

	if (!mb)
		return -ENOMEM;
	for (uint32_t i = 0; i < n; i++) {
		uint32_t c = first + i;
		/* 601 is prime and does not divide nr: a permutation that puts
		 * neighbouring chunks far apart, as mirrors from a pool lie */
		uint64_t phys = scatter_order ? (uint64_t)c * 601 % nr : c;

		mb[i].resourceOffset = (VkDeviceSize)c << CHUNK_SHIFT;
		mb[i].size = 1u << CHUNK_SHIFT;
		mb[i].memory = mem;
		mb[i].memoryOffset = mem ? phys << CHUNK_SHIFT : 0;
	}
	r = hm_vk_errno(vkCreateFence(b->vk->dev, &fci, NULL, &fence));
	t0 = bench_now_ns();
	if (!r)
		r = hm_vk_errno(vkQueueBindSparse(b->vk->queue, 1, &si, fence));
	if (!r)
		r = hm_vk_errno(vkWaitForFences(b->vk->dev, 1, &fence, VK_TRUE, 10000000000ull));
	*ret_us = (bench_now_ns() - t0) / 1e3;
	if (fence)
		vkDestroyFence(b->vk->dev, fence, NULL);
	free(mb);
	return r;
}

/* A sparse buffer over data_bytes, nothing bound to it yet (its address
 * comes from buffer_address() once it is), and its requirements. */
static int sparse_buffer(struct bench *b, struct hm_vk_buffer *ret, VkMemoryRequirements *req)
{
	VkBufferCreateInfo ci = {
		.sType = VK_STRUCTURE_TYPE_BUFFER_CREATE_INFO,
		.flags = VK_BUFFER_CREATE_SPARSE_BINDING_BIT | VK_BUFFER_CREATE_SPARSE_RESIDENCY_BIT,
		.size = b->data_bytes,
		.usage = VK_BUFFER_USAGE_STORAGE_BUFFER_BIT | VK_BUFFER_USAGE_TRANSFER_SRC_BIT |
			 VK_BUFFER_USAGE_TRANSFER_DST_BIT | VK_BUFFER_USAGE_SHADER_DEVICE_ADDRESS_BIT,
		.sharingMode = VK_SHARING_MODE_EXCLUSIVE,
	};
	int r;

	memset(ret, 0, sizeof(*ret));
	r = hm_vk_errno(vkCreateBuffer(b->vk->dev, &ci, NULL, &ret->buf));
	if (r)
		return r;
	vkGetBufferMemoryRequirements(b->vk->dev, ret->buf, req);
	ret->size = b->data_bytes;
	return 0;
}

static VkDeviceAddress buffer_address(struct bench *b, VkBuffer buf)
{
	VkBufferDeviceAddressInfo ai = { .sType = VK_STRUCTURE_TYPE_BUFFER_DEVICE_ADDRESS_INFO,
					 .buffer = buf };

	return vkGetBufferDeviceAddress(b->vk->dev, &ai);
}

/*
 * data[2] and data[3] (above); prints what it found and what binding
 * costs (section "sparse").  Answers 0 where the device has no sparse
 * buffers (nothing is made then).
 */
static int setup_sparse(struct bench *b)
{
	VkMemoryRequirements req;
	VkMemoryAllocateInfo ai = { .sType = VK_STRUCTURE_TYPE_MEMORY_ALLOCATE_INFO };
	uint32_t nr = (uint32_t)(b->data_bytes >> CHUNK_SHIFT), type = UINT32_MAX;
	double all_us, one_us[3][9], un_us[3][9];
	static const uint32_t batch[3] = { 1, 16, 256 };
	int r;

	if (!b->vk->sparse)
		return 0;
	r = sparse_buffer(b, &b->data[2], &req);
	if (r)
		return r;
	b->sparse_block = req.alignment;
	for (uint32_t i = 0; i < b->vk->mem.memoryTypeCount && type == UINT32_MAX; i++)
		if ((req.memoryTypeBits & (1u << i)) &&
		    (b->vk->mem.memoryTypes[i].propertyFlags & VK_MEMORY_PROPERTY_DEVICE_LOCAL_BIT))
			type = i;
	if (type == UINT32_MAX || (1u << CHUNK_SHIFT) % req.alignment) {
		fprintf(stderr, "lookup: sparse: no device-local type or block %llu\n",
			(unsigned long long)req.alignment);
		hm_vk_buffer_free(b->vk, &b->data[2]);
		return 0;
	}
	ai.allocationSize = (VkDeviceSize)nr << CHUNK_SHIFT;
	ai.memoryTypeIndex = type;
	r = hm_vk_errno(vkAllocateMemory(b->vk->dev, &ai, NULL, &b->data[2].mem));
	if (!r)
		r = sparse_bind(b, b->data[2].buf, b->data[2].mem, 0, nr, true, &all_us);
	if (r)
		return r;
	b->data[2].addr = buffer_address(b, b->data[2].buf);
	b->data[2].mem_type = type;
	r = hm_vk_copy_sync(b->vk, b->data[0].buf, 0, b->data[2].buf, 0, b->data_bytes);
	/* unbind and bind again 1, 16, 256 chunks at a time (the same memory:
	 * the chains survive), 9 times each */
	for (int k = 0; k < 3 && !r; k++) {
		for (int i = 0; i < 9 && !r; i++) {
			uint32_t first = (uint32_t)(i * 97) % (nr - batch[k]);

			r = sparse_bind(b, b->data[2].buf, VK_NULL_HANDLE, first, batch[k], true,
					&un_us[k][i]);
			if (!r)
				r = sparse_bind(b, b->data[2].buf, b->data[2].mem, first, batch[k], true,
						&one_us[k][i]);
		}
	}
	if (r)
		return r;
	printf("{\"bench\":\"lookup\",\"section\":\"sparse\",\"device\":\"%s\","
	       "\"block\":%llu,\"chunks\":%u,\"bind_all_us\":%.1f,"
	       "\"bind_1_us\":%.1f,\"bind_16_us\":%.1f,\"bind_256_us\":%.1f,"
	       "\"unbind_1_us\":%.1f,\"unbind_16_us\":%.1f,\"unbind_256_us\":%.1f}\n",
	       b->vk->props.deviceName, (unsigned long long)b->sparse_block, nr, all_us,
	       bench_median(one_us[0], 9), bench_median(one_us[1], 9), bench_median(one_us[2], 9),
	       bench_median(un_us[0], 9), bench_median(un_us[1], 9), bench_median(un_us[2], 9));
	fflush(stdout);
	return 0;
}

/* data[3]: the host import's memory bound into a sparse buffer, chunk for
 * chunk (the home pages at one delta too), where its memory type may be
 * bound; tried last, since a driver may take it badly.  Prints the result
 * (section "sparse_host"). */
static int sparse_host(struct bench *b)
{
	VkMemoryRequirements req;
	uint32_t nr = (uint32_t)(b->data_bytes >> CHUNK_SHIFT);
	bool bindable;
	double us = 0;
	int r = sparse_buffer(b, &b->data[3], &req);

	if (r)
		return r;
	bindable = (req.memoryTypeBits & (1u << b->data[1].mem_type)) &&
		   (1u << CHUNK_SHIFT) % req.alignment == 0;
	if (bindable) {
		r = sparse_bind(b, b->data[3].buf, b->data[1].mem, 0, nr, false, &us);
		if (!r) {
			b->data[3].addr = buffer_address(b, b->data[3].buf);
			b->sparse_host = true;
		}
	}
	printf("{\"bench\":\"lookup\",\"section\":\"sparse_host\",\"device\":\"%s\","
	       "\"host_import_type_bindable\":%s,\"bound\":%s,\"bind_result\":%d,"
	       "\"bind_all_us\":%.1f}\n", b->vk->props.deviceName, bindable ? "true" : "false",
	       b->sparse_host ? "true" : "false", r, us);
	fflush(stdout);
	return 0;
}

int lk_setup(struct bench *b)
{
	uint32_t *img;
	int r;

	/* [0, 72 MiB): the chains past the cache; then the chains in it */
	b->data_bytes = PAST_BYTES + CACHE_BYTES;
	/* + 64 bytes of zeros: the call site's loads of 16 words (site-w16)
	 * at the last chain words stay inside the buffer */
	img = calloc(1, b->data_bytes + HM_ACCESS_MAX_BYTES);
	if (!img)
		return -ENOMEM;
	fill_chains(img, PAST_STRIDE, PAST_MASK, b->nr_lanes);
	fill_chains(img + PAST_BYTES / 4, CACHE_STRIDE, CACHE_MASK, b->nr_lanes);
	r = hm_vk_buffer_new(b->vk, b->data_bytes + HM_ACCESS_MAX_BYTES, HM_VK_MEM_DEVICE,
			     &b->data[0]);
	if (!r)
		r = upload(b, &b->data[0], img, b->data_bytes + HM_ACCESS_MAX_BYTES);
	if (r)
		goto out;
	size_t hb = b->data_bytes + HM_ACCESS_MAX_BYTES;

	b->host_data = host_alloc(b->vk, &hb);
	b->host_data_bytes = hb;
	if (!b->host_data) {
		r = -ENOMEM;
		goto out;
	}
	memcpy(b->host_data, img, b->data_bytes + HM_ACCESS_MAX_BYTES);
	r = hm_vk_import_host(b->vk, b->host_data, hb, &b->data[1]);
	if (r)
		goto out;

	/* a power of two (every emission variant, pow2 included, runs on the
	 * same table; the multiply-high form works for any nr_home) */
	b->nr_home = 1;
	while (b->nr_home < hm_table_nr_home_for(b->data_bytes >> CHUNK_SHIFT))
		b->nr_home *= 2;
	b->table_bytes = hm_table_bytes_for(b->nr_home);
	size_t tb = b->table_bytes;

	b->host_table = host_alloc(b->vk, &tb);
	b->host_table_bytes = tb;
	if (!b->host_table) {
		r = -ENOMEM;
		goto out;
	}
	r = hm_vk_import_host(b->vk, b->host_table, tb, &b->table[1]);
	if (r)
		goto out;
	/* device table: device-local host-visible where there is such memory,
	 * else device-local filled by a copy; the one-chunk table and the flat
	 * arrays (16-byte multiples: the touch reads 16 bytes at a time) in the
	 * same kind of memory */
	r = device_table_new(b, b->table_bytes, &b->table[0]);
	if (!r)
		r = device_table_new(b, hm_table_bytes_for(HOT_NR_HOME), &b->hot);
	if (!r)
		r = device_table_new(b, ((b->data_bytes >> CHUNK_SHIFT) * 8 + 15) / 16 * 16,
				     &b->flat);
	if (!r)
		r = device_table_new(b, 16, &b->flat_hot);
	if (!r) {
		uint32_t w[SENTINEL_BYTES / 4];

		memset(w, 0xff, sizeof(w));
		r = device_table_new(b, SENTINEL_BYTES, &b->sentinel);
		if (!r)
			r = table_write(b, &b->sentinel, w, SENTINEL_BYTES);
	}
	if (r)
		goto out;
	b->marks_bytes = hm_marks_bytes_for(hm_table_nr_slots_for(b->nr_home));
	b->marks_mem = host_alloc(b->vk, &b->marks_bytes);
	if (!b->marks_mem) {
		r = -ENOMEM;
		goto out;
	}
	r = hm_vk_import_host(b->vk, b->marks_mem, b->marks_bytes, &b->marks);
	if (!r)
		r = hm_vk_buffer_new(b->vk, 4 * b->nr_lanes, HM_VK_MEM_HOST, &b->out);
	if (!r) {
		VkQueryPoolCreateInfo qi = {
			.sType = VK_STRUCTURE_TYPE_QUERY_POOL_CREATE_INFO,
			.queryType = VK_QUERY_TYPE_TIMESTAMP,
			.queryCount = 2,
		};

		if (b->vk->timestamp_valid_bits)
			r = hm_vk_errno(vkCreateQueryPool(b->vk->dev, &qi, NULL, &b->qp));
	}
	if (!r && b->flush_mib)
		r = hm_vk_buffer_new(b->vk, (VkDeviceSize)b->flush_mib << 20, HM_VK_MEM_DEVICE,
				     &b->flush);
	if (!r)
		r = hm_vk_buffer_new(b->vk, 4 * LANES, HM_VK_MEM_DEVICE, &b->scratch);
	if (!r && b->json)
		r = setup_sparse(b);
	if (!r) {
		uint32_t *w;
		size_t n;

		r = lk_build_touch(&w, &n);
		if (!r) {
			r = hm_vk_pipeline_new(b->vk, w, n, "main", 4 * PUSH_WORDS, &b->touch);
			free(w);
		}
	}
out:
	free(img);
	return r;
}

/* Table image for the data placement `which`, into both table buffers. */
int lk_point_tables(struct bench *b, int which)
{
	void *img = aligned_alloc(64, (b->table_bytes + 63) / 64 * 64);
	int r;

	if (!img)
		return -ENOMEM;
	r = fill_table(b, img, b->data[which].addr);
	if (!r)
		memcpy(b->host_table, img, b->table_bytes);
	if (!r)
		r = table_write(b, &b->table[0], img, b->table_bytes);
	free(img);
	if (r)
		return r;
	/* the flat arrays: every chunk's delta */
	{
		size_t n = b->flat.size / 8;
		int64_t *f = calloc(n, 8), d = (int64_t)(b->data[which].addr - GUEST_BASE);

		if (!f)
			return -ENOMEM;
		for (size_t i = 0; i < n; i++)
			f[i] = d;
		r = table_write(b, &b->flat, f, b->flat.size);
		if (!r)
			r = table_write(b, &b->flat_hot, f, 16);
		free(f);
		if (r)
			return r;
	}
	/* the one-chunk table: guest chunk GUEST_BASE >> 27 -> data[which] */
	{
		size_t hb = hm_table_bytes_for(HOT_NR_HOME);
		void *hot = aligned_alloc(64, (hb + 63) / 64 * 64);
		struct hm_table *t;

		if (!hot)
			return -ENOMEM;
		r = hm_table_new(hot, hb, HOT_NR_HOME, HOT_CHUNK_SHIFT, &t);
		if (!r) {
			r = hm_table_insert(t, GUEST_BASE >> HOT_CHUNK_SHIFT,
					    (int64_t)(b->data[which].addr - GUEST_BASE), NULL);
			hm_table_free(t);
		}
		if (!r)
			r = table_write(b, &b->hot, hot, hb);
		free(hot);
	}
	return r;
}

void lk_teardown(struct bench *b)
{
	if (!b->vk)
		return;
	if (b->qp)
		vkDestroyQueryPool(b->vk->dev, b->qp, NULL);
	/* data[3] binds data[1]'s memory: its buffer first, never the memory */
	b->data[3].mem = VK_NULL_HANDLE;
	hm_vk_buffer_free(b->vk, &b->data[3]);
	hm_vk_buffer_free(b->vk, &b->data[2]);
	for (int i = 0; i < 2; i++) {
		hm_vk_buffer_free(b->vk, &b->data[i]);
		hm_vk_buffer_free(b->vk, &b->table[i]);
	}
	hm_vk_buffer_free(b->vk, &b->hot);
	hm_vk_buffer_free(b->vk, &b->flat);
	hm_vk_buffer_free(b->vk, &b->flat_hot);
	hm_vk_buffer_free(b->vk, &b->sentinel);
	hm_vk_buffer_free(b->vk, &b->marks);
	hm_vk_buffer_free(b->vk, &b->out);
	hm_vk_buffer_free(b->vk, &b->flush);
	hm_vk_buffer_free(b->vk, &b->scratch);
	hm_vk_pipeline_free(b->vk, &b->touch);
	if (b->host_data)
		munmap(b->host_data, b->host_data_bytes);
	if (b->host_table)
		munmap(b->host_table, b->host_table_bytes);
	if (b->marks_mem)
		munmap(b->marks_mem, b->marks_bytes);
	hm_vk_free(b->vk);
}

/* One timed dispatch: ns.  flush: first evict the device's caches (fill a
 * buffer larger than the last-level cache) and bring the table back in
 * (touch every 16 bytes of b->touch_nr from b->touch_addr), untimed. */
static int timed(struct bench *b, const struct hm_vk_pipeline *p, const uint32_t *push,
		 bool flush, double *ret_ns)
{
	VkCommandBuffer cb;
	uint64_t ts[2];
	double t0;
	int r = hm_vk_cmd_begin(b->vk, &cb);

	if (r)
		return r;
	if (flush && b->flush.buf) {
		uint32_t tp[PUSH_WORDS];
		uint32_t nr = b->touch_nr;
		uint32_t copies = b->touch_copies ? b->touch_copies : 1;

		/* wide: copies enough for 1024 groups at least */
		if (b->touch_wide && copies < (1024 * LANES + nr - 1) / nr)
			copies = (1024 * LANES + nr - 1) / nr;

		memcpy(tp, push, sizeof(tp));
		tp[0] = (uint32_t)b->touch_addr;
		tp[1] = (uint32_t)(b->touch_addr >> 32);
		tp[8] = (uint32_t)b->scratch.addr;
		tp[9] = (uint32_t)(b->scratch.addr >> 32);
		tp[10] = nr;
		tp[11] = nr * copies;
		vkCmdFillBuffer(cb, b->flush.buf, 0, VK_WHOLE_SIZE, 0x01010101u);
		hm_vk_cmd_barrier(cb);
		hm_vk_cmd_dispatch(cb, &b->touch, tp, sizeof(tp), (nr * copies + LANES - 1) / LANES,
				   1, 1);
		hm_vk_cmd_barrier(cb);
	}
	if (b->qp) {
		vkCmdResetQueryPool(cb, b->qp, 0, 2);
		vkCmdWriteTimestamp(cb, VK_PIPELINE_STAGE_TOP_OF_PIPE_BIT, b->qp, 0);
	}
	hm_vk_cmd_dispatch(cb, p, push, 4 * PUSH_WORDS, b->nr_lanes / LANES, 1, 1);
	if (b->qp)
		vkCmdWriteTimestamp(cb, VK_PIPELINE_STAGE_BOTTOM_OF_PIPE_BIT, b->qp, 1);
	t0 = bench_now_ns();
	r = hm_vk_submit_wait(b->vk, cb, 0);
	*ret_ns = bench_now_ns() - t0;
	if (r || !b->qp)
		return r;
	r = hm_vk_errno(vkGetQueryPoolResults(b->vk->dev, b->qp, 0, 2, sizeof(ts), ts, 8,
					      VK_QUERY_RESULT_64_BIT | VK_QUERY_RESULT_WAIT_BIT));
	if (!r) {
		uint64_t mask = b->vk->timestamp_valid_bits >= 64 ? ~0ull :
				(1ull << b->vk->timestamp_valid_bits) - 1;

		*ret_ns = (double)((ts[1] - ts[0]) & mask) * b->vk->timestamp_period_ns;
	}
	return r;
}

/* ns per step (whole dispatch) of one configuration: median over rounds of
 * (t(36) - t(4)) / 32.  Also checks that every lane ended where its chain
 * says. */
static int measure_at(struct bench *b, const struct hm_vk_pipeline *p, enum path path,
		      int data, uint64_t tab, uint32_t nr_home, uint32_t shift, bool cache,
		      double *ret_step_ns)
{
	uint32_t push[PUSH_WORDS];
	bool guest = path != PATH_RAW && path != PATH_RAW_GUARD;
	uint64_t base = guest ? GUEST_BASE : b->data[data].addr;
	uint64_t sdev = b->data[data].addr, sbase = GUEST_BASE, lim = b->data_bytes - 4;
	double d[64], t4, t36;
	unsigned rounds = b->rounds > 64 ? 64 : b->rounds;
	int r;

	if (cache) {
		base += PAST_BYTES;
		sdev += PAST_BYTES;
		sbase += PAST_BYTES;
		lim -= PAST_BYTES;
	}
	/* PATH_SPEC: the space (the chains of this footprint) at one delta;
	 * skewed, every guess misses (the word beside the chain's); for
	 * PATH_SENTINEL a miss is an address outside the window */
	if ((path == PATH_SENTINEL || path == PATH_SITE) && b->spec_skew) {
		lim = 0;
	} else {
		sdev += b->spec_skew;
		lim -= b->spec_skew;
	}
	push[12] = (uint32_t)sdev;
	push[13] = (uint32_t)(sdev >> 32);
	push[14] = (uint32_t)sbase;
	push[15] = (uint32_t)(sbase >> 32);
	push[16] = (uint32_t)lim;
	push[17] = (uint32_t)(lim >> 32);
	/* push 18-19 unused; PATH_SENTINEL, PATH_SITE: a page of SENTINEL words */
	push[20] = (uint32_t)b->sentinel.addr;
	push[21] = (uint32_t)(b->sentinel.addr >> 32);
	push[0] = (uint32_t)tab;
	push[1] = (uint32_t)(tab >> 32);
	push[2] = nr_home;
	push[3] = shift;
	push[4] = (uint32_t)b->marks.addr;
	push[5] = (uint32_t)(b->marks.addr >> 32);
	push[6] = (uint32_t)base;
	push[7] = (uint32_t)(base >> 32);
	push[8] = (uint32_t)b->out.addr;
	push[9] = (uint32_t)(b->out.addr >> 32);
	push[11] = cache ? CACHE_MASK : PAST_MASK;
	push[10] = LONG_STEPS;
	r = timed(b, p, push, false, &t36);   /* warm up */
	if (r)
		return r;
	for (uint32_t l = 0; l < b->nr_lanes; l++) {
		/* 36 steps come back to step 0 */
		uint32_t want = scatter(l, cache ? CACHE_MASK : PAST_MASK) * 8;

		if (((uint32_t *)b->out.map)[l] != want) {
			fprintf(stderr, "lookup: lane %u ended at 0x%x, not 0x%x\n", l,
				((uint32_t *)b->out.map)[l], want);
			return -EIO;
		}
	}
	for (unsigned i = 0; i < rounds; i++) {
		push[10] = SHORT_STEPS;
		r = timed(b, p, push, !cache, &t4);
		push[10] = LONG_STEPS;
		if (!r)
			r = timed(b, p, push, !cache, &t36);
		if (r)
			return r;
		d[i] = (t36 - t4) / (LONG_STEPS - SHORT_STEPS);
	}
	*ret_step_ns = bench_median(d, rounds);
	return 0;
}

/* table 0: device, 1: host import (64 KiB chunks); 2: the one-chunk table.
 * PATH_FLAT reads the flat arrays instead (0: 64 KiB chunks, 2: one chunk),
 * which lk_point_tables() fills for the same data placement. */
int lk_measure(struct bench *b, const struct hm_vk_pipeline *p, enum path path,
		   int data, int table, bool cache, double *ret_step_ns)
{
	if (path == PATH_FLAT) {
		const struct hm_vk_buffer *f = table == 2 ? &b->flat_hot : &b->flat;
		uint32_t shift = table == 2 ? HOT_CHUNK_SHIFT : CHUNK_SHIFT;

		b->touch_addr = f->addr;
		b->touch_nr = (uint32_t)((f->size + 15) / 16);
		return measure_at(b, p, path, data, f->addr - (GUEST_BASE >> shift) * 8, 0, shift,
				  cache, ret_step_ns);
	}
	if (table == 2) {
		b->touch_addr = b->hot.addr;
		b->touch_nr = hm_table_nr_slots_for(HOT_NR_HOME);
		return measure_at(b, p, path, data, b->hot.addr, HOT_NR_HOME, HOT_CHUNK_SHIFT,
				  cache, ret_step_ns);
	}
	b->touch_addr = b->table[table].addr;
	b->touch_nr = hm_table_nr_slots_for(b->nr_home);
	return measure_at(b, p, path, data, b->table[table].addr, b->nr_home, CHUNK_SHIFT,
			  cache, ret_step_ns);
}

static void usage(void)
{
	printf("usage: hmirror-bench lookup [--json] [--rounds N] [--groups N] [--quick]\n"
	       "                            [--flush-mib N] [--variants all|none|NAME,...]\n"
	       "                            [--variant NAME] [--touch-copies N]\n"
	       "                            [--compile-sites N,...]\n"
	       "  raw device-address chains vs chains through the lookup helper;\n"
	       "  past the cache: a N MiB fill (default 256) evicts the device's caches\n"
	       "  before each timed dispatch and the table is touched back in;\n"
	       "  --variants: the helper's emission variants side by side (default all);\n"
	       "  --variant: the form of the main matrix (default: the library default);\n"
	       "  --touch-copies N: each table slot read by N lanes after the flush (1);\n"
	       "  --compile-sites N,...: only the compile time of modules of N accesses\n"
	       "    (raw, the helper, inlined, the sentinel call site, inlined);\n"

	       "  HMIRROR_DEVICE picks the Vulkan device (index or name substring).\n"
	       "variants:\n");
	for (unsigned i = 0; i < hm__lookup_nr_forms; i++)
		printf("  %-12s %s\n", hm_lookup_variants[i].name, hm_lookup_variants[i].what);
}

static const char *variant_name(uint32_t flags)
{
	for (unsigned i = 0; i < hm__lookup_nr_forms; i++)
		if (hm_lookup_variants[i].flags == flags)
			return hm_lookup_variants[i].name;
	return "custom";
}

/* --variants LIST: a bit per hm_lookup_variants[] entry */
static int parse_variants(const char *arg, uint32_t *ret)
{
	char buf[256], *tok, *save;

	*ret = 0;
	if (!strcmp(arg, "all")) {
		*ret = (1u << hm__lookup_nr_forms) - 1;
		return 0;
	}
	if (!strcmp(arg, "none"))
		return 0;
	if (strlen(arg) >= sizeof(buf))
		return -EINVAL;
	strcpy(buf, arg);
	for (tok = strtok_r(buf, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
		const struct hm_lookup_variant *v = hm__lookup_form_by_name(tok);

		if (!v)
			return -EINVAL;
		*ret |= 1u << (v - hm_lookup_variants);
	}
	return 0;
}

int lk_make_pipe(struct bench *b, enum path path, enum op op, uint32_t variant,
		     struct hm_vk_pipeline *ret)
{
	uint32_t *w;
	size_t n;
	int r = lk_build(path, op, variant, &w, &n);

	if (!r) {
		r = hm_vk_pipeline_new(b->vk, w, n, "main", 4 * PUSH_WORDS, ret);
		free(w);
	}
	return r;
}

/* The variant configurations: device-local data and table.  wide: after
 * the flush, touch the table from at least 1024 groups (copies of the
 * touch), so that every SM has read it, as a previous dispatch would have;
 * otherwise b->touch_copies (default 1: each slot read once). */
const struct vconf lk_vconfs[] = {
	{ true, 0, OP_LOAD, false, "cache_step" }, { true, 2, OP_LOAD, false, "cache_one" },
	{ false, 0, OP_LOAD, false, "past_step" }, { false, 2, OP_LOAD, false, "past_one" },
	{ true, 0, OP_STORE_MARK, false, "cache_step_store" },
	{ false, 0, OP_LOAD, true, "past_step_wide" },
};
_Static_assert(sizeof(lk_vconfs) / sizeof(lk_vconfs[0]) == NR_VCONFS, "NR_VCONFS");

/* One form of the variants section: an emission variant of the helper
 * through the plain call site (PATH_HELPER), or one of the other paths. */
const struct vform lk_extra_forms[] = {
	{ "ref-flat", PATH_FLAT, HM_LOOKUP_DEFAULT_VARIANT, true, false },
	{ "ref-spec", PATH_SPEC, HM_LOOKUP_DEFAULT_VARIANT, true, false },
	{ "ref-spec-inline", PATH_SPEC, HM_LOOKUP_DEFAULT_VARIANT | HM_LOOKUP_V_REF_INLINE,
	  true, false },
	{ "ref-spec-miss", PATH_SPEC, HM_LOOKUP_DEFAULT_VARIANT, true, false, 8 },
	{ "ref-sentinel", PATH_SENTINEL, HM_LOOKUP_DEFAULT_VARIANT, true, false },
	{ "ref-sentinel-inline", PATH_SENTINEL, HM_LOOKUP_DEFAULT_VARIANT | HM_LOOKUP_V_REF_INLINE,
	  true, false },
	{ "ref-sentinel-miss", PATH_SENTINEL, HM_LOOKUP_DEFAULT_VARIANT, true, false, 8 },
	{ "selguard", PATH_SELGUARD, HM_LOOKUP_DEFAULT_VARIANT, false, false },
	/* D969a: the library's load call site, speculative and compact tiers */
	{ "site", PATH_SITE, HM_LOOKUP_DEFAULT_VARIANT, false, false },
	{ "site-miss", PATH_SITE, HM_LOOKUP_DEFAULT_VARIANT, false, false, 8 },
	{ "site-compact", PATH_SITE_COMPACT, HM_LOOKUP_DEFAULT_VARIANT, false, false },
	/* loads wider than a word: one sentinel test for the access */
	{ "site-w4", PATH_SITE, HM_LOOKUP_DEFAULT_VARIANT | SITE_WIDTH(4), false, false },
	{ "site-w16", PATH_SITE, HM_LOOKUP_DEFAULT_VARIANT | SITE_WIDTH(16), false, false },
	{ "site-compact-w16", PATH_SITE_COMPACT, HM_LOOKUP_DEFAULT_VARIANT | SITE_WIDTH(16),
	  false, false },
};
_Static_assert(sizeof(lk_extra_forms) / sizeof(lk_extra_forms[0]) == NR_EXTRA_FORMS, "NR_EXTRA_FORMS");
#define MAX_FORMS 32

int lk_measure_vconf(struct bench *b, const struct vconf *vc, const struct hm_vk_pipeline *p,
			 enum path path, uint32_t skew, double *ret)
{
	int r;

	b->touch_wide = vc->wide;
	b->spec_skew = skew;
	r = lk_measure(b, p, path, 0, vc->table, vc->cache, ret);
	b->touch_wide = false;
	b->spec_skew = 0;
	return r;
}

static void print_vrow(struct bench *b, const struct vform *f, const struct vconf *vc,
		       double raw0, double rawg, double help, double ratio)
{
	if (b->json)
		printf("{\"bench\":\"lookup\",\"section\":\"variants\",\"device\":\"%s\","
		       "\"variant\":\"%s\",\"path\":\"%s\",\"reference\":%s,\"flags\":%u,"
		       "\"data\":\"device\",\"table\":\"device\",\"footprint\":\"%s\","
		       "\"chunks\":\"%s\",\"touch\":\"%s\",\"op\":\"%s\",\"groups\":%u,\"lanes\":%u,"
		       "\"rounds\":%u,\"raw_ns_per_step\":%.1f,\"raw_guard_ns_per_step\":%.1f,"
		       "\"helper_ns_per_step\":%.1f,\"ratio\":%.3f,\"ratio_vs_guard\":%.3f}\n",
		       b->vk->props.deviceName, f->name, lk_path_name[f->path],
		       f->reference ? "true" : "false", f->flags, vc->cache ? "cache" : "past",
		       vc->table ? "one" : "step", vc->wide ? "wide" : "once", lk_op_name[vc->op],
		       b->nr_lanes / LANES, LANES, b->rounds, raw0, rawg, help, ratio,
		       rawg > 0 ? help / rawg : 0.0);
	else
		printf("%-15s %-5s %-6s %-4s %-10s %10.1f %10.1f %10.1f %7.3f %9.3f%s\n",
		       f->name, vc->cache ? "cache" : "past", vc->table ? "one" : "step",
		       vc->wide ? "wide" : "once", lk_op_name[vc->op], raw0, rawg, help, ratio,
		       rawg > 0 ? help / rawg : 0.0, f->reference ? "  (reference)" : "");
	fflush(stdout);
}

/* Every selected variant side by side, same run: per configuration the raw
 * chain (before and after the variants), the raw chain with the guard,
 * then each variant and the other forms (lk_extra_forms[], load only).
 * ret_best: the D969-conforming variant with the lowest helper/raw in the
 * cache, new chunk every step, load. */
static int run_variants(struct bench *b, uint32_t sel, int *ret_best)
{
	struct hm_vk_pipeline raw[NR_OPS], guard[NR_OPS], (*vp)[2];
	struct vform forms[MAX_FORMS];
	double ratio[MAX_FORMS][NR_VCONFS], best = 1e30;
	uint32_t failed = 0;
	unsigned nf = 0;
	int r = 0;

	memset(raw, 0, sizeof(raw));
	memset(guard, 0, sizeof(guard));
	memset(ratio, 0, sizeof(ratio));
	*ret_best = -1;
	for (unsigned v = 0; v < hm__lookup_nr_forms && nf < MAX_FORMS; v++)
		if (sel & (1u << v))
			forms[nf++] = (struct vform){ hm_lookup_variants[v].name, PATH_HELPER,
						      hm_lookup_variants[v].flags,
						      hm__lookup_is_reference(hm_lookup_variants[v].flags),
						      true };
	for (unsigned x = 0; x < NR_EXTRA_FORMS && nf < MAX_FORMS; x++)
		forms[nf++] = lk_extra_forms[x];
	vp = calloc(nf, sizeof(*vp));
	if (!vp)
		return -ENOMEM;
	for (int op = 0; op < 2 && !r; op++) {
		r = lk_make_pipe(b, PATH_RAW, op, 0, &raw[op]);
		if (!r)
			r = lk_make_pipe(b, PATH_RAW_GUARD, op, 0, &guard[op]);
	}
	for (unsigned f = 0; f < nf && !r; f++)
		for (int op = 0; op < 2 && !r; op++)
			if (lk_path_has_op(forms[f].path, op))
				r = lk_make_pipe(b, forms[f].path, op, forms[f].flags, &vp[f][op]);
	if (r) {
		fprintf(stderr, "lookup: variant pipelines: %s\n", strerror(-r));
		goto out;
	}
	r = lk_point_tables(b, 0);
	if (!b->json && !r)
		printf("helper variants side by side (device data, device table; chunks: step = a "
		       "new 64 KiB chunk every step, one = one chunk under the whole chain; touch: "
		       "once = each table slot read by one lane after the flush, wide = by 1024+ "
		       "groups)\n"
		       "%-15s %-5s %-6s %-4s %-10s %10s %10s %10s %7s %9s\n", "variant", "fp",
		       "chunks", "tch", "op", "raw", "raw+guard", "helper", "ratio", "vs guard");
	for (unsigned c = 0; c < NR_VCONFS && !r; c++) {
		const struct vconf *vc = &lk_vconfs[c];
		double raw0, raw1, rawg, help, rawm;

		r = lk_measure_vconf(b, vc, &raw[vc->op], PATH_RAW, 0, &raw0);
		if (!r)
			r = lk_measure_vconf(b, vc, &guard[vc->op], PATH_RAW_GUARD, 0, &rawg);
		for (unsigned f = 0; f < nf && !r; f++) {
			const struct vform *fm = &forms[f];

			if (!lk_path_has_op(fm->path, vc->op))
				continue;
			r = lk_measure_vconf(b, vc, &vp[f][vc->op], fm->path, fm->spec_skew, &help);
			if (r == -EIO) {
				/* a form whose chains end elsewhere answered wrongly on
				 * this driver: reported, left out of the choice, and the
				 * run goes on */
				failed |= 1u << f;
				if (b->json)
					printf("{\"bench\":\"lookup\",\"section\":\"variants\",\"device\":\"%s\","
					       "\"variant\":\"%s\",\"footprint\":\"%s\",\"chunks\":\"%s\","
					       "\"op\":\"%s\",\"error\":\"wrong answers (chains end elsewhere)\"}\n",
					       b->vk->props.deviceName, fm->name, vc->cache ? "cache" : "past",
					       vc->table ? "one" : "step", lk_op_name[vc->op]);
				else
					printf("%-15s WRONG ANSWERS: chains end elsewhere\n", fm->name);
				r = 0;
				continue;
			}
			if (r)
				break;
			ratio[f][c] = raw0 > 0 ? help / raw0 : 0;
			print_vrow(b, fm, vc, raw0, rawg, help, ratio[f][c]);
		}
		/* the raw chain again: how much the baseline drifted over the rows */
		if (!r)
			r = lk_measure_vconf(b, vc, &raw[vc->op], PATH_RAW, 0, &raw1);
		if (!r) {
			rawm = (raw0 + raw1) / 2;
			if (b->json)
				printf("{\"bench\":\"lookup\",\"section\":\"variants_raw\",\"device\":\"%s\","
				       "\"footprint\":\"%s\",\"chunks\":\"%s\",\"touch\":\"%s\",\"op\":\"%s\","
				       "\"raw_before_ns_per_step\":%.1f,\"raw_after_ns_per_step\":%.1f,"
				       "\"raw_guard_ns_per_step\":%.1f,\"drift\":%.3f}\n",
				       b->vk->props.deviceName, vc->cache ? "cache" : "past",
				       vc->table ? "one" : "step", vc->wide ? "wide" : "once",
				       lk_op_name[vc->op], raw0, raw1, rawg,
				       rawm > 0 ? (raw1 - raw0) / rawm : 0.0);
			else
				printf("%-15s %-5s %-6s %-4s %-10s %10.1f (raw after the variants)\n",
				       "raw", vc->cache ? "cache" : "past", vc->table ? "one" : "step",
				       vc->wide ? "wide" : "once", lk_op_name[vc->op], raw1);
		}
	}
	for (unsigned f = 0; f < nf && !r; f++) {
		const struct vform *fm = &forms[f];

		if (fm->variant && !fm->reference && !(failed & (1u << f)) && ratio[f][0] > 0 &&
		    ratio[f][0] < best) {
			best = ratio[f][0];
			*ret_best = (int)(hm__lookup_form_by_name(fm->name) - hm_lookup_variants);
		}
		if (b->json) {
			printf("{\"bench\":\"lookup\",\"section\":\"variants_summary\",\"device\":\"%s\","
			       "\"variant\":\"%s\",\"path\":\"%s\",\"reference\":%s",
			       b->vk->props.deviceName, fm->name, lk_path_name[fm->path],
			       fm->reference ? "true" : "false");
			for (unsigned c = 0; c < NR_VCONFS; c++)
				if (lk_path_has_op(fm->path, lk_vconfs[c].op))
					printf(",\"ratio_%s\":%.3f", lk_vconfs[c].name, ratio[f][c]);
			printf(",\"wrong_answers\":%s}\n", failed & (1u << f) ? "true" : "false");
		}
	}
	if (!b->json && !r) {
		printf("\n%-15s", "variant");
		for (unsigned c = 0; c < NR_VCONFS; c++)
			printf(" %16s", lk_vconfs[c].name);
		printf("   (helper / raw)\n");
		for (unsigned f = 0; f < nf; f++) {
			printf("%-15s", forms[f].name);
			for (unsigned c = 0; c < NR_VCONFS; c++)
				printf(" %16.3f", ratio[f][c]);
			printf("%s\n", forms[f].reference ? "  (reference)" : "");
		}
	}
out:
	for (int op = 0; op < NR_OPS; op++) {
		hm_vk_pipeline_free(b->vk, &raw[op]);
		hm_vk_pipeline_free(b->vk, &guard[op]);
	}
	for (unsigned f = 0; f < nf; f++)
		for (int op = 0; op < 2; op++)
			hm_vk_pipeline_free(b->vk, &vp[f][op]);
	free(vp);
	return r;
}

/* The forms whose compile time --compile-sites measures. */
const struct vform lk_compile_forms[] = {
	{ "raw", PATH_RAW, 0 },
	{ "helper", PATH_HELPER, HM_LOOKUP_DEFAULT_VARIANT },
	{ "ref-inline", PATH_HELPER, HM_LOOKUP_DEFAULT_VARIANT | HM_LOOKUP_V_REF_INLINE },
	{ "ref-sentinel", PATH_SENTINEL, HM_LOOKUP_DEFAULT_VARIANT },
	{ "ref-sentinel-inline", PATH_SENTINEL, HM_LOOKUP_DEFAULT_VARIANT | HM_LOOKUP_V_REF_INLINE },
	/* D969a's two tiers of the library's load call site */
	{ "site-compact", PATH_SITE_COMPACT, HM_LOOKUP_DEFAULT_VARIANT },
	{ "site", PATH_SITE, HM_LOOKUP_DEFAULT_VARIANT },
};
_Static_assert(sizeof(lk_compile_forms) / sizeof(lk_compile_forms[0]) == NR_COMPILE_FORMS, "NR_COMPILE_FORMS");

/* --compile-sites N,N,...: for each N (in the order given) and each form,
 * the words of a module of N accesses and the wall time of its pipeline's
 * compile (vkCreateComputePipelines), one line each as it is measured. */
int lk_run_compile(struct bench *b, const char *list)
{
	char buf[256], *tok, *save;
	uint32_t salt = (uint32_t)bench_now_ns();
	int r = 0;

	if (strlen(list) >= sizeof(buf))
		return -EINVAL;
	strcpy(buf, list);
	if (!b->json)
		printf("%-20s %8s %10s %12s\n", "form", "sites", "words", "compile ms");
	for (tok = strtok_r(buf, ",", &save); tok && !r; tok = strtok_r(NULL, ",", &save)) {
		long n = strtol(tok, NULL, 10);

		if (n < 1 || n > 100000)
			return -EINVAL;
		for (unsigned f = 0; f < NR_COMPILE_FORMS && !r; f++) {
			const struct vform *cf = &lk_compile_forms[f];
			struct hm_vk_pipeline p;
			uint32_t *w;
			size_t nw;
			double t0, ms;

			salt += 0x10000;
			r = lk_build_sites(cf->path, cf->flags, (uint32_t)n, salt, &w, &nw);
			if (r)
				break;
			t0 = bench_now_ns();
			r = hm_vk_pipeline_new(b->vk, w, nw, "main", 4 * PUSH_WORDS, &p);
			ms = (bench_now_ns() - t0) / 1e6;
			free(w);
			if (r)
				break;
			hm_vk_pipeline_free(b->vk, &p);
			if (b->json)
				printf("{\"bench\":\"lookup\",\"section\":\"compile\",\"device\":\"%s\","
				       "\"form\":\"%s\",\"sites\":%ld,\"words\":%zu,\"compile_ms\":%.1f}\n",
				       b->vk->props.deviceName, cf->name, n, nw, ms);
			else
				printf("%-20s %8ld %10zu %12.1f\n", cf->name, n, nw, ms);
			fflush(stdout);
		}
	}
	return r;
}

int bench_lookup(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "json", no_argument, NULL, 'j' },
		{ "rounds", required_argument, NULL, 'r' },
		{ "groups", required_argument, NULL, 'g' },
		{ "quick", no_argument, NULL, 'q' },
		{ "flush-mib", required_argument, NULL, 'f' },
		{ "variants", required_argument, NULL, 'V' },
		{ "variant", required_argument, NULL, 'v' },
		{ "touch-copies", required_argument, NULL, 't' },
		{ "compile-sites", required_argument, NULL, 'C' },
		{ "help", no_argument, NULL, 'h' },
		{ 0 }
	};
	struct bench b = { .rounds = 9, .nr_lanes = GROUPS * LANES, .flush_mib = 256,
			   .touch_copies = 1, .variant = HM_LOOKUP_DEFAULT_VARIANT };
	struct hm_vk_params vp = { .validation = -1, .flags = HM_VK_SPARSE };
	struct hm_vk_pipeline pipes[2][NR_OPS];
	bool quick = false;
	double target[2] = { 0, 0 };    /* helper/raw, device data+table, load: cache, past */
	uint32_t vsel = (1u << hm__lookup_nr_forms) - 1;
	const char *compile_sites = NULL;
	int c, r, best = -1;

	memset(pipes, 0, sizeof(pipes));
	optind = 1;
	while ((c = getopt_long(argc, argv, "jr:g:qf:V:v:t:C:h", opts, NULL)) != -1) {
		switch (c) {
		case 'j': b.json = true; break;
		case 'r': b.rounds = (unsigned)atoi(optarg); break;
		case 'g': b.nr_lanes = (uint32_t)atoi(optarg) * LANES; break;
		case 'q': quick = true; break;
		case 'f': b.flush_mib = (uint32_t)atoi(optarg); break;
		case 't': b.touch_copies = (uint32_t)atoi(optarg); break;
		case 'C': compile_sites = optarg; break;
		case 'V':
			if (parse_variants(optarg, &vsel)) {
				fprintf(stderr, "lookup: --variants all|none|NAME,... (see --help)\n");
				return -EINVAL;
			}
			break;
		case 'v': {
			const struct hm_lookup_variant *v = hm__lookup_form_by_name(optarg);

			if (!v) {
				fprintf(stderr, "lookup: no variant %s (see --help)\n", optarg);
				return -EINVAL;
			}
			b.variant = v->flags;
			break;
		}
		case 'h': usage(); return 0;
		default: usage(); return -EINVAL;
		}
	}
	if (b.rounds < 1 || b.rounds > 64 || b.nr_lanes < LANES || b.nr_lanes > 8192 ||
	    b.flush_mib > 4096 || b.touch_copies < 1 || b.touch_copies > 1024) {
		fprintf(stderr, "lookup: rounds 1..64, groups 1..128, flush-mib 0..4096, "
			"touch-copies 1..1024\n");
		return -EINVAL;
	}
	r = hm_vk_new(&vp, &b.vk);
	if (r) {
		fprintf(stderr, "lookup: no Vulkan device: %s\n", strerror(-r));
		return r;
	}
	if (compile_sites) {
		/* the compile times alone: no buffers, no chains */
		r = lk_run_compile(&b, compile_sites);
		if (r)
			fprintf(stderr, "lookup: --compile-sites: %s\n", strerror(-r));
		goto out;
	}
	r = lk_setup(&b);
	if (r) {
		fprintf(stderr, "lookup: setup: %s\n", strerror(-r));
		goto out;
	}
	for (int path = 0; path < 2 && !r; path++) {
		for (int op = 0; op < NR_OPS && !r; op++) {
			if (path == PATH_RAW && op == OP_STORE_NOMARK)
				continue;
			r = lk_make_pipe(&b, path, op, b.variant, &pipes[path][op]);
		}
	}
	if (r) {
		fprintf(stderr, "lookup: pipelines: %s\n", strerror(-r));
		goto out;
	}
	if (b.json) {
		/* what a speculative call site would need of the device: a
		 * sparse buffer whose unbound pages read (as zero where strict) */
		VkPhysicalDeviceFeatures f;

		vkGetPhysicalDeviceFeatures(b.vk->phys, &f);
		printf("{\"bench\":\"lookup\",\"section\":\"device\",\"device\":\"%s\","
		       "\"driver_version\":%u,\"sparse_binding\":%u,\"sparse_residency_buffer\":%u,"
		       "\"sparse_residency_aliased\":%u,\"residency_non_resident_strict\":%u,"
		       "\"sparse_address_space_size\":%llu}\n",
		       b.vk->props.deviceName, b.vk->props.driverVersion, f.sparseBinding,
		       f.sparseResidencyBuffer, f.sparseResidencyAliased,
		       b.vk->props.sparseProperties.residencyNonResidentStrict,
		       (unsigned long long)b.vk->props.limits.sparseAddressSpaceSize);
	}
	/* the variants first: what the run has to decide, in case a time
	 * limit cuts it short (every row is flushed as it is measured) */
	if (vsel)
		r = run_variants(&b, vsel, &best);
	if (r)
		goto out;
	if (!b.json)
		printf("\nhmirror-bench lookup: %s, %u groups x %u lanes, chain %u vs %u steps, "
		       "median of %u rounds; ns per step of the whole dispatch; helper variant %s\n"
		       "%-6s %-5s %-6s %-20s %12s %12s %7s %10s\n", b.vk->props.deviceName,
		       b.nr_lanes / LANES, LANES, LONG_STEPS, SHORT_STEPS, b.rounds,
		       variant_name(b.variant), "data", "fp", "table", "op", "raw ns/step",
		       "helper ns/st", "ratio", "ns/lane-acc");
	for (int data = 0; data < 2 && !r; data++) {
		r = lk_point_tables(&b, data);
		for (int fp = 0; fp < 2 && !r; fp++) {
			bool cache = fp == 0;

			if (quick && !cache && data == 1)
				continue;
			for (int op = 0; op < NR_OPS && !r; op++) {
				double raw, help;
				int rop = op == OP_STORE_NOMARK ? OP_STORE_MARK : op;

				r = lk_measure(&b, &pipes[PATH_RAW][rop], PATH_RAW, data, 0, cache, &raw);
				for (int table = 0; table < 2 && !r; table++) {
					if (quick && table == 1)
						continue;
					r = lk_measure(&b, &pipes[PATH_HELPER][op], PATH_HELPER, data, table,
						    cache, &help);
					if (r)
						break;
					if (data == 0 && table == 0 && op == OP_LOAD && raw > 0)
						target[fp] = help / raw;
					if (b.json)
						printf("{\"bench\":\"lookup\",\"device\":\"%s\",\"variant\":\"%s\","
						       "\"data\":\"%s\","
						       "\"footprint\":\"%s\",\"table\":\"%s\",\"op\":\"%s\","
						       "\"marks\":%s,\"groups\":%u,\"lanes\":%u,\"rounds\":%u,"
						       "\"raw_ns_per_step\":%.1f,\"helper_ns_per_step\":%.1f,"
						       "\"ratio\":%.3f,\"helper_ns_per_lane_access\":%.4f}\n",
						       b.vk->props.deviceName, variant_name(b.variant),
						       data ? "host" : "device",
						       cache ? "cache" : "past", table ? "host" : "device",
						       lk_op_name[op], op == OP_STORE_MARK ? "true" : "false",
						       b.nr_lanes / LANES, LANES, b.rounds, raw, help,
						       raw > 0 ? help / raw : 0.0, help / b.nr_lanes);
					else
						printf("%-6s %-5s %-6s %-20s %12.1f %12.1f %7.3f %10.4f\n",
						       data ? "host" : "device", cache ? "cache" : "past",
						       table ? "host" : "device", lk_op_name[op], raw, help,
						       raw > 0 ? help / raw : 0.0, help / b.nr_lanes);
					fflush(stdout);
				}
			}
		}
	}
	if (!r) {
		bool met = target[0] <= 1.3 && target[1] <= 1.3;

		if (b.json)
			printf("{\"bench\":\"lookup\",\"summary\":true,\"device\":\"%s\",\"variant\":\"%s\","
			       "\"ratio_device_data_in_cache\":%.3f,\"ratio_device_data_past_cache\":%.3f,"
			       "\"target\":1.3,\"met\":%s,\"best_variant_cache_step\":\"%s\"}\n",
			       b.vk->props.deviceName, variant_name(b.variant),
			       target[0], target[1], met ? "true" : "false",
			       best >= 0 ? hm_lookup_variants[best].name : "");
		else
			printf("target (device-local data and table, load, variant %s): helper/raw "
			       "%.3f in the cache, %.3f past it; at most 1.3: %s%s%s\n",
			       variant_name(b.variant), target[0], target[1], met ? "met" : "not met",
			       best >= 0 ? "; best D969 variant in the cache: " : "",
			       best >= 0 ? hm_lookup_variants[best].name : "");
	}
	/* the device's MMU as the translation: the raw chain through the
	 * sparse buffers against the same chain through the plain ones */
	if (!r && b.json && b.data[2].addr)
		r = sparse_host(&b);
	for (int data = 0; data < 2 && !r && b.json; data++) {
		if (!b.data[2 + data].addr)
			continue;
		struct hm_vk_pipeline mmu;

		r = lk_make_pipe(&b, PATH_MMU, OP_LOAD, 0, &mmu);
		for (int fp = 0; fp < 2 && !r; fp++) {
			double plain, sp, g;

			r = lk_measure(&b, &pipes[PATH_RAW][OP_LOAD], PATH_RAW, data, 0, fp == 0, &plain);
			if (!r)
				r = lk_measure(&b, &pipes[PATH_RAW][OP_LOAD], PATH_RAW, 2 + data, 0, fp == 0,
					    &sp);
			if (!r)
				r = lk_measure(&b, &mmu, PATH_MMU, 2 + data, 0, fp == 0, &g);
			if (!r)
				printf("{\"bench\":\"lookup\",\"section\":\"mmu\",\"device\":\"%s\","
				       "\"data\":\"%s\",\"footprint\":\"%s\",\"raw_ns_per_step\":%.1f,"
				       "\"sparse_raw_ns_per_step\":%.1f,\"sparse_guest_ns_per_step\":%.1f,"
				       "\"ratio_sparse_raw\":%.3f,\"ratio_sparse_guest\":%.3f}\n",
				       b.vk->props.deviceName, data ? "host" : "device",
				       fp == 0 ? "cache" : "past", plain, sp, g,
				       plain > 0 ? sp / plain : 0.0, plain > 0 ? g / plain : 0.0);
		}
		hm_vk_pipeline_free(b.vk, &mmu);
	}
	if (!r && b.vk->validation && hm_vk_validation_count(b.vk)) {
		fprintf(stderr, "lookup: validation: %s\n", b.vk->last_message);
		r = -EPROTO;
	}
	if (r)
		fprintf(stderr, "lookup: %s\n", strerror(-r));
out:
	for (int path = 0; path < 2; path++)
		for (int op = 0; op < NR_OPS; op++)
			hm_vk_pipeline_free(b.vk, &pipes[path][op]);
	lk_teardown(&b);
	return r;
}
