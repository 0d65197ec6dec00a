#!/usr/bin/env bash
# Peer SIGKILLed mid-connection (issue #8): the survivor must see the end of
# the connection (EOF or an error such as ECONNRESET/EPIPE) within 2 s,
#  - reader: blocked in recv after reading 1 MiB byte-exact;
#  - writer: blocked in send because the peer stopped reading;
# each with the survivor as client and as server.  Without the shim (kernel
# TCP) and with it (ERDMA_SHIM=require on both ends, the survivor's QPs
# counted before the kill); same bound both ways.  FIGURE: the time from
# kill to the survivor's return, per case.  Also (midconnect): a client
# killed before, during or after its connect leaves a server that ends or
# serves the next client (under require: over RDMA).
. "$(dirname "$0")/lib/common.bash"
R=$PROGS/relia
LIMIT_MS=2000

# one MODE SURVIVOR(client|server) KIND(read|write)
one() {
	local m=$1 who=$2 kind=$3 pre=() peer victim sv port t0 t1 dt q=- line i
	[ "$m" = shim ] && pre=(env LD_PRELOAD="$PRELOAD" ERDMA_SHIM=require)
	peer=feed; [ "$kind" = write ] && peer=stall
	local tag=$m.$who.$kind
	# The victim runs without timeout(1) in front so its pid is the
	# program's own (env execs it); cleanup kills it if the test fails.
	if [ "$who" = client ]; then
		bg "$WORK/v.$tag" "${pre[@]}" "$R" serve "$IP0" 0 "$peer" 1048576
		victim=$BG_PID
		wait_for "$WORK/v.$tag" '^ready ' 30
		port=$(port_of "$WORK/v.$tag")
		bg "$WORK/s.$tag" "${pre[@]}" timeout 60 "$R" dial "$IP0" "$port" "$kind" 1048576
		sv=$BG_PID
	else
		bg "$WORK/s.$tag" "${pre[@]}" timeout 60 "$R" serve "$IP0" 0 "$kind" 1048576
		sv=$BG_PID
		wait_for "$WORK/s.$tag" '^ready ' 30
		port=$(port_of "$WORK/s.$tag")
		bg "$WORK/v.$tag" "${pre[@]}" "$R" dial "$IP0" "$port" "$peer" 1048576
		victim=$BG_PID
	fi
	if [ "$kind" = read ]; then
		wait_for "$WORK/s.$tag" '^blocking after 1048576 exact' 60
	else
		wait_for "$WORK/s.$tag" '^blocked after' 60
	fi
	[ "$m" = shim ] && { q=$(qps "$sv"); [ "$q" -ge 1 ] || fail "$tag: survivor has no QP (not RDMA)"; }
	t0=$(date +%s%3N)
	kill -KILL "$victim"
	# 10 s: past the bound, but it tells a slow end from a hang
	for ((i = 0; i < 200; i++)); do
		grep -q '^end ' "$WORK/s.$tag" && break
		sleep 0.05
	done
	if ! line=$(grep '^end ' "$WORK/s.$tag"); then
		figure "kill_${tag}_ms=hang (no end within 10 s, survivor QPs $q)"
		echo "FAIL: $tag: the survivor still blocked 10 s after the kill"
		bad=$((bad + 1)) badlist+=" $tag(hang)"
		stacks "$sv" >"$WORK/h.$tag"
		cat "$WORK/h.$tag"
		condense "$WORK/h.$tag" >>"$WORK/stacks"
		kill "$sv" 2>/dev/null || true
		return 0
	fi
	t1=$(sed -n 's/.* ms=//p' <<<"$line")
	dt=$((t1 - t0))
	case $line in
	"end recv rc=0 "* | *errno=ECONNRESET* | *errno=EPIPE* | *errno=ETIMEDOUT*) ;;
	*) fail "$tag: unexpected end: $line" ;;
	esac
	figure "kill_${tag}_ms=$dt ($line, survivor QPs $q)"
	if [ "$dt" -gt "$LIMIT_MS" ]; then
		echo "FAIL: $tag: survivor saw the kill after ${dt} ms (> $LIMIT_MS)"
		bad=$((bad + 1)) badlist+=" $tag(${dt}ms)"
	fi
	kill "$sv" 2>/dev/null || true
	wait "$sv" 2>/dev/null || true
	[ "$dt" -gt "$LIMIT_MS" ] || echo "PASS: $tag: ${dt} ms: ${line% ms=*}"
}
# condense STACKS: a line per thread of waitb's stacks, function names
# innermost first (the runner's summary shows a log's last lines).
condense() {
	awk '/^--- stacks of/ { if (l != "") print l; l = ""
			sub(/^--- stacks of /, ""); print "  " substr($0, 1, 60) }
		/^  Thread / { if (l != "") print l; l = "    T" $2 ":"; n = 0 }
		/^  #[0-9]/ { f = ($3 == "in") ? $4 : $2; if (n++ < 16) l = l " " f }
		END { if (l != "") print l }' "$1"
}
# midconnect MODE: a client SIGKILLed at a random moment of its first
# 400 ms -- before, during or after its connect (under emulation an RDMA
# connect takes 50-300 ms) -- must not wedge the server: it ends (served the
# victim's connection, which fails) or serves the next client, within 25 s,
# as over kernel TCP.  FIGURE: how many kills came before the victim's
# connect returned.  (95-soak kills only mid-transfer.)
midconnect() {
	local m=$1 pre=() lg=() i ms sv a b rs rb early=0 t
	[ "$m" = shim ] && pre=(env LD_PRELOAD="$PRELOAD" ERDMA_SHIM=require)
	for i in 1 2 3 4 5 6; do
		t=$WORK/mc.$m.$i
		# the shim's account of each connection, for a hang's report
		lg=()
		[ "$m" = shim ] && lg=(ERDMA_SHIM_LOG=debug ERDMA_SHIM_LOG_FILE="$t.s.log")
		bg "$t.s" "${pre[@]}" "${lg[@]}" "$XFER" server "$IP0" 0 --conns 1
		sv=$BG_PID
		wait_for "$t.s" '^ready ' 30
		bg "$t.a" "${pre[@]}" "$XFER" client "$IP0" "$(port_of "$t.s")" --size 64M --timing
		a=$BG_PID
		ms=$((RANDOM % 400))
		sleep "$(awk -v m="$ms" 'BEGIN{printf "%.3f", m/1000}')" # fault timing
		kill -KILL "$a"
		wait "$a" 2>/dev/null || true
		grep -q '^connect 0: ' "$t.a" || early=$((early + 1))
		[ "$m" = shim ] && lg=(ERDMA_SHIM_LOG=debug ERDMA_SHIM_LOG_FILE="$t.b.log")
		bg "$t.b" "${pre[@]}" "${lg[@]}" "$XFER" client "$IP0" "$(port_of "$t.s")" --size 1M
		b=$BG_PID
		rs=0 rb=0
		waitb "$b" 25 >"$t.stk" || rb=$?
		# a server still up after the next client ended: its ids and
		# ports, while it lives (a hang's diagnosis)
		if kill -0 "$sv" 2>/dev/null && [ "$m" = shim ]; then
			{
				echo "--- after the next client ended: rdma cm_ids, TCP sockets"
				rdma res show cm_id 2>&1 | head -n 20
				ss -tanp 2>&1 | grep -v ' 127\.' | head -n 20
			} >"$t.ids"
		fi
		waitb "$sv" 25 >>"$t.stk" || rs=$?
		cat "$t.stk"
		echo "midconnect $m $i: killed at ${ms} ms; server exit $rs ($(tail -n 1 "$t.s")); next client exit $rb ($(tail -n 1 "$t.b"))"
		if [ "$rs" = 124 ] || [ "$rb" = 124 ]; then
			echo "FAIL: midconnect $m $i: still running 25 s after the kill"
			bad=$((bad + 1)) badlist+=" midconnect.$m.$i(server $rs, next $rb)"
			condense "$t.stk" >>"$WORK/stacks"
			echo "--- the next client's output:"
			cat "$t.b"
			cat "$t.ids" 2>/dev/null || true
			echo "--- the shim's log, server then next client:"
			tail -n 15 "$t.s.log" "$t.b.log" 2>/dev/null || true
		elif [ "$rs" = 0 ] && [ "$rb" != 0 ]; then
			echo "FAIL: midconnect $m $i: the server served a client the next one did not see"
			bad=$((bad + 1)) badlist+=" midconnect.$m.$i(served, next $rb)"
		fi
	done
	figure "midconnect_${m}_killed_before_connected=$early/6"
}
# the failed cases, named in the last line (CI shows a log's tail)
bad=0 badlist=
# Soft-iWARP (Debian's 6.1.192 siw, built in the bed) loses its listener
# when a client dies in the MPA exchange, about once in 180 such kills
# under ASan: the server's RDMA listener stops taking connections (the
# next client is refused while the server waits in accept), and destroying
# it at exit warns "refcount_t: underflow; use-after-free" or oopses in
# siw_destroy_listen -- the latter leaves the process unkillable and the
# bed's kernel broken for every test after it.  A kernel bug (no program
# may cause one), not the shim's: the shim's midconnect runs over
# soft-RoCE on every make test, and over siw with ERDMA_SIW_MIDCONNECT=1.
siw=0
rdma link show 2>/dev/null | grep -q '^link siw' && siw=1
for m in plain shim; do
	if [ "$m" = shim ] && [ "$siw" = 1 ] && [ "${ERDMA_SIW_MIDCONNECT:-0}" != 1 ]; then
		echo "midconnect shim: not run over soft-iWARP (its listener's use-after-free when a client dies mid-MPA; ERDMA_SIW_MIDCONNECT=1 runs it)"
	else
		midconnect "$m"
	fi
	for who in client server; do
		for kind in read write; do
			one "$m" "$who" "$kind"
		done
	done
done
[ ! -s "$WORK/stacks" ] || { echo "the hung processes' stacks (wait frames left out):"; cat "$WORK/stacks"; }
[ "$bad" -eq 0 ] || fail "$bad case(s) hung after the peer's SIGKILL:$badlist"
echo "RESULT: a SIGKILLed peer ends blocked recv and send within ${LIMIT_MS} ms, and a client killed around its connect wedges no server, kernel TCP and RDMA"
