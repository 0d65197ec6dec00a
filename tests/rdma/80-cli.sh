#!/usr/bin/env bash
# erdma-shim, the operator CLI, on the soft-RoCE bed:
#   doctor   exits 0 and lists rxe0 and rxe1 with an active port
#   probe    a shimmed server -> "rdma ok", exit 0; a plain TCP server ->
#            "no RDMA listener", exit 1
#   stat     a live shimmed client holding one RDMA connection (to the
#            shimmed server) and one TCP fallback (to the plain server): both
#            paths, exact byte counts, the fallback's reason; the shimmed
#            server shows its listener and the accepted RDMA connection with
#            the mirror-image counts; --json parses; the exit summary agrees
. "$(dirname "$0")/lib/common.bash"

CLI=$ROOT/erdma-shim
PEER=$PROGS/statpeer
PY=/usr/bin/python3
[ -x "$CLI" ] || fail "$CLI not built (run make)"
[ -x "$PEER" ] || fail "$PEER not built (run make)"

# ---- doctor ----
rc=0
timeout 60 "$CLI" doctor >"$WORK/doctor.out" 2>&1 || rc=$?
cat "$WORK/doctor.out"
[ $rc = 0 ] || fail "doctor: exit $rc on the bed (want 0)"
# the bed's links: soft-RoCE, or soft-iWARP (ERDMA_BED_LINK=siw)
kind=RoCE off=0
[ "${ERDMA_BED_LINK:-rxe}" = siw ] && kind=iWARP off=20000
for d in "${ERDMA_BED_DEV0:-rxe0}" "${ERDMA_BED_DEV1:-rxe1}"; do
	grep -Eq "^$d/1 +ok +$kind, .*state active," "$WORK/doctor.out" || fail "doctor: $d/1 not listed as an active $kind port"
done
timeout 60 "$CLI" doctor --json >"$WORK/doctor.json" || fail "doctor --json: exit $?"
$PY -m json.tool "$WORK/doctor.json" >/dev/null || fail "doctor --json: not JSON"
grep -q '"usable": true' "$WORK/doctor.json" || fail "doctor --json: not usable"
echo "PASS doctor: exit 0, ${ERDMA_BED_DEV0:-rxe0}/1 and ${ERDMA_BED_DEV1:-rxe1}/1 active $kind ports"

# ---- servers: one shimmed (RDMA + TCP listener), one plain (TCP only) ----
bg "$WORK/rsrv" env LD_PRELOAD="$PRELOAD" timeout 200 "$PEER" server "$IP0" 0
rpid=$BG_PID
bg "$WORK/tsrv" timeout 200 "$PEER" server "$IP0" 0
wait_for "$WORK/rsrv" '^ready [0-9]+$' 30
wait_for "$WORK/tsrv" '^ready [0-9]+$' 30
rport=$(port_of "$WORK/rsrv")
tport=$(port_of "$WORK/tsrv")

# ---- probe ----
rc=0
timeout 60 "$CLI" probe "$IP0:$rport" --timeout 20000 >"$WORK/probe.r" 2>&1 || rc=$?
cat "$WORK/probe.r"
[ $rc = 0 ] || fail "probe of the shimmed server: exit $rc (want 0)"
twin=$(((rport - 1 + off) % 65535 + 1)) # the port map (README)
grep -Eq "^rdma +$IP0:$twin ok \(" "$WORK/probe.r" || fail "probe: no 'rdma ok' at $twin against the shimmed server"
grep -Eq "^tcp +$IP0:$rport ok \(" "$WORK/probe.r" || fail "probe: no 'tcp ok' against the shimmed server"
rc=0
timeout 60 "$CLI" probe "$IP0:$tport" --timeout 20000 >"$WORK/probe.t" 2>&1 || rc=$?
cat "$WORK/probe.t"
[ $rc = 1 ] || fail "probe of the plain server: exit $rc (want 1)"
grep -q '^verdict: no RDMA listener (TCP answers)' "$WORK/probe.t" || fail "probe: plain server not reported as 'no RDMA listener'"
grep -Eq "^tcp +$IP0:$tport ok" "$WORK/probe.t" || fail "probe: no 'tcp ok' against the plain server"
echo "PASS probe: shimmed server -> rdma ok (exit 0); plain server -> no RDMA listener (exit 1)"
figure "probe rdma ok: $(sed -n 's/^rdma .* ok (\(.*\))$/\1/p' "$WORK/probe.r"); plain server: $(sed -n 's/^rdma [^ ]* \([a-z]*\) (\(.*\)).*/\1 \2/p' "$WORK/probe.t")"

# ---- stat of a live client with one RDMA and one TCP connection ----
bg "$WORK/cl" env LD_PRELOAD="$PRELOAD" ERDMA_SHIM_STATS=1 timeout 200 "$PEER" client \
	"$IP0" "$rport" 1000 300 "$IP0" "$tport" 5 70001
