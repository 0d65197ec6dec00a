/* SPDX-License-Identifier: MIT */
/*
 * slowclose.so: widens a race window for a test, preloaded after the
 * shim.  A close() of a TCP socket made on a thread that blocks every
 * signal -- none of the program's threads in the tests that use it; the
 * shim's connect thread, which closes its duplicate of a connecting
 * socket as it lets go of it -- first waits ERDMA_INJECT_CLOSE_MS
 * (default 200).  The shim reaches it through its dlsym(RTLD_NEXT) of
 * close; the program's calls go through the shim as ever.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <time.h>

static int (*next_close)(int);

static int all_blocked(void)
{
	sigset_t m;

	return !pthread_sigmask(SIG_BLOCK, NULL, &m) &&
	       sigismember(&m, SIGTERM) == 1 && sigismember(&m, SIGUSR2) == 1;
}

static int is_tcp(int fd)
{
	int p = 0;
	socklen_t l = sizeof(p);

	return !getsockopt(fd, SOL_SOCKET, SO_PROTOCOL, &p, &l) &&
	       p == IPPROTO_TCP;
}

int close(int fd)
{
	if (!next_close)
		next_close = (int (*)(int))dlsym(RTLD_NEXT, "close");
	if (all_blocked() && is_tcp(fd)) {
		const char *e = getenv("ERDMA_INJECT_CLOSE_MS");
		long ms = e ? atol(e) : 200;

		nanosleep(&(struct timespec){ms / 1000, ms % 1000 * 1000000L},
			  NULL);
	}
	return next_close(fd);
}
