#!/usr/bin/env bash
# setuid/setgid programs ignore ERDMA_SHIM_* (issue #8).  glibc marks such a
# process AT_SECURE; the shim then uses its defaults and reads nothing from
# the environment -- no ERDMA_SHIM_LOG_FILE opened, no log level raised, a
# bad value not even reported (the variables are not looked at).  It still
# runs (auto mode, defaults), so a privileged program keeps working.
# tests/progs/secure_env is linked against the shim (the loader drops
# LD_PRELOAD paths for secure programs); copies of it are made setuid
# nobody and setgid nogroup and run as root: euid/egid differ from the real
# ids, so AT_SECURE=1 (checked, not assumed).
set -eu
. "$(dirname "$0")/lib.sh"

P=$PROGS/secure_env
[ -x "$P" ] || fail "$P not built (run make)"
[ "$(id -u)" = 0 ] || { note "not root: cannot make a setuid copy"; result "skipped (needs root)"; exit 0; }
chmod 755 "$TMP"
cp "$P" "$TMP/plain"
cp "$P" "$TMP/suid"; chown nobody "$TMP/suid"; chmod 4755 "$TMP/suid"
cp "$P" "$TMP/sgid"; chgrp nogroup "$TMP/sgid"; chmod 2755 "$TMP/sgid"
# The setuid-nobody copy loads the shim as nobody: a tree under a private
# directory (a clone in /root, a mktemp -d) is out of its reach, and the
# loader fails before the shim runs.  Then only the setgid copy is checked.
secure="suid sgid"
if ! setpriv --reuid=nobody --regid=nogroup --clear-groups test -r "$SHIM" 2>/dev/null; then
	note "nobody cannot read $SHIM (a directory on its path is private): setuid-nobody copy not run, setgid only; clone the tree into a world-readable directory for both"
	secure=sgid
fi

# run NAME BIN [VAR=VALUE...]: stdout+stderr of BIN with the variables set
run() {
	local n=$1 b=$2; shift 2
	env -u LD_PRELOAD "$@" timeout 20 "$TMP/$b" >"$TMP/$n.out" 2>"$TMP/$n.err" ||
		fail "$n: exit $?: $(cat "$TMP/$n.out" "$TMP/$n.err")"
}
for b in plain $secure; do
	run "$b.log" "$b" ERDMA_SHIM_LOG=info ERDMA_SHIM_LOG_FILE="$TMP/log.$b.%p"
	run "$b.bad" "$b" ERDMA_SHIM=bogus ERDMA_SHIM_LOG=debug
done

# the plain copy: not secure, the environment is obeyed
grep -qx 'secure=0 shim=1 socket=ok' "$TMP/plain.log.out" || fail "plain: $(cat "$TMP/plain.log.out")"
ls "$TMP"/log.plain.* >/dev/null 2>&1 || fail "plain: ERDMA_SHIM_LOG_FILE not written"
grep -qE "$BANNER_ERE" "$TMP"/log.plain.* || fail "plain: no banner in the log file"
grep -q "ERDMA_SHIM='bogus' is invalid" "$TMP/plain.bad.err" || fail "plain: bad value not reported: $(cat "$TMP/plain.bad.err")"

for b in $secure; do
	grep -qx 'secure=1 shim=1 socket=ok' "$TMP/$b.log.out" ||
		fail "$b: want AT_SECURE=1 with the shim mapped: $(cat "$TMP/$b.log.out")"
	! ls "$TMP"/log.$b.* >/dev/null 2>&1 || fail "$b: opened ERDMA_SHIM_LOG_FILE from the environment"
	[ ! -s "$TMP/$b.log.err" ] || fail "$b: printed with ERDMA_SHIM_LOG=info: $(cat "$TMP/$b.log.err")"
	[ ! -s "$TMP/$b.bad.err" ] || fail "$b: reacted to ERDMA_SHIM=bogus: $(cat "$TMP/$b.bad.err")"
	grep -qx 'secure=1 shim=1 socket=ok' "$TMP/$b.bad.out" || fail "$b: with ERDMA_SHIM=bogus: $(cat "$TMP/$b.bad.out")"
	echo "PASS: $b: AT_SECURE=1, shim loaded, ERDMA_SHIM_* ignored (no log file, no banner, bad value unseen)"
done
if [ "$secure" = sgid ]; then
	result "setgid programs ignore ERDMA_SHIM_* (setuid not run: the tree is private); the same binary unprivileged obeys them"
else
	result "setuid and setgid programs ignore ERDMA_SHIM_*; the same binary unprivileged obeys them"
fi
