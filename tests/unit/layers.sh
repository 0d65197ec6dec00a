#!/usr/bin/env bash
# The library's rooms only look down (README "Layout"): preload/base/ uses
# nothing above it, rsocket_glue/ uses the base only, the socket object
# (preload/sock.c) the base and the glue only, and every step of the
# start-up list (preload/base/startup.h) is registered exactly once.  Read
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
check "$B/preload/sock.o" "the socket object" "$(defs $(ls "$B"/preload/*.o | grep -v '/sock\.o$'))"
want=$(grep -cE '^[[:space:]]*X\([A-Z]+\)' "$ROOT/preload/base/startup.h")
have=$(nm "$ROOT/liberdma_shim.so" | grep -c ' shim_startup_[A-Z]*$' || true)
if [ "$want" != "$have" ]; then
	echo "startup.h lists $want steps, the library registers $have (SHIM_STARTUP)"
	bad=1
fi
[ $bad = 0 ] || exit 1
echo "RESULT: base uses no room above it, rsocket_glue the base only, the socket object base and glue only; $have start-up steps, each registered once"
