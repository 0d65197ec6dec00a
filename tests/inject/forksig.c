/* SPDX-License-Identifier: MIT */
/*
 * forksig.so: a signal in the middle of fork(), for a test.  Its
 * pthread_atfork prepare handler raises ERDMA_INJECT_FORK_SIG (a signal
 * number; nothing when unset) on the forking thread.  Preloaded after the
 * shim, its constructor runs before the shim's, and glibc runs prepare
 * handlers in the reverse order of their registration: so it raises the
 * signal after the shim's prepare handlers took their fork locks, where a
 * timer's or SIGCHLD's signal can come.
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>

static int sig;

static void prepare(void)
{
	if (sig > 0)
		raise(sig);
}

__attribute__((constructor)) static void forksig_init(void)
{
	const char *e = getenv("ERDMA_INJECT_FORK_SIG");

	sig = e ? atoi(e) : 0;
	pthread_atfork(prepare, NULL, NULL);
}
