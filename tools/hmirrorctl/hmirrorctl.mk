# SPDX-License-Identifier: GPL-2.0
# hmirrorctl: status, stats (module over generic netlink, daemon and engines
# over the daemon's socket), top.  Documentation/daemon.rst.
BIN += $(B)/bin/hmirrorctl
$(O)/tools/hmirrorctl/hmirrorctl.o: CFLAGS += -I.
$(B)/bin/hmirrorctl: $(O)/tools/hmirrorctl/hmirrorctl.o $(O)/daemon/netlink.o $(CLIENT_OBJS) \
		$$(sort $$(WATCH_OBJS))
	@mkdir -p $(dir $@)
	$(CC) -o $@ $(O)/tools/hmirrorctl/hmirrorctl.o $(O)/daemon/netlink.o \
		$(CLIENT_OBJS) $(sort $(WATCH_OBJS)) $(LDFLAGS) -lnl-genl-3 -lnl-3 $(WATCH_LIBS)
