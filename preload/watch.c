/* SPDX-License-Identifier: MIT */
/* A sleep on socket objects of every kind at once: see watch.h. */
#include "watch.h"
#include "glue.h"

#include <stdlib.h>

static int grow(struct watch *w)
{
	int cap = w->cap ? w->cap * 2 : 16;
	struct pollfd *p;
	struct shim_sock **h;
	struct watch_end *e;

	p = realloc(w->p, (size_t)cap * sizeof(*p));
	if (!p)
		return -ENOMEM;
	w->p = p;
	h = realloc(w->held, (size_t)cap * sizeof(*h));
	if (!h)
		return -ENOMEM;
	w->held = h;
	e = realloc(w->end, (size_t)cap * sizeof(*e));
	if (!e)
		return -ENOMEM;
	w->end = e;
	w->cap = cap;
	return 0;
}

int shim_watch_add(struct watch *w, struct pollfd pfd, struct shim_sock *s,
		   shim_watch_end_fn *end, void *arg)
{
	if (w->n == w->cap && grow(w))
		return -ENOMEM;
	if (s)
		shim_sock_get(s);
	w->p[w->n] = pfd;
	w->held[w->n] = s;
	w->end[w->n] = (struct watch_end){end, arg};
	w->n++;
	return 0;
}

int shim_wait_masked(struct pollfd *p, nfds_t n, int timeout_ms,
		     const sigset_t *mask)
{
	return sg_wait_masked(p, n, timeout_ms, mask);
}

/*
 * A sleeper that must look again (w->recheck) sleeps at most RECHECK_MIN_MS
 * at first, twice as long each time nothing came, up to RECHECK_MAX_MS;
 * anything that wakes it (or an event delivered, shim_watch_delivered)
 * starts over.  Only such a sleeper polls: an idle set without one sleeps
 * for good.
 */
#define RECHECK_MIN_MS 1
#define RECHECK_MAX_MS 50

static __thread int recheck_ms;

static int recheck_timeout(int timeout_ms)
{
	recheck_ms = recheck_ms ? recheck_ms * 2 : RECHECK_MIN_MS;
	if (recheck_ms > RECHECK_MAX_MS)
		recheck_ms = RECHECK_MAX_MS;
	return timeout_ms < 0 || timeout_ms > recheck_ms ? recheck_ms
							 : timeout_ms;
}

void shim_watch_delivered(void)
{
	recheck_ms = 0;
}

/* Sleep on everything w lists; on timeout or error nothing fired. */
int shim_watch_wait(struct watch *w, int timeout_ms, const sigset_t *mask)
{
	int r;

	if (w->now)
		timeout_ms = 0;
	else if (w->recheck && timeout_ms != 0)
		timeout_ms = recheck_timeout(timeout_ms);
	r = shim_wait_masked(w->p, (nfds_t)w->n, timeout_ms, mask);
	if (r <= 0)
		for (int i = 0; i < w->n; i++)
			w->p[i].revents = 0;
	else
		recheck_ms = 0;
	return r;
}

void shim_watch_done(struct watch *w)
{
	for (int i = 0; i < w->n; i++) {
		/* the end first: the put may be the last reference to what
		 * the end works on (an epoll set's wake eventfd) */
		if (w->end[i].fn)
			w->end[i].fn(w->end[i].arg, w->p[i].revents);
		if (w->held[i])
			shim_sock_put(w->held[i]);
	}
	free(w->p);
	free(w->held);
	free(w->end);
	*w = (struct watch){0};
}
