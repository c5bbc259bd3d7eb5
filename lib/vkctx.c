// SPDX-License-Identifier: LGPL-2.1-or-later
/*
 * Vulkan context for hmirror: see lib/include/hmirror/vkctx.h.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include "hmirror/vkctx.h"
#include "env.h"

#define HM_VK_MAX_PHYS 16
#define HM_VK_DEFAULT_TIMEOUT_NS (10ull * 1000 * 1000 * 1000)

int hm_vk_errno(VkResult r)
{
	if (r >= 0)
		return 0;
	switch (r) {
	case VK_ERROR_OUT_OF_HOST_MEMORY:
	case VK_ERROR_FRAGMENTED_POOL:
	case VK_ERROR_OUT_OF_POOL_MEMORY:
		return -ENOMEM;
	case VK_ERROR_OUT_OF_DEVICE_MEMORY:
		return -ENOSPC;
	case VK_ERROR_DEVICE_LOST:
		return -ENODEV;
	case VK_ERROR_EXTENSION_NOT_PRESENT:
	case VK_ERROR_FEATURE_NOT_PRESENT:
	case VK_ERROR_LAYER_NOT_PRESENT:
	case VK_ERROR_FORMAT_NOT_SUPPORTED:
		return -EOPNOTSUPP;
	case VK_ERROR_INCOMPATIBLE_DRIVER:
		return -ENXIO;
	case VK_ERROR_INVALID_EXTERNAL_HANDLE:
		return -EBADF;
	case VK_ERROR_TOO_MANY_OBJECTS:
		return -EMFILE;
	case VK_ERROR_MEMORY_MAP_FAILED:
		return -EFAULT;
	default:
		return -EIO;
	}
}

/*
 * hm_vk_submit_wait() polls its fence for up to HMIRROR_FENCE_SPIN_US
 * (0 to 1,000,000 us; default 200 us, 0 on a CPU device; 0: never)
 * before it blocks in vkWaitForFences(): a blocking wait pays a
 * wake-up (an interrupt, a futex) on top of the device's time, which
 * can be most of a short submission's cost (Documentation/daemon.rst,
 * "Benchmark: what the daemon adds").
 */
#define HM_FENCE_SPIN_UNSET 1000001u  /* past the knob's 1 s: unset */

static uint64_t fence_spin_ns(const struct hm_vk *vk)
{
	static int knob = -1;
	unsigned us = hm_env_knob("HMIRROR_FENCE_SPIN_US", HM_FENCE_SPIN_UNSET,
				  HM_FENCE_SPIN_UNSET - 1, &knob);

	if (us != HM_FENCE_SPIN_UNSET)
		return (uint64_t)us * 1000;
	/* never on a CPU device, unless asked: the spinner takes a core from
	 * the very threads that run the submission (lavapipe, 2 cores: an
	 * empty dispatch went from 93 to 330 us) */
	return vk->props.deviceType == VK_PHYSICAL_DEVICE_TYPE_CPU ? 0 : 200000;
}

static uint64_t spin_now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* VK_SUCCESS once signalled, VK_NOT_READY when the spin ran out */
static VkResult spin_fence(const struct hm_vk *vk, VkDevice dev, VkFence fence)
{
	uint64_t budget = fence_spin_ns(vk), until;
	VkResult r;

	if (!budget)
		return VK_NOT_READY;
	until = spin_now_ns() + budget;
	do {
		r = vkGetFenceStatus(dev, fence);
		if (r != VK_NOT_READY)
			return r;
#if defined(__x86_64__) || defined(__i386__)
		__builtin_ia32_pause();
#endif
	} while (spin_now_ns() < until);
	return VK_NOT_READY;
}

/* hm_vk_errno() of a VkResult that may also be a timeout/not-ready code. */
static int wait_errno(VkResult r)
{
	if (r == VK_TIMEOUT)
		return -ETIMEDOUT;
	if (r == VK_NOT_READY)
		return -EAGAIN;
	return hm_vk_errno(r);
}

const char *hm_vk_result_name(VkResult r)
{
	switch (r) {
#define N(x) case x: return #x
	N(VK_SUCCESS); N(VK_NOT_READY); N(VK_TIMEOUT); N(VK_INCOMPLETE);
	N(VK_ERROR_OUT_OF_HOST_MEMORY); N(VK_ERROR_OUT_OF_DEVICE_MEMORY);
	N(VK_ERROR_INITIALIZATION_FAILED); N(VK_ERROR_DEVICE_LOST);
	N(VK_ERROR_MEMORY_MAP_FAILED); N(VK_ERROR_LAYER_NOT_PRESENT);
	N(VK_ERROR_EXTENSION_NOT_PRESENT); N(VK_ERROR_FEATURE_NOT_PRESENT);
	N(VK_ERROR_INCOMPATIBLE_DRIVER); N(VK_ERROR_TOO_MANY_OBJECTS);
	N(VK_ERROR_FORMAT_NOT_SUPPORTED); N(VK_ERROR_INVALID_EXTERNAL_HANDLE);
#undef N
	default: return "VkResult(?)";
	}
}

unsigned hm_vk_validation_count(const struct hm_vk *vk)
{
	return vk ? __atomic_load_n(&vk->validation_errors, __ATOMIC_RELAXED) : 0;
}

static VKAPI_ATTR VkBool32 VKAPI_CALL
debug_cb(VkDebugUtilsMessageSeverityFlagBitsEXT sev, VkDebugUtilsMessageTypeFlagsEXT type,
	 const VkDebugUtilsMessengerCallbackDataEXT *d, void *user)
{
	struct hm_vk *vk = user;

	/* the loader's note that the environment enabled a layer
	 * (VK_INSTANCE_LAYERS: the tests' fault-injection layer) says nothing
	 * about the program */
	if (type == VK_DEBUG_UTILS_MESSAGE_TYPE_GENERAL_BIT_EXT && d && d->pMessageIdName &&
	    !strcmp(d->pMessageIdName, "Loader Message") && d->pMessage &&
	    strstr(d->pMessage, "env var"))
		return VK_FALSE;
	__atomic_fetch_add(&vk->validation_errors, 1, __ATOMIC_RELAXED);
	snprintf(vk->last_message, sizeof(vk->last_message), "%s",
		 d && d->pMessage ? d->pMessage : "(no text)");
	return VK_FALSE;
}

static bool env_true(const char *name)
{
	const char *v = getenv(name);

	return v && (!strcmp(v, "1") || !strcasecmp(v, "yes") || !strcasecmp(v, "on"));
}

static bool env_false(const char *name)
{
	const char *v = getenv(name);

	return v && (!strcmp(v, "0") || !strcasecmp(v, "no") || !strcasecmp(v, "off"));
}

static bool has_ext(const VkExtensionProperties *e, uint32_t n, const char *name)
{
	for (uint32_t i = 0; i < n; i++)
		if (!strcmp(e[i].extensionName, name))
			return true;
	return false;
}

static bool has_layer(const char *name)
{
	VkLayerProperties l[64];
	uint32_t n = 64;

	if (vkEnumerateInstanceLayerProperties(&n, l) < 0)
		return false;
	for (uint32_t i = 0; i < n; i++)
		if (!strcmp(l[i].layerName, name))
			return true;
	return false;
}

/* The messenger that counts warnings and errors into vk->validation_errors. */
static VkDebugUtilsMessengerCreateInfoEXT messenger_info(struct hm_vk *vk)
{
	return (VkDebugUtilsMessengerCreateInfoEXT) {
		.sType = VK_STRUCTURE_TYPE_DEBUG_UTILS_MESSENGER_CREATE_INFO_EXT,
		.messageSeverity = VK_DEBUG_UTILS_MESSAGE_SEVERITY_WARNING_BIT_EXT |
				   VK_DEBUG_UTILS_MESSAGE_SEVERITY_ERROR_BIT_EXT,
		.messageType = VK_DEBUG_UTILS_MESSAGE_TYPE_GENERAL_BIT_EXT |
			       VK_DEBUG_UTILS_MESSAGE_TYPE_VALIDATION_BIT_EXT |
			       VK_DEBUG_UTILS_MESSAGE_TYPE_PERFORMANCE_BIT_EXT,
		.pfnUserCallback = debug_cb,
		.pUserData = vk,
	};
}

