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
#             A client with a socket filter or SO_BINDTODEVICE set before
#             connect() stays on TCP (no QP on either end), with one line.
#   backlog   a listener (backlog 2) that does not accept yet, 6 clients one
#             after the other: 3 (backlog + 1, the kernel's accept queue)
#             are completed over RDMA and hold QPs on the server, the other
#             3 are refused there and connect over TCP; the server's QP
#             count never passes 3; once it accepts, all 6 are served, every
#             byte checked.
#   twin      a prefork server's second worker finds its sibling holding the
#             port's RDMA listener (info line); user nobody squats root's
#             RDMA port first (the shim with ERDMA_SHIM_PORT_OFFSET=1 on the
#             TCP port below): root's server warns, naming the squatter's
#             pid and uid, and a plain client's bytes reach root's server.
#             KNOWN: a shimmed client of that port is still steered to the
#             squatter (counted; docs/security.md, "Ports and peers").
#   lazy      root's server listens and does not wait for a connection yet
#             (its RDMA listener is opened at the first wait): user nobody
#             tries to take its RDMA port in between and fails (the
#             reservation made at listen()); once root's server waits, a
#             shimmed client is served over RDMA (QPs on both ends, every
#             byte checked) and the squatter accepted nothing.
#   window    the moment the RDMA listener opens, when the reservation goes
#             (tests/inject/twinwin.so holds root's server there: the
#             reservation just destroyed): user nobody, as in lazy, opens
#             its RDMA listener on root's port in that moment.  It must not
#             get to listen; root's server, let go, warns naming it and
#             serves a shimmed client over TCP (every byte checked), and the
#             squatter's catch is 0.  The same with a squatter that gave up
#             (exited) before root's server went on: root's server serves a
#             client under ERDMA_SHIM=require over RDMA.
#   accept    ERDMA_SHIM_ACCEPT_FROM on the server: a policy that leaves out
#             the client's address refuses its RDMA requests (one warning
#             naming the address, the next at debug), its connections
#             complete on TCP (no QP on either end, every byte checked);
#             one that names it with the server's TCP port P lets it in
#             over RDMA (QPs on both ends, the client under require), with
#             the port offset 1 so that the rule's port is P, not the twin;
#             a rule on the twin's port keeps the client on TCP; under
#             ERDMA_SHIM=require a client left out has its connect refused.
. "$(dirname "$0")/lib/common.bash"

S="LD_PRELOAD=$PRELOAD ERDMA_SHIM_LOG=debug"

# A TCP port A with A + 1 and A + 20001 free too: a squatter shimmed with
# ERDMA_SHIM_PORT_OFFSET=$off on A opens its RDMA listener on root's P.
free_port() {
	local a
	for ((a = 20000 + RANDOM % 20000; ; a++)); do
		ss -Hltn "sport = :$a or sport = :$((a + 1)) or sport = :$((a + 20001))" |
			grep -q . || { echo "$a"; return; }
	done
}
# on soft-iWARP a root server's RDMA port is P + 20000 (sock.h)
off=1
[ "${ERDMA_BED_LINK:-rxe}" != siw ] || off=20001

# guarded NAME [server opts]: a held 2-connection transfer from a client
# bound to IP1 (common.bash); prints "server_qps client_qps".
guarded() {
	local name=$1
	shift
	held_pair "$name" "$S" "$S" "$*" --bind "$IP1"
}

# Each part runs in a subshell: one that fails (fail: exit) does not hide
# the others' results.
part_guard() {
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

# Clients: the same options set before connect() keep the client's
# connections on TCP (to a listener with its RDMA listener open: the
# control above), with one info line.
for g in filter dev:v1; do
	n=client-${g%%:*}
	q=$(held_pair "$n" "$S" "$S" "" --bind "$IP1" --guard "$g")
	[ "$q" = "0 0" ] || fail "client with --guard $g: QPs $q (its connections went over RDMA)"
	grep -qE 'TCP \((SO_ATTACH_FILTER|SO_BINDTODEVICE) set on the socket: RDMA would bypass it\)' "$WORK/$n/client" ||
		fail "client with --guard $g: no info line: $(grep erdma "$WORK/$n/client" | tail -n 5)"
	echo "PASS client with $g set before connect(): its 2 connections on TCP (no QP on either end), every byte checked"
done

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

}

