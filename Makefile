# liberdma_shim — plain GNU make.
#   make            build liberdma_shim.so (+ test programs, benches)
#   make deps       install the Debian packages a build needs (nothing else)
#   make install / make uninstall   (PREFIX, DESTDIR)
#   make test-deps  install the test bed's packages (QEMU, a kernel, ...)
#   make test       the whole suite: unit, host (passthrough), RDMA (soft-RoCE VM)
#   make test SANITIZE=1   the same under ASan+UBSan
#   make demo       the headline numbers in ~5 min (make demo-full: all of them)
#   make cost       instructions and system calls per RDMA call, shim vs rsockets
# Every target builds what it needs from a clean tree (tests/host/90-targets.sh).
VERSION := 0.1.0
PREFIX ?= /usr/local
LIBDIR ?= $(PREFIX)/lib
BINDIR ?= $(PREFIX)/bin
MANDIR ?= $(PREFIX)/share/man
DESTDIR ?=

CC ?= cc
# Warnings are errors in CI (CI=true there) and whenever WERROR=1.
WERROR ?= $(if $(filter true 1,$(CI)),1,0)
SANITIZE ?= 0

WARN := -Wall -Wextra -Wshadow -Wno-unused-parameter
ifeq ($(WERROR),1)
WARN += -Werror
endif
BASE_CFLAGS := -std=gnu11 -O2 -g $(WARN) -DSHIM_VERSION=\"$(VERSION)\"
SAN_FLAGS :=
ifeq ($(SANITIZE),1)
SAN_FLAGS := -fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=undefined
endif
CFLAGS ?=
# initial-exec TLS: the library is loaded with the program (LD_PRELOAD, or
# DT_NEEDED), never dlopen()ed, so its thread-locals sit in the static TLS
# block and each access is one %fs-relative load, not a __tls_get_addr call
# (about 6 instructions, several per RDMA call: bench/cost-table).
LIB_TLS := -ftls-model=initial-exec
LIB_CFLAGS := $(BASE_CFLAGS) -D_GNU_SOURCE $(SAN_FLAGS) -fPIC -fvisibility=hidden $(LIB_TLS) -Ipreload -Ipreload/base -Irsocket_glue $(CFLAGS)
LIB_LDFLAGS := -shared -Wl,--version-script=preload/liberdma_shim.map -Wl,-z,defs \
	-Wl,-z,now -Wl,-soname,liberdma_shim.so $(SAN_FLAGS)
LIB_LIBS := -lrdmacm -libverbs -ldl -lpthread

