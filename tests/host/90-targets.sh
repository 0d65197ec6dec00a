#!/usr/bin/env bash
# runner-timeout: 600
# Every command README names works from a clean tree on its own (issue 20):
# each make target builds what it needs.  Each target below runs alone in a
# fresh copy of the tree's sources (git ls-files: tracked and untracked,
# not ignored, files as they are in the work tree; no build products), in a
# fresh-user environment (env -i: no MAKEFLAGS, SANITIZE, CFLAGS, SHIM*, ...
# of the suite that runs this test; CI kept, so -Werror as in CI), and must
# exit 0 with its artefact or line:
#   make                       library, CLI, benches, test programs (and no
#                              tsan/asan copy: plain make stays lean);
#                              every file bench/demo uses; without gRPC
#                              and cmocka (make -n PKG_CONFIG=false) all
#                              but grpc_raw and the unit tests, and a line
#                              naming each left out
#   make tsan / make asan      build/{tsan,asan}/liberdma_shim.so, linked
#                              with libtsan / libasan
#   make check-unit            "unit: N passed, 0 failed" (fuzz run cut to 2 s)
#   make fuzz                  its RESULT lines (ERDMA_FUZZ_SECONDS=2)
#   make install PREFIX=/usr DESTDIR=D
#                              library, CLI, both man pages; the installed
#                              CLI's `run` preloads the installed library;
#                              make uninstall (same D) removes exactly those
#   make check-rdma-prereqs    every file tests/rdma/ uses ($ROOT/..., the
#                              test programs) is there
#   make check-host            "host: N passed, 0 failed" (this test, nested
#                              in it, only says it is nested)
# The targets that use the soft-RoCE VM -- check-rdma, soak, demo(-full), test --
# are NOT run here: the host suite runs before the VM suite in make test,
# and a nested VM would wait on the machine's VM lock (tests/vm/vm-run).
# Instead, in a copy never built, `make -n` of each shows it builds the
# library (and, for check-rdma and soak, the tsan copy) before it starts
# the VM, and check-rdma-prereqs above shows that build is complete.
# In the copy `make` built: erdma-shim --help/--version and each
# subcommand's harmless form with its documented exit code on a host
# without RDMA (doctor 1, probe of a closed port 2, stat 0, stat of a pid
# without the shim 1, run -- env), bench/demo --help, and the two-host
# commands of README and of `make demo`'s output (stream, pingpong,
# grpc_raw, under `erdma-shim run`) over loopback, where they use TCP.
#
# Time: about 2 minutes on 2 cores: the builds run two at a time (make is
# serial, so two use both cores; they share nothing), check-host then runs
# alone (its tests have time bounds).  Above the host suite's 180 s limit
# on a busy machine, hence its own limit (runner-timeout above, 600 s).
set -eu
. "$(dirname "$0")/lib.sh"

if [ "${ERDMA_TARGETS_NESTED:-0}" = 1 ]; then
	# make check-host inside one of the copies below: no copies of copies
	result "nested in 90-targets' own make check-host: not repeated"
	exit 0
fi
[ ! -e /dev/infiniband/rdma_cm ] || fail "this host has /dev/infiniband/rdma_cm: the host suite expects no RDMA"
# (the copies' check-host runs 81-setuid, whose setuid-nobody copy must
# reach the copy's library as nobody)
chmod 755 "$TMP"
for tool in cpio readelf; do
	command -v $tool >/dev/null || fail "$tool not found (make test-deps)"
done

# fresh DIR: a copy of the tree's sources, without build products
fresh() {
	mkdir -p "$1"
	if git -C "$ROOT" rev-parse --is-inside-work-tree >/dev/null 2>&1; then
		(cd "$ROOT" && git ls-files -z -co --exclude-standard |
			while IFS= read -r -d '' f; do [ -e "$f" ] && printf '%s\0' "$f"; done |
			cpio -pdm0 --quiet "$1")
	else
		tar -C "$ROOT" --exclude=./build --exclude=./liberdma_shim.so --exclude=./erdma-shim -cf - . |
			tar -C "$1" -xf -
	fi
	[ -f "$1/Makefile" ] && [ ! -e "$1/build" ] && [ ! -e "$1/liberdma_shim.so" ] ||
		fail "fresh copy $1: not a clean tree"
}

# A new user's environment: nothing of this suite's (MAKEFLAGS, SANITIZE,
# SHIM, SHIM_PRELOAD, ERDMA_RESULTS, ASAN_OPTIONS, ...).
clean_env() {
	env -i PATH="$PATH" HOME="${HOME:-/root}" LC_ALL=C TMPDIR="${TMPDIR:-/tmp}" \
		${CI:+CI="$CI"} ERDMA_TARGETS_NESTED=1 "$@"
}

