#!/usr/bin/env bash
# The RDMA port map, with no configuration (issue 16).  A TCP port P is served
# on RDMA at P + offset, where the offset is 0 on InfiniBand/RoCE (rdma_cm's
# own port space) and 20000 when an iWARP device is present (an iWARP
# rsocket listener is a kernel TCP listener: on P it would collide with the
# program's own).  In either bed (ERDMA_BED_LINK=rxe or siw):
#   default   no ERDMA_SHIM_* at all on either end: RDMA (QPs), byte-exact,
#             and on iWARP the program's port and its RDMA twin both listen
#   require   the same under ERDMA_SHIM=require: the program's bind never fails
#   own-port  a process that listens on its own listener's RDMA twin port
#             later still binds it (the twin gives way, that listener goes
#             TCP-only), and both listeners serve.  Measured deviation (iWARP
#             only): a shimmed client of the first listener still aims its
#             RDMA request at the twin port, now a plain TCP listener, which
#             sees a connection it never gets a request from; the client
#             falls back to TCP after ERDMA_SHIM_CONNECT_TIMEOUT_MS
#   plain-srv a shimmed client of a plain server: TCP, byte-exact, no QP
#   plain-cli a plain client of a shimmed server: TCP, byte-exact
#   doctor    erdma-shim doctor and probe name the transport and the map
# and on siw only (the bed's links are swapped for it, then restored):
#   mixed     a RoCE end and an iWARP end (rxe0 on v0, siw1 on v1), both
#             ways: TCP, byte-exact, no QP, the first connect within the
#             connect timeout and the next ones at once (negative cache)
. "$(dirname "$0")/lib/common.bash"

CLI=$ROOT/erdma-shim
link=${ERDMA_BED_LINK:-rxe}
if rdma link show 2>/dev/null | grep -q '^link siw'; then off=20000; else off=0; fi
map() { echo $((($1 - 1 + off) % 65535 + 1)); }
listening() { ss -Hltn "sport = :$1" 2>/dev/null | grep -q LISTEN; }

# xcase NAME SHIM_SERVER(0|1) SHIM_CLIENT(0|1) WANT(rdma|tcp) [env...]
xcase() {
	local name=$1 ss=$2 cs=$3 want=$4 hold=$WORK/$1.hold
	shift 4
	local spre=(env "$@") cpre=(env "$@")
	[ "$ss" = 1 ] && spre+=(LD_PRELOAD="$PRELOAD")
	[ "$cs" = 1 ] && cpre+=(LD_PRELOAD="$PRELOAD")
	bg "$WORK/$name.s" "${spre[@]}" timeout 120 "$XFER" server "$IP0" 0 --conns 2 --hold "$hold"
	local spid=$BG_PID port
	wait_for "$WORK/$name.s" '^ready ' 20
	port=$(port_of "$WORK/$name.s")
	bg "$WORK/$name.c" "${cpre[@]}" timeout 120 "$XFER" client "$IP0" "$port" --conns 2 --size 1M --hold "$hold"
	local cpid=$BG_PID
	wait_for "$WORK/$name.c" '^holding' 100
	wait_for "$WORK/$name.s" '^holding' 30
	local sq cq twin
	sq=$(qps "$spid")
	cq=$(qps "$cpid")
	twin=$(map "$port")
	if [ "$off" != 0 ] && [ "$ss" = 1 ] && [ "$want" = rdma ]; then
		listening "$port" || fail "$name: the program's own port $port is not listening"
		listening "$twin" || fail "$name: no iWARP listener on the twin port $twin"
	fi
	touch "$hold"
	wait "$cpid" || fail "$name: client exited $?: $(cat "$WORK/$name.c")"
	wait "$spid" || fail "$name: server exited $?: $(cat "$WORK/$name.s")"
	grep -q ' 0 mismatched' "$WORK/$name.c" || fail "$name: client bytes differ: $(cat "$WORK/$name.c")"
	if [ "$want" = rdma ]; then
		[ "$sq" -gt 0 ] && [ "$cq" -gt 0 ] || fail "$name: not on RDMA (QPs: server $sq, client $cq)"
	else
		[ "$sq" = 0 ] && [ "$cq" = 0 ] || fail "$name: QPs on a TCP case (server $sq, client $cq)"
	fi
	echo "PASS $name: port $port (RDMA twin $twin), $want, QPs server $sq client $cq"
}

