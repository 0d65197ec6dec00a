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
#include "stat.h"

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

/* Each subcommand's usage: its synopsis (first line) and its options.
 * `erdma-shim help SUB`, `erdma-shim SUB --help` print it on stdout; a
 * usage error prints its message, the fix, and the synopsis on stderr. */
struct sub_help {
	const char *name, *synopsis, *options;
};

static const struct sub_help sub_helps[] = {
    {"run",
     "erdma-shim run [--allow RULES] [--deny RULES] [--accept-from RULES]\n"
     "                      [--require] [--log LEVEL] [--stats] [--lib PATH]\n"
     "                      [--] CMD [ARGS...]",
     "Run CMD with liberdma_shim.so preloaded.  The first word that is not\n"
     "an option starts CMD; put -- first if CMD itself starts with -.\n"
     "  --allow RULES   only these destinations use RDMA (ERDMA_SHIM_ALLOW;\n"
     "                  CIDR[:port[-port]], [v6]:port, *:port, "
     "comma-separated)\n"
     "  --deny RULES    these never use RDMA (ERDMA_SHIM_DENY)\n"
     "  --accept-from RULES\n"
     "                  a listener accepts RDMA only from these clients, the\n"
     "                  port being its TCP port (ERDMA_SHIM_ACCEPT_FROM)\n"
     "  --require       a connect that can't use RDMA fails "
     "(ERDMA_SHIM=require)\n"
     "  --log LEVEL     error, warn, info or debug (ERDMA_SHIM_LOG)\n"
     "  --stats         a connection summary in the log at exit\n"
     "  --lib PATH      the library to preload (default: found beside "
     "erdma-shim)\n"},
    {"doctor", "erdma-shim doctor [--json]",
     "Is RDMA usable here?  One line per check (ok, warn, fail) with a fix;\n"
     "exit 0 when usable, 1 when not.\n"
     "  --json          the same as JSON\n"},
    {"probe", "erdma-shim probe HOST:PORT [--timeout MS] [--port-offset N]",
     "Does an RDMA (shimmed) listener answer at HOST:PORT's RDMA twin port,\n"
     "and TCP at PORT?  Exit 0: RDMA; 1: TCP only; 2: nothing.\n"
     "  HOST:PORT       e.g. 10.0.0.2:50051 or [fd00::2]:50051\n"
     "  --timeout MS    give up after MS milliseconds (default 3000)\n"
     "  --port-offset N the twin port offset (default: as the library, by\n"
     "                  transport, or ERDMA_SHIM_PORT_OFFSET)\n"},
    {"stat", "erdma-shim stat [PID] [--json | --prometheus]",
     "The connections of running shimmed processes (all, or PID's): path\n"
     "rdma or tcp, addresses, bytes, and why a connection is on TCP.\n"
     "  --json          as JSON\n"
     "  --prometheus    per-process totals in Prometheus' text format\n"},
};

static const struct sub_help *sub_help_of(const char *name)
{
	for (size_t i = 0; i < sizeof(sub_helps) / sizeof(sub_helps[0]); i++)
		if (!strcmp(sub_helps[i].name, name))
			return &sub_helps[i];
	return NULL;
}

static void usage(FILE *f)
{
	fprintf(f, "usage: %s\n", sub_helps[0].synopsis);
	for (size_t i = 1; i < sizeof(sub_helps) / sizeof(sub_helps[0]); i++)
		fprintf(f, "       %s\n", sub_helps[i].synopsis);
	fprintf(f, "       erdma-shim help [COMMAND] | --version | --help\n"
		   "See erdma-shim(1) and liberdma_shim(7).\n");
}

/* `erdma-shim help SUB` and `SUB --help`: SUB's usage on stdout, exit 0. */
static int sub_usage(const char *name)
{
	const struct sub_help *h = sub_help_of(name);

	printf("usage: %s\n\n%sSee erdma-shim(1).\n", h->synopsis, h->options);
	return 0;
}

static bool is_help(const char *a)
{
	return !strcmp(a, "--help") || !strcmp(a, "-h");
}

/* A usage error of SUB: "erdma-shim SUB: what was wrong (the fix)", then
 * SUB's synopsis; exit status EX_USAGE. */
static int __attribute__((format(printf, 2, 3)))
bad_usage(const char *sub, const char *fmt, ...)
{
	const struct sub_help *h = sub ? sub_help_of(sub) : NULL;
	va_list ap;

	fprintf(stderr, "erdma-shim%s%s: ", sub ? " " : "", sub ? sub : "");
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	if (h)
		fprintf(stderr, "\nusage: %s\n", h->synopsis);
	else
		fputc('\n', stderr);
	return EX_USAGE;
}

