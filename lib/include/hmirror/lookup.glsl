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

#endif
