/* SPDX-License-Identifier: MIT */
/*
 * erdma-shim: the operator's tool for liberdma_shim.
 *
 *   erdma-shim run [opts] -- CMD ARGS...   run CMD with the shim preloaded
 *   erdma-shim doctor [--json]             is RDMA usable here, and if not why
 *   erdma-shim probe HOST:PORT [--timeout MS] [--port-offset N]
 *                                          does an RDMA listener answer there
 *   erdma-shim stat [PID] [--json | --prometheus]
 *                                          connections of shimmed processes
 *
 * See erdma-shim(1).  The CLI never runs under the shim itself: a CLI started
 * with it in LD_PRELOAD re-executes itself without it (probe's kernel TCP
 * check must be kernel TCP).
 */
#define _GNU_SOURCE
#include "compat.h"
#include "config.h"
#include "stats.h"

#include <arpa/inet.h>
#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <infiniband/verbs.h>
#include <link.h>
#include <linux/inet_diag.h>
#include <linux/netlink.h>
#include <linux/rtnetlink.h>
#include <linux/sock_diag.h>
#include <linux/tcp.h>
#include <netdb.h>
#include <poll.h>
#include <rdma/rsocket.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/utsname.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define EX_USAGE 64
#define LIB_NAME "liberdma_shim.so"

extern char **environ;

static void usage(FILE *f)
{
	fprintf(
	    f, "usage: erdma-shim run [--allow RULES] [--deny RULES] "
	       "[--require] [--log LEVEL]\n"
	       "                      [--stats] [--lib PATH] -- CMD [ARGS...]\n"
	       "       erdma-shim doctor [--json]\n"
	       "       erdma-shim probe HOST:PORT [--timeout MS] "
	       "[--port-offset N]\n"
	       "       erdma-shim stat [PID] [--json | --prometheus]\n"
	       "       erdma-shim --version | --help\n"
	       "See erdma-shim(1) and liberdma_shim(7).\n");
}

/* ---- small helpers ---- */

static double now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

/* A JSON string literal of s. */
static void json_str(FILE *f, const char *s)
{
	fputc('"', f);
	for (; *s; s++) {
		unsigned char c = (unsigned char)*s;

		if (c == '"' || c == '\\')
			fprintf(f, "\\%c", c);
		else if (c < 0x20 || c == 0x7f)
			fprintf(f, "\\u%04x", c);
		else
			fputc(c, f);
	}
	fputc('"', f);
}

/* Directory of this executable, for finding the library. */
static int self_dir(char *buf, size_t len)
{
	ssize_t n = readlink("/proc/self/exe", buf, len - 1);
	char *slash;

	if (n <= 0)
		return -1;
	buf[n] = '\0';
	slash = strrchr(buf, '/');
	if (!slash)
		return -1;
	*slash = '\0';
	return 0;
}

/* The multiarch triplet of the build (gcc -print-multiarch, e.g.
 * x86_64-linux-gnu): Debian's package puts the library in
 * /usr/lib/TRIPLET. */
#ifndef SHIM_MULTIARCH
#define SHIM_MULTIARCH ""
#endif

/* liberdma_shim.so: ../lib/ after `make install`, ../lib/TRIPLET/ from the
 * Debian package (erdma-shim in /usr/bin), or beside the CLI in the build
 * tree (./erdma-shim next to ./liberdma_shim.so). */
static int find_lib(char *out, size_t len)
{
	static const char *const rel[] = {
	    "/../lib/" LIB_NAME,
	    "/../lib64/" LIB_NAME, /* RPM-based distributions */
	    SHIM_MULTIARCH[0] ? "/../lib/" SHIM_MULTIARCH "/" LIB_NAME : NULL,
	    "/" LIB_NAME};
	char dir[PATH_MAX], cand[PATH_MAX + 32];

	if (self_dir(dir, sizeof(dir)))
		return -1;
	for (size_t i = 0; i < sizeof(rel) / sizeof(rel[0]); i++) {
		if (!rel[i])
			continue;
		snprintf(cand, sizeof(cand), "%s%s", dir, rel[i]);
		if (access(cand, R_OK) == 0 && realpath(cand, out) &&
		    strlen(out) < len)
			return 0;
	}
	return -1;
}

static bool preload_has_shim(const char *pl)
{
	return pl && strstr(pl, LIB_NAME);
}

/* ---- run ---- */

struct cfg_check {
	int bad;
};

static void report_bad(const char *msg, bool invalid, void *arg)
{
	struct cfg_check *c = arg;

	fprintf(stderr, "erdma-shim: %s\n", msg);
	c->bad += invalid;
}

/* Check the ERDMA_SHIM_* environment exactly as the library will read it:
 * a bad value there makes the program run on TCP only, better said now. */
static int check_env(void)
{
	struct shim_config c;
	struct cfg_check chk = {0};

	shim_config_defaults(&c);
	shim_config_parse(&c, environ, report_bad, &chk);
	return chk.bad;
}

static int append_rule(const char *var, const char *val)
{
	const char *old = getenv(var);
	char *joined;
	int r;

	if (!old || !*old)
		return setenv(var, val, 1);
	if (asprintf(&joined, "%s,%s", old, val) < 0)
		return -1;
	r = setenv(var, joined, 1);
	free(joined);
	return r;
}

static int set_preload(const char *lib)
{
	const char *old = getenv("LD_PRELOAD");
	char *val;
	int r;

	if (preload_has_shim(old)) {
		fprintf(stderr,
			"erdma-shim: warning: LD_PRELOAD already contains %s "
			"(%s): left as it is\n",
			LIB_NAME, old);
		return 0;
	}
	if (!old || !*old)
		return setenv("LD_PRELOAD", lib, 1);
	if (asprintf(&val, "%s:%s", lib, old) < 0)
		return -1;
	r = setenv("LD_PRELOAD", val, 1);
	free(val);
	return r;
}

static int cmd_run(int argc, char **argv)
{
	char lib[PATH_MAX] = "";
	int i;

	/* Rules given on the command line start from scratch: an inherited
	 * ERDMA_SHIM_ALLOW would otherwise be widened silently. */
	bool allow_reset = false, deny_reset = false;

	for (i = 0; i < argc && strcmp(argv[i], "--"); i++) {
		const char *o = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
		bool takes = !strcmp(o, "--allow") || !strcmp(o, "--deny") ||
			     !strcmp(o, "--log") || !strcmp(o, "--lib");

		if (takes && (!v || !strcmp(v, "--"))) {
			fprintf(stderr, "erdma-shim run: %s needs a value\n",
				o);
			return EX_USAGE;
		}
		if (!strcmp(o, "--allow")) {
			if (!allow_reset)
				unsetenv("ERDMA_SHIM_ALLOW");
			allow_reset = true;
			append_rule("ERDMA_SHIM_ALLOW", v);
		} else if (!strcmp(o, "--deny")) {
			if (!deny_reset)
				unsetenv("ERDMA_SHIM_DENY");
			deny_reset = true;
			append_rule("ERDMA_SHIM_DENY", v);
		} else if (!strcmp(o, "--log")) {
			setenv("ERDMA_SHIM_LOG", v, 1);
		} else if (!strcmp(o, "--lib")) {
			if (!realpath(v, lib)) {
				fprintf(stderr,
					"erdma-shim run: --lib %s: %s\n", v,
					strerror(errno));
				return EX_USAGE;
			}
		} else if (!strcmp(o, "--require")) {
			setenv("ERDMA_SHIM", "require", 1);
			continue;
		} else if (!strcmp(o, "--stats")) {
			setenv("ERDMA_SHIM_STATS", "1", 1);
			continue;
		} else {
			fprintf(stderr, "erdma-shim run: unknown option %s\n",
				o);
			return EX_USAGE;
		}
		i++;
	}
	if (i >= argc - 1) {
		fprintf(stderr, "erdma-shim run: no command (erdma-shim run "
				"[options] -- CMD ARGS...)\n");
		return EX_USAGE;
	}
	if (!lib[0] && find_lib(lib, sizeof(lib))) {
		fprintf(stderr,
			"erdma-shim run: %s not found beside this program, in "
			"../lib or in ../lib/%s (use --lib PATH)\n",
			LIB_NAME,
			SHIM_MULTIARCH[0] ? SHIM_MULTIARCH : "TRIPLET");
		return EX_USAGE;
	}
	if (check_env())
		return EX_USAGE;
	if (set_preload(lib)) {
		perror("erdma-shim run: setenv");
		return 1;
	}
	execvp(argv[i + 1], argv + i + 1);
	fprintf(stderr, "erdma-shim run: %s: %s\n", argv[i + 1],
		strerror(errno));
	return errno == ENOENT ? 127 : 126;
}

