# SPDX-License-Identifier: GPL-2.0
# hmirror-link: a translated module linked against the lookup helper from
# the command line (hm_spirv_link_lookup(), validated with SPIRV-Tools' C
# API).  Documentation/shaders.rst.
BIN += $(B)/bin/hmirror-link
$(B)/bin/hmirror-link: $(O)/tools/hmirror-link/hmirror-link.o $$(TABLE_OBJS)
	@mkdir -p $(dir $@)
	$(CC) -o $@ $^ $(LDFLAGS) -lSPIRV-Tools -lstdc++ -lm
