# SPDX-License-Identifier: GPL-2.0
# make demo: the main job (README.md, Documentation/daemon.rst).
#
# build/bin/hmirror-demo talks to hmirrord; tools/demo/run-demo.sh starts a
# daemon when none answers on the socket and stops it afterwards.
#   make demo [DEMO_ARGS="--size 512 --plot build/demo/demo.png"]

SPIRV_AS ?= spirv-as
SPIRV_LINK ?= spirv-link
SPIRV_VAL ?= spirv-val
SPIRV_DIS ?= spirv-dis
SPIRV_OPT ?= spirv-opt
# what puts glslang's output in the form hmirrord's isolation check follows
# (Documentation/daemon.rst, "Isolation"): functions inlined into their
# callers (the helper is DontInline and stays), values in SSA form
HM_ISOLATE_OPT = --merge-return --inline-entry-points-exhaustive --eliminate-dead-functions \
	--scalar-replacement=0 --ssa-rewrite --eliminate-local-single-store \
	--copy-propagate-arrays --simplify-instructions \
	--eliminate-dead-code-aggressive
GLSLANG ?= glslangValidator

# the traversal: GLSL calling hmirror/lookup.glsl's stand-in, linked with
# hmirror-link (which validates the result)
$(B)/gen/demo/traverse_linked.spv: tools/demo/traverse.comp lib/include/hmirror/lookup.glsl \
		$(B)/bin/hmirror-link | $(DEPS)
	@mkdir -p $(dir $@)
	$(GLSLANG) -V --target-env vulkan1.2 --quiet -Ilib/include -o $@.glsl.spv $<
	$(B)/bin/hmirror-link -o $@.linked.spv $@.glsl.spv
	$(SPIRV_OPT) $(HM_ISOLATE_OPT) -o $@ $@.linked.spv
	$(SPIRV_VAL) --target-env vulkan1.2 $@
	rm -f $@.glsl.spv $@.linked.spv
# $(demo_spv_header) FILE.spv ARRAY: a C header holding the words
demo_spv_header = python3 -c 'import sys, struct; d = open(sys.argv[1], "rb").read(); \
		w = struct.unpack("<%dI" % (len(d) // 4), d); \
		print("/* generated from %s */\n\#include <stdint.h>\nstatic const uint32_t %s[] = {" % (sys.argv[1], sys.argv[2])); \
		[print("\t" + ", ".join("0x%08x" % x for x in w[i:i + 8]) + ",") for i in range(0, len(w), 8)]; \
		print("};")'
$(B)/include/demo/traverse.spv.h: $(B)/gen/demo/traverse_linked.spv
	@mkdir -p $(dir $@)
	$(demo_spv_header) $< hm_demo_traverse_spv > $@

# the same walk with its loads at the mirror window (D969a, two tiers):
# the load functions' speculative forms are called by nothing until the
# engine's second tier, so no pass may drop dead functions
$(B)/gen/demo/traverse_spec_linked.spv: tools/demo/traverse.comp \
		lib/include/hmirror/lookup.glsl $(B)/bin/hmirror-link | $(DEPS)
	@mkdir -p $(dir $@)
	$(GLSLANG) -V --target-env vulkan1.2 --quiet -Ilib/include -DHM_SPECULATIVE \
		-o $@.glsl.spv $<
	$(B)/bin/hmirror-link -o $@.linked.spv $@.glsl.spv
	$(SPIRV_OPT) $(filter-out --eliminate-dead-functions,$(HM_ISOLATE_OPT)) -o $@ \
		$@.linked.spv
	$(SPIRV_VAL) --target-env vulkan1.2 $@
	rm -f $@.glsl.spv $@.linked.spv
$(B)/include/demo/traverse_spec.spv.h: $(B)/gen/demo/traverse_spec_linked.spv
	@mkdir -p $(dir $@)
	$(demo_spv_header) $< hm_demo_traverse_spec_spv > $@

# the same walk with raw device addresses, no helper (hmirror-bench
# workload: ideal, buffer-cache)
$(B)/gen/demo/traverse_raw.spv: tools/demo/traverse.comp lib/include/hmirror/lookup.glsl | $(DEPS)
	@mkdir -p $(dir $@)
	$(GLSLANG) -V --target-env vulkan1.2 --quiet -Ilib/include -DHM_RAW -o $@.glsl.spv $<
	$(SPIRV_OPT) $(HM_ISOLATE_OPT) -o $@ $@.glsl.spv
	$(SPIRV_VAL) --target-env vulkan1.2 $@
	rm -f $@.glsl.spv
$(B)/include/demo/traverse_raw.spv.h: $(B)/gen/demo/traverse_raw.spv
	@mkdir -p $(dir $@)
	$(demo_spv_header) $< hm_demo_traverse_raw_spv > $@

$(O)/tools/demo/demo.o: $(B)/include/demo/traverse.spv.h $(B)/include/demo/traverse_spec.spv.h

BIN += $(B)/bin/hmirror-demo
$(B)/bin/hmirror-demo: $(O)/tools/demo/demo.o $(O)/tools/demo/scene.o $(CLIENT_OBJS) \
		$$(sort $$(WATCH_OBJS))
	@mkdir -p $(dir $@)
	$(CC) -o $@ $(O)/tools/demo/demo.o $(O)/tools/demo/scene.o $(CLIENT_OBJS) \
		$(sort $(WATCH_OBJS)) \
		$(LDFLAGS) $(WATCH_LIBS)

DEMO_ARGS ?=
demo: $(B)/bin/hmirror-demo $(B)/bin/hmirrord $(B)/bin/hmirrorctl
	tools/demo/run-demo.sh $(DEMO_ARGS)

# natively, with the userfaultfd backend (make check): a small scene
$(B)/bin/test-demo: tools/demo/test-demo.sh $(B)/bin/hmirror-demo $(B)/bin/hmirrord $(B)/bin/hmirrorctl
	@mkdir -p $(dir $@)
	install -m 755 tools/demo/test-demo.sh $@
NATIVE_TESTS += $(B)/bin/test-demo
# in the VM with the module (kmod backend): 2 MiB, 2 x 64 rays; about 60 s
# a kernel under TCG, most of it lavapipe compiling and running the walk
VM_TESTS += $(B)/bin/test-demo
