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

# every path that could write an armed page unseen; harvest without re-arm
$(B)/bin/test-kmod-guard-paths: $(O)/selftests/kmod/guard_paths.o
	@mkdir -p $(dir $@)
	$(CC) -o $@ $^ $(LDFLAGS)

VM_TESTS += $(B)/bin/test-kmod-guard-paths
