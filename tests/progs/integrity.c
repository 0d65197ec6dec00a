/* SPDX-License-Identifier: MIT */
/*
 * integrity: a randomized echo workload whose transcript must be the same
 * over kernel TCP and under the shim (issue 42), every byte checked.
 *
 *   integrity ADDR SEED SESSIONS [PARALLEL [ALARM_US]]
 *
 * One process listens on ADDR (port 0); PARALLEL client threads (default 3)
 * run SESSIONS sessions against it.  ALARM_US: the interval of SIGALRM
 * (default 3000; shorter makes a signal inside any given system call of
 * the program's threads more likely).  Each session's shape comes from SEED
 * and its number alone, so both runs do the same things:
 *   - the server serves it on a thread, or in a fork child while the parent
 *     closes its copy (PostgreSQL, sshd), and may fork a helper that exits
 *     at once mid-session (a used connection stays the forker's);
 *   - the client sends length-prefixed messages of 1 B to 1 MiB with
 *     write, send, writev or sendmsg; the server reads each whole with
 *     partial recvs, MSG_WAITALL, MSG_PEEK then recv, or readv, and echoes
 *     it with write or writev; the client reads the echo in one of those
 *     ways and compares it with what it sent;
 *   - the session ends with shutdown(SHUT_WR) both ways and EOF, or the
 *     client closes in the middle of a message (the server sees EOF there);
 *   - an interval timer sends SIGALRM to the process throughout.  Like
 *     PostgreSQL's postmaster, the main thread blocks it except around its
 *     wait for connections (sigprocmask, poll, sigprocmask), the serving
 *     threads take it (their calls see EINTR and retry), the clients block
 *     it.  A handler that runs on a thread the program did not make is
 *     counted: none may (the shim's defect of issue 42).
 * The server's lines come through a pipe (from fork children too) and
 * every line is printed sorted by session at the end.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <unistd.h>

#include "testlib.h"

#define MAXMSG (1 << 20)

static struct sockaddr_in addr;
static uint64_t seed;
static int nsess, par, results[2];
static int next_sess;
static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static char **lines;
static __thread bool ours; /* a thread this program made */
static volatile int foreign_sigs;
static int forks; /* sessions served in fork children (not in the transcript) */
static sigset_t alrm;

static void on_alarm(int sig)
{
	(void)sig;
	if (!ours)
		__atomic_add_fetch(&foreign_sigs, 1, __ATOMIC_RELAXED);
}

/*
 * A session's choices: r() draws its plan (sizes, calls, ends), rio() how
 * the calls cut the bytes.  How many bytes a call moves differs between
 * the transports, and so does how often rio() is drawn: the plan must not
 * depend on it, or the two transcripts would be of different sessions.
 */
struct shape {
	struct tl_rng plan, io;
};
static unsigned int r(struct shape *s, unsigned int n)
{
	return (unsigned int)(tl_rng_next(&s->plan) % n);
}
static unsigned int rio(struct shape *s, unsigned int n)
{
	return (unsigned int)(tl_rng_next(&s->io) % n);
}
static void shape_of(struct shape *s, int sess, int who)
{
	uint64_t k = seed * 1000003u + (uint64_t)sess * 7919u + (uint64_t)who;

	tl_rng_seed(&s->plan, k);
	tl_rng_seed(&s->io, ~k);
}

static size_t msg_size(struct shape *s)
{
	switch (r(s, 4)) {
	case 0:
		return 1;
	case 1:
		return 1 + r(s, 100);
	case 2:
		return 1 + r(s, 16384);
	default:
		return 65536 + r(s, MAXMSG - 65536 + 1);
	}
}

/* Send all of p in up to 4 pieces, by one of four calls. */
static int put(struct shape *s, int fd, const char *p, size_t n)
{
	int how = (int)r(s, 4);

	while (n) {
		struct iovec v[4];
		size_t k = 0, off = 0;
		ssize_t w;

		for (int i = 0; i < 4 && off < n; i++, k++) {
			size_t part =
			    i == 3 ? n - off : 1 + rio(s, (unsigned)(n - off));

			v[i].iov_base = (char *)p + off;
			v[i].iov_len = part;
			off += part;
		}
		if (how == 0)
			w = write(fd, p, n);
		else if (how == 1)
			w = send(fd, p, n, MSG_NOSIGNAL);
		else if (how == 2)
			w = writev(fd, v, (int)k);
		else
			w = sendmsg(
			    fd, &(struct msghdr){.msg_iov = v, .msg_iovlen = k},
			    MSG_NOSIGNAL);
		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0)
			return -1;
		p += w;
		n -= (size_t)w;
	}
	return 0;
}

