#!/usr/bin/env bash
# test/lint.sh BUILD_DIR — the "lint" suite of test/run.sh: the four parts of
# `make lint` (clang-format, cppcheck, clang-tidy over every C file; and
# the scripts through shellcheck), one test each, then "N passed, N failed".
# A missing tool is a skip, and a failure under CI=true (hack/install-deps.sh
# installs them all).
set -u
top=$(cd "$(dirname "$0")/.." && pwd)
build=${1:-$top/build}
pass=0 fail=0 skip=0

part() { # name tool make-target
	local name=$1 tool=$2 target=$3
	if ! command -v "$tool" >/dev/null 2>&1; then
		echo "lint: $name: $tool not installed (hack/install-deps.sh)"
		skip=$((skip + 1))
		return
	fi
	if make --no-print-directory -C "$top" BUILD="$build" -j"$(nproc 2>/dev/null || echo 2)" "$target"; then
		echo "lint: $name: ok"
		pass=$((pass + 1))
	else
		echo "lint: $name: FAILED (make $target)"
		fail=$((fail + 1))
	fi
}

part clang-format clang-format fmt-check
part cppcheck cppcheck lint-cppcheck
part clang-tidy clang-tidy lint-tidy
part shellcheck shellcheck lint-sh

echo "lint: $pass passed, $fail failed, $skip skipped"
[ "$fail" -eq 0 ]
