#!/usr/bin/env bash
# Bad pointers and lengths (issue #8): tests/progs/relia badptr calls
# send/recv/read/write/sendmsg/recvmsg/getsockopt/setsockopt/getsockname/
# getpeername/connect/accept/shutdown with NULL or unmapped buffers, bad
# lengths and bad flags on a connected socket and a listener, and prints each
# result and errno.  The transcript with the shim must equal the one without
# (here all kernel sockets; tests/rdma/86-badptr.sh runs it on RDMA).
set -eu
. "$(dirname "$0")/lib.sh"

R=$PROGS/relia
[ -x "$R" ] || fail "$R not built (run make)"
# ASan's accept() interceptor reads *addrlen before the call (a fault there,
# shim or not): SANITIZE=1 steps over that case in both transcripts.
[ "${SANITIZE:-0}" = 1 ] && export RELIA_BADPTR_SKIP="accept addrlen bad"

bg_start plain "$TMP/srv.out" "$TMP/srv.err" timeout 120 "$R" serve 127.0.0.1 0 echo
port=$(wait_line "$TMP/srv.out" '^ready ' 20 "$BG_PID" | awk '{print $2}')
for m in plain shim; do
	rc=0
	run_mode "$m" 30 "$R" badptr 127.0.0.1 "$port" >"$TMP/$m.out" 2>"$TMP/$m.err" || rc=$?
	echo "rc=$rc" >>"$TMP/$m.out"
done
grep -qx 'rc=0' "$TMP/plain.out" || fail "relia badptr fails without the shim: $(tail -n 3 "$TMP/plain.out")"
n=$(grep -c ' errno=E' "$TMP/plain.out")
[ "$n" -ge 20 ] || fail "only $n error cases reached without the shim"
same "$TMP/plain.out" "$TMP/shim.out" "relia badptr transcript"
result "$n bad-argument calls: same result and errno with and without the shim"
