#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0
"""Check Documentation/netlink/specs/hmirror.yaml against uapi/linux/hmirror.h.

Every enum the spec defines (commands, attribute sets, definitions) is
rendered to the C names the kernel's YNL generator would use, and its
values compared with the header's, compiled by the C compiler.  Prints TAP.
usage: nlspec_check.py SPEC HEADER_DIR
"""
import os
import subprocess
import sys
import tempfile

import yaml


def cname(prefix, name):
    return (prefix + name).upper().replace('-', '_')


def expected(spec):
    """[(C name, value)] the spec implies."""
    out = []
    for d in spec.get('definitions', []):
        if d['type'] != 'enum':
            continue
        v = d.get('value-start', 0)
        for e in d['entries']:
            n = e if isinstance(e, str) else e['name']
            out.append((cname(d['name-prefix'], n), v))
            v += 1
    for s in spec['attribute-sets']:
        v = 1
        for a in s['attributes']:
            v = a.get('value', v)
            out.append((cname(s['name-prefix'], a['name']), v))
            v += 1
    v = 1
    for op in spec['operations']['list']:
        v = op.get('value', v)
        out.append((cname(spec['operations']['name-prefix'], op['name']), v))
        v += 1
    return out


def main():
    spec_path, incdir = sys.argv[1], sys.argv[2]
    with open(spec_path) as f:
        spec = yaml.safe_load(f)
    exp = expected(spec)
    names = [n for n, _ in exp]
    with tempfile.TemporaryDirectory() as t:
        c = os.path.join(t, 'v.c')
        with open(c, 'w') as f:
            f.write('#include <stdio.h>\n#include <linux/hmirror.h>\nint main(void) {\n')
            for n in names:
                f.write('\tprintf("%%lld\\n", (long long)(%s));\n' % n)
            f.write('\tprintf("%s\\n", HMIRROR_GENL_NAME);\n')
            f.write('\tprintf("%s\\n", HMIRROR_GENL_MCGRP_EVENTS);\n')
            f.write('\treturn 0;\n}\n')
        exe = os.path.join(t, 'v')
        cc = os.environ.get('CC', 'cc')
        r = subprocess.run([cc, '-I', incdir, '-o', exe, c],
                           capture_output=True, text=True)
        print('TAP version 13')
        print('1..%d' % (len(exp) + 3))
        if r.returncode:
            print('not ok 1 compile # %s' % r.stderr.strip().replace('\n', ' '))
            return 1
        print('ok 1 every spec name exists in the header')
        got = subprocess.run([exe], capture_output=True, text=True).stdout.split('\n')
    bad = 0
    for i, (n, v) in enumerate(exp):
        ok = str(v) == got[i]
        bad += not ok
        print('%s %d %s == %d%s' % ('ok' if ok else 'not ok', i + 2, n, v,
                                     '' if ok else ' # header: ' + got[i]))
    k = len(exp) + 2
    ok = got[len(exp)] == spec['name']
    bad += not ok
    print('%s %d family name %s' % ('ok' if ok else 'not ok', k, spec['name']))
    grp = spec['mcast-groups']['list'][0]['name']
    ok = got[len(exp) + 1] == grp
    bad += not ok
    print('%s %d multicast group %s' % ('ok' if ok else 'not ok', k + 1, grp))
    return 1 if bad else 0


if __name__ == '__main__':
    sys.exit(main())
