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
/* An epoll fd's sock is being freed. */
void shim_epoll_free(struct ep_set *set);

#endif
