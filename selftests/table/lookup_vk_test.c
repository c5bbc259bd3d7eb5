// SPDX-License-Identifier: GPL-2.0
/*
 * The lookup helper on a Vulkan device (lavapipe in `make check`), with
 * the validation layers on and no message allowed:
 *  - lookups_agree_with_the_reference: the linked probe program (the
 *    library module linked by spirv-link) answers what hm_table_lookup()
 *    answers for random guest addresses: mapped, unmapped, chunk
 *    boundaries, the last home slot, full probe windows;
 *  - stores_land_and_mark / atomics_land_and_mark: through the helper,
 *    where the table says, marking the right slot; what lands nowhere
 *    hits the sink and nothing else;
 *  - every_word_of_a_wide_access_lands: modules built with the append API
 *    (hm_spirv_emit_access), scalar and vector accesses of 1 to 16 words
 *    straddling a chunk boundary, each word verified.
 * Table in device-local host-visible memory and in imported host memory.
 * Every emission variant of the helper (hm_lookup_variants[], the D969
 * references included) runs every test: the probe program is then linked
 * at run time (spirv-link) against that variant's library module, and the
 * wide-access modules are built in that variant.  The power-of-two variants
 * get power-of-two tables (64 and 4,096 home slots); so do all the others,
 * which therefore run on the same tables.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <spirv/unified1/spirv.h>

#include "kselftest_harness.h"
#include "hmirror/vkctx.h"
#include "hmirror/table.h"
#include "hmirror/lookup.h"
#include "../../lib/lookup_reference.h"
#include "spv_check.h"

extern const uint32_t hm_test_lookup_probe_spv[];
extern const size_t hm_test_lookup_probe_spv_words;
extern const uint32_t hm_test_lookup_probe_unlinked_spv[];
extern const size_t hm_test_lookup_probe_unlinked_spv_words;

#define SHIFT 12
#define CHUNK (1ull << SHIFT)
#define NR_BACK 48              /* backing chunks ("home pages") */
#define GUEST_BASE 0x7f1234000000ull
#define PUSH_WORDS 12
/* the wide-access modules: the table's and the window's words
 * (HM_DEVICE_TABLE_PUSH_WORDS), then in, out, count, op */
#define WIDE_PUSH_WORDS (HM_DEVICE_TABLE_PUSH_WORDS + 6)

static uint64_t rng = 0x9e3779b97f4a7c15ull;
static uint64_t rnd(void)
{
	rng ^= rng >> 12;
	rng ^= rng << 25;
	rng ^= rng >> 27;
	return rng * 2685821657736338717ull;
}

