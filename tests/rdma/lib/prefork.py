"""A prefork server in Python (issue 14), the shape of gunicorn's sync
workers and multiprocessing servers: the master listens and forks WORKERS
workers that block in accept(); the master never accepts.  It serves the
protocol of tests/progs/prefork.c (8 bytes: size, seed; then that many
bytes of the seed's stream, prefork_stream.py: testlib's tl_rng), so
`prefork get` is its client.

    python3 prefork.py ADDR WORKERS      prints "ready PORT"; SIGTERM ends it
"""
import os
import signal
import socket
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from prefork_stream import answer  # noqa: E402


def worker(lsock):
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    while True:
        conn, _ = lsock.accept()
        with conn:
            answer(conn)


def main():
    addr, workers = sys.argv[1], int(sys.argv[2])
    lsock = socket.socket()
    lsock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    lsock.bind((addr, 0))
    lsock.listen(128)
    pids = []
    for _ in range(workers):
        pid = os.fork()
        if pid == 0:
            try:
                worker(lsock)
            finally:
                os._exit(0)
        pids.append(pid)
    print("ready", lsock.getsockname()[1], flush=True)
    stop = []
    signal.signal(signal.SIGTERM, lambda *_: stop.append(1))
    while not stop:
        signal.pause()
    for pid in pids:
        os.kill(pid, signal.SIGTERM)
    for pid in pids:
        os.waitpid(pid, 0)


main()
