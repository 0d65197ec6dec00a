#!/usr/bin/python3
"""gRPC fan-in for the RDMA suite (Debian's python3-grpcio, no protoc): many
channels from several client processes into one server, each channel its own
connection, every RPC checked at both ends.

  grpc_fanin.py server BIND
      An echo server on /fanin.Echo/Unary: checks each request against the
      sha256 the client sent in metadata "x-sha256" (a mismatch fails the
      RPC with DATA_LOSS) and answers with the request.  Prints "ready PORT";
      on SIGTERM stops and prints "server: rpcs N bytes B mismatches M";
      SIGUSR1 prints every thread's Python stack (a hang's report).

  grpc_fanin.py client TARGET --kind echo|raw [opts]
      --kind echo   against the server above: the response must be the request
      --kind raw    against bench/grpc_raw's C server: /grpc_raw.Bench/Send
                    with the payload's FNV-1a 64 in "x-grpc-raw-fnv1a" (the
                    server hashes the payload and fails the RPC with
                    DATA_LOSS on a mismatch) and "x-grpc-raw-resp" asking for
                    RESP bytes back, which must be grpc_raw's make_payload
                    (splitmix64, seed 2)
      --proc P      this process's number (payloads and channel args differ)
      --channels N  channels (default 64), each its own connection: a
                    distinct channel argument and a local subchannel pool, as
                    gRPC shares one subchannel (one TCP connection) between
                    channels with identical arguments
      --rpcs K      unary RPCs on each channel (default 4), all in flight at once
      --bad B       B more RPCs (channels 0..B-1) with a wrong checksum: each
                    must be refused with DATA_LOSS (the check can fail)
      --hold FILE   when done, print "holding" and keep every channel open
                    until FILE exists (120 s at most)
      Prints "client P: N channels x K RPCs: X ok, F failed, M mismatched;
      bytes out O in I; wrong checksums refused R/B" and exits 0 when X is
      N*K and R is B.
"""
import faulthandler
import hashlib
import os
import random
import signal
import sys
import threading
import time
from concurrent import futures

T_IMPORT = time.monotonic()
import grpc  # noqa: E402  (timed: the bed's TCG makes it seconds)

T_IMPORT = time.monotonic() - T_IMPORT

ECHO = "/fanin.Echo/Unary"
RAW = "/grpc_raw.Bench/Send"
RESP = 3000  # bytes the raw server is asked to answer with
M64 = (1 << 64) - 1


def ident(b):
    return b


def fnv1a(b):
    """FNV-1a 64, as bench/grpc_raw and tests/lib/testlib compute it."""
    h = 0xcbf29ce484222325
    for x in b:
        h = ((h ^ x) * 0x100000001b3) & M64
    return h


def splitmix(n, seed):
    """grpc_raw.c's make_payload(n, seed): splitmix64 words, little-endian."""
    out = bytearray()
    x = seed
    while len(out) < n:
        x = (x + 0x9e3779b97f4a7c15) & M64
        z = x
        z = ((z ^ (z >> 30)) * 0xbf58476d1ce4e5b9) & M64
        z = ((z ^ (z >> 27)) * 0x94d049bb133111eb) & M64
        z ^= z >> 31
        out += z.to_bytes(8, "little")
    return bytes(out[:n])


def serve(bind):
    lock = threading.Lock()
    st = {"rpcs": 0, "bytes": 0, "mismatches": 0}

    def unary(req, ctx):
        want = dict(ctx.invocation_metadata()).get("x-sha256")
        bad = want != hashlib.sha256(req).hexdigest()
        with lock:
            st["rpcs"] += 1
            st["bytes"] += len(req)
            st["mismatches"] += bad
        if bad:
            ctx.abort(grpc.StatusCode.DATA_LOSS, "payload checksum mismatch")
        return req

    # SIGTERM ends the wait below through the wakeup pipe; its handler
    # does nothing.  (It set a threading.Event: run while the main thread
    # was inside Event.wait(), the handler took the Condition's lock that
    # thread held, and the server never ended -- seen once.)
    wake_r, wake_w = os.pipe()
    os.set_blocking(wake_w, False)
    signal.set_wakeup_fd(wake_w)
    signal.signal(signal.SIGTERM, lambda *_: None)
    faulthandler.register(signal.SIGUSR1, all_threads=True)
    handlers = {"Unary": grpc.unary_unary_rpc_method_handler(unary, ident, ident)}
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=8))
    server.add_generic_rpc_handlers((grpc.method_handlers_generic_handler("fanin.Echo", handlers),))
    port = server.add_insecure_port(bind)
    if not port:
        print("cannot bind", bind)
        return 2
    server.start()
    print("ready", port, flush=True)
    os.read(wake_r, 1)  # a signal's number, written by the wakeup fd
    server.stop(grace=5).wait()
    print(f"server: rpcs {st['rpcs']} bytes {st['bytes']} mismatches {st['mismatches']}", flush=True)
    return 0


