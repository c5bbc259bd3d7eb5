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
 * in by the client) and must have a GLCompute entry point of the given name.
 */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <spirv-tools/libspirv.h>

#include "hmirrord.h"

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
	free(m->words);
	free(m);
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
#define OP_CAPABILITY		17
#define OP_ENTRY_POINT		15
#define OP_FUNCTION		54
#define CAP_LINKAGE		5
#define EXEC_GLCOMPUTE		5

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
		if (op == OP_CAPABILITY && wc >= 2 && w[i + 1] == CAP_LINKAGE) {
			snprintf(msg, cap, "module is not fully linked (Linkage capability)");
			return -EINVAL;
		}
		if (op == OP_ENTRY_POINT && wc >= 4) {
			size_t maxlen = (wc - 3) * 4;
			const char *name = (const char *)&w[i + 3];

			if (w[i + 1] == EXEC_GLCOMPUTE &&
			    strnlen(name, maxlen) < maxlen && !strcmp(name, entry))
				found = true;
		}
		if (op == OP_FUNCTION)
			break;		/* entry points come before functions */
		i += wc;
	}
	if (!found) {
		snprintf(msg, cap, "no GLCompute entry point named \"%s\"", entry);
		return -ENOENT;
	}
	return 0;
}

int hmd_spirv_check(const uint32_t *words, size_t nr_words, const char *entry,
		    char *msg, size_t cap)
{
	spv_diagnostic diag = NULL;
	spv_result_t res;
	spv_context ctx;
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
	ctx = ((words[1] >> 16) & 0xff) == 1 && ((words[1] >> 8) & 0xff) >= 6 ?
		ctx13 : ctx12;
	res = spvValidateBinary(ctx, words, nr_words, &diag);
	if (res != SPV_SUCCESS) {
		snprintf(msg, cap, "spirv-val: %s",
			 diag && diag->error ? diag->error : "invalid");
		spvDiagnosticDestroy(diag);
		return -EINVAL;
	}
	spvDiagnosticDestroy(diag);
	return 0;
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
		cache_words -= m->nr_words;
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
	struct hmd_module *m;
	uint64_t h = 0xcbf29ce484222325ull;
	int r;

	h = fnv1a(h, words, nr_words * 4);
	h = fnv1a(h, entry, strlen(entry) + 1);
	h = fnv1a(h, &user_push_words, sizeof(user_push_words));
	pthread_mutex_lock(&cache_lock);
	for (m = cache; m; m = m->next) {
		if (m->hash == h && m->nr_words == nr_words &&
		    m->user_push_words == user_push_words &&
		    !strcmp(m->entry, entry) &&
		    !memcmp(m->words, words, nr_words * 4)) {
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
	m = calloc(1, sizeof(*m));
	if (!m)
		return -ENOMEM;
	m->words = malloc(nr_words * 4);
	if (!m->words) {
		free(m);
		return -ENOMEM;
	}
	memcpy(m->words, words, nr_words * 4);
	m->nr_words = nr_words;
	m->hash = h;
	snprintf(m->entry, sizeof(m->entry), "%s", entry);
	m->user_push_words = user_push_words;
	/* isolate.c; whether it matters depends on the client (protocol.c) */
	m->isolated = hmd_isolation_check(words, nr_words, hmd.dev.is_cpu, msg, cap) == 0;
	m->refs = 1;
	pthread_mutex_lock(&cache_lock);
	while ((cache_nr >= CACHE_MAX_MODULES ||
		cache_words + nr_words > CACHE_MAX_WORDS) && cache_nr) {
		unsigned before = cache_nr;

		cache_evict();
		if (cache_nr == before)
			break;	/* everything referenced: allowed to overshoot */
	}
	m->next = cache;
	cache = m;
	cache_nr++;
	cache_words += nr_words;
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
