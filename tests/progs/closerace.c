/* SPDX-License-Identifier: MIT */
/*
 * closerace: calls on an fd racing its close() in another thread, and the
 * number's reuse by the next socket (issue #15: the shim's fd-table lookup
 * and its reference were not one step, so a call could use a freed sock or
 * another connection's state).
 *
 *   closerace server ADDR PORT   accept forever; each connection is read
 *                                to EOF and closed ("ready PORT")
 *   closerace client ADDR PORT TCP_ROUNDS RDMA_ROUNDS
 *       phase tcp:  TCP_ROUNDS sockets, never connected (socket, bind, close)
 *       phase conn: RDMA_ROUNDS connections to the server
 *   In each round three threads hammer the round's fd number with setsockopt,
 *   getsockopt, fcntl (F_GETFL, F_SETFL, F_DUPFD), ioctl, getsockname,
 *   getpeername, recv/send (MSG_DONTWAIT), dup, epoll_ctl, poll,
 *   shutdown(SHUT_RD) and bind (to port 0), and the
 *   round's own epoll fd (the fd registered in it) with epoll_wait, while
 *   the main thread closes both and opens the next.  Every result must be
 *   one the kernel gives when a close races the call and the number is
 *   taken again: success, or EBADF, EAGAIN, ENOTCONN, EPIPE, ECONNRESET,
 *   ENOENT/EEXIST (epoll_ctl), EINVAL (epoll_wait on a number that is no
 *   epoll fd any more), ENOTSOCK/ENOTTY (a number taken by a non-socket:
 *   the epoll fd, or one of librdmacm's own), EPERM (epoll_ctl on such a
 *   file that has no poll, as libibverbs' device file).  The round's own
 *   connect() may fail too: a racer still holding the last round's number
 *   can reach the new socket while it connects, and the kernel's
 *   shutdown() of a socket in SYN_SENT disconnects it (inet_shutdown), so
 *   its connect() says ECONNRESET -- or ECONNABORTED when another racer's
 *   getsockopt(SO_ERROR) took that error first -- or, when the racer's
 *   F_GETFL read a non-blocking file of librdmacm's (its channels are)
 *   and its F_SETFL reached the new socket, EINPROGRESS, as the kernel's
 *   would (seen once in the bed, EPERM beside it).  Such a round is
 *   counted and made again.  Prints "closerace: tcp N rounds, conn M
 *   rounds, R connects reset, K calls, 0 unexpected".
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <unistd.h>

#define RACERS 3

static atomic_int cur_fd = -1, cur_ep = -1;
static atomic_int stop;
static atomic_long calls, unexpected;
static long resets; /* connects a racer's shutdown reset (see above) */
static int epfd;
static struct sockaddr_in srv;
static pthread_t racers[RACERS];

static bool allowed(int e)
{
	return e == EBADF || e == EAGAIN || e == ENOTCONN || e == EPIPE ||
	       e == ECONNRESET || e == EINVAL || e == ENOENT || e == EEXIST ||
	       e == ENOTSOCK || e == ENOTTY || e == EPERM;
}

static void check(const char *what, long r, int fd)
{
	int e = errno;

	atomic_fetch_add(&calls, 1);
	if (r >= 0 || allowed(e))
		return;
	if (atomic_fetch_add(&unexpected, 1) < 10)
		fprintf(stderr, "closerace: %s on fd %d: %s\n", what, fd,
			strerror(e));
}

