#!/usr/bin/env bash
# The connect/close cycle under valgrind memcheck (issue #8): the client of
# tests/rdma/70-cycles.sh runs ERDMA_VALGRIND_CYCLES (default 100) RDMA
# connect/echo/close cycles under memcheck with the shim preloaded
# (ERDMA_SHIM=require, so every cycle is an rsocket; QPs checked while
# held).  Fails on any memcheck error whose stack has a shim frame, and on
# any definitely or indirectly lost block allocated under a shim frame.
# Leaks of librdmacm/libibverbs or libc themselves are listed, not judged.
# Not in the sanitizer pass (valgrind and ASan exclude each other).
. "$(dirname "$0")/lib/common.bash"
command -v valgrind >/dev/null || fail "valgrind not installed (make test-deps)"
N=${ERDMA_VALGRIND_CYCLES:-100}
C=$PROGS/cycles
hold=$WORK/hold
vlog=$WORK/memcheck
bg "$WORK/server" env LD_PRELOAD="$PRELOAD" ERDMA_SHIM=require timeout 280 "$C" server "$IP0" 0 "$N" --hold "$hold"
spid=$BG_PID
wait_for "$WORK/server" '^ready ' 30
# valgrind's tool is static and hands the program the LD_PRELOAD it was
# given (after its own preloads), so the shim runs inside memcheck.  RSS is
# memcheck's business here: the bound is wide, the leak check is the test.
bg "$WORK/client" env LD_PRELOAD="$PRELOAD" ERDMA_SHIM=require ERDMA_CYCLES_RSS_SLACK_KIB=262144 \
	timeout 280 valgrind --tool=memcheck \
	--leak-check=full --show-leak-kinds=definite,indirect --errors-for-leak-kinds=definite,indirect \
	--num-callers=30 --log-file="$vlog" \
	"$C" client "$IP0" "$(port_of "$WORK/server")" "$N" --hold "$hold"
cpid=$BG_PID
wait_for "$WORK/client" '^holding' 270
wait_for "$WORK/server" '^holding' 30
q="$(qps "$cpid")"
touch "$hold"
crc=0
wait "$cpid" || crc=$?
wait "$spid" || fail "server: $(cat "$WORK/server")"
grep '^client:' "$WORK/client" || fail "client (exit $crc): $(tail -n 5 "$WORK/client")"
[ "$q" = 0 ] || fail "client QPs left after every connection closed: $q"
grep -q "Memcheck, a memory error detector" "$vlog" 2>/dev/null || fail "no memcheck log (did valgrind run?)"
# One memcheck record per blank-line-separated block; the lines start "==PID==".
sed 's/^==[0-9]*== \{0,1\}//' "$vlog" >"$WORK/mc"
awk -v RS= '/liberdma_shim/' "$WORK/mc" >"$WORK/ours"
lost=$(grep -cE '(definitely|indirectly) lost in loss record' "$WORK/mc" || true)
echo "memcheck: $(grep -E 'ERROR SUMMARY|definitely lost:|indirectly lost:' "$WORK/mc" | tr '\n' ' ')"
if [ -s "$WORK/ours" ]; then
	cat "$WORK/ours"
	fail "memcheck records with a shim frame (above)"
fi
if [ "$lost" -gt 0 ]; then
	echo "leak records without a shim frame (librdmacm/libibverbs/libc, not judged):"
	grep -E 'lost in loss record' "$WORK/mc" | head -n 10
fi
figure "valgrind_cycles=$N memcheck_records_with_shim_frames=0 other_leak_records=$lost"
echo "RESULT: $N RDMA connect/close cycles under valgrind memcheck: no error or leak in the shim"
