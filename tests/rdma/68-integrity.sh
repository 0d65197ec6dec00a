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
# the transcripts must be identical.  Seeds run until ERDMA_INTEGRITY_SECONDS
# (45, light 15; make soak: the soak's length) are spent, at least one.
#
# Run by make soak, not make test: it finds an open defect (docs/limits.md,
# "Open"): with the clients and the listener in one process, a door that
# opens while the process's own clients connect, or three connects at once,
# can leave every connect of the process waiting -- about one seed in three
# here.  make test must not fail by chance; this test stays where it finds it.
. "$(dirname "$0")/../lib/common.bash"
P=$PROGS/integrity
[ -x "$P" ] || fail "$P is not built"
SECS=${ERDMA_INTEGRITY_SECONDS:-$(pick 45 15)}
SESS=$(pick 24 12)
t_end=$(($(date +%s) + SECS))
seeds=0 fails=0
base=${ERDMA_INTEGRITY_SEED:-$(date +%s)}
echo "seeds from $base (ERDMA_INTEGRITY_SEED=$base repeats this run)"
while :; do
	seed=$((base + seeds))
	rc=0
	timeout -k 5 150 "$P" "$IP0" "$seed" "$SESS" >"$WORK/tcp.$seed" 2>"$WORK/tcp.$seed.err" || rc=$?
	[ "$rc" = 0 ] || fail "seed $seed over kernel TCP: exit $rc: $(tail -n 3 "$WORK/tcp.$seed.err")"
	rc=0
	# a hang prints every thread's stack (waitb), then fails the seed
	env LD_PRELOAD="$PRELOAD" ERDMA_SHIM=require \
		"$P" "$IP0" "$seed" "$SESS" >"$WORK/rdma.$seed" 2>"$WORK/rdma.$seed.err" &
	waitb $! 150 || rc=$?
	seeds=$((seeds + 1))
	if [ "$rc" != 0 ] || ! cmp -s "$WORK/tcp.$seed" "$WORK/rdma.$seed"; then
		echo "FAIL seed $seed (exit $rc): what differs from kernel TCP:"
		diff "$WORK/tcp.$seed" "$WORK/rdma.$seed" | head -n 20
		tail -n 5 "$WORK/rdma.$seed.err"
		fails=$((fails + 1))
	fi
	grep -q '^done$' "$WORK/tcp.$seed" || fail "seed $seed: the kernel TCP run did not finish"
	grep -q 'threads the program did not make: 0$' "$WORK/tcp.$seed" ||
		fail "seed $seed: over kernel TCP a signal ran on a thread the program did not make?"
	[ "$(date +%s)" -lt "$t_end" ] || break
done
bytes=$(cat "$WORK"/tcp.* | grep -o '[0-9]* bytes sent' | awk '{s += $1} END {print s + 0}')
forks=$(cat "$WORK"/rdma.*.err | grep -o '[0-9]* of [0-9]* sessions served in fork' | awk '{s += $1} END {print s + 0}')
figure "integrity: $seeds seeds x $SESS sessions, $bytes bytes each way, $forks sessions served in fork children"
[ "$fails" = 0 ] || fail "$fails of $seeds seeds differ from kernel TCP"
echo "RESULT: $seeds seeds x $SESS sessions identical over kernel TCP and RDMA (ERDMA_SHIM=require)"
