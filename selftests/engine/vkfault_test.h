/* SPDX-License-Identifier: GPL-2.0 */
/*
 * The engine tests' use of VK_LAYER_HMIRROR_fault (tools/vkfault): its
 * directory is next to the test programs' (build/share/hmirror/vkfault).
 * Call hm_test_fault_layer() before the Vulkan instance is made; then
 * HMIRROR_VKFAULT_* (tools/vkfault/vkfault.c) make the device fail.
 */
#ifndef HMIRROR_VKFAULT_TEST_H
#define HMIRROR_VKFAULT_TEST_H
#include <limits.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static inline bool hm_test_fault_layer(void)
{
	static char dir[PATH_MAX];
	ssize_t n = readlink("/proc/self/exe", dir, sizeof(dir) - 64);
	char *slash;

	if (n <= 0)
		return false;
	dir[n] = 0;
	slash = strrchr(dir, '/');
	if (!slash)
		return false;
	strcpy(slash, "/../share/hmirror/vkfault");
	if (access(dir, R_OK))
		return false;
	setenv("VK_ADD_LAYER_PATH", dir, 1);
	setenv("VK_INSTANCE_LAYERS", "VK_LAYER_HMIRROR_fault", 1);
	return true;
}

/* the device is lost at its next submission, which runs nothing */
static inline void hm_test_lose_device_now(bool on)
{
	if (on)
		setenv("HMIRROR_VKFAULT_LOSE_NOW", "1", 1);
	else
		unsetenv("HMIRROR_VKFAULT_LOSE_NOW");
}
#endif
