#!/usr/bin/env bash
# shellcheck shell=bash
# Helpers for the host (passthrough) integration tests.  Source it from a
# test script under tests/host/:  . "$(dirname "$0")/lib.sh"
#
# Every test runs one scenario twice, in mode "plain" (no LD_PRELOAD at all)
# and in mode "shim" (LD_PRELOAD of liberdma_shim.so), and compares what can
# be observed.  On this host there is no RDMA device, so the two runs must be
# indistinguishable.
#
#   ROOT SHIM PROGS      repo root, the library, the built test programs
#   PY                   Debian's python3 (has python3-grpcio)
#   TMP                  a scratch directory removed at exit
#   shim_preload         the LD_PRELOAD value: $SHIM_PRELOAD if set (run-all
#                        sets "libasan.so:liberdma_shim.so" under SANITIZE=1),
#                        else $SHIM
#   with_shim CMD...     run CMD with the shim preloaded
#   without_shim CMD...  run CMD with LD_PRELOAD removed
#   in_mode MODE CMD...  MODE is plain or shim
#                        (CMD may start with VAR=VALUE words: env sets them
#                        for the program only)
#   run_mode MODE SECS CMD...
#                        in_mode under `timeout SECS` (timeout itself runs
#                        without the shim, so a banner comes from CMD only)
#   bg_start MODE OUT ERR CMD...
#                        start CMD in the background; its pid (the program's
#                        own: env execs it) is left in BG_PID, and it is
#                        killed at exit if still running
#   wait_line FILE ERE [SECS] [PID]
#                        bounded wait until a line of FILE matches ERE (fails
#                        early if PID died); prints the first matching line
#   wait_exit PID [SECS] wait for a background job, bounded (SIGTERM when
#                        the time is up); sets WAIT_RC
#   shim_starts CMD...   does CMD get going with the shim preloaded (not stuck
#                        for 10 s)?  Fails the test if not, unless the
#                        preload includes libasan (SANITIZE=1): some
#                        uninstrumented programs -- curl here -- deadlock at
#                        start whenever libasan is preloaded, shim or not;
#                        then returns 1 so the test can leave that program
#                        out of the shimmed runs and say so
#   free_port            a TCP port on 127.0.0.1 free right now (racy: use
#                        only for programs that cannot bind port 0 themselves)
#   have_ipv6            ::1 can be bound
#   has_table PID        a statistics table of PID (this pid namespace, any
#                        user) is in /dev/shm (erdma-shim.PID.PIDNS.UID)
#   banner_count FILE    number of shim banner lines in FILE
#   assert_banner FILE WHAT / assert_no_banner FILE WHAT
#   same FILE_A FILE_B WHAT
#                        fail (with a diff) unless the files are identical
#   fail MSG / note MSG / result MSG

set -eu

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
SHIM=$ROOT/liberdma_shim.so
PROGS=$ROOT/build/tests/progs
PY=/usr/bin/python3
TEST_NAME=$(basename "$0" .sh)
export LC_ALL=C

# The banner liberdma_shim prints at start-up with ERDMA_SHIM_LOG=info.
BANNER_ERE='^liberdma_shim\[[0-9]+\] info: liberdma_shim [0-9][^ ]* mode='

fail() {
	echo "FAIL: $TEST_NAME: $*" >&2
	exit 1
}
note() { echo "# $*"; }
result() { echo "RESULT: $*"; }

[ -f "$SHIM" ] || fail "$SHIM not built (run make)"

TMP=$(mktemp -d "/tmp/erdma-host-$TEST_NAME.XXXXXX")
_BG_PIDS=()
_cleanup() {
	local p
	for p in "${_BG_PIDS[@]}"; do
		kill "$p" 2>/dev/null || true
	done
	for p in "${_BG_PIDS[@]}"; do
		# bounded: a job that ignores SIGTERM gets SIGKILL after ~2 s
		for _ in $(seq 40); do
			kill -0 "$p" 2>/dev/null || break
			sleep 0.05
		done
		kill -KILL "$p" 2>/dev/null || true
	done
	if [ -n "${KEEP_TMP:-}" ]; then
		echo "# kept $TMP" >&2
	else
		rm -rf "$TMP"
	fi
}
trap _cleanup EXIT
# the runner's timeout sends SIGTERM: still stop the servers we started
trap 'exit 143' TERM
trap 'exit 130' INT

shim_preload() { printf '%s' "${SHIM_PRELOAD:-$SHIM}"; }
with_shim() { env LD_PRELOAD="$(shim_preload)" "$@"; }
without_shim() { env -u LD_PRELOAD "$@"; }
in_mode() {
	local m=$1
	shift
	case $m in
	shim) with_shim "$@" ;;
	plain) without_shim "$@" ;;
	*) fail "in_mode: unknown mode $m" ;;
	esac
}

run_mode() {
	local m=$1 secs=$2
	shift 2
	case $m in
	shim) timeout --kill-after=5 "$secs" env LD_PRELOAD="$(shim_preload)" "$@" ;;
	plain) timeout --kill-after=5 "$secs" env -u LD_PRELOAD "$@" ;;
	*) fail "run_mode: unknown mode $m" ;;
	esac
}

bg_start() {
	local m=$1 out=$2 err=$3
	shift 3
	case $m in
	shim) env LD_PRELOAD="$(shim_preload)" "$@" >"$out" 2>"$err" </dev/null & ;;
	plain) env -u LD_PRELOAD "$@" >"$out" 2>"$err" </dev/null & ;;
	*) fail "bg_start: unknown mode $m" ;;
	esac
	BG_PID=$!
	_BG_PIDS+=("$BG_PID")
}

