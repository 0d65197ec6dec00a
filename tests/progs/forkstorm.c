/* SPDX-License-Identifier: MIT */
/*
 * forkstorm: fork while other threads are busy with sockets and epoll
 * (issue 14).  Plain socket API only.
 *
 *   forkstorm ADDR FORKS
 *
 * One process connects to itself on ADDR; a streaming thread sends a
 * checksummed stream over that connection and a reading thread checks it,
 * and a churn thread makes epoll fds, registers the connection in them,
 * polls and closes them, without pause.  Meanwhile the main thread forks
 * FORKS times; each child makes an epoll fd, registers a new socket in it,
 * waits on it for 0 ms, closes both and exits 0.  A child that is not back
 * within 60 s is a hang (a lock some other thread held at the fork): it is
 * killed and counted; one back after 10 s is counted slow (on stderr, with
 * its stack at 10 s).  Prints "forks: N, hung: H, failed: F" and
 * "stream: B bytes, ok|MISMATCH"; exits 0 only if all is well.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static volatile bool done;
static int cfd = -1, sfd = -1;
static uint64_t sent_bytes, got_bytes;
static bool mismatch;
static uint64_t bad_first, bad_bytes,
    bad_last; /* where the stream went wrong */

static uint8_t byte_at(uint64_t i)
{
	return (uint8_t)((i * 2654435761u) >> 13);
}

static void *streamer(void *arg)
{
	unsigned char buf[4096];
	uint64_t pos = 0;

	(void)arg;
	while (!done) {
		for (size_t i = 0; i < sizeof(buf); i++)
			buf[i] = byte_at(pos + i);
		ssize_t r = send(cfd, buf, sizeof(buf), MSG_NOSIGNAL);

		if (r <= 0)
			break;
		pos += (uint64_t)r;
	}
	sent_bytes = pos;
	shutdown(cfd, SHUT_WR);
	return NULL;
}

static void *reader(void *arg)
{
	unsigned char buf[8192];
	uint64_t pos = 0;

	(void)arg;
	for (;;) {
		ssize_t r = recv(sfd, buf, sizeof(buf), 0);

		if (r <= 0)
			break;
		for (ssize_t i = 0; i < r; i++)
			if (buf[i] != byte_at(pos + (uint64_t)i)) {
				if (!mismatch)
					bad_first = pos + (uint64_t)i;
				bad_last = pos + (uint64_t)i;
				bad_bytes++;
				mismatch = true;
			}
		pos += (uint64_t)r;
	}
	got_bytes = pos;
	return NULL;
}

static void *churn(void *arg)
{
	struct epoll_event ev = {.events = EPOLLIN}, out;

	(void)arg;
	while (!done) {
		int ep = epoll_create1(EPOLL_CLOEXEC);

		if (ep < 0)
			continue;
		epoll_ctl(ep, EPOLL_CTL_ADD, sfd, &ev);
		epoll_wait(ep, &out, 1, 0);
		close(ep);
	}
	return NULL;
}

static void child(void)
{
	struct epoll_event ev = {.events = EPOLLIN}, out;
	int ep = epoll_create1(0);
	int s = socket(AF_INET, SOCK_STREAM, 0);

	const char *what = ep < 0 ? "epoll_create1" : s < 0 ? "socket" : NULL;

	if (!what && epoll_ctl(ep, EPOLL_CTL_ADD, s, &ev) < 0)
		what = "epoll_ctl";
	if (!what && epoll_wait(ep, &out, 1, 0) < 0)
		what = "epoll_wait";
	if (what) {
		/* the parent prints the status; this says which call and why */
		int e = errno;
		char p1[64], p2[64], l1[128] = "", l2[128] = "";

		snprintf(p1, sizeof(p1), "/proc/self/fd/%d", ep);
		snprintf(p2, sizeof(p2), "/proc/self/fd/%d", s);
		if (readlink(p1, l1, sizeof(l1) - 1) < 0)
			strcpy(l1, "?");
		if (readlink(p2, l2, sizeof(l2) - 1) < 0)
			strcpy(l2, "?");
		dprintf(2, "child %d: %s: %s (ep %d %s, s %d %s, again: %d)\n",
			(int)getpid(), what, strerror(e), ep, l1, s, l2,
			epoll_ctl(ep, EPOLL_CTL_ADD, s, &ev));
		_exit(2);
	}
	close(s);
	close(ep);
	_exit(0);
}

/* A failed child's status, on stderr: the transcript then names it. */
static int failed_status(pid_t pid, int st)
{
	if (WIFSIGNALED(st))
		dprintf(2, "child %d: killed by signal %d (%s)\n", (int)pid,
			WTERMSIG(st), strsignal(WTERMSIG(st)));
	else
		dprintf(2, "child %d: exit %d\n", (int)pid, WEXITSTATUS(st));
	return 1;
}

/*
 * A hung child's where-abouts, on stderr, before it is killed: its
 * /proc/PID/syscall and wchan, and its stack from gdb when gdb is there
 * (run without LD_PRELOAD, so neither the shim nor ASan is in gdb).
 */
