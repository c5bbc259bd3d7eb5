# SPDX-License-Identifier: GPL-2.0
# hmirror-bench guards (tools/bench/guards.c): every watch backend through
# libhmirror's watch API, plus a raw PAGEMAP_SCAN baseline.
HMIRROR_BENCH_OBJS += $(O)/tools/bench/guards.o $(WATCH_OBJS)
