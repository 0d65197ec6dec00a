/* SPDX-License-Identifier: MIT */
/*
 * xfer: checksummed byte streams over the plain socket API.  It knows
 * nothing of the shim; run it with and without LD_PRELOAD and the output
 * must be the same.
 *
 *   xfer server ADDR PORT [opts]   listen, print "ready PORT", serve --conns
 *   xfer client ADDR PORT [opts]   connect --conns times, transfer, verify
 *
 * opts: --conns N        connections (client: in parallel; server: to serve)
 *       --size BYTES     bytes each way per connection (K/M suffix)
 *       --dir up|down|both
 *       --mode block|epoll|poll   blocking threads, or one thread with
 *                        non-blocking sockets and epoll (edge-triggered) /
 *                        poll
 *       --hold FILE      when done, wait (<= 60 s) until FILE exists
 *       --seed N
 *       --timing         print each connect()'s duration on stderr
 *       --bind ADDR      client: bind each socket to ADDR (port 0) first
 *       --backlog N      server: listen(N) (128)
 *       --guard G        server: before listen(), protect the listener;
 *                        client: each socket before its connect():
 *                        G = filter (an accept-all classic BPF filter) or
 *                        dev:NAME (SO_BINDTODEVICE)
 *       --guard-late G   server: the same after listen() and a poll of
 *                        the listener (under the shim its RDMA listener is
 *                        open by then)
 *       --accept-after FILE  server: after listen() poll the listener
 *                        once, print "waiting", and accept only once FILE
 *                        exists (<= 60 s)
 *       --wait-after FILE  server: after listen() (and "ready") neither
 *                        poll nor accept until FILE exists (<= 60 s): the
 *                        shim's RDMA listener is not open meanwhile
 *
 * Per connection the client sends a header {size, seed, dir}; data is a
 * xorshift stream from the seed; each side checks the FNV-1a of what it
 * received against the stream it expects.  The server answers with the
 * checksum it computed, the client compares.  Exit 0 only if every byte of
 * every connection matched.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <linux/filter.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "testlib.h"

#define DIR_UP 1   /* client -> server */
#define DIR_DOWN 2 /* server -> client */

struct hdr {
	uint64_t size;
	uint64_t seed;
	uint32_t dir;
	uint32_t pad;
};

static int conns = 1, mode_epoll, mode_poll;
static uint64_t size = 1 << 20, seed0 = 42;
static uint32_t dir = DIR_UP | DIR_DOWN;
static const char *hold;
static int timing;	      /* --timing: connect() durations on stderr */
static const char *bind_addr; /* --bind: the client's source address */

/* ---- one connection's state, for every mode ---- */
enum phase { P_HDR, P_UP, P_DOWN, P_SUM, P_DONE };

struct conn {
	int fd;
	bool server;
	enum phase ph;
	struct hdr h;
	size_t hoff;
	uint64_t moved; /* bytes of the current phase */
	uint64_t sum;	/* FNV of what we received (or sent, for up) */
	uint64_t peer_sum;
	uint64_t upsum; /* server: FNV of the up stream it received */
	size_t soff;
	struct tl_rng tx;
	uint8_t chunk[65536];
	size_t cl, co; /* pending chunk length / offset */
	bool ok;
};

/* Advance c as far as the socket allows.  Returns 1 done, 0 would block
 * (*want says POLLIN/POLLOUT), -1 error. */
