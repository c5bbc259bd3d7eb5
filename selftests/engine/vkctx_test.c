// SPDX-License-Identifier: GPL-2.0
/*
 * Vulkan context: device creation with validation, memory types, buffers,
 * host-pointer import, a compute pipeline writing through a device
 * address, the error mapping.  No validation message is allowed.
 */
#include <errno.h>
#include <string.h>
#include <sys/mman.h>

#include "kselftest_harness.h"
#include "hmirror/engine.h"
#include "hmirror/vkctx.h"
#include "engine/test-fill.spv.h"
#include "vkfault_test.h"

FIXTURE(vk) {
	struct hm_vk *vk;
};

FIXTURE_SETUP(vk)
{
	struct hm_vk_params p = { .validation = 1 };
	int err;

	/* VK_LAYER_HMIRROR_fault loses the device where a test asks */
	ASSERT_TRUE(hm_test_fault_layer()) TH_LOG("no build/share/hmirror/vkfault");
	err = hm_vk_new(&p, &self->vk);

	if (err == -EOPNOTSUPP || err == -ENODEV)
		SKIP(return, "no Vulkan device with validation layers (%d)", err);
	ASSERT_EQ(0, err);
	ASSERT_TRUE(self->vk->validation);
}

FIXTURE_TEARDOWN(vk)
{
	if (self->vk) {
		unsigned n = hm_vk_validation_count(self->vk);

		if (n)
			TH_LOG("validation: %s", self->vk->last_message);
		EXPECT_EQ(0, n);
		hm_vk_free(self->vk);
	}
}

TEST_F(vk, features_and_memory_types)
{
	uint32_t t;

	ASSERT_TRUE(self->vk->has_host_import);
	ASSERT_TRUE(self->vk->min_import_align != 0);
	/* power of two */
	ASSERT_TRUE((self->vk->min_import_align & (self->vk->min_import_align - 1)) == 0);
	ASSERT_EQ(0, hm_vk_memory_type(self->vk, ~0u, HM_VK_MEM_DEVICE, &t));
	ASSERT_TRUE(self->vk->mem.memoryTypes[t].propertyFlags & VK_MEMORY_PROPERTY_DEVICE_LOCAL_BIT);
	ASSERT_EQ(0, hm_vk_memory_type(self->vk, ~0u, HM_VK_MEM_HOST, &t));
	ASSERT_TRUE(self->vk->mem.memoryTypes[t].propertyFlags & VK_MEMORY_PROPERTY_HOST_COHERENT_BIT);
	ASSERT_EQ(-ENOENT, hm_vk_memory_type(self->vk, 0, HM_VK_MEM_HOST, &t));
	ASSERT_TRUE(hm_vk_heap_size(self->vk, t) != 0);
	TH_LOG("%s: import align %lu, max alloc %lu MiB", self->vk->props.deviceName,
	       (unsigned long)self->vk->min_import_align,
	       (unsigned long)(self->vk->max_alloc >> 20));
}

