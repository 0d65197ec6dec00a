/* SPDX-License-Identifier: MIT */
/*
 * passthru_fds: file-descriptor edge cases a preload shim must survive.
 *
 *   passthru_fds [all]     fds above 1024, above 65536 and at the soft limit
 *                          (RLIMIT_NOFILE raised first), close_range and
 *                          closefrom over sockets, fd numbers reused by
 *                          non-sockets, then close(2) and sockets on fd 2
 *   passthru_fds closerange
 *                          close_range(2, 2, 0), then sockets on fd 2
 *   passthru_fds fclose    fclose(stderr) (glibc closes fd 2 internally, the
 *                          shim cannot see it), then sockets on fd 2
 *   passthru_fds preclosed fd 2 is closed when the program starts (2>&-),
 *                          then sockets on fd 2
 *   passthru_fds fclose-file
 *                          fclose(stderr), an output file lands on fd 2, then
 *                          the first TCP socket; the file must hold exactly
 *                          what the program wrote
 *   passthru_fds activated socket activation: a parent hands a listening
 *                          socket to a re-executed child that starts with fd
 *                          2 closed; the child accepts (fd 2), then opens its
 *                          first outgoing TCP socket, then answers on fd 2
 *
 * In the fd-2 cases the data on those sockets is checked byte for byte: a log
 * line written to "stderr" would land in the stream.  The transcript on
 * stdout has no fd numbers, ports or timings, so runs with and without
 * liberdma_shim.so print the same.  With PASSTHRU_MAPS_OUT=FILE the lines of
 * /proc/self/maps naming liberdma_shim are copied to FILE at exit (proof the
 * shim was loaded when stderr is gone).  Exit status: 0 when every check
 * passed, 1 otherwise.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/ioctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <unistd.h>

#include "testlib.h"

#ifndef CLOSE_RANGE_CLOEXEC
#define CLOSE_RANGE_CLOEXEC (1U << 2)
#endif

static int failures;
static const char *tag = "main";

static void say(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void say(const char *fmt, ...)
{
	char prefix[64];
	va_list ap;

	snprintf(prefix, sizeof(prefix), "[%s] ", tag);
	va_start(ap, fmt);
	tl_vline(prefix, fmt, ap);
	va_end(ap);
}

#define CHECK(cond, ...)                                                       \
	do {                                                                   \
		if (!(cond)) {                                                 \
			int e_ = errno;                                        \
			printf("FAIL [%s] %s:%d: %s (errno %s): ", tag,        \
			       __func__, __LINE__, #cond, tl_en(e_));          \
			printf(__VA_ARGS__);                                   \
			putchar('\n');                                         \
			failures++;                                            \
		}                                                              \
	} while (0)

static void die(const char *what)
{
	tl_line("FAIL ", "[%s] fatal: %s: %s", tag, what, strerror(errno));
	exit(2);
}

/* ---------------------------------------------------------------- sockets */

static struct sockaddr_in lo_addr(void)
{
	struct sockaddr_in a = {.sin_family = AF_INET};

	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	return a;
}

static int listener(struct sockaddr_in *a)
{
	socklen_t l = sizeof(*a);
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);

	*a = lo_addr();
	if (fd < 0 || bind(fd, (struct sockaddr *)a, sizeof(*a)) ||
	    listen(fd, 64) || getsockname(fd, (struct sockaddr *)a, &l))
		die("listener");
	return fd;
}

static int connect_to(const struct sockaddr_in *a)
{
	int fd = socket(AF_INET, SOCK_STREAM, 0);

	if (fd < 0 || connect(fd, (const struct sockaddr *)a, sizeof(*a)))
		die("connect");
	return fd;
}

static void tcp_pair(int lfd, const struct sockaddr_in *a, int *cli, int *srv)
{
	*cli = connect_to(a);
	*srv = accept(lfd, NULL, NULL);
	if (*srv < 0)
		die("accept");
}

