#!/usr/bin/env bash
# fork while another thread installs signal handlers (the shim's sigaction
# takes a lock: base/sigdefer.c): every child's own sigaction returns.
# tests/progs/sigfork forks 300 times with and without the shim; the
# outputs must be the same ("forks: 300, hung: 0").  Before the fork
# child's reset of that lock, 6 of 12 children hung, deaf even to alarm().
set -eu
. "$(dirname "$0")/lib.sh"

P=$PROGS/sigfork
[ -x "$P" ] || fail "$P not built (run make)"
plain=$("$P" 300) || fail "without the shim: $plain"
shimmed=$(LD_PRELOAD="$SHIM" "$P" 300) || fail "under the shim: $shimmed"
[ "$plain" = "$shimmed" ] || fail "differs: without '$plain', under the shim '$shimmed'"
result "$shimmed, with and without the shim"