# held PID: the server's QPs, once a refused request's QP (rsockets makes
# it before the accept that is refused, and frees it as the reject goes
# out) is gone: what it holds, not what passes through (bounded: 5 s).
held() {
	local i n
	for ((i = 0; i < 100; i++)); do
		n=$(qps "$1")
		[ "$n" -gt "$CAP" ] || break
		sleep 0.05
	done
	echo "$n"
}

part_backlog() {
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
	n=$(held "$spid")
	[ "$n" -le "$max" ] || max=$n
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
}

part_twin() {
# A prefork server (2 workers): the worker that finds the port's RDMA
# listener taken finds its sibling holding it, and says so quietly.
bg "$WORK/prefork" env $S timeout 60 "$PROGS/prefork" serve "$IP0" 2 block
pf=$BG_PID
wait_for "$WORK/prefork" '^ready ' 20
wait_for "$WORK/prefork" "held by this listener's own processes" 20
if grep -q "not by this listener's processes" "$WORK/prefork"; then
	fail "prefork: a sibling's RDMA listener read as another's: $(grep -m1 'not by this' "$WORK/prefork")"
fi
kill "$pf" 2>/dev/null || true
wait "$pf" 2>/dev/null || true
echo "PASS prefork: the sibling's RDMA listener is recognised as the listener's own"

# The attacker: user nobody, the shim itself with ERDMA_SHIM_PORT_OFFSET=1
# on TCP port A, so that its RDMA listener is root's port P = A + 1 (on
# RoCE a root server's RDMA port is its TCP port; on iWARP the offset is
# 20001).  It listens first.
A=$(free_port) P=$((A + 1))
alog=$WORK/attacker
# the shim and xfer from where they are (readable by all); the log is
# opened here, by root
setpriv --reuid=nobody --regid=nogroup --clear-groups env \
	LD_PRELOAD="$PRELOAD" ERDMA_SHIM_LOG=debug ERDMA_SHIM_PORT_OFFSET=$off \
	timeout 60 "$XFER" server "$IP0" "$A" --conns 1 >"$alog" 2>&1 &
apid=$!
PIDS+=("$apid")
wait_for "$alog" 'listening on TCP and RDMA' 20
d=$WORK/twin
mkdir -p "$d"
bg "$d/server" env $S timeout 60 "$XFER" server "$IP0" "$P" --conns 1
spid=$BG_PID
wait_for "$d/server" '^ready ' 20
wait_for "$d/server" "RDMA port $((P + off - 1)) \\(the twin of TCP port $P\\) is held by pid [0-9]+ \\(uid 65534\\), not by this listener's processes" 20
echo "PASS root's server on $P warns: $(grep -o 'held by pid [0-9]* (uid 65534)' "$d/server")"
# KNOWN (docs/security.md, "Ports and peers"): a shimmed client of port P
# still goes to the twin port, and the squatter answers it.  Counted, so
# that the day a client can't be steered there this line says so.
rc=0
env LD_PRELOAD="$PRELOAD" timeout 60 "$XFER" client "$IP0" "$P" --size 64K >"$d/shimmed" 2>&1 || rc=$?
waitb "$apid" 30 || true
took=$(grep -c '^server: 1 connections' "$alog" || true)
if [ "$took" = 0 ]; then
	fail "the squatter accepted nothing: docs/security.md's remaining exposure is out of date (client exit $rc)"
fi
# A client without RDMA reaches root's server; its bytes are checked.
env ERDMA_SHIM=off timeout 60 "$XFER" client "$IP0" "$P" --size 256K >"$d/plain" 2>&1 ||
	fail "plain client of root's server: $(cat "$d/plain")"
grep -q ' 0 mismatched' "$d/plain" || fail "plain client: $(cat "$d/plain")"
waitb "$spid" 30 || fail "root's server: $(cat "$d/server")"
grep -q '^server: 1 connections.* 0 mismatched' "$d/server" || fail "root's server served nothing"
echo "PASS a plain client's bytes reach root's server on $P over TCP, checked"
echo "KNOWN a shimmed client of port $P is steered to the squatter's RDMA listener while root's server runs: it accepted $took (docs/security.md)"

}