static int wait_fd(int fd, short ev, int ms)
{
	struct pollfd p = {.fd = fd, .events = ev};

	return poll(&p, 1, ms) > 0 ? p.revents : 0;
}

static int write_all(int fd, const void *buf, size_t n)
{
	const char *p = buf;

	while (n) {
		ssize_t w = write(fd, p, n);

		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0)
			return -1;
		p += w;
		n -= (size_t)w;
	}
	return 0;
}

static size_t read_n(int fd, void *buf, size_t n)
{
	char *p = buf;
	size_t got = 0;

	while (got < n) {
		ssize_t r = read(fd, p + got, n - got);

		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			break;
		got += (size_t)r;
	}
	return got;
}

/* Everything the socket gives until EOF (at most cap bytes kept). */
static size_t read_all(int fd, unsigned char *buf, size_t cap)
{
	size_t got = 0;
	unsigned char sink[4096];

	for (;;) {
		ssize_t r = got < cap ? read(fd, buf + got, cap - got)
				      : read(fd, sink, sizeof(sink));

		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			break;
		got += (size_t)r;
	}
	return got;
}

/* A full workout of one connected socket fd against its peer. */
static void exercise(int fd, int peer, const char *what)
{
	char buf[64];
	int one = 1, v = 0, fl, ep, ok_send, ok_recv, ok_poll, ok_epoll, ok_opt,
	    ok_nb, ok_eof;
	socklen_t vl = sizeof(v);
	struct epoll_event ev = {.events = EPOLLIN, .data.u32 = 9}, out;
	struct sockaddr_in a;
	socklen_t al = sizeof(a);

	ok_send = send(fd, "to-peer", 7, 0) == 7 && read_n(peer, buf, 7) == 7 &&
		  !memcmp(buf, "to-peer", 7);
	ok_poll = write_all(peer, "to-fd", 5) == 0 &&
		  (wait_fd(fd, POLLIN, 5000) & POLLIN);
	ep = epoll_create1(EPOLL_CLOEXEC);
	ok_epoll = ep >= 0 && !epoll_ctl(ep, EPOLL_CTL_ADD, fd, &ev) &&
		   epoll_wait(ep, &out, 1, 5000) == 1 && out.data.u32 == 9 &&
		   !epoll_ctl(ep, EPOLL_CTL_DEL, fd, NULL);
	if (ep >= 0)
		close(ep);
	ok_recv =
	    recv(fd, buf, 5, MSG_WAITALL) == 5 && !memcmp(buf, "to-fd", 5);
	ok_opt = !setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one)) &&
		 !getsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &v, &vl) && v &&
		 !getsockname(fd, (struct sockaddr *)&a, &al) &&
		 a.sin_family == AF_INET;
	fl = fcntl(fd, F_GETFL);
	ok_nb = fl >= 0 && !fcntl(fd, F_SETFL, fl | O_NONBLOCK) &&
		recv(fd, buf, 1, 0) < 0 && errno == EAGAIN &&
		!fcntl(fd, F_SETFL, fl);
	ok_eof = !shutdown(fd, SHUT_WR) && read(peer, buf, 1) == 0;
	say("%s: send=%d poll=%d epoll=%d recv=%d sockopt/getsockname=%d "
	    "nonblock=%d shutdown->EOF=%d",
	    what, ok_send, ok_poll, ok_epoll, ok_recv, ok_opt, ok_nb, ok_eof);
	CHECK(ok_send && ok_poll && ok_epoll && ok_recv && ok_opt && ok_nb &&
		  ok_eof,
	      "%s", what);
}

/* ---------------------------------------------------------------- limits */

static rlim_t soft_limit;

