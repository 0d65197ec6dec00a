/* SPDX-License-Identifier: MIT */
/* What the rest of the preload layer tells the epoll emulation. */
#ifndef SHIM_EPOLL_INT_H
#define SHIM_EPOLL_INT_H

#include "sock.h"

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

#endif