part_lazy() {
A=$(free_port) P=$((A + 1))
d=$WORK/lazy
mkdir -p "$d"
go=$WORK/lazy.go hold=$WORK/lazy.hold
bg "$d/server" env $S timeout 90 "$XFER" server "$IP0" "$P" --conns 1 \
	--wait-after "$go" --hold "$hold"
spid=$BG_PID
wait_for "$d/server" '^ready ' 20
! grep -q 'listening on TCP and RDMA' "$d/server" ||
	fail "lazy: root's RDMA listener was open before its first wait: nothing to test"
# the squatter opens its RDMA listener (on root's port) at its first poll,
# before it prints "waiting"
setpriv --reuid=nobody --regid=nogroup --clear-groups env \
	LD_PRELOAD="$PRELOAD" ERDMA_SHIM_LOG=debug ERDMA_SHIM_PORT_OFFSET=$off \
	timeout 60 "$XFER" server "$IP0" "$A" --conns 1 \
	--accept-after "$WORK/lazy.never" >"$d/attacker" 2>&1 &
apid=$!
PIDS+=("$apid")
wait_for "$d/attacker" '^waiting' 20
! grep -q 'listening on TCP and RDMA' "$d/attacker" ||
	fail "lazy: user nobody took root's RDMA port $P between its listen() and its first wait"
grep -qE "RDMA port $((A + off)) \\(the twin of TCP port $A\\) is held by " "$d/attacker" ||
	fail "lazy: the squatter's failure is not the reservation: $(grep erdma "$d/attacker" | tail -n 5)"
echo "PASS user nobody could not take root's RDMA port $P before root's first wait: $(grep -o 'is held by [^,]*' "$d/attacker" | head -n 1)"
touch "$go"
wait_for "$d/server" 'listening on TCP and RDMA' 20
bg "$d/client" env $S timeout 90 "$XFER" client "$IP0" "$P" --size 256K \
	--bind "$IP1" --hold "$hold"
cpid=$BG_PID
wait_for "$d/client" '^holding' 60
wait_for "$d/server" '^holding' 20
q="$(qps "$spid") $(qps "$cpid")"
touch "$hold"
waitb "$cpid" 30 || fail "lazy: client failed: $(cat "$d/client")"
waitb "$spid" 30 || fail "lazy: root's server failed: $(cat "$d/server")"
grep -q ' 0 mismatched' "$d/client" || fail "lazy: client: $(cat "$d/client")"
read -r sq cq <<<"$q"
[ "$sq" -gt 0 ] && [ "$cq" -gt 0 ] || fail "lazy: root's server did not serve over RDMA (QPs $q)"
kill "$apid" 2>/dev/null || true
wait "$apid" 2>/dev/null || true
! grep -q '^server: 1 connections' "$d/attacker" || fail "lazy: the squatter accepted a connection"
echo "PASS root's server then serves a shimmed client over RDMA (QPs $q), every byte checked; the squatter accepted nothing"
}

