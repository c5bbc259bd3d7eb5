// SPDX-License-Identifier: GPL-2.0
/*
 * hmirror.ko ioctl fuzzer: every ioctl of uapi/linux/hmirror.h, on every
 * kind of fd the module hands out (space, pin, dma-buf) and on others,
 * with valid-ish and mutated arguments, interleaved with mmap, munmap,
 * mprotect, madvise, mremap, fork, kernel writes through the mappings, fd
 * passing between the two worker processes and closing.  The ioctl table
 * (numbers, struct layouts, field roles) is generated from the uapi header
 * by selftests/kmod/fuzz_abi.py at build time.
 *
 * Fails on: an errno the ABI does not name, outputs left non-zero on an
 * error, a failing call that leaves a new fd behind, a worker crash; after
 * the workers exit, any debugfs gauge (spaces, pages, mappings, pins,
 * dma-bufs) not back to 0, or the module refusing to unload.  A kernel
 * WARN/BUG/Oops is caught by tools/vm/ktest around it.
 *
 *   HMIRROR_FUZZ_SECS (default 30), HMIRROR_FUZZ_SEED (default: time)
 *   tools/vm/run --kernel 6.1 -- build/bin/test-kmod-fuzz-ioctl
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <poll.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <linux/dma-buf.h>
#include <linux/hmirror.h>

#include "hmirror_test.h"
#include "kselftest.h"

/* ---- what the generated table is made of ------------------------------- */

enum fz_fd_kind {
	FZ_FD_NONE,		/* closed, or never an fd */
	FZ_FD_DEV,
	FZ_FD_SPACE,
	FZ_FD_PIN,
	FZ_FD_DMABUF,
	FZ_FD_OTHER,		/* pipe, eventfd, socket, /dev/null */
	FZ_NR_KINDS
};

#define FZ_K(k)		(1u << (k))

static const char *const fz_kind_names[FZ_NR_KINDS] = {
	"closed", "dev", "space", "pin", "dmabuf", "other",
};

enum fz_role {
	FZ_NUM,		/* a number; its name says what it means */
	FZ_PAD,		/* must be 0 */
	FZ_FLAGS,	/* valid bits in .flags */
	FZ_ZERO,	/* reserved, must be 0 */
	FZ_CONST,	/* one valid value, .value */
	FZ_PTR,		/* user pointer to .count_field elements */
	FZ_FD,		/* out: a new fd of .fd_kind */
};

struct fz_struct;

struct fz_field {
	const char *name;
	unsigned int offset, size;
	enum fz_role role;
	int out;
	uint64_t flags;
	uint64_t value;
	size_t elem_size;
	const struct fz_struct *elem;
	const char *count_field;
	enum fz_fd_kind fd_kind;
};

struct fz_struct {
	const char *name;
	size_t size;
	const struct fz_field *fields;
	unsigned int nr_fields;
};

struct fz_ioctl {
	const char *name;
	unsigned long cmd;
	const char *dir;
	const struct fz_struct *st;
	unsigned int kinds;
};

struct fz_const {
	const char *name;
	uint64_t v;
};

#include "kmod_fuzz_abi.h"

#define NR_IOCTLS	(sizeof(fz_ioctls) / sizeof(fz_ioctls[0]))
#define NR_CONSTS	(sizeof(fz_consts) / sizeof(fz_consts[0]))

/* ---- shared results ------------------------------------------------------ */

#define NR_WORKERS	2
#define MAX_ERRNO	160
#define LOG_LINES	24
#define LOG_LEN		200

enum fz_op {
	OP_IOCTL, OP_MMAP, OP_MUNMAP, OP_TOUCH, OP_MPROTECT, OP_MADVISE,
	OP_MREMAP, OP_FORK, OP_KWRITE, OP_CLOSE, OP_DUP, OP_SEND, OP_RECV,
	OP_POLL, OP_REGION, OP_REGION_DROP, OP_DMABUF_SYNC, OP_RW, OP_TRUNCATE,
	OP_NR
};

static const char *const op_names[OP_NR] = {
	"ioctl", "mmap", "munmap", "touch", "mprotect", "madvise", "mremap",
	"fork", "kernel-write", "close", "dup", "send-fd", "recv-fd", "poll",
	"region", "region-drop", "dmabuf-sync", "read/write", "ftruncate",
};

struct fz_worker_log {
	unsigned int next;
	char line[LOG_LINES][LOG_LEN];
};

struct fz_shared {
	/* per ioctl: calls on each fd kind, successes, errnos */
	uint64_t calls[NR_IOCTLS][FZ_NR_KINDS];
	uint64_t ok[NR_IOCTLS];
	uint64_t err[NR_IOCTLS][MAX_ERRNO];
	uint64_t mutated_cmd;
	uint64_t ops[OP_NR];
	uint64_t fds[FZ_NR_KINDS];	/* fds created (or received) by kind */
	uint64_t fd_uses[FZ_NR_KINDS];	/* calls aimed at fds of each kind */
	uint64_t received;		/* fds from the other worker */
	uint64_t forks;
	uint64_t segv;			/* expected faults of touches */
	uint64_t efault_fd_left;	/* see check_no_new_fd() */
	unsigned int nr_fail;		/* violations */
	unsigned int nr_msgs;		/* distinct ones kept in fail[] */
	char fail[8][LOG_LEN];
	const char *fail_fmt[8];	/* same binary in both workers */
	struct fz_worker_log log[2 * NR_WORKERS];	/* workers, then their children */
};

static struct fz_shared *sh;
static int me;			/* worker index */
static bool in_child;		/* a forked child of a worker */
static uint64_t rng_state;

static uint64_t rnd(void)
{
	/* xorshift64*: reproducible from HMIRROR_FUZZ_SEED */
	rng_state ^= rng_state >> 12;
	rng_state ^= rng_state << 25;
	rng_state ^= rng_state >> 27;
	return rng_state * 0x2545f4914f6cdd1dull;
}

static uint64_t rndn(uint64_t n)
{
	return n ? rnd() % n : 0;
}

static bool chance(unsigned int pct)
{
	return rndn(100) < pct;
}

static void logop(const char *fmt, ...)
{
	struct fz_worker_log *l = &sh->log[me + (in_child ? NR_WORKERS : 0)];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(l->line[l->next % LOG_LINES], LOG_LEN, fmt, ap);
	va_end(ap);
	l->next++;
}

/* count a violation; keep the first few distinct messages */
static void fail(const char *fmt, ...)
{
	char msg[LOG_LEN];
	unsigned int i, n;
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	__atomic_fetch_add(&sh->nr_fail, 1, __ATOMIC_RELAXED);
	/* one message per format and ioctl (the first 24 characters) */
	for (i = 0; i < 8; i++)
		if (sh->fail_fmt[i] == fmt && !strncmp(sh->fail[i], msg, 24))
			return;
	n = __atomic_fetch_add(&sh->nr_msgs, 1, __ATOMIC_RELAXED);
	if (n < 8) {
		memcpy(sh->fail[n], msg, sizeof(msg));
		sh->fail_fmt[n] = fmt;
	}
}

/* ---- the worker's world -------------------------------------------------- */

#define MAX_FDS		48
#define MAX_MAPS	48
#define MAX_REGIONS	8
#define MAX_SPACES	20	/* per worker, well below max_spaces_per_process */
#define MAX_PINS	16
#define MAX_DMABUFS	12
#define MAX_OBJ_BYTES	(4ull << 20)	/* biggest space/pin/export made valid */
#define SCRATCH_BYTES	(2u << 20)