static int step(struct conn *c, short *want)
{
	ssize_t r;

	for (;;) {
		switch (c->ph) {
		case P_HDR:
			if (c->server) {
				r = recv(c->fd, (char *)&c->h + c->hoff,
					 sizeof(c->h) - c->hoff, 0);
				*want = POLLIN;
			} else {
				r = send(c->fd, (char *)&c->h + c->hoff,
					 sizeof(c->h) - c->hoff, MSG_NOSIGNAL);
				*want = POLLOUT;
			}
			if (r == 0)
				return -1;
			if (r < 0)
				goto again;
			c->hoff += (size_t)r;
			if (c->hoff < sizeof(c->h))
				continue;
			/* up stream: seed; down stream: seed ^ 0x5555 */
			tl_rng_seed(&c->tx, (c->h.dir & DIR_UP)
						? c->h.seed
						: c->h.seed ^ 0x5555);
			c->sum = TL_FNV0;
			c->moved = 0;
			c->ph = (c->h.dir & DIR_UP)	? P_UP
				: (c->h.dir & DIR_DOWN) ? P_DOWN
							: P_SUM;
			continue;
		case P_UP:
		case P_DOWN: {
			bool sending = (c->ph == P_UP) != c->server;

			if (c->moved == c->h.size) {
				if (c->ph == P_UP && c->server) {
					c->upsum = c->sum;
					c->ok =
					    c->sum ==
					    tl_stream_sum(c->h.seed, c->h.size);
				}
				if (c->ph == P_DOWN && !c->server &&
				    c->sum != tl_stream_sum(c->h.seed ^ 0x5555,
							    c->h.size))
					c->ok = false;
				c->moved = 0;
				if (c->ph == P_UP && (c->h.dir & DIR_DOWN)) {
					c->ph = P_DOWN;
					tl_rng_seed(&c->tx, c->h.seed ^ 0x5555);
					c->sum = TL_FNV0;
					c->cl = c->co = 0;
				} else {
					c->ph = P_SUM;
					c->soff = 0;
				}
				continue;
			}
			if (sending) {
				if (c->co == c->cl) {
					uint64_t left = c->h.size - c->moved;

					c->cl = left < sizeof(c->chunk)
						    ? (size_t)left
						    : sizeof(c->chunk);
					/* vary the write size: partial writes
					 * matter */
					if (c->cl > 1000)
						c->cl -= (c->moved / 7) % 997;
					tl_rng_fill(&c->tx, c->chunk, c->cl);
					c->co = 0;
				}
				r = send(c->fd, c->chunk + c->co, c->cl - c->co,
					 MSG_NOSIGNAL);
				*want = POLLOUT;
				if (r < 0)
					goto again;
				c->co += (size_t)r;
				c->moved += (uint64_t)r;
			} else {
				uint64_t left = c->h.size - c->moved;
				size_t k = left < sizeof(c->chunk)
					       ? (size_t)left
					       : sizeof(c->chunk);

				r = recv(c->fd, c->chunk, k, 0);
				*want = POLLIN;
				if (r == 0)
					return -1;
				if (r < 0)
					goto again;
				c->sum = tl_fnv(c->sum, c->chunk, (size_t)r);
				c->moved += (uint64_t)r;
			}
			continue;
		}
		case P_SUM:
			/* server tells the client what it received */
			if (c->server) {
				r = send(c->fd, (char *)&c->upsum + c->soff,
					 sizeof(c->upsum) - c->soff,
					 MSG_NOSIGNAL);
				*want = POLLOUT;
			} else {
				r = recv(c->fd, (char *)&c->peer_sum + c->soff,
					 sizeof(c->peer_sum) - c->soff, 0);
				*want = POLLIN;
				if (r == 0)
					return -1;
			}
			if (r < 0)
				goto again;
			c->soff += (size_t)r;
			if (c->soff < 8)
				continue;
			if (!c->server && (c->h.dir & DIR_UP) &&
			    c->peer_sum != tl_stream_sum(c->h.seed, c->h.size))
				c->ok = false;
			c->ph = P_DONE;
			continue;
		case P_DONE:
			return 1;
		}
	again:
		if (errno == EAGAIN || errno == EWOULDBLOCK)
			return 0;
		if (errno == EINTR)
			continue;
		return -1;
	}
}

static void conn_init(struct conn *c, int fd, bool server, int idx)
{
	memset(c, 0, sizeof(*c));
	c->fd = fd;
	c->server = server;
	c->ok = true;
	if (!server) {
		c->h.size = size;
		c->h.seed = seed0 + (uint64_t)idx;
		c->h.dir = dir;
	}
}

/* ---- blocking mode: a thread per connection ---- */
static void *run_blocking(void *arg)
{
	struct conn *c = arg;
	short want;
	int r = step(c, &want);

	if (r != 1)
		c->ok = false;
	return NULL;
}

/* ---- event modes: one thread, non-blocking ---- */
static void set_nonblock(int fd)
{
	int fl = fcntl(fd, F_GETFL);

	if (fl < 0 || fcntl(fd, F_SETFL, fl | O_NONBLOCK) < 0)
		tl_die("fcntl");
}

