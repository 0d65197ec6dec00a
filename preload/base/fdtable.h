/* SPDX-License-Identifier: MIT */
/*
 * fd -> shim state.  A kernel fd the shim does not care about maps to NULL,
 * and finding that out is one bounds check and one load: the fast path of
 * every wrapper.  The table is a flat array sized once from RLIMIT_NOFILE's
 * hard limit (anonymous, NORESERVE: untouched pages cost nothing), so it is
 * never reallocated and readers take no lock.  fds beyond it (a limit raised
 * later, or an absurd hard limit) live in a locked hash: correct, just slower.
 */
#ifndef SHIM_FDTABLE_H
#define SHIM_FDTABLE_H

#include "compiler.h"
#include "init.h"

#include <stdbool.h>

struct shim_sock;

extern struct shim_sock **shim_fdtab SHIM_HIDDEN;
extern unsigned int shim_fdtab_cap SHIM_HIDDEN; /* 0 until init: slow path */

struct shim_sock *shim_fd_get_slow(int fd);

static inline struct shim_sock *shim_fd_get(int fd)
{
	if (likely((unsigned int)fd < shim_fdtab_cap))
		return __atomic_load_n(&shim_fdtab[fd], __ATOMIC_ACQUIRE);
	return shim_fd_get_slow(fd);
}

/* Store s for fd and return what was there (NULL clears). */
struct shim_sock *shim_fd_xchg(int fd, struct shim_sock *s);

/* Table setup; cap_limit bounds the flat part (tests use small values). */
int shim_fdtable_init(unsigned int cap_limit);
void shim_fdtable_fini(void);

/* Highest fd + 1 that may hold state (for close_range/closefrom sweeps). */
unsigned int shim_fdtable_span(void);
/* In a fork child: the overflow table's lock made anew. */
void shim_fdtable_fork_child(void);

#endif
