#!/usr/bin/env bash
# The shim's local files against another local user (issue 43, "Local
# files"; docs/security.md).  The attacker is `nobody` (setpriv); the victim
# is root's shimmed program or root's erdma-shim.  One case per file:
#   tables  nobody pre-creates a world-writable file (and a symlink) under
#           the exact table name of root's next connecting process, and
#           sprays names for other pids: root's program maps none of them,
#           the attacker's files are unchanged, it says so in one line and
#           keeps working; a process whose name is free gets a table owned
#           by root, mode 0600
#   log     ERDMA_SHIM_LOG_FILE in a sticky world-writable directory:
#           nobody's symlink is not followed (its target unchanged),
#           nobody's file is not written to, root's own log is made 0600;
#           logging stays on stderr with one line saying why
#   lock    the listen lock: nobody's symlink is not followed (its target not
#           created), nobody's file held with flock stalls nothing, a
#           sibling holding root's lock stalls a listen 1 s at most
#   stat    nobody's live process maps forged tables (terminal escapes,
#           newlines, C1 bytes, bad addresses in every string and slot):
#           root's erdma-shim stat (text, JSON, Prometheus) prints no raw
#           control or non-ASCII byte, exits 0, shows the forged strings
#           escaped (JSON round-trips), Prometheus text stays valid
#   statflip  the forger flips nslots and shrinks its files in a loop: an
#           ASan+UBSan build of the CLI, 45 runs, no report, exit 0
#   pidns   containers sharing /dev/shm: a process in another pid namespace
#           with the same pid as a host process keeps its own table (the
#           host's keeps its connection) (unshare -p --mount-proc,
#           ns_last_pid picks the pid)
#   pidsweep  one whose pid is free on the host is not swept by a host
#           process's first table, and stat lists it; once its namespace
#           is gone, root's stat removes it
# SEC_CASES="tables log ..." runs a subset (to show each case fails on a
# tree without the fixes: copy this file into it and run it there).
# fs.protected_regular and fs.protected_symlinks (0 is the kernel's
# default; when 1, the kernel itself refuses some of these attacks) are
# reported, not changed.
set -eu
. "$(dirname "$0")/lib.sh"

CLI=$ROOT/erdma-shim
LOCKP=$PROGS/listenlock
CASES=${SEC_CASES:-tables log lock stat statflip pidns pidsweep}
[ "$(id -u)" = 0 ] || { note "not root: cannot play nobody against root"; result "skipped (needs root)"; exit 0; }
[ -x "$CLI" ] || fail "$CLI not built (run make)"
NOBODY=(setpriv --reuid=nobody --regid=nogroup --clear-groups)
NUID=$(id -u nobody)
NS=$(stat -Lc %i /proc/self/ns/pid)
note "fs.protected_regular=$(sysctl -n fs.protected_regular) fs.protected_symlinks=$(sysctl -n fs.protected_symlinks)"

chmod 755 "$TMP"
PUB=$TMP/pub # a sticky world-writable directory, as /tmp is
mkdir -m 1777 "$PUB"
PLANTED=() # nobody's files in /dev/shm, removed at exit
sec_cleanup() {
	local f
	for f in "${PLANTED[@]}"; do rm -f "$f"; done
	_cleanup
}
trap sec_cleanup EXIT

# The victim: prints its pid, waits for a line on the fifo $1, then makes
# a connection (the table is made then) and says ready.
cat >"$TMP/victim.py" <<'EOF'
import os, signal, socket, sys
signal.signal(signal.SIGTERM, lambda *a: sys.exit(0))
print("pid", os.getpid(), flush=True)
if len(sys.argv) > 1:
    with open(sys.argv[1]) as f:
        f.readline()
l = socket.socket()
l.bind(("127.0.0.1", 0))
l.listen()
c = socket.create_connection(l.getsockname())
a, _ = l.accept()
c.sendall(b"ping")
assert a.recv(4) == b"ping"
print("ready", c.getsockname()[1], flush=True)
while True:
    signal.pause()
EOF
chmod 644 "$TMP/victim.py"

