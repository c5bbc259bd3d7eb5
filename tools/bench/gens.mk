# SPDX-License-Identifier: GPL-2.0
# hmirror-bench gens (tools/bench/gens.c): rule 3's check of many spans on
# uffd-async, a call a span against one scan of their cover.
HMIRROR_BENCH_OBJS += $(O)/tools/bench/gens.o $(WATCH_OBJS)
