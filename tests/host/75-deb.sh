#!/usr/bin/env bash
# runner-timeout: 300
# make deb, the Debian package (issue 19):
#   - builds (or, when build/deb holds the package of a tree with the same
#     content hash, reuses) build/deb/liberdma-shim_VERSION-N_ARCH.deb and
#     leaves nothing in the source tree that git would list
#   - lintian: no error or warning (the .deb and the .changes)
#   - contents: the library in the multiarch directory, the CLI, both man
#     pages, README.Debian on memlock and the eRDMA modes, the copyright;
#     version = the Makefile's; Depends names the package of every library
#     the two binaries link (from ${shlibs:Depends})
#   - installs with dpkg into an isolated root (its own dpkg database, the
#     host's real root untouched), Depends satisfied without --force;
#     `erdma-shim run` from there preloads the installed library and a real
#     program (curl against python3's http.server) works through it; the
#     installed man page renders; then purges cleanly
set -eu
. "$(dirname "$0")/lib.sh"

cd "$ROOT"
version=$(sed -n 's/^VERSION := //p' Makefile)
[ -n "$version" ] || fail "no VERSION in the Makefile"
ma=$(dpkg-architecture -qDEB_HOST_MULTIARCH)
for t in dpkg-buildpackage dh lintian; do
	command -v "$t" >/dev/null || fail "$t missing (make test-deps installs dpkg-dev, debhelper, lintian)"
done
host_before=$(dpkg-query -W -f='${Status}' liberdma-shim 2>/dev/null || echo absent)

ingit=no
if git rev-parse --is-inside-work-tree >/dev/null 2>&1; then
	ingit=yes
	git status --porcelain --untracked-files=all >"$TMP/git.before"
fi
t0=$(date +%s)
make --no-print-directory deb >"$TMP/deb.out" 2>&1 || { cat "$TMP/deb.out" >&2; fail "make deb: exit $?"; }
secs=$(($(date +%s) - t0))
deb=$(tail -n 1 "$TMP/deb.out")
[ "$deb" = "build/deb/liberdma-shim_${version}-1_$(dpkg-architecture -qDEB_HOST_ARCH).deb" ] ||
	{ cat "$TMP/deb.out" >&2; fail "make deb: last line '$deb', want the .deb's path"; }
[ -f "$deb" ] || fail "make deb: $deb missing"
how=built
grep -q 'up to date' "$TMP/deb.out" && how="reused (same tree hash)"
if [ $ingit = yes ]; then
	git status --porcelain --untracked-files=all >"$TMP/git.after"
	same "$TMP/git.before" "$TMP/git.after" "git status before and after make deb"
fi
echo "PASS make deb: $deb, $how in ${secs} s; git status unchanged ($ingit)"
echo "FIGURE: make deb: $how in ${secs} s"

# A second make deb of the same tree reuses the package (the hash covers
# every file's name, mode and content: the reuse is of this tree's build).
make --no-print-directory deb >"$TMP/deb2.out" 2>&1 || fail "second make deb: exit $?"
grep -q 'up to date' "$TMP/deb2.out" || { cat "$TMP/deb2.out" >&2; fail "second make deb of the same tree rebuilt"; }
echo "PASS make deb again: reused ($(sed -n 's/.*sha256 \([0-9a-f]\{12\}\).*/\1/p' "$TMP/deb2.out")...)"

lintian --fail-on error,warning "$deb" build/deb/*.changes >"$TMP/lintian.out" 2>&1 ||
	{ cat "$TMP/lintian.out" >&2; fail "lintian: errors or warnings (above)"; }
echo "PASS lintian --fail-on error,warning: no error or warning (the .deb and the .changes; 2 overrides, with their reasons, in debian/liberdma-shim.lintian-overrides)"

# ---- contents ----
dpkg-deb -c "$deb" | awk '{print $6}' | sed 's|^\./|/|' >"$TMP/contents"
for f in "/usr/lib/$ma/liberdma_shim.so" /usr/bin/erdma-shim /usr/share/man/man1/erdma-shim.1.gz \
	/usr/share/man/man7/liberdma_shim.7.gz /usr/share/doc/liberdma-shim/README.Debian \
	/usr/share/doc/liberdma-shim/copyright; do
	grep -qxF "$f" "$TMP/contents" || fail "the package has no $f"
done
[ "$(dpkg-deb -f "$deb" Version)" = "${version}-1" ] || fail "package version $(dpkg-deb -f "$deb" Version), the Makefile's is $version"
mkdir "$TMP/x"
dpkg-deb -x "$deb" "$TMP/x"
readme=$TMP/x/usr/share/doc/liberdma-shim/README.Debian
grep -q memlock "$readme" && grep -q 'LimitMEMLOCK' "$readme" || fail "README.Debian: nothing on memlock"
grep -q 'compat_mode=1' "$readme" && grep -q 'P+20000' "$readme" || fail "README.Debian: nothing on the eRDMA modes"
grep -q '^License: MIT' "$TMP/x/usr/share/doc/liberdma-shim/copyright" || fail "copyright: not MIT"
depends=$(dpkg-deb -f "$deb" Depends)
n=0
for bin in "$TMP/x/usr/lib/$ma/liberdma_shim.so" "$TMP/x/usr/bin/erdma-shim"; do
	for lib in $(objdump -p "$bin" | awk '$1 == "NEEDED" {print $2}'); do
		path=$(ldconfig -p | awk -v l="$lib" '$1 == l && /x86-64|'"$(uname -m)"'/ {print $NF; exit}')
		[ -n "$path" ] || fail "$lib (NEEDED by $(basename "$bin")) not found on this host"
		pkg=$(dpkg -S "$(readlink -f "$path")" 2>/dev/null | head -n 1 | cut -d: -f1)
		[ -n "$pkg" ] || pkg=$(dpkg -S "$path" | head -n 1 | cut -d: -f1)
		[[ ", $depends" == *", $pkg "* || ", $depends," == *", $pkg,"* ]] ||
			fail "$(basename "$bin") links $lib (package $pkg), which Depends ($depends) does not name"
		n=$((n + 1))
	done
done
echo "PASS contents: library in /usr/lib/$ma, CLI, 2 man pages, README.Debian (memlock, eRDMA modes), MIT; Depends covers the $n NEEDED entries: $depends"

# ---- install into an isolated root ----
R=$TMP/root
mkdir -p "$R/var/lib/dpkg/info" "$R/var/lib/dpkg/updates" "$R/var/lib/dpkg/triggers"
touch "$R/var/lib/dpkg/available"
# Its database holds just the packages Depends names, as the host has them
# (so dpkg checks the declared versions against what is really installed).
: >"$R/var/lib/dpkg/status"
for p in $(echo "$depends" | tr ',' '\n' | sed 's/(.*//; s/|.*//' | tr -d ' '); do
	dpkg-query -s "$p" >>"$R/var/lib/dpkg/status" 2>/dev/null || fail "Depends names $p, not installed on this host"
	echo >>"$R/var/lib/dpkg/status"
	for l in "$p" "$p:$(dpkg-architecture -qDEB_HOST_ARCH)"; do : >"$R/var/lib/dpkg/info/$l.list"; done
