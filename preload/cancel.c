/* SPDX-License-Identifier: MIT */
/*
 * pthread_cancel of a thread asleep in an RDMA wait.
 *
 * The shim sleeps in rsockets' rpoll, whose poll gate (a count of the
 * threads inside it) is never given back when a thread is cancelled there:
 * every later rpoll in the process then spins.  So the sleep itself runs
 * with cancellation disabled (shim_sleep_enter), and pthread_cancel wakes
 * it through an eventfd the sleeper watches; the sleeper acts on the
 * cancel once it is out of rsockets (shim_sleep_leave), as a blocked recv
 * is cancelled in the kernel.
 */
#include "shim.h"

#include <pthread.h>
#include <stdlib.h>
#include <sys/eventfd.h>

struct sleeper {
	pthread_t th;
	int efd;
	struct sleeper *next;
};

/* Threads asleep now, and cancels asked of threads that were not. */
static pthread_mutex_t sleepers_mu = PTHREAD_MUTEX_INITIALIZER;
static struct sleeper *sleepers;
#define MAX_PENDING 16
static pthread_t pending[MAX_PENDING];
static int npending;

static __thread struct sleeper me = { .efd = -1 };
static pthread_key_t efd_key;
static pthread_once_t efd_once = PTHREAD_ONCE_INIT;

static void efd_close(void *p)
{
	REAL(close)((int)(intptr_t)p - 1);
}

static void efd_key_init(void)
{
	(void)pthread_key_create(&efd_key, efd_close);
}

/* A cancel asked of self while it was not asleep (taken: once). */
static bool take_pending(pthread_t self)
{
	for (int i = 0; i < npending; i++)
		if (pthread_equal(pending[i], self)) {
			pending[i] = pending[--npending];
			return true;
		}
	return false;
}

int shim_sleep_enter(int *cancel_state)
{
	pthread_t self = pthread_self();
	bool was_asked;

	if (me.efd < 0) {
		me.efd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
		pthread_once(&efd_once, efd_key_init);
		if (me.efd >= 0)
			(void)pthread_setspecific(efd_key, (void *)(intptr_t)(me.efd + 1));
	}
	me.th = self;
	pthread_mutex_lock(&sleepers_mu);
	was_asked = take_pending(self);
	me.next = sleepers;
	sleepers = &me;
	pthread_mutex_unlock(&sleepers_mu);
	if (was_asked)
		shim_sleep_leave(PTHREAD_CANCEL_ENABLE, true); /* may not return */
	pthread_setcancelstate(PTHREAD_CANCEL_DISABLE, cancel_state);
	return me.efd;
}

void shim_sleep_leave(int cancel_state, bool woken)
{
	struct sleeper **pp;
	uint64_t v;

	pthread_mutex_lock(&sleepers_mu);
	for (pp = &sleepers; *pp; pp = &(*pp)->next)
		if (*pp == &me) {
			*pp = me.next;
			break;
		}
	pthread_mutex_unlock(&sleepers_mu);
	if (me.efd >= 0 && REAL(read)(me.efd, &v, sizeof(v)) == sizeof(v))
		woken = true;
	pthread_setcancelstate(cancel_state, NULL);
	if (woken)
		pthread_testcancel();
}

/* A fork child has only the thread that forked. */
void shim_sleep_fork_child(void)
{
	pthread_mutex_init(&sleepers_mu, NULL);
	sleepers = NULL;
	npending = 0;
}

SHIM_EXPORT int pthread_cancel(pthread_t th)
{
	struct sleeper *s;
	bool asleep = false;
	int r;

	shim_ensure_init();
	r = REAL(pthread_cancel)(th);
	if (r)
		return r;
	pthread_mutex_lock(&sleepers_mu);
	for (s = sleepers; s; s = s->next)
		if (pthread_equal(s->th, th)) {
			(void)eventfd_write(s->efd, 1);
			asleep = true;
		}
	if (!asleep && npending < MAX_PENDING && !take_pending(th))
		pending[npending++] = th;
	pthread_mutex_unlock(&sleepers_mu);
	return 0;
}
