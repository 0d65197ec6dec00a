/* SPDX-License-Identifier: MIT */
/* What poll.c asks of the epoll emulation (an epoll fd polled). */
#ifndef SHIM_EPOLL_INT_H
#define SHIM_EPOLL_INT_H

#include "sock.h"
#include "watch.h"

#include <poll.h>
#include <signal.h>

struct ep_set;

/*
 * poll/select on an epoll fd whose registry has RDMA (or nested) fds: the
 * kernel answers for its kernel side; shim_epoll_peek for the rest, and a
 * sleeper adds what shim_epoll_watch lists to its watch.
 */
bool shim_epoll_emulating(struct ep_set *set);
bool shim_epoll_peek(struct ep_set *set);
int shim_epoll_watch(struct ep_set *set, struct watch *w);

#endif
