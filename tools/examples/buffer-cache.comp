// SPDX-License-Identifier: GPL-2.0
//
// The example's "translated guest kernel" (buffer-cache.c): what a
// translator emits for a guest program that transforms a vertex buffer,
// y[i] = x[i] * 3 + 1 for i < count, every guest access through the
// lookup helper (hmirror/lookup.glsl; linked by hmirror-link).
#version 450
#extension GL_GOOGLE_include_directive : require
#extension GL_EXT_shader_explicit_arithmetic_types_int64 : require
#extension GL_EXT_buffer_reference : require
#include "hmirror/lookup.glsl"

layout(local_size_x = 64) in;
layout(buffer_reference, std430, buffer_reference_align = 4) buffer Word { uint v; };

// the engine's twelve words first (push layout 2: the table's, then the
// mirror window's, unused by this form), then the guest program's five
layout(push_constant) uniform Push {
	uint64_t table;
	uint nr_home, chunk_shift;
	uint64_t marks;
	uint64_t window_delta, window_first, window_last;
	uint64_t x, y;          // guest addresses
	uint count;
} pc;

uint guest_load(uint64_t g)
{
	uint64_t dev = hm_lookup_dev(hm_lookup(g, pc.table, pc.nr_home, pc.chunk_shift, pc.marks));

	return dev != 0 ? Word(dev).v : 0u;
}

void guest_store(uint64_t g, uint v)
{
	hm_lookup_result r = hm_lookup(g, pc.table, pc.nr_home, pc.chunk_shift, pc.marks);
	uint64_t dev = hm_lookup_dev(r);

	if (dev != 0)
		Word(dev).v = v;
	Word(hm_lookup_mark(r)).v = 1u;
}

void main()
{
	uint i = gl_GlobalInvocationID.x;

	if (i < pc.count)
		guest_store(pc.y + 4 * i, guest_load(pc.x + 4 * i) * 3u + 1u);
}
