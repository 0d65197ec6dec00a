#!/bin/bash
# tests/progs/rs_bulk: 64 MiB of seeded pseudo-random data over rsockets from
# rxe1 (.2) to rxe0 (.1); the server checks every byte and the FNV-1a hash,
# and holds the connection open until both ends' RC QPs have been seen.
set -eu
. "$(dirname "$0")/lib/bed.bash"
need_prog rs_bulk

port=7472
bytes=$((64 << 20))
seed=20240229

bg 100 "$TESTBIN/rs_bulk" server "$IP0" $port --hold-file "$T/release" --timeout 90 \
	>"$T/server.log" 2>&1
server=$BG_PID
wait_until 20 "rs_bulk server listening" grep -q '^listening' "$T/server.log"

bg 100 "$TESTBIN/rs_bulk" client "$IP0" $port --bind "$IP1" --bytes $bytes --seed $seed \
	--timeout 90 >"$T/client.log" 2>&1
client=$BG_PID

# The server prints its verdict, then waits for $T/release with the
# connection still open: the QPs can be looked at without racing.
server_done() { grep -q '^RESULT: server' "$T/server.log" || ! alive "$server"; }
wait_until 90 "the server's verdict" server_done
sqp=$(qp_lines "$server")
cqp=$(qp_lines "$client")
touch "$T/release"

crc=0 src=0
wait "$client" || crc=$?
wait "$server" || src=$?
show() { echo "--- $1"; sed 's/^/    /'; }
show server <"$T/server.log"
show client <"$T/client.log"
show "server QPs" <<<"$sqp"
show "client QPs" <<<"$cqp"
[ $src -eq 0 ] || fail "rs_bulk server exited $src"
[ $crc -eq 0 ] || fail "rs_bulk client exited $crc"
grep -q "^RESULT: server verified $bytes bytes" "$T/server.log" ||
	fail "the server did not verify $bytes bytes"
grep -q "^RESULT: client sent $bytes bytes.*confirmed" "$T/client.log" ||
	fail "the client did not get a matching report"
grep -q "^link $DEV0/1 " <<<"$sqp" || fail "no RC QP of the server on $DEV0"
grep -q "^link $DEV1/1 " <<<"$cqp" || fail "no RC QP of the client on $DEV1"

sum=$(sed -n 's/^RESULT: server verified [0-9]* bytes, fnv1a64 \([0-9a-f]*\), \(.*\)/\1 at \2/p' "$T/server.log")
echo "RESULT: rs_bulk verified $bytes bytes $IP1->$IP0 (seed $seed, fnv1a64 $sum);" \
	"QPs server $(awk '{print $2 "#" $4}' <<<"$sqp" | head -1) client $(awk '{print $2 "#" $4}' <<<"$cqp" | head -1)"
