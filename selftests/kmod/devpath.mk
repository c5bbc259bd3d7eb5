# SPDX-License-Identifier: GPL-2.0
# hmirror.ko device-path tests (pins, dma-buf export, generic netlink): run
# inside the VM (tools/vm/run) on each test kernel, like kmod.mk's.

DEVPATH_TEST_HDRS := selftests/kmod/devpath_test.h selftests/kmod/hmirror_test.h \
	uapi/linux/hmirror.h
DRM_CFLAGS := $(shell $(PKG_CONFIG) --cflags libdrm 2>/dev/null)
DRM_LIBS := $(shell $(PKG_CONFIG) --libs libdrm 2>/dev/null || echo -ldrm)
NLGENL_CFLAGS := $(shell $(PKG_CONFIG) --cflags libnl-genl-3.0 2>/dev/null)
NLGENL_LIBS := $(shell $(PKG_CONFIG) --libs libnl-genl-3.0 2>/dev/null || echo -lnl-genl-3 -lnl-3)

$(O)/selftests/kmod/pin.o $(O)/selftests/kmod/dmabuf.o $(O)/selftests/kmod/netlink.o: \
	$(DEVPATH_TEST_HDRS)
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
#   tools/vm/run --kernel 6.1 -- build/bin/kmod-devpath-measure
$(O)/selftests/kmod/devpath_measure.o: $(DEVPATH_TEST_HDRS)
$(O)/selftests/kmod/devpath_measure.o: CFLAGS += $(NLGENL_CFLAGS)
$(B)/bin/kmod-devpath-measure: $(O)/selftests/kmod/devpath_measure.o
	@mkdir -p $(dir $@)
	$(CC) -o $@ $^ $(LDFLAGS) $(NLGENL_LIBS)
