// SPDX-License-Identifier: GPL-2.0
/*
 * Device discovery: DRM render nodes (libdrm) matched to Vulkan physical
 * devices, first by VK_EXT_physical_device_drm (render node major:minor),
 * else by VK_EXT_pci_bus_info (domain:bus:dev.func).  A Vulkan device with
 * neither match and type CPU is lavapipe, used where there is no GPU.
 *
 * --device WANT picks: a physical device index ("0"), a render node path
 * ("/dev/dri/renderD128"), a PCI address ("0000:65:00.0"), or a substring of
 * the device name ("H200", "llvmpipe").  Without --device: the first
 * discrete GPU, else integrated, else any GPU, else the CPU device.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>

#include <vulkan/vulkan.h>
#include <xf86drm.h>

#include "device.h"

#define MAX_PHYS 16
#define MAX_DRM 16

struct node {
	char path[64];
	dev_t rdev;
	bool pci;
	drmPciBusInfo bus;
};

struct phys {
	VkPhysicalDeviceProperties props;
	bool has_drm, has_pci;
	VkPhysicalDeviceDrmPropertiesEXT drm;
	VkPhysicalDevicePCIBusInfoPropertiesEXT pci;
	int node;		/* index into nodes, -1 */
	const char *how;
};

static int drm_nodes(struct node *nodes, unsigned cap)
{
	drmDevicePtr devs[MAX_DRM];
	int n = drmGetDevices2(0, devs, MAX_DRM);
	unsigned k = 0;

	if (n < 0)
		return 0;	/* no DRM at all: lavapipe only */
	for (int i = 0; i < n && k < cap; i++) {
		struct stat st;

		if (!(devs[i]->available_nodes & (1 << DRM_NODE_RENDER)))
			continue;
		snprintf(nodes[k].path, sizeof(nodes[k].path), "%s",
			 devs[i]->nodes[DRM_NODE_RENDER]);
		if (stat(nodes[k].path, &st) < 0)
			continue;
		nodes[k].rdev = st.st_rdev;
		nodes[k].pci = devs[i]->bustype == DRM_BUS_PCI;
		if (nodes[k].pci)
			nodes[k].bus = *devs[i]->businfo.pci;
		k++;
	}
	drmFreeDevices(devs, n);
	return (int)k;
}

static bool has_ext(VkPhysicalDevice pd, const char *name)
{
	VkExtensionProperties *e;
	uint32_t n = 0;
	bool found = false;

	if (vkEnumerateDeviceExtensionProperties(pd, NULL, &n, NULL) != VK_SUCCESS)
		return false;
	e = calloc(n ? n : 1, sizeof(*e));
	if (!e)
		return false;
	if (vkEnumerateDeviceExtensionProperties(pd, NULL, &n, e) == VK_SUCCESS)
		for (uint32_t i = 0; i < n; i++)
			if (!strcmp(e[i].extensionName, name))
				found = true;
	free(e);
	return found;
}

static int enumerate(struct phys *ph, unsigned cap, unsigned *ret_n,
		     struct node *nodes, int *ret_nodes)
{
	VkApplicationInfo app = {
		.sType = VK_STRUCTURE_TYPE_APPLICATION_INFO,
		.pApplicationName = "hmirrord-discovery",
		.apiVersion = VK_API_VERSION_1_2,
	};
	VkInstanceCreateInfo ici = {
		.sType = VK_STRUCTURE_TYPE_INSTANCE_CREATE_INFO,
		.pApplicationInfo = &app,
	};
	VkPhysicalDevice pds[MAX_PHYS];
	VkInstance inst;
	uint32_t n = MAX_PHYS;
	int nn = drm_nodes(nodes, MAX_DRM);

	*ret_nodes = nn;
	if (vkCreateInstance(&ici, NULL, &inst) != VK_SUCCESS)
		return -ENODEV;
	if (vkEnumeratePhysicalDevices(inst, &n, pds) < 0) {
		vkDestroyInstance(inst, NULL);
		return -ENODEV;
	}
	if (n > cap)
		n = cap;
	for (uint32_t i = 0; i < n; i++) {
		VkPhysicalDeviceProperties2 p2 = {
			.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_PROPERTIES_2,
		};
		struct phys *p = &ph[i];

		memset(p, 0, sizeof(*p));
		p->node = -1;
		p->drm.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_DRM_PROPERTIES_EXT;
		p->pci.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_PCI_BUS_INFO_PROPERTIES_EXT;
		p->has_drm = has_ext(pds[i], VK_EXT_PHYSICAL_DEVICE_DRM_EXTENSION_NAME);
		p->has_pci = has_ext(pds[i], VK_EXT_PCI_BUS_INFO_EXTENSION_NAME);
		void **next = &p2.pNext;

		if (p->has_drm) {
			*next = &p->drm;
			next = &p->drm.pNext;
		}
		if (p->has_pci) {
			*next = &p->pci;
			next = &p->pci.pNext;
		}
		vkGetPhysicalDeviceProperties2(pds[i], &p2);
		p->props = p2.properties;
		for (int k = 0; k < nn && p->node < 0; k++) {
			if (p->has_drm && p->drm.hasRender &&
			    major(nodes[k].rdev) == (unsigned)p->drm.renderMajor &&
			    minor(nodes[k].rdev) == (unsigned)p->drm.renderMinor) {
				p->node = k;
				p->how = "drm";
			} else if (p->has_pci && nodes[k].pci &&
				   nodes[k].bus.domain == p->pci.pciDomain &&
				   nodes[k].bus.bus == p->pci.pciBus &&
				   nodes[k].bus.dev == p->pci.pciDevice &&
				   nodes[k].bus.func == p->pci.pciFunction) {
				p->node = k;
				p->how = "pci";
			}
		}
	}
	vkDestroyInstance(inst, NULL);
	*ret_n = n;
	return 0;
}

