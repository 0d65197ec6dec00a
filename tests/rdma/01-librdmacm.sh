#!/usr/bin/env bash
# The librdmacm gate (rsocket_glue/compat.c), in a process that runs RDMA:
#  - the librdmacm file mapped into a shim'd RDMA server (/proc/PID/maps)
#    is the one the shim's start line names and the one `erdma-shim doctor`
#    reports, and with ERDMA_EXPECT_RDMACM=DIR (tests/rdma-core-matrix) it
#    lies under DIR, with libibverbs and the bed's provider from there too;
#  - the same library under a release name the shim does not know
#    (librdmacm.so.1.N.65.0) keeps a shim'd transfer on kernel TCP, with no
#    QP and one warning line saying why, and doctor says RDMA is not usable.
. "$(dirname "$0")/lib/common.bash"
CLI=$ROOT/erdma-shim
LINK=${ERDMA_BED_LINK:-rxe}

# maps PID WORD: the distinct mapped files of PID whose name has WORD
maps() { awk -v w="$2" '$6 ~ w {print $6}' /proc/"$1"/maps | sort -u; }

# serve TAG MODE LDPATH: a shim'd xfer server and client (1 MiB), held open;
# sets SPID (the server itself: no wrapper), CPID.
serve() {
	local tag=$1 mode=$2 lp=$3
	local e=(env LD_PRELOAD="$PRELOAD" ERDMA_SHIM="$mode" ERDMA_SHIM_LOG=info
		"ERDMA_SHIM_LOG_FILE=$WORK/$tag.%p.log" LD_LIBRARY_PATH="$lp")
	bg "$WORK/$tag.server" "${e[@]}" "$XFER" server "$IP0" 0 --conns 1 --hold "$WORK/$tag.hold"
	SPID=$BG_PID
	wait_for "$WORK/$tag.server" '^ready ' 20
	bg "$WORK/$tag.client" "${e[@]}" timeout 120 "$XFER" client "$IP0" \
		"$(port_of "$WORK/$tag.server")" --conns 1 --size 1M --hold "$WORK/$tag.hold"
	CPID=$BG_PID
	wait_for "$WORK/$tag.client" '^holding' 100
	wait_for "$WORK/$tag.server" '^holding' 30
}

release() { # release TAG: stop the pair, check their exits
	touch "$WORK/$1.hold"
	waitb "$CPID" 30 || fail "$1: client exited $?: $(cat "$WORK/$1.client")"
	waitb "$SPID" 30 || fail "$1: server exited $?: $(cat "$WORK/$1.server")"
}

# 1. The library in use, three ways.
serve real require "${LD_LIBRARY_PATH:-}"
cm=$(maps "$SPID" '/librdmacm\\.so')
verbs=$(maps "$SPID" '/libibverbs\\.so')
prov=$(maps "$SPID" "/lib${LINK}-rdmav")
sq=$(qps "$SPID")
[ "$(wc -l <<<"$cm")" = 1 ] && [ -n "$cm" ] || fail "server maps not one librdmacm: $cm"
[ "$sq" -gt 0 ] || fail "the server has no QP under ERDMA_SHIM=require"
logline=$(grep -h 'info: librdmacm ' "$WORK"/real.*.log | head -1)
echo "maps: $cm; $verbs; provider ${prov:-?}"
echo "shim: $logline"
grep -qF "($cm): rdma" <<<"$logline" || fail "the shim's start line names another file: $logline"
doc=$(LD_LIBRARY_PATH="${LD_LIBRARY_PATH:-}" "$CLI" doctor | grep '^librdmacm')
echo "doctor: $doc"
grep -qF "($cm)" <<<"$doc" || fail "doctor names another librdmacm: $doc"
if [ -n "${ERDMA_EXPECT_RDMACM:-}" ]; then
	for f in "$cm" "$verbs" "$prov"; do
		[ -n "$f" ] && [[ $f == "$ERDMA_EXPECT_RDMACM"/* ]] ||
			fail "mapped '$f' is not under ERDMA_EXPECT_RDMACM=$ERDMA_EXPECT_RDMACM"
	done
fi
release real

# 2. An unknown release: the same file under the name of rdma-core 65.0.
mkdir "$WORK/fake"
b=$(basename "$cm")
fake=${b%.*.*}.65.0
cp "$cm" "$WORK/fake/$fake"
ln -s "$fake" "$WORK/fake/librdmacm.so.1"
serve fake auto "$WORK/fake${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
[ "$(maps "$SPID" '/librdmacm\\.so')" = "$WORK/fake/$fake" ] || fail "the renamed copy is not the one loaded"
sq=$(qps "$SPID") cq=$(qps "$CPID")
[ "$sq" = 0 ] && [ "$cq" = 0 ] || fail "unknown release: QPs server $sq client $cq (want TCP)"
release fake
for l in "$WORK"/fake.*.log; do
	n=$(grep -c 'warn: librdmacm .*newer than the newest' "$l" || true)
	[ "$n" = 1 ] || fail "$l: $n gate warnings, want 1: $(cat "$l")"
done
grep -h 'warn: librdmacm' "$WORK"/fake.*.log | head -1
rc=0
LD_LIBRARY_PATH="$WORK/fake${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" "$CLI" doctor >"$WORK/doc.fake" || rc=$?
[ "$rc" = 1 ] && grep -q '^librdmacm *fail .*65\.0' "$WORK/doc.fake" ||
	fail "doctor on rdma-core 65.0: rc $rc: $(cat "$WORK/doc.fake")"

echo "RESULT: $(sed 's/.*info: //; s/: rdma:.*//' <<<"$logline") on $LINK, mapped, named by the shim and doctor; the same file as rdma-core 65.0 stays on TCP with one warning"
