# SPDX-License-Identifier: GPL-2.0
# make check-install: the Debian packages (debian/) built, checked with
# lintian, installed with apt in a Debian 12 VM with systemd and used there
# as a user would (tools/pkg/check-install.sh, Documentation/testing.rst).
# CHECK_INSTALL_ARGS="--break udev" or "--break unit": the negative controls.
.PHONY: check-install
CHECK_INSTALL_ARGS ?=
check-install: | $(DEPS)
	tools/pkg/check-install.sh $(CHECK_INSTALL_ARGS)
