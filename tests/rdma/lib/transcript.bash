# Kernel-as-oracle transcripts (sourced by the RDMA suite's transcript tests).
# A transcript program prints "CASE: what -> result" lines; it runs once over
# kernel TCP and once under the shim, and compare() judges them case by case.
#
# The caller declares KNOWN (an associative array: case -> why it differs),
# the deviations from kernel TCP that are understood and documented in
# docs/limits.md.  They are still run and shown with
# their difference; a listed case that starts matching the kernel fails the
# test, so such a list can only shrink.

FAILED=()
KNOWN_SEEN=()
# OPEN_DEFECT (optional, case -> what): a difference seen but not yet
# understood; printed on every run, not counted as a failure.
declare -A OPEN_DEFECT=()

# compare PLAIN SHIMMED (files): PASS/KNOWN/FAIL per case; sets NDIFF (the
# failures) and NCASES (the cases compared; "main", setup and exit, counts
# only when it differs).
compare() {
	local a=$1 b=$2 c
	grep -v '^FIGURE:' "$a" >"$a.t" || true
	grep -v '^FIGURE:' "$b" >"$b.t" || true
	NDIFF=0 NCASES=0
	# case names are single words: the prefix before the first ':'
	# shellcheck disable=SC2013
	for c in $(cut -d: -f1 "$a.t" "$b.t" | awk '!seen[$0]++'); do
		if diff <(grep "^$c: " "$a.t") <(grep "^$c: " "$b.t") >/dev/null; then
			[ "$c" = main ] && continue # setup and exit, identical
			NCASES=$((NCASES + 1))
			if [ -n "${KNOWN[$c]:-}" ]; then
				NDIFF=$((NDIFF + 1))
				FAILED+=("$c")
				echo "FAIL $c: identical now, but listed as a known deviation: remove it from KNOWN and docs/limits.md"
				continue
			fi
			echo "PASS $c"
			continue
		fi
		NCASES=$((NCASES + 1))
		if [ -n "${OPEN_DEFECT[$c]:-}" ]; then
			echo "OPEN $c (an open defect, shown, not counted): ${OPEN_DEFECT[$c]}"
		elif [ -n "${KNOWN[$c]:-}" ]; then
			KNOWN_SEEN+=("$c")
			echo "KNOWN $c: ${KNOWN[$c]}"
		else
			NDIFF=$((NDIFF + 1))
			FAILED+=("$c")
			echo "FAIL $c: kernel TCP (-) vs shim (+):"
		fi
		diff -U0 <(grep "^$c: " "$a.t") <(grep "^$c: " "$b.t") |
			grep -E '^[-+][^-+]' | sed 's/^/    /'
	done
}
