// SPDX-License-Identifier: LGPL-2.1-or-later
//
// hmirror's lookup helper for translators that write GLSL:
//
//   #extension GL_GOOGLE_include_directive : require
//   #extension GL_EXT_shader_explicit_arithmetic_types_int64 : require
//   #include "hmirror/lookup.glsl"
//
//   hm_lookup_result r = hm_lookup(guest, table, nr_home, chunk_shift, marks);
//   uint64_t dev = hm_lookup_dev(r), mark = hm_lookup_mark(r);
//
// GLSL cannot declare a function defined elsewhere, so hm_lookup is a
// stand-in with a body that maps nothing (dev 0, mark = the sink): a
// module used unlinked sees every access land nowhere.  Compile it with
// glslangValidator -V -I$(pkg-config --variable=glsl_includedir hmirror)
// (no -g0, no optimisation before linking), then link with
//
//   hmirror-link -o linked.spv module.spv
//
// which gives the stand-in a body that calls the real helper: it loads
// the parameters glslang passes by pointer and calls the helper, which
// takes them by value.  The call-site rules (a store writes its mark, an
// atomic that lands nowhere goes to the sink) are in hmirror/lookup.h and
// shaders.rst of hmirror's documentation.
#ifndef HMIRROR_LOOKUP_GLSL
#define HMIRROR_LOOKUP_GLSL

// the helper's answer: device address and mark address, as 32-bit halves
struct hm_lookup_result {
	uint dev_lo, dev_hi, mark_lo, mark_hi;
};

// Replaced by hmirror-link (hm_spirv_link_lookup()); keep the name.
hm_lookup_result hm_lookup_stub(uint64_t guest, uint64_t table, uint nr_home,
				uint chunk_shift, uint64_t marks)
{
	return hm_lookup_result(0u, 0u, uint(marks), uint(marks >> 32));
}

#define hm_lookup hm_lookup_stub

uint64_t hm_lookup_dev(hm_lookup_result r)
{
	return uint64_t(r.dev_lo) | (uint64_t(r.dev_hi) << 32);
}

uint64_t hm_lookup_mark(hm_lookup_result r)
{
	return uint64_t(r.mark_lo) | (uint64_t(r.mark_hi) << 32);
}

// Loads through the mirror window (D969a): N 32-bit words at a 4-byte
// aligned guest address, with the table's and the window's push words.
//
//   uvec4 v = hm_load4(guest, table, nr_home, chunk_shift, marks,
//                      wdelta, wfirst, wlast);
//
// hmirror-link gives each stand-in a body that calls the library's load
// function of that width (hm_load.compact.N, every word through the
// helper), and adds its speculative form (hm_load.spec.N: one load at the
// guest address + wdelta, clamped into [wfirst, wlast], the helper only
// when a word there is the window's sentinel).  The engine and hmirrord
// build the compact form first and switch to the speculative one when it
// is compiled (the two tiers).  A word that lands nowhere reads 0.
// Unlinked, the stand-ins read 0.  Stores and atomics keep hm_lookup and
// its mark.
uint hm_load1_stub(uint64_t guest, uint64_t table, uint nr_home, uint chunk_shift,
		   uint64_t marks, uint64_t wdelta, uint64_t wfirst, uint64_t wlast)
{
	return 0u;
}

uvec2 hm_load2_stub(uint64_t guest, uint64_t table, uint nr_home, uint chunk_shift,
		    uint64_t marks, uint64_t wdelta, uint64_t wfirst, uint64_t wlast)
{
	return uvec2(0u);
}

uvec4 hm_load4_stub(uint64_t guest, uint64_t table, uint nr_home, uint chunk_shift,
		    uint64_t marks, uint64_t wdelta, uint64_t wfirst, uint64_t wlast)
{
	return uvec4(0u);
}

#define hm_load1 hm_load1_stub
#define hm_load2 hm_load2_stub
#define hm_load4 hm_load4_stub

#endif