static int run_events(struct conn *cs, int n, int lfd, int to_accept)
{
	int ep = -1, done = 0, accepted = 0;
	struct epoll_event evs[64];
	struct pollfd *pf = calloc((size_t)n + 1, sizeof(*pf));
	time_t deadline = time(NULL) + 120;

	if (mode_epoll) {
		ep = epoll_create1(EPOLL_CLOEXEC);
		if (ep < 0)
			tl_die("epoll_create1");
		if (lfd >= 0) {
			struct epoll_event ev = {.events = EPOLLIN,
						 .data.u64 = ~0ull};

			if (epoll_ctl(ep, EPOLL_CTL_ADD, lfd, &ev) < 0)
				tl_die("epoll_ctl listen");
		}
	}
	for (int i = 0; i < n; i++) {
		if (cs[i].fd < 0)
			continue;
		if (mode_epoll) {
			struct epoll_event ev = {.events = EPOLLIN | EPOLLOUT |
							   EPOLLET,
						 .data.u64 = (uint64_t)i};

			if (epoll_ctl(ep, EPOLL_CTL_ADD, cs[i].fd, &ev) < 0)
				tl_die("epoll_ctl");
		}
	}
	while (done < n) {
		int k;

		if (time(NULL) > deadline) {
			fprintf(stderr, "xfer: timed out with %d/%d done\n",
				done, n);
			return -1;
		}
		/* run every connection as far as it goes (edge-triggered
		 * epoll requires draining to EAGAIN) */
		done = 0;
		for (int i = 0; i < n; i++) {
			short want = 0;
			int r;

			if (cs[i].fd < 0)
				continue;
			r = cs[i].ph == P_DONE ? 1 : step(&cs[i], &want);
			if (r < 0) {
				fprintf(stderr,
					"xfer: connection %d failed: %s\n", i,
					strerror(errno));
				return -1;
			}
			done += r == 1;
			pf[i].fd = cs[i].fd;
			pf[i].events = r == 1 ? 0 : want;
		}
		if (lfd >= 0 && accepted < to_accept) {
			pf[n].fd = lfd;
			pf[n].events = POLLIN;
		} else {
			pf[n].fd = -1;
		}
		if (done == n)
			break;
		if (mode_epoll)
			k = epoll_wait(ep, evs, 64, 1000);
		else
			k = poll(pf, (nfds_t)n + 1, 1000);
		if (k < 0 && errno != EINTR)
			tl_die("wait");
		if (lfd >= 0 && accepted < to_accept) {
			for (;;) {
				int fd = accept4(lfd, NULL, NULL,
						 SOCK_NONBLOCK | SOCK_CLOEXEC);

				if (fd < 0)
					break;
				conn_init(&cs[accepted], fd, true, accepted);
				if (mode_epoll) {
					struct epoll_event ev = {
					    .events =
						EPOLLIN | EPOLLOUT | EPOLLET,
					    .data.u64 = (uint64_t)accepted};

					if (epoll_ctl(ep, EPOLL_CTL_ADD, fd,
						      &ev) < 0)
						tl_die("epoll_ctl accepted");
				}
				accepted++;
				if (accepted == to_accept)
					break;
			}
		}
	}
	if (ep >= 0)
		close(ep);
	free(pf);
	return 0;
}

static int resolve(const char *host, const char *port,
		   struct sockaddr_storage *ss, socklen_t *len)
{
	struct addrinfo hints = {.ai_socktype = SOCK_STREAM,
				 .ai_flags = AI_NUMERICHOST},
			*ai;

	if (getaddrinfo(host, port, &hints, &ai))
		return -1;
	memcpy(ss, ai->ai_addr, ai->ai_addrlen);
	*len = ai->ai_addrlen;
	freeaddrinfo(ai);
	return 0;
}

static void wait_hold(void)
{
	struct stat sb;

	if (!hold)
		return;
	printf("holding\n");
	fflush(stdout);
	for (int i = 0; i < 6000 && stat(hold, &sb) != 0; i++)
		usleep(10000);
}

