#!/usr/bin/env bash
# Fork per connection (issue 14): the server accepts and forks a child per
# connection that serves it.  tests/progs/prefork forkserve in three shapes
# -- close (the parent closes its copy at once: ForkingTCPServer, sshd),
# keep (the parent keeps its copy until the child has exited) and exec (the
# child execs a handler with the connection as stdin/stdout: inetd) -- and
# Python's socketserver.ForkingTCPServer (tests/rdma/lib/forking.py), each
# serving 6 concurrent clients 256 KiB checked by FNV-1a; a forked child
# also checks getpeername/getsockname against what accept and bind said:
#   - kernel TCP (no shim anywhere): the reference transcript;
#   - both ends shimmed, the client under ERDMA_SHIM=require: every
#     connection is an RDMA one, handed over at the fork (handover.c: the
#     fd becomes a loopback TCP socket that a relay in the parent carries to
#     and from the rsocket; the server's log names each) -- the same
#     transcript;
#   - a plain client of the shimmed server: TCP, the same.
# Before: every shimmed client got a broken pipe (the child's copy of an
# RDMA connection was a bare socket).
. "$(dirname "$0")/lib/common.bash"
P=$PROGS/prefork
PY=$(dirname "$0")/lib/forking.py
[ -x "$P" ] || fail "$P is not built"
N=6 SIZE=262144
fails=0

# serve TAG SHIM(0|1) CMD...: start the server, set SRV and PORT.
serve() {
	local tag=$1 shim=$2; shift 2
	if [ "$shim" = 1 ]; then
		bg "$WORK/$tag.srv" env LD_PRELOAD="$PRELOAD" ERDMA_SHIM_LOG=info "$@"
	else
		bg "$WORK/$tag.srv" "$@"
	fi
	SRV=$BG_PID
	wait_for "$WORK/$tag.srv" '^ready ' 30
	PORT=$(port_of "$WORK/$tag.srv")
}
stop() { kill -TERM "$SRV" 2>/dev/null || true; wait "$SRV" 2>/dev/null || true; }

# one TAG SERVER-CMD...: the three runs of one server shape.
one() {
	local tag=$1 rc handed; shift
	serve "$tag-k" 0 "$@"
	timeout -k 5 60 "$P" get "$IP0" "$PORT" $N $SIZE >"$WORK/$tag.tcp" 2>&1 || true
	stop
	serve "$tag-s" 1 "$@"
	rc=0
	env LD_PRELOAD="$PRELOAD" ERDMA_SHIM=require timeout -k 5 60 \
		"$P" get "$IP0" "$PORT" $N $SIZE >"$WORK/$tag.rdma" 2>&1 || rc=$?
	handed=$(grep -c 'handed over at fork' "$WORK/$tag-s.srv" || true)
	timeout -k 5 60 "$P" get "$IP0" "$PORT" $N $SIZE >"$WORK/$tag.plain" 2>&1 || true
	stop
	if [ "$(grep -c ' bytes ok$' "$WORK/$tag.tcp")" != $N ]; then
		echo "FAIL $tag: kernel TCP run: $(grep -v ' ok$' "$WORK/$tag.tcp" | head -n 2)"
		fails=$((fails + 1))
	elif ! cmp -s "$WORK/$tag.tcp" "$WORK/$tag.rdma" || [ "$rc" != 0 ]; then
		echo "FAIL $tag: shimmed client (require), exit $rc; what differs from kernel TCP:"
		grep -v ' bytes ok$' "$WORK/$tag.rdma" | head -n 8 | sed 's/^/    cli| /'
		tail -n 6 "$WORK/$tag-s.srv" | sed 's/^/    srv| /'
		fails=$((fails + 1))
	elif [ "$handed" != $N ]; then
		echo "FAIL $tag: $handed of $N RDMA connections handed over at fork (server log)"
		tail -n 6 "$WORK/$tag-s.srv" | sed 's/^/    srv| /'
		fails=$((fails + 1))
	elif ! cmp -s "$WORK/$tag.tcp" "$WORK/$tag.plain"; then
		echo "FAIL $tag: plain client of the shimmed server:"
		grep -v ' bytes ok$' "$WORK/$tag.plain" | head -n 8 | sed 's/^/    cli| /'
		fails=$((fails + 1))
	else
		echo "PASS $tag: $N clients byte-exact over kernel TCP, over RDMA (require; $handed handed over at fork) and plain TCP to the shimmed server"
	fi
}

for m in close keep exec; do
	one "c-$m" "$P" forkserve "$IP0" "$m"
done
one py-forking python3 "$PY" "$IP0"
[ "$fails" = 0 ] || fail "$fails fork-per-connection case(s) failed"

# What a handed-over connection costs (figures, not asserted): the
# handover itself, from the servers' logs, and one 16 MiB answer through
# the relay against the same answer from a prefork worker on direct RDMA,
# interleaved, 3 rounds, shimmed client under require.
us=$(grep -ho 'handed over at fork in [0-9]* us' "$WORK"/*-s.srv | awk '{print $6}' | sort -n)
n=$(echo "$us" | wc -l)
figure "forkconn: handover at fork: median $(echo "$us" | sed -n "$(((n + 1) / 2))p") us, max $(echo "$us" | tail -n 1) us (n=$n)"
ms() { echo $(($(date +%s%N) / 1000000)); }
direct=0 relayed=0
for r in 1 2 3; do
	for how in direct relayed; do
		if [ $how = direct ]; then
			serve "cost-$r-$how" 1 "$P" serve "$IP0" 1 block
		else
			serve "cost-$r-$how" 1 "$P" forkserve "$IP0" close
		fi
		t0=$(ms)
		env LD_PRELOAD="$PRELOAD" ERDMA_SHIM=require timeout -k 5 60 \
			"$P" get "$IP0" "$PORT" 1 16777216 >"$WORK/cost.$r.$how" 2>&1 ||
			fail "cost run $r ($how): $(cat "$WORK/cost.$r.$how")"
		t=$(($(ms) - t0))
		stop
		if [ $how = direct ]; then direct=$((direct + t)); else relayed=$((relayed + t)); fi
	done
done
figure "forkconn: 16 MiB answer, 3 rounds interleaved: direct RDMA (prefork worker) $direct ms, handed over (relay) $relayed ms, ratio $(awk -v a=$relayed -v b=$direct 'BEGIN { printf "%.2f", a / b }')"
echo "RESULT: fork-per-connection servers (C close/keep/exec, Python ForkingTCPServer) serve every client byte-exact, over RDMA when both ends are shimmed"
