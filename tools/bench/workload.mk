# SPDX-License-Identifier: GPL-2.0
# hmirror-bench workload (tools/bench/workload.c): the demo's job in every
# mode side by side.  Its CUDA modes live in hmirror-bench-uvm.so, built only
# by `make bench-uvm` where nvcc is installed (never by all or check).

$(O)/tools/bench/workload.o: $(B)/include/demo/traverse.spv.h $(B)/include/demo/traverse_raw.spv.h \
		$(B)/include/demo/traverse_spec.spv.h
HMIRROR_BENCH_OBJS += $(O)/tools/bench/workload.o $(O)/tools/demo/scene.o \
	$(O)/tools/bench/dispatch.o $(CLIENT_OBJS) $(ENGINE_OBJS) $(TABLE_OBJS) \
	$(VKCTX_OBJS) $(WATCH_OBJS)
HMIRROR_BENCH_LIBS += -lvulkan -lm -ldl

NVCC ?= nvcc
NVCC_ARCH ?= -gencode arch=compute_90,code=sm_90 -gencode arch=compute_90,code=compute_90
$(B)/bin/hmirror-bench-uvm.so: tools/bench/workload_uvm.cu tools/bench/workload.h
	@mkdir -p $(dir $@)
	$(NVCC) -O3 $(NVCC_ARCH) -shared -Xcompiler -fPIC -cudart static -o $@ $<
bench-uvm: $(B)/bin/hmirror-bench-uvm.so
.PHONY: bench-uvm

# make check: every mode but the CUDA ones, verified, on the device at hand
$(B)/bin/test-workload: tools/bench/test-workload.sh $(B)/bin/hmirror-bench $(B)/bin/hmirrord
	@mkdir -p $(dir $@)
	install -m 755 tools/bench/test-workload.sh $@
NATIVE_TESTS += $(B)/bin/test-workload