/* Hang that messenger on vk->inst, which must have VK_EXT_debug_utils. */
static int create_messenger(struct hm_vk *vk)
{
	VkDebugUtilsMessengerCreateInfoEXT mci = messenger_info(vk);
	PFN_vkCreateDebugUtilsMessengerEXT create;

	create = (PFN_vkCreateDebugUtilsMessengerEXT)
		vkGetInstanceProcAddr(vk->inst, "vkCreateDebugUtilsMessengerEXT");
	vk->destroy_messenger = (PFN_vkDestroyDebugUtilsMessengerEXT)
		vkGetInstanceProcAddr(vk->inst, "vkDestroyDebugUtilsMessengerEXT");
	if (!create || !vk->destroy_messenger)
		return -EOPNOTSUPP;
	return hm_vk_errno(create(vk->inst, &mci, NULL, &vk->messenger));
}

static int create_instance(struct hm_vk *vk)
{
	static const char *layer = "VK_LAYER_KHRONOS_validation";
	const char *exts[1] = { VK_EXT_DEBUG_UTILS_EXTENSION_NAME };
	VkApplicationInfo app = {
		.sType = VK_STRUCTURE_TYPE_APPLICATION_INFO,
		.pApplicationName = "hmirror",
		.pEngineName = "hmirror",
		.apiVersion = VK_API_VERSION_1_2,
	};
	VkDebugUtilsMessengerCreateInfoEXT mci = messenger_info(vk);
	VkInstanceCreateInfo ci = {
		.sType = VK_STRUCTURE_TYPE_INSTANCE_CREATE_INFO,
		.pApplicationInfo = &app,
	};
	VkResult r;

	if (vk->validation) {
		if (!has_layer(layer))
			return -EOPNOTSUPP;
		ci.enabledLayerCount = 1;
		ci.ppEnabledLayerNames = &layer;
		ci.enabledExtensionCount = 1;
		ci.ppEnabledExtensionNames = exts;
		ci.pNext = &mci;        /* also catches create/destroy of the instance */
	}
	r = vkCreateInstance(&ci, NULL, &vk->inst);
	if (r)
		return hm_vk_errno(r);
	if (!vk->validation)
		return 0;
	return create_messenger(vk);
}

static int type_rank(VkPhysicalDeviceType t)
{
	switch (t) {
	case VK_PHYSICAL_DEVICE_TYPE_DISCRETE_GPU: return 0;
	case VK_PHYSICAL_DEVICE_TYPE_INTEGRATED_GPU: return 1;
	case VK_PHYSICAL_DEVICE_TYPE_VIRTUAL_GPU: return 2;
	case VK_PHYSICAL_DEVICE_TYPE_CPU: return 3;
	default: return 4;
	}
}

static int pick_physical(struct hm_vk *vk, const char *want)
{
	VkPhysicalDevice phys[HM_VK_MAX_PHYS];
	uint32_t n = HM_VK_MAX_PHYS;
	int best = -1, best_rank = 99;
	VkResult r;

	r = vkEnumeratePhysicalDevices(vk->inst, &n, phys);
	if (r < 0)
		return hm_vk_errno(r);
	if (!n)
		return -ENODEV;
	if (want && *want) {
		char *end;
		unsigned long idx = strtoul(want, &end, 10);

		if (!*end) {
			if (idx >= n)
				return -ENODEV;
			vk->phys = phys[idx];
			return 0;
		}
	}
	for (uint32_t i = 0; i < n; i++) {
		VkPhysicalDeviceProperties pp;

		vkGetPhysicalDeviceProperties(phys[i], &pp);
		if (pp.apiVersion < VK_API_VERSION_1_2)
			continue;
		if (want && *want) {
			if (strstr(pp.deviceName, want)) {
				best = i;
				break;
			}
			continue;
		}
		if (type_rank(pp.deviceType) < best_rank) {
			best_rank = type_rank(pp.deviceType);
			best = i;
		}
	}
	if (best < 0)
		return -ENODEV;
	vk->phys = phys[best];
	return 0;
}

/* Supported features, one struct per chain entry; walked by sType. */
struct feats {
	VkPhysicalDeviceFeatures2 f2;
	VkPhysicalDeviceVulkan11Features v11;
	VkPhysicalDeviceVulkan12Features v12;
};

static void feats_chain(struct feats *f)
{
	memset(f, 0, sizeof(*f));
	f->f2.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FEATURES_2;
	f->v11.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_1_FEATURES;
	f->v12.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_2_FEATURES;
	f->f2.pNext = &f->v11;
	f->v11.pNext = &f->v12;
}

/*
 * Reduce the supported features in *have to the ones hmirror enables, and
 * say whether the required ones are there.
 */
static int feats_select(struct hm_vk *vk, struct feats *have)
{
	int missing = 0;

	for (VkBaseOutStructure *s = (VkBaseOutStructure *)&have->f2; s; s = s->pNext) {
		switch (s->sType) {
		case VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FEATURES_2: {
			VkPhysicalDeviceFeatures2 *f = (void *)s;
			VkPhysicalDeviceFeatures h = f->features;

			memset(&f->features, 0, sizeof(f->features));
			if (!h.shaderInt64)
				missing++;
			f->features.shaderInt64 = h.shaderInt64;
			f->features.shaderInt16 = h.shaderInt16;
			if (vk->sparse && h.sparseBinding && h.sparseResidencyBuffer) {
				f->features.sparseBinding = VK_TRUE;
				f->features.sparseResidencyBuffer = VK_TRUE;
				/* the engine's mirror window aliases one sentinel
				 * page at many offsets */
				f->features.sparseResidencyAliased = h.sparseResidencyAliased;
				vk->sparse_aliased = h.sparseResidencyAliased;
			} else {
				vk->sparse = false;
			}
			break;
		}
		case VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_1_FEATURES: {
			VkPhysicalDeviceVulkan11Features *f = (void *)s;
			VkBool32 sb16 = f->storageBuffer16BitAccess;
			void *next = f->pNext;

			memset(f, 0, sizeof(*f));
			f->sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_1_FEATURES;
			f->pNext = next;
			f->storageBuffer16BitAccess = sb16;
			break;
		}
		case VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_2_FEATURES: {
			VkPhysicalDeviceVulkan12Features *f = (void *)s, h = *f;

			memset(f, 0, sizeof(*f));
			f->sType = h.sType;
			f->pNext = h.pNext;
			if (!h.bufferDeviceAddress || !h.timelineSemaphore)
				missing++;
			f->bufferDeviceAddress = h.bufferDeviceAddress;
			f->timelineSemaphore = h.timelineSemaphore;
			f->storageBuffer8BitAccess = h.storageBuffer8BitAccess;
			f->shaderInt8 = h.shaderInt8;
			f->vulkanMemoryModel = h.vulkanMemoryModel;
			f->vulkanMemoryModelDeviceScope = h.vulkanMemoryModelDeviceScope;
			vk->has_8bit_storage = h.storageBuffer8BitAccess;
			vk->has_int8 = h.shaderInt8;
			break;
		}
		default:
			break;
		}
	}
	return missing ? -EOPNOTSUPP : 0;
}