/* ---- doctor ---- */

struct report {
	bool json;
	int fails, warns, n;
};

/* One check: name, verdict, what was found, how to fix it (or NULL). */
static void check(struct report *r, const char *name, const char *verdict,
		  const char *fix, const char *fmt, ...)
    __attribute__((format(printf, 5, 6)));
static void check(struct report *r, const char *name, const char *verdict,
		  const char *fix, const char *fmt, ...)
{
	char detail[512];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(detail, sizeof(detail), fmt, ap);
	va_end(ap);
	r->fails += !strcmp(verdict, "fail");
	r->warns += !strcmp(verdict, "warn");
	if (r->json) {
		printf("%s\n    {\"check\": ", r->n ? "," : "");
		json_str(stdout, name);
		printf(", \"verdict\": \"%s\", \"detail\": ", verdict);
		json_str(stdout, detail);
		printf(", \"fix\": ");
		if (fix)
			json_str(stdout, fix);
		else
			printf("null");
		printf("}");
	} else {
		printf("%-12s %-4s  %s\n", name, verdict, detail);
		if (fix)
			printf("%-12s %-4s  fix: %s\n", "", "", fix);
	}
	r->n++;
}

static void doctor_shim(struct report *r)
{
	char lib[PATH_MAX];

	if (find_lib(lib, sizeof(lib)) == 0)
		check(r, "shim", "ok", NULL, "erdma-shim %s, library %s",
		      SHIM_VERSION, lib);
	else
		check(r, "shim", "warn",
		      "install with `make install`, or pass --lib to "
		      "erdma-shim run",
		      "erdma-shim %s; %s not found beside it or in ../lib",
		      SHIM_VERSION, LIB_NAME);
}

static void doctor_config(struct report *r, struct shim_config *c)
{
	char desc[512];
	int bad;

	shim_config_defaults(c);
	bad = check_env() ? 1 : 0;
	shim_config_parse(c, environ, NULL, NULL);
	if (bad) {
		check(r, "config", "fail",
		      "correct or unset the variable named above "
		      "(liberdma_shim(7))",
		      "an ERDMA_SHIM_* value is invalid: a program would run "
		      "on TCP only");
		return;
	}
	shim_config_describe(c, desc, sizeof(desc));
	check(r, "config", "ok", NULL, "mode=%s%s%s", shim_mode_name(c->mode),
	      desc[0] ? " " : " (all defaults)", desc);
}

static bool doctor_rdma_cm(struct report *r)
{
	const char *p = "/dev/infiniband/rdma_cm";

	if (access(p, F_OK)) {
		check(r, "rdma_cm", "fail",
		      "modprobe rdma_ucm (and the NIC's RDMA driver: erdma, "
		      "mlx5_ib, irdma, or rdma_rxe for soft-RoCE)",
		      "%s missing", p);
		return false;
	}
	if (access(p, R_OK | W_OK)) {
		check(r, "rdma_cm", "fail",
		      "give this user read/write access (rdma-core's udev "
		      "rules: group 'rdma')",
		      "%s not accessible: %s", p, strerror(errno));
		return false;
	}
	check(r, "rdma_cm", "ok", NULL, "%s present, read/write", p);
	return true;
}

static const char *link_name(uint8_t ll, enum ibv_transport_type t)
{
	if (t == IBV_TRANSPORT_IWARP)
		return "iWARP";
	switch (ll) {
	case IBV_LINK_LAYER_ETHERNET:
		return "RoCE";
	case IBV_LINK_LAYER_INFINIBAND:
		return "InfiniBand";
	default:
		return "unknown link";
	}
}

/* Is one of these RDMA devices iWARP? (what the library asks, rsock.c) */
static bool list_has_iwarp(struct ibv_device **list, int n)
{
	for (int i = 0; list && i < n; i++)
		if (list[i]->transport_type == IBV_TRANSPORT_IWARP)
			return true;
	return false;
}

static bool host_has_iwarp(void)
{
	int n = 0;
	struct ibv_device **list = ibv_get_device_list(&n);
	bool iwarp = list_has_iwarp(list, n);

	if (list)
		ibv_free_device_list(list);
	return iwarp;
}

/* eRDMA's driver can present itself as RoCE (compat mode) or iWARP. */
static void erdma_note(struct report *r, const char *dev,
		       enum ibv_transport_type t, unsigned int offset)
{
	char buf[16] = "";
	FILE *f = fopen("/sys/module/erdma/parameters/compat_mode", "r");

	if (f) {
		if (!fgets(buf, sizeof(buf), f))
			buf[0] = '\0';
		fclose(f);
		buf[strcspn(buf, "\n")] = '\0';
	}
	if (t == IBV_TRANSPORT_IWARP && !offset)
		check(r, dev, "warn",
		      "unset ERDMA_SHIM_PORT_OFFSET (iWARP then gets +20000), "
		      "or load erdma with compat_mode=1",
		      "eRDMA in iWARP mode (compat_mode=%s) with port offset "
		      "0: its RDMA listeners share TCP's port space, so an "
		      "rsocket listener on the program's TCP port cannot bind",
		      buf[0] ? buf : "?");
	else
		check(r, dev, "ok", NULL,
		      "eRDMA in %s mode (compat_mode=%s): RDMA listener of "
		      "TCP port P at P+%u",
		      t == IBV_TRANSPORT_IWARP ? "iWARP" : "RoCE (compat)",
		      buf[0] ? buf : "?", offset);
}

static int doctor_ports(struct report *r, struct ibv_device *d,
			unsigned int offset)
{
	const char *name = ibv_get_device_name(d);
	struct ibv_context *ctx = ibv_open_device(d);
	struct ibv_device_attr a;
	int active = 0;

	if (!ctx || ibv_query_device(ctx, &a)) {
		check(r, name, "fail", "check the driver's kernel log (dmesg)",
		      "cannot open or query: %s", strerror(errno));
		if (ctx)
			ibv_close_device(ctx);
		return 0;
	}
	for (int p = 1; p <= a.phys_port_cnt; p++) {
		struct ibv_port_attr pa;
		char pname[64];

		snprintf(pname, sizeof(pname), "%s/%d", name, p);
		if (ibv_query_port(ctx, (uint8_t)p, &pa)) {
			check(r, pname, "fail", NULL, "ibv_query_port: %s",
			      strerror(errno));
			continue;
		}
		active += pa.state == IBV_PORT_ACTIVE;
		check(r, pname, pa.state == IBV_PORT_ACTIVE ? "ok" : "warn",
		      pa.state == IBV_PORT_ACTIVE
			  ? NULL
			  : "bring the port's netdev/link up (ip link set DEV "
			    "up; rdma link show)",
		      "%s, %s, node %s, state %s, mtu %d, fw %s",
		      link_name(pa.link_layer, d->transport_type),
		      d->transport_type == IBV_TRANSPORT_IWARP
			  ? "transport iWARP"
			  : "transport IB",
		      ibv_node_type_str(d->node_type),
		      ibv_port_state_str(pa.state), 128 << pa.active_mtu,
		      a.fw_ver[0] ? a.fw_ver : "-");
	}
	ibv_close_device(ctx);
	if (!strncmp(name, "erdma", 5))
		erdma_note(r, name, d->transport_type, offset);
	else if (d->transport_type == IBV_TRANSPORT_IWARP && !offset)
		check(r, name, "warn",
		      "unset ERDMA_SHIM_PORT_OFFSET (iWARP then gets +20000)",
		      "iWARP shares TCP's port space: with port offset 0 an "
		      "rsocket listener cannot bind the program's TCP port");
	return active;
}

