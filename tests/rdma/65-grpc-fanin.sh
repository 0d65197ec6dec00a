#!/usr/bin/env bash
# runner-timeout: 480
# gRPC fan-in (issue 18): one server, 4 client processes of 64 channels each
# (256 connections: every channel has its own, by a distinct channel argument
# and a local subchannel pool), all under the shim in ERDMA_SHIM=require --
# first a Python grpcio echo server, then the C-core server of bench/grpc_raw,
# both with Python grpcio clients (tests/rdma/lib/grpc_fanin.py).  Each
# channel makes 4 unary RPCs (1 B..16 KiB), all in flight at once, every one
# checked at both ends: echo compares the response with the request and the
# server checks a sha256; raw has grpc_raw's server check an FNV-1a of the
# payload and the client compare the response with grpc_raw's bytes.  One
# client adds 2 RPCs with a wrong checksum, which each server must refuse.
# While every client holds its channels open: the server's RC QPs in
# `rdma res` (at least 256), and `erdma-shim stat` of every process -- each
# client has exactly 64 RDMA connections to the server and none on TCP, the
# server exactly 256 RDMA ones; once the clients exit, the server closes all
# 256 (each read saw its end).  Then exact RPC and byte counts at the server.
# rsocket buffers are 32 KiB (ERDMA_SHIM_SNDBUF/RCVBUF) so 512 rsockets fit
# the bed's memory, and RLIMIT_NOFILE is raised (4 fds per RDMA connection).
. "$(dirname "$0")/lib/common.bash"
PY=/usr/bin/python3
F=$ROOT/tests/rdma/lib/grpc_fanin.py
G=$ROOT/build/bench/grpc_raw
CLI=$ROOT/erdma-shim
[ -x "$G" ] || fail "$G missing (make)"
[ -x "$CLI" ] || fail "$CLI missing (make)"
NP=4                 # client processes
CH=$(pick 64 16)     # channels (connections) per process
K=$(pick 4 2)        # RPCs per channel
BAD=2                # RPCs with a wrong checksum, from client 0
N=$((NP * CH))
SH=(env LD_PRELOAD="$PRELOAD" ERDMA_SHIM=require ERDMA_SHIM_SNDBUF=32K ERDMA_SHIM_RCVBUF=32K)
ulimit -n 65536 || ulimit -n 8192 || true

ms() { date +%s%3N; }
secs() { awk -v a="$1" -v b="$2" 'BEGIN{printf "%.1f", (b-a)/1000}'; } # T0 T1 (ms)
child() { cat /proc/"$1"/task/*/children 2>/dev/null | awk '{print $1; exit}'; } # timeout's child
kib() { awk -v k="$2:" '$1 == k {print $2}' /proc/"$1"/status; }

# held LOG PID SECS: until the client says "holding"; fails at once when it
# exited first, and with every thread's stack when it did neither in time.
held() {
	local i
	for ((i = 0; i < $3 * 20; i++)); do
		grep -qx holding "$1" && return 0
		kill -0 "$2" 2>/dev/null || break
		sleep 0.05
	done
	grep -qx holding "$1" && return 0
	kill -0 "$2" 2>/dev/null && stacks "$2"
	fail "${1##*/}: no 'holding' ($(kill -0 "$2" 2>/dev/null && echo "after $3 s" || echo exited)): $(tail -5 "$1")"
}

