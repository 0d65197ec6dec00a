#!/usr/bin/env bash
# fork while another thread installs signal handlers (the shim's sigaction
# takes a lock: base/sigdefer.c): every child's own sigaction returns.
# tests/progs/sigfork forks 300 times with and without the shim; the
# outputs must be the same ("forks: 300, hung: 0").  Before the fork
# child's reset of that lock, 6 of 12 children hung, deaf even to alarm().
#
# And a signal whose handler makes and closes a socket and an epoll fd,
# raised inside fork() after the shim's prepare handlers took their fork
# locks (tests/inject/forksig.so, preloaded last): 20 forks must return,
# each having run the handler, as without the shim (in modes auto and
# require: require makes the shim keep a record of the handler's socket
# on a host without an RDMA device).
# Before the shim blocked signals across its fork handlers, the first
# fork hung for good (the handler waited for a lock its thread held).
# The injector's report proves that under the shim each signal came inside
# the shim's fork handlers (it found the signal blocked there).
set -eu
. "$(dirname "$0")/lib.sh"

P=$PROGS/sigfork
[ -x "$P" ] || fail "$P not built (run make)"
plain=$("$P" 300) || fail "without the shim: $plain"
shimmed=$(LD_PRELOAD="$SHIM" "$P" 300) || fail "under the shim: $shimmed"
[ "$plain" = "$shimmed" ] || fail "differs: without '$plain', under the shim '$shimmed'"

H=$PROGS/handlerfork
INJ=$ROOT/build/tests/inject/forksig.so
[ -x "$H" ] && [ -f "$INJ" ] || fail "$H or $INJ not built (run make)"
USR1=$(kill -l USR1)
# timeout runs outside the preload: the injector's signal would end it
plain2=$(timeout -k 2 30 env ERDMA_INJECT_FORK_SIG="$USR1" LD_PRELOAD="$INJ" "$H" 20 2>"$TMP/plain.err") ||
	fail "without the shim: exit $?: $plain2"
for mode in auto require; do
	out=$(timeout -k 2 30 env ERDMA_SHIM=$mode ERDMA_INJECT_FORK_SIG="$USR1" \
		LD_PRELOAD="$(shim_preload):$INJ" "$H" 20 2>"$TMP/$mode.err") ||
		fail "a handler run inside fork(), ERDMA_SHIM=$mode: exit $? (124: a fork hung): $out"
	[ "$out" = "$plain2" ] || fail "ERDMA_SHIM=$mode: '$out', without the shim '$plain2'"
	# proof that the signal came inside the shim's fork handlers
	grep -qx 'forksig: 20 raised, 20 blocked' "$TMP/$mode.err" ||
		fail "ERDMA_SHIM=$mode: the injector did not raise inside the shim's fork handlers: $(grep forksig "$TMP/$mode.err")"
done
result "$shimmed, with and without the shim; a handler inside fork(): $plain2, in both modes"
