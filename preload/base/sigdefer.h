/* SPDX-License-Identifier: MIT */
/*
 * The program's signal handlers, deferred while the shim sleeps and run
 * where the call holds nothing of the shim's (sigdefer.c).
 */
#ifndef SHIM_SIGDEFER_H
#define SHIM_SIGDEFER_H

#include "compiler.h"
#include "syms.h"

#include <poll.h>
#include <signal.h>
#include <stdbool.h>

#define SHIM_SIGQ 8

/* A fault's signal (SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGTRAP, SIGSYS): raised
 * in the faulting thread by its own instruction, so it must run there and
 * then -- never deferred, never blocked -- and it never ends a wait. */
static inline bool shim_sig_is_fault(int sig)
{
	return sig == SIGSEGV || sig == SIGBUS || sig == SIGFPE ||
	       sig == SIGILL || sig == SIGTRAP || sig == SIGSYS;
}

struct shim_sigq {
	int sig;
	struct sigaction act; /* the program's, at delivery */
	siginfo_t info;
};

struct shim_sigdefer {
	int edge;     /* exported calls under way that run them at their end */
	int sleeping; /* in the glue's sleep: handlers wait (the trampoline) */
	int hold;     /* a stretch where handlers wait too (shim_sig_hold) */
	int wake_fd;  /* the sleep's eventfd, written when one waits */
	int n;	      /* handlers waiting */
	struct shim_sigq q[SHIM_SIGQ];
};
extern __thread struct shim_sigdefer shim_sigd SHIM_HIDDEN;

/* sigaction(2) for the program: a handler it installs runs through the
 * shim's trampoline.  0 or -errno. */
int shim_sig_action(int sig, const struct sigaction *act,
		    struct sigaction *old);
/* The signals the program has a handler for (through sigaction or
 * signal), faults aside, in *set; false: none. */
bool shim_sig_caught(sigset_t *set);
/* Run the handlers waiting, as the kernel would have on delivery; false
 * when one of them had no SA_RESTART. */
bool shim_sig_run(void);

/* The glue's sleep, around rsockets' rpoll: handlers wait, and wake_fd
 * (or -1) ends the sleep when one does. */
static inline void shim_sig_sleep_enter(int wake_fd)
{
	shim_sigd.wake_fd = wake_fd;
	__atomic_store_n(&shim_sigd.sleeping, 1, __ATOMIC_SEQ_CST);
}
static inline void shim_sig_sleep_leave(void)
{
	shim_sigd.wake_fd = -1;
	__atomic_store_n(&shim_sigd.sleeping, 0, __ATOMIC_SEQ_CST);
}
static inline bool shim_sig_waiting(void)
{
	return __atomic_load_n(&shim_sigd.n, __ATOMIC_SEQ_CST) != 0;
}

/* An exported call runs the waiting handlers at its end, once it has
 * given back what it holds, instead of the sleep at its own end. */
static inline void shim_sig_edge_enter(void)
{
	shim_sigd.edge++;
}
/* true: handlers wait for this call to run them (shim_sig_run).  Any
 * call's end runs them, nested or not: none is left waiting.  Always
 * inline: epoll_wait's end called an out-of-line copy. */
static inline __attribute__((always_inline)) bool shim_sig_edge_leave(void)
{
	shim_sigd.edge--;
	return unlikely(shim_sig_waiting());
}

/* A stretch of an exported call (shim_sig_edge_enter) where the program's
 * handlers wait as in the sleep: one that jumps away from inside it would
 * leave what the call set up (a ring's accept armed, a connection taken)
 * behind.  Nothing inside may block for long but shim_sig_poll, which
 * the waiting handlers end (connect.c's conn_last_fd waits at most 0.5 s
 * for the connect thread, which a handler could not speed up). */
static inline void shim_sig_hold(void)
{
	__atomic_add_fetch(&shim_sigd.hold, 1, __ATOMIC_SEQ_CST);
}
static inline void shim_sig_unhold(void)
{
	__atomic_sub_fetch(&shim_sigd.hold, 1, __ATOMIC_SEQ_CST);
}

/* poll(2) over n kernel fds for a call that runs waiting handlers at its
 * end (shim_sig_edge_enter): handlers wait meanwhile, as in the glue's
 * sleep, and end the wait (-EINTR).  Returns like poll, or -errno. */
int shim_sig_poll(struct pollfd *p, nfds_t n, int timeout_ms);

/* Run the waiting handlers here, unless the shim still holds something of
 * the call (inside librdmacm, in the sleep) or an exported call will run
 * them at its end. */
static inline void shim_sig_run_if_free(void)
{
	if (unlikely(shim_sig_waiting()) && !shim_lib_depth &&
	    !shim_sigd.edge && !shim_sigd.sleeping && !shim_sigd.hold)
		shim_sig_run();
}

/*
 * A wait given a signal mask (ppoll, pselect, epoll_pwait: poll.c,
 * epoll.c) adds the mask's signals to the thread's for the whole call.
 * The kernel's call replaces the thread's mask instead, only once it is
 * under way: cancelled in it, the thread unwinds with the wait's mask
 * (the cleanup handlers see it); a cancel already pending acts before it,
 * with the thread's own: the caller acts on it (pthread_testcancel) before
 * shim_wait_mask_begin adds the mask (false: none added).
 * shim_wait_mask_cancelled, the cleanup while it is added, takes away the
 * thread's own signals that the wait's mask does not block.
 */
struct shim_wait_mask {
	sigset_t old;
	const sigset_t *mask;
};
/* Inline: most waits have no mask (poll, epoll_wait), and then it is one
 * test, not a call. */
static inline bool shim_wait_mask_begin(struct shim_wait_mask *w,
					const sigset_t *mask)
{
	w->mask = mask;
	return mask && !pthread_sigmask(SIG_BLOCK, mask, &w->old);
}
void shim_wait_mask_cancelled(void *arg);

#endif
