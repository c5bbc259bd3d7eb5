# SPDX-License-Identifier: GPL-2.0
# Engine and Vulkan-context tests: lavapipe, validation layers on.


$(B)/include/engine/test-%.spv.h: selftests/engine/%.comp | $(DEPS)
	@mkdir -p $(dir $@)
	$(GLSLANG) -V --target-env vulkan1.2 --quiet --vn test_$(subst -,_,$*)_spv -o $@ $<

$(O)/selftests/engine/vkctx_test.o: $(B)/include/engine/test-fill.spv.h

$(O)/selftests/engine/%.o: CFLAGS += -Wno-sign-compare

# Test programs: SPIR-V assembly importing hm_lookup, linked with the
# helper library module by spirv-link, embedded as C arrays.
$(B)/gen/engine/%.spv: selftests/engine/%.spvasm | $(DEPS)
	@mkdir -p $(dir $@)
	$(SPIRV_AS) --target-env spv1.5 -o $@ $<
$(B)/gen/engine/%_linked.spv: $(B)/gen/engine/%.spv $(HM_LOOKUP_SPV)
	$(SPIRV_LINK) --target-env vulkan1.2 -o $@ $^
	$(SPIRV_VAL) --target-env vulkan1.2 $@
$(B)/gen/engine/%_linked.c: $(B)/gen/engine/%_linked.spv $(HM_LOOKUP_GEN)
	$(HM_LOOKUP_GEN) -e hm_test_$*_spv $< $@

ENGINE_TEST_DEPS := $(ENGINE_OBJS) $(VKCTX_OBJS) $(O)/lib/table.o $(O)/lib/marks.o \
	$(O)/lib/lookup_spirv.o $(WATCH_OBJS)

# the vkctx test wraps devices and checks what the engine makes of them
$(B)/bin/test-vkctx: $(O)/selftests/engine/vkctx_test.o $(ENGINE_TEST_DEPS)
	@mkdir -p $(dir $@)
	$(CC) -o $@ $^ $(LDFLAGS) -lvulkan

NATIVE_TESTS += $(B)/bin/test-vkctx

$(B)/bin/test-engine: $(O)/selftests/engine/engine_test.o $(O)/$(B)/gen/engine/rw_linked.o \
		$(ENGINE_TEST_DEPS)
	@mkdir -p $(dir $@)
	$(CC) -o $@ $^ $(LDFLAGS) -lvulkan

NATIVE_TESTS += $(B)/bin/test-engine

# The same tests in the VM, with the module's guards (kmod variants, and
# the single-rule tests on the kmod backend); lavapipe runs in the guest.
$(O)/selftests/engine/engine_test_vm.o: selftests/engine/engine_test.c | $(DEPS) $(KSFT)/.stamp
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -Wno-sign-compare -DHM_ENGINE_TEST_VM -c -o $@ $<
$(B)/bin/test-engine-vm: $(O)/selftests/engine/engine_test_vm.o $(O)/$(B)/gen/engine/rw_linked.o \
		$(ENGINE_TEST_DEPS)
	@mkdir -p $(dir $@)
	$(CC) -o $@ $^ $(LDFLAGS) -lvulkan
VM_TESTS += $(B)/bin/test-engine-vm

# the emulator's command stream: recorded and submitted dispatches
$(B)/bin/test-stream: $(O)/selftests/engine/stream_test.o $(O)/$(B)/gen/engine/rw_linked.o \
		$(ENGINE_TEST_DEPS)
	@mkdir -p $(dir $@)
	$(CC) -o $@ $^ $(LDFLAGS) -lvulkan

NATIVE_TESTS += $(B)/bin/test-stream

# lazy home import: what a dispatch imports, and a refused import
$(B)/bin/test-import: $(O)/selftests/engine/import_test.o $(O)/$(B)/gen/engine/rw_linked.o \
		$(ENGINE_TEST_DEPS)
	@mkdir -p $(dir $@)
	$(CC) -o $@ $^ $(LDFLAGS) -lvulkan

NATIVE_TESTS += $(B)/bin/test-import
