/* SPDX-License-Identifier: MIT */
/* What the rest of the preload layer tells the epoll emulation. */
#ifndef SHIM_EPOLL_INT_H
#define SHIM_EPOLL_INT_H

#include "sock.h"

#include <poll.h>
#include <signal.h>

struct ep_set;

/* s became RDMA (connect): move its kernel registrations into ours. */
void shim_epoll_sock_changed(struct shim_sock *s);
void shim_epoll_fell_back(struct shim_sock *s);
/* Listener s opened its RDMA door: its registrations watch the door's
 * accept queue too. */
void shim_epoll_door_opened(struct shim_sock *s);
/* The last fd of s was closed: its registrations go, as in the kernel. */
void shim_epoll_forget(struct shim_sock *s);
/*
 * The program did I/O on s (its generations moved).  A sleeping epoll_wait
 * that stopped watching s (ET bits already reported) must look again: the
 * kernel would wake it on the next edge.  Cheap unless someone is parked.
 */
void shim_epoll_kick_parked(struct shim_sock *s);
static inline void shim_epoll_io(struct shim_sock *s)
{
	if (unlikely(__atomic_load_n(&s->ep_parked, __ATOMIC_SEQ_CST)))
		shim_epoll_kick_parked(s);
}

/*
 * Bytes that ever arrived on RDMA sock s (io.c): 0 exact, 1 a lower bound,
 * -errno unknown.  Edge-triggered EPOLLIN fires again when it grows.
 */
int shim_rdma_arrived(struct shim_sock *s, short rev, uint64_t *out);

/* fd of epoll sock s is being closed, and s lives on in another fd. */
void shim_epoll_fd_closing(struct shim_sock *s, int fd);

/*
 * poll/select on an epoll fd whose registry has RDMA (or nested) fds: the
 * kernel answers for its kernel side; shim_epoll_peek for the rest, and a
 * sleeper adds what shim_epoll_watch lists to its pollfds.
 */
struct watch {
	struct pollfd *p;
	struct shim_sock **held; /* referenced socks of rsocket entries */
	struct ep_set **wakes;	 /* the set whose wake eventfd this is */
	bool *settle;		 /* a connecting sock's settle eventfd */
	int n, cap;
	/* Some ET EPOLLIN can fire on new data that no watched fd shows
	 * (its fd stays readable): shim_watch_wait bounds the sleep so the
	 * caller looks again, backing off. */
	bool recheck;
	/* Something watched changed while the watch was built (a connect
	 * settled): the sleep is a look (timeout 0). */
	bool now;
};
int shim_watch_add(struct watch *w, struct pollfd pfd, struct shim_sock *s,
		   struct ep_set *wake);
/* Drops the references, drains wake eventfds that fired, frees. */
void shim_watch_done(struct watch *w);
/* (connect.c) Watch connecting s's end: 0 or -errno (w->now set if it
 * ended already); shim_watch_done lets go of it. */
int shim_settle_watch(struct watch *w, struct shim_sock *s);
void shim_settle_unwatch(struct shim_sock *s);
/* Sleep until connecting s is settled: 0, -EINTR, or -EAGAIN once
 * timeout_ms (>= 0) ran out.  Cancelled, gives back the caller's
 * reference to s. */
int shim_settle_wait(struct shim_sock *s, int timeout_ms);
/* A non-blocking data call on connecting s: -EAGAIN; a blocking one waits
 * for the end of the rendezvous (0: make the call again). */
ssize_t shim_connecting_io(struct shim_sock *s, bool dontwait,
			   const struct timeval *tmo);
/* Returns like poll(); 0 also when a recheck is due (the caller looks
 * again and, time left, sleeps again). */
int shim_watch_wait(struct watch *w, int timeout_ms, const sigset_t *mask);
int shim_wait_masked(struct pollfd *p, nfds_t n, int timeout_ms,
		     const sigset_t *mask);
bool shim_epoll_emulating(struct ep_set *set);
bool shim_epoll_peek(struct ep_set *set);
int shim_epoll_watch(struct ep_set *set, struct watch *w);

#endif
