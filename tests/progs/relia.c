/* SPDX-License-Identifier: MIT */
/*
 * relia: the reliability scenarios of issue #8 over the plain socket API.
 * It knows nothing of the shim: every scenario runs with and without
 * LD_PRELOAD and must behave the same (except where a test says why not).
 *
 *   relia serve ADDR PORT ROLE [BYTES]  listen, print "ready PORT", serve
 *                                        every connection with ROLE
 *   relia dial ADDR PORT ROLE [BYTES]   connect once, run ROLE
 *   relia fork ADDR PORT [kernel]       fork scenarios against "serve echo"
 *                                        ("kernel": skip the child's use of
 *                                        an inherited connection)
 *   relia daemon ADDR PORT FILE [kernel] daemon() scenario, result in FILE
 *   relia echo1 ADDR PORT               one echo round trip, exit 0 if exact
 *   relia memlock ADDR PORT HOLD        connect, lower RLIMIT_MEMLOCK, connect
 *   relia badptr ADDR PORT              bad pointers/lengths, one line each
 *   relia redial ADDR PORT STOP         connect/echo/close rounds until STOP
 *
 * ROLE: echo   echo until EOF
 *       feed   send BYTES, print "fed", then hold the connection (pause)
 *       stall  never read, print "stalled", hold the connection
 *       read   read BYTES, print "blocking", block in recv; print how it ended
 *       write  send until blocked (no progress for 300 ms: "blocked"), keep
 *              sending; print how it ended
 * "end" lines carry the CLOCK_REALTIME in ms so the test can time them
 * against the moment it killed the peer.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <poll.h>
#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <spawn.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "testlib.h"

extern char **environ;
static const char *self;
static const char *g_addr, *g_port;

static long long now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return ts.tv_sec * 1000LL + ts.tv_nsec / 1000000;
}

static uint8_t pat(uint64_t i, unsigned int seed)
{
	return (uint8_t)((i * 131 + seed * 7 + (i >> 9)) & 0xff);
}

static int dial(const char *addr, const char *port)
{
	struct addrinfo hints = {.ai_socktype = SOCK_STREAM}, *ai;
	int fd, r;

	r = getaddrinfo(addr, port, &hints, &ai);
	if (r) {
		fprintf(stderr, "relia: %s: %s\n", addr, gai_strerror(r));
		exit(2);
	}
	fd = socket(ai->ai_family, SOCK_STREAM, 0);
	if (fd < 0)
		tl_die("socket");
	if (getenv("RELIA_BIND")) { /* source address: picks the RDMA device */
		struct sockaddr_in src = {.sin_family = AF_INET};

		if (inet_pton(AF_INET, getenv("RELIA_BIND"), &src.sin_addr) !=
			1 ||
		    bind(fd, (void *)&src, sizeof(src)))
			tl_die("RELIA_BIND");
	}
	if (connect(fd, ai->ai_addr, ai->ai_addrlen) < 0) {
		r = errno;
		close(fd);
		freeaddrinfo(ai);
		errno = r;
		return -1;
	}
	freeaddrinfo(ai);
	return fd;
}

static int send_all(int fd, const void *buf, size_t n)
{
	const char *p = buf;

	while (n) {
		ssize_t r = send(fd, p, n, MSG_NOSIGNAL);

		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			return -1;
		p += r;
		n -= (size_t)r;
	}
	return 0;
}

static int recv_all(int fd, void *buf, size_t n)
{
	char *p = buf;

	while (n) {
		ssize_t r = recv(fd, p, n, 0);

		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0) {
			if (!r)
				errno = 0; /* EOF */
			return -1;
		}
		p += r;
		n -= (size_t)r;
	}
	return 0;
}

/* One echo round trip of n pattern bytes; 0 if every byte came back, -1
 * if the connection failed, -2 if bytes came back wrong. */
static int echo_check(int fd, size_t n, unsigned int seed)
{
	static __thread uint8_t out[65536], in[65536];

	if (n > sizeof(out))
		n = sizeof(out);
	for (size_t i = 0; i < n; i++)
		out[i] = pat(i, seed);
	if (send_all(fd, out, n) || recv_all(fd, in, n))
		return -1;
	return memcmp(in, out, n) ? -2 : 0;
}

/* Reconnect loop until STOP exists (<= 240 s): connect, echo 4 KiB, close.
 * A round lost to a dead server is expected; wrong bytes never are.  A
 * receive timeout turns a hung round into a "stalled" line. */
