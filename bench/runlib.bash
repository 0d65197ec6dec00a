# shellcheck shell=bash
# What the bench runners (idlescale-run, wakeup-run, density-run) share;
# sourced.  A runner sets ROOT (the checkout), OUT (its results directory)
# and BUILD (0: --no-build), defines summary() (reads $OUT, prints the
# table) and takes --out DIR and --inner (its inner half: measure, where
# the RDMA devices are).

# median of the numbers on stdin
median() { sort -n | awk '{ v[NR] = $1 } END { if (NR) print (NR % 2 ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2) }'; }
# a / z to 2 places, "-" when z is not above 0
ratio() { awk -v a="$1" -v z="$2" 'BEGIN { if (z > 0) printf "%.2f", a / z; else print "-" }'; }

# run_outer MEM_MIB TIMEOUT_S TARGET... -- ARG...: a runner's outer half.
# make TARGETs (unless BUILD=0), then run this runner again as its inner
# half ("$0" ARG... --out $OUT --inner) where the RDMA devices are:
# natively when this host has /dev/infiniband, otherwise inside the
# soft-RoCE VM bed (tests/vm/vm-run: MEM_MIB of memory, TIMEOUT_S at the
# most, OUT written there from the guest); then summary() into
# $OUT/summary.txt.  Returns 0, or the failed build's or inner run's status.
run_outer() {
	local mem=$1 tmo=$2 targets=()
	shift 2
	while [ $# -gt 0 ] && [ "$1" != -- ]; do
		targets+=("$1")
		shift
	done
	shift
	[ "$BUILD" = 0 ] || make -s -C "$ROOT" "${targets[@]}" >/dev/null || return 1
	mkdir -p "$OUT"
	set -- "$@" --out "$OUT" --inner
	if [ -e /dev/infiniband ]; then
		"$0" "$@" || return
	else
		echo "== no RDMA device here: running in the VM bed (tests/vm/vm-run)"
		ERDMA_VM_OUT=$OUT "$ROOT/tests/vm/vm-run" --mem "$mem" --timeout "$tmo" --out "$OUT" -- "$0" "$@" || return
	fi
	summary | tee "$OUT/summary.txt"
	return 0
}
