#!/usr/bin/env bash
# The library exports exactly the interposed libc names of preload/base/syms.h,
# and the librdmacm ones rsocket_glue interposes on librdmacm's own calls
# (GLUE_EXPORTS): nothing internal leaks (shim_* is hidden), nothing listed
# is missing.
set -eu
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
GLUE_EXPORTS="ibv_create_comp_channel ibv_destroy_comp_channel ibv_get_cq_event pthread_create rdma_accept rdma_connect rdma_reject" # rsocket_glue/rsock.c, limits.c, threads.c
want=$({
	sed -n 's/^[[:space:]]*X(\([a-z_0-9]*\)).*/\1/p' "$ROOT/preload/base/syms.h"
	printf '%s\n' $GLUE_EXPORTS
} | sort)
have=$(nm -D --defined-only "$ROOT/liberdma_shim.so" | awk '{print $3}' | sort)
if [ "$want" != "$have" ]; then
	diff <(echo "$want") <(echo "$have") || true
	echo "exports differ from preload/base/syms.h"
	exit 1
fi
echo "RESULT: $(echo "$have" | wc -l) symbols exported, all from syms.h and GLUE_EXPORTS"
# Every symbol must be in the version script too (or it would be hidden).
for s in $want; do grep -qw "$s" "$ROOT/preload/liberdma_shim.map"; done
