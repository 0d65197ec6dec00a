/* SPDX-License-Identifier: MIT */
/* connect.c: connect and its connect thread. */
#ifndef SHIM_CONNECT_H
#define SHIM_CONNECT_H

#include "sock.h"

/* In a fork child, for each inherited socket s still
 * connecting: a connect under way in the parent is the parent's (s
 * answers from the kernel here). */
void shim_connect_fork_child(struct shim_sock *s);

#endif
