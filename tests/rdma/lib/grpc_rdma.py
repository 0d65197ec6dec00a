#!/usr/bin/python3
"""gRPC echo pair for the RDMA suite (Debian's python3-grpcio, no protoc).

  grpc_rdma.py server BIND            e.g. BIND = "[::]:0" or "192.168.77.1:0";
                                      prints "ready PORT", serves until a
                                      client calls Quit, prints a summary
  grpc_rdma.py client TARGET [opts]   TARGET = "ipv4:192.168.77.1:PORT",
                                      "ipv6:[::ffff:192.168.77.1]:PORT" or
                                      "192.168.77.1:PORT"; "T1,T2" runs the
                                      whole work against T1, then T2 (one
                                      process switching servers)
      --channels N   channels used in parallel (default 8)
      --max-mib N    largest message, MiB (default 64)
      --quit         ask the server to exit afterwards
      --hold FILE    when done, keep the channels open until FILE exists
      --pool         fork multiprocessing pools while the channels are live:
                     each channel first and last calls Pool, whose handler
                     forks a Pool(2) in the server to hash the request, and
                     the client's main thread forks a Pool(2) of its own
                     while the channels' threads run (a data loader's shape)

Every payload is checked by sha256 on the receiving side and echoed back
checked again; stdout is deterministic (no ports, times, pids), so a run
over kernel TCP and a run over RDMA must print the same lines.
"""
import hashlib
import multiprocessing
import os
import random
import sys
import threading
import time
from concurrent import futures

import grpc

MIB = 1 << 20
SVC = "rdma.Echo"


def ident(b):
    return b


def sha(b):
    return hashlib.sha256(b).hexdigest()[:16]


def payload(seed, size):
    return random.Random(seed).randbytes(size)


def quarters(b):
    q = (len(b) + 3) // 4
    return [b[i:i + q] for i in range(0, len(b), q)]


def pool_hash(b):
    """sha of each quarter of b, hashed in a freshly forked Pool(2)."""
    with multiprocessing.get_context("fork").Pool(2) as p:
        return ",".join(p.map(sha, quarters(b))).encode()


class Stats:
    def __init__(self):
        self.lock = threading.Lock()
        self.calls = {}
        self.bytes = 0

    def add(self, kind, n):
        with self.lock:
            self.calls[kind] = self.calls.get(kind, 0) + 1
            self.bytes += n


def serve(bind):
    stats = Stats()
    done = threading.Event()

    def unary(req, ctx):
        stats.add("unary", len(req))
        return req

    def client_stream(it, ctx):
        h = hashlib.sha256()
        n = 0
        for m in it:
            h.update(m)
            n += len(m)
        stats.add("client_stream", n)
        return h.hexdigest()[:16].encode()

    def server_stream(req, ctx):
        count, size, seed = (int(x) for x in req.decode().split())
        stats.add("server_stream", count * size)
        for i in range(count):
            yield payload(seed + i, size)

    def bidi(it, ctx):
        for m in it:
            stats.add("bidi", len(m))
            yield m

    def pool(req, ctx):
        stats.add("pool", len(req))
        return pool_hash(req)

    def quit_(req, ctx):
        done.set()
        return b"bye"

    handlers = {
        "Unary": grpc.unary_unary_rpc_method_handler(unary, ident, ident),
        "ClientStream": grpc.stream_unary_rpc_method_handler(client_stream, ident, ident),
        "ServerStream": grpc.unary_stream_rpc_method_handler(server_stream, ident, ident),
        "Bidi": grpc.stream_stream_rpc_method_handler(bidi, ident, ident),
        "Pool": grpc.unary_unary_rpc_method_handler(pool, ident, ident),
        "Quit": grpc.unary_unary_rpc_method_handler(quit_, ident, ident),
    }
    opts = [("grpc.max_receive_message_length", 80 * MIB),
            ("grpc.max_send_message_length", 80 * MIB)]
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=16), options=opts)
    server.add_generic_rpc_handlers((grpc.method_handlers_generic_handler(SVC, handlers),))
    port = server.add_insecure_port(bind)
    if not port:
        print("cannot bind", bind)
        return 2
    server.start()
    print("ready", port, flush=True)
    if not done.wait(600):
        print("server: no Quit within 600 s")
        return 3
    server.stop(grace=5).wait()
    print("server: calls", dict(sorted(stats.calls.items())), "bytes", stats.bytes)
    return 0


def sizes(max_mib):
    s = [1, 100, 4096, 65536 + 3, MIB, 4 * MIB]
    s += [m * MIB for m in (16, 64) if m <= max_mib]
    return s


def pool_calls(ch, ci, k):
    call = ch.unary_unary(f"/{SVC}/Pool")
    p = payload(ci * 5 + k, 262144 + ci)
    want = ",".join(sha(q) for q in quarters(p)).encode()
    return f"pool #{k}: {'ok' if call(p, timeout=120) == want else 'MISMATCH'}"


