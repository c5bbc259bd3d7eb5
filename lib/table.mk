# SPDX-License-Identifier: GPL-2.0
# Device-address table, written marks and the SPIR-V lookup helper (D969).
# Documentation/table.rst.

SPIRV_AS ?= spirv-as
SPIRV_LINK ?= spirv-link
SPIRV_VAL ?= spirv-val

TABLE_OBJS := $(O)/lib/table.o $(O)/lib/marks.o $(O)/lib/lookup_spirv.o $(O)/lib/lookup_link.o
LIB_OBJS += $(TABLE_OBJS)
# The Vulkan context (VKCTX_OBJS of lib/engine/engine.mk, which is read
# after this fragment, so named here directly).
TABLE_VK_OBJS := $(O)/lib/vkctx.o

# Build-time generator of the linkable helper (and of embedded SPIR-V).
HM_LOOKUP_GEN := $(B)/tools/hm-lookup-gen
$(HM_LOOKUP_GEN): $(O)/lib/lookup_gen.o $(O)/lib/lookup_spirv.o
	@mkdir -p $(dir $@)
	$(CC) $(LDFLAGS) -o $@ $^

HM_LOOKUP_SPV := $(B)/share/hmirror/hmirror-lookup.spv
$(HM_LOOKUP_SPV): $(HM_LOOKUP_GEN)
	@mkdir -p $(dir $@)
	$(HM_LOOKUP_GEN) $@
SHARE += $(HM_LOOKUP_SPV)

# ---- tests -----------------------------------------------------------------
# The probe program imports hm_lookup and is linked against the library
# module with spirv-link (the linkable form), then embedded.
$(B)/gen/table/lookup_probe.spv: selftests/table/lookup_probe.spvasm | $(DEPS)
	@mkdir -p $(dir $@)
	$(SPIRV_AS) --target-env spv1.5 -o $@ $<
$(B)/gen/table/lookup_probe_linked.spv: $(B)/gen/table/lookup_probe.spv $(HM_LOOKUP_SPV)
	$(SPIRV_LINK) --target-env vulkan1.2 -o $@ $^
$(B)/gen/table/lookup_probe_linked.c: $(B)/gen/table/lookup_probe_linked.spv $(HM_LOOKUP_GEN)
	$(HM_LOOKUP_GEN) -e hm_test_lookup_probe_spv $< $@
# the same probe unlinked: the test links it at run time against every
# emission variant's library module (spirv-link)
$(B)/gen/table/lookup_probe_unlinked.c: $(B)/gen/table/lookup_probe.spv $(HM_LOOKUP_GEN)
	$(HM_LOOKUP_GEN) -e hm_test_lookup_probe_unlinked_spv $< $@

$(B)/bin/test-table: $(O)/selftests/table/table_test.o $(TABLE_OBJS)
	@mkdir -p $(dir $@)
	$(CC) $(LDFLAGS) -o $@ $^

$(O)/selftests/table/lookup_vk_test.o: CFLAGS += -DHM_SPIRV_VAL='"$(SPIRV_VAL)"' \
	-DHM_SPIRV_LINK='"$(SPIRV_LINK)"'
$(O)/selftests/table/table_test.o: CFLAGS += -DHM_SPIRV_VAL='"$(SPIRV_VAL)"'
$(B)/bin/test-lookup-vk: $(O)/selftests/table/lookup_vk_test.o \
		$(O)/$(B)/gen/table/lookup_probe_linked.o \
		$(O)/$(B)/gen/table/lookup_probe_unlinked.o $(TABLE_OBJS) $(TABLE_VK_OBJS)
	@mkdir -p $(dir $@)
	$(CC) $(LDFLAGS) -o $@ $^ -lvulkan

# The benchmark's programs, checked (valid, chains end where they should):
# the test links the bench's own object (tools/bench/lookup_bench.h).
$(B)/bin/test-lookup-bench: $(O)/selftests/table/bench_programs_test.o $(O)/tools/bench/lookup.o \
		$(O)/tools/bench/common.o $(TABLE_OBJS) $(TABLE_VK_OBJS)
	@mkdir -p $(dir $@)
	$(CC) $(LDFLAGS) -o $@ $^ -lvulkan -lm

NATIVE_TESTS += $(B)/bin/test-table $(B)/bin/test-lookup-vk $(B)/bin/test-lookup-bench

# ---- benchmark: hmirror-bench lookup (its SPIR-V is built in C at run time) --
HMIRROR_BENCH_OBJS += $(O)/tools/bench/lookup.o $(TABLE_OBJS) $(TABLE_VK_OBJS)
HMIRROR_BENCH_LIBS += -lvulkan -lm
$(O)/selftests/table/%.o: CFLAGS += -Wno-sign-compare
