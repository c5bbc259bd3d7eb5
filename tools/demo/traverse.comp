// SPDX-License-Identifier: GPL-2.0
//
// The demo's ray traversal, as an emulator's translated program would be:
// every access to guest memory goes through the lookup helper hm_lookup
// (hmirror/lookup.h), then loads or stores the
// device address it answers; every store also writes its mark.
//
// It calls hm_lookup() of hmirror/lookup.glsl, a stand-in that
// hmirror-link (tools/hmirror-link) turns into a call of the real helper.
//
// Scene (all little-endian u32; tools/demo/demo.c builds it):
//   node  {x0, y0, x1, y1, zmin, left_or_first, count, escape,
//          scratch, pad[3]}                                     48 bytes
//         count == 0: inner node, children left and left + 1;
//         escape: the next node after this subtree in depth-first order
//         (left child first), END at the last: a stackless walk.
//   prim  {x0, y0, x1, y1, z, id, scratch, pad}                  32 bytes
//   ray   {x, y}                                                  8 bytes
//   hit   {prim id, z, visits | error << 31, cpu word}           16 bytes
// A ray at (x, y) looks down +z: its hit is the primitive with the least
// (z, id) whose box holds (x, y) (x0 <= x < x1, y0 <= y < y1).  The scratch
// words and the hit's cpu word are the CPU's: never read here.
#version 450
#extension GL_EXT_buffer_reference : require
#extension GL_EXT_shader_explicit_arithmetic_types_int64 : require
#extension GL_GOOGLE_include_directive : require
#include "hmirror/lookup.glsl"

layout(local_size_x = 64) in;

#ifdef HM_RAW
// hmirror-bench workload's ideal and buffer-cache modes: the guest
// addresses in the push block are device addresses of a device-local copy,
// the mark goes to one word at marks; nothing is looked up
hm_lookup_result hm_lookup_raw(uint64_t guest, uint64_t table, uint nr_home, uint shift,
			       uint64_t marks)
{
	return hm_lookup_result(uint(guest), uint(guest >> 32), uint(marks), uint(marks >> 32));
}
#undef hm_lookup
#define hm_lookup hm_lookup_raw
#endif

layout(buffer_reference, std430, buffer_reference_align = 16) readonly buffer V4 { uvec4 v; };
layout(buffer_reference, std430, buffer_reference_align = 8) readonly buffer V2 { uvec2 v; };
layout(buffer_reference, std430, buffer_reference_align = 16) buffer Hit { uint id, z, visits; };
layout(buffer_reference, std430, buffer_reference_align = 4) buffer W1 { uint v; };

layout(push_constant) uniform Push {
	uint table_lo, table_hi, nr_home, chunk_shift, marks_lo, marks_hi;
	uint window[6];	/* the mirror window (D969a): delta, first, last */
	uint nodes_lo, nodes_hi, prims_lo, prims_hi;
	uint rays_lo, rays_hi, hits_lo, hits_hi;
	uint first_ray, nr_rays;
} pc;

#define END 0xffffffffu
#define MAX_VISITS 65536

uint64_t u64(uint lo, uint hi) { return uint64_t(lo) | (uint64_t(hi) << 32); }

uint err = 0;

// Every access is the daemon's isolation form (Documentation/daemon.rst,
// "Isolation"): the guest address is masked to the access's size, which
// the scene's layout guarantees anyway, and the pointer is
// "dev != 0 ? dev : mark" of the helper's answer.  The build inlines
// these functions (tools/demo/demo.mk), so that pointers are formed where
// the helper answers.
uint64_t lookup(uint64_t g, out uint64_t dev, out uint64_t mark)
{
	hm_lookup_result r = hm_lookup(g, u64(pc.table_lo, pc.table_hi), pc.nr_home,
				 pc.chunk_shift, u64(pc.marks_lo, pc.marks_hi));

	mark = u64(r.mark_lo, r.mark_hi);
	dev = u64(r.dev_lo, r.dev_hi);
	return dev != 0 ? dev : mark;
}