done
dpkg --root="$R" --log="$TMP/dpkg.log" -i "$deb" >"$TMP/inst.out" 2>&1 || { cat "$TMP/inst.out" >&2; fail "dpkg --root -i: exit $?"; }
[ "$(dpkg --root="$R" -s liberdma-shim | sed -n 's/^Status: //p')" = "install ok installed" ] || fail "not 'install ok installed' in the isolated root"
CLI=$R/usr/bin/erdma-shim
[ -x "$CLI" ] || fail "$CLI not installed"
[ "$("$CLI" --version)" = "erdma-shim $version" ] || fail "installed erdma-shim --version: $("$CLI" --version)"
got=$("$CLI" run -- env | sed -n 's/^LD_PRELOAD=//p')
[ "$got" = "$R/usr/lib/$ma/liberdma_shim.so" ] || fail "installed erdma-shim run: LD_PRELOAD='$got', want $R/usr/lib/$ma/liberdma_shim.so"
"$CLI" run -- grep -F "$R/usr/lib/$ma/liberdma_shim.so" /proc/self/maps >/dev/null || fail "the installed library is not mapped in a program started by erdma-shim run"
echo "PASS installed in an isolated root (dpkg --root, Depends met, no --force): erdma-shim run preloads $R/usr/lib/$ma/liberdma_shim.so"

# A real program through the installed erdma-shim run: curl from a plain
# python3 http.server, 2 MiB, byte-exact; the shim's exit summary (--stats)
# shows it carried curl's connection (over TCP: this host has no RDMA).
mkdir "$TMP/www"
head -c $((2 << 20)) /dev/urandom >"$TMP/www/blob"
port=$(free_port)
bg_start plain "$TMP/http.out" "$TMP/http.err" "$PY" -m http.server --bind 127.0.0.1 --directory "$TMP/www" "$port"
hpid=$BG_PID
up=
for _ in $(seq 200); do
	if curl -sf -o /dev/null "http://127.0.0.1:$port/"; then up=1; break; fi
	kill -0 "$hpid" 2>/dev/null || break
	sleep 0.05
done
[ -n "$up" ] || { cat "$TMP/http.err" >&2; fail "http.server did not answer within 10 s"; }
timeout 30 "$CLI" run --stats --log info -- curl -sS -f -o "$TMP/got" "http://127.0.0.1:$port/blob" 2>"$TMP/curl.err" ||
	{ cat "$TMP/curl.err" >&2; fail "curl through the installed erdma-shim run: exit $?"; }
cmp -s "$TMP/www/blob" "$TMP/got" || fail "curl through the installed shim: the download differs"
assert_banner "$TMP/curl.err" "curl under the installed shim"
grep -q 'stats: 0 rdma, 1 tcp connections' "$TMP/curl.err" || { cat "$TMP/curl.err" >&2; fail "curl: no exit summary of its 1 connection from the installed shim"; }
MANWIDTH=80 man -l "$R/usr/share/man/man1/erdma-shim.1.gz" 2>/dev/null | grep -q -- '--prometheus' || fail "the installed erdma-shim(1) does not render"
echo "PASS a real program through the installed erdma-shim run: curl, 2 MiB byte-exact, its connection in the shim's summary; man page renders"

# ---- remove ----
dpkg --root="$R" --log="$TMP/dpkg.log" --purge liberdma-shim >"$TMP/purge.out" 2>&1 || { cat "$TMP/purge.out" >&2; fail "dpkg --root --purge: exit $?"; }
left=$(cd "$R" && find . -path ./var -prune -o ! -type d -print)
[ -z "$left" ] || fail "files left after purge: $left"
dpkg --root="$R" -s liberdma-shim >/dev/null 2>&1 && fail "still known to the isolated dpkg after purge"
[ "$(dpkg-query -W -f='${Status}' liberdma-shim 2>/dev/null || echo absent)" = "$host_before" ] || fail "the host's own dpkg database changed"
[ ! -e /usr/bin/erdma-shim ] || [ "$host_before" != absent ] || fail "/usr/bin/erdma-shim on the host"
echo "PASS purged: no file left, the isolated database forgets it, the host's database unchanged"

result "make deb: lintian-clean package ($how), installed in an isolated root, curl through its erdma-shim run, purged"
