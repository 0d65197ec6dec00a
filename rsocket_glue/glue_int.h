/* SPDX-License-Identifier: MIT */
/* Inside rsocket_glue only. */
#ifndef SHIM_GLUE_INT_H
#define SHIM_GLUE_INT_H

#include <dlfcn.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>

#include "base.h"
#include "log.h"

/*
 * Call into librdmacm: mark this thread as inside the library (so what it
 * calls reaches libc untouched) and turn its -1/errno into -errno.
 *
 * With cancellation disabled: librdmacm and the providers under it are
 * not cancel-safe.  siw's post_send rings its doorbell with write(), a
 * cancellation point, holding the QP's spinlock and rsockets' send lock;
 * a thread cancelled there (a pthread_cancel landing in the spin before a
 * sleep, rpoll(0) sending credits) left them held, and the connection's
 * close could no longer send its end: its peer never saw it (kexact's
 * cancel-wait over siw).  The shim's own waits are the cancellation
 * points (sleep.c).  Inside a stretch of the shim's that has it disabled
 * (shim_nocancel_enter) the pair is left out.
 */
#define LIB_CALL(expr)                                                         \
	({                                                                     \
		long r_;                                                       \
		int cs_ = 0;                                                   \
		bool own_ = !shim_nocancel; /* else disabled already */        \
		if (own_)                                                      \
			pthread_setcancelstate(PTHREAD_CANCEL_DISABLE, &cs_);  \
		shim_enter_lib();                                              \
		r_ = (long)(expr);                                             \
		if (r_ < 0)                                                    \
			r_ = -errno;                                           \
		shim_leave_lib();                                              \
		if (own_)                                                      \
			pthread_setcancelstate(cs_, NULL);                     \
		shim_sig_run_if_free(); /* handlers that came inside it */     \
		r_;                                                            \
	})

/* The next definition of name after ours (librdmacm's, libibverbs',
 * libc's), looked up once into *slot; NULL: none.  Every glue export that
 * wraps a library function finds its real one here. */
static inline void *sg_next_sym(void **slot, const char *name)
{
	void *f = __atomic_load_n(slot, __ATOMIC_ACQUIRE);

	if (!f) {
		f = dlsym(RTLD_NEXT, name);
		__atomic_store_n(slot, f, __ATOMIC_RELEASE);
	}
	return f;
}

/*
 * LIB_CALL with the signals the program catches blocked (but the faults,
 * which must reach their handlers where they fault), for the calls
 * that talk to one of rsockets' service threads -- rlisten, raccept,
 * rconnect, rclose, rshutdown, and rsetsockopt's keepalive (rdma-core 44:
 * rs_notify_svc) -- or wait inside librdmacm for a completion (rshutdown).
 * Both are a single read() that rdma-core never retries on EINTR
 * (rsocket.c's read_all, "FIXME ... needs to handle EINTR"; rs_get_cq_event
 * gives up on it).  A program signal without SA_RESTART on such a thread
 * -- a timer taken while the program waits in poll, where the door opens
 * (issue 42's integrity workload: SIGALRM every 3 ms) -- made rlisten's
 * read of the listen service's answer fail before the service had taken
 * the listener: rs_notify_svc then found no socket registered and joined
 * the service thread, which had taken it meanwhile and never exits.  The
 * listener's first poll waited for good, holding rsockets' service mutex
 * and svc_mu (every connect of the process then waited out its timeout
 * in rsockets' poll gate, EBUSY; bed stacks, tests/rdma/68-integrity.sh).
 * By the code, the other outcomes are as bad: when the service answers
 * first, rlisten fails with the listener left in the service (freed by
 * the close that follows) and its answer unread (the next call's), and
 * an rshutdown whose wait for a send credit is cut short skips its
 * shutdown message (the peer never sees EOF).  The program loses
 * nothing: its handlers wait for the call's end anyway (base/sigdefer.c):
 * the mask comes back before the call leaves librdmacm, so a signal that
 * waited meanwhile is queued there and runs where any other would; a
 * process-directed one may go to another thread instead.  (Two of one
 * standard signal that come while it is blocked are one, as the kernel
 * merges any blocked standard signal; real-time ones all arrive.)
 */
