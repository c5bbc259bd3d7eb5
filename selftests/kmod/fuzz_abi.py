#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0
"""The hmirror.ko ioctl ABI, read from uapi/linux/hmirror.h, for the fuzzers.

The header is the single source: every HMIRROR_IOC_* define gives a
command (direction, number, argument struct); every struct member gives a
field, and its comment says what it is:

  "in" / "out"                     direction (no comment: in)
  __pad*                           must be zero
  "in: HMIRROR_FOO_*"              a flag word whose valid bits are the
                                   HMIRROR_FOO_* bit defines
  "in: 0"                          reserved, must be zero
  "in: HMIRROR_API"                one valid value
  "pointer to struct X[]" or
  "pointer to __u64[n]"            a user pointer to an array whose length
                                   is the member n (or the struct's nr_*)
  "out: the space fd" (pin, dma-buf)   a new file descriptor of that kind

and the comment or heading naming the command says which fds it is for:
"HMIRROR_IOC_ARM (space)", "/* pin fd */" above the define, ...

  fuzz_abi.py c HEADER       print a C header: tables for fuzz_ioctl.c.
                             Offsets and sizes are left to the compiler
                             (offsetof/sizeof); only names come from here.
  import fuzz_abi; fuzz_abi.parse(path)   the same, for Python.
"""
import re
import sys

TYPES = {'__u8': 1, '__u16': 2, '__u32': 4, '__s32': 4, '__u64': 8, '__s64': 8}
FD_KINDS = ('dev', 'space', 'pin', 'dmabuf')


class Field:
    def __init__(self, name, ctype, comment):
        self.name, self.ctype, self.comment = name, ctype, comment.strip()
        c = self.comment
        self.out = c.startswith('out')
        self.role = 'num'
        self.flag_prefix = None
        self.value = None
        self.array_elem = None
        self.array_count = None
        self.fd_kind = None
        if name.startswith('__pad'):
            self.role = 'pad'
        elif self.out:
            m = re.search(r'the (space|pin|dma-buf) fd', c)
            if name == 'fd' and m:
                self.role = 'fd'
                self.fd_kind = m.group(1).replace('dma-buf', 'dmabuf')
            elif m := re.search(r'(HMIRROR_\w+?)_\*', c):
                self.role = 'flags'
                self.flag_prefix = m.group(1)
        elif m := re.search(r'pointer to (?:struct (\w+)|(__u\d+))\[(\w*)\]', c):
            self.role = 'ptr'
            self.array_elem = m.group(1) or m.group(2)
            self.array_count = m.group(3) or None
        elif m := re.match(r'in:\s*(HMIRROR_\w+?)_\*', c):
            self.role = 'flags'
            self.flag_prefix = m.group(1)
        elif re.match(r'in:\s*0\s*$', c):
            self.role = 'zero'
        elif m := re.match(r'in:\s*(HMIRROR_[A-Z0-9_]+)\s*$', c):
            self.role = 'const'
            self.value = m.group(1)


class Struct:
    def __init__(self, name, fields):
        self.name, self.fields = name, fields
        # natural alignment: what the compiler does for these types
        off = 0
        for f in fields:
            sz = TYPES[f.ctype]
            off = (off + sz - 1) // sz * sz
            f.offset, f.size = off, sz
            off += sz
        self.size = (off + 7) // 8 * 8
        # a pad without a comment among the outputs is one of them
        seen_out = False
        for f in fields:
            seen_out = seen_out or f.out
            if f.role == 'pad' and seen_out and f.comment == 'in':
                f.out = True
        for f in fields:
            if f.role == 'ptr' and not f.array_count:
                nr = [g.name for g in fields if g.name.startswith('nr_')]
                f.array_count = nr[0] if nr else None


class Ioctl:
    def __init__(self, name, dirn, nr, struct, kinds):
        self.name, self.dir, self.nr_name = name, dirn, nr
        self.struct, self.kinds = struct, kinds


class Abi:
    pass


def _kinds(words):
    k = []
    for w in re.split(r'\s+or\s+|,\s*', words.strip()):
        w = w.replace(' fd', '').strip()
        if w in FD_KINDS and w not in k:
            k.append(w)
    return k


