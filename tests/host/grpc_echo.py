#!/usr/bin/python3
"""gRPC echo server and client for tests/host/10-python-grpc.sh.

No protoc: the service is made of generic handlers with raw-bytes messages.

  grpc_echo.py server          binds 127.0.0.1:0 (and [::1]:0 when it can),
                               prints "PORT4 <n>" and "PORT6 <n>|none", serves
                               until the client calls /echo.Echo/Quit, then
                               prints a summary of what it served and exits 0
  grpc_echo.py client P4 P6    runs every kind of RPC against the server,
                               checks each payload by sha256, prints a
                               deterministic summary; exit 0 when all passed

Everything printed on stdout is deterministic (no ports, times or pids), so
the two runs of the test (with and without the shim) must print the same.
"""
import hashlib
import random
import sys
import threading
from concurrent import futures

import grpc

MIB = 1 << 20
MAX_MSG = 8 * MIB
SERVICE = "echo.Echo"


def ident(b):
    return b


def sha(b):
    return hashlib.sha256(b).hexdigest()


def payload(seed, size):
    return random.Random(seed).randbytes(size)


def parse_req(b):
    """b'count size seed' -> ints"""
    return [int(x) for x in b.split()]


# ---------------------------------------------------------------- server
class Stats:
    def __init__(self):
        self.lock = threading.Lock()
        self.calls = {}
        self.bytes_in = 0
        self.bytes_out = 0

    def add(self, method, bin_=0, bout=0):
        with self.lock:
            self.calls[method] = self.calls.get(method, 0) + 1
            self.bytes_in += bin_
            self.bytes_out += bout


def serve():
    stats = Stats()
    done = threading.Event()

    def unary(req, ctx):
        # reply: the request reversed, so an echo that did nothing fails
        out = req[::-1]
        stats.add("Unary", len(req), len(out))
        return out

    def fail(req, ctx):
        stats.add("Fail", len(req))
        ctx.abort(grpc.StatusCode.INVALID_ARGUMENT, "bad request: " + req.decode())

    def quit_(req, ctx):
        stats.add("Quit")
        done.set()
        return b"bye"

    def server_stream(req, ctx):
        count, size, seed = parse_req(req)
        n = 0
        for i in range(count):
            msg = payload(seed + i, size)
            n += len(msg)
            yield msg
        stats.add("ServerStream", len(req), n)

    def client_stream(it, ctx):
        h = hashlib.sha256()
        total = msgs = 0
        for msg in it:
            h.update(msg)
            total += len(msg)
            msgs += 1
        out = ("%d %d %s" % (msgs, total, h.hexdigest())).encode()
        stats.add("ClientStream", total, len(out))
        return out

    def bidi(it, ctx):
        nin = nout = 0
        for msg in it:
            nin += len(msg)
            out = hashlib.sha256(msg).digest() + msg[::-1]
            nout += len(out)
            yield out
        stats.add("Bidi", nin, nout)

    handlers = {
        "Unary": grpc.unary_unary_rpc_method_handler(unary, ident, ident),
        "Fail": grpc.unary_unary_rpc_method_handler(fail, ident, ident),
        "Quit": grpc.unary_unary_rpc_method_handler(quit_, ident, ident),
        "ServerStream": grpc.unary_stream_rpc_method_handler(server_stream, ident, ident),
        "ClientStream": grpc.stream_unary_rpc_method_handler(client_stream, ident, ident),
        "Bidi": grpc.stream_stream_rpc_method_handler(bidi, ident, ident),
    }
    opts = [
        ("grpc.max_send_message_length", MAX_MSG),
        ("grpc.max_receive_message_length", MAX_MSG),
        ("grpc.so_reuseport", 0),
    ]
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=16), options=opts)
    server.add_generic_rpc_handlers(
        (grpc.method_handlers_generic_handler(SERVICE, handlers),))
    port4 = server.add_insecure_port("127.0.0.1:0")
    if not port4:
        print("cannot bind 127.0.0.1:0", file=sys.stderr)
        return 2
    try:
        port6 = server.add_insecure_port("[::1]:0")
    except RuntimeError:
        port6 = 0
    server.start()
    print("PORT4 %d" % port4, flush=True)
    print("PORT6 %s" % (port6 or "none"), flush=True)
    if not done.wait(120):
        print("no Quit call within 120 s", file=sys.stderr)
        server.stop(0)
        return 3
    server.stop(5).wait(10)
    print("server: calls " + " ".join(
        "%s=%d" % kv for kv in sorted(stats.calls.items())))
    print("server: bytes in=%d out=%d" % (stats.bytes_in, stats.bytes_out))
    return 0


# ---------------------------------------------------------------- client
class Client:
    def __init__(self):
        self.lines = []
        self.failures = 0

    def out(self, s):
        self.lines.append(s)

    def check(self, ok, what):
        if not ok:
            self.failures += 1
            self.out("MISMATCH " + what)
        return ok


def channel(target):
    return grpc.insecure_channel(target, options=[
        ("grpc.max_send_message_length", 16 * MIB),
        ("grpc.max_receive_message_length", MAX_MSG + 64),
    ])


