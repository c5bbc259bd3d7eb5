// SPDX-License-Identifier: GPL-2.0
/*
 * Client SPIR-V is validated with SPIRV-Tools before any pipeline is built
 * from it, and validated modules are kept in a cache keyed by a hash of the
 * words, the entry point and the push size: a second client (or the same
 * one after a restart of its emulator) that submits the same module skips
 * validation, and its pipeline is built from the same words.
 *
 * Besides spvValidate (Vulkan 1.2 rules, or 1.3 for SPIR-V 1.6), a module
 * must be fully linked (no Linkage capability: the lookup helper is linked
 * in by the client), must have a GLCompute entry point of the given name,
 * and must keep within the device's compute limits (limits_check()).
 */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <spirv-tools/libspirv.h>

#include <hmirror/lookup.h>

#include "isolate.h"
#include "spirv.h"
#include "state.h"
#include "validate.h"

#define CACHE_MAX_MODULES	128
#define CACHE_MAX_WORDS		(16u << 20)	/* 64 MiB of SPIR-V */

static spv_context ctx12, ctx13;	/* compile thread only */
/* the cache: gets on the compile thread, puts on the loop thread */
static pthread_mutex_t cache_lock = PTHREAD_MUTEX_INITIALIZER;
static struct hmd_module *cache;
static unsigned cache_nr;
static size_t cache_words;

int hmd_validate_init(void)
{
	ctx12 = spvContextCreate(SPV_ENV_VULKAN_1_2);
	ctx13 = spvContextCreate(SPV_ENV_VULKAN_1_3);
	return ctx12 && ctx13 ? 0 : -ENOMEM;
}

static void module_free(struct hmd_module *m)
{
	if (m->src != m->words)
		free(m->src);
	free(m->words);
	free(m);
}

static size_t module_words(const struct hmd_module *m)
{
	return m->nr_words + (m->src != m->words ? m->nr_src : 0);
}

void hmd_validate_finish(void)
{
	while (cache) {
		struct hmd_module *m = cache;

		cache = m->next;
		module_free(m);
	}
	cache_nr = 0;
	cache_words = 0;
	if (ctx12)
		spvContextDestroy(ctx12);
	if (ctx13)
		spvContextDestroy(ctx13);
	ctx12 = ctx13 = NULL;
}

static uint64_t fnv1a(uint64_t h, const void *p, size_t n)
{
	const uint8_t *b = p;

	for (size_t i = 0; i < n; i++) {
		h ^= b[i];
		h *= 0x100000001b3ull;
	}
	return h;
}

#define SPV_MAGIC		0x07230203u

/* a structural walk: every instruction's word count in range, the entry
 * point present, no Linkage; spvValidate does the rest */
static int walk(const uint32_t *w, size_t n, const char *entry, char *msg,
		size_t cap)
{
	bool found = false;
	size_t i = 5;

	while (i < n) {
		uint32_t wc = w[i] >> 16, op = w[i] & 0xffff;

		if (wc == 0 || i + wc > n) {
			snprintf(msg, cap, "instruction at word %zu overruns the module", i);
			return -EINVAL;
		}
		if (op == OP_Capability && wc >= 2 && w[i + 1] == CAP_Linkage) {
			snprintf(msg, cap, "module is not fully linked (Linkage capability)");
			return -EINVAL;
		}
		if (op == OP_EntryPoint && wc >= 4) {
			size_t maxlen = (wc - 3) * 4;
			const char *name = (const char *)&w[i + 3];

			if (w[i + 1] == EXEC_GLCompute &&
			    strnlen(name, maxlen) < maxlen && !strcmp(name, entry))
				found = true;
		}
		if (op == OP_Function)
			break;		/* entry points come before functions */
		i += wc;
	}
	if (!found) {
		snprintf(msg, cap, "no GLCompute entry point named \"%s\"", entry);
		return -ENOENT;
	}
	return 0;
}

/*
 * The device's compute limits, which spirv-val does not know: the
 * workgroup's size (LocalSize, LocalSizeId, or a WorkgroupSize built-in
 * constant, which overrides them) per dimension and in all, and the bytes
 * of Workgroup variables.  A driver given more may fail in any way: the
 * SPIR-V fuzzer's 513 x 513 x 513 workgroup overflowed lavapipe's compile
 * stack and killed hmirrord.  No limits known (0): nothing is checked.
 */
