// SPDX-License-Identifier: GPL-2.0
// A dispatch that takes a while and touches no guest memory: each lane runs
// user[0] steps of an LCG; a result nobody can predict is stored to the
// marks' sink word only if it hits one value, so the loop stays.  Used to
// have dispatches in flight (client killed mid-dispatch, SIGTERM).
#version 450
#extension GL_EXT_buffer_reference : require
#extension GL_EXT_shader_explicit_arithmetic_types_int64 : require
layout(local_size_x = 64) in;
layout(buffer_reference, std430, buffer_reference_align = 4) buffer Word { uint v; };
layout(push_constant) uniform Push { uint table[12]; uint user[2]; } pc;
void main()
{
	uint x = gl_GlobalInvocationID.x;
	for (uint i = 0; i < pc.user[0]; i++)
		x = x * 1664525u + 1013904223u;
	if (x == 0x9e3779b9u) {
		/* the marks' sink word, formed in one expression: the only raw
		 * pointer the daemon's isolation check lets through */
		Word(uint64_t(pc.table[4]) | (uint64_t(pc.table[5]) << 32)).v = x;
	}
}
