#!/usr/bin/env bash
# erdma-shim, the operator CLI, on a host without RDMA:
#   doctor   reports no RDMA device with a fix line, exits 1; --json parses
#   run      sets LD_PRELOAD and the ERDMA_SHIM_* variables, rejects a bad
#            option value naming the option, warns when the shim is already
#            preloaded; takes CMD without -- (the first non-option word)
#   help     `help SUB`, `SUB --help`: SUB's usage on stdout, exit 0; every
#            usage error: what was wrong and the fix, exit 64
#   probe    of a closed port fails quickly (exit 2, tcp refused)
#   stat     of a live shimmed program: its connections with exact byte
#            counts, path tcp, reason "no RDMA device" (table and --json);
#            the ERDMA_SHIM_STATS=1 exit summary says the same; the segment
#            is removed at exit, a killed process's is removed by stat;
#            a fork child gets its own table (the parent's keeps only its
#            own connection); ERDMA_SHIM_STATS_SHM=0 creates none
set -eu
. "$(dirname "$0")/lib.sh"

CLI=$ROOT/erdma-shim
PEER=$PROGS/statpeer
[ -x "$CLI" ] || fail "$CLI not built (run make)"
[ -x "$PEER" ] || fail "$PEER not built (run make)"
# The CLI must not run under the shim (it re-executes itself without it),
# and this host has no RDMA: make sure the suite's environment agrees.
[ ! -e /dev/infiniband/rdma_cm ] || fail "this host has /dev/infiniband/rdma_cm: the host suite expects no RDMA"

# ---- doctor ----
rc=0
"$CLI" doctor >"$TMP/doctor.out" 2>&1 || rc=$?
[ $rc = 1 ] || { cat "$TMP/doctor.out" >&2; fail "doctor: exit $rc without RDMA (want 1)"; }
grep -Eq '^devices +fail +no RDMA device' "$TMP/doctor.out" || fail "doctor: no 'devices fail no RDMA device' line"
grep -A1 -E '^devices +fail' "$TMP/doctor.out" | grep -Eq '^ +fix: ' || fail "doctor: no fix line under the devices check"
grep -Eq '^verdict: RDMA NOT usable' "$TMP/doctor.out" || fail "doctor: no verdict line"
# RLIMIT_NOFILE: how many RDMA connections ERDMA_SHIM_FD_SHARE (50%) leaves
# a process (4 fds each): 1024 -> 128, with a fix; 8192 -> 1024, ok
( ulimit -n 1024; "$CLI" doctor 2>&1 ) >"$TMP/doctor.nofile" || true
grep -Eq '^nofile +warn +RLIMIT_NOFILE 1024; .* about 128 RDMA connections' "$TMP/doctor.nofile" ||
	fail "doctor: no 'nofile warn ... about 128' line at ulimit -n 1024: $(grep nofile "$TMP/doctor.nofile")"
( ulimit -n 8192; ERDMA_SHIM_FD_SHARE=50 "$CLI" doctor 2>&1 ) >"$TMP/doctor.nofile" || true
grep -Eq '^nofile +ok +RLIMIT_NOFILE 8192; .* about 1024 RDMA connections' "$TMP/doctor.nofile" ||
	fail "doctor: no 'nofile ok ... about 1024' line at ulimit -n 8192: $(grep nofile "$TMP/doctor.nofile")"
rc=0
"$CLI" doctor --json >"$TMP/doctor.json" 2>/dev/null || rc=$?
[ $rc = 1 ] || fail "doctor --json: exit $rc (want 1)"
$PY -m json.tool "$TMP/doctor.json" >/dev/null || fail "doctor --json: not JSON"
$PY - "$TMP/doctor.json" <<'EOF' || fail "doctor --json: content"
import json, sys
d = json.load(open(sys.argv[1]))
assert d["usable"] is False, d
dev = [c for c in d["checks"] if c["check"] == "devices"]
assert dev and dev[0]["verdict"] == "fail" and dev[0]["fix"], dev
assert all(c["verdict"] in ("ok", "warn", "fail") for c in d["checks"])
EOF
echo "PASS doctor: exit 1, 'devices fail' with a fix line; --json parses"

