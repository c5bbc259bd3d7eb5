// SPDX-License-Identifier: GPL-2.0
// fill: v[i] = i * 3 for i < n (vkctx test)
#version 460
#extension GL_EXT_buffer_reference : require
#extension GL_EXT_shader_explicit_arithmetic_types_int64 : require
layout(local_size_x = 64) in;
layout(buffer_reference, std430) buffer U32 { uint v[]; };
layout(push_constant) uniform P { uint64_t a; uint n; } pc;
void main() { uint i = gl_GlobalInvocationID.x; if (i < pc.n) U32(pc.a).v[i] = i * 3u; }
