#!/usr/bin/env bash
# The same randomized workload over kernel TCP and under the shim, every
# byte compared (issue 42): tests/progs/integrity echoes length-prefixed
# messages of 1 B to 1 MiB, written with write/send/writev/sendmsg and read
# with partial recvs, MSG_WAITALL, MSG_PEEK then recv and readv; sessions
# served on threads or in fork children (the connection handed over at the
# fork), some forking a helper mid-session; sessions ended by shutdowns or
# by a client that closes in the middle of a message; SIGALRM every 3 ms,
# taken as PostgreSQL's postmaster takes its signals (the defect of issue
# 42: a handler on a thread the program did not make is counted).  Each
# seed runs once over kernel TCP and once under ERDMA_SHIM=require (every
# connection RDMA; the client threads and the server are one process), and
# the transcripts must be identical.
#
# First, the door under signals: seeds of 4 sessions with SIGALRM every
# 100 us, so that the signal lands inside the calls the listener's first
# poll makes into rsockets.  rdma-core 44 reads its service thread's answer
# with one read() it never retries on EINTR: rlisten joined a service
# thread that never exits, and every connect of the process waited (4 of
# 20 seeds of the 3 ms workload in the bed; of these seeds 4 of 6 hung and
# 1 crashed before the fix: rsocket_glue/glue_int.h, LIB_CALL_QUIET).
#
# Then seeds of SESSIONS until ERDMA_INTEGRITY_SECONDS (45, light 15; make
# soak: the soak's length) are spent in all, at least one.  A hang prints
# every thread's stack (waitb) and fails the seed.
. "$(dirname "$0")/lib/common.bash"
P=$PROGS/integrity
[ -x "$P" ] || fail "$P is not built"
SECS=${ERDMA_INTEGRITY_SECONDS:-$(pick 45 15)}
SESS=$(pick 24 12)
t_end=$(($(date +%s) + SECS))
seeds=0 fails=0
base=${ERDMA_INTEGRITY_SEED:-$(date +%s)}
echo "seeds from $base (ERDMA_INTEGRITY_SEED=$base repeats this run)"

# one SEED SESSIONS ALARM_US HANG_S: the seed over kernel TCP, then under
# the shim; counts it, and a difference or a hang in fails
one() {
	local seed=$1 sess=$2 al=$3 hang=$4 rc=0 t=$WORK/tcp.$1.$3 r=$WORK/rdma.$1.$3
	timeout -k 5 150 "$P" "$IP0" "$seed" "$sess" 3 "$al" >"$t" 2>"$t.err" || rc=$?
	[ "$rc" = 0 ] || fail "seed $seed over kernel TCP: exit $rc: $(tail -n 3 "$t.err")"
	grep -q '^done$' "$t" || fail "seed $seed: the kernel TCP run did not finish"
	grep -q 'threads the program did not make: 0$' "$t" ||
		fail "seed $seed: over kernel TCP a signal ran on a thread the program did not make?"
	env LD_PRELOAD="$PRELOAD" ERDMA_SHIM=require \
		"$P" "$IP0" "$seed" "$sess" 3 "$al" >"$r" 2>"$r.err" &
	waitb $! "$hang" || rc=$?
	seeds=$((seeds + 1))
	if [ "$rc" != 0 ] || ! cmp -s "$t" "$r"; then
		echo "FAIL seed $seed, $sess sessions, SIGALRM every $al us (exit $rc$([ "$rc" = 124 ] && echo ": a hang")): what differs from kernel TCP:"
		diff "$t" "$r" | head -n 20
		tail -n 5 "$r.err"
		fails=$((fails + 1))
	fi
}

for ((i = 0; i < $(pick 8 4); i++)); do
	one $((base + 1000000 + i)) 4 100 60
	[ "$fails" = 0 ] || break
done
door=$seeds
[ "$fails" = 0 ] || fail "the door under signals: $fails of $door seeds differ from kernel TCP or hung"
echo "the door under signals: $door seeds of 4 sessions (SIGALRM every 100 us) identical"

for ((i = 0; ; i++)); do
	one $((base + i)) "$SESS" 3000 150
	[ "$(date +%s)" -lt "$t_end" ] || break
done
bytes=$(cat "$WORK"/tcp.*.3000 | grep -o '[0-9]* bytes sent' | awk '{s += $1} END {print s + 0}')
forks=$(cat "$WORK"/rdma.*.err | grep -o '[0-9]* of [0-9]* sessions served in fork' | awk '{s += $1} END {print s + 0}')
figure "integrity: $door seeds x 4 sessions at SIGALRM/100us, $((seeds - door)) seeds x $SESS sessions, $bytes bytes each way, $forks sessions served in fork children"
[ "$fails" = 0 ] || fail "$fails of $seeds seeds differ from kernel TCP"
echo "RESULT: $seeds seeds identical over kernel TCP and RDMA (ERDMA_SHIM=require)"
