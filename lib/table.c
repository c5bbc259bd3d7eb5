// SPDX-License-Identifier: LGPL-2.1-or-later
/*
 * Host side of the device-address table (D969).  See hmirror/table.h and
 * Documentation/table.rst.
 *
 * The slots the device reads are in the caller's memory (often a
 * write-combined mapping of device-local memory, which is slow to read), so
 * the table keeps a shadow of them in ordinary memory: every probe reads
 * the shadow, every change writes the shadow and then the device slot.
 * A device slot is written delta first and chunk last (a release store),
 * and emptied by its chunk word, so a reader never pairs a chunk with
 * another chunk's delta.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "hmirror/table.h"

struct hm_table {
	struct hm_table_slot *dev;      /* the caller's slot memory */
	struct hm_table_slot *shadow;   /* host copy of dev: all reads */
	uint32_t nr_home;
	uint32_t nr_slots;
	unsigned chunk_shift;
	uint64_t nr_entries;
	uint64_t nr_moves;              /* entries moved by make_room() */
	/* deferred updates: slot and the delta the device held, once a slot */
	struct { uint32_t slot; int64_t old; } *defer;
	size_t nr_defer, cap_defer;
	uint64_t *deferred;             /* bitmap of the slots in defer[] */
};

/* How far past a full window insert looks for an empty slot to bring back. */
#define HM_TABLE_HOP_RANGE 64

size_t hm_table_bytes_for(uint32_t nr_home_slots)
{
	return ((size_t)nr_home_slots + HM_TABLE_PROBES - 1) * HM_TABLE_SLOT_BYTES;
}

uint32_t hm_table_nr_slots_for(uint32_t nr_home_slots)
{
	return nr_home_slots + HM_TABLE_PROBES - 1;
}

uint32_t hm_table_nr_home_for(uint64_t nr_chunks)
{
	uint64_t n = nr_chunks * 4;

	if (n < 1)
		n = 1;
	if (n > HM_TABLE_MAX_NR_HOME)
		n = HM_TABLE_MAX_NR_HOME;
	return (uint32_t)n;
}

uint32_t hm_table_grow_nr_home(uint32_t nr_home_slots)
{
	uint64_t n = (uint64_t)nr_home_slots * 2;

	if (n < 8)
		n = 8;
	if (n > HM_TABLE_MAX_NR_HOME)
		n = HM_TABLE_MAX_NR_HOME;
	return (uint32_t)n;
}

static void slot_write(struct hm_table *t, uint32_t i, uint64_t chunk, int64_t delta)
{
	t->shadow[i].chunk = chunk;
	t->shadow[i].delta = delta;
	if (chunk == HM_TABLE_EMPTY_CHUNK) {
		__atomic_store_n(&t->dev[i].chunk, chunk, __ATOMIC_RELEASE);
		return;
	}
	__atomic_store_n(&t->dev[i].delta, delta, __ATOMIC_RELAXED);
	__atomic_store_n(&t->dev[i].chunk, chunk, __ATOMIC_RELEASE);
}

void hm_table_clear(struct hm_table *t)
{
	for (uint32_t i = 0; i < t->nr_slots; i++) {
		t->shadow[i].chunk = HM_TABLE_EMPTY_CHUNK;
		t->shadow[i].delta = 0;
	}
	memcpy(t->dev, t->shadow, (size_t)t->nr_slots * sizeof(*t->dev));
	__atomic_thread_fence(__ATOMIC_RELEASE);
	t->nr_entries = 0;
	if (t->deferred)
		memset(t->deferred, 0, (t->nr_slots + 63) / 64 * sizeof(*t->deferred));
	t->nr_defer = 0;
}

int hm_table_new(void *slots_mem, uint64_t mem_bytes, uint32_t nr_home_slots,
		 unsigned chunk_shift, struct hm_table **ret)
{
	struct hm_table *t;

	if (!ret)
		return -EINVAL;
	*ret = NULL;
	if (!slots_mem || ((uintptr_t)slots_mem & (HM_TABLE_SLOT_BYTES - 1)) ||
	    nr_home_slots == 0 || nr_home_slots > HM_TABLE_MAX_NR_HOME ||
	    chunk_shift < HM_TABLE_MIN_CHUNK_SHIFT || chunk_shift > HM_TABLE_MAX_CHUNK_SHIFT ||
	    mem_bytes < hm_table_bytes_for(nr_home_slots))
		return -EINVAL;

	t = calloc(1, sizeof(*t));
	if (!t)
		return -ENOMEM;
	t->nr_home = nr_home_slots;
	t->nr_slots = hm_table_nr_slots_for(nr_home_slots);
	t->chunk_shift = chunk_shift;
	t->dev = slots_mem;
	t->shadow = malloc((size_t)t->nr_slots * sizeof(*t->shadow));
	t->deferred = calloc((t->nr_slots + 63) / 64, sizeof(*t->deferred));
	if (!t->shadow || !t->deferred) {
		free(t->shadow);
		free(t->deferred);
		free(t);
		return -ENOMEM;
	}
	hm_table_clear(t);
	*ret = t;
	return 0;
}

