# SPDX-License-Identifier: GPL-2.0
#
# hmirror: one build for the module, the library, the daemon and the tools.
#
#   make            build everything (installs missing Debian packages once)
#   make demo       the main job (see README.md)
#   make check      every test; last line "N passed, N failed, N skipped"
#   make install    module, udev rule, library, headers, daemon, tools
#   make module     hmirror.ko for each KDIR (build/kmod/KVER/hmirror.ko)
#
# Each part adds itself through a fragment, included below:
#   lib/*.mk lib/*/*.mk daemon/*.mk tools/*.mk tools/*/*.mk selftests/*/*.mk
# A fragment appends to these variables:
#   BIN           programs, installed         (build/bin/...)
#   LIB_OBJS      objects of libhmirror        (build/obj/...)
#   LIB_LIBS      libraries libhmirror.so needs (-lfoo)
#   NATIVE_TESTS  test programs run natively by make check
#   VM_TESTS      test programs run inside the VM, on each test kernel
#   SHARE         generated data               (build/share/hmirror/...)
#   HMIRROR_BENCH_OBJS, HMIRROR_BENCH_LIBS   parts of build/bin/hmirror-bench
#   INSTALL_TARGETS  extra (phony) targets "make install" runs, for files
#                 beyond BIN/library/headers (use $(DESTDIR)$(PREFIX) etc.)
# Prerequisites are expanded a second time (.SECONDEXPANSION), so a rule may
# name $$(VAR) to see what fragments included after it append to VAR.

.DEFAULT_GOAL := all
.SECONDEXPANSION:
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
LIB_LIBS :=
NATIVE_TESTS :=
VM_TESTS :=
SHARE :=
HMIRROR_BENCH_OBJS :=
HMIRROR_BENCH_LIBS :=
INSTALL_TARGETS :=

# Debian packages and the test kernels, once per tree (tools/deps.sh
# lists them; the kernels are unpacked under build/, never installed).
# The included $(B)/.deps.mk makes make run it before it reads anything
# else and then start again, so that what is globbed below (kernels,
# headers, linux-source) is seen on a fresh machine too.  Included
# without "-": when tools/deps.sh fails, make stops there.
DEPS := $(B)/.deps-ok
$(DEPS): tools/deps.sh tools/buildroot.sh tools/vm/kernels
	HMIRROR_DEPS_STAMP=$@ ./tools/deps.sh
$(B)/.deps.mk: $(DEPS)
	@echo '# written once tools/deps.sh has run' > $@
ifeq ($(filter clean,$(MAKECMDGOALS)),)
include $(B)/.deps.mk
endif

# The kselftest harness and checkpatch, taken from linux-source-6.1 at
# build time; nothing of the kernel tree lives in this repository.
KSRC_TAR ?= $(firstword $(wildcard /usr/src/linux-source-6.1.tar.*))
KSFT := $(B)/ksft
$(KSFT)/.stamp: tools/extract-ksrc.sh | $(DEPS)
	tools/extract-ksrc.sh "$(KSRC_TAR)" $(KSFT)
	touch $@

$(O)/%.o: %.c | $(DEPS) $(KSFT)/.stamp
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -c -o $@ $<

.PHONY: all module lib demo check check-build install install-dkms clean

# "make demo" is defined by the demo's fragment (tools/demo/demo.mk).