static void raise_limits(void)
{
	struct rlimit rl;
	const rlim_t want = 70000;

	tag = "limits";
	if (getrlimit(RLIMIT_NOFILE, &rl))
		die("getrlimit");
	if (rl.rlim_max < want) {
		struct rlimit r2 = {want, want};

		if (!setrlimit(RLIMIT_NOFILE, &r2))
			rl = r2;
	}
	if (rl.rlim_cur < rl.rlim_max) {
		rl.rlim_cur = rl.rlim_max;
		CHECK(!setrlimit(RLIMIT_NOFILE, &rl),
		      "raise soft limit to hard");
	}
	CHECK(!getrlimit(RLIMIT_NOFILE, &rl), "getrlimit");
	soft_limit = rl.rlim_cur;
	if (soft_limit > (1u << 20))
		soft_limit = 1u << 20; /* the kernel's usual nr_open */
	say("RLIMIT_NOFILE soft raised to the hard limit; fds above 1024: %s; "
	    "above 65536: %s",
	    soft_limit > 1600 ? "available" : "unavailable",
	    soft_limit > 66100 ? "available" : "unavailable");
}

/* ---------------------------------------------------------------- high fds */

static void high_fds(void)
{
	struct sockaddr_in la;
	int lfd, cli, srv;
	struct {
		const char *what;
		long fd;
	} targets[] = {
	    {"fd above 1024 (dup2)", 1500},
	    {"fd above 65536 (dup2)", 65600},
	    {"fd at RLIMIT_NOFILE-1 (dup2)", (long)soft_limit - 1},
	};

	tag = "high";
	lfd = listener(&la);
	for (size_t i = 0; i < sizeof(targets) / sizeof(targets[0]); i++) {
		int t = (int)targets[i].fd;

		if ((rlim_t)t >= soft_limit || t < 1100) {
			say("%s: skipped (limit)", targets[i].what);
			continue;
		}
		tcp_pair(lfd, &la, &cli, &srv);
		CHECK(dup2(cli, t) == t, "dup2 to %s", targets[i].what);
		close(cli);
		exercise(t, srv, targets[i].what);
		CHECK(!close(t), "close");
		errno = 0;
		int r = fcntl(t, F_GETFD);

		say("%s: after close: fcntl -> %d %s", targets[i].what, r,
		    tl_en(errno));
		close(srv);
	}

	/* a listener on a high fd accepts; the accepted socket is moved high */
	if (soft_limit > 66100) {
		int hl = 66001, hs = 66002, c;

		CHECK(dup2(lfd, hl) == hl, "dup2 listener");
		c = connect_to(&la);
		int s = accept4(hl, NULL, NULL, SOCK_CLOEXEC);

		CHECK(s >= 0, "accept on a high fd");
		CHECK(fcntl(s, F_DUPFD, hs) == hs, "F_DUPFD to a high fd");
		close(s);
		exercise(hs, c, "accepted socket moved above 65536 (F_DUPFD)");
		close(hs);
		close(c);
		close(hl);
		/* a not yet connected socket moved high, then connected there
		 */
		int u = socket(AF_INET, SOCK_STREAM, 0);

		CHECK(dup3(u, 66003, O_CLOEXEC) == 66003, "dup3");
		close(u);
		CHECK(!connect(66003, (struct sockaddr *)&la, sizeof(la)),
		      "connect on a high fd");
		s = accept(lfd, NULL, NULL);
		CHECK(s >= 0, "accept");
		exercise(66003, s,
			 "socket connected on a fd above 65536 (dup3 before "
			 "connect)");
		close(66003);
		close(s);
	} else {
		say("fds above 65536: skipped (limit)");
	}
	close(lfd);
}

/* ---------------------------------------------------------------- close_range
 * / closefrom */

/* n connected pairs; the client ends moved to first..first+n-1. */
static void pairs_at(int lfd, const struct sockaddr_in *la, int first, int n,
		     int *peers)
{
	for (int i = 0; i < n; i++) {
		int c, s;

		tcp_pair(lfd, la, &c, &s);
		CHECK(dup2(c, first + i) == first + i, "dup2");
		close(c);
		peers[i] = s;
	}
}

static int peers_see_eof(const int *peers, int n)
{
	int all = 1;
	char c;

	for (int i = 0; i < n; i++) {
		all &= (wait_fd(peers[i], POLLIN, 5000) & POLLIN) &&
		       read(peers[i], &c, 1) == 0;
		close(peers[i]);
	}
	return all;
}