static void one_call(int fd, unsigned int k)
{
	char b[64];
	int v = 1 << 16;
	socklen_t l = sizeof(v);
	struct sockaddr_storage a;
	socklen_t al = sizeof(a);
	struct epoll_event ev = {.events = EPOLLIN};
	long r;

	switch (k % 15) {
	case 0:
		check("setsockopt",
		      setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &v, sizeof(v)), fd);
		break;
	case 1:
		check("getsockopt",
		      getsockopt(fd, SOL_SOCKET, SO_ERROR, &v, &l), fd);
		break;
	case 2:
		r = fcntl(fd, F_GETFL);
		check("fcntl(F_GETFL)", r, fd);
		if (r >= 0)
			check("fcntl(F_SETFL)", fcntl(fd, F_SETFL, r), fd);
		break;
	case 3:
		r = fcntl(fd, F_DUPFD_CLOEXEC, 0);
		check("fcntl(F_DUPFD)", r, fd);
		if (r >= 0)
			close((int)r);
		break;
	case 4:
		check("ioctl(FIONREAD)", ioctl(fd, FIONREAD, &v), fd);
		break;
	case 5:
		check("getsockname", getsockname(fd, (void *)&a, &al), fd);
		break;
	case 6:
		r = getpeername(fd, (void *)&a, &al);
		check("getpeername", r < 0 && errno == ENOTCONN ? 0 : r, fd);
		break;
	case 7:
		check("recv", recv(fd, b, sizeof(b), MSG_DONTWAIT), fd);
		break;
	case 8:
		check("send", send(fd, "x", 1, MSG_DONTWAIT | MSG_NOSIGNAL),
		      fd);
		break;
	case 9:
		r = epoll_ctl(epfd, EPOLL_CTL_ADD, fd, &ev);
		check("epoll_ctl(ADD)", r, fd);
		if (r == 0)
			check("epoll_ctl(DEL)",
			      epoll_ctl(epfd, EPOLL_CTL_DEL, fd, NULL), fd);
		break;
	case 11: {
		struct pollfd p = {.fd = fd, .events = POLLIN | POLLOUT};

		check("poll", poll(&p, 1, 0), fd);
		break;
	}
	case 12:
		check("epoll_wait", epoll_wait(atomic_load(&cur_ep), &ev, 1, 0),
		      fd);
		break;
	case 13:
		check("shutdown(SHUT_RD)", shutdown(fd, SHUT_RD), fd);
		break;
	case 14: {
		struct sockaddr_in any = {.sin_family = AF_INET};

		/* EINVAL once bound: the round's own bind, or a racer's */
		check("bind", bind(fd, (struct sockaddr *)&any, sizeof(any)),
		      fd);
		break;
	}
	default:
		r = dup(fd);
		check("dup", r, fd);
		if (r >= 0)
			close((int)r);
	}
}

static void *racer(void *arg)
{
	unsigned int k = (unsigned int)(uintptr_t)arg;

	while (!atomic_load(&stop)) {
		int fd = atomic_load(&cur_fd);

		if (fd >= 0)
			one_call(fd, k++);
	}
	return NULL;
}

/* Before any message too: a racer's call on a number the message's own
 * stream takes (perror dups stderr) would print a result that is not the
 * failure's.  Once only. */
static void racers_stop(void)
{
	if (atomic_exchange(&stop, 1))
		return;
	for (int i = 0; i < RACERS; i++)
		pthread_join(racers[i], NULL);
}

/* Let the racers reach the fd: a few thousand calls' worth of spinning,
 * then the close (the race is the point: no sleep, no handshake). */
static void spin(long n)
{
	long c0 = atomic_load(&calls);

	while (atomic_load(&calls) - c0 < n)
		;
}

/* The round's epoll fd, fd registered in it. */
static void round_ep(int fd)
{
	struct epoll_event ev = {.events = EPOLLIN};
	int ep = epoll_create1(EPOLL_CLOEXEC);

	epoll_ctl(ep, EPOLL_CTL_ADD, fd, &ev);
	atomic_store(&cur_ep, ep);
}

static int tcp_round(void)
{
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	struct sockaddr_in any = {.sin_family = AF_INET};

	if (fd < 0)
		return -1;
	round_ep(fd);
	atomic_store(&cur_fd, fd);
	bind(fd, (struct sockaddr *)&any, sizeof(any));
	spin(20);
	close(atomic_load(&cur_ep));
	close(fd);
	return 0;
}