void hm_table_free(struct hm_table *t)
{
	if (!t)
		return;
	free(t->shadow);
	free(t->deferred);
	free(t->defer);
	free(t);
}

uint32_t hm_table_nr_home(const struct hm_table *t) { return t->nr_home; }
uint32_t hm_table_nr_slots(const struct hm_table *t) { return t->nr_slots; }
unsigned hm_table_chunk_shift(const struct hm_table *t) { return t->chunk_shift; }
uint64_t hm_table_nr_entries(const struct hm_table *t) { return t->nr_entries; }
uint64_t hm_table_nr_moves(const struct hm_table *t) { return t->nr_moves; }
void *hm_table_slots_mem(const struct hm_table *t) { return t->dev; }

static bool chunk_valid(const struct hm_table *t, uint64_t chunk)
{
	return chunk <= (HM_TABLE_EMPTY_CHUNK >> t->chunk_shift) &&
	       chunk != HM_TABLE_EMPTY_CHUNK;
}

int hm_table_find(const struct hm_table *t, uint64_t chunk, uint32_t *ret_slot)
{
	uint32_t home;

	if (!chunk_valid(t, chunk))
		return -ENOENT;
	home = hm_table_home_slot(chunk, t->nr_home);
	for (uint32_t i = 0; i < HM_TABLE_PROBES; i++) {
		if (t->shadow[home + i].chunk == chunk) {
			if (ret_slot)
				*ret_slot = home + i;
			return 0;
		}
	}
	return -ENOENT;
}

/*
 * The window [home, home + PROBES) is full: find the nearest empty slot
 * after it and move it back by hopping entries forward, each within its
 * own window (hopscotch hashing with a neighbourhood of PROBES).  A moved
 * entry is written to its new slot before its old slot is emptied, so a
 * reader always finds it.  Slots of other chunks change: see table.h.
 */
static int make_room(struct hm_table *t, uint32_t home, uint32_t *ret_slot)
{
	uint32_t limit = t->nr_slots, e, path[HM_TABLE_HOP_RANGE], n = 0;

	if (limit - home > HM_TABLE_HOP_RANGE)
		limit = home + HM_TABLE_HOP_RANGE;
	for (e = home + HM_TABLE_PROBES; e < limit; e++)
		if (t->shadow[e].chunk == HM_TABLE_EMPTY_CHUNK)
			break;
	if (e >= limit)
		return -ENOSPC;
	/* plan every hop first, so that a refusal changes nothing */
	for (uint32_t to = e; to >= home + HM_TABLE_PROBES;) {
		uint32_t from = UINT32_MAX;

		/* the farthest-back entry that may move to `to` */
		for (uint32_t s = to - (HM_TABLE_PROBES - 1); s < to; s++) {
			uint32_t h = hm_table_home_slot(t->shadow[s].chunk, t->nr_home);

			if (h + HM_TABLE_PROBES > to) {
				from = s;
				break;
			}
		}
		if (from == UINT32_MAX)
			return -ENOSPC;
		path[n++] = from;
		to = from;
	}
	for (uint32_t i = 0; i < n; i++) {
		slot_write(t, e, t->shadow[path[i]].chunk, t->shadow[path[i]].delta);
		slot_write(t, path[i], HM_TABLE_EMPTY_CHUNK, 0);
		t->nr_moves++;
		e = path[i];
	}
	*ret_slot = e;
	return 0;
}

int hm_table_insert(struct hm_table *t, uint64_t chunk, int64_t delta, uint32_t *ret_slot)
{
	uint32_t home, free_slot = UINT32_MAX;

	if (!chunk_valid(t, chunk))
		return -EINVAL;
	home = hm_table_home_slot(chunk, t->nr_home);
	for (uint32_t i = 0; i < HM_TABLE_PROBES; i++) {
		uint64_t c = t->shadow[home + i].chunk;

		if (c == chunk)
			return -EEXIST;
		if (c == HM_TABLE_EMPTY_CHUNK && free_slot == UINT32_MAX)
			free_slot = home + i;
	}
	if (free_slot == UINT32_MAX) {
		int r = make_room(t, home, &free_slot);

		if (r)
			return r;
	}
	slot_write(t, free_slot, chunk, delta);
	t->nr_entries++;
	if (ret_slot)
		*ret_slot = free_slot;
	return 0;
}

