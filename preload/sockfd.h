/* SPDX-License-Identifier: MIT */
/*
 * Which sock an fd refers to, as the program's calls change it (sockfd.c):
 * the writers of the fd table.  Part of the socket object: the families
 * (socket, accept, dup, fcntl, close, epoll) use it, and it uses none of
 * them; the epoll emulation hears of a file's last fd through the sock's
 * events (shim_sock_ev).
 */
#ifndef SHIM_SOCKFD_H
#define SHIM_SOCKFD_H

#include "sock.h"

/* Put s on fd (NULL clears), releasing a stale entry. */
void shim_fd_install(int fd, struct shim_sock *s);
/* The same, for a sock that takes over the same file (a fork's handover):
 * no close of the old one (struct shim_kind_ops, last_fd). */
void shim_fd_replace(int fd, struct shim_sock *s);
/* fd, sock s, is about to be closed (close, fclose): wait out a fork's
 * handover of its connection (after it, fd names whatever the handover
 * left there), then forget fd before the real close lets the number be
 * reused. */
static inline void shim_fd_forget(int fd, struct shim_sock *s)
{
	if (unlikely(shim_kind_is(s, SHIM_KF_CONN)) &&
	    shim_sock_tryget(fd, s, SHIM_KINDS_WITH(SHIM_KF_CONN))) {
		(void)shim_sock_usable(s);
		shim_sock_put(s);
	}
	shim_fd_install(fd, NULL);
}
/* newfd now refers to what oldfd refers to (the dup family, F_DUPFD). */
void shim_fd_share(int oldfd, int newfd);

#endif