static int query_limits(struct hm_vk *vk)
{
	VkPhysicalDeviceExternalMemoryHostPropertiesEXT host = {
		.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_EXTERNAL_MEMORY_HOST_PROPERTIES_EXT,
	};
	VkPhysicalDeviceMaintenance3Properties m3 = {
		.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_MAINTENANCE_3_PROPERTIES,
		.pNext = vk->has_host_import ? &host : NULL,
	};
	VkPhysicalDeviceProperties2 p2 = {
		.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_PROPERTIES_2,
		.pNext = &m3,
	};

	vkGetPhysicalDeviceProperties2(vk->phys, &p2);
	vk->props = p2.properties;
	vk->max_alloc = 1ull << 30;
	vk->max_buffer = 0;
	for (VkBaseOutStructure *s = p2.pNext; s; s = s->pNext) {
		switch (s->sType) {
		case VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_EXTERNAL_MEMORY_HOST_PROPERTIES_EXT:
			vk->min_import_align = ((VkPhysicalDeviceExternalMemoryHostPropertiesEXT *)s)
				->minImportedHostPointerAlignment;
			break;
		case VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_MAINTENANCE_3_PROPERTIES:
			vk->max_alloc = ((VkPhysicalDeviceMaintenance3Properties *)s)->maxMemoryAllocationSize;
			break;
		default:
			break;
		}
	}
	if (!vk->max_buffer || vk->max_buffer > vk->max_alloc)
		vk->max_buffer = vk->max_alloc;
	vk->timestamp_period_ns = vk->props.limits.timestampPeriod;
	vkGetPhysicalDeviceMemoryProperties(vk->phys, &vk->mem);
	return 0;
}

static int pick_queue(struct hm_vk *vk)
{
	VkQueueFamilyProperties q[16];
	uint32_t n = 16;

	vkGetPhysicalDeviceQueueFamilyProperties(vk->phys, &n, q);
	/* sparse asked for: a compute family that binds sparse memory too */
	for (uint32_t i = 0; vk->sparse && i < n; i++) {
		if ((q[i].queueFlags & VK_QUEUE_COMPUTE_BIT) &&
		    (q[i].queueFlags & VK_QUEUE_SPARSE_BINDING_BIT)) {
			vk->queue_family = i;
			vk->timestamp_valid_bits = q[i].timestampValidBits;
			return 0;
		}
	}
	vk->sparse = false;
	for (uint32_t i = 0; i < n; i++) {
		if (q[i].queueFlags & VK_QUEUE_COMPUTE_BIT) {
			vk->queue_family = i;
			vk->timestamp_valid_bits = q[i].timestampValidBits;
			return 0;
		}
	}
	return -ENODEV;
}

static uint32_t family_queues(const struct hm_vk *vk)
{
	VkQueueFamilyProperties q[16];
	uint32_t n = 16;

	vkGetPhysicalDeviceQueueFamilyProperties(vk->phys, &n, q);
	return vk->queue_family < n ? q[vk->queue_family].queueCount : 0;
}

/* the side queue and its timeline (hm_vk_cmd_run_side()) */
static int side_init(struct hm_vk *vk)
{
	VkSemaphoreTypeCreateInfo ti = {
		.sType = VK_STRUCTURE_TYPE_SEMAPHORE_TYPE_CREATE_INFO,
		.semaphoreType = VK_SEMAPHORE_TYPE_TIMELINE,
	};
	VkSemaphoreCreateInfo si = { .sType = VK_STRUCTURE_TYPE_SEMAPHORE_CREATE_INFO, .pNext = &ti };
	int err = hm_vk_errno(vkCreateSemaphore(vk->dev, &si, NULL, &vk->side_sem));

	if (!err)
		vkGetDeviceQueue(vk->dev, vk->queue_family, 1, &vk->side);
	return err;
}

static float side_priority(void)
{
	static int knob = -1;

	return (float)hm_env_knob("HMIRROR_SIDE_PRIORITY", 100, 100, &knob) / 100.0f;
}

static int create_device(struct hm_vk *vk, const struct hm_vk_params *p)
{
	VkExtensionProperties *ext = NULL;
	const char *want[5];
	uint32_t n = 0, nw = 0;
	struct feats f;
	float prio[2] = { 1.0f, 1.0f };
	VkDeviceQueueCreateInfo qci = {
		.sType = VK_STRUCTURE_TYPE_DEVICE_QUEUE_CREATE_INFO,
		.queueCount = 1,
		.pQueuePriorities = prio,
	};
	VkDeviceCreateInfo dci = {
		.sType = VK_STRUCTURE_TYPE_DEVICE_CREATE_INFO,
		.queueCreateInfoCount = 1,
		.pQueueCreateInfos = &qci,
	};
	VkResult r;
	int err;

	r = vkEnumerateDeviceExtensionProperties(vk->phys, NULL, &n, NULL);
	if (r < 0)
		return hm_vk_errno(r);
	ext = calloc(n ? n : 1, sizeof(*ext));
	if (!ext)
		return -ENOMEM;
	r = vkEnumerateDeviceExtensionProperties(vk->phys, NULL, &n, ext);
	if (r < 0) {
		err = hm_vk_errno(r);
		goto out_free_ext;
	}
	vk->has_host_import = has_ext(ext, n, VK_EXT_EXTERNAL_MEMORY_HOST_EXTENSION_NAME);
	if (vk->has_host_import)
		want[nw++] = VK_EXT_EXTERNAL_MEMORY_HOST_EXTENSION_NAME;
	else if (!(p->flags & HM_VK_NO_HOST_IMPORT)) {
		err = -EOPNOTSUPP;
		goto out_free_ext;
	}
	if (has_ext(ext, n, VK_EXT_EXTERNAL_MEMORY_DMA_BUF_EXTENSION_NAME) &&
	    has_ext(ext, n, VK_KHR_EXTERNAL_MEMORY_FD_EXTENSION_NAME)) {
		want[nw++] = VK_KHR_EXTERNAL_MEMORY_FD_EXTENSION_NAME;
		want[nw++] = VK_EXT_EXTERNAL_MEMORY_DMA_BUF_EXTENSION_NAME;
		vk->has_dmabuf_import = true;
	}
	/* timeline semaphores shared with other processes (hmirrord) */
	vk->has_semaphore_fd = has_ext(ext, n, VK_KHR_EXTERNAL_SEMAPHORE_FD_EXTENSION_NAME);
	if (vk->has_semaphore_fd)
		want[nw++] = VK_KHR_EXTERNAL_SEMAPHORE_FD_EXTENSION_NAME;

	feats_chain(&f);
	vkGetPhysicalDeviceFeatures2(vk->phys, &f.f2);
	vk->sparse = !!(p->flags & HM_VK_SPARSE);
	err = feats_select(vk, &f);
	if (err)
		goto out_free_ext;

	err = pick_queue(vk);
	if (err)
		goto out_free_ext;
	qci.queueFamilyIndex = vk->queue_family;
	/* the side queue; HMIRROR_SIDE_QUEUE=0 leaves it out (a measurement:
	 * the copies beside a dispatch then run after it), and
	 * HMIRROR_SIDE_PRIORITY=P (0-100, a measurement) gives it priority
	 * P / 100 beside the main queue's 1 */
	qci.queueCount = family_queues(vk) >= 2 && !env_false("HMIRROR_SIDE_QUEUE") ? 2 : 1;
	prio[1] = side_priority();
	dci.pNext = &f.f2;
	dci.enabledExtensionCount = nw;
	dci.ppEnabledExtensionNames = want;
	r = vkCreateDevice(vk->phys, &dci, NULL, &vk->dev);
	err = hm_vk_errno(r);
	if (!err)
		vkGetDeviceQueue(vk->dev, vk->queue_family, 0, &vk->queue);
	if (!err && qci.queueCount == 2)
		err = side_init(vk);
out_free_ext:
	free(ext);
	return err;
}

static bool names_ext(const VkDeviceCreateInfo *ci, const char *name)
{
	for (uint32_t i = 0; i < ci->enabledExtensionCount; i++)
		if (ci->ppEnabledExtensionNames[i] &&
		    !strcmp(ci->ppEnabledExtensionNames[i], name))
			return true;
	return false;
}

