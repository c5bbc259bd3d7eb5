/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * Bitmaps of uint64_t words, bit i in word i / 64, lowest first: the watch
 * layer's chunk sets (watch.c, watch_consumer.c) and the engine's flagged
 * window units (engine/window.c).  Internal, not installed.
 */
#ifndef HMIRROR_BITS_H
#define HMIRROR_BITS_H
#include <stdbool.h>
#include <stdint.h>

static inline bool hm_test_bit(const uint64_t *b, uint64_t i)
{
	return (b[i >> 6] >> (i & 63)) & 1;
}

static inline void hm_set_bit(uint64_t *b, uint64_t i)
{
	b[i >> 6] |= 1ull << (i & 63);
}

static inline void hm_clear_bit(uint64_t *b, uint64_t i)
{
	b[i >> 6] &= ~(1ull << (i & 63));
}

/* the bits [from, end) that fall in word w */
static inline uint64_t hm_range_mask(uint64_t w, uint64_t from, uint64_t end)
{
	uint64_t m = ~0ull;

	if (from > w * 64)
		m &= ~0ull << (from - w * 64);
	if (end < (w + 1) * 64)
		m &= ~(~0ull << (end - w * 64));
	return m;
}

/* the first bit in [from, end) of b that is set (set) or clear, or end; a
 * word at a time */
static inline uint64_t hm_next_bit(const uint64_t *b, uint64_t from, uint64_t end, bool set)
{
	for (uint64_t w = from / 64; w * 64 < end; w++) {
		uint64_t x = (set ? b[w] : ~b[w]) & hm_range_mask(w, from, end);

		if (x)
			return w * 64 + (uint64_t)__builtin_ctzll(x);
	}
	return end;
}

#endif /* HMIRROR_BITS_H */
