# SPDX-License-Identifier: GPL-2.0
# hmirror-bench mirror (tools/bench/mirror.c): accesses home vs mirrored,
# upload and copy-back throughput.  Its device programs are SPIR-V assembly
# linked with the lookup helper at build time and embedded in the binary.

$(B)/gen/bench/mirror.spv: tools/bench/mirror.spvasm | $(DEPS)
	@mkdir -p $(dir $@)
	$(SPIRV_AS) --target-env spv1.5 -o $@ $<
$(B)/gen/bench/mirror_linked.spv: $(B)/gen/bench/mirror.spv $(HM_LOOKUP_SPV)
	$(SPIRV_LINK) --target-env vulkan1.2 -o $@ $^
	$(SPIRV_VAL) --target-env vulkan1.2 $@
$(B)/gen/bench/mirror_linked.c: $(B)/gen/bench/mirror_linked.spv $(HM_LOOKUP_GEN)
	$(HM_LOOKUP_GEN) -e hm_bench_mirror_spv $< $@

HMIRROR_BENCH_OBJS += $(O)/tools/bench/mirror.o $(O)/$(B)/gen/bench/mirror_linked.o \
	$(ENGINE_OBJS) $(VKCTX_OBJS) $(TABLE_OBJS) $(WATCH_OBJS)
HMIRROR_BENCH_LIBS += -lvulkan
