# SPDX-License-Identifier: GPL-2.0
# hmirrord (daemon/), the client library (lib/client.c), hmirrorctl, the
# daemon's tests and the demo's install pieces.  Documentation/daemon.rst.
#
# The daemon hosts the engine when lib/engine provides it (ENGINE_OBJS) and
# imports spaces when the watch library does (WATCH_OBJS); without them it
# still serves (validation, handles, isolation) and answers dispatches with
# -ENOSYS.  Force either off with HMIRRORD_ENGINE=0 / HMIRRORD_WATCH=0.

HMIRRORD_ENGINE ?= $(if $(and $(ENGINE_OBJS),$(wildcard lib/include/hmirror/engine.h)),1,0)
HMIRRORD_WATCH ?= $(if $(and $(WATCH_OBJS),$(wildcard lib/include/hmirror/watch.h)),1,0)

CLIENT_OBJS := $(O)/lib/client.o
LIB_OBJS += $(CLIENT_OBJS)

DAEMON_OBJS := $(O)/daemon/main.o $(O)/daemon/loop.o $(O)/daemon/client.o \
	$(O)/daemon/protocol.o $(O)/daemon/dispatch.o $(O)/daemon/validate.o \
	$(O)/daemon/device.o $(O)/daemon/netlink.o $(O)/daemon/isolate.o
# isolate.c compares client helpers with lib/lookup_spirv.c's own
DAEMON_DEP_OBJS := $(O)/lib/lookup_spirv.o $(if $(filter 1,$(HMIRRORD_ENGINE)),$(ENGINE_OBJS) $(TABLE_OBJS) $(VKCTX_OBJS)) \
	$(if $(filter 1,$(HMIRRORD_WATCH)),$(WATCH_OBJS))
DAEMON_LIBS := -luring -lnl-genl-3 -lnl-3 -lsystemd -ldrm -lvulkan \
	-lSPIRV-Tools -lstdc++ -lm $(WATCH_LIBS) $(ENGINE_LIBS)

# The choice lives in a generated header, rewritten only when it changes,
# so that objects are rebuilt when the engine or the watch library appear.
HMIRRORD_CONFIG := $(B)/include/hmirrord_config.h
.PHONY: hmirrord-config-force
$(HMIRRORD_CONFIG): hmirrord-config-force
	@mkdir -p $(dir $@)
	@printf '#define HMIRRORD_HAVE_ENGINE %s\n#define HMIRRORD_HAVE_WATCH %s\n#define HMIRROR_CLIENT_HAVE_WATCH %s\n' \
		$(HMIRRORD_ENGINE) $(HMIRRORD_WATCH) $(HMIRRORD_WATCH) > $@.tmp
	@if cmp -s $@.tmp $@; then rm -f $@.tmp; else mv $@.tmp $@; fi
$(DAEMON_OBJS) $(CLIENT_OBJS): $(HMIRRORD_CONFIG)
$(DAEMON_OBJS): CFLAGS += -I/usr/include/libnl3 -I/usr/include/libdrm -include $(HMIRRORD_CONFIG)
$(CLIENT_OBJS): CFLAGS += -include $(HMIRRORD_CONFIG)

BIN += $(B)/bin/hmirrord
$(B)/bin/hmirrord: $(DAEMON_OBJS) $$(sort $$(DAEMON_DEP_OBJS))
	@mkdir -p $(dir $@)
	$(CC) -o $@ $(DAEMON_OBJS) $(sort $(DAEMON_DEP_OBJS)) $(LDFLAGS) $(DAEMON_LIBS)

# ---- install: the unit, the socket, the docs (the binaries are in BIN) --------
SYSTEMDUNITDIR ?= $(PREFIX)/lib/systemd/system
SYSUSERSDIR ?= $(PREFIX)/lib/sysusers.d
.PHONY: install-daemon
install-userspace: install-daemon
install-daemon: daemon/systemd/hmirrord.service.in daemon/systemd/hmirrord.socket
	install -d $(DESTDIR)$(SYSTEMDUNITDIR) $(DESTDIR)$(SYSUSERSDIR)
	sed -e 's|@SBINDIR@|$(SBINDIR)|g' -e 's|@DOCDIR@|$(DOCDIR)|g' daemon/systemd/hmirrord.service.in \
		> $(DESTDIR)$(SYSTEMDUNITDIR)/hmirrord.service
	chmod 644 $(DESTDIR)$(SYSTEMDUNITDIR)/hmirrord.service
	install -m 644 daemon/systemd/hmirrord.socket $(DESTDIR)$(SYSTEMDUNITDIR)/
	install -m 644 daemon/systemd/hmirror.sysusers $(DESTDIR)$(SYSUSERSDIR)/hmirror.conf

# ---- tests: the daemon as a real process over its real socket ---------------
GLSLANG ?= glslangValidator
$(B)/include/daemon/%.spv.h: selftests/daemon/%.comp | $(DEPS)
	@mkdir -p $(dir $@)
	$(GLSLANG) -V --target-env vulkan1.2 --quiet --vn hm_test_$*_spv -o $@ $<

$(O)/selftests/daemon/daemon_test.o: $(B)/include/daemon/empty.spv.h $(B)/include/daemon/shared.spv.h \
	$(B)/include/daemon/spin.spv.h $(B)/include/daemon/heavy.spv.h $(HMIRRORD_CONFIG)
$(O)/selftests/daemon/daemon_test.o: CFLAGS += -include $(HMIRRORD_CONFIG) -Wno-sign-compare
$(B)/bin/test-daemon: $(O)/selftests/daemon/daemon_test.o $(CLIENT_OBJS) \
		$(O)/lib/lookup_spirv.o $$(sort $$(WATCH_OBJS)) | $(B)/bin/hmirrord
	@mkdir -p $(dir $@)
	$(CC) -o $@ $(O)/selftests/daemon/daemon_test.o $(CLIENT_OBJS) \
		$(O)/lib/lookup_spirv.o $(sort $(WATCH_OBJS)) $(LDFLAGS) $(WATCH_LIBS)
NATIVE_TESTS += $(B)/bin/test-daemon

# ---- hmirror-bench dispatch: through the daemon vs in-process ---------------
$(O)/tools/bench/dispatch.o: $(B)/include/daemon/empty.spv.h
HMIRROR_BENCH_OBJS += $(O)/tools/bench/dispatch.o $(CLIENT_OBJS) $(ENGINE_OBJS) \
	$(TABLE_OBJS) $(VKCTX_OBJS) $(WATCH_OBJS)
HMIRROR_BENCH_LIBS += -lvulkan -lm
