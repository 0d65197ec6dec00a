#!/usr/bin/env bash
# gRPC mixed fleets (python3-grpcio, unmodified): a shimmed server with a
# plain client, a plain server with a shimmed client, and one shimmed client
# switching between a shimmed and a plain server.  Every RPC must succeed;
# whatever can't be RDMA must be plain TCP, proven by the absence of QPs
# (and, for the switching client, by QPs on the shimmed server only).
. "$(dirname "$0")/lib/common.bash"
PY=/usr/bin/python3
G=$ROOT/tests/rdma/lib/grpc_rdma.py
S=(LD_PRELOAD="$PRELOAD")

server() { # NAME shim(0|1) -> SPID, SPORT
	local pre=()
	[ "$2" = 1 ] && pre=("${S[@]}")
	bg "$WORK/$1.server" env "${pre[@]}" timeout 200 $PY "$G" server "$IP0:0"
	SPID=$BG_PID
	wait_for "$WORK/$1.server" '^ready ' 60
	SPORT=$(port_of "$WORK/$1.server")
}

client() { # NAME shim(0|1) TARGETS -> CPID (holds until $WORK/NAME.hold)
	local pre=()
	[ "$2" = 1 ] && pre=("${S[@]}" ERDMA_SHIM_LOG=debug)
	bg "$WORK/$1.client" env "${pre[@]}" timeout 200 $PY "$G" client "$3" \
		--channels 2 --max-mib 1 --quit --hold "$WORK/$1.hold"
	CPID=$BG_PID
	wait_for "$WORK/$1.client" '^holding' 180
}

finish() { # NAME
	touch "$WORK/$1.hold"
	wait "$CPID" || fail "$1: client failed: $(tail -5 "$WORK/$1.client")"
	grep -q '0 failed, 0 mismatched' "$WORK/$1.client" || fail "$1: $(tail -3 "$WORK/$1.client")"
}

# 1. shimmed server, plain client: TCP
server a 1
client a 0 "$IP0:$SPORT"
q="$(qps "$SPID") $(qps "$CPID")"
finish a
wait "$SPID"
[ "$q" = "0 0" ] || fail "shimmed server + plain client: QPs $q"
echo "PASS shimmed server + plain client: all RPCs over TCP (QPs $q)"

# 2. plain server, shimmed client (auto): falls back to TCP
server b 0
client b 1 "$IP0:$SPORT"
q="$(qps "$SPID") $(qps "$CPID")"
finish b
wait "$SPID"
[ "$q" = "0 0" ] || fail "plain server + shimmed client: QPs $q"
echo "PASS plain server + shimmed client: all RPCs over TCP (QPs $q)"

# 3. one shimmed client: a shimmed server, then a plain one
server c1 1
p1=$SPORT s1=$SPID
server c2 0
p2=$SPORT s2=$SPID
client c 1 "$IP0:$p1,$IP0:$p2"
q="$(qps "$s1") $(qps "$s2")"
finish c
wait "$s1"; wait "$s2"
read -r q1 q2 <<<"$q"
[ "$q2" = 0 ] || fail "switching client: the plain server has QPs ($q)"
grep -q '^-- next server' "$WORK/c.client" || fail "switching client never switched"
# The first server's connection may be closed by the time of the QP check
# (the client moved on): the client's own account names each path.
grep -qE -- "-> $IP0:$p1: RDMA" "$WORK/c.client" || fail "switching client: no RDMA connection to the shimmed server"
grep -qE -- "-> $IP0:$p2: TCP" "$WORK/c.client" || fail "switching client: no TCP fallback to the plain server"
echo "PASS shimmed client switching shimmed -> plain server: all RPCs succeed; plain server QPs $q2"
echo "RESULT: 3 mixed-fleet gRPC scenarios succeed, each on the path it must take"
