/* SPDX-License-Identifier: MIT */
/*
 * prefork: the prefork server model (issue 14) and its clients.  Plain
 * socket API only.
 *
 *   prefork serve ADDR WORKERS block|epoll|block-nouring
 *       A master listens on ADDR (port 0), forks WORKERS workers and waits
 *       for them; it never accepts.  Each worker accepts (a blocking accept
 *       loop, or a non-blocking listener in an epoll set: nginx's shape)
 *       and serves one request per connection: 8 bytes (size, seed), then
 *       that many bytes of the seed's stream.  Prints "ready PORT" once the
 *       workers are forked; on SIGTERM it ends them and exits.  A blocking
 *       worker checks, after each accept, that the listener's open file
 *       (which master and workers share) is still blocking, as the kernel
 *       says in /proc/self/fdinfo; if not, it says so on stderr and closes
 *       the connection unserved.  block-nouring: the same under a seccomp
 *       filter that refuses io_uring_setup with EPERM (a container
 *       runtime's default profile), without that check.
 *   prefork forkserve ADDR close|keep|exec
 *       Fork per connection: the server accepts (blocking) and forks a
 *       child per connection that serves its request.  close: the parent
 *       closes its copy at once (socketserver.ForkingTCPServer, sshd);
 *       keep: the parent keeps its copy until the child has exited;
 *       exec: the child makes the connection its stdin and stdout and
 *       execs "prefork handle" (inetd).  The listener's file is checked
 *       as a blocking worker's is.  A forked or exec'd child first checks that
 *       getpeername/getsockname name what accept and the listener did (it
 *       closes without serving otherwise).  Prints "ready PORT".
 *   prefork handle PEER_IP PEER_PORT LISTEN_PORT
 *       Serves one request on stdin/stdout (inetd's child), once
 *       getpeername/getsockname name what accept and the listener did.
 *   prefork forkget ADDR PORT SIZE
 *       The client side of the same: connect, fork, and let the child ask
 *       for SIZE bytes and check them while the parent closes its copy;
 *       prints "forked client: SIZE bytes ok" and exits 0 if they were.
 *   prefork get ADDR PORT CLIENTS SIZE
 *       CLIENTS threads each connect, ask for SIZE bytes with seed k and
 *       check them (FNV-1a); prints "client k: SIZE bytes ok" (in order)
 *       and exits 0 only if every client was served byte-exact.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <stddef.h>
#include <sys/epoll.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "testlib.h"

#define MAX_CLIENTS 64

static int full_io(int fd, void *buf, size_t n, int wr)
{
	size_t done = 0;

	while (done < n) {
		ssize_t r =
		    wr ? send(fd, (char *)buf + done, n - done, MSG_NOSIGNAL)
		       : recv(fd, (char *)buf + done, n - done, 0);

		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			return -1;
		done += (size_t)r;
	}
	return 0;
}

/* One request read from in, answered on out (blocking). */
static void serve_io(int in, int c)
{
	uint32_t req[2];
	unsigned char buf[65536];
	struct tl_rng x;
	size_t left;

	if (full_io(in, req, sizeof(req), 0) < 0)
		return;
	left = ntohl(req[0]);
	tl_rng_seed(&x, ntohl(req[1]));
	while (left) {
		size_t n = left < sizeof(buf) ? left : sizeof(buf);

		tl_rng_fill(&x, buf, n);
		if (full_io(c, buf, n, 1) < 0)
			return;
		left -= n;
	}
}

static void serve_one(int c)
{
	serve_io(c, c);
}

/* Is fd's open file O_NONBLOCK, as the kernel has it (not what F_GETFL
 * may be told to say)?  -1 if unknown. */
static int file_nonblock(int fd)
{
	char path[64], line[128];
	unsigned int flags;
	int r = -1;
	FILE *f;

	snprintf(path, sizeof(path), "/proc/self/fdinfo/%d", fd);
	f = fopen(path, "r");
	if (!f)
		return -1;
	while (r < 0 && fgets(line, sizeof(line), f))
		if (sscanf(line, "flags: %o", &flags) == 1)
			r = (flags & O_NONBLOCK) != 0;
	fclose(f);
	return r;
}

