/* SPDX-License-Identifier: MIT */
/*
 * pthread_cancel: a thread asleep in an RDMA wait sleeps with cancellation
 * disabled (rpoll's poll gate would stay held), so the cancel also wakes
 * it, and it acts on the cancel once it is out of rsockets
 * (rsocket_glue/sleep.c).
 */
#include "shim.h"
#include "glue.h"

int shim_cancel_asked;

SHIM_EXPORT int pthread_cancel(pthread_t th)
{
	int r;

	shim_ensure_init();
	/* before the request: see shim_testcancel (syms.h) */
	__atomic_store_n(&shim_cancel_asked, 1, __ATOMIC_SEQ_CST);
	r = REAL(pthread_cancel)(th);
	if (r)
		return r;
	sg_sleep_cancelled(th);
	return 0;
}
