#!/usr/bin/env bash
# Python grpcio (Debian's python3-grpcio, C core) over loopback: unary calls
# up to 4 MiB, server-, client- and bidi-streaming, status codes, several
# channels, IPv4 and IPv6.  Server and client both without the shim, then both
# with it; the summaries, byte counts and exit codes must be identical.
set -eu
. "$(dirname "$0")/lib.sh"

"$PY" -c 'import grpc' 2>/dev/null || fail "$PY cannot import grpc (apt-get install python3-grpcio)"
ECHO=$ROOT/tests/host/grpc_echo.py

run() { # MODE -> $TMP/MODE.{server,client}.{out,err}, $TMP/MODE.rc
	local m=$1 p4 p6 crc=0
	ERDMA_SHIM_LOG=info bg_start "$m" "$TMP/$m.server.out" "$TMP/$m.server.err" "$PY" "$ECHO" server
	local spid=$BG_PID
	p4=$(wait_line "$TMP/$m.server.out" '^PORT4 [0-9]+$' 30 "$spid") || fail "$m: server did not start"
	p6=$(wait_line "$TMP/$m.server.out" '^PORT6 ' 5 "$spid") || fail "$m: server did not report PORT6"
	ERDMA_SHIM_LOG=info run_mode "$m" 90 "$PY" "$ECHO" client "${p4#PORT4 }" "${p6#PORT6 }" \
		>"$TMP/$m.client.out" 2>"$TMP/$m.client.err" </dev/null || crc=$?
	# a failed client never sends Quit: do not wait for the server's own timeout
	[ $crc -eq 0 ] || kill "$spid" 2>/dev/null || true
	wait_exit "$spid" 30
	echo "client=$crc server=$WAIT_RC" >"$TMP/$m.rc"
	# the stdout of the server minus its port lines
	grep -v '^PORT[46] ' "$TMP/$m.server.out" >"$TMP/$m.server.sum" || true
	note "$m: $(cat "$TMP/$m.rc"), $(tail -n1 "$TMP/$m.client.out")"
}

run plain
run shim

assert_no_banner "$TMP/plain.server.err" "plain server"
assert_no_banner "$TMP/plain.client.err" "plain client"
assert_banner "$TMP/shim.server.err" "shimmed server"
assert_banner "$TMP/shim.client.err" "shimmed client"

same "$TMP/plain.rc" "$TMP/shim.rc" "exit codes"
same "$TMP/plain.client.out" "$TMP/shim.client.out" "client summary"
same "$TMP/plain.server.sum" "$TMP/shim.server.sum" "server summary"
[ "$(cat "$TMP/shim.rc")" = "client=0 server=0" ] || fail "exit codes: $(cat "$TMP/shim.rc")"
grep -qx 'client: failures=0' "$TMP/shim.client.out" || fail "client reported failures"

result "grpc rpcs: $(grep -c . "$TMP/shim.client.out") summary lines identical, $(sed -n 's/^server: //p' "$TMP/shim.server.sum" | tr '\n' ';')"
result "grpc exit codes plain/shim: $(cat "$TMP/plain.rc") / $(cat "$TMP/shim.rc")"
