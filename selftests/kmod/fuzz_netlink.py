#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0
"""Fuzz hmirror.ko's generic netlink family from its YAML spec.

usage: fuzz_netlink.py SPEC UAPI_HEADER   (in the VM, as root; prints TAP)

Every operation of Documentation/netlink/specs/hmirror.yaml (requests and
events, and command numbers the spec does not have) is sent as do and as
dump, with its attributes valid or mutated: wrong lengths, wrong types,
values below the spec's checks, attributes of other ops and unknown ones,
nested garbage, duplicates, truncated attributes, bad header fields,
broken message lengths.  Meanwhile a helper process creates and destroys
spaces, writes armed chunks and pins and unmaps memory (through the ioctls
of the uapi header, read by fuzz_abi.py), so there are spaces to ask about
and events to read; an unprivileged process fuzzes too.

The oracle is the spec: a request that breaks it is refused (EINVAL,
ERANGE, EOPNOTSUPP); one that keeps it is answered, and every reply and
event carries only the attributes the spec lists for it, each of its
type's size; the unprivileged process sees only its own spaces and cannot
join "events".  Then the module must unload.  A kernel WARN/BUG/Oops is
caught by tools/vm/ktest around it.
  HMIRROR_FUZZ_SECS (default 20), HMIRROR_FUZZ_SEED (default: time)
"""
import ctypes
import errno
import fcntl
import mmap
import os
import random
import select
import socket
import struct
import subprocess
import sys
import time

import yaml

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import fuzz_abi  # noqa: E402

# generic netlink controller (include/uapi/linux/genetlink.h, netlink.h)
GENL_ID_CTRL = 0x10
CTRL_CMD_GETFAMILY = 3
CTRL_ATTR_FAMILY_ID, CTRL_ATTR_FAMILY_NAME, CTRL_ATTR_MCAST_GROUPS = 1, 2, 7
CTRL_ATTR_MCAST_GRP_NAME, CTRL_ATTR_MCAST_GRP_ID = 1, 2
NLM_F_REQUEST, NLM_F_MULTI, NLM_F_ACK, NLM_F_DUMP = 1, 2, 4, 0x300
NLMSG_ERROR, NLMSG_DONE = 2, 3
SOL_NETLINK, NETLINK_ADD_MEMBERSHIP, NETLINK_EXT_ACK = 270, 1, 11
NLA_F_NESTED, NLA_F_NET_BYTEORDER = 0x8000, 0x4000
TYPE_SIZE = {'u8': 1, 'u16': 2, 'u32': 4, 'u64': 8, 'pad': None}

# errors a request may get (EPERM: unprivileged; ENOENT: no such space)
REFUSALS = {errno.EINVAL, errno.ERANGE, errno.EOPNOTSUPP, errno.EPERM, errno.ENOENT}
# what the policy (or the genl core) answers a request that breaks the spec
VALIDATION = {errno.EINVAL, errno.ERANGE, errno.EOPNOTSUPP}


class Spec:
    def __init__(self, path):
        with open(path) as f:
            y = yaml.safe_load(f)
        self.name = y['name']
        self.sets = {}
        for s in y['attribute-sets']:
            attrs, v = {}, 1
            for a in s['attributes']:
                v = a.get('value', v)
                attrs[a['name']] = dict(a, value=v)
                v += 1
            self.sets[s['name']] = attrs
        self.ops, v = {}, 1
        for op in y['operations']['list']:
            v = op.get('value', v)
            self.ops[v] = op
            v += 1
        self.groups = [g['name'] for g in y['mcast-groups']['list']]

    def attr(self, setname, name):
        return self.sets[setname][name]

    def by_value(self, setname):
        return {a['value']: a for a in self.sets[setname].values()}


def nla(atype, payload):
    n = 4 + len(payload)
    return struct.pack('=HH', n, atype) + payload + b'\0' * ((4 - n % 4) % 4)


