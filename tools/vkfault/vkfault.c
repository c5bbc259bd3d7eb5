// SPDX-License-Identifier: LGPL-2.1-or-later
/*
 * VK_LAYER_HMIRROR_fault: a Vulkan layer that makes the device fail the
 * way real ones do, for the fault-injection tests (Documentation/testing.rst,
 * "Fault injection").  Everything else passes through.  It is configured
 * from the environment when an instance is created:
 *
 *   HMIRROR_VKFAULT_ALLOC=N   the Nth vkAllocateMemory of the instance's
 *                             devices (from 1) fails with
 *                             VK_ERROR_OUT_OF_DEVICE_MEMORY; N,every: every
 *                             call from the Nth on; N,K: the K calls from
 *                             the Nth
 *   HMIRROR_VKFAULT_LOST=N    the device is lost at its Nth queue
 *                             submission: that vkQueueSubmit runs (the
 *                             device may have written memory) but the wait
 *                             for it, and every submission, wait and fence
 *                             query after it, answers VK_ERROR_DEVICE_LOST,
 *                             as a device lost in the middle of the work
 *                             does
 *   HMIRROR_VKFAULT_LOST_BEFORE=N  the same, but the Nth submission itself
 *                             fails and runs nothing
 *   HMIRROR_VKFAULT_LOSE_NOW=1  read at every submission: this one fails
 *                             and runs nothing, and the device is lost (a
 *                             test sets it just before the call it means)
 *
 * The counts the layer saw are written to HMIRROR_VKFAULT_REPORT (a file)
 * at vkDestroyInstance, so that a test can size its sweep.
 */
#include <limits.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <pthread.h>

#include <vulkan/vulkan.h>
#include <vulkan/vk_layer.h>

#define LAYER_NAME "VK_LAYER_HMIRROR_fault"
#define EXPORT __attribute__((visibility("default")))

struct inst;

struct dev {
	void *key;
	struct inst *in;		/* the instance it was made from: its settings */			/* the loader's dispatch key of the device and its queues */
	VkDevice device;
	PFN_vkGetDeviceProcAddr gdpa;
	PFN_vkDestroyDevice destroy;
	PFN_vkAllocateMemory alloc;
	PFN_vkQueueSubmit submit;
	PFN_vkWaitForFences wait;
	PFN_vkGetFenceStatus status;
	PFN_vkQueueWaitIdle queue_idle;
	PFN_vkDeviceWaitIdle device_idle;
	atomic_bool lost;
};

struct inst {
	void *key;
	VkInstance instance;
	PFN_vkGetInstanceProcAddr gipa;
	PFN_vkDestroyInstance destroy;
	PFN_vkCreateDevice create_device;
	long alloc_at, alloc_last, lost_at, lost_before_at;
	atomic_long allocs, submits;
	char report[256];
};

#define MAX_OBJ 16
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static struct inst *insts[MAX_OBJ];
static struct dev *devs[MAX_OBJ];

static void *key_of(const void *handle)
{
	return *(void *const *)handle;
}

static struct inst *inst_of(const void *handle)
{
	struct inst *r = NULL;

	pthread_mutex_lock(&lock);
	for (int i = 0; i < MAX_OBJ; i++)
		if (insts[i] && insts[i]->key == key_of(handle))
			r = insts[i];
	pthread_mutex_unlock(&lock);
	return r;
}

static struct dev *dev_of(const void *handle)
{
	struct dev *r = NULL;

	pthread_mutex_lock(&lock);
	for (int i = 0; i < MAX_OBJ; i++)
		if (devs[i] && devs[i]->key == key_of(handle))
			r = devs[i];
	pthread_mutex_unlock(&lock);
	return r;
}

/* N, or N,every or N,K: *ret_last the last of the range (N, LONG_MAX, N + K - 1) */
static long env_long(const char *name, long *ret_last)
{
	const char *s = getenv(name);
	long n = s ? strtol(s, NULL, 0) : 0;
	const char *comma = s ? strchr(s, ',') : NULL;

	if (ret_last) {
		*ret_last = n;
		if (comma && !strcmp(comma, ",every"))
			*ret_last = LONG_MAX;
		else if (comma && strtol(comma + 1, NULL, 0) > 0)
			*ret_last = n + strtol(comma + 1, NULL, 0) - 1;
	}
	return n;
}

