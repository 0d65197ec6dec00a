/* SPDX-License-Identifier: MIT */
/* The RDMA data-path cores shared by io.c and its callers. */
#ifndef SHIM_IO_INT_H
#define SHIM_IO_INT_H

#include "sock.h"

ssize_t shim_rdma_recvv(struct shim_sock *s, const struct iovec *iov, int cnt,
			int flags);
ssize_t shim_rdma_sendv(struct shim_sock *s, const struct iovec *iov, int cnt,
			int flags);

/*
 * What a TCP socket would show for an rsocket's rpoll revents.  rsockets
 * reports "disconnected" as POLLHUP as soon as the peer is gone; the kernel
 * shows a peer's close as readable EOF (IN|RDHUP) and HUP only once our
 * side has stopped writing too.
 */
short shim_rdma_revents(struct shim_sock *s, short rev, short want);
/* The transport failed: ETIMEDOUT pending, then closed (io.c). */
bool shim_rdma_timed_out(struct shim_sock *s);
/* Is the peer done sending (EOF queued)?  Only asked for RDHUP: rsockets
 * shows a peer's SHUT_WR as plain readability. */
bool shim_rdma_peer_eof(struct shim_sock *s, short rev);

/*
 * Bytes that ever arrived on RDMA sock s (io.c): 0 exact, 1 a lower bound
 * (a receive buffer above 4 MiB), -errno unknown.  Edge-triggered EPOLLIN
 * fires again when it grows.
 */
int shim_rdma_arrived(struct shim_sock *s, short rev, uint64_t *out);

#endif
