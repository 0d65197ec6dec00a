/* SPDX-License-Identifier: MIT */
/* Inside rsocket_glue only. */
#ifndef SHIM_GLUE_INT_H
#define SHIM_GLUE_INT_H

#include "base.h"
#include "log.h"

/*
 * Call into librdmacm: mark this thread as inside the library (so what it
 * calls reaches libc untouched) and turn its -1/errno into -errno.
 */
#define LIB_CALL(expr)                                                         \
	({                                                                     \
		long r_;                                                       \
		shim_enter_lib();                                              \
		r_ = (long)(expr);                                             \
		if (r_ < 0)                                                    \
			r_ = -errno;                                           \
		shim_leave_lib();                                              \
		r_;                                                            \
	})

/*
 * sleep.c: the sleep in rsockets runs with cancellation disabled (a thread
 * cancelled inside rpoll would leave its poll gate held); enter returns an
 * eventfd that pthread_cancel writes, to add to the sleep's fds.  leave
 * restores the state and, if a cancel came, acts on it (a cancellation
 * point: hold nothing of ours across it).
 */
int sg_sleep_enter(int *cancel_state);
bool sg_sleep_leave(int cancel_state); /* true: woken by a cancel */
void sg_sleep_fork_child(void);

#endif
