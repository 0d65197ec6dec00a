#!/usr/bin/env bash
# The library exports exactly the interposed libc names of preload/syms.h:
# nothing internal leaks (shim_* is hidden), nothing listed is missing.
set -eu
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
want=$(sed -n 's/^[[:space:]]*X(\([a-z_0-9]*\)).*/\1/p' "$ROOT/preload/syms.h" | sort)
have=$(nm -D --defined-only "$ROOT/liberdma_shim.so" | awk '{print $3}' | sort)
if [ "$want" != "$have" ]; then
	diff <(echo "$want") <(echo "$have") || true
	echo "exports differ from preload/syms.h"
	exit 1
fi
echo "RESULT: $(echo "$have" | wc -l) symbols exported, all from syms.h"
# Every symbol must be in the version script too (or it would be hidden).
for s in $want; do grep -qw "$s" "$ROOT/preload/liberdma_shim.map"; done