# sha256 owner mode size of a file, or "none"
fileid() {
	if [ -e "$1" ] || [ -L "$1" ]; then
		echo "$(sha256sum <"$1" 2>/dev/null | cut -c1-16) $(stat -c '%U %a %s %F' "$1")"
	else
		echo none
	fi
}
# does pid $1 map any shim table?
maps_table() { grep -q ' /dev/shm/erdma-shim\.' "/proc/$1/maps"; }
# no byte of file $1 a control character (but newline) or non-ASCII
clean_ascii() {
	$PY - "$1" <<'EOF'
import sys
d = open(sys.argv[1], "rb").read()
bad = [(i, b) for i, b in enumerate(d) if (b < 0x20 and b != 10) or b >= 0x7f]
if bad:
    print("%d raw bytes, first at %d: %r" % (len(bad), bad[0][0], d[max(0, bad[0][0] - 20):bad[0][0] + 20]))
    sys.exit(1)
EOF
}

start_victim() { # $1 name; sets VPID, VFIFO
	VFIFO=$TMP/$1.fifo
	mkfifo "$VFIFO"
	ERDMA_SHIM_LOG=info bg_start shim "$TMP/$1.out" "$TMP/$1.err" "$PY" "$TMP/victim.py" "$VFIFO"
	VPID=$(wait_line "$TMP/$1.out" '^pid [0-9]+$' 20 "$BG_PID" | cut -d' ' -f2) || fail "$1: victim did not start"
	[ "$VPID" = "$BG_PID" ] || fail "$1: victim pid $VPID is not $BG_PID"
}
go_victim() { # $1 name
	echo go >"$VFIFO"
	wait_line "$TMP/$1.out" '^ready ' 20 "$VPID" >/dev/null || { cat "$TMP/$1.err" >&2; fail "$1: victim did not connect"; }
}

case_tables() {
	local p f n=0 before=()
	# nobody plants, for the victim's pid, a world-writable file under the
	# name the library uses and under the old one (erdma-shim.PID), and
	# names for the next 20 pids
	start_victim t1
	# shellcheck disable=SC2016
	"${NOBODY[@]}" sh -c 'umask 0; for n in "$@"; do printf ATTACKER >"/dev/shm/$n"; done' sh \
		"erdma-shim.$VPID" "erdma-shim.$VPID.$NS.0" \
		$(for p in $(seq $((VPID + 1)) $((VPID + 20))); do echo "erdma-shim.$p.$NS.0 erdma-shim.$p"; done)
	PLANTED+=("/dev/shm/erdma-shim.$VPID" "/dev/shm/erdma-shim.$VPID.$NS.0")
	for p in $(seq $((VPID + 1)) $((VPID + 20))); do PLANTED+=("/dev/shm/erdma-shim.$p.$NS.0" "/dev/shm/erdma-shim.$p"); done
	for f in "/dev/shm/erdma-shim.$VPID" "/dev/shm/erdma-shim.$VPID.$NS.0"; do before+=("$(fileid "$f")"); done
	[ "${before[0]}" = "${before[1]}" ] && [[ ${before[0]} == *" nobody 666 8 regular file" ]] ||
		fail "tables: planting failed: ${before[*]}"
	go_victim t1
	for f in "/dev/shm/erdma-shim.$VPID" "/dev/shm/erdma-shim.$VPID.$NS.0"; do
		[ "$(fileid "$f")" = "${before[n]}" ] || fail "tables: root's program changed nobody's $f: $(fileid "$f") (was ${before[n]})"
		n=$((n + 1))
	done
	! maps_table "$VPID" || fail "tables: root's program maps a table: $(grep /dev/shm/ "/proc/$VPID/maps")"
	grep -q 'info: stats: no shared table: /dev/shm/erdma-shim\..* not a file of ours' "$TMP/t1.err" ||
		{ cat "$TMP/t1.err" >&2; fail "tables: no line saying why there is no shared table"; }
	echo "PASS tables: nobody's world-writable file under root's table name: not mapped, not changed; one info line; the program works"

	# a symlink under the victim's name to nobody's file: not followed
	start_victim t2
	"${NOBODY[@]}" sh -c 'umask 0; printf ATTACKER >"$1"; ln -s "$1" "$2"' sh "$PUB/t2.target" "/dev/shm/erdma-shim.$VPID.$NS.0"
	PLANTED+=("/dev/shm/erdma-shim.$VPID.$NS.0")
	before=("$(fileid "$PUB/t2.target")")
	go_victim t2
	[ "$(fileid "$PUB/t2.target")" = "${before[0]}" ] || fail "tables: the symlink's target changed"
	[ -L "/dev/shm/erdma-shim.$VPID.$NS.0" ] || fail "tables: nobody's symlink was replaced"
	! maps_table "$VPID" || fail "tables: root's program maps a table through nobody's symlink"
	echo "PASS tables: nobody's symlink under root's table name: not followed, target unchanged"

	# a free name (nobody's spray around it): root's own table, 0600
	start_victim t3
	go_victim t3
	f=$(awk '$6 ~ "^/dev/shm/erdma-shim[.]" {print $6; exit}' "/proc/$VPID/maps")
	[ "$f" = "/dev/shm/erdma-shim.$VPID.$NS.0" ] || fail "tables: root's program maps '$f', want /dev/shm/erdma-shim.$VPID.$NS.0"
	[ "$(stat -c '%U %a %h' "$f")" = "root 600 1" ] || fail "tables: root's table is $(stat -c '%U %a %h' "$f") (want root 600 1)"
	echo "PASS tables: a free name: root's table made, owner root, mode 0600"
}

