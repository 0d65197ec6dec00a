#!/usr/bin/env bash
# runner-timeout: 300
# README's "Deploy on a cluster": every command in its ```sh blocks runs
# here (or, for the two this host cannot run, is checked against what the
# code does and named in the section as such).  A command added to the
# section without a case below fails the test.
#   make deb                        the package (reused if the tree is built)
#   sudo apt install ./....deb      simulated (apt-get -s): apt resolves the
#                                   package's Depends on this host
#   erdma-shim doctor               exit 1 without RDMA, a fix per failure
#   erdma-shim doctor | grep memlock
#                                   the line follows RLIMIT_MEMLOCK (a lower
#                                   limit, fewer connections)
#   erdma-shim run -- python3 train.py / erdma-shim stat
#                                   a train.py that talks to a server; stat
#                                   lists its connection (path tcp here)
#   erdma-shim stat --prometheus > .../erdma-shim.prom
#                                   into a scratch textfile directory; parses
#   modprobe erdma compat_mode=1    not run (no erdma module in Debian 12's
#                                   kernel): the parameter is the one doctor
#                                   reads; P+20000 is the library's constant
#   rdma res show qp                not run (no RDMA netlink on the host):
#                                   the RDMA suite counts QPs with it
set -eu
. "$(dirname "$0")/lib.sh"

cd "$ROOT"
CLI=$ROOT/erdma-shim
[ -x "$CLI" ] || fail "$CLI not built (run make)"
version=$(sed -n 's/^VERSION := //p' Makefile)
arch=$(dpkg-architecture -qDEB_HOST_ARCH)

# The section's commands: the lines of its ```sh fenced blocks, comments
# cut (docs/testing.md: other blocks -- bash, ini, yaml -- are examples).
sed -n '/^## Deploy on a cluster$/,/^## /p' README.md | "$ROOT/tests/host/readme-cmds" >"$TMP/cmds"
[ "$(wc -l <"$TMP/cmds")" -ge 6 ] || { cat "$TMP/cmds" >&2; fail "README: no 'Deploy on a cluster' section with its commands"; }
# modprobe and the memlock advice are prose; the section must still name them
sec=$(sed -n '/^## Deploy on a cluster$/,/^## /p' README.md)
for w in 'modprobe erdma compat_mode=1' 'P+20000' 'LimitMEMLOCK=infinity' 'rdma res show qp' 'erdma-shim stat'; do
	grep -qF -- "$w" <<<"$sec" || fail "README's Deploy section does not mention '$w'"
done

bg_start plain "$TMP/srv.out" "$TMP/srv.err" "$PROGS/statpeer" server 127.0.0.1 0
spid=$BG_PID
wait_line "$TMP/srv.out" '^ready [0-9]+$' 20 "$spid" >/dev/null || fail "statpeer server did not start"
sport=$(awk '/^ready /{print $2; exit}' "$TMP/srv.out")
cat >"$TMP/train.py" <<EOF
# stands in for a training job: one connection, one exchange, then it runs on
import signal, socket, sys
signal.signal(signal.SIGTERM, lambda *a: sys.exit(0))
s = socket.create_connection(("127.0.0.1", $sport))
s.sendall(b"4096 8192\n" + b"w" * 4096)
got = 0
while got < 8192:
    b = s.recv(65536)
    if not b:
        sys.exit("EOF")
    got += len(b)
print("trained", s.fileno(), flush=True)
signal.pause()
EOF

