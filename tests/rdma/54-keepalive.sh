#!/usr/bin/env bash
# Keepalive when the peer's host vanishes (issue 15): tests/progs/kalive
# runs a server on IP0 and a client on IP1, both with SO_KEEPALIVE,
# TCP_KEEPIDLE 1 s, TCP_KEEPINTVL 1 s and TCP_KEEPCNT 2 (the server's on its
# listener, so its connection has them by inheritance), once over kernel
# TCP and once under the shim with ERDMA_SHIM=require.  The connection
# first stays idle for 3 s (probes go and are answered: it stays up and
# still carries data), then the wire between the two addresses is cut both
# ways (tc netem, 100% loss): nothing ever tells either end, and each
# end's blocked read must end with the keepalive's error within 30 s, as
# over TCP (there after about 3 s, ETIMEDOUT).  Over RDMA the probe is a
# zero-length RDMA write every TCP_KEEPIDLE seconds and the end comes when
# the QP's transport retries are spent.  The transcripts must match.
. "$(dirname "$0")/lib/common.bash"
. "$(dirname "$0")/lib/transcript.bash"

PROG=$PROGS/kalive
[ -x "$PROG" ] || fail "$PROG is not built (run make on the host first)"
declare -A KNOWN=()

dev_of() { ip -o addr show to "$1" | awk '{print $2; exit}'; }
DEV0=$(dev_of "$IP0") DEV1=$(dev_of "$IP1")
[ -n "$DEV0" ] && [ -n "$DEV1" ] || fail "no interface holds $IP0 or $IP1"
modprobe sch_netem 2>/dev/null || true
cut_wire() {
	tc qdisc add dev "$DEV0" root netem loss 100% &&
		tc qdisc add dev "$DEV1" root netem loss 100%
}
mend_wire() {
	tc qdisc del dev "$DEV0" root 2>/dev/null || true
	tc qdisc del dev "$DEV1" root 2>/dev/null || true
}
trap 'mend_wire; cleanup' EXIT

# run TAG [ENV...]: one server/client pair, the wire cut once the client
# is armed; TAG.out is the transcript (both ends, server first).
run() {
	local tag=$1 spid cpid port rc=0
	shift
	bg "$WORK/$tag.srv" env "$@" "$PROG" server "$IP0" 1 1 2
	spid=$BG_PID
	wait_for "$WORK/$tag.srv" '^ready ' 30
	port=$(port_of "$WORK/$tag.srv")
	bg "$WORK/$tag.cli" env "$@" "$PROG" client "$IP0" "$port" 1 1 2 "$IP1"
	cpid=$BG_PID
	wait_for "$WORK/$tag.cli" '^armed' 30
	wait_for "$WORK/$tag.srv" '^armed' 30
	if [ "$tag" = rdma ]; then
		QPS_C=$(qps "$cpid") QPS_S=$(qps "$spid")
	fi
	cut_wire || fail "tc netem: cannot cut the wire"
	waitb "$cpid" 45 || rc=$?
	[ "$rc" = 0 ] || echo "    $tag client exited $rc"
	rc=0
	waitb "$spid" 45 || rc=$?
	[ "$rc" = 0 ] || echo "    $tag server exited $rc"
	mend_wire
	grep -vhE '^(ready|armed)' "$WORK/$tag.srv" "$WORK/$tag.cli" |
		grep -v '^FIGURE' >"$WORK/$tag.out" || true
	grep -h '^FIGURE' "$WORK/$tag.srv" "$WORK/$tag.cli" |
		sed "s/^FIGURE: /FIGURE: $tag: /" || true
}

run tcp
run rdma LD_PRELOAD="$PRELOAD" ERDMA_SHIM=require
[ "${QPS_C:-0}" -gt 0 ] && [ "${QPS_S:-0}" -gt 0 ] ||
	fail "the shimmed connection was not on RDMA (QPs: client ${QPS_C:-0}, server ${QPS_S:-0})"
compare "$WORK/tcp.out" "$WORK/rdma.out"
if [ "$NDIFF" != 0 ]; then
	echo "--- kernel TCP:"; cat "$WORK/tcp.srv" "$WORK/tcp.cli"
	echo "--- shim:"; cat "$WORK/rdma.srv" "$WORK/rdma.cli"
	echo "RESULT: $((NCASES - NDIFF)) of $NCASES cases identical; failures: ${FAILED[*]}"
	exit 1
fi
echo "RESULT: $NCASES of $NCASES cases identical over kernel TCP and RDMA (ERDMA_SHIM=require; QPs client $QPS_C, server $QPS_S)"
