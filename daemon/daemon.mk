# SPDX-License-Identifier: GPL-2.0
# hmirrord (daemon/), the client library (lib/client.c), hmirrorctl, the
# daemon's tests and the demo's install pieces.  Documentation/daemon.rst.
#
# The daemon always hosts the engine (ENGINE_OBJS) and imports spaces with
# the watch library (WATCH_OBJS); a device without Vulkan still serves
# (validation, handles, isolation) and answers dispatches with -ENOSYS.

CLIENT_OBJS := $(O)/lib/client.o
LIB_OBJS += $(CLIENT_OBJS)

# layers, each calling only those below it (tools/kmod-graph.sh checks):
# main, protocol, engine_host, client, worker, validate, state, and the
# leaves loop, device, netlink, isolate, spirv (the parse isolate and validate read)
DAEMON_OBJS := $(O)/daemon/main.o $(O)/daemon/protocol.o $(O)/daemon/engine_host.o \
	$(O)/daemon/client.o $(O)/daemon/worker.o $(O)/daemon/validate.o \
	$(O)/daemon/state.o $(O)/daemon/loop.o $(O)/daemon/device.o \
	$(O)/daemon/netlink.o $(O)/daemon/isolate.o $(O)/daemon/spirv.o
# isolate.c compares client helpers with lib/lookup_spirv.c's own
DAEMON_DEP_OBJS := $(O)/lib/lookup_spirv.o $(ENGINE_OBJS) $(TABLE_OBJS) $(VKCTX_OBJS) \
	$(WATCH_OBJS)
DAEMON_LIBS := -luring -lnl-genl-3 -lnl-3 -lsystemd -ldrm -lvulkan \
	-lSPIRV-Tools -lstdc++ -lm $(WATCH_LIBS) $(ENGINE_LIBS)

$(DAEMON_OBJS): CFLAGS += -I/usr/include/libnl3 -I/usr/include/libdrm
# lib/client.c passes spaces to the daemon with the watch library's handoff
$(CLIENT_OBJS): CFLAGS += -DHMIRROR_CLIENT_HAVE_WATCH=1

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
	$(B)/include/daemon/spin.spv.h $(B)/include/daemon/heavy.spv.h
$(O)/selftests/daemon/daemon_test.o: CFLAGS += -Wno-sign-compare
$(B)/bin/test-daemon: $(O)/selftests/daemon/daemon_test.o $(CLIENT_OBJS) \
		$(O)/lib/lookup_spirv.o $$(sort $$(WATCH_OBJS)) | $(B)/bin/hmirrord \
		$(B)/lib/hmirror-test-semfd-shim.so
	@mkdir -p $(dir $@)
	$(CC) -o $@ $(O)/selftests/daemon/daemon_test.o $(CLIENT_OBJS) \
		$(O)/lib/lookup_spirv.o $(sort $(WATCH_OBJS)) $(LDFLAGS) $(WATCH_LIBS) -lvulkan
# timeline_value_only_after_copy_back's stand-in for a driver's semaphore
# export, preloaded into hmirrord where the device has none (semfd_shim.c)
$(B)/lib/hmirror-test-semfd-shim.so: selftests/daemon/semfd_shim.c | $(DEPS)
	@mkdir -p $(dir $@)
	$(CC) $(filter-out -MMD -MP,$(CFLAGS)) -shared -o $@ $< -ldl
NATIVE_TESTS += $(B)/bin/test-daemon
NATIVE_TESTS += selftests/daemon/estats-complete.sh

# ---- hmirror-bench dispatch: through the daemon vs in-process ---------------
$(O)/tools/bench/dispatch.o: $(B)/include/daemon/empty.spv.h
HMIRROR_BENCH_OBJS += $(O)/tools/bench/dispatch.o $(CLIENT_OBJS) $(ENGINE_OBJS) \
	$(TABLE_OBJS) $(VKCTX_OBJS) $(WATCH_OBJS)
HMIRROR_BENCH_LIBS += -lvulkan -lm
