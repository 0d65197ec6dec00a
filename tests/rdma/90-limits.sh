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
#  3. 1,024 concurrent connections in one process each side (512 in the
#     light ASan pass; issue 18; xfer --mode epoll,
#     16 KiB each way each, ERDMA_SHIM=require): byte-exact, bounded time,
#     QPs counted.  rsocket buffers are 16 KiB here (ERDMA_SHIM_SNDBUF/RCVBUF)
#     so 2,048 rsockets fit the bed's 2 GiB (MemAvailable is a figure);
#     RLIMIT_NOFILE is raised.
#  4. RLIMIT_NOFILE 256 on one side (`ulimit -n 256`), 80 connections of
#     64 KiB each way (xfer --mode epoll): over TCP they fit; the shim's RDMA
#     connections take 4 fds each that the program never sees, so they keep
#     to ERDMA_SHIM_FD_SHARE (50%) of the limit: exactly 32 RDMA
#     connections (QPs), the other 48 on TCP, the same output as without
#     the shim, and one shim line on the limited side, none on the other.
#     Both ways: the client limited (its connects fall back), then the
#     server (rsockets' listen thread is refused the channel and rejects:
#     the client falls back at once).
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

# --- 4 ---
FDN=80 FDLIM=256 FDQ=32 # FDQ = FDLIM x 50% / 4 fds a connection
fd_run() { # NAME LIMITED(client|server) SHIM(0|1) -> $WORK/fd.NAME.{cli,srv}{,.err}; FDQP
	local n=$1 lim=$2 pre=() sl=() cl=() w=$WORK/fd.$1 sp cp
	[ "$3" = 1 ] && pre=(env LD_PRELOAD="$PRELOAD")
	if [ "$lim" = server ]; then sl=(prlimit --nofile=$FDLIM --); else cl=(prlimit --nofile=$FDLIM --); fi
	"${sl[@]}" "${pre[@]}" timeout 100 "$XFER" server "$IP0" 0 --conns $FDN --mode epoll \
		--hold "$w.hold" >"$w.srv" 2>"$w.srv.err" &
	sp=$!
	PIDS+=("$sp")
	wait_for "$w.srv" '^ready ' 30
	"${cl[@]}" "${pre[@]}" timeout 100 "$XFER" client "$IP0" "$(port_of "$w.srv")" --conns $FDN \
		--mode epoll --size 64K --hold "$w.hold" >"$w.cli" 2>"$w.cli.err" &
	cp=$!
	PIDS+=("$cp")
	wait_for "$w.cli" '^holding' 90
	wait_for "$w.srv" '^holding' 30
	if [ "$lim" = server ]; then FDQP=$(qps "$sp"); else FDQP=$(qps "$cp"); fi
	touch "$w.hold"
	wait "$cp" || fail "fd limit $n: client failed: $(cat "$w.cli" "$w.cli.err")"
	wait "$sp" || fail "fd limit $n: server failed: $(cat "$w.srv" "$w.srv.err")"
}
for lim in client server; do
	fd_run "$lim.plain" $lim 0
	fd_run "$lim.shim" $lim 1
	for f in cli srv; do
		grep -v '^holding\|^ready' "$WORK/fd.$lim.plain.$f" >"$WORK/a"
		grep -v '^holding\|^ready' "$WORK/fd.$lim.shim.$f" >"$WORK/b"
		diff -u "$WORK/a" "$WORK/b" || fail "fd limit on the $lim: $f output differs with the shim"
	done
	grep -q ", 0 mismatched" "$WORK/fd.$lim.shim.cli" || fail "fd limit on the $lim: mismatched bytes"
	if [ $lim = server ]; then le=srv oe=cli; else le=cli oe=srv; fi
	nl=$(grep -c '^liberdma_shim' "$WORK/fd.$lim.shim.$le.err" || true)
	no=$(grep -c '^liberdma_shim' "$WORK/fd.$lim.shim.$oe.err" || true)
	figure "nofile${FDLIM}_${lim}_limited_qps=$FDQP shim_lines=$nl other_side_lines=$no"
	sed 's/^/    shim stderr ('$lim'): /' "$WORK/fd.$lim.shim.$le.err"
	[ "$FDQP" = $FDQ ] || fail "fd limit on the $lim: $FDQP RDMA connections, want $FDQ (50% of $FDLIM fds, 4 each)"
	[ "$nl" = 1 ] && grep -q 'ERDMA_SHIM_FD_SHARE' "$WORK/fd.$lim.shim.$le.err" ||
		fail "fd limit on the $lim: $nl shim lines, want exactly the one about ERDMA_SHIM_FD_SHARE"
	[ "$no" = 0 ] || fail "fd limit on the $lim: the other side said $no lines"
	echo "PASS: RLIMIT_NOFILE $FDLIM on the $lim: $FDQ of $FDN connections on RDMA, the rest TCP, byte-exact, one line"
done

# --- 3 ---
N=$(pick 1024 512) # the ASan pass (light): 512
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
memav=$(awk '/^MemAvailable/{print $2}' /proc/meminfo)
touch "$WORK/bhold"
wait "$bcp" || fail "$N connections: client: $(tail -n 5 "$WORK/bcli")"
wait "$bsp" || fail "$N connections: server: $(tail -n 5 "$WORK/bsrv")"
grep -E '^(client|server):' "$WORK/bcli" "$WORK/bsrv"
figure "conns${N}_seconds=$(awk -v a="$t0" -v b="$t1" 'BEGIN{printf "%.1f", (b-a)/1000}') server_qps=$sq client_qps=$cq mem_available_kib=$memav"
grep -q "^client: $N connections, .* 0 mismatched" "$WORK/bcli" || fail "$N connections: not all byte-exact"
[ "$sq" -ge "$N" ] && [ "$cq" -ge "$N" ] || fail "$N connections: QPs server $sq client $cq (want >= $N each)"
echo "RESULT: memlock fallback exact with $nw line(s); pre-limit connection kept; $N concurrent RDMA connections byte-exact; fd limit: $FDQ of $FDN on RDMA, byte-exact, one line"
