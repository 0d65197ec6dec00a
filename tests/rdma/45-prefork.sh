#!/usr/bin/env bash
# Prefork servers (issue 14): a master listens and forks workers that accept;
# the master never does.  tests/progs/prefork (C: 1, 2 and 4 workers, a
# blocking accept loop and nginx's epoll shape) and tests/rdma/lib/prefork.py
# (Python, gunicorn's sync shape: 2 and 4 workers) serve 6 concurrent
# clients each, 256 KiB checked by FNV-1a per client (a blocking worker also
# checks after each accept that the listener's shared file is still
# blocking, as the kernel has it: the shim never sets O_NONBLOCK on it):
#   - kernel TCP (no shim anywhere): the reference transcript;
#   - both ends shimmed, the client with ERDMA_SHIM=require: every client
#     served over RDMA (the worker that waits first holds the port's RDMA
#     listener; its siblings serve TCP) -- the same transcript;
#   - a plain client of the shimmed server: served over TCP, the same.
# And unmodified nginx (master + 2 workers, sendfile), the same three ways.
# Before, the master's rsocket listener took every RDMA connection and no
# process ever accepted them: every shimmed client hung.
. "$(dirname "$0")/lib/common.bash"
P=$PROGS/prefork
PY=$(dirname "$0")/lib/prefork.py
[ -x "$P" ] || fail "$P is not built"
N=6 SIZE=262144
fails=0

. "$(dirname "$0")/lib/servers.bash"

# the light passes (ASan, iWARP): one worker and four, and Python with two
for w in $(pick "1 2 4" "1 4"); do
	for m in block epoll; do
		one "c-$w-$m" "$P" serve "$IP0" "$w" "$m"
	done
done
for w in $(pick "2 4" 2); do
	one "py-$w" python3 "$PY" "$IP0" "$w"
done
# Without io_uring (a container's default seccomp profile refuses it) the
# worker holding the RDMA listener can't wait on both queues without the
# listener's file made non-blocking underneath (README): the same clients
# must still all be served, and the server log must say why.
one c-2-nouring "$P" serve "$IP0" 2 block-nouring
if ! grep -q 'no io_uring (Operation not permitted)' "$WORK/c-2-nouring-s.srv"; then
	echo "FAIL c-2-nouring: the shimmed server never took the no-io_uring fallback"
	fails=$((fails + 1))
fi
# Unmodified nginx, master + 2 workers (epoll, EPOLLEXCLUSIVE accept, no
# accept mutex), serving an 8 MiB file with sendfile to 6 concurrent curl
# clients: shimmed curl (require) over RDMA, plain curl over TCP, the same
# sha256 as without the shim.
nginx_case() {
	local www=$WORK/www port=28080 i rc sum before=$fails mib=8
	command -v nginx >/dev/null || { echo "FAIL nginx: not installed (make test-deps)"; fails=$((fails + 1)); return; }
	# libasan preloaded into curl deadlocks at its start, shim or not
	# (tests/host/20-curl-http.sh): under SANITIZE=1 the clients are
	# Python's urllib; nginx (the part under test) stays the same.
	local client=(curl -sS -o)
	if [ "${SANITIZE:-0}" = 1 ]; then
		mib=2
		client=(/usr/bin/python3 -c 'import sys, urllib.request as u; open(sys.argv[1], "wb").write(u.urlopen(sys.argv[2]).read())')
	fi
	mkdir -p "$www"
	head -c $((mib << 20)) /dev/urandom >"$www/big"
	sum=$(sha256sum <"$www/big" | cut -c1-16)
	cat >"$WORK/nginx.conf" <<NGX
user root;
worker_processes 2;
daemon off;
master_process on;
pid $WORK/nginx.pid;
error_log stderr info;
events { worker_connections 64; }
http {
	access_log off;
	sendfile on;
	client_body_temp_path $WORK/body;
	proxy_temp_path $WORK/proxy;
	fastcgi_temp_path $WORK/fastcgi;
	uwsgi_temp_path $WORK/uwsgi;
	scgi_temp_path $WORK/scgi;
	server { listen $IP0:$port; root $www; }
}
NGX
	for run in kernel shim; do
		if [ $run = shim ]; then
			bg "$WORK/nginx.$run" env LD_PRELOAD="$PRELOAD" ERDMA_SHIM_LOG=debug nginx -e stderr -c "$WORK/nginx.conf" -p "$WORK"
		else
			bg "$WORK/nginx.$run" nginx -e stderr -c "$WORK/nginx.conf" -p "$WORK"
		fi
		SRV=$BG_PID
		wait_for "$WORK/nginx.$run" 'start worker process' 30
		for c in require plain; do
			pids=()
			for i in 1 2 3 4 5 6; do
				if [ $run = shim ] && [ $c = require ]; then
					env LD_PRELOAD="$PRELOAD" ERDMA_SHIM=require timeout -k 5 120 "${client[@]}" "$WORK/got.$run.$c.$i" "http://$IP0:$port/big" 2>>"$WORK/curl.err" &
				else
					timeout -k 5 120 "${client[@]}" "$WORK/got.$run.$c.$i" "http://$IP0:$port/big" 2>>"$WORK/curl.err" &
				fi
				pids+=($!)
			done
			rc=0
			for p in "${pids[@]}"; do wait "$p" || rc=$?; done
			for i in 1 2 3 4 5 6; do
				if [ "$(sha256sum <"$WORK/got.$run.$c.$i" 2>/dev/null | cut -c1-16)" != "$sum" ]; then
					echo "FAIL nginx ($run server, $c client $i): not the file (curl rc $rc): $(tail -n 2 "$WORK/curl.err")"
					tail -n 5 "$WORK/nginx.$run" | sed 's/^/    srv| /'
					fails=$((fails + 1))
					break
				fi
			done
		done
		kill -TERM "$SRV" 2>/dev/null || true
		wait "$SRV" 2>/dev/null || true
	done
	[ "$fails" = "$before" ] || return 0
	echo "PASS nginx: master + 2 workers, sendfile of $mib MiB to 6 concurrent clients: shimmed (require, RDMA) and plain, sha256 $sum"
}
nginx_case
[ "$fails" = 0 ] || fail "$fails prefork case(s) failed"
echo "RESULT: prefork servers (C 1/2/4 workers, blocking and epoll; Python 2/4 workers) serve every client, over RDMA when both ends are shimmed"