struct fz_fd {
	int fd;
	enum fz_fd_kind kind;
	uint64_t size;		/* space, pin or dma-buf bytes */
	uint64_t nr_chunks;
	unsigned int chunk_shift;
	bool peer;		/* received from the other worker */
	bool rdonly;		/* dma-buf exported read-only */
};

struct fz_map {
	char *addr;
	size_t len;
	int prot;
	bool space;		/* guarded or view mapping of a space */
};

struct fz_region {		/* memory to pin */
	char *addr;
	size_t len;
	const char *what;
};

static struct fz_fd fds[MAX_FDS];
static unsigned int nr_fds;
static struct fz_map maps[MAX_MAPS];
static unsigned int nr_maps;
static struct fz_region regions[MAX_REGIONS];
static unsigned int nr_regions;
static int sock = -1;		/* to the other worker */
static long ps;
static char *scratch;		/* SCRATCH_BYTES, then a PROT_NONE page */
static char *argpage;		/* 2 pages RW, then a PROT_NONE page */
static char *ropage;		/* a read-only page */
static char *nopage;		/* 16 PROT_NONE pages: "unmapped" addresses */
static int nr_children;

static sigjmp_buf touch_jmp;
static volatile sig_atomic_t touching;

static void on_fault(int sig, siginfo_t *si, void *uc)
{
	if (touching) {
		touching = 0;
		siglongjmp(touch_jmp, 1);
	}
	logop("signal %d at %p (code %d)", sig, si->si_addr, si->si_code);
	signal(sig, SIG_DFL);
	raise(sig);
}

static unsigned int count_kind(enum fz_fd_kind k, bool own)
{
	unsigned int i, n = 0;

	for (i = 0; i < nr_fds; i++)
		if (fds[i].kind == k && (!own || !fds[i].peer))
			n++;
	return n;
}

static void drop_fd(unsigned int i)
{
	fds[i] = fds[--nr_fds];
}

static void close_slot(unsigned int i)
{
	if (fds[i].kind != FZ_FD_NONE && fds[i].kind != FZ_FD_DEV)
		close(fds[i].fd);
	else if (fds[i].kind == FZ_FD_DEV && fds[i].fd != fds[0].fd)
		close(fds[i].fd);
	/* keep the number around: later calls use a closed (or reused) fd */
	if (chance(30) && i != 0)
		fds[i].kind = FZ_FD_NONE;
	else if (i != 0)
		drop_fd(i);
}

static void add_fd(int fd, enum fz_fd_kind kind, bool peer)
{
	struct hmirror_space_info si;
	unsigned int i;

	if (fd < 0)
		return;
	/* the fd number may be one of a closed slot: forget that one */
	for (i = 0; i < nr_fds; i++)
		if (fds[i].fd == fd && fds[i].kind == FZ_FD_NONE)
			drop_fd(i--);
	if (nr_fds == MAX_FDS) {
		close(fd);
		return;
	}
	memset(&fds[nr_fds], 0, sizeof(fds[0]));
	fds[nr_fds].fd = fd;
	fds[nr_fds].kind = kind;
	fds[nr_fds].peer = peer;
	if (kind == FZ_FD_SPACE) {
		memset(&si, 0, sizeof(si));
		if (!ioctl(fd, HMIRROR_IOC_SPACE_INFO, &si)) {
			fds[nr_fds].size = si.size;
			fds[nr_fds].nr_chunks = si.nr_chunks;
			fds[nr_fds].chunk_shift = si.chunk_shift;
			if (si.nr_chunks != si.size >> si.chunk_shift)
				fail("SPACE_INFO: nr_chunks %llu != size %llu >> %u",
				     (unsigned long long)si.nr_chunks,
				     (unsigned long long)si.size, si.chunk_shift);
		}
	} else if (kind == FZ_FD_PIN) {
		struct hmirror_pin_state st;

		memset(&st, 0, sizeof(st));
		if (!ioctl(fd, HMIRROR_IOC_PIN_STATE, &st))
			fds[nr_fds].size = st.size;
	} else if (kind == FZ_FD_DMABUF) {
		off_t end = lseek(fd, 0, SEEK_END);

		fds[nr_fds].size = end > 0 ? (uint64_t)end : 0;
	}
	sh->fds[kind]++;
	nr_fds++;
}

/* an fd, mostly of one of @kinds */
static struct fz_fd *pick_fd(unsigned int kinds)
{
	unsigned int i, n = 0, cand[MAX_FDS];

	for (i = 0; i < nr_fds; i++)
		if (kinds & FZ_K(fds[i].kind))
			cand[n++] = i;
	if (n && chance(85))
		return &fds[cand[rndn(n)]];
	return &fds[rndn(nr_fds)];
}

static void add_map(char *addr, size_t len, int prot, bool space)
{
	if (nr_maps == MAX_MAPS) {
		munmap(addr, len);
		return;
	}
	maps[nr_maps++] = (struct fz_map){ addr, len, prot, space };
}

/* ---- values ---------------------------------------------------------------- */

/* a boundary value: 0, 1, all ones, powers of two +-1, the ABI's constants +-1 */
static uint64_t boundary(void)
{
	uint64_t v;

	switch (rndn(7)) {
	case 0: return 0;
	case 1: return 1;
	case 2: return ~0ull >> rndn(2) * 32;
	case 3: v = 1ull << rndn(64); return v + rndn(3) - 1;
	case 4: v = fz_consts[rndn(NR_CONSTS)].v; return v + rndn(3) - 1;
	case 5: return (uint64_t)ps * rndn(5) + rndn(3) - 1;
	default: return rnd();
	}
}

/* an address that is never one of ours to be written: kernel, unmapped, RO */
static uint64_t bad_pointer(void)
{
	switch (rndn(6)) {
	case 0: return 0;
	case 1: return 8 + rndn(4096);
	case 2: return 0xffff888000000000ull + rndn(1 << 20) * 8;
	case 3: return (uintptr_t)nopage + rndn(16 * ps);
	case 4: return (uintptr_t)ropage + rndn(ps / 8) * 8;
	default: return 0x8000000000000000ull | rnd();	/* non-canonical */
	}
}

static uint64_t pick_shift(void)
{
	switch (rndn(4)) {
	case 0: return 0;
	case 1: return 12;
	case 2: return 12 + rndn(9);
	default: return chance(50) ? 16 : 21;
	}
}

/* a range of @n things inside [0, total): first, count (count > 0) */
static void sub_range(uint64_t total, uint64_t *first, uint64_t *count)
{
	if (!total) {
		*first = 0;
		*count = 1;
		return;
	}
	*first = rndn(total);
	*count = 1 + rndn(total - *first);
	if (chance(20)) {
		*first = 0;
		*count = total;
	}
}

static uint64_t get_field(const char *buf, const struct fz_field *f)
{
	uint64_t v = 0;

	memcpy(&v, buf + f->offset, f->size);
	return v;
}

static void set_field(char *buf, const struct fz_field *f, uint64_t v)
{
	memcpy(buf + f->offset, &v, f->size);
}

static const struct fz_field *find_field(const struct fz_struct *st,
					 const char *name)
{
	unsigned int i;

	for (i = 0; i < st->nr_fields; i++)
		if (!strcmp(st->fields[i].name, name))
			return &st->fields[i];
	return NULL;
}

