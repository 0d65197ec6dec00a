/* SPDX-License-Identifier: MIT */
/*
 * What the kernel does with a blocking socket call that a signal handler
 * interrupted.  signal(7): accept, connect, recv* and send* are restarted
 * after a handler installed with SA_RESTART, unless the socket has a
 * timeout (SO_RCVTIMEO/SO_SNDTIMEO), and fail with EINTR otherwise.  The
 * shim's own waits (poll, rpoll) always end with EINTR, and do not say
 * which signal it was.
 */
#include "shim.h"

#include <pthread.h>

/*
 * After one of the shim's waits ended with EINTR: would the kernel have
 * restarted the call?  The handlers that can have run are those of the
 * caught signals this thread does not block; restart only when every one
 * of them has SA_RESTART (a handler without it may have been the one).
 * About 64 system calls, on the EINTR path only.
 */
bool shim_eintr_restarts(void)
{
	int saved = errno; /* glibc refuses sigaction on its own signals */
	sigset_t blocked;
	bool restart = true;

	if (pthread_sigmask(SIG_BLOCK, NULL, &blocked) != 0)
		return false;
	for (int sig = 1; sig < NSIG; sig++) {
		struct sigaction sa;

		/* A fault's signal is raised in the faulting thread by its
		 * own instruction: it never ends a wait (a sanitizer's or a
		 * runtime's SIGSEGV handler has no SA_RESTART). */
		if (sig == SIGSEGV || sig == SIGBUS || sig == SIGFPE ||
		    sig == SIGILL || sig == SIGTRAP || sig == SIGSYS)
			continue;
		if (sigismember(&blocked, sig) == 1 ||
		    sigaction(sig, NULL, &sa) != 0)
			continue; /* blocked, or glibc's own (SIGCANCEL...) */
		if (sa.sa_handler == SIG_DFL || sa.sa_handler == SIG_IGN)
			continue;
		if (!(sa.sa_flags & SA_RESTART)) {
			restart = false;
			break;
		}
	}
	errno = saved;
	return restart;
}