static bool doctor_devices(struct report *r, const struct shim_config *c)
{
	int n = 0, active = 0;
	struct ibv_device **list = ibv_get_device_list(&n);

	if (!list || n == 0) {
		check(
		    r, "devices", "fail",
		    "load the NIC's RDMA driver (erdma, mlx5_ib, irdma...) or "
		    "add soft-RoCE: rdma link add rxe0 type rxe netdev eth0",
		    "no RDMA device (ibv_get_device_list: %d)", n);
		if (list)
			ibv_free_device_list(list);
		return false;
	}
	check(r, "devices", "ok", NULL, "%d RDMA device%s", n,
	      n == 1 ? "" : "s");
	bool iwarp = list_has_iwarp(list, n);
	unsigned int off = shim_port_offset(c, iwarp);

	for (int i = 0; i < n; i++)
		active += doctor_ports(r, list[i], off);
	ibv_free_device_list(list);
	check(r, "port map", "ok", NULL,
	      "%s: a TCP port P is served on RDMA at port P+%u (past 65535: "
	      "wraps to 1)%s",
	      c->port_offset != SHIM_PORT_OFFSET_AUTO ? "ERDMA_SHIM_PORT_OFFSET"
	      : iwarp ? "iWARP device present (TCP's port space)"
		      : "InfiniBand/RoCE (rdma_cm's own port space)",
	      off,
	      c->port_offset == SHIM_PORT_OFFSET_AUTO
		  ? "; peers of the same transport agree on it, a peer of "
		    "the other falls back to TCP"
		  : "; set the same on every host");
	if (!active)
		check(r, "ports", "fail", "bring a port up (see above)",
		      "no active port on any device");
	return active > 0;
}

/* What one connection registers: rsockets' send and receive buffers,
 * each doubled from the configured size (0 = rsockets' own 128 KiB). */
static unsigned long long conn_pinned(const struct shim_config *c)
{
	unsigned long long s = c->sndbuf ? 2ull * c->sndbuf : 128ull << 10;
	unsigned long long rv = c->rcvbuf ? 2ull * c->rcvbuf : 128ull << 10;

	return s + rv;
}

/* RLIMIT_NOFILE: how many RDMA connections ERDMA_SHIM_FD_SHARE lets a
 * process with this shell's limit hold (rsocket_glue/limits.c). */
static void doctor_nofile(struct report *r, const struct shim_config *c)
{
	unsigned long long fit;
	struct rlimit rl;

	if (getrlimit(RLIMIT_NOFILE, &rl)) {
		check(r, "nofile", "warn", NULL, "getrlimit: %s",
		      strerror(errno));
		return;
	}
	fit = shim_fd_share_conns(c, rl.rlim_cur);
	check(r, "nofile", fit < 256 ? "warn" : "ok",
	      fit < 256 ? "raise it: ulimit -n, LimitNOFILE= (systemd), "
			  "--ulimit nofile= (docker); or ERDMA_SHIM_FD_SHARE"
			: NULL,
	      "RLIMIT_NOFILE %llu; %d fds per RDMA connection, %u%% of the "
	      "limit for them (ERDMA_SHIM_FD_SHARE): about %llu RDMA "
	      "connection%s a process, then TCP",
	      (unsigned long long)rl.rlim_cur, SHIM_CONN_FDS, c->fd_share, fit,
	      fit == 1 ? "" : "s");
}

static void doctor_memlock(struct report *r, const struct shim_config *c)
{
	unsigned long long per = conn_pinned(c), fit;
	struct rlimit rl;

	if (getrlimit(RLIMIT_MEMLOCK, &rl)) {
		check(r, "memlock", "warn", NULL, "getrlimit: %s",
		      strerror(errno));
		return;
	}
	if (rl.rlim_cur == RLIM_INFINITY) {
		check(r, "memlock", "ok", NULL,
		      "RLIMIT_MEMLOCK unlimited; %llu KiB registered per "
		      "connection",
		      per >> 10);
		return;
	}
	fit = (unsigned long long)rl.rlim_cur / per;
	check(r, "memlock",
	      fit == 0	 ? "fail"
	      : fit < 16 ? "warn"
			 : "ok",
	      fit < 16 ? "raise it: ulimit -l unlimited, memlock in "
			 "/etc/security/limits.conf, or LimitMEMLOCK=infinity "
			 "(systemd); or lower ERDMA_SHIM_SNDBUF/RCVBUF"
		       : NULL,
	      "RLIMIT_MEMLOCK %llu KiB; %llu KiB registered per connection "
	      "(send %u + receive %u, doubled by rsockets): about %llu "
	      "connection%s fit",
	      (unsigned long long)rl.rlim_cur >> 10, per >> 10, c->sndbuf,
	      c->rcvbuf, fit, fit == 1 ? "" : "s");
}

/* Linux 5.13 copies pinned pages into a fork child (copy-on-fork). */
static bool kernel_has_cof(char *rel, size_t len)
{
	struct utsname u;
	int maj = 0, min = 0;

	if (uname(&u))
		return false;
	snprintf(rel, len, "%s", u.release);
	return sscanf(u.release, "%d.%d", &maj, &min) == 2 &&
	       (maj > 5 || (maj == 5 && min >= 13));
}

static void doctor_fork(struct report *r)
{
	enum ibv_fork_status st = ibv_is_fork_initialized();
	char rel[65];

	if (st == IBV_FORK_UNNEEDED)
		check(r, "fork", "ok", NULL,
		      "kernel copies pinned pages on fork (copy-on-fork): "
		      "registered memory survives a fork");
	else if (kernel_has_cof(rel, sizeof(rel)))
		check(
		    r, "fork", "ok", NULL,
		    "kernel %s >= 5.13 copies pinned pages on fork (libibverbs "
		    "could not confirm it: it checks through a device)",
		    rel);
	else
		check(r, "fork", "warn",
		      "a kernel >= 5.13 has copy-on-fork; else set "
		      "RDMAV_FORK_SAFE=1 for programs that fork while "
		      "connections run",
		      "kernel without copy-on-fork: a fork while an RDMA "
		      "transfer runs can corrupt the parent's buffers (the "
		      "shim disowns RDMA in children)");
}

static int lib_path_cb(struct dl_phdr_info *info, size_t size, void *arg)
{
	char **want = arg;

	(void)size;
	if (strstr(info->dlpi_name, want[0]) && !want[1])
		want[1] = realpath(info->dlpi_name, NULL);
	return 0;
}

/* A library's version: the real file loaded here (.so.1.14.44.0: the same
 * LD_LIBRARY_PATH as the programs'), else dpkg's package's. */
static void lib_version(const char *pkg, const char *soname, char *out,
			size_t len)
{
	char cmd[160], *want[2] = {(char *)soname, NULL};
	FILE *p;

	snprintf(out, len, "unknown");
	dl_iterate_phdr(lib_path_cb, want);
	if (want[1]) {
		snprintf(out, len, "%s", want[1]);
		free(want[1]);
		return;
	}
	snprintf(cmd, sizeof(cmd),
		 "dpkg-query -W -f='${Version}' %s 2>/dev/null", pkg);
	p = popen(cmd, "r");
	if (p) {
		if (!fgets(out, (int)len, p))
			snprintf(out, len, "unknown");
		pclose(p);
	}
}