/* The program never made listener l non-blocking: its file must still be
 * blocking (every process sharing it relies on that). */
static int still_blocking(int l)
{
	if (file_nonblock(l) == 0)
		return 1;
	fprintf(stderr,
		"pid %d: the listener's file is not blocking (or "
		"unknown) though the program never said so\n",
		(int)getpid());
	return 0;
}

static void worker_block(int l, int check)
{
	for (;;) {
		int c = accept(l, NULL, NULL);

		/* The listener is blocking: EAGAIN here would be the shim's
		 * doing (a worker's blocking accept must block). */
		if (c < 0) {
			if (errno == EINTR || errno == ECONNABORTED)
				continue;
			perror("accept");
			_exit(1);
		}
		if (!check || still_blocking(l))
			serve_one(c);
		close(c);
	}
}

/* What a container runtime's default seccomp profile does: io_uring_setup
 * fails with EPERM (the shim's blocking accept then takes its fallback). */
static void deny_uring(void)
{
	struct sock_filter f[] = {
	    BPF_STMT(BPF_LD | BPF_W | BPF_ABS,
		     offsetof(struct seccomp_data, nr)),
	    BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, __NR_io_uring_setup, 0, 1),
	    BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | EPERM),
	    BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
	};
	struct sock_fprog prog = {.len = sizeof(f) / sizeof(f[0]), .filter = f};

	if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) ||
	    prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog)) {
		perror("seccomp");
		exit(1);
	}
}

/* nginx's shape: a non-blocking listener in an epoll set, accept until
 * EAGAIN (another worker may take the connection first). */
static void worker_epoll(int l)
{
	struct epoll_event ev = {.events = EPOLLIN}, out;
	int ep = epoll_create1(0);

	fcntl(l, F_SETFL, fcntl(l, F_GETFL) | O_NONBLOCK);
	if (epoll_ctl(ep, EPOLL_CTL_ADD, l, &ev) < 0) {
		perror("epoll_ctl");
		_exit(1);
	}
	for (;;) {
		if (epoll_wait(ep, &out, 1, -1) < 0)
			continue;
		for (;;) {
			int c = accept4(l, NULL, NULL, 0);

			if (c < 0)
				break;
			serve_one(c);
			close(c);
		}
	}
}

static volatile sig_atomic_t stop;

static void on_term(int sig)
{
	(void)sig;
	stop = 1;
}

/* A listener on addr, port 0 (its address in *a); -2 bad address, -1
 * failed (said on stderr). */
