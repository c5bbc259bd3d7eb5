/* SPDX-License-Identifier: GPL-2.0 */
/*
 * The device the daemon serves (device.c): libdrm render nodes <->
 * Vulkan physical devices.
 */
#ifndef HMIRRORD_DEVICE_H
#define HMIRRORD_DEVICE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct hmd_device_choice {
	int vk_index;			/* physical device index, -1: none */
	char name[64];
	char render_node[64];		/* "" when none (lavapipe) */
	uint32_t vendor_id, device_id;
	bool is_cpu;
	/* the limits a module is checked against before a pipeline is built
	 * (validate.c): past them a driver may fail in any way (lavapipe
	 * overflows a compile thread's stack at 513^3 invocations) */
	uint32_t max_wg_size[3], max_wg_invocations, max_shared_bytes;
};
int  hmd_device_pick(const char *want, struct hmd_device_choice *ret,
		     char *ret_why, size_t why_cap);
int  hmd_device_list(void);		/* prints the table; for --list-devices */

#endif
