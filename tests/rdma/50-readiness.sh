#!/usr/bin/env bash
# Readiness on RDMA fds is indistinguishable from kernel TCP: epoll (LT, ET,
# ONESHOT, data, errors, timeouts, EINTR, two sets, registration before
# connect, close while registered, the epoll fd polled), poll, ppoll,
# select, pselect, listeners, non-blocking connect, threads, and a 64
# connection edge-triggered stress run (tests/progs/readiness/).
#
# The program runs once over kernel TCP and once under the shim with
# ERDMA_SHIM=require (nothing may fall back), its transcripts are compared
# case by case, and the shimmed run is seen holding RC QPs (rdma res) while
# its stress connections are open.  The "refused" case (connect to a port
# without any listener) must fall back, so it runs in ERDMA_SHIM=auto and
# the shim's log shows it tried RDMA first.  FIGURE lines: the stress run
# duration, from both runs (wake-up latency and idle CPU: bench/wakeup).
. "$(dirname "$0")/lib/common.bash"
. "$(dirname "$0")/lib/transcript.bash"

PROG=$PROGS/readiness
[ -x "$PROG" ] || fail "$PROG is not built (run make on the host first)"
T0=$(date +%s.%N)
since() { awk -v a="$1" -v b="$(date +%s.%N)" 'BEGIN{printf "%.1f", b-a}'; }

# run TAG SHIM(0|1) MODE [--hold] ARGS...: the program's stdout (transcript
# and FIGURE lines) in $WORK/TAG.out, stderr in $WORK/TAG.err; sets RUN_RC,
# RUN_QPS (RC QPs seen while it held its stress connections; "-" without
# --hold) and RUN_SECS.
run() {
	local tag=$1 shim=$2 mode=$3; shift 3
	local hold='' pre=() t0 pid i
	if [ "${1:-}" = --hold ]; then
		hold=$WORK/$tag.hold
		shift
	fi
	[ "$shim" = 1 ] && pre=(env LD_PRELOAD="$PRELOAD" ERDMA_SHIM="$mode")
	[ "$mode" = auto ] && [ "$shim" = 1 ] && pre+=(ERDMA_SHIM_LOG=debug)
	t0=$(date +%s.%N)
	"${pre[@]}" timeout -k 5 80 "$PROG" ${hold:+--hold "$hold"} "$@" \
		>"$WORK/$tag.out" 2>"$WORK/$tag.err" </dev/null &
	pid=$!
	PIDS+=("$pid")
	RUN_QPS=-
	if [ -n "$hold" ]; then
		for ((i = 0; i < 1900; i++)); do # <= 95 s
			grep -q '^holding' "$WORK/$tag.err" 2>/dev/null && break
			kill -0 "$pid" 2>/dev/null || break
			sleep 0.05
		done
		if grep -q '^holding' "$WORK/$tag.err" 2>/dev/null; then
			RUN_QPS=$(qps "$pid")
		else
			RUN_QPS="never held"
		fi
		touch "$hold"
	fi
	RUN_RC=0
	wait "$pid" || RUN_RC=$?
	RUN_SECS=$(since "$t0")
}

# Deviations from kernel TCP that are understood and documented in README
# ("Compatibility and limits"); see lib/transcript.bash.
declare -A KNOWN=(
	[err]="rsockets has no RST: a peer that closed with unread data reads as EOF, without the ERR|HUP and ECONNRESET of TCP's reset (a send after the peer's close is played as TCP's: one goes through, then ERR|HUP, SO_ERROR EPIPE, EPIPE)"
	[et]="edge-triggered IN: a read that leaves data behind is followed by one more event (rsockets shows no FIN behind unread data, so the shim reports rather than risk missing one); new data behind unread data gives its event as in the kernel"
)
fails=0

# --- all default cases: kernel TCP, then the shim with ERDMA_SHIM=require ---
run tcp 0 require --hold "$IP0"
tcp_rc=$RUN_RC tcp_qps=$RUN_QPS tcp_secs=$RUN_SECS
[ "$tcp_rc" = 0 ] || { cat "$WORK/tcp.out" "$WORK/tcp.err"; fail "kernel TCP run exited $tcp_rc"; }
[ "$tcp_qps" = 0 ] || fail "QPs without the shim? ($tcp_qps)"
grep -q '^main: done' "$WORK/tcp.out" || fail "kernel TCP run did not finish"

