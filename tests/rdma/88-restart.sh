#!/usr/bin/env bash
# Listener restarted (issue #8): a client process that reconnects in a loop
# (tests/progs/relia redial: connect, 4 KiB echo checked, close) keeps going
# while its server is SIGKILLed and restarted on the same port, and after
# the restart its connections are on RDMA again -- in auto mode, where the
# negative cache could otherwise keep the peer on TCP for its TTL (30 s).
# A connect in the moment between the new server's listen() and its first
# accept (when its RDMA listener opens: docs/limits.md, "Process models") is served
# over TCP; the negative cache then holds the peer for 1 s only (its TTL
# grows per refusal in a row), so RDMA must be back within a few seconds.
# The client's ERDMA_SHIM_LOG=debug lines say the path of every connect; the
# new server's QPs are counted.  No round may return wrong bytes.
. "$(dirname "$0")/lib/common.bash"
R=$PROGS/relia
stop=$WORK/stop
srv() { bg "$WORK/srv$1" env LD_PRELOAD="$PRELOAD" ERDMA_SHIM=require "$R" serve "$IP0" "$2" echo; }
count() { grep -c "$2" "$1" || true; }

srv 1 0
s1=$BG_PID
wait_for "$WORK/srv1" '^ready ' 30
port=$(port_of "$WORK/srv1")
bg "$WORK/cli" env LD_PRELOAD="$PRELOAD" ERDMA_SHIM_LOG=debug timeout 200 "$R" redial "$IP0" "$port" "$stop"
cpid=$BG_PID
wait_for "$WORK/cli" '^round 3 ok' 60
kill -KILL "$s1"
wait "$s1" 2>/dev/null || true
wait_for "$WORK/cli" '^refused' 30
before=$(wc -l <"$WORK/cli")
logbefore=$(count "$WORK/cli" ': RDMA$')
srv 2 "$port"
s2=$BG_PID
wait_for "$WORK/srv2" '^ready ' 30
t0=$(date +%s%3N)
# five RDMA connects after the restart (<= 60 s)
for ((i = 0; i < 1200; i++)); do
	[ $(( $(count "$WORK/cli" ': RDMA$') - logbefore )) -ge 5 ] && break
	sleep 0.05
done
t1=$(date +%s%3N)
q=$(qps "$s2")
touch "$stop"
wait "$cpid" || fail "client: $(tail -n 5 "$WORK/cli")"
after_ok=$(tail -n +"$((before + 1))" "$WORK/cli" | grep -c '^round .* ok' || true)
rdma_after=$(( $(count "$WORK/cli" ': RDMA$') - logbefore ))
tcp_after=$(grep -c 'TCP (negative cache' "$WORK/cli" || true)
figure "restart_rounds_ok_after=$after_ok rdma_connects_after=$rdma_after negcache_tcp_connects=$tcp_after first5_rdma_ms=$((t1 - t0)) new_server_qps_at_end=$q"
[ $((t1 - t0)) -le 10000 ] || fail "RDMA came back only after $((t1 - t0)) ms"
grep -q MISMATCH "$WORK/cli" && fail "wrong bytes: $(grep MISMATCH "$WORK/cli" | head -3)"
[ "$after_ok" -ge 5 ] || fail "only $after_ok rounds after the restart: $(tail -n 5 "$WORK/cli")"
[ "$rdma_after" -ge 5 ] || { sed -n "$((before - 6)),$((before + 12))p" "$WORK/cli"; fail "after the restart only $rdma_after of the connects were RDMA ($tcp_after went TCP by the negative cache)"; }
grep '^redial:' "$WORK/cli"
echo "RESULT: server SIGKILLed and restarted: the client reconnects, on RDMA again ($rdma_after RDMA connects after restart)"