# fanin NAME KIND SPID PORT: NP clients against the server; checks the
# connections while they hold them, then each client's account.  Sets
# OUT_BYTES (all clients' request bytes), SQ (the server's QPs) and LAPS.
fanin() {
	local name=$1 kind=$2 spid=$3 port=$4 p cpids=() t0 t1 c sp n
	t0=$(ms)
	for ((p = 0; p < NP; p++)); do
		bg "$WORK/$name.c$p" "${SH[@]}" timeout 300 $PY "$F" client "ipv4:$IP0:$port" --kind "$kind" \
			--proc $p --channels "$CH" --rpcs "$K" --bad $((p ? 0 : BAD)) --hold "$WORK/$name.hold"
		cpids+=("$BG_PID")
	done
	for ((p = 0; p < NP; p++)); do held "$WORK/$name.c$p" "${cpids[p]}" 290; done
	t1=$(ms)
	SQ=$(qps "$spid")
	timeout 60 "$CLI" stat >"$WORK/$name.stat" || fail "$name: erdma-shim stat: exit $?"
	sp=$(child "$spid")
	figure "$name: server VmRSS $(kib "$sp" VmRSS) KiB VmPin $(kib "$sp" VmPin) KiB with $N connections;" \
		"MemAvailable $(awk '$1 == "MemAvailable:" {print $2}' /proc/meminfo) KiB"
	# each client's account (printed before it holds)
	OUT_BYTES=0
	for ((p = 0; p < NP; p++)); do
		c=$WORK/$name.c$p
		grep -qx "client $p: $CH channels x $K RPCs: $((CH * K)) ok, 0 failed, 0 mismatched;.* refused $((p ? 0 : BAD))/$((p ? 0 : BAD))" "$c" ||
			fail "$name: client $p: $(grep -v '^holding' "$c" | tail -5)"
		OUT_BYTES=$((OUT_BYTES + $(sed -n 's/.* bytes out \([0-9]*\) in .*/\1/p' "$c")))
	done
	# every process's own table: each client's channels are its own RDMA
	# connections to the server, none on TCP; the server has all of them
	for ((p = 0; p < NP; p++)); do
		c=$(child "${cpids[p]}")
		n=$(awk -v c="$c" -v s="$IP0:$port" '$1 == c && $3 == "rdma" && $5 == s' "$WORK/$name.stat" | wc -l)
		[ "$n" = "$CH" ] || fail "$name: client $p (pid $c) has $n RDMA connections to $IP0:$port (want $CH)"
		n=$(awk -v c="$c" '$1 == c && $3 == "tcp"' "$WORK/$name.stat" | wc -l)
		[ "$n" = 0 ] || fail "$name: client $p has $n TCP connections"
	done
	n=$(awk -v c="$sp" '$1 == c && $3 == "rdma"' "$WORK/$name.stat" | wc -l)
	[ "$n" = "$N" ] || fail "$name: the server (pid $sp) has $n RDMA connections (want $N)"
	n=$(awk -v c="$sp" '$1 == c && $3 == "tcp"' "$WORK/$name.stat" | wc -l)
	[ "$n" = 0 ] || fail "$name: the server has $n TCP connections"
	((SQ >= N)) || fail "$name: $SQ server QPs while $N channels were held: not all on RDMA"
	touch "$WORK/$name.hold"
	for ((p = 0; p < NP; p++)); do
		wait "${cpids[p]}" || fail "$name: client $p exit $?: $(grep -v '^holding' "$WORK/$name.c$p" | tail -5)"
	done
	LAPS="clients to all held $(secs "$t0" "$t1") s, closed and gone $(secs "$t1" "$(ms)") s"
	grep -h ' times: ' "$WORK/$name".c* | sed 's/^/    /'
	echo "PASS $name: $NP clients x $CH channels x $K RPCs all ok, $BAD wrong checksums refused;" \
		"$N RDMA connections (stat), server QPs $SQ"
}

# stopped PID SECS: PID's exit status once it ends; a server that outlives
# its SIGTERM by SECS is a hang: its native stacks (waitb) and Python threads
# (faulthandler, SIGUSR1; Python servers only) are printed, all of it killed.
stopped() {
	local pid=$1 kids c i rc=0
	kids=$(tree "$pid")
	c=$(child "$pid")
	waitb "$pid" "$2" || rc=$?
	((rc == 124)) || return $rc
	# what the shim still holds for it: connections gRPC did not close
	echo "--- the server's sockets (erdma-shim stat), by path:"
	timeout 20 "$CLI" stat 2>&1 | awk -v c="$c" '$1 == c {print $3}' | sort | uniq -c
	if [[ "$(tr '\0' ' ' </proc/"$c"/cmdline 2>/dev/null)" == "$PY "* ]]; then
		kill -USR1 "$c" 2>/dev/null
		# faulthandler names the thread it runs on "Current thread"
		for ((i = 0; i < 100; i++)); do grep -qE '^(Current thread|Thread) 0x' "$SLOG" && break; sleep 0.05; done
		echo "--- Python threads:"; sed -En '/^(Current thread|Thread) 0x/,$p' "$SLOG"
	fi
	# shellcheck disable=SC2086 # a list of pids
	kill -KILL $kids 2>/dev/null
	fail "${SLOG##*/}: still running $2 s after SIGTERM: $(grep -v '^ *File\|^Thread\|^Current' "$SLOG" | tail -3)"
}

