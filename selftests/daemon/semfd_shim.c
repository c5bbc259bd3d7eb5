// SPDX-License-Identifier: GPL-2.0
/*
 * A stand-in for a driver's timeline semaphore export, for test-daemon on
 * devices without VK_KHR_external_semaphore_fd (lavapipe of Mesa 22.3).
 * LD_PRELOADed into hmirrord only: it announces the extension and opaque-fd
 * export of timeline semaphores, strips both from what reaches the driver,
 * and hands out as the "opaque fd" a memfd holding one u64, the value,
 * which it stores after each real vkSignalSemaphore of that semaphore.
 * The test reads that word where it would have imported the semaphore, so
 * the daemon's own code (when it signals which value) runs as it would on
 * a device that exports; the import into a device of the test's own is
 * tested where the driver has it (timeline_semaphore_in_own_device).
 */
#include <dlfcn.h>
#include <fcntl.h>
#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>
#include <vulkan/vulkan.h>

#define MAX_SEMS 128

static struct shim_sem {
	VkSemaphore sem;
	int fd;
	uint64_t *word;
} sems[MAX_SEMS];
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;

#define REAL(name) ((PFN_##name)dlsym(RTLD_NEXT, #name))

static struct shim_sem *find(VkSemaphore s)
{
	for (unsigned i = 0; i < MAX_SEMS; i++)
		if (sems[i].word && sems[i].sem == s)
			return &sems[i];
	return NULL;
}

VKAPI_ATTR VkResult VKAPI_CALL
vkEnumerateDeviceExtensionProperties(VkPhysicalDevice pd, const char *layer, uint32_t *n,
				     VkExtensionProperties *p)
{
	VkResult r;
	uint32_t have = 0;

	if (layer)
		return REAL(vkEnumerateDeviceExtensionProperties)(pd, layer, n, p);
	r = REAL(vkEnumerateDeviceExtensionProperties)(pd, NULL, &have, NULL);
	if (r < 0)
		return r;
	if (!p) {
		*n = have + 1;
		return VK_SUCCESS;
	}
	if (*n < have + 1) {
		r = REAL(vkEnumerateDeviceExtensionProperties)(pd, NULL, n, p);
		return r < 0 ? r : VK_INCOMPLETE;
	}
	r = REAL(vkEnumerateDeviceExtensionProperties)(pd, NULL, &have, p);
	if (r < 0)
		return r;
	memset(&p[have], 0, sizeof(p[have]));
	strcpy(p[have].extensionName, VK_KHR_EXTERNAL_SEMAPHORE_FD_EXTENSION_NAME);
	p[have].specVersion = 1;
	*n = have + 1;
	return VK_SUCCESS;
}

VKAPI_ATTR VkResult VKAPI_CALL
vkCreateDevice(VkPhysicalDevice pd, const VkDeviceCreateInfo *ci, const VkAllocationCallbacks *a,
	       VkDevice *ret)
{
	VkDeviceCreateInfo c = *ci;
	const char *names[64];
	uint32_t n = 0;

	for (uint32_t i = 0; i < ci->enabledExtensionCount && n < 64; i++)
		if (strcmp(ci->ppEnabledExtensionNames[i], VK_KHR_EXTERNAL_SEMAPHORE_FD_EXTENSION_NAME))
			names[n++] = ci->ppEnabledExtensionNames[i];
	c.enabledExtensionCount = n;
	c.ppEnabledExtensionNames = names;
	return REAL(vkCreateDevice)(pd, &c, a, ret);
}

VKAPI_ATTR void VKAPI_CALL
vkGetPhysicalDeviceExternalSemaphoreProperties(VkPhysicalDevice pd,
					       const VkPhysicalDeviceExternalSemaphoreInfo *info,
					       VkExternalSemaphoreProperties *props)
{
	REAL(vkGetPhysicalDeviceExternalSemaphoreProperties)(pd, info, props);
	if (info->handleType == VK_EXTERNAL_SEMAPHORE_HANDLE_TYPE_OPAQUE_FD_BIT) {
		props->exportFromImportedHandleTypes = info->handleType;
		props->compatibleHandleTypes = info->handleType;
		props->externalSemaphoreFeatures = VK_EXTERNAL_SEMAPHORE_FEATURE_EXPORTABLE_BIT |
						   VK_EXTERNAL_SEMAPHORE_FEATURE_IMPORTABLE_BIT;
	}
}