TEST_F(vk, import_dispatch_copy)
{
	size_t align = self->vk->min_import_align, size = 64 * 1024;
	struct hm_vk_buffer host, dev, hv;
	struct hm_vk_pipeline pipe;
	struct { uint64_t a; uint32_t n, pad; } push;
	uint32_t *mem;

	mem = mmap(NULL, size + align, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	ASSERT_NE(MAP_FAILED, mem);
	mem = (uint32_t *)(((uintptr_t)mem + align - 1) & ~(align - 1));
	memset(mem, 0xee, size);

	/* misaligned pointer and size are refused before the driver sees them */
	ASSERT_EQ(-EINVAL, hm_vk_import_host(self->vk, (char *)mem + 4, size - align, &host));
	ASSERT_EQ(-EINVAL, hm_vk_import_host(self->vk, mem, size - 4, &host));
	/* read-only and unmapped ranges never reach the driver (one refused
	 * import makes NVIDIA refuse all later ones in the process) */
	ASSERT_EQ(0, mprotect(mem, align, PROT_READ));
	ASSERT_EQ(-EACCES, hm_vk_import_host(self->vk, mem, size, &host));
	ASSERT_EQ(0, mprotect(mem, align, PROT_READ | PROT_WRITE));
	ASSERT_EQ(0, munmap((char *)mem + size - align, align));
	ASSERT_EQ(-EFAULT, hm_vk_import_host(self->vk, mem, size, &host));
	ASSERT_EQ(0, hm_vk_import_host(self->vk, mem, size - align, &host));
	hm_vk_buffer_free(self->vk, &host);
	ASSERT_NE(MAP_FAILED, mmap((char *)mem + size - align, align, PROT_READ | PROT_WRITE,
				   MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0));
	memset((char *)mem + size - align, 0xee, align);
	ASSERT_EQ(0, hm_vk_import_host(self->vk, mem, size, &host));
	ASSERT_TRUE(host.addr != 0);
	ASSERT_EQ((void *)mem, host.map);

	ASSERT_EQ(0, hm_vk_pipeline_new(self->vk, test_fill_spv,
					sizeof(test_fill_spv) / 4, "main", sizeof(push), &pipe));
	push.a = host.addr;
	push.n = 1000;
	ASSERT_EQ(0, hm_vk_dispatch_sync(self->vk, &pipe, &push, sizeof(push), 1000 / 64 + 1, 1, 1));
	for (uint32_t i = 0; i < 1000; i++)
		ASSERT_EQ(i * 3, mem[i]);
	ASSERT_EQ(0xeeeeeeee, mem[1000]);

	/* host -> device-local -> device-local host-visible */
	ASSERT_EQ(0, hm_vk_buffer_new(self->vk, size, HM_VK_MEM_DEVICE, &dev));
	ASSERT_EQ(0, hm_vk_buffer_new(self->vk, size, HM_VK_MEM_DEVICE_HOST, &hv));
	ASSERT_NE(NULL, hv.map);
	ASSERT_EQ(0, hm_vk_copy_sync(self->vk, host.buf, 0, dev.buf, 0, size));
	ASSERT_EQ(0, hm_vk_copy_sync(self->vk, dev.buf, 0, hv.buf, 0, size));
	ASSERT_EQ(0, memcmp(hv.map, mem, size));

	/* a lost device stays lost and says so */
	hm_test_lose_device_now(true);
	ASSERT_EQ(-ENODEV, hm_vk_copy_sync(self->vk, dev.buf, 0, hv.buf, 0, size));
	hm_test_lose_device_now(false);
	ASSERT_TRUE(self->vk->lost);
	ASSERT_EQ(-ENODEV, hm_vk_copy_sync(self->vk, dev.buf, 0, hv.buf, 0, size));

	hm_vk_pipeline_free(self->vk, &pipe);
	hm_vk_buffer_free(self->vk, &hv);
	hm_vk_buffer_free(self->vk, &dev);
	hm_vk_buffer_free(self->vk, &host);
	hm_vk_buffer_free(self->vk, NULL);
}

/* the reusable submitter: one command buffer and fence for many runs,
 * each run's writes home when it returns; injected loss is sticky */
TEST_F(vk, reusable_submitter)
{
	size_t align = self->vk->min_import_align, size = 64 * 1024;
	struct hm_vk_buffer host;
	struct hm_vk_pipeline pipe;
	struct hm_vk_cmd c;
	struct { uint64_t a; uint32_t n, pad; } push;
	VkCommandBuffer cb, first = VK_NULL_HANDLE;
	uint32_t *mem;

	mem = mmap(NULL, size + align, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	ASSERT_NE(MAP_FAILED, mem);
	mem = (uint32_t *)(((uintptr_t)mem + align - 1) & ~(align - 1));
	ASSERT_EQ(0, hm_vk_import_host(self->vk, mem, size, &host));
	ASSERT_EQ(0, hm_vk_pipeline_new(self->vk, test_fill_spv,
					sizeof(test_fill_spv) / 4, "main", sizeof(push), &pipe));
	ASSERT_EQ(0, hm_vk_cmd_new(self->vk, &c));
	push.a = host.addr;
	for (uint32_t round = 0; round < 20; round++) {
		push.n = 100 + round * 37;
		memset(mem, 0xee, size);
		ASSERT_EQ(0, hm_vk_cmd_start(self->vk, &c, &cb));
		if (!round)
			first = cb;
		ASSERT_EQ(first, cb);           /* the same buffer every time */
		hm_vk_cmd_dispatch(cb, &pipe, &push, sizeof(push), push.n / 64 + 1, 1, 1);
		hm_vk_cmd_barrier(cb);
		ASSERT_EQ(0, hm_vk_cmd_run(self->vk, &c, 0));
		for (uint32_t i = 0; i < push.n; i++)
			ASSERT_EQ(i * 3, mem[i]);
		ASSERT_EQ(0xeeeeeeee, mem[push.n]);
	}
	ASSERT_EQ(20, c.submissions);
	/* started and abandoned: the next start resets it */
	ASSERT_EQ(0, hm_vk_cmd_start(self->vk, &c, &cb));
	ASSERT_EQ(0, hm_vk_cmd_start(self->vk, &c, &cb));
	hm_vk_cmd_barrier(cb);
	ASSERT_EQ(0, hm_vk_cmd_run(self->vk, &c, 0));
	/* loss is sticky for submitters too */
	hm_test_lose_device_now(true);
	ASSERT_EQ(0, hm_vk_cmd_start(self->vk, &c, &cb));
	ASSERT_EQ(-ENODEV, hm_vk_cmd_run(self->vk, &c, 0));
	hm_test_lose_device_now(false);
	ASSERT_TRUE(self->vk->lost);
	ASSERT_EQ(-ENODEV, hm_vk_cmd_start(self->vk, &c, &cb));
	hm_vk_cmd_free(self->vk, &c);
	hm_vk_cmd_free(self->vk, &c);   /* zeroed: no-op */
	hm_vk_cmd_free(self->vk, NULL);
	hm_vk_pipeline_free(self->vk, &pipe);
	hm_vk_buffer_free(self->vk, &host);
}

/*
 * An emulator's own instance and device, made without hmirror: the
 * validation layer and debug utils on the instance, the required features
 * on the device and, when full, 8-bit storage and int8 as well.
 */
struct own {
	VkInstance inst;
	VkPhysicalDevice phys;
	VkDevice dev;
	VkQueue queue;
	VkPhysicalDeviceVulkan12Features v12;
	VkPhysicalDeviceFeatures2 f2;
	const char *dev_ext[1];
	VkDeviceQueueCreateInfo qci;
	float prio;
	VkDeviceCreateInfo dci;
};

static int own_new(struct own *o, const struct hm_vk *like, bool full)
{
	static const char *layer = "VK_LAYER_KHRONOS_validation";
	static const char *inst_ext[1] = { VK_EXT_DEBUG_UTILS_EXTENSION_NAME };
	VkApplicationInfo app = {
		.sType = VK_STRUCTURE_TYPE_APPLICATION_INFO,
		.apiVersion = VK_API_VERSION_1_2,
	};
	VkInstanceCreateInfo ici = {
		.sType = VK_STRUCTURE_TYPE_INSTANCE_CREATE_INFO,
		.pApplicationInfo = &app,
		.enabledLayerCount = 1,
		.ppEnabledLayerNames = &layer,
		.enabledExtensionCount = 1,
		.ppEnabledExtensionNames = inst_ext,
	};
	VkPhysicalDevice phys[16];
	uint32_t n = 16;

	memset(o, 0, sizeof(*o));
	if (vkCreateInstance(&ici, NULL, &o->inst))
		return -1;
	if (vkEnumeratePhysicalDevices(o->inst, &n, phys) < 0)
		return -1;
	/* the device hm_vk_new() picked for the fixture */
	for (uint32_t i = 0; i < n; i++) {
		VkPhysicalDeviceProperties pp;

		vkGetPhysicalDeviceProperties(phys[i], &pp);
		if (!strcmp(pp.deviceName, like->props.deviceName))
			o->phys = phys[i];
	}
	if (!o->phys)
		return -1;
	o->v12 = (VkPhysicalDeviceVulkan12Features) {
		.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_2_FEATURES,
		.bufferDeviceAddress = VK_TRUE,
		.timelineSemaphore = VK_TRUE,
		.storageBuffer8BitAccess = full,
		.shaderInt8 = full,
	};
	o->f2 = (VkPhysicalDeviceFeatures2) {
		.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FEATURES_2,
		.pNext = &o->v12,
		.features.shaderInt64 = VK_TRUE,
	};
	o->dev_ext[0] = VK_EXT_EXTERNAL_MEMORY_HOST_EXTENSION_NAME;
	o->prio = 1.0f;
	o->qci = (VkDeviceQueueCreateInfo) {
		.sType = VK_STRUCTURE_TYPE_DEVICE_QUEUE_CREATE_INFO,
		.queueFamilyIndex = like->queue_family,
		.queueCount = 1,
		.pQueuePriorities = &o->prio,
	};
	o->dci = (VkDeviceCreateInfo) {
		.sType = VK_STRUCTURE_TYPE_DEVICE_CREATE_INFO,
		.pNext = &o->f2,
		.queueCreateInfoCount = 1,
		.pQueueCreateInfos = &o->qci,
		.enabledExtensionCount = 1,
		.ppEnabledExtensionNames = o->dev_ext,
	};
	if (vkCreateDevice(o->phys, &o->dci, NULL, &o->dev))
		return -1;
	vkGetDeviceQueue(o->dev, like->queue_family, 0, &o->queue);
	return 0;
}

static void own_free(struct own *o)
{
	if (o->dev)
		vkDestroyDevice(o->dev, NULL);
	if (o->inst)
		vkDestroyInstance(o->inst, NULL);
}

static struct hm_vk_params own_params(const struct own *o, const struct hm_vk *like)
{
	return (struct hm_vk_params) {
		.validation = 1, .inst = o->inst, .phys = o->phys, .dev = o->dev,
		.queue = o->queue, .queue_family = like->queue_family,
		.device_info = &o->dci,
	};
}

/* the caller's own device, wrapped: usable, and not destroyed by free */
TEST_F(vk, wrap_callers_device)
{
	struct own o;
	struct hm_vk_params p;
	struct hm_vk_buffer a, b;
	struct hm_vk *w;

	ASSERT_EQ(0, own_new(&o, self->vk, true));
	p = own_params(&o, self->vk);
	ASSERT_EQ(0, hm_vk_new(&p, &w));
	ASSERT_FALSE(w->owns);
	ASSERT_TRUE(w->validation);
	ASSERT_TRUE(w->has_host_import);
	ASSERT_TRUE(w->has_8bit_storage);
	ASSERT_TRUE(w->has_int8);
	ASSERT_EQ(0, hm_vk_buffer_new(w, 4096, HM_VK_MEM_HOST, &a));
	ASSERT_EQ(0, hm_vk_buffer_new(w, 4096, HM_VK_MEM_HOST, &b));
	memset(a.map, 0x3c, 4096);
	ASSERT_EQ(0, hm_vk_copy_sync(w, a.buf, 0, b.buf, 0, 4096));
	ASSERT_EQ(0, memcmp(a.map, b.map, 4096));
	hm_vk_buffer_free(w, &a);
	hm_vk_buffer_free(w, &b);
	EXPECT_EQ(0, hm_vk_validation_count(w));
	hm_vk_free(w);
	/* the original device still works */
	ASSERT_EQ(0, vkDeviceWaitIdle(o.dev));
	/* every handle and the create info are required */
	p.queue = VK_NULL_HANDLE;
	ASSERT_EQ(-EINVAL, hm_vk_new(&p, &w));
	p = own_params(&o, self->vk);
	p.device_info = NULL;
	ASSERT_EQ(-EINVAL, hm_vk_new(&p, &w));
	own_free(&o);
}

/*
 * A device created without storageBuffer8BitAccess and shaderInt8, on a
 * physical device that supports both: hmirror goes by what was enabled.
 * The engine's mirrors (byte stores) are refused, a mirrorless engine and
 * a plain pipeline run without a validation message, and the messenger
 * hmirror hangs on the caller's instance does count a real one.
 */
TEST_F(vk, wrap_enabled_features_only)
{
	struct hm_engine_params ep = { 0 };
	struct hm_vk_buffer host;
	struct hm_vk_pipeline pipe;
	struct hm_engine *e;
	struct { uint64_t a; uint32_t n, pad; } push;
	struct hm_vk_params p;
	struct own o;
	struct hm_vk *w;
	VkBufferCreateInfo bad = {
		.sType = VK_STRUCTURE_TYPE_BUFFER_CREATE_INFO,
		.size = 0,      /* VUID-VkBufferCreateInfo-size-00912 */
		.usage = VK_BUFFER_USAGE_STORAGE_BUFFER_BIT,
	};
	VkBuffer b = VK_NULL_HANDLE;

	if (!self->vk->has_8bit_storage || !self->vk->has_int8)
		SKIP(return, "the device cannot show it: no 8-bit storage at all");
	ASSERT_EQ(0, own_new(&o, self->vk, false));
	p = own_params(&o, self->vk);
	ASSERT_EQ(0, hm_vk_new(&p, &w));
	ASSERT_FALSE(w->has_8bit_storage);
	ASSERT_FALSE(w->has_int8);
	ASSERT_EQ(-EOPNOTSUPP, hm_engine_new(w, &ep, &e));
	ep.flags = HM_ENGINE_NO_MIRRORS;
	ASSERT_EQ(0, hm_engine_new(w, &ep, &e));
	hm_engine_free(e);

	ASSERT_EQ(0, hm_vk_buffer_new(w, 4096, HM_VK_MEM_HOST, &host));
	ASSERT_EQ(0, hm_vk_pipeline_new(w, test_fill_spv, sizeof(test_fill_spv) / 4, "main",
					sizeof(push), &pipe));
	push.a = host.addr;
	push.n = 1000;
	ASSERT_EQ(0, hm_vk_dispatch_sync(w, &pipe, &push, sizeof(push), 1000 / 64 + 1, 1, 1));
	ASSERT_EQ(999u * 3, ((uint32_t *)host.map)[999]);
	hm_vk_pipeline_free(w, &pipe);
	hm_vk_buffer_free(w, &host);
	if (hm_vk_validation_count(w))
		TH_LOG("validation: %s", w->last_message);
	EXPECT_EQ(0, hm_vk_validation_count(w));

	/* negative control: the wrapped device's messages are counted */
	vkCreateBuffer(w->dev, &bad, NULL, &b);
	EXPECT_LT(0, hm_vk_validation_count(w));
	if (b)
		vkDestroyBuffer(w->dev, b, NULL);
	hm_vk_free(w);
	own_free(&o);
}

TEST(errno_mapping)
{
	ASSERT_EQ(0, hm_vk_errno(VK_SUCCESS));
	ASSERT_EQ(0, hm_vk_errno(VK_INCOMPLETE));
	ASSERT_EQ(-ENOMEM, hm_vk_errno(VK_ERROR_OUT_OF_HOST_MEMORY));
	ASSERT_EQ(-ENOSPC, hm_vk_errno(VK_ERROR_OUT_OF_DEVICE_MEMORY));
	ASSERT_EQ(-ENODEV, hm_vk_errno(VK_ERROR_DEVICE_LOST));
	ASSERT_EQ(-EBADF, hm_vk_errno(VK_ERROR_INVALID_EXTERNAL_HANDLE));
	ASSERT_EQ(-EOPNOTSUPP, hm_vk_errno(VK_ERROR_EXTENSION_NOT_PRESENT));
	ASSERT_EQ(-EIO, hm_vk_errno(VK_ERROR_UNKNOWN));
}

/* negative control: the messenger does count a real validation error */
TEST(validation_counts_messages)
{
	struct hm_vk_params p = { .validation = 1 };
	VkBufferCreateInfo bci = {
		.sType = VK_STRUCTURE_TYPE_BUFFER_CREATE_INFO,
		.size = 0,      /* VUID-VkBufferCreateInfo-size-00912 */
		.usage = VK_BUFFER_USAGE_STORAGE_BUFFER_BIT,
	};
	VkBuffer b = VK_NULL_HANDLE;
	struct hm_vk *vk;
	int err = hm_vk_new(&p, &vk);

	if (err == -EOPNOTSUPP || err == -ENODEV)
		SKIP(return, "no Vulkan device with validation layers (%d)", err);
	ASSERT_EQ(0, err);
	ASSERT_EQ(0, hm_vk_validation_count(vk));
	vkCreateBuffer(vk->dev, &bci, NULL, &b);
	ASSERT_LT(0, hm_vk_validation_count(vk));
	if (b)
		vkDestroyBuffer(vk->dev, b, NULL);
	hm_vk_free(vk);
}

/* HM_VK_SPARSE: enabled exactly where the device and a compute family can
 * bind sparse buffers (lavapipe cannot: the device comes up without) */
TEST(sparse_only_where_supported)
{
	struct hm_vk_params p = { .validation = 1, .flags = HM_VK_SPARSE };
	VkPhysicalDeviceFeatures f;
	struct hm_vk *vk;

	if (hm_vk_new(&p, &vk))
		SKIP(return, "no Vulkan device with validation layers");
	vkGetPhysicalDeviceFeatures(vk->phys, &f);
	if (!f.sparseBinding || !f.sparseResidencyBuffer)
		EXPECT_FALSE(vk->sparse);
	TH_LOG("sparse buffers: %s", vk->sparse ? "enabled" : "not offered");
	EXPECT_EQ(0, hm_vk_validation_count(vk));
	hm_vk_free(vk);
	p.flags = 0;
	ASSERT_EQ(0, hm_vk_new(&p, &vk));
	EXPECT_FALSE(vk->sparse);	/* never without the flag */
	hm_vk_free(vk);
}

TEST(bad_device_choice)
{
	struct hm_vk_params p = { .device = "no-such-device-anywhere", .validation = 0 };
	struct hm_vk *vk = (void *)1;

	ASSERT_EQ(-ENODEV, hm_vk_new(&p, &vk));
	ASSERT_EQ(NULL, vk);
	p.device = "99";
	ASSERT_EQ(-ENODEV, hm_vk_new(&p, &vk));
	hm_vk_free(NULL);
}

TEST_HARNESS_MAIN
