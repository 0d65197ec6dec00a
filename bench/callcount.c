/* SPDX-License-Identifier: MIT */
/*
 * callcount: a fixed number of cheap socket-API calls on kernel fds, for
 * counting instructions under valgrind --tool=callgrind with and without
 * the shim preloaded (bench/passthrough-cost does that).  Knows nothing of
 * the shim.
 *
 *   callcount K [MODE]
 *
 * MODE rw (default): K times { write(a, 1 byte); read(b, 1 byte) } over an
 *         AF_UNIX socketpair: 2 intercepted calls per iteration
 *      sendrecv: the same with send()/recv() on a connected TCP socket pair
 *         over 127.0.0.1: 2 calls per iteration
 *      eagain: K times recv(fd, MSG_DONTWAIT) on an idle connected TCP
 *         socket, which fails with EAGAIN: 1 call per iteration
 *
 * Everything outside the loop (set-up, the final line) is the same for any
 * K, so the difference of two runs with different K is the loop alone.
 * Prints "calls N" (the intercepted calls the loop made); exit 1 if any call
 * did not behave as expected.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <errno.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

static void die(const char *what)
{
	fprintf(stderr, "callcount: %s: %s\n", what, strerror(errno));
	exit(2);
}

/* A connected TCP pair over 127.0.0.1: fd[0] client side, fd[1] server. */
static void tcp_pair(int fd[2])
{
	struct sockaddr_in a = {.sin_family = AF_INET,
				.sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	socklen_t alen = sizeof(a);
	int l = socket(AF_INET, SOCK_STREAM, 0);

	if (l < 0 || bind(l, (struct sockaddr *)&a, sizeof(a)) < 0 ||
	    listen(l, 1) < 0 ||
	    getsockname(l, (struct sockaddr *)&a, &alen) < 0)
		die("listener");
	fd[0] = socket(AF_INET, SOCK_STREAM, 0);
	if (fd[0] < 0 || connect(fd[0], (struct sockaddr *)&a, alen) < 0)
		die("connect");
	fd[1] = accept(l, NULL, NULL);
	if (fd[1] < 0)
		die("accept");
	close(l);
}

int main(int argc, char **argv)
{
	const char *mode = argc > 2 ? argv[2] : "rw";
	long k, bad = 0, calls;
	char c = 'x';
	int fd[2];

	if (argc < 2 || argc > 3) {
		fprintf(stderr, "usage: callcount K [rw|sendrecv|eagain]\n");
		return 2;
	}
	k = strtol(argv[1], NULL, 10);
	if (k < 0)
		k = 0;

	if (!strcmp(mode, "rw")) {
		if (socketpair(AF_UNIX, SOCK_STREAM, 0, fd) < 0)
			die("socketpair");
		for (long i = 0; i < k; i++) {
			bad += write(fd[0], &c, 1) != 1;
			bad += read(fd[1], &c, 1) != 1;
		}
		calls = 2 * k;
	} else if (!strcmp(mode, "sendrecv")) {
		tcp_pair(fd);
		for (long i = 0; i < k; i++) {
			bad += send(fd[0], &c, 1, 0) != 1;
			bad += recv(fd[1], &c, 1, 0) != 1;
		}
		calls = 2 * k;
	} else if (!strcmp(mode, "eagain")) {
		tcp_pair(fd);
		for (long i = 0; i < k; i++)
			bad += recv(fd[0], &c, 1, MSG_DONTWAIT) != -1 ||
			       errno != EAGAIN;
		calls = k;
	} else {
		fprintf(stderr, "callcount: unknown mode '%s'\n", mode);
		return 2;
	}
	printf("calls %ld bad %ld\n", calls, bad);
	return bad ? 1 : 0;
}
