/* SPDX-License-Identifier: MIT */
/*
 * kalive: TCP keepalive on a connection whose peer host vanishes, printed
 * as a transcript (issue 15).  Plain socket API only: run it over kernel
 * TCP and under the shim (ERDMA_SHIM=require) and the transcripts must be
 * equal.
 *
 *   kalive server ADDR IDLE INTVL CNT
 *   kalive client ADDR PORT IDLE INTVL CNT [SRC]
 *
 * The server sets SO_KEEPALIVE, TCP_KEEPIDLE/INTVL/CNT on its listener
 * (accepted connections inherit them), prints "ready PORT", accepts one
 * connection, sends "a", answers "b" with "c", then reads.  The client sets
 * the same options before its connect, reads "a", stays idle for 3 s
 * (keepalive probes go and are answered: the connection stays up), sends
 * "b" and reads "c", then reads.  Each end prints "armed" once all it sent
 * is acknowledged, and the test, seeing both, cuts the
 * wire both ways: each end's read must end with the keepalive's error,
 * within 30 s.  Durations are classes far from the expected values.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "testlib.h"

static const char *role = "?";

static void say(const char *c, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
static void say(const char *c, const char *fmt, ...)
{
	char tag[64];
	va_list ap;

	snprintf(tag, sizeof(tag), "%s-%s", role, c);
	va_start(ap, fmt);
	tl_vsay(tag, fmt, ap);
	va_end(ap);
}

static const char *dur(long long ms)
{
	if (ms < 2000)
		return "under 2s";
	if (ms < 20000)
		return "2-20s";
	return "over 20s";
}

static void on_alarm(int sig)
{
	static const char m[] = "watchdog: still waiting after 40 s\n";

	(void)sig;
	(void)!write(1, m, sizeof(m) - 1);
	_exit(3);
}

static void set_ka(int fd, int idle, int intvl, int cnt)
{
	int one = 1;

	if (setsockopt(fd, SOL_SOCKET, SO_KEEPALIVE, &one, sizeof(one)) ||
	    setsockopt(fd, IPPROTO_TCP, TCP_KEEPIDLE, &idle, sizeof(idle)) ||
	    setsockopt(fd, IPPROTO_TCP, TCP_KEEPINTVL, &intvl, sizeof(intvl)) ||
	    setsockopt(fd, IPPROTO_TCP, TCP_KEEPCNT, &cnt, sizeof(cnt))) {
		fprintf(stderr, "kalive: setsockopt: %s\n", strerror(errno));
		exit(1);
	}
}

static void show_ka(const char *c, int fd)
{
	int v[4] = {-1, -1, -1, -1};
	socklen_t l = sizeof(int);

	getsockopt(fd, SOL_SOCKET, SO_KEEPALIVE, &v[0], &l);
	l = sizeof(int);
	getsockopt(fd, IPPROTO_TCP, TCP_KEEPIDLE, &v[1], &l);
	l = sizeof(int);
	getsockopt(fd, IPPROTO_TCP, TCP_KEEPINTVL, &v[2], &l);
	l = sizeof(int);
	getsockopt(fd, IPPROTO_TCP, TCP_KEEPCNT, &v[3], &l);
	say(c,
	    "SO_KEEPALIVE=%d TCP_KEEPIDLE=%d TCP_KEEPINTVL=%d TCP_KEEPCNT=%d",
	    v[0] != 0, v[1], v[2], v[3]);
}

/* One byte, expected to be want: its own text, or the errno name. */
static const char *get1(int fd, char want, char *buf)
{
	ssize_t r = recv(fd, buf, 1, 0);

	if (r < 0)
		return tl_en(errno);
	if (r == 0)
		return "EOF";
	buf[1] = 0;
	return buf[0] == want ? buf : "wrong byte";
}

/*
 * Until everything this end sent is acknowledged (at most 5 s): TCP sends
 * no keepalive probe while data is unacknowledged (a delayed ACK can
 * leave the last byte so), and the cut must find both ends idle.
 */
static void wait_acked(int fd)
{
	long long end = tl_now_ms() + 5000;
	struct tcp_info ti;
	socklen_t l;

	do {
		l = sizeof(ti);
		if (getsockopt(fd, IPPROTO_TCP, TCP_INFO, &ti, &l) < 0 ||
		    !ti.tcpi_unacked)
			break;
		nanosleep(&(struct timespec){0, 10 * 1000000L}, NULL);
	} while (tl_now_ms() < end);
	printf("armed\n");
	fflush(stdout);
}