/* page-aligned [addr, addr + size) inside one of the regions to pin */
static void pick_pin_range(uint64_t *addr, uint64_t *size)
{
	struct fz_region *r;
	uint64_t first, count;

	if (!nr_regions || chance(10)) {
		/* not anonymous or shmem memory: EINVAL or EFAULT */
		struct fz_map *m = nr_maps ? &maps[rndn(nr_maps)] : NULL;

		*addr = m ? (uintptr_t)m->addr : (uintptr_t)ropage;
		*size = m ? m->len : ps;
		return;
	}
	r = &regions[rndn(nr_regions)];
	sub_range(r->len / ps, &first, &count);
	*addr = (uintptr_t)r->addr + first * ps;
	*size = count * ps;
}

/*
 * Fill the input fields of @st at @buf with values that make sense for
 * @target (the fd the call goes to): the field's name says what it is;
 * names this file does not know get boundary values, so a new field of
 * the ABI is fuzzed too.
 */
static void fill_struct(const struct fz_ioctl *io, const struct fz_struct *st,
			char *buf, const struct fz_fd *target)
{
	uint64_t total = target->kind == FZ_FD_SPACE ? target->nr_chunks :
			 target->size / ps;
	uint64_t bytes = target->size;
	uint64_t first, count, shift;
	unsigned int i;

	memset(buf, 0, st->size);
	for (i = 0; i < st->nr_fields; i++) {
		const struct fz_field *f = &st->fields[i];
		const char *n = f->name;
		uint64_t v = 0;

		if (f->out)
			continue;
		switch (f->role) {
		case FZ_PAD:
		case FZ_ZERO:
		case FZ_FD:
			v = 0;
			break;
		case FZ_CONST:
			v = f->value;
			break;
		case FZ_FLAGS:
			v = rnd() & f->flags;
			break;
		case FZ_PTR:
			continue;	/* after the counts */
		case FZ_NUM:
			if (!strcmp(n, "chunk_shift")) {
				v = pick_shift();
			} else if (!strcmp(n, "size") && io && !strcmp(io->name, "CREATE")) {
				shift = get_field(buf, find_field(st, "chunk_shift"));
				shift = shift ?: HMIRROR_DEFAULT_CHUNK_SHIFT;
				v = (1 + rndn(32)) << shift;
				while (v > MAX_OBJ_BYTES)
					v >>= 1;
				v &= ~((1ull << shift) - 1);
			} else if (!strcmp(n, "addr")) {
				pick_pin_range(&first, &count);
				v = first;
				set_field(buf, find_field(st, "size"), count);
			} else if (!strcmp(n, "size") && io && strcmp(io->name, "PIN")) {
				/* export: [offset, offset + size) of the object */
				v = chance(30) ? 0 : rndn(bytes / ps + 1) * ps;
			} else if (!strcmp(n, "size")) {
				continue;	/* set with addr */
			} else if (!strcmp(n, "offset")) {
				v = bytes ? rndn(bytes / ps) * ps : 0;
			} else if (!strcmp(n, "first")) {
				sub_range(total, &first, &count);
				v = first;
				set_field(buf, find_field(st, "count"), count);
			} else if (!strcmp(n, "count") && find_field(st, "first")) {
				continue;	/* set with first */
			} else if (!strcmp(n, "count") || !strcmp(n, "cap")) {
				v = rndn(chance(90) ? 64 : total + 2);
			} else if (!strncmp(n, "nr_", 3)) {
				v = chance(50) ? 0 : 1 + rndn(8);
			} else {
				v = boundary();
			}
			break;
		}
		set_field(buf, f, v);
	}
	/* the two forms of ARM: one range, or ranges[] with first = count = 0 */
	if (find_field(st, "nr_ranges") && get_field(buf, find_field(st, "nr_ranges"))) {
		set_field(buf, find_field(st, "first"), 0);
		set_field(buf, find_field(st, "count"), 0);
	}
	/* export of a space with size "to the end" needs no cap; keep it small */
	if (io && !strcmp(io->name, "EXPORT_DMABUF") && bytes > MAX_OBJ_BYTES) {
		set_field(buf, find_field(st, "offset"), bytes - ps);
		set_field(buf, find_field(st, "size"), ps);
	}
	/* POPULATE only of small spaces */
	if (io && !strcmp(io->name, "CREATE") &&
	    get_field(buf, find_field(st, "size")) > (4u << 20))
		set_field(buf, find_field(st, "flags"),
			  get_field(buf, find_field(st, "flags")) &
			  ~(uint64_t)HMIRROR_CREATE_POPULATE);
}

/*
 * Point the pointer fields at arrays in scratch (elements filled for
 * @target), or, sometimes, at addresses that must fail.  Arrays end at
 * most at the guard page after scratch, so the kernel can never write
 * anything of ours but scratch.
 */
static void fill_pointers(const struct fz_ioctl *io, char *buf,
			  const struct fz_fd *target)
{
	const struct fz_struct *st = io->st;
	unsigned int i, nptr = 0;

	for (i = 0; i < st->nr_fields; i++) {
		const struct fz_field *f = &st->fields[i];
		const struct fz_field *cf;
		uint64_t n = 1, k, v;
		char *arr;

		if (f->role != FZ_PTR)
			continue;
		cf = f->count_field ? find_field(st, f->count_field) : NULL;
		if (cf)
			n = get_field(buf, cf);
		/* several arrays: each in its own half of scratch */
		arr = scratch + (nptr++ % 2) * (SCRATCH_BYTES / 2);
		if (!n || n > SCRATCH_BYTES / 2 / f->elem_size) {
			v = chance(50) ? (uintptr_t)arr : bad_pointer();
			set_field(buf, f, v);
			continue;
		}
		if (chance(10)) {
			/* the array runs into the guard page after scratch */
			arr = scratch + SCRATCH_BYTES - (n * f->elem_size) / 2;
			arr = (char *)((uintptr_t)arr & ~7ul);
			if (arr < scratch)
				arr = scratch;
		}
		for (k = 0; k < n && arr + (k + 1) * f->elem_size <= scratch + SCRATCH_BYTES; k++) {
			char *e = arr + k * f->elem_size;

			if (f->elem) {
				fill_struct(NULL, f->elem, e, target);
			} else {
				v = target->nr_chunks ? rndn(target->nr_chunks) : rnd();
				if (chance(3))
					v = boundary();
				memcpy(e, &v, sizeof(v));
			}
		}
		v = (uintptr_t)arr;
		if (chance(8))
			v = bad_pointer();
		else if (chance(3) && nr_maps)	/* into a mapping of a space */
			v = (uintptr_t)maps[rndn(nr_maps)].addr;
		set_field(buf, f, v);
	}
}

/* mutate one to three input fields of @buf */
static void mutate(const struct fz_struct *st, char *buf)
{
	unsigned int k, nm = 1 + rndn(3);

	for (k = 0; k < nm; k++) {
		const struct fz_field *f = &st->fields[rndn(st->nr_fields)];
		uint64_t v = get_field(buf, f);

		if (f->role == FZ_PTR) {
			set_field(buf, f, bad_pointer());
			continue;
		}
		switch (rndn(4)) {
		case 0: v ^= 1ull << rndn(f->size * 8); break;
		case 1: v = boundary(); break;
		case 2: v = v + (uint64_t)ps * (rndn(5) - 2) + rndn(3) - 1; break;
		default: v = ~v; break;
		}
		set_field(buf, f, v);
	}
}