#define STR_(x) #x
#define STR(x) STR_(x)

/*
 * The librdmacm this command runs on -- the one the library would run on
 * with the same environment (LD_LIBRARY_PATH) -- and the library's mode
 * there: the gate's own code (rsocket_glue/compat.c).
 */
static void doctor_libs(struct report *r)
{
	struct sg_rdmacm cm;
	char verbs[PATH_MAX], mode[320];

	sg_rdmacm_probe(&cm);
	sg_rdmacm_describe(&cm, mode, sizeof(mode));
	lib_version("libibverbs1", "libibverbs.so", verbs, sizeof(verbs));
	if (cm.known)
		check(r, "librdmacm", "ok", NULL,
		      "rdma-core %d.%d (%s), libibverbs %s; mode %s", cm.major,
		      cm.minor, cm.path, verbs, mode);
	else
		check(
		    r, "librdmacm", "fail",
		    "install rdma-core " STR(
			SG_RDMACM_OLDEST_MAJOR) ".0 to " STR(SG_RDMACM_NEWEST_MAJOR) ".x, or point LD_LIBRARY_PATH "
										     "at one",
		    "%s%s (libibverbs %s); mode %s",
		    cm.path[0] ? cm.path : "no librdmacm",
		    cm.major >= 0 ? "" : " (release unknown)", verbs, mode);
}

static int cmd_doctor(int argc, char **argv)
{
	struct report r = {0};
	struct shim_config c;
	bool usable;

	for (int i = 0; i < argc; i++) {
		if (!strcmp(argv[i], "--json")) {
			r.json = true;
		} else {
			usage(stderr);
			return EX_USAGE;
		}
	}
	if (r.json)
		printf("{\n  \"checks\": [");
	doctor_shim(&r);
	doctor_config(&r, &c);
	usable = doctor_rdma_cm(&r);
	usable = doctor_devices(&r, &c) && usable;
	doctor_memlock(&r, &c);
	doctor_nofile(&r, &c);
	doctor_fork(&r);
	doctor_libs(&r);
	usable = usable && !r.fails;
	if (r.json)
		printf("\n  ],\n  \"usable\": %s,\n  \"warnings\": %d,\n  "
		       "\"failures\": %d\n}\n",
		       usable ? "true" : "false", r.warns, r.fails);
	else
		printf("verdict: RDMA %s (%d warning%s, %d failure%s)\n",
		       usable ? "usable" : "NOT usable", r.warns,
		       r.warns == 1 ? "" : "s", r.fails,
		       r.fails == 1 ? "" : "s");
	return usable ? 0 : 1;
}

/* ---- probe ---- */

/* HOST:PORT, [V6]:PORT or V6-literal:PORT (last colon). */
static int resolve(const char *arg, struct sockaddr_storage *ss, socklen_t *len,
		   char *shown, size_t slen)
{
	char host[256], *port;
	struct addrinfo hints = {.ai_socktype = SOCK_STREAM}, *res;
	int e;

	snprintf(host, sizeof(host), "%s", arg);
	port = strrchr(host, ':');
	if (!port || !port[1])
		return -1;
	*port++ = '\0';
	if (host[0] == '[' && host[strlen(host) - 1] == ']') {
		memmove(host, host + 1, strlen(host));
		host[strlen(host) - 1] = '\0';
	}
	e = getaddrinfo(host, port, &hints, &res);
	if (e) {
		fprintf(stderr, "erdma-shim probe: %s: %s\n", arg,
			gai_strerror(e));
		return -2;
	}
	memcpy(ss, res->ai_addr, res->ai_addrlen);
	*len = res->ai_addrlen;
	freeaddrinfo(res);
	getnameinfo((struct sockaddr *)ss, *len, host, sizeof(host), NULL, 0,
		    NI_NUMERICHOST);
	snprintf(shown, slen, ss->ss_family == AF_INET6 ? "[%s]" : "%s", host);
	return 0;
}

static void set_port(struct sockaddr_storage *ss, unsigned int port)
{
	if (ss->ss_family == AF_INET)
		((struct sockaddr_in *)ss)->sin_port = htons((uint16_t)port);
	else
		((struct sockaddr_in6 *)ss)->sin6_port = htons((uint16_t)port);
}

static unsigned int get_port(const struct sockaddr_storage *ss)
{
	return ntohs(ss->ss_family == AF_INET
			 ? ((const struct sockaddr_in *)ss)->sin_port
			 : ((const struct sockaddr_in6 *)ss)->sin6_port);
}

/*
 * The RDMA attempt runs in a child: a blocking rconnect, its errno written
 * to a pipe.  rsockets 44.0 must not rpoll with a finite timeout, and a
 * blocking rconnect can't be abandoned in a thread without librdmacm's exit
 * path waiting on it; a child can simply be killed at the deadline.
 * Returns 0, an errno, or -ETIMEDOUT for our own deadline.
 */
static int probe_rdma(const struct sockaddr_storage *dst, socklen_t len,
		      int timeout_ms)
{
	int pfd[2], err = 0, r;
	pid_t pid;

	if (pipe2(pfd, O_CLOEXEC))
		return errno;
	pid = fork();
	if (pid < 0)
		return errno;
	if (pid == 0) {
		int rs = rsocket(dst->ss_family, SOCK_STREAM, 0);

		err = rs < 0						? errno
		      : rconnect(rs, (const struct sockaddr *)dst, len) ? errno
									: 0;
		if (err == 0)
			rclose(rs);
		if (write(pfd[1], &err, sizeof(err)) != sizeof(err))
			_exit(1);
		_exit(0);
	}
	close(pfd[1]);
	struct pollfd p = {.fd = pfd[0], .events = POLLIN};

	do {
		r = poll(&p, 1, timeout_ms);
	} while (r < 0 && errno == EINTR);
	if (r == 1 && read(pfd[0], &err, sizeof(err)) == sizeof(err)) {
		/* answered */
	} else {
		err = -ETIMEDOUT;
		kill(pid, SIGKILL);
	}
	close(pfd[0]);
	waitpid(pid, NULL, 0);
	return err;
}

/* Kernel TCP connect bounded by timeout_ms: 0, an errno, or -ETIMEDOUT. */
static int probe_tcp(const struct sockaddr_storage *dst, socklen_t len,
		     int timeout_ms)
{
	int fd = socket(dst->ss_family,
			SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	struct pollfd p = {.fd = fd, .events = POLLOUT};
	int err = 0, r;
	socklen_t el = sizeof(err);

	if (fd < 0)
		return errno;
	if (connect(fd, (const struct sockaddr *)dst, len) == 0)
		goto out;
	if (errno != EINPROGRESS) {
		err = errno;
		goto out;
	}
	do {
		r = poll(&p, 1, timeout_ms);
	} while (r < 0 && errno == EINTR);
	if (r == 0)
		err = -ETIMEDOUT;
	else if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &el))
		err = errno;
out:
	close(fd);
	return err;
}

static const char *probe_word(int err)
{
	switch (err) {
	case 0:
		return "ok";
	case ECONNREFUSED:
		return "refused";
	case -ETIMEDOUT:
	case ETIMEDOUT:
		return "timeout";
	default:
		return "error";
	}
}

