#!/usr/bin/env bash
# runner-timeout: 480
# Unmodified Python grpcio (Debian's python3-grpcio) over RDMA by LD_PRELOAD
# alone: unary, client/server streaming and bidi RPCs, 1 B..64 MiB messages,
# 8 channels in parallel, every payload checked by sha256; and multiprocessing
# pools forked from both gRPC processes while their channels are live.  Each scenario is
# run over kernel TCP and under the shim (ERDMA_SHIM=require on both ends: a
# connection that can't be RDMA fails the run), and the transcripts must be
# identical.  The server's QPs are read from `rdma res` while the client
# holds its channels open.  (The client's QP is made by a gRPC thread that
# has exited by then, so rdma res shows it without a pid; require proves it.)
. "$(dirname "$0")/lib/common.bash"
PY=/usr/bin/python3
G=$ROOT/tests/rdma/lib/grpc_rdma.py

# diag DIR SERVER-PID: what a failed scenario leaves to read, since WORK goes
# with the test: both logs' ends and, while the server (or a pool child it
# forked) still runs, every thread's stack.
diag() {
	echo "--- client log (end):"; tail -n 15 "$1/client"
	echo "--- server log (end):"; tail -n 15 "$1/server"
	if kill -0 "$2" 2>/dev/null; then stacks "$2"; fi
}

# run NAME SHIM(0|1) BIND TARGET-TEMPLATE [client opts] [-- env...]
run() {
	local name=$1 shim=$2 bind=$3 target=$4; shift 4
	local d=$WORK/$name.$shim hold=$WORK/$name.$shim.hold pre=() envs=() copts=()
	while [ $# -gt 0 ] && [ "$1" != -- ]; do copts+=("$1"); shift; done
	[ $# -gt 0 ] && shift && envs=("$@")
	[ "$shim" = 1 ] && pre=(LD_PRELOAD="${RUN_PRELOAD:-$PRELOAD}" ERDMA_SHIM=require)
	mkdir -p "$d"
	bg "$d/server" env "${pre[@]}" "${envs[@]}" timeout 250 $PY "$G" server "$bind"
	local spid=$BG_PID
	wait_for "$d/server" '^ready ' 60
	local port
	port=$(port_of "$d/server")
	bg "$d/client" env "${pre[@]}" "${envs[@]}" timeout 250 $PY "$G" client \
		"${target//PORT/$port}" "${copts[@]}" --quit --hold "$hold"
	local cpid=$BG_PID
	wait_for "$d/client" '^holding' 240
	local sq
	sq=$(qps "$spid")
	touch "$hold"
	wait "$cpid" || { diag "$d" "$spid"; fail "$name (shim=$shim): client failed: $(tail -5 "$d/client")"; }
	wait "$spid" || { diag "$d" "$spid"; fail "$name (shim=$shim): server failed: $(tail -5 "$d/server")"; }
	if [ "$shim" = 1 ]; then
		[ "$sq" -gt 0 ] || fail "$name: server has no QP: not on RDMA"
	else
		[ "$sq" = 0 ] || fail "$name: QPs without the shim?"
	fi
	# gRPC core's own log line when its backup poller loses a race with
	# the client's shutdown is timing, not a result: seen on the kernel
	# TCP run (no shim at all) of a CI dry run.
	grep -vE '^(ready|holding)|backup_poller\.cc:[0-9]+\] +run_poller: UNKNOWN:Timer list shutdown' \
		"$d/client" >"$WORK/$name.$shim.out"
	grep -E '^server:' "$d/server" >>"$WORK/$name.$shim.out"
	echo "$sq"
}

both() { # NAME _ BIND TARGET [client opts] [-- env]
	local name=$1
	run "$1" 0 "${@:3}" >/dev/null
	local t0 t1 q
	t0=$(date +%s.%N)
	q=$(run "$1" 1 "${@:3}")
	t1=$(date +%s.%N)
	diff -u "$WORK/$name.0.out" "$WORK/$name.1.out" || fail "$name: transcript differs with the shim"
	grep -E '^client:' "$WORK/$name.1.out"
	echo "PASS $name: identical over TCP and RDMA (server QPs: $q, $(awk -v a="$t0" -v b="$t1" 'BEGIN{printf "%.1fs", b-a}'))"
}

# the main case: 8 channels, messages up to 64 MiB, epoll1 (gRPC's default)
# (the light passes, ASan and iWARP: 4 channels, up to 8 MiB)
both epoll1-ipv4 0 '[::]:0' 'ipv4:'"$IP0"':PORT' --channels "$(pick 8 4)" --max-mib "$(pick 64 8)"
# the poll engine, an ipv6: target with a v4-mapped address, a plain host:port
both poll-ipv6mapped 0 '[::]:0' 'ipv6:[::ffff:'"$IP0"']:PORT' --channels 2 --max-mib 4 -- GRPC_POLL_STRATEGY=poll
both plain-hostport 0 "$IP0:0" "$IP0:PORT" --channels 2 --max-mib 4
# multiprocessing pools forked from both gRPC processes while their RDMA
# channels are live (issue 14): the server's handlers fork a Pool(2) per
# call, first and last on each channel; the client's main thread forks one
# while its channel threads run (a data loader's shape)
#
# In the ASan pass this scenario preloads the shipped library, not the ASan
# one: GCC 12's libasan takes no lock around fork (it has no fork
# interceptor), so a pool child forked while another gRPC thread held its
# allocator's lock deadlocks in its first malloc.  Seen in the bed (1 in 12
# rounds, children spinning in __asan Quarantine::Drain) and on the host
# with libasan preloaded and no shim at all, over kernel TCP (46-forkstorm
# meets the same and tells it apart).  The shim's fork paths keep their
# ASan coverage in 45, 46 and 47; this pass still runs pool-fork over siw.
[ "${SANITIZE:-0}" = 1 ] && export RUN_PRELOAD=$ROOT/liberdma_shim.so
both pool-fork 0 '[::]:0' 'ipv4:'"$IP0"':PORT' --channels 4 --max-mib 4 --pool
echo "RESULT: python grpcio over RDMA: 4 scenarios identical to kernel TCP (one forking multiprocessing pools in both processes)"
