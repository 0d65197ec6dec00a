/* SPDX-License-Identifier: MIT */
/* connect(): where a TCP connection is offered to RDMA first. */
#include "shim.h"
#include "sock.h"

SHIM_EXPORT int connect(int fd, __CONST_SOCKADDR_ARG addr, socklen_t len)
{
	(void)shim_fd_get(fd);
	return REAL(connect)(fd, addr, len);
}