static int all_closed(int first, int n)
{
	int all = 1;

	for (int i = 0; i < n; i++)
		all &= !tl_fd_open(first + i);
	return all;
}

static void ranges(void)
{
	struct sockaddr_in la;
	int lfd, peers[8], r, hi = soft_limit > 66100;

	tag = "close_range";
	lfd = listener(&la);
	pairs_at(lfd, &la, 500, 5, peers);
	r = close_range(500, 504, 0);
	say("close_range(500..504) over 5 connected sockets: %d; all closed: "
	    "%d; peers see EOF: %d",
	    r, all_closed(500, 5), peers_see_eof(peers, 5));

	pairs_at(lfd, &la, 600, 3, peers);
	r = close_range(600, 602, CLOSE_RANGE_CLOEXEC);
	{
		int cloexec = 1, works = 1;
		char c;

		for (int i = 0; i < 3; i++) {
			cloexec &= (fcntl(600 + i, F_GETFD) & FD_CLOEXEC) != 0;
			works &= write(600 + i, "k", 1) == 1 &&
				 read_n(peers[i], &c, 1) == 1 && c == 'k';
		}
		say("close_range(CLOSE_RANGE_CLOEXEC) over 3 sockets: %d; "
		    "still open: %d; FD_CLOEXEC set: %d; data "
		    "flows: %d",
		    r,
		    !all_closed(600, 1) && !all_closed(601, 1) &&
			!all_closed(602, 1),
		    cloexec, works);
	}
	close(600);
	close(601);
	close(602);
	for (int i = 0; i < 3; i++)
		close(peers[i]);

	errno = 0;
	r = close_range(10, 5, 0);
	say("close_range(10, 5): %d %s", r, tl_en(errno));

	if (hi) {
		pairs_at(lfd, &la, 66010, 4, peers);
		r = close_range(66009, 66020, 0);
		say("close_range over 4 sockets above 65536: %d; all closed: "
		    "%d; peers see EOF: %d",
		    r, all_closed(66010, 4), peers_see_eof(peers, 4));
	} else {
		say("close_range above 65536: skipped (limit)");
	}

	/* closefrom: sockets at 800.. and (if possible) far above */
	tag = "closefrom";
	pairs_at(lfd, &la, 800, 4, peers);
	if (hi)
		pairs_at(lfd, &la, 67000, 2, peers + 4);
	closefrom(800);
	say("closefrom(800) over %d sockets: all closed: %d; peers see EOF: %d",
	    hi ? 6 : 4, all_closed(800, 4) && (!hi || all_closed(67000, 2)),
	    peers_see_eof(peers, hi ? 6 : 4));
	/* the numbers are free again and new sockets work there */
	{
		int c, s;

		tcp_pair(lfd, &la, &c, &s);
		CHECK(dup2(c, 800) == 800, "dup2");
		close(c);
		exercise(800, s, "new socket on a number closefrom freed");
		close(800);
		close(s);
	}
	close(lfd);
}

