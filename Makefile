# SPDX-License-Identifier: GPL-2.0
#
# hmirror: one build for the module, the library, the daemon and the tools.
#
#   make            build everything (installs missing Debian packages once)
#   make demo       the main job (see README.md)
#   make check      every test; last line "N passed, N failed, N skipped"
#   make install    module, udev rule, library, headers, daemon, tools, docs
#   make userspace  everything but the module (what debian/rules builds)
#   make check-install  the Debian packages, installed and used in a VM
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
# HMIRROR_NO_DEPS=1 (a package build): the packager installed what is
# needed (debian/control's Build-Depends); nothing is installed here.
ifeq ($(HMIRROR_NO_DEPS),1)
DEPS :=
else
DEPS := $(B)/.deps-ok
$(DEPS): tools/deps.sh tools/buildroot.sh tools/vm/kernels
	HMIRROR_DEPS_STAMP=$@ ./tools/deps.sh
$(B)/.deps.mk: $(DEPS)
	@echo '# written once tools/deps.sh has run' > $@
ifeq ($(filter clean,$(MAKECMDGOALS)),)
include $(B)/.deps.mk
endif
endif

# The kselftest harness and checkpatch, taken from linux-source-6.1 at
# build time; nothing of the kernel tree lives in this repository.
KSRC_TAR ?= $(firstword $(wildcard /usr/src/linux-source-6.1.tar.*))
KSFT := $(B)/ksft
$(KSFT)/.stamp: tools/extract-ksrc.sh | $(DEPS)
	tools/extract-ksrc.sh "$(KSRC_TAR)" $(KSFT)
	touch $@

# (the harness is needed by the tests only; a package build has no kernel
# source and builds no test)
$(O)/%.o: %.c | $(DEPS) $(if $(filter 1,$(HMIRROR_NO_DEPS)),,$(KSFT)/.stamp)
	@mkdir -p $(dir $@)
	$(CC) $(CPPFLAGS) $(CFLAGS) -c -o $@ $<

.PHONY: all userspace module lib demo check check-build install install-userspace \
	install-module install-dkms clean

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
# The shared library: soname libhmirror.so.0, every public symbol at
# version HMIRROR_0 (lib/libhmirror.map lists them; nothing else is
# exported).  A symbol's signature never changes under its version; an
# incompatible change bumps the soname.
all: module userspace
userspace: $$(BIN) $$(SHARE) $(B)/lib/libhmirror.a $(B)/lib/libhmirror.so
lib: $(B)/lib/libhmirror.a $(B)/lib/libhmirror.so
LIB_SONAME := libhmirror.so.0

$(B)/lib/libhmirror.a: $$(LIB_OBJS)
	@mkdir -p $(dir $@)
	rm -f $@ && ar rcs $@ $^

$(B)/lib/libhmirror.so: $$(LIB_OBJS) lib/libhmirror.map
	@mkdir -p $(dir $@)
	$(CC) -shared -Wl,-soname,$(LIB_SONAME) -Wl,--version-script=lib/libhmirror.map \
		-Wl,--no-undefined -o $@ $(LIB_OBJS) $(LDFLAGS) $(LIB_LIBS)

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
# make install [DESTDIR=...] [PREFIX=/usr/local]: install-userspace (what the
# Debian packages hold, debian/rules calls it) and install-module.
PREFIX ?= /usr/local
BINDIR ?= $(PREFIX)/bin
SBINDIR ?= $(PREFIX)/sbin
LIBDIR ?= $(PREFIX)/lib
INCLUDEDIR ?= $(PREFIX)/include
DATADIR ?= $(PREFIX)/share
MANDIR ?= $(DATADIR)/man
DOCDIR ?= $(DATADIR)/doc/hmirror
PKGCONFIGDIR ?= $(LIBDIR)/pkgconfig
MODPROBEDIR ?= /etc/modprobe.d
MODULESLOADDIR ?= /etc/modules-load.d
RUNNING_KVER := $(shell uname -r)
RUNNING_KDIR := $(wildcard /lib/modules/$(RUNNING_KVER)/build/Makefile)
VERSION := $(shell sed -n 's/^PACKAGE_VERSION="\(.*\)"/\1/p' dkms.conf 2>/dev/null)
# programs for the administrator (SBIN), the rest go to BINDIR
SBIN := $(filter $(B)/bin/hmirrord,$(BIN))
# programs installed at all (benchmarks and tests stay in build/)
INSTALL_BIN := $(filter-out $(SBIN) $(B)/bin/hmirror-bench $(B)/bin/hmirror-bench-%,$(BIN))

