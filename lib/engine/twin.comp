// SPDX-License-Identifier: LGPL-2.1-or-later
//
// Upload, second half: fill the twins of a batch of freshly uploaded
// mirrors on the device (twin = mirror + twin_off, same slab), so the
// guest's bytes cross the bus once.  Runs on the shader cores, so the
// copy engine can already move the next batch home -> mirror meanwhile
// (lib/engine/twin.c: barriers transfer -> compute per batch).
//
// Grid: x = block of the chunk (block_bytes each), y = chunk of the batch;
// addrs[first + y] is the chunk's mirror device address.
#version 460
#extension GL_EXT_buffer_reference : require
#extension GL_EXT_shader_explicit_arithmetic_types_int64 : require

layout(local_size_x = 256) in;

layout(buffer_reference, std430, buffer_reference_align = 16) buffer V4 { uvec4 v[]; };
layout(buffer_reference, std430, buffer_reference_align = 8) readonly buffer Addrs { uint64_t a[]; };

layout(push_constant) uniform Push {
	uint64_t addrs;
	uint64_t twin_off;
	uint block_bytes;       // multiple of 16
	uint first;
} pc;

void main()
{
	uint64_t m = Addrs(pc.addrs).a[pc.first + gl_WorkGroupID.y] +
		     uint64_t(gl_WorkGroupID.x) * pc.block_bytes;
	V4 src = V4(m), dst = V4(m + pc.twin_off);
	uint units = pc.block_bytes / 16u;

	for (uint u = gl_LocalInvocationIndex; u < units; u += gl_WorkGroupSize.x)
		dst.v[u] = src.v[u];
}
