/* SPDX-License-Identifier: MIT */
/*
 * costops: the same operations on one established stream connection,
 * counted one phase at a time, for bench/cost-table (issue 41).  Built
 * twice from this file:
 *
 *   build/bench/costops     plain sockets (socket/send/recv/epoll_wait/
 *                           poll): run under the shim with
 *                           ERDMA_SHIM=require, every connection is an
 *                           rsocket behind the program's back
 *   build/bench/costops_rs  the same program written against rsockets
 *                           (rsocket/rsend/rrecv/rpoll, -DCOST_RS)
 *
 *   costops server IP PORT [--conns N] [--buf BYTES]
 *   costops client IP PORT [--conns N] [--buf BYTES] [--iters N]
 *                          [--big-iters N] [--warmup N]
 *
 * The server prints "ready PORT", accepts N connections and serves the
 * client's commands on the first (the others stay idle).  The client opens
 * N connections and then runs its phases on the first:
 *
 *   empty       the measuring loop with nothing in it (subtracted)
 *   send1/send4k/send64k   send() of 1 B, 4 KiB, 64 KiB; the server reads
 *                           them all, then acknowledges outside the count
 *   recv1/recv4k/recv64k   the server sends the messages first (it stays
 *                           ahead: it is not slowed by the counting); one
 *                           op = recv() until that many bytes are in
 *   rtt1        send(1 B) then recv(1 B) of the server's echo: blocking
 *   epoll1      epoll_wait(-1) on a set of every connection, one readable
 *               (rsockets: rpoll(-1) over the same fds), after one 50 ms
 *               sleep of the set with nothing ready, as an event loop's
 *               set sleeps between events
 *   poll1       poll(-1) on the one readable connection (rsockets: rpoll)
 *
 * With --conns above 1 only empty and epoll1 run (as "epollN").  --buf:
 * SO_SNDBUF/SO_RCVBUF on every connection before it connects (rsockets
 * sizes its buffers from them; the shim takes ERDMA_SHIM_SNDBUF/RCVBUF
 * instead, which the runner sets to the same).
 *
 * Each phase runs WARMUP iterations, then ITERS (BIG_ITERS for 64 KiB)
 * counted ones between markers:
 *  - valgrind --tool=callgrind --instr-atstart=no --collect-atstart=no:
 *    instrumented only from just before the counted loop (set-up and
 *    warm-up run uncounted, and far faster), which is between two
 *    CALLGRIND_TOGGLE_COLLECTs; its costs are dumped as "PHASE"
 *    (callgrind.out.PID.K, "desc: Trigger: Client Request: PHASE")
 *  - strace -f: getpgid(1000000 + K) before and getpgid(2000000 + K) after
 *    (a system call no library here makes, answered ESRCH)
 * Prints "phase K NAME ITERS CALLS" per phase (CALLS: the API calls the
 * counted loop made), then "done".  Exit 1 when an operation misbehaved.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <unistd.h>
#include <arpa/inet.h>

#if defined(__has_include)
#if __has_include(<valgrind/callgrind.h>)
#include <valgrind/callgrind.h>
#endif
#endif
#ifndef CALLGRIND_TOGGLE_COLLECT
#define CALLGRIND_START_INSTRUMENTATION
#define CALLGRIND_STOP_INSTRUMENTATION
#define CALLGRIND_TOGGLE_COLLECT
#define CALLGRIND_ZERO_STATS
#define CALLGRIND_DUMP_STATS_AT(s) ((void)(s))
#endif

#ifdef COST_RS
#include <rdma/rsocket.h>
#define NAME "costops_rs"
#define x_socket rsocket
#define x_bind rbind
#define x_listen rlisten
#define x_accept raccept
#define x_connect rconnect
#define x_send rsend
#define x_recv rrecv
#define x_setsockopt rsetsockopt
#define x_getsockname rgetsockname
#else
#define NAME "costops"
#define x_socket socket
#define x_bind bind
#define x_listen listen
#define x_accept accept
#define x_connect connect
#define x_send send
#define x_recv recv
#define x_setsockopt setsockopt
#define x_getsockname getsockname
#endif

#define MAXSZ 65536

static char buf[MAXSZ];

struct cmd {
	uint32_t op; /* 'S' the client sends, 'R' it receives, 'P' ping-pong,
			'E' one byte to make it readable, 'Q' quit */
	uint32_t size;
	uint32_t count;
};

