// SPDX-License-Identifier: GPL-2.0
/*
 * hmirror-bench workload's CUDA modes (workload.h): the demo's walk
 * (tools/demo/traverse.comp, line for line) as a CUDA kernel over memory
 * the CUDA driver keeps coherent itself: cudaMallocManaged advised
 * read-mostly and prefetched (NVIDIA's own answer to mirroring read-mostly
 * data: read duplication, dropped on a CPU write), or plain host memory
 * read through HMM where the device reports pageable memory access.
 * Built by nvcc only (make bench-uvm), loaded by hmirror-bench at run time.
 */
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <sys/mman.h>

#include <cuda_runtime.h>

extern "C" {
#include "workload.h"
}

#define END 0xffffffffu
#define MAX_VISITS 65536

struct node { unsigned x0, y0, x1, y1, zmin, left, count, escape, scratch, pad[3]; };
struct prim { unsigned x0, y0, x1, y1, z, id, scratch, pad; };

__global__ void walk(const uint4 *__restrict__ nodes, const uint4 *__restrict__ prims,
		     const uint2 *__restrict__ rays, unsigned *hits, unsigned first, unsigned n)
{
	unsigned i = blockIdx.x * blockDim.x + threadIdx.x;

	if (i >= n)
		return;
	unsigned ray = first + i;
	uint2 xy = rays[ray];
	unsigned best_z = 0xffffffffu, best_id = 0xffffffffu, visits = 0, err = 0, ni = 0;

	while (ni != END) {
		/* a node is 48 bytes: three uint4, the first two read */
		uint4 box = nodes[(size_t)ni * 3], b = nodes[(size_t)ni * 3 + 1];

		if (++visits > MAX_VISITS) {
			err = 1;
			break;
		}
		if (xy.x < box.x || xy.x >= box.z || xy.y < box.y || xy.y >= box.w || b.x > best_z) {
			ni = b.w;
			continue;
		}
		if (b.z == 0) {
			ni = b.y;
			continue;
		}
		for (unsigned k = 0; k < b.z; k++) {
			uint4 pbox = prims[(size_t)(b.y + k) * 2], pz = prims[(size_t)(b.y + k) * 2 + 1];

			if (xy.x < pbox.x || xy.x >= pbox.z || xy.y < pbox.y || xy.y >= pbox.w)
				continue;
			if (pz.x < best_z || (pz.x == best_z && pz.y < best_id)) {
				best_z = pz.x;
				best_id = pz.y;
			}
		}
		ni = b.w;
	}
	hits[(size_t)ray * 4] = best_id;
	hits[(size_t)ray * 4 + 1] = best_z;
	hits[(size_t)ray * 4 + 2] = visits | (err << 31);
}

static int dev;
static cudaStream_t stream;
static cudaEvent_t ev0, ev1;

static int cuda_err(cudaError_t e)
{
	return e == cudaSuccess ? 0 : e == cudaErrorMemoryAllocation ? -ENOMEM : -EIO;
}

static int uvm_open(char *msg, size_t len, int *ret_pageable, char *name, size_t name_len)
{
	cudaDeviceProp p;
	int n = 0, v = 0, cma = 0;
	cudaError_t e = cudaGetDeviceCount(&n);

	if (e != cudaSuccess || !n) {
		snprintf(msg, len, "no CUDA device (%s)", cudaGetErrorString(e));
		return -ENODEV;
	}
	cudaGetDeviceProperties(&p, dev);
	cudaDeviceGetAttribute(&v, cudaDevAttrPageableMemoryAccess, dev);
	cudaDeviceGetAttribute(&cma, cudaDevAttrConcurrentManagedAccess, dev);
	*ret_pageable = v;
	snprintf(name, name_len, "%s (CUDA %d.%d, pageable access %d, concurrent managed %d)",
		 p.name, CUDART_VERSION / 1000, CUDART_VERSION % 1000 / 10, v, cma);
	if (!cma) {
		snprintf(msg, len, "%s: no concurrent managed access (the CPU cannot write "
			 "while a kernel runs)", p.name);
		return -EOPNOTSUPP;
	}
	if (cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking) != cudaSuccess ||
	    cudaEventCreate(&ev0) != cudaSuccess || cudaEventCreate(&ev1) != cudaSuccess) {
		snprintf(msg, len, "stream/events: %s", cudaGetErrorString(cudaGetLastError()));
		return -EIO;
	}
	return 0;
}

static int uvm_alloc(enum wl_uvm_kind kind, uint64_t size, void **ret)
{
	if (kind == WL_UVM_MANAGED)
		return cuda_err(cudaMallocManaged(ret, size, cudaMemAttachGlobal));
	void *p = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

	if (p == MAP_FAILED)
		return -ENOMEM;
	*ret = p;
	return 0;
}

static void uvm_free(enum wl_uvm_kind kind, void *p, uint64_t size)
{
	if (kind == WL_UVM_MANAGED)
		cudaFree(p);
	else
		munmap(p, size);
}

static cudaMemLocation gpu_loc(void)
{
	cudaMemLocation l;

	memset(&l, 0, sizeof(l));
	l.type = cudaMemLocationTypeDevice;
	l.id = dev;
	return l;
}

static int uvm_prepare(enum wl_uvm_kind kind, void *p, uint64_t size, uint64_t read_mostly,
		       char *msg, size_t len)
{
	cudaError_t a, f;

	a = cudaMemAdvise(p, read_mostly, cudaMemAdviseSetReadMostly, gpu_loc());
	f = cudaMemPrefetchAsync(p, size, gpu_loc(), 0, stream);
	if (f == cudaSuccess)
		f = cudaStreamSynchronize(stream);
	cudaGetLastError();	/* a refusal above is said, not sticky */
	snprintf(msg, len, "read-mostly advice: %s; prefetch: %s", cudaGetErrorString(a),
		 cudaGetErrorString(f));
	return 0;
}

static int uvm_launch(const struct wl_uvm_launch *l)
{
	unsigned blocks = (l->nr_rays + 63) / 64;

	cudaEventRecord(ev0, stream);
	walk<<<blocks, 64, 0, stream>>>((const uint4 *)(uintptr_t)l->nodes,
				       (const uint4 *)(uintptr_t)l->prims,
				       (const uint2 *)(uintptr_t)l->rays,
				       (unsigned *)(uintptr_t)l->hits, l->first_ray, l->nr_rays);
	cudaEventRecord(ev1, stream);
	return cuda_err(cudaGetLastError());
}

static int uvm_wait(double *ret_gpu_ms)
{
	float ms = 0;
	cudaError_t e = cudaEventSynchronize(ev1);

	if (e == cudaSuccess)
		e = cudaEventElapsedTime(&ms, ev0, ev1);
	*ret_gpu_ms = ms;
	return cuda_err(e);
}

static void uvm_close(void)
{
	cudaEventDestroy(ev0);
	cudaEventDestroy(ev1);
	cudaStreamDestroy(stream);
}

static const struct wl_uvm_ops ops = {
	WL_UVM_VERSION, uvm_open, uvm_alloc, uvm_free, uvm_prepare, uvm_launch, uvm_wait,
	uvm_close,
};

extern "C" const struct wl_uvm_ops *hm_bench_uvm_ops(void)
{
	return &ops;
}
