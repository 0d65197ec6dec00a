/* SPDX-License-Identifier: MIT */
/* Start-up (init.c): run once, from the constructor or from whichever entry
 * point is reached first. */
#ifndef SHIM_INIT_H
#define SHIM_INIT_H

#include "compiler.h"

/* 0 = not started, 1 = running, 2 = done.  Read on the slow paths only: the
 * fd fast path folds the init check into the fd table's bounds check (the
 * table has capacity 0 until init has run). */
extern int shim_init_state;
void shim_init_slow(void);

static inline void shim_ensure_init(void)
{
	if (unlikely(__atomic_load_n(&shim_init_state, __ATOMIC_ACQUIRE) != 2))
		shim_init_slow();
}

#endif
