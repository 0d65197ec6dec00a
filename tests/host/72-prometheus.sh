#!/usr/bin/env bash
# erdma-shim stat --prometheus on a host without RDMA:
#   - the test's parser of the text exposition format 0.0.4 is strict (it
#     refuses a list of malformed inputs) and the output parses with it
#   - a live shimmed program (python3, one connection to a plain server):
#     bytes sent/received on path tcp exact after a first exchange, then
#     moved by exactly a second, 5 MB transfer; connections by path and
#     reason, process info, every family with HELP and TYPE
#   - the metric names are the ones erdma-shim(1) and docs/design.md list
#   - node_exporter's textfile collector takes the file (no scrape error)
#     and serves the samples
#   - stat PID --prometheus of a process without a table: exit 1, still
#     parses; --json with --prometheus: usage error (64)
set -eu
. "$(dirname "$0")/lib.sh"

CLI=$ROOT/erdma-shim
PEER=$PROGS/statpeer
PARSE=$ROOT/tests/host/prom_parse.py
NE=/usr/bin/prometheus-node-exporter
[ -x "$CLI" ] || fail "$CLI not built (run make)"
[ -x "$PEER" ] || fail "$PEER not built (run make)"
[ -x "$NE" ] || fail "$NE missing (make test-deps installs prometheus-node-exporter)"

$PY "$PARSE" --self-test >"$TMP/self.out" || { cat "$TMP/self.out" >&2; fail "the exposition parser accepts malformed input"; }
echo "PASS parser: $(cat "$TMP/self.out")"

# A plain server, and a shimmed python3 client that makes one exchange,
# then a second one when $TMP/go exists.
bg_start plain "$TMP/srv.out" "$TMP/srv.err" "$PEER" server 127.0.0.1 0
wait_line "$TMP/srv.out" '^ready [0-9]+$' 20 "$BG_PID" >/dev/null || fail "statpeer server did not start"
sport=$(awk '/^ready /{print $2; exit}' "$TMP/srv.out")
cat >"$TMP/client.py" <<'EOF'
import os, signal, socket, sys, time
signal.signal(signal.SIGTERM, lambda *a: sys.exit(0))
port, go = int(sys.argv[1]), sys.argv[2]
s = socket.create_connection(("127.0.0.1", port))
def xfer(n, r):
    # statpeer: "N R\n", N bytes; it answers R bytes
    s.sendall(f"{n} {r}\n".encode() + b"x" * n)
    got = 0
    while got < r:
        b = s.recv(min(65536, r - got))
        if not b:
            sys.exit("EOF from the server")
        got += len(b)
xfer(1000, 300)
print("phase1", os.getpid(), flush=True)
end = time.monotonic() + 30
while not os.path.exists(go):   # bounded poll for the test's go-ahead
    if time.monotonic() > end:
        sys.exit("no go-ahead in 30 s")
    time.sleep(0.01)
xfer(2000000, 3000000)
print("phase2", flush=True)
while True:
    signal.pause()
EOF
bg_start shim "$TMP/cl.out" "$TMP/cl.err" "$PY" "$TMP/client.py" "$sport" "$TMP/go"
cpid=$BG_PID
wait_line "$TMP/cl.out" '^phase1 ' 20 "$cpid" >/dev/null || { cat "$TMP/cl.err" >&2; fail "client: no first exchange"; }

"$CLI" stat --prometheus >"$TMP/r1.prom" || fail "stat --prometheus: exit $?"
"$PY" "$PARSE" "$TMP/r1.prom" >"$TMP/r1.txt" || { cat "$TMP/r1.prom" >&2; fail "stat --prometheus: does not parse (above)"; }
touch "$TMP/go"
wait_line "$TMP/cl.out" '^phase2$' 30 "$cpid" >/dev/null || { cat "$TMP/cl.err" >&2; fail "client: no second exchange"; }
"$CLI" stat "$cpid" --prometheus >"$TMP/r2.prom" || fail "stat $cpid --prometheus: exit $?"
"$PY" "$PARSE" "$TMP/r2.prom" >"$TMP/r2.txt" || { cat "$TMP/r2.prom" >&2; fail "stat PID --prometheus: does not parse (above)"; }

