"""A supervisor's shape (issue 43, docs/security.md "What the reservation
leaves open"): the parent listens, forks a child that execs a new image
(this script again, with the listener's fd number) which calls listen()
again on the inherited listener and serves it (and listens again on a
second one it never serves); the parent lives on with the
listener open and never accepts.  It serves the protocol of
tests/progs/prefork.c (8 bytes: size, seed; then that many bytes of the
seed's stream, prefork_stream.py), so `prefork get` is its client.

    python3 supervise.py ADDR [SHAPE]   the child prints "ready PORT";
                                        SIGTERM to the parent ends both

SHAPE says when the listeners become inheritable and how the child is made:
  fork      (the default) in the parent, before os.fork
  dup2      in the fork child, after the fork (os.dup2, set_inheritable)
  execfail  as dup2, and the child first tries an exec that fails
            (ENOENT): the shim's reservation files must all be
            close-on-exec again after it (said on stderr), else exit 3
  preexec   subprocess.Popen whose preexec_fn makes them inheritable in
            the child (close_fds=False): _posixsubprocess's exec
  reexec    no fork: the process makes them inheritable and execs the
            server image itself (nothing lives on to hold the listener)
  nolisten  as fork, and the exec'd image never calls listen(): it only
            accepts on the inherited listener (systemd socket activation,
            inetd "wait", gunicorn --fd)
  spawn     os.posix_spawn (libc's), the listeners inheritable in the
            parent, the served one moved to fd 40 by the spawn's file
            actions; the image only accepts, as nolisten
  activate  systemd socket activation: the process first re-executes
            itself without the shim (the activator: it holds no RDMA port
            reservation), listens, and its fork child puts the listeners
            at fds 3 and 4, sets LISTEN_FDS/LISTEN_PID, gives the shim
            back and execs the image, which only accepts on fd 3
"""
import os
import signal
import socket
import subprocess
import sys
import threading

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from prefork_stream import answer  # noqa: E402


def handle(c):
    with c:
        answer(c)


def serve(fd, spare_fd, relisten):
    """The exec'd image: listen() again on the inherited fds (unless told
    not to), then serve the first."""
    spare = socket.socket(fileno=spare_fd)
    s = socket.socket(fileno=fd)
    if relisten:
        spare.listen(8)
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


def rdma_cm_fds():
    """This process's fds on rdma_cm, and whether each is close-on-exec
    (/proc/self/fdinfo's flags carry O_CLOEXEC for it)."""
    out = {}
    for n in os.listdir("/proc/self/fd"):
        try:
            if os.readlink("/proc/self/fd/" + n) != "/dev/infiniband/rdma_cm":
                continue
            with open("/proc/self/fdinfo/" + n) as f:
                fl = next(x for x in f if x.startswith("flags:"))
        except (OSError, StopIteration):
            continue
        out[int(n)] = bool(int(fl.split()[1], 8) & 0o2000000)
    return out


def failed_exec():
    """An exec that fails: errno as the kernel said, and every rdma_cm file
    close-on-exec after it."""
    try:
        os.execv("/nonexistent/supervise", ["x"])
    except FileNotFoundError:
        pass
    fds = rdma_cm_fds()
    print("failed exec: ENOENT, rdma_cm fds %s" % sorted(fds.items()),
          file=sys.stderr, flush=True)
    # with the shim there are files to check (its reservations)
    if not all(fds.values()) or (not fds and "LD_PRELOAD" in os.environ):
        os._exit(3)


def activator(addr):
    """Re-executed without the shim (its LD_PRELOAD kept aside for the
    child), unless it is already."""
    if "LD_PRELOAD" not in os.environ:
        return os.environ.get("SUPERVISE_PRELOAD")
    env = dict(os.environ)
    env["SUPERVISE_PRELOAD"] = env.pop("LD_PRELOAD")
    os.execve(sys.executable, [sys.executable, os.path.abspath(__file__),
                               addr, "activate"], env)


def activated(s, spare, argv, preload):
    """The fork child of the activator: systemd's fds 3 and 4."""
    hi, hi_spare = os.dup(s.fileno()), os.dup(spare.fileno())
    os.dup2(hi, 3)
    os.dup2(hi_spare, 4)
    for x in (hi, hi_spare):
        os.close(x)
    env = dict(os.environ, LISTEN_FDS="2", LISTEN_PID=str(os.getpid()))
    env.pop("SUPERVISE_PRELOAD", None)
    if preload:
        env["LD_PRELOAD"] = preload
    os.execve(sys.executable, argv + ["3", "4", "nolisten"], env)


def supervise(addr, shape):
    global child
    preload = activator(addr) if shape == "activate" else None
    signal.signal(signal.SIGTERM, end)
    # two listeners (the spare one is listened on again, never served)
    spare, s = socket.socket(), socket.socket()
    for x in (spare, s):
        x.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        x.bind((addr, 0))
        x.listen(128)
        x.set_inheritable(shape in ("fork", "nolisten", "spawn"))
    argv = [sys.executable, os.path.abspath(__file__), "--serve"]
    if shape == "preexec":
        fd = s.fileno()

        def inherit():
            os.set_inheritable(fd, True)
            os.set_inheritable(spare.fileno(), True)
        child = subprocess.Popen(argv + [str(fd), str(spare.fileno())],
                                 close_fds=False, preexec_fn=inherit).pid
    elif shape == "spawn":
        child = os.posix_spawn(
            sys.executable, argv + ["40", str(spare.fileno()), "nolisten"],
            os.environ,
            file_actions=[(os.POSIX_SPAWN_DUP2, s.fileno(), 40),
                          (os.POSIX_SPAWN_CLOSE, s.fileno())])
    elif shape == "reexec":
        child = 0
    else:
        child = os.fork()
    if child == 0 and shape == "activate":
        activated(s, spare, argv, preload)
    if child == 0:
        # the served one reaches the new image at another number (a dup,
        # the original closed): it is told by its socket, not its fd
        fd = os.dup2(s.fileno(), 40)
        s.close()
        os.set_inheritable(spare.fileno(), True)
        if shape == "execfail":
            failed_exec()
        os.execv(sys.executable, argv + [str(fd), str(spare.fileno())] +
                 (["nolisten"] if shape == "nolisten" else []))
    # the listener stays open here, never waited on
    while True:
        signal.pause()


if sys.argv[1] == "--serve":
    serve(int(sys.argv[2]), int(sys.argv[3]), sys.argv[4:] != ["nolisten"])
else:
    supervise(sys.argv[1], sys.argv[2] if len(sys.argv) > 2 else "fork")