/* 0: a round done; 1: its connect was reset by a racer, do it again */
static int conn_round(void)
{
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);

	if (fd < 0)
		return -1;
	if (connect(fd, (struct sockaddr *)&srv, sizeof(srv)) < 0) {
		int e = errno;

		close(fd);
		if (e == ECONNRESET || e == ECONNABORTED || e == EINPROGRESS)
			return 1;
		racers_stop();
		errno = e;
		perror("closerace: connect");
		return -1;
	}
	round_ep(fd);
	atomic_store(&cur_fd, fd);
	spin(200);
	close(atomic_load(&cur_ep));
	close(fd);
	return 0;
}

/* The rounds, racers running: 0, or 2 when one could not be made. */
static int rounds(int tcp_rounds, int conn_rounds)
{
	int i;

	for (i = 0; i < tcp_rounds; i++)
		if (tcp_round() < 0)
			return 2;
	for (i = 0; i < conn_rounds;) {
		int r = conn_round();

		if (r < 0)
			return 2;
		if (r == 0) {
			i++;
			continue;
		}
		/* a race, not the rule: resets far above it are a defect */
		if (++resets > 10L * conn_rounds) {
			racers_stop();
			fprintf(stderr, "closerace: %ld connects reset\n",
				resets);
			return 2;
		}
	}
	return 0;
}

static int client(int tcp_rounds, int conn_rounds)
{
	int rc;

	epfd = epoll_create1(EPOLL_CLOEXEC);
	for (int i = 0; i < RACERS; i++)
		pthread_create(&racers[i], NULL, racer,
			       (void *)(uintptr_t)(i * 4));
	rc = rounds(tcp_rounds, conn_rounds);
	racers_stop(); /* on a failure too: they would outlive main's return */
	if (rc)
		return rc;
	printf("closerace: tcp %d rounds, conn %d rounds, %ld connects reset, "
	       "%ld calls, %ld unexpected\n",
	       tcp_rounds, conn_rounds, resets, atomic_load(&calls),
	       atomic_load(&unexpected));
	return atomic_load(&unexpected) ? 1 : 0;
}

static void *drain(void *arg)
{
	int fd = (int)(intptr_t)arg;
	char b[4096];

	while (read(fd, b, sizeof(b)) > 0)
		;
	close(fd);
	return NULL;
}

static int server(void)
{
	int lfd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0), one = 1;
	socklen_t l = sizeof(srv);
	pthread_attr_t at;

	setsockopt(lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	if (bind(lfd, (struct sockaddr *)&srv, sizeof(srv)) < 0 ||
	    listen(lfd, 128) < 0) {
		perror("closerace: listen");
		return 2;
	}
	getsockname(lfd, (struct sockaddr *)&srv, &l);
	printf("ready %u\n", ntohs(srv.sin_port));
	fflush(stdout);
	pthread_attr_init(&at);
	pthread_attr_setdetachstate(&at, PTHREAD_CREATE_DETACHED);
	for (;;) {
		int fd = accept4(lfd, NULL, NULL, SOCK_CLOEXEC);
		pthread_t t;

		if (fd < 0) {
			perror("closerace: accept");
			return 2;
		}
		pthread_create(&t, &at, drain, (void *)(intptr_t)fd);
	}
}

int main(int argc, char **argv)
{
	if (argc < 4) {
		fprintf(stderr, "usage: closerace server ADDR PORT | client "
				"ADDR PORT TCP_ROUNDS CONN_ROUNDS\n");
		return 2;
	}
	signal(SIGPIPE, SIG_IGN);
	srv.sin_family = AF_INET;
	srv.sin_port = htons((uint16_t)atoi(argv[3]));
	if (inet_pton(AF_INET, argv[2], &srv.sin_addr) != 1)
		return 2;
	if (!strcmp(argv[1], "server"))
		return server();
	if (argc < 6)
		return 2;
	return client(atoi(argv[4]), atoi(argv[5]));
}