# the group the udev rule and the socket name, and the daemon's user
install: install-userspace install-module
	$(if $(DESTDIR),@echo "install: run systemd-sysusers on the target",\
		systemd-sysusers $(SYSUSERSDIR)/hmirror.conf)

# The module is installed for the running kernel when it has a build tree
# (then KDIR defaults to it and "all" built the module for it).
install-module: module
ifneq ($(and $(RUNNING_KDIR),$(wildcard Kbuild)),)
	$(MAKE) -C /lib/modules/$(RUNNING_KVER)/build M=$(CURDIR)/$(B)/kmod/$(RUNNING_KVER)/src \
		$(if $(DESTDIR),INSTALL_MOD_PATH=$(DESTDIR)) DEPMOD=true modules_install
	$(if $(DESTDIR),@echo "install: run depmod $(RUNNING_KVER) on the target",depmod $(RUNNING_KVER))
else
	@echo "install: no build tree for the running kernel $(RUNNING_KVER): module not installed"
endif
	tools/udev/install.sh $(DESTDIR)
	install -d $(DESTDIR)$(MODPROBEDIR) $(DESTDIR)$(MODULESLOADDIR)
	install -m 644 tools/udev/hmirror-modprobe.conf $(DESTDIR)$(MODPROBEDIR)/hmirror.conf
	install -m 644 tools/udev/hmirror-modules-load.conf $(DESTDIR)$(MODULESLOADDIR)/hmirror.conf

install-userspace: userspace $$(INSTALL_TARGETS)
	install -d $(DESTDIR)$(BINDIR) $(DESTDIR)$(SBINDIR) $(DESTDIR)$(LIBDIR) \
		$(DESTDIR)$(PKGCONFIGDIR) $(DESTDIR)$(INCLUDEDIR)/hmirror $(DESTDIR)$(INCLUDEDIR)/linux \
		$(DESTDIR)$(DATADIR)/hmirror $(DESTDIR)$(DOCDIR)
	install -m 644 $(B)/lib/libhmirror.a $(DESTDIR)$(LIBDIR)/
	install -m 644 $(B)/lib/libhmirror.so $(DESTDIR)$(LIBDIR)/$(LIB_SONAME).$(VERSION)
	ln -sf $(LIB_SONAME).$(VERSION) $(DESTDIR)$(LIBDIR)/$(LIB_SONAME)
	ln -sf $(LIB_SONAME) $(DESTDIR)$(LIBDIR)/libhmirror.so
	sed -e 's|@PREFIX@|$(PREFIX)|g' -e 's|@LIBDIR@|$(LIBDIR)|g' \
	    -e 's|@INCLUDEDIR@|$(INCLUDEDIR)|g' -e 's|@DATADIR@|$(DATADIR)|g' \
	    -e 's|@DOCDIR@|$(DOCDIR)|g' -e 's|@VERSION@|$(VERSION)|g' \
	    -e 's|@LIBS_PRIVATE@|$(filter-out -lvulkan,$(sort $(LIB_LIBS)))|g' tools/hmirror.pc.in \
	    > $(DESTDIR)$(PKGCONFIGDIR)/hmirror.pc
	install -m 644 lib/include/hmirror/*.h lib/include/hmirror/*.glsl $(DESTDIR)$(INCLUDEDIR)/hmirror/
	install -m 644 uapi/linux/hmirror*.h $(DESTDIR)$(INCLUDEDIR)/linux/
	install -m 644 $(SHARE) $(DESTDIR)$(DATADIR)/hmirror/
	$(if $(strip $(INSTALL_BIN)),install -m 755 $(INSTALL_BIN) $(DESTDIR)$(BINDIR)/)
	$(if $(strip $(SBIN)),install -m 755 $(SBIN) $(DESTDIR)$(SBINDIR)/)
	for s in 1 3 7 8; do \
		ls Documentation/man/*.$$s >/dev/null 2>&1 || continue; \
		install -d $(DESTDIR)$(MANDIR)/man$$s; \
		install -m 644 Documentation/man/*.$$s $(DESTDIR)$(MANDIR)/man$$s/; \
	done
	install -m 644 Documentation/*.rst $(DESTDIR)$(DOCDIR)/
	install -d $(DESTDIR)$(DOCDIR)/examples/glsl-translator $(DESTDIR)$(DOCDIR)/netlink/specs
	install -m 644 Documentation/netlink/specs/* $(DESTDIR)$(DOCDIR)/netlink/specs/
	install -m 644 Documentation/examples/glsl-translator/* $(DESTDIR)$(DOCDIR)/examples/glsl-translator/

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
