#!/usr/bin/env bash
# The threaded paths under ThreadSanitizer (issue #8): the shim built with
# -fsanitize=thread (make tsan: build/tsan/liberdma_shim.so, libtsan
# preloaded first) carries checksummed transfers on RDMA (ERDMA_SHIM=require)
# where threads share the library's state: 8 connections each on a thread
# of its own in both processes (blocking mode: the fd table, the stats
# table, the reaper at close, connect/accept concurrently), then 16
# connections in one epoll thread per side.  Any TSan report (written to a
# log file per process) fails the test, as does a wrong byte.
# Not in the ASan pass: the sanitizer runtimes exclude each other.
. "$(dirname "$0")/lib/common.bash"
TLIB=${SHIM_TSAN:-$ROOT/build/tsan/liberdma_shim.so}
RT=${TSAN_RT:-$(ls /usr/lib/gcc/x86_64-linux-gnu/*/libtsan.so 2>/dev/null | tail -n 1)}
[ -r "$TLIB" ] || fail "$TLIB not built (make tsan; make test builds it)"
[ -r "$RT" ] || fail "libtsan.so not found (gcc's ThreadSanitizer runtime)"
logs=$WORK/tsan
mkdir -p "$logs"
# report_signal_unsafe=0: the test programs' own SIGALRM/SIGPIPE handling
# is not what is under test here.
topts="log_path=$logs/tsan:report_signal_unsafe=0:history_size=4"
# The shim before libtsan: the program's poll/epoll_wait/recv then enter
# the shim first, and the shim's own calls of them go through TSan's
# interceptors.  The other way round, the shim runs inside TSan's
# interceptor of a blocking call (poll), where TSan ignores every
# synchronisation (its BlockingCall), and it reported races on state the
# shim guards with mutexes as soon as another thread (the connect thread)
# touched it.
pre=(env LD_PRELOAD="$TLIB:$RT" TSAN_OPTIONS="$topts" ERDMA_SHIM=require)

show_reports() {
	local f
	for f in "$logs"/*; do
		[ -s "$f" ] || continue
		echo "--- $f"
		grep -m 160 -E 'WARNING|SUMMARY|#[0-9]+ |Location|Previous|Mutex|Thread' "$f"
	done
}

run() { # TAG SERVER-ARGS... -- CLIENT-ARGS...
	local tag=$1 sargs=() cargs=() q
	shift
	while [ "$1" != -- ]; do sargs+=("$1"); shift; done
	shift
	cargs=("$@")
	bg "$WORK/$tag.s" "${pre[@]}" timeout 200 "$XFER" server "$IP0" 0 "${sargs[@]}" --hold "$WORK/$tag.hold"
	local spid=$BG_PID
	wait_for "$WORK/$tag.s" '^ready ' 60
	bg "$WORK/$tag.c" "${pre[@]}" timeout 200 "$XFER" client "$IP0" "$(port_of "$WORK/$tag.s")" \
		"${cargs[@]}" --hold "$WORK/$tag.hold"
	local cpid=$BG_PID
	wait_for "$WORK/$tag.c" '^holding' 180
	q="$(qps "$spid")/$(qps "$cpid")"
	# proof the sanitizer ran: both programs map libtsan and the TSan shim
	for p in $(tree "$spid") $(tree "$cpid"); do
		grep -q "$(basename "$RT")" /proc/"$p"/maps 2>/dev/null &&
			grep -q "$TLIB" /proc/"$p"/maps && tsan_seen=$((tsan_seen + 1))
	done
	touch "$WORK/$tag.hold"
	# (TSan exits 66 when it reported: show the reports, not just the exit)
	wait "$cpid" || { show_reports; fail "$tag client exited $?: $(tail -n 5 "$WORK/$tag.c")"; }
	wait "$spid" || { show_reports; fail "$tag server exited $?: $(tail -n 5 "$WORK/$tag.s")"; }
	grep -E '^(client|server)' "$WORK/$tag.c" "$WORK/$tag.s" | sed 's/^/  /'
	case $q in 0/* | */0) fail "$tag: not on RDMA (QPs server/client $q)" ;; esac
	echo "$tag: QPs server/client $q"
}

tsan_seen=0
run block8 --conns 8 -- --conns 8 --size 4M
run epoll16 --conns 16 --mode epoll -- --conns 16 --size 1M --mode epoll
[ "$tsan_seen" -ge 4 ] || fail "libtsan + the TSan shim mapped in only $tsan_seen of 4 processes"
reports=$(find "$logs" -type f -size +0 | wc -l)
if [ "$reports" -gt 0 ]; then
	show_reports
	fail "$reports process(es) with ThreadSanitizer reports"
fi
figure "tsan_reports=0 tsan_runs=2"
echo "RESULT: 8 threaded + 16 epoll connections on RDMA under ThreadSanitizer: byte-exact, no report"