/*
 * Keep what a call may allocate within the VM's memory, mutated or not:
 * a valid export of more than MAX_OBJ_BYTES, a populated space of more
 * than 4 MiB or a space of more than 64Ki chunks (its metadata) is cut
 * down.  Invalid requests stay as they are.
 */
static void budget(const struct fz_ioctl *io, char *buf, const struct fz_fd *t)
{
	const struct fz_struct *st = io->st;

	if (!strcmp(io->name, "CREATE")) {
		const struct fz_field *fs = find_field(st, "size");
		const struct fz_field *ff = find_field(st, "flags");
		uint64_t shift = get_field(buf, find_field(st, "chunk_shift"));
		uint64_t size = get_field(buf, fs);

		shift = shift ?: HMIRROR_DEFAULT_CHUNK_SHIFT;
		if (shift < 64 && (size >> shift) > 65536)
			set_field(buf, fs, size & ((65536ull << shift) - 1));
		if (get_field(buf, fs) > (4u << 20))
			set_field(buf, ff, get_field(buf, ff) & ~(uint64_t)HMIRROR_CREATE_POPULATE);
	} else if (!strcmp(io->name, "EXPORT_DMABUF")) {
		const struct fz_field *fo = find_field(st, "offset");
		const struct fz_field *fs = find_field(st, "size");
		uint64_t off = get_field(buf, fo), size = get_field(buf, fs);

		if (!size && off < t->size)
			size = t->size - off;
		if (size > MAX_OBJ_BYTES && off < t->size)
			set_field(buf, fs, MAX_OBJ_BYTES);
	}
}

static void do_munmap(void);

/* ---- ioctls -------------------------------------------------------------- */

/* errnos the ABI names for these ioctls (uapi/linux/hmirror.h) */
static bool errno_documented(int e)
{
	switch (e) {
	case EINVAL: case ENOTTY: case EFAULT: case ERANGE: case E2BIG:
	case ENOMEM: case ENOSPC: case EMFILE: case ENFILE: case EBADF:
	case EACCES: case EAGAIN: case EFBIG: case EINTR:
		return true;
	}
	return false;
}

/* the lowest free fd number now (what the next new fd would be) */
static int lowest_free_fd(void)
{
	int fd = dup(0);

	if (fd >= 0)
		close(fd);
	return fd;
}

static void do_ioctl(void)
{
	unsigned int idx = rndn(NR_IOCTLS);
	const struct fz_ioctl *io = &fz_ioctls[idx];
	const struct fz_struct *st = io->st;
	struct fz_fd *t = pick_fd(io->kinds);
	unsigned long cmd = io->cmd;
	bool cmd_mutated = false, arg_ok = true, kind_ok;
	const char *bad_input;
	char *buf, *arg;
	int ret, e, lowfd;
	unsigned int i;

	/* the struct ends at a page end, the next page is PROT_NONE, sometimes */
	buf = chance(90) ? argpage + rndn(ps / 8) * 8 :
			   argpage + 2 * ps - st->size;
	fill_struct(io, st, buf, t);
	fill_pointers(io, buf, t);
	if (chance(30))
		mutate(st, buf);
	budget(io, buf, t);
	arg = buf;
	if (chance(4)) {
		/* straddle into the guard page */
		arg = argpage + 2 * ps - rndn(st->size);
		memmove(arg, buf, argpage + 2 * ps - arg);
		arg_ok = false;
	} else if (chance(4)) {
		arg = (char *)(uintptr_t)bad_pointer();
		arg_ok = false;
	}
	if (chance(8)) {
		cmd_mutated = true;
		switch (rndn(5)) {
		case 0:	/* another size */
			cmd = (cmd & ~((unsigned long)_IOC_SIZEMASK << _IOC_SIZESHIFT)) |
			      ((unsigned long)rndn(300) << _IOC_SIZESHIFT);
			break;
		case 1:	/* another direction */
			cmd ^= (unsigned long)(1 + rndn(3)) << _IOC_DIRSHIFT;
			break;
		case 2:	/* another number */
			cmd = (cmd & ~((unsigned long)_IOC_NRMASK << _IOC_NRSHIFT)) |
			      ((unsigned long)rndn(256) << _IOC_NRSHIFT);
			break;
		case 3:
			cmd ^= 1ul << rndn(32);
			break;
		default:
			cmd = (uint32_t)rnd();
			break;
		}
		/* never an ioctl of another kind of file by accident */
		if (_IOC_TYPE(cmd) != HMIRROR_IOC_MAGIC)
			cmd = (cmd & ~((unsigned long)_IOC_TYPEMASK << _IOC_TYPESHIFT)) |
			      ((unsigned long)HMIRROR_IOC_MAGIC << _IOC_TYPESHIFT);
		arg_ok = false;
		sh->mutated_cmd++;
	}

	/* a non-zero pad or reserved field, an unknown flag, a wrong constant */
	bad_input = NULL;
	for (i = 0; i < st->nr_fields && arg_ok; i++) {
		const struct fz_field *f = &st->fields[i];
		uint64_t v = get_field(buf, f);

		if (f->out)
			continue;
		if (((f->role == FZ_PAD || f->role == FZ_ZERO) && v) ||
		    (f->role == FZ_FLAGS && (v & ~f->flags)) ||
		    (f->role == FZ_CONST && v != f->value))
			bad_input = f->name;
	}

	logop("ioctl %s%s fd %d (%s%s) arg %p", io->name, cmd_mutated ? " (cmd mutated)" : "",
	      t->fd, fz_kind_names[t->kind], t->peer ? ", peer's" : "", arg);
	lowfd = lowest_free_fd();
	ret = ioctl(t->fd, cmd, arg);
	e = ret ? errno : 0;
	sh->calls[idx][t->kind]++;
	sh->fd_uses[t->kind]++;
	if (!ret)
		sh->ok[idx]++;
	else
		sh->err[idx][e < MAX_ERRNO ? e : 0]++;

	/* only our module's answers are checked; other files answer as they do */
	kind_ok = t->kind == FZ_FD_DEV || t->kind == FZ_FD_SPACE || t->kind == FZ_FD_PIN;
	if (ret && kind_ok && !errno_documented(e))
		fail("ioctl %s on a %s fd: errno %d (%s), not one the ABI names",
		     io->name, fz_kind_names[t->kind], e, strerror(e));
	if (ret && kind_ok && arg_ok && (io->kinds & FZ_K(t->kind)) &&
	    e != ENOTTY && e != EFAULT && strchr(io->dir, 'R')) {
		for (i = 0; i < st->nr_fields; i++) {
			const struct fz_field *f = &st->fields[i];

			if (f->out && get_field(arg, f))
				fail("ioctl %s on a %s fd failed (%s) but left out field %s = %#llx",
				     io->name, fz_kind_names[t->kind], strerror(e), f->name,
				     (unsigned long long)get_field(arg, f));
		}
	}
	/* "Unknown flags and non-zero padding are rejected with EINVAL" */
	if (bad_input && kind_ok && !cmd_mutated && (io->kinds & FZ_K(t->kind)) && e != EINVAL)
		fail("ioctl %s on a %s fd with bad %s = %#llx: %s, not EINVAL", io->name,
		     fz_kind_names[t->kind], bad_input,
		     (unsigned long long)get_field(arg, find_field(st, bad_input)),
		     ret ? strerror(e) : "success");
	if (ret && lowfd >= 0 && fcntl(lowfd, F_GETFD) >= 0) {
		/* a failing call installed an fd (one it made, or closed ours) */
		if (e == EFAULT && !arg_ok)
			sh->efault_fd_left++;
		fail("ioctl %s on a %s fd failed (%s) and left fd %d installed",
		     io->name, fz_kind_names[t->kind], strerror(e), lowfd);
		close(lowfd);
	}
	if (ret == -1 && e == EMFILE && !strcmp(io->name, "CREATE")) {
		/* spaces live on in mappings and dma-bufs: let some go */
		for (i = 0; i < 8; i++)
			do_munmap();
		for (i = nr_fds; i-- > 1;)
			if (fds[i].kind == FZ_FD_DMABUF && chance(50))
				close_slot(i);
	}
	if (ret || cmd_mutated)
		return;
	/* new fds */
	for (i = 0; i < st->nr_fields; i++) {
		const struct fz_field *f = &st->fields[i];

		if (f->role == FZ_FD) {
			int nfd = (int)get_field(arg, f);
			enum fz_fd_kind k = f->fd_kind;

			if (fcntl(nfd, F_GETFD) < 0) {
				fail("ioctl %s succeeded with fd %d, not open", io->name, nfd);
				continue;
			}
			add_fd(nfd, k, false);
			if (k == FZ_FD_DMABUF)
				fds[nr_fds - 1].rdonly = (fcntl(nfd, F_GETFL) & O_ACCMODE) == O_RDONLY;
		} else if (f->out && f->role == FZ_PAD && get_field(arg, f)) {
			fail("ioctl %s: out pad %s = %#llx", io->name, f->name,
			     (unsigned long long)get_field(arg, f));
		}
	}
}