/* Sockets that land above 1024 by themselves; numbers reused by pipes. */
static void natural_high(void)
{
	struct sockaddr_in la;
	int lfd, first_filler = -1, last_filler = -1, fd, c, s, pfd[2];

	tag = "natural";
	if (soft_limit <= 1600) {
		say("skipped (limit)");
		return;
	}
	lfd = listener(&la);
	/* fill the table with /dev/null up to 1100 */
	while ((fd = open("/dev/null", O_RDONLY | O_CLOEXEC)) >= 0) {
		if (first_filler < 0)
			first_filler = fd;
		last_filler = fd;
		if (fd >= 1100)
			break;
	}
	CHECK(last_filler >= 1100, "fill");
	tcp_pair(lfd, &la, &c, &s);
	say("socket() and accept() land above 1024: %d", c > 1024 && s > 1024);
	exercise(c, s, "connection on fds above 1024");
	/* close both with close_range, then let pipe2 reuse the numbers */
	int lo = c < s ? c : s, hi = c < s ? s : c;

	CHECK(!close_range((unsigned)lo, (unsigned)hi, 0), "close_range");
	CHECK(!pipe2(pfd, O_CLOEXEC), "pipe2");
	{
		char b[8] = {0};
		int same = (pfd[0] == lo || pfd[0] == hi) &&
			   (pfd[1] == lo || pfd[1] == hi);
		int w = (int)write(pfd[1], "pipe", 4);
		int r = (int)read(pfd[0], b, sizeof(b));
		struct pollfd p = {.fd = pfd[0], .events = POLLIN};

		close(pfd[1]);
		int pr = poll(&p, 1, 1000);
		int eof = (int)read(pfd[0], b + 4, 1);

		say("pipe2 on the numbers of the closed sockets: reused=%d "
		    "write=%d read=%d \"%.4s\" poll=%d "
		    "then read=%d",
		    same, w, r, b, pr, eof);
		close(pfd[0]);
	}
	/* same for a socket's number reused by a plain file */
	tcp_pair(lfd, &la, &c, &s);
	close(c);
	close(s);
	fd = open("/dev/zero", O_RDONLY | O_CLOEXEC);
	{
		char z[4] = {1, 1, 1, 1};
		ssize_t r = read(fd, z, 4);

		say("/dev/zero on a closed socket's number: reused=%d read=%zd "
		    "zeros=%d",
		    fd == c || fd == s, r, !z[0] && !z[3]);
	}
	close(fd);
	CHECK(!close_range((unsigned)first_filler, (unsigned)last_filler, 0),
	      "close fillers");
	say("fillers closed: %d",
	    !tl_fd_open(first_filler) && !tl_fd_open(last_filler));
	close(lfd);
}

/* ---------------------------------------------------------------- fd 2 */

struct sink {
	int fd;
	unsigned char *buf;
	size_t cap, got;
};

static void *sink_main(void *arg)
{
	struct sink *k = arg;

	k->got = read_all(k->fd, k->buf, k->cap);
	return NULL;
}

/* Send n pattern bytes from fd with a mix of calls (each one a chance for a
 * shim to log), interleaved with calls that do not move data. */
static int send_mix(int fd, const unsigned char *data, size_t n)
{
	size_t off = 0;
	int step = 0, one = 1, v;
	socklen_t vl;
	struct sockaddr_in a;
	socklen_t al;

	while (off < n) {
		size_t k = n - off < 4096 ? n - off : 4096;
		ssize_t w;

		switch (step++ % 5) {
		case 0:
			w = write(fd, data + off, k);
			break;
		case 1:
			w = send(fd, data + off, k, 0);
			break;
		case 2: {
			struct iovec iv[2] = {
			    {(void *)(data + off), k / 2},
			    {(void *)(data + off + k / 2), k - k / 2}};

			w = writev(fd, iv, 2);
			break;
		}
		case 3: {
			struct iovec iv = {(void *)(data + off), k};
			struct msghdr m = {.msg_iov = &iv, .msg_iovlen = 1};

			w = sendmsg(fd, &m, 0);
			break;
		}
		default:
			w = sendto(fd, data + off, k, 0, NULL, 0);
			break;
		}
		if (w <= 0)
			return -1;
		off += (size_t)w;
		/* calls that do not move data */
		vl = sizeof(v);
		al = sizeof(a);
		(void)getsockopt(fd, SOL_SOCKET, SO_ERROR, &v, &vl);
		(void)setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one,
				 sizeof(one));
		(void)fcntl(fd, F_GETFL);
		(void)ioctl(fd, FIONREAD, &v);
		(void)getsockname(fd, (struct sockaddr *)&a, &al);
		(void)wait_fd(fd, POLLOUT, 0);
		int d = dup(fd);

		if (d >= 0)
			close(d);
	}
	return 0;
}

