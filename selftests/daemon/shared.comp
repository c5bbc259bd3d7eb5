// SPDX-License-Identifier: GPL-2.0
// A pipeline with 16 KiB of workgroup memory (within every Vulkan device's
// limit): the daemon test of the device limits patches its array length
// (SHARED_WORDS) and its workgroup size past them.
#version 450
layout(local_size_x = 64) in;
layout(push_constant) uniform Push { uint table[12]; uint user[2]; } pc;
const uint SHARED_WORDS = 4093;	/* a constant no other use shares */
shared uint words[SHARED_WORDS];
void main()
{
	words[gl_LocalInvocationIndex] = pc.user[0];
	barrier();
}