/* ---- memory ops ------------------------------------------------------------ */

static void do_mmap(void)
{
	struct fz_fd *t = pick_fd(FZ_K(FZ_FD_SPACE) | FZ_K(FZ_FD_DMABUF));
	uint64_t pages = t->size / ps, first, count, base = 0;
	int prot = PROT_READ | (chance(80) ? PROT_WRITE : 0);
	int flags = chance(92) ? MAP_SHARED : MAP_PRIVATE;
	char *p;

	if (t->kind == FZ_FD_SPACE) {
		switch (rndn(4)) {
		case 0: base = HMIRROR_MMAP_VIEW; break;
		case 1:
			base = HMIRROR_MMAP_GENERATIONS;
			pages = (t->nr_chunks * 8 + ps - 1) / ps;
			if (chance(80))
				prot = PROT_READ;
			break;
		}
	}
	sub_range(pages, &first, &count);
	if (chance(8))
		count += 1 + rndn(4);	/* past the end */
	if (count > 4096)
		count = 4096;
	logop("mmap fd %d (%s) off %#llx pages %llu prot %d", t->fd, fz_kind_names[t->kind],
	      (unsigned long long)(base + first * ps), (unsigned long long)count, prot);
	p = mmap(NULL, count * ps, prot, flags, t->fd, base + first * ps);
	if (p == MAP_FAILED)
		return;
	add_map(p, count * ps, prot, t->kind == FZ_FD_SPACE && base != HMIRROR_MMAP_GENERATIONS);
}

static void do_munmap(void)
{
	struct fz_map *m;
	size_t off, len;

	if (!nr_maps)
		return;
	m = &maps[rndn(nr_maps)];
	if (chance(70) || m->len == (size_t)ps) {
		logop("munmap %p %zu", m->addr, m->len);
		munmap(m->addr, m->len);
		*m = maps[--nr_maps];
		return;
	}
	/* a hole or an end: splits the VMA */
	off = rndn(m->len / ps) * ps;
	len = (1 + rndn((m->len - off) / ps)) * ps;
	logop("munmap part %p + %zu len %zu", m->addr, off, len);
	munmap(m->addr + off, len);
	if (off == 0) {
		m->addr += len;
		m->len -= len;
	} else {
		char *tail = m->addr + off + len;
		size_t tlen = m->len - off - len;

		m->len = off;
		if (tlen)	/* the tail beyond the hole is a mapping of its own */
			add_map(tail, tlen, m->prot, m->space);
	}
	if (!m->len)
		*m = maps[--nr_maps];
}

static void do_touch(void)
{
	struct fz_map *m;
	unsigned int k, n = 1 + rndn(64);
	volatile char *p;

	if (!nr_maps)
		return;
	m = &maps[rndn(nr_maps)];
	logop("touch %p len %zu prot %d", m->addr, m->len, m->prot);
	if (sigsetjmp(touch_jmp, 1)) {
		sh->segv++;
		return;
	}
	touching = 1;
	for (k = 0; k < n; k++) {
		p = m->addr + rndn(m->len);
		if (chance(60))
			*p = (char)rnd();
		else
			(void)*p;
	}
	touching = 0;
}

static void do_mprotect(void)
{
	struct fz_map *m;
	int prot;

	if (!nr_maps)
		return;
	m = &maps[rndn(nr_maps)];
	prot = (int)rndn(4) & (PROT_READ | PROT_WRITE);
	logop("mprotect %p %zu %d", m->addr, m->len, prot);
	if (!mprotect(m->addr, m->len, prot))
		m->prot = prot;
}

static void do_madvise(void)
{
	static const int advice[] = {
		MADV_DONTNEED, MADV_WILLNEED, MADV_REMOVE, MADV_DONTFORK,
		MADV_DOFORK, MADV_COLD, MADV_PAGEOUT, MADV_POPULATE_READ,
		MADV_POPULATE_WRITE, MADV_FREE,
	};
	int a = advice[rndn(sizeof(advice) / sizeof(advice[0]))];
	bool region = nr_regions && chance(40);
	char *addr;
	size_t len;

	if (region) {
		struct fz_region *r = &regions[rndn(nr_regions)];

		/* never beyond it: the next mapping may be scratch */
		addr = r->addr;
		len = ps * (1 + rndn(r->len / ps));
	} else if (nr_maps) {
		struct fz_map *m = &maps[rndn(nr_maps)];

		addr = m->addr;
		len = m->len;
	} else {
		return;
	}
	logop("madvise %p %zu %d", addr, len, a);
	madvise(addr, len, a);
}

static void do_mremap(void)
{
	struct fz_map *m;
	size_t nlen;
	char *p;

	if (!nr_maps)
		return;
	m = &maps[rndn(nr_maps)];
	nlen = chance(50) ? m->len : (1 + rndn(m->len / ps + 2)) * ps;
	logop("mremap %p %zu -> %zu", m->addr, m->len, nlen);
	p = mremap(m->addr, m->len, nlen, MREMAP_MAYMOVE);
	if (p == MAP_FAILED)
		return;
	if (nlen > m->len) {
		/* grown: the space mappings are VM_DONTEXPAND, so this must fail */
		if (m->space)
			fail("mremap grew a space mapping from %zu to %zu bytes", m->len, nlen);
	}
	m->addr = p;
	m->len = nlen;
}