def run_suite(c, tag, target, sizes, full):
    ch = channel(target)
    grpc.channel_ready_future(ch).result(timeout=15)
    m = lambda name: "/%s/%s" % (SERVICE, name)  # noqa: E731
    unary = ch.unary_unary(m("Unary"), ident, ident)
    fail = ch.unary_unary(m("Fail"), ident, ident)
    sstream = ch.unary_stream(m("ServerStream"), ident, ident)
    cstream = ch.stream_unary(m("ClientStream"), ident, ident)
    bidi = ch.stream_stream(m("Bidi"), ident, ident)
    nope = ch.unary_unary("/%s/NoSuchMethod" % SERVICE, ident, ident)

    # unary, sizes up to 4 MiB
    for i, size in enumerate(sizes):
        req = payload(1000 + i, size)
        rep = unary(req, timeout=30)
        c.check(sha(rep) == sha(req[::-1]), "%s unary size=%d" % (tag, size))
        c.out("%s unary size=%d reply=%d sha=%s" % (tag, size, len(rep), sha(rep)[:16]))

    # concurrent unary calls on one channel (one TCP connection, many streams)
    futs = [unary.future(payload(2000 + i, 1000 + 97 * i), timeout=30) for i in range(32)]
    ok = all(sha(f.result()) == sha(payload(2000 + i, 1000 + 97 * i)[::-1])
             for i, f in enumerate(futs))
    c.check(ok, "%s concurrent unary" % tag)
    c.out("%s concurrent unary x32 ok=%s" % (tag, ok))

    # server streaming
    for count, size in ([(10, 1000), (50, 65536), (4, 4 * MIB)] if full else [(10, 1000)]):
        seed = 3000 + count
        h = hashlib.sha256()
        n = 0
        for i, msg in enumerate(sstream(b"%d %d %d" % (count, size, seed), timeout=60)):
            c.check(sha(msg) == sha(payload(seed + i, size)),
                    "%s server-stream msg %d" % (tag, i))
            h.update(msg)
            n += 1
        c.out("%s server-stream count=%d size=%d got=%d sha=%s"
              % (tag, count, size, n, h.hexdigest()[:16]))

    # client streaming
    for count, size in ([(10, 1000), (64, 65536), (3, 4 * MIB)] if full else [(10, 1000)]):
        msgs = [payload(4000 + i, size) for i in range(count)]
        rep = cstream(iter(msgs), timeout=60)
        want = ("%d %d %s" % (count, count * size, sha(b"".join(msgs)))).encode()
        c.check(rep == want, "%s client-stream" % tag)
        c.out("%s client-stream count=%d size=%d reply=%s"
              % (tag, count, size, rep.decode()[:40]))

    # bidi streaming: replies are checked as they come back
    sizes_b = [0, 1, 100, 4096, 65536, 1 << 20, 4 * MIB - 64] if full else [1, 100]
    msgs = [payload(5000 + i, s) for i, s in enumerate(sizes_b)]
    h = hashlib.sha256()
    got = 0
    for i, rep in enumerate(bidi(iter(msgs), timeout=60)):
        want = hashlib.sha256(msgs[i]).digest() + msgs[i][::-1]
        c.check(rep == want, "%s bidi msg %d" % (tag, i))
        h.update(rep)
        got += 1
    c.check(got == len(msgs), "%s bidi count" % tag)
    c.out("%s bidi msgs=%d got=%d sha=%s" % (tag, len(msgs), got, h.hexdigest()[:16]))

    # status codes travel unchanged
    try:
        fail(b"xyz", timeout=10)
        c.check(False, "%s Fail returned" % tag)
    except grpc.RpcError as e:
        c.out("%s error-status %s %s" % (tag, e.code().name, e.details()))
    try:
        nope(b"", timeout=10)
        c.check(False, "%s NoSuchMethod returned" % tag)
    except grpc.RpcError as e:
        c.out("%s unknown-method %s" % (tag, e.code().name))
    if full:
        try:
            unary(payload(6000, MAX_MSG + 1), timeout=30)
            c.check(False, "%s oversized returned" % tag)
        except grpc.RpcError as e:
            c.out("%s oversized %s" % (tag, e.code().name))
        # the channel still works after the errors
        rep = unary(b"after", timeout=10)
        c.check(rep == b"retfa", "%s after errors" % tag)
        c.out("%s after-errors ok=%s" % (tag, rep == b"retfa"))
    ch.close()


def client(port4, port6):
    c = Client()
    sizes = [0, 1, 100, 1024, 16384, 65535, 65536, 1 << 20, 4 * MIB - 1, 4 * MIB]
    run_suite(c, "v4", "127.0.0.1:%s" % port4, sizes, True)
    # several channels at once: several TCP connections to one server
    chans = [channel("127.0.0.1:%s" % port4) for _ in range(4)]
    stubs = [ch.unary_unary("/%s/Unary" % SERVICE, ident, ident) for ch in chans]
    futs = [stubs[i % 4].future(payload(7000 + i, 30000), timeout=30) for i in range(16)]
    ok = all(f.result() == payload(7000 + i, 30000)[::-1] for i, f in enumerate(futs))
    c.check(ok, "multi-channel")
    c.out("v4 multi-channel x4 calls=16 ok=%s" % ok)
    for ch in chans:
        ch.close()
    if port6 != "none":
        run_suite(c, "v6", "[::1]:%s" % port6, [0, 100, 65536, 1 << 20], False)
    else:
        c.out("v6 skipped (::1 unavailable)")
    ch = channel("127.0.0.1:%s" % port4)
    ch.unary_unary("/%s/Quit" % SERVICE, ident, ident)(b"", timeout=10)
    ch.close()
    for line in c.lines:
        print(line)
    print("client: failures=%d" % c.failures)
    return 1 if c.failures else 0


if __name__ == "__main__":
    if len(sys.argv) >= 2 and sys.argv[1] == "server":
        sys.exit(serve())
    if len(sys.argv) == 4 and sys.argv[1] == "client":
        sys.exit(client(sys.argv[2], sys.argv[3]))
    print(__doc__, file=sys.stderr)
    sys.exit(2)