#define LIB_CALL_QUIET(expr)                                                   \
	({                                                                     \
		sigset_t qo_;                                                  \
		bool qb_ = sg_sig_quiet(&qo_);                                 \
		/* unblocked while still inside: one that waited is queued */  \
		LIB_CALL(({                                                    \
			long qr_ = (long)(expr);                               \
			int qe_ = errno;                                       \
			if (qb_)                                               \
				pthread_sigmask(SIG_SETMASK, &qo_, NULL);      \
			errno = qe_;                                           \
			qr_;                                                   \
		}));                                                           \
	})
/* threads.c: block the signals the program catches (the others end no
 * system call: a default action kills or stops the process, as before);
 * false: none, nothing to restore.  *old: the mask to restore. */
bool sg_sig_quiet(sigset_t *old);

/* threads.c: find librdmacm's code once (GLUE start); then, without a
 * lock: is caller (a return address) code of librdmacm's? */
void sg_threads_start(void);
bool sg_from_librdmacm(const void *caller);

/*
 * sleep.c: the sleep in rsockets runs with cancellation disabled (a thread
 * cancelled inside rpoll would leave its poll gate held); enter returns an
 * eventfd that pthread_cancel writes, to add to the sleep's fds; it is
 * a cancellation point (a cancel that came before).  leave restores the
 * state and says whether the sleep was woken: the caller then acts on a
 * cancel (pthread_testcancel) once nothing of the sleep is left.
 */
int sg_sleep_enter(int *cancel_state, const struct pollfd *fds, nfds_t n);
bool sg_sleep_leave(int cancel_state); /* true: woken (cancel or kick) */
void sg_sleep_fork_child(void);
/* Wake the threads asleep on rs (fds[].fd): the program shut it down. */
void sg_sleep_kick(int rs);

/*
 * reap.c: rclose(rs) -- done by the caller's close_fn, which knows the
 * locks -- on a reaper thread, waited for a bounded time; cmfd (or -1): a
 * duplicate of its rdma_cm channel, watched while the close is slow, then
 * closed.
 */
int sg_reap(int rs, int cmfd, int (*close_fn)(int rs));
void sg_reap_fork_child(void);

/* cmend.c: does the rdma_cm channel (or a duplicate) fd hold an event
 * now?  Take a connection's end event from it and flush its QP: the event
 * type, or -errno. */
bool sg_cm_ready(int fd);
int sg_cm_take_end(int fd);

/*
 * spin.c: how long sg_wait checks before it sleeps, adapted per thread;
 * max is ERDMA_SHIM_POLL_US.  window: this wait's spin, in us (at most
 * the ceiling, and within a finite timeout_ms); adapt: after a wait that
 * slept, waited_us in all since its spin began; sample: measure this
 * sleep's CPU time?  cost: what a measured sleep took (the ceiling is
 * SPIN_COST_X times the thread's recent sleeps', at most max).
 */
#define SPIN_MIN_US 10	  /* a window below it is none */
#define SPIN_IDLE_X 5	  /* a wait over SPIN_IDLE_X x the ceiling: peer idle */
#define SPIN_COST_X 4	  /* the ceiling: SPIN_COST_X x a sleep's CPU time */
#define SPIN_SAMPLE 8	  /* one sleep in SPIN_SAMPLE is measured */
#define SPIN_START_US 100 /* a thread's first window (at most max) */
long sg_spin_window(unsigned int max, int timeout_ms);
bool sg_spin_sample(void);
void sg_spin_cost(unsigned long cpu_ns);
#ifdef SG_WAITSTATS /* diagnostics: spin.c */
struct sg_waitstats {
	unsigned long waits, first, spun, slept, win0, win_us, yields;
	unsigned long slept_us, grow, shrink, sleep_cpu_ns, sampled;
};
extern struct sg_waitstats sg_ws;
#define WS_ADD(f, v) __atomic_fetch_add(&sg_ws.f, (v), __ATOMIC_RELAXED)
#else
#define WS_ADD(f, v) ((void)0)
#endif
void sg_spin_adapt(unsigned int max, long waited_us);

#endif
