# SPDX-License-Identifier: GPL-2.0
# build/bin/hmirror-bench: tools/bench/main.c's table names every
# subcommand (common.h declares their entry points); common.c holds the
# clock and the medians they share.  A subcommand's owner links its file in
# from their own fragment:
#   HMIRROR_BENCH_OBJS += $(O)/tools/bench/guards.o $(WATCH_OBJS)
#   HMIRROR_BENCH_LIBS += -luring
# The prerequisites are expanded a second time (.SECONDEXPANSION in the
# top-level Makefile), so fragments included before or after this one count.

HMIRROR_BENCH_OBJS += $(O)/tools/bench/main.o $(O)/tools/bench/common.o
BIN += $(B)/bin/hmirror-bench

$(B)/bin/hmirror-bench: $$(sort $$(HMIRROR_BENCH_OBJS))
	@mkdir -p $(dir $@)
	$(CC) -o $@ $(sort $(HMIRROR_BENCH_OBJS)) $(LDFLAGS) $(HMIRROR_BENCH_LIBS)