$PY - "$TMP/r1.prom" "$TMP/r2.prom" "$cpid" "$ROOT/tests/host" <<'EOF' || fail "metric values (above)"
import sys
sys.path.insert(0, sys.argv[4])
from prom_parse import parse
pid = sys.argv[3]

def read(path):
    fams, samples = parse(open(path).read())
    for name, f in fams.items():
        assert name.startswith("erdma_shim_"), name
        assert f.get("help") and f["type"] in ("counter", "gauge"), (name, f)
        if f["type"] == "counter":
            assert name.endswith("_total"), name
    v = {}
    for name, labels, value in samples:
        if labels.get("pid") not in (None, pid):
            continue  # another shimmed process on this host
        key = (name,) + tuple(sorted((k, x) for k, x in labels.items() if k not in ("pid", "comm")))
        v[key] = value
        if "pid" in labels:
            assert labels["comm"] == "python3", labels
    return fams, v

f1, a = read(sys.argv[1])
f2, b = read(sys.argv[2])
assert set(f1) == set(f2), (set(f1) ^ set(f2))
want = {"erdma_shim_processes", "erdma_shim_process_info", "erdma_shim_stats_since_seconds",
        "erdma_shim_received_bytes_total", "erdma_shim_sent_bytes_total",
        "erdma_shim_received_messages_total", "erdma_shim_sent_messages_total",
        "erdma_shim_connections", "erdma_shim_connections_total",
        "erdma_shim_listeners", "erdma_shim_listeners_total",
        "erdma_shim_untracked_connections_total"}
assert set(f1) == want, set(f1) ^ want
assert b[("erdma_shim_processes",)] == 1, b  # r2: this pid only
assert a[("erdma_shim_process_info", ("mode", "auto"), ("rdma", "not available"), ("version", "0.1.0"))] == 1, a
P = lambda p: ("path", p)
def chk(v, key, want):
    got = v.get(key)
    assert got == want, f"{key}: {got}, want {want}"
# first exchange: "1000 300\n" + 1000 bytes out, 300 in
chk(a, ("erdma_shim_sent_bytes_total", P("tcp")), 1009)
chk(a, ("erdma_shim_received_bytes_total", P("tcp")), 300)
# the second moved them by exactly "2000000 3000000\n" + 2000000 / 3000000
chk(b, ("erdma_shim_sent_bytes_total", P("tcp")), 1009 + 16 + 2000000)
chk(b, ("erdma_shim_received_bytes_total", P("tcp")), 300 + 3000000)
for v in (a, b):
    for m in ("received_bytes", "sent_bytes", "received_messages", "sent_messages"):
        chk(v, (f"erdma_shim_{m}_total", P("rdma")), 0)
    chk(v, ("erdma_shim_connections", P("tcp"), ("reason", "no RDMA device")), 1)
    chk(v, ("erdma_shim_connections_total", P("tcp")), 1)
    chk(v, ("erdma_shim_connections_total", P("rdma")), 0)
    chk(v, ("erdma_shim_listeners_total", P("listen")), 0)
    chk(v, ("erdma_shim_untracked_connections_total",), 0)
    assert not [k for k in v if k[0] == "erdma_shim_connections" and k[1] != P("tcp")], v
EOF
echo "PASS counters: tcp bytes out/in 1009/300 after the first exchange, +2000016/+3000000 after the second; connections{path=tcp,reason=no RDMA device} 1"