/* Receive until EOF with a mix of calls. */
static size_t recv_mix(int fd, unsigned char *buf, size_t cap)
{
	size_t got = 0;
	int step = 0;

	for (;;) {
		size_t k = cap - got < 3000 ? cap - got : 3000;
		ssize_t r;

		if (!k)
			k = 1; /* overflow: still detect extra bytes */
		unsigned char extra;
		unsigned char *p = got < cap ? buf + got : &extra;

		switch (step++ % 4) {
		case 0:
			r = read(fd, p, k);
			break;
		case 1:
			r = recv(fd, p, k, 0);
			break;
		case 2: {
			struct iovec iv = {p, k};

			r = readv(fd, &iv, 1);
			break;
		}
		default: {
			struct iovec iv = {p, k};
			struct msghdr m = {.msg_iov = &iv, .msg_iovlen = 1};

			r = recvmsg(fd, &m, 0);
			break;
		}
		}
		if (r <= 0)
			break;
		got += (size_t)r;
	}
	return got;
}

/* One direction checked: n bytes from `from` must arrive exactly at `to`. */
static void stream_check(int from, int to, size_t n, uint64_t seed,
			 const char *what)
{
	unsigned char *data = malloc(n), *rx = malloc(n + 65536);
	struct sink k = {.fd = to, .buf = rx, .cap = n + 65536};
	pthread_t th;
	int sent, same, shimtext;

	if (!data || !rx)
		die("malloc");
	tl_pattern(data, n, seed);
	if (pthread_create(&th, NULL, sink_main, &k))
		die("pthread_create");
	sent = send_mix(from, data, n) == 0;
	CHECK(!shutdown(from, SHUT_WR), "shutdown");
	pthread_join(th, NULL);
	same = k.got == n && !memcmp(rx, data, n);
	shimtext = memmem(rx, k.got < n + 65536 ? k.got : n + 65536,
			  "liberdma_shim", 13) != NULL;
	say("%s: sent %zu ok=%d; peer received %zu; identical=%d; shim text in "
	    "the stream: %s",
	    what, n, sent, k.got, same, shimtext ? "YES" : "none");
	CHECK(sent && same && !shimtext, "%s", what);
	free(data);
	free(rx);
}

struct sender {
	int fd;
	const unsigned char *data;
	size_t n;
	int ok;
};

static void *sender_main(void *arg)
{
	struct sender *s = arg;

	s->ok =
	    write_all(s->fd, s->data, s->n) == 0 && !shutdown(s->fd, SHUT_WR);
	return NULL;
}

/* n bytes from a peer thread into fd, read with a mix of calls. */
static void stream_into(int fd, int peer, size_t n, uint64_t seed,
			const char *what)
{
	unsigned char *data = malloc(n), *rx = malloc(n + 65536);
	struct sender s = {.fd = peer, .n = n};
	pthread_t th;
	size_t got;

	if (!data || !rx)
		die("malloc");
	tl_pattern(data, n, seed);
	s.data = data;
	if (pthread_create(&th, NULL, sender_main, &s))
		die("pthread_create");
	got = recv_mix(fd, rx, n + 65536);
	pthread_join(th, NULL);
	int same = got == n && !memcmp(rx, data, n);

	say("%s: peer sent %zu ok=%d; received %zu; identical=%d", what, n,
	    s.ok, got, same);
	CHECK(s.ok && same, "%s", what);
	free(data);
	free(rx);
}

