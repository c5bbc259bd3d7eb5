// SPDX-License-Identifier: GPL-2.0
// A module that takes a driver a while to compile (and SPIRV-Tools a while
// to validate): 5,000 dependent steps, unrolled by the preprocessor, of a
// map no compiler folds (xorshift, then an LCG), kept alive by a store
// that never happens.  About 155,000 words; lavapipe compiles it in about
// 0.2 s.  Used to show that one client's compile stalls no other client.
#version 450
#extension GL_EXT_buffer_reference : require
#extension GL_EXT_shader_explicit_arithmetic_types_int64 : require
layout(local_size_x = 64) in;
layout(buffer_reference, std430, buffer_reference_align = 4) buffer Word { uint v; };
layout(push_constant) uniform Push { uint table[12]; uint user[2]; } pc;
#define S x = (x ^ (x >> 13)) * 1664525u + 1013904223u;
#define S10 S S S S S S S S S S
#define S100 S10 S10 S10 S10 S10 S10 S10 S10 S10 S10
#define S1000 S100 S100 S100 S100 S100 S100 S100 S100 S100 S100
void main()
{
	uint x = gl_GlobalInvocationID.x + pc.user[0];
	S1000 S1000 S1000 S1000 S1000
	if (x == 0x9e3779b9u) {
		/* the marks' sink word, formed in one expression: the only raw
		 * pointer the daemon's isolation check lets through */
		Word(uint64_t(pc.table[4]) | (uint64_t(pc.table[5]) << 32)).v = x;
	}
}
