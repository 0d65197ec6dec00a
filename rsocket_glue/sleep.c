/* SPDX-License-Identifier: MIT */
/*
 * pthread_cancel of a thread asleep in an RDMA wait (and a shutdown of a
 * connection it sleeps on: sg_sleep_kick).
 *
 * The shim sleeps in rsockets' rpoll, whose poll gate (a count of the
 * threads inside it) is never given back when a thread is cancelled there:
 * every later rpoll in the process then spins.  So the sleep itself runs
 * with cancellation disabled (sg_sleep_enter), and pthread_cancel wakes
 * it through an eventfd the sleeper watches; the sleeper acts on the
 * cancel once it is out of rsockets and has left the sleep (its caller,
 * after sg_sleep_leave), as a blocked recv is cancelled in the kernel.  The
 * eventfd is made per sleep: a long-lived one could be closed under us by the
 * program (close_range, closefrom).
 */
#include "glue.h"
#include "glue_int.h"

#include <pthread.h>
#include <sys/eventfd.h>
#include <sys/syscall.h>

struct sleeper {
	pthread_t th;
	int efd;
	const struct pollfd *fds; /* what it sleeps on (sg_sleep_kick) */
	nfds_t n;
	struct sleeper *next;
};

/* Threads asleep now. */
static pthread_mutex_t sleepers_mu = PTHREAD_MUTEX_INITIALIZER;
static struct sleeper *sleepers;
static __thread struct sleeper me = {.efd = -1};

static void unregister(void *arg)
{
	struct sleeper **pp;

	(void)arg;
	pthread_mutex_lock(&sleepers_mu);
	for (pp = &sleepers; *pp; pp = &(*pp)->next)
		if (*pp == &me) {
			*pp = me.next;
			break;
		}
	pthread_mutex_unlock(&sleepers_mu);
	if (me.efd >= 0)
		REAL(close)(me.efd);
	me.efd = -1;
}

int sg_sleep_enter(int *cancel_state, const struct pollfd *fds, nfds_t n)
{
	me.th = pthread_self();
	me.fds = fds;
	me.n = n;
	/* The system call itself, as its close is (REAL): a sanitizer that
	 * tracks fds sees neither, not one without the other. */
	me.efd =
	    (int)REAL(syscall)(SYS_eventfd2, 0, EFD_CLOEXEC | EFD_NONBLOCK);
	pthread_mutex_lock(&sleepers_mu);
	me.next = sleepers;
	sleepers = &me;
	pthread_mutex_unlock(&sleepers_mu);
	/* A cancel that came before we were listed: glibc keeps it, and acts
	 * on it here under the thread's own state (we are not in rsockets). */
	pthread_cleanup_push(unregister, NULL);
	pthread_testcancel();
	pthread_cleanup_pop(0);
	pthread_setcancelstate(PTHREAD_CANCEL_DISABLE, cancel_state);
	return me.efd;
}

bool sg_sleep_leave(int cancel_state)
{
	uint64_t v;
	bool woken =
	    me.efd >= 0 && REAL(read)(me.efd, &v, sizeof(v)) == sizeof(v);

	unregister(NULL);
	pthread_setcancelstate(cancel_state, NULL);
	return woken;
}

/* A fork child has only the thread that forked (sg_fork_child). */
void sg_sleep_fork_child(void)
{
	pthread_mutex_init(&sleepers_mu, NULL);
	sleepers = NULL;
}

/* pthread_cancel(th) has been called: wake th if it sleeps in rsockets. */
void sg_sleep_cancelled(pthread_t th)
{
	struct sleeper *s;

	pthread_mutex_lock(&sleepers_mu);
	for (s = sleepers; s; s = s->next)
		if (pthread_equal(s->th, th) && s->efd >= 0)
			(void)eventfd_write(s->efd, 1);
	pthread_mutex_unlock(&sleepers_mu);
}

/* The program shut rs down: wake the threads asleep on it, to look again
 * (the sleep says woken, and goes on if nothing it waits for is there). */
void sg_sleep_kick(int rs)
{
	struct sleeper *s;

	pthread_mutex_lock(&sleepers_mu);
	for (s = sleepers; s; s = s->next)
		for (nfds_t i = 0; i < s->n; i++)
			if (s->fds[i].fd == rs && s->efd >= 0) {
				(void)eventfd_write(s->efd, 1);
				break;
			}
	pthread_mutex_unlock(&sleepers_mu);
}