/* Read exactly n bytes into p by one of four ways: n, or the bytes read
 * before EOF, or -1 on an error. */
static long get(struct shape *s, int fd, char *p, size_t n)
{
	int how = (int)r(s, 4);
	size_t got = 0;

	while (got < n) {
		size_t want = n - got;
		ssize_t k;

		if (how == 0) {
			k = recv(fd, p + got, 1 + rio(s, (unsigned)want), 0);
		} else if (how == 1) {
			k = recv(fd, p + got, want, MSG_WAITALL);
		} else if (how == 2) {
			size_t m =
			    1 + rio(s, (unsigned)(want < 4096 ? want : 4096));
			char peek[4096];

			k = recv(fd, peek, m, MSG_PEEK);
			if (k > 0) {
				ssize_t k2 = recv(fd, p + got, (size_t)k, 0);

				if (k2 != k || memcmp(peek, p + got, (size_t)k))
					return -2; /* a peek that a read denies
						    */
			}
		} else {
			size_t a = want / 3;
			struct iovec v[3] = {{p + got, a},
					     {p + got + a, a},
					     {p + got + 2 * a, want - 2 * a}};

			k = readv(fd, v, 3);
		}
		if (k < 0 && errno == EINTR)
			continue;
		if (k < 0)
			return -1;
		if (k == 0)
			break;
		got += (size_t)k;
	}
	return (long)got;
}

