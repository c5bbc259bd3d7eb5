# SPDX-License-Identifier: GPL-2.0
# tools/examples: small programs an emulator author reads first
# (Documentation/userspace-api.rst).  make check builds and runs them.

# buffer-cache: guest memory, a translated kernel, CPU writes during
# dispatches, the emulator's own dirty consumer keeping a cache of its own,
# the engine's work recorded into the program's own command buffer and
# completed through its own timeline semaphore
$(B)/gen/examples/buffer-cache_linked.spv: tools/examples/buffer-cache.comp \
		lib/include/hmirror/lookup.glsl $(B)/bin/hmirror-link | $(DEPS)
	@mkdir -p $(dir $@)
	$(GLSLANG) -V --target-env vulkan1.2 --quiet -Ilib/include -o $@.glsl.spv $<
	$(B)/bin/hmirror-link -o $@ $@.glsl.spv
	rm -f $@.glsl.spv
$(B)/include/examples/buffer-cache.spv.h: $(B)/gen/examples/buffer-cache_linked.spv
	@mkdir -p $(dir $@)
	$(demo_spv_header) $< example_kernel_spv > $@
$(O)/tools/examples/buffer-cache.o: $(B)/include/examples/buffer-cache.spv.h

$(B)/bin/example-buffer-cache: $(O)/tools/examples/buffer-cache.o $(B)/lib/libhmirror.a
	@mkdir -p $(dir $@)
	$(CC) -o $@ $< $(B)/lib/libhmirror.a $(LDFLAGS) $(sort $(LIB_LIBS))

NATIVE_TESTS += $(B)/bin/example-buffer-cache

# hmirror-bench stream (tools/bench/stream.c) runs the same kernel
$(O)/tools/bench/stream.o: $(B)/include/examples/buffer-cache.spv.h
HMIRROR_BENCH_OBJS += $(O)/tools/bench/stream.o $(ENGINE_OBJS) $(VKCTX_OBJS) $(TABLE_OBJS) \
	$(WATCH_OBJS)
HMIRROR_BENCH_LIBS += -lvulkan