static int cmd_probe(int argc, char **argv)
{
	const char *target = NULL, *env = getenv("ERDMA_SHIM_PORT_OFFSET");
	int timeout = 3000, offset = env ? atoi(env) : -1, rerr, terr;
	struct sockaddr_storage dst, rdst;
	char shown[300];
	socklen_t len;
	double t0, trdma, ttcp;

	for (int i = 0; i < argc; i++) {
		if (!strcmp(argv[i], "--timeout") && i + 1 < argc)
			timeout = atoi(argv[++i]);
		else if (!strcmp(argv[i], "--port-offset") && i + 1 < argc)
			offset = atoi(argv[++i]);
		else if (argv[i][0] != '-' && !target)
			target = argv[i];
		else
			target = NULL, argc = -1;
	}
	if (!target || timeout <= 0 || offset < -1 || offset > 65535) {
		usage(stderr);
		return EX_USAGE;
	}
	if (resolve(target, &dst, &len, shown, sizeof(shown)))
		return EX_USAGE;
	if (!get_port(&dst)) {
		fprintf(stderr, "erdma-shim probe: port 0\n");
		return EX_USAGE;
	}
	if (offset < 0) { /* unset: the library's rule, by transport */
		struct shim_config d;

		shim_config_defaults(&d);
		offset = (int)shim_port_offset(&d, host_has_iwarp());
		if (offset)
			printf("port map: +%d (iWARP device present: the "
			       "RDMA listener of port P is at P+%d)\n",
			       offset, offset);
	}
	rdst = dst;
	set_port(&rdst, shim_port_map(get_port(&dst), (unsigned int)offset));

	t0 = now_ms();
	rerr = probe_rdma(&rdst, len, timeout);
	trdma = now_ms() - t0;
	t0 = now_ms();
	terr = probe_tcp(&dst, len, timeout);
	ttcp = now_ms() - t0;

	printf("rdma %s:%u %s (%.1f ms)%s%s\n", shown, get_port(&rdst),
	       probe_word(rerr), trdma, rerr > 0 ? ": " : "",
	       rerr > 0 ? strerror(rerr) : "");
	printf("tcp  %s:%u %s (%.1f ms)%s%s\n", shown, get_port(&dst),
	       probe_word(terr), ttcp, terr > 0 ? ": " : "",
	       terr > 0 ? strerror(terr) : "");
	if (!rerr) {
		printf("verdict: an RDMA listener answers: a shimmed client "
		       "will use RDMA\n");
		return 0;
	}
	if (rerr == ENODEV || rerr == ENOENT) {
		printf("verdict: no RDMA device on this host (run erdma-shim "
		       "doctor); TCP %s\n",
		       terr ? "does not answer either" : "answers");
		return terr ? 2 : 1;
	}
	if (!terr) {
		printf("verdict: no RDMA listener (TCP answers): a shimmed "
		       "client falls back to TCP; is the server running with "
		       "liberdma_shim%s?\n",
		       offset ? " and the same ERDMA_SHIM_PORT_OFFSET" : "");
		return 1;
	}
	printf("verdict: nothing answers on RDMA or TCP\n");
	return 2;
}

/* ---- stat ---- */

struct tcp_bytes {
	uint64_t ino, in, out;
	uint8_t state;
};

struct diag {
	struct tcp_bytes *v;
	size_t n, cap;
};

static void diag_add(struct diag *d, const struct inet_diag_msg *m, int len)
{
	struct tcp_info ti;
	struct rtattr *a = (struct rtattr *)(m + 1);
	int rem = len - (int)NLMSG_ALIGN(sizeof(*m));

	memset(&ti, 0, sizeof(ti));
	for (; RTA_OK(a, rem); a = RTA_NEXT(a, rem))
		if (a->rta_type == INET_DIAG_INFO) {
			size_t l = RTA_PAYLOAD(a);

			memcpy(&ti, RTA_DATA(a),
			       l < sizeof(ti) ? l : sizeof(ti));
		}
	if (d->n == d->cap) {
		size_t cap = d->cap ? d->cap * 2 : 256;
		struct tcp_bytes *v = realloc(d->v, cap * sizeof(*v));

		if (!v)
			return;
		d->v = v;
		d->cap = cap;
	}
	d->v[d->n++] = (struct tcp_bytes){
	    .ino = m->idiag_inode,
	    .in = ti.tcpi_bytes_received,
	    .out = ti.tcpi_bytes_sent - ti.tcpi_bytes_retrans,
	    .state = m->idiag_state,
	};
}

/* Every TCP socket's byte counts, from the kernel (sock_diag, as ss -ti). */
static void diag_dump(struct diag *d, int family)
{
	struct {
		struct nlmsghdr nlh;
		struct inet_diag_req_v2 r;
	} req = {
	    .nlh = {.nlmsg_len = sizeof(req),
		    .nlmsg_type = SOCK_DIAG_BY_FAMILY,
		    .nlmsg_flags = NLM_F_REQUEST | NLM_F_DUMP},
	    .r = {.sdiag_family = (uint8_t)family,
		  .sdiag_protocol = IPPROTO_TCP,
		  .idiag_states = ~0u,
		  .idiag_ext = 1 << (INET_DIAG_INFO - 1)},
	};
	static char buf[65536];
	int fd = socket(AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC, NETLINK_SOCK_DIAG);
	bool done = false;

	if (fd < 0)
		return;
	if (send(fd, &req, sizeof(req), 0) != sizeof(req))
		done = true;
	while (!done) {
		ssize_t n = recv(fd, buf, sizeof(buf), 0);
		struct nlmsghdr *h = (struct nlmsghdr *)buf;

		if (n <= 0)
			break;
		for (; NLMSG_OK(h, (size_t)n); h = NLMSG_NEXT(h, n)) {
			if (h->nlmsg_type == NLMSG_DONE ||
			    h->nlmsg_type == NLMSG_ERROR) {
				done = true;
				break;
			}
			diag_add(d, NLMSG_DATA(h),
				 (int)(h->nlmsg_len - NLMSG_LENGTH(0)));
		}
	}
	close(fd);
}

static const struct tcp_bytes *diag_find(const struct diag *d, uint64_t ino)
{
	for (size_t i = 0; i < d->n; i++)
		if (d->v[i].ino == ino)
			return &d->v[i];
	return NULL;
}

/*
 * A socket's byte counts through a copy of the owner's fd (pidfd_getfd,
 * Linux 5.6; needs ptrace rights over pid).  The fallback when sock_diag
 * has no answer (its tcp_diag module not loaded and not loadable).
 */
static bool bytes_via_pidfd(int pid, int fd, uint64_t ino, struct tcp_bytes *tb)
{
	int pfd = (int)syscall(SYS_pidfd_open, pid, 0), sfd;
	struct tcp_info ti;
	socklen_t tl = sizeof(ti);
	struct stat sb;
	bool ok = false;

	if (pfd < 0)
		return false;
	sfd = (int)syscall(SYS_pidfd_getfd, pfd, fd, 0);
	close(pfd);
	if (sfd < 0)
		return false;
	memset(&ti, 0, sizeof(ti));
	if (fstat(sfd, &sb) == 0 && (uint64_t)sb.st_ino == ino &&
	    getsockopt(sfd, IPPROTO_TCP, TCP_INFO, &ti, &tl) == 0) {
		*tb = (struct tcp_bytes){
		    .ino = ino,
		    .in = ti.tcpi_bytes_received,
		    .out = ti.tcpi_bytes_sent - ti.tcpi_bytes_retrans,
		    .state = ti.tcpi_state,
		};
		ok = true;
	}
	close(sfd);
	return ok;
}

/* Is fd of pid still the socket the slot was filled for?  -1: can't tell
 * (another user's process). */
static int fd_is(int pid, int fd, uint64_t ino)
{
	char path[64], link[64], want[40];
	ssize_t n;

	snprintf(path, sizeof(path), "/proc/%d/fd/%d", pid, fd);
	n = readlink(path, link, sizeof(link) - 1);
	if (n < 0)
		return errno == ENOENT ? 0 : -1;
	link[n] = '\0';
	snprintf(want, sizeof(want), "socket:[%llu]", (unsigned long long)ino);
	return !strcmp(link, want);
}

