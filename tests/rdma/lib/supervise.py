"""A supervisor's shape (issue 43, docs/security.md "What the reservation
leaves open"): the parent listens, forks a child that execs a new image
(this script again, with the listener's fd number) which calls listen()
again on the inherited listener and serves it (and listens again on a
second one it never serves); the parent lives on with the
listener open and never accepts.  It serves the protocol of
tests/progs/prefork.c (8 bytes: size, seed; then that many bytes of the
seed's stream, prefork_stream.py), so `prefork get` is its client.

    python3 supervise.py ADDR      the child prints "ready PORT"; SIGTERM
                                   to the parent ends both
"""
import os
import signal
import socket
import sys
import threading

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from prefork_stream import answer  # noqa: E402


def handle(c):
    with c:
        answer(c)


def serve(fd, spare_fd):
    """The exec'd image: listen() again on the inherited fds, then serve
    the first."""
    spare = socket.socket(fileno=spare_fd)
    spare.listen(8)
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
    # two listeners (the spare one is listened on again, never served)
    spare, s = socket.socket(), socket.socket()
    for x in (spare, s):
        x.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        x.bind((addr, 0))
        x.listen(128)
        x.set_inheritable(True)
    child = os.fork()
    if child == 0:
        # the served one reaches the new image at another number (a dup,
        # the original closed): it is told by its socket, not its fd
        fd = os.dup2(s.fileno(), 40)
        s.close()
        os.execv(sys.executable, [sys.executable, os.path.abspath(__file__),
                                  "--serve", str(fd), str(spare.fileno())])
    # the listener stays open here, never waited on
    while True:
        signal.pause()


if sys.argv[1] == "--serve":
    serve(int(sys.argv[2]), int(sys.argv[3]))
else:
    supervise(sys.argv[1])
