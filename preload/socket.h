/* SPDX-License-Identifier: MIT */
/* socket.c: socket, accept, dup, close and the listener's RDMA door. */
#ifndef SHIM_SOCKET_H
#define SHIM_SOCKET_H

#include "sock.h"
#include "sockfd.h"

/* RDMA listeners alive (socket.c): rdma-core 44 copes with 3 at most. */
extern int shim_live_listeners;

void shim_listen_door_slow(struct shim_sock *s);
/* A process is about to wait for connections on listener s: open its RDMA
 * door here if it has none yet. */
static inline void shim_listen_door(struct shim_sock *s)
{
	if (s && shim_kind_is(s, SHIM_KF_DOOR) &&
	    __atomic_load_n(&s->door, __ATOMIC_ACQUIRE) == SHIM_DOOR_NONE)
		shim_listen_door_slow(s);
}
/* The door's accept queue fd, or -1 (no door: poll ignores the entry). */
int shim_listen_qfd(struct shim_sock *s);
/* Close the door for good (shutdown of the listener, fork child). */
void shim_listen_door_shut(struct shim_sock *s);
/* connect() to port on this host: open the door of our own listener on
 * that port first, if it has none yet (a program connecting to itself). */
void shim_listen_door_port(uint16_t port);

/* Around the real call of an exported close of fds the shim forgot inside
 * shim_sig_edge_enter (close, close_range, closefrom, fclose): the
 * handlers held while it forgot them (connect.c, conn_last_fd) run after
 * the real call, as the kernel runs a handler after its system call, so
 * that one which jumps away does not skip the close.  The call is no
 * cancellation point while some wait (a cancel there would lose them);
 * with none held the edge ends in shim_forgot_begin.  shim_forgot_end
 * keeps errno. */
int shim_forgot_begin(void);
void shim_forgot_end(int cancel_state);

#endif
