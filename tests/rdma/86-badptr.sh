#!/usr/bin/env bash
# Bad pointers and lengths on an RDMA connection (issue #8): the transcript
# of tests/progs/relia badptr (NULL/unmapped buffers, bad lengths and flags on
# send/recv/read/write/sendmsg/recvmsg/getsockopt/setsockopt/getsockname/
# getpeername/connect/accept/shutdown) must be the same over kernel TCP (no
# shim) and over RDMA (shim on both ends; the server under require, the
# client in auto mode because its accept() cases use a loopback listener,
# which require would refuse; its debug log proves the connection is RDMA).
# A case that crashes or hangs ends the transcript with a CRASH/HANG line.
# The host twin is tests/host/80-badptr.sh.
. "$(dirname "$0")/lib/common.bash"
R=$PROGS/relia
# Under ASan its own accept() interceptor reads *addrlen before the call,
# so an unmapped addrlen faults there, shim or not: that case is stepped
# over (in both transcripts) in the sanitizer pass.
[ "${SANITIZE:-0}" = 1 ] && export RELIA_BADPTR_SKIP="accept addrlen bad"

for m in plain shim; do
	pre=() cpre=()
	[ "$m" = shim ] && pre=(env LD_PRELOAD="$PRELOAD" ERDMA_SHIM=require) &&
		cpre=(env LD_PRELOAD="$PRELOAD" ERDMA_SHIM_LOG=debug)
	bg "$WORK/srv.$m" "${pre[@]}" timeout 100 "$R" serve "$IP0" 0 echo
	spid=$BG_PID
	wait_for "$WORK/srv.$m" '^ready ' 30
	rc=0
	"${cpre[@]}" timeout 60 "$R" badptr "$IP0" "$(port_of "$WORK/srv.$m")" >"$WORK/$m" 2>"$WORK/$m.err" || rc=$?
	echo "rc=$rc" >>"$WORK/$m"
	kill "$spid" 2>/dev/null || true
done
grep -qE "fd [0-9]+ -> $IP0:[0-9]+: RDMA\$" "$WORK/shim.err" ||
	{ cat "$WORK/shim.err"; fail "the shimmed client's connection was not RDMA"; }
grep -qx 'rc=0' "$WORK/plain" || { cat "$WORK/plain"; fail "relia badptr fails on kernel TCP"; }
if ! diff -u "$WORK/plain" "$WORK/shim" >"$WORK/diff"; then
	cat "$WORK/diff"; cat "$WORK/shim.err"
	fail "bad-argument results differ on RDMA"
fi
n=$(grep -c ' errno=E' "$WORK/plain")
figure "badptr_cases=$n"
echo "RESULT: $n bad-argument calls: same result and errno over kernel TCP and RDMA"
