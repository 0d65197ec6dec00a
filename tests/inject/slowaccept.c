/* SPDX-License-Identifier: MIT */
/*
 * slowaccept.so: widens a race window for a test, preloaded after the
 * shim.  rsockets accepts a connection on its listen service thread:
 * rdma_accept sends the reply and waits for the connection's ESTABLISHED
 * (the client's connect has returned by then), and only after it returns
 * is the rsocket put on the listener's accept queue.  Here rdma_accept
 * returns ERDMA_INJECT_ACCEPT_MS (default 150) late, so a connection the
 * client holds as connected is, for that long, on nobody's queue: what a
 * listener closed at that moment must still end (tests/rdma/52-kexact.sh,
 * lclose).  The shim's own rdma_accept reaches this one through its
 * dlsym(RTLD_NEXT); librdmacm's call reaches the shim's.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <stdlib.h>
#include <time.h>

typedef int accept_fn(void *id, void *param);

int rdma_accept(void *id, void *param)
{
	static accept_fn *next;
	const char *e = getenv("ERDMA_INJECT_ACCEPT_MS");
	long ms = e ? atol(e) : 150;
	int r, err;

	if (!next)
		next = (accept_fn *)dlsym(RTLD_NEXT, "rdma_accept");
	if (!next) {
		errno = ENOSYS;
		return -1;
	}
	r = next(id, param);
	err = errno;
	nanosleep(&(struct timespec){ms / 1000, ms % 1000 * 1000000L}, NULL);
	errno = err;
	return r;
}
