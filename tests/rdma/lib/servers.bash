# Server shapes served three ways (sourced by 45-prefork.sh, 47-forkconn.sh;
# after common.bash).  Needs P (tests/progs/prefork: its `get` is the
# client), N clients of SIZE bytes each, and a fails counter.

# serve TAG SHIM(0|1) CMD...: start the server, set SRV and PORT.
serve() {
	local tag=$1 shim=$2; shift 2
	if [ "$shim" = 1 ]; then
		bg "$WORK/$tag.srv" env LD_PRELOAD="$PRELOAD" ERDMA_SHIM_LOG=debug "$@"
	else
		bg "$WORK/$tag.srv" "$@"
	fi
	SRV=$BG_PID
	wait_for "$WORK/$tag.srv" '^ready ' 30
	PORT=$(port_of "$WORK/$tag.srv")
}
stop() { kill -TERM "$SRV" 2>/dev/null || true; wait "$SRV" 2>/dev/null || true; }

# one TAG SERVER-CMD...: the three runs of one server shape -- kernel TCP
# (the reference transcript), both ends shimmed with the client under
# ERDMA_SHIM=require, and a plain client of the shimmed server -- which must
# all give the same transcript.  With HANDED=n, the shimmed server's log
# must also name n connections handed over at a fork (handover.c).
one() {
	local tag=$1 rc handed=; shift
	serve "$tag-k" 0 "$@"
	timeout -k 5 60 "$P" get "$IP0" "$PORT" $N $SIZE >"$WORK/$tag.tcp" 2>&1 || true
	stop
	serve "$tag-s" 1 "$@"
	rc=0
	env LD_PRELOAD="$PRELOAD" ERDMA_SHIM=require timeout -k 5 60 \
		"$P" get "$IP0" "$PORT" $N $SIZE >"$WORK/$tag.rdma" 2>&1 || rc=$?
	[ -z "${HANDED:-}" ] || handed=$(grep -c 'handed over at fork' "$WORK/$tag-s.srv" || true)
	timeout -k 5 60 "$P" get "$IP0" "$PORT" $N $SIZE >"$WORK/$tag.plain" 2>&1 || true
	stop
	if [ "$(grep -c ' bytes ok$' "$WORK/$tag.tcp")" != $N ]; then
		echo "FAIL $tag: kernel TCP run: $(grep -v ' ok$' "$WORK/$tag.tcp" | head -n 2)"
		fails=$((fails + 1))
	elif ! cmp -s "$WORK/$tag.tcp" "$WORK/$tag.rdma" || [ "$rc" != 0 ]; then
		echo "FAIL $tag: shimmed client (require), exit $rc; what differs from kernel TCP:"
		grep -v ' bytes ok$' "$WORK/$tag.rdma" | head -n 8 | sed 's/^/    cli| /'
		tail -n 6 "$WORK/$tag-s.srv" | sed 's/^/    srv| /'
		fails=$((fails + 1))
	elif grep -q '^accept: ' "$WORK/$tag-s.srv"; then
		# a worker's blocking accept failed (EAGAIN: the shim's doing)
		echo "FAIL $tag: a server's accept failed: $(grep -m1 '^accept: ' "$WORK/$tag-s.srv")"
		fails=$((fails + 1))
	elif [ "$handed" != "${HANDED:-}" ]; then
		echo "FAIL $tag: $handed of $HANDED RDMA connections handed over at fork (server log)"
		tail -n 6 "$WORK/$tag-s.srv" | sed 's/^/    srv| /'
		fails=$((fails + 1))
	elif ! cmp -s "$WORK/$tag.tcp" "$WORK/$tag.plain"; then
		echo "FAIL $tag: plain client of the shimmed server:"
		grep -v ' bytes ok$' "$WORK/$tag.plain" | head -n 8 | sed 's/^/    cli| /'
		fails=$((fails + 1))
	else
		echo "PASS $tag: $N clients byte-exact over kernel TCP, over RDMA (require${handed:+; $handed handed over at fork}) and plain TCP to the shimmed server"
	fi
}
