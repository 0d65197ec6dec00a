# Sourced by tests/vm/check-rdma and tests/run-all: the RDMA tests an ASan
# pass leaves out, and why.  memcheck (71) and TSan (72) exclude ASan;
# rsockets alone (10, 20) loads no shim; the comparison with librspreload
# (66) is a table of the two libraries, and the shim's side of it (the same
# programs) runs in 30, 60, 62, 63 and 64.  PostgreSQL (67) can't start
# under the ASan runtime at all, shim or not: `LD_PRELOAD=libasan.so
# postgres --version` (and initdb) hangs on the host too.  libgpg-error
# (postgres -> libgcrypt) runs its constructor before ASan's and calls
# bindtextdomain; its malloc there initialises ASan, whose dlerror() calls
# dcgettext, which takes glibc's gettext lock (_nl_state_lock) that
# bindtextdomain holds for writing: the lock's reader count ends at -1, and
# postgres's own bindtextdomain in main waits for it for good.  So 67, in
# the ASan pass (over siw), preloads the shipped library (67 says so).
# asan_skip TEST: true when an ASan pass leaves TEST (a path or name) out.
asan_skip() {
	case ${1##*/} in
	71-cycles-valgrind* | 72-tsan* | 10-rstream* | 20-rsocket-bulk* | 66-rspreload-compat*) return 0 ;;
	*) return 1 ;;
	esac
}
