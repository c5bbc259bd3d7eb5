/* SPDX-License-Identifier: GPL-2.0 WITH Linux-syscall-note */
/*
 * hmirror.ko userspace ABI: guest spaces, write-watch guards, harvest,
 * write generations, the device view (userspace-api.rst; hmirror(7) says
 * where the documentation is installed).
 *
 * Flow (uffd-style):
 *
 *   dev = open("/dev/hmirror", O_RDWR | O_CLOEXEC);
 *   ioctl(dev, HMIRROR_IOC_API, &api);         version, features, ioctls
 *   ioctl(dev, HMIRROR_IOC_CREATE, &create);   create.fd = the space fd
 *   p = mmap(guest, size, PROT_READ | PROT_WRITE, MAP_SHARED, create.fd, 0);
 *   ioctl(create.fd, HMIRROR_IOC_ARM, &arm);   write-watch chunks
 *   ... CPU writes; the first write to an armed chunk is recorded ...
 *   ioctl(create.fd, HMIRROR_IOC_HARVEST, &h); written chunks, re-armed
 *
 * All structs are fixed size, a multiple of 8 bytes, inputs before
 * outputs; pointers are passed as __u64.  Unknown flags and non-zero
 * padding are rejected with EINVAL.  On error the output fields are
 * zeroed.  Ioctls are issued on the /dev/hmirror fd ("dev"), on a space
 * fd ("space") or on a pin fd as noted; the wrong kind of fd gives ENOTTY.
 */
#ifndef _UAPI_LINUX_HMIRROR_H
#define _UAPI_LINUX_HMIRROR_H

#include <linux/types.h>
#include <linux/const.h>
#include <linux/ioctl.h>

#define HMIRROR_API			0xaa	/* ABI version */
#define HMIRROR_IOC_MAGIC		0xb6

#define HMIRROR_DEFAULT_CHUNK_SHIFT	16	/* 64 KiB */
#define HMIRROR_MAX_CHUNK_SHIFT		30	/* 1 GiB */

/*
 * mmap offsets on a space fd.  Offset 0 .. size: the guarded CPU mapping
 * (MAP_SHARED).  HMIRROR_MMAP_VIEW .. + size: the device view: the same
 * pages, never write-protected by guards, without write-notify (so it can
 * be pinned long-term for writing, e.g. imported as a host pointer),
 * writes through it not recorded.  HMIRROR_MMAP_GENERATIONS .. : the
 * generation array, one __u64 per chunk, read-only (PROT_WRITE and
 * mprotect to writable are refused).  The offsets are also returned by
 * HMIRROR_IOC_CREATE and HMIRROR_IOC_SPACE_INFO; spaces are smaller than
 * HMIRROR_MMAP_VIEW.
 */
#define HMIRROR_MMAP_VIEW		_BITULL(46)
#define HMIRROR_MMAP_GENERATIONS	_BITULL(47)
#define HMIRROR_MAX_SPACE_BYTES		HMIRROR_MMAP_VIEW

/*
 * Write generations (one __u64 per chunk).  Even: the chunk is armed and
 * write-protected everywhere, and has not been written since.  Odd: not
 * clean (never armed, disarmed, written since armed, or being re-armed).
 * The value only grows; it changes on the first write after an arm.
 * Seqcount check (rule 3 of data-path.rst): g0 = gen; if (g0 & 1) not clean; copy;
 * clean iff gen == g0 afterwards.
 */
#define HMIRROR_GEN_CLEAN(g)		(((g) & 1) == 0)

/* ---- HMIRROR_IOC_API (dev) --------------------------------------------- */

/* features */
#define HMIRROR_FEATURE_POPULATE	_BITULL(0)	/* HMIRROR_CREATE_POPULATE */
#define HMIRROR_FEATURE_DEVICE_VIEW	_BITULL(1)	/* HMIRROR_MMAP_VIEW */
#define HMIRROR_FEATURE_GEN_MMAP	_BITULL(2)	/* HMIRROR_MMAP_GENERATIONS */
#define HMIRROR_FEATURE_POLL		_BITULL(3)	/* poll() on a space fd */
#define HMIRROR_FEATURE_ARM_RANGES	_BITULL(4)	/* hmirror_arm.ranges */
#define HMIRROR_FEATURE_DISARM		_BITULL(5)	/* HMIRROR_ARM_DISARM */
/* HMIRROR_HARVEST_NO_REARM */
#define HMIRROR_FEATURE_HARVEST_NO_REARM	_BITULL(6)
/*
 * Arming leaves PTEs clean as well as read-only, so no mprotect(),
 * userfaultfd un-protect or NUMA hinting fault makes an armed page
 * writable unseen; chunks with GUP-pinned pages stay written at re-arm;
 * ftruncate() is refused.  A module without this bit can lose writes.
 */
