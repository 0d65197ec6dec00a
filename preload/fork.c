/* SPDX-License-Identifier: MIT */
/* fork and vfork. */
#include "shim.h"
#include "sock.h"

SHIM_EXPORT pid_t fork(void)
{
	shim_ensure_init();
	return REAL(fork)();
}

/*
 * A vfork child borrows the caller's stack, so a C wrapper around the real
 * vfork would return into a frame the child has already torn down.  POSIX
 * lets vfork behave as fork; doing so costs a page-table copy and keeps
 * every fork rule of the shim in one place.
 */
SHIM_EXPORT pid_t vfork(void)
{
	return fork();
}
