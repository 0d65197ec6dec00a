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

		/* a sanitizer's or a runtime's SIGSEGV handler has no
		 * SA_RESTART, and needs none */
		if (shim_sig_is_fault(sig))
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

bool shim_wait_restarts(long r, int ms)
{
	return r == -EINTR && ms < 0 && !shim_sig_waiting() &&
	       shim_eintr_restarts();
}

/* The handlers waiting ran; their SA_RESTART says whether the call starts
 * again, as the kernel's restart goes by the handler that interrupted. */
bool shim_sig_deliver(long r, bool timed)
{
	bool restart = shim_sig_run();

	return r == -EINTR && !timed && restart;
}

/*
 * The program's handlers go through the shim's trampoline
 * (base/sigdefer.c), so that one never runs inside the shim's sleep.
 * signal(), __sysv_signal()/sysv_signal() and siginterrupt() are glibc's,
 * rebuilt on that sigaction: glibc's own call sigaction inside libc, where
 * no wrapper sees it.  (sigset, sigvec and raw system calls install their
 * handlers unwrapped: those run inside the shim's sleep, as before.)
 */
SHIM_EXPORT int sigaction(int sig, const struct sigaction *act,
			  struct sigaction *old)
{
	shim_ensure_init();
	return (int)shim_ret(shim_sig_action(sig, act, old));
}

/* signals siginterrupt() made interrupting: signal() gives them no
 * SA_RESTART (glibc's _sigintr) */
static uint64_t intr_mask;

static uint64_t sig_bit(int sig)
{
	return sig > 0 && sig <= 64 ? 1ULL << (sig - 1) : 0;
}

static sighandler_t set_handler(int sig, sighandler_t h, bool sysv)
{
	struct sigaction a = {.sa_handler = h}, old;
	int r;

	shim_ensure_init();
	if (h == SIG_ERR || sig <= 0 || sig >= NSIG) {
		errno = EINVAL;
		return SIG_ERR;
	}
	sigemptyset(&a.sa_mask);
	if (sysv) {
		a.sa_flags = SA_RESETHAND | SA_NODEFER;
	} else {
		sigaddset(&a.sa_mask, sig);
		a.sa_flags =
		    __atomic_load_n(&intr_mask, __ATOMIC_RELAXED) & sig_bit(sig)
			? 0
			: SA_RESTART;
	}
	r = shim_sig_action(sig, &a, &old);
	if (r < 0) {
		errno = -r;
		return SIG_ERR;
	}
	return old.sa_handler;
}

/* BSD semantics, as glibc's signal(): SA_RESTART (unless siginterrupt),
 * the signal blocked in its handler. */
SHIM_EXPORT sighandler_t signal(int sig, sighandler_t h)
{
	return set_handler(sig, h, false);
}

/* System V semantics: one-shot, not blocked in its handler, no restart.
 * glibc's signal() is this under -std=c99/c11 (strict ISO C). */
SHIM_EXPORT sighandler_t __sysv_signal(int sig, sighandler_t h)
{
	return set_handler(sig, h, true);
}

SHIM_EXPORT sighandler_t sysv_signal(int sig, sighandler_t h)
{
	return set_handler(sig, h, true);
}

SHIM_EXPORT int siginterrupt(int sig, int flag)
{
	struct sigaction a;
	int r;

	shim_ensure_init();
	r = shim_sig_action(sig, NULL, &a);
	if (r < 0)
		return (int)shim_ret(r);
	if (flag) {
		__atomic_or_fetch(&intr_mask, sig_bit(sig), __ATOMIC_RELAXED);
		a.sa_flags &= ~SA_RESTART;
	} else {
		__atomic_and_fetch(&intr_mask, ~sig_bit(sig), __ATOMIC_RELAXED);
		a.sa_flags |= SA_RESTART;
	}
	return (int)shim_ret(shim_sig_action(sig, &a, NULL));
}