int hm_table_update(struct hm_table *t, uint64_t chunk, int64_t delta)
{
	uint32_t slot;
	int r = hm_table_find(t, chunk, &slot);

	if (r)
		return r;
	t->shadow[slot].delta = delta;
	__atomic_store_n(&t->dev[slot].delta, delta, __ATOMIC_RELEASE);
	return 0;
}

int hm_table_update_deferred(struct hm_table *t, uint64_t chunk, int64_t delta)
{
	uint32_t slot;
	int r = hm_table_find(t, chunk, &slot);

	if (r)
		return r;
	if (!(t->deferred[slot / 64] & (1ull << (slot % 64)))) {
		if (t->nr_defer == t->cap_defer) {
			size_t cap = t->cap_defer ? 2 * t->cap_defer : 256;
			void *d = realloc(t->defer, cap * sizeof(*t->defer));

			if (!d)
				return -ENOMEM;
			t->defer = d;
			t->cap_defer = cap;
		}
		t->defer[t->nr_defer].slot = slot;
		t->defer[t->nr_defer].old = t->shadow[slot].delta;
		t->nr_defer++;
		t->deferred[slot / 64] |= 1ull << (slot % 64);
	}
	t->shadow[slot].delta = delta;
	return 0;
}

/* An insert, move or remove since writes its slots whole from the host
 * copy; the flush then writes the same delta again at most. */
uint64_t hm_table_flush(struct hm_table *t)
{
	uint64_t n = 0;

	for (size_t i = 0; i < t->nr_defer; i++) {
		uint32_t slot = t->defer[i].slot;

		t->deferred[slot / 64] &= ~(1ull << (slot % 64));
		if (t->shadow[slot].delta == t->defer[i].old)
			continue;
		__atomic_store_n(&t->dev[slot].delta, t->shadow[slot].delta, __ATOMIC_RELEASE);
		n++;
	}
	t->nr_defer = 0;
	return n;
}

int hm_table_set(struct hm_table *t, uint64_t chunk, int64_t delta, uint32_t *ret_slot)
{
	uint32_t slot;

	if (hm_table_find(t, chunk, &slot) == 0) {
		hm_table_update(t, chunk, delta);
		if (ret_slot)
			*ret_slot = slot;
		return 0;
	}
	return hm_table_insert(t, chunk, delta, ret_slot);
}

int hm_table_remove(struct hm_table *t, uint64_t chunk)
{
	uint32_t slot;
	int r = hm_table_find(t, chunk, &slot);

	if (r)
		return r;
	/* Lookups read the whole window, so no tombstone is needed. */
	slot_write(t, slot, HM_TABLE_EMPTY_CHUNK, 0);
	t->nr_entries--;
	return 0;
}

int hm_table_lookup(const struct hm_table *t, uint64_t guest_addr,
		    uint64_t *ret_dev_addr, uint32_t *ret_slot)
{
	uint32_t slot;

	if (hm_table_find(t, guest_addr >> t->chunk_shift, &slot)) {
		if (ret_dev_addr)
			*ret_dev_addr = 0;
		if (ret_slot)
			*ret_slot = UINT32_MAX;
		return -ENOENT;
	}
	if (ret_dev_addr)
		*ret_dev_addr = guest_addr + (uint64_t)t->shadow[slot].delta;
	if (ret_slot)
		*ret_slot = slot;
	return 0;
}

bool hm_table_slot_get(const struct hm_table *t, uint32_t slot,
		       uint64_t *ret_chunk, int64_t *ret_delta)
{
	if (slot >= t->nr_slots || t->shadow[slot].chunk == HM_TABLE_EMPTY_CHUNK)
		return false;
	if (ret_chunk)
		*ret_chunk = t->shadow[slot].chunk;
	if (ret_delta)
		*ret_delta = t->shadow[slot].delta;
	return true;
}

int hm_table_rehash_into(const struct hm_table *src, struct hm_table *dst)
{
	if (!src || !dst || src == dst || src->chunk_shift != dst->chunk_shift)
		return -EINVAL;
	for (uint32_t i = 0; i < src->nr_slots; i++) {
		const struct hm_table_slot *s = &src->shadow[i];
		int r;

		if (s->chunk == HM_TABLE_EMPTY_CHUNK)
			continue;
		r = hm_table_set(dst, s->chunk, s->delta, NULL);
		if (r)
			return r;
	}
	return 0;
}
