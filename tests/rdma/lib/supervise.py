"""A supervisor's shape (issue 43, docs/security.md "What the reservation
leaves open"): the parent listens, forks a child that execs a new image
(this script again, with the listener's fd number) which calls listen()
again on the inherited listener and serves it; the parent lives on with the
listener open and never accepts.  It serves the protocol of
tests/progs/prefork.c (8 bytes: size, seed; then that many bytes of the
seed's stream, prefork_stream.py), so `prefork get` is its client.

    python3 supervise.py ADDR      the child prints "ready PORT"; SIGTERM
                                   to the parent ends both
"""
import os
import signal
import socket
import struct
import sys
import threading

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from prefork_stream import stream  # noqa: E402


def handle(c):
    with c:
        req = b""
        while len(req) < 8:
            part = c.recv(8 - len(req))
            if not part:
                return
            req += part
        size, seed = struct.unpack("!II", req)
        c.sendall(stream(seed, size))


def serve(fd):
    """The exec'd image: listen() again on the inherited fd, then serve."""
    s = socket.socket(fileno=fd)
    s.listen(128)
    print("ready", s.getsockname()[1], flush=True)
    while True:
        c, _ = s.accept()
        threading.Thread(target=handle, args=(c,), daemon=True).start()


child = 0


def end(*_):
    if child:
        os.kill(child, signal.SIGTERM)
        os.waitpid(child, 0)
    os._exit(0)


def supervise(addr):
    global child
    signal.signal(signal.SIGTERM, end)
    s = socket.socket()
    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    s.bind((addr, 0))
    s.listen(128)
    s.set_inheritable(True)
    child = os.fork()
    if child == 0:
        os.execv(sys.executable, [sys.executable, os.path.abspath(__file__),
                                  "--serve", str(s.fileno())])
    # the listener stays open here, never waited on
    while True:
        signal.pause()


if sys.argv[1] == "--serve":
    serve(int(sys.argv[2]))
else:
    supervise(sys.argv[1])