# ---- run ----
ERDMA_SHIM_ACCEPT_FROM=1.2.3.4 "$CLI" run --log info --require --allow 10.0.0.0/8 --allow '*:50051' --deny 10.1.0.0/16:80 \
	--accept-from 10.2.0.0/16:50051 --accept-from '[fd00::]/8' --stats -- env \
	>"$TMP/run.out" 2>"$TMP/run.err" || fail "run -- env: exit $?"
for want in "LD_PRELOAD=$SHIM" ERDMA_SHIM_LOG=info ERDMA_SHIM=require \
	'ERDMA_SHIM_ALLOW=10.0.0.0/8,*:50051' ERDMA_SHIM_DENY=10.1.0.0/16:80 ERDMA_SHIM_STATS=1 \
	'ERDMA_SHIM_ACCEPT_FROM=10.2.0.0/16:50051,[fd00::]/8'; do
	grep -qxF -e "$want" "$TMP/run.out" || { cat "$TMP/run.out" >&2; fail "run: no '$want' in the command's environment"; }
done
assert_banner "$TMP/run.err" "run --log info"
grep -qF 'ERDMA_SHIM_ALLOW=2 rule(s)' "$TMP/run.err" || fail "run: the banner does not show the two allow rules"
grep -qF 'ERDMA_SHIM_ACCEPT_FROM=2 rule(s)' "$TMP/run.err" || fail "run: the banner does not show the two accept-from rules"
# An LD_PRELOAD of the program's own stays, after the shim.
LD_PRELOAD=/nonexistent-keep.so "$CLI" run -- env 2>/dev/null | grep -qxF "LD_PRELOAD=$SHIM:/nonexistent-keep.so" ||
	fail "run: an existing LD_PRELOAD is not kept after the shim"
with_shim "$CLI" run -- env >"$TMP/dup.out" 2>"$TMP/dup.err" || fail "run with the shim already preloaded: exit $?"
grep -q 'warning: LD_PRELOAD already contains liberdma_shim.so' "$TMP/dup.err" || fail "run: no warning when LD_PRELOAD already has the shim"
# (only LD_PRELOAD counts: the suite's runner exports SHIM=.../liberdma_shim.so too)
[ "$(grep '^LD_PRELOAD=' "$TMP/dup.out" | grep -o liberdma_shim | wc -l)" = 1 ] ||
	fail "run: the shim preloaded twice"