/* Does pid still map its segment?  After an exec (same pid) it doesn't. */
static int maps_segment(int pid)
{
	char path[64], line[512], name[64];
	FILE *f;
	int found = 0;

	snprintf(path, sizeof(path), "/proc/%d/maps", pid);
	snprintf(name, sizeof(name), ERDMA_STAT_PREFIX "%d", pid);
	f = fopen(path, "r");
	if (!f)
		return -1;
	while (!found && fgets(line, sizeof(line), f))
		found = strstr(line, name) != NULL;
	fclose(f);
	return found;
}

/* A consistent copy of a slot (seqlock reader); false if free/unreadable. */
static bool slot_read(const struct erdma_stat_slot *sl,
		      struct erdma_stat_slot *out)
{
	for (int tries = 0; tries < 1000; tries++) {
		uint32_t s1 = __atomic_load_n(&sl->seq, __ATOMIC_ACQUIRE);

		if (s1 & 1)
			continue;
		memcpy(out, (const void *)sl, sizeof(*out));
		__atomic_thread_fence(__ATOMIC_ACQUIRE);
		if (__atomic_load_n(&sl->seq, __ATOMIC_RELAXED) == s1)
			return out->path > 0;
	}
	return false;
}

/*
 * Slot i of h as stat shows it: false if free, or a kernel slot whose fd is
 * no longer that socket (the library reaps those lazily).  *tb: a TCP
 * connection's kernel byte counts (in *own if read through pidfd), NULL if
 * not known or not TCP.
 */
static bool slot_view(const struct erdma_stat_hdr *h, unsigned int i,
		      const struct diag *d, struct erdma_stat_slot *s,
		      struct tcp_bytes *own, const struct tcp_bytes **tb)
{
	*tb = NULL;
	if (!slot_read(&h->slot[i], s))
		return false;
	s->reason[sizeof(s->reason) - 1] = '\0';
	if (s->path != ERDMA_PATH_RDMA && s->path != ERDMA_PATH_LISTEN &&
	    fd_is(h->pid, s->fd, s->ino) == 0)
		return false;
	if (s->path == ERDMA_PATH_TCP) {
		*tb = diag_find(d, s->ino);
		if (!*tb && bytes_via_pidfd(h->pid, s->fd, s->ino, own))
			*tb = own;
	}
	return true;
}

static void conn_out(bool json, int n, int pid, const struct erdma_stat_slot *s,
		     const struct tcp_bytes *tb)
{
	char la[64], pa[64];
	bool rdma = s->path == ERDMA_PATH_RDMA;
	bool known = rdma || tb;
	unsigned long long in = rdma ? s->bytes_in : tb ? tb->in : 0;
	unsigned long long out = rdma ? s->bytes_out : tb ? tb->out : 0;

	erdma_stat_addr_text(&s->local, la, sizeof(la));
	erdma_stat_addr_text(&s->peer, pa, sizeof(pa));
	if (json) {
		printf("%s\n      {\"fd\": %d, \"path\": \"%s\", \"local\": "
		       "\"%s\", \"peer\": \"%s\", ",
		       n ? "," : "", s->fd, erdma_stat_path_name(s->path), la,
		       pa);
		if (known)
			printf("\"bytes_in\": %llu, \"bytes_out\": %llu, ", in,
			       out);
		else
			printf("\"bytes_in\": null, \"bytes_out\": null, ");
		if (rdma)
			printf("\"msgs_in\": %llu, \"msgs_out\": %llu, ",
			       (unsigned long long)s->msgs_in,
			       (unsigned long long)s->msgs_out);
		else
			printf("\"msgs_in\": null, \"msgs_out\": null, ");
		printf("\"reason\": ");
		json_str(stdout, s->reason);
		printf("}");
		return;
	}
	char bi[24] = "-", bo[24] = "-", mi[24] = "-", mo[24] = "-";

	if (known) {
		snprintf(bi, sizeof(bi), "%llu", in);
		snprintf(bo, sizeof(bo), "%llu", out);
	}
	if (rdma) {
		snprintf(mi, sizeof(mi), "%llu",
			 (unsigned long long)s->msgs_in);
		snprintf(mo, sizeof(mo), "%llu",
			 (unsigned long long)s->msgs_out);
	}
	printf("%7d %4d  %-10s %-24s %-24s %12s %12s %8s %8s  %s\n", pid, s->fd,
	       erdma_stat_path_name(s->path), la, pa, bi, bo, mi, mo,
	       s->reason);
}

static void proc_out(bool json, bool first, const struct erdma_stat_hdr *h,
		     const struct diag *d)
{
	static const char *const rdma[] = {"unknown", "available",
					   "not available"};
	struct erdma_stat_slot s;
	struct tcp_bytes own;
	int n = 0;

	if (json) {
		printf("%s\n  {\"pid\": %d, \"comm\": ", first ? "" : ",",
		       h->pid);
		json_str(stdout, h->comm);
		printf(", \"shim_version\": ");
		json_str(stdout, h->shim_version);
		printf(", \"mode\": ");
		json_str(stdout, h->mode);
		printf(
		    ", \"rdma\": \"%s\", \"since\": %llu,\n    \"totals\": "
		    "{\"rdma\": %llu, \"tcp\": %llu, \"listen\": %llu, "
		    "\"listen_tcp\": %llu, \"not_counted\": %llu, "
		    "\"closed_rdma_bytes_in\": %llu, "
		    "\"closed_rdma_bytes_out\": %llu},\n    \"connections\": [",
		    rdma[h->rdma_state < 3 ? h->rdma_state : 0],
		    (unsigned long long)h->started,
		    (unsigned long long)h->n_rdma, (unsigned long long)h->n_tcp,
		    (unsigned long long)h->n_listen,
		    (unsigned long long)h->n_listen_tcp,
		    (unsigned long long)h->n_untracked,
		    (unsigned long long)h->closed_bytes_in,
		    (unsigned long long)h->closed_bytes_out);
	} else {
		printf("pid %d (%.31s): liberdma_shim %.15s, mode %.15s, RDMA "
		       "%s; since start: %llu rdma, %llu tcp connections, %llu "
		       "listeners\n",
		       h->pid, h->comm, h->shim_version, h->mode,
		       rdma[h->rdma_state < 3 ? h->rdma_state : 0],
		       (unsigned long long)h->n_rdma,
		       (unsigned long long)h->n_tcp,
		       (unsigned long long)(h->n_listen + h->n_listen_tcp));
		printf("%7s %4s  %-10s %-24s %-24s %12s %12s %8s %8s  %s\n",
		       "PID", "FD", "PATH", "LOCAL", "PEER", "BYTES_IN",
		       "BYTES_OUT", "MSGS_IN", "MSGS_OUT", "REASON");
	}
	for (unsigned int i = 0; i < h->nslots; i++) {
		const struct tcp_bytes *tb;

		if (slot_view(h, i, d, &s, &own, &tb))
			conn_out(json, n++, h->pid, &s, tb);
	}
	if (json)
		printf("%s]}", n ? "\n    " : "");
}

/* ---- stat --prometheus: text exposition format 0.0.4 ---- */

/* Open connections (or listeners) of one path with one reason. */
struct prom_group {
	int path;
	unsigned long long n;
	char reason[sizeof(((struct erdma_stat_slot *)0)->reason)];
};

/* One process, summed per path, copied out of its segment. */
struct prom_proc {
	struct erdma_stat_hdr h; /* the header only (no slots) */
	/* [path]: bytes/messages in and out of the open connections */
	unsigned long long in[5], out[5], min[5], mout[5];
	struct prom_group *g;
	size_t ng;
};

