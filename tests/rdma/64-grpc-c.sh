#!/usr/bin/env bash
# The C gRPC bench pair (bench/grpc_raw: gRPC core C API, unary RPCs with raw
# byte buffers) over kernel TCP, then with both ends under the shim in
# ERDMA_SHIM=require (a connection that can't be RDMA fails the run): 1 B,
# 4 KiB, 1 MiB and 64 MiB messages, 4 channels x 2 RPCs in flight, 2 server
# completion queues, every payload checked (--verify: FNV-1a in metadata,
# hashed by the server).  Per mode and size: exact RPC counts on both ends,
# zero mismatches; then a run with deliberately wrong checksums must be
# caught (the check can fail).  RDMA is proven by require on both ends and by
# the server's RC QPs in `rdma res` (one per channel: at least 4) while a
# client holds its 4 channels open; kernel TCP must show none.  FIGURE lines: Gb/s, p50/p99 per size, TCP and shim.
. "$(dirname "$0")/lib/common.bash"
G=$ROOT/build/bench/grpc_raw
[ -x "$G" ] || fail "$G missing (make)"
WARM=2
# size:measured RPCs; few, the TCG bed runs at ~0.1-1 Gb/s
# (the light passes, ASan and iWARP: fewer, and 8 MiB for the largest).  At
# least 8 RPCs with the warm-up, or a channel carries none and never
# connects (its QP is counted); 64 MiB: 6+2, ~50 s each in flight here.
CASES=$(pick "1:64 4K:64 1M:16 64M:6" "1:16 4K:16 1M:8 8M:6")
BAD=3 # RPCs sent with a wrong checksum in the negative run

get() { # FILE KEY: the value of "KEY": in FILE's JSON line
	awk -v k="\"$2\":" '/^\{"bench":"grpc_raw"/ { i = index($0, k); if (!i) next
		r = substr($0, i + length(k)); sub(/^"/, "", r); sub(/[",}].*/, "", r); print r; exit }' "$1"
}
bytes_of() { case $1 in *K) echo $((${1%K} << 10)) ;; *M) echo $((${1%M} << 20)) ;; *) echo "$1" ;; esac; }

# client MODE TAG SERVERPID ARGS...: runs a client; once it has its results
# it holds its channels open (--hold) while the server's RC QPs are counted.
# Sets CRC (the client's exit status) and SQ (the server's QPs then).
client() {
	local mode=$1 tag=$2 spid=$3 pre=()
	shift 3
	[ "$mode" = shim ] && pre=(LD_PRELOAD="$PRELOAD" ERDMA_SHIM=require)
	bg "$WORK/$tag" env "${pre[@]}" timeout 150 "$G" --job_type client --target_ip "$IP0" --port "$PORT" \
		--client_channels 4 --client_channel_concurrent 2 --interval 5 --hold "$WORK/$tag.hold" "$@"
	local cpid=$BG_PID
	wait_for "$WORK/$tag" '^holding$' 150
	SQ=$(qps "$spid")
	touch "$WORK/$tag.hold"
	CRC=0
	wait "$cpid" || CRC=$?
}

