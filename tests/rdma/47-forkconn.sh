#!/usr/bin/env bash
# Fork per connection (issue 14): the server accepts and forks a child per
# connection that serves it.  tests/progs/prefork forkserve in three shapes
# -- close (the parent closes its copy at once: ForkingTCPServer, sshd),
# keep (the parent keeps its copy until the child has exited) and exec (the
# child execs a handler with the connection as stdin/stdout: inetd) -- and
# Python's socketserver.ForkingTCPServer (tests/rdma/lib/forking.py), each
# serving 6 concurrent clients 256 KiB checked by FNV-1a; a forked child
# also checks getpeername/getsockname against what accept and bind said;
# a supervisor whose fork child execs and listens again on the inherited
# listener; and a client that connects and lets its fork child use the
# connection:
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

. "$(dirname "$0")/lib/servers.bash"

for m in close keep exec; do
	HANDED=$N one "c-$m" "$P" forkserve "$IP0" "$m"
done
HANDED=$N one py-forking python3 "$PY" "$IP0"

# A supervisor's shape (issue 43, docs/security.md: what the reservation
# leaves open): the parent listens (its listen() reserves the RDMA twin
# port), forks a child that execs a new image (tests/rdma/lib/supervise.py
# again) which calls listen() again on the inherited listener and serves
# it, while the parent lives on and never accepts.  Two listeners go across
# (the second listened on again, never served), the served one at another
# fd number than the parent's (a dup, the original closed).  The reservation goes
# across the exec (LIBERDMA_SHIM_TWINS): the child's image adopts it at its
# listen() and its door takes the port, so the shimmed client (require) is
# served over RDMA, byte-exact.  Before, the child's listen() was the
# kernel's (the shim never saw that socket made) and a client under require
# was refused.
# The same with the listeners made inheritable only after the fork, where
# the reservation is passed at the exec (preload/exec.c), not at the fork:
# dup2 (the child dup2()s the listener to fd 40 and marks the spare
# inheritable), execfail (the same child first tries an exec that fails,
# ENOENT: after it every rdma_cm file of the child's is close-on-exec
# again, its own check, exit 3 if not) and preexec (subprocess.Popen whose
# preexec_fn marks both inheritable: _posixsubprocess's exec), and reexec
# (no fork: the process itself makes them inheritable and execs the server
# image).  Before, the reservation went across only when the listener was
# inheritable at a fork: each of these lost RDMA (require refused).
# And images that never call listen() on what they inherit (systemd socket
# activation, inetd "wait", gunicorn --fd): nolisten (fork + execve, the
# image only accepts) and spawn (os.posix_spawn, the listener moved to fd
# 40 by the spawn's file actions, the image only accepts; the reservation
# goes across the spawn: preload/exec.c).  The image takes each inherited
# listener at start-up as listen() takes one (socket.c, listen_adopt: its
# log says so for both, in every shape), and its first accept opens the
# door on the carried reservation.  activate: systemd socket activation,
# the activator without the shim (so no reservation goes across: the image
# makes its own at start-up), fds 3 and 4 and LISTEN_FDS, the image only
# accepts.  Before, their listeners were the kernel's: the client under
# require was refused.
supervise_case() {
	local shape=$1 tag=supervise${1:+-$1} kept adopted want=2
	one "$tag" python3 "$(dirname "$0")/lib/supervise.py" "$IP0" ${shape:+"$shape"}
	kept=$(grep -c 'reservation kept across exec' "$WORK/$tag-s.srv" || true)
	adopted=$(grep -c 'an inherited TCP listener, taken as listen() takes one' "$WORK/$tag-s.srv" || true)
	[ "$shape" != activate ] || want=0 # the activator holds none
	if [ "$adopted" != 2 ]; then
		echo "FAIL $tag: the exec'd image took $adopted of its 2 inherited listeners at start-up"
		tail -n 6 "$WORK/$tag-s.srv" | sed 's/^/    srv| /'
		fails=$((fails + 1))
	elif [ "$kept" != $want ]; then
		echo "FAIL $tag: the exec'd image took $kept of the parent's $want reservations"
		tail -n 6 "$WORK/$tag-s.srv" | sed 's/^/    srv| /'
		fails=$((fails + 1))
	elif grep -q 'is held by\|not reserved' "$WORK/$tag-s.srv" ||
		! grep -q 'listening on TCP and RDMA' "$WORK/$tag-s.srv"; then
		echo "FAIL $tag: the exec'd image's door: $(grep -m1 'is held by\|not reserved\|listening on' "$WORK/$tag-s.srv")"
		fails=$((fails + 1))
	elif [ "$shape" = execfail ] && ! grep -q '^failed exec: ENOENT, rdma_cm fds \[(.*True)' "$WORK/$tag-s.srv"; then
		echo "FAIL $tag: after the failed exec: $(grep -m1 '^failed exec' "$WORK/$tag-s.srv")"
		fails=$((fails + 1))
	else
		echo "PASS $tag: both inherited listeners taken at start-up, $want reservations kept across the exec, the served one's door opened${shape:+ (shape: $shape)}"
	fi
}
for shape in "" dup2 execfail preexec reexec nolisten spawn activate; do
	supervise_case "$shape"
done

# The client side: connect, fork, the child asks and checks while the parent
# closes its copy (prefork forkget), against a one-worker prefork server;
# kernel TCP, then both ends shimmed (client under require: its connection
# handed over at the fork, its log says so).
forkget_case() {
	local rc=0 handed
	serve fg-k 0 "$P" serve "$IP0" 1 block
	timeout -k 5 60 "$P" forkget "$IP0" "$PORT" $SIZE >"$WORK/fg.tcp" 2>&1 || rc=$?
	stop
	[ "$rc" = 0 ] || { echo "FAIL forkget: kernel TCP run: $(cat "$WORK/fg.tcp")"; fails=$((fails + 1)); return; }
	serve fg-s 1 "$P" serve "$IP0" 1 block
	env LD_PRELOAD="$PRELOAD" ERDMA_SHIM=require ERDMA_SHIM_LOG=info timeout -k 5 60 \
		"$P" forkget "$IP0" "$PORT" $SIZE >"$WORK/fg.rdma" 2>"$WORK/fg.rdma.log" || rc=$?
	stop
	handed=$(grep -c 'handed over at fork' "$WORK/fg.rdma.log" || true)
	if [ "$rc" != 0 ] || ! cmp -s "$WORK/fg.tcp" "$WORK/fg.rdma" || [ "$handed" != 1 ]; then
		echo "FAIL forkget: shimmed client (require), exit $rc, $handed handed over: $(cat "$WORK/fg.rdma") $(tail -n 3 "$WORK/fg.rdma.log")"
		fails=$((fails + 1))
	else
		echo "PASS forkget: a client's connection used by its fork child: byte-exact over kernel TCP and over RDMA (handed over at the fork)"
	fi
}
forkget_case
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
echo "RESULT: fork-per-connection servers (C close/keep/exec, Python ForkingTCPServer) and a forking client: every byte exact, over RDMA when both ends are shimmed"