n=0
while IFS= read -r cmd; do
	case "$cmd" in
	"make deb")
		make --no-print-directory deb >"$TMP/deb.out" 2>&1 || { cat "$TMP/deb.out" >&2; fail "'$cmd': exit $?"; }
		deb=$(tail -n 1 "$TMP/deb.out")
		[ "$(basename "$deb")" = "liberdma-shim_${version}-1_${arch}.deb" ] || fail "'$cmd': last line '$deb'"
		;;
	"sudo apt install ./liberdma-shim_${version}-1_${arch}.deb")
		[ -n "${deb:-}" ] || fail "README: '$cmd' before 'make deb'"
		(cd "$(dirname "$deb")" && apt-get install -s "./$(basename "$deb")") >"$TMP/apt.out" 2>&1 ||
			{ cat "$TMP/apt.out" >&2; fail "'$cmd' (simulated): apt-get -s exit $?"; }
		grep -q "^Inst liberdma-shim (${version}-1" "$TMP/apt.out" && grep -q '^Conf liberdma-shim' "$TMP/apt.out" ||
			{ cat "$TMP/apt.out" >&2; fail "'$cmd' (simulated): apt would not install and configure liberdma-shim"; }
		! grep -q '^E:' "$TMP/apt.out" || fail "'$cmd' (simulated): apt errors"
		;;
	"erdma-shim doctor")
		rc=0
		"$CLI" doctor >"$TMP/doctor.out" 2>&1 || rc=$?
		[ $rc = 1 ] || fail "'$cmd': exit $rc without RDMA (want 1)"
		f=$(grep -cE '^[a-z0-9_/]+ +fail ' "$TMP/doctor.out" || true)
		x=$(grep -cE '^ +fix: ' "$TMP/doctor.out" || true)
		[ "$f" -ge 1 ] && [ "$x" -ge "$f" ] || { cat "$TMP/doctor.out" >&2; fail "'$cmd': $f failures, $x fix lines"; }
		;;
	"erdma-shim doctor | grep memlock")
		line=$("$CLI" doctor 2>/dev/null | grep memlock) || fail "'$cmd': no memlock line"
		low=$(bash -c 'ulimit -l 2048 && "$0" doctor' "$CLI" 2>/dev/null | grep memlock) || fail "'$cmd' under ulimit -l 2048: no line"
		grep -Eq '^memlock +(ok|warn|fail) ' <<<"$line" || fail "'$cmd': '$line'"
		grep -q 'RLIMIT_MEMLOCK 2048 KiB.*about 2 connections fit' <<<"$low" || fail "'$cmd' does not follow the limit: '$low'"
		;;
	"erdma-shim run -- python3 train.py")
		(cd "$TMP" && exec "$CLI" run -- python3 train.py) >"$TMP/train.out" 2>"$TMP/train.err" </dev/null &
		tpid=$!
		_BG_PIDS+=("$tpid")
		wait_line "$TMP/train.out" '^trained [0-9]+$' 20 "$tpid" >/dev/null || { cat "$TMP/train.err" >&2; fail "'$cmd': train.py did not run"; }
		tfd=$(awk '/^trained /{print $2}' "$TMP/train.out")
		;;
	"erdma-shim stat")
		[ -n "${tpid:-}" ] || fail "README: '$cmd' before the job runs"
		"$CLI" stat >"$TMP/stat.out" || fail "'$cmd': exit $?"
		# (exec: the pid is python3's, run execs it)
		awk -v p="$tpid" -v f="$tfd" -v sp="127.0.0.1:$sport" \
			'$1 == p && $2 == f && $3 == "tcp" && $5 == sp && $6 == 8192 && $7 == 4106' "$TMP/stat.out" | grep -q . ||
			{ cat "$TMP/stat.out" >&2; fail "'$cmd': train.py's connection (fd $tfd, in 8192, out 4106, path tcp) not listed"; }
		;;
	"rdma res show qp")
		grep -q 'rdma res show qp' tests/rdma/lib/common.bash && grep -q 'qps "\$cpid"' tests/rdma/80-cli.sh ||
			fail "'$cmd': the RDMA suite no longer counts QPs with it"
		note "not run here (no RDMA netlink): tests/rdma/80-cli.sh counts the client's RC QPs with it"
		;;
	"erdma-shim stat --prometheus > /var/lib/prometheus/node-exporter/erdma-shim.prom")
		mkdir -p "$TMP/node-exporter"
		"$CLI" stat --prometheus >"$TMP/node-exporter/erdma-shim.prom" || fail "'$cmd': exit $?"
		"$PY" tests/host/prom_parse.py "$TMP/node-exporter/erdma-shim.prom" >"$TMP/prom.txt" ||
			fail "'$cmd': the file does not parse"
		grep -qxF "erdma_shim_connections{comm=\"python3\",path=\"tcp\",pid=\"$tpid\",reason=\"no RDMA device\"} 1" "$TMP/prom.txt" ||
			{ cat "$TMP/prom.txt" >&2; fail "'$cmd': train.py's tcp connection not in the file"; }
		;;
	*)
		fail "README's Deploy section has a command this test does not exercise: '$cmd'"
		;;
	esac
	n=$((n + 1))
	echo "PASS README: $cmd"
done <"$TMP/cmds"

# The two commands that need hardware: what the section says matches the code.
grep -q '/sys/module/erdma/parameters/compat_mode' preload/cli/erdma-shim.c ||
	fail "doctor no longer reads erdma's compat_mode parameter (the README's modprobe line names it)"
grep -Eq '^#define SHIM_IWARP_PORT_OFFSET 20000u' preload/base/config.h ||
	fail "the library's iWARP offset is no longer 20000 (README says P+20000)"
echo "PASS README: modprobe erdma compat_mode=1 names the parameter doctor reads; P+20000 is SHIM_IWARP_PORT_OFFSET (neither run: no erdma module, no RDMA here)"

result "README 'Deploy on a cluster': $n commands run as written (apt install simulated), 2 checked against the code"
