#!/usr/bin/env bash
# Every C file of ours is as clang-format (.clang-format) would write it:
# `make format-check`, in make test's unit phase.  `make format` fixes it.
set -eu
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
command -v clang-format >/dev/null || {
	echo "clang-format not found (make test-deps installs it)"
	exit 1
}
if ! out=$(make -s -C "$ROOT" --no-print-directory format-check 2>&1); then
	printf '%s\n' "$out" | grep -E '^[^ ].*: (warning|error):' | head -n 20
	echo "not formatted: $(printf '%s\n' "$out" | grep -cE ': (warning|error):') places (make format fixes them)"
	exit 1
fi
echo "RESULT: every C file is clang-format clean"