/* The read after the cut: it must end, with the keepalive's error. */
static void last_read(int fd)
{
	long long t0 = tl_now_ms();
	char b[2];
	ssize_t r = recv(fd, b, 1, 0);
	int e = errno;

	say("cut", "recv -> %s after %s",
	    r < 0    ? tl_en(e)
	    : r == 0 ? "EOF"
		     : "data",
	    dur(tl_now_ms() - t0));
	printf("FIGURE: %s's read ended %lld ms after it began\n", role,
	       tl_now_ms() - t0);
	fflush(stdout);
}

static int server(const char *addr, int idle, int intvl, int cnt)
{
	struct sockaddr_in a = {.sin_family = AF_INET};
	socklen_t len = sizeof(a);
	char b[2];
	int l, c, one = 1;

	role = "server";
	l = socket(AF_INET, SOCK_STREAM, 0);
	setsockopt(l, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	set_ka(l, idle, intvl, cnt);
	if (inet_pton(AF_INET, addr, &a.sin_addr) != 1 ||
	    bind(l, (struct sockaddr *)&a, sizeof(a)) || listen(l, 4) ||
	    getsockname(l, (struct sockaddr *)&a, &len)) {
		fprintf(stderr, "kalive: listen: %s\n", strerror(errno));
		return 1;
	}
	printf("ready %d\n", ntohs(a.sin_port));
	fflush(stdout);
	c = accept(l, NULL, NULL);
	if (c < 0) {
		fprintf(stderr, "kalive: accept: %s\n", strerror(errno));
		return 1;
	}
	show_ka("inherit", c);
	send(c, "a", 1, MSG_NOSIGNAL);
	say("echo", "recv -> %s", get1(c, 'b', b));
	send(c, "c", 1, MSG_NOSIGNAL);
	wait_acked(c);
	alarm(40);
	last_read(c);
	return 0;
}

static int client(const char *addr, int port, int idle, int intvl, int cnt,
		  const char *src)
{
	struct sockaddr_in a = {.sin_family = AF_INET,
				.sin_port = htons((uint16_t)port)};
	struct timeval tv = {3, 0}, none = {0, 0};
	long long t0;
	ssize_t r;
	char b[2];
	int fd;

	role = "client";
	fd = socket(AF_INET, SOCK_STREAM, 0);
	set_ka(fd, idle, intvl, cnt);
	if (src) {
		struct sockaddr_in s = {.sin_family = AF_INET};

		if (inet_pton(AF_INET, src, &s.sin_addr) != 1 ||
		    bind(fd, (struct sockaddr *)&s, sizeof(s))) {
			fprintf(stderr, "kalive: bind %s: %s\n", src,
				strerror(errno));
			return 1;
		}
	}
	if (inet_pton(AF_INET, addr, &a.sin_addr) != 1 ||
	    connect(fd, (struct sockaddr *)&a, sizeof(a))) {
		fprintf(stderr, "kalive: connect: %s\n", strerror(errno));
		return 1;
	}
	show_ka("options", fd);
	say("first", "recv -> %s", get1(fd, 'a', b));
	setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	t0 = tl_now_ms();
	r = recv(fd, b, 1, 0);
	say("idle", "recv with a 3 s timeout -> %s after %s",
	    r < 0 ? tl_en(errno) : "data", dur(tl_now_ms() - t0));
	send(fd, "b", 1, MSG_NOSIGNAL);
	say("echo", "recv after the idle time -> %s", get1(fd, 'c', b));
	setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &none, sizeof(none));
	wait_acked(fd);
	alarm(40);
	last_read(fd);
	return 0;
}

int main(int argc, char **argv)
{
	signal(SIGALRM, on_alarm);
	signal(SIGPIPE, SIG_IGN);
	if (argc == 6 && !strcmp(argv[1], "server"))
		return server(argv[2], atoi(argv[3]), atoi(argv[4]),
			      atoi(argv[5]));
	if ((argc == 7 || argc == 8) && !strcmp(argv[1], "client"))
		return client(argv[2], atoi(argv[3]), atoi(argv[4]),
			      atoi(argv[5]), atoi(argv[6]),
			      argc == 8 ? argv[7] : NULL);
	fprintf(stderr,
		"usage: kalive server ADDR IDLE INTVL CNT\n"
		"       kalive client ADDR PORT IDLE INTVL CNT [SRC]\n");
	return 2;
}
