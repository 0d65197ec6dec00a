/* SPDX-License-Identifier: MIT */
/*
 * A plain socket program for the stat tests (it knows nothing of the shim).
 *
 *   statpeer server ADDR PORT
 *       listen (PORT 0: any), print "ready PORT", serve each connection in a
 *       thread: read a line "N R", then N bytes, then answer R bytes; again
 *       until EOF.
 *   statpeer client ADDR PORT N R [ADDR PORT N R]...
 *       one connection per target: send "N R\n" and N bytes, read R bytes;
 *       print "conn fd=F out=BYTES in=BYTES" (exact bytes through the fd),
 *       then "ready", then hold the connections until SIGTERM/SIGINT and
 *       exit 0 (so the shim's exit summary runs).
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "testlib.h"

static int fill_addr(const char *ip, const char *port, struct sockaddr_in *sa)
{
	memset(sa, 0, sizeof(*sa));
	sa->sin_family = AF_INET;
	sa->sin_port = htons((unsigned short)atoi(port));
	return inet_pton(AF_INET, ip, &sa->sin_addr) == 1 ? 0 : -1;
}

static int write_all(int fd, const char *buf, size_t n)
{
	while (n) {
		ssize_t r = write(fd, buf, n);

		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			return -1;
		buf += r;
		n -= (size_t)r;
	}
	return 0;
}

/* Read exactly n bytes (discarded); 0, or -1 on EOF/error. */
static int read_n(int fd, size_t n)
{
	char buf[65536];

	while (n) {
		ssize_t r = read(fd, buf, n < sizeof(buf) ? n : sizeof(buf));

		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			return -1;
		n -= (size_t)r;
	}
	return 0;
}

static int send_n(int fd, size_t n)
{
	static char buf[65536];

	while (n) {
		size_t k = n < sizeof(buf) ? n : sizeof(buf);

		if (write_all(fd, buf, k))
			return -1;
		n -= k;
	}
	return 0;
}

static void *serve(void *arg)
{
	int fd = (int)(long)arg;
	char line[64];

	for (;;) {
		size_t i = 0;
		unsigned long n, r;

		/* One byte at a time: the request's data follows the line. */
		while (i + 1 < sizeof(line) && read(fd, &line[i], 1) == 1 &&
		       line[i] != '\n')
			i++;
		line[i] = '\0';
		if (sscanf(line, "%lu %lu", &n, &r) != 2 || read_n(fd, n) ||
		    send_n(fd, r))
			break;
	}
	close(fd);
	return NULL;
}

static int server(const char *ip, const char *port)
{
	struct sockaddr_in sa;
	socklen_t len = sizeof(sa);
	int one = 1, lfd;

	if (fill_addr(ip, port, &sa))
		return 64;
	lfd = socket(AF_INET, SOCK_STREAM, 0);
	if (lfd < 0)
		tl_die("socket");
	setsockopt(lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	if (bind(lfd, (struct sockaddr *)&sa, sizeof(sa)) || listen(lfd, 64) ||
	    getsockname(lfd, (struct sockaddr *)&sa, &len))
		tl_die("listen");
	printf("ready %u\n", ntohs(sa.sin_port));
	fflush(stdout);
	for (;;) {
		int fd = accept(lfd, NULL, NULL);
		pthread_t t;

		if (fd < 0) {
			if (errno == EINTR || errno == ECONNABORTED)
				continue;
			tl_die("accept");
		}
		if (pthread_create(&t, NULL, serve, (void *)(long)fd))
			tl_die("pthread_create");
		pthread_detach(t);
	}
}

static volatile sig_atomic_t stop;
static void on_signal(int sig)
{
	stop = sig;
}

static int client(int argc, char **argv)
{
	struct sigaction sa = {.sa_handler = on_signal};

	if (argc < 4 || argc % 4)
		return 64;
	for (int i = 0; i < argc; i += 4) {
		struct sockaddr_in dst;
		unsigned long n = strtoul(argv[i + 2], NULL, 10);
		unsigned long r = strtoul(argv[i + 3], NULL, 10);
		char line[64];
		int fd, ll;

		if (fill_addr(argv[i], argv[i + 1], &dst))
			return 64;
		fd = socket(AF_INET, SOCK_STREAM, 0);
		if (fd < 0 || connect(fd, (struct sockaddr *)&dst, sizeof(dst)))
			tl_die("connect");
		ll = snprintf(line, sizeof(line), "%lu %lu\n", n, r);
		if (write_all(fd, line, (size_t)ll) || send_n(fd, n) ||
		    read_n(fd, r))
			tl_die("exchange");
		printf("conn fd=%d out=%lu in=%lu\n", fd, (unsigned long)ll + n,
		       r);
	}
	sigaction(SIGTERM, &sa, NULL);
	sigaction(SIGINT, &sa, NULL);
	printf("ready\n");
	fflush(stdout);
	while (!stop)
		pause();
	return 0;
}

int main(int argc, char **argv)
{
	setvbuf(stdout, NULL, _IOLBF, 0);
	if (argc == 4 && !strcmp(argv[1], "server"))
		return server(argv[2], argv[3]);
	if (argc >= 2 && !strcmp(argv[1], "client"))
		return client(argc - 2, argv + 2);
	fprintf(stderr,
		"usage: statpeer server ADDR PORT | client ADDR PORT N R...\n");
	return 64;
}
