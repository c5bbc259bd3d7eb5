// SPDX-License-Identifier: LGPL-2.1-or-later
//
// Copy-back of device writes (rule 4): for each chunk listed, compare the
// mirror with its twin (the copy as uploaded) and write home exactly the
// bytes that differ, then update the twin.  A 16-byte unit whose bytes all
// changed is stored whole, a word whose bytes all changed as one word, any
// other changed byte alone: a byte the device did not change is never
// written home, so a CPU store to it during the dispatch survives.
//
// A chunk's entry may name its mark word: then a chunk the device did not
// store into (mark 0) is skipped, so that a copy-back recorded before the
// dispatch ran (hm_engine_record(): every published mirror listed) costs
// an unwritten mirror one load a workgroup.  It may name the pool copy of
// a mirror that lives in the dense window: the changed units are written
// there too, as hm_window_after_dispatch() would have copied them.
//
// Grid: x = block of the chunk (block_bytes each), y = listed chunk.
// Each workgroup stores the number of bytes it wrote home into
// counts[y * blocks_per_chunk + x] (no atomics on host memory).
#version 460
#extension GL_EXT_buffer_reference : require
#extension GL_EXT_shader_explicit_arithmetic_types_int64 : require
#extension GL_EXT_shader_explicit_arithmetic_types_int8 : require
#extension GL_EXT_shader_8bit_storage : require

layout(local_size_x = 256) in;

layout(buffer_reference, std430, buffer_reference_align = 16) buffer V4 { uvec4 v[]; };
layout(buffer_reference, std430, buffer_reference_align = 4) buffer U32 { uint v[]; };
layout(buffer_reference, std430, buffer_reference_align = 1) buffer U8 { uint8_t v[]; };
// two vectors per chunk: (mirror, twin, home, mark or 0), (pool copy or 0, pad)
layout(buffer_reference, std430, buffer_reference_align = 8) readonly buffer Descs { u64vec4 d[]; };
layout(buffer_reference, std430, buffer_reference_align = 4) writeonly buffer Counts { uint c[]; };

layout(push_constant) uniform Push {
	uint64_t descs;
	uint64_t counts;
	uint block_bytes;       // multiple of 16
	uint blocks_per_chunk;
} pc;

shared uint wg_changed;

void main()
{
	uint chunk = gl_WorkGroupID.y, block = gl_WorkGroupID.x;
	u64vec4 d = Descs(pc.descs).d[2u * chunk];
	uint64_t pool = Descs(pc.descs).d[2u * chunk + 1u].x;
	uint64_t off = uint64_t(block) * pc.block_bytes;
	V4 m = V4(d.x + off), t = V4(d.y + off), h4 = V4(d.z + off), p4 = V4(pool + off);
	U32 h32 = U32(d.z + off);
	U8 h8 = U8(d.z + off);
	uint units = pc.block_bytes / 16u, changed = 0u;

	if (d.w != 0ul && U32(d.w).v[0] == 0u) {
		// not stored into: nothing changed (uniform over the workgroup)
		if (gl_LocalInvocationIndex == 0u)
			Counts(pc.counts).c[chunk * pc.blocks_per_chunk + block] = 0u;
		return;
	}
	if (gl_LocalInvocationIndex == 0u)
		wg_changed = 0u;
	barrier();
	for (uint u = gl_LocalInvocationIndex; u < units; u += gl_WorkGroupSize.x) {
		uvec4 a = m.v[u], b = t.v[u], x = a ^ b;
		uvec4 c;        // bit 8j of c[k] set: byte j of word k changed
		uint n;

		if (x == uvec4(0u))
			continue;
		c = x | (x >> 4u);
		c |= c >> 2u;
		c |= c >> 1u;
		c &= uvec4(0x01010101u);
		n = uint(bitCount(c.x) + bitCount(c.y) + bitCount(c.z) + bitCount(c.w));
		if (n == 16u) {
			h4.v[u] = a;
		} else {
			for (uint k = 0u; k < 4u; k++) {
				if (c[k] == 0u)
					continue;
				if (c[k] == 0x01010101u) {
					h32.v[u * 4u + k] = a[k];
					continue;
				}
				for (uint j = 0u; j < 4u; j++)
					if ((c[k] & (1u << (8u * j))) != 0u)
						h8.v[(u * 4u + k) * 4u + j] = uint8_t(a[k] >> (8u * j));
			}
		}
		t.v[u] = a;
		if (pool != 0ul)
			p4.v[u] = a;
		changed += n;
	}
	atomicAdd(wg_changed, changed);
	barrier();
	if (gl_LocalInvocationIndex == 0u)
		Counts(pc.counts).c[chunk * pc.blocks_per_chunk + block] = wg_changed;
}
