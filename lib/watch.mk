# SPDX-License-Identifier: GPL-2.0
# libhmirror watch API (lib/include/hmirror/watch.h): one API over the
# module, userfaultfd async WP + PAGEMAP_SCAN, synchronous userfaultfd and
# mprotect.  Documentation/watch.rst.

WATCH_OBJS := $(O)/lib/watch.o $(O)/lib/watch_internal.o $(O)/lib/watch_kmod.o $(O)/lib/watch_uffd.o \
	$(O)/lib/watch_uffd_sync.o $(O)/lib/watch_mprotect.o \
	$(O)/lib/watch_consumer.o
LIB_OBJS += $(WATCH_OBJS)

# ---- conformance suite: one source, every backend (FIXTURE_VARIANT) -------
$(B)/bin/test-watch: $(O)/selftests/watch/watch_test.o $(WATCH_OBJS)
	@mkdir -p $(dir $@)
	$(CC) $(LDFLAGS) -o $@ $^

$(O)/selftests/watch/watch_test.o: CFLAGS += -Wno-sign-compare

# natively: uffd-async, uffd-sync, mprotect run, kmod SKIPs (no module);
# in the VM: kmod (and uffd-sync on 6.1) run, the rest SKIP where absent.
NATIVE_TESTS += $(B)/bin/test-watch
VM_TESTS += $(B)/bin/test-watch

# ---- consumers: the same on every backend (selftests/watch/consumer_test.c)
$(B)/bin/test-consumer: $(O)/selftests/watch/consumer_test.o $(WATCH_OBJS)
	@mkdir -p $(dir $@)
	$(CC) $(LDFLAGS) -o $@ $^

$(O)/selftests/watch/consumer_test.o: CFLAGS += -Wno-sign-compare

NATIVE_TESTS += $(B)/bin/test-consumer
VM_TESTS += $(B)/bin/test-consumer