# The names in the man page and docs/design.md are the names in the output.
names=$(sed -n 's/^# TYPE \([a-z_]*\) .*/\1/p' "$TMP/r1.prom" | sort)
man_names=$(grep -o 'erdma_shim_[a-z_]*' "$ROOT/preload/man/erdma-shim.1" | grep -v '^erdma_shim_so' | sort -u)
readme_names=$(sed -n '/^## Operators/,/^## /p' "$ROOT/docs/design.md" | grep -o 'erdma_shim_[a-z_]*' | sort -u)
[ "$names" = "$man_names" ] || fail "erdma-shim(1) lists other metric names: $(diff <(echo "$names") <(echo "$man_names") | grep '^[<>]' | tr '\n' ' ')"
[ "$names" = "$readme_names" ] || fail "docs/design.md's Operators section lists other metric names: $(diff <(echo "$names") <(echo "$readme_names") | grep '^[<>]' | tr '\n' ' ')"
for n in $names; do
	t=$(sed -n "s/^# TYPE $n //p" "$TMP/r1.prom")
	grep -A3 -F "$n" "$ROOT/preload/man/erdma-shim.1" | grep -qw "$t" || fail "erdma-shim(1): $n is not documented as a $t"
done
echo "PASS docs: the $(echo "$names" | wc -l) metric families, with their types, are the ones in erdma-shim(1) and docs/design.md"

# node_exporter's textfile collector: the file as an operator would write it.
mkdir "$TMP/textfile"
"$CLI" stat --prometheus >"$TMP/textfile/erdma-shim.prom.tmp" && mv "$TMP/textfile/erdma-shim.prom.tmp" "$TMP/textfile/erdma-shim.prom"
nport=$($PY -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
bg_start plain "$TMP/ne.out" "$TMP/ne.err" "$NE" --web.listen-address="127.0.0.1:$nport" \
	--collector.disable-defaults --collector.textfile --collector.textfile.directory="$TMP/textfile"
nepid=$BG_PID
ok=
for _ in $(seq 200); do
	if curl -sf "http://127.0.0.1:$nport/metrics" >"$TMP/scrape.txt" 2>/dev/null; then ok=1; break; fi
	kill -0 "$nepid" 2>/dev/null || break
	sleep 0.05
done
[ -n "$ok" ] || { cat "$TMP/ne.err" >&2; fail "node_exporter did not serve /metrics within 10 s"; }
grep -qx 'node_textfile_scrape_error 0' "$TMP/scrape.txt" || { grep -i textfile "$TMP/scrape.txt" "$TMP/ne.err" >&2; fail "node_exporter: textfile scrape error"; }
grep -qF "erdma_shim_sent_bytes_total{comm=\"python3\",path=\"tcp\",pid=\"$cpid\"} 2.001025e+06" "$TMP/scrape.txt" ||
	{ grep erdma_shim_sent "$TMP/scrape.txt" >&2; fail "node_exporter: the client's sent bytes not served"; }
grep -q '^# TYPE erdma_shim_connections gauge' "$TMP/scrape.txt" || fail "node_exporter: erdma_shim_connections not a gauge"
echo "PASS node_exporter's textfile collector: no scrape error, the samples served"

# No table: exit 1, and the output still parses; --json --prometheus: 64.
rc=0
"$CLI" stat $$ --prometheus >"$TMP/none.prom" 2>"$TMP/none.err" || rc=$?
[ $rc = 1 ] || fail "stat PID --prometheus of a process without a table: exit $rc (want 1)"
"$PY" "$PARSE" "$TMP/none.prom" | grep -qx 'erdma_shim_processes{} 0' || fail "stat PID --prometheus without a table: not a parsable 'erdma_shim_processes 0'"
rc=0
"$CLI" stat --json --prometheus >/dev/null 2>&1 || rc=$?
[ $rc = 64 ] || fail "stat --json --prometheus: exit $rc (want 64)"
echo "PASS stat PID --prometheus without a table: exit 1, parses; --json --prometheus: 64"

result "stat --prometheus: exposition 0.0.4 parses strictly, counters move by exactly a transfer's bytes, names documented, node_exporter takes it"
