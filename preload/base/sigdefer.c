/* SPDX-License-Identifier: MIT */
/*
 * The program's signal handlers, deferred while the shim sleeps.
 *
 * A handler that runs inside the shim's sleep runs inside rsockets' rpoll,
 * while the shim holds things for the call: rsockets' poll gate, the
 * thread's librdmacm depth and sleep record, the call's references to its
 * sockets.  One that leaves by siglongjmp (alarm() bounding a blocking
 * recv) would leave them held for good: every later rpoll of the process
 * spinning, the thread blind to its RDMA sockets, a later pthread_cancel
 * of it looping, the socket alive after its close.
 *
 * So a handler the program installs (sigaction, signal) runs through a
 * trampoline.  Outside the shim's sleep the trampoline calls it at once,
 * with the kernel's siginfo and context.  Inside the sleep it notes the
 * signal and returns: the sleep's ppoll ends with EINTR as it would have,
 * rpoll unwinds, and the handler runs where nothing of the shim is held --
 * at the end of the exported call, after it put its references
 * (shim_sig_edge_enter), or at the end of the sleep.  The signal still
 * goes to the thread the kernel picks (its mask is never touched), and a
 * handler that jumps away leaves nothing behind.
 *
 * Synchronous signals (SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGTRAP, SIGSYS)
 * are never wrapped: they must run at the faulting instruction.
 */
#include "sigdefer.h"
#include "startup.h"
#include "syms.h"

#include <string.h>
#include <ucontext.h>

__thread struct shim_sigdefer shim_sigd = {.wake_fd = -1};

/* The program's action per signal, under a sequence count: a writer
 * (under mu, its signals blocked) makes it odd while it writes, so that a
 * trampoline on another thread never takes half of one action and half
 * of another. */
static struct sigaction prog[NSIG];
static unsigned int seq[NSIG];
static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;

static void prog_read(int sig, struct sigaction *a)
{
	unsigned int s;

	for (;;) {
		s = __atomic_load_n(&seq[sig], __ATOMIC_ACQUIRE);
		if (s & 1)
			continue;
		*a = prog[sig];
		__atomic_thread_fence(__ATOMIC_ACQUIRE);
		if (__atomic_load_n(&seq[sig], __ATOMIC_RELAXED) == s)
			return;
	}
}

static void prog_write(int sig, const struct sigaction *a)
{
	__atomic_add_fetch(&seq[sig], 1, __ATOMIC_RELEASE);
	__atomic_thread_fence(__ATOMIC_RELEASE);
	prog[sig] = *a;
	__atomic_add_fetch(&seq[sig], 1, __ATOMIC_RELEASE);
}

/* A fork child has only the thread that forked: a writer caught in
 * another one left mu held and its count odd. */
static void sigdefer_fork_child(void)
{
	pthread_mutex_init(&mu, NULL);
	for (int sig = 0; sig < NSIG; sig++)
		if (seq[sig] & 1)
			seq[sig]++;
}
SHIM_STARTUP(SIGDEFER, .child = sigdefer_fork_child);

static bool wrappable(int sig)
{
	if (shim_sig_is_fault(sig) || sig == SIGKILL || sig == SIGSTOP)
		return false;
	return sig > 0 && sig < NSIG && !(sig >= 32 && sig < SIGRTMIN);
}

static bool is_handler(const struct sigaction *a)
{
	return a->sa_handler != SIG_DFL && a->sa_handler != SIG_IGN;
}

/* The signals the program catches through the trampoline, faults aside:
 * those whose delivery can end a system call with EINTR.  false: none. */
bool shim_sig_caught(sigset_t *set)
{
	struct sigaction a;
	bool any = false;

	sigemptyset(set);
	for (int sig = 1; sig < NSIG; sig++) {
		/* never written: no handler of the program's, no read */
		if (!__atomic_load_n(&seq[sig], __ATOMIC_RELAXED) ||
		    !wrappable(sig))
			continue;
		prog_read(sig, &a);
		if (is_handler(&a)) {
			sigaddset(set, sig);
			any = true;
		}
	}
	return any;
}

