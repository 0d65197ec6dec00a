#!/usr/bin/env bash
# README's "Quick start on two hosts": every command of its ```sh blocks
# (tests/host/readme-cmds; docs/testing.md has the convention) runs here as
# written, through bash, with `erdma-shim` from this tree first in PATH.
# Both "hosts" are this one: A_IP is 127.0.0.1, and the page's port 8000 is
# a free port.  This host has no RDMA, so the shim stays on TCP: the test
# checks what each command must show then.  A command added to the section
# without a case below fails the test.
#   erdma-shim doctor                 exit 1, a fix under every fail
#   ulimit -l unlimited               raised (or, where the host forbids it,
#                                     said so; then the memlock line is
#                                     checked to follow a lower limit)
#   erdma-shim doctor | grep memlock  one memlock line, following the limit
#   cat /sys/module/erdma/...         not run (no erdma module here): the
#                                     path is the one doctor reads
#   erdma-shim run python3 -m http.server 8000
#                                     serves, with the shim in its maps
#   erdma-shim probe A_IP:8000        exit 1: no RDMA device, TCP answers
#   erdma-shim run curl ... http://A_IP:8000/
#                                     prints 200; the server logged the GET
#   erdma-shim stat                   exit 0 (without an RDMA device a
#                                     server's sockets are the kernel's)
set -eu
. "$(dirname "$0")/lib.sh"

cd "$ROOT"
[ -x "$ROOT/erdma-shim" ] || fail "$ROOT/erdma-shim not built (run make)"
command -v curl >/dev/null || fail "curl not found (make test-deps)"
sed -n '/^## Quick start on two hosts$/,/^## /p' README.md | tests/host/readme-cmds >"$TMP/cmds"
[ "$(wc -l <"$TMP/cmds")" -ge 6 ] || { cat "$TMP/cmds" >&2; fail "README: no 'Quick start on two hosts' section with its sh blocks"; }
sec=$(sed -n '/^## Quick start on two hosts$/,/^## /p' README.md)
for w in 'P+20000' 'security group' 'compat_mode=1' 'rdma res show qp' '--require'; do
	grep -qF -- "$w" <<<"$sec" || fail "README's quick start does not mention '$w'"
done

port=$(free_port)
export PATH="$ROOT:$PATH" PYTHONUNBUFFERED=1
cd "$TMP"
# sh CMD: the README line, A_IP and port 8000 replaced, run by bash
sh_of() { sed -e "s/A_IP/127.0.0.1/g" -e "s/\b8000\b/$port/g" <<<"$1"; }

n=0 raised=
while IFS= read -r cmd; do
	run=$(sh_of "$cmd")
	case "$cmd" in
	"erdma-shim doctor")
		rc=0
		bash -c "$run" >"$TMP/doctor.out" 2>&1 || rc=$?
		[ $rc = 1 ] || fail "'$cmd': exit $rc without RDMA (want 1)"
		f=$(grep -cE '^[a-z0-9_/]+ +fail ' "$TMP/doctor.out" || true)
		x=$(grep -cE '^ +fix: ' "$TMP/doctor.out" || true)
		[ "$f" -ge 1 ] && [ "$x" -ge "$f" ] || { cat "$TMP/doctor.out" >&2; fail "'$cmd': $f failures, $x fix lines"; }
		;;
	"ulimit -l unlimited")
		if (eval "$run") 2>"$TMP/ulimit.err"; then
			raised=1
		else
			grep -q 'Operation not permitted' "$TMP/ulimit.err" || fail "'$cmd': $(cat "$TMP/ulimit.err")"
			note "'$cmd': this host forbids raising memlock ($(cat "$TMP/ulimit.err")); the next command is checked against a lower limit"
		fi
		;;
	"erdma-shim doctor | grep memlock")
		if [ -n "$raised" ]; then
			line=$(bash -c "ulimit -l unlimited && $run") || fail "'$cmd': no memlock line"
			grep -Eq '^memlock +ok ' <<<"$line" || fail "'$cmd' at unlimited: '$line'"
		fi
		low=$(bash -c "ulimit -l 2048 && $run") || fail "'$cmd' under ulimit -l 2048: no line"
		grep -q 'RLIMIT_MEMLOCK 2048 KiB.*about 2 connections fit' <<<"$low" || fail "'$cmd' does not follow the limit: '$low'"
		;;
	"cat /sys/module/erdma/parameters/compat_mode")
		grep -qF '"/sys/module/erdma/parameters/compat_mode"' "$ROOT/preload/cli/erdma-shim.c" ||
			fail "'$cmd': doctor no longer reads that parameter"
		note "'$cmd': not run (no erdma module here); doctor reads it"
		;;
	"erdma-shim run python3 -m http.server 8000")
		bg_start plain "$TMP/srv.out" "$TMP/srv.err" bash -c "exec $run"
		spid=$BG_PID
		wait_line "$TMP/srv.out" "^Serving HTTP on .* port $port " 20 "$spid" >/dev/null ||
			{ cat "$TMP/srv.err" >&2; fail "'$cmd': the server did not start"; }
		grep -q 'liberdma_shim\.so' "/proc/$spid/maps" || fail "'$cmd': the server runs without the shim"
		;;
	"erdma-shim probe A_IP:8000")
		[ -n "${spid:-}" ] || fail "README: '$cmd' before the server starts"
		rc=0
		bash -c "$run" >"$TMP/probe.out" 2>&1 || rc=$?
		[ $rc = 1 ] && grep -q "^tcp  127.0.0.1:$port ok" "$TMP/probe.out" ||
			{ cat "$TMP/probe.out" >&2; fail "'$cmd': exit $rc, want 1 (TCP answers, no RDMA here)"; }
		;;
	"erdma-shim run curl -s -o /dev/null -w '%{http_code}\\n' http://A_IP:8000/")
		[ -n "${spid:-}" ] || fail "README: '$cmd' before the server starts"
		out=$(timeout 30 bash -c "$run") || fail "'$cmd': exit $?"
		[ "$out" = 200 ] || fail "'$cmd': printed '$out' (want 200)"
		wait_line "$TMP/srv.err" '"GET / HTTP/1.1" 200' 10 "$spid" >/dev/null || fail "'$cmd': the server logged no GET"
		;;
	"erdma-shim stat")
		rc=0
		bash -c "$run" >"$TMP/stat.out" 2>&1 || rc=$?
		[ $rc = 0 ] || { cat "$TMP/stat.out" >&2; fail "'$cmd': exit $rc"; }
		;;
	*)
		fail "README's quick start has a command this test does not exercise: '$cmd'"
		;;
	esac
	n=$((n + 1))
	echo "PASS README: $cmd"
done <"$TMP/cmds"

result "README 'Quick start on two hosts': all $n commands exercised, on one host over loopback (A_IP=127.0.0.1); all run as written but the cat of erdma's compat_mode (no module here), checked against what doctor reads"
