/* SPDX-License-Identifier: MIT */
/*
 * listenlock: takes the shim's listen lock (rsocket_glue/listenlock.c, the
 * object the library is linked from) as sg_listen does, for
 * tests/host/93-security-files.sh: on this host without RDMA no listener
 * ever reaches it.  Prints "locked" or "without <errno>" and the ms it
 * took; with HOLD_S given, keeps the lock that long (a sibling holding it).
 * The shim's log line goes to stderr, as the library's would.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <signal.h>
#include <time.h>
#include <unistd.h>

int sg_listen_lock(int *held);
void sg_listen_unlock(int fd, int *held);

/* What listenlock.o takes from the rest of the library. */
int shim_log_level = 2; /* info */
int (*shim_real_close)(int) = close;

void shim_log_write(int level, const char *fmt, ...)
{
	va_list ap;

	fprintf(stderr, "liberdma_shim[%d] %d: ", (int)getpid(), level);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
}

/*
 * listenlock fork: take the lock, fork a child that keeps its copy of the
 * lock's fd (as a fork in another thread while the lock is held would
 * copy it), let go, print "unlocked" and wait (the child dies with us):
 * the lock must be free for the next taker although the child's copy is
 * still open.
 */
static int fork_case(void)
{
	int held = -1, fd = sg_listen_lock(&held);
	pid_t c;

	if (fd < 0)
		return 1;
	c = fork();
	if (c == 0) {
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		pause();
		_exit(0);
	}
	sg_listen_unlock(fd, &held);
	printf("unlocked, held %d\n", held);
	fflush(stdout);
	pause();
	return 0;
}

int main(int argc, char **argv)
{
	struct timespec a, b;
	int fd, held = -1;

	if (argc > 1 && !strcmp(argv[1], "fork"))
		return fork_case();
	clock_gettime(CLOCK_MONOTONIC, &a);
	fd = sg_listen_lock(&held);
	clock_gettime(CLOCK_MONOTONIC, &b);
	if (fd >= 0)
		printf("locked");
	else
		printf("without %s", strerror(-fd));
	printf(" %ld ms\n", (long)((b.tv_sec - a.tv_sec) * 1000 +
				   (b.tv_nsec - a.tv_nsec) / 1000000));
	fflush(stdout);
	if (fd >= 0 && argc > 1)
		sleep((unsigned int)atoi(argv[1]));
	return fd >= 0 ? 0 : 1;
}
