#!/usr/bin/env bash
# One process connecting to itself from several threads (tests/progs/
# selfconn: each thread listens, connects to its own listener, accepts,
# moves a checksummed block, closes all, 100 rounds): over kernel TCP, then
# under the shim with ERDMA_SHIM=require (every connection RDMA or a
# failure).  Listener opens/closes overlapping connects in one process
# deadlocked rdma-core 44's listen service until the CM gave up (connect
# ETIMEDOUT after seconds; seen in 35-shim-semantics, ~1 run in 12).
. "$(dirname "$0")/lib/common.bash"
P=$PROGS/selfconn
ROUNDS=100

timeout -s KILL 120 "$P" "$IP0" 3 $ROUNDS >"$WORK/tcp" 2>&1 || fail "kernel TCP run failed: $(tail -5 "$WORK/tcp")"
rc=0
# ~10 s in the bed.  Without the fix (svc_mu) 3 of 5 runs hung here (a
# blocking accept waits for a connection the library dropped when the CM
# gave up) and one connect failed with ETIMEDOUT; with it 5 of 5 passed.
LD_PRELOAD=$PRELOAD ERDMA_SHIM=require timeout -s KILL 90 "$P" "$IP0" 3 $ROUNDS >"$WORK/rdma" 2>&1 || rc=$?
sed 's/^/    rdma: /' "$WORK/rdma" | head -20
[ "$rc" != 137 ] || fail "shimmed run hung (killed after 90 s)"
[ "$rc" = 0 ] || fail "shimmed run failed (exit $rc): $(grep -m3 FAIL "$WORK/rdma")"
want=$(grep '^selfconn:' "$WORK/tcp")
got=$(grep '^selfconn:' "$WORK/rdma")
[ "$want" = "$got" ] || fail "summaries differ: TCP '$want', RDMA '$got'"
echo "FIGURE: kernel TCP $(grep -o 'slowest connect.*' "$WORK/tcp"); RDMA $(grep -o 'slowest connect.*' "$WORK/rdma")"
echo "RESULT: $got, identical over kernel TCP and RDMA (ERDMA_SHIM=require)"
