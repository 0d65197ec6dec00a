/* SPDX-License-Identifier: MIT */
/*
 * A sleep on socket objects of every kind at once (watch.c): the pollfds
 * to sleep on -- kernel fds, rsockets, eventfds -- each holding a reference
 * to its sock for the length of the sleep, and what to do at its end.
 * poll/select, epoll_wait and the blocking calls of a connecting socket
 * build one and sleep in rsockets (rpoll) on it.  Part of the socket
 * object: it uses the sock, the glue and the base only.
 */
#ifndef SHIM_WATCH_H
#define SHIM_WATCH_H

#include "sock.h"

#include <poll.h>
#include <signal.h>

/* An entry's end (shim_watch_done), before its reference goes: revents is
 * what the sleep saw on it (0: nothing, or the sleep timed out). */
typedef void shim_watch_end_fn(void *arg, short revents);

struct watch_end {
	shim_watch_end_fn *fn;
	void *arg;
};

struct watch {
	struct pollfd *p;
	struct shim_sock **held; /* referenced socks, or NULL */
	struct watch_end *end;
	int n, cap;
	/* Some ET EPOLLIN can fire on new data that no watched fd shows
	 * (its fd stays readable): shim_watch_wait bounds the sleep so the
	 * caller looks again, backing off. */
	bool recheck;
	/* Something watched changed while the watch was built (a connect
	 * settled): the sleep is a look (timeout 0). */
	bool now;
};

/* Watch pfd; s (or NULL) is referenced until shim_watch_done, which first
 * calls end (or NULL) with arg.  0 or -ENOMEM. */
int shim_watch_add(struct watch *w, struct pollfd pfd, struct shim_sock *s,
		   shim_watch_end_fn *end, void *arg);
/* Returns like poll(); 0 also when a recheck is due (the caller looks
 * again and, time left, sleeps again).  mask: the caller's signal mask,
 * applied atomically with the sleep, or NULL. */
int shim_watch_wait(struct watch *w, int timeout_ms, const sigset_t *mask);
/* The ends, the references given back, the watch emptied. */
void shim_watch_done(struct watch *w);
/* An event was delivered: a recheck backs off from the start again. */
void shim_watch_delivered(void);
/* sg_wait with the caller's signal mask, applied atomically with the
 * sleep (see sg_wait_masked). */
int shim_wait_masked(struct pollfd *p, nfds_t n, int timeout_ms,
		     const sigset_t *mask);

#endif