/* fd 2 is closed (however the mode did it): sockets land there. */
static void fd2_sockets(void)
{
	struct sockaddr_in la;
	int c, lfd, srv, c2, srv2;

	tag = "fd2";
	/* A: a client socket lands on fd 2 */
	c = socket(AF_INET, SOCK_STREAM, 0);
	say("new client socket lands on fd 2: %s", c == 2 ? "yes" : "no");
	CHECK(c == 2, "socket on fd 2");
	lfd = listener(&la);
	CHECK(!connect(c, (struct sockaddr *)&la, sizeof(la)),
	      "connect from fd 2");
	srv = accept(lfd, NULL, NULL);
	CHECK(srv >= 0, "accept");
	stream_into(c, srv, 100000, 21, "client on fd 2, receiving");
	stream_check(c, srv, 300000, 22, "client on fd 2, sending");
	close(srv);

	/* B: an accepted socket lands on fd 2 */
	c2 = connect_to(&la);
	close(c); /* frees fd 2 */
	srv2 = accept(lfd, NULL, NULL);
	say("accepted socket lands on fd 2: %s", srv2 == 2 ? "yes" : "no");
	CHECK(srv2 == 2, "accept on fd 2");
	stream_into(srv2, c2, 100000, 23, "accepted on fd 2, receiving");
	stream_check(srv2, c2, 300000, 24, "accepted on fd 2, sending");
	close(srv2);
	close(c2);
	close(lfd);
}

/* Socket activation: see the top of the file. */
static int activated_child(int backend_port)
{
	struct sockaddr_in be = lo_addr();
	int conn, b;
	char msg[16];

	tag = "activated-child";
	/* fd 3 is the inherited listener; fd 2 is closed */
	conn = accept(3, NULL, NULL);
	if (conn != 2)
		return 10;
	/* the program's first TCP socket of its own: an outgoing connection */
	be.sin_port = htons((uint16_t)backend_port);
	b = socket(AF_INET, SOCK_STREAM, 0);
	if (b < 0 || connect(b, (struct sockaddr *)&be, sizeof(be)))
		return 11;
	if (write_all(b, "backend", 7))
		return 12;
	if (read_n(b, msg, 2) != 2 || memcmp(msg, "ok", 2))
		return 13;
	close(b);
	/* now answer the activating client on fd 2 */
	{
		unsigned char *data = malloc(200000);

		if (!data)
			return 14;
		tl_pattern(data, 200000, 31);
		if (send_mix(conn, data, 200000))
			return 15;
		free(data);
	}
	shutdown(conn, SHUT_WR);
	close(conn);
	return 0;
}

static void activated_parent(const char *self)
{
	struct sockaddr_in la, ba;
	int lfd, blfd, c, b, st = 0;
	pid_t pid;
	char port[16], msg[16];

	tag = "activated";
	lfd = listener(&la);
	blfd = listener(&ba);
	snprintf(port, sizeof(port), "%d", ntohs(ba.sin_port));
	fflush(stdout);
	pid = fork();
	if (pid == 0) {
		/* the "service manager": listener on fd 3, stderr closed */
		if (dup2(lfd, 3) != 3 || fcntl(3, F_SETFD, 0))
			_exit(20);
		close(2);
		closefrom(4);
		execl(self, self, "activated-child", port, (char *)NULL);
		_exit(21);
	}
	CHECK(pid > 0, "fork");
	c = connect_to(&la);
	b = accept(blfd, NULL, NULL);
	CHECK(b >= 0 && read_n(b, msg, 7) == 7 && !memcmp(msg, "backend", 7) &&
		  write_all(b, "ok", 2) == 0,
	      "backend connection");
	close(b);
	{
		unsigned char *data = malloc(200000),
			      *rx = malloc(200000 + 65536);
		size_t got;

		if (!data || !rx)
			die("malloc");
		tl_pattern(data, 200000, 31);
		got = read_all(c, rx, 200000 + 65536);
		int same = got == 200000 && !memcmp(rx, data, 200000);
		int shimtext = memmem(rx, got, "liberdma_shim", 13) != NULL;

		CHECK(waitpid(pid, &st, 0) == pid, "waitpid");
		say("child (stderr closed at start) accepted on fd 2, opened a "
		    "TCP socket, answered: exit %d; "
		    "received %zu of 200000; identical=%d; shim text in the "
		    "stream: %s",
		    WIFEXITED(st) ? WEXITSTATUS(st) : -1, got, same,
		    shimtext ? "YES" : "none");
		CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0 && same &&
			  !shimtext,
		      "activated child");
		free(data);
		free(rx);
	}
	close(c);
	close(lfd);
	close(blfd);
}

