# SPDX-License-Identifier: GPL-2.0
# hmirror-bench consumers (tools/bench/consumers.c): harvest cost per
# consumer and a writer on an unwatched range, per watch backend.
HMIRROR_BENCH_OBJS += $(O)/tools/bench/consumers.o $(WATCH_OBJS)
