#!/usr/bin/env bash
# Bad ERDMA_SHIM_* values: each gives exactly one stderr line, from the
# program's own pid, naming the variable and the value; the program (curl
# against a local http.server; passthru_sock) works as without the shim and
# exits with the same code.  Valid values print nothing.  ERDMA_SHIM_LOG_FILE
# with %p sends the banner to a file named with the pid.
# (The setuid rule -- a setuid program ignores ERDMA_SHIM_* -- is not tested:
# it needs a setuid binary owned by another user, not portable here.)
set -eu
. "$(dirname "$0")/lib.sh"

www=$TMP/www
mkdir -p "$www"
head -c $((1 << 20)) /dev/urandom >"$www/f.bin"
want=$(sha256sum <"$www/f.bin" | cut -d' ' -f1)

# an http.server without the shim: only curl's environment varies
bg_start plain "$TMP/srv.out" "$TMP/srv.err" "$PY" -u -m http.server 0 --bind 127.0.0.1 --directory "$www"
line=$(wait_line "$TMP/srv.out" '^Serving HTTP on .* port [0-9]+ ' 20 "$BG_PID") || fail "http.server did not start"
port=$(sed -E 's/.* port ([0-9]+) .*/\1/' <<<"$line")
URL=http://127.0.0.1:$port

# The client: curl, or (when curl cannot start with this preload at all:
# SANITIZE=1 preloads libasan, which deadlocks curl, shim or not) a Python
# fetcher that exits 22 on an HTTP error as curl -f does.
if shim_starts curl -sS -o /dev/null file:///dev/null; then
	FETCH=(curl -sS -f -o) CLIENT=curl
