"""An inherited listener (tests/host/88-inherit.sh): this process, run
without the shim, listens (backlog 7) and starts CHILD_CMD... with the
listener as fd 3 and CHILD_ENV, by subprocess's pass_fds (fork + exec)
or by os.posix_spawn (its file actions move it to fd 3); the child image
(this script, --child) never calls listen() before it accepts, as a
socket-activated service.  It prints what the kernel says to each call;
the parent connects one client, which sends 5 bytes and reads them back.

    python3 inherit.py fork|spawn CHILD_ENV_JSON
"""
import ctypes
import errno
import json
import os
import socket
import struct
import subprocess
import sys


def say(what, fn):
    try:
        r = fn()
        print("%s: ok %s" % (what, r), flush=True)
    except OSError as e:
        print("%s: %s" % (what, errno.errorcode.get(e.errno, e.errno)),
              flush=True)


def backlog(s):
    ti = s.getsockopt(socket.IPPROTO_TCP, socket.TCP_INFO, 104)
    return struct.unpack_from("B", ti, 0)[0], struct.unpack_from("I", ti, 28)[0]


def child(fd):
    libc = ctypes.CDLL(None, use_errno=True)
    s = socket.socket(fileno=fd)
    say("acceptconn", lambda: s.getsockopt(socket.SOL_SOCKET,
                                           socket.SO_ACCEPTCONN))
    say("state, backlog", lambda: backlog(s))

    def echo():
        c, _ = s.accept()
        with c:
            c.sendall(c.recv(5))
        return "echoed"
    say("accept", echo)

    def bad_flags():
        if libc.accept4(fd, None, None, 0x4000) < 0:
            e = ctypes.get_errno()
            raise OSError(e, os.strerror(e))
    say("accept4 bad flags", bad_flags)
    s.setblocking(False)
    say("accept nonblocking", lambda: s.accept())
    say("listen 3", lambda: s.listen(3))
    say("state, backlog", lambda: backlog(s))
    say("shutdown", lambda: s.shutdown(socket.SHUT_RDWR))
    say("accept after shutdown", lambda: s.accept())
    say("close", lambda: s.close())


def parent(how, env):
    env = dict(os.environ, **json.loads(env))
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    s.listen(7)
    argv = [sys.executable, os.path.abspath(__file__), "--child",
            str(s.fileno())]
    if how == "fork":
        pid = subprocess.Popen(argv, pass_fds=[s.fileno()], env=env).pid
    else:
        s.set_inheritable(True)
        pid = os.posix_spawn(sys.executable, argv, env)
    c = socket.create_connection(s.getsockname())
    c.sendall(b"hello")
    got = b""
    while len(got) < 5:
        b = c.recv(5 - len(got))
        if not b:
            break
        got += b
    _, st = os.waitpid(pid, 0)
    print("client got", got, flush=True)
    say("spawn of a missing file", lambda: os.posix_spawn(
        "/nonexistent/inherit", argv, env))
    print("child exit", os.waitstatus_to_exitcode(st), flush=True)


if sys.argv[1] == "--child":
    child(int(sys.argv[2]))
else:
    parent(sys.argv[1], sys.argv[2])