/*
 * What the caller's VkDeviceCreateInfo enabled, folded into one struct
 * feats: pEnabledFeatures or a VkPhysicalDeviceFeatures2, the core 1.1
 * and 1.2 feature structs, and the extension-era structs they replaced.
 * Unknown chain entries are skipped.
 */
static void feats_enabled(const VkDeviceCreateInfo *ci, struct feats *f)
{
	feats_chain(f);
	if (ci->pEnabledFeatures)
		f->f2.features = *ci->pEnabledFeatures;
	for (const VkBaseInStructure *s = ci->pNext; s; s = s->pNext) {
		switch (s->sType) {
		case VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FEATURES_2:
			f->f2.features = ((const VkPhysicalDeviceFeatures2 *)s)->features;
			break;
		case VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_1_FEATURES:
			f->v11.storageBuffer16BitAccess |=
				((const VkPhysicalDeviceVulkan11Features *)s)->storageBuffer16BitAccess;
			break;
		case VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_16BIT_STORAGE_FEATURES:
			f->v11.storageBuffer16BitAccess |=
				((const VkPhysicalDevice16BitStorageFeatures *)s)->storageBuffer16BitAccess;
			break;
		case VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_2_FEATURES: {
			const VkPhysicalDeviceVulkan12Features *v = (const void *)s;

			f->v12.bufferDeviceAddress |= v->bufferDeviceAddress;
			f->v12.timelineSemaphore |= v->timelineSemaphore;
			f->v12.storageBuffer8BitAccess |= v->storageBuffer8BitAccess;
			f->v12.shaderInt8 |= v->shaderInt8;
			f->v12.vulkanMemoryModel |= v->vulkanMemoryModel;
			f->v12.vulkanMemoryModelDeviceScope |= v->vulkanMemoryModelDeviceScope;
			break;
		}
		case VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_8BIT_STORAGE_FEATURES:
			f->v12.storageBuffer8BitAccess |=
				((const VkPhysicalDevice8BitStorageFeatures *)s)->storageBuffer8BitAccess;
			break;
		case VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SHADER_FLOAT16_INT8_FEATURES:
			f->v12.shaderInt8 |=
				((const VkPhysicalDeviceShaderFloat16Int8Features *)s)->shaderInt8;
			break;
		case VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_BUFFER_DEVICE_ADDRESS_FEATURES:
			f->v12.bufferDeviceAddress |=
				((const VkPhysicalDeviceBufferDeviceAddressFeatures *)s)->bufferDeviceAddress;
			break;
		case VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_TIMELINE_SEMAPHORE_FEATURES:
			f->v12.timelineSemaphore |=
				((const VkPhysicalDeviceTimelineSemaphoreFeatures *)s)->timelineSemaphore;
			break;
		case VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_MEMORY_MODEL_FEATURES: {
			const VkPhysicalDeviceVulkanMemoryModelFeatures *v = (const void *)s;

			f->v12.vulkanMemoryModel |= v->vulkanMemoryModel;
			f->v12.vulkanMemoryModelDeviceScope |= v->vulkanMemoryModelDeviceScope;
			break;
		}
		default:
			break;
		}
	}
}

/*
 * Wrapped device: hmirror uses exactly what the caller's device creation
 * enabled (p->device_info), never what the physical device merely
 * supports; a shader that declares a capability the device was created
 * without is invalid (VUID-VkShaderModuleCreateInfo-pCode-01091).
 */
static int wrap_device(struct hm_vk *vk, const struct hm_vk_params *p)
{
	const VkDeviceCreateInfo *ci = p->device_info;
	struct feats f;

	vk->inst = p->inst;
	vk->phys = p->phys;
	vk->dev = p->dev;
	vk->queue = p->queue;
	vk->queue_family = p->queue_family;
	vk->has_host_import = names_ext(ci, VK_EXT_EXTERNAL_MEMORY_HOST_EXTENSION_NAME);
	vk->has_dmabuf_import = names_ext(ci, VK_EXT_EXTERNAL_MEMORY_DMA_BUF_EXTENSION_NAME) &&
				names_ext(ci, VK_KHR_EXTERNAL_MEMORY_FD_EXTENSION_NAME);
	vk->has_semaphore_fd = names_ext(ci, VK_KHR_EXTERNAL_SEMAPHORE_FD_EXTENSION_NAME);
	feats_enabled(ci, &f);
	vk->sparse = (p->flags & HM_VK_SPARSE) && f.f2.features.sparseBinding &&
		     f.f2.features.sparseResidencyBuffer;
	return feats_select(vk, &f);
}


int hm_vk_new(const struct hm_vk_params *p, struct hm_vk **ret)
{
	static const struct hm_vk_params defaults = { .validation = -1 };
	const char *want;
	struct hm_vk *vk;
	VkCommandPoolCreateInfo pci = {
		.sType = VK_STRUCTURE_TYPE_COMMAND_POOL_CREATE_INFO,
		.flags = VK_COMMAND_POOL_CREATE_TRANSIENT_BIT |
			 VK_COMMAND_POOL_CREATE_RESET_COMMAND_BUFFER_BIT,
	};
	int err;

	if (!ret)
		return -EINVAL;
	*ret = NULL;
	if (!p)
		p = &defaults;
	if (p->dev && (!p->inst || !p->phys || !p->queue || !p->device_info ||
		       p->device_info->sType != VK_STRUCTURE_TYPE_DEVICE_CREATE_INFO))
		return -EINVAL;
	vk = calloc(1, sizeof(*vk));
	if (!vk)
		return -ENOMEM;
	{
		/* recursive: a caller holding hm_vk_queue_lock() around its own
		 * submissions may call hmirror from inside */
		pthread_mutexattr_t a;

		pthread_mutexattr_init(&a);
		pthread_mutexattr_settype(&a, PTHREAD_MUTEX_RECURSIVE);
		pthread_mutex_init(&vk->lock, &a);
		pthread_mutexattr_destroy(&a);
	}

	if (p->dev) {
		err = wrap_device(vk, p);
		if (err)
			goto out_free;
		if (!vk->has_host_import && !(p->flags & HM_VK_NO_HOST_IMPORT)) {
			err = -EOPNOTSUPP;
			goto out_free;
		}
		vk->validation = p->validation < 0 ? env_true("HMIRROR_VALIDATION")
						   : p->validation > 0;
		if (vk->validation) {
			/* on the caller's instance, which must have enabled
			 * VK_EXT_debug_utils (and the layer, to see anything) */
			err = create_messenger(vk);
			if (err)
				goto out_free;
		}
		vkGetPhysicalDeviceProperties(vk->phys, &vk->props);
	} else {
		vk->owns = true;
		vk->validation = p->validation < 0 ? env_true("HMIRROR_VALIDATION")
						   : p->validation > 0;
		err = create_instance(vk);
		if (err)
			goto out_free;
		want = p->device ? p->device : getenv("HMIRROR_DEVICE");
		err = pick_physical(vk, want);
		if (err)
			goto out_free;
		vkGetPhysicalDeviceProperties(vk->phys, &vk->props);
		err = create_device(vk, p);
		if (err)
			goto out_free;
	}
	query_limits(vk);
	if (!vk->timestamp_valid_bits) {
		VkQueueFamilyProperties q[16];
		uint32_t n = 16;

		vkGetPhysicalDeviceQueueFamilyProperties(vk->phys, &n, q);
		if (vk->queue_family < n)
			vk->timestamp_valid_bits = q[vk->queue_family].timestampValidBits;
	}
	if (vk->has_host_import) {
		vk->get_host_ptr_props = (PFN_vkGetMemoryHostPointerPropertiesEXT)
			vkGetDeviceProcAddr(vk->dev, "vkGetMemoryHostPointerPropertiesEXT");
		if (!vk->get_host_ptr_props)
			vk->has_host_import = false;
	}
	pci.queueFamilyIndex = vk->queue_family;
	err = hm_vk_errno(vkCreateCommandPool(vk->dev, &pci, NULL, &vk->pool));
	if (err)
		goto out_free;
	*ret = vk;
	return 0;

out_free:
	hm_vk_free(vk);
	return err;
}

