/* SPDX-License-Identifier: GPL-2.0 */
/*
 * hmirror-bench workload's CUDA modes: tools/bench/workload_uvm.cu, built
 * by nvcc where it is installed (make bench-uvm; never by make check) into
 * hmirror-bench-uvm.so beside hmirror-bench, which loads it at run time
 * (dlopen), so that one hmirror-bench runs on machines with and without
 * CUDA.
 */
#ifndef HMIRROR_BENCH_WORKLOAD_H
#define HMIRROR_BENCH_WORKLOAD_H

#include <stddef.h>
#include <stdint.h>

#define WL_UVM_VERSION 1

enum wl_uvm_kind {
	WL_UVM_MANAGED = 0,	/* cudaMallocManaged, read-mostly advice + prefetch */
	WL_UVM_PAGEABLE,	/* plain host memory, read by the GPU through HMM */
};

struct wl_uvm_launch {
	uint64_t nodes, prims, rays, hits;	/* host = device addresses */
	uint32_t first_ray, nr_rays;
};

struct wl_uvm_ops {
	uint32_t version;	/* WL_UVM_VERSION */
	/* 0, or -errno with why in msg; *ret_pageable: the device reads
	 * pageable host memory (cudaDevAttrPageableMemoryAccess) */
	int  (*open)(char *msg, size_t len, int *ret_pageable, char *name, size_t name_len);
	/* kind's memory of size bytes (PAGEABLE: mmap'ed here, registered nowhere) */
	int  (*alloc)(enum wl_uvm_kind kind, uint64_t size, void **ret);
	void (*free)(enum wl_uvm_kind kind, void *p, uint64_t size);
	/* advise [p, p + read_mostly) read-mostly, prefetch [p, p + size) to
	 * the device; what the driver refused is said in msg (not fatal) */
	int  (*prepare)(enum wl_uvm_kind kind, void *p, uint64_t size, uint64_t read_mostly,
			char *msg, size_t len);
	int  (*launch)(const struct wl_uvm_launch *l);	/* asynchronous */
	int  (*wait)(double *ret_gpu_ms);		/* the last launch */
	void (*close)(void);
};

/* the one symbol of hmirror-bench-uvm.so */
const struct wl_uvm_ops *hm_bench_uvm_ops(void);

#endif /* HMIRROR_BENCH_WORKLOAD_H */
