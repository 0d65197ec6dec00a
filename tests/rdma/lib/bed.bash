# Helpers for the RDMA tests (tests/rdma/*.sh); source it, don't run it.
# The tests run inside the soft-RoCE VM (tests/vm/vm-run, tests/vm/check-rdma)
# or natively on a host with RDMA (ERDMA_NATIVE=1, addresses from the
# environment). Every wait here is bounded.

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../../.." && pwd)
TESTBIN=${TESTBIN:-$ROOT/build/tests/progs}
IP0=${ERDMA_BED_IP0:-192.168.77.1}  # rxe0 / v0: where servers listen
IP1=${ERDMA_BED_IP1:-192.168.77.2}  # rxe1 / v1: where clients bind
DEV0=${ERDMA_BED_DEV0:-rxe0}
DEV1=${ERDMA_BED_DEV1:-rxe1}
export LC_ALL=C

# A scratch directory that goes away with the test.
T=$(mktemp -d "${TMPDIR:-/tmp}/erdma-rdma.XXXXXX")
trap 'bed_cleanup' EXIT
BED_PIDS=()
bed_cleanup() {
	local p
	for p in "${BED_PIDS[@]}"; do kill "$p" 2>/dev/null || true; done
	rm -rf "$T" || true
}

fail() {
	echo "FAILED: $*" >&2
	exit 1
}

# Run "$@" in the background under `timeout SECS`; its pid (that of the
# timeout process, whose child is the program) is in $BG_PID.
bg() {
	local secs=$1
	shift
	timeout --kill-after=5 "$secs" "$@" &
	BG_PID=$!
	BED_PIDS+=("$BG_PID")
}

# wait_until SECS DESCRIPTION CMD...: poll CMD every 50 ms for at most SECS.
wait_until() {
	local secs=$1 what=$2 i
	shift 2
	for ((i = 0; i < secs * 20; i++)); do
		"$@" && return 0
		sleep 0.05
	done
	fail "gave up after ${secs}s waiting for: $what"
}

alive() { kill -0 "$1" 2>/dev/null; }

# rsocket listener on ADDR:PORT (rdma_cm id in LISTEN state)?
rs_listening() {
	rdma res show cm_id 2>/dev/null | grep -q "state LISTEN .*src-addr $1:$2 "
}

# qp_lines PID [STATE]: the `rdma res show qp` lines of the RC queue pairs
# (in STATE, e.g. RTS, if given) owned by process PID or by a child of it (so
# PID may be the `timeout` wrapper).
# The kernel reports the thread that created a QP, which is often not the
# main thread, so each reported pid is mapped to its process via /proc.
qp_lines() {
	local root=$1 state=${2:-} line t tgid ppid
	rdma res show qp 2>/dev/null | while IFS= read -r line; do
		[[ $line =~ type\ RC\ .*\ pid\ ([0-9]+)\  ]] || continue
		[ -z "$state" ] || [[ $line == *" state $state "* ]] || continue
		t=${BASH_REMATCH[1]}
		tgid=$(sed -n 's/^Tgid:[[:space:]]*//p' "/proc/$t/status" 2>/dev/null) || continue
		ppid=$(sed -n 's/^PPid:[[:space:]]*//p' "/proc/$t/status" 2>/dev/null) || continue
		if [ "$tgid" = "$root" ] || [ "$ppid" = "$root" ]; then
			echo "$line"
		fi
	done
}

# rxe_counter DEV NAME: one hardware counter of an rxe port (e.g. sent_pkts).
rxe_counter() {
	rdma statistic show link "$1/1" 2>/dev/null |
		sed -n "s/.* $2 \([0-9][0-9]*\).*/\1/p"
}

# The test programs are built on the host (the VM's root is read-only).
need_prog() {
	[ -x "$TESTBIN/$1" ] ||
		fail "$TESTBIN/$1 missing: build it first (tests/vm/check-rdma does; or make $TESTBIN/$1)"
}