case_log() {
	local out
	printf 'orig\n' >"$TMP/victim.log"
	chmod 644 "$TMP/victim.log"
	"${NOBODY[@]}" ln -s "$TMP/victim.log" "$PUB/shim.log"
	ERDMA_SHIM_LOG=info ERDMA_SHIM_LOG_FILE="$PUB/shim.log" with_shim /bin/true 2>"$TMP/log1.err" || fail "log: /bin/true failed"
	[ "$(cat "$TMP/victim.log")" = orig ] || fail "log: root's log followed nobody's symlink into $TMP/victim.log: $(head -c 200 "$TMP/victim.log")"
	grep -q "ERDMA_SHIM_LOG_FILE: cannot open '$PUB/shim.log' (a symbolic link); logging to stderr" "$TMP/log1.err" ||
		{ cat "$TMP/log1.err" >&2; fail "log: no line saying the symlink was refused"; }
	assert_banner "$TMP/log1.err" "log: the log stays on stderr"
	echo "PASS log: nobody's symlink not followed (target unchanged); one line; log on stderr"

	"${NOBODY[@]}" sh -c 'umask 0; : >"$1"' sh "$PUB/shim2.log"
	ERDMA_SHIM_LOG=info ERDMA_SHIM_LOG_FILE="$PUB/shim2.log" with_shim /bin/true 2>"$TMP/log2.err" || fail "log: /bin/true failed"
	[ ! -s "$PUB/shim2.log" ] || fail "log: root logged into nobody's file: $(head -c 200 "$PUB/shim2.log")"
	grep -q "cannot open '$PUB/shim2.log' (not a regular file of this user)" "$TMP/log2.err" ||
		{ cat "$TMP/log2.err" >&2; fail "log: no line saying nobody's file was refused"; }
	echo "PASS log: nobody's pre-made file not written to; one line"

	ERDMA_SHIM_LOG=info ERDMA_SHIM_LOG_FILE="$PUB/root.%p.log" with_shim /bin/true 2>"$TMP/log3.err" || fail "log: /bin/true failed"
	out=$(ls "$PUB"/root.*.log)
	[ "$(stat -c '%U %a' "$out")" = "root 600" ] || fail "log: root's own log is $(stat -c '%U %a' "$out") (want root 600)"
	grep -Eq "$BANNER_ERE" "$out" || fail "log: no banner in root's own log file"
	echo "PASS log: root's own log file made 0600"
}