static int redial(const char *stop)
{
	struct timeval tv = {5, 0};
	int round = 0, bad = 0;
	struct stat st;

	for (int i = 0; i < 4800 && stat(stop, &st); i++) {
		int fd = dial(g_addr, g_port), r;

		if (fd < 0) {
			printf("refused %s\n", tl_en(errno));
			usleep(50 * 1000); /* retry pacing */
			continue;
		}
		setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
		setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
		r = echo_check(fd, 4096, (unsigned int)++round);
		printf("round %d %s\n", round,
		       !r		 ? "ok"
		       : r == -2	 ? "MISMATCH"
		       : errno == EAGAIN ? "stalled"
					 : "lost");
		bad += r == -2;
		close(fd);
		usleep(20 * 1000); /* pacing */
	}
	printf("redial: %d rounds, %d mismatched\n", round, bad);
	return bad ? 1 : 0;
}

/* ---- roles ---- */
static void print_end(const char *what, ssize_t r, int err);

static void role_echo(int fd)
{
	char buf[16384];
	ssize_t r;

	while ((r = recv(fd, buf, sizeof(buf), 0)) > 0 ||
	       (r < 0 && errno == EINTR))
		if (r > 0 && send_all(fd, buf, (size_t)r))
			break;
	close(fd);
}

static void hold_forever(void)
{
	for (;;)
		pause();
}

static void role_feed(int fd, uint64_t bytes)
{
	uint8_t buf[16384];
	uint64_t off = 0;

	while (off < bytes) {
		size_t n =
		    bytes - off < sizeof(buf) ? bytes - off : sizeof(buf);

		for (size_t i = 0; i < n; i++)
			buf[i] = pat(off + i, 1);
		if (send_all(fd, buf, n)) {
			print_end("feed-send", -1, errno);
			exit(5);
		}
		off += n;
	}
	printf("fed %llu\n", (unsigned long long)bytes);
	fflush(stdout);
	hold_forever();
}

static void role_stall(int fd)
{
	(void)fd;
	printf("stalled\n");
	fflush(stdout);
	hold_forever();
}

static void print_end(const char *what, ssize_t r, int err)
{
	const char *e = r >= 0 ? "0" : err ? tl_en(err) : "EOF";

	printf("end %s rc=%zd errno=%s ms=%lld\n", what, r, e, now_ms());
	fflush(stdout);
}

static void role_read(int fd, uint64_t bytes)
{
	uint8_t buf[16384];
	uint64_t off = 0;
	ssize_t r;

	while (off < bytes) {
		size_t n =
		    bytes - off < sizeof(buf) ? bytes - off : sizeof(buf);

		if (recv_all(fd, buf, n)) {
			print_end("read-short", -1, errno);
			exit(5);
		}
		for (size_t i = 0; i < n; i++)
			if (buf[i] != pat(off + i, 1)) {
				printf("mismatch at %llu\n",
				       (unsigned long long)(off + i));
				exit(3);
			}
		if ((off + n) >> 26 != off >> 26) {
			printf("progress %llu\n",
			       (unsigned long long)(off + n));
			fflush(stdout);
		}
		off += n;
	}
	printf("blocking after %llu exact bytes\n", (unsigned long long)bytes);
	fflush(stdout);
	do
		r = recv(fd, buf, sizeof(buf), 0);
	while (r < 0 && errno == EINTR);
	print_end("recv", r, errno);
}

static volatile uint64_t w_progress;

static void *watch_writer(void *arg)
{
	uint64_t last = ~0ull;
	int still = 0;

	(void)arg;
	for (;;) {
		usleep(50 * 1000);
		if (w_progress == last) {
			if (++still == 6) {
				printf("blocked after %llu bytes\n",
				       (unsigned long long)last);
				fflush(stdout);
				return NULL;
			}
		} else {
			still = 0;
			last = w_progress;
		}
	}
}

static void role_write(int fd)
{
	static uint8_t buf[65536];
	pthread_t t;
	ssize_t r;

	memset(buf, 0x5a, sizeof(buf));
	pthread_create(&t, NULL, watch_writer, NULL);
	for (;;) {
		r = send(fd, buf, sizeof(buf), MSG_NOSIGNAL);
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			break;
		w_progress += (uint64_t)r;
	}
	print_end("send", r, errno);
}