/* fclose(stderr) before the first socket: an output file takes fd 2. */
static void fclose_file(void)
{
	char path[] = "/tmp/passthru_fds.XXXXXX";
	static const char text[] = "the program's own file contents\n";
	char back[256];
	int fd, s;
	ssize_t n;

	tag = "fclose-file";
	CHECK(!fclose(stderr), "fclose");
	fd = mkstemp(path);
	say("output file lands on fd 2: %s", fd == 2 ? "yes" : "no");
	CHECK(fd == 2, "file on fd 2");
	/* the program's first TCP socket */
	s = socket(AF_INET, SOCK_STREAM, 0);
	CHECK(s >= 0, "socket");
	close(s);
	CHECK(write_all(fd, text, sizeof(text) - 1) == 0, "write");
	close(fd);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	n = fd >= 0 ? (ssize_t)read_n(fd, back, sizeof(back)) : -1;
	if (fd >= 0)
		close(fd);
	unlink(path);
	int same =
	    n == (ssize_t)sizeof(text) - 1 && !memcmp(back, text, (size_t)n);

	say("file written %zu bytes, holds %zd; identical=%d; shim text in the "
	    "file: %s",
	    sizeof(text) - 1, n, same,
	    n > 0 && memmem(back, (size_t)n, "liberdma_shim", 13) ? "YES"
								  : "none");
	CHECK(same, "file contents");
}

/* ---------------------------------------------------------------- main */

static void maps_report(void)
{
	const char *out = getenv("PASSTHRU_MAPS_OUT");
	FILE *in, *o;
	char line[4096];

	if (!out)
		return;
	in = fopen("/proc/self/maps", "re");
	o = fopen(out, "we");
	if (in && o)
		while (fgets(line, sizeof(line), in))
			if (strstr(line, "liberdma_shim"))
				fputs(line, o);
	if (in)
		fclose(in);
	if (o)
		fclose(o);
}

int main(int argc, char **argv)
{
	const char *mode = argc > 1 ? argv[1] : "all";

	if (!strcmp(mode, "activated-child"))
		return argc > 2 ? activated_child(atoi(argv[2])) : 9;
	setvbuf(stdout, NULL, _IOLBF, 0);
	signal(SIGPIPE, SIG_IGN);
	alarm(60);
	printf("passthru_fds %s\n", mode);
	if (!strcmp(mode, "all")) {
		raise_limits();
		high_fds();
		ranges();
		natural_high();
		tag = "fd2";
		say("closing fd 2 with close()");
		CHECK(!close(2), "close(2)");
		fd2_sockets();
	} else if (!strcmp(mode, "closerange")) {
		tag = "fd2";
		say("closing fd 2 with close_range(2, 2, 0)");
		CHECK(!close_range(2, 2, 0), "close_range");
		fd2_sockets();
	} else if (!strcmp(mode, "fclose")) {
		tag = "fd2";
		say("closing fd 2 with fclose(stderr)");
		CHECK(!fclose(stderr), "fclose");
		fd2_sockets();
	} else if (!strcmp(mode, "preclosed")) {
		tag = "fd2";
		say("fd 2 closed at start: %s", tl_fd_open(2) ? "no" : "yes");
		CHECK(!tl_fd_open(2),
		      "fd 2 must be closed at start (run with 2>&-)");
		fd2_sockets();
	} else if (!strcmp(mode, "fclose-file")) {
		fclose_file();
	} else if (!strcmp(mode, "activated")) {
		activated_parent("/proc/self/exe");
	} else {
		printf("usage: passthru_fds "
		       "[all|closerange|fclose|preclosed|activated|fclose-file]"
		       "\n");
		return 2;
	}
	maps_report();
	printf("passthru_fds: %d failure(s)\n", failures);
	return failures ? 1 : 0;
}
