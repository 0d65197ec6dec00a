#!/usr/bin/env bash
# The library's rooms only look down (docs/design.md "Layout"): preload/base/ uses
# nothing above it, rsocket_glue/ uses the base only, the socket object
# (every preload/*.c that is not one of the exported families listed in
# FAMILIES below: sock.c, kind.c, sockfd.c, watch.c, settle.c, stats.c...)
# the base and the glue only, and every step of the start-up list
# (preload/base/startup.h) is registered exactly once.  Read
# from the built objects (nm): a symbol an object needs that a room above
# it defines is an arrow that runs back up.
set -eu
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
B=$ROOT/build
for d in preload preload/base rsocket_glue; do
	ls "$B/$d"/*.o >/dev/null 2>&1 || {
		echo "no objects in $B/$d: build first (make)"
		exit 1
	}
done
defs() { # the symbols the objects define
	nm --defined-only "$@" | awk 'NF == 3 && $2 ~ /[TDBRtdbr]/ { print $3 }' | sort -u
}
undefs() { nm -u "$1" | awk '{ print $2 }' | sort -u; }
top=$(defs "$B"/preload/*.o)
glue=$(defs "$B"/rsocket_glue/*.o)
bad=0
check() { # OBJECT ROOM-NAME DEFINED-ABOVE
	local hits
	hits=$(comm -12 <(undefs "$1") <(sort -u <<<"$3"))
	if [ -n "$hits" ]; then
		echo "${1#"$B"/} ($2) uses a room above it: $(echo $hits)"
		bad=1
	fi
}
for o in "$B"/preload/base/*.o; do
	check "$o" base "$top"$'\n'"$glue"
done
for o in "$B"/rsocket_glue/*.o; do
	check "$o" rsocket_glue "$top"
done
# The exported families (and the files only they use): above the object.
FAMILIES="socket connect io sockopt poll epoll epfilter fork exec handover unseen cancel"
fam_objs=() obj_objs=()
for o in "$B"/preload/*.o; do
	n=$(basename "$o" .o)
	if [[ " $FAMILIES " == *" $n "* ]]; then
		fam_objs+=("$o")
	else
		obj_objs+=("$o")
	fi
done
famdefs=$(defs "${fam_objs[@]}")
for o in "${obj_objs[@]}"; do
	check "$o" "the socket object" "$famdefs"
done
want=$(grep -cE '^[[:space:]]*X\([A-Z]+\)' "$ROOT/preload/base/startup.h")
have=$(nm "$ROOT/liberdma_shim.so" | grep -c ' shim_startup_[A-Z]*$' || true)
if [ "$want" != "$have" ]; then
	echo "startup.h lists $want steps, the library registers $have (SHIM_STARTUP)"
	bad=1
fi
[ $bad = 0 ] || exit 1
echo "RESULT: base uses no room above it, rsocket_glue the base only, the socket object (${#obj_objs[@]} files) no family; $have start-up steps, each registered once"
