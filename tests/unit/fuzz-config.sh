#!/usr/bin/env bash
# A bounded libFuzzer run on the ERDMA_SHIM_* parser with ASan+UBSan
# (ERDMA_FUZZ_SECONDS, default 20; `make fuzz` runs longer).  Fails on any
# crash, sanitizer report, or a reported line that isn't one clean line.
set -eu
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
exec "$ROOT/tests/lib/fuzz.sh" fuzz_config "${ERDMA_FUZZ_SECONDS:-20}" 512 \
	"$ROOT/tests/fuzz/corpus" "the config parser" "every report one clean line" -- \
	-I"$ROOT/preload/base" "$ROOT/tests/fuzz/fuzz_config.c" "$ROOT/preload/base/config.c"
