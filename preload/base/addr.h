/* SPDX-License-Identifier: MIT */
/* Socket addresses (addr.c). */
#ifndef SHIM_ADDR_H
#define SHIM_ADDR_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/socket.h>

/* A v4-mapped IPv6 address as the AF_INET one it maps (else a copy, cut
 * to sockaddr_storage); the length of the result. */
socklen_t shim_addr_unmap(const struct sockaddr *in, socklen_t len,
			  struct sockaddr_storage *out);
/* An AF_INET or AF_INET6 address in the given family (AF_INET in AF_INET6:
 * v4-mapped); the length of the result. */
socklen_t shim_addr_to_family(const struct sockaddr *in, int family,
			      struct sockaddr_storage *out);
/* The port of an AF_INET/AF_INET6 address, in host order; and set it. */
uint16_t shim_addr_port(const struct sockaddr *sa);
void shim_addr_set_port(struct sockaddr *sa, uint16_t port);
/* The wildcard address (0.0.0.0 or ::)? */
bool shim_addr_is_any(const struct sockaddr *sa);
/* Copy an address out the way the kernel does: at most *outlen bytes, and
 * *outlen set to the address's whole length. */
void shim_addr_copy_out(const struct sockaddr_storage *a, socklen_t alen,
			struct sockaddr *out, socklen_t *outlen);

#endif
