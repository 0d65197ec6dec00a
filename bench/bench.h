/* SPDX-License-Identifier: MIT */
/*
 * bench.h: what bench/pingpong.c and bench/stream.c share (argument
 * parsers, clocks, address set-up, whole-buffer send/recv).  Header-only:
 * the Makefile builds each bench/NAME.c as a program of its own.
 *
 * Define BENCH_NAME (the program's name, for messages) before including.
 * Everything here is static inline, so a program pays nothing for what it
 * does not use (and -Wunused-function stays quiet).
 */
#ifndef BENCH_H
#define BENCH_H

#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#ifndef BENCH_NAME
#error "define BENCH_NAME before including bench.h"
#endif

static const char *const prog = BENCH_NAME;

__attribute__((noreturn)) static inline void die(const char *what)
{
	fprintf(stderr, "%s: %s: %s\n", prog, what, strerror(errno));
	exit(2);
}

/* "64", "4K", "1M", "2G": binary suffixes.  Exits on garbage. */
static inline uint64_t parse_size(const char *opt, const char *s)
{
	char *end;
	unsigned long long v;

	errno = 0;
	v = strtoull(s, &end, 10);
	if (errno || end == s || *s == '-')
		goto bad;
	switch (*end) {
	case 'k':
	case 'K':
		v <<= 10, end++;
		break;
	case 'm':
	case 'M':
		v <<= 20, end++;
		break;
	case 'g':
	case 'G':
		v <<= 30, end++;
		break;
	default:
		break;
	}
	if (*end)
		goto bad;
	return v;
bad:
	fprintf(stderr, "%s: %s: bad number '%s'\n", prog, opt, s);
	exit(2);
}

/* A positive number of seconds ("1.5").  Exits on garbage. */
static inline double parse_seconds(const char *opt, const char *s)
{
	char *end;
	double v;

	errno = 0;
	v = strtod(s, &end);
	if (errno || end == s || *end || !(v > 0)) {
		fprintf(stderr, "%s: %s: bad duration '%s'\n", prog, opt, s);
		exit(2);
	}
	return v;
}

static inline uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* qsort's comparison for uint64_t. */
static inline int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

/* Nearest-rank percentile of a sorted array of nanoseconds, in us. */
static inline double pct_us(const uint64_t *v, size_t n, double p)
{
	size_t rank = (size_t)(p / 100.0 * (double)n + 0.999999);

	if (rank < 1)
		rank = 1;
	if (rank > n)
		rank = n;
	return (double)v[rank - 1] / 1e3;
}

/* This process's user and system CPU time so far, in microseconds. */
static inline void cpu_us(uint64_t *user, uint64_t *sys)
{
	struct rusage ru;

	if (getrusage(RUSAGE_SELF, &ru) < 0)
		die("getrusage");
	*user = (uint64_t)ru.ru_utime.tv_sec * 1000000u +
		(uint64_t)ru.ru_utime.tv_usec;
	*sys = (uint64_t)ru.ru_stime.tv_sec * 1000000u +
	       (uint64_t)ru.ru_stime.tv_usec;
}

/* User + system CPU time of this process so far, in seconds. */
static inline double cpu_s(void)
{
	uint64_t u, s;

	cpu_us(&u, &s);
	return (double)(u + s) / 1e6;
}

/* Context switches of this process so far: voluntary (it slept) and
 * involuntary (preempted, or a sched_yield that let another task run). */
static inline void csw(uint64_t *vol, uint64_t *invol)
{
	struct rusage ru;

	if (getrusage(RUSAGE_SELF, &ru) < 0)
		die("getrusage");
	*vol = (uint64_t)ru.ru_nvcsw;
	*invol = (uint64_t)ru.ru_nivcsw;
}

/* Room for n more fds (the shim may hold a few per RDMA connection). */
static inline void raise_nofile(rlim_t n)
{
	struct rlimit rl;

	if (getrlimit(RLIMIT_NOFILE, &rl) < 0 || rl.rlim_cur >= n)
		return;
	rl.rlim_cur = n;
	if (rl.rlim_max < n)
		rl.rlim_max = n; /* root may; otherwise the next call says */
	if (setrlimit(RLIMIT_NOFILE, &rl) < 0) {
		getrlimit(RLIMIT_NOFILE, &rl);
		rl.rlim_cur = rl.rlim_max;
		(void)setrlimit(RLIMIT_NOFILE, &rl);
	}
}

