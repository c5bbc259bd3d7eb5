/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * hmirror lookup helper as SPIR-V (data-path.rst, table.rst, shaders.rst;
 * hmirror(7) says where the documentation is installed).
 *
 * One function, DontInline, that every device-addressed access calls:
 *
 *   struct hm_lookup_result { uint dev_lo, dev_hi, mark_lo, mark_hi; }
 *   hm_lookup(uint64 guest, uint64 table, uint nr_home, uint chunk_shift,
 *             uint64 marks)
 *
 * dev = guest + delta of the chunk's slot, 0 where no slot maps the chunk;
 * mark = marks + 4 * (1 + slot), or marks (the sink) where unmapped.  It
 * reads nothing of its caller's (no globals, no push constants), only the
 * four slots of the chunk's window through PhysicalStorageBuffer pointers,
 * and works the same for one invocation per lane.  The answer is four
 * 32-bit halves, never a vector of two 64-bit words (table.rst:
 * every_word_of_a_wide_access_lands).
 *
 * Two forms:
 *  (a) hm_spirv_module: a small module builder with capability, extension,
 *      type and constant dedup and separate sections; a translator builds
 *      its module with it (or appends its own words to the sections) and
 *      calls hm_spirv_lookup_fn() to get the helper's function id: the
 *      helper is written whole into the helper section the first time,
 *      even while the caller's function is open.  64-bit constants are
 *      declared once per module.
 *  (b) a library module (Linkage capability, function exported as
 *      "hm_lookup"), hm_spirv_lookup_library(), installed at build time as
 *      $(pkg-config --variable=lookup_spv hmirror); link it with spirv-link
 *      into a module that declares hm_lookup with Import linkage and the
 *      same function type.
 *
 * At the call site (the translator's; a few instructions each,
 * data-path.rst):
 *   load:   v = dev ? *(T *)dev : 0
 *   store:  if (dev) *(T *)dev = v;  *(uint *)mark = 1
 *           (mark is the sink where dev is 0: a store that lands nowhere
 *           marks the sink and nothing else)
 *   atomic: r = atomic_op((uint *)(dev ? dev : mark), v);  if (dev) *(uint *)mark = 1
 *           (an atomic that lands nowhere is pointed at the sink)
 * The marks tell the host which slots' chunks the device wrote
 * (hm_marks_scan()); the table is never written on the device.
 *
 * A module is built by one thread at a time.
 *
 * Modules are SPIR-V 1.5 (Vulkan 1.2), addressing model
 * PhysicalStorageBuffer64, memory model GLSL450; the helper needs the
 * capabilities Shader, Int64, PhysicalStorageBufferAddresses and the
 * extension SPV_KHR_physical_storage_buffer (declared by the builder).
 * Opcodes and operands are SPIR-V's own numbers: <spirv/unified1/spirv.h>
 * (Debian's spirv-headers) names them.
 */
#ifndef HMIRROR_LOOKUP_H
#define HMIRROR_LOOKUP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <linux/hmirror_table.h>

#ifdef __cplusplus
extern "C" {
#endif

#define HM_LOOKUP_EXPORT_NAME	"hm_lookup"
#define HM_LOOKUP_LIBRARY_FILE	"hmirror-lookup.spv"
/* Largest access the shared-lookup plan covers. */
#define HM_ACCESS_MAX_BYTES	64

/* ---- (a) the module builder -------------------------------------------- */
enum hm_spv_section {
	HM_SPV_SEC_CAPABILITY = 0,
	HM_SPV_SEC_EXTENSION,
	HM_SPV_SEC_EXT_IMPORT,
	HM_SPV_SEC_MEMORY_MODEL,    /* written by the builder */
	HM_SPV_SEC_ENTRY_POINT,
	HM_SPV_SEC_EXEC_MODE,
	HM_SPV_SEC_DEBUG,
	HM_SPV_SEC_ANNOTATION,
	HM_SPV_SEC_GLOBAL,          /* types, constants, global variables */
	HM_SPV_SEC_FUNCTION,        /* the caller's functions */
	HM_SPV_SEC_HELPER,          /* helper functions (hm_lookup) */
	HM_SPV_NR_SECTIONS
};

/* Limit on a module's size (words) and ids. */
#define HM_SPV_MAX_WORDS	(64u << 20)

struct hm_spirv_module;

int  hm_spirv_module_new(struct hm_spirv_module **ret);
void hm_spirv_module_free(struct hm_spirv_module *m);   /* NULL ok */
/* A sticky error: the first failure of any emission call (-ENOMEM,
 * -E2BIG, -EINVAL); emission calls return id 0 once it is set. */
int  hm_spirv_error(const struct hm_spirv_module *m);

uint32_t hm_spirv_id(struct hm_spirv_module *m);         /* a fresh id */
uint32_t hm_spirv_bound(const struct hm_spirv_module *m);

/* Append one instruction (opcode + operands) to a section. */
void hm_spirv_inst(struct hm_spirv_module *m, enum hm_spv_section sec,
		   uint16_t opcode, const uint32_t *operands, size_t nr);
/* The same with the operands inline: HM_SPV(m, sec, op, a, b, ...). */
#define HM_SPV(m, sec, op, ...) \
	hm_spirv_inst((m), (sec), (op), (const uint32_t[]){ __VA_ARGS__ }, \
		      sizeof((const uint32_t[]){ __VA_ARGS__ }) / sizeof(uint32_t))
/* A result-producing instruction: allocates and returns the result id,
 * emits op result_type result operands... */
uint32_t hm_spirv_op(struct hm_spirv_module *m, enum hm_spv_section sec,
		     uint16_t opcode, uint32_t result_type,
		     const uint32_t *operands, size_t nr);
#define HM_SPV_OP(m, sec, op, type, ...) \
	hm_spirv_op((m), (sec), (op), (type), (const uint32_t[]){ __VA_ARGS__ }, \
		    sizeof((const uint32_t[]){ __VA_ARGS__ }) / sizeof(uint32_t))
/* Number of words a string literal takes, and append one to an array. */
size_t hm_spirv_string_words(const char *s);
size_t hm_spirv_put_string(uint32_t *dst, const char *s);

/* Deduplicated declarations (each returns the id, 0 after an error). */
void     hm_spirv_capability(struct hm_spirv_module *m, uint32_t cap);
void     hm_spirv_extension(struct hm_spirv_module *m, const char *name);
void     hm_spirv_name(struct hm_spirv_module *m, uint32_t id, const char *name);
uint32_t hm_spirv_type_void(struct hm_spirv_module *m);
uint32_t hm_spirv_type_bool(struct hm_spirv_module *m);
uint32_t hm_spirv_type_int(struct hm_spirv_module *m, uint32_t width, bool is_signed);
uint32_t hm_spirv_type_vector(struct hm_spirv_module *m, uint32_t component, uint32_t n);
/* Plain struct types are deduplicated by their member list; decorated
 * ones (Block, Offset) need hm_spirv_type_struct_unique(). */
uint32_t hm_spirv_type_struct(struct hm_spirv_module *m, const uint32_t *members, size_t n);
uint32_t hm_spirv_type_struct_unique(struct hm_spirv_module *m, const uint32_t *members, size_t n);
uint32_t hm_spirv_type_pointer(struct hm_spirv_module *m, uint32_t storage_class, uint32_t pointee);
uint32_t hm_spirv_type_function(struct hm_spirv_module *m, uint32_t ret_type,
				const uint32_t *params, size_t n);
uint32_t hm_spirv_const_u32(struct hm_spirv_module *m, uint32_t v);
uint32_t hm_spirv_const_u64(struct hm_spirv_module *m, uint64_t v);
uint32_t hm_spirv_const_bool(struct hm_spirv_module *m, bool v);

/*
 * The compute entry point of a module: "main", GLCompute, local size
 * (local_x, 1, 1), reading GlobalInvocationId and a push block of nr_push
 * u32 words (Block, Offset 4i: the device table's words first, then the
 * user's).  Opens the function and its first block in HM_SPV_SEC_FUNCTION,
 * loads every push word into push[i] and, where ret_gidx is not NULL, the
 * invocation's x into *ret_gidx.  Answers the first block's label id (0
 * on error, the module's sticky error; -EINVAL for nr_push 0 or > 64).
 */
#define HM_SPIRV_MAX_PUSH_WORDS 64
uint32_t hm_spirv_compute_main(struct hm_spirv_module *m, uint32_t nr_push, uint32_t local_x,
			       uint32_t *push, uint32_t *ret_gidx);

/* The helper's result struct type {u32 x4} and function type. */
uint32_t hm_spirv_lookup_result_type(struct hm_spirv_module *m);
uint32_t hm_spirv_lookup_fn_type(struct hm_spirv_module *m);
/* The helper's function id; writes the helper into HM_SPV_SEC_HELPER the
 * first time (declaring what it needs).  Call it with OpFunctionCall:
 *   %r = OpFunctionCall %result_type %fn %guest %table %nr_home %shift %marks
 * (u64, u64, u32, u32, u64). */
uint32_t hm_spirv_lookup_fn(struct hm_spirv_module *m);

/*
 * Emission variants of the helper (table.rst, "Variants").
 * Every variant answers the same thing for the same table, except that
 * HM_LOOKUP_V_POW2 needs a table whose nr_home is a power of two >= 2.
 * The default (HM_LOOKUP_DEFAULT_VARIANT) is what every module gets
 * unless hm_spirv_set_lookup_variant() is called before the helper is
 * first written.  Bits above HM_LOOKUP_V_ALL are reserved.
 */
enum hm_lookup_variant_flag {
	/* a slot loaded as one u64vec2 (Aligned 16) instead of one uvec4 */
	HM_LOOKUP_V_U64X2	= 1u << 0,
	/* home = h >> (32 - log2 nr_home) instead of the multiply-high; equal
	 * to it when nr_home is a power of two (>= 2), wrong otherwise */
	HM_LOOKUP_V_POW2	= 1u << 1,
	/* the first hit selected by a chain of selects, not a tree */
	HM_LOOKUP_V_CHAIN	= 1u << 2,
	/* slots read through a Block whose member is NonWritable + Restrict
	 * (what glslang emits for a readonly restrict buffer_reference) */
	HM_LOOKUP_V_NONWRITABLE	= 1u << 3,
};
#define HM_LOOKUP_V_ALL		0x0fu
#define HM_LOOKUP_DEFAULT_VARIANT (HM_LOOKUP_V_U64X2 | HM_LOOKUP_V_NONWRITABLE)

/* The named variants, hm_lookup_nr_variants of them (the first is the
 * default): what hmirror-link --variant and hmirrord know. */
struct hm_lookup_variant {
	const char *name;
	uint32_t flags;
	bool reserved;          /* false */
	bool needs_pow2;
	const char *what;
};
extern const struct hm_lookup_variant hm_lookup_variants[];
extern const unsigned hm_lookup_nr_variants;
/* The variant named name, or NULL. */
const struct hm_lookup_variant *hm_lookup_variant_by_name(const char *name);

/* Choose the helper's form for this module: before the first
 * hm_spirv_lookup_fn() (else -EBUSY); -EINVAL for unknown flags. */
int  hm_spirv_set_lookup_variant(struct hm_spirv_module *m, uint32_t flags);

/* Serialise: header (SPIR-V 1.5, bound) + sections.  *ret_words is
 * malloc()ed; free() it. */
int  hm_spirv_module_finish(struct hm_spirv_module *m, uint32_t **ret_words, size_t *ret_nr);

/* ---- (b) the library module --------------------------------------------- */
/* The helper alone, exported as "hm_lookup" (Linkage).  malloc()ed. */
int  hm_spirv_lookup_library(uint32_t **ret_words, size_t *ret_nr);
/* The same in a chosen form (hm_spirv_set_lookup_variant()). */
int  hm_spirv_lookup_library_variant(uint32_t flags, uint32_t **ret_words, size_t *ret_nr);

/* ---- (c) linking a finished module against the helper ------------------
 * A translator that emits its module with its own emitter, spirv-as or
 * glslang links it at run time, in C, with hm_spirv_link_lookup() (the
 * tool hmirror-link(1) does the same from the command line):
 *
 *  - an import of HM_LOOKUP_EXPORT_NAME (OpDecorate LinkageAttributes
 *    "hm_lookup" Import on a bodiless OpFunction of the helper's type,
 *    hm_spirv_lookup_fn_type(), parameters by value) is resolved: the
 *    declaration goes and every call of it calls the helper;
 *  - the GLSL stand-in HM_LOOKUP_GLSL_STUB that hmirror/lookup.glsl
 *    declares (found by its OpName, which glslang writes as
 *    "hm_lookup_stub(..."; do not strip names before linking) gets a body
 *    that loads its parameters (glslang passes them by pointer) and calls
 *    the helper;
 *  - the load stand-ins hm_load<N>_stub (HM_LOAD_GLSL_STUB_FMT) get bodies
 *    that call the load functions of that width (D969a), returning u32,
 *    a vector or a struct of N u32.
 *
 * The module's own types and constants are reused, its SPIR-V version
 * (1.3 to 1.6) kept, its addressing model made PhysicalStorageBuffer64
 * (from Logical), and OpCapability Linkage dropped unless other linkage
 * remains.  variant: the helper's form (HM_LOOKUP_DEFAULT_VARIANT).
 * *ret_words is malloc()ed.  Errors: -EBADMSG not a well-formed SPIR-V
 * module; -ENOTSUP a SPIR-V version or addressing model the helper cannot
 * join; -ENOENT neither the import nor a stand-in is there; -EINVAL
 * their signature is not the helper's (or bad arguments); -ENOMEM, -E2BIG.
 * Nothing is validated: run spirv-val (hmirror-link does) on the result.
 */
#define HM_LOOKUP_GLSL_STUB	"hm_lookup_stub"
/* the load stand-ins of hmirror/lookup.glsl, hm_load<N>_stub (N words):
 * each gets a body that calls hm_spirv_load_fn(N), whose two forms the
 * link adds (the module becomes two-tier: hm_spirv_tier_form()) */
#define HM_LOAD_GLSL_STUB_FMT	"hm_load%u_stub"
int  hm_spirv_link_lookup(const uint32_t *words, size_t nr_words, uint32_t variant,
			  uint32_t **ret_words, size_t *ret_nr);

/* ---- (d) re-linking a linked module ------------------------------------
 * hm_spirv_relink_lookup() gives a linked module the library's own copies
 * of its functions (what hmirrord does with a client's module before it
 * checks it, Documentation/daemon.rst, "Isolation"): every function named
 * as a load function (hm_load.compact.N, hm_load.spec.N) or as the helper
 * (OpName HM_LOOKUP_EXPORT_NAME), and every function a load function
 * calls, loses its body and is replaced by the library's function of that
 * role; calls of them call the library's.  The replaced functions must
 * have the library's function types (-EINVAL), none an entry point.  The
 * ids of what the library wrote are answered in *ret_fns (0: none), both
 * forms of every load width the module named.  -ENOENT: nothing to
 * replace.  Other errors as hm_spirv_link_lookup().  Run spirv-val on the
 * result. */
struct hm_spirv_relinked {
	uint32_t helper;                                /* the helper's id */
	uint32_t load[2][HM_ACCESS_MAX_BYTES / 4];      /* [compact, spec][N - 1] */
};
int  hm_spirv_relink_lookup(const uint32_t *words, size_t nr_words, uint32_t variant,
			    uint32_t **ret_words, size_t *ret_nr,
			    struct hm_spirv_relinked *ret_fns);

/* ---- shared lookups ------------------------------------------------------
 * An access of nr_bytes (4..64, a multiple of 4) at guest address g calls
 * the helper twice at most: for its first word (g) and its last word
 * (g + nr_bytes - 4).  A chunk is at least a page and the access at most 64
 * bytes, so its words lie in those two chunks.  Word i takes the first
 * lookup if (g + 4i) >> shift == g >> shift, else the last.  When both
 * words lie in one chunk, the second call is skipped (nr_lookups = 1).
 */
struct hm_access_plan {
	uint32_t nr_words;
	uint32_t nr_lookups;                    /* 1 or 2 */
	uint32_t split;                         /* words [0, split) use lookup 0 */
	uint32_t lookup_of_word[HM_ACCESS_MAX_BYTES / 4];
	uint64_t lookup_guest[2];               /* guest address of each lookup */
};
/* The plan for a known address (host reference; tests; an address known
 * at translation time).  -EINVAL for a size out of range or unaligned. */
int  hm_access_plan(uint64_t guest_addr, uint32_t nr_bytes, unsigned chunk_shift,
		    struct hm_access_plan *ret);

/* Device form, emitted into the open function (HM_SPV_SEC_FUNCTION): two
 * helper calls (first and last word), then for each word its device
 * address (u64, 0 where unmapped) and its mark address (u64).  guest is a
 * u64 id; table/marks u64 ids, nr_home/shift u32 ids (the push words).
 * ret_dev[nr_words], ret_mark[nr_words] receive u64 ids. */
struct hm_spirv_table_ids {
	uint32_t table;         /* u64 */
	uint32_t nr_home;       /* u32 */
	uint32_t chunk_shift;   /* u32 */
	uint32_t marks;         /* u64 */
};
int  hm_spirv_emit_access(struct hm_spirv_module *m, const struct hm_spirv_table_ids *t,
			  uint32_t guest, uint32_t nr_words,
			  uint32_t *ret_dev, uint32_t *ret_mark);
/* One lookup, emitted into the open function: u64 ids of dev and mark. */
int  hm_spirv_emit_lookup(struct hm_spirv_module *m, const struct hm_spirv_table_ids *t,
			  uint32_t guest, uint32_t *ret_dev, uint32_t *ret_mark);

/* The table's and the window's ids from the push words of
 * hm_spirv_compute_main() (push[0 .. HM_DEVICE_TABLE_PUSH_WORDS)), joined
 * in the open function; ret_w may be NULL. */
struct hm_spirv_window_ids {
	uint32_t delta;         /* u64: window device address - guest address */
	uint32_t first;         /* u64: device address of the window's first byte */
	uint32_t last;          /* u64: ... of its last HM_ACCESS_MAX_BYTES */
};
int  hm_spirv_push_ids(struct hm_spirv_module *m, const uint32_t *push,
		       struct hm_spirv_table_ids *ret_t, struct hm_spirv_window_ids *ret_w);

/* ---- the load call site (D969a) ------------------------------------------
 * A load of nr_words (1..16) 32-bit words at guest address g, emitted as
 * one call (one per access, as for the helper):
 *
 *   %r = OpFunctionCall %result %hm_load.compact.N %g %table %nr_home %shift
 *                       %marks %wdelta %wfirst %wlast
 *
 * result = struct of N u32 (hm_spirv_load_result_type()).  The builder
 * writes two forms of the function into the helper section, the first time
 * a width is asked for:
 *   hm_load.compact.N  (DontInline) D969: the shared lookups through
 *                      hm_lookup, each word loaded where its device address
 *                      is not 0, else 0;
 *   hm_load.spec.N     (Inline) D969a: a = clamp(g + wdelta, wfirst, wlast),
 *                      the N words at a; if none is HM_WINDOW_SENTINEL they
 *                      are the answer, else the compact form's lookups and
 *                      loads (a guest word equal to the sentinel only costs
 *                      that).  One sentinel test for the whole access.
 * Calls go to the compact form, so the module as built is the compact
 * tier; hm_spirv_tier_form() gives either tier.  Loads only: stores and
 * atomics keep the helper, their call site and the marks (D969).
 */
uint32_t hm_spirv_load_result_type(struct hm_spirv_module *m, uint32_t nr_words);
uint32_t hm_spirv_load_fn(struct hm_spirv_module *m, uint32_t nr_words);
int  hm_spirv_emit_load(struct hm_spirv_module *m, const struct hm_spirv_table_ids *t,
			const struct hm_spirv_window_ids *w, uint32_t guest, uint32_t nr_words,
			uint32_t *ret_words);

/*
 * The two tiers of one module (Documentation/table.rst, "Two tiers"):
 *   HM_TIER_COMPACT      the load functions' speculative forms removed;
 *   HM_TIER_SPECULATIVE  every call of hm_load.compact.N retargeted to
 *                        hm_load.spec.N, the compact forms removed.
 * The functions are found by their OpName.  -ENOENT where the module has
 * no load function (it is its own only form), -EINVAL for a module that is
 * not SPIR-V or names one form without the other.  *ret_words malloc()ed.
 */
enum hm_tier {
	HM_TIER_NONE = 0,
	HM_TIER_COMPACT = 1,
	HM_TIER_SPECULATIVE = 2,
};
int  hm_spirv_tier_form(const uint32_t *words, size_t nr, enum hm_tier tier,
			uint32_t **ret_words, size_t *ret_nr);

#ifdef __cplusplus
}
#endif
#endif /* HMIRROR_LOOKUP_H */
