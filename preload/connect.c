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
#include "stats.h"
#include "epoll_int.h"

#include <arpa/inet.h>
#include <stdio.h>
#include <string.h>
#include <sys/uio.h>

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

/*
 * The client's port, as both ends will see it: a real TCP port reserved on
 * the kernel fd (bound now to the wildcard, port 0, unless the program bound
 * it), which the rsocket then binds too (src).  Then getsockname here and
 * getpeername at the server agree, as over TCP, and a fallback connect
 * simply uses the bound kernel fd.  Returns 0 or -errno; src gets the
 * rsocket's bind address in the destination's family.
 */
static int reserve_port(int fd, struct shim_sock *s, int dst_family,
			struct sockaddr_storage *src, socklen_t *srclen)
{
	struct sockaddr_storage k;
	socklen_t klen = sizeof(k);

	if (REAL(getsockname)(fd, (struct sockaddr *)&k, &klen) < 0)
		return -errno;
	if (shim_addr_port((struct sockaddr *)&k) == 0) {
		struct sockaddr_storage any = {.ss_family =
						   (sa_family_t)s->family};
		socklen_t alen = s->family == AF_INET
				     ? sizeof(struct sockaddr_in)
				     : sizeof(struct sockaddr_in6);

		if (REAL(bind)(fd, (struct sockaddr *)&any, alen) < 0)
			return -errno;
		klen = sizeof(k);
		if (REAL(getsockname)(fd, (struct sockaddr *)&k, &klen) < 0)
			return -errno;
	}
	*srclen = shim_addr_unmap((struct sockaddr *)&k, klen, src);
	if (src->ss_family != dst_family) {
		/* [::]:P for a v4 destination: bind the rsocket to 0.0.0.0:P */
		uint16_t port = shim_addr_port((struct sockaddr *)src);

		memset(src, 0, sizeof(*src));
		src->ss_family = (sa_family_t)dst_family;
		*srclen = dst_family == AF_INET ? sizeof(struct sockaddr_in)
						: sizeof(struct sockaddr_in6);
		shim_addr_set_port((struct sockaddr *)src, port);
	}
	return 0;
}

/* getsockname for the program: the rsocket's address, the kernel's port. */
static void fill_local(int fd, struct shim_sock *s, int rs)
{
	struct sockaddr_storage here, k;
	socklen_t hlen = sizeof(here), klen = sizeof(k);

	if (sg_getsockname(rs, (struct sockaddr *)&here, &hlen) < 0)
		memset(&here, 0, sizeof(here)), here.ss_family = AF_INET;
	s->local_len =
	    shim_addr_to_family((struct sockaddr *)&here, s->family, &s->local);
	if (REAL(getsockname)(fd, (struct sockaddr *)&k, &klen) == 0)
		shim_addr_set_port((struct sockaddr *)&s->local,
				   shim_addr_port((struct sockaddr *)&k));
}

/*
 * The rendezvous.  Under ERDMA_SHIM=require a refusal is retried for a
 * moment: a prefork server's workers open the port's RDMA door at their
 * first wait (socket.c), a little after the server said it was ready, and
 * the kernel's backlog would have taken this connect meanwhile.  Auto mode
 * falls back to TCP at once instead.
 */
#define REFUSED_RETRY_MS 1000

static int connect_rdma(struct shim_sock *s,
			const struct sockaddr_storage *rdst, socklen_t dlen,
			const struct sockaddr_storage *src, socklen_t srclen)
{
	int64_t until = shim_now_ms() + REFUSED_RETRY_MS;
	long nap_ms = 5;
	int rs;

	for (;;) {
		rs = sg_connect(
		    (const struct sockaddr *)rdst, dlen,
		    (const struct sockaddr *)src, srclen,
		    (int)shim_cfg.connect_timeout_ms,
		    &(struct sg_bufs){.snd = s->sndbuf, .rcv = s->rcvbuf});
		if (rs != -ECONNREFUSED || shim_cfg.mode != SHIM_MODE_REQUIRE ||
		    shim_now_ms() + nap_ms > until)
			return rs;
		nanosleep(&(struct timespec){0, nap_ms * 1000000L}, NULL);
		nap_ms = nap_ms < 100 ? nap_ms * 2 : 100;
	}
}

/*
 * On iWARP the rsocket's connection is itself a kernel TCP connection, made
 * by the driver's CM (siw, erdma) from the port the kernel fd holds
 * (reserve_port).  The driver binds its socket with SO_REUSEADDR, and the
 * kernel lets a second socket bind a port only when both have it: the fd
 * gets it for the rendezvous and the program's own value back after.
 * Returns the value to restore, or -1 (nothing changed).
 */
static int iwarp_share_port(int fd)
{
	int on = 1, old = 0;
	socklen_t len = sizeof(old);

	if (!sg_iwarp() ||
	    REAL(getsockopt)(fd, SOL_SOCKET, SO_REUSEADDR, &old, &len) < 0 ||
	    old)
		return -1;
	if (REAL(setsockopt)(fd, SOL_SOCKET, SO_REUSEADDR, &on, sizeof(on)) < 0)
		return -1;
	return old;
}

