#!/usr/bin/env bash
# A bounded libFuzzer run with ASan+UBSan: the machinery the fuzz tests in
# tests/unit/fuzz-*.sh share.
#   tests/lib/fuzz.sh NAME SECS MAX_LEN CORPUS WHAT CLAIM -- CLANG_ARGS...
# builds build/tests/fuzz/NAME from the clang arguments (sources and
# flags), runs it for SECS seconds on a scratch copy of CORPUS (a
# directory; may be missing) and fails on any crash or sanitizer report
# (the target abort()s where its CLAIM does not hold), showing the log's
# tail; else one RESULT line naming WHAT was fuzzed and the CLAIM.
set -eu
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
[ $# -ge 7 ] && [ "$7" = -- ] || {
	echo "usage: $0 NAME SECS MAX_LEN CORPUS WHAT CLAIM -- CLANG_ARGS..." >&2
	exit 64
}
name=$1 secs=$2 maxlen=$3 corpus=$4 what=$5 claim=$6
shift 7
bin=$ROOT/build/tests/fuzz/$name
mkdir -p "$(dirname "$bin")"
clang -g -O1 -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined \
	-o "$bin" "$@"
work=$(mktemp -d)
trap 'rm -rf "$work" "$work.log"' EXIT
if [ -d "$corpus" ] && [ -n "$(ls -A "$corpus")" ]; then
	cp "$corpus"/* "$work/"
fi
"$bin" -max_total_time="$secs" -max_len="$maxlen" -print_final_stats=1 "$work" >"$work.log" 2>&1 || {
	tail -40 "$work.log"
	exit 1
}
runs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$work.log")
echo "RESULT: fuzzed $what for ${secs}s: $runs inputs, no crash, $claim"
