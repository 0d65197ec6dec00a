#!/usr/bin/env bash
# A bounded libFuzzer run on erdma-shim stat's table reader
# (preload/cli/stat.c) with ASan+UBSan: forged tables -- any header and
# slot bytes, any length -- are checked and printed as text, JSON and
# Prometheus; fails on any crash, sanitizer report, or an output byte that
# is a control character (other than the newline) or not ASCII.
# ERDMA_FUZZ_STAT_SECONDS, default 10 (or ERDMA_FUZZ_SECONDS if shorter);
# `make fuzz` runs longer.
set -eu
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
secs=${ERDMA_FUZZ_STAT_SECONDS:-10}
if [ -n "${ERDMA_FUZZ_SECONDS:-}" ] && [ "$ERDMA_FUZZ_SECONDS" -lt "$secs" ]; then
	secs=$ERDMA_FUZZ_SECONDS
fi
exec "$ROOT/tests/lib/fuzz.sh" fuzz_stat "$secs" 4096 \
	"$ROOT/tests/fuzz/corpus-stat" "the stat table reader" "every output byte printable ASCII or a newline" -- \
	-Wno-gnu-variable-sized-type-not-at-end -I"$ROOT/preload" -I"$ROOT/preload/cli" "$ROOT/tests/fuzz/fuzz_stat.c" "$ROOT/preload/cli/stat.c"