def channel_work(target, ci, max_mib, results, pool=False):
    opts = [("grpc.max_receive_message_length", 80 * MIB),
            ("grpc.max_send_message_length", 80 * MIB)]
    ch = grpc.insecure_channel(target, options=opts)
    grpc.channel_ready_future(ch).result(timeout=60)
    unary = ch.unary_unary(f"/{SVC}/Unary")
    cstream = ch.stream_unary(f"/{SVC}/ClientStream")
    sstream = ch.unary_stream(f"/{SVC}/ServerStream")
    bidi = ch.stream_stream(f"/{SVC}/Bidi")
    out = [pool_calls(ch, ci, 0)] if pool else []
    # unary: every size on channel 0, small and mid sizes on the others
    for n in sizes(max_mib) if ci == 0 else sizes(1):
        p = payload(1000 * ci + n, n)
        r = unary(p, timeout=300)
        out.append(f"unary {n}: {'ok' if r == p else 'MISMATCH'}")
    # client streaming: 32 messages of 64 KiB
    msgs = [payload(ci * 77 + i, 65536) for i in range(32)]
    h = hashlib.sha256(b"".join(msgs)).hexdigest()[:16].encode()
    r = cstream(iter(msgs), timeout=300)
    out.append(f"client_stream 32x64KiB: {'ok' if r == h else 'MISMATCH'}")
    # server streaming: 16 messages of 256 KiB
    got = list(sstream(f"16 262144 {ci * 31}".encode(), timeout=300))
    ok = len(got) == 16 and all(g == payload(ci * 31 + i, 262144) for i, g in enumerate(got))
    out.append(f"server_stream 16x256KiB: {'ok' if ok else 'MISMATCH'}")
    # bidi: ping-pong 64 messages of varied sizes
    sent = [payload(ci * 13 + i, 1 + (i * 7919) % 200000) for i in range(64)]
    back = list(bidi(iter(sent), timeout=300))
    out.append(f"bidi 64 msgs: {'ok' if back == sent else 'MISMATCH'}")
    if pool:
        out.append(pool_calls(ch, ci, 1))
    results[ci] = (ch, out)


def client(targets, channels, max_mib, quit_, hold, pool=False):
    rc = 0
    for ti, target in enumerate(targets.split(",")):
        if ti:
            print(f"-- next server (#{ti})")
        rc |= client1(target, channels, max_mib, quit_, hold if ti == len(targets.split(",")) - 1 else None, pool)
    return rc


def client1(target, channels, max_mib, quit_, hold, pool=False):
    results = {}
    errors = []

    def run(ci):
        try:
            channel_work(target, ci, max_mib, results, pool)
        except Exception as e:  # reported, and the exit code says so
            errors.append(f"channel {ci}: {type(e).__name__}: {e}")

    ts = [threading.Thread(target=run, args=(i,)) for i in range(channels)]
    for t in ts:
        t.start()
    if pool:
        # the client's own pool, forked while its channels' threads run
        data = payload(4242, 1 << 20)
        ok = pool_hash(data) == ",".join(sha(q) for q in quarters(data)).encode()
        print(f"client pool: {'ok' if ok else 'MISMATCH'}")
        errors += [] if ok else ["client pool: MISMATCH"]
    for t in ts:
        t.join()
    bad = 0
    for ci in sorted(results):
        for line in results[ci][1]:
            print(f"ch{ci} {line}")
            bad += "MISMATCH" in line
    for e in errors:
        print(e)
    print(f"client: {channels} channels, {len(errors)} failed, {bad} mismatched", flush=True)
    if hold:
        print("holding", flush=True)
        for _ in range(6000):
            if os.path.exists(hold):
                break
            time.sleep(0.01)
    if quit_:
        ch = grpc.insecure_channel(target)
        ch.unary_unary(f"/{SVC}/Quit")(b"", timeout=60)
        ch.close()
    for ci in results:
        results[ci][0].close()
    return 1 if errors or bad else 0


def main():
    if len(sys.argv) < 3:
        print(__doc__)
        return 2
    if sys.argv[1] == "server":
        return serve(sys.argv[2])
    args = sys.argv[3:]
    channels, max_mib, quit_, hold, pool = 8, 64, False, None, False
    i = 0
    while i < len(args):
        a = args[i]
        if a == "--channels":
            channels = int(args[i + 1]); i += 1
        elif a == "--max-mib":
            max_mib = int(args[i + 1]); i += 1
        elif a == "--quit":
            quit_ = True
        elif a == "--pool":
            pool = True
        elif a == "--hold":
            hold = args[i + 1]; i += 1
        i += 1
    return client(sys.argv[2], channels, max_mib, quit_, hold, pool)


if __name__ == "__main__":
    sys.exit(main())