static void iwarp_unshare_port(int fd, int old)
{
	if (old >= 0)
		(void)REAL(setsockopt)(fd, SOL_SOCKET, SO_REUSEADDR, &old,
				       sizeof(old));
}

/* Try RDMA: the connected rsocket, or -errno (a reason to fall back). */
static int try_rdma(int fd, struct shim_sock *s,
		    const struct sockaddr_storage *dst, socklen_t dlen,
		    const char **why)
{
	struct sockaddr_storage src;
	socklen_t srclen = 0;
	struct sockaddr_storage rdst = *dst;
	uint16_t port = shim_addr_port((const void *)dst);
	int rs, reuse;

	if (!shim_config_allows(&shim_cfg, dst->ss_family, addr_bytes(dst),
				port)) {
		*why = "destination not allowed";
		return -EACCES;
	}
	if (shim_uring_user()) {
		*why = "liburing is loaded";
		return -EACCES;
	}
	if (!sg_available()) {
		*why = sg_fork_tainted()
			   ? "fork child of a process that used RDMA"
			   : "no RDMA device";
		return -ENETUNREACH;
	}
	if (!port) {
		*why = "port 0";
		return -ERANGE;
	}
	shim_addr_set_port((struct sockaddr *)&rdst, shim_rdma_port(port));
	if (shim_cfg.mode == SHIM_MODE_AUTO &&
	    sg_negcache_hit((struct sockaddr *)&rdst,
			    shim_cfg.negcache_ttl_s)) {
		*why = "negative cache";
		return -ECONNREFUSED;
	}
	/* A program connecting to its own listener before it waits on it:
	 * the door opens now (the kernel's backlog would take the connect). */
	if (__atomic_load_n(&shim_rdma_socks, __ATOMIC_RELAXED))
		shim_listen_door_port(port);
	if (reserve_port(fd, s, dst->ss_family, &src, &srclen) < 0)
		srclen = 0;
	reuse = iwarp_share_port(fd);
	rs = connect_rdma(s, &rdst, dlen, srclen ? &src : NULL, srclen);
	iwarp_unshare_port(fd, reuse);
	if (rs < 0) {
		*why = "rsocket connect failed";
		/* Local shortages (and -EBUSY: a local wait ran out, see
		 * rsocket_glue's svc_mu; -EINTR: a signal) say nothing about
		 * the peer. */
		if (rs != -EMFILE && rs != -ENOMEM && rs != -ENOBUFS &&
		    rs != -EBUSY && rs != -EINTR)
			sg_negcache_add((struct sockaddr *)&rdst);
	}
	return rs;
}

/*
 * The kernel copies a connect() address in before it looks at it, so a bad
 * pointer or length is EFAULT/EINVAL, never a crash.  The shim reads the
 * address itself, so it copies it the same way first: process_vm_readv on
 * ourselves fails with EFAULT where a plain read would fault.  Only eligible
 * sockets get here (not the kernel-fd fast path).
 */
static int copy_user_addr(const struct sockaddr *addr, socklen_t len,
			  struct sockaddr_storage *out)
{
	struct iovec here = {out, len}, there = {(void *)addr, len};
	ssize_t n;

	if ((int)len < 0 || len > sizeof(*out))
		return -EINVAL;
	if (!len)
		return 0;
	n = process_vm_readv(getpid(), &here, 1, &there, 1, 0);
	if (n == (ssize_t)len)
		return 0;
	if (n >= 0 || errno == EFAULT)
		return -EFAULT;
	memcpy(out, addr, len); /* no such call here (seccomp): as before */
	return 0;
}

/*
 * Out of a resource (locked memory: RLIMIT_MEMLOCK, QPs, fds): the program
 * keeps working over TCP, but the operator must hear of it -- once, not on
 * every connect of a busy process.
 */
static void warn_resources_once(const struct sockaddr_storage *dst, int err)
{
	static int said;
	char abuf[64];

	if (__atomic_exchange_n(&said, 1, __ATOMIC_RELAXED))
		return;
	shim_warn("RDMA to %s: %s; using TCP (check ulimit -l); not repeated",
		  addr_str(dst, abuf, sizeof(abuf)), strerror(-err));
}

/*
 * A blocking connect refused by TCP as well means the peer is down, not
 * TCP-only: drop what the failed RDMA probe put in the negative cache, so a
 * restarted server gets RDMA connections at once rather than after the TTL.
 * (A non-blocking connect learns of its failure later, outside the shim:
 * such a peer stays cached until the TTL.)
 */