#ifdef HM_SPECULATIVE
// HM_SPECULATIVE (traverse_spec): the hierarchy's loads go through the
// load call site (D969a): a load at the mirror window, the helper only
// where the window says "not here"; an unmapped word reads 0 (no error
// bit).  Two tiers: the engine builds the compact form (every load through
// the helper) and switches to the speculative one once it is compiled.
#define WINDOW u64(pc.window[0], pc.window[1]), u64(pc.window[2], pc.window[3]), \
	       u64(pc.window[4], pc.window[5])
uvec4 load4(uint64_t g)
{
	return hm_load4(g & ~uint64_t(15), u64(pc.table_lo, pc.table_hi), pc.nr_home,
			pc.chunk_shift, u64(pc.marks_lo, pc.marks_hi), WINDOW);
}

uvec2 load2(uint64_t g)
{
	return hm_load2(g & ~uint64_t(7), u64(pc.table_lo, pc.table_hi), pc.nr_home,
			pc.chunk_shift, u64(pc.marks_lo, pc.marks_hi), WINDOW);
}
#else
uvec4 load4(uint64_t g)
{
	uint64_t d, m;
	uvec4 v = V4(lookup(g & ~uint64_t(15), d, m)).v;

	if (d == 0) {
		err = 1;
		return uvec4(0);
	}
	return v;
}

uvec2 load2(uint64_t g)
{
	uint64_t d, m;
	uvec2 v = V2(lookup(g & ~uint64_t(7), d, m)).v;

	if (d == 0) {
		err = 1;
		return uvec2(0);
	}
	return v;
}
#endif

void main()
{
	uint i = gl_GlobalInvocationID.x;

	if (i >= pc.nr_rays)
		return;
	uint ray = pc.first_ray + i;
	uint64_t nodes = u64(pc.nodes_lo, pc.nodes_hi);
	uint64_t prims = u64(pc.prims_lo, pc.prims_hi);
	uint64_t m;
	uvec2 xy = load2(u64(pc.rays_lo, pc.rays_hi) + uint64_t(ray) * 8);
	uint best_z = 0xffffffffu, best_id = 0xffffffffu, visits = 0;
	uint n = 0;

	while (n != END) {
		uint64_t ng = nodes + uint64_t(n) * 48;
		uvec4 box = load4(ng);
		uvec4 b = load4(ng + 16);	// zmin, left/first, count, escape

		if (++visits > MAX_VISITS) {
			err = 1;
			break;
		}
		if (xy.x < box.x || xy.x >= box.z || xy.y < box.y || xy.y >= box.w ||
		    b.x > best_z) {
			n = b.w;
			continue;
		}
		if (b.z == 0) {
			n = b.y;
			continue;
		}
		for (uint k = 0; k < b.z; k++) {
			uint64_t pg = prims + uint64_t(b.y + k) * 32;
			uvec4 pbox = load4(pg);
			uvec4 pz = load4(pg + 16);	// z, id, scratch, pad

			if (xy.x < pbox.x || xy.x >= pbox.z ||
			    xy.y < pbox.y || xy.y >= pbox.w)
				continue;
			if (pz.x < best_z || (pz.x == best_z && pz.y < best_id)) {
				best_z = pz.x;
				best_id = pz.y;
			}
		}
		n = b.w;
	}
	uint64_t hd;
	uint64_t h = lookup((u64(pc.hits_lo, pc.hits_hi) + uint64_t(ray) * 16) & ~uint64_t(15),
			    hd, m);

	// where the hit record is unmapped, h is its mark (the sink): the
	// stores land there and nowhere else (no reference is kept in a
	// variable: the isolation check follows values, not variables)
	Hit(h).id = best_id;
	Hit(h).z = best_z;
	Hit(h).visits = visits | (err << 31);
	W1(m).v = 1;	// the mark
}