#define BYTES_MAX		(1ull << 40)

/* a constant's value: OpConstant or OpSpecConstant (its default) */
static bool lim_const(const struct hmd_spv *m, uint32_t id, uint64_t *v)
{
	const uint32_t *d = hmd_spv_def(m, id);

	if (!d || ((d[0] & 0xffff) != OP_Constant && (d[0] & 0xffff) != OP_SpecConstant) ||
	    (d[0] >> 16) < 4)
		return false;
	*v = d[3];
	if ((d[0] >> 16) >= 5)
		*v |= (uint64_t)d[4] << 32;
	return true;
}

/* bytes of a type (an upper bound: no padding is subtracted), saturated */
static uint64_t lim_bytes(const struct hmd_spv *m, uint32_t ty, int depth)
{
	const uint32_t *d = hmd_spv_def(m, ty);
	uint64_t e = 0, k;

	if (!d || depth > 16)
		return BYTES_MAX;
	switch (d[0] & 0xffff) {
	case OP_TypeBool:
		return 4;
	case OP_TypeInt: case OP_TypeFloat:
		return (d[0] >> 16) >= 3 ? (d[2] + 7) / 8 : BYTES_MAX;
	case OP_TypeVector: case OP_TypeMatrix:
		e = lim_bytes(m, d[2], depth + 1);
		return e * d[3] < BYTES_MAX ? e * d[3] : BYTES_MAX;
	case OP_TypeArray:
		if (!lim_const(m, d[3], &k))
			return BYTES_MAX;
		e = lim_bytes(m, d[2], depth + 1);
		return k && e > BYTES_MAX / k ? BYTES_MAX : e * k;
	case OP_TypeStruct:
		for (uint32_t i = 2; i < (d[0] >> 16); i++) {
			e += lim_bytes(m, d[i], depth + 1);
			if (e >= BYTES_MAX)
				return BYTES_MAX;
		}
		return e;
	default:
		return BYTES_MAX;
	}
}

static int limits_check(const uint32_t *w, size_t n, char *msg, size_t cap)
{
	const struct hmd_device_choice *dv = &hmd.dev;
	struct hmd_spv m;
	uint64_t size[3][3], shared = 0, v;	/* LocalSize, LocalSizeId, the built-in */
	bool have[3] = { false, false, false };
	uint32_t wg_builtin = 0;
	int r = 0;

	if (!dv->max_wg_invocations)
		return 0;
	r = hmd_spv_parse(&m, w, n);
	if (r < 0) {
		hmd_spv_free(&m);
		snprintf(msg, cap, "cannot parse the module");
		return r;
	}
	for (size_t i = 5; i < n; i += w[i] >> 16) {
		uint32_t op = w[i] & 0xffff, wc = w[i] >> 16;

		if (op == OP_Decorate && wc >= 4 && w[i + 2] == DEC_BuiltIn &&
		    w[i + 3] == BUILTIN_WorkgroupSize)
			wg_builtin = w[i + 1];
		else if (op == OP_ExecutionMode && wc >= 6 && w[i + 2] == MODE_LocalSize) {
			for (int k = 0; k < 3; k++)
				size[0][k] = w[i + 3 + k];
			have[0] = true;
		} else if (op == OP_ExecutionModeId && wc >= 6 && w[i + 2] == MODE_LocalSizeId) {
			for (int k = 0; k < 3; k++)
				size[1][k] = lim_const(&m, w[i + 3 + k], &v) ? v : UINT64_MAX;
			have[1] = true;
		} else if (op == OP_Variable && wc >= 4 && w[i + 3] == SC_Workgroup) {
			const uint32_t *pt = hmd_spv_def(&m, w[i + 1]);

			shared += pt && (pt[0] & 0xffff) == OP_TypePointer ?
				lim_bytes(&m, pt[3], 0) : BYTES_MAX;
		}
	}
	if (wg_builtin) {
		const uint32_t *d = hmd_spv_def(&m, wg_builtin);

		if (d && (d[0] >> 16) == 6 && ((d[0] & 0xffff) == OP_ConstantComposite ||
					       (d[0] & 0xffff) == OP_SpecConstantComposite)) {
			for (int k = 0; k < 3; k++)
				size[2][k] = lim_const(&m, d[3 + k], &v) ? v : UINT64_MAX;
			have[2] = true;
		}
	}
	/* the built-in takes precedence, but a driver may look at either: all
	 * of them within the limits */
	for (int s = 0; s < 3 && !r; s++) {
		if (!have[s])
			continue;
		for (int k = 0; k < 3 && !r; k++)
			if (!size[s][k] || size[s][k] > dv->max_wg_size[k]) {
				snprintf(msg, cap, "workgroup size %llu in dimension %d: the device "
					 "takes 1 to %u", (unsigned long long)size[s][k], k,
					 dv->max_wg_size[k]);
				r = -E2BIG;
			}
		if (!r && size[s][0] * size[s][1] * size[s][2] > dv->max_wg_invocations) {
			snprintf(msg, cap, "workgroup of %llu invocations: the device takes %u",
				 (unsigned long long)(size[s][0] * size[s][1] * size[s][2]),
				 dv->max_wg_invocations);
			r = -E2BIG;
		}
	}
	if (!r && shared > dv->max_shared_bytes) {
		snprintf(msg, cap, "%llu bytes of workgroup memory: the device takes %u",
			 (unsigned long long)shared, dv->max_shared_bytes);
		r = -E2BIG;
	}
	hmd_spv_free(&m);
	return r;
}

