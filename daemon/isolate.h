/* SPDX-License-Identifier: GPL-2.0 */
/*
 * The isolation check of a module (isolate.c).
 */
#ifndef HMIRRORD_ISOLATE_H
#define HMIRRORD_ISOLATE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <hmirror/lookup.h>

/* every device pointer a module forms comes from the lookup helper
 * (compile thread); 0 or -EACCES with the reason in ret_msg.  own: the
 * functions the daemon wrote into the module (hm_spirv_relink_lookup()),
 * trusted whole; NULL: none */
int  hmd_isolation_check(const uint32_t *words, size_t nr_words, bool cpu_device,
			 const struct hm_spirv_relinked *own, char *ret_msg, size_t msg_cap);

#endif
