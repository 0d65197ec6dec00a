#!/bin/bash
# rdma-core's rstream (rsockets) moves 100 x 1 MiB each way from DEV1 (.2) to
# DEV0 (.1) (rxe or, with ERDMA_BED_LINK=siw, siw), and both processes are
# seen holding RC queue pairs while it runs.
set -eu
. "$(dirname "$0")/lib/bed.bash"

port=7471
# siw has no hardware counters and reports its live QPs as RESET: on the
# iWARP bed the packets are counted on the netdevs (siw's traffic is TCP
# there) and any RC QP of the process counts.
qstate=RTS
[ "${ERDMA_BED_LINK:-rxe}" = siw ] && qstate=
pkts() { # DEV sent|rcvd
	if [ "${ERDMA_BED_LINK:-rxe}" = siw ]; then
		local nd
		nd=$(rdma link show "$1/1" 2>/dev/null | awk '{print $NF}')
		cat "/sys/class/net/$nd/statistics/$([ "$2" = sent ] && echo tx || echo rx)_packets"
	else
		rxe_counter "$1" "$2_pkts"
	fi
}
sent1=$(pkts "$DEV1" sent)
rcvd0=$(pkts "$DEV0" rcvd)

bg 90 rstream -b "$IP0" -p $port -S 1048576 -C 100 >"$T/server.log" 2>&1
server=$BG_PID
wait_until 20 "rstream server listening on $IP0:$port" rs_listening "$IP0" $port

bg 90 rstream -s "$IP0" -b "$IP1" -p $port -S 1048576 -C 100 >"$T/client.log" 2>&1
client=$BG_PID

# Proof that it runs on RDMA: both ends own connected (RTS) RC QPs while the
# client runs. Polled (bounded) until both are seen or the client finished.
sqp= cqp=
for ((i = 0; i < 1200; i++)); do
	[ -n "$sqp" ] || sqp=$(qp_lines "$server" $qstate)
	[ -n "$cqp" ] || cqp=$(qp_lines "$client" $qstate)
	[ -n "$sqp" ] && [ -n "$cqp" ] && break
	alive "$client" || break
	sleep 0.05
done

crc=0 src=0
wait "$client" || crc=$?
wait "$server" || src=$?
show() { echo "--- $1"; sed 's/^/    /'; }
show server <"$T/server.log"
show client <"$T/client.log"
show "server QPs" <<<"$sqp"
show "client QPs" <<<"$cqp"
[ $crc -eq 0 ] || fail "rstream client exited $crc"
[ $src -eq 0 ] || fail "rstream server exited $src"
[ -n "$sqp" ] || fail "no RC QP seen for the rstream server"
[ -n "$cqp" ] || fail "no RC QP seen for the rstream client"
grep -q "$DEV0/" <<<"$sqp" || fail "server QP not on $DEV0"

# The traffic crossed from rxe1 to rxe0 (not a loopback inside one device).
dsent=$(($(pkts "$DEV1" sent) - sent1))
drcvd=$(($(pkts "$DEV0" rcvd) - rcvd0))
[ $dsent -gt 1000 ] && [ $drcvd -gt 1000 ] ||
	fail "packet counters barely moved ($DEV1 sent $dsent, $DEV0 received $drcvd)"

# rstream prints: name bytes xfers iters total time Gb/sec usec/xfer
read -r _ bytes xfers _ total secs gbps usec < <(awk 'NR==2' "$T/client.log") ||
	fail "no result line from the rstream client"
echo "RESULT: rstream $xfers x $bytes ($total) $IP1->$IP0 in $secs: $gbps Gb/s, $usec us/xfer;" \
	"QPs server $(awk '{print $2 "#" $4}' <<<"$sqp" | head -1) client $(awk '{print $2 "#" $4}' <<<"$cqp" | head -1);" \
	"pkts $DEV1->$DEV0 $dsent"
