#!/usr/bin/env bash
# A bad ERDMA_SHIM_* value that contains control characters (a newline, an
# ANSI escape) must still give exactly one stderr line, with the characters
# made visible: the value comes from the environment and must not be able to
# split the shim's line or forge another "liberdma_shim[pid] ..." line.  The
# program itself (passthru_fds here: quick, deterministic) runs as without the
# shim.
set -eu
. "$(dirname "$0")/lib.sh"

P=$PROGS/passthru_fds
[ -x "$P" ] || fail "$P not built (run make)"
rc=0
run_mode plain 60 "$P" >"$TMP/plain.out" 2>"$TMP/plain.err" </dev/null || rc=$?
echo "rc=$rc" >>"$TMP/plain.out"

cases=(
	"ERDMA_SHIM=bad"$'\n'"liberdma_shim[1] info: forged line"
	"ERDMA_SHIM_LOG="$'\e[31mred\e[0m'
	"ERDMA_SHIM_ALLOW=10.0.0.0/8"$'\r'"overwritten"
)
bad=0
n=0
for kv in "${cases[@]}"; do
	n=$((n + 1))
	var=${kv%%=*}
	rc=0
	run_mode shim 60 env "$kv" "$P" >"$TMP/c$n.out" 2>"$TMP/c$n.err" </dev/null || rc=$?
	echo "rc=$rc" >>"$TMP/c$n.out"
	same "$TMP/plain.out" "$TMP/c$n.out" "$var with control characters: program output"
	lines=$(wc -l <"$TMP/c$n.err")
	ctl=$(LC_ALL=C tr -d '\n' <"$TMP/c$n.err" | LC_ALL=C grep -c '[[:cntrl:]]' || true)
	shown=$(LC_ALL=C cat -A "$TMP/c$n.err" | head -n 3 | tr '\n' ' ')
	if [ "$lines" != 1 ] || [ "$ctl" != 0 ] || ! grep -q "^liberdma_shim\[[0-9]*\] error: $var=" "$TMP/c$n.err"; then
		echo "BUG: $var: $lines stderr line(s), raw control characters: $([ "$ctl" = 0 ] && echo no || echo yes): $shown" >&2
		result "$var with control characters: $lines line(s), raw control chars $([ "$ctl" = 0 ] && echo no || echo yes) -- BUG"
		bad=$((bad + 1))
	else
		result "$var with control characters: one line, escaped: $shown"
	fi
done
[ $bad -eq 0 ] || fail "$bad of ${#cases[@]} values with control characters split or corrupt the shim's stderr line (preload/base/config.c shim_config_parse prints the raw value with %.64s)"
