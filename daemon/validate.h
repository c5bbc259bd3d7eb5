/* SPDX-License-Identifier: GPL-2.0 */
/*
 * SPIR-V validation and the module cache (validate.c), shared by every
 * client: a module validated once is found by its hash.
 */
#ifndef HMIRRORD_VALIDATE_H
#define HMIRRORD_VALIDATE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <hmirror/protocol.h>

/* words of one module */
#define HMD_MAX_SPIRV_WORDS	(4u << 20)

struct hmd_module {
	uint64_t hash;		/* of src, the entry point and the push size */
	uint32_t *src;		/* the client's words: the cache's key */
	size_t nr_src;
	uint32_t *words;	/* what pipelines are built from: src re-linked with
				 * the daemon's helper and load functions, or src */
	size_t nr_words;
	char entry[HM_PROTO_ENTRY_MAX];
	uint32_t user_push_words;
	bool isolated;		/* passed hmd_isolation_check() */
	unsigned refs;
	bool spec_built;		/* its speculative form was compiled (atomic) */
	struct hmd_module *next;
};
int  hmd_validate_init(void);
void hmd_validate_finish(void);
/* validate (or find in the cache) and return a referenced module; words are
 * copied.  *ret_cached = true when found.  *ret_msg gets SPIRV-Tools' text */
int  hmd_module_get(const uint32_t *words, size_t nr_words, const char *entry,
		    uint32_t user_push_words, struct hmd_module **ret,
		    bool *ret_cached, char *ret_msg, size_t msg_cap);
void hmd_module_put(struct hmd_module *m);
void hmd_module_ref(struct hmd_module *m);	/* one more reference */
int  hmd_spirv_check(const uint32_t *words, size_t nr_words, const char *entry,
		     char *ret_msg, size_t msg_cap);

#endif
