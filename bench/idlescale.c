/* SPDX-License-Identifier: MIT */
/*
 * idlescale: what idle connections cost a busy one (issue 18).  Plain
 * socket API: run it with and without LD_PRELOAD.
 *
 *   idlescale server ADDR PORT
 *       an epoll (level-triggered, 100 events per wait, as gRPC's epoll1
 *       poller asks) echo server on one thread: the listener and every
 *       connection in one set; prints "ready PORT", serves until killed
 *   idlescale client ADDR PORT --conns N --busy B --seconds S [--json]
 *       connects B busy connections, then N - B idle ones (never used
 *       after the connect, so the busy ones are the oldest registrations),
 *       then for S seconds: one byte out on each busy connection, one byte
 *       back from each; a round is B round trips.  Prints round trips/s and
 *       the p50/p99 time of a round in microseconds; --json adds one JSON
 *       line (the last line).
 *
 * The client waits in blocking recv() on the busy connections only, so its
 * own cost does not depend on N: what grows with N is the server's wait.
 * Over kernel TCP that cost follows the ready connections; bench/idlescale-run
 * compares the shim's growth from the smallest N to the largest against
 * kernel TCP's.  RLIMIT_NOFILE is raised as far as needed (and allowed).
 */
#define BENCH_NAME "idlescale"
#include "bench.h"

#include <sys/epoll.h>

static void usage(void) __attribute__((noreturn));
static void usage(void)
{
	fprintf(stderr,
		"usage: %s server ADDR PORT\n"
		"       %s client ADDR PORT --conns N --busy B --seconds S "
		"[--json]\n",
		prog, prog);
	exit(2);
}

static void add_in(int ep, int fd)
{
	struct epoll_event ev = {.events = EPOLLIN, .data.fd = fd};

	if (epoll_ctl(ep, EPOLL_CTL_ADD, fd, &ev) < 0)
		die("epoll_ctl ADD");
}

static void serve_ready(int ep, int lfd, int fd)
{
	char buf[4096];
	ssize_t r;

	if (fd == lfd) {
		int c = accept(lfd, NULL, NULL), one = 1;

		if (c < 0)
			return; /* EAGAIN, ECONNABORTED: the next wait says */
		setsockopt(c, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
		add_in(ep, c);
		return;
	}
	r = recv(fd, buf, sizeof(buf), 0);
	if (r > 0 && send_all(fd, buf, (size_t)r) == 0)
		return;
	if (r < 0 && errno == EINTR)
		return;
	epoll_ctl(ep, EPOLL_CTL_DEL, fd, NULL);
	close(fd);
}

static int server(const char *addr, const char *port, int argc, char **argv)
{
	struct epoll_event evs[100];
	int lfd, ep;

	(void)argv;
	if (argc)
		usage();
	raise_nofile(1u << 16);
	lfd = listen_ready(addr, port);
	ep = epoll_create1(EPOLL_CLOEXEC);
	if (ep < 0)
		die("epoll_create1");
	add_in(ep, lfd);
	for (;;) {
		int n = epoll_wait(ep, evs, 100, -1);

		if (n < 0 && errno != EINTR)
			die("epoll_wait");
		for (int i = 0; i < n; i++)
			serve_ready(ep, lfd, evs[i].data.fd);
	}
}

/* One round: a byte out on each busy fd, a byte back from each. */
static void round_trip(const int *fds, int busy)
{
	char c = 'x';

	for (int i = 0; i < busy; i++)
		if (send_all(fds[i], &c, 1) < 0)
			die("send");
	for (int i = 0; i < busy; i++)
		if (recv_all(fds[i], &c, 1) != 1)
			die("recv");
}

static int client(const char *addr, const char *port, int argc, char **argv)
{
	long conns = 0, busy = 0;
	double secs = 0;
	bool json = false;
	int *fds, one = 1;
	uint64_t *lat, t0, end, rounds = 0, cap = 1u << 20;

	for (int i = 0; i < argc; i++) {
		if (!strcmp(argv[i], "--json"))
			json = true;
		else if (i + 1 >= argc)
			usage();
		else if (!strcmp(argv[i], "--conns"))
			conns = (long)parse_size(argv[i], argv[i + 1]), i++;
		else if (!strcmp(argv[i], "--busy"))
			busy = (long)parse_size(argv[i], argv[i + 1]), i++;
		else if (!strcmp(argv[i], "--seconds"))
			secs = parse_seconds(argv[i], argv[i + 1]), i++;
		else
			usage();
	}
	if (busy < 1 || conns < busy || secs <= 0)
		usage();
	raise_nofile((rlim_t)conns * 6 + 64);
	fds = calloc((size_t)conns, sizeof(*fds));
	lat = malloc(cap * sizeof(*lat));
	if (!fds || !lat)
		die("malloc");
	for (long i = 0; i < conns; i++) {
		fds[i] = connect_to(addr, port, NULL);
		setsockopt(fds[i], IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	}
	for (int i = 0; i < 200; i++) /* warm-up */
		round_trip(fds, (int)busy);
	t0 = now_ns();
	end = t0 + (uint64_t)(secs * 1e9);
	for (uint64_t t = t0; t < end;) {
		uint64_t t1 = now_ns();

		round_trip(fds, (int)busy);
		t = now_ns();
		if (rounds < cap)
			lat[rounds] = t - t1;
		rounds++;
	}
	{
		double el = (double)(now_ns() - t0) / 1e9;
		uint64_t n = rounds < cap ? rounds : cap;
		double rts = (double)rounds * (double)busy / el;

		double p50, p99;

		qsort(lat, n, sizeof(*lat), cmp_u64);
		p50 = pct_us(lat, n, 50);
		p99 = pct_us(lat, n, 99);
		printf("%s: conns %ld busy %ld: %.0f round trips/s, round "
		       "p50 %.0f us p99 %.0f us\n",
		       prog, conns, busy, rts, p50, p99);
		if (json)
			printf("{\"conns\": %ld, \"busy\": %ld, \"rt_per_s\": "
			       "%.1f, \"p50_us\": %.0f, \"p99_us\": %.0f}\n",
			       conns, busy, rts, p50, p99);
	}
	for (long i = 0; i < conns; i++)
		close(fds[i]);
	free(fds);
	free(lat);
	return 0;
}

int main(int argc, char **argv)
{
	return bench_main(argc, argv, server, client, usage);
}
