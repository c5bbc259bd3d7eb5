// SPDX-License-Identifier: LGPL-2.1-or-later
//
// The recorded copy-back's first step (copyback.c, hm_engine_record()):
// of the n published mirrors listed in descs_in (diff.comp's entries), the
// ones whose mark word the dispatch set are copied to descs_out, and the
// indirect dispatch of diff.comp over them is written: (blocks_per_chunk,
// how many, 1).  So the diff costs what the device wrote, not what is
// mirrored.  One workgroup; the order of the entries is of no importance.
#version 460
#extension GL_EXT_buffer_reference : require
#extension GL_EXT_shader_explicit_arithmetic_types_int64 : require

layout(local_size_x = 256) in;

layout(buffer_reference, std430, buffer_reference_align = 8) buffer Descs { u64vec4 d[]; };
layout(buffer_reference, std430, buffer_reference_align = 4) buffer U32 { uint v[]; };

layout(push_constant) uniform Push {
	uint64_t descs_in, descs_out, indirect;
	uint n, blocks_per_chunk;
} pc;

shared uint nr_out;

void main()
{
	if (gl_LocalInvocationIndex == 0u)
		nr_out = 0u;
	barrier();
	for (uint i = gl_LocalInvocationIndex; i < pc.n; i += gl_WorkGroupSize.x) {
		u64vec4 a = Descs(pc.descs_in).d[2u * i], b = Descs(pc.descs_in).d[2u * i + 1u];

		if (U32(a.w).v[0] != 0u) {
			uint k = atomicAdd(nr_out, 1u);

			Descs(pc.descs_out).d[2u * k] = a;
			Descs(pc.descs_out).d[2u * k + 1u] = b;
		}
	}
	barrier();
	if (gl_LocalInvocationIndex == 0u) {
		U32(pc.indirect).v[0] = nr_out == 0u ? 0u : pc.blocks_per_chunk;
		U32(pc.indirect).v[1] = nr_out;
		U32(pc.indirect).v[2] = 1u;
	}
}
