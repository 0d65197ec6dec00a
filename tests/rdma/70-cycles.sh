#!/usr/bin/env bash
# No leaks per connection: N connect/echo/close cycles (ERDMA_CYCLES, default
# 1000) over RDMA (ERDMA_SHIM=require) must leave the client's fd count and
# RSS where they were after warm-up, and no QP in either process once all
# connections are closed (rdma res, both processes held alive at the end).
# Then (slowed): the connect thread slowed as it lets go of each socket it
# connected (tests/inject/slowclose.so) while the program closes it: each
# close() still takes its connection, rsocket fds included, with it.
. "$(dirname "$0")/lib/common.bash"
N=${ERDMA_CYCLES:-$(pick 1000 300)} # 300 in the light (ASan) pass
C=$PROGS/cycles
san=()
if [ "${SANITIZE:-0}" = 1 ]; then
	# Under ASan its quarantine grows RSS by design: LeakSanitizer judges
	# leaks instead (a report fails the suite: tests/vm/check-rdma)
	san=(ASAN_OPTIONS="${ASAN_OPTIONS:-}:detect_leaks=1" ERDMA_CYCLES_RSS_SLACK_KIB=262144)
	echo "# SANITIZE=1: RSS bound 256 MiB (ASan quarantine), LeakSanitizer on"
fi
hold=$WORK/hold
bg "$WORK/server" env "${san[@]}" LD_PRELOAD="$PRELOAD" ERDMA_SHIM=require timeout 280 "$C" server "$IP0" 0 "$N" --hold "$hold"
spid=$BG_PID
wait_for "$WORK/server" '^ready ' 30
bg "$WORK/client" env "${san[@]}" LD_PRELOAD="$PRELOAD" ERDMA_SHIM=require timeout 280 "$C" client "$IP0" \
	"$(port_of "$WORK/server")" "$N" --hold "$hold"
cpid=$BG_PID
wait_for "$WORK/client" '^holding' 270
wait_for "$WORK/server" '^holding' 30
q="$(qps "$spid") $(qps "$cpid")"
touch "$hold"
wait "$cpid" || fail "client: $(cat "$WORK/client")"
wait "$spid" || fail "server: $(cat "$WORK/server")"
grep '^client:' "$WORK/client"
grep '^FIGURE:' "$WORK/client" || true
[ "$q" = "0 0" ] || fail "QPs left after every connection closed: server/client $q"

M=24
inj=$ROOT/build/tests/inject/slowclose.so
[ -f "$inj" ] || fail "no $inj (make)"
bg "$WORK/sserver" env "${san[@]}" LD_PRELOAD="$PRELOAD" ERDMA_SHIM=require timeout 120 "$C" server "$IP0" 0 "$M"
spid=$BG_PID
wait_for "$WORK/sserver" '^ready ' 30
if ! env "${san[@]}" LD_PRELOAD="$PRELOAD:$inj" ERDMA_SHIM=require ERDMA_INJECT_CLOSE_MS=200 \
	timeout 120 "$C" client "$IP0" "$(port_of "$WORK/sserver")" "$M" --strict >"$WORK/sclient" 2>&1; then
	kill "$spid" 2>/dev/null || true
	fail "slowed: $(cat "$WORK/sclient")"
fi
wait "$spid" || fail "slowed server: $(cat "$WORK/sserver")"
grep '^client:' "$WORK/sclient" | sed 's/^/slowed /'
echo "RESULT: $N RDMA connect/close cycles: no fd, RSS or QP growth (QPs left: $q); $M with the connect thread slowed: every close took its connection's fds"