-include $(wildcard lib/*.mk lib/*/*.mk daemon/*.mk tools/*.mk tools/*/*.mk selftests/*/*.mk)

# ---- kernel module ------------------------------------------------------
# KDIR: the running kernel's build tree if it has one, else every installed
# Debian linux-headers-*-amd64 tree.  The test kernels (tools/vm/kernels,
# unpacked under build/kernels and found by tools/vm/kernel.sh) are always
# built, since make check boots them.
TEST_KERNELS ?= $(shell awk '!/^[[:space:]]*(\#|$$)/ {print $$1}' tools/vm/kernels)
KDIR ?= $(or $(wildcard /lib/modules/$(shell uname -r)/build/Makefile),)
KDIRS ?= $(if $(KDIR),$(patsubst %/Makefile,%,$(KDIR)),$(sort $(wildcard /usr/src/linux-headers-*-amd64)))
TEST_KDIRS := $(shell tools/vm/kernel.sh $(TEST_KERNELS) 2>/dev/null | awk '{print $$4}')
KVER = $(strip $(if $(filter /lib/modules/%/build,$(1)),$(patsubst /lib/modules/%/build,%,$(1)),\
	$(if $(filter linux-headers-%,$(notdir $(1))),$(patsubst linux-headers-%,%,$(notdir $(1))),\
	$(shell cat $(1)/include/config/kernel.release 2>/dev/null))))
KMOD_SRCS := $(wildcard Kbuild kmod/*.c kmod/*.h kmod/*.sh uapi/linux/*.h) tools/build-kmod.sh
kmod_ko = $(foreach k,$(1),$(B)/kmod/$(call KVER,$(k))/hmirror.ko)

# Until Kbuild exists there is no module to build (and nothing fails).
ifneq ($(wildcard Kbuild),)
MODULES := $(call kmod_ko,$(KDIRS))
TEST_MODULES := $(call kmod_ko,$(TEST_KDIRS))
endif
module: $(MODULES)

define KMOD_RULE
$(B)/kmod/$(call KVER,$(1))/hmirror.ko: $(KMOD_SRCS) | $(DEPS)
	@mkdir -p $(B)/kmod/$(call KVER,$(1))
	tools/build-kmod.sh $(1) $(B)/kmod/$(call KVER,$(1))
endef
# one rule per kernel version, whichever way its tree was named
KMOD_SEEN :=
$(foreach k,$(KDIRS) $(TEST_KDIRS),$(if $(filter $(call KVER,$(k)),$(KMOD_SEEN)),,\
	$(eval KMOD_SEEN += $(call KVER,$(k)))$(eval $(call KMOD_RULE,$(k)))))

# ---- libhmirror -------------------------------------------------------------
all: module $(BIN) $(SHARE) $(B)/lib/libhmirror.a $(B)/lib/libhmirror.so
lib: $(B)/lib/libhmirror.a $(B)/lib/libhmirror.so

$(B)/lib/libhmirror.a: $$(LIB_OBJS)
	@mkdir -p $(dir $@)
	rm -f $@ && ar rcs $@ $^

$(B)/lib/libhmirror.so: $$(LIB_OBJS)
	@mkdir -p $(dir $@)
	$(CC) -shared -Wl,-soname,libhmirror.so.0 -o $@ $^ $(LDFLAGS) $(LIB_LIBS)

# ---- tests --------------------------------------------------------------------
# Native tests, one VM boot per test kernel for VM_TESTS, static checks;
# see tools/check.sh and Documentation/testing.rst.
# Everything is built first with make -k: a part that does not build is
# one failed test ("build") and its programs count as failed, but the rest
# still runs and the summary line always comes last.
check:
	@$(MAKE) --no-print-directory -k check-build; rc=$$?; \
	NATIVE_TESTS="$(NATIVE_TESTS)" VM_TESTS="$(VM_TESTS)" CHECK_BUILD_RC=$$rc \
		CHECK_KERNELS="$(TEST_KERNELS)" tools/check.sh

check-build: all $(NATIVE_TESTS) $(VM_TESTS) $(TEST_MODULES) $(KSFT)/.stamp
	@:

# ---- install ------------------------------------------------------------------
# make install [DESTDIR=...] [PREFIX=/usr/local]
PREFIX ?= /usr/local
BINDIR ?= $(PREFIX)/bin
LIBDIR ?= $(PREFIX)/lib
INCLUDEDIR ?= $(PREFIX)/include
PKGCONFIGDIR ?= $(LIBDIR)/pkgconfig
RUNNING_KVER := $(shell uname -r)
RUNNING_KDIR := $(wildcard /lib/modules/$(RUNNING_KVER)/build/Makefile)
VERSION := $(shell sed -n 's/^PACKAGE_VERSION="\(.*\)"/\1/p' dkms.conf 2>/dev/null)

# The module is installed for the running kernel when it has a build tree
# (then KDIR defaults to it and "all" built the module for it).
install: all $$(INSTALL_TARGETS)
ifneq ($(and $(RUNNING_KDIR),$(wildcard Kbuild)),)
	$(MAKE) -C /lib/modules/$(RUNNING_KVER)/build M=$(CURDIR)/$(B)/kmod/$(RUNNING_KVER)/src \
		$(if $(DESTDIR),INSTALL_MOD_PATH=$(DESTDIR)) DEPMOD=true modules_install
	$(if $(DESTDIR),@echo "install: run depmod $(RUNNING_KVER) on the target",depmod $(RUNNING_KVER))
else
	@echo "install: no build tree for the running kernel $(RUNNING_KVER): module not installed"
endif
	tools/udev/install.sh $(DESTDIR)
	install -d $(DESTDIR)$(BINDIR) $(DESTDIR)$(LIBDIR) \
		$(DESTDIR)$(PKGCONFIGDIR) $(DESTDIR)$(INCLUDEDIR)/hmirror $(DESTDIR)$(INCLUDEDIR)/linux
	install -m 644 $(B)/lib/libhmirror.a $(DESTDIR)$(LIBDIR)/
	install -m 755 $(B)/lib/libhmirror.so $(DESTDIR)$(LIBDIR)/libhmirror.so.0
	ln -sf libhmirror.so.0 $(DESTDIR)$(LIBDIR)/libhmirror.so
	sed -e 's|@PREFIX@|$(PREFIX)|g' -e 's|@LIBDIR@|$(LIBDIR)|g' \
	    -e 's|@INCLUDEDIR@|$(INCLUDEDIR)|g' -e 's|@VERSION@|$(VERSION)|g' \
	    -e 's|@LIBS_PRIVATE@|$(sort $(LIB_LIBS))|g' tools/hmirror.pc.in \
	    > $(DESTDIR)$(PKGCONFIGDIR)/hmirror.pc
	$(if $(wildcard lib/include/hmirror/*.h),install -m 644 $(wildcard lib/include/hmirror/*.h) $(DESTDIR)$(INCLUDEDIR)/hmirror/)
	$(if $(wildcard uapi/linux/hmirror*.h),install -m 644 $(wildcard uapi/linux/hmirror*.h) $(DESTDIR)$(INCLUDEDIR)/linux/)
	$(if $(strip $(BIN)),install -m 755 $(BIN) $(DESTDIR)$(BINDIR)/)

# DKMS: the module's sources and dkms.conf under /usr/src/hmirror-VERSION;
# then "dkms install hmirror/VERSION" builds it for each kernel (and its
# POST_INSTALL runs tools/udev/install.sh again).
install-dkms:
	install -d $(DESTDIR)/usr/src/hmirror-$(VERSION)/tools/udev
	cp -r Kbuild kmod uapi dkms.conf $(DESTDIR)/usr/src/hmirror-$(VERSION)/
	install -m 755 tools/build-kmod.sh $(DESTDIR)/usr/src/hmirror-$(VERSION)/tools/
	install -m 644 tools/udev/60-hmirror.rules tools/udev/hmirror.sysusers \
		$(DESTDIR)/usr/src/hmirror-$(VERSION)/tools/udev/
	install -m 755 tools/udev/install.sh $(DESTDIR)/usr/src/hmirror-$(VERSION)/tools/udev/
	tools/udev/install.sh $(DESTDIR)
	$(if $(DESTDIR),,dkms add hmirror/$(VERSION))

clean:
	rm -rf $(B)

-include $(shell find $(O) -name '*.d' 2>/dev/null)