__attribute__((noreturn)) static void die(const char *what)
{
	fprintf(stderr, NAME ": %s: %s\n", what, strerror(errno));
	exit(2);
}

static void xfer_all(int fd, void *p, size_t n, int out)
{
	char *c = p;

	while (n) {
		ssize_t r =
		    out ? x_send(fd, c, n, MSG_NOSIGNAL) : x_recv(fd, c, n, 0);

		if (r <= 0) {
			if (r < 0 && errno == EINTR)
				continue;
			if (!r)
				errno = EPIPE;
			die(out ? "send" : "recv");
		}
		c += r;
		n -= (size_t)r;
	}
}

static void set_buf(int fd, int bytes)
{
	if (bytes <= 0)
		return;
	if (x_setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &bytes, sizeof(bytes)) ||
	    x_setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &bytes, sizeof(bytes)))
		die("setsockopt SO_SNDBUF/SO_RCVBUF");
}

static void raise_nofile(void)
{
	struct rlimit rl;

	if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
		rl.rlim_cur = rl.rlim_max;
		(void)setrlimit(RLIMIT_NOFILE, &rl);
	}
}

static struct sockaddr_in addr_of(const char *ip, const char *port)
{
	struct sockaddr_in a = {.sin_family = AF_INET,
				.sin_port = htons((uint16_t)atoi(port))};

	if (inet_pton(AF_INET, ip, &a.sin_addr) != 1) {
		fprintf(stderr, NAME ": bad IPv4 address %s\n", ip);
		exit(2);
	}
	return a;
}

