#!/usr/bin/env python3
# bench/cost-table.py OUT: the tables of bench/cost-table from what its inner
# half left in OUT (see bench/cost-table).  Reads, per API (shim, rs) and
# number of connections (1, MANY):
#   out.API.CONNS.cg    costops' "phase K NAME ITERS CALLS" lines
#   cg.API.CONNS.K      callgrind's dump of phase K (K from 1)
#   st.API.CONNS        strace -f -y of the same program (CONNS = 1 only)
#   vg.API.CONNS.log    valgrind --trace-syscalls of the callgrind run
# Prints markdown: the cost table, where the instructions go, and which
# system calls the counted loops made.
import collections
import glob
import os
import re
import sys

OUT = sys.argv[1]
APIS = ("shim", "rs")
LABEL = {
    "send1": "send 1 B",
    "send4k": "send 4 KiB",
    "send64k": "send 64 KiB",
    "recv1": "recv 1 B",
    "recv4k": "recv 4 KiB",
    "recv64k": "recv 64 KiB",
    "rtt1": "round trip 1 B (send + blocking recv)",
    "epoll1": "epoll_wait, 1 ready of 1 ¹",
    "poll1": "poll, 1 ready ¹",
}


def phase_mark(v, res, cur):
    """costops marks its phases with getpgid(1000000 + phase) at a counted
    loop's start and getpgid(2000000 + phase) at its end: the phase whose
    system calls are counted now (a new counter at a start), or None."""
    if 1000000 <= v < 2000000:
        res[v - 1000000] = collections.Counter()
        return v - 1000000
    if 2000000 <= v < 3000000:
        return None
    return cur


def phases(api, conns):
    """[(k, name, iters, calls)] from costops' output."""
    res = []
    try:
        with open(f"{OUT}/out.{api}.{conns}.cg") as f:
            for line in f:
                p = line.split()
                if len(p) == 5 and p[0] == "phase":
                    res.append((int(p[1]), p[2], int(p[3]), int(p[4])))
    except OSError:
        pass
    return res


def objclass(ob):
    b = os.path.basename(ob)
    if "liberdma_shim" in b:
        return "shim"
    if "librdmacm" in b:
        return "rsockets"
    if "libibverbs" in b or "rdmav" in b:
        return "verbs"
    if b.startswith(("libc.", "libc-", "ld-linux", "libpthread", "libm.")):
        return "libc"
    if b.startswith("costops"):
        return "program"
    return "other"


def callgrind(path):
    """(total Ir, {class: self Ir}) of one callgrind dump."""
    names, total, by = {}, None, collections.Counter()
    ob, after_calls = "?", False
    with open(path) as f:
        for line in f:
            if line.startswith(("summary:", "totals:")):
                total = int(line.split()[1])
                continue
            # object names are compressed: "(5) name" once, then "(5)",
            # in ob= and cob= lines alike
            m = re.match(r"^(c?)ob=(\((\d+)\))? ?(.*)$", line.rstrip("\n"))
            if m:
                name = m.group(4) or names.get(m.group(3), "?")
                if m.group(3) and m.group(4):
                    names[m.group(3)] = m.group(4)
                if not m.group(1):
                    ob = name
                continue
            if line.startswith("calls="):
                after_calls = True
                continue
            if line[:1].isdigit() or line[:1] in "+-*":
                if after_calls:
                    after_calls = False
                    continue
                by[objclass(ob)] += int(line.split()[-1])
    return total, by


def cg_phase(api, conns, k):
    f = f"{OUT}/cg.{api}.{conns}.{k + 1}"
    return callgrind(f) if os.path.exists(f) else (None, {})


def strace_counts(api, conns):
    """{phase k: Counter(syscall -> count)} between costops' markers."""
    res, cur, path = {}, None, f"{OUT}/st.{api}.{conns}"
    if not os.path.exists(path):
        return res
    with open(path) as f:
        for line in f:
            m = re.match(r"^(\d+) +(\w+)\((.*)", line)
            if not m or "resumed>" in line:
                continue
            name, args = m.group(2), m.group(3)
            if name == "getpgid":
                cur = phase_mark(int(re.match(r"\d+", args).group(0)), res, cur)
                continue
            if cur is None:
                continue
            t = re.match(r"\d+<([^>]*)>", args)
            if t:
                tgt = t.group(1)
                for key, short in (("uverbs", "uverbs"), ("rdma_cm", "rdma_cm"),
                                   ("infinibandevent", "cq channel"),
                                   ("eventpoll", "epoll"), ("eventfd", "eventfd"),
                                   ("socket:", "socket")):
                    if key in tgt:
                        name += f"[{short}]"
                        break
            res[cur][name] += 1
    return res