# A bad option value: the error names the option (never the variable, nor
# the library's "running on TCP only"), and the command does not run.
for bad in "--log verbose" "--log loud" "--allow 10.0.0.0/33" "--deny nonsense" "--accept-from 10.0.0.1:0-70000"; do
	rc=0
	# shellcheck disable=SC2086 # the option and its value, split on purpose
	"$CLI" run $bad -- sh -c 'echo RAN' >"$TMP/bad.out" 2>"$TMP/bad.err" || rc=$?
	opt=${bad%% *} val=${bad#* }
	[ $rc = 64 ] && grep -q "^erdma-shim run: $opt '$val' is not " "$TMP/bad.err" ||
		fail "run $bad: exit $rc, want 64 and a line naming $opt: $(cat "$TMP/bad.err")"
	! grep -qE 'ERDMA_SHIM|running on TCP only' "$TMP/bad.err" || fail "run $bad: the library's message: $(cat "$TMP/bad.err")"
	! grep -q RAN "$TMP/bad.out" || fail "run $bad: the command ran"
done
# run CMD without --: the first word that is not an option starts CMD, and
# what follows is CMD's (env -0 is env's option, not run's)
"$CLI" run --log info env -u NOPE >"$TMP/nodash.out" 2>/dev/null || fail "run --log info env -u NOPE (no --): exit $?"
grep -qxF "LD_PRELOAD=$SHIM" "$TMP/nodash.out" && grep -qxF ERDMA_SHIM_LOG=info "$TMP/nodash.out" ||
	fail "run CMD without --: not run under the shim"
"$CLI" run sh -c 'echo "$0 $1"' --lib x >"$TMP/nodash.out" 2>&1 || fail "run sh -c ... --lib x: exit $?"
grep -qxF -- "--lib x" "$TMP/nodash.out" || fail "run CMD --lib x: run took the command's argument ($(cat "$TMP/nodash.out"))"
rc=0
"$CLI" run --bogus ls >/dev/null 2>"$TMP/bad.err" || rc=$?
[ $rc = 64 ] && grep -q "unknown option --bogus (if it is the command's, put -- before the command)" "$TMP/bad.err" ||
	fail "run --bogus ls: exit $rc, $(cat "$TMP/bad.err")"
rc=0
"$CLI" run -- /nonexistent/cmd 2>/dev/null || rc=$?
[ $rc = 127 ] || fail "run of a missing command: exit $rc (want 127)"
# ld.so splits LD_PRELOAD at spaces too: a library path with a space or ':'
# would preload something else (relative: from the current directory).
for d in "$TMP/my libs" "$TMP/my:libs"; do
	mkdir -p "$d" && cp "$SHIM" "$d/"
	rc=0
	"$CLI" run --lib "$d/liberdma_shim.so" -- env >"$TMP/sp.out" 2>"$TMP/sp.err" || rc=$?
	[ $rc = 64 ] && grep -q "contains a space or ':'" "$TMP/sp.err" && [ ! -s "$TMP/sp.out" ] ||
		fail "run --lib '$d/liberdma_shim.so': exit $rc, want 64, a message and no command run"
done
echo "PASS run: LD_PRELOAD and 5 variables set, bad value refused (64), double preload warned, a library path with a space or ':' refused (64)"

# ---- help and usage errors ----
# Per-subcommand help on stdout, exit 0: its own synopsis, not the others'
for h in "help run:run" "run --help:run" "run -h:run" "doctor --help:doctor" "stat --help:stat" \
	"probe --help:probe" "help doctor:doctor" "help stat:stat" "help probe:probe"; do
	args=${h%:*} sub=${h##*:}
	rc=0
	# shellcheck disable=SC2086 # words, split on purpose
	"$CLI" $args >"$TMP/help.out" 2>"$TMP/help.err" || rc=$?
	[ $rc = 0 ] || fail "erdma-shim $args: exit $rc (want 0): $(cat "$TMP/help.err")"
	head -n 1 "$TMP/help.out" | grep -q "^usage: erdma-shim $sub " ||
		fail "erdma-shim $args: first line is not $sub's usage: $(head -n 1 "$TMP/help.out")"
	[ "$(grep -c 'erdma-shim [a-z]' "$TMP/help.out")" -le 2 ] ||
		fail "erdma-shim $args: prints every subcommand's usage"
	[ ! -s "$TMP/help.err" ] || fail "erdma-shim $args: wrote to stderr"
done
"$CLI" help >"$TMP/help.out" || fail "erdma-shim help: exit $?"
for sub in run doctor probe stat; do
	grep -q "erdma-shim $sub" "$TMP/help.out" || fail "erdma-shim help does not list $sub"
done
# Every usage error: exit 64, a first line "erdma-shim SUB: what (fix)",
# the subcommand's synopsis after it; never the bare general usage.
usage_err() { # WANT-REGEX ARGS...
	local want=$1 rc=0
	shift
	"$CLI" "$@" >"$TMP/ue.out" 2>"$TMP/ue.err" </dev/null || rc=$?
	[ $rc = 64 ] || fail "erdma-shim $*: exit $rc (want 64)"
	head -n 1 "$TMP/ue.err" | grep -Eq "^erdma-shim( [a-z]+)?: $want" ||
		fail "erdma-shim $*: first line '$(head -n 1 "$TMP/ue.err")', want '$want'"
	echo "PASS usage error: erdma-shim $* -> $(head -n 1 "$TMP/ue.err")"
}
usage_err "'foo' has no port: give HOST:PORT \(e\.g\. 10\.0\.0\.2:50051" probe foo
usage_err "'10\.0\.0\.2' has no port: give HOST:PORT" probe 10.0.0.2
usage_err 'no HOST:PORT given \(e\.g\.' probe
usage_err 'unknown option --bogus \(probe takes --timeout MS and --port-offset N\)' probe --bogus 127.0.0.1:1
usage_err "--timeout needs a number of milliseconds, 1\.\.3600000, got 'soon'" probe 127.0.0.1:1 --timeout soon
usage_err "one HOST:PORT only \(got '127\.0\.0\.1:1' and '127\.0\.0\.1:2'\)" probe 127.0.0.1:1 127.0.0.1:2
usage_err "port 0 in '127\.0\.0\.1:0'" probe 127.0.0.1:0
usage_err 'unknown option --bogus \(doctor takes only --json\)' doctor --bogus
usage_err "unknown option --bogus \(stat takes a PID, --json or --prometheus\)" stat --bogus
usage_err "'abc' is not a process id" stat abc
usage_err '--json and --prometheus: choose one' stat --json --prometheus
usage_err 'no command given \(erdma-shim run \[options\] CMD ARGS\.\.\.\)' run
usage_err '--log needs a value' run --log
usage_err "unknown command 'frobnicate' \(run, doctor, probe or stat" frobnicate
usage_err "no command 'frobnicate' \(run, doctor, probe, stat\)" help frobnicate
usage_err 'no command given' 
echo "PASS help: help SUB and SUB --help print SUB's usage (exit 0); each usage error says what and how to fix it (exit 64)"

# ---- probe: a closed port ----
port=$(free_port)
t0=$(date +%s%N)
rc=0
"$CLI" probe "127.0.0.1:$port" --timeout 3000 >"$TMP/probe.out" 2>&1 || rc=$?
ms=$((($(date +%s%N) - t0) / 1000000))
[ $rc = 2 ] || { cat "$TMP/probe.out" >&2; fail "probe of a closed port: exit $rc (want 2)"; }
grep -Eq "^tcp +127\.0\.0\.1:$port refused" "$TMP/probe.out" || fail "probe: no 'tcp refused' line"
grep -Eq "^rdma +127\.0\.0\.1:$port " "$TMP/probe.out" || fail "probe: no rdma line"
[ $ms -lt 2000 ] || fail "probe of a closed port took ${ms} ms (a refusal should be immediate)"
echo "PASS probe: closed port -> exit 2, tcp refused, in ${ms} ms"
echo "FIGURE: probe of a closed port: ${ms} ms"

# ---- stat: a live shimmed TCP program ----
bg_start plain "$TMP/srv.out" "$TMP/srv.err" "$PEER" server 127.0.0.1 0
wait_line "$TMP/srv.out" '^ready [0-9]+$' 20 "$BG_PID" >/dev/null || fail "statpeer server did not start"
sport=$(awk '/^ready /{print $2; exit}' "$TMP/srv.out")
ERDMA_SHIM_STATS=1 bg_start shim "$TMP/cl.out" "$TMP/cl.err" "$PEER" client \
	127.0.0.1 "$sport" 1000 300 127.0.0.1 "$sport" 5 70001
cpid=$BG_PID
wait_line "$TMP/cl.out" '^ready$' 20 "$cpid" >/dev/null || fail "statpeer client did not finish its exchanges"
has_table "$cpid" || fail "no /dev/shm/erdma-shim.$cpid.* for the live shimmed client"
"$CLI" stat "$cpid" >"$TMP/stat.out" || fail "stat $cpid: exit $?"
n=0
while read -r _ fdv outv inv; do
	fd=${fdv#fd=} out=${outv#out=} in=${inv#in=}
	# PID FD PATH LOCAL PEER BYTES_IN BYTES_OUT MSGS_IN MSGS_OUT REASON...
	line=$(awk -v p="$cpid" -v f="$fd" '$1 == p && $2 == f' "$TMP/stat.out")
	[ -n "$line" ] || { cat "$TMP/stat.out" >&2; fail "stat: fd $fd of the client not listed"; }
	read -r _ _ path _ peer bin bout _ _ reason <<<"$line"
	[ "$path" = tcp ] || fail "stat: fd $fd path '$path' (want tcp)"
	[ "$peer" = "127.0.0.1:$sport" ] || fail "stat: fd $fd peer '$peer'"
	[ "$bin" = "$in" ] && [ "$bout" = "$out" ] ||
		fail "stat: fd $fd bytes in/out $bin/$bout, the program moved $in/$out"
	[ "$reason" = "no RDMA device" ] || fail "stat: fd $fd reason '$reason'"
	n=$((n + 1))
done < <(grep '^conn ' "$TMP/cl.out")
[ $n = 2 ] || fail "stat: $n connections checked (want 2)"
"$CLI" stat --json >"$TMP/stat.json" || fail "stat --json: exit $?"
$PY -m json.tool "$TMP/stat.json" >/dev/null || fail "stat --json: not JSON"
$PY - "$TMP/stat.json" "$cpid" "$TMP/cl.out" <<'EOF' || fail "stat --json: content"
import json, sys
procs = {p["pid"]: p for p in json.load(open(sys.argv[1]))}
p = procs[int(sys.argv[2])]
conns = {c["fd"]: c for c in p["connections"]}
for line in open(sys.argv[3]):
    if not line.startswith("conn "):
        continue
    kv = dict(w.split("=") for w in line.split()[1:])
    c = conns[int(kv["fd"])]
    assert c["path"] == "tcp" and c["reason"] == "no RDMA device", c
    assert (c["bytes_in"], c["bytes_out"]) == (int(kv["in"]), int(kv["out"])), c
assert p["totals"]["tcp"] == 2 and p["rdma"] == "not available", p
EOF
echo "PASS stat: 2 live TCP connections, exact byte counts, path tcp, reason 'no RDMA device' (table and --json)"

# The exit summary (ERDMA_SHIM_STATS=1) and the segment's removal.
kill -TERM "$cpid"
wait_exit "$cpid" 10
[ "$WAIT_RC" = 0 ] || fail "statpeer client: exit $WAIT_RC after SIGTERM"
grep -q "info: stats: 0 rdma, 2 tcp connections" "$TMP/cl.err" || { cat "$TMP/cl.err" >&2; fail "no exit summary with ERDMA_SHIM_STATS=1"; }
while read -r _ fdv outv inv; do
	grep -Eq "stats: ${fdv/=/ } tcp .* bytes_in ${inv#in=} bytes_out ${outv#out=} reason \"no RDMA device\"" "$TMP/cl.err" ||
		fail "exit summary: no line for ${fdv} with its byte counts"
done < <(grep '^conn ' "$TMP/cl.out")
! has_table "$cpid" || fail "/dev/shm/erdma-shim.$cpid.* left after a clean exit"
echo "PASS exit summary: the same counts on stderr; segment removed at exit"

# fork: the child gets its own table (made at its first connection), the
# parent's keeps only the parent's connection.
cat >"$TMP/fork.py" <<EOF
import os, signal, socket, sys
signal.signal(signal.SIGTERM, lambda *a: sys.exit(0))
a = socket.create_connection(("127.0.0.1", $sport)); a.sendall(b"3 2\\nabc"); a.recv(2)
pid = os.fork()
if pid == 0:
    b = socket.create_connection(("127.0.0.1", $sport)); b.sendall(b"0 5\\n"); b.recv(5)
    print("child ready", os.getpid(), b.fileno(), flush=True)
else:
    print("parent ready", os.getpid(), a.fileno(), pid, flush=True)
while True:
    signal.pause()
EOF
bg_start shim "$TMP/fork.out" "$TMP/fork.err" "$PY" "$TMP/fork.py"
fppid=$BG_PID
wait_line "$TMP/fork.out" '^parent ready' 20 "$fppid" >/dev/null || fail "fork.py: parent not ready"
read -r _ _ ppid pfd fcpid <<<"$(grep '^parent ready' "$TMP/fork.out")"
wait_line "$TMP/fork.out" '^child ready' 20 >/dev/null || fail "fork.py: child not ready"
read -r _ _ _ cfd <<<"$(grep '^child ready' "$TMP/fork.out")"
"$CLI" stat "$ppid" >"$TMP/fp.out" || fail "stat parent: exit $?"
"$CLI" stat "$fcpid" >"$TMP/fc.out" || fail "stat fork child: exit $?"
[ "$(awk -v p="$ppid" '$1 == p' "$TMP/fp.out" | wc -l)" = 1 ] &&
	awk -v p="$ppid" -v f="$pfd" '$1 == p && $2 == f && $6 == 2 && $7 == 7' "$TMP/fp.out" | grep -q . ||
	{ cat "$TMP/fp.out" >&2; fail "fork: the parent's table is not exactly its one connection (in 2, out 7)"; }
[ "$(awk -v p="$fcpid" '$1 == p' "$TMP/fc.out" | wc -l)" = 1 ] &&
	awk -v p="$fcpid" -v f="$cfd" '$1 == p && $2 == f && $6 == 5 && $7 == 4' "$TMP/fc.out" | grep -q . ||
	{ cat "$TMP/fc.out" >&2; fail "fork: the child's table is not exactly its one connection (in 5, out 4)"; }
kill -TERM "$fcpid" "$ppid"
wait_exit "$fppid" 10
# the child is not ours to wait for: bounded poll for its exit
for _ in $(seq 100); do kill -0 "$fcpid" 2>/dev/null || break; sleep 0.05; done
! has_table "$ppid" && ! has_table "$fcpid" || fail "fork: a segment left after both exited"
echo "PASS fork: parent and child each list only their own connection; both segments removed at exit"

# A killed process leaves its segment: stat removes it.
bg_start shim "$TMP/k.out" "$TMP/k.err" "$PEER" client 127.0.0.1 "$sport" 10 10
kpid=$BG_PID
wait_line "$TMP/k.out" '^ready$' 20 "$kpid" >/dev/null || fail "second client did not start"
kill -KILL "$kpid"
wait_exit "$kpid" 10
has_table "$kpid" || fail "no segment left by the SIGKILLed client (test broken?)"
"$CLI" stat >"$TMP/stale.out" 2>"$TMP/stale.err" || fail "stat: exit $?"
grep -q "removed the stale segment of pid $kpid" "$TMP/stale.err" || fail "stat: did not report removing pid $kpid's segment"
! has_table "$kpid" || fail "stat: stale segment of dead pid $kpid not removed"
echo "PASS stat removes the segment of a killed process"

# ERDMA_SHIM_STATS_SHM=0: no segment, stat says so.
ERDMA_SHIM_STATS_SHM=0 bg_start shim "$TMP/z.out" "$TMP/z.err" "$PEER" client 127.0.0.1 "$sport" 10 10
zpid=$BG_PID
wait_line "$TMP/z.out" '^ready$' 20 "$zpid" >/dev/null || fail "third client did not start"
! has_table "$zpid" || fail "ERDMA_SHIM_STATS_SHM=0 still created a segment"
rc=0
"$CLI" stat "$zpid" >/dev/null 2>&1 || rc=$?
[ $rc = 1 ] || fail "stat of a process without a segment: exit $rc (want 1)"
echo "PASS ERDMA_SHIM_STATS_SHM=0: no segment, stat PID exits 1"

result "doctor/run/probe/stat on a host without RDMA: all as documented in erdma-shim(1)"