static void forget_peer(const struct sockaddr_storage *dst)
{
	struct sockaddr_storage rdst = *dst;
	uint16_t port = shim_addr_port((const void *)dst);

	if (!port)
		return;
	shim_addr_set_port((struct sockaddr *)&rdst, shim_rdma_port(port));
	sg_negcache_del((struct sockaddr *)&rdst);
}

static int connect_slow(int fd, struct shim_sock *s,
			const struct sockaddr *addr, socklen_t len)
{
	struct sockaddr_storage dst, ua;
	const char *why = "";
	socklen_t dlen;
	char abuf[64];
	int rs, r;

	if (addr) {
		r = copy_user_addr(addr, len, &ua);
		if (r < 0)
			return r;
		addr = (const struct sockaddr *)&ua;
	}
	if (!addr || len < sizeof(sa_family_t) ||
	    (addr->sa_family != AF_INET && addr->sa_family != AF_INET6) ||
	    addr->sa_family != s->family ||
	    len < (addr->sa_family == AF_INET ? sizeof(struct sockaddr_in)
					      : sizeof(struct sockaddr_in6)))
		return REAL(connect)(fd, addr, len) < 0 ? -errno : 0;

	dlen = shim_addr_unmap(addr, len, &dst);
	rs = try_rdma(fd, s, &dst, dlen, &why);
	if (rs < 0) {
		shim_dbg("fd %d -> %s: TCP (%s: %s)", fd,
			 addr_str(&dst, abuf, sizeof(abuf)), why,
			 strerror(-rs));
		if (shim_cfg.mode == SHIM_MODE_REQUIRE) {
			shim_warn("fd %d -> %s: RDMA required but %s (%s)", fd,
				  addr_str(&dst, abuf, sizeof(abuf)), why,
				  strerror(-rs));
			return rs == -EACCES || rs == -ERANGE ? -ECONNREFUSED
							      : rs;
		}
		if (rs == -ENOMEM || rs == -ENOBUFS || rs == -EMFILE)
			warn_resources_once(&dst, rs);
		/* Fallback: from here on this fd is a plain kernel socket. */
		shim_fd_install(fd, NULL);
		r = REAL(connect)(fd, addr, len) < 0 ? -errno : 0;
		if (r == 0 || r == -EINPROGRESS)
			shim_stat_kernel(fd, ERDMA_PATH_TCP, why, -rs, addr,
					 len);
		else if (r != -EINTR && r != -EALREADY)
			forget_peer(&dst);
		return r;
	}
	memcpy(&s->peer, addr, len);
	s->peer_len = len;
	fill_local(fd, s, rs);
	sg_set_nonblock(rs, true); /* the shim does the blocking itself */
	shim_sock_attach(s, SHIM_SK_RDMA, rs);
	shim_epoll_sock_changed(s);
	shim_stat_sock(s, fd, ERDMA_PATH_RDMA);
	shim_dbg("fd %d -> %s: RDMA", fd, addr_str(&dst, abuf, sizeof(abuf)));
	/* A non-blocking connect reports "in progress" and then "writable",
	 * as a kernel connect over a network would. */
	if (!s->nonblock)
		return 0;
	s->connect_pending = true;
	return -EINPROGRESS;
}

/* connect with a reference to s held; 0 or -errno. */
static int connect_held(int fd, struct shim_sock *s,
			const struct sockaddr *addr, socklen_t len)
{
	if (s->kind == SHIM_SK_RDMA) {
		struct sockaddr_storage ua;
		/* The kernel checks the address before the socket's state. */
		int r = copy_user_addr(addr, len, &ua);

		if (!r && len < sizeof(sa_family_t))
			r = -EINVAL;
		if (r < 0)
			return r;
		/* After EINPROGRESS the kernel answers the next connect with
		 * 0 (the completion), and EISCONN from then on. */
		if (__atomic_exchange_n(&s->connect_pending, false,
					__ATOMIC_RELAXED))
			return 0;
		return -EISCONN;
	}
	if (s->kind == SHIM_SK_LISTEN)
		return -EISCONN; /* what Linux says for a listening socket */
	return connect_slow(fd, s, addr, len);
}

SHIM_EXPORT int connect(int fd, __CONST_SOCKADDR_ARG addr, socklen_t len)
{
	struct shim_sock *s = shim_fd_get(fd);
	int r;

	if (likely(!s || s->kind == SHIM_SK_INTERNAL ||
		   s->kind == SHIM_SK_RELAY)) {
		if (unlikely(shim_stat_kconnect_on && !s))
			return shim_stat_kconnect(fd, addr.__sockaddr__, len);
		return REAL(connect)(fd, addr, len);
	}
	if (unlikely(
		!shim_sock_tryget(fd, s,
				  SHIM_SK_ANY & ~(SHIM_SK(SHIM_SK_INTERNAL) |
						  SHIM_SK(SHIM_SK_RELAY)))))
		return connect(fd, addr, len); /* a close() came first */
	r = connect_held(fd, s, addr.__sockaddr__, len);
	shim_sock_put(s);
	return (int)shim_ret(r);
}
