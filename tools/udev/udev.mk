# SPDX-License-Identifier: GPL-2.0
# /dev/hmirror 0660 to group "hmirror" through every install path
NATIVE_TESTS += tools/udev/install-test.sh