static int report(struct conn *cs, int n, const char *who)
{
	int bad = 0;

	for (int i = 0; i < n; i++)
		bad += !cs[i].ok;
	printf("%s: %d connections, %llu bytes each way%s, %d mismatched\n",
	       who, n, (unsigned long long)(cs[0].server ? cs[0].h.size : size),
	       dir == (DIR_UP | DIR_DOWN) ? " (both)"
	       : dir == DIR_UP		  ? " (up)"
					  : " (down)",
	       bad);
	return bad ? 1 : 0;
}

static int backlog = 128;
static const char *guard, *guard_late, *accept_after, *wait_after;

/* --guard: 0, or -1 and errno */
static int set_guard(int fd, const char *g)
{
	static struct sock_filter all[] = {{BPF_RET | BPF_K, 0, 0, 0xffffffff}};
	struct sock_fprog prog = {.len = 1, .filter = all};

	if (!strcmp(g, "filter"))
		return setsockopt(fd, SOL_SOCKET, SO_ATTACH_FILTER, &prog,
				  sizeof(prog));
	if (!strncmp(g, "dev:", 4))
		return setsockopt(fd, SOL_SOCKET, SO_BINDTODEVICE, g + 4,
				  (socklen_t)strlen(g + 4) + 1);
	errno = EINVAL;
	return -1;
}

static void wait_file(const char *path)
{
	struct stat sb;

	for (int i = 0; i < 6000 && stat(path, &sb) != 0; i++)
		usleep(10000);
}

