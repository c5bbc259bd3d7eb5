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
GLSLANG ?= glslangValidator

# the traversal: GLSL -> stub made an import -> linked with hm_lookup
$(B)/gen/demo/traverse.spv: tools/demo/traverse.comp tools/demo/spv-import.py | $(DEPS)
	@mkdir -p $(dir $@)
	$(GLSLANG) -V --target-env vulkan1.2 --quiet -o $@.glsl.spv $<
	$(SPIRV_DIS) --raw-id -o $@.dis $@.glsl.spv
	tools/demo/spv-import.py $@.dis $@.import hm_lookup_stub hm_lookup
	$(SPIRV_AS) --target-env spv1.5 -o $@.import.spv $@.import
	rm -f $@.dis $@.import $@.glsl.spv
	mv $@.import.spv $@
$(B)/gen/demo/traverse_linked.spv: $(B)/gen/demo/traverse.spv $(HM_LOOKUP_SPV)
	$(SPIRV_LINK) --target-env vulkan1.2 -o $@ $^
	$(SPIRV_VAL) --target-env vulkan1.2 $@
# $(demo_spv_header) FILE.spv ARRAY: a C header holding the words
demo_spv_header = python3 -c 'import sys, struct; d = open(sys.argv[1], "rb").read(); \
		w = struct.unpack("<%dI" % (len(d) // 4), d); \
		print("/* generated from %s */\n\#include <stdint.h>\nstatic const uint32_t %s[] = {" % (sys.argv[1], sys.argv[2])); \
		[print("\t" + ", ".join("0x%08x" % x for x in w[i:i + 8]) + ",") for i in range(0, len(w), 8)]; \
		print("};")'
$(B)/include/demo/traverse.spv.h: $(B)/gen/demo/traverse_linked.spv
	@mkdir -p $(dir $@)
	$(demo_spv_header) $< hm_demo_traverse_spv > $@

# the same walk with raw device addresses, no helper (hmirror-bench
# workload: ideal, buffer-cache)
$(B)/gen/demo/traverse_raw.spv: tools/demo/traverse.comp | $(DEPS)
	@mkdir -p $(dir $@)
	$(GLSLANG) -V --target-env vulkan1.2 --quiet -DHM_RAW -o $@ $<
	$(SPIRV_VAL) --target-env vulkan1.2 $@
$(B)/include/demo/traverse_raw.spv.h: $(B)/gen/demo/traverse_raw.spv
	@mkdir -p $(dir $@)
	$(demo_spv_header) $< hm_demo_traverse_raw_spv > $@

$(O)/tools/demo/demo.o: $(B)/include/demo/traverse.spv.h

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
