#!/usr/bin/env bash
# Byte-exact transfers, both directions, 1 and 64 connections, blocking and
# non-blocking (epoll edge-triggered, poll), 1 B to 64 MiB: each case once
# over kernel TCP (no shim) and once under the shim with ERDMA_SHIM=require,
# whose QPs are then looked up in `rdma res` for both processes while the
# connections are held open.  The two runs must print the same reports.
. "$(dirname "$0")/lib/common.bash"

run_case() { # name preload(0|1) server-args... -- client-args...
	local name=$1 shim=$2; shift 2
	local sargs=() cargs=()
	while [ "$1" != -- ]; do sargs+=("$1"); shift; done
	shift
	cargs=("$@")
	local d=$WORK/$name.$shim hold=$WORK/$name.$shim.hold
	mkdir -p "$d"
	local pre=()
	[ "$shim" = 1 ] && pre=(env LD_PRELOAD="$PRELOAD" ERDMA_SHIM=require)
	bg "$d/server" "${pre[@]}" timeout 300 "$XFER" server "$IP0" 0 "${sargs[@]}" --hold "$hold"
	local spid=$BG_PID
	wait_for "$d/server" '^ready ' 20
	local port
	port=$(port_of "$d/server")
	bg "$d/client" "${pre[@]}" timeout 300 "$XFER" client "$IP0" "$port" "${cargs[@]}" --hold "$hold"
	local cpid=$BG_PID
	wait_for "$d/client" '^holding' 280
	wait_for "$d/server" '^holding' 30
	local sq cq
	sq=$(qps "$spid"); cq=$(qps "$cpid")
	touch "$hold"
	wait "$cpid" || fail "$name: client exited $? (shim=$shim): $(cat "$d/client")"
	wait "$spid" || fail "$name: server exited $? (shim=$shim): $(cat "$d/server")"
	if [ "$shim" = 1 ]; then
		[ "$sq" -gt 0 ] && [ "$cq" -gt 0 ] ||
			fail "$name: not on RDMA (QPs: server $sq, client $cq)"
	else
		[ "$sq" = 0 ] && [ "$cq" = 0 ] || fail "$name: QPs without the shim?"
	fi
	grep -E '^(client|server):' "$d/client" "$d/server" | sed "s|$d/||" >"$WORK/$name.$shim.out"
	echo "$sq $cq"
}

# the light passes (ASan, iWARP): 8 MiB for 64, 16 connections for 64
BIG=$(pick 64M 8M) MANY=$(pick 64 16)
cases=(
	"b1-1B       --conns 1 -- --conns 1 --size 1"
	"b1-odd      --conns 1 -- --conns 1 --size 4097"
	"b1-up       --conns 1 -- --conns 1 --size 3M --dir up"
	"b1-down     --conns 1 -- --conns 1 --size 3M --dir down"
	"b1-$BIG      --conns 1 -- --conns 1 --size $BIG"
	"b$MANY         --conns $MANY -- --conns $MANY --size 64K"
	"e1          --conns 1 --mode epoll -- --conns 1 --size 5M --mode epoll"
	"e$MANY         --conns $MANY --mode epoll -- --conns $MANY --size 64K --mode epoll"
	"p4          --conns 4 --mode poll -- --conns 4 --size 2M --mode poll"
	"mixed       --conns 4 --mode epoll -- --conns 4 --size 1M"
)
for c in "${cases[@]}"; do
	read -r name rest <<<"$c"
	# shellcheck disable=SC2086
	run_case "$name" 0 $rest >/dev/null
	t0=$(date +%s.%N)
	# shellcheck disable=SC2086
	q=$(run_case "$name" 1 $rest)
	t1=$(date +%s.%N)
	diff -u "$WORK/$name.0.out" "$WORK/$name.1.out" ||
		fail "$name: output differs with the shim"
	echo "PASS $name: identical with and without the shim; QPs server/client: $q ($(awk -v a="$t0" -v b="$t1" 'BEGIN{printf "%.1fs", b-a}'))"
	grep -h mismatched "$WORK/$name.1.out" | head -1
done
echo "RESULT: ${#cases[@]} transfer cases identical over TCP and RDMA, all on RDMA QPs"