static void prom_add(struct prom_proc *p, const struct erdma_stat_slot *s,
		     const struct tcp_bytes *tb)
{
	size_t i;

	if (s->path == ERDMA_PATH_RDMA) {
		p->in[s->path] += s->bytes_in;
		p->out[s->path] += s->bytes_out;
		p->min[s->path] += s->msgs_in;
		p->mout[s->path] += s->msgs_out;
	} else if (tb) {
		p->in[s->path] += tb->in;
		p->out[s->path] += tb->out;
	}
	for (i = 0; i < p->ng; i++)
		if (p->g[i].path == s->path &&
		    !strcmp(p->g[i].reason, s->reason))
			break;
	if (i == p->ng) {
		/* at most one group per slot: g has h.nslots entries */
		p->g[i].path = s->path;
		p->g[i].n = 0;
		snprintf(p->g[i].reason, sizeof(p->g[i].reason), "%s",
			 s->reason);
		p->ng++;
	}
	p->g[i].n++;
}

/* A label value: \, " and newline escaped; other control bytes and
 * non-ASCII bytes (comm is any bytes) as '?', so the value is UTF-8. */
static void prom_label(const char *name, const char *v, size_t max)
{
	printf("%s=\"", name);
	for (size_t i = 0; i < max && v[i]; i++) {
		unsigned char c = (unsigned char)v[i];

		if (c == '\\' || c == '"')
			printf("\\%c", c);
		else if (c == '\n')
			printf("\\n");
		else
			putchar(c < 0x20 || c >= 0x7f ? '?' : c);
	}
	putchar('"');
}

/* name{pid="..",comm=".." and a path label if path >= 0 */
static void prom_series(const char *name, const struct prom_proc *p, int path)
{
	printf("%s{pid=\"%d\",", name, p->h.pid);
	prom_label("comm", p->h.comm, sizeof(p->h.comm));
	if (path >= 0) {
		putchar(',');
		prom_label("path", erdma_stat_path_name(path), 16);
	}
}

