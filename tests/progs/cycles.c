/* SPDX-License-Identifier: MIT */
/*
 * cycles: connect/echo/close in a loop, to see what a connection leaves
 * behind.  Plain socket API.
 *
 *   cycles server ADDR PORT N     accept N connections one after another,
 *                                 echo 8 bytes on each; prints "ready PORT"
 *   cycles client ADDR PORT N [--hold FILE] [--strict]
 *
 * The client measures its open fds and RSS after a warm-up (10% of N, at
 * least 20 cycles) and after all N, prints both, and fails when either grew
 * (fds: at all; RSS: by more than 2 MiB).  --hold keeps both processes
 * alive at the end so a test can count QPs left in `rdma res`.  --strict:
 * every close() must also leave as many rdma_cm fds open as there were
 * before the first socket: a closed connection keeps nothing open behind
 * it, as the kernel's (an rsocket holds its own rdma_cm channel).
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <netdb.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "testlib.h"

/* What this process's fds are: fn(number, what /proc says it is, arg)
 * for each (the directory's own fd left out); how many there were. */
static int each_fd(void (*fn)(int fd, const char *what, void *arg), void *arg)
{
	DIR *d = opendir("/proc/self/fd");
	struct dirent *e;
	int n = 0;

	if (!d)
		tl_die("opendir");
	while ((e = readdir(d))) {
		char path[300], what[128];
		ssize_t l;
		int fd = atoi(e->d_name);

		if (e->d_name[0] == '.' || fd == dirfd(d))
			continue;
		snprintf(path, sizeof(path), "/proc/self/fd/%s", e->d_name);
		l = readlink(path, what, sizeof(what) - 1);
		what[l > 0 ? l : 0] = '\0';
		if (fn)
			fn(fd, what, arg);
		n++;
	}
	closedir(d);
	return n;
}

static int count_fds(void)
{
	return each_fd(NULL, NULL);
}

static void count_one_cm(int fd, const char *what, void *arg)
{
	(void)fd;
	*(int *)arg += !strcmp(what, "/dev/infiniband/rdma_cm");
}

/* fds open on /dev/infiniband/rdma_cm */
static int count_cm(void)
{
	int n = 0;

	each_fd(count_one_cm, &n);
	return n;
}

struct fd_list {
	char *buf;
	size_t len, used;
};

static void list_one(int fd, const char *what, void *arg)
{
	struct fd_list *l = arg;

	if (l->used < l->len)
		l->used += (size_t)snprintf(l->buf + l->used, l->len - l->used,
					    " %d:%s", fd, what);
}

/* What each open fd is ("3:anon_inode:[eventfd] ..."), into buf: printed
 * when the count grew, so a failure says what was left open. */
static void list_fds(char *buf, size_t len)
{
	struct fd_list l = {.buf = buf, .len = len};

	buf[0] = '\0';
	each_fd(list_one, &l);
}

static long rss_kib(void)
{
	long pages = 0, resident = 0;
	FILE *f = fopen("/proc/self/statm", "r");

	if (!f || fscanf(f, "%ld %ld", &pages, &resident) != 2)
		tl_die("statm");
	fclose(f);
	return resident * (sysconf(_SC_PAGESIZE) / 1024);
}

/* this process's threads (the shim's reapers among them) */
static int threads(void)
{
	char line[128];
	int n = -1;
	FILE *f = fopen("/proc/self/status", "r");

	while (f && fgets(line, sizeof(line), f))
		if (sscanf(line, "Threads: %d", &n) == 1)
			break;
	if (f)
		fclose(f);
	return n;
}

static void hold_until(const char *hold)
{
	struct stat sb;

	if (!hold)
		return;
	printf("holding\n");
	fflush(stdout);
	for (int i = 0; i < 6000 && stat(hold, &sb) != 0; i++)
		usleep(10000);
}

static int full(int fd, char *buf, size_t n, int out)
{
	size_t done = 0;

	while (done < n) {
		ssize_t r = out ? send(fd, buf + done, n - done, MSG_NOSIGNAL)
				: recv(fd, buf + done, n - done, 0);

		if (r <= 0) {
			if (r < 0 && errno == EINTR)
				continue;
			return -1;
		}
		done += (size_t)r;
	}
	return 0;
}

