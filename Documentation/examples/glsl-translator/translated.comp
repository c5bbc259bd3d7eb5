// SPDX-License-Identifier: GPL-2.0
//
// What a translator's GLSL for one guest program looks like: every guest
// access asks hm_lookup() where the word lives on the device, a load reads
// there (0 where nothing is mapped), a store writes there and then its
// mark (the sink where nothing is mapped), as hmirror/lookup.h says.
//
// The "guest program": y[i] = x[i] * 3 + 1 for i < count, over guest
// addresses (push words 6..9), one lane per word.
#version 450
#extension GL_GOOGLE_include_directive : require
#extension GL_EXT_shader_explicit_arithmetic_types_int64 : require
#extension GL_EXT_buffer_reference : require
#include "hmirror/lookup.glsl"

layout(local_size_x = 64) in;
layout(buffer_reference, std430, buffer_reference_align = 4) buffer Word { uint v; };

// the device table's first six words (all the helper needs: this program
// runs the table itself; the engine's push block has the window's six next),
// then ours
layout(push_constant) uniform Push {
	uint64_t table;
	uint nr_home, chunk_shift;
	uint64_t marks;
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
