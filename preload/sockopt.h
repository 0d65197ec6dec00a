/* SPDX-License-Identifier: MIT */
/* sockopt.c: the options of a sock that reach its rsocket. */
#ifndef SHIM_SOCKOPT_H
#define SHIM_SOCKOPT_H

#include "sock.h"

/* The options of s that reach its rsocket. */
struct sg_sockopts shim_sock_opts(const struct shim_sock *s);
/* An accepted connection inherits its listener's keepalive options, on its
 * kernel socket nfd too, as the kernel's accept does (the listener's
 * kernel socket, lfd, has the options only read back). */
void shim_sock_inherit(struct shim_sock *ns, int nfd,
		       const struct shim_sock *ls, int lfd);
/* A listener's keepalive options from its kernel socket. */
void shim_sock_ka_load(struct shim_sock *s, int fd);
/* The protection the kernel shows on socket fd (a device binding, a
 * classic filter), or NULL: one set before the shim saw the socket. */
const char *shim_kernel_guard(int fd);

/* Is RDMA connection s closed (that state), without a look at its rsocket
 * unless it was reset, failed or shut for writing? */
bool shim_rdma_closed(struct shim_sock *s);
#endif