static void prom_family(const char *name, const char *type, const char *help)
{
	printf("# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
}

/* bytes/messages in or out per path: which: 0 in, 1 out, 2 msgs in,
 * 3 msgs out; RDMA bytes include closed connections. */
static void prom_traffic(const struct prom_proc *v, int n, const char *name,
			 const char *help, int which)
{
	prom_family(name, "counter", help);
	for (int i = 0; i < n; i++) {
		const struct prom_proc *p = &v[i];

		for (int path = ERDMA_PATH_RDMA; path <= ERDMA_PATH_TCP;
		     path++) {
			unsigned long long x = which == 0   ? p->in[path]
					       : which == 1 ? p->out[path]
					       : which == 2 ? p->min[path]
							    : p->mout[path];

			if (which >= 2 && path != ERDMA_PATH_RDMA)
				continue; /* TCP messages are not known */
			if (path == ERDMA_PATH_RDMA && which == 0)
				x += p->h.closed_bytes_in;
			if (path == ERDMA_PATH_RDMA && which == 1)
				x += p->h.closed_bytes_out;
			prom_series(name, p, path);
			printf("} %llu\n", x);
		}
	}
}

/* Open connections (listeners: lst) by path and reason. */
static void prom_open(const struct prom_proc *v, int n, const char *name,
		      const char *help, bool lst)
{
	prom_family(name, "gauge", help);
	for (int i = 0; i < n; i++)
		for (size_t j = 0; j < v[i].ng; j++) {
			const struct prom_group *g = &v[i].g[j];
			bool is_lst = g->path == ERDMA_PATH_LISTEN ||
				      g->path == ERDMA_PATH_LISTEN_TCP;

			if (is_lst != lst)
				continue;
			prom_series(name, &v[i], g->path);
			putchar(',');
			prom_label("reason", g->reason, sizeof(g->reason));
			printf("} %llu\n", g->n);
		}
}

/* Totals since the table was made, per path (two paths from a..b). */
static void prom_since(const struct prom_proc *v, int n, const char *name,
		       const char *help, int a)
{
	prom_family(name, "counter", help);
	for (int i = 0; i < n; i++)
		for (int path = a; path <= a + 1; path++) {
			const struct erdma_stat_hdr *h = &v[i].h;
			unsigned long long x =
			    path == ERDMA_PATH_RDMA	? h->n_rdma
			    : path == ERDMA_PATH_TCP	? h->n_tcp
			    : path == ERDMA_PATH_LISTEN ? h->n_listen
							: h->n_listen_tcp;

			prom_series(name, &v[i], path);
			printf("} %llu\n", x);
		}
}

static void prom_out(const struct prom_proc *v, int n)
{
	static const char *const rdma[] = {"unknown", "available",
					   "not available"};

	prom_family("erdma_shim_processes", "gauge",
		    "Processes running with liberdma_shim's statistics "
		    "table (/dev/shm/erdma-shim.PID) readable by this user.");
	printf("erdma_shim_processes %d\n", n);
	prom_family("erdma_shim_process_info", "gauge",
		    "A shimmed process (always 1): library version, mode "
		    "(ERDMA_SHIM) and whether RDMA is available to it.");
	for (int i = 0; i < n; i++) {
		const struct erdma_stat_hdr *h = &v[i].h;

		prom_series("erdma_shim_process_info", &v[i], -1);
		putchar(',');
		prom_label("version", h->shim_version, sizeof(h->shim_version));
		putchar(',');
		prom_label("mode", h->mode, sizeof(h->mode));
		putchar(',');
		prom_label("rdma", rdma[h->rdma_state < 3 ? h->rdma_state : 0],
			   16);
		printf("} 1\n");
	}
	prom_family("erdma_shim_stats_since_seconds", "gauge",
		    "When the process's statistics table was made (its first "
		    "connection), Unix time.");
	for (int i = 0; i < n; i++) {
		prom_series("erdma_shim_stats_since_seconds", &v[i], -1);
		printf("} %llu\n", (unsigned long long)v[i].h.started);
	}
	prom_traffic(v, n, "erdma_shim_received_bytes_total",
		     "Bytes received, per path. rdma: counted by the shim, "
		     "closed connections included. tcp: the kernel's "
		     "tcp_info of the connections open now (a closed one "
		     "leaves the sum).",
		     0);
	prom_traffic(v, n, "erdma_shim_sent_bytes_total",
		     "Bytes sent, per path. rdma: counted by the shim, closed "
		     "connections included. tcp: the kernel's tcp_info of the "
		     "connections open now (a closed one leaves the sum).",
		     1);
	prom_traffic(v, n, "erdma_shim_received_messages_total",
		     "Receive calls that moved at least one byte, RDMA "
		     "connections open now (TCP: not counted).",
		     2);
	prom_traffic(v, n, "erdma_shim_sent_messages_total",
		     "Send calls that moved at least one byte, RDMA "
		     "connections open now (TCP: not counted).",
		     3);
	prom_open(v, n, "erdma_shim_connections",
		  "Open connections by path (rdma, tcp) and, for tcp, why "
		  "the connection is not on RDMA.",
		  false);
	prom_since(v, n, "erdma_shim_connections_total",
		   "Connections made or accepted since the table was made, "
		   "per path.",
		   ERDMA_PATH_RDMA);
	prom_open(v, n, "erdma_shim_listeners",
		  "Open listeners by path (listen: TCP and RDMA, listen-tcp: "
		  "TCP only) and, for listen-tcp, why.",
		  true);
	prom_since(v, n, "erdma_shim_listeners_total",
		   "Listeners made since the table was made, per path.",
		   ERDMA_PATH_LISTEN);
	prom_family("erdma_shim_untracked_connections_total", "counter",
		    "Connections the full table could not list (not in the "
		    "other metrics).");
	for (int i = 0; i < n; i++) {
		prom_series("erdma_shim_untracked_connections_total", &v[i],
			    -1);
		printf("} %llu\n", (unsigned long long)v[i].h.n_untracked);
	}
}

/* Sum h's open connections into p (p->g: room for h->nslots groups). */
static void prom_take(struct prom_proc *p, const struct erdma_stat_hdr *h,
		      const struct diag *d)
{
	struct erdma_stat_slot s;
	struct tcp_bytes own;

	memcpy(&p->h, (const void *)h, sizeof(p->h));
	for (unsigned int i = 0; i < h->nslots; i++) {
		const struct tcp_bytes *tb;

		if (slot_view(h, i, d, &s, &own, &tb))
			prom_add(p, &s, tb);
	}
}

/* Map /dev/shm/erdma-shim.PID read-only; NULL (and why) if not usable. */
static const struct erdma_stat_hdr *seg_open(int pid, bool *stale)
{
	char path[64];
	struct stat sb;
	void *p;
	int fd, m;

	*stale = false;
	snprintf(path, sizeof(path), ERDMA_STAT_PREFIX "%d", pid);
	if (kill(pid, 0) && errno == ESRCH) {
		*stale = unlink(path) == 0;
		return NULL;
	}
	m = maps_segment(pid);
	if (m == 0) {
		*stale = unlink(path) == 0; /* the process exec'd away */
		return NULL;
	}
	fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
	if (fd < 0)
		return NULL;
	if (fstat(fd, &sb) || (size_t)sb.st_size < ERDMA_STAT_SIZE) {
		close(fd);
		return NULL;
	}
	p = mmap(NULL, ERDMA_STAT_SIZE, PROT_READ, MAP_SHARED, fd, 0);
	close(fd);
	if (p == MAP_FAILED)
		return NULL;
	const struct erdma_stat_hdr *h = p;

	if (__atomic_load_n(&h->magic, __ATOMIC_ACQUIRE) != ERDMA_STAT_MAGIC ||
	    h->version != ERDMA_STAT_VERSION || h->nslots != ERDMA_STAT_SLOTS ||
	    h->slot_size != sizeof(struct erdma_stat_slot) || h->pid != pid) {
		munmap(p, ERDMA_STAT_SIZE);
		return NULL;
	}
	return h;
}

static int pid_list(int **out)
{
	DIR *d = opendir("/dev/shm");
	struct dirent *e;
	int n = 0, cap = 0, *v = NULL;
	const char *pre = ERDMA_STAT_PREFIX + strlen("/dev/shm/");

	if (!d)
		return 0;
	while ((e = readdir(d))) {
		const char *s = e->d_name;
		char *end;
		long pid;

		if (strncmp(s, pre, strlen(pre)))
			continue;
		pid = strtol(s + strlen(pre), &end, 10);
		if (*end || pid <= 0)
			continue;
		if (n == cap) {
			int *nv = realloc(
			    v, (size_t)(cap = cap ? cap * 2 : 16) * sizeof(*v));

			if (!nv)
				break;
			v = nv;
		}
		v[n++] = (int)pid;
	}
	closedir(d);
	*out = v;
	return n;
}

static int cmd_stat(int argc, char **argv)
{
	bool json = false, prom = false, stale;
	int one = 0, *pids = NULL, n, shown = 0;
	struct diag d = {0};
	struct prom_proc *pv = NULL;

	for (int i = 0; i < argc; i++) {
		char *end;

		if (!strcmp(argv[i], "--json")) {
			json = true;
			continue;
		}
		if (!strcmp(argv[i], "--prometheus")) {
			prom = true;
			continue;
		}
		one = (int)strtol(argv[i], &end, 10);
		if (*end || one <= 0) {
			usage(stderr);
			return EX_USAGE;
		}
	}
	if (json && prom) {
		usage(stderr);
		return EX_USAGE;
	}
	if (one) {
		pids = malloc(sizeof(*pids));
		if (!pids)
			return 1;
		pids[0] = one;
		n = 1;
	} else {
		n = pid_list(&pids);
	}
	if (prom && n && !(pv = calloc((size_t)n, sizeof(*pv)))) {
		free(pids);
		return 1;
	}
	diag_dump(&d, AF_INET);
	diag_dump(&d, AF_INET6);
	if (json)
		printf("[");
	for (int i = 0; i < n; i++) {
		const struct erdma_stat_hdr *h = seg_open(pids[i], &stale);

		if (stale)
			fprintf(stderr,
				"erdma-shim stat: removed the stale segment of "
				"pid %d (no longer running with the shim)\n",
				pids[i]);
		if (!h)
			continue;
		if (prom) {
			pv[shown].g = calloc(h->nslots, sizeof(*pv[shown].g));
			if (!pv[shown].g) {
				munmap((void *)h, ERDMA_STAT_SIZE);
				continue;
			}
			prom_take(&pv[shown], h, &d);
		} else {
			proc_out(json, !shown, h, &d);
		}
		munmap((void *)h, ERDMA_STAT_SIZE);
		shown++;
	}
	if (prom) {
		prom_out(pv, shown);
		for (int i = 0; i < shown; i++)
			free(pv[i].g);
		free(pv);
	} else if (json)
		printf("%s]\n", shown ? "\n" : "");
	else if (!shown && !one)
		printf("no process is running with liberdma_shim's statistics "
		       "(ERDMA_SHIM_STATS_SHM=1, the default, and at least one "
		       "connection)\n");
	free(pids);
	free(d.v);
	if (one && !shown) {
		fprintf(stderr,
			"erdma-shim stat: pid %d: no statistics (not running "
			"with liberdma_shim, no connection yet, or "
			"ERDMA_SHIM_STATS_SHM=0)\n",
			one);
		return 1;
	}
	return 0;
}

/* ---- main ---- */

/* Run without the shim: re-exec with liberdma_shim.so taken out of
 * LD_PRELOAD (the CLI's own connects must be what they say). */
static void drop_shim_preload(char **argv)
{
	const char *pl = getenv("LD_PRELOAD");
	char *copy, *tok, *save = NULL, out[4096] = "";

	if (!preload_has_shim(pl) || getenv("ERDMA_SHIM_CLI_REEXEC"))
		return;
	copy = strdup(pl);
	if (!copy)
		return;
	for (tok = strtok_r(copy, ": ", &save); tok;
	     tok = strtok_r(NULL, ": ", &save))
		if (!strstr(tok, LIB_NAME) &&
		    strlen(out) + strlen(tok) + 2 < sizeof(out))
			strcat(strcat(out, out[0] ? ":" : ""), tok);
	free(copy);
	if (out[0])
		setenv("LD_PRELOAD", out, 1);
	else
		unsetenv("LD_PRELOAD");
	setenv("ERDMA_SHIM_CLI_REEXEC", "1", 1);
	execv("/proc/self/exe", argv);
}

int main(int argc, char **argv)
{
	if (argc < 2) {
		usage(stderr);
		return EX_USAGE;
	}
	if (strcmp(argv[1], "run"))
		drop_shim_preload(argv);
	unsetenv("ERDMA_SHIM_CLI_REEXEC");
	if (!strcmp(argv[1], "run"))
		return cmd_run(argc - 2, argv + 2);
	if (!strcmp(argv[1], "doctor"))
		return cmd_doctor(argc - 2, argv + 2);
	if (!strcmp(argv[1], "probe"))
		return cmd_probe(argc - 2, argv + 2);
	if (!strcmp(argv[1], "stat"))
		return cmd_stat(argc - 2, argv + 2);
	if (!strcmp(argv[1], "--version")) {
		printf("erdma-shim %s\n", SHIM_VERSION);
		return 0;
	}
	if (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h")) {
		usage(stdout);
		return 0;
	}
	usage(stderr);
	return EX_USAGE;
}
