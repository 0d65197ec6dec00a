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

/* An epoll fd's sock is being freed. */
void shim_epoll_free(struct ep_set *set);

/*
 * poll/select on an epoll fd whose registry has RDMA (or nested) fds: the
 * kernel answers for its kernel side; shim_epoll_peek for the rest, and a
 * sleeper adds what shim_epoll_watch lists to its pollfds.
 */
struct watch {
	struct pollfd *p;
	struct shim_sock **held; /* referenced socks of rsocket entries */
	struct ep_set **wakes;	 /* the set whose wake eventfd this is */
	int n, cap;
};
int shim_watch_add(struct watch *w, struct pollfd pfd, struct shim_sock *s,
		   struct ep_set *wake);
/* Drops the references, drains wake eventfds that fired, frees. */
void shim_watch_done(struct watch *w);
int shim_watch_wait(struct watch *w, int timeout_ms, const sigset_t *mask);
int shim_wait_masked(struct pollfd *p, nfds_t n, int timeout_ms,
		     const sigset_t *mask);
bool shim_epoll_emulating(struct ep_set *set);
bool shim_epoll_peek(struct ep_set *set);
int shim_epoll_watch(struct ep_set *set, struct watch *w);

#endif
