/* SPDX-License-Identifier: MIT */
/* poll, ppoll, select, pselect and their fortify twins. */
#include "shim.h"
#include "sock.h"

SHIM_EXPORT int poll(struct pollfd *fds, nfds_t nfds, int timeout)
{
	shim_ensure_init();
	return REAL(poll)(fds, nfds, timeout);
}

SHIM_EXPORT int __poll_chk(struct pollfd *fds, nfds_t nfds, int timeout,
			   size_t fdslen)
{
	shim_ensure_init();
	return REAL(__poll_chk)(fds, nfds, timeout, fdslen);
}

SHIM_EXPORT int ppoll(struct pollfd *fds, nfds_t nfds,
		      const struct timespec *tmo, const sigset_t *sigmask)
{
	shim_ensure_init();
	return REAL(ppoll)(fds, nfds, tmo, sigmask);
}

SHIM_EXPORT int __ppoll_chk(struct pollfd *fds, nfds_t nfds,
			    const struct timespec *tmo, const sigset_t *sigmask,
			    size_t fdslen)
{
	shim_ensure_init();
	return REAL(__ppoll_chk)(fds, nfds, tmo, sigmask, fdslen);
}

SHIM_EXPORT int select(int nfds, fd_set *__restrict r, fd_set *__restrict w,
		       fd_set *__restrict e, struct timeval *__restrict tmo)
{
	shim_ensure_init();
	return REAL(select)(nfds, r, w, e, tmo);
}

SHIM_EXPORT int pselect(int nfds, fd_set *__restrict r, fd_set *__restrict w,
			fd_set *__restrict e,
			const struct timespec *__restrict tmo,
			const sigset_t *__restrict sigmask)
{
	shim_ensure_init();
	return REAL(pselect)(nfds, r, w, e, tmo, sigmask);
}