static int spirv_val(const uint32_t *words, size_t nr_words, char *msg, size_t cap)
{
	spv_diagnostic diag = NULL;
	spv_context ctx = ((words[1] >> 16) & 0xff) == 1 && ((words[1] >> 8) & 0xff) >= 6 ?
			  ctx13 : ctx12;

	if (spvValidateBinary(ctx, words, nr_words, &diag) != SPV_SUCCESS) {
		snprintf(msg, cap, "spirv-val: %s",
			 diag && diag->error ? diag->error : "invalid");
		spvDiagnosticDestroy(diag);
		return -EINVAL;
	}
	spvDiagnosticDestroy(diag);
	return 0;
}

int hmd_spirv_check(const uint32_t *words, size_t nr_words, const char *entry,
		    char *msg, size_t cap)
{
	int r;

	if (!cap)
		msg = NULL;
	char dummy[8];
	if (!msg) {
		msg = dummy;
		cap = sizeof(dummy);
	}
	msg[0] = 0;
	if (nr_words < 5 || words[0] != SPV_MAGIC) {
		snprintf(msg, cap, "not a SPIR-V module (magic)");
		return -EINVAL;
	}
	if (nr_words > HMD_MAX_SPIRV_WORDS) {
		snprintf(msg, cap, "module larger than %u words", HMD_MAX_SPIRV_WORDS);
		return -E2BIG;
	}
	r = walk(words, nr_words, entry, msg, cap);
	if (r < 0)
		return r;
	r = spirv_val(words, nr_words, msg, cap);
	if (r < 0)
		return r;
	return limits_check(words, nr_words, msg, cap);
}

/*
 * The daemon's own copies of the library's functions in a validated
 * module (hm_spirv_relink_lookup()): the helper and the load functions a
 * client linked in lose their bodies for the library's, which the
 * isolation check then trusts (isolate.c); a client's function of such a
 * name never runs.  The result is validated again (the replaced
 * functions' types were checked, but not every decoration a body's ids
 * had).  *ret_words NULL: nothing to replace, the words are built as
 * they are.
 */
static int relink(const uint32_t *words, size_t nr_words, uint32_t **ret_words,
		  size_t *ret_nr, struct hm_spirv_relinked *ret_fns, char *msg, size_t cap)
{
	int r = hm_spirv_relink_lookup(words, nr_words, HM_LOOKUP_DEFAULT_VARIANT,
				       ret_words, ret_nr, ret_fns);

	if (r == -ENOENT)
		return 0;
	if (r == 0 && *ret_nr > HMD_MAX_SPIRV_WORDS)
		r = -E2BIG;
	if (r == 0)
		r = spirv_val(*ret_words, *ret_nr, msg, cap);
	if (r < 0) {
		if (!msg[0])
			snprintf(msg, cap, "the lookup helper or a load function of the module "
				 "is not of the library's form (%s)", strerror(-r));
		free(*ret_words);
		*ret_words = NULL;
	}
	return r;
}