/* the kernel writes into and reads from the mappings (GUP, copy_*_user) */
static void do_kwrite(void)
{
	static int urandom = -1, pfd[2] = { -1, -1 };
	struct fz_map *m;
	size_t len;
	char *p;

	if (!nr_maps)
		return;
	if (urandom < 0)
		urandom = open("/dev/urandom", O_RDONLY | O_CLOEXEC);
	if (pfd[0] < 0 && pipe2(pfd, O_CLOEXEC | O_NONBLOCK))
		return;
	m = &maps[rndn(nr_maps)];
	p = m->addr + rndn(m->len / ps) * ps;
	len = 1 + rndn(m->addr + m->len - p);
	if (len > 16 * ps)
		len = 16 * ps;
	logop("kernel-write %p %zu", p, len);
	switch (rndn(in_child ? 5 : 4)) {
	case 3: {
		/* FOLL_FORCE: refused on shared mappings without write access */
		static int mem = -1;

		if (mem < 0)
			mem = open("/proc/self/mem", O_RDWR | O_CLOEXEC);
		(void)!pwrite(mem, scratch, len, (off_t)(uintptr_t)p);
		break;
	}
	case 4: {
		/* another process's GUP writes into the parent's mapping */
		struct iovec local = { scratch, len }, remote = { p, len };

		(void)!process_vm_writev(getppid(), &local, 1, &remote, 1, 0);
		break;
	}
	case 0: (void)!read(urandom, p, len); break;
	case 1: {
		struct iovec iov = { p, len };

		(void)!preadv(urandom, &iov, 1, 0);
		break;
	}
	default: {
		char sink[4096];

		if (write(pfd[1], p, len > sizeof(sink) ? sizeof(sink) : len) > 0)
			(void)!read(pfd[0], sink, sizeof(sink));
		break;
	}
	}
}

static void do_region(void)
{
	size_t len = (1 + rndn(64)) * ps;
	const char *what;
	char *p;
	int fd;

	if (nr_regions == MAX_REGIONS)
		return;
	switch (rndn(3)) {
	case 0:
		what = "anon";
		p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
		break;
	case 1:
		what = "anon shared";
		p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
		break;
	default:
		what = "memfd";
		fd = memfd_create("fuzz", MFD_CLOEXEC);
		if (fd < 0)
			return;
		if (ftruncate(fd, len)) {
			close(fd);
			return;
		}
		p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
		close(fd);
		break;
	}
	if (p == MAP_FAILED)
		return;
	memset(p, 0x5a, len);
	logop("region %s %p %zu", what, p, len);
	regions[nr_regions++] = (struct fz_region){ p, len, what };
}

/* unmap a pinned region (invalidates its pins), or remap over it */
static void do_region_drop(void)
{
	struct fz_region *r;

	if (!nr_regions)
		return;
	r = &regions[rndn(nr_regions)];
	logop("region-drop %s %p %zu", r->what, r->addr, r->len);
	if (chance(50)) {
		munmap(r->addr, r->len);
		*r = regions[--nr_regions];
	} else {
		mmap(r->addr, r->len, PROT_READ | PROT_WRITE,
		     MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0);
		r->what = "anon";
	}
}

/* ---- fds ------------------------------------------------------------------- */

static void do_close(void)
{
	unsigned int i;

	if (nr_fds < 2)
		return;
	i = 1 + rndn(nr_fds - 1);
	logop("close fd %d (%s)", fds[i].fd, fz_kind_names[fds[i].kind]);
	close_slot(i);
}

static void do_dup(void)
{
	struct fz_fd *t = &fds[rndn(nr_fds)];
	int fd;

	if (t->kind == FZ_FD_NONE || nr_fds == MAX_FDS)
		return;
	fd = fcntl(t->fd, F_DUPFD_CLOEXEC, 0);
	logop("dup fd %d -> %d", t->fd, fd);
	if (fd >= 0) {
		struct fz_fd copy = *t;

		add_fd(fd, t->kind, t->peer);
		if (fds[nr_fds - 1].fd == fd) {
			copy.fd = fd;
			fds[nr_fds - 1] = copy;
		}
	}
}

static void do_send(void)
{
	struct fz_fd *t = &fds[rndn(nr_fds)];
	char cbuf[CMSG_SPACE(sizeof(int))];
	unsigned char kind = t->kind;
	struct iovec iov = { &kind, 1 };
	struct msghdr msg = {
		.msg_iov = &iov, .msg_iovlen = 1,
		.msg_control = cbuf, .msg_controllen = sizeof(cbuf),
	};
	struct cmsghdr *c = CMSG_FIRSTHDR(&msg);

	if (t->kind == FZ_FD_NONE || t->peer || sock < 0)
		return;
	c->cmsg_level = SOL_SOCKET;
	c->cmsg_type = SCM_RIGHTS;
	c->cmsg_len = CMSG_LEN(sizeof(int));
	memcpy(CMSG_DATA(c), &t->fd, sizeof(int));
	logop("send fd %d (%s)", t->fd, fz_kind_names[t->kind]);
	sendmsg(sock, &msg, MSG_DONTWAIT | MSG_NOSIGNAL);
}

static void do_recv(void)
{
	char cbuf[CMSG_SPACE(sizeof(int))];
	unsigned char kind;
	struct iovec iov = { &kind, 1 };
	struct msghdr msg = {
		.msg_iov = &iov, .msg_iovlen = 1,
		.msg_control = cbuf, .msg_controllen = sizeof(cbuf),
	};
	struct cmsghdr *c;
	int fd;

	if (sock < 0 || recvmsg(sock, &msg, MSG_DONTWAIT | MSG_CMSG_CLOEXEC) != 1)
		return;
	c = CMSG_FIRSTHDR(&msg);
	if (!c || c->cmsg_type != SCM_RIGHTS)
		return;
	memcpy(&fd, CMSG_DATA(c), sizeof(int));
	if (kind >= FZ_NR_KINDS || kind == FZ_FD_NONE) {
		close(fd);
		return;
	}
	logop("recv fd %d (%s)", fd, fz_kind_names[kind]);
	sh->received++;
	add_fd(fd, kind, true);
}

static void do_poll(void)
{
	struct pollfd p[4];
	unsigned int i, n = 1 + rndn(4);

	for (i = 0; i < n; i++) {
		p[i].fd = fds[rndn(nr_fds)].fd;
		p[i].events = POLLIN | POLLPRI | POLLOUT;
	}
	logop("poll %u fds", n);
	poll(p, n, 0);
}

static void do_dmabuf_sync(void)
{
	struct fz_fd *t = pick_fd(FZ_K(FZ_FD_DMABUF));
	struct dma_buf_sync s = { .flags = DMA_BUF_SYNC_RW };

	if (chance(50))
		s.flags |= DMA_BUF_SYNC_END;
	if (chance(10))
		s.flags = rnd();
	logop("dmabuf-sync fd %d %#llx", t->fd, (unsigned long long)s.flags);
	ioctl(t->fd, DMA_BUF_IOCTL_SYNC, &s);
}

/* read, write, lseek, fstat on any fd; they must fail cleanly */
static void do_rw(void)
{
	struct fz_fd *t = pick_fd(FZ_K(FZ_FD_SPACE) | FZ_K(FZ_FD_PIN) | FZ_K(FZ_FD_DEV));
	struct stat stb;

	if (t->kind == FZ_FD_OTHER)
		return;	/* a pipe would block, a socket would talk */
	logop("read/write fd %d (%s)", t->fd, fz_kind_names[t->kind]);
	switch (rndn(4)) {
	case 0: (void)!read(t->fd, scratch, 1 + rndn(ps)); break;
	case 1: (void)!write(t->fd, scratch, 1 + rndn(ps)); break;
	case 2: lseek(t->fd, rnd(), rndn(5)); break;
	default: fstat(t->fd, &stb); break;
	}
}

