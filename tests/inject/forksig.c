/* SPDX-License-Identifier: MIT */
/*
 * forksig.so: a signal in the middle of fork(), for a test.  Its
 * pthread_atfork prepare handler raises ERDMA_INJECT_FORK_SIG (a signal
 * number; nothing when unset) on the forking thread.  Preloaded after the
 * shim, its constructor runs before the shim's, and glibc runs prepare
 * handlers in the reverse order of their registration: so it raises the
 * signal after the shim's prepare handlers took their fork locks, where a
 * timer's or SIGCHLD's signal can come.  At exit it says how many it
 * raised, and how many found the signal blocked (the shim blocks them
 * across its fork handlers: so many were raised inside them).
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>

static int sig, raised, blocked;

static void prepare(void)
{
	sigset_t m;

	if (sig <= 0)
		return;
	raised++;
	if (!pthread_sigmask(SIG_BLOCK, NULL, &m) && sigismember(&m, sig) == 1)
		blocked++;
	raise(sig);
}

__attribute__((constructor)) static void forksig_init(void)
{
	const char *e = getenv("ERDMA_INJECT_FORK_SIG");

	sig = e ? atoi(e) : 0;
	pthread_atfork(prepare, NULL, NULL);
}

/* What the test checks that it tested: under the shim (which blocks
 * signals in its prepare handler) every raise came after the shim's. */
__attribute__((destructor)) static void forksig_report(void)
{
	if (sig > 0)
		fprintf(stderr, "forksig: %d raised, %d blocked\n", raised,
			blocked);
}