static int server(const char *ip, const char *port, int conns, int bufsz)
{
	struct sockaddr_in a = addr_of(ip, port);
	socklen_t alen = sizeof(a);
	int one = 1, lfd, *fd;
	struct cmd c;

	fd = calloc((size_t)conns, sizeof(*fd));
	lfd = x_socket(AF_INET, SOCK_STREAM, 0);
	if (!fd || lfd < 0)
		die("socket");
	x_setsockopt(lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	set_buf(lfd, bufsz);
	if (x_bind(lfd, (struct sockaddr *)&a, sizeof(a)) ||
	    x_listen(lfd, 1024) ||
	    x_getsockname(lfd, (struct sockaddr *)&a, &alen))
		die("listen");
	printf("ready %u\n", ntohs(a.sin_port));
	fflush(stdout);
	for (int i = 0; i < conns; i++)
		if ((fd[i] = x_accept(lfd, NULL, NULL)) < 0)
			die("accept");
	for (;;) {
		xfer_all(fd[0], &c, sizeof(c), 0);
		if (c.size > MAXSZ)
			c.size = MAXSZ;
		switch (c.op) {
		case 'S': /* the client sends count x size: take it all */
			for (uint32_t i = 0; i < c.count; i++)
				xfer_all(fd[0], buf, c.size, 0);
			xfer_all(fd[0], buf, 1, 1);
			break;
		case 'R': /* send count x size, each one send() */
			for (uint32_t i = 0; i < c.count; i++)
				xfer_all(fd[0], buf, c.size, 1);
			break;
		case 'P': /* echo count bytes, one at a time */
			for (uint32_t i = 0; i < c.count; i++) {
				xfer_all(fd[0], buf, 1, 0);
				xfer_all(fd[0], buf, 1, 1);
			}
			break;
		case 'E':
			xfer_all(fd[0], buf, 1, 1);
			break;
		default:
			return 0;
		}
	}
}

static void command(int fd, uint32_t op, uint32_t size, uint32_t count)
{
	struct cmd c = {op, size, count};

	xfer_all(fd, &c, sizeof(c), 1);
}

/* The counted loop's brackets (see the top). */
static int phase_no;

static void phase_begin(void)
{
	syscall(SYS_getpgid, 1000000 + phase_no);
	CALLGRIND_START_INSTRUMENTATION;
	CALLGRIND_ZERO_STATS;
	CALLGRIND_TOGGLE_COLLECT;
}

static void phase_end(const char *name, long iters, long calls)
{
	CALLGRIND_TOGGLE_COLLECT;
	CALLGRIND_DUMP_STATS_AT(name);
	CALLGRIND_STOP_INSTRUMENTATION;
	syscall(SYS_getpgid, 2000000 + phase_no);
	printf("phase %d %s %ld %ld\n", phase_no++, name, iters, calls);
	fflush(stdout);
}

static long bad;

static void ph_empty(long n)
{
	phase_begin();
	for (long i = 0; i < n; i++)
		__asm__ volatile("" ::: "memory");
	phase_end("empty", n, 0);
}

static void ph_send(int fd, const char *name, size_t sz, long w, long n)
{
	command(fd, 'S', (uint32_t)sz, (uint32_t)(w + n));
	for (long i = 0; i < w; i++)
		xfer_all(fd, buf, sz, 1);
	phase_begin();
	for (long i = 0; i < n; i++)
		bad += x_send(fd, buf, sz, MSG_NOSIGNAL) != (ssize_t)sz;
	phase_end(name, n, n);
	xfer_all(fd, buf, 1, 0);
}

static void ph_recv(int fd, const char *name, size_t sz, long w, long n)
{
	long calls = 0;

	command(fd, 'R', (uint32_t)sz, (uint32_t)(w + n));
	for (long i = 0; i < w; i++)
		xfer_all(fd, buf, sz, 0);
	phase_begin();
	for (long i = 0; i < n; i++) {
		size_t got = 0;

		while (got < sz) {
			ssize_t r = x_recv(fd, buf + got, sz - got, 0);

			calls++;
			if (r <= 0) {
				bad++;
				break;
			}
			got += (size_t)r;
		}
	}
	phase_end(name, n, calls);
}

static void ph_rtt(int fd, long w, long n)
{
	command(fd, 'P', 1, (uint32_t)(w + n));
	for (long i = 0; i < w; i++) {
		xfer_all(fd, buf, 1, 1);
		xfer_all(fd, buf, 1, 0);
	}
	phase_begin();
	for (long i = 0; i < n; i++) {
		bad += x_send(fd, buf, 1, MSG_NOSIGNAL) != 1;
		bad += x_recv(fd, buf, 1, 0) != 1;
	}
	phase_end("rtt1", n, 2 * n);
}

/* The first connection readable (one byte from the server, left unread):
 * waits on the whole set (epoll_wait, or rpoll over the same fds) and on
 * it alone (poll / rpoll), each finding exactly it ready. */
static void ph_ready(int *fd, int conns, long w, long n)
{
	struct pollfd *p = calloc((size_t)conns, sizeof(*p));
	char name[32];

	if (!p)
		die("calloc");
	for (int i = 0; i < conns; i++)
		p[i] = (struct pollfd){.fd = fd[i], .events = POLLIN};
#ifdef COST_RS
	bad += rpoll(p, (nfds_t)conns, 50) != 0; /* the sleep (see below) */
	command(fd[0], 'E', 1, 1);
	while (rpoll(p, 1, -1) != 1)
		;
	for (long i = 0; i < w; i++)
		bad += rpoll(p, (nfds_t)conns, -1) != 1;
	snprintf(name, sizeof(name), "epoll%d", conns);
	phase_begin();
	for (long i = 0; i < n; i++)
		bad += rpoll(p, (nfds_t)conns, -1) != 1;
	phase_end(name, n, n);
	if (conns == 1) {
		phase_begin();
		for (long i = 0; i < n; i++)
			bad += rpoll(p, 1, -1) != 1;
		phase_end("poll1", n, n);
	}
#else
	struct epoll_event ev[8];
	int ep = epoll_create1(EPOLL_CLOEXEC);

	if (ep < 0)
		die("epoll_create1");
	for (int i = 0; i < conns; i++) {
		struct epoll_event e = {.events = EPOLLIN,
					.data.u32 = (uint32_t)i};

		if (epoll_ctl(ep, EPOLL_CTL_ADD, fd[i], &e))
			die("epoll_ctl");
	}
	/* An event loop's set sleeps whenever nothing is ready: one sleep
	 * with nothing ready first (50 ms), so that the set is as it is
	 * between events (the shim then leaves idle connections to the
	 * kernel's wake-up instead of looking at each) */
	bad += epoll_wait(ep, ev, 8, 50) != 0;
	command(fd[0], 'E', 1, 1);
	while (poll(p, 1, -1) != 1)
		;
	for (long i = 0; i < w; i++)
		bad += epoll_wait(ep, ev, 8, -1) != 1;
	snprintf(name, sizeof(name), "epoll%d", conns);
	phase_begin();
	for (long i = 0; i < n; i++)
		bad += epoll_wait(ep, ev, 8, -1) != 1;
	phase_end(name, n, n);
	if (conns == 1) {
		phase_begin();
		for (long i = 0; i < n; i++)
			bad += poll(p, 1, -1) != 1;
		phase_end("poll1", n, n);
	}
	close(ep);
#endif
	xfer_all(fd[0], buf, 1, 0);
	free(p);
}

static int client(const char *ip, const char *port, int conns, int bufsz,
		  long iters, long big, long w)
{
	struct sockaddr_in a = addr_of(ip, port);
	int *fd = calloc((size_t)conns, sizeof(*fd));

	if (!fd)
		die("calloc");
	for (int i = 0; i < conns; i++) {
		fd[i] = x_socket(AF_INET, SOCK_STREAM, 0);
		if (fd[i] < 0)
			die("socket");
		set_buf(fd[i], bufsz);
		if (x_connect(fd[i], (struct sockaddr *)&a, sizeof(a)))
			die("connect");
	}
	memset(buf, 'x', sizeof(buf));
	ph_empty(iters);
	if (conns == 1) {
		ph_send(fd[0], "send1", 1, w, iters);
		ph_send(fd[0], "send4k", 4096, w, iters);
		ph_send(fd[0], "send64k", 65536, w, big);
		ph_recv(fd[0], "recv1", 1, w, iters);
		ph_recv(fd[0], "recv4k", 4096, w, iters);
		ph_recv(fd[0], "recv64k", 65536, w, big);
		ph_rtt(fd[0], w, iters);
	}
	ph_ready(fd, conns, w, iters);
	command(fd[0], 'Q', 0, 0);
	printf("done bad %ld\n", bad);
	return bad ? 1 : 0;
}

static long num(const char *s)
{
	char *e;
	long v = strtol(s, &e, 10);

	if (*e || v < 0) {
		fprintf(stderr, NAME ": bad number '%s'\n", s);
		exit(2);
	}
	return v;
}

int main(int argc, char **argv)
{
	long conns = 1, bufsz = 0, iters = 1000, big = 200, w = 50;

	if (argc < 4 ||
	    (strcmp(argv[1], "server") && strcmp(argv[1], "client"))) {
		fprintf(stderr,
			"usage: " NAME " server|client IP PORT [--conns N] "
			"[--buf BYTES] [--iters N] [--big-iters N] "
			"[--warmup N]\n");
		return 2;
	}
	for (int i = 4; i + 1 < argc; i += 2) {
		long v = num(argv[i + 1]);

		if (!strcmp(argv[i], "--conns"))
			conns = v ? v : 1;
		else if (!strcmp(argv[i], "--buf"))
			bufsz = v;
		else if (!strcmp(argv[i], "--iters"))
			iters = v;
		else if (!strcmp(argv[i], "--big-iters"))
			big = v;
		else if (!strcmp(argv[i], "--warmup"))
			w = v;
		else {
			fprintf(stderr, NAME ": unknown option %s\n", argv[i]);
			return 2;
		}
	}
	raise_nofile();
	if (!strcmp(argv[1], "server"))
		return server(argv[2], argv[3], (int)conns, (int)bufsz);
	return client(argv[2], argv[3], (int)conns, (int)bufsz, iters, big, w);
}