VKAPI_ATTR VkResult VKAPI_CALL
vkCreateSemaphore(VkDevice dev, const VkSemaphoreCreateInfo *ci, const VkAllocationCallbacks *a,
		  VkSemaphore *ret)
{
	VkSemaphoreCreateInfo c = *ci;
	VkSemaphoreTypeCreateInfo type = { 0 };
	bool exported = false;
	VkResult r;

	/* the one chain hmirrord makes: timeline type -> export info */
	for (const VkBaseInStructure *s = ci->pNext; s; s = s->pNext) {
		if (s->sType == VK_STRUCTURE_TYPE_SEMAPHORE_TYPE_CREATE_INFO)
			memcpy(&type, s, sizeof(type));
		if (s->sType == VK_STRUCTURE_TYPE_EXPORT_SEMAPHORE_CREATE_INFO)
			exported = true;
	}
	if (!exported)
		return REAL(vkCreateSemaphore)(dev, ci, a, ret);
	type.pNext = NULL;
	c.pNext = &type;
	r = REAL(vkCreateSemaphore)(dev, &c, a, ret);
	if (r < 0)
		return r;
	pthread_mutex_lock(&lock);
	for (unsigned i = 0; i < MAX_SEMS; i++) {
		if (sems[i].word)
			continue;
		sems[i].fd = memfd_create("hmirror-semfd-shim", MFD_CLOEXEC);
		if (sems[i].fd >= 0 && ftruncate(sems[i].fd, 4096) == 0)
			sems[i].word = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_SHARED,
					    sems[i].fd, 0);
		if (sems[i].word == MAP_FAILED || !sems[i].word) {
			sems[i].word = NULL;
			if (sems[i].fd >= 0)
				close(sems[i].fd);
			break;
		}
		sems[i].sem = *ret;
		__atomic_store_n(sems[i].word, type.initialValue, __ATOMIC_RELEASE);
		break;
	}
	pthread_mutex_unlock(&lock);
	return VK_SUCCESS;
}

VKAPI_ATTR void VKAPI_CALL
vkDestroySemaphore(VkDevice dev, VkSemaphore sem, const VkAllocationCallbacks *a)
{
	struct shim_sem *s;

	pthread_mutex_lock(&lock);
	s = find(sem);
	if (s) {
		munmap(s->word, 4096);
		close(s->fd);
		s->word = NULL;
	}
	pthread_mutex_unlock(&lock);
	REAL(vkDestroySemaphore)(dev, sem, a);
}

VKAPI_ATTR VkResult VKAPI_CALL vkSignalSemaphore(VkDevice dev, const VkSemaphoreSignalInfo *si)
{
	VkResult r = REAL(vkSignalSemaphore)(dev, si);
	struct shim_sem *s;

	pthread_mutex_lock(&lock);
	s = find(si->semaphore);
	if (s && r == VK_SUCCESS)
		__atomic_store_n(s->word, si->value, __ATOMIC_RELEASE);
	pthread_mutex_unlock(&lock);
	return r;
}

static VKAPI_ATTR VkResult VKAPI_CALL
shim_get_semaphore_fd(VkDevice dev, const VkSemaphoreGetFdInfoKHR *gi, int *ret_fd)
{
	struct shim_sem *s;
	VkResult r = VK_ERROR_INVALID_EXTERNAL_HANDLE;

	pthread_mutex_lock(&lock);
	s = find(gi->semaphore);
	if (s && gi->handleType == VK_EXTERNAL_SEMAPHORE_HANDLE_TYPE_OPAQUE_FD_BIT) {
		*ret_fd = fcntl(s->fd, F_DUPFD_CLOEXEC, 0);
		r = *ret_fd >= 0 ? VK_SUCCESS : VK_ERROR_TOO_MANY_OBJECTS;
	}
	pthread_mutex_unlock(&lock);
	return r;
}

VKAPI_ATTR PFN_vkVoidFunction VKAPI_CALL vkGetDeviceProcAddr(VkDevice dev, const char *name)
{
	if (!strcmp(name, "vkGetSemaphoreFdKHR"))
		return (PFN_vkVoidFunction)shim_get_semaphore_fd;
	if (!strcmp(name, "vkSignalSemaphore") || !strcmp(name, "vkSignalSemaphoreKHR"))
		return (PFN_vkVoidFunction)vkSignalSemaphore;
	if (!strcmp(name, "vkCreateSemaphore"))
		return (PFN_vkVoidFunction)vkCreateSemaphore;
	if (!strcmp(name, "vkDestroySemaphore"))
		return (PFN_vkVoidFunction)vkDestroySemaphore;
	return REAL(vkGetDeviceProcAddr)(dev, name);
}