static inline struct addrinfo *resolve(const char *addr, const char *port,
				       bool passive)
{
	struct addrinfo hints = {.ai_socktype = SOCK_STREAM,
				 .ai_protocol = IPPROTO_TCP,
				 .ai_flags = AI_NUMERICHOST | AI_NUMERICSERV};
	struct addrinfo *res;
	int r;

	if (passive)
		hints.ai_flags |= AI_PASSIVE;
	r = getaddrinfo(addr, port, &hints, &res);
	if (r) {
		fprintf(stderr, "%s: %s port %s: %s\n", prog, addr, port,
			gai_strerror(r));
		exit(2);
	}
	return res;
}

/* Bind a client socket to ADDR (port 0) before connecting, so the
 * connection leaves from that address (and its interface). */
static inline void bind_local(int fd, const char *addr)
{
	struct addrinfo *ai = resolve(addr, "0", true);

	if (bind(fd, ai->ai_addr, ai->ai_addrlen) < 0)
		die("bind --bind address");
	freeaddrinfo(ai);
}

/* Listen on ADDR:PORT (PORT 0: ephemeral), print "ready PORT" (the port
 * bound) and return the listening fd. */
static inline int listen_ready(const char *addr, const char *port)
{
	struct addrinfo *ai = resolve(addr, port, true);
	struct sockaddr_storage ss;
	socklen_t slen = sizeof(ss);
	int one = 1, lfd;
	unsigned int bound;

	lfd = socket(ai->ai_family, ai->ai_socktype, ai->ai_protocol);
	if (lfd < 0)
		die("socket");
	if (setsockopt(lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) < 0)
		die("setsockopt SO_REUSEADDR");
	if (bind(lfd, ai->ai_addr, ai->ai_addrlen) < 0)
		die("bind");
	freeaddrinfo(ai);
	if (listen(lfd, 16) < 0)
		die("listen");
	if (getsockname(lfd, (struct sockaddr *)&ss, &slen) < 0)
		die("getsockname");
	bound = ntohs(ss.ss_family == AF_INET6
			  ? ((struct sockaddr_in6 *)&ss)->sin6_port
			  : ((struct sockaddr_in *)&ss)->sin_port);
	printf("ready %u\n", bound);
	fflush(stdout);
	return lfd;
}

/* A socket connected to ADDR:PORT, from BIND_ADDR when given. */
static inline int connect_to(const char *addr, const char *port,
			     const char *bind_addr)
{
	struct addrinfo *ai = resolve(addr, port, false);
	int fd = socket(ai->ai_family, ai->ai_socktype, ai->ai_protocol);

	if (fd < 0)
		die("socket");
	if (bind_addr)
		bind_local(fd, bind_addr);
	if (connect(fd, ai->ai_addr, ai->ai_addrlen) < 0)
		die("connect");
	freeaddrinfo(ai);
	return fd;
}

/* 1: all n bytes; 0: EOF before the first byte; -1: error or short. */
static inline int recv_all(int fd, void *buf, size_t n)
{
	char *p = buf;
	size_t got = 0;

	while (got < n) {
		ssize_t r = recv(fd, p + got, n - got, 0);

		if (r > 0) {
			got += (size_t)r;
			continue;
		}
		if (r == 0) {
			if (got)
				errno = EPROTO;
			return got ? -1 : 0;
		}
		if (errno != EINTR)
			return -1;
	}
	return 1;
}

static inline int send_all(int fd, const void *buf, size_t n)
{
	const char *p = buf;
	size_t sent = 0;

	while (sent < n) {
		ssize_t r = send(fd, p + sent, n - sent, MSG_NOSIGNAL);

		if (r >= 0) {
			sent += (size_t)r;
			continue;
		}
		if (errno != EINTR)
			return -1;
	}
	return 0;
}

/* Both benches: "PROG server ..." / "PROG client ...", SIGPIPE ignored. */
static inline int
bench_main(int argc, char **argv,
	   int (*server)(const char *, const char *, int, char **),
	   int (*client)(const char *, const char *, int, char **),
	   void (*usage)(void))
{
	if (argc < 4)
		usage();
	signal(SIGPIPE, SIG_IGN);
	if (!strcmp(argv[1], "server"))
		return server(argv[2], argv[3], argc - 4, argv + 4);
	if (!strcmp(argv[1], "client"))
		return client(argv[2], argv[3], argc - 4, argv + 4);
	usage();
	return 2;
}

#endif