case_lock() {
	local lk=/dev/shm/erdma-shim.listen.0.lock out ms
	[ -x "$LOCKP" ] || fail "lock: $LOCKP not built (run make)"
	rm -f "$lk"
	PLANTED+=("$lk")
	"${NOBODY[@]}" ln -s "$PUB/lock.target" "$lk"
	out=$("$LOCKP" 2>"$TMP/lock1.err" || true)
	[ ! -e "$PUB/lock.target" ] || fail "lock: nobody's symlink was followed: $(fileid "$PUB/lock.target")"
	[[ $out == "without "* ]] || fail "lock: '$out' through nobody's symlink"
	grep -q "going on without the listen lock $lk (a symbolic link)" "$TMP/lock1.err" || fail "lock: no line about the symlink"
	echo "PASS lock: nobody's symlink not followed (target not created); one line"

	rm -f "$lk"
	"${NOBODY[@]}" sh -c 'umask 0; : >"$1"' sh "$lk"
	bg_start plain "$TMP/hold.out" "$TMP/hold.err" "${NOBODY[@]}" flock -x "$lk" sh -c 'echo held; exec sleep 60'
	wait_line "$TMP/hold.out" '^held$' 10 "$BG_PID" >/dev/null || fail "lock: nobody could not take its flock"
	out=$("$LOCKP" 2>"$TMP/lock2.err" || true)
	ms=$(echo "$out" | awk '{print $(NF-1)}')
	[[ $out == "without "* ]] && [ "$ms" -lt 500 ] || fail "lock: nobody's held file: '$out' (want without, < 500 ms)"
	grep -q "(not a regular file of this user)" "$TMP/lock2.err" || fail "lock: no line about nobody's file"
	kill "$BG_PID"
	echo "PASS lock: nobody's file held with flock: not waited for (${ms} ms); one line"

	rm -f "$lk"
	bg_start plain "$TMP/sib.out" "$TMP/sib.err" "$LOCKP" 60
	wait_line "$TMP/sib.out" '^locked ' 10 "$BG_PID" >/dev/null || fail "lock: the sibling did not take the lock"
	[ "$(stat -c '%U %a %F' "$lk")" = "root 600 regular empty file" ] || fail "lock: root's lock file is $(stat -c '%U %a %F' "$lk")"
	out=$("$LOCKP" 2>"$TMP/lock3.err" || true)
	ms=$(echo "$out" | awk '{print $(NF-1)}')
	[[ $out == "without "* ]] && [ "$ms" -ge 900 ] && [ "$ms" -lt 3000 ] ||
		fail "lock: a sibling holding it: '$out' (want without, 1 s)"
	grep -q "(held for over 1 s)" "$TMP/lock3.err" || fail "lock: no line about the wait"
	kill "$BG_PID"
	wait_exit "$BG_PID" 10
	out=$("$LOCKP")
	[[ $out == "locked "* ]] || fail "lock: '$out' once the sibling let go"
	echo "PASS lock: root's lock is root's, 0600; a sibling holding it stalls a listen ${ms} ms, not forever"

	# a fork while the lock is held: the child's copy of its fd does not
	# keep it once the holder lets go
	bg_start plain "$TMP/fork.out" "$TMP/fork.err" "$LOCKP" fork
	wait_line "$TMP/fork.out" '^unlocked, held -1$' 10 "$BG_PID" >/dev/null ||
		fail "lock: fork case: $(cat "$TMP/fork.out" "$TMP/fork.err")"
	out=$("$LOCKP" 2>"$TMP/lock4.err" || true)
	ms=$(echo "$out" | awk '{print $(NF-1)}')
	[[ $out == "locked "* ]] && [ "$ms" -lt 500 ] ||
		fail "lock: a fork child's copy of the fd kept the lock: '$out' (want locked, < 500 ms)"
	kill "$BG_PID"
	wait_exit "$BG_PID" 10
	echo "PASS lock: a fork child's copy of the lock's fd does not hold it once the holder lets go (${ms} ms)"
}

cat >"$TMP/nsrun.sh" <<'EOF'
# in a new pid namespace: the next pid is $1; run the victim with it
echo $(($1 - 1)) >/proc/sys/kernel/ns_last_pid
shift
"$@" &
wait
EOF

# nobody's forger: maps tables under its own names (the layout of
# version 1, erdma-shim.PID, and 2, erdma-shim.PID.PIDNS.UID) with forged
# strings; with "flip", flips nslots and truncates the files forever.
cat >"$TMP/forge.py" <<'EOF'
import mmap, os, signal, socket, struct, sys
signal.signal(signal.SIGTERM, lambda *a: sys.exit(0))
pid, uid, ns = os.getpid(), os.geteuid(), os.stat("/proc/self/ns/pid").st_ino
EVIL = b"\x1b[2J\x1b]0;owned\x07\nFAKE\r\x9b31m\x7f\\"
SLOT = struct.Struct("<IiiIQQHH16sHH16s80sQQQQ")
def s(b, n):
    return (b * n)[: n - 1] + b"\0"
