/* SPDX-License-Identifier: GPL-2.0 WITH Linux-syscall-note */
/*
 * hmirror device-address table: constants shared by the host side of the
 * table (lib/table.c), the SPIR-V lookup helper (lib/lookup_spirv.c), the
 * engine that fills the push block and any translator that emits calls to
 * the helper.  See table.rst and data-path.rst (hmirror(7) says where the
 * documentation is installed).
 *
 * Device table: an open-addressed hash table of HM_TABLE_SLOT_BYTES slots
 * {chunk number, delta}.  A chunk's HM_TABLE_PROBES slots run consecutively
 * from its home slot and never wrap, so a table of nr_home home slots holds
 * nr_home + HM_TABLE_PROBES - 1 slots.  An empty slot holds
 * HM_TABLE_EMPTY_CHUNK, which no chunk number can equal (a chunk is at least
 * 4 KiB, so a chunk number has at most 52 significant bits).
 *
 * Marks: one __u32 per slot; index 0 is the sink (stores and atomics that
 * land nowhere), slot i's mark is at index 1 + i.
 */
#ifndef _UAPI_LINUX_HMIRROR_TABLE_H
#define _UAPI_LINUX_HMIRROR_TABLE_H

#include <linux/types.h>

#define HM_TABLE_SLOT_BYTES	16
#define HM_TABLE_PROBES		4
#define HM_TABLE_EMPTY_CHUNK	(~(__u64)0)
#define HM_TABLE_MIN_CHUNK_SHIFT 12
#define HM_TABLE_MAX_CHUNK_SHIFT 40
/*
 * Home slot of a chunk (what the device helper computes, all in 32 bits):
 *   h    = lo32(chunk) * HM_TABLE_HASH_MUL_LO + hi32(chunk) * HM_TABLE_HASH_MUL_HI
 *   home = ((__u64)h * nr_home) >> 32
 * (Fibonacci hashing, then a multiply-high range reduction, so nr_home
 * need not be a power of two; consecutive chunks spread evenly.)
 */
#define HM_TABLE_HASH_MUL_LO	0x9e3779b1U
#define HM_TABLE_HASH_MUL_HI	0x85ebca77U

/* One slot as the device reads it: one 16-byte load. */
struct hm_table_slot {
	__u64 chunk;	/* guest address >> chunk shift, or HM_TABLE_EMPTY_CHUNK */
	__s64 delta;	/* device address - guest address for this chunk */
};

/* Marks: index of the sink word and of slot i's word. */
#define HM_MARK_SINK		0
#define HM_MARK_INDEX(slot)	(1 + (slot))

/*
 * Mirror window (D969a): one device range over the guest spaces at one
 * delta.  A mirrored chunk's bytes lie at guest + window delta; every
 * other window word, and a guard of at least HM_WINDOW_GUARD_BYTES before
 * and after the spaces, reads HM_WINDOW_SENTINEL.  A speculative load
 * clamps guest + delta into [window first, window last] (last = the
 * device address of the window's last HM_ACCESS_MAX_BYTES) and trusts a
 * word that is not the sentinel; a guest word equal to it only costs the
 * lookup.  A window with nothing mirrored (rule 5, or none built) is the
 * guard alone: every clamped load reads the sentinel.
 */
#define HM_WINDOW_SENTINEL	0xffffffffU
#define HM_WINDOW_GUARD_BYTES	65536

/*
 * Push block: the device table's words first, in this order, then the
 * mirror window's, then the user's words.  Layout version 2 (the window's
 * words added); version 1 had the six table words alone.
 * DEVICE_TABLE_PUSH_WORDS = 12.
 */
#define HM_PUSH_LAYOUT_VERSION	2
#define HM_DEVICE_TABLE_PUSH_WORDS 12
#define DEVICE_TABLE_PUSH_WORDS	HM_DEVICE_TABLE_PUSH_WORDS
/*
 * Vulkan guarantees 128 bytes of push constants (maxPushConstantsSize):
 * the user's words are what the table's and window's leave of them.  The
 * one limit of the engine (HM_ENGINE_MAX_USER_PUSH_WORDS) and the daemon
 * (HM_PROTO_MAX_PUSH, hm_msg_hello_reply.max_push_words); more is -E2BIG.
 */
#define HM_PUSH_BLOCK_WORDS	32
#define HM_USER_PUSH_WORDS_MAX	(HM_PUSH_BLOCK_WORDS - HM_DEVICE_TABLE_PUSH_WORDS)
enum hm_device_table_push_word {
	HM_PUSH_TABLE_ADDR_LO	= 0,	/* device address of slot 0 */
	HM_PUSH_TABLE_ADDR_HI	= 1,
	HM_PUSH_TABLE_NR_HOME	= 2,	/* the table's size: nr of home slots */
	HM_PUSH_CHUNK_SHIFT	= 3,
	HM_PUSH_MARKS_ADDR_LO	= 4,	/* device address of the sink word */
	HM_PUSH_MARKS_ADDR_HI	= 5,
	HM_PUSH_WINDOW_DELTA_LO	= 6,	/* window device address - guest address */
	HM_PUSH_WINDOW_DELTA_HI	= 7,
	HM_PUSH_WINDOW_FIRST_LO	= 8,	/* device address of the window's first byte */
	HM_PUSH_WINDOW_FIRST_HI	= 9,
	HM_PUSH_WINDOW_LAST_LO	= 10,	/* ... of its last 64 bytes */
	HM_PUSH_WINDOW_LAST_HI	= 11,
};

struct hm_device_table_push {
	__u32 table_addr_lo;
	__u32 table_addr_hi;
	__u32 nr_home;
	__u32 chunk_shift;
	__u32 marks_addr_lo;
	__u32 marks_addr_hi;
	__u32 window_delta_lo;
	__u32 window_delta_hi;
	__u32 window_first_lo;
	__u32 window_first_hi;
	__u32 window_last_lo;
	__u32 window_last_hi;
};

#endif /* _UAPI_LINUX_HMIRROR_TABLE_H */