cpid=$BG_PID
wait_for "$WORK/cl" '^ready$' 120
cat "$WORK/cl"
q=$(qps "$cpid")
[ "$q" -gt 0 ] || fail "client: no RC QP in rdma res (the RDMA connection is not on RDMA)"
# the client's pid is timeout's child
spid=$(cat /proc/"$cpid"/task/*/children | awk '{print $1; exit}')
has_table "$spid" || fail "no /dev/shm/erdma-shim.$spid.* for the client"
timeout 30 "$CLI" stat "$spid" >"$WORK/stat.out" || fail "stat $spid: exit $?"
cat "$WORK/stat.out"
rfd=$(sed -n 's/^conn fd=\([0-9]*\) out=1009 in=300$/\1/p' "$WORK/cl" | head -1)
tfd=$(sed -n 's/^conn fd=\([0-9]*\) out=13 in=70001$/\1/p' "$WORK/cl" | head -1)
[ -n "$rfd" ] && [ -n "$tfd" ] || fail "client output unexpected"
row() { awk -v p="$1" -v f="$2" '$1 == p && $2 == f' "$3"; }
read -r _ _ path _ peer bin bout min mout reason <<<"$(row "$spid" "$rfd" "$WORK/stat.out")"
[ "$path" = rdma ] && [ "$peer" = "$IP0:$rport" ] && [ "$bin" = 300 ] && [ "$bout" = 1009 ] &&
	[ "$min" -ge 1 ] && [ "$mout" -ge 1 ] && [ -z "$reason" ] ||
	fail "stat: RDMA connection fd $rfd: path=$path peer=$peer in=$bin out=$bout msgs=$min/$mout reason='$reason' (want rdma $IP0:$rport 300 1009)"
read -r _ _ path _ peer bin bout min mout reason <<<"$(row "$spid" "$tfd" "$WORK/stat.out")"
[ "$path" = tcp ] && [ "$peer" = "$IP0:$tport" ] && [ "$bin" = 70001 ] && [ "$bout" = 13 ] &&
	[ "$min" = - ] && [[ "$reason" == "rsocket connect failed"* ]] ||
	fail "stat: TCP connection fd $tfd: path=$path peer=$peer in=$bin out=$bout msgs=$min reason='$reason' (want tcp $IP0:$tport 70001 13, rsocket connect failed)"
echo "PASS stat client: fd $rfd rdma in 300 out 1009; fd $tfd tcp in 70001 out 13 ($reason)"

# The shimmed server: its listener and the accepted RDMA connection, mirrored.
rspid=$(cat /proc/"$rpid"/task/*/children | awk '{print $1; exit}')
timeout 30 "$CLI" stat "$rspid" >"$WORK/sstat.out" || fail "stat $rspid: exit $?"
cat "$WORK/sstat.out"
awk -v p="$rspid" '$1 == p && $3 == "listen"' "$WORK/sstat.out" | grep -q . || fail "stat server: no listen row"
awk -v p="$rspid" '$1 == p && $3 == "rdma" && $6 == 1009 && $7 == 300' "$WORK/sstat.out" | grep -q . ||
	fail "stat server: no rdma row with bytes in 1009 out 300"
echo "PASS stat server: listener (path listen) and the accepted RDMA connection (in 1009 out 300)"

timeout 30 "$CLI" stat --json >"$WORK/stat.json" || fail "stat --json: exit $?"
$PY - "$WORK/stat.json" "$spid" "$rfd" "$tfd" <<'EOF' || fail "stat --json: content"
import json, sys
procs = {p["pid"]: p for p in json.load(open(sys.argv[1]))}
c = {x["fd"]: x for x in procs[int(sys.argv[2])]["connections"]}
r, t = c[int(sys.argv[3])], c[int(sys.argv[4])]
assert (r["path"], r["bytes_in"], r["bytes_out"]) == ("rdma", 300, 1009), r
assert r["msgs_in"] >= 1 and r["msgs_out"] >= 1, r
assert (t["path"], t["bytes_in"], t["bytes_out"]) == ("tcp", 70001, 13), t
assert t["reason"].startswith("rsocket connect failed") and t["msgs_in"] is None, t
EOF
echo "PASS stat --json: the same, parsed"

# Exit summary (ERDMA_SHIM_STATS=1) and removal of the segment.
kill -TERM "$spid"
for _ in $(seq 200); do kill -0 "$cpid" 2>/dev/null || break; sleep 0.05; done
! kill -0 "$cpid" 2>/dev/null || fail "client still running 10 s after SIGTERM"
grep -Eq "stats: fd $rfd rdma .* bytes_in 300 bytes_out 1009 msgs_in" "$WORK/cl" || fail "exit summary: no rdma line"
grep -Eq "stats: fd $tfd tcp .* bytes_in 70001 bytes_out 13 reason \"rsocket connect failed" "$WORK/cl" || fail "exit summary: no tcp line"
! has_table "$spid" || fail "segment left after a clean exit"
echo "PASS exit summary agrees; segment removed"
echo "RESULT: doctor/probe/stat on ${ERDMA_BED_LINK:-rxe} ($kind): RDMA and TCP paths told apart with exact byte counts"
