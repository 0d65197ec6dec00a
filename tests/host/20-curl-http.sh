#!/usr/bin/env bash
# curl against Python's http.server on 127.0.0.1 (and ::1): an 8 MiB random
# file, several files in one curl run, a 404, headers, a body to a pipe.
# Every combination of shim on the server / on curl; the sha256 of every
# download, curl's exit codes and the server's exit code must not change.
set -eu
. "$(dirname "$0")/lib.sh"

www=$TMP/www
mkdir -p "$www"
head -c $((8 << 20)) /dev/urandom >"$www/big.bin"
head -c 1000 /dev/urandom >"$www/small.bin"
: >"$www/empty.bin"
want_big=$(sha256sum <"$www/big.bin" | cut -d' ' -f1)
v6=no
have_ipv6 && v6=yes

# Fetch everything from one server; write "name sha256|rc" lines to $out.
fetch_all() { # CMODE HOST PORT OUT
	local cm=$1 host=$2 port=$3 out=$4 rc d=$TMP/dl
	local url="http://$host:$port"
	rm -rf "$d" && mkdir -p "$d"
	: >"$out"
	rc=0
	ERDMA_SHIM_LOG=info run_mode "$cm" 30 curl -sS -f -o "$d/big" "$url/big.bin" 2>>"$out.err" || rc=$?
	[ $rc -ne 124 ] || fail "curl ($cm) timed out fetching $url/big.bin"
	echo "big rc=$rc sha=$(sha256sum <"$d/big" | cut -d' ' -f1) size=$(stat -c %s "$d/big")" >>"$out"
	# three files in one curl run, over one kept-alive connection
	rc=0
	ERDMA_SHIM_LOG=info run_mode "$cm" 30 curl -sS -f -w 'connects=%{num_connects} ' \
		-o "$d/s1" "$url/small.bin" -o "$d/e1" "$url/empty.bin" \
		-o "$d/b2" "$url/big.bin" 2>>"$out.err" >"$d/w" || rc=$?
	echo "multi rc=$rc $(cat "$d/w")sha=$(cat "$d/s1" "$d/e1" "$d/b2" | sha256sum | cut -d' ' -f1)" >>"$out"
	rc=0
	ERDMA_SHIM_LOG=info run_mode "$cm" 30 curl -sS -f -o "$d/none" "$url/no-such-file" 2>>"$out.err" || rc=$?
	echo "missing rc=$rc" >>"$out"
	rc=0
	# headers minus the ones that carry a time or a version
	ERDMA_SHIM_LOG=info run_mode "$cm" 30 curl -sS -I "$url/big.bin" 2>>"$out.err" >"$d/head" || rc=$?
	echo "head rc=$rc $(tr -d '\r' <"$d/head" | grep -iv -e '^date:' -e '^server:' -e '^last-modified:' | tr '\n' '|')" >>"$out"
	# the body piped to stdout (write() on a pipe, not a file)
	rc=0
	echo "stdout sha=$(ERDMA_SHIM_LOG=info run_mode "$cm" 30 curl -sS -f "$url/big.bin" 2>>"$out.err" | sha256sum | cut -d' ' -f1)" >>"$out"
}

# One server per (server mode, curl mode, address family).
run() { # SMODE CMODE BINDADDR URLHOST TAG
	local sm=$1 cm=$2 bind=$3 host=$4 tag=$5 port line
	local base=$TMP/$tag
	ERDMA_SHIM_LOG=info bg_start "$sm" "$base.server.out" "$base.server.err" \
		"$PY" -u -m http.server 0 -p HTTP/1.1 --bind "$bind" --directory "$www"
	local spid=$BG_PID
	line=$(wait_line "$base.server.out" '^Serving HTTP on .* port [0-9]+ ' 20 "$spid") ||
		fail "$tag: http.server did not start"
	port=$(sed -E 's/.* port ([0-9]+) .*/\1/' <<<"$line")
	fetch_all "$cm" "$host" "$port" "$base.res"
	# SIGTERM: a background job of a script has SIGINT ignored
	kill -TERM "$spid"
	wait_exit "$spid" 10
	echo "server rc=$WAIT_RC" >>"$base.res"
	if [ "$sm" = shim ]; then assert_banner "$base.server.err" "$tag server"; else assert_no_banner "$base.server.err" "$tag server"; fi
	if [ "$cm" = shim ]; then
		# one banner per curl run: 5 runs
		[ "$(banner_count "$base.res.err")" -eq 5 ] || fail "$tag: expected 5 curl banners, got $(banner_count "$base.res.err")"
	else
		assert_no_banner "$base.res.err" "$tag curl"
	fi
	# curl's own messages and the server's request log (minus times); the
	# shim's own lines (ERDMA_SHIM_LOG=info) are not the programs' output
	grep -v '^liberdma_shim\[' "$base.res.err" | sed 's/^/curl-stderr: /' >>"$base.res" || true
	grep -v '^liberdma_shim\[' "$base.server.err" | sed -E 's/^[^ ]+ - - \[[^]]*\] /server-log: /' >>"$base.res" || true
	note "$tag: $(tr '\n' ' ' <"$base.res" | cut -c1-200)"
}

# curl itself under the shim, unless it cannot start with this preload at all
# (SANITIZE=1: libasan preloaded into curl deadlocks, shim or not)
if shim_starts curl -sS -o /dev/null file:///dev/null; then
	cm=shim combos="shim srvshim curlshim" what="4 combinations"
else
	cm=plain combos="srvshim" what="shimmed server only: curl cannot run with libasan preloaded"
fi

run plain plain 127.0.0.1 127.0.0.1 v4.plain
run shim plain 127.0.0.1 127.0.0.1 v4.srvshim
if [ $cm = shim ]; then
	run shim shim 127.0.0.1 127.0.0.1 v4.shim
	run plain shim 127.0.0.1 127.0.0.1 v4.curlshim
fi
for t in $combos; do
	same "$TMP/v4.plain.res" "$TMP/v4.$t.res" "v4 $t"
done
main=v4.srvshim
[ $cm = shim ] && main=v4.shim
grep -qx "big rc=0 sha=$want_big size=8388608" "$TMP/$main.res" || fail "8 MiB download corrupted: $(head -n1 "$TMP/$main.res")"
grep -qx "missing rc=22" "$TMP/$main.res" || fail "404 did not give curl exit 22"
grep -qx "server rc=143" "$TMP/$main.res" || fail "server exit code (SIGTERM) not 143"
result "curl v4 ($what): 8 MiB sha256 ${want_big:0:16} identical; 404 rc=22; server rc=143 (SIGTERM) both ways"

if [ $v6 = yes ]; then
	run plain plain ::1 '[::1]' v6.plain
	run shim $cm ::1 '[::1]' v6.shim
	same "$TMP/v6.plain.res" "$TMP/v6.shim.res" "v6"
	# the v4 and v6 results are the same files
	same "$TMP/v4.plain.res" "$TMP/v6.plain.res" "v4 vs v6"
	result "curl v6 [::1] (server shim, curl $cm): identical with and without the shim"
else
	result "curl v6: skipped, ::1 unavailable"
fi
