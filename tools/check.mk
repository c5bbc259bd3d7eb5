# SPDX-License-Identifier: GPL-2.0
# The test command's own test: tools/check.sh counts TAP results, crashes,
# time-outs and missing results as Documentation/testing.rst says.
NATIVE_TESTS += tools/check-selftest.sh