# window_run NAME STAY: root's server held in the moment its port's
# reservation is destroyed (twinwin.so), user nobody's shimmed server
# opening its RDMA listener on root's port then; STAY=0: the squatter exits
# before root's server goes on.
window_run() {
local name=$1 stay=$2 A P d spid apid took
A=$(free_port) P=$((A + 1))
d=$WORK/$name
mkdir -p "$d"
mkfifo "$d/go"
bg "$d/server" env $S LD_PRELOAD="$PRELOAD:$ROOT/build/tests/inject/twinwin.so" \
	ERDMA_INJECT_TWIN_DIR="$d" timeout 60 "$XFER" server "$IP0" "$P" --conns 1
spid=$BG_PID
wait_for "$d/paused" '^paused' 20
setpriv --reuid=nobody --regid=nogroup --clear-groups env \
	LD_PRELOAD="$PRELOAD" ERDMA_SHIM_LOG=debug ERDMA_SHIM_PORT_OFFSET=$off \
	timeout 60 "$XFER" server "$IP0" "$A" --conns 1 >"$d/attacker" 2>&1 &
apid=$!
PIDS+=("$apid")
# its RDMA listener is opened (or refused) at its first wait
wait_for "$d/attacker" 'listening on TCP and RDMA|\(the twin of TCP port' 20
if [ "$stay" = 0 ]; then
	kill "$apid" 2>/dev/null || true
	wait "$apid" 2>/dev/null || true
fi
timeout 10 sh -c "echo go >'$d/go'" || fail "$name: root's server was not held"
wait_for "$d/server" 'listening on TCP and RDMA|RDMA port [0-9]+ \(the twin' 20
if [ "$stay" = 0 ]; then
	grep -q 'listening on TCP and RDMA' "$d/server" ||
		fail "$name: the squatter gone, root's server has no RDMA listener: $(grep erdma "$d/server" | tail -n 3)"
	env LD_PRELOAD="$PRELOAD" ERDMA_SHIM=require timeout 60 "$XFER" client "$IP0" "$P" \
		--size 256K --bind "$IP1" >"$d/client" 2>&1 ||
		fail "$name: client under require: $(cat "$d/client")"
	grep -q ' 0 mismatched' "$d/client" || fail "$name: client: $(cat "$d/client")"
	waitb "$spid" 30 || fail "$name: root's server: $(cat "$d/server")"
	echo "PASS a squatter that gave up in the window: root's server then serves a client under require over RDMA, every byte checked"
	return
fi
rc=0
env $S timeout 60 "$XFER" client "$IP0" "$P" --size 256K \
	--bind "$IP1" >"$d/client" 2>&1 || rc=$?
# a squatter that listens ends with the client's connection; else it waits
! grep -q 'listening on TCP and RDMA' "$d/attacker" || waitb "$apid" 10 || true
kill "$apid" 2>/dev/null || true
wait "$apid" 2>/dev/null || true
took=$(grep -c '^server: 1 connections' "$d/attacker" || true)
[ "$took" = 0 ] ||
	fail "$name: user nobody took root's RDMA port $P in the moment its RDMA listener opened and caught $took shimmed client ($(grep -cm1 'listening on TCP and RDMA' "$d/attacker") RDMA listener; client exit $rc)"
! grep -q 'listening on TCP and RDMA' "$d/attacker" ||
	fail "$name: user nobody listened on root's RDMA port $P"
grep -qE "RDMA port $((A + off)) \\(the twin of TCP port $A\\) is (held|bound) by pid [0-9]+ \\(uid 0\\)" "$d/attacker" ||
	fail "$name: the squatter's failure names no holder: $(grep erdma "$d/attacker" | tail -n 3)"
grep -qE "warn: fd [0-9]+: RDMA port $((P + off - 1)) \\(the twin of TCP port $P\\) is (held|bound) by pid [0-9]+ \\(uid 65534\\)" "$d/server" ||
	fail "$name: root's server does not name the squatter: $(grep erdma "$d/server" | tail -n 3)"
[ "$rc" = 0 ] && grep -q ' 0 mismatched' "$d/client" || fail "$name: client (exit $rc): $(cat "$d/client")"
grep -q 'TCP (rsocket connect failed' "$d/client" || fail "$name: the client was not on TCP: $(cat "$d/client")"
waitb "$spid" 30 || fail "$name: root's server: $(cat "$d/server")"
grep -q '^server: 1 connections.* 0 mismatched' "$d/server" || fail "$name: root's server served nothing"
echo "PASS user nobody in the moment root's RDMA listener opened: it could not listen ($(grep -o 'is [a-z]* by pid [0-9]* (uid 0)' "$d/attacker" | head -n 1)); root's server warns ($(grep -o 'is [a-z]* by pid [0-9]* (uid 65534)' "$d/server" | head -n 1)) and serves the shimmed client over TCP, every byte checked; the squatter caught 0"
}

part_window() {
[ -f "$ROOT/build/tests/inject/twinwin.so" ] || fail "tests/inject/twinwin.so is not built"
window_run window 1
window_run window-gone 0
}

