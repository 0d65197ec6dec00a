/* SPDX-License-Identifier: MIT */
/*
 * ERDMA_SHIM_* configuration: parsed once at init, immutable afterwards.
 * The parser is pure (no globals, no I/O) so unit tests and the fuzzer can
 * drive it with any environment.
 */
#ifndef SHIM_CONFIG_H
#define SHIM_CONFIG_H

#include <netinet/in.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

enum shim_mode { SHIM_MODE_AUTO, SHIM_MODE_OFF, SHIM_MODE_REQUIRE };
enum shim_level {
	SHIM_LOG_ERROR,
	SHIM_LOG_WARN,
	SHIM_LOG_INFO,
	SHIM_LOG_DEBUG
};

#define SHIM_MAX_RULES 32
#define SHIM_PATH_MAX 256

/* One ALLOW/DENY/ACCEPT_FROM rule: address prefix (family 0 = any) and
 * port range. */
struct shim_rule {
	int family; /* 0, AF_INET or AF_INET6 */
	uint8_t addr[16];
	unsigned int prefix;
	uint16_t port_lo, port_hi;
};

struct shim_config {
	int mode;
	int log_level;
	char log_file[SHIM_PATH_MAX];
	struct shim_rule allow[SHIM_MAX_RULES];
	unsigned int n_allow;
	bool allow_set; /* ERDMA_SHIM_ALLOW given: replaces the default */
	struct shim_rule deny[SHIM_MAX_RULES];
	unsigned int n_deny;
	/* ERDMA_SHIM_ACCEPT_FROM: the clients a listener accepts over RDMA
	 * (none given: every client, as over TCP) */
	struct shim_rule accept_from[SHIM_MAX_RULES];
	unsigned int n_accept_from;
	unsigned int port_offset; /* SHIM_PORT_OFFSET_AUTO: by transport */
	unsigned int connect_timeout_ms;
	unsigned int negcache_ttl_s;
	unsigned int sndbuf, rcvbuf; /* bytes, 0 = rsocket default */
	unsigned int sq_size, rq_size, inline_size; /* 0 = rsocket default */
	unsigned int poll_us;
	unsigned int fd_share; /* percent of RLIMIT_NOFILE (limits.c) */
	bool stats;
	bool stats_shm; /* the /dev/shm/erdma-shim.PID table (stats.h) */
	bool
	    invalid; /* a value was rejected: the process runs in passthrough */
	bool env_ignored; /* setuid/setgid: the environment is not trusted */
};

/*
 * ERDMA_SHIM_PORT_OFFSET unset: 0 where every RDMA device has a port space
 * of its own (InfiniBand, RoCE), SHIM_IWARP_PORT_OFFSET where one shares
 * TCP's (iWARP: an rsocket listener is a kernel TCP listener).
 */
#define SHIM_PORT_OFFSET_AUTO 65536u
#define SHIM_IWARP_PORT_OFFSET 20000u

void shim_config_defaults(struct shim_config *c);

/*
 * The fds one RDMA connection holds beyond the program's own socket (its
 * rdma_cm channel, its completion channel, the glue's duplicate of the
 * first, a bell), and how many connections ERDMA_SHIM_FD_SHARE lets a
 * process with soft RLIMIT_NOFILE nofile hold: rsocket_glue/limits.c
 * keeps to it, doctor reports it.
 */
#define SHIM_CONN_FDS 4
static inline unsigned long long
shim_fd_share_conns(const struct shim_config *c, unsigned long long nofile)
{
	return (nofile / 100 * c->fd_share + nofile % 100 * c->fd_share / 100) /
	       SHIM_CONN_FDS;
}

/* The offset in force: ERDMA_SHIM_PORT_OFFSET when set, else by transport
 * (iwarp: the host has an iWARP device).  The library (sock.c) and the CLI
 * both ask here, so doctor and probe say what the library does. */
static inline unsigned int shim_port_offset(const struct shim_config *c,
					    bool iwarp)
{
	if (c->port_offset != SHIM_PORT_OFFSET_AUTO)
		return c->port_offset;
	return iwarp ? SHIM_IWARP_PORT_OFFSET : 0;
}

/* The rsocket port of TCP port `port` (1..65535): port + offset, wrapping
 * past 65535 to 1, so every port has one (a one-to-one map). */
static inline uint16_t shim_port_map(uint16_t port, unsigned int offset)
{
	return (uint16_t)((port - 1u + offset) % 65535u + 1u);
}

/*
 * Parse every ERDMA_SHIM* entry of envp (NULL-terminated "NAME=value").
 * Each rejected value or unknown name is reported as one line through
 * report(msg, invalid, arg); invalid is false for a mere unknown name.  A
 * rejected value sets c->invalid and mode=off. Returns the number of problems
 * found.
 */
typedef void (*shim_report_fn)(const char *msg, bool invalid, void *arg);
int shim_config_parse(struct shim_config *c, char *const *envp,
		      shim_report_fn report, void *arg);

/* Does a destination (address in network order, port in host order) pass
 * the ALLOW/DENY rules?  v4-mapped IPv6 addresses match as IPv4. */
bool shim_config_allows(const struct shim_config *c, int family,
			const void *addr, uint16_t port);

/*
 * Does a listener on TCP port `port` (host order; the program's port, not
 * its RDMA twin) accept an RDMA connection from a client at addr (network
 * order)?  ERDMA_SHIM_ACCEPT_FROM unset: yes; set: only when a rule
 * matches.  v4-mapped IPv6 addresses match as IPv4.  A family other than
 * AF_INET/AF_INET6 (an AF_IB request) matches no address rule.
 */
bool shim_config_accepts(const struct shim_config *c, int family,
			 const void *addr, uint16_t port);

/* Name of a mode/level, for the banner and the CLI. */
extern struct shim_config shim_cfg; /* init.c: the process's settings */

const char *shim_mode_name(int mode);

/* Render non-default settings as "NAME=value NAME=value" (for the banner). */
size_t shim_config_describe(const struct shim_config *c, char *buf, size_t len);

#endif