void hm_vk_free(struct hm_vk *vk)
{
	if (!vk)
		return;
	if (vk->dev && vk->pool)
		vkDestroyCommandPool(vk->dev, vk->pool, NULL);
	if (vk->dev && vk->side_sem)
		vkDestroySemaphore(vk->dev, vk->side_sem, NULL);
	if (vk->owns && vk->dev)
		vkDestroyDevice(vk->dev, NULL);
	if (vk->messenger && vk->destroy_messenger)
		vk->destroy_messenger(vk->inst, vk->messenger, NULL);
	if (vk->owns && vk->inst)
		vkDestroyInstance(vk->inst, NULL);
	pthread_mutex_destroy(&vk->lock);
	free(vk);
}

/* ---- memory types ---------------------------------------------------- */

int hm_vk_memory_type(const struct hm_vk *vk, uint32_t type_bits, enum hm_vk_mem kind,
		      uint32_t *ret_index)
{
	VkMemoryPropertyFlags need = 0, like = 0, avoid = 0;
	int best = -1, best_score = -1000;

	switch (kind) {
	case HM_VK_MEM_DEVICE:
		need = VK_MEMORY_PROPERTY_DEVICE_LOCAL_BIT;
		avoid = VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT;
		break;
	case HM_VK_MEM_HOST:
		need = VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT | VK_MEMORY_PROPERTY_HOST_COHERENT_BIT;
		like = VK_MEMORY_PROPERTY_HOST_CACHED_BIT;
		avoid = VK_MEMORY_PROPERTY_DEVICE_LOCAL_BIT;
		break;
	case HM_VK_MEM_DEVICE_HOST:
		need = VK_MEMORY_PROPERTY_DEVICE_LOCAL_BIT | VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT |
		       VK_MEMORY_PROPERTY_HOST_COHERENT_BIT;
		break;
	default:
		return -EINVAL;
	}
	avoid |= VK_MEMORY_PROPERTY_PROTECTED_BIT | VK_MEMORY_PROPERTY_LAZILY_ALLOCATED_BIT;
	for (uint32_t i = 0; i < vk->mem.memoryTypeCount; i++) {
		VkMemoryPropertyFlags f = vk->mem.memoryTypes[i].propertyFlags;
		int score;

		if (!(type_bits & (1u << i)) || (f & need) != need)
			continue;
		if (f & (VK_MEMORY_PROPERTY_PROTECTED_BIT | VK_MEMORY_PROPERTY_LAZILY_ALLOCATED_BIT))
			continue;
		score = __builtin_popcount(f & like) * 2 - __builtin_popcount(f & avoid) * 3;
		if (score > best_score) {
			best_score = score;
			best = i;
		}
	}
	if (best < 0)
		return -ENOENT;
	*ret_index = best;
	return 0;
}

uint64_t hm_vk_heap_size(const struct hm_vk *vk, uint32_t type_index)
{
	if (type_index >= vk->mem.memoryTypeCount)
		return 0;
	return vk->mem.memoryHeaps[vk->mem.memoryTypes[type_index].heapIndex].size;
}

/* ---- buffers ---------------------------------------------------------- */

#define HM_VK_USAGE (VK_BUFFER_USAGE_STORAGE_BUFFER_BIT | VK_BUFFER_USAGE_TRANSFER_SRC_BIT | \
		     VK_BUFFER_USAGE_TRANSFER_DST_BIT | VK_BUFFER_USAGE_SHADER_DEVICE_ADDRESS_BIT | \
		     VK_BUFFER_USAGE_INDIRECT_BUFFER_BIT)

static int buffer_bind(struct hm_vk *vk, struct hm_vk_buffer *b, const void *import_next,
		       uint32_t mem_type, VkDeviceSize alloc_size)
{
	VkMemoryAllocateFlagsInfo fi = {
		.sType = VK_STRUCTURE_TYPE_MEMORY_ALLOCATE_FLAGS_INFO,
		.pNext = import_next,
		.flags = VK_MEMORY_ALLOCATE_DEVICE_ADDRESS_BIT,
	};
	VkMemoryAllocateInfo ai = {
		.sType = VK_STRUCTURE_TYPE_MEMORY_ALLOCATE_INFO,
		.pNext = &fi,
		.allocationSize = alloc_size,
		.memoryTypeIndex = mem_type,
	};
	VkBufferDeviceAddressInfo bai = {
		.sType = VK_STRUCTURE_TYPE_BUFFER_DEVICE_ADDRESS_INFO,
		.buffer = b->buf,
	};
	int err;

	err = hm_vk_errno(vkAllocateMemory(vk->dev, &ai, NULL, &b->mem));
	if (err)
		return err;
	err = hm_vk_errno(vkBindBufferMemory(vk->dev, b->buf, b->mem, 0));
	if (err)
		return err;
	b->mem_type = mem_type;
	b->addr = vkGetBufferDeviceAddress(vk->dev, &bai);
	return b->addr ? 0 : -EIO;
}

int hm_vk_buffer_new(struct hm_vk *vk, VkDeviceSize size, enum hm_vk_mem kind,
		     struct hm_vk_buffer *ret)
{
	VkBufferCreateInfo bci = {
		.sType = VK_STRUCTURE_TYPE_BUFFER_CREATE_INFO,
		.size = size,
		.usage = HM_VK_USAGE,
		.sharingMode = VK_SHARING_MODE_EXCLUSIVE,
	};
	VkMemoryRequirements req;
	uint32_t type;
	int err;

	memset(ret, 0, sizeof(*ret));
	if (!size || size > vk->max_buffer)
		return size ? -E2BIG : -EINVAL;
	err = hm_vk_errno(vkCreateBuffer(vk->dev, &bci, NULL, &ret->buf));
	if (err)
		return err;
	vkGetBufferMemoryRequirements(vk->dev, ret->buf, &req);
	err = hm_vk_memory_type(vk, req.memoryTypeBits, kind, &type);
	if (err)
		goto out_free;
	err = buffer_bind(vk, ret, NULL, type, req.size);
	if (err)
		goto out_free;
	ret->size = size;
	if (kind != HM_VK_MEM_DEVICE) {
		err = hm_vk_errno(vkMapMemory(vk->dev, ret->mem, 0, VK_WHOLE_SIZE, 0, &ret->map));
		if (err)
			goto out_free;
	}
	return 0;

out_free:
	hm_vk_buffer_free(vk, ret);
	return err;
}

/*
 * Is [ptr, ptr + size) mapped writable throughout?  0, -EACCES where some
 * of it is mapped without write permission, -EFAULT where some is not
 * mapped.  NVIDIA 580 refuses a host-pointer import of a read-only mapping
 * (VK_ERROR_OUT_OF_DEVICE_MEMORY) although vkGetMemoryHostPointerProperties
 * accepts it, and after one refused import it refuses every later import
 * in the process (Documentation/engine.rst, "Home imports"): such a range
 * must never reach the driver.  Imports are rare, so /proc/self/maps.
 */
static int hm_vk_range_writable(const void *ptr, uint64_t size)
{
	uint64_t at = (uintptr_t)ptr, end = at + size;
	char line[512];
	FILE *f = fopen("/proc/self/maps", "re");
	int err = -EFAULT;

	if (!f)
		return 0;	/* no procfs: leave it to the driver */
	while (at < end && fgets(line, sizeof(line), f)) {
		unsigned long lo, hi;
		char perms[8];

		if (sscanf(line, "%lx-%lx %7s", &lo, &hi, perms) != 3 || hi <= at)
			continue;
		if (lo > at)
			break;		/* a hole before the next mapping */
		if (perms[1] != 'w') {
			err = -EACCES;
			break;
		}
		at = hi;
	}
	fclose(f);
	return at >= end ? 0 : err;
}