def size_of(proc, ch, r):
    """1 B, about 1 KiB, 4 KiB and about 16 KiB, then again."""
    return (1, 1000 + ch, 4096, 16384 + 64 * proc + ch)[r % 4]


def request(kind, proc, ch, r, wrong=False):
    """(payload, metadata, expected response) of one RPC."""
    p = random.Random((proc * 1000 + ch) * 64 + r).randbytes(size_of(proc, ch, r))
    if kind == "echo":
        h = hashlib.sha256(p).hexdigest()
        if wrong:
            h = ("0" if h[0] != "0" else "1") + h[1:]
        return p, (("x-sha256", h),), p
    h = fnv1a(p) ^ (1 if wrong else 0)
    return p, (("x-grpc-raw-fnv1a", f"{h:016x}"), ("x-grpc-raw-resp", f"{RESP:x}")), None


def client(target, kind, proc, nch, k, bad, hold):
    t0 = time.monotonic()
    want_raw = splitmix(RESP, 2)
    chans = [grpc.insecure_channel(target, options=[
        ("grpc.use_local_subchannel_pool", 1),
        ("erdma_test.channel", proc * 1000 + i)]) for i in range(nch)]
    for f in [grpc.channel_ready_future(c) for c in chans]:
        f.result(timeout=240)
    t1 = time.monotonic()
    calls = [c.unary_unary(ECHO if kind == "echo" else RAW, ident, ident) for c in chans]
    jobs = []
    for r in range(k):
        for i, call in enumerate(calls):
            p, md, want = request(kind, proc, i, r)
            jobs.append((call.future(p, timeout=240, metadata=md), want_raw if want is None else want,
                         len(p), f"ch{i} rpc{r}"))
    ok = failed = mismatched = out = into = 0
    errors = []
    for f, want, n, what in jobs:
        out += n
        try:
            resp = f.result()
        except grpc.RpcError as e:
            failed += 1
            errors.append(f"{what}: {e.code()} {e.details()}")
            continue
        into += len(resp)
        if resp == want:
            ok += 1
        else:
            mismatched += 1
            errors.append(f"{what}: response of {len(resp)} bytes differs")
    refused = 0
    for j in range(bad):
        p, md, _ = request(kind, proc, j % nch, k + j, wrong=True)
        out += len(p)
        try:
            calls[j % nch](p, timeout=240, metadata=md)
            errors.append(f"wrong checksum #{j}: accepted")
        except grpc.RpcError as e:
            if e.code() == grpc.StatusCode.DATA_LOSS:
                refused += 1
            else:
                errors.append(f"wrong checksum #{j}: {e.code()} {e.details()}")
    t2 = time.monotonic()
    for e in errors[:8]:
        print(e)
    print(f"client {proc} times: import grpc {T_IMPORT:.1f} s, {nch} channels ready {t1 - t0:.1f} s,"
          f" RPCs {t2 - t1:.1f} s")
    print(f"client {proc}: {nch} channels x {k} RPCs: {ok} ok, {failed} failed, {mismatched} mismatched;"
          f" bytes out {out} in {into}; wrong checksums refused {refused}/{bad}", flush=True)
    if hold:
        print("holding", flush=True)
        t = time.monotonic()
        while not os.path.exists(hold) and time.monotonic() - t < 120:
            time.sleep(0.01)
    for c in chans:
        c.close()
    return 0 if ok == nch * k and refused == bad else 1


def main():
    a = sys.argv[1:]
    if len(a) >= 2 and a[0] == "server":
        return serve(a[1])
    if len(a) < 2 or a[0] != "client":
        print(__doc__)
        return 2
    o = {"--kind": "echo", "--proc": "0", "--channels": "64", "--rpcs": "4", "--bad": "0", "--hold": None}
    if len(a) % 2:
        print(__doc__)
        return 2
    for i in range(2, len(a), 2):
        if a[i] not in o:
            print(__doc__)
            return 2
        o[a[i]] = a[i + 1]
    if o["--kind"] not in ("echo", "raw"):
        print(__doc__)
        return 2
    return client(a[1], o["--kind"], int(o["--proc"]), int(o["--channels"]), int(o["--rpcs"]),
                  int(o["--bad"]), o["--hold"])


if __name__ == "__main__":
    sys.exit(main())
