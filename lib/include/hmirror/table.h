/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * hmirror device-address table (host side) and written marks (table.rst,
 * data-path.rst; hmirror(7) says where the documentation is installed).
 *
 * The slots live in memory the caller provides: a mapping of device-local
 * host-visible memory where the device has room, else host memory that the
 * device imports.  The table keeps a shadow copy of its slots in ordinary
 * host memory, so it never reads the (possibly write-combined, uncached)
 * device mapping: every probe reads the shadow, every change is written to
 * both.  The device only reads the slots (rule 6).
 *
 * Hash (uapi/linux/hmirror_table.h): 32-bit Fibonacci hashing of the chunk
 * number, then a multiply-high range reduction (nr_home need not be a
 * power of two).  A chunk's window is its home slot and the
 * HM_TABLE_PROBES - 1 slots after it; windows never wrap.
 *
 * Full window: insert first makes room the hopscotch way: it finds the
 * nearest empty slot within 64 slots past the window and hops entries of
 * other chunks forward, each staying inside its own window, until the
 * empty slot is in the new chunk's window.  Only if that fails does
 * hm_table_insert() return -ENOSPC (changing nothing); the owner then grows
 * the table (hm_table_grow_nr_home()), allocates new slot memory and calls
 * hm_table_rehash_into(); a chunk is never left out, never a silent miss.
 * Load factor: hm_table_nr_home_for() sizes a table at <= 25 % load
 * (table.rst has the measurements behind that figure).
 *
 * Slots move: an insert may move other chunks to other slots of their
 * windows (a chunk's mark word follows its slot).  Read which chunk a
 * marked slot holds with hm_table_slot_get() after the dispatch and before
 * changing the table; do not keep slot numbers across inserts.
 *
 * Locking: none inside.  The owner serialises changes and must not change
 * slots that a running dispatch reads (the engine changes the table between
 * dispatches).  Readers on the host (hm_table_lookup) may run concurrently
 * with each other.
 */
#ifndef HMIRROR_TABLE_H
#define HMIRROR_TABLE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <linux/hmirror_table.h>

#ifdef __cplusplus
extern "C" {
#endif

struct hm_table;

/* Limit on home slots of one table (2^26: 1 GiB of slots). */
#define HM_TABLE_MAX_NR_HOME	(1u << 26)

/* Bytes of slot memory for nr_home home slots: (nr_home + PROBES - 1) * 16. */
size_t   hm_table_bytes_for(uint32_t nr_home_slots);
/* Number of slots (home + overhang) = number of mark words minus the sink. */
uint32_t hm_table_nr_slots_for(uint32_t nr_home_slots);
/* Home slots for a table meant to hold nr_chunks at <= 25 % load (>= 1). */
uint32_t hm_table_nr_home_for(uint64_t nr_chunks);
/* Next size after a full window: twice as many home slots (capped). */
uint32_t hm_table_grow_nr_home(uint32_t nr_home_slots);

/* The home slot of a chunk: what the device helper computes. */
static inline uint32_t hm_table_home_slot(uint64_t chunk, uint32_t nr_home)
{
	uint32_t h = (uint32_t)chunk * HM_TABLE_HASH_MUL_LO +
		     (uint32_t)(chunk >> 32) * HM_TABLE_HASH_MUL_HI;

	return (uint32_t)(((uint64_t)h * nr_home) >> 32);
}

/*
 * slots_mem: at least hm_table_bytes_for(nr_home_slots) bytes, 16-byte
 * aligned; every slot is set empty.  chunk_shift in
 * [HM_TABLE_MIN_CHUNK_SHIFT, HM_TABLE_MAX_CHUNK_SHIFT].
 * -EINVAL on bad arguments, -ENOMEM.
 */
int  hm_table_new(void *slots_mem, uint64_t mem_bytes, uint32_t nr_home_slots,
		  unsigned chunk_shift, struct hm_table **ret);
void hm_table_free(struct hm_table *t);              /* NULL ok; slots_mem is the caller's */

uint32_t hm_table_nr_home(const struct hm_table *t);
uint32_t hm_table_nr_slots(const struct hm_table *t);
unsigned hm_table_chunk_shift(const struct hm_table *t);
uint64_t hm_table_nr_entries(const struct hm_table *t);
/* Entries moved to other slots of their windows by inserts so far. */
uint64_t hm_table_nr_moves(const struct hm_table *t);
void    *hm_table_slots_mem(const struct hm_table *t);

/* Map chunk -> device address (chunk << shift) + delta.
 * -EEXIST if mapped (nothing changed), -ENOSPC if its window is full,
 * -EINVAL for a chunk number out of range. *ret_slot (may be NULL) = slot. */
int  hm_table_insert(struct hm_table *t, uint64_t chunk, int64_t delta, uint32_t *ret_slot);
/* Repoint a mapped chunk (home import <-> mirror). -ENOENT if not mapped. */
int  hm_table_update(struct hm_table *t, uint64_t chunk, int64_t delta);
/* Repoint a mapped chunk in the host copy now and in the device slots at
 * the next hm_table_flush(): a chunk repointed and back again before it
 * (a mirror dropped by a CPU write and refreshed in place) costs the device
 * memory no write.  -ENOENT if not mapped; -ENOMEM. */
int  hm_table_update_deferred(struct hm_table *t, uint64_t chunk, int64_t delta);
/* Write the deferred updates whose delta differs from what the device
 * held; the count written.  Call before the device reads the table. */
uint64_t hm_table_flush(struct hm_table *t);
/* Insert or update. */
int  hm_table_set(struct hm_table *t, uint64_t chunk, int64_t delta, uint32_t *ret_slot);
/* Unmap a chunk. -ENOENT if not mapped. */
int  hm_table_remove(struct hm_table *t, uint64_t chunk);
/* Reference lookup, exactly what the device helper answers.
 * Mapped: 0, *ret_dev_addr = guest_addr + delta, *ret_slot = slot.
 * Unmapped: -ENOENT, *ret_dev_addr = 0, *ret_slot = UINT32_MAX.
 * Either ret may be NULL. */
int  hm_table_lookup(const struct hm_table *t, uint64_t guest_addr,
		     uint64_t *ret_dev_addr, uint32_t *ret_slot);
/* Find a chunk's slot: 0 and *ret_slot, or -ENOENT. */
int  hm_table_find(const struct hm_table *t, uint64_t chunk, uint32_t *ret_slot);
/* The chunk/delta in a slot (from the shadow): false if the slot is empty. */
bool hm_table_slot_get(const struct hm_table *t, uint32_t slot,
		       uint64_t *ret_chunk, int64_t *ret_delta);
/* Every entry of src into dst (empty, any size, same chunk shift).
 * -ENOSPC if one does not fit in dst (dst is then left partly filled:
 * reinitialise it with hm_table_clear() or grow again); -EINVAL. */
int  hm_table_rehash_into(const struct hm_table *src, struct hm_table *dst);
/* Empty every slot. */
void hm_table_clear(struct hm_table *t);

/* The device address answered for guest_addr and its mark's index, as the
 * helper computes them (mark index HM_MARK_SINK when unmapped). */
static inline uint64_t hm_table_mark_addr(uint64_t marks_addr, uint32_t slot)
{
	return marks_addr + 4ull * (slot == UINT32_MAX ? HM_MARK_SINK : HM_MARK_INDEX(slot));
}

/* ---- written marks ------------------------------------------------------
 * One uint32_t per slot in imported host memory: word 0 is the sink, slot
 * i's word is 1 + i.  The device stores non-zero (1) into a slot's word
 * when a store or atomic goes through it; the host scans and clears after
 * the dispatch completed.
 */
/*
 * Bytes past the last mark word that belong to the marks too: an access of
 * up to HM_MARKS_SLACK + 4 bytes at any mark address (the select form of a
 * wide access whose address is unmapped) stays in the marks (hmirrord's
 * isolation check relies on it).
 */
#define HM_MARKS_SLACK 64
/* Bytes of mark memory for a table of nr_slots slots:
 * 4 * (1 + nr_slots) + HM_MARKS_SLACK. */
size_t hm_marks_bytes_for(uint32_t nr_slots);
/* Calls cb(slot, arg) for every marked slot in ascending order and clears
 * its word.  The sink is not reported here.  Returns the number of marked
 * slots (>= 0) or -EINVAL. */
int    hm_marks_scan(uint32_t *marks, uint32_t nr_slots,
		     void (*cb)(uint32_t slot, void *arg), void *arg);
/* The same over a list of slots only (e.g. the slots of mirrored chunks,
 * the only ones whose device writes need copying home): calls cb for each
 * listed slot whose word is set, clears it; returns how many (or -EINVAL
 * for a slot >= nr_slots, before touching anything). */
int    hm_marks_scan_list(uint32_t *marks, uint32_t nr_slots, const uint32_t *slots,
			  size_t nr, void (*cb)(uint32_t slot, void *arg), void *arg);
/* Read and clear the sink: non-zero if a store or atomic landed nowhere. */
uint32_t hm_marks_take_sink(uint32_t *marks);
/* Clear all (sink + nr_slots). */
void   hm_marks_clear(uint32_t *marks, uint32_t nr_slots);

#ifdef __cplusplus
}
#endif
#endif /* HMIRROR_TABLE_H */
