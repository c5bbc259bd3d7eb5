// SPDX-License-Identifier: LGPL-2.1-or-later
/*
 * Written marks (D969): one 32-bit word per table slot in imported host
 * memory, word 0 the sink.  The device only writes them (a posted write of
 * 1 beside each store or atomic); the host scans and clears them in its own
 * memory after the dispatch completed, eight words at a time where they
 * are all clear.
 */
#include <errno.h>
#include <string.h>

#include "hmirror/table.h"

size_t hm_marks_bytes_for(uint32_t nr_slots)
{
	return 4 * (1 + (size_t)nr_slots) + HM_MARKS_SLACK;
}

int hm_marks_scan(uint32_t *marks, uint32_t nr_slots,
		  void (*cb)(uint32_t slot, void *arg), void *arg)
{
	uint32_t *m, i = 0;
	int n = 0;

	if (!marks)
		return -EINVAL;
	m = marks + HM_MARK_INDEX(0);
	while (i < nr_slots) {
		if (i + 8 <= nr_slots) {
			uint64_t w[4];

			memcpy(w, m + i, sizeof(w));
			if (!(w[0] | w[1] | w[2] | w[3])) {
				i += 8;
				continue;
			}
		}
		uint32_t end = i + 8 < nr_slots ? i + 8 : nr_slots;

		for (; i < end; i++) {
			if (!m[i])
				continue;
			m[i] = 0;
			n++;
			if (cb)
				cb(i, arg);
		}
	}
	return n;
}

int hm_marks_scan_list(uint32_t *marks, uint32_t nr_slots, const uint32_t *slots,
		       size_t nr, void (*cb)(uint32_t slot, void *arg), void *arg)
{
	int n = 0;

	if (!marks || (nr && !slots))
		return -EINVAL;
	for (size_t i = 0; i < nr; i++)
		if (slots[i] >= nr_slots)
			return -EINVAL;
	for (size_t i = 0; i < nr; i++) {
		uint32_t *w = &marks[HM_MARK_INDEX(slots[i])];

		if (!*w)
			continue;
		*w = 0;
		n++;
		if (cb)
			cb(slots[i], arg);
	}
	return n;
}

uint32_t hm_marks_take_sink(uint32_t *marks)
{
	uint32_t v = marks[HM_MARK_SINK];

	marks[HM_MARK_SINK] = 0;
	return v;
}

void hm_marks_clear(uint32_t *marks, uint32_t nr_slots)
{
	memset(marks, 0, hm_marks_bytes_for(nr_slots));
}
