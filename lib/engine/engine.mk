# SPDX-License-Identifier: GPL-2.0
# Vulkan context (lib/vkctx.c) and the engine (lib/engine/*.c).
#
# Shaders of the engine (lib/engine/*.comp) are compiled at build time with
# glslangValidator and embedded as C arrays (build/include/engine/*.spv.h).

GLSLANG ?= glslangValidator
SPIRV_LINK ?= spirv-link
SPIRV_AS ?= spirv-as
SPIRV_VAL ?= spirv-val

VKCTX_OBJS := $(O)/lib/vkctx.o
LIB_OBJS += $(VKCTX_OBJS)
LIB_LIBS += -lvulkan

$(B)/include/engine/%.spv.h: lib/engine/%.comp | $(DEPS)
	@mkdir -p $(dir $@)
	$(GLSLANG) -V --target-env vulkan1.2 --quiet --vn hm_$(subst -,_,$*)_spv -o $@ $<

# in the order of a dispatch: engine (the sequence), harvest, mirror,
# upload, twin, window, copyback, ahead (uploads beside it); then tier (pipelines),
# space (homes), table (its placement) and gmap (the guest address space)
ENGINE_OBJS := $(O)/lib/engine/engine.o $(O)/lib/engine/harvest.o $(O)/lib/engine/mirror.o \
	$(O)/lib/engine/upload.o $(O)/lib/engine/twin.o $(O)/lib/engine/window.o \
	$(O)/lib/engine/copyback.o $(O)/lib/engine/ahead.o $(O)/lib/engine/tier.o $(O)/lib/engine/space.o \
	$(O)/lib/engine/table.o $(O)/lib/engine/gmap.o
LIB_OBJS += $(ENGINE_OBJS)

$(O)/lib/engine/copyback.o: $(B)/include/engine/diff.spv.h $(B)/include/engine/compact.spv.h
$(O)/lib/engine/twin.o: $(B)/include/engine/twin.spv.h $(B)/include/engine/gather.spv.h