run_mode() { # MODE: one server, every size, then the negative run
	local mode=$1 pre=() s n b want_msgs=0 want_bytes=0 maxq=0
	[ "$mode" = shim ] && pre=(LD_PRELOAD="$PRELOAD" ERDMA_SHIM=require)
	bg "$WORK/server.$mode" env "${pre[@]}" timeout 400 "$G" --job_type server --target_ip "$IP0" \
		--port 0 --server_threads 2 --max_seconds 300 --interval 5
	local spid=$BG_PID
	wait_for "$WORK/server.$mode" '^ready [0-9]+$' 60
	PORT=$(port_of "$WORK/server.$mode")
	for c in $CASES; do
		s=${c%%:*} n=${c#*:}
		b=$(bytes_of "$s")
		client "$mode" "c.$mode.$s" "$spid" --message_size "$s" --total_message "$n" --warmup $WARM --verify
		local f=$WORK/c.$mode.$s
		# gRPC's own words on a failed RPC come first: the tail alone
		# said only that the client gave up.
		[ "$CRC" = 0 ] || fail "$mode $s: client exit $CRC: $(grep -m4 '^grpc_raw\|^E[0-9]' "$f"; tail -4 "$f")"
		[ "$(get "$f" messages)" = "$n" ] && [ "$(get "$f" warmup_messages)" = $WARM ] &&
			[ "$(get "$f" bytes)" = $((n * b)) ] ||
			fail "$mode $s: counts: $(grep '^{' "$f")"
		[ "$(get "$f" mismatches)" = 0 ] && [ "$(get "$f" errors)" = 0 ] ||
			fail "$mode $s: mismatches/errors: $(grep '^{' "$f")"
		if [ "$mode" = shim ]; then
			# one RC QP per channel: 4 connections, all on RDMA
			((SQ >= 4)) || fail "shim $s: $SQ server QPs while the client held 4 channels: not on RDMA"
		else
			((SQ == 0)) || fail "tcp $s: $SQ QPs without the shim?"
		fi
		((SQ > maxq)) && maxq=$SQ
		want_msgs=$((want_msgs + n + WARM)) want_bytes=$((want_bytes + (n + WARM) * b))
		G_GBPS[$mode.$s]=$(get "$f" gbps) G_P50[$mode.$s]=$(get "$f" p50_us) G_P99[$mode.$s]=$(get "$f" p99_us)
		G_MPS[$mode.$s]=$(get "$f" msgs_per_s)
		echo "PASS $mode $s: $n+$WARM RPCs verified, $(get "$f" gbps) Gb/s, p50 $(get "$f" p50_us) us," \
			"p99 $(get "$f" p99_us) us, server QPs $SQ"
	done
	# Negative: the first $BAD RPCs carry a wrong checksum; the server must
	# fail exactly those, and the client must count them and exit 1.
	client "$mode" "c.$mode.bad" "$spid" --message_size 4K --total_message 16 --verify --bad_checksum $BAD
	local f=$WORK/c.$mode.bad
	[ "$CRC" = 1 ] && [ "$(get "$f" mismatches)" = $BAD ] && [ "$(get "$f" errors)" = 0 ] &&
		[ "$(get "$f" messages)" = $((16 - BAD)) ] ||
		fail "$mode: wrong checksums not caught as expected (exit $CRC): $(grep '^{' "$f")"
	want_msgs=$((want_msgs + 16)) want_bytes=$((want_bytes + 16 * 4096))
	echo "PASS $mode: $BAD wrong checksums of 16 caught by the server, counted by the client (exit 1)"
	kill -TERM "$spid"
	wait "$spid" || fail "$mode: server exit $? on SIGTERM: $(tail -3 "$WORK/server.$mode")"
	f=$WORK/server.$mode
	[ "$(get "$f" messages)" = $want_msgs ] && [ "$(get "$f" bytes)" = $want_bytes ] &&
		[ "$(get "$f" mismatches)" = $BAD ] ||
		fail "$mode: server counts (want $want_msgs RPCs, $want_bytes bytes, $BAD mismatches): $(grep '^{' "$f")"
	echo "PASS $mode server: exactly $want_msgs RPCs, $want_bytes bytes, $BAD mismatches, clean exit on SIGTERM" \
		"(CPU user $(get "$f" cpu_user_s) s sys $(get "$f" cpu_sys_s) s; max server QPs $maxq)"
}

declare -A G_GBPS G_P50 G_P99 G_MPS
T0=$(date +%s)
run_mode tcp
run_mode shim
for c in $CASES; do
	s=${c%%:*}
	figure "grpc_raw C $s (4 ch x 2, verify) in the TCG bed: TCP ${G_GBPS[tcp.$s]} Gb/s ${G_MPS[tcp.$s]} RPC/s" \
		"p50 ${G_P50[tcp.$s]} us p99 ${G_P99[tcp.$s]} us; shim ${G_GBPS[shim.$s]} Gb/s ${G_MPS[shim.$s]} RPC/s" \
		"p50 ${G_P50[shim.$s]} us p99 ${G_P99[shim.$s]} us"
done
echo "RESULT: C gRPC pair (core API) over TCP and RDMA (require, server QPs seen): 1 B..64 MiB," \
	"exact counts, zero mismatches, wrong checksums caught ($(($(date +%s) - T0)) s)"