/* Host memory the device imports: page-rounded, aligned. */
static void *host_alloc(struct hm_vk *vk, size_t *size)
{
	size_t a = vk->min_import_align > 4096 ? vk->min_import_align : 4096;
	void *p;

	*size = (*size + a - 1) / a * a;
	p = mmap(NULL, *size, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	return p == MAP_FAILED ? NULL : p;
}

FIXTURE(lk) {
	struct hm_vk *vk;
	struct hm_vk_buffer tbuf, mbuf, bbuf, io;
	void *tmem, *mmem, *bmem;
	size_t tsize, msize, bsize;
	struct hm_table *t;
	uint32_t nr_home;
	uint32_t flags;                 /* the helper's emission variant */
	const uint32_t *probe;          /* the linked probe program */
	size_t probe_n;
	uint32_t *probe_owned;
};

FIXTURE_VARIANT(lk) {
	bool table_in_host;
	uint32_t nr_home;
	const char *form;       /* NULL: the default, linked at build time */
	bool runtime_link;      /* the default, linked by hm_spirv_link_lookup() */
};
FIXTURE_VARIANT_ADD(lk, table_device) { .table_in_host = false, .nr_home = 61 };
FIXTURE_VARIANT_ADD(lk, table_host) { .table_in_host = true, .nr_home = 61 };
FIXTURE_VARIANT_ADD(lk, table_device_big) { .table_in_host = false, .nr_home = 4099 };
#define LK_FORM(id, name) \
	FIXTURE_VARIANT_ADD(lk, id##_device) { .nr_home = 64, .form = name }; \
	FIXTURE_VARIANT_ADD(lk, id##_device_big) { .nr_home = 4096, .form = name }
FIXTURE_VARIANT_ADD(lk, runtime_link_device) { .nr_home = 61, .runtime_link = true };
FIXTURE_VARIANT_ADD(lk, runtime_link_host) { .table_in_host = true, .nr_home = 61,
					     .runtime_link = true };
LK_FORM(u64x2, "u64x2");
FIXTURE_VARIANT_ADD(lk, u64x2_host) { .table_in_host = true, .nr_home = 64, .form = "u64x2" };
LK_FORM(nonwritable, "nonwritable");
LK_FORM(base, "base");
LK_FORM(pow2, "pow2");
LK_FORM(chain, "chain");
LK_FORM(pow2_u64x2, "pow2+u64x2");
LK_FORM(ref_split, "ref-split");
LK_FORM(ref_inline, "ref-inline");

FIXTURE_SETUP(lk)
{
	struct hm_vk_params p = { .validation = 1 };
	int err = hm_vk_new(&p, &self->vk);

	if (err == -EOPNOTSUPP || err == -ENODEV || err == -ENXIO)
		SKIP(return, "no Vulkan device with validation layers (%d)", err);
	ASSERT_EQ(0, err);
	ASSERT_TRUE(self->vk->validation);
	self->nr_home = variant->nr_home;
	self->flags = HM_LOOKUP_DEFAULT_VARIANT;
	self->probe = hm_test_lookup_probe_spv;
	self->probe_n = hm_test_lookup_probe_spv_words;
	if (variant->runtime_link) {
		/* the probe's import resolved in C, as a translator does */
		ASSERT_EQ(0, hm_spirv_link_lookup(hm_test_lookup_probe_unlinked_spv,
						  hm_test_lookup_probe_unlinked_spv_words,
						  HM_LOOKUP_DEFAULT_VARIANT, &self->probe_owned,
						  &self->probe_n));
		self->probe = self->probe_owned;
	}
	if (variant->form) {
		const struct hm_lookup_variant *lv = hm__lookup_form_by_name(variant->form);
		uint32_t *lib;
		size_t nlib;

		ASSERT_NE(NULL, lv);
		ASSERT_TRUE(!lv->needs_pow2 || !(self->nr_home & (self->nr_home - 1)));
		self->flags = lv->flags;
		ASSERT_EQ(0, hm_spirv_lookup_library_variant(lv->flags, &lib, &nlib));
		ASSERT_EQ(0, spv_link(hm_test_lookup_probe_unlinked_spv,
				      hm_test_lookup_probe_unlinked_spv_words, lib, nlib,
				      &self->probe_owned, &self->probe_n)) TH_LOG("spirv-link %s", lv->name);
		free(lib);
		self->probe = self->probe_owned;
	}
	self->tsize = hm_table_bytes_for(self->nr_home);
	if (variant->table_in_host) {
		self->tmem = host_alloc(self->vk, &self->tsize);
		ASSERT_NE(NULL, self->tmem);
		ASSERT_EQ(0, hm_vk_import_host(self->vk, self->tmem, self->tsize, &self->tbuf));
	} else {
		ASSERT_EQ(0, hm_vk_buffer_new(self->vk, self->tsize, HM_VK_MEM_DEVICE_HOST,
					      &self->tbuf));
		self->tmem = self->tbuf.map;
	}
	ASSERT_EQ(0, hm_table_new(self->tmem, self->tsize, self->nr_home, SHIFT, &self->t));
	/* marks + 64 guard words after the last mark */
	self->msize = hm_marks_bytes_for(hm_table_nr_slots(self->t)) + 256;
	self->mmem = host_alloc(self->vk, &self->msize);
	ASSERT_NE(NULL, self->mmem);
	ASSERT_EQ(0, hm_vk_import_host(self->vk, self->mmem, self->msize, &self->mbuf));
	self->bsize = NR_BACK * CHUNK;
	self->bmem = host_alloc(self->vk, &self->bsize);
	ASSERT_NE(NULL, self->bmem);
	ASSERT_EQ(0, hm_vk_import_host(self->vk, self->bmem, self->bsize, &self->bbuf));
	ASSERT_EQ(0, hm_vk_buffer_new(self->vk, 1 << 20, HM_VK_MEM_HOST, &self->io));
}

FIXTURE_TEARDOWN(lk)
{
	if (!self->vk)
		return;
	unsigned n = hm_vk_validation_count(self->vk);

	if (n)
		TH_LOG("validation: %s", self->vk->last_message);
	EXPECT_EQ(0, n);
	hm_table_free(self->t);
	free(self->probe_owned);
	hm_vk_buffer_free(self->vk, &self->io);
	hm_vk_buffer_free(self->vk, &self->bbuf);
	hm_vk_buffer_free(self->vk, &self->mbuf);
	hm_vk_buffer_free(self->vk, &self->tbuf);
	if (self->bmem)
		munmap(self->bmem, self->bsize);
	if (self->mmem)
		munmap(self->mmem, self->msize);
	if (variant->table_in_host && self->tmem)
		munmap(self->tmem, self->tsize);
	hm_vk_free(self->vk);
}

/* Map guest chunk -> backing chunk b. */
static int map_chunk(struct _test_data_lk *self, uint64_t chunk, unsigned b)
{
	int64_t delta = (int64_t)(self->bbuf.addr + b * CHUNK) - (int64_t)(chunk << SHIFT);

	return hm_table_insert(self->t, chunk, delta, NULL);
}

static void push_words(struct _test_data_lk *self, uint32_t *w, uint64_t in, uint64_t out,
		       uint32_t count, uint32_t mode)
{
	w[HM_PUSH_TABLE_ADDR_LO] = (uint32_t)self->tbuf.addr;
	w[HM_PUSH_TABLE_ADDR_HI] = (uint32_t)(self->tbuf.addr >> 32);
	w[HM_PUSH_TABLE_NR_HOME] = self->nr_home;
	w[HM_PUSH_CHUNK_SHIFT] = SHIFT;
	w[HM_PUSH_MARKS_ADDR_LO] = (uint32_t)self->mbuf.addr;
	w[HM_PUSH_MARKS_ADDR_HI] = (uint32_t)(self->mbuf.addr >> 32);
	w[6] = (uint32_t)in;
	w[7] = (uint32_t)(in >> 32);
	w[8] = (uint32_t)out;
	w[9] = (uint32_t)(out >> 32);
	w[10] = count;
	w[11] = mode;
}

/* The wide-access modules' push block; window: first/last/delta (first 0:
 * the window of nothing, a sentinel page) */
struct test_window {
	uint64_t delta, first, last;
};

static void push_wide(struct _test_data_lk *self, uint32_t *w, uint64_t in, uint64_t out,
		      uint32_t count, uint32_t mode, const struct test_window *win)
{
	w[HM_PUSH_TABLE_ADDR_LO] = (uint32_t)self->tbuf.addr;
	w[HM_PUSH_TABLE_ADDR_HI] = (uint32_t)(self->tbuf.addr >> 32);
	w[HM_PUSH_TABLE_NR_HOME] = self->nr_home;
	w[HM_PUSH_CHUNK_SHIFT] = SHIFT;
	w[HM_PUSH_MARKS_ADDR_LO] = (uint32_t)self->mbuf.addr;
	w[HM_PUSH_MARKS_ADDR_HI] = (uint32_t)(self->mbuf.addr >> 32);
	w[HM_PUSH_WINDOW_DELTA_LO] = (uint32_t)win->delta;
	w[HM_PUSH_WINDOW_DELTA_HI] = (uint32_t)(win->delta >> 32);
	w[HM_PUSH_WINDOW_FIRST_LO] = (uint32_t)win->first;
	w[HM_PUSH_WINDOW_FIRST_HI] = (uint32_t)(win->first >> 32);
	w[HM_PUSH_WINDOW_LAST_LO] = (uint32_t)win->last;
	w[HM_PUSH_WINDOW_LAST_HI] = (uint32_t)(win->last >> 32);
	w[12] = (uint32_t)in;
	w[13] = (uint32_t)(in >> 32);
	w[14] = (uint32_t)out;
	w[15] = (uint32_t)(out >> 32);
	w[16] = count;
	w[17] = mode;
}

/*
 * The standard layout: a contiguous space of 20 chunks, 4 chunks sharing
 * one home (a full window), 4 chunks homed at the last home slot (into the
 * overhang), and 3 chunks mapped then removed.  ret_mapped receives the
 * mapped chunk numbers, ret_unmapped some unmapped ones.
 */
static int layout(struct _test_data_lk *self, uint64_t *mapped, unsigned *nm,
		  uint64_t *unmapped, unsigned *nu)
{
	uint64_t base = GUEST_BASE >> SHIFT, c = base + 1000;
	unsigned b = 0, want_home;
	int r;

	*nm = *nu = 0;
	for (unsigned i = 0; i < 20; i++) {
		r = map_chunk(self, base + i, (i * 7) % 20);   /* scrambled backing */
		if (r)
			return r;
		mapped[(*nm)++] = base + i;
	}
	b = 20;
	unmapped[(*nu)++] = base - 1;
	unmapped[(*nu)++] = base + 20;
	for (int pass = 0; pass < 2; pass++) {
		unsigned got = 0;

		want_home = pass ? self->nr_home - 1 : hm_table_home_slot(base + 3, self->nr_home);
		for (; got < 4; c++) {
			if (hm_table_home_slot(c, self->nr_home) != want_home)
				continue;
			r = map_chunk(self, c, b++);
			if (r == -ENOSPC)
				break;  /* the window already held a space chunk */
			if (r)
				return r;
			mapped[(*nm)++] = c;
			got++;
		}
		/* one more of the same home: refused (full window), stays unmapped */
		for (;; c++) {
			if (hm_table_home_slot(c, self->nr_home) != want_home)
				continue;
			if (map_chunk(self, c, 0) != -ENOSPC)
				return -EIO;
			unmapped[(*nu)++] = c++;
			break;
		}
	}
	for (unsigned i = 0; i < 3; i++, c++) {
		r = map_chunk(self, c, b);
		if (r)
			return r;
		r = hm_table_remove(self->t, c);
		if (r)
			return r;
		unmapped[(*nu)++] = c;
	}
	if (b > NR_BACK)
		return -E2BIG;
	return 0;
}

static uint64_t pick_addr(uint64_t chunk)
{
	static const uint64_t offs[] = { 0, 4, CHUNK - 4, CHUNK - 8, CHUNK / 2 };
	unsigned k = rnd() % 8;

	if (k < 5)
		return (chunk << SHIFT) + offs[k];
	return (chunk << SHIFT) + (rnd() % (CHUNK / 4)) * 4;
}

TEST_F(lk, lookups_agree_with_the_reference)
{
	uint64_t mapped[64], unmapped[64];
	unsigned nm, nu, n = 4096;
	struct hm_vk_pipeline pipe;
	uint32_t push[PUSH_WORDS];
	uint64_t *in = self->io.map;
	uint32_t *out = (uint32_t *)((char *)self->io.map + 8 * n);
	unsigned last_home_hits = 0, overhang_hits = 0;

	ASSERT_EQ(0, spv_validate(self->probe, self->probe_n,
				  "vulkan1.2"));
	ASSERT_EQ(0, spv_validate(self->probe, self->probe_n,
				  "vulkan1.3"));
	ASSERT_EQ(0, layout(self, mapped, &nm, unmapped, &nu));
	for (unsigned i = 0; i < n; i++) {
		unsigned k = rnd() % 16;

		if (k < 9)
			in[i] = pick_addr(mapped[rnd() % nm]);
		else if (k < 13)
			in[i] = pick_addr(unmapped[rnd() % nu]);
		else if (k < 15)
			in[i] = rnd() & ((1ull << 47) - 1) & ~3ull;     /* anywhere */
		else
			in[i] = rnd() & ~3ull;                           /* even 64-bit */
	}
	memset(out, 0xee, 16 * n);
	ASSERT_EQ(0, hm_vk_pipeline_new(self->vk, self->probe, self->probe_n, "main",
					4 * PUSH_WORDS, &pipe));
	push_words(self, push, self->io.addr, self->io.addr + 8 * n, n, 0);
	ASSERT_EQ(0, hm_vk_dispatch_sync(self->vk, &pipe, push, sizeof(push), n / 64, 1, 1));
	for (unsigned i = 0; i < n; i++) {
		uint64_t dev, mark;
		uint32_t slot;

		hm_table_lookup(self->t, in[i], &dev, &slot);
		mark = hm_table_mark_addr(self->mbuf.addr, slot);
		if (slot != UINT32_MAX && slot >= self->nr_home - 1)
			last_home_hits++;
		if (slot != UINT32_MAX && slot >= self->nr_home)
			overhang_hits++;
		ASSERT_EQ((uint32_t)dev, out[4 * i + 0]) TH_LOG("item %u guest 0x%lx", i, in[i]);
		ASSERT_EQ((uint32_t)(dev >> 32), out[4 * i + 1]);
		ASSERT_EQ((uint32_t)mark, out[4 * i + 2]) TH_LOG("item %u guest 0x%lx", i, in[i]);
		ASSERT_EQ((uint32_t)(mark >> 32), out[4 * i + 3]);
	}
	ASSERT_GT(last_home_hits, 0);
	ASSERT_GT(overhang_hits, 0);
	hm_vk_pipeline_free(self->vk, &pipe);
}

/* Stores (mode 1) and atomics (mode 2) through the probe program. */
static void store_or_atomic(struct __test_metadata *_metadata, struct _test_data_lk *self,
			    uint32_t mode)
{
	uint64_t mapped[64], unmapped[64];
	unsigned nm, nu, n = 2048, nr_unmapped = 0;
	struct hm_vk_pipeline pipe;
	uint32_t push[PUSH_WORDS];
	uint64_t *in = self->io.map;
	uint32_t *expect = calloc(1, self->bsize), *marks = self->mmem;
	uint32_t nr_slots, *want_mark;
	uint8_t *used = calloc(1, self->bsize / 4);

	ASSERT_NE(NULL, expect);
	ASSERT_NE(NULL, used);
	ASSERT_EQ(0, layout(self, mapped, &nm, unmapped, &nu));
	nr_slots = hm_table_nr_slots(self->t);
	want_mark = calloc(nr_slots, sizeof(*want_mark));
	memset(self->bmem, 0xcc, self->bsize);
	memset(expect, 0xcc, self->bsize);
	memset(self->mmem, 0, self->msize);
	for (unsigned i = 0; i < n; i++) {
		uint64_t dev;
		uint32_t slot;

		for (;;) {
			in[i] = pick_addr(rnd() % 4 ? mapped[rnd() % nm] : unmapped[rnd() % nu]);
			if (hm_table_lookup(self->t, in[i], &dev, &slot)) {
				nr_unmapped++;
				break;
			}
			size_t w = (dev - self->bbuf.addr) / 4;

			ASSERT_LT(w, self->bsize / 4);
			if (mode == 1 && used[w])
				continue;       /* stores: one per word */
			used[w] = 1;
			want_mark[slot] = 1;
			if (mode == 1)
				expect[w] = 0x50000000u | i;
			else
				expect[w] = (expect[w] == 0xccccccccu ? 0 : expect[w]) + 1;
			break;
		}
	}
	/* atomics start from zero where they land */
	if (mode == 2)
		for (size_t w = 0; w < self->bsize / 4; w++)
			if (used[w])
				((uint32_t *)self->bmem)[w] = 0;
	ASSERT_EQ(0, hm_vk_pipeline_new(self->vk, self->probe, self->probe_n, "main",
					4 * PUSH_WORDS, &pipe));
	push_words(self, push, self->io.addr, 0, n, mode);
	ASSERT_EQ(0, hm_vk_dispatch_sync(self->vk, &pipe, push, sizeof(push), n / 64, 1, 1));
	ASSERT_GT(nr_unmapped, 0);
	/* every word of the home pages: written exactly where expected */
	for (size_t w = 0; w < self->bsize / 4; w++) {
		ASSERT_EQ(expect[w], ((uint32_t *)self->bmem)[w]) TH_LOG("word %zu", w);
	}
	/* the sink: a store marks it, an atomic that lands nowhere adds to it */
	if (mode == 1) {
		ASSERT_EQ(1, marks[HM_MARK_SINK]);
	} else {
		ASSERT_EQ(nr_unmapped, marks[HM_MARK_SINK]);
	}
	for (uint32_t s = 0; s < nr_slots; s++) {
		ASSERT_EQ(want_mark[s], marks[HM_MARK_INDEX(s)]) TH_LOG("slot %u", s);
	}
	/* nothing past the marks */
	for (size_t w = 1 + nr_slots; w < self->msize / 4; w++)
		ASSERT_EQ(0, marks[w]);
	/* the host scan reports exactly the marked slots */
	unsigned nr_marked = 0;

	for (uint32_t s = 0; s < nr_slots; s++)
		nr_marked += want_mark[s];
	ASSERT_EQ((int)nr_marked, hm_marks_scan(marks, nr_slots, NULL, NULL));
	ASSERT_EQ(0, hm_marks_scan(marks, nr_slots, NULL, NULL));
	hm_vk_pipeline_free(self->vk, &pipe);
	free(expect);
	free(used);
	free(want_mark);
}

TEST_F(lk, stores_land_and_mark)
{
	store_or_atomic(_metadata, self, 1);
}

TEST_F(lk, atomics_land_and_mark)
{
	store_or_atomic(_metadata, self, 2);
}

/* ---- wide accesses through the append API -------------------------------- */
struct kb {
	struct hm_spirv_module *m;
	uint32_t u32, u64, bl, v4, psb_u32, psb_u64, psb_v4;
	uint32_t label;         /* the open block */
	uint32_t push[WIDE_PUSH_WORDS];
	struct hm_spirv_table_ids t;
	struct hm_spirv_window_ids w;
	uint32_t in, out, count, op, gidx;
};

#define FN HM_SPV_SEC_FUNCTION

static void kb_label(struct kb *k, uint32_t id)
{
	HM_SPV(k->m, FN, SpvOpLabel, id);
	k->label = id;
}

static uint32_t kb_join(struct kb *k, uint32_t lo, uint32_t hi)
{
	return HM_SPV_OP(k->m, FN, SpvOpBitwiseOr, k->u64,
			 HM_SPV_OP(k->m, FN, SpvOpUConvert, k->u64, lo),
			 HM_SPV_OP(k->m, FN, SpvOpShiftLeftLogical, k->u64,
				   HM_SPV_OP(k->m, FN, SpvOpUConvert, k->u64, hi),
				   hm_spirv_const_u32(k->m, 32)));
}

/* if (cond) { ...: returns the merge label to pass to kb_endif */
static uint32_t kb_if(struct kb *k, uint32_t cond)
{
	uint32_t then = hm_spirv_id(k->m), merge = hm_spirv_id(k->m);

	HM_SPV(k->m, FN, SpvOpSelectionMerge, merge, SpvSelectionControlMaskNone);
	HM_SPV(k->m, FN, SpvOpBranchConditional, cond, then, merge);
	kb_label(k, then);
	return merge;
}

static void kb_endif(struct kb *k, uint32_t merge)
{
	HM_SPV(k->m, FN, SpvOpBranch, merge);
	kb_label(k, merge);
}

static void kb_store32(struct kb *k, uint32_t addr64, uint32_t val)
{
	uint32_t p = HM_SPV_OP(k->m, FN, SpvOpConvertUToPtr, k->psb_u32, addr64);

	HM_SPV(k->m, FN, SpvOpStore, p, val, SpvMemoryAccessAlignedMask, 4);
}

/* Entry point "main", local size 64, the push block of PUSH_WORDS words;
 * opens main and loads the push words and the invocation index. */
static int kb_begin(struct kb *k)
{
	struct hm_spirv_module *m;
	int r = hm_spirv_module_new(&k->m);

	if (r)
		return r;
	m = k->m;
	k->u32 = hm_spirv_type_int(m, 32, false);
	k->u64 = hm_spirv_type_int(m, 64, false);
	k->bl = hm_spirv_type_bool(m);
	k->v4 = hm_spirv_type_vector(m, k->u32, 4);
	k->psb_u32 = hm_spirv_type_pointer(m, SpvStorageClassPhysicalStorageBuffer, k->u32);
	k->psb_u64 = hm_spirv_type_pointer(m, SpvStorageClassPhysicalStorageBuffer, k->u64);
	k->psb_v4 = hm_spirv_type_pointer(m, SpvStorageClassPhysicalStorageBuffer, k->v4);
	k->label = hm_spirv_compute_main(m, WIDE_PUSH_WORDS, 64, k->push, &k->gidx);
	hm_spirv_push_ids(m, k->push, &k->t, &k->w);
	k->in = kb_join(k, k->push[12], k->push[13]);
	k->out = kb_join(k, k->push[14], k->push[15]);
	k->count = k->push[16];
	k->op = k->push[17];
	return hm_spirv_error(m);
}

static int kb_end(struct kb *k, uint32_t **ret_w, size_t *ret_n)
{
	HM_SPV(k->m, FN, SpvOpReturn);
	hm_spirv_inst(k->m, FN, SpvOpFunctionEnd, NULL, 0);
	int r = hm_spirv_module_finish(k->m, ret_w, ret_n);

	hm_spirv_module_free(k->m);
	k->m = NULL;
	return r;
}

/*
 * Invocation j < count: guest g = in[j]; an access of nr words at g via
 * hm_spirv_emit_access.  op 0 stores word i = 0xa0000000 | j << 8 | i
 * (where mapped) and marks it (the sink where not); op 1 loads every word
 * (0 where unmapped) through the load call site (hm_spirv_emit_load(), one
 * call: the compact form as built, either tier after hm_spirv_tier_form())
 * into out[16 j + i].  vector: the values travel as uvec4s (stored as one
 * vector where four words are whole).
 */
static int build_wide(unsigned nr, bool vector, uint32_t flags, uint32_t **ret_w, size_t *ret_n)
{
	struct kb k = { 0 };
	struct hm_spirv_module *m;
	uint32_t dev[16], mark[16], nz[16], val[16], vec[4], one, zero, merge, g, j64;
	uint32_t isstore, mstore, ld_merge;
	int r = kb_begin(&k);

	if (r)
		return r;
	m = k.m;
	r = hm_spirv_set_lookup_variant(m, flags);
	if (r)
		return r;
	one = hm_spirv_const_u32(m, 1);
	zero = hm_spirv_const_u32(m, 0);
	merge = kb_if(&k, HM_SPV_OP(m, FN, SpvOpULessThan, k.bl, k.gidx, k.count));
	j64 = HM_SPV_OP(m, FN, SpvOpUConvert, k.u64, k.gidx);
	g = HM_SPV_OP(m, FN, SpvOpLoad, k.u64,
		      HM_SPV_OP(m, FN, SpvOpConvertUToPtr, k.psb_u64,
				HM_SPV_OP(m, FN, SpvOpIAdd, k.u64, k.in,
					  HM_SPV_OP(m, FN, SpvOpShiftLeftLogical, k.u64, j64,
						    hm_spirv_const_u32(m, 3)))),
		      SpvMemoryAccessAlignedMask, 8);
	r = hm_spirv_emit_access(m, &k.t, g, nr, dev, mark);
	if (r)
		return r;
	for (unsigned i = 0; i < nr; i++)
		nz[i] = HM_SPV_OP(m, FN, SpvOpINotEqual, k.bl, dev[i], hm_spirv_const_u64(m, 0));

	/* op 0: stores */
	isstore = HM_SPV_OP(m, FN, SpvOpIEqual, k.bl, k.op, zero);
	uint32_t st = hm_spirv_id(m), ld = hm_spirv_id(m);

	mstore = hm_spirv_id(m);
	HM_SPV(m, FN, SpvOpSelectionMerge, mstore, SpvSelectionControlMaskNone);
	HM_SPV(m, FN, SpvOpBranchConditional, isstore, st, ld);
	kb_label(&k, st);
	uint32_t base = HM_SPV_OP(m, FN, SpvOpBitwiseOr, k.u32,
				  hm_spirv_const_u32(m, 0xa0000000u),
				  HM_SPV_OP(m, FN, SpvOpShiftLeftLogical, k.u32, k.gidx,
					    hm_spirv_const_u32(m, 8)));

	for (unsigned i = 0; i < nr; i++)
		val[i] = HM_SPV_OP(m, FN, SpvOpBitwiseOr, k.u32, base, hm_spirv_const_u32(m, i));
	if (vector) {
		for (unsigned q = 0; q < (nr + 3) / 4; q++) {
			uint32_t c[4];

			for (unsigned e = 0; e < 4; e++)
				c[e] = 4 * q + e < nr ? val[4 * q + e] : zero;
			vec[q] = HM_SPV_OP(m, FN, SpvOpCompositeConstruct, k.v4, c[0], c[1], c[2], c[3]);
		}
		for (unsigned i = 0; i < nr; i++)
			val[i] = HM_SPV_OP(m, FN, SpvOpCompositeExtract, k.u32, vec[i / 4], i % 4);
	}
	for (unsigned i = 0; i < nr; i++) {
		uint32_t mg = kb_if(&k, nz[i]);

		kb_store32(&k, dev[i], val[i]);
		kb_endif(&k, mg);
		kb_store32(&k, mark[i], one);
	}
	HM_SPV(m, FN, SpvOpBranch, mstore);

	/* op 1: loads */
	kb_label(&k, ld);
	uint32_t obase = HM_SPV_OP(m, FN, SpvOpIAdd, k.u64, k.out,
				   HM_SPV_OP(m, FN, SpvOpShiftLeftLogical, k.u64, j64,
					     hm_spirv_const_u32(m, 6)));

	r = hm_spirv_emit_load(m, &k.t, &k.w, g, nr, val);
	if (r)
		return r;
	for (unsigned q = 0; q < (nr + 3) / 4; q++) {
		if (vector && 4 * q + 4 <= nr) {
			uint32_t v = HM_SPV_OP(m, FN, SpvOpCompositeConstruct, k.v4,
					       val[4 * q], val[4 * q + 1], val[4 * q + 2], val[4 * q + 3]);
			uint32_t p = HM_SPV_OP(m, FN, SpvOpConvertUToPtr, k.psb_v4,
					       HM_SPV_OP(m, FN, SpvOpIAdd, k.u64, obase,
							 hm_spirv_const_u64(m, 16 * q)));

			HM_SPV(m, FN, SpvOpStore, p, v, SpvMemoryAccessAlignedMask, 16);
			continue;
		}
		for (unsigned i = 4 * q; i < nr && i < 4 * q + 4; i++)
			kb_store32(&k, HM_SPV_OP(m, FN, SpvOpIAdd, k.u64, obase,
						 hm_spirv_const_u64(m, 4 * i)), val[i]);
	}
	HM_SPV(m, FN, SpvOpBranch, mstore);
	kb_label(&k, mstore);
	(void)ld_merge;
	kb_endif(&k, merge);
	return kb_end(&k, ret_w, ret_n);
}

/*
 * The mirror windows the loads of a wide access run against (D969a):
 * none (a page of sentinel: every speculative load misses), and one over
 * the 38 test chunks in which pairs p % 3 == 0 hold both chunks' bytes,
 * pairs p % 3 == 1 the first chunk's only (an access across their
 * boundary reads the sentinel in its second part: the whole access takes
 * the lookups), and the rest none.
 */
static void window_fill(struct _test_data_lk *self, uint8_t *win, uint64_t base)
{
	memset(win, 0xff, 38 * CHUNK + 2 * HM_WINDOW_GUARD_BYTES);
	for (unsigned p = 0; p < 19; p++) {
		for (unsigned h = 0; h < 2; h++) {
			uint64_t c = base + 2 * p + h, dev;

			if (p % 3 == 2 || (p % 3 == 1 && h) ||
			    hm_table_lookup(self->t, c << SHIFT, &dev, NULL))
				continue;
			memcpy(win + HM_WINDOW_GUARD_BYTES + (c - base) * CHUNK,
			       (uint8_t *)self->bmem + (dev - self->bbuf.addr), CHUNK);
		}
	}
}

TEST_F(lk, every_word_of_a_wide_access_lands)
{
	const uint64_t base = (GUEST_BASE >> SHIFT) + 5000;
	uint64_t *in = self->io.map;
	uint32_t *out = (uint32_t *)((char *)self->io.map + 4096);
	uint32_t *marks = self->mmem, nr_slots;
	uint32_t *expect = malloc(self->bsize);
	uint32_t push[WIDE_PUSH_WORDS];
	struct hm_vk_buffer winbuf, nonebuf;
	struct test_window none, win;

	ASSERT_NE(NULL, expect);
	ASSERT_EQ(0, hm_vk_buffer_new(self->vk, 38 * CHUNK + 2 * HM_WINDOW_GUARD_BYTES,
				      HM_VK_MEM_HOST, &winbuf));
	ASSERT_EQ(0, hm_vk_buffer_new(self->vk, 4096, HM_VK_MEM_HOST, &nonebuf));
	memset(nonebuf.map, 0xff, 4096);
	none = (struct test_window){ 0, nonebuf.addr, nonebuf.addr + 4096 - HM_ACCESS_MAX_BYTES };
	win = (struct test_window){ winbuf.addr + HM_WINDOW_GUARD_BYTES - (base << SHIFT),
				    winbuf.addr, winbuf.addr + winbuf.size - HM_ACCESS_MAX_BYTES };
	/* pairs of adjacent guest chunks (2p, 2p+1), backed in reverse order
	 * far apart: p -> backing (2p+1, 2p) offset by the pair count; pair
	 * 17 has its second chunk unmapped, pair 18 its first. */
	for (unsigned p = 0; p < 19; p++) {
		if (p != 18)
			ASSERT_EQ(0, map_chunk(self, base + 2 * p, 47 - p));
		if (p != 17)
			ASSERT_EQ(0, map_chunk(self, base + 2 * p + 1, 8 + p));
	}
	nr_slots = hm_table_nr_slots(self->t);
	for (unsigned nr = 1; nr <= 16; nr++) {
		for (int vector = 0; vector < 2; vector++) {
			struct hm_vk_pipeline pipe, tpipe;
			uint32_t *w, *tw;
			size_t nw, ntw;
			unsigned count = nr + 3;
			bool sink = false;

			ASSERT_EQ(0, build_wide(nr, vector, self->flags, &w, &nw));
			/* every emitted module is valid */
			ASSERT_EQ(0, spv_validate(w, nw, "vulkan1.2"));
			ASSERT_EQ(0, spv_validate(w, nw, "vulkan1.3"));
			ASSERT_EQ(0, hm_vk_pipeline_new(self->vk, w, nw, "main",
							4 * WIDE_PUSH_WORDS, &pipe));
			/* invocation j <= nr: j words before the boundary of pair j;
			 * nr + 1, nr + 2: half before, half after, pairs 17 and 18 */
			for (unsigned j = 0; j < count; j++) {
				unsigned p = j <= nr ? j : 17 + (j - nr - 1);
				unsigned before = j <= nr ? j : nr / 2;

				in[j] = ((base + 2 * p + 1) << SHIFT) - 4 * before;
			}
			memset(self->bmem, 0xcc, self->bsize);
			memset(expect, 0xcc, self->bsize);
			hm_marks_clear(marks, nr_slots);
			uint8_t want_mark[nr_slots];

			memset(want_mark, 0, nr_slots);
			for (unsigned j = 0; j < count; j++) {
				for (unsigned i = 0; i < nr; i++) {
					uint64_t dev;
					uint32_t slot;

					if (hm_table_lookup(self->t, in[j] + 4 * i, &dev, &slot)) {
						sink = true;
						continue;
					}
					expect[(dev - self->bbuf.addr) / 4] = 0xa0000000u | j << 8 | i;
					want_mark[slot] = 1;
				}
			}
			push_wide(self, push, self->io.addr, self->io.addr + 4096, count, 0, &none);
			ASSERT_EQ(0, hm_vk_dispatch_sync(self->vk, &pipe, push, sizeof(push), 1, 1, 1));
			for (size_t x = 0; x < self->bsize / 4; x++) {
				ASSERT_EQ(expect[x], ((uint32_t *)self->bmem)[x])
					TH_LOG("nr %u vector %d word %zu", nr, vector, x);
			}
			ASSERT_EQ(sink, marks[HM_MARK_SINK] != 0);
			for (uint32_t s = 0; s < nr_slots; s++) {
				ASSERT_EQ(want_mark[s], marks[HM_MARK_INDEX(s)])
					TH_LOG("nr %u vector %d slot %u", nr, vector, s);
			}
			window_fill(self, winbuf.map, base);
			/* and every word reads back: the module as built, then
			 * each tier's form, the speculative one against no
			 * window and against the partial window */
			for (int form = 0; form < 4; form++) {
				const struct hm_vk_pipeline *pp = &pipe;
				const struct test_window *tw_win = form == 3 ? &win : &none;

				if (form) {
					ASSERT_EQ(0, hm_spirv_tier_form(w, nw, form == 1 ? HM_TIER_COMPACT :
									HM_TIER_SPECULATIVE, &tw, &ntw));
					ASSERT_EQ(0, spv_validate(tw, ntw, "vulkan1.2"));
					ASSERT_EQ(0, spv_validate(tw, ntw, "vulkan1.3"));
					ASSERT_EQ(0, hm_vk_pipeline_new(self->vk, tw, ntw, "main",
									4 * WIDE_PUSH_WORDS, &tpipe));
					free(tw);
					pp = &tpipe;
				}
				memset(out, 0xee, 64 * count);
				push_wide(self, push, self->io.addr, self->io.addr + 4096, count, 1,
					  tw_win);
				ASSERT_EQ(0, hm_vk_dispatch_sync(self->vk, pp, push, sizeof(push),
								 1, 1, 1));
				if (form)
					hm_vk_pipeline_free(self->vk, &tpipe);
				for (unsigned j = 0; j < count; j++) {
					for (unsigned i = 0; i < nr; i++) {
						uint32_t want = hm_table_lookup(self->t, in[j] + 4 * i,
										NULL, NULL)
								? 0 : 0xa0000000u | j << 8 | i;

						ASSERT_EQ(want, out[16 * j + i])
							TH_LOG("nr %u vector %d form %d inv %u word %u",
							       nr, vector, form, j, i);
					}
				}
			}
			free(w);
			hm_vk_pipeline_free(self->vk, &pipe);
		}
	}
	hm_vk_buffer_free(self->vk, &winbuf);
	hm_vk_buffer_free(self->vk, &nonebuf);
	free(expect);
}

TEST_HARNESS_MAIN