xcase default 1 1 rdma
xcase require 1 1 rdma ERDMA_SHIM=require
xcase plain-srv 0 1 tcp
xcase plain-cli 1 0 tcp

# ---- own-port: a later listener on the first one's twin port binds ----
cat >"$WORK/own.py" <<'EOF'
import socket, sys, threading
ip, off = sys.argv[1], int(sys.argv[2])
def listener(port):
    s = socket.socket()
    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    s.bind((ip, port))
    s.listen(8)
    return s
a = listener(0)
pa = a.getsockname()[1]
a.settimeout(0.3)
try:
    a.accept()  # the first wait opens a's RDMA door (its twin port)
except socket.timeout:
    pass
twin = (pa - 1 + off) % 65535 + 1
b = listener(twin) if off else listener(0)  # must bind (EADDRINUSE = bug)
pb = b.getsockname()[1]
print("ready", pa, pb, flush=True)
a.settimeout(None)
def serve(s):
    c, _ = s.accept()
    data = b""
    while len(data) < 100000:
        d = c.recv(65536)
        if not d:
            break
        data += d
    c.sendall(data[::-1])
    c.close()
# b first: on iWARP a's clients' RDMA requests land in b's backlog
serve(b)
print("served b", flush=True)
serve(a)
print("served a", flush=True)
EOF
bg "$WORK/own.s" env LD_PRELOAD="$PRELOAD" timeout 120 python3 "$WORK/own.py" "$IP0" "$off"
ospid=$BG_PID
wait_for "$WORK/own.s" '^ready ' 30
read -r _ pa pb < <(grep '^ready ' "$WORK/own.s")
own_ms=()
for p in "$pb" "$pa"; do
	t0=$(date +%s%N)
	LD_PRELOAD=$PRELOAD ERDMA_SHIM_CONNECT_TIMEOUT_MS=2000 timeout 60 python3 -c '
import socket, sys, os
c = socket.create_connection((sys.argv[1], int(sys.argv[2])))
msg = os.urandom(100000)
c.sendall(msg)
got = b""
while len(got) < len(msg):
    d = c.recv(65536)
    if not d:
        break
    got += d
sys.exit(0 if got == msg[::-1] else 1)' "$IP0" "$p" || fail "own-port: the listener on $p did not serve exactly"
	own_ms+=($((($(date +%s%N) - t0) / 1000000)))
done
wait "$ospid" || fail "own-port: server exited $?: $(cat "$WORK/own.s")"
echo "PASS own-port: listener $pa (twin $(map "$pa")) and a later listener on $pb both bound and served" \
	"(client of $pb ${own_ms[0]} ms, of $pa ${own_ms[1]} ms)"
[ "$off" = 0 ] || figure "own-port deviation on iWARP: a client of the listener whose twin gave way took ${own_ms[1]} ms (RDMA request unanswered at the twin, 2 s timeout, then TCP)"

# ---- doctor and probe say the transport and the map ----
timeout 60 "$CLI" doctor >"$WORK/doctor" 2>&1 || true
grep -E "port map.*P\+$off " "$WORK/doctor" ||
	{ cat "$WORK/doctor"; fail "doctor: no 'port map ... P+$off'"; }
if [ "$off" != 0 ]; then
	grep -q 'iWARP device present' "$WORK/doctor" || fail "doctor does not name iWARP"