part_accept() {
# Left out: the policy names the server's own address only.  The client
# has no negative cache, so both of its connections ask over RDMA.
q=$(held_pair accept-out "$S ERDMA_SHIM_ACCEPT_FROM=$IP0/32" \
	"$S ERDMA_SHIM_NEGCACHE_TTL_S=0" "" --bind "$IP1")
[ "$q" = "0 0" ] || fail "ACCEPT_FROM=$IP0/32: the client from $IP1 was served over RDMA (QPs $q)"
f=$WORK/accept-out/server p=$(port_of "$WORK/accept-out/server")
why="RDMA listener for TCP port $p: a connection from $IP1 refused \\(not in ERDMA_SHIM_ACCEPT_FROM\\)"
n=$(grep -cE "warn: $why" "$f" || true)
[ "$n" = 1 ] || fail "ACCEPT_FROM: $n warning lines naming $IP1 (want 1): $(grep erdma "$f" | tail -n 5)"
grep -qE "debug: $why" "$f" || fail "ACCEPT_FROM: the second refusal is not at debug"
grep -q 'TCP (rsocket connect failed' "$WORK/accept-out/client" ||
	fail "ACCEPT_FROM: the client did not fall back: $(cat "$WORK/accept-out/client")"
echo "PASS ACCEPT_FROM=$IP0/32: the client from $IP1 refused over RDMA (one warning, then debug), its 2 connections on TCP (no QP on either end), every byte checked"

# Let in by address and the TCP port P; the twin is P + 1 here.
P=$(free_port)
q=$(HELD_PORT=$P held_pair accept-in \
	"$S ERDMA_SHIM_PORT_OFFSET=1 ERDMA_SHIM_ACCEPT_FROM=$IP1/32:$P" \
	"$S ERDMA_SHIM_PORT_OFFSET=1 ERDMA_SHIM=require" "" --bind "$IP1")
read -r sq cq <<<"$q"
[ "$sq" -gt 0 ] && [ "$cq" -gt 0 ] || fail "ACCEPT_FROM=$IP1/32:$P: not on RDMA (QPs $q)"
! grep -q 'not in ERDMA_SHIM_ACCEPT_FROM' "$WORK/accept-in/server" || fail "ACCEPT_FROM=$IP1/32:$P: a request was refused"
echo "PASS ACCEPT_FROM=$IP1/32:$P (the TCP port; RDMA on $((P + 1))): the client under require served over RDMA (QPs $q), every byte checked"

# A rule on the twin's port is not a rule on P.
P=$(free_port)
q=$(HELD_PORT=$P held_pair accept-twin \
	"$S ERDMA_SHIM_PORT_OFFSET=1 ERDMA_SHIM_ACCEPT_FROM=$IP1/32:$((P + 1))" \
	"$S ERDMA_SHIM_PORT_OFFSET=1" "" --bind "$IP1")
[ "$q" = "0 0" ] || fail "ACCEPT_FROM=$IP1/32:$((P + 1)) (the twin): served over RDMA on P=$P (QPs $q)"
grep -qE "warn: RDMA listener for TCP port $P: a connection from $IP1 refused" "$WORK/accept-twin/server" ||
	fail "ACCEPT_FROM on the twin's port: no warning: $(grep erdma "$WORK/accept-twin/server" | tail -n 5)"
echo "PASS ACCEPT_FROM=$IP1/32:$((P + 1)) (the twin's port, not P=$P): the client on TCP (no QP on either end), every byte checked"

# Under require, a client left out is refused, not sent to TCP.
d=$WORK/accept-require
mkdir -p "$d"
bg "$d/server" env $S ERDMA_SHIM_ACCEPT_FROM=$IP0/32 timeout 60 "$XFER" server "$IP0" 0 --conns 1
spid=$BG_PID
wait_for "$d/server" 'listening on TCP and RDMA' 20
p=$(port_of "$d/server")
rc=0
env LD_PRELOAD="$PRELOAD" ERDMA_SHIM=require timeout 60 "$XFER" client "$IP0" "$p" \
	--size 1 --bind "$IP1" >"$d/client" 2>&1 || rc=$?
[ "$rc" = 2 ] || fail "ACCEPT_FROM, require: client exit $rc, expected 2 (connect refused): $(cat "$d/client")"
grep -q 'connect: Connection refused' "$d/client" || fail "ACCEPT_FROM, require: $(cat "$d/client")"
grep -q 'RDMA required but' "$d/client" || fail "ACCEPT_FROM, require: no warning line"
grep -qE "warn: RDMA listener for TCP port $p: a connection from $IP1 refused" "$d/server" ||
	fail "ACCEPT_FROM, require: not refused by the policy: $(grep erdma "$d/server" | tail -n 5)"
# the server itself goes on: a plain client's bytes, checked
env -u LD_PRELOAD timeout 60 "$XFER" client "$IP0" "$p" --size 64K --bind "$IP1" >"$d/plain" 2>&1 ||
	fail "ACCEPT_FROM: plain client: $(cat "$d/plain")"
grep -q ' 0 mismatched' "$d/plain" || fail "ACCEPT_FROM: plain client: $(cat "$d/plain")"
waitb "$spid" 30 || fail "ACCEPT_FROM: server: $(cat "$d/server")"
echo "PASS ACCEPT_FROM=$IP0/32, ERDMA_SHIM=require client from $IP1: connect refused; the server then serves a plain client over TCP"
}

fails=0
for part in ${PARTS:-guard backlog twin lazy window accept}; do
	(part_$part) || { echo "FAIL part $part"; fails=$((fails + 1)); }
done
[ "$fails" = 0 ] || exit 1
echo "RESULT: guard (3 ways and require), backlog, the twin port and its reservation (from listen() through the RDMA listener's opening), the server's ACCEPT_FROM policy behave as specified"
