// SPDX-License-Identifier: GPL-2.0
// The smallest pipeline the engine accepts: no memory access at all, a push
// block of the six device-table words plus two user words.  Used by the
// daemon's tests and by hmirror-bench dispatch (the round trip of an empty
// dispatch).
#version 450
layout(local_size_x = 1) in;
layout(push_constant) uniform Push { uint table[12]; uint user[2]; } pc;
void main() {}
