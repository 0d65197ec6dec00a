#!/usr/bin/env bash
# tests/progs/passthru_fds.c: fds above 1024 / above 65536 / at the soft
# RLIMIT_NOFILE (raised to the hard limit), close_range and closefrom over
# sockets, numbers reused by pipes and files, and sockets on fd 2 after
# close(2), close_range(2, 2), fclose(stderr) and with fd 2 closed from the
# start -- with
# ERDMA_SHIM_LOG=debug, the data on the fd-2 sockets must be exactly what was
# sent (no log text).  Transcripts and exit codes must match without the shim.
set -eu
. "$(dirname "$0")/lib.sh"

PROG=$PROGS/passthru_fds
[ -x "$PROG" ] || fail "$PROG not built (run make)"

# run_fds MODE ARG [closed]: run "passthru_fds ARG" (fd 2 closed with
# "closed"); transcript + "rc=N" in $TMP/ARG.MODE.out, maps lines in .maps
run_fds() {
	local m=$1 arg=$2 how=${3:-} rc=0 o=$TMP/$2.$1
	: >"$o.maps"
	if [ "$how" = closed ]; then
		ERDMA_SHIM_LOG=debug PASSTHRU_MAPS_OUT=$o.maps run_mode "$m" 60 "$PROG" "$arg" >"$o.out" 2>&- </dev/null || rc=$?
		: >"$o.err"
	else
		ERDMA_SHIM_LOG=debug PASSTHRU_MAPS_OUT=$o.maps run_mode "$m" 60 "$PROG" "$arg" >"$o.out" 2>"$o.err" </dev/null || rc=$?
	fi
	echo "rc=$rc" >>"$o.out"
}

check_pair() { # ARG WHAT
	local a=$1 what=$2
	if grep -q '^FAIL' "$TMP/$a.plain.out"; then
		grep '^FAIL' "$TMP/$a.plain.out" >&2
		fail "$what: fails without the shim: the test itself is broken on this host"
	fi
	[ -s "$TMP/$a.shim.maps" ] || fail "$what: liberdma_shim.so not in the shimmed process's maps"
	[ ! -s "$TMP/$a.plain.maps" ] || fail "$what: liberdma_shim.so mapped in the plain run"
	same "$TMP/$a.plain.out" "$TMP/$a.shim.out" "$what"
	grep -qx 'rc=0' "$TMP/$a.shim.out" || fail "$what: exit $(tail -n1 "$TMP/$a.shim.out")"
}

for m in plain shim; do
	run_fds "$m" all
	run_fds "$m" closerange
	run_fds "$m" fclose
	run_fds "$m" preclosed closed
done

# "all": the banner was printed before the program closed fd 2
assert_banner "$TMP/all.shim.err" "passthru_fds all"
assert_no_banner "$TMP/all.plain.err" "passthru_fds all (plain)"
check_pair all "fds above 1024/65536, close_range, closefrom, close(2)"
check_pair closerange "close_range(2, 2, 0), sockets on fd 2"
check_pair fclose "fclose(stderr), sockets on fd 2"
check_pair preclosed "fd 2 closed at start, sockets on fd 2"

hi=$(grep -q 'above 65536: available' "$TMP/all.shim.out" && echo "tested" ||
	echo "skipped (hard RLIMIT_NOFILE $(ulimit -Hn), no CAP_SYS_RESOURCE to raise it)")
result "fds above 1024 and at RLIMIT_NOFILE-1 ($(($(ulimit -Hn) - 1))): identical; above 65536: $hi"
result "close_range (plain, CLOEXEC, bad range) and closefrom over sockets; reused numbers: identical"
result "sockets on fd 2 after close(2) / close_range(2,2) / fclose(stderr) / closed at start, ERDMA_SHIM_LOG=debug: streams byte-exact, no log text"
