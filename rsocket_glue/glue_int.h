/* SPDX-License-Identifier: MIT */
/* Inside rsocket_glue only. */
#ifndef SHIM_GLUE_INT_H
#define SHIM_GLUE_INT_H

#include "shim.h"

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

#endif
