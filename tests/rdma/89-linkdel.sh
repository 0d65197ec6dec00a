#!/usr/bin/env bash
# The RDMA device disappears mid-stream (issue #8): a client bound to .2
# (rxe1) reads a long checked stream from a server on .1 (rxe0), both under
# ERDMA_SHIM=require; `rdma link delete rxe1` while bytes flow must end the
# client's read with an error (no hang, no wrong byte) and let the server's
# send fail rather than hang.  Afterwards rxe1 is added back (`rdma link add
# rxe1 type rxe netdev v1`) and must carry a new RDMA connection, since
# later tests run in the same VM boot.  Kept late in the suite (89-).
# Note: rxe cannot disassociate a user context, so the kernel completes the
# delete only once every process holding rxe1 has closed it; the test kills
# its processes after the bounds so the delete (and the suite) never waits.
. "$(dirname "$0")/lib/common.bash"
R=$PROGS/relia
CLIENT_BOUND=20 SERVER_BOUND=30
have_rxe1() { rdma link show 2>/dev/null | grep -q '^link rxe1/'; }
restore() { have_rxe1 || rdma link add rxe1 type rxe netdev v1 || true; }
trap 'restore; cleanup' EXIT
have_rxe1 || fail "no rxe1 to start with: $(rdma link show)"

bg "$WORK/srv" env LD_PRELOAD="$PRELOAD" ERDMA_SHIM=require timeout 200 "$R" serve "$IP0" 0 feed 100000000000
spid=$BG_PID
wait_for "$WORK/srv" '^ready ' 30
bg "$WORK/cli" env LD_PRELOAD="$PRELOAD" ERDMA_SHIM=require RELIA_BIND="$IP1" timeout 200 "$R" dial \
	"$IP0" "$(port_of "$WORK/srv")" read 100000000000
cpid=$BG_PID
wait_for "$WORK/cli" '^progress ' 60
q=$(qps "$cpid")
[ "$q" -ge 1 ] || fail "client has no QP: not RDMA"
t0=$(date +%s%3N)
timeout 90 rdma link delete rxe1 >"$WORK/del" 2>&1 &
delpid=$!
cend=hang
for ((i = 0; i < CLIENT_BOUND * 20; i++)); do
	grep -q '^end ' "$WORK/cli" && { cend=$(( $(sed -n 's/^end .* ms=//p' "$WORK/cli") - t0 )); break; }
	kill -0 "$cpid" 2>/dev/null || { cend=exited; break; }
	sleep 0.05
done
send=hang
for ((i = 0; i < SERVER_BOUND * 20; i++)); do
	grep -q '^end ' "$WORK/srv" && { send=$(( $(sed -n 's/^end .* ms=//p' "$WORK/srv") - t0 )); break; }
	sleep 0.05
done
# The kernel removes rxe1 only once every process that opened it has let go
# (librdmacm opens every device, so the server holds rxe1 too): whatever is
# still running now is killed, or the delete -- and the suite -- would wait.
victims="$(tree "$cpid") $(tree "$spid")" # timeout(1) and the programs under it
for p in $victims; do kill -KILL "$p" 2>/dev/null || true; done
drc=running
for ((i = 0; i < 1200; i++)); do
	kill -0 "$delpid" 2>/dev/null || { drc=0; wait "$delpid" || drc=$?; break; }
	sleep 0.05
done
tdel=$(( $(date +%s%3N) - t0 ))
crc=0; wait "$cpid" 2>/dev/null || crc=$?
figure "linkdel_client_end_ms=$cend linkdel_server_end_ms=$send rdma_link_delete_rc=$drc after_ms=$tdel"
echo "client: $(grep -E '^(end|mismatch)' "$WORK/cli" | tail -1) (exit $crc)"
echo "server: $(grep -E '^end' "$WORK/srv" | tail -1)"
[ "$drc" != running ] || fail "rdma link delete rxe1 still blocked 60 s after every process using it was killed"
have_rxe1 && fail "rxe1 still there after rdma link delete (rc $drc: $(cat "$WORK/del"))"
rdma link add rxe1 type rxe netdev v1 || fail "could not add rxe1 back"
for ((i = 0; i < 100; i++)); do
	rdma link show rxe1/1 2>/dev/null | grep -q 'state ACTIVE' && break
	sleep 0.1
done
rdma link show rxe1/1 | grep -q 'state ACTIVE' || fail "rxe1 not ACTIVE after re-adding: $(rdma link show)"
bg "$WORK/srv2" env LD_PRELOAD="$PRELOAD" ERDMA_SHIM=require timeout 60 "$R" serve "$IP0" 0 echo
wait_for "$WORK/srv2" '^ready ' 30
env LD_PRELOAD="$PRELOAD" ERDMA_SHIM=require RELIA_BIND="$IP1" timeout 60 "$R" echo1 "$IP0" \
	"$(port_of "$WORK/srv2")" >"$WORK/after" 2>&1 || fail "no RDMA connection over the re-added rxe1: $(cat "$WORK/after")"
echo "PASS: rxe1 re-added, ACTIVE, carries an RDMA connection from $IP1"

grep -q '^mismatch' "$WORK/cli" && fail "wrong bytes before the error"
[ "$cend" != hang ] || fail "client still blocked ${CLIENT_BOUND}s after rxe1 was deleted"
[ "$cend" = exited ] || [ "$cend" -le $((CLIENT_BOUND * 1000)) ] || fail "client ended after ${cend} ms"
grep -q '^end ' "$WORK/cli" || fail "client exited without an end line (crash?): exit $crc"
[ "$send" != hang ] || fail "server's send still blocked ${SERVER_BOUND}s after the client's device went"
echo "RESULT: rxe1 deleted mid-stream: client error after ${cend} ms, server after ${send} ms; rxe1 restored"