/*
 * The handler runs as if outside the shim: a call it makes into the shim
 * is a call of its own (no edge of ours above it, not in our sleep), and
 * a jump out of it leaves those so.
 */
static void call(const struct sigaction *a, int sig, siginfo_t *info, void *uc)
{
	struct shim_sigdefer *d = &shim_sigd;
	int edge = d->edge, sleeping = d->sleeping, hold = d->hold;

	d->edge = 0;
	__atomic_store_n(&d->sleeping, 0, __ATOMIC_SEQ_CST);
	__atomic_store_n(&d->hold, 0, __ATOMIC_SEQ_CST);
	if (a->sa_flags & SA_SIGINFO)
		a->sa_sigaction(sig, info, uc);
	else
		a->sa_handler(sig);
	d->edge = edge;
	__atomic_store_n(&d->sleeping, sleeping, __ATOMIC_SEQ_CST);
	__atomic_store_n(&d->hold, hold, __ATOMIC_SEQ_CST);
}

/* Where a handler must wait: inside librdmacm (its locks, the poll gate,
 * the thread's depth), around the glue's sleep (its record) and in a
 * call's hold (shim_sig_hold). */
static bool must_wait(const struct shim_sigdefer *d)
{
	return __atomic_load_n(&d->sleeping, __ATOMIC_SEQ_CST) ||
	       __atomic_load_n(&d->hold, __ATOMIC_SEQ_CST) ||
	       shim_lib_depth > 0;
}

static void trampoline(int sig, siginfo_t *info, void *uc)
{
	struct shim_sigdefer *d = &shim_sigd;
	struct sigaction a;
	int e = errno, n;
	uint64_t one = 1;

	prog_read(sig, &a);
	if (!is_handler(&a))
		return; /* replaced as it came */
	if (!must_wait(d)) {
		call(&a, sig, info, uc); /* errno is the interrupted code's */
		return;
	}
	/* the slot first: a signal that interrupts us here takes the next */
	n = __atomic_fetch_add(&d->n, 1, __ATOMIC_SEQ_CST);
	if (n >= SHIM_SIGQ) {
		__atomic_sub_fetch(&d->n, 1, __ATOMIC_SEQ_CST);
		call(&a, sig, info, uc); /* full: inside, as before */
		return;
	}
	d->q[n] = (struct shim_sigq){.sig = sig, .act = a, .info = *info};
	/* ends the sleep also when the signal came before its ppoll */
	if (d->wake_fd >= 0)
		(void)!REAL(write)(d->wake_fd, &one, sizeof(one));
	errno = e;
}

static bool is_trampoline(const struct sigaction *k)
{
	return (k->sa_flags & SA_SIGINFO) && k->sa_sigaction == trampoline;
}

static int action_locked(int sig, const struct sigaction *act,
			 struct sigaction *old)
{
	struct sigaction k, was;

	if (REAL(sigaction)(sig, NULL, &was) != 0)
		return -errno;
	/* The kernel's action is the truth: SA_RESETHAND, glibc's own
	 * sigaction calls (system(), sigset) or a raw system call may have
	 * replaced the trampoline since. */
	if (old) {
		if (is_trampoline(&was))
			prog_read(sig, old);
		else
			*old = was;
	}
	if (!act)
		return 0;
	k = *act;
	if (is_handler(act)) {
		prog_write(sig, act);
		k.sa_sigaction = trampoline;
		k.sa_flags |= SA_SIGINFO;
	}
	if (REAL(sigaction)(sig, &k, NULL) != 0)
		return -errno;
	/* what a later sigaction reads back is the kernel's word (its
	 * flags and mask as it keeps them), with the program's handler */
	if (is_handler(act) && REAL(sigaction)(sig, NULL, &k) == 0) {
		k.sa_flags =
		    (k.sa_flags & ~SA_SIGINFO) | (act->sa_flags & SA_SIGINFO);
		k.sa_sigaction = act->sa_sigaction;
		prog_write(sig, &k);
	}
	return 0;
}

