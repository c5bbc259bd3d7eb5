# SPDX-License-Identifier: GPL-2.0
# hmirror-bench gmap (tools/bench/gmap.c): the guest address space's
# figures, lazy residency of an untouched space and map/unmap of 64 KiB.
HMIRROR_BENCH_OBJS += $(O)/tools/bench/gmap.o $(ENGINE_OBJS) $(VKCTX_OBJS) $(TABLE_OBJS) \
	$(WATCH_OBJS)
HMIRROR_BENCH_LIBS += -lvulkan