static void do_truncate(void)
{
	struct fz_fd *t = pick_fd(FZ_K(FZ_FD_SPACE) | FZ_K(FZ_FD_DMABUF));
	off_t len = chance(50) ? 0 : (off_t)rndn(t->size + 1);
	struct stat before, after;
	int ret;

	if (t->kind != FZ_FD_SPACE && t->kind != FZ_FD_DMABUF)
		return;
	logop("ftruncate fd %d (%s) %lld", t->fd, fz_kind_names[t->kind], (long long)len);
	if (fstat(t->fd, &before))
		return;
	ret = ftruncate(t->fd, len);
	if (!ret && len != before.st_size && !fstat(t->fd, &after) &&
	    after.st_size != before.st_size)
		fail("ftruncate of a %s fd succeeded and changed its size: %lld -> %lld",
		     fz_kind_names[t->kind], (long long)before.st_size,
		     (long long)after.st_size);
}

/* ---- the loop -------------------------------------------------------------- */

static void one_op(bool child);

static void do_fork(void)
{
	pid_t pid;

	if (nr_children >= 2)
		return;
	logop("fork");
	pid = fork();
	if (pid < 0)
		return;
	if (pid == 0) {
		unsigned int k;

		/* a short life with the parent's fds and mappings (COW, shared) */
		in_child = true;
		rng_state ^= (uint64_t)getpid() << 17;
		for (k = 0; k < 50; k++)
			one_op(true);
		_exit(0);
	}
	nr_children++;
	sh->forks++;
}

static void reap(bool all)
{
	int status;

	while (nr_children && waitpid(-1, &status, all ? 0 : WNOHANG) > 0) {
		nr_children--;
		if (WIFSIGNALED(status) && !in_child)
			fail("a forked child died of signal %d", WTERMSIG(status));
	}
}

static void one_op(bool child)
{
	/* weights of the ops; ioctls dominate */
	static const unsigned char w[OP_NR] = {
		[OP_IOCTL] = 60, [OP_MMAP] = 8, [OP_MUNMAP] = 4, [OP_TOUCH] = 10,
		[OP_MPROTECT] = 2, [OP_MADVISE] = 3, [OP_MREMAP] = 2, [OP_FORK] = 1,
		[OP_KWRITE] = 3, [OP_CLOSE] = 4, [OP_DUP] = 1, [OP_SEND] = 2,
		[OP_RECV] = 3, [OP_POLL] = 1, [OP_REGION] = 2, [OP_REGION_DROP] = 1,
		[OP_DMABUF_SYNC] = 1, [OP_RW] = 1, [OP_TRUNCATE] = 1,
	};
	unsigned int total = 0, r, op;

	for (op = 0; op < OP_NR; op++)
		total += w[op];
	r = rndn(total);
	for (op = 0; r >= w[op]; op++)
		r -= w[op];
	if (child && (op == OP_FORK || op == OP_SEND || op == OP_RECV || op == OP_REGION))
		op = OP_TOUCH;
	/* keep within the per-process limits: close something instead */
	if (op == OP_IOCTL && (count_kind(FZ_FD_SPACE, true) >= MAX_SPACES ||
			       count_kind(FZ_FD_PIN, true) >= MAX_PINS ||
			       count_kind(FZ_FD_DMABUF, false) >= MAX_DMABUFS || nr_fds >= MAX_FDS - 2))
		op = OP_CLOSE;
	if (!child)
		sh->ops[op]++;
	switch (op) {
	case OP_IOCTL: do_ioctl(); break;
	case OP_MMAP: do_mmap(); break;
	case OP_MUNMAP: do_munmap(); break;
	case OP_TOUCH: do_touch(); break;
	case OP_MPROTECT: do_mprotect(); break;
	case OP_MADVISE: do_madvise(); break;
	case OP_MREMAP: do_mremap(); break;
	case OP_FORK: do_fork(); break;
	case OP_KWRITE: do_kwrite(); break;
	case OP_CLOSE: do_close(); break;
	case OP_DUP: do_dup(); break;
	case OP_SEND: do_send(); break;
	case OP_RECV: do_recv(); break;
	case OP_POLL: do_poll(); break;
	case OP_REGION: do_region(); break;
	case OP_REGION_DROP: do_region_drop(); break;
	case OP_DMABUF_SYNC: do_dmabuf_sync(); break;
	case OP_RW: do_rw(); break;
	case OP_TRUNCATE: do_truncate(); break;
	}
}

