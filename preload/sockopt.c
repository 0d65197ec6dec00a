/* SPDX-License-Identifier: MIT */
/* Socket options, fcntl and ioctl. */
#include "shim.h"
#include "sock.h"

#include <stdarg.h>
#include <sys/ioctl.h>

SHIM_EXPORT int getsockopt(int fd, int level, int name, void *__restrict val,
			   socklen_t *__restrict len)
{
	(void)shim_fd_get(fd);
	return REAL(getsockopt)(fd, level, name, val, len);
}

SHIM_EXPORT int setsockopt(int fd, int level, int name, const void *val,
			   socklen_t len)
{
	(void)shim_fd_get(fd);
	return REAL(setsockopt)(fd, level, name, val, len);
}

/*
 * fcntl/ioctl are variadic; every command's argument fits in a pointer-sized
 * register, so one is fetched and forwarded as is (what glibc does too).
 */
#define VA_ONE_ARG(last, var)                                                  \
	do {                                                                   \
		va_list ap_;                                                   \
		va_start(ap_, last);                                           \
		var = va_arg(ap_, void *);                                     \
		va_end(ap_);                                                   \
	} while (0)

SHIM_EXPORT int fcntl(int fd, int cmd, ...)
{
	void *arg;

	VA_ONE_ARG(cmd, arg);
	(void)shim_fd_get(fd);
	return REAL(fcntl)(fd, cmd, arg);
}

SHIM_EXPORT int fcntl64(int fd, int cmd, ...)
{
	void *arg;

	VA_ONE_ARG(cmd, arg);
	(void)shim_fd_get(fd);
	return REAL(fcntl64)(fd, cmd, arg);
}

SHIM_EXPORT int ioctl(int fd, unsigned long req, ...)
{
	void *arg;

	VA_ONE_ARG(req, arg);
	(void)shim_fd_get(fd);
	return REAL(ioctl)(fd, req, arg);
}