int shim_sig_action(int sig, const struct sigaction *act, struct sigaction *old)
{
	sigset_t all, saved;
	int r;

	if (!wrappable(sig))
		return REAL(sigaction)(sig, act, old) != 0 ? -errno : 0;
	/* no handler may run (and call sigaction) while mu is held */
	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &saved);
	pthread_mutex_lock(&mu);
	r = action_locked(sig, act, old);
	pthread_mutex_unlock(&mu);
	pthread_sigmask(SIG_SETMASK, &saved, NULL);
	return r;
}

/* One waiting handler, as the kernel runs it: its sa_mask and the signal
 * itself (unless SA_NODEFER) blocked while it runs. */
static void run_one(struct shim_sigq *e)
{
	volatile int once = 0;
	sigset_t m, old;
	ucontext_t uc;

	m = e->act.sa_mask;
	if (!(e->act.sa_flags & SA_NODEFER))
		sigaddset(&m, e->sig);
	pthread_sigmask(SIG_BLOCK, &m, &old);
	getcontext(&uc); /* a context for handlers that read one */
	if (!once++)
		call(&e->act, e->sig, &e->info, &uc);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
}

bool shim_sig_run(void)
{
	struct shim_sigdefer *d = &shim_sigd;
	bool restart = true;

	while (shim_sig_waiting()) {
		int n = __atomic_load_n(&d->n, __ATOMIC_SEQ_CST);
		struct shim_sigq e = d->q[0];

		/* off the queue first: a handler that jumps away is done (no
		 * other comes in meanwhile: outside librdmacm and the sleep
		 * the trampoline calls them at once) */
		memmove(&d->q[0], &d->q[1], (size_t)(n - 1) * sizeof(d->q[0]));
		__atomic_sub_fetch(&d->n, 1, __ATOMIC_SEQ_CST);
		restart &= (e.act.sa_flags & SA_RESTART) != 0;
		run_one(&e);
	}
	return restart;
}

static void poll_done(void *arg)
{
	/* the mask first: a signal it lets through still waits */
	pthread_sigmask(SIG_SETMASK, arg, NULL);
	shim_sig_sleep_leave();
}

/*
 * Signals are blocked from the look at the queue to the sleep, which
 * unblocks them atomically (ppoll): one that comes meanwhile ends the
 * sleep as it enters.  No fd of the shim's is open while the wait runs (an
 * eventfd would take the number a ring's accept completing in it is due).
 * With one waiting, what is ready already is still said (the kernel's
 * accept takes a queued connection before it looks at signals).
 */
static int sleep_masked(struct pollfd *p, nfds_t n, int timeout_ms,
			const sigset_t *mask)
{
	struct timespec ts = {timeout_ms / 1000,
			      (timeout_ms % 1000) * 1000000L};
	int r;

	if (shim_sig_waiting()) {
		r = REAL(poll)(p, n, 0); /* signals blocked: no EINTR */
		return r > 0 ? r : -EINTR;
	}
	r = REAL(ppoll)(p, n, timeout_ms < 0 ? NULL : &ts, mask);
	return r < 0 ? -errno : r;
}

int shim_sig_poll(struct pollfd *p, nfds_t n, int timeout_ms)
{
	sigset_t all, old;
	int r;

	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	shim_sig_sleep_enter(-1);
	pthread_cleanup_push(poll_done, &old); /* ppoll: a cancellation point */
	r = sleep_masked(p, n, timeout_ms, &old);
	pthread_cleanup_pop(1);
	return r;
}

void shim_wait_mask_cancelled(void *arg)
{
	struct shim_wait_mask *w = arg;
	sigset_t un = w->old;

	for (int sig = 1; sig < NSIG; sig++)
		if (sigismember(w->mask, sig) == 1)
			sigdelset(&un, sig);
	pthread_sigmask(SIG_UNBLOCK, &un, NULL);
}
