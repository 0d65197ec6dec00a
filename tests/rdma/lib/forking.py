"""Fork per connection in Python (issue 14): socketserver.ForkingTCPServer,
whose parent accepts, forks a child per connection and closes its copy at
once.  It serves the protocol of tests/progs/prefork.c (8 bytes: size, seed;
then that many bytes of the seed's stream, prefork_stream.py: testlib's
tl_rng), so `prefork get` is its client.  The handler first checks that getpeername() names the address
accept() returned (it answers nothing otherwise).

    python3 forking.py ADDR      prints "ready PORT"; SIGTERM ends it
"""
import os
import signal
import socketserver
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from prefork_stream import answer  # noqa: E402


class Handler(socketserver.BaseRequestHandler):
    def handle(self):
        if self.request.getpeername()[:2] != self.client_address[:2]:
            print("getpeername", self.request.getpeername(), "accept said",
                  self.client_address, file=sys.stderr, flush=True)
            return
        answer(self.request)


class Server(socketserver.ForkingTCPServer):
    allow_reuse_address = True
    request_queue_size = 128


def main():
    srv = Server((sys.argv[1], 0), Handler)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    print("ready", srv.server_address[1], flush=True)
    srv.serve_forever()


main()