int main(int argc, char **argv)
{
	struct addrinfo hints = {.ai_socktype = SOCK_STREAM,
				 .ai_flags = AI_NUMERICHOST},
			*ai;
	const char *hold = NULL;
	bool strict = false;
	int n, warm;
	char buf[8];

	for (int a = 5; a < argc; a++) {
		if (!strcmp(argv[a], "--hold") && a + 1 < argc)
			hold = argv[++a];
		else if (!strcmp(argv[a], "--strict"))
			strict = true;
		else
			argc = 0; /* usage */
	}
	/* RSS counts 4 KiB pages: with transparent huge pages "always"
	 * (Debian's kernel, the bed's VM) khugepaged may fold a heap range
	 * into one 2 MiB page at any moment, which is no leak */
	prctl(PR_SET_THP_DISABLE, 1, 0, 0, 0);
	if (argc < 5)
		return fprintf(stderr, "usage: cycles server|client ADDR PORT "
				       "N [--hold FILE] [--strict]\n"),
		       2;
	n = atoi(argv[4]);
	if (getaddrinfo(argv[2], argv[3], &hints, &ai))
		tl_die("getaddrinfo");
	if (!strcmp(argv[1], "server")) {
		struct sockaddr_storage ss;
		socklen_t len = sizeof(ss);
		int one = 1, l = socket(ai->ai_family, SOCK_STREAM, 0);

		setsockopt(l, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
		if (bind(l, ai->ai_addr, ai->ai_addrlen) || listen(l, 64))
			tl_die("listen");
		getsockname(l, (struct sockaddr *)&ss, &len);
		printf("ready %u\n",
		       ntohs(((struct sockaddr_in *)&ss)->sin_port));
		fflush(stdout);
		for (int i = 0; i < n; i++) {
			int c = accept(l, NULL, NULL);

			if (c < 0 || full(c, buf, 8, 0) || full(c, buf, 8, 1))
				tl_die("serve");
			close(c);
		}
		printf("server: served %d connections\n", n);
		hold_until(hold);
		close(l);
		freeaddrinfo(ai);
		return 0;
	}
	warm = n / 10 > 20 ? n / 10 : 20;
	if (warm > n)
		warm = n;
	char fds0[1024] = "", fds1[1024];
	int fd0 = 0, th0 = 0;
	long rss0 = 0;
	struct timespec t0, t1;

	clock_gettime(CLOCK_MONOTONIC, &t0);
	int cm0 = count_cm();

	for (int i = 0; i < n; i++) {
		int fd;

		if (i == warm) {
			fd0 = count_fds();
			list_fds(fds0, sizeof(fds0));
			rss0 = rss_kib();
			th0 = threads();
		}
		fd = socket(ai->ai_family, SOCK_STREAM, 0);
		if (fd < 0 || connect(fd, ai->ai_addr, ai->ai_addrlen))
			tl_die("connect");
		memcpy(buf, &i, sizeof(i));
		memset(buf + sizeof(i), 'x', 8 - sizeof(i));
		if (full(fd, buf, 8, 1) || full(fd, buf, 8, 0) ||
		    memcmp(buf, &i, sizeof(i)))
			tl_die("echo");
		close(fd);
		if (strict && count_cm() != cm0) {
			char now[1024];

			list_fds(now, sizeof(now));
			printf("client: cycle %d: %d rdma_cm fds before the "
			       "first socket, %d after this close:%s\n",
			       i, cm0, count_cm(), now);
			return 1;
		}
	}
	clock_gettime(CLOCK_MONOTONIC, &t1);
	int fd1 = count_fds();
	long rss1 = rss_kib();
	double secs =
	    (double)(t1.tv_sec - t0.tv_sec) + (t1.tv_nsec - t0.tv_nsec) / 1e9;

	printf("client: %d cycles; fds %d -> %d; RSS %ld -> %ld KiB; threads "
	       "%d -> %d\n",
	       n, fd0, fd1, rss0, rss1, th0, threads());
	if (fd1 > fd0) {
		list_fds(fds1, sizeof(fds1));
		printf(
		    "client: fds after warm-up:%s\nclient: fds at the end:%s\n",
		    fds0, fds1);
	}
	fprintf(
	    stderr,
	    "FIGURE: %d connect/echo/close cycles in %.1f s (%.1f ms each)\n",
	    n, secs, 1000 * secs / n);
	hold_until(hold);
	freeaddrinfo(ai);
	/* ASan's quarantine holds freed blocks back: tests/rdma/70-cycles.sh
	 * widens the RSS bound there and lets LeakSanitizer judge instead */
	const char *e = getenv("ERDMA_CYCLES_RSS_SLACK_KIB");
	long slack = e ? atol(e) : 2048;

	return fd1 > fd0 || rss1 - rss0 > slack ? 1 : 0;
}
