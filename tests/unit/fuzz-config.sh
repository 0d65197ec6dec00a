#!/usr/bin/env bash
# A bounded libFuzzer run on the ERDMA_SHIM_* parser with ASan+UBSan
# (ERDMA_FUZZ_SECONDS, default 20; `make fuzz` runs longer).  Fails on any
# crash, sanitizer report, or a reported line that isn't one clean line.
set -eu
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
secs=${ERDMA_FUZZ_SECONDS:-20}
bin=$ROOT/build/tests/fuzz/fuzz_config
mkdir -p "$(dirname "$bin")"
clang -g -O1 -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined \
	-I"$ROOT/preload/base" -o "$bin" "$ROOT/tests/fuzz/fuzz_config.c" "$ROOT/preload/base/config.c"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cp "$ROOT"/tests/fuzz/corpus/* "$work/"
"$bin" -max_total_time="$secs" -max_len=512 -print_final_stats=1 "$work" >"$work.log" 2>&1 || {
	tail -40 "$work.log"
	exit 1
}
runs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$work.log")
echo "RESULT: fuzzed the config parser for ${secs}s: $runs inputs, no crash, every report one clean line"
