/* SPDX-License-Identifier: MIT */
/*
 * The end of a non-blocking connect's rendezvous, as sleepers see it.  The
 * rendezvous runs on connect.c's thread; poll, epoll and the blocking calls
 * of a connecting socket watch s->settle_fd, an eventfd made for the first
 * of them and written when the rendezvous ends.  The kind changes under
 * settle_mu, which the watchers also take, so none misses it.  Part of the
 * socket object: the families above (connect, io, poll, epoll) use it, and
 * it uses none of them.
 */
#include "settle.h"
#include "shim.h"

#include <pthread.h>
#include <sys/eventfd.h>
#include <sys/syscall.h>

static pthread_mutex_t settle_mu = PTHREAD_MUTEX_INITIALIZER;

/* Under settle_mu: s's rendezvous ended (its kind is set). */
static void settle_wake_locked(struct shim_sock *s)
{
	if (s->settle_fd < 0)
		return;
	(void)eventfd_write(s->settle_fd, 1);
	if (!s->settle_users) {
		REAL(close)(s->settle_fd);
		s->settle_fd = -1;
	}
}

void shim_settle_begin(struct shim_sock *s)
{
	pthread_mutex_lock(&settle_mu);
	/* an earlier connect's eventfd, still watched: unread again */
	if (s->settle_fd >= 0)
		(void)eventfd_read(s->settle_fd, &(eventfd_t){0});
	/* seq_cst: pairs with an epoll_ctl ADD's (epoll.c, ctl_slow) */
	__atomic_store_n(&s->kind, SHIM_SK_CONNECTING, __ATOMIC_SEQ_CST);
	pthread_mutex_unlock(&settle_mu);
}

void shim_settle_end(struct shim_sock *s, int kind)
{
	pthread_mutex_lock(&settle_mu);
	/* seq_cst: pairs with an epoll_ctl ADD's (epoll.c, ctl_slow) */
	__atomic_store_n(&s->kind, kind, __ATOMIC_SEQ_CST);
	settle_wake_locked(s);
	pthread_mutex_unlock(&settle_mu);
}

void shim_settle_end_rdma(struct shim_sock *s, int rs)
{
	pthread_mutex_lock(&settle_mu);
	shim_sock_attach(s, SHIM_SK_RDMA, rs);
	settle_wake_locked(s);
	pthread_mutex_unlock(&settle_mu);
}

/* A fork child: the lock may have been held by a thread not here. */
static void settle_fork_child(void)
{
	pthread_mutex_init(&settle_mu, NULL);
}

SHIM_STARTUP(SETTLE, .child = settle_fork_child);

/*
 * A fork child: s's connect was the parent's, and so are its eventfd's
 * watchers (threads not here) and the count of them; a child's own watch
 * would wait on an fd no one writes.  The copy of the eventfd is closed
 * (the parent's stays open).  No settle_mu: this runs from the FORK step,
 * the last child step, after SETTLE's reset above (startup.h), in the
 * child's only thread, so no one can hold the lock or see s meanwhile.
 */
void shim_settle_forget(struct shim_sock *s)
{
	if (s->settle_fd >= 0)
		REAL(close)(s->settle_fd);
	s->settle_fd = -1;
	s->settle_users = 0;
}

int shim_sock_take_failure(struct shim_sock *s)
{
	int k = SHIM_SK_FAILED;

	if (!__atomic_compare_exchange_n(&s->kind, &k, s->fail_kind, false,
					 __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE))
		return 0;
	return __atomic_exchange_n(&s->so_error, 0, __ATOMIC_RELAXED);
}

/* A watch of s's end is over (shim_watch_done). */
static void settle_end(void *s, short revents)
{
	(void)revents;
	shim_settle_unwatch(s);
}

int shim_settle_watch(struct watch *w, struct shim_sock *s)
{
	int err = 0;

	pthread_mutex_lock(&settle_mu);
	if (!shim_sock_connecting(s)) {
		w->now = true; /* ended meanwhile: look again at once */
		goto out;
	}
	if (s->settle_fd < 0)
		s->settle_fd = (int)REAL(syscall)(SYS_eventfd2, 0,
						  EFD_CLOEXEC | EFD_NONBLOCK);
	if (s->settle_fd < 0) {
		w->recheck = true; /* no fd to spare: look again, backing off */
		goto out;
	}
	err = shim_watch_add(
	    w, (struct pollfd){.fd = s->settle_fd, .events = POLLIN}, s,
	    settle_end, s);
	if (!err)
		s->settle_users++;
out:
	pthread_mutex_unlock(&settle_mu);
	return err;
}

void shim_settle_unwatch(struct shim_sock *s)
{
	int cs;

	/* close is a cancellation point: never acted on with the lock held */
	pthread_setcancelstate(PTHREAD_CANCEL_DISABLE, &cs);
	pthread_mutex_lock(&settle_mu);
	if (!--s->settle_users && !shim_sock_connecting(s) &&
	    s->settle_fd >= 0) {
		REAL(close)(s->settle_fd);
		s->settle_fd = -1;
	}
	pthread_mutex_unlock(&settle_mu);
	pthread_setcancelstate(cs, NULL);
}

struct settle_hold {
	struct watch *w;
	struct shim_sock *s;
};

static void settle_cancelled(void *arg)
{
	struct settle_hold *h = arg;

	shim_watch_done(h->w);
	shim_sock_put(h->s);
}

/* One sleep on s's end (at most ms): > 0 woken, 0 timed out, -errno. */
static int settle_sleep(struct shim_sock *s, int ms)
{
	struct watch w = {0};
	struct settle_hold h = {.w = &w, .s = s};
	int r, cs;

	pthread_setcancelstate(PTHREAD_CANCEL_DISABLE, &cs);
	r = shim_settle_watch(&w, s);
	pthread_setcancelstate(cs, NULL);
	if (!r) {
		pthread_cleanup_push(settle_cancelled, &h);
		r = shim_watch_wait(&w, ms, NULL);
		pthread_cleanup_pop(0);
	}
	shim_watch_done(&w);
	return r;
}

int shim_settle_wait(struct shim_sock *s, int timeout_ms)
{
	int64_t deadline = timeout_ms >= 0 ? shim_now_ms() + timeout_ms : 0;

	while (shim_sock_connecting(s)) {
		int r, left = -1;

		if (timeout_ms >= 0) {
			left = (int)(deadline - shim_now_ms());
			if (left <= 0)
				return -EAGAIN;
		}
		r = settle_sleep(s, left);
		if (r < 0)
			return r;
	}
	return 0;
}

ssize_t shim_connecting_io(struct shim_sock *s, bool dontwait,
			   const struct timeval *tmo)
{
	int ms = tmo ? shim_tv_ms(tmo) : -1, r;

	if (dontwait || s->nonblock)
		return -EAGAIN;
	do
		r = shim_settle_wait(s, ms);
	while (shim_wait_restarts(r, ms));
	return r;
}