wait_line() {
	local file=$1 ere=$2 secs=${3:-20} pid=${4:-} line
	for _ in $(seq $((secs * 20))); do
		if [ -f "$file" ] && line=$(grep -E -m1 -e "$ere" "$file"); then
			printf '%s\n' "$line"
			return 0
		fi
		if [ -n "$pid" ] && ! kill -0 "$pid" 2>/dev/null; then
			# one last look: it may have printed and exited
			if [ -f "$file" ] && line=$(grep -E -m1 -e "$ere" "$file"); then
				printf '%s\n' "$line"
				return 0
			fi
			echo "wait_line: process $pid exited before '$ere' appeared in $file" >&2
			return 1
		fi
		sleep 0.05
	done
	echo "wait_line: no line matching '$ere' in $file after ${secs}s" >&2
	return 1
}

wait_exit() {
	local pid=$1 secs=${2:-30}
	for _ in $(seq $((secs * 20))); do
		kill -0 "$pid" 2>/dev/null || break
		sleep 0.05
	done
	if kill -0 "$pid" 2>/dev/null; then
		kill "$pid" 2>/dev/null || true
		echo "wait_exit: process $pid still running after ${secs}s, killed" >&2
	fi
	WAIT_RC=0
	wait "$pid" || WAIT_RC=$?
	_forget_pid "$pid"
}

# A reaped pid may be reused by someone else's process: never signal it again.
_forget_pid() {
	local p keep=()
	for p in "${_BG_PIDS[@]}"; do
		[ "$p" = "$1" ] || keep+=("$p")
	done
	_BG_PIDS=("${keep[@]}")
}

shim_starts() {
	local rc=0
	run_mode shim 10 "$@" >/dev/null 2>&1 </dev/null || rc=$?
	[ $rc -ne 124 ] && [ $rc -ne 137 ] && return 0
	case $(shim_preload) in
	*asan*)
		note "$1 does not start with libasan preloaded (libasan and $1, not the shim): left out of the shimmed runs"
		return 1
		;;
	esac
	fail "$* hangs at start with the shim preloaded"
}

free_port() {
	without_shim "$PY" -c 'import socket
s = socket.socket()
s.bind(("127.0.0.1", 0))
print(s.getsockname()[1])'
}

has_table() {
	compgen -G "/dev/shm/erdma-shim.$1.$(stat -Lc %i /proc/self/ns/pid).*" >/dev/null
}

have_ipv6() {
	without_shim "$PY" -c 'import socket
s = socket.socket(socket.AF_INET6)
s.bind(("::1", 0))' 2>/dev/null
}

banner_count() { grep -E -c -e "$BANNER_ERE" "$1" || true; }
assert_banner() {
	[ "$(banner_count "$1")" -ge 1 ] ||
		fail "$2: no liberdma_shim banner in $1: was the shim loaded?"
}
assert_no_banner() {
	[ "$(banner_count "$1")" -eq 0 ] ||
		fail "$2: liberdma_shim banner in $1 although the shim was not preloaded"
}

same() {
	if ! cmp -s "$1" "$2"; then
		echo "--- $1 vs $2:" >&2
		diff -u "$1" "$2" >&2 || true
		fail "$3: results differ with and without the shim"
	fi
}

# Executed rather than sourced (the suite's glob tests/host/*.sh picks this
# file up too): check the harness itself -- the shim loads under with_shim
# and only there, and the helpers behave.
if [ "${BASH_SOURCE[0]}" = "$0" ]; then
	ERDMA_SHIM_LOG=info with_shim /bin/true 2>"$TMP/with.err" || fail "with_shim /bin/true failed"
	assert_banner "$TMP/with.err" "with_shim"
	ERDMA_SHIM_LOG=info without_shim /bin/true 2>"$TMP/without.err" || fail "without_shim /bin/true failed"
	assert_no_banner "$TMP/without.err" "without_shim"
	ERDMA_SHIM_LOG=info run_mode shim 10 /bin/true 2>"$TMP/rm.err" || fail "run_mode shim failed"
	[ "$(banner_count "$TMP/rm.err")" = 1 ] || fail "run_mode shim: want exactly one banner (the program's)"
	ERDMA_SHIM_LOG=info bg_start shim "$TMP/bg.out" "$TMP/bg.err" /bin/sh -c 'echo "pid $$"'
	wait_exit "$BG_PID" 10
	[ "$WAIT_RC" = 0 ] && grep -qx "pid $BG_PID" "$TMP/bg.out" ||
		fail "bg_start: BG_PID is not the program's pid"
	grep -qF "liberdma_shim[$BG_PID] info:" "$TMP/bg.err" || fail "bg_start shim: no banner from the program"
	p=$(free_port)
	[ "$p" -gt 0 ] 2>/dev/null || fail "free_port: '$p'"
	start=$SECONDS
	! wait_line "$TMP/bg.out" '^never$' 1 2>/dev/null || fail "wait_line matched nothing"
	[ $((SECONDS - start)) -le 3 ] || fail "wait_line not bounded"
	result "harness: with_shim/run_mode/bg_start load the shim (banner from the program's pid), without_shim does not; free_port=$p; ipv6=$(have_ipv6 && echo yes || echo no)"
fi