/* ---- small helpers ---- */

static double now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
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

static void opt_bad(const char *msg, bool invalid, void *arg)
{
	struct cfg_check *c = arg;

	c->bad += invalid;
}

/* Would the library take VAR=VAL?  run's options are checked with its own
 * parser, each alone, so an error names the option, not the variable. */
static bool opt_value_ok(const char *var, const char *val)
{
	struct shim_config c;
	struct cfg_check chk = {0};
	char *env[2] = {NULL, NULL};

	if (asprintf(&env[0], "%s=%s", var, val) < 0)
		return false;
	shim_config_defaults(&c);
	shim_config_parse(&c, env, opt_bad, &chk);
	free(env[0]);
	return !chk.bad;
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
	enum { N_RULE_OPTS = 3 };
	static const char *const rule_opt[N_RULE_OPTS][2] = {
	    {"--allow", "ERDMA_SHIM_ALLOW"},
	    {"--deny", "ERDMA_SHIM_DENY"},
	    {"--accept-from", "ERDMA_SHIM_ACCEPT_FROM"},
	};
	bool reset[N_RULE_OPTS] = {false};

	/* Options, then CMD: from "--", or from the first word that is not
	 * an option (as torsocks and smc_run take it). */
	for (i = 0; i < argc; i++) {
		const char *o = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
		int rule = -1;

		for (int k = 0; k < N_RULE_OPTS; k++)
			if (!strcmp(o, rule_opt[k][0]))
				rule = k;
		bool takes =
		    rule >= 0 || !strcmp(o, "--log") || !strcmp(o, "--lib");

		if (!strcmp(o, "--")) {
			i++;
			break;
		}
		if (o[0] != '-')
			break;
		if (is_help(o))
			return sub_usage("run");
		if (takes && (!v || !strcmp(v, "--")))
			return bad_usage("run", "%s needs a value", o);
		if (rule >= 0) {
			const char *var = rule_opt[rule][1];

			if (!opt_value_ok(var, v))
				return bad_usage(
				    "run",
				    "%s '%s' is not a list of rules "
				    "(CIDR[:port[-port]], [v6]:port or *:port, "
				    "comma-separated; e.g. %s 10.0.0.0/16)",
				    o, v, o);
			if (!reset[rule])
				unsetenv(var);
			reset[rule] = true;
			append_rule(var, v);
		} else if (!strcmp(o, "--log")) {
			if (!opt_value_ok("ERDMA_SHIM_LOG", v))
				return bad_usage("run",
						 "--log '%s' is not a level "
						 "(use error, warn, info or "
						 "debug)",
						 v);
			setenv("ERDMA_SHIM_LOG", v, 1);
		} else if (!strcmp(o, "--lib")) {
			if (!realpath(v, lib))
				return bad_usage("run", "--lib %s: %s", v,
						 strerror(errno));
		} else if (!strcmp(o, "--require")) {
			setenv("ERDMA_SHIM", "require", 1);
			continue;
		} else if (!strcmp(o, "--stats")) {
			setenv("ERDMA_SHIM_STATS", "1", 1);
			continue;
		} else {
			return bad_usage(
			    "run",
			    "unknown option %s (if it is the "
			    "command's, put -- before the command)",
			    o);
		}
		i++;
	}
	if (i >= argc)
		return bad_usage("run", "no command given (erdma-shim run "
					"[options] CMD ARGS...)");
	if (!lib[0] && find_lib(lib, sizeof(lib))) {
		fprintf(stderr,
			"erdma-shim run: %s not found beside this program, in "
			"../lib or in ../lib/%s (use --lib PATH)\n",
			LIB_NAME,
			SHIM_MULTIARCH[0] ? SHIM_MULTIARCH : "TRIPLET");
		return EX_USAGE;
	}
	/* ld.so splits LD_PRELOAD at spaces as well as colons: "/opt/my
	 * libs/liberdma_shim.so" would preload "/opt/my" and, relative,
	 * "libs/liberdma_shim.so" -- from the current directory. */
	if (strpbrk(lib, " :\t\n")) {
		fprintf(
		    stderr,
		    "erdma-shim run: the library path '%s' contains a space "
		    "or ':', which LD_PRELOAD cannot hold (ld.so splits "
		    "there); install or link the library under a path "
		    "without them and use --lib PATH\n",
		    lib);
		return EX_USAGE;
	}
	if (check_env())
		return EX_USAGE;
	if (set_preload(lib)) {
		perror("erdma-shim run: setenv");
		return 1;
	}
	execvp(argv[i], argv + i);
	fprintf(stderr, "erdma-shim run: %s: %s\n", argv[i], strerror(errno));
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
		if (!strcmp(argv[i], "--json"))
			r.json = true;
		else if (is_help(argv[i]))
			return sub_usage("doctor");
		else
			return bad_usage(
			    "doctor",
			    "unknown %s %s (doctor takes only "
			    "--json)",
			    argv[i][0] == '-' ? "option" : "argument", argv[i]);
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
	long n;
	struct sockaddr_storage dst, rdst;
	char shown[300];
	socklen_t len;
	double t0, trdma, ttcp;

	for (int i = 0; i < argc; i++) {
		const char *o = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
		char *end;

		if (is_help(o))
			return sub_usage("probe");
		if (!strcmp(o, "--timeout") || !strcmp(o, "--port-offset")) {
			bool tmo = o[2] == 't';

			n = v ? strtol(v, &end, 10) : -1;
			if (!v || !*v || *end ||
			    (tmo ? n <= 0 || n > 3600000 : n < 0 || n > 65535))
				return bad_usage(
				    "probe", "%s needs %s, got '%s'", o,
				    tmo ? "a number of milliseconds, 1..3600000"
					: "a port offset, 0..65535",
				    v ? v : "nothing");
			if (tmo)
				timeout = (int)n;
			else
				offset = (int)n;
			i++;
		} else if (o[0] == '-') {
			return bad_usage("probe",
					 "unknown option %s (probe takes "
					 "--timeout MS and --port-offset N)",
					 o);
		} else if (target) {
			return bad_usage(
			    "probe", "one HOST:PORT only (got '%s' and '%s')",
			    target, o);
		} else {
			target = o;
		}
	}
	if (offset < -1 || offset > 65535)
		return bad_usage("probe",
				 "ERDMA_SHIM_PORT_OFFSET=%s is not 0..65535 "
				 "(unset it, or give --port-offset N)",
				 env);
	if (!target)
		return bad_usage("probe", "no HOST:PORT given (e.g. erdma-shim "
					  "probe 10.0.0.2:50051)");
	n = resolve(target, &dst, &len, shown, sizeof(shown));
	if (n == -1)
		return bad_usage("probe",
				 "'%s' has no port: give HOST:PORT (e.g. "
				 "10.0.0.2:50051, or [fd00::2]:50051 for IPv6)",
				 target);
	if (n)
		return EX_USAGE;
	if (!get_port(&dst))
		return bad_usage("probe",
				 "port 0 in '%s': give the port the "
				 "server listens on",
				 target);
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

/* ---- stat: the arguments here, the tables in stat.c ---- */

static int cmd_stat_args(int argc, char **argv)
{
	bool json = false, prom = false;
	int one = 0;

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
		if (is_help(argv[i]))
			return sub_usage("stat");
		if (argv[i][0] == '-')
			return bad_usage("stat",
					 "unknown option %s (stat takes a PID, "
					 "--json or --prometheus)",
					 argv[i]);
		if (one)
			return bad_usage("stat",
					 "one PID only (got %d and %s; "
					 "without a PID, stat shows them all)",
					 one, argv[i]);
		one = (int)strtol(argv[i], &end, 10);
		if (*end || one <= 0)
			return bad_usage("stat",
					 "'%s' is not a process id (a number "
					 "above 0, as ps shows)",
					 argv[i]);
	}
	if (json && prom)
		return bad_usage("stat", "--json and --prometheus: choose one");
	return cmd_stat(one, json, prom);
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
		bad_usage(NULL, "no command given (erdma-shim help COMMAND "
				"says more)");
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
		return cmd_stat_args(argc - 2, argv + 2);
	if (!strcmp(argv[1], "--version")) {
		printf("erdma-shim %s\n", SHIM_VERSION);
		return 0;
	}
	if (is_help(argv[1]) || (!strcmp(argv[1], "help") && argc == 2)) {
		usage(stdout);
		return 0;
	}
	if (!strcmp(argv[1], "help")) {
		if (argc > 3)
			return bad_usage(NULL,
					 "help takes one command (erdma-shim "
					 "help COMMAND)");
		if (sub_help_of(argv[2]))
			return sub_usage(argv[2]);
		return bad_usage(NULL,
				 "no command '%s' (run, doctor, probe, stat)",
				 argv[2]);
	}
	return bad_usage(NULL,
			 "unknown command '%s' (run, doctor, probe or stat; "
			 "erdma-shim help lists them)",
			 argv[1]);
}
