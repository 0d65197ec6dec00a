/* SPDX-License-Identifier: MIT */
/*
 * connect(): where a TCP connection is offered to RDMA first.
 *
 * The rsocket rendezvous runs synchronously, bounded by
 * ERDMA_SHIM_CONNECT_TIMEOUT_MS, for blocking and non-blocking sockets alike;
 * a non-blocking caller then sees EINPROGRESS and a writable fd with
 * SO_ERROR 0, exactly as after a fast kernel connect.  Any failure falls
 * back to the kernel connect on the same fd, and the peer goes into the
 * negative cache so the next connect skips the probe.
 */
#include "shim.h"
#include "glue.h"
#include "log.h"
#include "sock.h"
#include "epoll_int.h"

#include <arpa/inet.h>
#include <stdio.h>
#include <string.h>

static const void *addr_bytes(const struct sockaddr_storage *a)
{
	if (a->ss_family == AF_INET)
		return &((const struct sockaddr_in *)a)->sin_addr;
	return &((const struct sockaddr_in6 *)a)->sin6_addr;
}

static const char *addr_str(const struct sockaddr_storage *a, char *buf,
			    size_t len)
{
	char ip[INET6_ADDRSTRLEN] = "?";

	inet_ntop(a->ss_family, addr_bytes(a), ip, sizeof(ip));
	snprintf(buf, len, "%s:%u", ip, shim_addr_port((const void *)a));
	return buf;
}

/* Reserve a real TCP port for getsockname: bind the kernel fd to the local
 * address the rsocket got, port 0, unless the program bound it already. */
static void fill_local(int fd, struct shim_sock *s, int rs)
{
	struct sockaddr_storage here, k;
	socklen_t hlen = sizeof(here), klen = sizeof(k);

	if (REAL(getsockname)(fd, (struct sockaddr *)&k, &klen) == 0 &&
	    shim_addr_port((struct sockaddr *)&k) != 0) {
		memcpy(&s->local, &k, klen);
		s->local_len = klen;
		return;
	}
	if (sg_getsockname(rs, (struct sockaddr *)&here, &hlen) < 0)
		memset(&here, 0, sizeof(here)), here.ss_family = AF_INET;
	s->local_len = shim_addr_to_family((struct sockaddr *)&here, s->family,
					   &s->local);
	shim_addr_set_port((struct sockaddr *)&s->local, 0);
	if (REAL(bind)(fd, (struct sockaddr *)&s->local, s->local_len) == 0) {
		klen = sizeof(k);
		if (REAL(getsockname)(fd, (struct sockaddr *)&k, &klen) == 0) {
			memcpy(&s->local, &k, klen);
			s->local_len = klen;
		}
	}
}

/* Try RDMA: the connected rsocket, or -errno (a reason to fall back). */
static int try_rdma(const struct sockaddr_storage *dst, socklen_t dlen,
		    const char **why)
{
	struct sockaddr_storage rdst = *dst;
	uint16_t port = shim_addr_port((const void *)dst);
	int rs;

	if (!shim_config_allows(&shim_cfg, dst->ss_family, addr_bytes(dst),
				port)) {
		*why = "destination not allowed";
		return -EACCES;
	}
	if (!sg_available()) {
		*why = "no RDMA device";
		return -ENETUNREACH;
	}
	if (port + shim_cfg.port_offset > 65535) {
		*why = "port + ERDMA_SHIM_PORT_OFFSET exceeds 65535";
		return -ERANGE;
	}
	shim_addr_set_port((struct sockaddr *)&rdst,
			   (uint16_t)(port + shim_cfg.port_offset));
	if (shim_cfg.mode == SHIM_MODE_AUTO &&
	    sg_negcache_hit((struct sockaddr *)&rdst, shim_cfg.negcache_ttl_s)) {
		*why = "negative cache";
		return -ECONNREFUSED;
	}
	rs = sg_connect((struct sockaddr *)&rdst, dlen,
			(int)shim_cfg.connect_timeout_ms);
	if (rs < 0) {
		*why = "rsocket connect failed";
		if (rs != -EMFILE && rs != -ENOMEM && rs != -ENOBUFS)
			sg_negcache_add((struct sockaddr *)&rdst);
	}
	return rs;
}

static int connect_slow(int fd, struct shim_sock *s, const struct sockaddr *addr,
			socklen_t len)
{
	struct sockaddr_storage dst;
	const char *why = "";
	socklen_t dlen;
	char abuf[64];
	int rs;

	if (!addr || len < sizeof(sa_family_t) ||
	    (addr->sa_family != AF_INET && addr->sa_family != AF_INET6) ||
	    addr->sa_family != s->family ||
	    len < (addr->sa_family == AF_INET ? sizeof(struct sockaddr_in) :
						sizeof(struct sockaddr_in6)))
		return REAL(connect)(fd, addr, len) < 0 ? -errno : 0;

	dlen = shim_addr_unmap(addr, len, &dst);
	rs = try_rdma(&dst, dlen, &why);
	if (rs < 0) {
		shim_dbg("fd %d -> %s: TCP (%s: %s)", fd,
			 addr_str(&dst, abuf, sizeof(abuf)), why, strerror(-rs));
		if (shim_cfg.mode == SHIM_MODE_REQUIRE) {
			shim_warn("fd %d -> %s: RDMA required but %s (%s)", fd,
				  addr_str(&dst, abuf, sizeof(abuf)), why,
				  strerror(-rs));
			return rs == -EACCES || rs == -ERANGE ? -ECONNREFUSED : rs;
		}
		/* Fallback: from here on this fd is a plain kernel socket. */
		shim_fd_install(fd, NULL);
		return REAL(connect)(fd, addr, len) < 0 ? -errno : 0;
	}
	memcpy(&s->peer, addr, len);
	s->peer_len = len;
	fill_local(fd, s, rs);
	sg_set_nonblock(rs, true); /* the shim does the blocking itself */
	shim_sock_attach(s, SHIM_SK_RDMA, rs);
	shim_epoll_sock_changed(s);
	shim_dbg("fd %d -> %s: RDMA", fd, addr_str(&dst, abuf, sizeof(abuf)));
	/* A non-blocking connect reports "in progress" and then "writable",
	 * as a kernel connect over a network would. */
	if (!s->nonblock)
		return 0;
	s->connect_pending = true;
	return -EINPROGRESS;
}

SHIM_EXPORT int connect(int fd, __CONST_SOCKADDR_ARG addr, socklen_t len)
{
	struct shim_sock *s = shim_fd_get(fd);
	int r;

	if (likely(!s || s->kind == SHIM_SK_INTERNAL))
		return REAL(connect)(fd, addr, len);
	if (s->kind == SHIM_SK_RDMA) {
		/* After EINPROGRESS the kernel answers the next connect with
		 * 0 (the completion), and EISCONN from then on. */
		if (__atomic_exchange_n(&s->connect_pending, false,
					__ATOMIC_RELAXED))
			return 0;
		errno = EISCONN;
		return -1;
	}
	if (s->kind == SHIM_SK_LISTEN) {
		errno = EISCONN; /* what Linux says for a listening socket */
		return -1;
	}
	shim_sock_get(s);
	r = connect_slow(fd, s, addr.__sockaddr__, len);
	shim_sock_put(s);
	return (int)shim_ret(r);
}