static void run_role(int fd, const char *role, uint64_t bytes)
{
	if (!strcmp(role, "echo"))
		role_echo(fd);
	else if (!strcmp(role, "feed"))
		role_feed(fd, bytes);
	else if (!strcmp(role, "stall"))
		role_stall(fd);
	else if (!strcmp(role, "read"))
		role_read(fd, bytes);
	else if (!strcmp(role, "write"))
		role_write(fd);
	else {
		fprintf(stderr, "relia: unknown role %s\n", role);
		exit(2);
	}
}

struct conn_arg {
	int fd;
	const char *role;
	uint64_t bytes;
};

static void *conn_thread(void *p)
{
	struct conn_arg a = *(struct conn_arg *)p;

	free(p);
	run_role(a.fd, a.role, a.bytes);
	return NULL;
}

static int serve(const char *addr, const char *port, const char *role,
		 uint64_t bytes)
{
	struct addrinfo hints = {.ai_socktype = SOCK_STREAM,
				 .ai_flags = AI_PASSIVE},
			*ai;
	struct sockaddr_storage ss;
	socklen_t sl = sizeof(ss);
	int lfd, one = 1;

	if (getaddrinfo(addr, port, &hints, &ai))
		tl_die("getaddrinfo");
	lfd = socket(ai->ai_family, SOCK_STREAM, 0);
	if (lfd < 0)
		tl_die("socket");
	setsockopt(lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	if (bind(lfd, ai->ai_addr, ai->ai_addrlen) || listen(lfd, 128))
		tl_die("bind/listen");
	freeaddrinfo(ai);
	getsockname(lfd, (struct sockaddr *)&ss, &sl);
	printf("ready %u\n", ntohs(((struct sockaddr_in *)&ss)->sin_port));
	fflush(stdout);
	for (;;) {
		struct conn_arg *a = malloc(sizeof(*a));
		pthread_t t;
		int fd = accept(lfd, NULL, NULL);

		if (fd < 0) {
			free(a);
			if (errno == EINTR || errno == ECONNABORTED)
				continue;
			tl_die("accept");
		}
		*a = (struct conn_arg){fd, role, bytes};
		if (pthread_create(&t, NULL, conn_thread, a))
			tl_die("pthread_create");
		pthread_detach(t);
	}
	return 0;
}

/* ---- fork ---- */
static int fails;

static void check(bool ok, const char *what)
{
	printf("%s %s\n", ok ? "ok" : "bad", what);
	fflush(stdout);
	if (!ok)
		fails++;
}

static int wait_child(pid_t pid)
{
	int st;

	if (pid < 0 || waitpid(pid, &st, 0) != pid)
		return -1;
	if (WIFSIGNALED(st))
		return 128 + WTERMSIG(st);
	return WEXITSTATUS(st);
}

/* In a child: use an inherited connection; it must fail cleanly. */
static int child_use(int fd)
{
	char c = 'x';
	ssize_t s, r;
	int se, re;

	alarm(5); /* a hang is a failure, not a stuck test */
	signal(SIGPIPE, SIG_IGN);
	s = send(fd, &c, 1, MSG_DONTWAIT);
	se = errno;
	r = recv(fd, &c, 1, MSG_DONTWAIT);
	re = errno;
	printf("child: send=%zd %s recv=%zd %s\n", s, s < 0 ? tl_en(se) : "-",
	       r, r < 0 ? tl_en(re) : "-");
	fflush(stdout);
	/* The kernel socket under a disowned rsocket is unconnected:
	 * an error, never data. */
	return s < 0 && r <= 0 ? 0 : 1;
}

static int spawn_echo1(bool use_exec)
{
	char *argv[] = {(char *)self, "echo1", (char *)g_addr, (char *)g_port,
			NULL};
	pid_t pid;

	if (use_exec) {
		pid = fork();
		if (pid == 0) {
			execve(self, argv, environ);
			_exit(127);
		}
	} else if (posix_spawn(&pid, self, NULL, NULL, argv, environ)) {
		return -1;
	}
	return wait_child(pid);
}

static int fork_scenarios(bool kernel)
{
	int c1 = dial(g_addr, g_port), c2 = dial(g_addr, g_port), c3;
	pid_t pid;

	if (c1 < 0 || c2 < 0)
		tl_die("connect");
	check(!echo_check(c1, 65536, 1) && !echo_check(c2, 65536, 2),
	      "parent echo before fork");

	pid = fork();
	if (pid == 0)
		_exit(close(c1) ? 1 : 0);
	check(wait_child(pid) == 0, "child closed inherited connection");
	check(!echo_check(c1, 65536, 3), "parent echo after child's close");

	if (kernel) {
		/* a kernel TCP connection is shared with the child by design:
		 * a child's send would go into the parent's stream */
		printf(
		    "skip child's use of inherited connection (kernel TCP)\n");
	} else {
		pid = fork();
		if (pid == 0)
			_exit(child_use(c2));
		check(wait_child(pid) == 0,
		      "child's use of inherited connection fails cleanly");
	}
	check(!echo_check(c2, 65536, 4), "parent echo after child's use");

	pid = fork();
	if (pid == 0) {
		int c = dial(g_addr, g_port);

		alarm(20);
		_exit(c >= 0 && !echo_check(c, 65536, 5) ? 0 : 1);
	}
	c3 = dial(g_addr, g_port);
	check(c3 >= 0 && !echo_check(c3, 65536, 6),
	      "parent new connection after fork");
	check(wait_child(pid) == 0, "child new connection after fork");
	check(!echo_check(c1, 4096, 7) && !echo_check(c2, 4096, 8),
	      "parent old connections still work");

	check(spawn_echo1(false) == 0, "posix_spawn of a shimmed program");
	check(spawn_echo1(true) == 0, "fork+exec of a shimmed program");
	check(!echo_check(c1, 4096, 9), "parent echo after spawn/exec");
	close(c1);
	close(c2);
	close(c3);
	printf("fork: %d failure(s)\n", fails);
	return fails ? 1 : 0;
}

static bool shim_loaded(void)
{
	char line[512];
	bool found = false;
	FILE *f = fopen("/proc/self/maps", "r");

	if (!f)
		return false;
	while (fgets(line, sizeof(line), f))
		if (strstr(line, "liberdma_shim"))
			found = true;
	fclose(f);
	return found;
}

static int echo1(void)
{
	int fd = dial(g_addr, g_port);
	int ok = fd >= 0 && !echo_check(fd, 65536, 11);

	printf("echo1 pid=%d shim=%d %s\n", getpid(), shim_loaded(),
	       ok ? "ok" : "bad");
	return ok ? 0 : 1;
}

/* daemon(): the daemon (a fork child) must not be able to hurt the
 * inherited connection, and must be able to make its own. */
static int daemon_scenario(const char *file, bool kernel)
{
	int c1 = dial(g_addr, g_port), c2, r;
	FILE *f;
	char tmp[4096];

	if (c1 < 0 || echo_check(c1, 4096, 12))
		tl_die("pre-daemon echo");
	printf("pre-daemon ok\n");
	fflush(stdout);
	if (daemon(1, 0))
		tl_die("daemon");
	alarm(30);
	/* kernel TCP: the daemon shares the connection by design (skip) */
	r = kernel ? -1 : child_use(c1);
	c2 = dial(g_addr, g_port);
	snprintf(tmp, sizeof(tmp), "%s.tmp", file);
	f = fopen(tmp, "w");
	if (!f)
		_exit(2);
	fprintf(f, "daemon pid=%d inherited=%s new=%s\n", getpid(),
		r < 0 ? "skip"
		: r   ? "bad"
		      : "ok",
		c2 >= 0 && !echo_check(c2, 65536, 13) ? "ok" : "bad");
	fclose(f);
	rename(tmp, file);
	return 0;
}

/* ---- RLIMIT_MEMLOCK ---- */
static void wait_file(const char *f)
{
	struct stat st;

	for (int i = 0; i < 600 && stat(f, &st); i++)
		usleep(100 * 1000);
}

static int memlock_scenario(const char *hold)
{
	struct rlimit rl = {64 * 1024, 64 * 1024};
	int a = dial(g_addr, g_port), b;

	check(a >= 0 && !echo_check(a, 65536, 21),
	      "connection before the limit");
	if (setrlimit(RLIMIT_MEMLOCK, &rl))
		tl_die("setrlimit");
	b = dial(g_addr, g_port);
	check(b >= 0 && !echo_check(b, 65536, 22),
	      "connection after the limit");
	for (int i = 0; i < 16; i++)
		if (echo_check(a, 65536, 23 + i) ||
		    echo_check(b, 65536, 40 + i))
			fails++;
	check(!fails, "both connections byte-exact, 16 more rounds");
	printf("holding\n");
	fflush(stdout);
	wait_file(hold);
	return fails ? 1 : 0;
}

/* ---- bad pointers and lengths ---- */
/* volatile: the compiler must not see (and warn about) the bad pointer */
static void *volatile bad_ptr = (void *)16;

static void show(const char *what, long r, int err)
{
	printf("%-34s rc=%ld errno=%s\n", what, r, r < 0 ? tl_en(err) : "0");
	fflush(stdout);
}

/* A crash or hang inside a call is reported as that case's result (and the
 * run goes on) so one transcript shows every case; without the shim no case
 * crashes, so any CRASH/HANG line is a difference. */
static sigjmp_buf try_jb;

static void try_sig(int sig)
{
	siglongjmp(try_jb, sig);
}

static bool skipped(const char *what)
{
	const char *l = getenv("RELIA_BADPTR_SKIP"); /* "case|case|..." */
	size_t n = strlen(what);

	for (const char *p = l; p && *p; p += strcspn(p, "|"), p += !!*p)
		if (!strncmp(p, what, n) && (p[n] == '|' || !p[n])) {
			printf("%-34s skipped\n", what);
			return true;
		}
	return false;
}

/* After a crash the library may hold a lock: the rest of the run would only
 * hang, so the transcript ends there (RELIA_BADPTR_SKIP names cases to step
 * over when collecting every crashing case by hand). */
#define TRY(what, call)                                                        \
	do {                                                                   \
		int sig_;                                                      \
		if (skipped(what))                                             \
			break;                                                 \
		errno = 0;                                                     \
		alarm(5);                                                      \
		if (!(sig_ = sigsetjmp(try_jb, 1))) {                          \
			long r_ = (long)(call);                                \
			int e_ = errno;                                        \
			alarm(0);                                              \
			show(what, r_, e_);                                    \
		} else {                                                       \
			printf("%-34s CRASH/HANG SIG%s\n", what,               \
			       sigabbrev_np(sig_));                            \
			exit(4);                                               \
		}                                                              \
	} while (0)

/* accept() with bad arguments, on a loopback (kernel) listener. */
static void badptr_accept(int lfd, void *bad)
{
	struct sockaddr_in sin = {.sin_family = AF_INET};
	struct pollfd pfd = {lfd, POLLIN, 0};
	socklen_t sl = sizeof(sin);
	int k1, k2;

	sin.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	if (bind(lfd, (void *)&sin, sizeof(sin)) || listen(lfd, 4) ||
	    getsockname(lfd, (void *)&sin, &sl))
		tl_die("loopback listener");
	fcntl(lfd, F_SETFL, O_NONBLOCK);
	TRY("accept4 bad flags", accept4(lfd, NULL, NULL, 0x7fff0000));
	TRY("accept none pending", accept(lfd, NULL, NULL));
	k1 = socket(AF_INET, SOCK_STREAM, 0);
	k2 = socket(AF_INET, SOCK_STREAM, 0);
	if (connect(k1, (void *)&sin, sizeof(sin)) ||
	    connect(k2, (void *)&sin, sizeof(sin)))
		tl_die("loopback connect");
	TRY("poll listener", poll(&pfd, 1, 5000));
	sl = sizeof(sin);
	TRY("accept addr bad", accept(lfd, bad, &sl));
	TRY("poll listener", poll(&pfd, 1, 5000));
	sl = (socklen_t)-1;
	TRY("accept addrlen -1", accept(lfd, (void *)&sin, &sl));
	TRY("accept addrlen bad", accept(lfd, (void *)&sin, bad));
	close(k1);
	close(k2);
}

static int badptr(void)
{
	int fd = dial(g_addr, g_port), lfd, v;
	void *bad = bad_ptr; /* mapped by nobody */
	struct sockaddr_in sin;
	socklen_t sl;
	char buf[64];
	struct iovec iov = {bad, 8};
	struct msghdr mh = {.msg_iov = &iov, .msg_iovlen = 1};

	if (fd < 0)
		tl_die("connect");
	signal(SIGPIPE, SIG_IGN);
	signal(SIGSEGV, try_sig);
	signal(SIGBUS, try_sig);
	signal(SIGALRM, try_sig);
	TRY("send NULL,8", send(fd, NULL, 8, 0));
	TRY("send bad,8", send(fd, bad, 8, 0));
	TRY("send NULL,0", send(fd, NULL, 0, 0));
	TRY("write bad,8", write(fd, bad, 8));
	TRY("sendmsg iov bad", sendmsg(fd, &mh, 0));
	TRY("sendmsg NULL msg", sendmsg(fd, NULL, 0));
	mh.msg_iovlen = 1u << 20;
	TRY("sendmsg iovlen 1M", sendmsg(fd, &mh, 0));
	mh.msg_iovlen = 1;
	TRY("sendto bad addr len 3", sendto(fd, "x", 1, 0, (void *)&sin, 3));
	/* the peer echoes what got through: make the next reads defined */
	TRY("send good 4", send(fd, "abcd", 4, 0));
	{ /* the reads below must find the echo there (bounded wait) */
		struct pollfd pfd = {fd, POLLIN, 0};

		TRY("poll for echo", poll(&pfd, 1, 5000));
	}
	TRY("recv NULL,8", recv(fd, NULL, 8, 0));
	TRY("recv bad,8", recv(fd, bad, 8, 0));
	TRY("read bad,8", read(fd, bad, 8));
	TRY("recvmsg iov bad", recvmsg(fd, &mh, 0));
	TRY("recv NULL,0", recv(fd, NULL, 0, 0));
	TRY("recv good", recv(fd, buf, 5, MSG_WAITALL));
	sl = sizeof(v);
	TRY("getsockopt optval NULL",
	    getsockopt(fd, SOL_SOCKET, SO_ERROR, NULL, &sl));
	TRY("getsockopt optlen NULL",
	    getsockopt(fd, SOL_SOCKET, SO_ERROR, &v, NULL));
	sl = (socklen_t)-1;
	TRY("getsockopt optlen -1",
	    getsockopt(fd, SOL_SOCKET, SO_ERROR, &v, &sl));
	TRY("setsockopt optlen 1",
	    setsockopt(fd, SOL_SOCKET, SO_KEEPALIVE, &v, 1));
	TRY("setsockopt optval bad",
	    setsockopt(fd, SOL_SOCKET, SO_KEEPALIVE, bad, 4));
	sl = 3;
	TRY("getsockname len 3", getsockname(fd, (void *)&sin, &sl));
	printf("  len after: %u\n", sl);
	TRY("getpeername bad addr", getpeername(fd, bad, &sl));
	TRY("getpeername len NULL", getpeername(fd, (void *)&sin, NULL));
	TRY("connect again NULL", connect(fd, NULL, sizeof(sin)));
	TRY("connect again len 3", connect(fd, (void *)&sin, 3));
	lfd = socket(AF_INET, SOCK_STREAM, 0);
	TRY("connect NULL,16", connect(lfd, NULL, 16));
	TRY("connect bad,16", connect(lfd, bad, 16));
	memset(&sin, 0, sizeof(sin));
	sin.sin_family = AF_INET;
	TRY("connect len 3", connect(lfd, (void *)&sin, 3));
	badptr_accept(lfd, bad);
	close(lfd);
	TRY("shutdown bad how", shutdown(fd, 7));
	TRY("close", close(fd));
	TRY("send closed", send(fd, "x", 1, 0));
	return 0;
}

int main(int argc, char **argv)
{
	uint64_t bytes;

	setvbuf(stdout, NULL, _IOLBF, 0);
	self = "/proc/self/exe";
	if (argc < 4) {
		fprintf(
		    stderr,
		    "usage: relia serve|dial|fork|daemon|echo1|memlock|badptr "
		    "ADDR PORT ...\n");
		return 2;
	}
	{
		static char path[4096];
		ssize_t n = readlink("/proc/self/exe", path, sizeof(path) - 1);

		if (n > 0) {
			path[n] = '\0';
			self = path;
		}
	}
	g_addr = argv[2];
	g_port = argv[3];
	bytes = argc > 5 ? strtoull(argv[5], NULL, 0) : 1 << 20;
	if (!strcmp(argv[1], "serve"))
		return serve(argv[2], argv[3], argc > 4 ? argv[4] : "echo",
			     bytes);
	if (!strcmp(argv[1], "dial")) {
		int fd = dial(argv[2], argv[3]);

		if (fd < 0)
			tl_die("connect");
		printf("connected\n");
		fflush(stdout);
		run_role(fd, argc > 4 ? argv[4] : "echo", bytes);
		return 0;
	}
	if (!strcmp(argv[1], "fork"))
		return fork_scenarios(argc > 4 && !strcmp(argv[4], "kernel"));
	if (!strcmp(argv[1], "daemon") && argc > 4)
		return daemon_scenario(argv[4],
				       argc > 5 && !strcmp(argv[5], "kernel"));
	if (!strcmp(argv[1], "echo1"))
		return echo1();
	if (!strcmp(argv[1], "memlock") && argc > 4)
		return memlock_scenario(argv[4]);
	if (!strcmp(argv[1], "redial") && argc > 4)
		return redial(argv[4]);
	if (!strcmp(argv[1], "badptr"))
		return badptr();
	fprintf(stderr, "relia: bad arguments\n");
	return 2;
}