static void result(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void result(const char *fmt, ...)
{
	char b[512];
	va_list ap;
	int n;

	va_start(ap, fmt);
	n = vsnprintf(b, sizeof(b) - 1, fmt, ap);
	va_end(ap);
	b[n++] = '\n';
	(void)!write(results[1], b, (size_t)n); /* < PIPE_BUF: one piece */
}

/* The server's side of session sess on fd (in a thread or a fork child). */
static void serve(int fd, int sess)
{
	struct shape s;
	char *buf = malloc(MAXMSG);
	uint64_t h = TL_FNV0, bytes = 0;
	int msgs = 0, helper;
	const char *end = "EOF";
	uint32_t len;
	long k;

	shape_of(&s, sess, 1);
	helper = (int)r(&s, 3) == 0 ? 1 + (int)r(&s, 3) : -1;
	for (;;) {
		if (msgs == helper) {
			pid_t c = fork();

			if (c == 0)
				_exit(0);
			if (c > 0)
				waitpid(c, NULL, 0);
		}
		k = get(&s, fd, (char *)&len, 4);
		if (k == 0)
			break;
		if (k != 4 || len == 0 || len > MAXMSG) {
			end = "bad header";
			break;
		}
		k = get(&s, fd, buf, len);
		if (k >= 0)
			h = tl_fnv(h, buf, (size_t)k), bytes += (uint64_t)k;
		if (k != (long)len) {
			end = k < 0 ? "error" : "EOF in a message";
			break;
		}
		msgs++;
		if (put(&s, fd, buf, len) < 0) {
			end = "echo failed";
			break;
		}
	}
	if (!strcmp(end, "EOF"))
		shutdown(fd, SHUT_WR);
	close(fd);
	free(buf);
	result("s%03d server%s: %d messages, %llu bytes, fnv %016llx, "
	       "then %s",
	       sess, helper >= 0 ? " (forked a helper)" : "", msgs,
	       (unsigned long long)bytes, (unsigned long long)h, end);
}

/* The client's side of one session. */
static void client(int sess)
{
	struct shape s;
	char *out = malloc(MAXMSG + 4), *in = malloc(MAXMSG);
	int fd = socket(AF_INET, SOCK_STREAM, 0), m, ok = 0, abrupt;
	uint64_t bytes = 0;
	const char *end = "EOF";
	char b[24];

	shape_of(&s, sess, 0);
	m = 1 + (int)r(&s, 12);
	abrupt = (int)r(&s, 4) == 0;
	if (fd < 0 || connect(fd, (struct sockaddr *)&addr, sizeof(addr)) < 0 ||
	    put(&s, fd, (char *)&sess, 4) < 0) {
		lines[sess] = strdup("client: connect failed");
		goto out;
	}
	for (int i = 0; i < m; i++) {
		uint32_t len = (uint32_t)msg_size(&s);
		bool last = abrupt && i == m - 1;

		memcpy(out, &len, 4);
		tl_pattern(out + 4, len,
			   seed ^ ((uint64_t)sess << 32) ^ (uint64_t)i);
		if (put(&s, fd, out, last ? 4 + len / 2 : 4 + len) < 0) {
			end = "send failed";
			break;
		}
		if (last) {
			end = "closed in a message";
			bytes += len / 2;
			break;
		}
		if (get(&s, fd, in, len) != (long)len ||
		    memcmp(in, out + 4, len)) {
			end = "echo differs";
			break;
		}
		bytes += len;
		ok++;
	}
	if (!strcmp(end, "EOF")) {
		shutdown(fd, SHUT_WR);
		if (recv(fd, b, sizeof(b), 0) != 0)
			end = "no EOF";
	}
	if (asprintf(&lines[sess],
		     "client: %d of %d echoes right, %llu bytes sent, %s", ok,
		     m, (unsigned long long)bytes, end) < 0)
		lines[sess] = NULL;
out:
	if (fd >= 0)
		close(fd);
	free(out);
	free(in);
}

static void *client_thread(void *arg)
{
	(void)arg;
	ours = true;
	for (;;) {
		int sess;

		pthread_mutex_lock(&mu);
		sess = next_sess < nsess ? next_sess++ : -1;
		pthread_mutex_unlock(&mu);
		if (sess < 0)
			return NULL;
		client(sess);
	}
}

/* Every session's lines, the server's from the pipe (threads and fork
 * children write one line each), in session order. */
static void print_sessions(void)
{
	char **sl = calloc((size_t)nsess, sizeof(*sl)), b[65536], *nl;
	size_t have = 0;
	int n = 0;

	while (n < nsess) {
		struct pollfd p = {.fd = results[0], .events = POLLIN};
		ssize_t k;

		/* a server that never says is a failure, not a hang */
		if (poll(&p, 1, 60000) != 1 ||
		    (k = read(results[0], b + have, sizeof(b) - 1 - have)) <= 0)
			break;
		have += (size_t)k;
		b[have] = 0;
		while ((nl = strchr(b, '\n'))) {
			int sess = atoi(b + 1);

			*nl = 0;
			if (sess >= 0 && sess < nsess && !sl[sess] && n++ >= 0)
				sl[sess] = strdup(b);
			have -= (size_t)(nl + 1 - b);
			memmove(b, nl + 1, have + 1);
		}
	}
	for (int i = 0; i < nsess; i++) {
		printf("s%03d %s\n", i, lines[i] ? lines[i] : "client: none");
		printf("%s\n", sl[i] ? sl[i] : "server: none");
	}
}

/* The session number the client sends first; -1 if none. */
static int read_sess(int fd)
{
	struct shape s;
	int sess = -1;

	shape_of(&s, -1, 3);
	if (get(&s, fd, (char *)&sess, 4) != 4 || sess < 0 || sess >= nsess)
		return -1;
	return sess;
}

static void serve_conn(int fd)
{
	int sess = read_sess(fd);

	if (sess < 0)
		close(fd);
	else
		serve(fd, sess);
}

static void *serve_thread(void *arg)
{
	ours = true;
	pthread_sigmask(SIG_UNBLOCK, &alrm, NULL); /* a backend takes signals */
	serve_conn((int)(intptr_t)arg);
	return NULL;
}

/*
 * The n-th connection accepted: to a fork child or a thread, by the seed
 * and n (which session it carries depends on the clients' timing, so the
 * transcript does not say where a session was served).  Nothing is read
 * before the fork: a connection used before a fork stays the forking
 * process's, and its child's copy is bare under the shim -- a documented
 * deviation (docs/limits.md), not what this test is for.
 */
static void dispatch(int fd, int n)
{
	struct shape s;
	pthread_t t;

	shape_of(&s, -2 - n, 2);
	if (r(&s, 2)) {
		pid_t c = fork();

		if (c == 0) {
			sigset_t none;

			/* as a forking server's child: nothing but its own
			 * connection (the clients' ends live in this process
			 * too, and a copy here would hold them open) */
			sigemptyset(&none);
			pthread_sigmask(SIG_SETMASK, &none, NULL);
			for (int i = 3; i < 1024; i++)
				if (i != fd && i != results[1])
					close(i);
			serve_conn(fd);
			_exit(0);
		}
		if (c > 0)
			__atomic_add_fetch(&forks, 1, __ATOMIC_RELAXED);
		close(fd);
		return;
	}
	if (pthread_create(&t, NULL, serve_thread, (void *)(intptr_t)fd) == 0)
		pthread_detach(t);
	else
		close(fd);
}

int main(int argc, char **argv)
{
	struct sigaction sa = {.sa_handler = on_alarm};
	struct itimerval it = {{0, 3000}, {0, 3000}};
	socklen_t len = sizeof(addr);
	int lfd, accepted = 0, one = 1;
	pthread_t *ct;

	if (argc < 4) {
		fprintf(stderr, "usage: integrity ADDR SEED SESSIONS [PARALLEL "
				"[ALARM_US]]\n");
		return 2;
	}
	ours = true;
	seed = strtoull(argv[2], NULL, 0);
	nsess = atoi(argv[3]);
	par = argc > 4 ? atoi(argv[4]) : 3;
	it.it_interval.tv_usec = argc > 5 ? atoi(argv[5]) : 3000;
	it.it_value = it.it_interval;
	lines = calloc((size_t)nsess, sizeof(*lines));
	addr.sin_family = AF_INET;
	if (inet_pton(AF_INET, argv[1], &addr.sin_addr) != 1 || nsess < 1 ||
	    par < 1 || it.it_interval.tv_usec < 1 ||
	    it.it_interval.tv_usec > 999999 || pipe(results) < 0)
		return 2;
	signal(SIGPIPE, SIG_IGN);
	sigemptyset(&sa.sa_mask);
	sigaction(SIGALRM, &sa, NULL); /* no SA_RESTART: calls see EINTR */
	sigemptyset(&alrm);
	sigaddset(&alrm, SIGALRM);
	pthread_sigmask(SIG_BLOCK, &alrm, NULL);
	lfd = socket(AF_INET, SOCK_STREAM, 0);
	setsockopt(lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	if (bind(lfd, (struct sockaddr *)&addr, sizeof(addr)) < 0 ||
	    listen(lfd, 64) < 0 ||
	    getsockname(lfd, (struct sockaddr *)&addr, &len) < 0) {
		fprintf(stderr, "integrity: listen: %s\n", strerror(errno));
		return 1;
	}
	setitimer(ITIMER_REAL, &it, NULL);
	ct = calloc((size_t)par, sizeof(*ct));
	for (int i = 0; i < par; i++)
		pthread_create(&ct[i], NULL, client_thread, NULL);
	while (accepted < nsess) {
		struct pollfd p = {.fd = lfd, .events = POLLIN};
		int n, fd;

		/* PostgreSQL's postmaster: signals only while it waits */
		pthread_sigmask(SIG_UNBLOCK, &alrm, NULL);
		n = poll(&p, 1, 60000);
		pthread_sigmask(SIG_BLOCK, &alrm, NULL);
		if (n == 0) {
			fprintf(stderr, "integrity: no connection in 60 s\n");
			return 1;
		}
		if (n < 0)
			continue;
		fd = accept(lfd, NULL, NULL);
		if (fd < 0)
			continue;
		dispatch(fd, accepted++);
	}
	for (int i = 0; i < par; i++)
		pthread_join(ct[i], NULL);
	setitimer(ITIMER_REAL, &(struct itimerval){0}, NULL);
	print_sessions();
	while (waitpid(-1, NULL, WNOHANG) > 0)
		;
	printf("signals taken on threads the program did not make: %d\n",
	       foreign_sigs);
	fprintf(stderr,
		"integrity: %d of %d sessions served in fork children\n", forks,
		nsess);
	printf("done\n");
	return 0;
}