B := build
LIB := liberdma_shim.so
PRELOAD_SRC := $(wildcard preload/*.c preload/base/*.c)
GLUE_SRC := $(wildcard rsocket_glue/*.c)
LIB_OBJ := $(patsubst %.c,$(B)/%.o,$(PRELOAD_SRC) $(GLUE_SRC))

PROG_SRC := $(wildcard tests/progs/*.c)
PROGS := $(patsubst tests/progs/%.c,$(B)/tests/progs/%,$(PROG_SRC))
READINESS_OBJ := $(patsubst tests/progs/readiness/%.c,$(B)/tests/readiness/%.o,$(wildcard tests/progs/readiness/*.c))
PROGS += $(B)/tests/progs/readiness
UNIT_SRC := $(wildcard tests/unit/test_*.c)
UNITS := $(patsubst tests/unit/%.c,$(B)/tests/unit/%,$(UNIT_SRC))
# Fault injectors for tests, preloaded after the shim (tests/inject).
INJECTS := $(patsubst tests/inject/%.c,$(B)/tests/inject/%.so,$(wildcard tests/inject/*.c))
BENCH_SRC := $(wildcard bench/*.c)
BENCHES := $(patsubst bench/%.c,$(B)/bench/%,$(BENCH_SRC))
# bench/costops.c a second time, written against rsockets (bench/cost-table)
BENCHES += $(B)/bench/costops_rs
TOOL_CFLAGS := $(BASE_CFLAGS) $(SAN_FLAGS) $(CFLAGS)

.PHONY: all deps test-deps uninstall demo-full cost test check check-unit check-host check-rdma check-rdma-prereqs demo install clean format format-check fuzz soak tsan asan deb

# gRPC and cmocka are for the bench and the unit tests only: a plain `make`
# builds the library, the CLI, the test programs and the other benches
# without them, and says what it left out (make test-deps installs both).
PKG_CONFIG ?= pkg-config
HAVE_GRPC := $(shell $(PKG_CONFIG) --exists grpc 2>/dev/null && echo 1)
HAVE_CMOCKA := $(shell $(PKG_CONFIG) --exists cmocka 2>/dev/null && echo 1)

all: $(LIB) $(PROGS) $(INJECTS) $(BENCHES) $(if $(HAVE_CMOCKA),$(UNITS))
ifneq ($(HAVE_CMOCKA),1)
	@echo "make: unit tests not built: no cmocka (libcmocka-dev; make test-deps)"
endif
ifneq ($(HAVE_GRPC),1)
	@echo "make: bench/grpc_raw not built: no gRPC (libgrpc-dev; make test-deps)"
endif

# Rebuild everything when the flags change (SANITIZE=1 vs not).
FLAGS_STAMP := $(B)/flags.$(shell echo '$(LIB_CFLAGS) $(TOOL_CFLAGS)' | md5sum | cut -c1-12)
$(FLAGS_STAMP):
	@mkdir -p $(B) && rm -f $(B)/flags.* && touch $@

# Each object depends on the headers it includes, as the compiler lists
# them (-MMD; -MP: a header that is gone does not break the build).  The
# lists are dot files beside their targets: a glob over the built test
# programs (tests/run-all: build/tests/unit/test_*) must not find them.
DEPFLAGS = -MMD -MP -MF $(dir $@).$(notdir $@).d
$(B)/%.o: %.c Makefile $(FLAGS_STAMP)
	@mkdir -p $(dir $@)
	$(CC) $(LIB_CFLAGS) $(DEPFLAGS) -c -o $@ $<

$(LIB): $(LIB_OBJ) preload/liberdma_shim.map
	$(CC) -o $@ $(LIB_OBJ) $(LIB_LDFLAGS) $(LDFLAGS) $(LIB_LIBS)

# Test programs: plain socket programs (they must not know about the shim),
# plus a few that use rsockets directly to validate the test bed.
# Each is linked with libtestlib.a, the helpers they share (tests/lib): an
# archive, so a program that uses none of it gets none of it (its
# constructor and fork handler included).
TESTLIB_OBJ := $(B)/tests/lib/testlib.o
TESTLIB := $(B)/tests/lib/libtestlib.a

$(TESTLIB_OBJ): tests/lib/testlib.c Makefile $(FLAGS_STAMP)
	@mkdir -p $(dir $@)
	$(CC) $(TOOL_CFLAGS) $(DEPFLAGS) -c -o $@ $<

$(TESTLIB): $(TESTLIB_OBJ)
	rm -f $@
	$(AR) rcs $@ $<

$(B)/tests/progs/%: tests/progs/%.c $(TESTLIB) Makefile $(FLAGS_STAMP)
	@mkdir -p $(dir $@)
	$(CC) $(TOOL_CFLAGS) -Itests/lib $(DEPFLAGS) -o $@ $< $(TESTLIB) -lrdmacm -libverbs -lpthread

$(B)/tests/inject/%.so: tests/inject/%.c Makefile $(FLAGS_STAMP)
	@mkdir -p $(dir $@)
	$(CC) $(BASE_CFLAGS) $(CFLAGS) -fPIC -shared $(DEPFLAGS) -o $@ $< -ldl

# readiness is a program of several files (tests/progs/readiness/), each
# its own object.
$(B)/tests/readiness/%.o: tests/progs/readiness/%.c Makefile $(FLAGS_STAMP)
	@mkdir -p $(dir $@)
	$(CC) $(TOOL_CFLAGS) -Itests/lib $(DEPFLAGS) -c -o $@ $<

$(B)/tests/progs/readiness: $(READINESS_OBJ) $(TESTLIB)
	@mkdir -p $(dir $@)
	$(CC) $(TOOL_CFLAGS) -o $@ $(READINESS_OBJ) $(TESTLIB) -lpthread

# secure_env is linked against the shim itself (DT_NEEDED, absolute rpath):
# the loader ignores LD_PRELOAD paths for setuid programs (tests/host/81).
$(B)/tests/progs/secure_env: tests/progs/secure_env.c $(LIB) Makefile $(FLAGS_STAMP)
	@mkdir -p $(dir $@)
	$(CC) $(TOOL_CFLAGS) $(DEPFLAGS) -o $@ $< -Wl,--no-as-needed $(abspath $(LIB)) \
		-Wl,-rpath,$(abspath $(dir $(LIB))) -Wl,--as-needed

# listenlock takes the shim's listen lock through the library's own object
# (tests/host/93-security-files.sh): no listener reaches it without RDMA.
$(B)/tests/progs/listenlock: tests/progs/listenlock.c $(B)/rsocket_glue/listenlock.o Makefile $(FLAGS_STAMP)
	@mkdir -p $(dir $@)
	$(CC) $(TOOL_CFLAGS) $(DEPFLAGS) -o $@ $< $(B)/rsocket_glue/listenlock.o

# A unit test needs no Makefile edit: tests/unit/test_X.c is linked with
# the library's own object of X.c (preload/ or rsocket_glue/), the very
# code that ships, and stubs whatever else that object calls.
# (unit_obj is a function: a % written in a pattern rule's prerequisites
# would be taken for the stem.)
unit_obj = $(filter %/$(1).o,$(LIB_OBJ))
.SECONDEXPANSION:
$(B)/tests/unit/test_%: tests/unit/test_%.c $$(call unit_obj,$$*) Makefile $(FLAGS_STAMP)
	@mkdir -p $(dir $@)
	$(CC) $(TOOL_CFLAGS) $(DEPFLAGS) -Ipreload -Ipreload/base -Irsocket_glue -o $@ $< $(filter %.o,$^) -lcmocka -lpthread

$(B)/bench/%: bench/%.c Makefile $(FLAGS_STAMP)
	@mkdir -p $(dir $@)
	$(CC) $(TOOL_CFLAGS) $(DEPFLAGS) -o $@ $< -lrdmacm -lpthread -lm

$(B)/bench/costops_rs: bench/costops.c Makefile $(FLAGS_STAMP)
	@mkdir -p $(dir $@)
	$(CC) $(TOOL_CFLAGS) -DCOST_RS $(DEPFLAGS) -o $@ $< -lrdmacm -lpthread

# ---- bench/grpc_raw: gRPC core C API bench (libgrpc-dev) --------------------
GRPC_RAW := $(B)/bench/grpc_raw
GRPC_FLAGS = $(shell $(PKG_CONFIG) --cflags --libs grpc)
all: $(if $(HAVE_GRPC),$(GRPC_RAW))
# Not built with SANITIZE flags: LeakSanitizer would report libgrpc's
# process-lifetime allocations at exit; the shim is what is under test.
$(GRPC_RAW): bench/grpc_raw/grpc_raw.c Makefile $(FLAGS_STAMP)
	@mkdir -p $(dir $@)
	$(CC) $(BASE_CFLAGS) $(CFLAGS) $(DEPFLAGS) -o $@ $< $(GRPC_FLAGS) -lpthread -lm
# ---- end bench/grpc_raw ------------------------------------------------------

# ---- erdma-shim: the operator CLI and the man pages (issue #9) ----------------
# Built next to the library (./erdma-shim beside ./liberdma_shim.so, where
# `erdma-shim run` finds it); it shares the ERDMA_SHIM_* parser and the
# stats segment's layout with the library, not its code.  Never built with
# SANITIZE flags: it is not under test for memory errors, its output is.
# `erdma-shim run` also looks in ../lib/$(MULTIARCH)/, where the Debian
# package installs the library (make deb).
CLI := erdma-shim
MULTIARCH ?= $(shell $(CC) -print-multiarch 2>/dev/null)
all: $(CLI)
# (doctor reads the librdmacm it runs on as the library's gate does:
# rsocket_glue/compat.c, self-contained)
CLI_OBJ := $(B)/cli/erdma-shim.o $(B)/cli/stat.o $(B)/cli/config.o $(B)/cli/compat.o
$(B)/cli/erdma-shim.o: preload/cli/erdma-shim.c Makefile $(FLAGS_STAMP)
$(B)/cli/stat.o: preload/cli/stat.c Makefile $(FLAGS_STAMP)
$(B)/cli/config.o: preload/base/config.c Makefile $(FLAGS_STAMP)
$(B)/cli/compat.o: rsocket_glue/compat.c Makefile $(FLAGS_STAMP)
$(CLI_OBJ):
	@mkdir -p $(dir $@)
	$(CC) $(BASE_CFLAGS) $(CPPFLAGS) $(CFLAGS) -DSHIM_MULTIARCH=\"$(MULTIARCH)\" -Ipreload -Ipreload/base -Irsocket_glue $(DEPFLAGS) -c -o $@ $<
$(CLI): $(CLI_OBJ)
	$(CC) -o $@ $(CLI_OBJ) -lrdmacm -libverbs $(LDFLAGS)
.PHONY: install-cli clean-cli
install: install-cli
install-cli: $(CLI)
	install -D -m 0755 $(CLI) $(DESTDIR)$(BINDIR)/$(notdir $(CLI))
	install -D -m 0644 preload/man/erdma-shim.1 $(DESTDIR)$(MANDIR)/man1/erdma-shim.1
	install -D -m 0644 preload/man/liberdma_shim.7 $(DESTDIR)$(MANDIR)/man7/liberdma_shim.7
clean: clean-cli
clean-cli:
	rm -f $(CLI)
# ---- end erdma-shim ----------------------------------------------------------

# ---- make deb: the Debian package (issue 19) ------------------------------
# build/deb/liberdma-shim_$(VERSION)-N_ARCH.deb, built with dpkg-buildpackage
# from a copy of the working tree (debian/build-deb); rebuilt only when the
# tree changed.  Needs debhelper, dpkg-dev (make test-deps); no root.
.PHONY: deb
deb:
	debian/build-deb $(VERSION) $(B)/deb
# ---- end make deb ------------------------------------------------------------

# ---- make rpm: an RPM for RHEL 9 / Alibaba Cloud Linux 3 / Anolis (issue 39) --
# build/rpm/RPMS/ARCH/liberdma-shim-$(VERSION)-1.ARCH.rpm from a tarball of
# the working tree (packaging/rpm/build-rpm), checked with rpmlint.  Needs
# rpmbuild (on Debian: apt-get install rpm rpmlint).
.PHONY: rpm
rpm:
	packaging/rpm/build-rpm $(VERSION) $(B)/rpm
# ---- end make rpm ------------------------------------------------------------

# Debian packages.  DEPS: what a build of the library and the CLI needs,
# and nothing else (this is what README tells users to run on a real host).
# TEST_DEPS: the test bed's -- unit and host tests, the soft-RoCE/iWARP VM
# (qemu, a boot kernel and its source for siw), the benches, the .deb's
# tools -- for a development or CI machine only.
DEPS := build-essential pkg-config librdmacm-dev libibverbs-dev uthash-dev
TEST_DEPS := rdma-core rdmacm-utils ibverbs-utils ibverbs-providers libcmocka-dev \
	libgrpc-dev protobuf-compiler-grpc python3-grpcio iperf3 curl \
	qemu-system-x86 busybox-static linux-image-amd64 iproute2 kmod cpio \
	xz-utils gzip valgrind procps gdb clang libclang-rt-14-dev nginx-light \
	prometheus-node-exporter debhelper dpkg-dev lintian liburing2 \
	clang-format postgresql-15
SUDO := $(shell [ "$$(id -u)" = 0 ] || echo sudo)
# apt_install PACKAGES: install those not installed yet (idempotent)
define apt_install
	@missing=""; \
	for p in $(1); do \
		dpkg-query -W -f='$${Status}' $$p 2>/dev/null | grep -q 'ok installed' || missing="$$missing $$p"; \
	done; \
	if [ -n "$$missing" ]; then \
		echo "make $@: installing$$missing"; \
		$(SUDO) apt-get update -q && \
		DEBIAN_FRONTEND=noninteractive $(SUDO) apt-get install -y -q --no-install-recommends $$missing; \
	else \
		echo "make $@: all packages present"; \
	fi
endef
deps:
	$(call apt_install,$(DEPS))

test-deps: deps
	$(call apt_install,$(TEST_DEPS))
	@# soft-iWARP for the bed (tests/vm/build-siw): the source and headers
	@# of exactly the kernel the bed boots, known once that is installed.
	@siw=$$(tests/vm/build-siw --packages) || exit 1; missing=""; \
	for p in $$siw; do \
		dpkg-query -W -f='$${Status} $${Version}\n' $${p%%=*} 2>/dev/null | \
			grep -q "ok installed $${p#*=}$$" || \
		dpkg-query -W -f='$${Status}\n' $$p 2>/dev/null | grep -q 'ok installed$$' || \
			missing="$$missing $$p"; \
	done; \
	if [ -n "$$missing" ]; then \
		echo "make test-deps: installing$$missing"; \
		$(SUDO) apt-get update -q && \
		DEBIAN_FRONTEND=noninteractive $(SUDO) apt-get install -y -q --no-install-recommends $$missing; \
	fi

# The whole suite; prints one PASS/FAIL line per test and "N passed, N failed".
test: test-deps
	$(MAKE) all
	SANITIZE=$(SANITIZE) tests/run-all

check: test

# The unit phase of `make test`: the cmocka tests, the export check and
# short fuzzing runs (ERDMA_FUZZ_SECONDS, 20 by default, for the config
# parser; ERDMA_FUZZ_STAT_SECONDS, 10, for stat's table reader).
check-unit: all
	tests/lib/runner.sh --suite unit $(UNITS) tests/unit/*.sh

check-host: all
	SANITIZE=$(SANITIZE) tests/lib/runner.sh --suite host --timeout 180 tests/host/[0-9]*.sh

# Everything the RDMA suite's tests use, built on the host (the VM's root is
# read-only): the library, test programs, benches, the CLI and, except in a
# SANITIZE=1 (ASan) pass, which leaves tests/rdma/72-tsan.sh out, the
# ThreadSanitizer copy.  Checkable without the VM (tests/host/90-targets.sh).
check-rdma-prereqs: all $(if $(filter 1,$(SANITIZE)),,tsan)

# RDMA_TESTS: a subset (e.g. RDMA_TESTS="tests/rdma/00-bed.sh"); default all.
RDMA_TESTS ?=
check-rdma: check-rdma-prereqs
	SANITIZE=$(SANITIZE) tests/vm/check-rdma $(RDMA_TESTS)

# A bounded soak in the soft-RoCE bed (issue #8): SOAK_SECONDS of mixed gRPC
# and raw traffic with random faults, then SOAK_SECONDS of the randomized
# integrity workload (issue 42) -- the suite runs both for 45 s.
SOAK_SECONDS ?= 300
soak: check-rdma-prereqs
	ERDMA_INTEGRITY_SECONDS=$(SOAK_SECONDS) ERDMA_SOAK_SECONDS=$(SOAK_SECONDS) tests/vm/check-rdma \
		--timeout $$(($(SOAK_SECONDS) + 300)) tests/rdma/95-soak.sh tests/rdma/68-integrity.sh

# A ThreadSanitizer copy of the library, beside the normal one (preload it
# after libtsan.so): build/tsan/liberdma_shim.so.
tsan:
	$(MAKE) B=build/tsan LIB=build/tsan/liberdma_shim.so SANITIZE=0 \
		SAN_FLAGS=-fsanitize=thread CFLAGS="$(CFLAGS) -Wno-tsan" \
		build/tsan/liberdma_shim.so

# An ASan+UBSan copy of the library, beside the normal one (preload it after
# libasan.so): build/asan/liberdma_shim.so.  `make test` runs the RDMA suite
# a second time with it (suite rdma-asan).
asan:
	$(MAKE) B=build/asan LIB=build/asan/liberdma_shim.so SANITIZE=1 \
		build/asan/liberdma_shim.so

# Longer fuzzing runs of the ERDMA_SHIM_* parser and of erdma-shim stat's
# table reader (make test runs them 20 s and 10 s).
fuzz:
	ERDMA_FUZZ_SECONDS=$${ERDMA_FUZZ_SECONDS:-600} tests/unit/fuzz-config.sh
	ERDMA_FUZZ_STAT_SECONDS=$${ERDMA_FUZZ_SECONDS:-600} tests/unit/fuzz-stat.sh

# DEMO_FLAGS: bench/demo's options (bench/demo --help), added after the
# target's own (a later option wins), e.g. DEMO_FLAGS="--rounds 3".
DEMO_FLAGS ?=
# make demo: the headline table -- TCP, the shim and native rsockets
# (rstream, busy-polling and blocking), stream at 64 KiB and 1 MiB,
# ping-pong at 1 B and 4 KiB, gRPC at 1 MiB; one round of 1 s runs -- in
# one VM boot, within 5 minutes of a built tree on 2 cores (docs/
# performance.md has the timing).
DEMO_HEADLINE := --quick --stream-sizes "64K 1M" --pp-sizes "1 4K" --grpc-sizes 1M --idle-conns ""
demo: test-deps
	$(MAKE) all
	bench/demo $(DEMO_HEADLINE) $(DEMO_FLAGS)

# make demo-full: bench/demo's defaults (3 rounds, every size, gRPC up to
# 100 MiB, the idle-connection row; ~15 min under TCG), then in the VM bed
# the same over soft-iWARP (eRDMA's own protocol; build/bench/siw/demo.txt):
# gRPC at 4K and 1M only there, as siw under TCG moves ~20 MB/s, and no
# idle-connection row (issue 18's measurement is the soft-RoCE table's;
# DEMO_FLAGS="--idle-conns ..." adds it).
demo-full: test-deps
	$(MAKE) all
	bench/demo $(DEMO_FLAGS)
	@if ! ls /dev/infiniband/uverbs* >/dev/null 2>&1 && [ "$${ERDMA_NATIVE:-0}" != 1 ]; then \
		echo "== make demo-full: the same over soft-iWARP (siw)"; \
		bench/demo --no-build --link siw --out build/bench/siw --grpc-sizes "4K 1M" --idle-conns "" $(DEMO_FLAGS); \
	fi

# make cost: bench/cost-table -- user-space instructions (callgrind) and
# system calls (strace) per RDMA send/recv/round trip/epoll_wait/poll, the
# shim under a plain socket program against the same program written on
# rsockets; the markdown table of docs/performance.md, in one VM boot.
COST_FLAGS ?=
cost: test-deps
	$(MAKE) all
	bench/cost-table --no-build $(COST_FLAGS)

install: $(LIB)
	install -D -m 0755 $(LIB) $(DESTDIR)$(LIBDIR)/$(notdir $(LIB))

# Exactly what install and install-cli put there (same PREFIX/DESTDIR);
# directories are left, as they may hold other things.
uninstall:
	rm -f $(DESTDIR)$(LIBDIR)/$(notdir $(LIB)) $(DESTDIR)$(BINDIR)/$(notdir $(CLI)) \
		$(DESTDIR)$(MANDIR)/man1/erdma-shim.1 $(DESTDIR)$(MANDIR)/man7/liberdma_shim.7

clean:
	rm -rf $(B) $(LIB)

# Every C file of ours; format-check runs in make test (tests/unit/format.sh).
FORMAT_SRC = $(wildcard preload/*.[ch] preload/base/*.[ch] preload/cli/*.c rsocket_glue/*.[ch] \
	tests/progs/*.[ch] tests/inject/*.c tests/progs/*/*.[ch] tests/lib/*.[ch] tests/unit/*.c bench/*.[ch] bench/grpc_raw/*.c)
format:
	clang-format -i $(FORMAT_SRC)

format-check:
	clang-format --dry-run --Werror $(FORMAT_SRC)

-include $(foreach t,$(LIB_OBJ) $(TESTLIB_OBJ) $(READINESS_OBJ) $(filter-out %/readiness,$(PROGS)) $(UNITS) $(BENCHES) $(GRPC_RAW) $(CLI_OBJ),$(dir $(t)).$(notdir $(t)).d)
