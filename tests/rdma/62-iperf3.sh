#!/usr/bin/env bash
# iperf3 (Debian's, unmodified), 4 parallel streams, both directions (-R),
# over kernel TCP and then with both ends under the shim in ERDMA_SHIM=require
# (its control and data connections can only be RDMA).  The sender must
# report the bytes asked for, give or take iperf3's own accounting: per
# select() it makes up to 10 send rounds over the writable streams and
# compares the total with -n before each send except in the last round, so
# a total reached in an earlier round is overshot by one block (128 KiB) on
# every writable stream (a CI run over siw: exactly 32 MiB + 4 x 128 KiB;
# kernel TCP can do the same, it depends on which round reaches the total).  The receiver's
# count is checked loosely, since iperf3 stops counting at its end-of-test
# message even over kernel TCP (esnet/iperf #382).
. "$(dirname "$0")/lib/common.bash"
BYTES=$((32 * 1024 * 1024))
PORT=5301
STREAMS=4 BLOCK=131072
# what iperf3 may report sent for -n BYTES (above)
sent_ok() { [ "$1" -ge $BYTES ] && [ "$1" -le $((BYTES + STREAMS * BLOCK)) ]; }

one() { # shim(0|1) R(""|-R) -> prints "sent received Gbps"
	local pre=() tag=$1${2:-fwd}
	[ "$1" = 1 ] && pre=(LD_PRELOAD="$PRELOAD" ERDMA_SHIM=require)
	bg "$WORK/s.$tag" env "${pre[@]}" timeout 200 iperf3 --forceflush -s -1 -B "$IP0" -p $PORT
	local spid=$BG_PID
	wait_for "$WORK/s.$tag" 'Server listening' 30
	env "${pre[@]}" timeout 200 iperf3 -c "$IP0" -p $PORT -n $BYTES -P $STREAMS $2 -J >"$WORK/c.$tag" 2>"$WORK/e.$tag" ||
		fail "iperf3 client (shim=$1 $2) failed: $(tail -5 "$WORK/e.$tag" "$WORK/c.$tag")"
	wait "$spid" || fail "iperf3 server (shim=$1 $2) exited $?: $(tail -5 "$WORK/s.$tag")"
	/usr/bin/python3 - "$WORK/c.$tag" <<'PY'
import json, sys
e = json.load(open(sys.argv[1]))["end"]
print(e["sum_sent"]["bytes"], e["sum_received"]["bytes"], round(e["sum_received"]["bits_per_second"] / 1e9, 3))
PY
}

for R in "" -R; do
	read -r s0 r0 g0 <<<"$(one 0 "$R")"
	read -r s1 r1 g1 <<<"$(one 1 "$R")"
	sent_ok "$s0" || fail "kernel TCP ${R:-forward}: sent $s0, asked $BYTES"
	sent_ok "$s1" || fail "shim ${R:-forward}: sent $s1, asked $BYTES"
	[ "$r1" -ge $((BYTES * 3 / 4)) ] && [ "$r1" -le "$s1" ] ||
		fail "shim ${R:-forward}: received $r1 of $s1"
	echo "PASS iperf3 -P 4 ${R:-(forward)}: TCP sent $s0 received $r0 ($g0 Gb/s); RDMA sent $s1 received $r1 ($g1 Gb/s)"
	figure "iperf3 -P 4 ${R:-forward} in the TCG bed: kernel TCP $g0 Gb/s, shim over RDMA $g1 Gb/s"
done
echo "RESULT: iperf3 both directions, 4 streams: the bytes asked for sent (within iperf3's one block per stream) and received, over kernel TCP and over RDMA (require)"