int hm_vk_import_host(struct hm_vk *vk, void *ptr, VkDeviceSize size, struct hm_vk_buffer *ret)
{
	VkExternalMemoryBufferCreateInfo ebci = {
		.sType = VK_STRUCTURE_TYPE_EXTERNAL_MEMORY_BUFFER_CREATE_INFO,
		.handleTypes = VK_EXTERNAL_MEMORY_HANDLE_TYPE_HOST_ALLOCATION_BIT_EXT,
	};
	VkBufferCreateInfo bci = {
		.sType = VK_STRUCTURE_TYPE_BUFFER_CREATE_INFO,
		.pNext = &ebci,
		.size = size,
		.usage = HM_VK_USAGE,
		.sharingMode = VK_SHARING_MODE_EXCLUSIVE,
	};
	VkMemoryHostPointerPropertiesEXT hpp = {
		.sType = VK_STRUCTURE_TYPE_MEMORY_HOST_POINTER_PROPERTIES_EXT,
	};
	VkImportMemoryHostPointerInfoEXT imp = {
		.sType = VK_STRUCTURE_TYPE_IMPORT_MEMORY_HOST_POINTER_INFO_EXT,
		.handleType = VK_EXTERNAL_MEMORY_HANDLE_TYPE_HOST_ALLOCATION_BIT_EXT,
		.pHostPointer = ptr,
	};
	VkMemoryRequirements req;
	uint32_t type;
	int err;

	memset(ret, 0, sizeof(*ret));
	if (!vk->has_host_import || !vk->get_host_ptr_props)
		return -EOPNOTSUPP;
	if (!ptr || !size || (uintptr_t)ptr % vk->min_import_align ||
	    size % vk->min_import_align)
		return -EINVAL;
	if (size > vk->max_buffer)
		return -E2BIG;
	err = hm_vk_range_writable(ptr, size);
	if (err)
		return err;
	err = hm_vk_errno(vk->get_host_ptr_props(vk->dev,
			VK_EXTERNAL_MEMORY_HANDLE_TYPE_HOST_ALLOCATION_BIT_EXT, ptr, &hpp));
	if (err)
		return err;
	err = hm_vk_errno(vkCreateBuffer(vk->dev, &bci, NULL, &ret->buf));
	if (err)
		return err;
	vkGetBufferMemoryRequirements(vk->dev, ret->buf, &req);
	if (req.size > size) {
		err = -EINVAL;
		goto out_free;
	}
	/* host-visible coherent among what both allow, else anything allowed */
	if (hm_vk_memory_type(vk, req.memoryTypeBits & hpp.memoryTypeBits, HM_VK_MEM_HOST, &type) &&
	    hm_vk_memory_type(vk, req.memoryTypeBits & hpp.memoryTypeBits, HM_VK_MEM_DEVICE, &type)) {
		err = -EOPNOTSUPP;
		goto out_free;
	}
	err = buffer_bind(vk, ret, &imp, type, size);
	if (err)
		goto out_free;
	ret->size = size;
	ret->map = ptr;
	ret->imported = true;
	return 0;

out_free:
	hm_vk_buffer_free(vk, ret);
	return err;
}

void hm_vk_buffer_free(struct hm_vk *vk, struct hm_vk_buffer *b)
{
	if (!vk || !b)
		return;
	if (b->map && !b->imported)
		vkUnmapMemory(vk->dev, b->mem);
	if (b->buf)
		vkDestroyBuffer(vk->dev, b->buf, NULL);
	if (b->mem)
		vkFreeMemory(vk->dev, b->mem, NULL);
	memset(b, 0, sizeof(*b));
}

/* ---- pipelines -------------------------------------------------------- */

int hm_vk_pipeline_new(struct hm_vk *vk, const uint32_t *spirv, size_t nr_words,
		       const char *entry, uint32_t push_bytes, struct hm_vk_pipeline *ret)
{
	return hm_vk_pipeline_new_cached(vk, VK_NULL_HANDLE, spirv, nr_words, entry, push_bytes,
					 ret);
}

int hm_vk_pipeline_new_cached(struct hm_vk *vk, VkPipelineCache cache, const uint32_t *spirv,
			      size_t nr_words, const char *entry, uint32_t push_bytes,
			      struct hm_vk_pipeline *ret)
{
	VkShaderModuleCreateInfo smci = {
		.sType = VK_STRUCTURE_TYPE_SHADER_MODULE_CREATE_INFO,
		.codeSize = nr_words * 4,
		.pCode = spirv,
	};
	VkPushConstantRange pcr = {
		.stageFlags = VK_SHADER_STAGE_COMPUTE_BIT,
		.size = push_bytes,
	};
	VkPipelineLayoutCreateInfo plci = {
		.sType = VK_STRUCTURE_TYPE_PIPELINE_LAYOUT_CREATE_INFO,
		.pushConstantRangeCount = push_bytes ? 1 : 0,
		.pPushConstantRanges = &pcr,
	};
	VkComputePipelineCreateInfo cpci = {
		.sType = VK_STRUCTURE_TYPE_COMPUTE_PIPELINE_CREATE_INFO,
		.stage = {
			.sType = VK_STRUCTURE_TYPE_PIPELINE_SHADER_STAGE_CREATE_INFO,
			.stage = VK_SHADER_STAGE_COMPUTE_BIT,
			.pName = entry ? entry : "main",
		},
	};
	int err;

	memset(ret, 0, sizeof(*ret));
	if (!spirv || nr_words < 5 || spirv[0] != 0x07230203 || push_bytes % 4 ||
	    push_bytes > vk->props.limits.maxPushConstantsSize)
		return -EINVAL;
	err = hm_vk_errno(vkCreateShaderModule(vk->dev, &smci, NULL, &ret->module));
	if (err)
		goto out_free;
	err = hm_vk_errno(vkCreatePipelineLayout(vk->dev, &plci, NULL, &ret->layout));
	if (err)
		goto out_free;
	cpci.stage.module = ret->module;
	cpci.layout = ret->layout;
	err = hm_vk_errno(vkCreateComputePipelines(vk->dev, cache, 1, &cpci, NULL, &ret->pipe));
	if (err)
		goto out_free;
	ret->push_bytes = push_bytes;
	return 0;

out_free:
	hm_vk_pipeline_free(vk, ret);
	return err;
}

void hm_vk_pipeline_free(struct hm_vk *vk, struct hm_vk_pipeline *p)
{
	if (!vk || !p)
		return;
	if (p->pipe)
		vkDestroyPipeline(vk->dev, p->pipe, NULL);
	if (p->layout)
		vkDestroyPipelineLayout(vk->dev, p->layout, NULL);
	if (p->module)
		vkDestroyShaderModule(vk->dev, p->module, NULL);
	memset(p, 0, sizeof(*p));
}

/* ---- submission ------------------------------------------------------- */

int hm_vk_cmd_begin(struct hm_vk *vk, VkCommandBuffer *ret)
{
	VkCommandBufferAllocateInfo ai = {
		.sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_ALLOCATE_INFO,
		.commandPool = vk->pool,
		.level = VK_COMMAND_BUFFER_LEVEL_PRIMARY,
		.commandBufferCount = 1,
	};
	VkCommandBufferBeginInfo bi = {
		.sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO,
		.flags = VK_COMMAND_BUFFER_USAGE_ONE_TIME_SUBMIT_BIT,
	};
	int err;

	*ret = VK_NULL_HANDLE;
	if (vk->lost)
		return -ENODEV;
	pthread_mutex_lock(&vk->lock);
	err = hm_vk_errno(vkAllocateCommandBuffers(vk->dev, &ai, ret));
	pthread_mutex_unlock(&vk->lock);
	if (err)
		return err;
	err = hm_vk_errno(vkBeginCommandBuffer(*ret, &bi));
	if (err) {
		hm_vk_cmd_discard(vk, *ret);
		*ret = VK_NULL_HANDLE;
	}
	return err;
}

