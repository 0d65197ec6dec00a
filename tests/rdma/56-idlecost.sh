#!/usr/bin/env bash
# O(ready) readiness (issue 18): an idle RDMA connection costs an epoll wait
# nothing.  bench/idlescale's epoll echo server (one thread, level-
# triggered, 100 events per wait, as gRPC's epoll1 poller asks) holds N
# RDMA connections of which one is busy: its client ping-pongs one byte on
# the oldest and never touches the others.  The server runs with the shim's
# debug log, where each sleep of its epoll_wait says how many registrations
# the set emulates and how many connections it armed before sleeping
# (epoll.c, sleep_on).
#
# Once all N are registered, a sleep may arm only what changed since the
# last one -- the busy connection (twice the first time: arm_reg) -- never
# the idle ones: their completion channels sit in the kernel's epoll set and
# stay silent.  Before O(ready) every sleep polled and armed all N.  Both
# ends run ERDMA_SHIM=require (a connection that is not RDMA fails the run)
# and the server is seen holding N RC QPs while the client runs.
. "$(dirname "$0")/lib/common.bash"
IS=$ROOT/build/bench/idlescale
[ -x "$IS" ] || fail "$IS is not built (run make on the host first)"
N=$(pick 256 64)
ulimit -n 65536 || ulimit -n 8192 || true
# 16 KiB rsocket buffers: N connections each side fit the bed's memory
big=(env LD_PRELOAD="$PRELOAD" ERDMA_SHIM=require ERDMA_SHIM_SNDBUF=16K
	ERDMA_SHIM_RCVBUF=16K)

bg "$WORK/srv" "${big[@]}" ERDMA_SHIM_LOG=debug ERDMA_SHIM_LOG_FILE="$WORK/srv.log" \
	timeout 300 "$IS" server "$IP0" 0
sp=$BG_PID
wait_for "$WORK/srv" '^ready ' 30
bg "$WORK/cli" "${big[@]}" timeout 240 "$IS" client "$IP0" "$(port_of "$WORK/srv")" \
	--conns "$N" --busy 1 --seconds 3
cp=$BG_PID
# the server's QPs while the client holds its connections: the client
# connects all N before its first round trip, and the server logs one
# sleep line per wait, so N emulated registrations show in the log first
wait_for "$WORK/srv.log" "; $N emulated," 200
sq=$(qps "$sp")
wait "$cp" || fail "client: $(tail -n 5 "$WORK/cli")"
kill "$sp" 2>/dev/null; wait "$sp" 2>/dev/null || true
cat "$WORK/cli"
grep -qE "round trips/s" "$WORK/cli" || fail "client: no round trips: $(cat "$WORK/cli")"
[ "$sq" -ge "$N" ] || fail "server QPs: $sq (want >= $N: every connection on RDMA)"

# the sleeps with all N registered: fds watched, emulated, armed
sed -nE 's/.*sleeping on ([0-9]+) fd\(s\).*; ([0-9]+) emulated, ([0-9]+) armed.*/\1 \2 \3/p' \
	"$WORK/srv.log" | awk -v n="$N" '$2 == n' >"$WORK/sleeps"
sleeps=$(wc -l <"$WORK/sleeps")
# the ping-pong: skip the first 10 sleeps, where the last connections to
# come are armed for the first time
read -r maxfds maxarmed tot < <(awk 'NR > 10 { if ($1 > f) f = $1; if ($3 > a) a = $3; t += $3 }
	END { printf "%d %d %d\n", f, a, t }' "$WORK/sleeps")
figure "idlecost: $N RDMA connections, 1 busy: $sleeps sleeps of the server's epoll_wait; after the first 10: at most $maxfds fd(s) watched and $maxarmed connection(s) armed per sleep, $tot armed in all"
[ "$sleeps" -ge 100 ] || fail "only $sleeps sleeps with $N registrations (want >= 100: the ping-pong's)"
[ "$maxarmed" -le 2 ] || fail "a sleep armed $maxarmed connections with 1 busy among $N (want <= 2)"
[ "$maxfds" -le 3 ] || fail "a sleep watched $maxfds fds with 1 busy among $N (want <= 3: the epoll fd, the wake eventfd, chan_ep)"
echo "RESULT: $N RDMA connections, 1 busy: each of $((sleeps - 10)) sleeps armed at most $maxarmed and watched at most $maxfds fds"
