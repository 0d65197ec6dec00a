/* SPDX-License-Identifier: MIT */
/* Inside rsocket_glue only. */
#ifndef SHIM_GLUE_INT_H
#define SHIM_GLUE_INT_H

#include "shim.h"

#include <time.h>

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

/* now + ms on clock clk: a deadline for the pthread timed waits. */
static inline struct timespec sg_deadline(clockid_t clk, long ms)
{
	struct timespec t;

	clock_gettime(clk, &t);
	t.tv_sec += ms / 1000;
	t.tv_nsec += (ms % 1000) * 1000000L;
	if (t.tv_nsec >= 1000000000L) {
		t.tv_sec++;
		t.tv_nsec -= 1000000000L;
	}
	return t;
}

#endif
