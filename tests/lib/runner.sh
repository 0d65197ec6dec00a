#!/usr/bin/env bash
# Run test executables, each bounded by a timeout, and print one line per test
# plus the standard closing line "N passed, N failed".
#
# usage: runner.sh [--timeout SECONDS] [--suite NAME] TEST...
#
# A test is any executable: exit 0 = pass, anything else (including 77) = fail;
# a skipped test is a failure here, because a skipped RDMA suite proves nothing.
# A test that needs longer than --timeout says so itself with a line
# "# runner-timeout: SECONDS" among its first 20 lines (it replaces --timeout
# for that test only; e.g. tests/host/90-targets.sh, which builds the tree
# several times).
# When ERDMA_RESULTS names a file, one "PASS|FAIL suite/name" line per test is
# appended to it so tests/run-all can add up several suites (host and VM).
set -u
timeout_s=120
suite=tests
while [ $# -gt 0 ]; do
	case "$1" in
	--timeout) timeout_s=$2; shift 2 ;;
	--suite) suite=$2; shift 2 ;;
	--) shift; break ;;
	*) break ;;
	esac
done

logdir=${ERDMA_LOGDIR:-$(mktemp -d /tmp/erdma-test.XXXXXX)}
mkdir -p "$logdir"
pass=0
fail=0
for t in "$@"; do
	name=$(basename "$t")
	log="$logdir/$suite.$name.log"
	t_s=$timeout_s
	own=$(head -n 20 "$t" 2>/dev/null | sed -n 's/^# runner-timeout: \([0-9][0-9]*\)$/\1/p' | head -n 1)
	[ -n "$own" ] && t_s=$own
	start=$(date +%s.%N)
	# --kill-after: a test that ignores SIGTERM still ends; the run never hangs.
	timeout --kill-after=5 "$t_s" "$t" >"$log" 2>&1 </dev/null
	rc=$?
	secs=$(awk -v s="$start" -v e="$(date +%s.%N)" 'BEGIN{printf "%.1f", e-s}')
	if [ $rc -eq 0 ]; then
		pass=$((pass + 1))
		echo "PASS $suite/$name (${secs}s)"
		grep -E '^(RESULT|FIGURE):' "$log" | sed 's/^/    /'
		res=PASS
	else
		fail=$((fail + 1))
		why="exit $rc"
		[ $rc -eq 124 ] || [ $rc -eq 137 ] && why="timed out after ${t_s}s"
		echo "FAIL $suite/$name ($why, ${secs}s); last lines of $log:"
		tail -n 400 "$log" | sed 's/^/    | /'
		res=FAIL
	fi
	[ -n "${ERDMA_RESULTS:-}" ] && echo "$res $suite/$name" >>"$ERDMA_RESULTS"
done
echo "$suite: $pass passed, $fail failed"
[ $fail -eq 0 ]
