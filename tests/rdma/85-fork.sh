#!/usr/bin/env bash
# fork and RDMA (issue #8), tests/progs/relia against an echo server:
#  - the parent keeps using its RDMA connections after fork;
#  - a child's close of an inherited RDMA fd does not tear the parent's
#    connection down; a child's send/recv on one fails cleanly (no data, no
#    crash, no hang: alarm 5 s);
#  - after fork, parent and child each make a new connection;
#  - posix_spawn and fork+exec of a shimmed program connect (and see the
#    shim mapped);
#  - daemon(): the daemon can't use the inherited connection and makes its
#    own.
# Run without the shim (kernel TCP) and with it: the server under
# ERDMA_SHIM=require, the forking client in auto mode, because a fork child
# of a process that used rsockets must stay on TCP (librdmacm's device
# contexts belong to the parent: an rsocket made in the child connects but
# carries no data).  Its log proves both paths: the parent's connections
# on RDMA, the child's and the daemon's new ones on TCP for that reason.
# Same expectations both ways, except that on kernel TCP a child's use of an
# inherited connection is skipped (the child shares it by design: its bytes
# would land in the parent's stream).  The server's QPs prove the RDMA run.
. "$(dirname "$0")/lib/common.bash"
R=$PROGS/relia

run() { # MODE: plain | shim
	local m=$1 pre=() spid port q kernel=kernel want=10 exp mapped n
	local spre=()
	[ "$m" = shim ] && spre=(env LD_PRELOAD="$PRELOAD" ERDMA_SHIM=require) kernel= want=11 \
		pre=(env LD_PRELOAD="$PRELOAD" ERDMA_SHIM=auto ERDMA_SHIM_LOG=debug)
	bg "$WORK/srv.$m" "${spre[@]}" timeout 150 "$R" serve "$IP0" 0 echo
	spid=$BG_PID
	wait_for "$WORK/srv.$m" '^ready ' 30
	port=$(port_of "$WORK/srv.$m")
	"${pre[@]}" timeout 90 "$R" fork "$IP0" "$port" $kernel >"$WORK/fork.$m" 2>&1 ||
		{ cat "$WORK/fork.$m"; fail "$m: relia fork failed"; }
	grep -q '^fork: 0 failure' "$WORK/fork.$m" || { cat "$WORK/fork.$m"; fail "$m: fork scenarios"; }
	n=$(grep -c '^ok ' "$WORK/fork.$m")
	[ "$n" -eq "$want" ] || { cat "$WORK/fork.$m"; fail "$m: $n of $want checks ran"; }
	# spawned programs: shim mapped exactly when preloaded
	mapped=0; [ "$m" = shim ] && mapped=1
	[ "$(grep -c "^echo1 pid=[0-9]* shim=$mapped ok" "$WORK/fork.$m")" -eq 2 ] ||
		{ cat "$WORK/fork.$m"; fail "$m: spawned programs (shim=$mapped expected)"; }
	grep '^child:' "$WORK/fork.$m" | sed "s/^/$m /"
	if [ "$m" = shim ]; then
		# RDMA connects logged: the parent's 3 and one per spawned
		# program (2); the fork child's would be a 6th (it is TCP: a
		# child of a process that used RDMA gets no rsockets at all).
		n=$(grep -c -- ': RDMA$' "$WORK/fork.$m" || true)
		[ "$n" -eq 5 ] || { cat "$WORK/fork.$m"; fail "shim: $n RDMA connects logged, want 5 (parent 3 + spawned 2)"; }
		echo "shim: the parent's 3 connections and the 2 spawned programs' on RDMA; the fork child's new one on TCP"
	fi

	rm -f "$WORK/daemon.res"
	"${pre[@]}" timeout 30 "$R" daemon "$IP0" "$port" "$WORK/daemon.res" $kernel >"$WORK/daemon.$m" 2>&1 ||
		fail "$m: relia daemon: $(cat "$WORK/daemon.$m")"
	wait_for "$WORK/daemon.res" '^daemon ' 40
	exp=ok; [ -n "$kernel" ] && exp=skip
	grep -q "inherited=$exp new=ok" "$WORK/daemon.res" || fail "$m: daemon: $(cat "$WORK/daemon.res")"
	echo "$m daemon: $(cat "$WORK/daemon.res")"

	if [ "$m" = shim ]; then
		# The parent's connections are gone, the server's accepted ones
		# close with them: none may be left behind (and some existed).
		"${pre[@]}" timeout 30 "$R" dial "$IP0" "$port" stall >"$WORK/stall" 2>&1 &
		PIDS+=($!)
		wait_for "$WORK/stall" '^stalled' 30
		q=$(qps "$spid")
		[ "$q" -ge 1 ] || fail "shim: server has $q QPs with a client connected (not RDMA)"
		figure "fork_server_qps_with_one_client=$q"
	fi
	kill "$spid" 2>/dev/null || true
	wait "$spid" 2>/dev/null || true
	echo "PASS: $m: $want fork checks + daemon"
}
run plain
run shim
echo "RESULT: fork/posix_spawn/exec/daemon behave alike on kernel TCP and on RDMA (require)"