void hm_vk_cmd_discard(struct hm_vk *vk, VkCommandBuffer cb)
{
	if (!cb)
		return;
	pthread_mutex_lock(&vk->lock);
	vkFreeCommandBuffers(vk->dev, vk->pool, 1, &cb);
	pthread_mutex_unlock(&vk->lock);
}

/*
 * Under vk->lock, a submission to vk->queue: its wait for the side queue's
 * last submission, if not waited for yet (si, ti, stage: the caller's, at
 * most one wait of its own in them already).
 */
static void side_wait(struct hm_vk *vk, VkSubmitInfo *si, VkTimelineSemaphoreSubmitInfo *ti,
		      VkSemaphore sems[2], uint64_t values[2], VkPipelineStageFlags stages[2])
{
	uint32_t n = si->waitSemaphoreCount;

	if (vk->side_value == vk->side_waited)
		return;
	if (n) {
		sems[0] = si->pWaitSemaphores[0];
		values[0] = ti->pWaitSemaphoreValues[0];
		stages[0] = si->pWaitDstStageMask[0];
	}
	sems[n] = vk->side_sem;
	values[n] = vk->side_value;
	stages[n] = VK_PIPELINE_STAGE_ALL_COMMANDS_BIT;
	si->waitSemaphoreCount = ti->waitSemaphoreValueCount = n + 1;
	si->pWaitSemaphores = sems;
	si->pWaitDstStageMask = stages;
	ti->pWaitSemaphoreValues = values;
	vk->side_waited = vk->side_value;
}

/*
 * fence's submission to q made: poll then wait.  On a timeout waits for
 * the queue to go idle, so that its command buffer and fence are no longer
 * in use.
 */
static int fence_finish(struct hm_vk *vk, VkQueue q, VkFence fence, uint64_t timeout_ns)
{
	VkResult r = spin_fence(vk, vk->dev, fence);
	int err;

	if (r == VK_NOT_READY)
		r = vkWaitForFences(vk->dev, 1, &fence, VK_TRUE,
				    timeout_ns ? timeout_ns : HM_VK_DEFAULT_TIMEOUT_NS);
	if (r == VK_ERROR_DEVICE_LOST)
		vk->lost = true;
	err = wait_errno(r);
	if (err == -ETIMEDOUT) {
		/* the command buffer may still be in use: wait it out */
		pthread_mutex_lock(&vk->lock);
		if (vkQueueWaitIdle(q) == VK_ERROR_DEVICE_LOST)
			vk->lost = true;
		pthread_mutex_unlock(&vk->lock);
	}
	return err;
}

/*
 * Submit cb (ended) with fence (unsignalled), poll then wait: to vk->queue,
 * or (side) to vk->side, signalling its timeline.  Honours vk->lost.  On a
 * timeout waits for the queue to go idle, so that cb and fence are no
 * longer in use.
 */
static int queue_run(struct hm_vk *vk, VkCommandBuffer cb, VkFence fence, uint64_t timeout_ns,
		     bool side)
{
	VkTimelineSemaphoreSubmitInfo ti = { .sType = VK_STRUCTURE_TYPE_TIMELINE_SEMAPHORE_SUBMIT_INFO };
	VkSubmitInfo si = {
		.sType = VK_STRUCTURE_TYPE_SUBMIT_INFO,
		.pNext = &ti,
		.commandBufferCount = 1,
		.pCommandBuffers = &cb,
	};
	VkSemaphore sems[2];
	uint64_t values[2], signal;
	VkPipelineStageFlags stages[2];
	VkQueue q = side && vk->side ? vk->side : vk->queue;
	VkResult r;

	if (vk->lost)
		return -ENODEV;
	pthread_mutex_lock(&vk->lock);
	if (q == vk->side) {
		signal = vk->side_value + 1;
		si.signalSemaphoreCount = ti.signalSemaphoreValueCount = 1;
		si.pSignalSemaphores = &vk->side_sem;
		ti.pSignalSemaphoreValues = &signal;
	} else {
		side_wait(vk, &si, &ti, sems, values, stages);
	}
	r = vkQueueSubmit(q, 1, &si, fence);
	if (r == VK_SUCCESS && q == vk->side)
		vk->side_value = signal;
	pthread_mutex_unlock(&vk->lock);
	if (r != VK_SUCCESS) {
		if (r == VK_ERROR_DEVICE_LOST)
			vk->lost = true;
		return wait_errno(r);
	}
	return fence_finish(vk, q, fence, timeout_ns);
}

int hm_vk_submit_wait(struct hm_vk *vk, VkCommandBuffer cb, uint64_t timeout_ns)
{
	VkFenceCreateInfo fci = { .sType = VK_STRUCTURE_TYPE_FENCE_CREATE_INFO };
	VkFence fence = VK_NULL_HANDLE;
	int err;

	err = hm_vk_errno(vkEndCommandBuffer(cb));
	if (err)
		goto out_discard;
	if (vk->lost) {
		err = queue_run(vk, cb, VK_NULL_HANDLE, timeout_ns, false);
		goto out_discard;
	}
	err = hm_vk_errno(vkCreateFence(vk->dev, &fci, NULL, &fence));
	if (err)
		goto out_discard;
	err = queue_run(vk, cb, fence, timeout_ns, false);
	vkDestroyFence(vk->dev, fence, NULL);
out_discard:
	hm_vk_cmd_discard(vk, cb);
	return err;
}

/* ---- reusable submission ---------------------------------------------- */

int hm_vk_cmd_new(struct hm_vk *vk, struct hm_vk_cmd *ret)
{
	VkCommandPoolCreateInfo pci = {
		.sType = VK_STRUCTURE_TYPE_COMMAND_POOL_CREATE_INFO,
		.flags = VK_COMMAND_POOL_CREATE_RESET_COMMAND_BUFFER_BIT,
		.queueFamilyIndex = vk->queue_family,
	};
	VkCommandBufferAllocateInfo ai = {
		.sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_ALLOCATE_INFO,
		.level = VK_COMMAND_BUFFER_LEVEL_PRIMARY,
		.commandBufferCount = 1,
	};
	VkFenceCreateInfo fci = { .sType = VK_STRUCTURE_TYPE_FENCE_CREATE_INFO };
	int err;

	if (!vk || !ret)
		return -EINVAL;
	memset(ret, 0, sizeof(*ret));
	if (vk->lost)
		return -ENODEV;
	err = hm_vk_errno(vkCreateCommandPool(vk->dev, &pci, NULL, &ret->pool));
	if (err)
		goto out;
	ai.commandPool = ret->pool;
	err = hm_vk_errno(vkAllocateCommandBuffers(vk->dev, &ai, &ret->cb));
	if (err)
		goto out;
	err = hm_vk_errno(vkCreateFence(vk->dev, &fci, NULL, &ret->fence));
	if (err)
		goto out;
	return 0;
out:
	hm_vk_cmd_free(vk, ret);
	return err;
}

void hm_vk_cmd_free(struct hm_vk *vk, struct hm_vk_cmd *c)
{
	if (!vk || !c)
		return;
	if (c->fence)
		vkDestroyFence(vk->dev, c->fence, NULL);
	if (c->pool)
		vkDestroyCommandPool(vk->dev, c->pool, NULL);  /* frees cb */
	memset(c, 0, sizeof(*c));
}