def parse_attrs(buf):
    """[(type, payload)], or None when the lengths do not add up."""
    out, off = [], 0
    while off + 4 <= len(buf):
        n, t = struct.unpack_from('=HH', buf, off)
        if n < 4 or off + n > len(buf):
            return None
        out.append((t & ~(NLA_F_NESTED | NLA_F_NET_BYTEORDER), buf[off + 4:off + n]))
        off += (n + 3) & ~3
    return out if off >= len(buf) or len(buf) - off < 4 else None


class Genl:
    def __init__(self, groups=()):
        self.s = socket.socket(socket.AF_NETLINK, socket.SOCK_RAW, 16)
        self.s.setsockopt(SOL_NETLINK, NETLINK_EXT_ACK, 1)
        self.s.bind((0, 0))
        self.seq = random.randrange(1 << 30)

    def send_raw(self, data):
        self.s.send(data)

    def msg(self, mtype, flags, cmd, attrs=b'', version=1, reserved=0, seq=None):
        self.seq = seq if seq is not None else self.seq + 1
        body = struct.pack('=BBH', cmd, version, reserved) + attrs
        return struct.pack('=IHHII', 16 + len(body), mtype, flags, self.seq, 0) + body, self.seq

    def recv_until(self, seq, timeout=2.0):
        """Messages for @seq until its ack, error or NLMSG_DONE: (replies, errno)."""
        replies = []
        end = time.time() + timeout
        while time.time() < end:
            r, _, _ = select.select([self.s], [], [], max(0, end - time.time()))
            if not r:
                break
            data = self.s.recv(1 << 20)
            off = 0
            while off + 16 <= len(data):
                n, t, fl, sq, _ = struct.unpack_from('=IHHII', data, off)
                if n < 16:
                    break
                body = data[off + 16:off + n]
                off += (n + 3) & ~3
                if sq != seq:
                    continue
                if t == NLMSG_ERROR:
                    return replies, -struct.unpack_from('=i', body)[0]
                if t == NLMSG_DONE:
                    return replies, 0
                replies.append((t, fl, body))
                if not fl & NLM_F_MULTI:
                    # a do: the ack follows (NLM_F_ACK), keep reading
                    pass
        return replies, None

    def family(self, name):
        m, seq = self.msg(GENL_ID_CTRL, NLM_F_REQUEST | NLM_F_ACK, CTRL_CMD_GETFAMILY,
                          nla(CTRL_ATTR_FAMILY_NAME, name.encode() + b'\0'))
        self.send_raw(m)
        replies, err = self.recv_until(seq)
        if not replies:
            return None, {}
        fid, groups = None, {}
        for t, p in parse_attrs(replies[0][2][4:]) or []:
            if t == CTRL_ATTR_FAMILY_ID:
                fid = struct.unpack('=H', p[:2])[0]
            elif t == CTRL_ATTR_MCAST_GROUPS:
                for _, g in parse_attrs(p) or []:
                    d = dict(parse_attrs(g) or [])
                    groups[d[CTRL_ATTR_MCAST_GRP_NAME].rstrip(b'\0').decode()] = \
                        struct.unpack('=I', d[CTRL_ATTR_MCAST_GRP_ID])[0]
        return fid, groups


class Ioctls:
    """The ioctls the helper needs, numbered from the uapi header."""

    def __init__(self, header):
        self.abi = fuzz_abi.parse(header)
        with open(header) as f:
            text = f.read()
        self.num = {m[0]: int(m[1], 0) for m in
                    __import__('re').findall(r'#define (HMIRROR_\w+)\s+(0x[0-9a-fA-F]+|\d+)\b', text)}
        self.cmd = {}
        for io in self.abi.ioctls:
            d = {'W': 1, 'R': 2, 'WR': 3}[io.dir]
            self.cmd[io.name] = ((d << 30) | (io.struct.size << 16) |
                                 (self.num['HMIRROR_IOC_MAGIC'] << 8) | self.num[io.nr_name])

    def call(self, fd, name, **fields):
        st = next(i.struct for i in self.abi.ioctls if i.name == name)
        buf = bytearray(st.size)
        for f in st.fields:
            if f.name in fields:
                struct.pack_into('=Q' if f.size == 8 else '=I', buf, f.offset,
                                 fields[f.name] & ((1 << (8 * f.size)) - 1))
        fcntl.ioctl(fd, self.cmd[name], buf)
        return {f.name: struct.unpack_from('=Q' if f.size == 8 else '=i' if f.ctype == '__s32'
                                           else '=I', buf, f.offset)[0] for f in st.fields}