static VKAPI_ATTR VkResult VKAPI_CALL
fault_CreateInstance(const VkInstanceCreateInfo *ci, const VkAllocationCallbacks *a, VkInstance *ret)
{
	VkLayerInstanceCreateInfo *chain = (VkLayerInstanceCreateInfo *)ci->pNext;
	PFN_vkGetInstanceProcAddr gipa;
	PFN_vkCreateInstance create;
	struct inst *in;
	VkResult r;

	while (chain && !(chain->sType == VK_STRUCTURE_TYPE_LOADER_INSTANCE_CREATE_INFO &&
			  chain->function == VK_LAYER_LINK_INFO))
		chain = (VkLayerInstanceCreateInfo *)chain->pNext;
	if (!chain)
		return VK_ERROR_INITIALIZATION_FAILED;
	gipa = chain->u.pLayerInfo->pfnNextGetInstanceProcAddr;
	chain->u.pLayerInfo = chain->u.pLayerInfo->pNext;
	create = (PFN_vkCreateInstance)gipa(VK_NULL_HANDLE, "vkCreateInstance");
	r = create(ci, a, ret);
	if (r != VK_SUCCESS)
		return r;
	in = calloc(1, sizeof(*in));
	if (!in)
		return VK_ERROR_OUT_OF_HOST_MEMORY;
	in->key = key_of(*ret);
	in->instance = *ret;
	in->gipa = gipa;
	in->destroy = (PFN_vkDestroyInstance)gipa(*ret, "vkDestroyInstance");
	in->create_device = (PFN_vkCreateDevice)gipa(*ret, "vkCreateDevice");
	in->alloc_at = env_long("HMIRROR_VKFAULT_ALLOC", &in->alloc_last);
	in->lost_at = env_long("HMIRROR_VKFAULT_LOST", NULL);
	in->lost_before_at = env_long("HMIRROR_VKFAULT_LOST_BEFORE", NULL);
	if (getenv("HMIRROR_VKFAULT_REPORT"))
		snprintf(in->report, sizeof(in->report), "%s", getenv("HMIRROR_VKFAULT_REPORT"));
	pthread_mutex_lock(&lock);
	for (int i = 0; i < MAX_OBJ; i++)
		if (!insts[i]) {
			insts[i] = in;
			break;
		}
	pthread_mutex_unlock(&lock);
	return VK_SUCCESS;
}

static VKAPI_ATTR void VKAPI_CALL fault_DestroyInstance(VkInstance i, const VkAllocationCallbacks *a)
{
	struct inst *in = inst_of(i);

	if (!in)
		return;
	if (in->report[0]) {
		FILE *f = fopen(in->report, "w");

		if (f) {
			fprintf(f, "allocs %ld submits %ld\n", atomic_load(&in->allocs),
				atomic_load(&in->submits));
			fclose(f);
		}
	}
	in->destroy(i, a);
	pthread_mutex_lock(&lock);
	for (int k = 0; k < MAX_OBJ; k++)
		if (insts[k] == in)
			insts[k] = NULL;
	pthread_mutex_unlock(&lock);
	free(in);
}