def parse(path):
    with open(path) as f:
        text = f.read()
    joined = re.sub(r'\\\n', ' ', text)
    abi = Abi()
    abi.structs = {}
    for m in re.finditer(r'struct (hmirror_\w+) \{(.*?)\};', text, re.S):
        fields = []
        for line in m.group(2).split('\n'):
            fm = re.match(r'\s*(__[us]\d+)\s+(\w+);\s*(?:/\*(.*?)\*/)?', line)
            if fm:
                fields.append(Field(fm.group(2), fm.group(1), fm.group(3) or 'in'))
        abi.structs[m.group(1)] = Struct(m.group(1), fields)

    # numeric object-like defines (limits, offsets, bits): boundary values
    abi.consts = []
    abi.bits = {}
    for m in re.finditer(r'^#define (HMIRROR_[A-Z0-9_]+)\s+(\S[^/\n]*?)\s*(?:/\*.*)?$',
                         joined, re.M):
        name, val = m.group(1), m.group(2)
        if name.startswith(('HMIRROR_IOC_', 'HMIRROR_NR_')) or '(' in name:
            continue
        if re.match(r'(_BITU?L?L?\(\d+\)|0x[0-9a-fA-F]+|\d+)$', val):
            abi.consts.append(name)
        bm = re.match(r'_BITU?L?L?\((\d+)\)$', val)
        if bm:
            abi.bits[name] = int(bm.group(1))

    abi.ioctls = []
    for m in re.finditer(r'#define HMIRROR_IOC_(\w+)\s+_IO(WR|R|W)\(HMIRROR_IOC_MAGIC,\s*'
                         r'(HMIRROR_NR_\w+),\s*struct (\w+)\)', joined):
        name = m.group(1)
        kinds = []
        h = re.search(r'HMIRROR_IOC_%s \(([a-z -]+?)\)' % name, text)
        if h:
            kinds = _kinds(h.group(1))
        if not kinds:
            # "/* pin fd */" on the line above the define
            before = joined[:m.start()].rstrip().split('\n')[-1]
            c = re.match(r'\s*/\*\s*([a-z ,-]+?)\s*\*/\s*$', before)
            if c:
                kinds = _kinds(c.group(1))
        if not kinds:
            kinds = list(FD_KINDS)
        abi.ioctls.append(Ioctl(name, m.group(2), m.group(3),
                                abi.structs[m.group(4)], kinds))
    return abi


def flag_bits(abi, prefix):
    """Names of the single-bit defines HMIRROR_<prefix>_*."""
    return [n for n in abi.bits if n.startswith(prefix + '_')]


def emit_c(abi, src):
    o = []
    w = o.append
    w('/* Generated by selftests/kmod/fuzz_abi.py from %s; do not edit. */' % src)
    w('#include <stddef.h>')
    w('#include <linux/hmirror.h>')
    w("/* struct fz_field, fz_struct, fz_ioctl, fz_const: fuzz_ioctl.c */")
    w('')
    for s in abi.structs.values():
        w('static const struct fz_field fz_fields_%s[] = {' % s.name)
        for f in s.fields:
            flags = '0'
            if f.role == 'flags':
                bits = flag_bits(abi, f.flag_prefix)
                flags = ' | '.join('(__u64)(%s)' % b for b in bits) or '0'
            extra = []
            if f.role == 'const':
                extra.append('.value = %s' % f.value)
            if f.role == 'ptr':
                esize = ('sizeof(struct %s)' % f.array_elem if f.array_elem.startswith('hmirror')
                         else 'sizeof(%s)' % f.array_elem)
                extra.append('.elem_size = %s' % esize)
                if f.array_elem.startswith('hmirror'):
                    extra.append('.elem = &fz_struct_%s' % f.array_elem)
                if f.array_count:
                    extra.append('.count_field = "%s"' % f.array_count)
            if f.fd_kind:
                extra.append('.fd_kind = FZ_FD_%s' % f.fd_kind.upper())
            w('\t{ .name = "%s", .offset = offsetof(struct %s, %s), '
              '.size = sizeof(((struct %s *)0)->%s), .role = FZ_%s, .out = %d, '
              '.flags = %s%s },' % (f.name, s.name, f.name, s.name, f.name,
                                     f.role.upper(), f.out, flags,
                                     ''.join(', ' + e for e in extra)))
        w('};')
        w('static const struct fz_struct fz_struct_%s = {' % s.name)
        w('\t.name = "%s", .size = sizeof(struct %s),' % (s.name, s.name))
        w('\t.fields = fz_fields_%s, .nr_fields = %d,' % (s.name, len(s.fields)))
        w('};')
        w('_Static_assert(sizeof(struct %s) == %d, "fuzz_abi.py layout of %s");'
          % (s.name, s.size, s.name))
        w('')
    # forward references resolved: structs used as array elements come first
    w('static const struct fz_ioctl fz_ioctls[] = {')
    for i in abi.ioctls:
        kinds = ' | '.join('FZ_K(FZ_FD_%s)' % k.upper() for k in i.kinds)
        w('\t{ .name = "%s", .cmd = HMIRROR_IOC_%s, .dir = "%s", .st = &fz_struct_%s, '
          '.kinds = %s },' % (i.name, i.name, i.dir, i.struct.name, kinds))
    w('};')
    w('')
    w('static const struct fz_const fz_consts[] = {')
    for c in abi.consts:
        w('\t{ "%s", (__u64)(%s) },' % (c, c))
    w('};')
    return '\n'.join(o) + '\n'


def order_structs(abi):
    """Array element structs before the structs that point at them."""
    first = [s for s in abi.structs.values()
             if any(f.array_elem == s.name for t in abi.structs.values() for f in t.fields)]
    rest = [s for s in abi.structs.values() if s not in first]
    abi.structs = {s.name: s for s in first + rest}


def main():
    if len(sys.argv) != 3 or sys.argv[1] != 'c':
        sys.exit('usage: fuzz_abi.py c HEADER')
    abi = parse(sys.argv[2])
    if not abi.ioctls:
        sys.exit('fuzz_abi.py: no HMIRROR_IOC_* in %s' % sys.argv[2])
    order_structs(abi)
    sys.stdout.write(emit_c(abi, sys.argv[2]))


if __name__ == '__main__':
    main()