#define HMIRROR_FEATURE_STRICT_ARM	_BITULL(7)
/*
 * A trip makes the rest of its chunk's present PTEs writable: filling a
 * chunk costs one fault.  Without it (a kernel that does not export a PTE
 * walker), each page of a chunk takes a fault of its own.
 */
#define HMIRROR_FEATURE_TRIP_OPENS_CHUNK	_BITULL(8)

struct hmirror_api {
	__u64 api;		/* in: HMIRROR_API */
	__u64 features;		/* out: HMIRROR_FEATURE_* supported */
	__u64 ioctls;		/* out: bit (1 << _IOC_NR(cmd)) per ioctl */
};

/* ---- HMIRROR_IOC_CREATE (dev) ------------------------------------------ */

#define HMIRROR_CREATE_POPULATE	_BITUL(0)	/* allocate every page now */
#define HMIRROR_CREATE_NONBLOCK	_BITUL(1)	/* the space fd is O_NONBLOCK */
/* the space fd is always O_CLOEXEC */

struct hmirror_create {
	__u64 size;		/* in: bytes, multiple of the chunk size */
	__u32 chunk_shift;	/* in: PAGE_SHIFT..30; 0 = 16 (64 KiB) */
	__u32 flags;		/* in: HMIRROR_CREATE_* */
	__s32 fd;		/* out: the space fd */
	__u32 id;		/* out: space id (debugfs, netlink), never 0 */
	__u64 nr_chunks;	/* out */
	__u64 view_offset;	/* out: HMIRROR_MMAP_VIEW */
	__u64 gen_offset;	/* out: HMIRROR_MMAP_GENERATIONS */
};

/* ---- HMIRROR_IOC_SPACE_INFO (space) ------------------------------------ */

struct hmirror_space_info {
	__u64 size;		/* out */
	__u32 chunk_shift;	/* out */
	__u32 id;		/* out */
	__u64 nr_chunks;	/* out */
	__u64 view_offset;	/* out */
	__u64 gen_offset;	/* out */
	__u64 written;		/* out: chunks recorded, not yet harvested */
};

/* ---- HMIRROR_IOC_ARM (space) ------------------------------------------- */

struct hmirror_range {
	__u64 first;		/* first chunk */
	__u64 count;		/* number of chunks, > 0 */
};

#define HMIRROR_ARM_DISARM	_BITUL(0)	/* stop watching instead */
#define HMIRROR_MAX_ARM_RANGES	65536

/*
 * Arm write-watch over chunks.  nr_ranges == 0: the one range [first,
 * first + count); otherwise ranges points at nr_ranges struct
 * hmirror_range and first and count must be 0.  Ranges may overlap and
 * come in any order: the union is armed, in one pass over the space at
 * most.  Arming an armed chunk does nothing; arming a written,
 * unharvested chunk re-arms it and keeps its record for the next harvest.
 * A chunk with a page pinned by GUP (O_DIRECT, process_vm_writev) at that
 * moment is armed but stays recorded written (odd generation).  Errors:
 * EINVAL (flags, pad, count 0, overflow, both forms), ERANGE (chunk
 * outside the space), E2BIG (nr_ranges > HMIRROR_MAX_ARM_RANGES), EFAULT,
 * EINTR (fatal signal: some chunks may be armed, none is lost).  Nothing
 * is armed when validation fails.
 */
struct hmirror_arm {
	__u64 first;		/* in */
	__u64 count;		/* in */
	__u64 ranges;		/* in: pointer to struct hmirror_range[] */
	__u32 nr_ranges;	/* in */
	__u32 flags;		/* in: HMIRROR_ARM_* */
};

/* ---- HMIRROR_IOC_HARVEST (space) --------------------------------------- */

