#!/usr/bin/env bash
# The exec family under the shim (preload/exec.c: it wraps every libc
# variant to carry listeners' RDMA port reservations; here, without RDMA,
# there is none to carry): tests/progs/execvars runs /bin/sh through
# execve, execv, execvp, execvpe, execl, execlp, execle, fexecve and
# execveat, then makes each fail (ENOENT, EACCES).  With and without the
# shim: the same programs run with the same arguments and variables, the
# same errno on each failure, the caller's envp array as it was -- except
# a LIBERDMA_SHIM_TWINS the caller put in the environment, which the shim
# does not pass on (it is the shim's own, and stale: it names no
# reservation of this process's).  The real carry is in the bed
# (tests/rdma/47-forkconn.sh, supervise-*).
set -eu
. "$(dirname "$0")/lib.sh"

PROG=$PROGS/execvars
[ -x "$PROG" ] || fail "$PROG not built (run make)"
for m in plain shim; do
	rc=0
	run_mode "$m" 60 "$PROG" >"$TMP/$m.out" 2>"$TMP/$m.err" </dev/null || rc=$?
	echo "rc=$rc" >>"$TMP/$m.out"
done
[ ! -s "$TMP/shim.err" ] || { cat "$TMP/shim.err" >&2; fail "the shimmed run printed on stderr"; }
# the shim's one difference: no stale LIBERDMA_SHIM_TWINS reaches the child
sed -e 's/ 5,6,7$/ unset/' -e 's/ 9,9,9$/ unset/' "$TMP/plain.out" >"$TMP/plain.want"
same "$TMP/plain.want" "$TMP/shim.out" "exec family"
n=$(grep -c ' unset$' "$TMP/shim.out" || true)
[ "$n" = 9 ] || { cat "$TMP/shim.out" >&2; fail "$n of 9 variants ran the program"; }
grep -q ' 5,6,7$' "$TMP/plain.out" || fail "plain run: the variable did not reach the child (the test proves nothing)"
[ "$(grep -c ', envp as it was, environ has it$' "$TMP/shim.out")" = 18 ] || { cat "$TMP/shim.out" >&2; fail "a failed exec changed the caller's envp or environ"; }
result "9 exec variants: same programs, variables and errno (ENOENT, EACCES) as without the shim, the caller's envp untouched; a stale LIBERDMA_SHIM_TWINS not passed on"
