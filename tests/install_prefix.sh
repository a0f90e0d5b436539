# SPDX-License-Identifier: MIT
# Sourced by the tests that link a consumer against an installed libstoker (test_install.sh,
# test_static_link.sh): the shared skips, a temporary directory $T removed at exit, fail(), and
# `cmake --install "$BUILD_DIR"` into $T/prefix. Usage: . install_prefix.sh TAG
[ -n "${BUILD_DIR:-}" ] && [ -d "$BUILD_DIR" ] || { echo "skip: BUILD_DIR not set"; exit 77; }
if [ -n "${STOKER_SANITIZE:-}" ]; then echo "skip: sanitizer build (the consumer would need the runtime)"; exit 77; fi
command -v pkg-config >/dev/null || { echo "skip: no pkg-config"; exit 77; }
CC=${CC:-cc}
command -v "$CC" >/dev/null || { echo "skip: no C compiler"; exit 77; }
T=$(mktemp -d "${TMPDIR:-/tmp}/stk-$1.XXXXXX")
trap 'rm -rf "$T"' EXIT
fail() { echo "FAIL: $*"; exit 1; }

cmake --install "$BUILD_DIR" --prefix "$T/prefix" >"$T/install.log" 2>&1 || { cat "$T/install.log"; fail "cmake --install"; }