#define HMIRROR_HARVEST_MORE	_BITUL(0)	/* out: stopped at cap, call again */
#define HMIRROR_HARVEST_NO_REARM _BITUL(0)	/* in: take the record only */

/*
 * Read-and-re-arm: stores at most cap written chunk numbers, ascending,
 * in chunks[], re-arms them and forgets their record.  A write racing the
 * harvest is reported by this harvest or the next (possibly by both);
 * never lost.  MORE: the call stopped at cap with chunks recorded past the
 * last one stored (chunks written behind it during the call, or kept
 * recorded because pinned, wait for the next call without MORE; poll()
 * says so).  cap == 0 only reports (nr = 0, MORE if any are recorded).
 *
 * HMIRROR_HARVEST_NO_REARM: take and forget the record, re-arm nothing.
 * The chunks stay unarmed and odd: later writes to them are not recorded
 * until someone arms them again (e.g. before uploading a mirror).  Costs
 * the bits of what was written: no page table walk, no TLB flush, no lock
 * a page fault waits on.
 *
 * Errors: EINVAL (flags, pad), EFAULT, EINTR (fatal signal), ENOMEM.
 */
struct hmirror_harvest {
	__u64 chunks;		/* in: pointer to __u64[cap] */
	__u64 cap;		/* in */
	__u32 flags;		/* in: HMIRROR_HARVEST_* (NO_REARM) */
	__u32 __pad;
	__u64 nr;		/* out: chunk numbers stored */
	__u32 out_flags;	/* out: HMIRROR_HARVEST_MORE */
	__u32 __pad2;
};

/* ---- HMIRROR_IOC_GENERATIONS (space) ----------------------------------- */

#define HMIRROR_MAX_GEN_BATCH	65536

/*
 * gens[i] = generation of chunk chunks[i], i < count.  Same values as the
 * HMIRROR_MMAP_GENERATIONS mapping.  Errors: EINVAL, E2BIG (count >
 * HMIRROR_MAX_GEN_BATCH), ERANGE (chunk outside the space), EFAULT.
 */
struct hmirror_generations {
	__u64 chunks;		/* in: pointer to __u64[count] */
	__u64 gens;		/* in: pointer to __u64[count], written */
	__u64 count;		/* in */
	__u64 flags;		/* in: 0 */
};

#define HMIRROR_NR_API		0x00
#define HMIRROR_NR_CREATE	0x01
#define HMIRROR_NR_SPACE_INFO	0x02
#define HMIRROR_NR_ARM		0x03
#define HMIRROR_NR_HARVEST	0x04
#define HMIRROR_NR_GENERATIONS	0x05

#define HMIRROR_IOC_API \
	_IOWR(HMIRROR_IOC_MAGIC, HMIRROR_NR_API, struct hmirror_api)
#define HMIRROR_IOC_CREATE \
	_IOWR(HMIRROR_IOC_MAGIC, HMIRROR_NR_CREATE, struct hmirror_create)
#define HMIRROR_IOC_SPACE_INFO \
	_IOR(HMIRROR_IOC_MAGIC, HMIRROR_NR_SPACE_INFO, struct hmirror_space_info)
#define HMIRROR_IOC_ARM \
	_IOW(HMIRROR_IOC_MAGIC, HMIRROR_NR_ARM, struct hmirror_arm)
#define HMIRROR_IOC_HARVEST \
	_IOWR(HMIRROR_IOC_MAGIC, HMIRROR_NR_HARVEST, struct hmirror_harvest)
#define HMIRROR_IOC_GENERATIONS \
	_IOW(HMIRROR_IOC_MAGIC, HMIRROR_NR_GENERATIONS, struct hmirror_generations)

/* ---- pins, dma-buf export, generic netlink ------------------------------ */

/*
 * HMIRROR_IOC_PIN (dev): pin [addr, addr + size) of the caller's anonymous
 * or memfd (shmem) memory for device use, charged to RLIMIT_MEMLOCK.
 * Returns a pin fd: closing it unpins.  Errors: ENOMEM past RLIMIT_MEMLOCK
 * (or the max_pin_mib parameter), ENOSPC past max_pins, EFAULT for a hole,
 * EINVAL for flags, pad, alignment or another kind of mapping, EAGAIN when
 * invalidations kept racing the pinning.
 */