static void cache_evict(void)
{
	struct hmd_module **pp = &cache, **victim = NULL;

	/* the list is newest first: evict the oldest unreferenced */
	while (*pp) {
		if (!(*pp)->refs)
			victim = pp;
		pp = &(*pp)->next;
	}
	if (victim) {
		struct hmd_module *m = *victim;

		*victim = m->next;
		cache_nr--;
		cache_words -= module_words(m);
		module_free(m);
	}
}

static void stat_inc(unsigned i)
{
	__atomic_fetch_add(&hmd.stats[i], 1, __ATOMIC_RELAXED);
}

/* compile thread (the daemon's); validation runs outside the lock */
int hmd_module_get(const uint32_t *words, size_t nr_words, const char *entry,
		   uint32_t user_push_words, struct hmd_module **ret,
		   bool *ret_cached, char *msg, size_t cap)
{
	struct hm_spirv_relinked own;
	struct hmd_module *m;
	uint64_t h = 0xcbf29ce484222325ull;
	uint32_t *relinked = NULL;
	size_t nr_relinked = 0;
	int r;

	h = fnv1a(h, words, nr_words * 4);
	h = fnv1a(h, entry, strlen(entry) + 1);
	h = fnv1a(h, &user_push_words, sizeof(user_push_words));
	pthread_mutex_lock(&cache_lock);
	for (m = cache; m; m = m->next) {
		if (m->hash == h && m->nr_src == nr_words &&
		    m->user_push_words == user_push_words &&
		    !strcmp(m->entry, entry) &&
		    !memcmp(m->src, words, nr_words * 4)) {
			m->refs++;
			pthread_mutex_unlock(&cache_lock);
			*ret = m;
			*ret_cached = true;
			stat_inc(HM_DSTAT_CACHE_HITS);
			return 0;
		}
	}
	pthread_mutex_unlock(&cache_lock);
	stat_inc(HM_DSTAT_VALIDATIONS);
	r = hmd_spirv_check(words, nr_words, entry, msg, cap);
	if (r < 0) {
		stat_inc(HM_DSTAT_VALIDATION_FAILS);
		return r;
	}
	r = relink(words, nr_words, &relinked, &nr_relinked, &own, msg, cap);
	if (r < 0) {
		stat_inc(HM_DSTAT_VALIDATION_FAILS);
		return r;
	}
	m = calloc(1, sizeof(*m));
	if (!m) {
		free(relinked);
		return -ENOMEM;
	}
	m->src = malloc(nr_words * 4);
	if (!m->src) {
		free(relinked);
		free(m);
		return -ENOMEM;
	}
	memcpy(m->src, words, nr_words * 4);
	m->nr_src = nr_words;
	m->words = relinked ? relinked : m->src;
	m->nr_words = relinked ? nr_relinked : nr_words;
	m->hash = h;
	snprintf(m->entry, sizeof(m->entry), "%s", entry);
	m->user_push_words = user_push_words;
	/* isolate.c, of what is built; whether it matters depends on the
	 * client (protocol.c) */
	m->isolated = hmd_isolation_check(m->words, m->nr_words, hmd.dev.is_cpu,
					  relinked ? &own : NULL, msg, cap) == 0;
	m->refs = 1;
	pthread_mutex_lock(&cache_lock);
	while ((cache_nr >= CACHE_MAX_MODULES ||
		cache_words + module_words(m) > CACHE_MAX_WORDS) && cache_nr) {
		unsigned before = cache_nr;

		cache_evict();
		if (cache_nr == before)
			break;	/* everything referenced: allowed to overshoot */
	}
	m->next = cache;
	cache = m;
	cache_nr++;
	cache_words += module_words(m);
	pthread_mutex_unlock(&cache_lock);
	*ret = m;
	*ret_cached = false;
	return 0;
}

void hmd_module_put(struct hmd_module *m)
{
	pthread_mutex_lock(&cache_lock);
	if (m && m->refs)
		m->refs--;	/* stays cached until evicted */
	pthread_mutex_unlock(&cache_lock);
}

void hmd_module_ref(struct hmd_module *m)
{
	pthread_mutex_lock(&cache_lock);
	m->refs++;
	pthread_mutex_unlock(&cache_lock);
}
