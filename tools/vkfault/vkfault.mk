# SPDX-License-Identifier: GPL-2.0
# VK_LAYER_HMIRROR_fault (tools/vkfault/vkfault.c): the fault-injection
# layer of the engine's tests.  Built next to the tests, never installed.
VKFAULT_DIR := $(B)/share/hmirror/vkfault
VKFAULT := $(VKFAULT_DIR)/libVkLayer_hmirror_fault.so $(VKFAULT_DIR)/VkLayer_hmirror_fault.json

$(VKFAULT_DIR)/libVkLayer_hmirror_fault.so: tools/vkfault/vkfault.c | $(DEPS)
	@mkdir -p $(dir $@)
	$(CC) -shared -fPIC -O2 -g -std=gnu11 -Wall -Wextra -Wno-unused-parameter \
		-fvisibility=hidden -pthread -o $@ $<
# the loader takes a library path relative to the manifest's directory
$(VKFAULT_DIR)/VkLayer_hmirror_fault.json: tools/vkfault/vkfault.json.in
	@mkdir -p $(dir $@)
	sed 's|@LIB@|./libVkLayer_hmirror_fault.so|' $< > $@

$(B)/bin/test-engine $(B)/bin/test-engine-vm $(B)/bin/test-vkctx $(B)/bin/test-import \
	$(B)/bin/test-daemon: | $(VKFAULT)
