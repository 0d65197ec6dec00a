#!/usr/bin/env bash
# Calls racing close() on the same fd number (issue #15; tests/progs/
# closerace): three threads hammer the number with setsockopt, getsockopt,
# fcntl (F_DUPFD too), ioctl, names, recv/send and epoll_ctl ADD/DEL while
# the main thread closes it and the next socket takes the number again --
# unconnected sockets first, then connections to a server.  Over kernel TCP,
# then under ERDMA_SHIM=require on both ends (every connection RDMA, or the
# run fails).  Every call must give a result the kernel gives to a racing
# close, the round's own connect included (a racer's shutdown can reset
# it, as the kernel did once in a CI run: closerace.c counts such rounds
# and makes them again; the shim's connecting socket says ENOTCONN to that
# shutdown, README), and in the ASan pass no report may appear: a released
# sock is poisoned there (preload/sock.c), so a call that used one after
# the close is reported.  The library before the fix failed this with a
# heap-use-after-free in fcntl(F_DUPFD) within a second (host, ASan).
. "$(dirname "$0")/lib/common.bash"
P=$PROGS/closerace
TCP_ROUNDS=${ERDMA_CLOSERACE_TCP:-3000}
CONN_ROUNDS=${ERDMA_CLOSERACE_CONN:-30}

run() { # MODE: plain | shim
	local m=$1 pre=() rc=0
	[ "$m" = shim ] && pre=(env LD_PRELOAD="$PRELOAD" ERDMA_SHIM=require)
	bg "$WORK/s.$m" "${pre[@]}" "$P" server "$IP0" 0
	wait_for "$WORK/s.$m" '^ready ' 30
	"${pre[@]}" timeout -s KILL 240 "$P" client "$IP0" "$(port_of "$WORK/s.$m")" \
		"$TCP_ROUNDS" "$CONN_ROUNDS" >"$WORK/c.$m" 2>&1 || rc=$?
	kill "$BG_PID" 2>/dev/null || true
	sed "s/^/    $m: /" "$WORK/c.$m" | head -12
	[ "$rc" != 137 ] || fail "$m: the client hung (killed after 240 s)"
	[ "$rc" = 0 ] || fail "$m: exit $rc"
	grep -q ', 0 unexpected$' "$WORK/c.$m" || fail "$m: unexpected results"
}
run plain
run shim
echo "RESULT: $TCP_ROUNDS sockets and $CONN_ROUNDS connections closed under racing calls: only the kernel's answers, kernel TCP and RDMA (require)"
