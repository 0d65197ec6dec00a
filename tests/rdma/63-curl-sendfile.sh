#!/usr/bin/env bash
# HTTP over RDMA with sendfile: our sendfile(2) file server and Debian's
# curl, both under the shim in ERDMA_SHIM=require, fetching a 24 MiB random
# file three times; every copy must be byte-exact (sha256), as over kernel
# TCP without the shim.
. "$(dirname "$0")/lib/common.bash"
F=$WORK/blob
head -c $((24 * 1024 * 1024 + 12345)) /dev/urandom >"$F"
want=$(sha256sum <"$F" | cut -c1-64)

# libasan preloaded into curl deadlocks at start, shim or not (see
# tests/host/20-curl-http.sh): under SANITIZE=1 the client is Python's
# urllib, the server (the part with sendfile) stays the same.
client=(curl -sS --fail)
what=curl
if [ "${SANITIZE:-0}" = 1 ]; then
	client=(/usr/bin/python3 -c 'import sys, urllib.request as u; sys.stdout.buffer.write(u.urlopen(sys.argv[1]).read())')
	what="python urllib (SANITIZE=1: curl cannot start with libasan preloaded)"
fi
for shim in 0 1; do
	pre=()
	[ "$shim" = 1 ] && pre=(LD_PRELOAD="$PRELOAD" ERDMA_SHIM=require)
	bg "$WORK/srv.$shim" env "${pre[@]}" timeout 200 "$PROGS/sendfile_http" "$IP0" 0 "$F" 3
	spid=$BG_PID
	wait_for "$WORK/srv.$shim" '^ready ' 30
	port=$(port_of "$WORK/srv.$shim")
	for i in 1 2 3; do
		got=$(env "${pre[@]}" timeout 120 "${client[@]}" "http://$IP0:$port/blob" | sha256sum | cut -c1-64)
		[ "$got" = "$want" ] || fail "shim=$shim fetch $i: sha256 $got, want $want"
	done
	wait "$spid" || fail "server (shim=$shim) failed: $(cat "$WORK/srv.$shim")"
	echo "PASS shim=$shim: 3 x 24 MiB fetched by $what from a sendfile server, sha256 identical"
done
echo "RESULT: curl over RDMA from a sendfile(2) HTTP server: byte-exact, as over kernel TCP"
