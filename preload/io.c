/* SPDX-License-Identifier: MIT */
/*
 * Data path wrappers.  On a kernel fd each is one fd-table load and a call
 * through the real-function pointer.
 */
#include "shim.h"
#include "sock.h"

SHIM_EXPORT ssize_t read(int fd, void *buf, size_t n)
{
	(void)shim_fd_get(fd);
	return REAL(read)(fd, buf, n);
}

SHIM_EXPORT ssize_t __read_chk(int fd, void *buf, size_t n, size_t buflen)
{
	(void)shim_fd_get(fd);
	return REAL(__read_chk)(fd, buf, n, buflen);
}

SHIM_EXPORT ssize_t readv(int fd, const struct iovec *iov, int iovcnt)
{
	(void)shim_fd_get(fd);
	return REAL(readv)(fd, iov, iovcnt);
}

SHIM_EXPORT ssize_t write(int fd, const void *buf, size_t n)
{
	(void)shim_fd_get(fd);
	return REAL(write)(fd, buf, n);
}

SHIM_EXPORT ssize_t writev(int fd, const struct iovec *iov, int iovcnt)
{
	(void)shim_fd_get(fd);
	return REAL(writev)(fd, iov, iovcnt);
}

SHIM_EXPORT ssize_t recv(int fd, void *buf, size_t n, int flags)
{
	(void)shim_fd_get(fd);
	return REAL(recv)(fd, buf, n, flags);
}

SHIM_EXPORT ssize_t __recv_chk(int fd, void *buf, size_t n, size_t buflen,
			       int flags)
{
	(void)shim_fd_get(fd);
	return REAL(__recv_chk)(fd, buf, n, buflen, flags);
}

SHIM_EXPORT ssize_t recvfrom(int fd, void *__restrict buf, size_t n, int flags,
			     __SOCKADDR_ARG addr, socklen_t *__restrict alen)
{
	(void)shim_fd_get(fd);
	return REAL(recvfrom)(fd, buf, n, flags, addr, alen);
}

SHIM_EXPORT ssize_t __recvfrom_chk(int fd, void *__restrict buf, size_t n,
				   size_t buflen, int flags,
				   __SOCKADDR_ARG addr,
				   socklen_t *__restrict alen)
{
	(void)shim_fd_get(fd);
	return REAL(__recvfrom_chk)(fd, buf, n, buflen, flags, addr, alen);
}

SHIM_EXPORT ssize_t recvmsg(int fd, struct msghdr *msg, int flags)
{
	(void)shim_fd_get(fd);
	return REAL(recvmsg)(fd, msg, flags);
}

SHIM_EXPORT int recvmmsg(int fd, struct mmsghdr *vmsg, unsigned int vlen,
			 int flags, struct timespec *tmo)
{
	(void)shim_fd_get(fd);
	return REAL(recvmmsg)(fd, vmsg, vlen, flags, tmo);
}

SHIM_EXPORT ssize_t send(int fd, const void *buf, size_t n, int flags)
{
	(void)shim_fd_get(fd);
	return REAL(send)(fd, buf, n, flags);
}

SHIM_EXPORT ssize_t sendto(int fd, const void *buf, size_t n, int flags,
			   __CONST_SOCKADDR_ARG addr, socklen_t alen)
{
	(void)shim_fd_get(fd);
	return REAL(sendto)(fd, buf, n, flags, addr, alen);
}

SHIM_EXPORT ssize_t sendmsg(int fd, const struct msghdr *msg, int flags)
{
	(void)shim_fd_get(fd);
	return REAL(sendmsg)(fd, msg, flags);
}

SHIM_EXPORT int sendmmsg(int fd, struct mmsghdr *vmsg, unsigned int vlen,
			 int flags)
{
	(void)shim_fd_get(fd);
	return REAL(sendmmsg)(fd, vmsg, vlen, flags);
}

SHIM_EXPORT ssize_t sendfile(int out_fd, int in_fd, off_t *offset, size_t count)
{
	(void)shim_fd_get(out_fd);
	return REAL(sendfile)(out_fd, in_fd, offset, count);
}

SHIM_EXPORT ssize_t sendfile64(int out_fd, int in_fd, off64_t *offset,
			       size_t count)
{
	(void)shim_fd_get(out_fd);
	return REAL(sendfile64)(out_fd, in_fd, offset, count);
}
