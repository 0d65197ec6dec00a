#!/usr/bin/env bash
# Socket semantics on RDMA connections: the host suite's C program
# (tests/progs/passthru_sock: names and options, non-blocking connect,
# accept4 flags, epoll ET, sendmsg/recvmsg/readv/writev/MSG_WAITALL/PEEK,
# sendfile, dup/dup2/dup3, poll/select, shutdown and half close, SIGPIPE and
# EPIPE, O_NONBLOCK/FIONBIO/FIONREAD, SO_RCVTIMEO, threads, fortify), pointed
# at the bed's 192.168.77.1 (AF_INET6 through the v4-mapped address, as gRPC
# does), once over kernel TCP and once under the shim with ERDMA_SHIM=require
# (every TCP connection it makes must be RDMA, or fail).  The transcripts
# must be identical except for the lines matched by KNOWN below, each a
# documented deviation (docs/limits.md).
. "$(dirname "$0")/lib/common.bash"
export PASSTHRU_ADDR4=$IP0 PASSTHRU_ADDR6=::ffff:$IP0
# fork: a child can't use its parent's RDMA connection (README); not run.
export PASSTHRU_SKIP=fork
# Echo threads, each with its own listener: 3 where the librdmacm gate caps
# RDMA listeners at 3 per process (rsockets' service thread before its fix,
# e.g. Debian 12's 44.0; with 4, require mode refuses the 4th), else 4 --
# the cap lifted is then shown working (doctor says which).
if "$ROOT/erdma-shim" doctor 2>/dev/null | grep -q '^librdmacm .*capped at 3'; then
	export PASSTHRU_THREADS=3
else
	unset PASSTHRU_THREADS # the program's 4
fi
echo "echo threads (each its own listener): ${PASSTHRU_THREADS:-4}"
P=$PROGS/passthru_sock

KNOWN=(
	# ERDMA_SHIM=require turns a refused non-blocking connect into an
	# immediate ECONNREFUSED (auto mode falls back and matches TCP).
	'refused nonblocking connect:|RDMA required but'
	# edge-triggered IN re-armed by a partial read (README)
	'ET partial read:'
	# rsockets has no RST (README)
	'SO_LINGER 0:|closed peer eventually|to a closed peer'
	# an RDMA socket passed over AF_UNIX (SCM_RIGHTS) arrives as its bare
	# kernel socket: the connection can't travel with it (README)
	'SCM_RIGHTS'
	# the program's own FAIL lines for the steps above
	# (by their messages: line numbers move with every edit)
	'^FAIL \[(v[46]|unix)\] (sec_nbconnect:[0-9]+: .*ECONNREFUSED$|sec_epoll_et:[0-9]+: .*: partial read$|sec_shutdown:|sec_ctl:|sec_unix:)'
	'passthru_sock: [0-9]+ failure'
)
pat=$(IFS='|'; echo "${KNOWN[*]}")

timeout -s KILL 200 "$P" >"$WORK/tcp" 2>&1 || fail "kernel TCP run failed: $(tail -5 "$WORK/tcp")"
set +e
LD_PRELOAD=$PRELOAD ERDMA_SHIM=require timeout -s KILL 200 "$P" >"$WORK/rdma" 2>&1
rc=$?
set -e
grep -qE '^\[v4\] names:' "$WORK/rdma" || fail "shimmed run did not start: $(tail "$WORK/rdma")"
grep -q '^passthru_sock: ' "$WORK/rdma" || fail "shimmed run did not finish (exit $rc): $(tail -5 "$WORK/rdma")"
echo "known deviations in the shimmed transcript:"
grep -E "$pat" "$WORK/rdma" | sed 's/^/    /' || true
if ! diff -u <(grep -vE "$pat" "$WORK/tcp") <(grep -vE "$pat" "$WORK/rdma"); then
	fail "transcripts differ beyond the known deviations"
fi
n=$(grep -vcE "$pat" "$WORK/tcp")
echo "RESULT: $n transcript lines identical over kernel TCP and RDMA (ERDMA_SHIM=require, ${PASSTHRU_THREADS:-4} listeners); $(grep -cE "$pat" "$WORK/rdma") known-deviation lines"