static int server(const char *addr, const char *port)
{
	struct sockaddr_storage ss;
	socklen_t len;
	int lfd, one = 1, rc;
	struct conn *cs = calloc((size_t)conns, sizeof(*cs));

	if (resolve(addr, port, &ss, &len))
		tl_die("resolve");
	lfd = socket(ss.ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (lfd < 0)
		tl_die("socket");
	setsockopt(lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	if (guard && set_guard(lfd, guard) < 0)
		tl_die("--guard");
	if (bind(lfd, (struct sockaddr *)&ss, len) < 0)
		tl_die("bind");
	if (listen(lfd, backlog) < 0)
		tl_die("listen");
	if (guard_late || accept_after) {
		struct pollfd p = {.fd = lfd, .events = POLLIN};

		poll(&p, 1, 0);
	}
	if (guard_late && set_guard(lfd, guard_late) < 0)
		tl_die("--guard-late");
	len = sizeof(ss);
	getsockname(lfd, (struct sockaddr *)&ss, &len);
	printf("ready %u\n",
	       ntohs(ss.ss_family == AF_INET
			 ? ((struct sockaddr_in *)&ss)->sin_port
			 : ((struct sockaddr_in6 *)&ss)->sin6_port));
	fflush(stdout);
	if (wait_after)
		wait_file(wait_after);
	if (accept_after) {
		printf("waiting\n");
		fflush(stdout);
		wait_file(accept_after);
	}
	if (mode_epoll || mode_poll) {
		set_nonblock(lfd);
		for (int i = 0; i < conns; i++)
			cs[i].fd = -1;
		if (run_events(cs, conns, lfd, conns))
			return 2;
	} else {
		pthread_t *t = calloc((size_t)conns, sizeof(*t));

		for (int i = 0; i < conns; i++) {
			int fd = accept(lfd, NULL, NULL);

			if (fd < 0)
				tl_die("accept");
			conn_init(&cs[i], fd, true, i);
			pthread_create(&t[i], NULL, run_blocking, &cs[i]);
		}
		for (int i = 0; i < conns; i++)
			pthread_join(t[i], NULL);
		free(t);
	}
	rc = report(cs, conns, "server");
	wait_hold();
	for (int i = 0; i < conns; i++)
		close(cs[i].fd);
	close(lfd);
	return rc;
}

static int client(const char *addr, const char *port)
{
	struct sockaddr_storage ss;
	socklen_t len;
	struct conn *cs = calloc((size_t)conns, sizeof(*cs));
	int rc;

	if (resolve(addr, port, &ss, &len))
		tl_die("resolve");
	for (int i = 0; i < conns; i++) {
		int fd =
		    socket(ss.ss_family,
			   SOCK_STREAM | SOCK_CLOEXEC |
			       (mode_epoll || mode_poll ? SOCK_NONBLOCK : 0),
			   0);

		struct timespec t0, t1;

		if (fd < 0)
			tl_die("socket");
		if (bind_addr) {
			struct sockaddr_storage bs;
			socklen_t blen;

			if (resolve(bind_addr, "0", &bs, &blen))
				tl_die("resolve --bind");
			if (bind(fd, (struct sockaddr *)&bs, blen) < 0)
				tl_die("bind");
		}
		if (guard && set_guard(fd, guard) < 0)
			tl_die("--guard");
		clock_gettime(CLOCK_MONOTONIC, &t0);
		if (connect(fd, (struct sockaddr *)&ss, len) < 0) {
			struct pollfd p = {.fd = fd, .events = POLLOUT};
			int err = 0;
			socklen_t el = sizeof(err);

			if (errno != EINPROGRESS)
				tl_die("connect");
			if (poll(&p, 1, 30000) != 1)
				tl_die("connect poll");
			getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &el);
			if (err) {
				errno = err;
				tl_die("connect (SO_ERROR)");
			}
		}
		clock_gettime(CLOCK_MONOTONIC, &t1);
		if (timing)
			fprintf(stderr, "connect %d: %ld us\n", i,
				(t1.tv_sec - t0.tv_sec) * 1000000L +
				    (t1.tv_nsec - t0.tv_nsec) / 1000);
		conn_init(&cs[i], fd, false, i);
	}
	if (mode_epoll || mode_poll) {
		if (run_events(cs, conns, -1, 0))
			return 2;
	} else {
		pthread_t *t = calloc((size_t)conns, sizeof(*t));

		for (int i = 0; i < conns; i++)
			pthread_create(&t[i], NULL, run_blocking, &cs[i]);
		for (int i = 0; i < conns; i++)
			pthread_join(t[i], NULL);
		free(t);
	}
	rc = report(cs, conns, "client");
	wait_hold();
	for (int i = 0; i < conns; i++)
		close(cs[i].fd);
	return rc;
}

static uint64_t parse_size(const char *s)
{
	char *end;
	uint64_t v = strtoull(s, &end, 10);

	if (*end == 'K' || *end == 'k')
		v <<= 10;
	else if (*end == 'M' || *end == 'm')
		v <<= 20;
	return v;
}

int main(int argc, char **argv)
{
	if (argc < 4) {
		fprintf(stderr, "usage: xfer server|client ADDR PORT [opts]\n");
		return 2;
	}
	for (int i = 4; i < argc; i++) {
		const char *o = argv[i], *v = i + 1 < argc ? argv[i + 1] : "";

		if (!strcmp(o, "--conns"))
			conns = atoi(v), i++;
		else if (!strcmp(o, "--size"))
			size = parse_size(v), i++;
		else if (!strcmp(o, "--seed"))
			seed0 = strtoull(v, NULL, 10), i++;
		else if (!strcmp(o, "--bind"))
			bind_addr = v, i++;
		else if (!strcmp(o, "--backlog"))
			backlog = atoi(v), i++;
		else if (!strcmp(o, "--guard"))
			guard = v, i++;
		else if (!strcmp(o, "--guard-late"))
			guard_late = v, i++;
		else if (!strcmp(o, "--accept-after"))
			accept_after = v, i++;
		else if (!strcmp(o, "--wait-after"))
			wait_after = v, i++;
		else if (!strcmp(o, "--timing"))
			timing = 1;
		else if (!strcmp(o, "--hold"))
			hold = v, i++;
		else if (!strcmp(o, "--dir")) {
			dir = !strcmp(v, "up")	   ? DIR_UP
			      : !strcmp(v, "down") ? DIR_DOWN
						   : DIR_UP | DIR_DOWN;
			i++;
		} else if (!strcmp(o, "--mode")) {
			mode_epoll = !strcmp(v, "epoll");
			mode_poll = !strcmp(v, "poll");
			i++;
		} else {
			fprintf(stderr, "xfer: unknown option %s\n", o);
			return 2;
		}
	}
	if (conns < 1 || conns > 4096)
		return 2;
	if (!strcmp(argv[1], "server"))
		return server(argv[2], argv[3]);
	return client(argv[2], argv[3]);
}