def table(v):
    if v == 1:
        h = struct.pack("<IIiIIIQ16s16s32s7Q", 0x53444D45, 1, pid, 1024, SLOT.size, 1, 1,
                        s(EVIL, 16), s(EVIL, 16), s(EVIL, 32), *([7] * 7))
    else:
        h = struct.pack("<IIiIIIQIIQ16s16s32s7Q", 0x53444D45, 2, pid, 1024, SLOT.size, 1, 1,
                        uid, 0, ns, s(EVIL, 16), s(EVIL, 16), s(EVIL, 32), *([7] * 7))
    slots = b""
    for i in range(1024):
        path = 1 + i % 4 if i < 600 else 0
        fam = (2, 10, 0, 77)[i % 4]  # AF_INET, AF_INET6, none, junk
        slots += SLOT.pack(2 * (i % 7 == 3), path, 3 + i, 0, 0, 0, fam, 80, b"\x7f\x1b\n" * 5 + b"\0",
                           fam, 443, b"\xff" * 16, s(EVIL + bytes([i % 256]), 80) if i % 5 else EVIL * 8, 1, 2, 3, 4)
    return h + slots
maps = []
for v, name in ((1, "erdma-shim.%d" % pid), (2, "erdma-shim.%d.%d.%d" % (pid, ns, uid))):
    fd = os.open("/dev/shm/" + name, os.O_RDWR | os.O_CREAT | os.O_TRUNC, 0o600)
    t = table(v)
    os.write(fd, t)
    maps.append((fd, len(t), mmap.mmap(fd, len(t))))
print("ready", pid, flush=True)
if sys.argv[1:] != ["flip"]:
    while True:
        signal.pause()