def vg_counts(api, conns):
    """The same from valgrind --trace-syscalls (names only)."""
    res, cur, path = {}, None, f"{OUT}/vg.{api}.{conns}.log"
    if not os.path.exists(path):
        return res
    with open(path, errors="replace") as f:
        for line in f:
            m = re.search(r"SYSCALL\[\d+,\d+\]\(\s*\d+\) sys_(\w+) \( ?([^ ,)]*)", line)
            if not m:
                continue
            name = m.group(1)
            if name == "getpgid":
                cur = phase_mark(int(m.group(2)), res, cur)
                continue
            if cur is not None:
                res[cur][name] += 1
    return res


def fmt(x, d=1):
    return "-" if x is None else f"{x:,.{d}f}"


def main():
    rows = []  # (label, name, {api: (instr, sys, sysdetail, calls/op, by)})
    conns_list = sorted({int(os.path.basename(p).split(".")[2]) for p in glob.glob(f"{OUT}/out.*.*.cg")})
    for conns in conns_list:
        per = {}
        for api in APIS:
            ph = phases(api, conns)
            st = strace_counts(api, conns)
            vg = vg_counts(api, conns)
            empty = None
            for k, name, iters, calls in ph:
                tot, by = cg_phase(api, conns, k)
                if name == "empty":
                    empty = tot / iters if tot is not None and iters else 0.0
                    continue
                instr = None
                if tot is not None and iters:
                    instr = tot / iters - (empty or 0.0)
                src = st if k in st else vg
                sysd = src.get(k)
                nsys = sum(sysd.values()) / iters if sysd is not None else None
                per.setdefault(name, {})[api] = dict(
                    instr=instr, sys=nsys, sysd=sysd, iters=iters,
                    cpo=calls / iters if iters else None,
                    by={c: v / iters for c, v in by.items()},
                    src="strace" if k in st else "valgrind",
                    vg=sum(vg[k].values()) / iters if k in vg else None)
        for name, d in per.items():
            label = LABEL.get(name)
            if not label:
                label = f"epoll_wait, 1 ready of {conns:,} ¹ ²" if name.startswith("epoll") else name
            rows.append((label, name, d))

    print("| op | shim instr | raw rsockets instr | ratio | shim syscalls | raw syscalls |")
    print("|---|---:|---:|---:|---:|---:|")
    for label, name, d in rows:
        s, r = d.get("shim", {}), d.get("rs", {})
        si, ri = s.get("instr"), r.get("instr")
        ratio = f"{si / ri:.2f}" if si is not None and ri else "-"
        print(f"| {label} | {fmt(si)} | {fmt(ri)} | {ratio} | {fmt(s.get('sys'), 2)} | {fmt(r.get('sys'), 2)} |")
    print()
    print("¹ raw rsockets has no epoll: its row is rpoll() over the same set of fds (timeout -1, one readable).")
    print("² buffers of 16 KiB on every connection (ERDMA_SHIM_SNDBUF/RCVBUF for the shim, SO_SNDBUF/SO_RCVBUF for rsockets); system calls from valgrind's trace; raw rsockets only with --raw-many.")
    print()
    print("Where the instructions go (per op; self cost by object: the shim, librdmacm's rsockets,")
    print("libibverbs + the rxe provider, libc, the program):")
    print()
    print("| op | api | shim | rsockets | verbs+provider | libc | program | recv calls/op | iterations |")
    print("|---|---|---:|---:|---:|---:|---:|---:|---:|")
    for label, name, d in rows:
        for api in APIS:
            x = d.get(api)
            if not x:
                continue
            b = x["by"]
            cpo = fmt(x["cpo"], 2) if name.startswith("recv") else ""
            print(f"| {label.split(' ¹')[0]} | {api} | {fmt(b.get('shim', 0))} | {fmt(b.get('rsockets', 0))} | "
                  f"{fmt(b.get('verbs', 0))} | {fmt(b.get('libc', 0))} | {fmt(b.get('program', 0))} | {cpo} | {x['iters']} |")
    print()
    print("System calls per op in the counted loops (all threads; [target] from strace -y):")
    print()
    for label, name, d in rows:
        for api in APIS:
            x = d.get(api)
            if not x or not x["sysd"]:
                continue
            it = x["iters"]
            parts = ", ".join(f"{n} {c / it:.2f}" for n, c in x["sysd"].most_common())
            print(f"- {label.split(' ¹')[0]}, {api} ({x['src']}): {parts}")
    print()


main()
