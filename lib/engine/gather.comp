// SPDX-License-Identifier: LGPL-2.1-or-later
//
// Upload in one pass (HM_TWIN_GATHER): each listed chunk is read from home
// (host memory, through its import's device address) once, in coalesced
// 16-byte loads, and written to its mirror and to its twin (mirror +
// twin_off; 0, the window's copies, writes no twin).  A shader reading
// the bus streams as fast as the copy engine (H200: 51 GB/s,
// cuda_anchors) and costs nothing per region, where a
// vkCmdCopyBuffer region each cost the copy engine a setup for every
// scattered chunk (Documentation/performance.rst).
//
// Grid: x = block of the chunk (block_bytes each), y = listed chunk;
// descs[first + y] = (home, mirror) device addresses.  A grid of fewer
// rows than count chunks (an upload beside a walk, HMIRROR_SIDE_GATHER_GROUPS)
// has each row take every gl_NumWorkGroups.y-th chunk after its own.
#version 460
#extension GL_EXT_buffer_reference : require
#extension GL_EXT_shader_explicit_arithmetic_types_int64 : require

layout(local_size_x = 256) in;

layout(buffer_reference, std430, buffer_reference_align = 16) buffer V4 { uvec4 v[]; };
layout(buffer_reference, std430, buffer_reference_align = 16) readonly buffer Descs { u64vec2 d[]; };

layout(push_constant) uniform Push {
	uint64_t descs;
	uint64_t twin_off;
	uint block_bytes;       // multiple of 16
	uint first;
	uint count;             // chunks listed from first
} pc;

void main()
{
	uint64_t off = uint64_t(gl_WorkGroupID.x) * pc.block_bytes;
	uint units = pc.block_bytes / 16u;

	for (uint y = gl_WorkGroupID.y; y < pc.count; y += gl_NumWorkGroups.y) {
		u64vec2 d = Descs(pc.descs).d[pc.first + y];
		V4 src = V4(d.x + off), m = V4(d.y + off), t = V4(d.y + pc.twin_off + off);

		for (uint u = gl_LocalInvocationIndex; u < units; u += gl_WorkGroupSize.x) {
			uvec4 v = src.v[u];

			m.v[u] = v;
			if (pc.twin_off != 0)   // the window's copies: no twin
				t.v[u] = v;
		}
	}
}