static int listen_on(const char *addr, struct sockaddr_in *a)
{
	socklen_t len = sizeof(*a);
	int l, one = 1;

	memset(a, 0, sizeof(*a));
	a->sin_family = AF_INET;
	if (inet_pton(AF_INET, addr, &a->sin_addr) != 1)
		return -2;
	l = socket(AF_INET, SOCK_STREAM, 0);
	setsockopt(l, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	if (bind(l, (struct sockaddr *)a, sizeof(*a)) < 0 ||
	    listen(l, 128) < 0 ||
	    getsockname(l, (struct sockaddr *)a, &len) < 0) {
		perror("listen");
		return -1;
	}
	return l;
}

static int serve(const char *addr, int workers, const char *mode)
{
	struct sockaddr_in a;
	pid_t pids[16];
	int l;

	if (workers < 1 || workers > 16)
		return 2;
	if (!strcmp(mode, "block-nouring"))
		deny_uring();
	l = listen_on(addr, &a);
	if (l < 0)
		return -l;
	signal(SIGTERM, on_term);
	for (int i = 0; i < workers; i++) {
		pids[i] = fork();
		if (pids[i] == 0) {
			signal(SIGTERM, SIG_DFL);
			if (!strcmp(mode, "epoll"))
				worker_epoll(l);
			worker_block(l, !strcmp(mode, "block"));
		}
	}
	printf("ready %u\n", ntohs(a.sin_port));
	fflush(stdout);
	/* The master never accepts: it waits for SIGTERM. */
	while (!stop)
		pause();
	for (int i = 0; i < workers; i++)
		kill(pids[i], SIGTERM);
	for (int i = 0; i < workers; i++)
		waitpid(pids[i], NULL, 0);
	return 0;
}

/* The names a forked child sees are the ones accept and bind gave. */
static int same_names(int c, const struct sockaddr_in *peer, uint16_t port)
{
	struct sockaddr_in p, h;
	socklen_t pl = sizeof(p), hl = sizeof(h);

	if (getpeername(c, (struct sockaddr *)&p, &pl) < 0 ||
	    getsockname(c, (struct sockaddr *)&h, &hl) < 0) {
		perror("child: names");
		return 0;
	}
	if (p.sin_family != AF_INET || p.sin_port != peer->sin_port ||
	    p.sin_addr.s_addr != peer->sin_addr.s_addr || h.sin_port != port) {
		fprintf(stderr, "child: getpeername %s:%u, accept said %s:%u\n",
			inet_ntoa(p.sin_addr), ntohs(p.sin_port),
			inet_ntoa(peer->sin_addr), ntohs(peer->sin_port));
		return 0;
	}
	return 1;
}

static int forkserve(const char *addr, const char *mode, const char *self)
{
	struct sockaddr_in a;
	int l = listen_on(addr, &a);

	if (l < 0)
		return -l;
	if (strcmp(mode, "keep"))
		signal(SIGCHLD, SIG_IGN); /* children reap themselves */
	printf("ready %u\n", ntohs(a.sin_port));
	fflush(stdout);
	for (;;) {
		struct sockaddr_in peer;
		socklen_t pl = sizeof(peer);
		int c = accept(l, (struct sockaddr *)&peer, &pl);
		pid_t pid;

		if (c < 0) {
			if (errno == EINTR || errno == ECONNABORTED)
				continue;
			perror("accept");
			return 1;
		}
		if (!still_blocking(l)) {
			close(c);
			continue;
		}
		pid = fork();
		if (pid == 0) {
			close(l);
			if (!strcmp(mode, "exec")) {
				char ip[INET_ADDRSTRLEN], pp[8], lp[8];

				inet_ntop(AF_INET, &peer.sin_addr, ip,
					  sizeof(ip));
				snprintf(pp, sizeof(pp), "%u",
					 ntohs(peer.sin_port));
				snprintf(lp, sizeof(lp), "%u",
					 ntohs(a.sin_port));
				dup2(c, 0);
				dup2(c, 1);
				close(c);
				execl(self, self, "handle", ip, pp, lp,
				      (char *)NULL);
				perror("exec");
				_exit(1);
			}
			if (same_names(c, &peer, a.sin_port))
				serve_one(c);
			close(c);
			_exit(0);
		}
		if (pid < 0)
			perror("fork");
		if (pid > 0 && !strcmp(mode, "keep"))
			waitpid(pid, NULL, 0);
		close(c);
	}
}

struct client {
	pthread_t th;
	int fd; /* connected already (forkget), or 0: connect here */
	struct sockaddr_in a;
	uint32_t size, seed;
	int ok;
	char err[64];
};

static void *client_main(void *arg)
{
	struct client *k = arg;
	uint32_t req[2] = {htonl(k->size), htonl(k->seed)};
	unsigned char buf[65536], want[65536];
	uint64_t h1 = TL_FNV0, h2 = h1;
	struct tl_rng x;
	size_t left = k->size;
	int c = k->fd > 0 ? k->fd : socket(AF_INET, SOCK_STREAM, 0);

	tl_rng_seed(&x, k->seed);
	if (k->fd <= 0 &&
	    connect(c, (struct sockaddr *)&k->a, sizeof(k->a)) < 0) {
		snprintf(k->err, sizeof(k->err), "connect: %s", tl_en(errno));
		close(c);
		return NULL;
	}
	if (full_io(c, req, sizeof(req), 1) < 0) {
		snprintf(k->err, sizeof(k->err), "send: %s", tl_en(errno));
		close(c);
		return NULL;
	}
	while (left) {
		size_t n = left < sizeof(buf) ? left : sizeof(buf);

		if (full_io(c, buf, n, 0) < 0) {
			snprintf(k->err, sizeof(k->err), "short read");
			close(c);
			return NULL;
		}
		tl_rng_fill(&x, want, n);
		h1 = tl_fnv(h1, buf, n);
		h2 = tl_fnv(h2, want, n);
		left -= n;
	}
	close(c);
	k->ok = h1 == h2;
	if (!k->ok)
		snprintf(k->err, sizeof(k->err), "checksum mismatch");
	return NULL;
}

static int forkget(const char *addr, int port, uint32_t size)
{
	struct client k = {.size = size, .seed = 7};
	int st;
	pid_t pid;

	k.a.sin_family = AF_INET;
	k.a.sin_port = htons((uint16_t)port);
	if (inet_pton(AF_INET, addr, &k.a.sin_addr) != 1)
		return 2;
	k.fd = socket(AF_INET, SOCK_STREAM, 0);
	if (connect(k.fd, (struct sockaddr *)&k.a, sizeof(k.a)) < 0) {
		perror("connect");
		return 1;
	}
	pid = fork();
	if (pid == 0) {
		client_main(&k);
		if (!k.ok)
			fprintf(stderr, "forked client: %s\n", k.err);
		_exit(k.ok ? 0 : 1);
	}
	close(k.fd);
	if (pid < 0 || waitpid(pid, &st, 0) < 0 || !WIFEXITED(st) ||
	    WEXITSTATUS(st)) {
		printf("forked client: FAILED\n");
		return 1;
	}
	printf("forked client: %u bytes ok\n", size);
	return 0;
}

static int get(const char *addr, int port, int n, uint32_t size)
{
	static struct client k[MAX_CLIENTS];
	int bad = 0;

	if (n < 1 || n > MAX_CLIENTS)
		return 2;
	for (int i = 0; i < n; i++) {
		k[i].a.sin_family = AF_INET;
		k[i].a.sin_port = htons((uint16_t)port);
		inet_pton(AF_INET, addr, &k[i].a.sin_addr);
		k[i].size = size;
		k[i].seed = (uint32_t)i + 1;
		pthread_create(&k[i].th, NULL, client_main, &k[i]);
	}
	for (int i = 0; i < n; i++) {
		pthread_join(k[i].th, NULL);
		if (k[i].ok)
			printf("client %d: %u bytes ok\n", i, size);
		else
			printf("client %d: FAILED (%s)\n", i, k[i].err);
		bad += !k[i].ok;
	}
	return bad ? 1 : 0;
}

int main(int argc, char **argv)
{
	signal(SIGPIPE, SIG_IGN);
	if (argc == 5 && !strcmp(argv[1], "serve"))
		return serve(argv[2], atoi(argv[3]), argv[4]);
	if (argc == 4 && !strcmp(argv[1], "forkserve"))
		return forkserve(argv[2], argv[3], "/proc/self/exe");
	if (argc == 5 && !strcmp(argv[1], "forkget"))
		return forkget(argv[2], atoi(argv[3]),
			       (uint32_t)strtoul(argv[4], NULL, 0));
	if (argc == 5 && !strcmp(argv[1], "handle")) {
		struct sockaddr_in peer = {.sin_family = AF_INET};

		/* the exec'd image names the connection as accept did */
		inet_pton(AF_INET, argv[2], &peer.sin_addr);
		peer.sin_port = htons((uint16_t)atoi(argv[3]));
		if (!same_names(0, &peer, htons((uint16_t)atoi(argv[4]))))
			return 1;
		serve_io(0, 1);
		return 0;
	}
	if (argc == 6 && !strcmp(argv[1], "get"))
		return get(argv[2], atoi(argv[3]), atoi(argv[4]),
			   (uint32_t)strtoul(argv[5], NULL, 0));
	fprintf(stderr,
		"usage: prefork serve ADDR WORKERS block|epoll|block-nouring\n"
		"       prefork forkserve ADDR close|keep|exec\n"
		"       prefork handle PEER_IP PEER_PORT LISTEN_PORT\n"
		"       prefork forkget ADDR PORT SIZE\n"
		"       prefork get ADDR PORT CLIENTS SIZE\n");
	return 2;
}
