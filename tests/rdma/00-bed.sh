#!/bin/bash
# The soft-RoCE bed is there: rxe0/rxe1 ACTIVE on their veths, visible to
# libibverbs, and the rdma_cm device exists.
set -eu
. "$(dirname "$0")/lib/bed.bash"

links=$(timeout 10 rdma link show)
echo "$links"
for pair in "$DEV0:v0" "$DEV1:v1"; do
	dev=${pair%%:*} nd=${pair#*:}
	grep -q "^link $dev/1 state ACTIVE .*netdev $nd\b" <<<"$links" ||
		{ [ -n "${ERDMA_VM:-}" ] || grep -q "^link $dev/1 state ACTIVE" <<<"$links"; } ||
		fail "$dev is not ACTIVE (on $nd)"
done

devs=$(timeout 10 ibv_devices)
echo "$devs"
for dev in "$DEV0" "$DEV1"; do
	grep -qw "$dev" <<<"$devs" || fail "ibv_devices does not list $dev"
	timeout 10 ibv_devinfo -d "$dev" | grep -q 'state:.*PORT_ACTIVE' ||
		fail "ibv_devinfo: $dev port not active"
done

[ -c /dev/infiniband/rdma_cm ] || fail "no /dev/infiniband/rdma_cm"
ls -l /dev/infiniband
nuverbs=$(ls /dev/infiniband | grep -c '^uverbs')
[ "$nuverbs" -ge 2 ] || fail "expected 2 uverbs devices, found $nuverbs"

for ip in "$IP0" "$IP1"; do
	ip -o addr show | grep -q "inet $ip/" || fail "no interface has $ip"
done
memlock=$(ulimit -l)
[ "$memlock" = unlimited ] || echo "warning: ulimit -l is $memlock" >&2

echo "RESULT: bed ok: $DEV0($IP0) $DEV1($IP1), $nuverbs uverbs, memlock $memlock, kernel $(uname -r)"
