#!/usr/bin/env bash
# No test touches a real host's interfaces (issue 40).  The RDMA suite cuts
# and deletes the links that hold its two addresses (tests/rdma/54-keepalive:
# tc netem loss 100%; 37-port-map, 89-linkdel: rdma link delete), so it runs
# natively only when asked (ERDMA_NATIVE=1), and tests/vm/vm-run then
# refuses, with one line and exit 125, unless both addresses sit on veth
# interfaces made for the tests that carry no default route.  Cases:
#   unset addresses, an address on lo, an address no interface holds, a veth
#   that carries the default route: refused, CMD never runs;
#   a veth pair without a default route (made here, in a network namespace
#   of its own): CMD runs natively.
set -eu
. "$(dirname "$0")/lib.sh"

VMRUN=$ROOT/tests/vm/vm-run
command -v ip >/dev/null || fail "ip (iproute2) not found (make test-deps)"
command -v unshare >/dev/null || fail "unshare (util-linux) not found"

# refused WHY ENV...: vm-run in native mode with ENV must exit 125 with one
# "refused" line naming WHY, and must not run its command
refused() {
	local why=$1 rc=0
	shift
	env -u ERDMA_BED_IP0 -u ERDMA_BED_IP1 ERDMA_NATIVE=1 "$@" "$VMRUN" --timeout 20 -- sh -c 'echo RAN' \
		>"$TMP/out" 2>"$TMP/err" || rc=$?
	[ $rc = 125 ] || fail "native ($*): exit $rc, want 125 (refused)"
	! grep -q RAN "$TMP/out" || fail "native ($*): the command ran"
	[ "$(wc -l <"$TMP/err")" = 1 ] && grep -q "refused: .*$why" "$TMP/err" ||
		fail "native ($*): not one line naming '$why': $(cat "$TMP/err")"
	echo "PASS refused ($*): $(cat "$TMP/err")"
}
refused 'set ERDMA_BED_IP0'
refused 'on lo, not a veth' ERDMA_BED_IP0=127.0.0.1 ERDMA_BED_IP1=127.0.0.1
refused 'no interface holds 198.51.100.77' ERDMA_BED_IP0=198.51.100.77 ERDMA_BED_IP1=127.0.0.1

# In a network namespace of its own (nothing of the host's is touched): a
# veth pair like the VM bed's, first with the default route on it.
cat >"$TMP/ns.sh" <<'NS'
set -eu
ip link add t0 type veth peer name t1
ip addr add 192.168.77.1/24 dev t0
ip addr add 192.168.77.2/24 dev t1
ip link set t0 up
ip link set t1 up
ip link set lo up
ip route add default via 192.168.77.2 dev t0
rc=0
ERDMA_NATIVE=1 ERDMA_BED_IP0=192.168.77.1 ERDMA_BED_IP1=192.168.77.2 "$1" --timeout 20 -- sh -c 'echo RAN' >"$2.dflt.out" 2>"$2.dflt.err" || rc=$?
echo $rc >"$2.dflt.rc"
ip route del default
rc=0
ERDMA_NATIVE=1 ERDMA_BED_IP0=192.168.77.1 ERDMA_BED_IP1=192.168.77.2 "$1" --timeout 20 -- sh -c 'echo RAN' >"$2.ok.out" 2>"$2.ok.err" || rc=$?
echo $rc >"$2.ok.rc"
NS
unshare -n bash "$TMP/ns.sh" "$VMRUN" "$TMP/ns" || fail "could not make a veth pair in a network namespace"
[ "$(cat "$TMP/ns.dflt.rc")" = 125 ] && ! grep -q RAN "$TMP/ns.dflt.out" &&
	grep -q 'refused: .*carries the default route' "$TMP/ns.dflt.err" ||
	fail "native on a veth with the default route: not refused ($(cat "$TMP/ns.dflt.rc"): $(cat "$TMP/ns.dflt.err"))"
echo "PASS refused (veth with the default route): $(cat "$TMP/ns.dflt.err")"
[ "$(cat "$TMP/ns.ok.rc")" = 0 ] && grep -qx RAN "$TMP/ns.ok.out" ||
	fail "native on a test veth pair: did not run ($(cat "$TMP/ns.ok.rc"): $(cat "$TMP/ns.ok.err"))"
echo "PASS runs natively on a veth pair made for the tests"

result "vm-run native mode refuses 4 unsafe settings with one line each (exit 125, command not run) and runs on a test veth pair"
