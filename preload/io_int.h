/* SPDX-License-Identifier: MIT */
/* The RDMA data-path cores shared by io.c and its callers. */
#ifndef SHIM_IO_INT_H
#define SHIM_IO_INT_H

#include "sock.h"

ssize_t shim_rdma_recvv(struct shim_sock *s, const struct iovec *iov, int cnt,
			int flags);
ssize_t shim_rdma_sendv(struct shim_sock *s, const struct iovec *iov, int cnt,
			int flags);

/* svc.c */
ssize_t shim_svc_write(int fd, const void *buf, size_t n);

#endif