static char *map_or_die(size_t len, int prot)
{
	char *p = mmap(NULL, len, prot, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

	if (p == MAP_FAILED) {
		perror("mmap");
		_exit(3);
	}
	return p;
}

static void worker(int dev, int s, uint64_t seed, uint64_t deadline_ns)
{
	struct sigaction sa = { .sa_sigaction = on_fault, .sa_flags = SA_SIGINFO };
	int pfd[2], efd, null;

	sigaction(SIGSEGV, &sa, NULL);
	sigaction(SIGBUS, &sa, NULL);
	rng_state = seed * 0x9e3779b97f4a7c15ull + 1;
	sock = s;
	scratch = map_or_die(SCRATCH_BYTES + ps, PROT_READ | PROT_WRITE);
	mprotect(scratch + SCRATCH_BYTES, ps, PROT_NONE);
	argpage = map_or_die(3 * ps, PROT_READ | PROT_WRITE);
	mprotect(argpage + 2 * ps, ps, PROT_NONE);
	ropage = map_or_die(ps, PROT_READ);
	nopage = map_or_die(16 * ps, PROT_NONE);

	add_fd(dev, FZ_FD_DEV, false);
	if (!pipe2(pfd, O_CLOEXEC)) {
		add_fd(pfd[0], FZ_FD_OTHER, false);
		add_fd(pfd[1], FZ_FD_OTHER, false);
	}
	efd = eventfd(0, EFD_CLOEXEC);
	add_fd(efd, FZ_FD_OTHER, false);
	null = open("/dev/null", O_RDWR | O_CLOEXEC);
	add_fd(null, FZ_FD_OTHER, false);
	do_region();
	do_region();

	while (hmt_now_ns() < deadline_ns) {
		unsigned int k;

		for (k = 0; k < 64; k++)
			one_op(false);
		reap(false);
	}
	reap(true);
	_exit(0);
}

/* ---- the checks after ------------------------------------------------------ */

struct gauge {
	const char *file, *name;
};

static const struct gauge gauges[] = {
	{ "stats", "spaces" }, { "stats", "space_bytes" },
	{ "stats", "pages_resident" }, { "stats", "mappings" },
	{ "device", "pins" }, { "device", "pinned_bytes" },
	{ "device", "dmabufs" }, { "device", "dmabuf_bytes" },
};

#define NR_GAUGES	(sizeof(gauges) / sizeof(gauges[0]))

/* wait (up to 10 s: pin release runs from a work item) for every gauge to read 0 */
static bool gauges_zero(char *why, size_t len)
{
	uint64_t end = hmt_now_ns() + 10000000000ull;
	unsigned int i;
	long long v;

	for (;;) {
		why[0] = 0;
		for (i = 0; i < NR_GAUGES; i++) {
			v = hmt_file_stat(gauges[i].file, gauges[i].name);
			if (v != 0)
				snprintf(why + strlen(why), len - strlen(why), " %s/%s=%lld",
					 gauges[i].file, gauges[i].name, v);
		}
		if (!why[0] || hmt_now_ns() > end)
			return !why[0];
		usleep(100000);
	}
}

static int unload_module(char *why, size_t len)
{
	int ret = system("modprobe -r hmirror 2>/dev/null");

	if (ret) {
		char refcnt[32] = "?";
		FILE *f = fopen("/sys/module/hmirror/refcnt", "r");

		if (f) {
			if (!fgets(refcnt, sizeof(refcnt), f))
				strcpy(refcnt, "?");
			fclose(f);
			refcnt[strcspn(refcnt, "\n")] = 0;
		}
		snprintf(why, len, "modprobe -r exit %d, refcnt %s", ret, refcnt);
		return -1;
	}
	return access("/sys/module/hmirror", F_OK) ? 0 : -1;
}

static void report(void)
{
	uint64_t total = 0;
	unsigned int i, k, e;
	char line[1024];

	for (i = 0; i < NR_IOCTLS; i++) {
		uint64_t n = 0;

		for (k = 0; k < FZ_NR_KINDS; k++)
			n += sh->calls[i][k];
		total += n;
		snprintf(line, sizeof(line), "%-14s %7llu calls, %6llu ok", fz_ioctls[i].name,
			 (unsigned long long)n, (unsigned long long)sh->ok[i]);
		for (e = 0; e < MAX_ERRNO; e++)
			if (sh->err[i][e])
				snprintf(line + strlen(line), sizeof(line) - strlen(line), ", %s %llu",
					 e ? strerrorname_np(e) ?: "?" : "other",
					 (unsigned long long)sh->err[i][e]);
		ksft_print_msg("%s\n", line);
	}
	ksft_print_msg("ioctl calls %llu (%llu with a mutated command)\n",
		       (unsigned long long)total, (unsigned long long)sh->mutated_cmd);
	line[0] = 0;
	for (k = 0; k < FZ_NR_KINDS; k++) {
		snprintf(line + strlen(line), sizeof(line) - strlen(line), " %s %llu/%llu",
			 fz_kind_names[k], (unsigned long long)sh->fds[k],
			 (unsigned long long)sh->fd_uses[k]);
	}
	ksft_print_msg("fds made/calls aimed at them:%s; %llu passed between the workers\n",
		       line, (unsigned long long)sh->received);
	line[0] = 0;
	for (i = 0; i < OP_NR; i++)
		snprintf(line + strlen(line), sizeof(line) - strlen(line), " %s %llu",
			 op_names[i], (unsigned long long)sh->ops[i]);
	ksft_print_msg("ops:%s\n", line);
	ksft_print_msg("forks %llu, expected faults of touches %llu, EFAULT on the argument after an fd was installed %llu\n",
		       (unsigned long long)sh->forks, (unsigned long long)sh->segv,
		       (unsigned long long)sh->efault_fd_left);
}

int main(void)
{
	uint64_t secs = 30, seed = (uint64_t)time(NULL), deadline;
	const char *env;
	pid_t pids[NR_WORKERS];
	int dev, sv[2], status, i, bad_exit = 0;
	char why[512];

	ksft_print_header();
	ksft_set_plan(5);
	ps = sysconf(_SC_PAGESIZE);
	env = getenv("HMIRROR_FUZZ_SECS");
	if (env)
		secs = strtoull(env, NULL, 0);
	env = getenv("HMIRROR_FUZZ_SEED");
	if (env)
		seed = strtoull(env, NULL, 0);

	dev = hmt_open_dev();
	if (dev < 0)
		ksft_exit_skip("no /dev/hmirror (%s)\n", strerror(-dev));
	sh = mmap(NULL, sizeof(*sh), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	if (sh == MAP_FAILED || socketpair(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0, sv))
		ksft_exit_fail_msg("set-up: %s\n", strerror(errno));
	ksft_print_msg("seed %llu, %d processes, %llu s, %zu ioctls from uapi/linux/hmirror.h\n",
		       (unsigned long long)seed, NR_WORKERS, (unsigned long long)secs, NR_IOCTLS);

	/* HMIRROR_IOC_API names every ioctl of the table that the dispatcher takes */
	{
		struct hmirror_api api = { .api = HMIRROR_API };
		char missing[256] = "";
		unsigned int k;

		if (ioctl(dev, HMIRROR_IOC_API, &api))
			snprintf(missing, sizeof(missing), " (API: %s)", strerror(errno));
		for (k = 0; k < NR_IOCTLS && !missing[0]; k++)
			if ((fz_ioctls[k].kinds & (FZ_K(FZ_FD_DEV) | FZ_K(FZ_FD_SPACE))) &&
			    !(api.ioctls & (1ull << _IOC_NR(fz_ioctls[k].cmd))))
				snprintf(missing + strlen(missing), sizeof(missing) - strlen(missing),
					 " %s", fz_ioctls[k].name);
		ksft_test_result(!missing[0], "API.ioctls %#llx has every dev and space ioctl of the header%s%s\n",
				 (unsigned long long)api.ioctls, missing[0] ? ", lacks" : "", missing);
	}

	deadline = hmt_now_ns() + secs * 1000000000ull;
	fflush(stdout);
	for (i = 0; i < NR_WORKERS; i++) {
		pids[i] = fork();
		if (pids[i] == 0) {
			me = i;
			close(sv[!i]);
			worker(dev, sv[i], seed + i, deadline);
		}
	}
	close(sv[0]);
	close(sv[1]);
	for (i = 0; i < NR_WORKERS; i++) {
		if (waitpid(pids[i], &status, 0) < 0 || !WIFEXITED(status) || WEXITSTATUS(status)) {
			bad_exit++;
			fail("worker %d: %s %d", i,
			     WIFSIGNALED(status) ? "killed by signal" : "exit status",
			     WIFSIGNALED(status) ? WTERMSIG(status) : WEXITSTATUS(status));
		}
	}
	close(dev);
	report();

	for (i = 0; i < (int)sh->nr_msgs && i < 8; i++)
		ksft_print_msg("FAIL: %s\n", sh->fail[i]);
	if (sh->nr_fail) {
		for (i = 0; i < 2 * NR_WORKERS; i++) {
			struct fz_worker_log *l = &sh->log[i];
			unsigned int k, n = l->next < LOG_LINES ? l->next : LOG_LINES;

			ksft_print_msg("%s %d, last %u ops:\n",
				       i < NR_WORKERS ? "worker" : "children of worker",
				       i % NR_WORKERS, n);
			for (k = l->next - n; k != l->next; k++)
				ksft_print_msg("  %s\n", l->line[k % LOG_LINES]);
		}
	}
	ksft_test_result(!bad_exit, "workers ran %llu s and exited cleanly\n",
			 (unsigned long long)secs);
	ksft_test_result(!sh->nr_fail, "every call answered as the ABI says (%u violations)\n",
			 sh->nr_fail);
	ksft_test_result(gauges_zero(why, sizeof(why)),
			 "debugfs gauges back to 0 after exit%s\n", why);
	why[0] = 0;
	ksft_test_result(!unload_module(why, sizeof(why)), "module unloads %s\n", why);
	ksft_finished();
}