#define HMIRROR_PIN_WRITE	_BITUL(0)	/* the device may write */
#define HMIRROR_PIN_CLOEXEC	_BITUL(1)	/* pin fd is O_CLOEXEC */
#define HMIRROR_PIN_FLAGS	(HMIRROR_PIN_WRITE | HMIRROR_PIN_CLOEXEC)

struct hmirror_pin_create {
	__u64 addr;		/* in: page aligned */
	__u64 size;		/* in: page aligned, > 0 */
	__u32 flags;		/* in: HMIRROR_PIN_* */
	__u32 __pad;		/* in: 0 */
	__s32 fd;		/* out: the pin fd */
	__u32 id;		/* out: the pin's id in netlink events */
};

enum hmirror_pin_state_value {
	HMIRROR_PIN_STATE_INVALID = 0,
	HMIRROR_PIN_STATE_ACTIVE,	/* frames are the process's frames */
	HMIRROR_PIN_STATE_INVALIDATED,	/* they may not be: drop the import */
};

/* why a pin was invalidated: the kernel's notifier event, not the syscall */
enum hmirror_inval_cause {
	HMIRROR_INVAL_NONE = 0,
	HMIRROR_INVAL_UNMAP,		/* munmap, mremap move */
	HMIRROR_INVAL_CLEAR,		/* MADV_DONTNEED, COW, migration, ... */
	HMIRROR_INVAL_RELEASE,		/* the address space is gone */
	HMIRROR_INVAL_MIGRATE,		/* device migration (migrate_vma) */
	HMIRROR_INVAL_EXCLUSIVE,	/* made exclusive to another device */
	HMIRROR_INVAL_OTHER,
};

/*
 * HMIRROR_IOC_PIN_STATE (pin fd).  The fd also polls EPOLLPRI once the pin
 * is invalidated; a pin is invalidated at most once and stays so.
 */
struct hmirror_pin_state {
	__u32 flags;		/* in: 0 */
	__u32 __pad;		/* in: 0 */
	__u64 addr;		/* out: the pinned range */
	__u64 size;		/* out */
	__u64 inval_addr;	/* out: first invalidated range, within the pin */
	__u64 inval_size;	/* out: 0 while active */
	__u32 state;		/* out: HMIRROR_PIN_STATE_* */
	__u32 cause;		/* out: HMIRROR_INVAL_* */
	__u32 id;		/* out */
	__u32 __pad2;		/* out: 0 */
};

/*
 * HMIRROR_IOC_EXPORT_DMABUF (space fd or pin fd): a dma-buf of [offset,
 * offset + size) of its pages.  The dma-buf is never write-protected by
 * guards; writes through it are not recorded.  It keeps its pages (and the
 * pin) alive until released.  EACCES: writable export of a read-only pin.
 */
#define HMIRROR_DMABUF_CLOEXEC	_BITUL(0)
#define HMIRROR_DMABUF_RDONLY	_BITUL(1)	/* dma-buf fd is O_RDONLY */
#define HMIRROR_DMABUF_FLAGS	(HMIRROR_DMABUF_CLOEXEC | HMIRROR_DMABUF_RDONLY)

struct hmirror_dmabuf_export {
	__u64 offset;		/* in: bytes, page aligned */
	__u64 size;		/* in: bytes, page aligned; 0 = to the end */
	__u32 flags;		/* in: HMIRROR_DMABUF_* */
	__u32 __pad;		/* in: 0 */
	__s32 fd;		/* out: the dma-buf fd */
	__u32 __pad2;		/* out: 0 */
};

#define HMIRROR_FEATURE_PIN		_BITULL(16)	/* HMIRROR_IOC_PIN */
#define HMIRROR_FEATURE_DMABUF		_BITULL(17)	/* HMIRROR_IOC_EXPORT_DMABUF */
#define HMIRROR_FEATURE_NETLINK		_BITULL(18)	/* genl family "hmirror" */

#define HMIRROR_NR_PIN			0x10
#define HMIRROR_NR_PIN_STATE		0x11
#define HMIRROR_NR_EXPORT_DMABUF	0x12