n = 0
tables = [table(1), table(2)]
while True:
    n += 1
    for (fd, size, m), t in zip(maps, tables):
        os.ftruncate(fd, size)  # (the mapping is written only while whole)
        os.pwrite(fd, t, 0)
        m[12:16] = struct.pack("<I", (1, 1024, 0xFFFFFFFF)[n % 3])
        os.ftruncate(fd, (0, size // 2, size)[n % 3])
EOF
chmod 644 "$TMP/forge.py"

case_stat() {
	local fp fmt i
	bg_start plain "$TMP/forge.out" "$TMP/forge.err" "${NOBODY[@]}" "$PY" "$TMP/forge.py"
	fp=$(wait_line "$TMP/forge.out" '^ready ' 20 "$BG_PID" | cut -d' ' -f2) || { cat "$TMP/forge.err" >&2; fail "stat: the forger did not start"; }
	PLANTED+=("/dev/shm/erdma-shim.$fp" "/dev/shm/erdma-shim.$fp.$NS.$NUID")
	for fmt in "" --json --prometheus; do
		i=0
		"$CLI" stat $fmt >"$TMP/stat$fmt.out" 2>"$TMP/stat$fmt.err" || i=$?
		[ $i = 0 ] || fail "stat $fmt: exit $i with nobody's forged table"
		clean_ascii "$TMP/stat$fmt.out" || fail "stat $fmt: raw control or non-ASCII bytes in the output"
		clean_ascii "$TMP/stat$fmt.err" || fail "stat $fmt: raw control or non-ASCII bytes on stderr"
	done
	# the forged table was shown, escaped
	grep -q "^pid $fp (\\\\x1b\[2J\\\\x1b\]0;owned\\\\x07\\\\x0aFAKE" "$TMP/stat.out" ||
		{ head -3 "$TMP/stat.out" >&2; fail "stat: the forged process is not shown with its name escaped"; }
	$PY - "$TMP/stat--json.out" "$fp" <<'EOF' || fail "stat --json: the forged strings do not round-trip"
import json, sys
procs = [p for p in json.load(open(sys.argv[1])) if p["pid"] == int(sys.argv[2])]
assert len(procs) == 1, procs
p = procs[0]
evil = b"\x1b[2J\x1b]0;owned\x07\nFAKE\r\x9b31m\x7f\\"
assert p["comm"].encode("latin-1") == (evil * 3)[:31], p["comm"]
assert p["connections"], "no slots shown"
for c in p["connections"]:
    assert c["peer"] in ("-", "?") or c["peer"].startswith(("[", "255.")), c
EOF
	$PY "$ROOT/tests/host/prom_parse.py" "$TMP/stat--prometheus.out" >"$TMP/prom.samples" || fail "stat --prometheus: not valid exposition text"
	grep -q "pid=\"$fp\"" "$TMP/prom.samples" || fail "stat --prometheus: the forged process is not shown"
	kill "$BG_PID"
	wait_exit "$BG_PID" 10
	echo "PASS stat: nobody's forged table: text/JSON/Prometheus clean ASCII, exit 0, strings escaped (JSON round-trips)"
}

case_statflip() {
	local fp fmt i f asan=$TMP/erdma-shim-asan
	# the same forger flipping nslots and truncating its files, read by
	# an ASan+UBSan build of the CLI
	cc -std=gnu11 -O1 -g -fsanitize=address,undefined -fno-sanitize-recover=undefined \
		-DSHIM_VERSION=\"sec\" -DSHIM_MULTIARCH=\"\" -I"$ROOT/preload" -I"$ROOT/preload/base" \
		-I"$ROOT/rsocket_glue" -o "$asan" "$ROOT"/preload/cli/*.c "$ROOT/preload/base/config.c" \
		"$ROOT/rsocket_glue/compat.c" -lrdmacm -libverbs -ldl ||
		fail "stat: cannot build the CLI with ASan"
	bg_start plain "$TMP/flip.out" "$TMP/flip.err" "${NOBODY[@]}" "$PY" "$TMP/forge.py" flip
	fp=$(wait_line "$TMP/flip.out" '^ready ' 20 "$BG_PID" | cut -d' ' -f2) || fail "stat: the flipping forger did not start"
	PLANTED+=("/dev/shm/erdma-shim.$fp" "/dev/shm/erdma-shim.$fp.$NS.$NUID")
	for i in $(seq 15); do
		for fmt in "" --json --prometheus; do
			f=0
			ASAN_OPTIONS=detect_leaks=0 "$asan" stat $fmt >"$TMP/flip.stat" 2>"$TMP/flip.stat.err" || f=$?
			[ $f = 0 ] || { tail -20 "$TMP/flip.stat.err" >&2; fail "stat $fmt (ASan) run $i: exit $f against a flipping, shrinking table"; }
			clean_ascii "$TMP/flip.stat" || fail "stat $fmt (ASan) run $i: raw bytes"
		done
	done
	kill "$BG_PID"
	echo "PASS stat: a table flipping nslots and shrinking: 45 ASan runs, exit 0, no report, clean output"
}

case_pidns() {
	local b bport ans
	if ! unshare -p -f --mount-proc true 2>/dev/null; then
		note "pidns: unshare -p -f --mount-proc not possible here: case left out"
		return 0
	fi
	# the host's victim B, and A in a new namespace with B's pid
	start_victim nsb
	b=$VPID
	go_victim nsb
	bport=$(awk '/^ready/{print $2}' "$TMP/nsb.out")
	ERDMA_SHIM_LOG=info bg_start plain "$TMP/nsa.out" "$TMP/nsa.err" unshare -p -f --kill-child --mount-proc \
		sh "$TMP/nsrun.sh" "$b" env LD_PRELOAD="$(shim_preload)" "$PY" "$TMP/victim.py"
	NSA=$BG_PID
	wait_line "$TMP/nsa.out" '^ready ' 20 "$BG_PID" >/dev/null || { cat "$TMP/nsa.err" >&2; fail "pidns: A did not start"; }
	[ "$(awk '/^pid/{print $2}' "$TMP/nsa.out")" = "$b" ] || {
		note "pidns: ns_last_pid did not give A pid $b ($(cat "$TMP/nsa.out")): case left out"
		return 0
	}
	"$CLI" stat "$b" --json >"$TMP/nsb.json" || fail "pidns: stat $b: exit $?"
	$PY - "$TMP/nsb.json" "$b" "$bport" <<'EOF' || fail "pidns: the host process's table lost its connection to the one in another namespace with its pid"
import json, sys
p = json.load(open(sys.argv[1]))
assert len(p) == 1 and p[0]["pid"] == int(sys.argv[2]), p
assert [c for c in p[0]["connections"] if c["local"].endswith(":" + sys.argv[3])], p
EOF
	ans=$(compgen -G "/dev/shm/erdma-shim.$b.*.0" | grep -v "\.$NS\.0$" || true)
	[ -n "$ans" ] || fail "pidns: A (pid $b in its namespace) has no table of its own"
	PLANTED+=($ans) # killed with its namespace: nobody else removes it
	echo "PASS pidns: equal pids in two namespaces: two tables, the host's keeps its connection"
	kill -KILL "$NSA" # (unshare passes SIGTERM on; SIGKILL kills its namespace)
	wait_exit "$NSA" 10
}

case_pidsweep() {
	local b p p2 a2 a2ns
	unshare -p -f --mount-proc true 2>/dev/null || return 0
	b=$$
	# A2 in a new namespace with a pid free on the host; a host process's
	# sweep must leave its table
	# a free pid behind the kernel's pid cursor (not handed out again
	# before the pids wrap)
	p2=
	for p in $(seq $((b - 100)) -1 300); do
		[ -e "/proc/$p" ] || { p2=$p; break; }
	done
	[ -n "$p2" ] || { note "pidns: no free pid below $b: sweep case left out"; return 0; }
	bg_start plain "$TMP/nsa2.out" "$TMP/nsa2.err" unshare -p -f --kill-child --mount-proc \
		sh "$TMP/nsrun.sh" "$p2" env LD_PRELOAD="$(shim_preload)" "$PY" "$TMP/victim.py"
	a2=$BG_PID
	wait_line "$TMP/nsa2.out" '^ready ' 20 "$a2" >/dev/null || fail "pidns: A2 did not start"
	[ "$(awk '/^pid/{print $2}' "$TMP/nsa2.out")" = "$p2" ] || { note "pidns: A2 did not get pid $p2: sweep case left out"; return 0; }
	# (erdma-shim.PID: the name before the namespace was in it)
	a2ns=$(ls -d "/dev/shm/erdma-shim.$p2" "/dev/shm/erdma-shim.$p2".* 2>/dev/null | head -1 || true)
	[ -n "$a2ns" ] || fail "pidns: A2 (pid $p2 in its namespace) made no table"
	PLANTED+=("$a2ns")
	[ ! -e "/proc/$p2" ] || { note "pidns: host pid $p2 taken meanwhile: sweep case left out"; return 0; }
	start_victim nsc # its first table sweeps
	go_victim nsc
	[ -e "$a2ns" ] || fail "pidns: a host process's sweep removed $a2ns, the live table of pid $p2 in another namespace"
	"$CLI" stat --json >"$TMP/nsall.json" || fail "pidns: stat: exit $?"
	$PY - "$TMP/nsall.json" "$p2" <<'EOF' || fail "pidns: stat does not list the other namespace's table"
import json, sys
assert [p for p in json.load(open(sys.argv[1])) if p["pid"] == int(sys.argv[2]) and p["connections"]]
EOF
	echo "PASS pidns: a host process's sweep leaves another namespace's live table (host pid $p2 free); stat lists it"

	# the namespace killed (a container gone): root's stat, in the initial
	# pid namespace, sees no process left in it and removes its table
	[ "$NS" = 4026531836 ] || { note "pidns: not in the initial pid namespace: removal of a dead namespace's table not checked"; return 0; }
	a2ns=${a2ns#/dev/shm/erdma-shim.$p2.}
	a2ns=${a2ns%.0}
	# (unshare passes SIGTERM on and waits; killed, its child, the
	# namespace's init, gets SIGKILL: --kill-child)
	kill -KILL "$a2"
	wait_exit "$a2" 10
	for _ in $(seq 100); do
		stat -Lc %i /proc/[0-9]*/ns/pid 2>/dev/null | grep -qx "$a2ns" || break
		sleep 0.05
	done
	"$CLI" stat >/dev/null 2>"$TMP/nsgone.err" || fail "pidns: stat: exit $?"
	grep -q "removed the stale segment of pid $p2 of pid namespace $a2ns (no process left in it)" "$TMP/nsgone.err" ||
		{ cat "$TMP/nsgone.err" >&2; fail "pidns: stat did not remove the table of the dead namespace $a2ns"; }
	[ ! -e "/dev/shm/erdma-shim.$p2.$a2ns.0" ] || fail "pidns: the dead namespace's table is still there"
	echo "PASS pidns: once its namespace is gone, root's stat removes its table"
}

for c in $CASES; do
	"case_$c"
done
result "local files against user nobody: $CASES"
