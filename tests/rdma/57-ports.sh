#!/usr/bin/env bash
# Ports and peers (issue 43): what a listener opens over RDMA is no more
# than what its TCP port lets in.  tests/progs/xfer, both ends shimmed,
# ERDMA_SHIM=auto unless said; clients bound to the bed's second address
# (their TCP crosses the veth and arrives on v0, as from another host).
#   guard     a listener with SO_BINDTODEVICE (before listen) or an attached
#             socket filter (after listen, its RDMA listener already open)
#             opens no RDMA listener / closes it, and says so: its clients
#             fall back to TCP (no QP in either process, every byte
#             checked); under ERDMA_SHIM=require the client's connect is
#             refused (README).  A control without the option is on RDMA.
#   backlog   a listener (backlog 2) that does not accept yet, 6 clients one
#             after the other: 3 (backlog + 1, the kernel's accept queue)
#             are completed over RDMA and hold QPs on the server, the other
#             3 are refused there and connect over TCP; the server's QP
#             count never passes 3; once it accepts, all 6 are served, every
#             byte checked.
. "$(dirname "$0")/lib/common.bash"

S="LD_PRELOAD=$PRELOAD ERDMA_SHIM_LOG=debug"

# guarded NAME [server opts]: a held 2-connection transfer from a client
# bound to IP1; prints "server_qps client_qps".
guarded() {
	local name=$1 d=$WORK/$1 hold=$WORK/$1.hold
	shift
	mkdir -p "$d"
	bg "$d/server" env $S timeout 120 "$XFER" server "$IP0" 0 --conns 2 --hold "$hold" "$@"
	local spid=$BG_PID
	wait_for "$d/server" '^ready ' 20
	bg "$d/client" env $S timeout 120 "$XFER" client "$IP0" "$(port_of "$d/server")" \
		--conns 2 --size 1M --bind "$IP1" --hold "$hold"
	local cpid=$BG_PID
	wait_for "$d/client" '^holding' 100
	wait_for "$d/server" '^holding' 20
	local q="$(qps "$spid") $(qps "$cpid")"
	touch "$hold"
	wait "$cpid" || fail "$name: client failed: $(cat "$d/client")"
	wait "$spid" || fail "$name: server failed: $(cat "$d/server")"
	grep -q ' 0 mismatched' "$d/client" || fail "$name: data mismatch"
	echo "$q"
}

# --- guard -------------------------------------------------------------
q=$(guarded control)
read -r sq cq <<<"$q"
[ "$sq" -gt 0 ] && [ "$cq" -gt 0 ] || fail "control (no option): not on RDMA (QPs $q)"
echo "PASS control: an unprotected listener serves the bound client over RDMA (QPs $q)"

q=$(guarded bindtodevice --guard dev:v0)
[ "$q" = "0 0" ] || fail "SO_BINDTODEVICE listener: QPs $q (its door accepted)"
grep -q 'SO_BINDTODEVICE set on the listener: no RDMA listener' "$WORK/bindtodevice/server" ||
	fail "SO_BINDTODEVICE: no log line: $(grep 'erdma' "$WORK/bindtodevice/server" | tail -n 5)"
grep -q 'TCP (rsocket connect failed' "$WORK/bindtodevice/client" ||
	fail "SO_BINDTODEVICE: the client did not fall back: $(cat "$WORK/bindtodevice/client")"
echo "PASS SO_BINDTODEVICE before listen(): no RDMA listener, the client's 2 connections on TCP, every byte checked"

q=$(guarded filter-late --guard-late filter)
[ "$q" = "0 0" ] || fail "filter attached after listen: QPs $q (its door accepted)"
grep -q 'listening on TCP and RDMA' "$WORK/filter-late/server" ||
	fail "filter after listen: the RDMA listener was never open, nothing was shut"
grep -q 'SO_ATTACH_FILTER set on the listener: its RDMA listener is closed' "$WORK/filter-late/server" ||
	fail "filter after listen: no log line"
echo "PASS SO_ATTACH_FILTER after listen(): the open RDMA listener closed, the client on TCP, every byte checked"

d=$WORK/require
mkdir -p "$d"
bg "$d/server" env $S timeout 60 "$XFER" server "$IP0" 0 --conns 1 --guard filter
wait_for "$d/server" '^ready ' 20
rc=0
env LD_PRELOAD="$PRELOAD" ERDMA_SHIM=require timeout 60 "$XFER" client "$IP0" \
	"$(port_of "$d/server")" --size 1 --bind "$IP1" >"$d/client" 2>&1 || rc=$?
[ "$rc" = 2 ] || fail "require: client exit $rc, expected 2 (connect refused): $(cat "$d/client")"
grep -q 'connect: Connection refused' "$d/client" || fail "require: $(cat "$d/client")"
grep -q 'RDMA required but' "$d/client" || fail "require: no warning line"
echo "PASS ERDMA_SHIM=require -> filtered listener: connect refused, nothing sent over TCP"

# --- backlog -----------------------------------------------------------
d=$WORK/backlog
mkdir -p "$d"
N=6 BL=2 CAP=3
go=$WORK/backlog.go
bg "$d/server" env $S timeout 120 "$XFER" server "$IP0" 0 --conns $N --backlog $BL \
	--accept-after "$go"
spid=$BG_PID
wait_for "$d/server" '^waiting' 20
port=$(port_of "$d/server")
cpids=() max=0 rdma=0 tcp=0
for ((i = 0; i < N; i++)); do
	bg "$d/client$i" env $S timeout 120 "$XFER" client "$IP0" "$port" --size 256K \
		--bind "$IP1" --timing --seed $((i + 1))
	cpids+=("$BG_PID")
	wait_for "$d/client$i" '^connect 0:' 60
	n=$(qps "$spid")
	[ "$n" -le "$max" ] || max=$n
done
# a refused request's QP is freed as the reject goes out: settled in a moment
for ((i = 0; i < 100; i++)); do
	n=$(qps "$spid")
	[ "$n" -le "$max" ] || max=$n
	[ "$n" -gt "$CAP" ] || break
	sleep 0.05
done
for ((i = 0; i < N; i++)); do
	if [ "$(qps "${cpids[$i]}")" -gt 0 ]; then
		rdma=$((rdma + 1))
	elif grep -q 'TCP (rsocket connect failed' "$d/client$i"; then
		tcp=$((tcp + 1))
	fi
done
[ "$max" -le "$CAP" ] || fail "backlog $BL: the server held $max QPs before accepting (bound $CAP)"
[ "$rdma" = $CAP ] && [ "$tcp" = $((N - CAP)) ] ||
	fail "backlog $BL: $rdma clients on RDMA, $tcp fell back to TCP (expected $CAP and $((N - CAP)))"
grep -q 'connections wait for accept (the backlog)' "$d/server" || fail "backlog: no log line"
touch "$go"
for ((i = 0; i < N; i++)); do
	waitb "${cpids[$i]}" 60 || fail "backlog: client $i failed: $(cat "$d/client$i")"
	grep -q ' 0 mismatched' "$d/client$i" || fail "backlog: client $i: $(cat "$d/client$i")"
done
waitb "$spid" 60 || fail "backlog: server failed: $(cat "$d/server")"
echo "PASS backlog $BL, $N clients before any accept: the server held at most $max QPs (bound $CAP), $rdma on RDMA, $tcp on TCP; all served once it accepted, every byte checked"
figure "listener backlog $BL: $max QPs held before accept, $tcp of $N clients refused to TCP"
echo "RESULT: guard (3 ways and require) and backlog behave as specified"