static VKAPI_ATTR VkResult VKAPI_CALL
fault_CreateDevice(VkPhysicalDevice pd, const VkDeviceCreateInfo *ci, const VkAllocationCallbacks *a,
		   VkDevice *ret)
{
	VkLayerDeviceCreateInfo *chain = (VkLayerDeviceCreateInfo *)ci->pNext;
	struct inst *in = inst_of(pd);
	PFN_vkGetInstanceProcAddr gipa;
	PFN_vkGetDeviceProcAddr gdpa;
	PFN_vkCreateDevice create;
	struct dev *d;
	VkResult r;

	while (chain && !(chain->sType == VK_STRUCTURE_TYPE_LOADER_DEVICE_CREATE_INFO &&
			  chain->function == VK_LAYER_LINK_INFO))
		chain = (VkLayerDeviceCreateInfo *)chain->pNext;
	if (!chain || !in)
		return VK_ERROR_INITIALIZATION_FAILED;
	gipa = chain->u.pLayerInfo->pfnNextGetInstanceProcAddr;
	gdpa = chain->u.pLayerInfo->pfnNextGetDeviceProcAddr;
	chain->u.pLayerInfo = chain->u.pLayerInfo->pNext;
	create = (PFN_vkCreateDevice)gipa(in->instance, "vkCreateDevice");
	r = create(pd, ci, a, ret);
	if (r != VK_SUCCESS)
		return r;
	d = calloc(1, sizeof(*d));
	if (!d)
		return VK_ERROR_OUT_OF_HOST_MEMORY;
	d->key = key_of(*ret);
	d->in = in;
	d->device = *ret;
	d->gdpa = gdpa;
	d->destroy = (PFN_vkDestroyDevice)gdpa(*ret, "vkDestroyDevice");
	d->alloc = (PFN_vkAllocateMemory)gdpa(*ret, "vkAllocateMemory");
	d->submit = (PFN_vkQueueSubmit)gdpa(*ret, "vkQueueSubmit");
	d->wait = (PFN_vkWaitForFences)gdpa(*ret, "vkWaitForFences");
	d->status = (PFN_vkGetFenceStatus)gdpa(*ret, "vkGetFenceStatus");
	d->queue_idle = (PFN_vkQueueWaitIdle)gdpa(*ret, "vkQueueWaitIdle");
	d->device_idle = (PFN_vkDeviceWaitIdle)gdpa(*ret, "vkDeviceWaitIdle");
	pthread_mutex_lock(&lock);
	for (int i = 0; i < MAX_OBJ; i++)
		if (!devs[i]) {
			devs[i] = d;
			break;
		}
	pthread_mutex_unlock(&lock);
	return VK_SUCCESS;
}

static VKAPI_ATTR void VKAPI_CALL fault_DestroyDevice(VkDevice device, const VkAllocationCallbacks *a)
{
	struct dev *d = dev_of(device);

	if (!d)
		return;
	d->destroy(device, a);
	pthread_mutex_lock(&lock);
	for (int k = 0; k < MAX_OBJ; k++)
		if (devs[k] == d)
			devs[k] = NULL;
	pthread_mutex_unlock(&lock);
	free(d);
}

static VKAPI_ATTR VkResult VKAPI_CALL
fault_AllocateMemory(VkDevice device, const VkMemoryAllocateInfo *ai, const VkAllocationCallbacks *a,
		     VkDeviceMemory *ret)
{
	struct dev *d = dev_of(device);
	struct inst *in = d->in;
	long n = in ? atomic_fetch_add(&in->allocs, 1) + 1 : 0;

	if (in && in->alloc_at && n >= in->alloc_at && n <= in->alloc_last)
		return VK_ERROR_OUT_OF_DEVICE_MEMORY;
	return d->alloc(device, ai, a, ret);
}

static VKAPI_ATTR VkResult VKAPI_CALL
fault_QueueSubmit(VkQueue q, uint32_t n, const VkSubmitInfo *si, VkFence fence)
{
	struct dev *d = dev_of(q);
	struct inst *in = d->in;
	long k = in ? atomic_fetch_add(&in->submits, 1) + 1 : 0;
	VkResult r;

	if (atomic_load(&d->lost))
		return VK_ERROR_DEVICE_LOST;
	if ((in && in->lost_before_at && k == in->lost_before_at) ||
	    (getenv("HMIRROR_VKFAULT_LOSE_NOW") && getenv("HMIRROR_VKFAULT_LOSE_NOW")[0] == '1')) {
		atomic_store(&d->lost, true);
		return VK_ERROR_DEVICE_LOST;
	}
	r = d->submit(q, n, si, fence);
	if (r == VK_SUCCESS && in && in->lost_at && k == in->lost_at) {
		/* the work runs to its end (or some of it: a real loss may cut it
		 * short anywhere), then the device is gone */
		d->queue_idle(q);
		atomic_store(&d->lost, true);
	}
	return r;
}

