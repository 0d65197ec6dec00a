# Shared by the RDMA suite (sourced, not run).  Every wait is bounded; a
# server is "up" when it printed its ready line, not after a sleep.
set -eu
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../../.." && pwd)
PROGS=${TESTBIN:-$ROOT/build/tests/progs}
XFER=$PROGS/xfer
SHIM_LIB=${SHIM:-$ROOT/liberdma_shim.so}
PRELOAD=${SHIM_PRELOAD:-$SHIM_LIB}
IP0=${ERDMA_BED_IP0:-192.168.77.1}
IP1=${ERDMA_BED_IP1:-192.168.77.2}
# The bed is soft-RoCE under emulation: an rsocket connect takes ~50 ms but
# can pass the shim's 1 s default on a loaded machine, and under
# ERDMA_SHIM=require a timed-out connect fails the test (seen in CI dry runs).
# Hardware needs no such bound; the tests that measure fallback are not
# affected (a refused or excluded connect does not wait).
export ERDMA_SHIM_CONNECT_TIMEOUT_MS=${ERDMA_SHIM_CONNECT_TIMEOUT_MS:-15000}
# make test runs each test twice: over soft-RoCE with the shipped library,
# then with the ASan library (over soft-iWARP for the iWARP list, soft-RoCE
# for the rest: tests/run-all).  Volume (bytes, connections, forks) is the
# first pass's job; the ASan passes walk the same code paths with less of
# it (ERDMA_TEST_LIGHT=1), which keeps the run inside CI's 90 min.
LIGHT=${ERDMA_TEST_LIGHT:-0}
# pick FULL LIGHT: the value for this pass
pick() { if [ "$LIGHT" = 1 ]; then echo "$2"; else echo "$1"; fi; }
WORK=$(mktemp -d /tmp/erdma-rdma.XXXXXX)
PIDS=()
cleanup() {
	for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done
	rm -rf "$WORK"
}
trap cleanup EXIT

fail() { echo "FAIL: $*" >&2; exit 1; }
# A statistics table of pid $1 (this pid namespace) is in /dev/shm.
has_table() { compgen -G "/dev/shm/erdma-shim.$1.$(stat -Lc %i /proc/self/ns/pid).*" >/dev/null; }

# wait_for FILE REGEX [SECONDS]: until a line matching REGEX is in FILE.
wait_for() {
	local i n=$(( ${3:-20} * 20 ))
	for ((i = 0; i < n; i++)); do
		grep -qE "$2" "$1" 2>/dev/null && return 0
		sleep 0.05
	done
	echo "--- $1:"; cat "$1" 2>/dev/null || true
	fail "no '$2' in $1 within ${3:-20}s"
}

# bg LOG CMD...: start CMD in the background, its output in LOG; sets BG_PID.
bg() {
	local log=$1; shift
	"$@" >"$log" 2>&1 &
	BG_PID=$!
	PIDS+=("$BG_PID")
}

# shimmed CMD...: CMD with the shim preloaded.
shimmed() { LD_PRELOAD=$PRELOAD "$@"; }

# qps PID: RC QPs owned by PID, its descendants (timeout, env wrappers) or
# any of their threads (rdma res names the thread that created a QP, e.g.
# rsockets' accept thread).
tree() { # PID and its descendants
	local c
	echo "$1"
	for c in $(cat /proc/"$1"/task/*/children 2>/dev/null); do tree "$c"; done
}
qps() {
	local pid=$1 tids p
	tids=$(for p in $(tree "$pid"); do ls /proc/"$p"/task 2>/dev/null; done | tr '\n' '|')
	tids=${tids%|}
	[ -n "$tids" ] || { echo 0; return; }
	rdma res show qp 2>/dev/null | grep -E "type RC" |
		grep -cE " pid ($tids) " || true
}

# stacks PID: every thread's stack of PID and its descendants, for a hang's
# report (gdb when the machine has it; the kernel's wait channels always).
stacks() {
	local p t
	for p in $(tree "$1"); do
		echo "--- stacks of $p: $(tr '\0' ' ' </proc/"$p"/cmdline 2>/dev/null | cut -c1-120)"
		# state and CPU ticks (user, system): a thread spinning in a
		# hang shows R and many ticks, one asleep S
		for t in /proc/"$p"/task/*; do
			echo "  tid ${t##*/} wchan $(cat "$t"/wchan 2>/dev/null)" \
				"$(sed 's/.*) //' "$t"/stat 2>/dev/null | awk '{print "state " $1 " utime " $12 " stime " $13}')"
		done
		command -v gdb >/dev/null &&
			timeout 60 gdb -nx -batch -p "$p" -ex 'thread apply all bt 12' 2>/dev/null |
			grep -E '^(Thread|#)' | sed 's/^/  /'
	done
	return 0
}

# waitb PID SECS: PID's exit status, or 124 when it still ran after SECS
# (a hang: its stacks printed, then SIGKILLed).  PID is a child of this shell.
waitb() {
	local pid=$1 s=$2 i rc=0
	for ((i = 0; i < s * 20; i++)); do
		if ! kill -0 "$pid" 2>/dev/null; then
			wait "$pid" || rc=$?
			return $rc
		fi
		sleep 0.05
	done
	stacks "$pid"
	kill -KILL "$pid" 2>/dev/null || true
	wait "$pid" 2>/dev/null || true
	return 124
}

# port_of LOG: the port a server printed ("ready PORT").
port_of() { awk '/^ready /{print $2; exit}' "$1"; }

# held_pair NAME SERVER-ENV CLIENT-ENV SERVER-OPTS [CLIENT-OPTS...]: a held
# 2-connection xfer transfer of 1 MiB each way, checked; prints
# "server_qps client_qps" counted while both ends hold their connections.
# The server listens on HELD_PORT if set, else on a port of the kernel's.
held_pair() {
	local name=$1 senv=$2 cenv=$3 sopts=$4 d=$WORK/$1 hold=$WORK/$1.hold
	shift 4
	mkdir -p "$d"
	bg "$d/server" env $senv timeout 120 "$XFER" server "$IP0" "${HELD_PORT:-0}" --conns 2 --hold "$hold" $sopts
	local spid=$BG_PID
	wait_for "$d/server" '^ready ' 20
	bg "$d/client" env $cenv timeout 120 "$XFER" client "$IP0" "$(port_of "$d/server")" \
		--conns 2 --size 1M --hold "$hold" "$@"
	local cpid=$BG_PID
	wait_for "$d/client" '^holding' 100
	wait_for "$d/server" '^holding' 20
	local q="$(qps "$spid") $(qps "$cpid")"
	touch "$hold"
	wait "$cpid" || fail "$name: client failed: $(cat "$d/client")"
	wait "$spid" || fail "$name: server failed: $(cat "$d/server")"
	grep -q ' 0 mismatched' "$d/client" || fail "$name: data mismatch"
	echo "$q"
}

# Print a figure the runner echoes into the suite output.
figure() { echo "FIGURE: $*"; }
