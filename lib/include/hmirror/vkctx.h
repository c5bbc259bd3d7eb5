/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * hmirror Vulkan context: instance, device, memory types, buffers,
 * host-pointer import, compute pipelines, one-shot submission and reusable
 * submitters (struct hm_vk_cmd).
 *
 * Either hm_vk_new() creates the instance and device itself (lavapipe
 * where there is no GPU), or it wraps the caller's handles (params.dev
 * set), the way the Vulkan Memory Allocator takes yours.  A wrapped device
 * comes with the VkDeviceCreateInfo it was created with
 * (params.device_info): hmirror uses exactly the features and extensions
 * that names, never what the device merely supports.  It must have
 * enabled the required features below; the engine's mirrors also need
 * storageBuffer8BitAccess and shaderInt8 (their copy-back stores single
 * bytes), host-pointer import needs VK_EXT_external_memory_host.
 *
 * Every function returns 0 or a negative errno; Vulkan results are mapped
 * by hm_vk_errno() alone.  Nothing here logs.
 */
#ifndef HMIRROR_VKCTX_H
#define HMIRROR_VKCTX_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <pthread.h>
#include <vulkan/vulkan.h>

#ifdef __cplusplus
extern "C" {
#endif

/*
 * Required of every device: Vulkan 1.2, bufferDeviceAddress, shaderInt64,
 * timelineSemaphore, VK_EXT_external_memory_host (unless
 * HM_VK_NO_HOST_IMPORT).  Enabled when present: storageBuffer8BitAccess,
 * storageBuffer16BitAccess, shaderInt8, shaderInt16, vulkanMemoryModel
 * (+ device scope), VK_EXT_external_memory_dma_buf,
 * VK_KHR_external_semaphore_fd.
 */
enum hm_vk_flags {
	HM_VK_NO_HOST_IMPORT = 1u << 0, /* accept a device without VK_EXT_external_memory_host */
	/* enable sparseBinding + sparseResidencyBuffer (+ sparseResidencyAliased
	 * where present) where the device and a compute queue family have them
	 * (hm_vk.sparse says so): the engine's mirror window is then bound
	 * sparse (engine.h) */
	HM_VK_SPARSE = 1u << 1,
};

struct hm_vk_params {
	/* Device choice: a decimal index into the physical devices, or a
	 * substring of the device name.  NULL: env HMIRROR_DEVICE; unset:
	 * the first discrete GPU, else integrated, virtual, then CPU. */
	const char *device;
	/* -1: env HMIRROR_VALIDATION=1 enables; 0: off; 1: on.  With
	 * validation on, VK_LAYER_KHRONOS_validation is enabled and a
	 * VK_EXT_debug_utils messenger counts every warning and error
	 * message in hm_vk.validation_errors (tests assert it stays 0). */
	int validation;
	uint32_t flags;         /* enum hm_vk_flags */
	/* Wrap the caller's objects instead of creating them (inst, phys,
	 * dev, queue and device_info set, else -EINVAL; hm_vk_free() then
	 * destroys only what hmirror created).  device_info is what dev was
	 * created with; it is read during hm_vk_new() only.  Validation
	 * (above) on a wrapped device counts the messages of a messenger
	 * on inst, which must have enabled VK_EXT_debug_utils
	 * (-EOPNOTSUPP otherwise); enabling the layer is the caller's. */
	VkInstance inst;
	VkPhysicalDevice phys;
	VkDevice dev;
	VkQueue queue;
	uint32_t queue_family;
	const VkDeviceCreateInfo *device_info;
};

struct hm_vk {
	VkInstance inst;
	VkPhysicalDevice phys;
	VkDevice dev;
	VkQueue queue;
	uint32_t queue_family;
	VkPhysicalDeviceMemoryProperties mem;
	VkPhysicalDeviceProperties props;
	uint64_t min_import_align;      /* minImportedHostPointerAlignment, 0 = no import */
	uint64_t max_alloc;             /* maxMemoryAllocationSize */
	uint64_t max_buffer;            /* maxBufferSize (maintenance4) or max_alloc */
	bool validation;
	unsigned validation_errors;     /* messages seen by the messenger (atomic) */
	char last_message[512];         /* text of the last one, for test output */
	bool has_host_import;
	bool has_dmabuf_import;
	bool has_8bit_storage;          /* storageBuffer8BitAccess enabled */
	bool has_int8;                  /* shaderInt8 enabled */
	bool sparse;                    /* HM_VK_SPARSE asked and enabled */
	bool sparse_aliased;            /* ... and sparseResidencyAliased with it */
	bool owns;                      /* instance/device created by hm_vk_new() */
	bool lost;                      /* a submission returned VK_ERROR_DEVICE_LOST */
	double timestamp_period_ns;
	uint32_t timestamp_valid_bits;

	/* private */
	VkDebugUtilsMessengerEXT messenger;
	VkCommandPool pool;
	pthread_mutex_t lock;           /* protects pool and queue (hm_vk_queue_lock()) */
	PFN_vkGetMemoryHostPointerPropertiesEXT get_host_ptr_props;
	PFN_vkDestroyDebugUtilsMessengerEXT destroy_messenger;

	/* public, appended (hm_vk_new() allocates the struct): the device
	 * has VK_KHR_external_semaphore_fd enabled */
	bool has_semaphore_fd;

	/* private, appended: the side queue (hm_vk_cmd_run_side()), a second
	 * queue of queue_family where hm_vk_new() created the device and the
	 * family has one (else VK_NULL_HANDLE: the side runs on queue), and
	 * the timeline its submissions signal (side_value, the last) and the
	 * next submission to queue waits for (side_waited: already waited) */
	VkQueue side;
	VkSemaphore side_sem;
	uint64_t side_value, side_waited;
};

int  hm_vk_new(const struct hm_vk_params *p, struct hm_vk **ret);
void hm_vk_free(struct hm_vk *vk);

/* VkResult -> 0 or negative errno (the one mapping of the library):
 * OUT_OF_HOST_MEMORY -ENOMEM, OUT_OF_DEVICE_MEMORY -ENOSPC, DEVICE_LOST
 * -ENODEV, TIMEOUT -ETIMEDOUT, NOT_READY -EAGAIN, *_NOT_PRESENT and
 * FORMAT_NOT_SUPPORTED -EOPNOTSUPP, INCOMPATIBLE_DRIVER -ENXIO,
 * INVALID_EXTERNAL_HANDLE -EBADF, TOO_MANY_OBJECTS -EMFILE,
 * MEMORY_MAP_FAILED -EFAULT, others -EIO; positive successes 0. */
int  hm_vk_errno(VkResult r);
const char *hm_vk_result_name(VkResult r);

/* Messages counted so far (validation). */
unsigned hm_vk_validation_count(const struct hm_vk *vk);

/* ---- memory types ------------------------------------------------------ */
enum hm_vk_mem {
	HM_VK_MEM_DEVICE = 0,   /* device-local, preferably not host-visible */
	HM_VK_MEM_HOST,         /* host-visible coherent, preferably cached, not device-local */
	HM_VK_MEM_DEVICE_HOST,  /* device-local + host-visible coherent (mapped) */
};
/* Best memory type in type_bits for kind; -ENOENT if none. */
int hm_vk_memory_type(const struct hm_vk *vk, uint32_t type_bits, enum hm_vk_mem kind,
		      uint32_t *ret_index);
/* Size of the heap that holds memory type index (bytes). */
uint64_t hm_vk_heap_size(const struct hm_vk *vk, uint32_t type_index);

/* ---- buffers ------------------------------------------------------------ */
struct hm_vk_buffer {
	VkBuffer buf;
	VkDeviceMemory mem;
	VkDeviceSize size;
	VkDeviceAddress addr;   /* device address of byte 0 */
	void *map;              /* host mapping (host-visible kinds, imports) */
	uint32_t mem_type;
	bool imported;
};
/* Usage is always storage | transfer src/dst | shader device address | indirect. */
int  hm_vk_buffer_new(struct hm_vk *vk, VkDeviceSize size, enum hm_vk_mem kind,
		      struct hm_vk_buffer *ret);
/* Import [ptr, ptr+size) of host memory as a buffer with a device address.
 * ptr and size must be multiples of min_import_align (-EINVAL otherwise);
 * -EOPNOTSUPP without the extension; the driver's refusal is returned as
 * hm_vk_errno() of its result (typically -EBADF). ret->map = ptr. */
int  hm_vk_import_host(struct hm_vk *vk, void *ptr, VkDeviceSize size,
		       struct hm_vk_buffer *ret);
void hm_vk_buffer_free(struct hm_vk *vk, struct hm_vk_buffer *b); /* NULL or zeroed ok */

/* ---- compute pipelines (no descriptor sets: device addresses only) ----- */
struct hm_vk_pipeline {
	VkShaderModule module;
	VkPipelineLayout layout;
	VkPipeline pipe;
	uint32_t push_bytes;
};
int  hm_vk_pipeline_new(struct hm_vk *vk, const uint32_t *spirv, size_t nr_words,
			const char *entry, uint32_t push_bytes,
			struct hm_vk_pipeline *ret);
/* The same through a pipeline cache of the caller's (VK_NULL_HANDLE: none). */
int  hm_vk_pipeline_new_cached(struct hm_vk *vk, VkPipelineCache cache, const uint32_t *spirv,
			       size_t nr_words, const char *entry, uint32_t push_bytes,
			       struct hm_vk_pipeline *ret);
void hm_vk_pipeline_free(struct hm_vk *vk, struct hm_vk_pipeline *p);

/* ---- one-shot submission ------------------------------------------------ */
/* A primary command buffer from the context's pool, begun (one-time). */
int  hm_vk_cmd_begin(struct hm_vk *vk, VkCommandBuffer *ret);
/* End, submit, wait (timeout_ns, 0 = 10 s), free.  -ENODEV once lost. */
int  hm_vk_submit_wait(struct hm_vk *vk, VkCommandBuffer cb, uint64_t timeout_ns);
/* Free a begun command buffer without submitting it (error paths). */
void hm_vk_cmd_discard(struct hm_vk *vk, VkCommandBuffer cb);
/* Record a dispatch: bind, push constants, dispatch. */
void hm_vk_cmd_dispatch(VkCommandBuffer cb, const struct hm_vk_pipeline *p,
			const void *push, uint32_t push_bytes,
			uint32_t gx, uint32_t gy, uint32_t gz);
/* Full compute/transfer/host memory barrier. */
void hm_vk_cmd_barrier(VkCommandBuffer cb);
/* Convenience: copy size bytes, submit and wait. */
int  hm_vk_copy_sync(struct hm_vk *vk, VkBuffer src, VkDeviceSize src_off,
		     VkBuffer dst, VkDeviceSize dst_off, VkDeviceSize size);
/* Convenience: one dispatch, submit and wait. */
int  hm_vk_dispatch_sync(struct hm_vk *vk, const struct hm_vk_pipeline *p,
			 const void *push, uint32_t push_bytes,
			 uint32_t gx, uint32_t gy, uint32_t gz);

/* ---- reusable submission ---------------------------------------------- */
/*
 * A submitter: one command buffer from its own pool (created with
 * VK_COMMAND_POOL_CREATE_RESET_COMMAND_BUFFER_BIT) and one fence, created
 * once by hm_vk_cmd_new() and reset for every submission, so that a
 * submission allocates and frees nothing (NVIDIA 580, H200: a command
 * buffer and fence per submission cost 0.56 - 1.1 ms, reused ones 14 -
 * 48 us).  One thread at a time uses a submitter (its pool is its own).
 *
 *   hm_vk_cmd_start(vk, c, &cb);  record into cb;  hm_vk_cmd_run(vk, c, t);
 *
 * hm_vk_cmd_run() ends, submits, waits (the fence polled for
 * HMIRROR_FENCE_SPIN_US as hm_vk_submit_wait()), and honours lost the
 * same way.  A started buffer that is not run
 * needs nothing: the next start resets it.
 */
struct hm_vk_cmd {
	VkCommandPool pool;
	VkCommandBuffer cb;
	VkFence fence;
	uint64_t submissions;   /* run so far */
};
int  hm_vk_cmd_new(struct hm_vk *vk, struct hm_vk_cmd *ret);
void hm_vk_cmd_free(struct hm_vk *vk, struct hm_vk_cmd *c);     /* NULL or zeroed ok */
/* Reset and begin the command buffer (one-time submit). -ENODEV once lost. */
int  hm_vk_cmd_start(struct hm_vk *vk, struct hm_vk_cmd *c, VkCommandBuffer *ret_cb);
/* End, submit, wait (timeout_ns, 0 = 10 s).  -ENODEV once lost. */
int  hm_vk_cmd_run(struct hm_vk *vk, struct hm_vk_cmd *c, uint64_t timeout_ns);
/*
 * hm_vk_cmd_run() on the side queue: work that runs beside what vk->queue
 * runs (the engine's uploads during a caller's dispatch, engine.c), where
 * the device has a second queue of the family; else on vk->queue, after
 * what is queued there.  The next submission to vk->queue waits for it
 * on the device (a timeline semaphore), so what it wrote is visible there.
 */
int  hm_vk_cmd_run_side(struct hm_vk *vk, struct hm_vk_cmd *c, uint64_t timeout_ns);

/*
 * Non-blocking: end, submit waiting for sync->wait_sem reaching wait_value
 * and signalling signal_sem with signal_value (timeline semaphores; either
 * VK_NULL_HANDLE: none; sync NULL: neither), and the submitter's fence.
 * hm_vk_cmd_wait() waits for that fence (timeout_ns; 0 polls once) and
 * resets it: 0, -EAGAIN while it is not signalled (call again), -ENODEV.
 * A submitter submitted this way must be waited for before its next start.
 */
struct hm_vk_sync {
	VkSemaphore wait_sem;
	uint64_t wait_value;
	VkSemaphore signal_sem;
	uint64_t signal_value;
};
int  hm_vk_cmd_submit(struct hm_vk *vk, struct hm_vk_cmd *c, const struct hm_vk_sync *sync);
int  hm_vk_cmd_wait(struct hm_vk *vk, struct hm_vk_cmd *c, uint64_t timeout_ns);
/*
 * After hm_vk_cmd_submit(): what hm_vk_cmd_run() does after its
 * submission: poll, wait (timeout_ns, 0 = 10 s), reset the fence; on a
 * timeout the queue is idled first.  0, -ETIMEDOUT, -ENODEV once lost.
 */
int  hm_vk_cmd_finish(struct hm_vk *vk, struct hm_vk_cmd *c, uint64_t timeout_ns);

/*
 * The queue lock: every submission of hmirror's to vk->queue (and its
 * command pool) is made under it.  A caller that submits to the same
 * queue itself (a wrapped device's queue: Vulkan requires queue access
 * to be externally synchronised) takes it around its own vkQueueSubmit,
 * vkQueueBindSparse, vkQueuePresentKHR or vkQueueWaitIdle.  It is
 * recursive: hmirror may be called with it held.  hmirror holds it for a
 * submission only (and to idle the queue after a wait that timed out).
 */
void hm_vk_queue_lock(struct hm_vk *vk);
void hm_vk_queue_unlock(struct hm_vk *vk);

#ifdef __cplusplus
}
#endif
#endif /* HMIRROR_VKCTX_H */
