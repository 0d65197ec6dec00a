#!/usr/bin/env bash
# fd 2 reused behind the shim's back must never receive its log lines.
#
#  activated    socket activation with stderr closed: a parent passes a
#               listening socket as fd 3 to a re-executed child whose fd 2 is
#               closed from the start (as a service manager or inetd might).
#               The child accepts -- the connection gets fd 2 -- then opens
#               its first outgoing TCP socket, then answers on fd 2.
#  fclose-file  fclose(stderr) (glibc's internal close: no close() call the
#               shim could see), an output file opened next lands on fd 2,
#               then the program's first TCP socket; the file must hold
#               exactly what the program wrote.
#
# With ERDMA_SHIM_LOG=debug nothing but the program's own bytes may reach the
# socket or the file.  (The neighbouring cases, where the shim can see fd 2
# being closed or where socket() itself reuses fd 2, are in 60-fd-edge.sh.)
set -eu
. "$(dirname "$0")/lib.sh"

PROG=$PROGS/passthru_fds
[ -x "$PROG" ] || fail "$PROG not built (run make)"
bugs=0
for mode in activated fclose-file; do
	for m in plain shim; do
		rc=0
		: >"$TMP/$mode.$m.maps"
		ERDMA_SHIM_LOG=debug PASSTHRU_MAPS_OUT=$TMP/$mode.$m.maps run_mode "$m" 60 "$PROG" "$mode" \
			>"$TMP/$mode.$m.out" 2>"$TMP/$mode.$m.err" </dev/null || rc=$?
		echo "rc=$rc" >>"$TMP/$mode.$m.out"
	done
	if grep -q '^FAIL' "$TMP/$mode.plain.out"; then
		cat "$TMP/$mode.plain.out" >&2
		fail "$mode: fails without the shim: test broken on this host"
	fi
	[ -s "$TMP/$mode.shim.maps" ] || fail "$mode: liberdma_shim.so not in the shimmed process's maps"
	[ ! -s "$TMP/$mode.plain.maps" ] || fail "$mode: liberdma_shim.so mapped in the plain run"
	if cmp -s "$TMP/$mode.plain.out" "$TMP/$mode.shim.out"; then
		result "$mode: $(grep '^\[' "$TMP/$mode.shim.out" | tail -n1 | cut -c1-160)"
	else
		diff -u "$TMP/$mode.plain.out" "$TMP/$mode.shim.out" >&2 || true
		result "$mode: $(grep '^\[' "$TMP/$mode.shim.out" | tail -n1 | cut -c1-160) -- BUG"
		bugs=$((bugs + 1))
	fi
done
[ $bugs -eq 0 ] || fail "$bugs case(s): shim log text written into a socket/file that reused fd 2 (the shim watches fd 2 without checking it is open; accept/accept4 and non-socket fd creators do not drop the marker; see the report)"
