# Sourced by tests/vm/check-rdma and tests/run-all: the RDMA tests an ASan
# pass leaves out, and why.  memcheck (71) and TSan (72) exclude ASan;
# rsockets alone (10, 20) loads no shim; the comparison with librspreload
# (66) is a table of the two libraries, and the shim's side of it (the same
# programs) runs in 30, 60, 62, 63 and 64.  PostgreSQL (67) did not start
# under the ASan runtime in the bed (its postmaster printed nothing in 60 s;
# open): it runs with the shipped library only.
# asan_skip TEST: true when an ASan pass leaves TEST (a path or name) out.
asan_skip() {
	case ${1##*/} in
	71-cycles-valgrind* | 72-tsan* | 10-rstream* | 20-rsocket-bulk* | 66-rspreload-compat* | 67-postgres*) return 0 ;;
	*) return 1 ;;
	esac
}