static int rank(const struct phys *p)
{
	switch (p->props.deviceType) {
	case VK_PHYSICAL_DEVICE_TYPE_DISCRETE_GPU: return 4;
	case VK_PHYSICAL_DEVICE_TYPE_INTEGRATED_GPU: return 3;
	case VK_PHYSICAL_DEVICE_TYPE_VIRTUAL_GPU: return 2;
	case VK_PHYSICAL_DEVICE_TYPE_CPU: return 1;
	default: return 0;
	}
}

static bool matches(const struct phys *p, int idx, const struct node *nodes,
		    const char *want)
{
	char pci[32];
	char *end;
	long v = strtol(want, &end, 10);

	if (*want && !*end)
		return v == idx;
	if (p->node >= 0 && !strcmp(nodes[p->node].path, want))
		return true;
	if (p->has_pci) {
		snprintf(pci, sizeof(pci), "%04x:%02x:%02x.%x", p->pci.pciDomain,
			 p->pci.pciBus, p->pci.pciDevice, p->pci.pciFunction);
		if (!strcasecmp(pci, want))
			return true;
	}
	return strcasestr(p->props.deviceName, want) != NULL;
}

int hmd_device_pick(const char *want, struct hmd_device_choice *ret,
		    char *why, size_t cap)
{
	struct phys ph[MAX_PHYS];
	struct node nodes[MAX_DRM];
	unsigned n = 0;
	int nn, best = -1, r;

	memset(ret, 0, sizeof(*ret));
	ret->vk_index = -1;
	r = enumerate(ph, MAX_PHYS, &n, nodes, &nn);
	if (r < 0) {
		snprintf(why, cap, "no Vulkan instance");
		return r;
	}
	for (unsigned i = 0; i < n; i++) {
		if (want && *want) {
			if (matches(&ph[i], (int)i, nodes, want)) {
				best = (int)i;
				break;
			}
			continue;
		}
		if (best < 0 || rank(&ph[i]) > rank(&ph[best]))
			best = (int)i;
	}
	if (best < 0) {
		snprintf(why, cap, want ? "no Vulkan device matches \"%s\"" :
			 "no Vulkan device", want);
		return -ENODEV;
	}
	ret->vk_index = best;
	snprintf(ret->name, sizeof(ret->name), "%s", ph[best].props.deviceName);
	ret->vendor_id = ph[best].props.vendorID;
	ret->device_id = ph[best].props.deviceID;
	ret->is_cpu = ph[best].props.deviceType == VK_PHYSICAL_DEVICE_TYPE_CPU;
	for (int k = 0; k < 3; k++)
		ret->max_wg_size[k] = ph[best].props.limits.maxComputeWorkGroupSize[k];
	ret->max_wg_invocations = ph[best].props.limits.maxComputeWorkGroupInvocations;
	ret->max_shared_bytes = ph[best].props.limits.maxComputeSharedMemorySize;
	if (ph[best].node >= 0)
		snprintf(ret->render_node, sizeof(ret->render_node), "%s",
			 nodes[ph[best].node].path);
	snprintf(why, cap, "%s (index %d, %s%s%s)", ret->name, best,
		 ret->render_node[0] ? ret->render_node : "no render node",
		 ph[best].how ? ", matched by " : "",
		 ph[best].how ? ph[best].how : "");
	return 0;
}

int hmd_device_list(void)
{
	struct phys ph[MAX_PHYS];
	struct node nodes[MAX_DRM];
	unsigned n = 0;
	int nn, r;

	r = enumerate(ph, MAX_PHYS, &n, nodes, &nn);
	if (r < 0)
		return r;
	printf("%-3s %-40s %-6s %-20s %s\n", "idx", "name", "type", "render node",
	       "matched by");
	for (unsigned i = 0; i < n; i++)
		printf("%-3u %-40s %-6s %-20s %s\n", i, ph[i].props.deviceName,
		       ph[i].props.deviceType == VK_PHYSICAL_DEVICE_TYPE_CPU ? "cpu" :
		       ph[i].props.deviceType == VK_PHYSICAL_DEVICE_TYPE_DISCRETE_GPU ?
		       "dgpu" : "gpu",
		       ph[i].node >= 0 ? nodes[ph[i].node].path : "-",
		       ph[i].how ? ph[i].how : "-");
	for (int k = 0; k < nn; k++) {
		bool used = false;

		for (unsigned i = 0; i < n; i++)
			used |= ph[i].node == k;
		if (!used)
			printf("-   (no Vulkan device) %s\n", nodes[k].path);
	}
	return 0;
}
