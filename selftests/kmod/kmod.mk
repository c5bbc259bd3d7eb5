# SPDX-License-Identifier: GPL-2.0
# hmirror.ko tests: run inside the VM (tools/vm/run), on each test kernel,
# a rule per program.

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

# what one local user may take: memory, spaces, the device node, unload
$(O)/selftests/kmod/limits.o: selftests/kmod/device_access_test.h
$(B)/bin/test-kmod-limits: $(O)/selftests/kmod/limits.o
	@mkdir -p $(dir $@)
	$(CC) -o $@ $^ $(LDFLAGS)

VM_TESTS += $(B)/bin/test-kmod-limits

# The ioctl fuzzer (selftests/kmod/fuzz_ioctl.c): its table of commands,
# struct layouts and field roles is generated from the uapi header.
$(B)/gen/kmod_fuzz_abi.h: selftests/kmod/fuzz_abi.py uapi/linux/hmirror.h
	@mkdir -p $(dir $@)
	python3 selftests/kmod/fuzz_abi.py c uapi/linux/hmirror.h > $@.tmp && mv $@.tmp $@

$(O)/selftests/kmod/fuzz_ioctl.o: $(B)/gen/kmod_fuzz_abi.h
$(O)/selftests/kmod/fuzz_ioctl.o: CFLAGS += -I$(B)/gen

$(B)/bin/test-kmod-fuzz-ioctl: $(O)/selftests/kmod/fuzz_ioctl.o
	@mkdir -p $(dir $@)
	$(CC) -o $@ $^ $(LDFLAGS)

VM_TESTS += $(B)/bin/test-kmod-fuzz-ioctl

# The generic netlink fuzzer, driven by the YAML spec (in the VM).
$(B)/bin/test-kmod-fuzz-netlink: selftests/kmod/fuzz_netlink.py selftests/kmod/fuzz_abi.py \
		Documentation/netlink/specs/hmirror.yaml uapi/linux/hmirror.h
	@mkdir -p $(dir $@)
	printf '#!/bin/sh\nexec python3 "%s/selftests/kmod/fuzz_netlink.py" "%s/Documentation/netlink/specs/hmirror.yaml" "%s/uapi/linux/hmirror.h"\n' \
		"$(CURDIR)" "$(CURDIR)" "$(CURDIR)" > $@
	chmod +x $@

VM_TESTS += $(B)/bin/test-kmod-fuzz-netlink

# ---- device access: pins, dma-buf export, generic netlink ----

DEVICE_ACCESS_TEST_HDRS := selftests/kmod/device_access_test.h selftests/kmod/hmirror_test.h \
	uapi/linux/hmirror.h
DRM_CFLAGS := $(shell $(PKG_CONFIG) --cflags libdrm 2>/dev/null)
DRM_LIBS := $(shell $(PKG_CONFIG) --libs libdrm 2>/dev/null || echo -ldrm)
NLGENL_CFLAGS := $(shell $(PKG_CONFIG) --cflags libnl-genl-3.0 2>/dev/null)
NLGENL_LIBS := $(shell $(PKG_CONFIG) --libs libnl-genl-3.0 2>/dev/null || echo -lnl-genl-3 -lnl-3)

$(O)/selftests/kmod/pin.o $(O)/selftests/kmod/dmabuf.o $(O)/selftests/kmod/netlink.o: \
	$(DEVICE_ACCESS_TEST_HDRS)
$(O)/selftests/kmod/dmabuf.o: CFLAGS += $(DRM_CFLAGS)
$(O)/selftests/kmod/netlink.o: CFLAGS += $(NLGENL_CFLAGS)

$(B)/bin/test-kmod-pin: $(O)/selftests/kmod/pin.o
	@mkdir -p $(dir $@)
	$(CC) -o $@ $^ $(LDFLAGS)

$(B)/bin/test-kmod-dmabuf: $(O)/selftests/kmod/dmabuf.o
	@mkdir -p $(dir $@)
	$(CC) -o $@ $^ $(LDFLAGS) $(DRM_LIBS)

$(B)/bin/test-kmod-netlink: $(O)/selftests/kmod/netlink.o
	@mkdir -p $(dir $@)
	$(CC) -o $@ $^ $(LDFLAGS) $(NLGENL_LIBS)

VM_TESTS += $(B)/bin/test-kmod-pin $(B)/bin/test-kmod-dmabuf $(B)/bin/test-kmod-netlink

# The netlink spec against the uapi header (native, no module needed).
$(B)/bin/test-kmod-nlspec: selftests/kmod/nlspec_check.py \
		Documentation/netlink/specs/hmirror.yaml uapi/linux/hmirror.h
	@mkdir -p $(dir $@)
	printf '#!/bin/sh\nexec python3 "%s/selftests/kmod/nlspec_check.py" "%s/Documentation/netlink/specs/hmirror.yaml" "%s/uapi"\n' \
		"$(CURDIR)" "$(CURDIR)" "$(CURDIR)" > $@
	chmod +x $@

NATIVE_TESTS += $(B)/bin/test-kmod-nlspec

# Figures for Documentation/device-access.rst (a program, not a test):
#   tools/vm/run --kernel 6.1 -- build/bin/kmod-device-access-measure
$(O)/selftests/kmod/device_access_measure.o: $(DEVICE_ACCESS_TEST_HDRS)
$(O)/selftests/kmod/device_access_measure.o: CFLAGS += $(NLGENL_CFLAGS)
$(B)/bin/kmod-device-access-measure: $(O)/selftests/kmod/device_access_measure.o
	@mkdir -p $(dir $@)
	$(CC) -o $@ $^ $(LDFLAGS) $(NLGENL_LIBS)