else
	FETCH=("$PY" -c 'import sys, urllib.request, urllib.error
try:
    data = urllib.request.urlopen(sys.argv[2], timeout=20).read()
except urllib.error.HTTPError as e:
    print("fetch: HTTP error %d" % e.code, file=sys.stderr)
    sys.exit(22)
open(sys.argv[1], "wb").write(data)') CLIENT=python
fi

# curl_case MODE NAME PATH [VAR=VALUE...]: run the client in the background
# (so its pid is known: env execs it), record rc, sha and stderr.
curl_case() {
	local m=$1 name=$2 path=$3
	shift 3
	local out=$TMP/$name
	bg_start "$m" "$out.stdout" "$out.err" "$@" "${FETCH[@]}" "$out.body" "$URL/$path"
	CPID=$BG_PID
	wait_exit "$CPID" 30
	CRC=$WAIT_RC
	CSHA=$( [ -f "$out.body" ] && sha256sum <"$out.body" | cut -d' ' -f1 || echo none)
	CERR=$out.err
}

curl_case plain base f.bin
base_rc=$CRC base_sha=$CSHA
[ "$base_rc" = 0 ] && [ "$base_sha" = "$want" ] || fail "baseline curl: rc=$base_rc"
curl_case plain base404 missing
base404_rc=$CRC
[ "$base404_rc" = 22 ] || fail "baseline 404: rc=$base404_rc"
base404_err=$(cat "$CERR")

long=$(printf 'x%.0s' $(seq 100))
bad=(
	"ERDMA_SHIM=bogus"
	"ERDMA_SHIM_LOG=loud"
	"ERDMA_SHIM_PORT_OFFSET=70000"
	"ERDMA_SHIM_CONNECT_TIMEOUT_MS=-5"
	"ERDMA_SHIM_SNDBUF=12Q"
	"ERDMA_SHIM_ALLOW=10.0.0.0/33"
	"ERDMA_SHIM_DENY=::1/129"
	"ERDMA_SHIM_ACCEPT_FROM=10.0.0.1:0-70000"
	"ERDMA_SHIM_STATS=yes"
	"ERDMA_SHIM=$long"
)
# The one line must come from the program itself and show VAR='VALUE' (a
# value longer than 64 bytes is shown cut, followed by "...").
check_line() { # ERRFILE PID VAR VALUE WHAT
	local err=$1 pid=$2 var=$3 val=$4 what=$5 lines
	lines=$(grep -c '^liberdma_shim\[' "$err" || true)
	[ "$lines" = 1 ] || { cat "$err" >&2; fail "$what: $lines shim lines on stderr, want exactly 1"; }
	local l
	l=$(grep '^liberdma_shim\[' "$err")
	[ "${#val}" -gt 64 ] && val="${val:0:64}..."
	grep -qF "liberdma_shim[$pid] error: " <<<"$l" || fail "$what: line is not an error from pid $pid: $l"
	grep -qF "$var='$val'" <<<"$l" || fail "$what: line does not name $var='$val': $l"
}

n=0
for kv in "${bad[@]}"; do
	var=${kv%%=*} val=${kv#*=}
	n=$((n + 1))
	curl_case shim "bad$n" f.bin "$kv"
	[ "$CRC" = "$base_rc" ] || fail "$var: $CLIENT exit $CRC, without the shim $base_rc"
	[ "$CSHA" = "$base_sha" ] || fail "$var: download differs"
	check_line "$CERR" "$CPID" "$var" "$val" "$var"
	[ "$(wc -l <"$CERR")" = 1 ] || { cat "$CERR" >&2; fail "$var: more than the one line on stderr"; }
	# a failing download keeps its exit code and curl's own message
	curl_case shim "bad$n.404" missing "$kv"
	[ "$CRC" = "$base404_rc" ] || fail "$var: $CLIENT exit $CRC on a 404, without the shim $base404_rc"
	check_line "$CERR" "$CPID" "$var" "$val" "$var (404)"
	[ "$(grep -v '^liberdma_shim\[' "$CERR")" = "$base404_err" ] || fail "$var: the client's own stderr changed"
	note "$var='${val:0:20}': 1 line, curl rc $base_rc/$base404_rc unchanged"
done
result "bad values: ${#bad[@]} variables, each exactly one stderr line naming it; $CLIENT rc and sha256 unchanged (0 and 22)"

# Two bad values: two lines, one per variable.
curl_case shim two f.bin ERDMA_SHIM=bogus ERDMA_SHIM_SNDBUF=12Q
[ "$CRC" = 0 ] && [ "$CSHA" = "$want" ] || fail "two bad values: $CLIENT rc=$CRC"
[ "$(grep -c '^liberdma_shim\[' "$CERR")" = 2 ] && grep -qF "ERDMA_SHIM='bogus'" "$CERR" &&
	grep -qF "ERDMA_SHIM_SNDBUF='12Q'" "$CERR" || { cat "$CERR" >&2; fail "two bad values: want one line each"; }

# An invalid value turns the shim off for the process (seen in the banner).
curl_case shim offbanner f.bin ERDMA_SHIM_PORT_OFFSET=70000 ERDMA_SHIM_LOG=info
[ "$CRC" = 0 ] && [ "$CSHA" = "$want" ] || fail "invalid+info: $CLIENT rc=$CRC"
grep -E -e "$BANNER_ERE" "$CERR" | grep -q 'mode=off' || { cat "$CERR" >&2; fail "invalid value: banner does not say mode=off"; }
[ "$(grep -c ' error: ' "$CERR")" = 1 ] || fail "invalid+info: want one error line"

# An unknown ERDMA_SHIM_ name is reported once (not silently ignored).
curl_case shim typo f.bin ERDMA_SHIM_LOGG=info
[ "$CRC" = 0 ] && [ "$CSHA" = "$want" ] || fail "typo: $CLIENT rc=$CRC"
[ "$(grep -c '^liberdma_shim\[' "$CERR")" = 1 ] && grep -q 'ERDMA_SHIM_LOGG' "$CERR" ||
	{ cat "$CERR" >&2; fail "unknown variable: want one line naming it"; }

# Valid values: not a word on stderr.
good=(ERDMA_SHIM=off ERDMA_SHIM=auto ERDMA_SHIM_LOG=warn ERDMA_SHIM_PORT_OFFSET=65535
	ERDMA_SHIM_CONNECT_TIMEOUT_MS=250 ERDMA_SHIM_SNDBUF=64K ERDMA_SHIM_RCVBUF=0
	"ERDMA_SHIM_ALLOW=10.0.0.0/8:1-100,[fd00::]/8" ERDMA_SHIM_DENY=192.168.0.0/16 ERDMA_SHIM_STATS=0
	"ERDMA_SHIM_ACCEPT_FROM=10.0.0.0/8:443,[fd00::]/8")
curl_case shim good f.bin "${good[@]}"
[ "$CRC" = 0 ] && [ "$CSHA" = "$want" ] || fail "valid values: $CLIENT rc=$CRC"
[ ! -s "$CERR" ] || { cat "$CERR" >&2; fail "valid values printed something on stderr"; }
result "two bad values -> two lines; invalid value -> banner mode=off; unknown name -> one line; ${#good[@]} valid values -> silent"

# ERDMA_SHIM_LOG_FILE with %p: the banner goes to a file named with the pid.
curl_case shim logfile f.bin ERDMA_SHIM_LOG=info "ERDMA_SHIM_LOG_FILE=$TMP/x.%p.log"
[ "$CRC" = 0 ] && [ "$CSHA" = "$want" ] || fail "log file: $CLIENT rc=$CRC"
[ -f "$TMP/x.$CPID.log" ] || { ls "$TMP" >&2; fail "no log file $TMP/x.$CPID.log"; }
grep -E -e "$BANNER_ERE" "$TMP/x.$CPID.log" | grep -qF "liberdma_shim[$CPID]" ||
	fail "log file has no banner from pid $CPID: $(cat "$TMP/x.$CPID.log")"
[ "$(banner_count "$CERR")" = 0 ] || fail "banner on stderr although ERDMA_SHIM_LOG_FILE is set"
# an unwritable log file: one warning on stderr, the program still works
curl_case shim logfile2 f.bin ERDMA_SHIM_LOG_FILE=/nonexistent-dir/x.log
[ "$CRC" = 0 ] && [ "$CSHA" = "$want" ] || fail "unwritable log file: $CLIENT rc=$CRC"
[ "$(grep -c '^liberdma_shim\[' "$CERR")" = 1 ] && grep -q 'ERDMA_SHIM_LOG_FILE' "$CERR" ||
	{ cat "$CERR" >&2; fail "unwritable log file: want one line naming ERDMA_SHIM_LOG_FILE"; }
result "ERDMA_SHIM_LOG_FILE=.../x.%p.log: banner in x.<pid>.log, none on stderr; unwritable path -> one warning"

# A C program under a bad value: same transcript and exit code as without.
P=$PROGS/passthru_sock
[ -x "$P" ] || fail "$P not built (run make)"
rc=0
run_mode plain 90 "$P" >"$TMP/c.plain.out" 2>"$TMP/c.plain.err" </dev/null || rc=$?
echo "rc=$rc" >>"$TMP/c.plain.out"
rc=0
ERDMA_SHIM=bogus run_mode shim 90 "$P" >"$TMP/c.shim.out" 2>"$TMP/c.shim.err" </dev/null || rc=$?
echo "rc=$rc" >>"$TMP/c.shim.out"
same "$TMP/c.plain.out" "$TMP/c.shim.out" "passthru_sock under ERDMA_SHIM=bogus"
[ "$(grep -c '^liberdma_shim\[' "$TMP/c.shim.err")" = 1 ] || { cat "$TMP/c.shim.err" >&2; fail "passthru_sock: want exactly one shim line"; }
result "passthru_sock under ERDMA_SHIM=bogus: transcript and $(tail -n1 "$TMP/c.shim.out") as without the shim, one stderr line"

# A forged LIBERDMA_SHIM_TWINS (the twin reservations a fork child passes to
# its exec'd image, preload/handover.c): entries naming the program's own
# fds that are not a reservation's rdma_cm file (/dev/null, a character
# device; a pipe's two ends; the listener itself) with the listener's
# inode, and malformed ones, put there by a parent without the shim (a
# shimmed parent's exec drops a stale one: preload/exec.c).  Every fd stays
# open and as it was (its close-on-exec flag too), the listener works as
# the kernel's, the program does not see the variable, and the shim says
# nothing.  (Here, without rdma_cm, no fd can pass the check;
# the bed's tests/rdma/47-forkconn.sh, supervise, has the real ones.)
twins_case() {
	local prog='import os, socket
fl = [os.get_inheritable(fd) for fd in (25, 26, 27, 28)]
os.write(26, b"x")
s = socket.socket(fileno=27)
s.listen(4)
c = socket.create_connection(s.getsockname()[:2])
a, _ = s.accept()
c.sendall(b"ping")
print(fl, os.read(25, 1), os.fstat(28).st_rdev == os.stat("/dev/null").st_rdev, a.recv(4),
      "LIBERDMA_SHIM_TWINS" in os.environ)'
	rc=0
	"$PY" -c 'import os, socket, subprocess, sys
l = socket.socket()
l.bind(("127.0.0.1", 0))
l.listen(4)
os.dup2(l.fileno(), 27)
r, w = os.pipe()
os.dup2(r, 25)
os.dup2(w, 26)
os.dup2(os.open("/dev/null", os.O_RDONLY), 28)
ino = os.fstat(27).st_ino
env = dict(os.environ)
if sys.argv[1] == "forged":
    env["LIBERDMA_SHIM_TWINS"] = ("%d,28,1;%d,26,2;%d,25,3;;x,1,2;%d,27,4;"
        "1,99999999999999999999,1;%d,28" % (ino, ino, ino, ino, ino))
    env["LD_PRELOAD"] = os.environ["CHILD_PRELOAD"]
sys.exit(subprocess.run(sys.argv[2:], env=env, pass_fds=(25, 26, 27, 28)).returncode)' \
		"$1" "$PY" -c "$prog" || rc=$?
	echo "rc=$rc"
}
twins_case plain >"$TMP/tw.plain.out" 2>"$TMP/tw.plain.err"
CHILD_PRELOAD="$(shim_preload)" twins_case forged >"$TMP/tw.shim.out" 2>"$TMP/tw.shim.err"
same "$TMP/tw.plain.out" "$TMP/tw.shim.out" "forged LIBERDMA_SHIM_TWINS"
grep -qx "\[True, True, True, True\] b'x' True b'ping' False" "$TMP/tw.shim.out" || { cat "$TMP/tw.shim.out" "$TMP/tw.shim.err" >&2; fail "forged LIBERDMA_SHIM_TWINS: $(head -n 1 "$TMP/tw.shim.out")"; }
[ ! -s "$TMP/tw.shim.err" ] || { cat "$TMP/tw.shim.err" >&2; fail "forged LIBERDMA_SHIM_TWINS: the shim printed something"; }
result "forged LIBERDMA_SHIM_TWINS naming the program's own fds (/dev/null, a pipe, the listener) and malformed entries: every fd as it was, the listener the kernel's, nothing said"
