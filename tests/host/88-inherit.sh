#!/usr/bin/env bash
# An inherited listener the new image never calls listen() on (systemd
# socket activation, inetd "wait", a posix_spawn child): a shimmed image
# takes it at start-up as listen() takes one (preload/socket.c,
# listen_adopt).  Here, without RDMA, it has no door and must stay the
# kernel's in every way: tests/host/inherit.py's parent listens (backlog
# 7), starts a child image by subprocess pass_fds (fork + exec) and by
# os.posix_spawn, which accepts a client and echoes, then asks the kernel
# what it says to a bad accept4 flag, a non-blocking accept, a second
# listen() (the backlog read back), shutdown and an accept after it; the
# parent also spawns a missing file.  Child plain, shimmed (auto) and
# shimmed under require (where the start-up adoption runs to its end: the
# port rules keep 127.0.0.1 off RDMA, and its warning proves it ran), the
# parent plain and shimmed: one transcript.  The RDMA side is in the bed
# (tests/rdma/47-forkconn.sh, supervise-nolisten, supervise-spawn).
set -eu
. "$(dirname "$0")/lib.sh"

PROG=$(dirname "$0")/inherit.py
pre=$(shim_preload)
for how in fork spawn; do
	run_mode plain 60 "$PY" "$PROG" $how '{}' >"$TMP/$how.want" 2>&1 ||
		fail "$how: the plain run failed: $(cat "$TMP/$how.want")"
	grep -q "^client got b'hello'" "$TMP/$how.want" || fail "$how: plain run: $(cat "$TMP/$how.want")"
	for pm in plain shim; do
		for cm in auto require; do
			env='{"LD_PRELOAD": "'$pre'", "ERDMA_SHIM": "'$cm'", "ERDMA_SHIM_LOG": "warn"}'
			run_mode $pm 60 "$PY" "$PROG" $how "$env" >"$TMP/$how.$pm.$cm" 2>"$TMP/$how.$pm.$cm.err" ||
				fail "$how (parent $pm, child $cm): $(cat "$TMP/$how.$pm.$cm" "$TMP/$how.$pm.$cm.err")"
			same "$TMP/$how.want" "$TMP/$how.$pm.$cm" "$how, parent $pm, shimmed child ($cm)"
			if [ $cm = require ]; then
				grep -q 'RDMA required but the inherited listener is on TCP only' "$TMP/$how.$pm.$cm.err" ||
					fail "$how: the child under require did not take its inherited listener: $(cat "$TMP/$how.$pm.$cm.err")"
			elif [ -s "$TMP/$how.$pm.$cm.err" ]; then
				fail "$how (parent $pm): the shimmed child said: $(cat "$TMP/$how.$pm.$cm.err")"
			fi
		done
	done
done
result "an inherited listener in a shimmed image (pass_fds, posix_spawn; parent plain or shimmed; auto, require): the kernel's answers to accept, accept4, listen, shutdown, and the backlog read back, as without the shim"
