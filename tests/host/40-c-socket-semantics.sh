#!/usr/bin/env bash
# tests/progs/passthru_sock.c: socket semantics (non-blocking connect, ET
# epoll, accept4 flags, sendmsg/recvmsg, sendfile, dup*, fork, poll/select,
# shutdown, fcntl/ioctl, threads, fortified entry points, UDP, AF_UNIX) over
# 127.0.0.1 and ::1.  Its transcript and exit code must be the same with and
# without the shim.
set -eu
. "$(dirname "$0")/lib.sh"

PROG=$PROGS/passthru_sock
[ -x "$PROG" ] || fail "$PROG not built (run make)"

# The binary must really call the fortify entry points the shim wraps.
syms=$(nm -D "$PROG")
for s in __read_chk __recv_chk __recvfrom_chk __poll_chk __ppoll_chk; do
	grep -q " U $s@" <<<"$syms" || fail "$PROG does not reference $s (built without _FORTIFY_SOURCE?)"
done

for m in plain shim; do
	rc=0
	ERDMA_SHIM_LOG=info run_mode "$m" 90 "$PROG" >"$TMP/$m.out" 2>"$TMP/$m.err" </dev/null || rc=$?
	echo "rc=$rc" >>"$TMP/$m.out"
	note "$m: exit $rc, $(grep -c '^\[' "$TMP/$m.out") transcript lines, $(grep -c '^FAIL' "$TMP/$m.out" || true) FAIL lines"
done
assert_no_banner "$TMP/plain.err" "plain run"
assert_banner "$TMP/shim.err" "shimmed run"
# the program's own stderr (anything but the shim's lines) must match too
grep -v '^liberdma_shim\[' "$TMP/plain.err" >"$TMP/plain.err2" || true
grep -v '^liberdma_shim\[' "$TMP/shim.err" >"$TMP/shim.err2" || true
if grep -q '^FAIL' "$TMP/plain.out"; then
	grep '^FAIL' "$TMP/plain.out" >&2
	fail "the program fails without the shim: the test itself is broken on this host"
fi
same "$TMP/plain.out" "$TMP/shim.out" "transcript"
same "$TMP/plain.err2" "$TMP/shim.err2" "stderr"
grep -qx 'rc=0' "$TMP/shim.out" || fail "exit code $(tail -n1 "$TMP/shim.out")"
v6=$(grep -q '^\[v6\] skipped' "$TMP/shim.out" && echo "skipped (::1 unavailable)" || echo tested)
result "passthru_sock: $(grep -c '^\[' "$TMP/shim.out") transcript lines identical, exit 0 both ways; IPv6 $v6"
result "fortify entry points referenced: __read_chk __recv_chk __recvfrom_chk __poll_chk __ppoll_chk"
