#!/usr/bin/env bash
# Side by side with the incumbent: the real programs of this suite, run once
# with liberdma_shim (ERDMA_SHIM=require: RDMA or fail) and once with
# rdma-core's librspreload.so, each bounded in time.  Prints the
# compatibility table README carries.  The test fails if a shim case fails;
# librspreload's column is recorded as found (works / fails / hangs), with
# whether RDMA queue pairs were seen for its server while the client ran.
. "$(dirname "$0")/lib/common.bash"
RSP=${RSPRELOAD:-$(ls /usr/lib/*/rsocket/librspreload.so 2>/dev/null | head -n 1)}
[ -r "$RSP" ] || fail "librspreload.so not found (package librdmacm1 / rdma-core)"
# Bounds: the shim's runs take seconds; librspreload's failures tend to be
# hangs, each costing its whole bound (the test must fit 300 s in TCG).
# A program that does not end on SIGTERM (iperf3's handler, itself inside
# librspreload) gets SIGKILL 5 s later (timeout -k): once, a server that
# never ended held the test's wait past its 300 s.
T=${COMPAT_TIMEOUT:-90}
TR=${COMPAT_TIMEOUT_RSP:-20}
G=$ROOT/tests/rdma/lib/grpc_rdma.py
GRPC_RAW=${GRPC_RAW:-$ROOT/build/bench/grpc_raw}
F=$WORK/blob
head -c $((4 * 1024 * 1024 + 777)) /dev/urandom >"$F"
want=$(sha256sum <"$F" | cut -c1-64)
port=5400

pre_of() { # shim|rsp -> env assignments
	if [ "$1" = shim ]; then echo "LD_PRELOAD=$PRELOAD ERDMA_SHIM=require"; else echo "LD_PRELOAD=$RSP"; fi
}

# Max RC QPs of the server PID: read once while the client (CPID, log
# CLOG) holds its connections open after its work ("holding"), then released
# by creating HOLD; for clients without a hold, sampled while they run.
qps_until_held() {
	local m=0 q
	while kill -0 "$2" 2>/dev/null; do
		q=$(qps "$1")
		[ "$q" -gt "$m" ] && m=$q
		if grep -q '^holding' "$3" 2>/dev/null; then
			touch "$4"
			break
		fi
		sleep 0.05
	done
	echo "$m"
}

# why LOG: the last line that says something.
why() { grep -v '^\s*$' "$1" 2>/dev/null | tail -n 1 | cut -c1-90 | tr '|' '/'; }

# one CASE WHO READY-REGEX: runs the arrays SRV / CLI (built by
# mk_CASE) with WHO's preload on the program itself (librspreload also
# breaks a shell's own output, so no wrapper shell under it); prints a cell.
one() {
	local c=$1 who=$2 ready=$3 pre spid cpid rc m=0 i T=$T
	pre=$(pre_of "$who")
	[ "$who" = rsp ] && T=$TR
	HOLD=$WORK/hold.$c.$who
	"mk_$c"
	# shellcheck disable=SC2086
	env $pre timeout -k 5 $T "${SRV[@]}" >"$WORK/$c.$who.srv" 2>&1 &
	spid=$!
	PIDS+=("$spid")
	for ((i = 0; i < 200; i++)); do
		grep -qE "$ready" "$WORK/$c.$who.srv" 2>/dev/null && break
		kill -0 $spid 2>/dev/null || break
		sleep 0.05
	done
	if ! grep -qE "$ready" "$WORK/$c.$who.srv"; then
		kill $spid 2>/dev/null
		wait $spid 2>/dev/null
		echo "server fails: $(why "$WORK/$c.$who.srv")"
		return
	fi
	# shellcheck disable=SC2086
	env $pre timeout -k 5 $T "${CLI[@]}" >"$WORK/$c.$who.cli" 2>&1 &
	cpid=$!
	m=$(qps_until_held $spid $cpid "$WORK/$c.$who.cli" "$HOLD")
	rc=0
	wait $cpid || rc=$?
	kill $spid 2>/dev/null || true
	wait $spid 2>/dev/null || true
	if [ $rc = 0 ] && [ "$c" = curl ]; then
		[ "$(sha256sum <"$WORK/got" | cut -c1-64)" = "$want" ] || rc=99
	fi
	case $rc in
	0) if [ "$who" = shim ]; then echo "works, RDMA (require)"
	   elif [ "$m" -gt 0 ]; then echo "works, RDMA ($m server QPs seen)"
	   else echo "works, but over TCP (no QP)"; fi ;;
	99) echo "fails: body differs (sha256)" ;;
	124 | 137) echo "hangs (killed after ${T} s)" ;;
	*) echo "fails (exit $rc): $(why "$WORK/$c.$who.cli")" ;;
	esac
}

mk_xfer_block() {
	SRV=("$PROGS/xfer" server "$IP0" "$PORT" --conns 2)
	CLI=("$PROGS/xfer" client "$IP0" "$PORT" --conns 2 --size 2M --dir both --mode block --hold "$HOLD")
}
mk_xfer_epoll() {
	SRV=("$PROGS/xfer" server "$IP0" "$PORT" --conns 4 --mode epoll)
	CLI=("$PROGS/xfer" client "$IP0" "$PORT" --conns 4 --size 1M --dir both --mode epoll --hold "$HOLD")
}
mk_grpc_py() {
	SRV=(/usr/bin/python3 "$G" server "$IP0:$PORT")
	CLI=(/usr/bin/python3 "$G" client "ipv4:$IP0:$PORT" --channels 2 --max-mib 1 --quit --hold "$HOLD")
}
mk_grpc_py_poll() {
	mk_grpc_py
	SRV=(env GRPC_POLL_STRATEGY=poll "${SRV[@]}")
	CLI=(env GRPC_POLL_STRATEGY=poll "${CLI[@]}")
}
mk_grpc_c() {
	SRV=("$GRPC_RAW" --job_type server --target_ip "$IP0" --port "$PORT" --server_threads 2 --max_seconds 60)
	CLI=("$GRPC_RAW" --job_type client --target_ip "$IP0" --port "$PORT" --message_size 64K
		--total_message 64 --client_channels 2 --client_channel_concurrent 2 --verify --hold "$HOLD")
}
mk_iperf3() {
	SRV=(iperf3 --forceflush -s -1 -B "$IP0" -p "$PORT")
	CLI=(iperf3 -c "$IP0" -p "$PORT" -n 4M -P 2)
}
mk_curl() {
	SRV=("$PROGS/sendfile_http" "$IP0" "$PORT" "$F" 1)
	CLI=(curl -sS --fail -o "$WORK/got" "http://$IP0:$PORT/blob")
}

declare -A READY=([xfer_block]='^ready ' [xfer_epoll]='^ready ' [grpc_py]='^ready '
	[grpc_py_poll]='^ready ' [grpc_c]='^ready ' [iperf3]='Server listening' [curl]='^ready ')
declare -A LABEL=([xfer_block]='raw sockets, blocking threads (tests/progs/xfer)'
	[xfer_epoll]='raw sockets, epoll edge-triggered (xfer --mode epoll)'
	[grpc_py]='Python grpcio, default engine (epoll1)'
	[grpc_py_poll]='Python grpcio, GRPC_POLL_STRATEGY=poll'
	[grpc_c]='C gRPC core (bench/grpc_raw, --verify)'
	[iperf3]='iperf3 -P 2'
	[curl]='curl from a sendfile(2) HTTP server')
CASES=(xfer_block xfer_epoll grpc_py grpc_py_poll grpc_c iperf3 curl)
[ -x "$GRPC_RAW" ] || CASES=("${CASES[@]/grpc_c/}")
# The sanitizer pass (SANITIZE=1) is about the shim: librspreload's column
# is left out, and so is curl, which cannot start with libasan preloaded.
if [ "${SANITIZE:-0}" = 1 ]; then
	CASES=("${CASES[@]/curl/}")
	echo "# SANITIZE=1: shim column only; curl left out (libasan preloaded into curl deadlocks)"
fi

bad=0
echo "FIGURE: compat | program | liberdma_shim | librspreload.so (rdma-core $(dpkg-query -W -f '${Version}' librdmacm1 2>/dev/null)) |"
for c in "${CASES[@]}"; do
	[ -n "$c" ] || continue
	PORT=$((port + 1)) && export PORT
	s=$(one "$c" shim "${READY[$c]}")
	PORT=$((port + 2)) && export PORT
	r="not run (SANITIZE=1)"
	[ "${SANITIZE:-0}" = 1 ] || r=$(one "$c" rsp "${READY[$c]}")
	port=$((port + 2))
	echo "FIGURE: compat | ${LABEL[$c]} | $s | $r |"
	case $s in
	works*) echo "PASS $c: shim works on RDMA (require)" ;;
	*) echo "FAIL $c: shim: $s"; bad=$((bad + 1)) ;;
	esac
done
[ $bad = 0 ] || fail "$bad case(s) failed under the shim"
echo "RESULT: compatibility table recorded (shim: all work on RDMA; librspreload as found)"
