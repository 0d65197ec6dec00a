/* SPDX-License-Identifier: MIT */
/* connect.c: connect and its connect thread. */
#ifndef SHIM_CONNECT_H
#define SHIM_CONNECT_H

#include "sock.h"

/* A call found s SHIM_SK_FAILED: the connect's error (cleared), or 0
 * when another call took it; s is of its next kind after it. */
int shim_sock_take_failure(struct shim_sock *s);
/* In a fork child, for each inherited socket s still
 * connecting: a connect under way in the parent is the parent's (s
 * answers from the kernel here). */
void shim_connect_fork_child(struct shim_sock *s);

#endif