run rdma 1 require --hold "$IP0"
rdma_rc=$RUN_RC rdma_qps=$RUN_QPS rdma_secs=$RUN_SECS
echo "kernel TCP run: ${tcp_secs}s; shim run (ERDMA_SHIM=require): ${rdma_secs}s, exit $rdma_rc"
if [ "$rdma_rc" != 0 ] || ! grep -q '^main: done' "$WORK/rdma.out"; then
	echo "FAIL the shimmed run did not finish cleanly (exit $rdma_rc); last stderr lines:"
	tail -n 20 "$WORK/rdma.err" | sed 's/^/    | /'
	fails=$((fails + 1))
fi
case $rdma_qps in
'' | *[!0-9]*)
	echo "FAIL RDMA proof: the shimmed run never held its stress connections ($rdma_qps)"
	fails=$((fails + 1)) ;;
*)
	if [ "$rdma_qps" -ge 128 ]; then
		echo "PASS RDMA proof: $rdma_qps RC QPs held by the shimmed run (64 connections, both ends in-process)"
	else
		echo "FAIL RDMA proof: only $rdma_qps RC QPs for 64 in-process connections"
		fails=$((fails + 1))
	fi ;;
esac
compare "$WORK/tcp.out" "$WORK/rdma.out"
fails=$((fails + NDIFF))
ncases=$NCASES ndiff=$NDIFF

# --- connect to a port nobody listens on: must fall back (auto) ---
# refused_case NAME LABEL MIN: case refused over kernel TCP and shimmed,
# at least MIN of the shim's connects tried on RDMA before falling back.
refused_case() {
	local n=$1 label=$2 min=$3 tried
	run "$n-tcp" 0 auto "$IP0" refused
	[ "$RUN_RC" = 0 ] || { cat "$WORK/$n-tcp.out" "$WORK/$n-tcp.err"; fail "kernel TCP $label run exited $RUN_RC"; }
	run "$n-rdma" 1 auto "$IP0" refused
	if [ "$RUN_RC" != 0 ]; then
		echo "FAIL $label: shimmed run exited $RUN_RC"
		fails=$((fails + 1))
	fi
	tried=$(grep -c 'TCP (rsocket connect failed' "$WORK/$n-rdma.err" || true)
	if [ "$tried" -ge "$min" ]; then
		echo "PASS $label: $tried connect(s) tried RDMA first, then fell back to TCP"
	else
		echo "FAIL $label: $tried connect(s) tried RDMA first (want $min):"
		tail -n 5 "$WORK/$n-rdma.err" | sed 's/^/    | /'
		fails=$((fails + 1))
	fi
	compare "$WORK/$n-tcp.out" "$WORK/$n-rdma.out"
	fails=$((fails + NDIFF))
	ncases=$((ncases + NCASES)) ndiff=$((ndiff + NDIFF))
}
refused_case refused refused 1

# --- the same in a 4-port ephemeral range, every connect tried on RDMA ---
# The program finds its free port with bind(0), which the kernel draws from
# one half of the range (odd ports); connect() draws from the other.  The
# shim reserves the client's port with bind(0) too: from 2 odd ports it
# drew the probed one about every other time, and the fallback's kernel
# connect then met itself (connected) where the kernel's connect is
# refused.  Now it holds the destination's port while it draws
# (connect.c's port_guard).  The negative cache is off so each connect
# draws anew.
old_range=$(sysctl -n net.ipv4.ip_local_port_range)
restore_range() { sysctl -qw net.ipv4.ip_local_port_range="$old_range"; }
trap 'restore_range; cleanup' EXIT
sysctl -qw net.ipv4.ip_local_port_range="40000 40003"
export ERDMA_SHIM_NEGCACHE_TTL_S=0
refused_case narrow "refused (4 ports)" 5
unset ERDMA_SHIM_NEGCACHE_TTL_S
restore_range

sed -n 's/^FIGURE: /FIGURE: readiness, kernel TCP: /p' "$WORK/tcp.out"
sed -n 's/^FIGURE: /FIGURE: readiness, shim over RDMA: /p' "$WORK/rdma.out"
figure "readiness: test runtime $(since "$T0") s (kernel TCP run ${tcp_secs} s, shim run ${rdma_secs} s)"
if [ "$fails" != 0 ]; then
	echo "RESULT: $((ncases - ndiff)) of $ncases readiness cases identical over kernel TCP and RDMA; $fails failure(s)${FAILED[*]:+; cases that differ: ${FAILED[*]}}"
	exit 1
fi
echo "RESULT: $((ncases - ${#KNOWN_SEEN[@]})) of $ncases readiness cases identical over kernel TCP and RDMA (QPs: $rdma_qps); ${#KNOWN_SEEN[@]} documented deviation(s): ${KNOWN_SEEN[*]}"