else
	grep -q 'InfiniBand/RoCE' "$WORK/doctor" || fail "doctor does not name RoCE"
fi
echo "PASS doctor: $(grep 'port map' "$WORK/doctor" | sed 's/  */ /g')"

# ---- mixed: a RoCE end and an iWARP end (siw bed only) ----
if [ "$link" = siw ]; then
	restore() {
		rdma link delete rxe0 2>/dev/null || true
		rdma link show siw0 >/dev/null 2>&1 || rdma link add siw0 type siw netdev v0 || true
	}
	trap 'restore; cleanup' EXIT
	rdma link delete siw0 || fail "cannot delete siw0"
	rdma link add rxe0 type rxe netdev v0 || fail "cannot add rxe0 on v0"
	for ((i = 0; i < 100; i++)); do
		[ "$(rdma link show rxe0 2>/dev/null | grep -c ACTIVE)" = 1 ] && break
		sleep 0.1
	done
	# Each end as a default installation: the fleet's hosts all have the
	# library's rule; an iWARP-only host and a RoCE-only host (here: the
	# address each end binds picks its device).
	mixed() { # name server-ip client-ip
		local name=$1 sip=$2 cip=$3 hold=$WORK/$1.hold
		bg "$WORK/$name.s" env LD_PRELOAD="$PRELOAD" ERDMA_SHIM_CONNECT_TIMEOUT_MS=1000 \
			timeout 120 "$XFER" server "$sip" 0 --conns 3 --hold "$hold"
		local spid=$BG_PID port
		wait_for "$WORK/$name.s" '^ready ' 20
		port=$(port_of "$WORK/$name.s")
		bg "$WORK/$name.c" env LD_PRELOAD="$PRELOAD" ERDMA_SHIM_CONNECT_TIMEOUT_MS=1000 \
			timeout 120 "$XFER" client "$sip" "$port" --bind "$cip" --conns 3 \
			--size 1M --timing --hold "$hold"
		local cpid=$BG_PID
		wait_for "$WORK/$name.c" '^holding' 100
		wait_for "$WORK/$name.s" '^holding' 30
		local sq cq
		sq=$(qps "$spid")
		cq=$(qps "$cpid")
		touch "$hold"
		wait "$cpid" || fail "$name: client exited $?: $(cat "$WORK/$name.c")"
		wait "$spid" || fail "$name: server exited $?: $(cat "$WORK/$name.s")"
		grep -q ' 0 mismatched' "$WORK/$name.c" || fail "$name: bytes differ"
		[ "$sq" = 0 ] && [ "$cq" = 0 ] || fail "$name: QPs in a mixed fleet (server $sq, client $cq)"
		local first rest
		first=$(sed -n 's/^connect 0: \([0-9]*\) us/\1/p' "$WORK/$name.c")
		rest=$(sed -n 's/^connect [12]: \([0-9]*\) us/\1/p' "$WORK/$name.c" | sort -n | tail -n 1)
		[ -n "$first" ] && [ "$first" -lt 5000000 ] || fail "$name: first connect took ${first:-?} us"
		[ -n "$rest" ] && [ "$rest" -lt 500000 ] || fail "$name: later connects took up to ${rest:-?} us (negative cache?)"
		echo "PASS $name: TCP, byte-exact, no QP; first connect $((first / 1000)) ms, then <= $((rest / 1000)) ms"
		figure "mixed fleet $name: first connect $((first / 1000)) ms (probe, then TCP), later $((rest / 1000)) ms"
	}
	mixed mixed-roce-srv "$IP0" "$IP1"  # iWARP client -> RoCE server
	mixed mixed-iwarp-srv "$IP1" "$IP0" # RoCE client -> iWARP server
	restore
fi
echo "RESULT: port map +$off on $link: default and require on RDMA, own listeners bind, plain peers on TCP$([ "$link" = siw ] && echo ', mixed RoCE/iWARP on TCP')"
