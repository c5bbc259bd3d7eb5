# SPDX-License-Identifier: GPL-2.0
# The translator's toolchain as installed (Documentation/shaders.rst): the
# GLSL example built from an install and run under validation.
NATIVE_TESTS += selftests/toolchain/glsl-translator.sh
NATIVE_TESTS += selftests/toolchain/exports.sh
NATIVE_TESTS += selftests/toolchain/no-vulkan-headers.sh
