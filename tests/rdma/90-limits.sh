#!/usr/bin/env bash
# Resource limits (issue #8).
#  1. RLIMIT_MEMLOCK 64 KiB (`ulimit -l 64`, and CAP_IPC_LOCK dropped with
#     setpriv: root ignores the limit otherwise): the shimmed client's
#     connections fall back to TCP -- 0 QPs, exactly one shim warning line --
#     and move their bytes exactly (xfer, 4 connections x 1 MiB each way;
#     same summary as without the shim).
#  2. A process that connected over RDMA, then lowers its own RLIMIT_MEMLOCK
#     (relia memlock): the old connection stays RDMA and byte-exact, the new
#     one works (over TCP): its QPs while holding are exactly 1.
#  3. 512 concurrent connections in one process each side (xfer --mode epoll,
#     16 KiB each way each, ERDMA_SHIM=require): byte-exact, bounded time,
#     QPs counted.  rsocket buffers are 16 KiB here (ERDMA_SHIM_SNDBUF/RCVBUF)
#     so 1024 rsockets fit the bed's 2 GiB; RLIMIT_NOFILE is raised.
. "$(dirname "$0")/lib/common.bash"
R=$PROGS/relia
NOCAP=(setpriv --inh-caps=-ipc_lock --bounding-set=-ipc_lock --)

# --- 1 ---
memlock_run() { # MODE -> $WORK/ml.MODE.{out,err}, sets MLQ
	local m=$1 pre=() hold
	hold=$WORK/ml.$m.hold
	[ "$m" = shim ] && pre=(env LD_PRELOAD="$PRELOAD")
	bg "$WORK/mlsrv.$m" "${pre[@]}" timeout 100 "$XFER" server "$IP0" 0 --conns 4
	local sp=$BG_PID
	wait_for "$WORK/mlsrv.$m" '^ready ' 30
	( ulimit -l 64; exec "${NOCAP[@]}" "${pre[@]}" timeout 100 "$XFER" client "$IP0" \
		"$(port_of "$WORK/mlsrv.$m")" --conns 4 --size 1M --hold "$hold" ) \
		>"$WORK/ml.$m.out" 2>"$WORK/ml.$m.err" &
	local cp=$!
	PIDS+=("$cp")
	wait_for "$WORK/ml.$m.out" '^holding' 90
	MLQ=$(qps "$cp")
	touch "$hold"
	wait "$cp" || fail "memlock $m: client failed: $(cat "$WORK/ml.$m.out" "$WORK/ml.$m.err")"
	wait "$sp" || fail "memlock $m: server failed: $(cat "$WORK/mlsrv.$m")"
}
memlock_run plain
memlock_run shim
grep -v holding "$WORK/ml.plain.out" >"$WORK/a"; grep -v holding "$WORK/ml.shim.out" >"$WORK/b"
diff -u "$WORK/a" "$WORK/b" || fail "memlock: client output differs with the shim"
grep -q ', 0 mismatched' "$WORK/b" || fail "memlock: mismatched bytes: $(cat "$WORK/b")"
nw=$(grep -c '^liberdma_shim' "$WORK/ml.shim.err" || true)
figure "memlock64k_client_qps=$MLQ shim_log_lines=$nw"
sed 's/^/    shim stderr: /' "$WORK/ml.shim.err"
[ "$MLQ" = 0 ] || fail "memlock: the limited client has $MLQ QPs (not a fallback)"
[ "$nw" -eq 1 ] || fail "memlock: $nw shim lines, want exactly one warning"
echo "PASS: RLIMIT_MEMLOCK 64 KiB: TCP fallback, byte-exact, $nw shim line(s)"

# --- 2 ---
bg "$WORK/srv2" env LD_PRELOAD="$PRELOAD" ERDMA_SHIM=require timeout 100 "$R" serve "$IP0" 0 echo
wait_for "$WORK/srv2" '^ready ' 30
bg "$WORK/ml2" "${NOCAP[@]}" env LD_PRELOAD="$PRELOAD" ERDMA_SHIM_LOG=info timeout 100 "$R" memlock "$IP0" \
	"$(port_of "$WORK/srv2")" "$WORK/ml2.hold"
mp=$BG_PID
wait_for "$WORK/ml2" '^holding' 90
q2=$(qps "$mp")
touch "$WORK/ml2.hold"
wait "$mp" || { cat "$WORK/ml2"; fail "relia memlock failed"; }
grep '^ok\|^bad' "$WORK/ml2"
figure "memlock_lowered_after_connect_qps=$q2 (want 1: the old RDMA connection only)"
[ "$q2" = 1 ] || { cat "$WORK/ml2"; fail "after lowering RLIMIT_MEMLOCK: $q2 QPs, want 1"; }
echo "PASS: connection made before the limit stays RDMA; the new one works"

# --- 3 ---
N=512
ibv_devinfo -v -d rxe0 2>/dev/null | grep -E '^\s*max_(qp|cq|mr):' | tr -s ' \t' ' ' | sed 's/^/    rxe0:/'
big=(env LD_PRELOAD="$PRELOAD" ERDMA_SHIM=require ERDMA_SHIM_SNDBUF=16K ERDMA_SHIM_RCVBUF=16K)
ulimit -n 65536 || ulimit -n 8192 || true
figure "nofile_limit=$(ulimit -n)"
bg "$WORK/bsrv" "${big[@]}" timeout 170 "$XFER" server "$IP0" 0 --conns $N --mode epoll --hold "$WORK/bhold"
bsp=$BG_PID
wait_for "$WORK/bsrv" '^ready ' 30
t0=$(date +%s%3N)
bg "$WORK/bcli" "${big[@]}" timeout 160 "$XFER" client "$IP0" "$(port_of "$WORK/bsrv")" --conns $N \
	--mode epoll --size 16K --hold "$WORK/bhold"
bcp=$BG_PID
wait_for "$WORK/bcli" '^holding' 165
t1=$(date +%s%3N)
wait_for "$WORK/bsrv" '^holding' 30
sq=$(qps "$bsp"); cq=$(qps "$bcp")
touch "$WORK/bhold"
wait "$bcp" || fail "$N connections: client: $(tail -n 5 "$WORK/bcli")"
wait "$bsp" || fail "$N connections: server: $(tail -n 5 "$WORK/bsrv")"
grep -E '^(client|server):' "$WORK/bcli" "$WORK/bsrv"
figure "conns512_seconds=$(awk -v a="$t0" -v b="$t1" 'BEGIN{printf "%.1f", (b-a)/1000}') server_qps=$sq client_qps=$cq"
grep -q "^client: $N connections, .* 0 mismatched" "$WORK/bcli" || fail "$N connections: not all byte-exact"
[ "$sq" -ge "$N" ] && [ "$cq" -ge "$N" ] || fail "$N connections: QPs server $sq client $cq (want >= $N each)"
echo "RESULT: memlock fallback exact with $nw line(s); pre-limit connection kept; $N concurrent RDMA connections byte-exact"