# job NAME VAR=VALUE... -- CMD...: in a fresh copy $TMP/NAME/src, run CMD
# (env VAR=VALUE added); output in $TMP/NAME.log, status in $TMP/NAME.rc,
# seconds in $TMP/NAME.secs.
job() {
	local name=$1 d=$TMP/$1 vars=() t0
	shift
	while [ "$1" != -- ]; do vars+=("$1"); shift; done
	shift
	fresh "$d/src"
	t0=$(date +%s.%N)
	(
		cd "$d/src"
		rc=0
		clean_env ${vars[@]+"${vars[@]}"} "$@" >"$d.log" 2>&1 </dev/null || rc=$?
		echo $rc >"$d.rc"
		awk -v s="$t0" -v e="$(date +%s.%N)" 'BEGIN { printf "%.0f\n", e - s }' >"$d.secs"
	)
}
# ok NAME: the job exited 0 (else fail with its log's end)
ok() {
	local rc
	rc=$(cat "$TMP/$1.rc" 2>/dev/null || echo none)
	[ "$rc" = 0 ] || {
		# a nested suite's failure first (its tail is the summary)
		grep -A 15 '^FAIL' "$TMP/$1.log" | head -n 60 >&2
		tail -n 30 "$TMP/$1.log" >&2
		fail "$1: exit $rc from a clean copy (log $TMP/$1.log, kept: KEEP_TMP=1)"
	}
}
has() { # NAME FILE...: the files exist in job NAME's copy
	local n=$1 f
	shift
	for f in "$@"; do
		[ -e "$TMP/$n/src/$f" ] || fail "$n: $f was not built"
	done
}
needs_lib() { # NAME FILE LIBNAME: FILE is linked with LIBNAME
	readelf -d "$TMP/$1/src/$2" | grep -q "NEEDED.*\[$3" || fail "$1: $2 is not linked with $3"
}

# ---- the builds, two at a time ---------------------------------------------------
T0=$SECONDS
DEST=$TMP/install/dest
jobs_list=(
	"prereqs -- make check-rdma-prereqs"
	"all -- make"
	"unit ERDMA_FUZZ_SECONDS=2 ERDMA_LOGDIR=build/test-logs -- make check-unit"
	"asan -- make asan"
	"install -- make install PREFIX=/usr DESTDIR=$DEST"
	"tsan -- make tsan"
	"fuzz ERDMA_FUZZ_SECONDS=2 -- make fuzz"
)
running=0
for j in "${jobs_list[@]}"; do
	# shellcheck disable=SC2086 # split on purpose: no blanks inside the words
	job $j &
	running=$((running + 1))
	if [ $running -ge 2 ]; then
		wait -n || true
		running=$((running - 1))
	fi
done
wait
T_BUILDS=$((SECONDS - T0))