static void show_hung(pid_t pid)
{
	static const char *const files[] = {"syscall", "wchan", "stat"};
	char path[64], buf[512], spid[16];

	for (size_t i = 0; i < sizeof(files) / sizeof(files[0]); i++) {
		snprintf(path, sizeof(path), "/proc/%d/%s", (int)pid, files[i]);
		FILE *f = fopen(path, "r");
		size_t n = f ? fread(buf, 1, sizeof(buf) - 1, f) : 0;

		buf[n] = 0;
		dprintf(2, "child %d: %s: %s\n", (int)pid, files[i],
			strtok(buf, "\n") ? buf : "?");
		if (f)
			fclose(f);
	}
	snprintf(spid, sizeof(spid), "%d", (int)pid);
	/* The environment without LD_PRELOAD is made here: the fork child of
	 * a threaded process calls only what is async-signal-safe. */
	size_t ne = 0, k = 0;

	while (environ[ne])
		ne++;
	char **env = calloc(ne + 1, sizeof(*env));

	for (size_t i = 0; env && i < ne; i++)
		if (strncmp(environ[i], "LD_PRELOAD=", 11))
			env[k++] = environ[i];
	pid_t g = env ? fork() : -1;

	if (g == 0) {
		char *const argv[] = {"gdb",
				      "-nx",
				      "-batch",
				      "-p",
				      spid,
				      "-ex",
				      "thread apply all bt",
				      NULL};

		dup2(2, 1);
		execvpe("gdb", argv, env);
		_exit(127);
	}
	if (g > 0)
		waitpid(g, NULL, 0);
	free(env);
}

/* Wait for pid up to ms milliseconds: true if it ended (status in *st). */
static bool wait_ms(pid_t pid, int ms, int *st)
{
	struct timespec nap = {0, 1000000};

	for (int i = 0; i < ms; i++) {
		if (waitpid(pid, st, WNOHANG) == pid)
			return true;
		nanosleep(&nap, NULL);
	}
	return false;
}

/*
 * Wait for pid: 0 exited 0, 1 failed, 2 hung (killed), 3 slow.  A child not
 * back in 10 s has its where-abouts shown, and gets 50 s more: a lock held
 * by a thread that did not cross the fork is never let go, while a child
 * merely held up (an emulated machine's stall) comes back; that one is
 * counted slow on stderr, and stdout stays the transcript.
 */
static int reap(pid_t pid)
{
	int st;

	if (!wait_ms(pid, 10000, &st)) {
		dprintf(2, "child %d: not back in 10 s\n", (int)pid);
		show_hung(pid);
		if (!wait_ms(pid, 50000, &st)) {
			dprintf(2, "child %d: not back in 60 s, killed\n",
				(int)pid);
			kill(pid, SIGKILL);
			waitpid(pid, &st, 0);
			return 2;
		}
		if (WIFEXITED(st) && WEXITSTATUS(st) == 0) {
			dprintf(2, "child %d: slow: back after 10 s\n",
				(int)pid);
			return 3;
		}
	}
	return WIFEXITED(st) && WEXITSTATUS(st) == 0 ? 0
						     : failed_status(pid, st);
}

int main(int argc, char **argv)
{
	struct sockaddr_in a = {.sin_family = AF_INET};
	socklen_t len = sizeof(a);
	pthread_t th[3];
	int l, forks, hung = 0, failed = 0, slow = 0;

	if (argc != 3 || inet_pton(AF_INET, argv[1], &a.sin_addr) != 1) {
		fprintf(stderr, "usage: forkstorm ADDR FORKS\n");
		return 2;
	}
	forks = atoi(argv[2]);
	l = socket(AF_INET, SOCK_STREAM, 0);
	if (bind(l, (struct sockaddr *)&a, sizeof(a)) < 0 || listen(l, 4) < 0 ||
	    getsockname(l, (struct sockaddr *)&a, &len) < 0) {
		perror("listen");
		return 1;
	}
	cfd = socket(AF_INET, SOCK_STREAM, 0);
	if (connect(cfd, (struct sockaddr *)&a, sizeof(a)) < 0 ||
	    (sfd = accept(l, NULL, NULL)) < 0) {
		perror("connect");
		return 1;
	}
	pthread_create(&th[0], NULL, streamer, NULL);
	pthread_create(&th[1], NULL, reader, NULL);
	pthread_create(&th[2], NULL, churn, NULL);
	for (int i = 0; i < forks; i++) {
		pid_t pid = fork();

		if (pid == 0)
			child();
		if (pid < 0) {
			dprintf(2, "fork: %s\n", strerror(errno));
			failed++;
			continue;
		}
		switch (reap(pid)) {
		case 1:
			failed++;
			break;
		case 2:
			hung++;
			break;
		case 3:
			slow++;
			break;
		}
	}
	done = true;
	pthread_join(th[0], NULL);
	pthread_join(th[2], NULL);
	pthread_join(th[1], NULL);
	printf("forks: %d, hung: %d, failed: %d\n", forks, hung, failed);
	printf("stream: %s, %s\n",
	       got_bytes == sent_bytes && got_bytes ? "all bytes"
						    : "bytes lost",
	       mismatch ? "MISMATCH" : "ok");
	fflush(stdout);
	if (slow)
		fprintf(stderr, "slow: %d\n", slow);
	if (mismatch)
		fprintf(stderr,
			"stream: %llu bytes wrong, first at %llu, last at %llu "
			"(of %llu)\n",
			(unsigned long long)bad_bytes,
			(unsigned long long)bad_first,
			(unsigned long long)bad_last,
			(unsigned long long)got_bytes);
	return hung || failed || mismatch || got_bytes != sent_bytes ||
	       !got_bytes;
}