# drained NAME SPID SECS: the server closes every connection once its
# clients are gone, as it does over TCP when each read sees the end: a
# connection it still holds after SECS missed its end (what would keep a
# graceful stop waiting), reported with the table and the stacks.  Sets
# DRAINED (seconds it took).
drained() {
	local sp n=0 t0
	t0=$(ms)
	sp=$(child "$2")
	# by the clock: each look runs the CLI, which takes its own time
	while (($(ms) - t0 < $3 * 1000)); do
		n=$(timeout 20 "$CLI" stat "$sp" 2>/dev/null | awk -v c="$sp" '$1 == c && ($3 == "rdma" || $3 == "tcp")' | wc -l)
		if ((n == 0)); then
			DRAINED=$(secs "$t0" "$(ms)")
			return 0
		fi
		sleep 0.1
	done
	timeout 20 "$CLI" stat "$sp" | head -20
	stacks "$2"
	fail "$1: the server still holds $n connection(s) $3 s after its clients exited"
}

# one_server NAME KIND CMD...: CMD (a server printing "ready PORT") under
# the shim, the fan-in against it, then SIGTERM; sets SLOG (its output).
one_server() {
	local name=$1 kind=$2 t0 t1 t2 t3 spid
	shift 2
	SLOG=$WORK/$name.server
	t0=$(ms)
	bg "$SLOG" "${SH[@]}" timeout 400 "$@"
	spid=$BG_PID
	wait_for "$SLOG" '^ready [0-9]+$' 90
	t1=$(ms)
	fanin "$name" "$kind" "$spid" "$(port_of "$SLOG")"
	drained "$name" "$spid" 30
	t2=$(ms)
	kill -TERM "$spid"
	stopped "$spid" 60 || fail "$name server: exit $?: $(tail -5 "$SLOG")"
	t3=$(ms)
	figure "$name: $(secs "$t0" "$t3") s: server up $(secs "$t0" "$t1") s, $LAPS, server closed all $DRAINED s later, stopped $(secs "$t2" "$t3") s"
}

T0=$(date +%s)
one_server py echo $PY "$F" server "$IP0:0"
want="server: rpcs $((N * K + BAD)) bytes $OUT_BYTES mismatches $BAD"
grep -qx "$want" "$SLOG" || fail "python server: want '$want': $(tail -3 "$SLOG")"
echo "PASS python server: exactly $((N * K + BAD)) RPCs, $OUT_BYTES bytes, $BAD mismatches (the wrong checksums)"

one_server c raw "$G" --job_type server --target_ip "$IP0" --port 0 --server_threads 2 --interval 600
grep -q "^{\"bench\":\"grpc_raw\",\"side\":\"server\",.*\"messages\":$((N * K + BAD)),\"bytes\":$OUT_BYTES,\"mismatches\":$BAD,\"errors\":0," \
	"$SLOG" || fail "C server: want $((N * K + BAD)) RPCs, $OUT_BYTES bytes, $BAD mismatches: $(grep '^{' "$SLOG")"
echo "PASS C server: exactly $((N * K + BAD)) RPCs, $OUT_BYTES bytes, $BAD mismatches (the wrong checksums)"
echo "RESULT: Python and C gRPC servers each served $NP processes x $CH channels on $N RDMA connections" \
	"(require, stat, server QPs), $((N * K)) RPCs verified each, wrong checksums refused ($(($(date +%s) - T0)) s)"
