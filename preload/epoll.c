/* SPDX-License-Identifier: MIT */
/* The epoll family. */
#include "shim.h"
#include "sock.h"

SHIM_EXPORT int epoll_create(int size)
{
	shim_ensure_init();
	return REAL(epoll_create)(size);
}

SHIM_EXPORT int epoll_create1(int flags)
{
	shim_ensure_init();
	return REAL(epoll_create1)(flags);
}

SHIM_EXPORT int epoll_ctl(int epfd, int op, int fd, struct epoll_event *ev)
{
	(void)shim_fd_get(fd);
	return REAL(epoll_ctl)(epfd, op, fd, ev);
}

SHIM_EXPORT int epoll_wait(int epfd, struct epoll_event *evs, int max,
			   int timeout)
{
	shim_ensure_init();
	return REAL(epoll_wait)(epfd, evs, max, timeout);
}

SHIM_EXPORT int epoll_pwait(int epfd, struct epoll_event *evs, int max,
			    int timeout, const sigset_t *sigmask)
{
	shim_ensure_init();
	return REAL(epoll_pwait)(epfd, evs, max, timeout, sigmask);
}

SHIM_EXPORT int epoll_pwait2(int epfd, struct epoll_event *evs, int max,
			     const struct timespec *tmo,
			     const sigset_t *sigmask)
{
	shim_ensure_init();
	if (!REAL(epoll_pwait2)) {
		errno = ENOSYS;
		return -1;
	}
	return REAL(epoll_pwait2)(epfd, evs, max, tmo, sigmask);
}