/* dev */
#define HMIRROR_IOC_PIN		_IOWR(HMIRROR_IOC_MAGIC, HMIRROR_NR_PIN, struct hmirror_pin_create)
/* pin fd */
#define HMIRROR_IOC_PIN_STATE	\
	_IOWR(HMIRROR_IOC_MAGIC, HMIRROR_NR_PIN_STATE, struct hmirror_pin_state)
/* space fd or pin fd */
#define HMIRROR_IOC_EXPORT_DMABUF \
	_IOWR(HMIRROR_IOC_MAGIC, HMIRROR_NR_EXPORT_DMABUF, struct hmirror_dmabuf_export)

/*
 * ---- generic netlink family "hmirror" -----------------------------------
 * netlink/specs/hmirror.yaml of the documentation is the specification.  Requests
 * are validated strictly: unknown attributes, wrong lengths, non-zero
 * reserved header fields are refused (EINVAL/ERANGE, with an extack).
 * Unprivileged callers (without CAP_SYS_ADMIN) see only spaces their uid
 * created; joining the "events" group needs CAP_NET_ADMIN.
 */
#define HMIRROR_GENL_NAME		"hmirror"
#define HMIRROR_GENL_VERSION		1
#define HMIRROR_GENL_MCGRP_EVENTS	"events"

enum hmirror_nl_cmd {
	HMIRROR_CMD_UNSPEC,
	HMIRROR_CMD_STATS_GET,		/* do: global counters */
	HMIRROR_CMD_SPACE_GET,		/* do (SPACE_ID) or dump: per space */
	HMIRROR_CMD_CHUNKS_WRITTEN,	/* event: chunks recorded written */
	HMIRROR_CMD_RANGE_INVALIDATED,	/* event: a pin was invalidated */
	HMIRROR_CMD_SPACE_NEW,		/* event */
	HMIRROR_CMD_SPACE_DEL,		/* event */
	__HMIRROR_CMD_MAX,
};

#define HMIRROR_CMD_MAX (__HMIRROR_CMD_MAX - 1)

enum hmirror_nl_attr {
	HMIRROR_A_UNSPEC,
	HMIRROR_A_PAD,
	HMIRROR_A_COUNTER,		/* nest, repeated: HMIRROR_A_COUNTER_* */
	HMIRROR_A_SPACE_ID,		/* u32, > 0 */
	HMIRROR_A_OWNER_PID,		/* u32: creator's tgid, init pid ns */
	HMIRROR_A_OWNER_UID,		/* u32: creator's euid, init user ns */
	HMIRROR_A_SPACE_SIZE,		/* u64: bytes */
	HMIRROR_A_CHUNK_SHIFT,		/* u32 */
	HMIRROR_A_SPACE_WRITTEN,	/* u64: chunks recorded, unharvested */
	HMIRROR_A_CHUNK,		/* nest, repeated: HMIRROR_A_CHUNK_* */
	HMIRROR_A_CHUNKS_LOST,		/* u64: records dropped since the last */
	HMIRROR_A_PIN_ID,		/* u32 */
	HMIRROR_A_ADDR,			/* u64 */
	HMIRROR_A_SIZE,			/* u64 */
	HMIRROR_A_INVAL_CAUSE,		/* u32: HMIRROR_INVAL_* */
	__HMIRROR_A_MAX,
};

#define HMIRROR_A_MAX (__HMIRROR_A_MAX - 1)

enum hmirror_nl_counter_attr {
	HMIRROR_A_COUNTER_UNSPEC,
	HMIRROR_A_COUNTER_PAD,
	HMIRROR_A_COUNTER_NAME,		/* string, the debugfs name */
	HMIRROR_A_COUNTER_VALUE,	/* u64 */
	__HMIRROR_A_COUNTER_MAX,
};

#define HMIRROR_A_COUNTER_MAX (__HMIRROR_A_COUNTER_MAX - 1)

enum hmirror_nl_chunk_attr {
	HMIRROR_A_CHUNK_UNSPEC,
	HMIRROR_A_CHUNK_PAD,
	HMIRROR_A_CHUNK_INDEX,		/* u64: chunk number in the space */
	HMIRROR_A_CHUNK_GEN,		/* u64: its write generation */
	__HMIRROR_A_CHUNK_MAX,
};

#define HMIRROR_A_CHUNK_MAX (__HMIRROR_A_CHUNK_MAX - 1)

#endif /* _UAPI_LINUX_HMIRROR_H */