int hm_vk_cmd_start(struct hm_vk *vk, struct hm_vk_cmd *c, VkCommandBuffer *ret_cb)
{
	VkCommandBufferBeginInfo bi = {
		.sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO,
		.flags = VK_COMMAND_BUFFER_USAGE_ONE_TIME_SUBMIT_BIT,
	};
	int err;

	*ret_cb = VK_NULL_HANDLE;
	if (!c->cb)
		return -EINVAL;
	if (vk->lost)
		return -ENODEV;
	/* never pending here: every run waits (or idles the queue) */
	err = hm_vk_errno(vkResetCommandBuffer(c->cb, 0));
	if (!err)
		err = hm_vk_errno(vkBeginCommandBuffer(c->cb, &bi));
	if (!err)
		*ret_cb = c->cb;
	return err;
}

/* c's run ended with err: signalled, or (timeout, lost) the queue was
 * idled: its fence reset for the next run; a lost device's stays as it is */
static int fence_reset(struct hm_vk *vk, struct hm_vk_cmd *c, int err)
{
	if (!vk->lost) {
		int e2 = hm_vk_errno(vkResetFences(vk->dev, 1, &c->fence));

		if (!err)
			err = e2;
	}
	return err;
}

static int cmd_run(struct hm_vk *vk, struct hm_vk_cmd *c, uint64_t timeout_ns, bool side)
{
	int err;

	err = hm_vk_errno(vkEndCommandBuffer(c->cb));
	if (err)
		return err;
	c->submissions++;
	return fence_reset(vk, c, queue_run(vk, c->cb, c->fence, timeout_ns, side));
}

int hm_vk_cmd_run(struct hm_vk *vk, struct hm_vk_cmd *c, uint64_t timeout_ns)
{
	return cmd_run(vk, c, timeout_ns, false);
}

int hm_vk_cmd_run_side(struct hm_vk *vk, struct hm_vk_cmd *c, uint64_t timeout_ns)
{
	return cmd_run(vk, c, timeout_ns, true);
}

int hm_vk_cmd_submit(struct hm_vk *vk, struct hm_vk_cmd *c, const struct hm_vk_sync *sync)
{
	static const struct hm_vk_sync none;
	VkPipelineStageFlags stage = VK_PIPELINE_STAGE_ALL_COMMANDS_BIT;
	VkTimelineSemaphoreSubmitInfo ti = { .sType = VK_STRUCTURE_TYPE_TIMELINE_SEMAPHORE_SUBMIT_INFO };
	VkSubmitInfo si = {
		.sType = VK_STRUCTURE_TYPE_SUBMIT_INFO,
		.pNext = &ti,
		.commandBufferCount = 1,
		.pCommandBuffers = &c->cb,
		.pWaitDstStageMask = &stage,
	};
	VkSemaphore sems[2];
	uint64_t values[2];
	VkPipelineStageFlags stages[2];
	VkResult r;
	int err;

	if (!vk || !c || !c->cb)
		return -EINVAL;
	if (!sync)
		sync = &none;
	err = hm_vk_errno(vkEndCommandBuffer(c->cb));
	if (err)
		return err;
	if (vk->lost)
		return -ENODEV;
	if (sync->wait_sem) {
		si.waitSemaphoreCount = ti.waitSemaphoreValueCount = 1;
		si.pWaitSemaphores = &sync->wait_sem;
		ti.pWaitSemaphoreValues = &sync->wait_value;
	}
	if (sync->signal_sem) {
		si.signalSemaphoreCount = ti.signalSemaphoreValueCount = 1;
		si.pSignalSemaphores = &sync->signal_sem;
		ti.pSignalSemaphoreValues = &sync->signal_value;
	}
	c->submissions++;
	pthread_mutex_lock(&vk->lock);
	side_wait(vk, &si, &ti, sems, values, stages);
	r = vkQueueSubmit(vk->queue, 1, &si, c->fence);
	pthread_mutex_unlock(&vk->lock);
	if (r == VK_ERROR_DEVICE_LOST)
		vk->lost = true;
	return hm_vk_errno(r);
}

int hm_vk_cmd_finish(struct hm_vk *vk, struct hm_vk_cmd *c, uint64_t timeout_ns)
{
	if (!vk || !c || !c->fence)
		return -EINVAL;
	if (vk->lost)
		return -ENODEV;
	return fence_reset(vk, c, fence_finish(vk, vk->queue, c->fence, timeout_ns));
}

int hm_vk_cmd_wait(struct hm_vk *vk, struct hm_vk_cmd *c, uint64_t timeout_ns)
{
	VkResult r;

	if (!vk || !c || !c->fence)
		return -EINVAL;
	if (vk->lost)
		return -ENODEV;
	r = vkWaitForFences(vk->dev, 1, &c->fence, VK_TRUE, timeout_ns);
	if (r == VK_TIMEOUT)
		return -EAGAIN;
	if (r == VK_ERROR_DEVICE_LOST)
		vk->lost = true;
	if (r == VK_SUCCESS)
		r = vkResetFences(vk->dev, 1, &c->fence);
	return hm_vk_errno(r);
}

void hm_vk_queue_lock(struct hm_vk *vk)
{
	pthread_mutex_lock(&vk->lock);
}

void hm_vk_queue_unlock(struct hm_vk *vk)
{
	pthread_mutex_unlock(&vk->lock);
}

void hm_vk_cmd_dispatch(VkCommandBuffer cb, const struct hm_vk_pipeline *p,
			const void *push, uint32_t push_bytes,
			uint32_t gx, uint32_t gy, uint32_t gz)
{
	vkCmdBindPipeline(cb, VK_PIPELINE_BIND_POINT_COMPUTE, p->pipe);
	if (push_bytes)
		vkCmdPushConstants(cb, p->layout, VK_SHADER_STAGE_COMPUTE_BIT, 0, push_bytes, push);
	vkCmdDispatch(cb, gx, gy, gz);
}

void hm_vk_cmd_barrier(VkCommandBuffer cb)
{
	VkMemoryBarrier mb = {
		.sType = VK_STRUCTURE_TYPE_MEMORY_BARRIER,
		.srcAccessMask = VK_ACCESS_SHADER_WRITE_BIT | VK_ACCESS_TRANSFER_WRITE_BIT |
				 VK_ACCESS_HOST_WRITE_BIT,
		.dstAccessMask = VK_ACCESS_SHADER_READ_BIT | VK_ACCESS_SHADER_WRITE_BIT |
				 VK_ACCESS_TRANSFER_READ_BIT | VK_ACCESS_TRANSFER_WRITE_BIT |
				 VK_ACCESS_HOST_READ_BIT,
	};

	vkCmdPipelineBarrier(cb, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT |
			     VK_PIPELINE_STAGE_TRANSFER_BIT | VK_PIPELINE_STAGE_HOST_BIT,
			     VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT |
			     VK_PIPELINE_STAGE_TRANSFER_BIT | VK_PIPELINE_STAGE_HOST_BIT,
			     0, 1, &mb, 0, NULL, 0, NULL);
}

int hm_vk_copy_sync(struct hm_vk *vk, VkBuffer src, VkDeviceSize src_off,
		    VkBuffer dst, VkDeviceSize dst_off, VkDeviceSize size)
{
	VkBufferCopy c = { .srcOffset = src_off, .dstOffset = dst_off, .size = size };
	VkCommandBuffer cb;
	int err;

	err = hm_vk_cmd_begin(vk, &cb);
	if (err)
		return err;
	vkCmdCopyBuffer(cb, src, dst, 1, &c);
	hm_vk_cmd_barrier(cb);
	return hm_vk_submit_wait(vk, cb, 0);
}

int hm_vk_dispatch_sync(struct hm_vk *vk, const struct hm_vk_pipeline *p,
			const void *push, uint32_t push_bytes,
			uint32_t gx, uint32_t gy, uint32_t gz)
{
	VkCommandBuffer cb;
	int err;

	err = hm_vk_cmd_begin(vk, &cb);
	if (err)
		return err;
	hm_vk_cmd_dispatch(cb, p, push, push_bytes, gx, gy, gz);
	hm_vk_cmd_barrier(cb);
	return hm_vk_submit_wait(vk, cb, 0);
}