def helper(io, secs, seed):
    """Spaces made and destroyed, chunks written, pins invalidated."""
    rnd = random.Random(seed)
    dev = os.open('/dev/hmirror', os.O_RDWR)
    end = time.time() + secs
    live = []
    ps = mmap.PAGESIZE
    while time.time() < end:
        if len(live) < 6 and rnd.random() < 0.5:
            size = ps * 16 * rnd.randint(1, 8)
            c = io.call(dev, 'CREATE', size=size, chunk_shift=12)
            m = mmap.mmap(c['fd'], size, mmap.MAP_SHARED, mmap.PROT_READ | mmap.PROT_WRITE)
            io.call(c['fd'], 'ARM', first=0, count=c['nr_chunks'])
            live.append((c['fd'], m, size))
        if live:
            fd, m, size = rnd.choice(live)
            for _ in range(rnd.randint(1, 20)):
                m[rnd.randrange(size)] = 1
            if rnd.random() < 0.3:
                io.call(fd, 'HARVEST', chunks=0, cap=0)
                io.call(fd, 'ARM', first=0, count=size // ps)
            if rnd.random() < 0.2:
                live.remove((fd, m, size))
                m.close()
                os.close(fd)
        if rnd.random() < 0.2:
            a = mmap.mmap(-1, 4 * ps)
            a[0] = 1
            addr = ctypes.addressof(ctypes.c_char.from_buffer(a))
            p = io.call(dev, 'PIN', addr=addr, size=4 * ps, flags=1)
            del addr
            # invalidates the pin: a RANGE_INVALIDATED event
            ctypes.CDLL(None).madvise(ctypes.c_void_p(ctypes.addressof(
                ctypes.c_char.from_buffer(a))), ctypes.c_size_t(4 * ps), 4)
            os.close(p['fd'])
        time.sleep(0.005)
    os._exit(0)


class Fuzzer:
    def __init__(self, spec, fid, rnd, known_ids):
        self.spec, self.fid, self.rnd = spec, fid, rnd
        self.known_ids = known_ids
        self.g = Genl()
        self.sent = 0
        self.by_result = {}
        self.fails = []
        self.nr_fails = 0
        self.ops_sent = {}

    def fail(self, what):
        self.nr_fails += 1
        if len(self.fails) < 20 and what not in self.fails:
            self.fails.append(what)

    def value(self, a, valid=True):
        t = a['type']
        if t == 'u32' and a['name'] == 'space-id' and valid and self.known_ids and \
                self.rnd.random() < 0.6:
            return struct.pack('=I', self.rnd.choice(self.known_ids()))
        if t in ('u8', 'u16', 'u32', 'u64'):
            lo = a.get('checks', {}).get('min', 0)
            v = self.rnd.choice([lo, lo + 1, 1 << 31, (1 << (8 * TYPE_SIZE[t])) - 1,
                                 self.rnd.randrange(lo, 1 << (8 * TYPE_SIZE[t]))])
            return struct.pack({'u8': '=B', 'u16': '=H', 'u32': '=I', 'u64': '=Q'}[t], v)
        if t == 'string':
            return b'x' * self.rnd.randrange(0, 40) + b'\0'
        if t == 'nest':
            sub = self.spec.sets[a['nested-attributes']]
            return b''.join(nla(s['value'], self.value(s)) for s in sub.values()
                            if s['type'] != 'pad' and self.rnd.random() < 0.7)
        return b''

    def garbage_attr(self, op):
        """An attribute that breaks the spec for @op's request."""
        aset = op.get('attribute-set', 'hmirror')
        attrs = self.spec.sets[aset]
        req = set(op.get('do', {}).get('request', {}).get('attributes', []) or [])
        k = self.rnd.randrange(8)
        names = [n for n in attrs if n in req]
        self.mut = ['wrong length', 'below min', 'attribute of another op', 'unknown type',
                    'nested flag on a scalar', 'nest of garbage', 'duplicate',
                    'truncated attribute'][k]
        if k == 0 and names:	# wrong length
            a = attrs[self.rnd.choice(names)]
            return nla(a['value'], os.urandom(self.rnd.choice([0, 1, 2, 3, 5, 6, 7, 8, 12, 16])))
        if k == 1 and names:	# below the spec's min
            a = attrs[self.rnd.choice(names)]
            if 'min' in a.get('checks', {}):
                return nla(a['value'], struct.pack('=I', a['checks']['min'] - 1))
            return nla(a['value'], b'')
        if k == 2:		# an attribute of the set not in this request
            others = [n for n in attrs if n not in req]
            a = attrs[self.rnd.choice(others)]
            return nla(a['value'], self.value(a))
        if k == 3:		# unknown type
            return nla(self.rnd.choice([0, max(x['value'] for x in attrs.values()) + 1,
                                        0x3fff, self.rnd.randrange(1, 0x4000)]),
                       os.urandom(self.rnd.randrange(0, 24)))
        if k == 4 and names:	# nested garbage in a scalar, with the nested flag
            a = attrs[self.rnd.choice(names)]
            return struct.pack('=HH', 12, a['value'] | NLA_F_NESTED) + nla(1, b'\0\0\0\0')
        if k == 5:		# nest of garbage
            nests = [x for x in attrs.values() if x['type'] == 'nest']
            a = self.rnd.choice(nests)
            return nla(a['value'] | NLA_F_NESTED, os.urandom(self.rnd.randrange(0, 40)))
        if k == 6 and names:	# duplicate: netlink takes the last, allowed
            a = attrs[self.rnd.choice(names)]
            self.dup = True
            return nla(a['value'], self.value(a)) * 2
        # truncated: nla_len beyond the message
        return struct.pack('=HH', 200, 1 + self.rnd.randrange(15)) + b'\0' * 4

    def check_reply(self, op, which, body, label):
        """Attributes of a reply (which: do, dump) or an event against the spec."""
        if not op or which not in op:
            self.fail('%s: a reply, but the spec has no %s for it' % (label, which))
            return
        if len(body) < 4:
            self.fail('%s: reply shorter than the genl header' % label)
            return
        if which == 'event':
            allowed = op['event']['attributes']
        else:
            allowed = op[which].get('reply', {}).get('attributes', [])
        self.check_attrs(op.get('attribute-set', 'hmirror'), body[4:], set(allowed), label)

    def check_attrs(self, aset, buf, allowed, label):
        attrs = parse_attrs(buf)
        if attrs is None:
            self.fail('%s: attribute lengths do not add up' % label)
            return
        byv = self.spec.by_value(aset)
        for t, p in attrs:
            a = byv.get(t)
            if a is None:
                self.fail('%s: attribute %d not in set %s' % (label, t, aset))
                continue
            if a['type'] == 'pad':
                continue
            if allowed is not None and a['name'] not in allowed:
                self.fail('%s: attribute %s not in the spec\'s reply' % (label, a['name']))
            size = TYPE_SIZE.get(a['type'])
            if size and len(p) != size:
                self.fail('%s: %s is %d bytes, not %d' % (label, a['name'], len(p), size))
            if a['type'] == 'string' and not p.endswith(b'\0'):
                self.fail('%s: %s not NUL-terminated' % (label, a['name']))
            if a['type'] == 'nest':
                self.check_attrs(a['nested-attributes'], p, None, label + '/' + a['name'])

    def one(self):
        r = self.rnd
        # requests mostly, events too; 0, the next free number, any other
        requests = [v for v, o in self.spec.ops.items() if 'do' in o or 'dump' in o]
        x = r.random()
        if x < 0.7:
            cmd = r.choice(requests)
        elif x < 0.85:
            cmd = r.choice(list(self.spec.ops))
        else:
            cmd = r.choice([0, max(self.spec.ops) + 1, r.randrange(256)])
        op = self.spec.ops.get(cmd)
        dump = r.random() < 0.3
        flags = NLM_F_REQUEST | NLM_F_ACK | (NLM_F_DUMP if dump else 0)
        valid = op is not None and ('do' in op and not dump or 'dump' in op and dump)
        attrs = b''
        if op and 'do' in op and not dump:
            for n in op['do'].get('request', {}).get('attributes', []) or []:
                attrs += nla(self.spec.attr(op['attribute-set'], n)['value'],
                             self.value(self.spec.attr(op['attribute-set'], n)))
        reserved, version, broken = 0, 1, False
        self.mut, self.dup = '', False
        k = r.randrange(10)
        if op and k < 4:
            attrs += self.garbage_attr(op)
            valid = valid and self.dup
        elif k == 4:
            reserved = r.randrange(1, 1 << 16)
            valid = False
            self.mut = 'reserved header field'
        elif k == 6 and attrs:
            self.mut = 'request attributes cut'
            attrs = attrs[:r.randrange(len(attrs))]
            valid = False
        elif k == 5:
            version = r.randrange(256)	# not checked by genl: still valid
        elif k == 7:
            flags = r.choice([0, NLM_F_ACK, r.randrange(1 << 16) | NLM_F_ACK])
            broken = True
        m, seq = self.g.msg(self.fid, flags, cmd, attrs, version, reserved)
        if r.random() < 0.05:
            # message length lies: the kernel drops it, nothing comes back
            m = struct.pack('=I', r.choice([0, 15, len(m) + 4, 1 << 20])) + m[4:]
            broken = True
        elif r.random() < 0.03:
            m += os.urandom(r.randrange(1, 64))	# trailing junk after the message
            broken = True
        label = '%s %s%s' % (op['name'] if op else 'cmd %d' % cmd, 'dump' if dump else 'do',
                             ' (%s)' % self.mut if self.mut else '')
        key = label.split(' (')[0] if op else 'other cmds'
        self.ops_sent[key] = self.ops_sent.get(key, 0) + 1
        self.sent += 1
        try:
            self.g.send_raw(m)
        except OSError as e:
            self.by_result['send %s' % errno.errorcode.get(e.errno, e.errno)] = \
                self.by_result.get('send %s' % errno.errorcode.get(e.errno, e.errno), 0) + 1
            return
        if broken:
            # whatever comes back (or not): a NOOP with an ack marks the end
            sm, sseq = self.g.msg(1, NLM_F_REQUEST | NLM_F_ACK, 0)
            self.g.send_raw(sm)
            _, serr = self.g.recv_until(sseq)
            self.by_result['broken'] = self.by_result.get('broken', 0) + 1
            if serr != 0:
                self.fail('%s: the socket stopped answering after it' % label)
            return
        replies, err = self.g.recv_until(seq)
        key = 'ok' if err == 0 else 'none' if err is None else errno.errorcode.get(err, str(err))
        self.by_result[key] = self.by_result.get(key, 0) + 1
        if err is None:
            self.fail('%s: no answer' % label)
            return
        if err and err not in REFUSALS:
            self.fail('%s: errno %d (%s), not a refusal the spec allows' %
                      (label, err, errno.errorcode.get(err, '?')))
        if valid and err and err != errno.ENOENT and not (err == errno.EPERM and os.geteuid()):
            # a dump without attributes, a do with the request's: both follow the spec
            self.fail('%s: a request that keeps the spec was refused: %s' %
                      (label, errno.errorcode.get(err, err)))
        if not valid and err == 0 and not (dump and op and 'dump' in op):
            self.fail('%s: a request that breaks the spec was answered' % label)
        # an admin-perm operation refuses an unprivileged sender before
        # genetlink validates anything
        perm_first = bool(op) and 'admin-perm' in op.get('flags', []) and os.geteuid() != 0
        if not valid and err and err not in VALIDATION and not (perm_first and err == errno.EPERM):
            # validation refuses it before any handler looks at it
            self.fail('%s: a request that breaks the spec got %s, not a validation refusal' %
                      (label, errno.errorcode.get(err, err)))
        for t, fl, body in replies:
            if t != self.fid:
                self.fail('%s: reply of message type %d' % (label, t))
                continue
            self.check_reply(op, 'dump' if dump else 'do', body, label)
            self.seen_ids(body)

    def seen_ids(self, body):
        for t, p in parse_attrs(body[4:]) or []:
            if t == self.spec.attr('hmirror', 'space-id')['value'] and len(p) == 4:
                self.dumped.add(struct.unpack('=I', p)[0])

    def dump_ids(self):
        op = next(v for v, o in self.spec.ops.items() if o['name'] == 'space-get')
        m, seq = self.g.msg(self.fid, NLM_F_REQUEST | NLM_F_ACK | NLM_F_DUMP, op)
        self.g.send_raw(m)
        replies, err = self.g.recv_until(seq)
        ids = set()
        for _, _, body in replies:
            for t, p in parse_attrs(body[4:]) or []:
                if t == self.spec.attr('hmirror', 'space-id')['value']:
                    ids.add(struct.unpack('=I', p)[0])
        return ids, err


def events_reader(spec, fid, sock, fuzzer, counts):
    """Drain the events socket; check each event against the spec."""
    while True:
        r, _, _ = select.select([sock], [], [], 0)
        if not r:
            return
        try:
            data = sock.recv(1 << 20)
        except OSError as e:
            counts['ENOBUFS' if e.errno == errno.ENOBUFS else 'error'] = \
                counts.get('ENOBUFS' if e.errno == errno.ENOBUFS else 'error', 0) + 1
            continue
        off = 0
        while off + 16 <= len(data):
            n, t, fl, sq, _ = struct.unpack_from('=IHHII', data, off)
            body = data[off + 16:off + n]
            off += (n + 3) & ~3
            cmd = body[0] if body else -1
            op = spec.ops.get(cmd)
            if t != fid or not op or 'event' not in op:
                fuzzer.fail('event: type %d cmd %d is not an event of the spec' % (t, cmd))
                continue
            counts[op['name']] = counts.get(op['name'], 0) + 1
            fuzzer.check_reply(op, 'event', body, 'event ' + op['name'])


def unprivileged(spec, fid, io, secs, seed, out_w):
    """As uid 65534 in the device's group (as an admitted user is): own
    spaces only, no events, and fuzz too."""
    os.setgroups([os.stat('/dev/hmirror').st_gid])
    os.setgid(65534)
    os.setuid(65534)
    res = []
    g = Genl()
    try:
        g.s.setsockopt(SOL_NETLINK, NETLINK_ADD_MEMBERSHIP, gid_global)
        res.append('not ok: joined "events" without CAP_NET_ADMIN')
    except OSError as e:
        res.append('ok' if e.errno == errno.EPERM else 'not ok: join gave %s' % e)
    dev = os.open('/dev/hmirror', os.O_RDWR)
    own = io.call(dev, 'CREATE', size=mmap.PAGESIZE * 16, chunk_shift=12)
    f = Fuzzer(spec, fid, random.Random(seed), lambda: [own['id']])
    f.dumped = set()
    end = time.time() + secs
    while time.time() < end:
        f.one()
        ids, err = f.dump_ids() if f.rnd.random() < 0.05 else ({own['id']}, 0)
        if err or ids != {own['id']}:
            res.append('not ok: an unprivileged dump shows %s (own space %d), err %s' %
                       (sorted(ids), own['id'], err))
            break
    res.extend('not ok: ' + x for x in f.fails)
    res.append('# unprivileged: %d messages, %s' % (f.sent, f.by_result))
    os.write(out_w, ('\n'.join(res) + '\n').encode())
    os._exit(0)


gid_global = 0


def main():
    global gid_global
    spec = Spec(sys.argv[1])
    io = Ioctls(sys.argv[2])
    secs = float(os.environ.get('HMIRROR_FUZZ_SECS', 20))
    seed = int(os.environ.get('HMIRROR_FUZZ_SEED', int(time.time())))
    print('TAP version 13')
    print('1..6')
    if subprocess.run(['modprobe', 'hmirror']).returncode:
        print('1..0 # SKIP cannot load hmirror')
        return 4
    print('# seed %d, %g s, %d ops in the spec' % (seed, secs, len(spec.ops)))
    sys.stdout.flush()
    g = Genl()
    fid, groups = g.family(spec.name)
    ok = fid is not None and set(groups) == set(spec.groups)
    print('%s 1 family %s resolved, groups %s' % ('ok' if ok else 'not ok', spec.name, sorted(groups)))
    if fid is None:
        return 1
    gid_global = groups.get(spec.groups[0], 0)

    ev = Genl()
    ev.s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 1 << 22)
    ev.s.setsockopt(SOL_NETLINK, NETLINK_ADD_MEMBERSHIP, gid_global)

    hp = os.fork()
    if hp == 0:
        helper(io, secs, seed)
    r, w = os.pipe()
    up = os.fork()
    if up == 0:
        os.close(r)
        unprivileged(spec, fid, io, secs, seed + 1, w)
    os.close(w)

    dumped = set()
    f = Fuzzer(spec, fid, random.Random(seed), lambda: sorted(dumped) or [1])
    f.dumped = dumped
    counts = {}
    end = time.time() + secs
    while time.time() < end:
        f.one()
        if f.rnd.random() < 0.05:
            ids, _ = f.dump_ids()
            dumped |= ids
        events_reader(spec, fid, ev.s, f, counts)
    _, st = os.waitpid(hp, 0)
    helper_ok = os.WIFEXITED(st) and os.WEXITSTATUS(st) == 0
    unpriv = b''
    while True:
        b = os.read(r, 65536)
        if not b:
            break
        unpriv += b
    os.waitpid(up, 0)
    time.sleep(0.1)
    events_reader(spec, fid, ev.s, f, counts)

    print('# %d messages: %s' % (f.sent, dict(sorted(f.by_result.items()))))
    print('# by op: %s' % dict(sorted(f.ops_sent.items())))
    print('# events read: %s' % dict(sorted(counts.items())))
    for x in f.fails:
        print('# FAIL: %s' % x)
    print('%s 2 every request answered as the spec says (%d messages, %d violations)' %
          ('ok' if not f.fails else 'not ok', f.sent, f.nr_fails))
    evs = sum(v for k, v in counts.items() if k not in ('ENOBUFS', 'error'))
    print('%s 3 events read and checked against the spec (%d), helper exit %s' %
          ('ok' if evs and helper_ok else 'not ok', evs, 'clean' if helper_ok else st))
    lines = unpriv.decode().splitlines()
    for x in lines:
        if x.startswith('#'):
            print(x)
    bad = [x for x in lines if x.startswith('not ok')]
    for x in bad:
        print('# FAIL (unprivileged): %s' % x[8:])
    print('%s 4 unprivileged: no events, own spaces only, requests answered as the spec says' %
          ('ok' if lines and not bad else 'not ok'))
    # the family answers after all that
    fid2, _ = Genl().family(spec.name)
    print('%s 5 family still answers' % ('ok' if fid2 == fid else 'not ok'))
    for s in (g, ev, f.g):
        s.s.close()
    rc = subprocess.run(['modprobe', '-r', 'hmirror']).returncode
    gone = not os.path.exists('/sys/module/hmirror')
    print('%s 6 module unloads after the fuzz (modprobe -r exit %d)' %
          ('ok' if gone else 'not ok', rc))
    return 0 if (not f.fails and ok and not bad and gone and evs and helper_ok) else 1


if __name__ == '__main__':
    sys.exit(main())
