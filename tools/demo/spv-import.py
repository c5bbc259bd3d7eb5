#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0
"""spv-import.py IN.spvasm OUT.spvasm STUB IMPORT

Turn a GLSL stub function into a call of an imported function, so that
spirv-link can link the real one in (GLSL cannot declare imports).

IN is `spirv-dis` output of a glslang module holding a function whose
OpName starts with "STUB(".  glslang passes parameters by pointer
(Function storage); the import takes them by value.  The stub's body is
replaced by: load each parameter, OpFunctionCall the import, return its
result.  The import is declared (OpFunction ... OpFunctionEnd without a
body, LinkageAttributes "IMPORT" Import) with the same result type and a
by-value function type, and OpCapability Linkage is added.
"""
import re
import sys


def main():
    src, dst, stub, imp = sys.argv[1:5]
    lines = open(src).read().split('\n')
    stub_id = None
    for ln in lines:
        m = re.match(r'\s*OpName (%\S+) "' + re.escape(stub) + r'\(', ln)
        if m:
            stub_id = m.group(1)
    if not stub_id:
        sys.exit('spv-import: no function named %s' % stub)
    # the stub: result type, function type, parameter ids and pointer types
    start = next(i for i, ln in enumerate(lines)
                 if re.match(r'\s*' + re.escape(stub_id) + r' = OpFunction ', ln))
    m = re.match(r'\s*\S+ = OpFunction (%\S+) \S+ (%\S+)', lines[start])
    rtype = m.group(1)
    params = []
    i = start + 1
    while 'OpFunctionParameter' in lines[i]:
        pm = re.match(r'\s*(%\S+) = OpFunctionParameter (%\S+)', lines[i])
        params.append((pm.group(1), pm.group(2)))
        i += 1
    end = next(j for j in range(i, len(lines)) if 'OpFunctionEnd' in lines[j])
    # pointee type of each Function pointer type
    pointee = {}
    for ln in lines:
        pm = re.match(r'\s*(%\S+) = OpTypePointer Function (%\S+)', ln)
        if pm:
            pointee[pm.group(1)] = pm.group(2)
    vtypes = [pointee[t] for _, t in params]
    body = ['%hmimp_entry = OpLabel']
    args = []
    for k, (pid, _) in enumerate(params):
        body.append('%%hmimp_a%d = OpLoad %s %s' % (k, vtypes[k], pid))
        args.append('%%hmimp_a%d' % k)
    body.append('%%hmimp_r = OpFunctionCall %s %%hmimp_fn %s' % (rtype, ' '.join(args)))
    body.append('OpReturnValue %hmimp_r')
    # ids defined inside the old body: their debug names go too
    gone = set()
    for ln in lines[i:end]:
        dm = re.match(r'\s*(%\S+) = ', ln)
        if dm:
            gone.add(dm.group(1))
    out = lines[:i] + body + lines[end:]
    out = [ln for ln in out
           if not (re.match(r'\s*Op(Name|MemberName|Decorate) (%\S+)', ln) and
                   re.match(r'\s*Op\w+ (%\S+)', ln).group(1) in gone)]
    # declarations: capability, decoration, function type, the import
    cap = next(k for k, ln in enumerate(out) if 'OpCapability' in ln)
    out.insert(cap + 1, 'OpCapability Linkage')
    dec = next(k for k, ln in enumerate(out) if re.match(r'\s*OpDecorate|\s*OpMemberDecorate', ln))
    out.insert(dec, 'OpDecorate %%hmimp_fn LinkageAttributes "%s" Import' % imp)
    rdef = next(k for k, ln in enumerate(out) if re.match(r'\s*' + re.escape(rtype) + r' = ', ln))
    need = set(vtypes)
    last = rdef
    for k, ln in enumerate(out):
        dm = re.match(r'\s*(%\S+) = OpType', ln)
        if dm and dm.group(1) in need:
            last = max(last, k)
    out.insert(last + 1, '%%hmimp_fnty = OpTypeFunction %s %s' % (rtype, ' '.join(vtypes)))
    first_fn = next(k for k, ln in enumerate(out) if re.match(r'\s*\S+ = OpFunction ', ln))
    decl = ['%%hmimp_fn = OpFunction %s None %%hmimp_fnty' % rtype]
    decl += ['%%hmimp_p%d = OpFunctionParameter %s' % (k, t) for k, t in enumerate(vtypes)]
    decl.append('OpFunctionEnd')
    out[first_fn:first_fn] = decl
    open(dst, 'w').write('\n'.join(out))


if __name__ == '__main__':
    main()
