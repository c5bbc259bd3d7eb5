# SPDX-License-Identifier: GPL-2.0
# hmirror.ko tests: run inside the VM (tools/vm/run), on each test kernel.
# Other kmod test programs add their own rules below (one per file).

KMOD_TEST_HDRS := selftests/kmod/hmirror_test.h uapi/linux/hmirror.h

$(O)/selftests/kmod/%.o: $(KMOD_TEST_HDRS)
$(O)/selftests/kmod/%.o: CFLAGS += -Wno-sign-compare

$(B)/bin/test-kmod-guards: $(O)/selftests/kmod/guards.o
	@mkdir -p $(dir $@)
	$(CC) -o $@ $^ $(LDFLAGS)

VM_TESTS += $(B)/bin/test-kmod-guards

# guard costs against the baselines, in the same run (figures: "# perf")
$(B)/bin/test-kmod-guards-perf: $(O)/selftests/kmod/guards_perf.o
	@mkdir -p $(dir $@)
	$(CC) -o $@ $^ $(LDFLAGS)

VM_TESTS += $(B)/bin/test-kmod-guards-perf

# what one local user may take: memory, spaces, the device node, unload
$(O)/selftests/kmod/limits.o: selftests/kmod/devpath_test.h
$(B)/bin/test-kmod-limits: $(O)/selftests/kmod/limits.o
	@mkdir -p $(dir $@)
	$(CC) -o $@ $^ $(LDFLAGS)

VM_TESTS += $(B)/bin/test-kmod-limits
