/* SPDX-License-Identifier: MIT */
/* shim_sock lifetime and address helpers. */
#include "sock.h"
#include "glue.h"
#include "log.h"
#include "epoll_int.h"

#include <stdlib.h>
#include <string.h>

int shim_rdma_socks;

uint16_t shim_rdma_port(uint16_t port)
{
	return shim_port_map(port, shim_port_offset(&shim_cfg, sg_iwarp()));
}

struct shim_sock *shim_sock_new(int kind, int family)
{
	struct shim_sock *s = calloc(1, sizeof(*s));

	if (!s)
		return NULL;
	s->kind = kind;
	s->refs = 1;
	s->rs = -1;
	s->family = family;
	return s;
}

void shim_sock_attach(struct shim_sock *s, int kind, int rs)
{
	s->rs = rs;
	/* registered in an epoll set before its connect: used already */
	if (kind == SHIM_SK_RDMA &&
	    !__atomic_load_n(&s->ep_regs, __ATOMIC_ACQUIRE)) {
		__atomic_add_fetch(&shim_fresh_conns, 1, __ATOMIC_RELAXED);
		__atomic_store_n(&s->fresh, true, __ATOMIC_RELEASE);
	}
	__atomic_store_n(&s->kind, kind, __ATOMIC_RELEASE);
	__atomic_add_fetch(&shim_rdma_socks, 1, __ATOMIC_RELAXED);
}

void shim_sock_put(struct shim_sock *s)
{
	if (shim_sock_is_sentinel(s))
		return;
	if (__atomic_sub_fetch(&s->refs, 1, __ATOMIC_ACQ_REL))
		return;
	shim_sock_used(s); /* uncounts a fresh one */
	if (s->epset)
		shim_epoll_free(s->epset);
	if (s->kind == SHIM_SK_LISTEN) {
		/* counted from listen(), door or not */
		shim_listen_door_shut(s);
		__atomic_sub_fetch(&shim_rdma_socks, 1, __ATOMIC_RELAXED);
	} else if (s->rs >= 0) {
		sg_close(s->rs);
		__atomic_sub_fetch(&shim_rdma_socks, 1, __ATOMIC_RELAXED);
	}
	free(s);
}

struct shim_sock *shim_sock_ref(int fd)
{
	struct shim_sock *s = shim_fd_get(fd);

	/* A close() racing with this lookup is the program's own race, as
	 * with the kernel; the reference keeps the object valid for us. */
	if (!s || shim_sock_is_sentinel(s))
		return NULL;
	/* The reference before the handover check: a handover raises
	 * handed, then counts the references (handover.c), so one of the
	 * two sees the other. */
	shim_sock_get(s);
	if (s->kind == SHIM_SK_RDMA && !shim_sock_usable(s)) {
		shim_sock_put(s); /* handed over: the fd is a kernel socket */
		return NULL;
	}
	return s;
}

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