# make
ok all
has all liberdma_shim.so erdma-shim build/bench/grpc_raw
for src in "$ROOT"/bench/*.c "$ROOT"/tests/progs/*.c "$ROOT"/tests/unit/test_*.c; do
	rel=${src#"$ROOT"/}
	case $rel in
	bench/*) has all "build/bench/$(basename "$rel" .c)" ;;
	tests/*) has all "build/${rel%.c}" ;;
	esac
done
[ ! -e "$TMP/all/src/build/tsan" ] && [ ! -e "$TMP/all/src/build/asan" ] ||
	fail "plain make built a sanitizer copy: it must stay the quick build"
# everything bench/demo (make demo) uses, built by make alone
for f in $(grep -ohE '\$\{?ROOT\}?/[A-Za-z0-9_./-]+' "$ROOT/bench/demo" "$ROOT/bench/demo-inner" | sed -E 's/^\$\{?ROOT\}?\///' | sort -u); do
	has all "$f"
done
note "make: $(cat "$TMP/all.secs") s"

# make tsan / make asan
ok tsan
has tsan build/tsan/liberdma_shim.so
needs_lib tsan build/tsan/liberdma_shim.so libtsan
ok asan
has asan build/asan/liberdma_shim.so
needs_lib asan build/asan/liberdma_shim.so libasan

# make check-unit
ok unit
line=$(grep -E '^unit: [0-9]+ passed, [0-9]+ failed$' "$TMP/unit.log" | tail -n 1)
case $line in
"unit: "*" passed, 0 failed") ;;
*) fail "check-unit: no 'unit: N passed, 0 failed' line (got '$line')" ;;
esac
n_unit=$(echo "$line" | awk '{ print $2 }')
want=$(ls "$ROOT"/tests/unit/test_*.c "$ROOT"/tests/unit/*.sh | wc -l)
[ "$n_unit" = "$want" ] || fail "check-unit ran $n_unit tests, tests/unit/ has $want (make test's unit phase runs them all)"

# make fuzz
ok fuzz
grep -q '^RESULT: fuzzed the config parser for 2s' "$TMP/fuzz.log" || fail "make fuzz: no RESULT line"
grep -q '^RESULT: fuzzed the stat table reader for 2s' "$TMP/fuzz.log" || fail "make fuzz: no RESULT line for the stat table reader"

# make install PREFIX=/usr DESTDIR=...
ok install
for f in usr/lib/liberdma_shim.so usr/bin/erdma-shim usr/share/man/man1/erdma-shim.1 usr/share/man/man7/liberdma_shim.7; do
	[ -s "$DEST/$f" ] || fail "make install: no $DEST/$f"
done
[ -x "$DEST/usr/bin/erdma-shim" ] || fail "make install: erdma-shim not executable"
"$DEST/usr/bin/erdma-shim" run -- env 2>/dev/null | grep -qxF "LD_PRELOAD=$DEST/usr/lib/liberdma_shim.so" ||
	fail "installed erdma-shim run does not preload the installed library"
# make uninstall, same PREFIX and DESTDIR: every file install put there
# goes, nothing else is touched (a file of someone else's stays)
mkdir -p "$DEST/usr/bin" && echo other >"$DEST/usr/bin/other-tool"
(cd "$TMP/install/src" && clean_env make uninstall PREFIX=/usr DESTDIR="$DEST") >"$TMP/uninstall.log" 2>&1 ||
	{ cat "$TMP/uninstall.log" >&2; fail "make uninstall: exit $?"; }
left=$(cd "$DEST" && find . -type f | sort | tr '\n' ' ')
[ "$left" = "./usr/bin/other-tool " ] || fail "make uninstall left or removed other files: '$left'"

# make check-rdma-prereqs: every file the RDMA suite uses is there
ok prereqs
has prereqs build/tsan/liberdma_shim.so
n_files=0
for f in $(grep -ohE '\$\{?ROOT\}?/[A-Za-z0-9_./-]+' "$ROOT"/tests/rdma/*.sh "$ROOT"/tests/rdma/lib/* | sed -E 's/^\$\{?ROOT\}?\///' | sort -u) \
	$(grep -ohE '\$\{?(PROGS|TESTBIN)\}?/[A-Za-z0-9_]+' "$ROOT"/tests/rdma/*.sh "$ROOT"/tests/rdma/lib/* | sed -E 's/^\$\{?[A-Z]+\}?\//build\/tests\/progs\//' | sort -u); do
	has prereqs "$f"
	n_files=$((n_files + 1))
done
[ "$n_files" -ge 10 ] || fail "found only $n_files files named by tests/rdma/: the pattern is stale"

# ---- make check-host, alone (nested, this test only says so) ----------------
T1=$SECONDS
job host ERDMA_LOGDIR=build/test-logs -- make check-host
ok host
grep -Eq '^host: [0-9]+ passed, 0 failed$' "$TMP/host.log" || fail "check-host: no 'host: N passed, 0 failed' line"
grep -q 'nested in 90-targets' "$TMP/host.log" || fail "check-host: this test did not see it was nested"
T_HOST=$((SECONDS - T1))

# ---- the VM targets: dry runs in a copy never built ---------------------------
D=$TMP/dry/src
fresh "$D"
dry() { (cd "$D" && clean_env make -n "$@" 2>&1); }
out=$(dry check-rdma)
grep -q -- '-o liberdma_shim.so' <<<"$out" || fail "make -n check-rdma: does not build the library"
grep -q -- '-o build/tsan/liberdma_shim.so' <<<"$out" || fail "make -n check-rdma: does not build the tsan copy (tests/rdma/72-tsan.sh needs it)"
tail -n 1 <<<"$out" | grep -q 'tests/vm/check-rdma' || fail "make -n check-rdma: does not end in tests/vm/check-rdma"
out=$(dry check-rdma SANITIZE=1)
! grep -q -- '-o build/tsan/' <<<"$out" || fail "make -n check-rdma SANITIZE=1 builds the tsan copy its pass leaves out"
out=$(dry check-rdma RDMA_TESTS=tests/rdma/00-bed.sh)
tail -n 1 <<<"$out" | grep -q 'tests/vm/check-rdma tests/rdma/00-bed.sh' || fail "make -n check-rdma RDMA_TESTS=...: not passed on"
out=$(dry soak SOAK_SECONDS=10)
grep -q -- '-o build/tsan/liberdma_shim.so' <<<"$out" && grep -q -- '-o liberdma_shim.so' <<<"$out" ||
	fail "make -n soak: does not build what check-rdma builds"
grep -q 'ERDMA_SOAK_SECONDS=10 tests/vm/check-rdma' <<<"$out" || fail "make -n soak: no check-rdma run"
# make demo: the headline table only (one round, 64K/1M streams, 1/4K
# ping-pong, 1M gRPC, no idle row, no siw pass), DEMO_FLAGS after its own
out=$(dry demo DEMO_FLAGS="--rounds 2")
grep -q -- '-o liberdma_shim.so' <<<"$out" || fail "make -n demo: does not build the library"
grep -qx 'bench/demo --quick --stream-sizes "64K 1M" --pp-sizes "1 4K" --grpc-sizes 1M --idle-conns "" --rounds 2' <<<"$out" ||
	fail "make -n demo: not the headline run with DEMO_FLAGS after: $(grep 'bench/demo' <<<"$out")"
! grep -q 'link siw' <<<"$out" || fail "make -n demo: runs the siw pass (make demo-full's)"
out=$(dry demo-full DEMO_FLAGS=--quick)
grep -q -- '-o liberdma_shim.so' <<<"$out" || fail "make -n demo-full: does not build the library"
grep -qx 'bench/demo --quick' <<<"$out" || fail "make -n demo-full DEMO_FLAGS=--quick: not passed on"
# in the VM bed, then the same over soft-iWARP, the flags passed on too
grep -q 'bench/demo --no-build --link siw .* --quick;' <<<"$out" || fail "make -n demo-full: no siw run, or DEMO_FLAGS not passed on to it"
out=$(dry test)
grep -q -- '-o liberdma_shim.so' <<<"$out" && grep -q 'tests/run-all' <<<"$out" || fail "make -n test: no build, or no tests/run-all"
# make deps installs a build's packages only (README sends users to it on
# real hosts); make test installs the bed's first (make test-deps), so CI's
# fresh machine (.ci/run: make test) gets them
out=$(dry deps)
grep -q 'librdmacm-dev' <<<"$out" || fail "make -n deps: does not install librdmacm-dev"
! grep -qE 'qemu|linux-image|linux-source|nginx|node-exporter|valgrind|clang' <<<"$out" ||
	fail "make -n deps: installs test bed packages: $(grep -oE 'qemu[^ ]*|linux-image[^ ]*|nginx[^ ]*|valgrind|clang[^ ]*' <<<"$out" | sort -u | tr '\n' ' ')"
out=$(dry test)
grep -q 'qemu-system-x86' <<<"$out" && grep -q 'build-siw --packages' <<<"$out" ||
	fail "make -n test: does not install the bed's packages (make test-deps)"
# A plain make without gRPC or cmocka (PKG_CONFIG=false: neither is found)
# builds the library, the CLI, the test programs and the other benches,
# and says in one line each what it left out.
out=$(dry PKG_CONFIG=false)
for t in liberdma_shim.so erdma-shim build/tests/progs/xfer build/bench/stream; do
	grep -q -- "-o $t\b" <<<"$out" || fail "make -n without gRPC/cmocka: does not build $t"
done
! grep -qE -- '-lcmocka|-lgrpc|-o build/bench/grpc_raw' <<<"$out" ||
	fail "make -n without gRPC/cmocka: still builds what needs them"
grep -q 'unit tests not built: no cmocka' <<<"$out" && grep -q 'bench/grpc_raw not built: no gRPC' <<<"$out" ||
	fail "make -n without gRPC/cmocka: no line saying what it left out"
[ ! -e "$D/build" ] || fail "make -n built something"

# ---- erdma-shim and the two-host commands, in the copy make built -------------
A=$TMP/all/src
CLI=$A/erdma-shim
"$CLI" --help >"$TMP/help.out" || fail "erdma-shim --help: exit $?"
for sub in run doctor probe stat; do
	grep -q "erdma-shim $sub" "$TMP/help.out" || fail "erdma-shim --help does not list $sub"
done
version=$(sed -n 's/^VERSION := //p' "$ROOT/Makefile")
[ "$("$CLI" --version)" = "erdma-shim $version" ] || fail "erdma-shim --version: not $version"
rc=0
"$CLI" doctor >/dev/null 2>&1 || rc=$?
[ $rc = 1 ] || fail "erdma-shim doctor without RDMA: exit $rc (want 1)"
rc=0
"$CLI" doctor --json 2>/dev/null | $PY -m json.tool >/dev/null || rc=$?
[ $rc = 0 ] || fail "erdma-shim doctor --json: not JSON"
port=$(free_port)
rc=0
"$CLI" probe "127.0.0.1:$port" --timeout 2000 >/dev/null 2>&1 || rc=$?
[ $rc = 2 ] || fail "erdma-shim probe of a closed port: exit $rc (want 2)"
rc=0
"$CLI" stat >/dev/null 2>&1 || rc=$?
[ $rc = 0 ] || fail "erdma-shim stat: exit $rc (want 0)"
rc=0
"$CLI" stat $$ >/dev/null 2>&1 || rc=$?
[ $rc = 1 ] || fail "erdma-shim stat of a pid without the shim: exit $rc (want 1)"
"$CLI" run -- env 2>/dev/null | grep -qxF "LD_PRELOAD=$A/liberdma_shim.so" || fail "erdma-shim run: no LD_PRELOAD of the built library"
(cd "$A" && bench/demo --help >/dev/null) || fail "bench/demo --help: exit $?"

# The two-host commands (README's, and those `make demo` prints), both ends
# here on loopback, where the shim uses TCP (loopback is not in the default
# ERDMA_SHIM_ALLOW, and there is no RDMA device); short durations.
# rstream (native ceiling) needs an RDMA device: not run.
twohost() { # NAME SERVER-ARGS... -- CLIENT-ARGS... (after the server's port)
	local name=$1 sargs=() p
	shift
	while [ "$1" != -- ]; do sargs+=("$1"); shift; done
	shift
	bg_start plain "$TMP/$name.s" "$TMP/$name.s.err" "$CLI" run -- "${sargs[@]}"
	local spid=$BG_PID
	p=$(wait_line "$TMP/$name.s" '^ready [0-9]+' 20 "$spid" | awk '{ print $2 }') ||
		fail "$name server: no ready line: $(tail -n 3 "$TMP/$name.s.err")"
	rc=0
	without_shim timeout 60 "$CLI" run -- "$@" "$p" >"$TMP/$name.c" 2>&1 || rc=$?
	[ $rc = 0 ] || { tail -n 5 "$TMP/$name.c" >&2; fail "$name client: exit $rc"; }
	grep -q '^{"bench":' "$TMP/$name.c" && ! grep -q '"ok":false' "$TMP/$name.c" ||
		fail "$name client: no JSON summary, or not ok"
	kill "$spid" 2>/dev/null || true
	wait_exit "$spid" 10
}
twohost stream "$A/build/bench/stream" server 127.0.0.1 0 --json -- \
	sh -c 'exec "$0" client 127.0.0.1 "$1" --msg-size 64K --seconds 1 --json' "$A/build/bench/stream"
twohost pingpong "$A/build/bench/pingpong" server 127.0.0.1 0 --json -- \
	sh -c 'exec "$0" client 127.0.0.1 "$1" --size 1 --seconds 1 --json' "$A/build/bench/pingpong"
twohost grpc "$A/build/bench/grpc_raw" --job_type server --target_ip 127.0.0.1 --port 0 --server_threads 4 -- \
	sh -c 'exec "$0" --job_type client --target_ip 127.0.0.1 --message_size 64K --client_channels 4 --client_channel_concurrent 2 --duration 1 --port "$1"' "$A/build/bench/grpc_raw"

secs() { cat "$TMP/$1.secs"; }
result "from clean copies: make $(secs all)s, tsan $(secs tsan)s, asan $(secs asan)s, check-unit $(secs unit)s, fuzz $(secs fuzz)s, install $(secs install)s, check-rdma-prereqs $(secs prereqs)s (builds ${T_BUILDS}s, 2 at a time); check-host ${T_HOST}s"
result "check-rdma/soak/demo/test: make -n builds first; make without gRPC/cmocka builds the rest and names what it left out (check-rdma and soak: the tsan copy too); $n_files files tests/rdma/ names all built by check-rdma-prereqs"
result "erdma-shim --help/--version, doctor 1, probe 2, stat 0, stat PID 1, run; installed CLI preloads the installed library; two-host stream/pingpong/grpc_raw commands over loopback"
