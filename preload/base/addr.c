/* SPDX-License-Identifier: MIT */
/*
 * Socket addresses: the v4-mapped conversion between the program's family
 * and the rsocket's (rsockets are always created with the real family),
 * ports, and copying an address out the way the kernel does.  Pure
 * functions (tests/unit/test_addr.c).
 */
#include "addr.h"

#include <arpa/inet.h>
#include <string.h>

static const uint8_t v4mapped[12] = {[10] = 0xff, [11] = 0xff};

socklen_t shim_addr_unmap(const struct sockaddr *in, socklen_t len,
			  struct sockaddr_storage *out)
{
	const struct sockaddr_in6 *in6 = (const void *)in;
	struct sockaddr_in *o4 = (void *)out;

	memset(out, 0, sizeof(*out));
	if (in->sa_family == AF_INET6 && len >= sizeof(*in6) &&
	    !memcmp(&in6->sin6_addr, v4mapped, 12)) {
		o4->sin_family = AF_INET;
		o4->sin_port = in6->sin6_port;
		memcpy(&o4->sin_addr, in6->sin6_addr.s6_addr + 12, 4);
		return sizeof(*o4);
	}
	if (len > sizeof(*out))
		len = sizeof(*out);
	memcpy(out, in, len);
	return len;
}

socklen_t shim_addr_to_family(const struct sockaddr *in, int family,
			      struct sockaddr_storage *out)
{
	const struct sockaddr_in *i4 = (const void *)in;
	struct sockaddr_in6 *o6 = (void *)out;

	memset(out, 0, sizeof(*out));
	if (in->sa_family == AF_INET && family == AF_INET6) {
		o6->sin6_family = AF_INET6;
		o6->sin6_port = i4->sin_port;
		memcpy(o6->sin6_addr.s6_addr, v4mapped, 12);
		memcpy(o6->sin6_addr.s6_addr + 12, &i4->sin_addr, 4);
		return sizeof(*o6);
	}
	if (in->sa_family == AF_INET) {
		memcpy(out, in, sizeof(struct sockaddr_in));
		return sizeof(struct sockaddr_in);
	}
	memcpy(out, in, sizeof(struct sockaddr_in6));
	return sizeof(struct sockaddr_in6);
}

uint16_t shim_addr_port(const struct sockaddr *sa)
{
	if (sa->sa_family == AF_INET)
		return ntohs(
		    ((const struct sockaddr_in *)(const void *)sa)->sin_port);
	return ntohs(
	    ((const struct sockaddr_in6 *)(const void *)sa)->sin6_port);
}

bool shim_addr_is_any(const struct sockaddr *sa)
{
	if (sa->sa_family == AF_INET)
		return ((const struct sockaddr_in *)(const void *)sa)
			   ->sin_addr.s_addr == htonl(INADDR_ANY);
	return IN6_IS_ADDR_UNSPECIFIED(
	    &((const struct sockaddr_in6 *)(const void *)sa)->sin6_addr);
}

void shim_addr_set_port(struct sockaddr *sa, uint16_t port)
{
	if (sa->sa_family == AF_INET)
		((struct sockaddr_in *)(void *)sa)->sin_port = htons(port);
	else
		((struct sockaddr_in6 *)(void *)sa)->sin6_port = htons(port);
}

void shim_addr_copy_out(const struct sockaddr_storage *a, socklen_t alen,
			struct sockaddr *out, socklen_t *outlen)
{
	socklen_t n = *outlen < alen ? *outlen : alen;

	if (out && n)
		memcpy(out, a, n);
	*outlen = alen;
}