static VKAPI_ATTR VkResult VKAPI_CALL
fault_WaitForFences(VkDevice device, uint32_t n, const VkFence *f, VkBool32 all, uint64_t timeout)
{
	struct dev *d = dev_of(device);

	if (atomic_load(&d->lost))
		return VK_ERROR_DEVICE_LOST;
	return d->wait(device, n, f, all, timeout);
}

static VKAPI_ATTR VkResult VKAPI_CALL fault_GetFenceStatus(VkDevice device, VkFence f)
{
	struct dev *d = dev_of(device);

	if (atomic_load(&d->lost))
		return VK_ERROR_DEVICE_LOST;
	return d->status(device, f);
}

static VKAPI_ATTR VkResult VKAPI_CALL fault_QueueWaitIdle(VkQueue q)
{
	struct dev *d = dev_of(q);

	if (atomic_load(&d->lost))
		return VK_ERROR_DEVICE_LOST;
	return d->queue_idle(q);
}

static VKAPI_ATTR VkResult VKAPI_CALL fault_DeviceWaitIdle(VkDevice device)
{
	struct dev *d = dev_of(device);

	if (atomic_load(&d->lost))
		return VK_ERROR_DEVICE_LOST;
	return d->device_idle(device);
}

static PFN_vkVoidFunction device_fn(const char *name)
{
#define FN(x) if (!strcmp(name, "vk" #x)) return (PFN_vkVoidFunction)fault_##x
	FN(DestroyDevice);
	FN(AllocateMemory);
	FN(QueueSubmit);
	FN(WaitForFences);
	FN(GetFenceStatus);
	FN(QueueWaitIdle);
	FN(DeviceWaitIdle);
#undef FN
	return NULL;
}

EXPORT VKAPI_ATTR PFN_vkVoidFunction VKAPI_CALL fault_GetDeviceProcAddr(VkDevice device,
									 const char *name)
{
	PFN_vkVoidFunction f = device_fn(name);
	struct dev *d;

	if (!strcmp(name, "vkGetDeviceProcAddr"))
		return (PFN_vkVoidFunction)fault_GetDeviceProcAddr;
	if (f)
		return f;
	d = dev_of(device);
	return d ? d->gdpa(device, name) : NULL;
}

EXPORT VKAPI_ATTR PFN_vkVoidFunction VKAPI_CALL fault_GetInstanceProcAddr(VkInstance instance,
									   const char *name)
{
	PFN_vkVoidFunction f = device_fn(name);
	struct inst *in;

	if (!strcmp(name, "vkGetInstanceProcAddr"))
		return (PFN_vkVoidFunction)fault_GetInstanceProcAddr;
	if (!strcmp(name, "vkGetDeviceProcAddr"))
		return (PFN_vkVoidFunction)fault_GetDeviceProcAddr;
	if (!strcmp(name, "vkCreateInstance"))
		return (PFN_vkVoidFunction)fault_CreateInstance;
	if (!strcmp(name, "vkDestroyInstance"))
		return (PFN_vkVoidFunction)fault_DestroyInstance;
	if (!strcmp(name, "vkCreateDevice"))
		return (PFN_vkVoidFunction)fault_CreateDevice;
	if (f)
		return f;
	if (!instance)
		return NULL;
	in = inst_of(instance);
	return in ? in->gipa(instance, name) : NULL;
}

EXPORT VKAPI_ATTR VkResult VKAPI_CALL
vkNegotiateLoaderLayerInterfaceVersion(VkNegotiateLayerInterface *v)
{
	if (!v || v->sType != LAYER_NEGOTIATE_INTERFACE_STRUCT)
		return VK_ERROR_INITIALIZATION_FAILED;
	if (v->loaderLayerInterfaceVersion > 2)
		v->loaderLayerInterfaceVersion = 2;
	v->pfnGetInstanceProcAddr = fault_GetInstanceProcAddr;
	v->pfnGetDeviceProcAddr = fault_GetDeviceProcAddr;
	v->pfnGetPhysicalDeviceProcAddr = NULL;
	return VK_SUCCESS;
}
