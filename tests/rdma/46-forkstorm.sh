#!/usr/bin/env bash
# Fork while other threads work, over RDMA (issue 14): tests/progs/forkstorm
# (see tests/host/85-forkstorm.sh) with its stream on an RDMA connection to
# itself (ERDMA_SHIM=require: nothing may fall back) and its churn thread's
# epoll sets holding that RDMA fd: 2,000 forks, no child may hang, every
# byte of the stream checked.  The same two lines over kernel TCP.
. "$(dirname "$0")/lib/common.bash"
P=$PROGS/forkstorm
[ -x "$P" ] || fail "$P is not built"
# The ASan pass forks an ASan process (a larger copy each time): 500 there.
if [ "${SANITIZE:-0}" = 1 ]; then N=${ERDMA_FORKSTORM:-500}; else N=${ERDMA_FORKSTORM:-2000}; fi
rc=0
timeout -k 5 200 "$P" "$IP0" "$N" >"$WORK/tcp" 2>&1 || rc=$?
[ "$rc" = 0 ] || fail "kernel TCP run: exit $rc: $(cat "$WORK/tcp")"
t0=$(date +%s)
rc=0
env LD_PRELOAD="$PRELOAD" ERDMA_SHIM=require timeout -k 5 200 "$P" "$IP0" "$N" \
	>"$WORK/rdma" 2>&1 || rc=$?
[ "$rc" = 0 ] || fail "shimmed run (require): exit $rc: $(grep -m 5 -E '^(child|fork)' "$WORK/rdma"; tail -n 2 "$WORK/rdma")"
diff "$WORK/tcp" "$WORK/rdma" || fail "transcripts differ"
figure "forkstorm: $N forks under the shim over RDMA in $(( $(date +%s) - t0 )) s"
echo "RESULT: $(head -n 1 "$WORK/rdma"); $(tail -n 1 "$WORK/rdma") (kernel TCP and RDMA)"
