/* SPDX-License-Identifier: MIT */
/*
 * What the shim knows about an fd it cares about.  A kernel fd it does not
 * care about has no shim_sock at all (fdtable entry NULL: the fast path).
 */
#ifndef SHIM_SOCK_H
#define SHIM_SOCK_H

#include "fdtable.h"

enum shim_kind {
	SHIM_SK_INTERNAL = 1, /* the shim's own fd (log): watched, not owned */
	SHIM_SK_TCP,	      /* eligible TCP socket, not yet connected/listening */
	SHIM_SK_RDMA,	      /* connection carried by an rsocket */
	SHIM_SK_LISTEN,	      /* kernel listener plus an rsocket listener */
};

struct shim_sock {
	int kind;
};

/* The one object every internal fd maps to. */
extern struct shim_sock shim_internal_sock;

#endif
