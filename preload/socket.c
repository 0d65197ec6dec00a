/* SPDX-License-Identifier: MIT */
/*
 * Socket lifecycle: creation, naming, close and dup.  Every wrapper starts
 * with the fd table lookup; a NULL entry is a kernel fd the shim leaves
 * alone, and the call goes straight to libc.
 */
#include "shim.h"
#include "log.h"
#include "sock.h"

SHIM_EXPORT int socket(int domain, int type, int protocol)
{
	shim_ensure_init();
	return REAL(socket)(domain, type, protocol);
}

SHIM_EXPORT int bind(int fd, __CONST_SOCKADDR_ARG addr, socklen_t len)
{
	(void)shim_fd_get(fd);
	return REAL(bind)(fd, addr, len);
}

SHIM_EXPORT int listen(int fd, int backlog)
{
	(void)shim_fd_get(fd);
	return REAL(listen)(fd, backlog);
}

SHIM_EXPORT int accept(int fd, __SOCKADDR_ARG addr, socklen_t *len)
{
	(void)shim_fd_get(fd);
	return REAL(accept)(fd, addr, len);
}

SHIM_EXPORT int accept4(int fd, __SOCKADDR_ARG addr, socklen_t *len, int flags)
{
	(void)shim_fd_get(fd);
	return REAL(accept4)(fd, addr, len, flags);
}

SHIM_EXPORT int shutdown(int fd, int how)
{
	(void)shim_fd_get(fd);
	return REAL(shutdown)(fd, how);
}

SHIM_EXPORT int getsockname(int fd, __SOCKADDR_ARG addr, socklen_t *len)
{
	(void)shim_fd_get(fd);
	return REAL(getsockname)(fd, addr, len);
}

SHIM_EXPORT int getpeername(int fd, __SOCKADDR_ARG addr, socklen_t *len)
{
	(void)shim_fd_get(fd);
	return REAL(getpeername)(fd, addr, len);
}

/*
 * Forget fd: the program closed it, or dup2 is about to replace it.  Must be
 * called before the number can be reused, i.e. before the real close.
 */
static void forget_fd(int fd)
{
	struct shim_sock *s = shim_fd_xchg(fd, NULL);

	if (s == &shim_internal_sock)
		shim_log_fd_changed(fd, true);
}

SHIM_EXPORT int close(int fd)
{
	if (likely(!shim_fd_get(fd)))
		return REAL(close)(fd);
	forget_fd(fd);
	return REAL(close)(fd);
}

static void forget_range(unsigned int first, unsigned int last)
{
	unsigned int span = shim_fdtable_span();

	if (last >= span)
		last = span ? span - 1 : 0;
	for (unsigned int fd = first; fd <= last && fd < span; fd++)
		if (shim_fd_get((int)fd))
			forget_fd((int)fd);
}

SHIM_EXPORT int close_range(unsigned int first, unsigned int last, int flags)
{
	shim_ensure_init();
	if (!REAL(close_range)) {
		errno = ENOSYS;
		return -1;
	}
	/* CLOSE_RANGE_CLOEXEC only marks the fds: nothing is closed yet. */
	if (!(flags & CLOSE_RANGE_CLOEXEC) && first <= last)
		forget_range(first, last);
	return REAL(close_range)(first, last, flags);
}

SHIM_EXPORT void closefrom(int lowfd)
{
	shim_ensure_init();
	if (lowfd < 0)
		lowfd = 0;
	forget_range((unsigned int)lowfd, ~0u);
	REAL(closefrom)(lowfd);
}

SHIM_EXPORT int dup(int fd)
{
	(void)shim_fd_get(fd);
	return REAL(dup)(fd);
}

/* After a successful dup2/dup3 onto newfd: newfd's old state is gone. */
static void replaced_fd(int newfd, struct shim_sock *was)
{
	if (was == &shim_internal_sock) {
		shim_log_fd_changed(newfd, false);
		if (newfd != 2)
			shim_fd_xchg(newfd, NULL);
	} else if (was) {
		shim_fd_xchg(newfd, NULL);
	}
}

SHIM_EXPORT int dup2(int oldfd, int newfd)
{
	struct shim_sock *n = shim_fd_get(newfd);
	int r;

	if (likely(!n && !shim_fd_get(oldfd)))
		return REAL(dup2)(oldfd, newfd);
	r = REAL(dup2)(oldfd, newfd);
	if (r >= 0 && oldfd != newfd)
		replaced_fd(newfd, n);
	return r;
}

SHIM_EXPORT int dup3(int oldfd, int newfd, int flags)
{
	struct shim_sock *n = shim_fd_get(newfd);
	int r;

	if (likely(!n && !shim_fd_get(oldfd)))
		return REAL(dup3)(oldfd, newfd, flags);
	r = REAL(dup3)(oldfd, newfd, flags);
	if (r >= 0)
		replaced_fd(newfd, n);
	return r;
}
