# SPDX-License-Identifier: GPL-2.0
#
# hmirror: one build for the module, the library, the daemon and the tools.
#
#   make            build everything (installs missing Debian packages once)
#   make demo       the main job (see README.md)
#   make check      every test; last line "N passed, N failed, N skipped"
#   make install    module, udev rule, library, headers, daemon, tools
#
# Each part adds itself through a fragment, included below:
#   lib/*.mk lib/*/*.mk daemon/*.mk tools/*.mk tools/*/*.mk selftests/*/*.mk
# A fragment appends to these variables:
#   BIN           programs, installed         (build/bin/...)
#   LIB_OBJS      objects of libhmirror        (build/obj/...)
#   NATIVE_TESTS  test programs run natively by make check
#   VM_TESTS      test programs run inside the VM, on each test kernel
#   SHARE         generated data               (build/share/hmirror/...)

.DEFAULT_GOAL := all
B := build
O := $(B)/obj

CC ?= cc
CFLAGS ?= -O2 -g
CFLAGS += -std=gnu11 -Wall -Wextra -Wno-unused-parameter -Wno-missing-field-initializers \
	-Werror=implicit-function-declaration -fPIC -D_GNU_SOURCE -pthread \
	-Iuapi -Ilib/include -I$(B)/include -I$(B)/ksft -MMD -MP
LDFLAGS += -pthread
PKG_CONFIG ?= pkg-config

BIN :=
LIB_OBJS :=
NATIVE_TESTS :=
VM_TESTS :=
SHARE :=

# Debian packages, once per machine (tools/deps.sh lists them).
DEPS := $(B)/.deps-ok
$(DEPS): tools/deps.sh
	HMIRROR_DEPS_STAMP=$@ ./tools/deps.sh

# The kselftest harness and checkpatch, taken from linux-source-6.1 at
# build time; nothing of the kernel tree lives in this repository.
KSRC_TAR ?= $(firstword $(wildcard /usr/src/linux-source-6.1.tar.*))
KSFT := $(B)/ksft
$(KSFT)/.stamp: | $(DEPS)
	tools/extract-ksrc.sh "$(KSRC_TAR)" $(KSFT)
	touch $@

$(O)/%.o: %.c | $(DEPS) $(KSFT)/.stamp
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -c -o $@ $<

-include $(wildcard lib/*.mk lib/*/*.mk daemon/*.mk tools/*.mk tools/*/*.mk selftests/*/*.mk)

# ---- kernel module ------------------------------------------------------
# KDIR: the running kernel's build tree if it has one, else every installed
# Debian linux-headers-*-amd64 tree.
KDIR ?= $(or $(wildcard /lib/modules/$(shell uname -r)/build/Makefile),)
KDIRS ?= $(if $(KDIR),$(patsubst %/Makefile,%,$(KDIR)),$(sort $(wildcard /usr/src/linux-headers-*-amd64)))
KVER = $(patsubst linux-headers-%,%,$(notdir $(1)))
KMOD_SRCS := $(wildcard kmod/*.c kmod/*.h uapi/linux/*.h) Kbuild

.PHONY: all module lib demo check install clean
all: module $(BIN) $(SHARE) $(B)/lib/libhmirror.a $(B)/lib/libhmirror.so
lib: $(B)/lib/libhmirror.a $(B)/lib/libhmirror.so

module: $(foreach k,$(KDIRS),$(B)/kmod/$(call KVER,$(k))/hmirror.ko)

define KMOD_RULE
$(B)/kmod/$(call KVER,$(1))/hmirror.ko: $(KMOD_SRCS) | $(DEPS)
	@mkdir -p $(B)/kmod/$(call KVER,$(1))
	tools/build-kmod.sh $(1) $(B)/kmod/$(call KVER,$(1))
endef
$(foreach k,$(KDIRS),$(eval $(call KMOD_RULE,$(k))))

$(B)/lib/libhmirror.a: $(LIB_OBJS)
	@mkdir -p $(dir $@)
	rm -f $@ && ar rcs $@ $^

$(B)/lib/libhmirror.so: $(LIB_OBJS)
	@mkdir -p $(dir $@)
	$(CC) -shared -Wl,-soname,libhmirror.so.0 -o $@ $^ $(LDFLAGS) $(LIB_LIBS)

clean:
	rm -rf $(B)

-include $(shell find $(O) -name '*.d' 2>/dev/null)
