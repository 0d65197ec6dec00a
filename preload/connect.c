/* SPDX-License-Identifier: MIT */
/*
 * connect(): where a TCP connection is offered to RDMA first.
 *
 * The rsocket rendezvous is bounded by ERDMA_SHIM_CONNECT_TIMEOUT_MS.  It
 * runs on a thread of its own (connect_async): a non-blocking connect
 * returns EINPROGRESS at once, a blocking one waits for it (connect_wait);
 * the socket is SHIM_SK_CONNECTING meanwhile -- not readable, not writable,
 * data calls EAGAIN, as the kernel's connecting socket -- and it turns
 * writable when the rendezvous ends, connected over RDMA or handed to the
 * kernel's connect on the same fd.  Any failure falls back to the kernel
 * connect on the same fd, and the peer goes into the negative cache so the
 * next connect skips the probe.
 */
#include "shim.h"
#include "glue.h"
#include "log.h"
#include "sock.h"
#include "sockopt.h"
#include "connect.h"
#include "socket.h"
#include "stats.h"
#include "settle.h"

#include <arpa/inet.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/syscall.h>
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
 * bind(0) draws from the half of the ephemeral range that a program's own
 * free-port probe (bind to port 0, close) draws from; connect() draws from
 * the other.  Had the reservation drawn the destination's port on a local
 * address, the fallback's kernel connect would meet itself (TCP's
 * simultaneous open) and succeed where the kernel's connect is refused.  So
 * the destination's own address and port are held while the port is drawn:
 * the guard's bind succeeds only when that address is local (or nonlocal
 * binds are allowed) and nothing holds the port there -- when nothing could
 * accept the connect anyway.  SO_REUSEADDR and SO_REUSEPORT: a server
 * binding that port with either meanwhile is not refused (one with neither
 * is, for the microseconds the guard lives: README).  Costs socket, two
 * setsockopt, bind and close per RDMA connect from an unbound socket; the
 * guard is gone before connect returns.  Returns the guard's fd or -1.
 */
static int port_guard(const struct shim_sock *s,
		      const struct sockaddr_storage *dst)
{
	struct sockaddr_storage a;
	socklen_t alen;
	int g;

	if (!shim_addr_port((const struct sockaddr *)dst))
		return -1;
	alen = shim_addr_to_family((const struct sockaddr *)dst, s->family, &a);
	g = REAL(socket)(s->family, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (g < 0)
		return -1;
	if (REAL(setsockopt)(g, SOL_SOCKET, SO_REUSEADDR, &(int){1},
			     sizeof(int)) < 0 ||
	    REAL(setsockopt)(g, SOL_SOCKET, SO_REUSEPORT, &(int){1},
			     sizeof(int)) < 0 ||
	    REAL(bind)(g, (struct sockaddr *)&a, alen) < 0) {
		REAL(close)(g);
		return -1;
	}
	return g;
}

/* Int option level/name of fd set to val for a moment: the program's
 * value, for opt_restore, or -1 (it was val already, or nothing changed). */
static int opt_swap(int fd, int level, int name, int val)
{
	int old = 0;
	socklen_t len = sizeof(old);

	if (REAL(getsockopt)(fd, level, name, &old, &len) < 0 || old == val ||
	    REAL(setsockopt)(fd, level, name, &val, sizeof(val)) < 0)
		return -1;
	return old;
}

static void opt_restore(int fd, int level, int name, int old)
{
	if (old >= 0)
		(void)REAL(setsockopt)(fd, level, name, &old, sizeof(old));
}

/*
 * A port for fd, at the address it has (the wildcard, or the one a program
 * bound with IP_BIND_ADDRESS_NO_PORT, leaving the port to connect: that
 * flag would leave it to connect again, so it is off for this bind and
 * then as the program set it).  0 or -errno.
 */
static int bind_port(int fd, const struct sockaddr_storage *k, socklen_t klen)
{
	int nop = opt_swap(fd, IPPROTO_IP, IP_BIND_ADDRESS_NO_PORT, 0), r;

	r = REAL(bind)(fd, (const struct sockaddr *)k, klen) < 0 ? -errno : 0;
	opt_restore(fd, IPPROTO_IP, IP_BIND_ADDRESS_NO_PORT, nop);
	return r;
}

/*
 * The client's port, as both ends will see it: a real TCP port reserved on
 * the kernel fd (bound now, port 0, at the address it has, unless the
 * program bound a port), which the rsocket then binds too (src).  Then
 * getsockname here and getpeername at the server agree, as over TCP, and a
 * fallback connect simply uses the bound kernel fd.  Returns 0 or -errno; src
 * gets the rsocket's bind address in the destination's family.
 */
static int reserve_port(int fd, struct shim_sock *s,
			const struct sockaddr_storage *dst,
			struct sockaddr_storage *src, socklen_t *srclen)
{
	struct sockaddr_storage k;
	socklen_t klen = sizeof(k);
	int dst_family = dst->ss_family;

	if (REAL(getsockname)(fd, (struct sockaddr *)&k, &klen) < 0)
		return -errno;
	if (shim_addr_port((struct sockaddr *)&k) == 0) {
		int g = port_guard(s, dst), r;

		r = bind_port(fd, &k, klen);
		if (g >= 0)
			REAL(close)(g);
		if (r < 0)
			return r;
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
	struct sg_sockopts o = shim_sock_opts(s);
	long nap_ms = 5;
	int rs;

	for (;;) {
		rs = sg_connect((const struct sockaddr *)rdst, dlen,
				(const struct sockaddr *)src, srclen,
				(int)shim_cfg.connect_timeout_ms, &o);
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
	return sg_iwarp() ? opt_swap(fd, SOL_SOCKET, SO_REUSEADDR, 1) : -1;
}

static void iwarp_unshare_port(int fd, int old)
{
	opt_restore(fd, SOL_SOCKET, SO_REUSEADDR, old);
}

/* May dst be tried over RDMA?  0 with rdst, its RDMA address, or -errno
 * (a reason to fall back, in why). */
static int rdma_eligible(const struct sockaddr_storage *dst,
			 struct sockaddr_storage *rdst, const char **why)
{
	uint16_t port = shim_addr_port((const void *)dst);

	*rdst = *dst;

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
	shim_addr_set_port((struct sockaddr *)rdst, shim_rdma_port(port));
	if (shim_cfg.mode == SHIM_MODE_AUTO &&
	    sg_negcache_hit((struct sockaddr *)rdst, shim_cfg.negcache_ttl_s)) {
		*why = "negative cache";
		return -ECONNREFUSED;
	}
	/* A program connecting to its own listener before it waits on it:
	 * the door opens now (the kernel's backlog would take the connect). */
	if (__atomic_load_n(&shim_rdma_socks, __ATOMIC_RELAXED))
		shim_listen_door_port(port);
	return 0;
}

/* A rendezvous to rdst failed with rs: the peer goes into the negative
 * cache, except for local shortages (and -EBUSY: a local wait ran out, see
 * rsocket_glue's svc_mu; -EINTR: a signal; -EADDRNOTAVAIL: the program's
 * source address has no RDMA device), which say nothing about it. */
static void note_failure(const struct sockaddr_storage *rdst, int rs)
{
	if (rs != -EMFILE && rs != -ENFILE && rs != -ENOMEM && rs != -ENOBUFS &&
	    rs != -EBUSY && rs != -EINTR && rs != -EADDRNOTAVAIL)
		sg_negcache_add((const struct sockaddr *)rdst);
}

/* The rendezvous to rdst from the port kfd reserved (src, srclen; none
 * if 0): the connected rsocket, or -errno and why. */
static int rendezvous(int kfd, struct shim_sock *s,
		      const struct sockaddr_storage *rdst, socklen_t dlen,
		      const struct sockaddr_storage *src, socklen_t srclen,
		      const char **why)
{
	int reuse = iwarp_share_port(kfd);
	int rs = connect_rdma(s, rdst, dlen, srclen ? src : NULL, srclen);

	iwarp_unshare_port(kfd, reuse);
	if (rs < 0) {
		*why = "rsocket connect failed";
		note_failure(rdst, rs);
	}
	return rs;
}

/* Try RDMA: the connected rsocket, or -errno (a reason to fall back). */
static int try_rdma(int fd, struct shim_sock *s,
		    const struct sockaddr_storage *dst, socklen_t dlen,
		    const char **why)
{
	struct sockaddr_storage src, rdst;
	socklen_t srclen = 0;
	int r = rdma_eligible(dst, &rdst, why);

	if (r < 0)
		return r;
	r = sg_fds_check(); /* before a rendezvous that could not keep it */
	if (r < 0) {
		*why = "its fds would pass ERDMA_SHIM_FD_SHARE";
		return r;
	}
	if (reserve_port(fd, s, dst, &src, &srclen) < 0)
		srclen = 0;
	return rendezvous(fd, s, &rdst, dlen, &src, srclen, why);
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

/* The same, for the program's address: its TCP connect failed after the
 * rendezvous had, so its RDMA side may be back (a restarted server). */
static void forget_peer_of(const struct sockaddr *addr, socklen_t len)
{
	struct sockaddr_storage ua, dst;

	if (copy_user_addr(addr, len, &ua) == 0) {
		shim_addr_unmap((const struct sockaddr *)&ua, len, &dst);
		forget_peer(&dst);
	}
}

/* A failed rendezvous, told: the debug line, and under ERDMA_SHIM=require
 * the warning and the error connect gives (0 in auto mode: fall back). */
static int failed(int fd, const struct sockaddr_storage *dst, int rs,
		  const char *why)
{
	char abuf[64];

	shim_dbg("fd %d -> %s: TCP (%s: %s)", fd,
		 addr_str(dst, abuf, sizeof(abuf)), why, strerror(-rs));
	if (shim_cfg.mode == SHIM_MODE_REQUIRE) {
		shim_warn("fd %d -> %s: RDMA required but %s (%s)", fd,
			  addr_str(dst, abuf, sizeof(abuf)), why,
			  strerror(-rs));
		return rs == -EACCES || rs == -ERANGE ? -ECONNREFUSED : rs;
	}
	/* out of a resource: the operator hears of it once a cause */
	sg_shortage(rs, addr_str(dst, abuf, sizeof(abuf)));
	return 0;
}

/* s is connected over rsocket rs to addr as the program gave it (dst:
 * unmapped, for the log); kfd: its kernel socket, with the reserved port:
 * names, statistics, the debug line.  The kind is the caller's to change. */
static void connected(int fd, int kfd, struct shim_sock *s,
		      const struct sockaddr *addr, socklen_t len,
		      const struct sockaddr_storage *dst, int rs)
{
	char abuf[64];

	memcpy(&s->peer, addr, len);
	s->peer_len = len;
	fill_local(kfd, s, rs);
	sg_set_nonblock(rs, true); /* the shim does the blocking itself */
	if (__atomic_load_n(&s->fdrefs, __ATOMIC_ACQUIRE)) /* not closed */
		shim_stat_sock(s, fd, ERDMA_PATH_RDMA);
	shim_dbg("fd %d -> %s: RDMA", fd, addr_str(dst, abuf, sizeof(abuf)));
}

static int connect_async(int fd, struct shim_sock *s,
			 const struct sockaddr_storage *dst, socklen_t dlen,
			 const struct sockaddr *addr, socklen_t len);

/* connect_held's: a blocking connect waits for the rendezvous under way
 * (connect_wait). */
#define CONNECT_WAIT 2

/*
 * A TCP-level protection set on a client socket before its connect (the
 * options sockopt.c's guard_opt names: TCP-MD5 or TCP-AO keys, a socket
 * filter, a device binding) holds on the kernel's connection only: over RDMA
 * the bytes would go unsigned, unfiltered, on whatever device routes there.
 * Such a connect is the kernel's, in every mode.  The name of the
 * protection, or NULL; a device binding or classic filter the shim did not
 * see set (an inherited socket) is read from the kernel.
 */
static const char *client_guard(int fd, struct shim_sock *s)
{
	const char *g = __atomic_load_n(&s->guard, __ATOMIC_ACQUIRE);

	return g ? g : shim_kernel_guard(fd);
}

static int guarded_connect(int fd, const struct sockaddr_storage *dst,
			   const struct sockaddr *addr, socklen_t len,
			   const char *why)
{
	static bool said;
	char abuf[64];
	int r;

	addr_str(dst, abuf, sizeof(abuf));
	/* one info line per process; each connect's at debug */
	if (!__atomic_exchange_n(&said, true, __ATOMIC_RELAXED))
		shim_info("fd %d -> %s: TCP (%s set on the socket: RDMA would "
			  "bypass it)",
			  fd, abuf, why);
	else
		shim_dbg("fd %d -> %s: TCP (%s set on the socket)", fd, abuf,
			 why);
	shim_fd_install(fd, NULL); /* a plain kernel socket from here on */
	r = REAL(connect)(fd, addr, len) < 0 ? -errno : 0;
	if (r == 0 || r == -EINPROGRESS)
		shim_stat_kernel(fd, ERDMA_PATH_TCP, why, EPERM, addr, len);
	return r;
}

static int connect_slow(int fd, struct shim_sock *s,
			const struct sockaddr *addr, socklen_t len)
{
	struct sockaddr_storage dst, ua;
	const char *why = "", *guard;
	socklen_t dlen;
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
	guard = client_guard(fd, s);
	if (guard)
		return guarded_connect(fd, &dst, addr, len, guard);
	/* A blocking connect too: its caller waits for the rendezvous as
	 * for a connect under way, where a signal ends the wait (the kernel's
	 * EINTR), not the rendezvous, and a handler runs with nothing of the
	 * call's held (connect_wait). */
	r = connect_async(fd, s, &dst, dlen, addr, len);
	if (r == -EINPROGRESS && !s->nonblock)
		return CONNECT_WAIT;
	if (r != -ENOTSUP)
		return r;
	rs = try_rdma(fd, s, &dst, dlen, &why);
	if (rs < 0) {
		r = failed(fd, &dst, rs, why);
		if (r < 0)
			return r;
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
	connected(fd, fd, s, addr, len, &dst, rs);
	shim_sock_attach(s, SHIM_SK_RDMA, rs);
	shim_sock_ev_changed(s);
	return 0;
}

/*
 * The non-blocking connect.  Its rendezvous runs on the process's connect
 * thread, started by the first one: the thread drives every rendezvous
 * under way at once (one sg_wait over their rsockets: a peer whose RDMA
 * requests go unanswered holds up no other), so an event loop is never
 * stalled by one, and it answers each listener's handshake at once whatever
 * the program does meanwhile (an IB/RoCE listener's service waits for it).
 * One long-lived thread, not one per connect: the QPs it makes are listed
 * under its id by `rdma res show qp` for as long as they live.  Signals are
 * blocked there: the program's handlers run on its own threads.  Each
 * connect holds a reference to s and a duplicate of the fd (the program
 * may close its fd, and the number be reused).
 *
 * Sleepers (poll, epoll, a blocking call) watch the rendezvous's end
 * through settle.c (shim_settle_begin/end mark it).
 */
struct nb_conn {
	struct nb_conn *next;
	struct shim_sock *s;
	int fd, kfd, rs, reuse;
	bool ready; /* atomic: connect() has set s up (connect_async) */
	bool holds; /* the reference to s is held (under inbox_mu) */
	bool done;
	int64_t deadline, retry_at, refused_until;
	long nap_ms;
	struct sockaddr_storage dst, rdst, src, ua;
	socklen_t dlen, srclen, ulen;
	struct sg_sockopts opts; /* as the rendezvous began */
};

/* The connect thread's inbox, and the eventfd that tells it of new ones. */
static pthread_mutex_t inbox_mu = PTHREAD_MUTEX_INITIALIZER;
static struct nb_conn *inbox;
static int inbox_efd = -1;
static bool conn_thread_up;
/* A close waiting for the connect thread to let go (conn_last_fd). */
static pthread_cond_t let_go_cv = PTHREAD_COND_INITIALIZER;
#define LET_GO_WAIT_MS 500
/* conn_let_go under way (seq_cst): a close that reads a sock's cthreads
 * 0 outside the lock looks here before it trusts that. */
static int letting_go;

/* The rendezvous ended with rsocket rs: s is an RDMA connection. */
static void settle_rdma(struct nb_conn *c, int rs)
{
	struct shim_sock *s = c->s;
	struct sg_sockopts now;

	connected(c->fd, c->kfd, s, (struct sockaddr *)&c->ua, c->ulen, &c->dst,
		  rs);
	s->connect_pending = true; /* the next connect() says 0 */
	shim_settle_end_rdma(s, rs);
	__atomic_sub_fetch(&shim_rdma_socks, 1, __ATOMIC_RELAXED);
	/* Keepalive the program set while it connected (from now on its
	 * setsockopt forwards it itself; both doing so is harmless). */
	__atomic_thread_fence(__ATOMIC_SEQ_CST);
	now = shim_sock_opts(s);
	if (now.keepalive &&
	    (!c->opts.keepalive || now.keepidle != c->opts.keepidle) &&
	    sg_update_keepalive(rs, &now) == -EBUSY)
		shim_info("fd %d: keepalive set while connecting is not on "
			  "its RDMA connection (rsockets' service was busy)",
			  c->fd);
}

/*
 * The kernel's connect for c's socket, never blocking the connect thread:
 * a program that made the socket blocking meanwhile waits in the shim for
 * the connect to end (shim_settle_wait), and in the kernel's connect after
 * that, so the file is non-blocking for this call alone.
 */
static int kernel_connect(int kfd, const struct sockaddr *to, socklen_t len)
{
	int fl = REAL(fcntl)(kfd, F_GETFL), r, e;

	if (fl >= 0 && !(fl & O_NONBLOCK))
		REAL(fcntl)(kfd, F_SETFL, fl | O_NONBLOCK);
	r = REAL(connect)(kfd, to, len);
	e = errno;
	if (fl >= 0 && !(fl & O_NONBLOCK))
		REAL(fcntl)(kfd, F_SETFL, fl);
	errno = e;
	return r;
}

/*
 * Under require, a failed rendezvous leaves the socket as a refused kernel
 * connect does: the kernel's own socket is refused, by a connect to a
 * loopback port that a socket of ours holds without listening.  Every
 * later call then answers exactly as after a refusal (poll IN|OUT|ERR|HUP,
 * SO_ERROR or the first send ECONNREFUSED, then EPIPE, recv 0, connect
 * ECONNABORTED and then a new attempt).  0, or -1 when that could not be
 * done (no loopback, no fd): the caller emulates it (SHIM_SK_FAILED).
 */
static int kernel_refused(int kfd, int family)
{
	struct sockaddr_storage lo = {.ss_family = (sa_family_t)family};
	socklen_t len = family == AF_INET ? sizeof(struct sockaddr_in)
					  : sizeof(struct sockaddr_in6);
	struct pollfd p = {.fd = kfd, .events = POLLOUT};
	int t = (int)REAL(socket)(family, SOCK_STREAM | SOCK_CLOEXEC, 0),
	    r = -1;

	if (t < 0)
		return -1;
	if (family == AF_INET)
		((struct sockaddr_in *)&lo)->sin_addr.s_addr =
		    htonl(INADDR_LOOPBACK);
	else
		((struct sockaddr_in6 *)&lo)->sin6_addr = in6addr_loopback;
	if (REAL(bind)(t, (struct sockaddr *)&lo, len) == 0 &&
	    REAL(getsockname)(t, (struct sockaddr *)&lo, &len) == 0) {
		int k = kernel_connect(kfd, (struct sockaddr *)&lo, len);

		/* on loopback the refusal comes within microseconds */
		if (k < 0 &&
		    (errno == ECONNREFUSED ||
		     (errno == EINPROGRESS && REAL(poll)(&p, 1, 100) == 1 &&
		      (p.revents & POLLERR))))
			r = 0;
		else if (k == 0 || errno == EINPROGRESS) /* never leave it so */
			(void)REAL(connect)(
			    kfd, &(struct sockaddr){.sa_family = AF_UNSPEC},
			    sizeof(struct sockaddr));
	}
	REAL(close)(t);
	return r;
}

/*
 * The rendezvous failed: in auto mode the kernel's connect goes on the same
 * socket and s answers from the kernel (SHIM_SK_DEAD); under require the
 * kernel socket is refused (kernel_refused) and s is an unconnected TCP
 * sock again, which a later connect tries anew.  When the kernel's connect
 * fails at once, or the refusal can't be made, the error is told once by
 * the next call (SHIM_SK_FAILED).  Registrations go to the kernel set.
 */
static void settle_tcp(struct nb_conn *c, int rs, const char *why)
{
	struct shim_sock *s = c->s;
	int err = failed(c->fd, &c->dst, rs, why), kind = SHIM_SK_FAILED;

	if (err < 0) {
		s->fail_kind = SHIM_SK_TCP;
		if (!__atomic_load_n(&s->fdrefs, __ATOMIC_ACQUIRE))
			kind = SHIM_SK_TCP;
		else if (kernel_refused(c->kfd, s->family) == 0) {
			kind = SHIM_SK_TCP;
			__atomic_store_n(&s->refused, true, __ATOMIC_RELAXED);
		} else {
			__atomic_store_n(&s->so_error, -err, __ATOMIC_RELAXED);
		}
	} else {
		s->fail_kind = SHIM_SK_DEAD;
		/* not for a socket the program closed meanwhile */
		if (!__atomic_load_n(&s->fdrefs, __ATOMIC_ACQUIRE)) {
			kind = SHIM_SK_DEAD;
		} else if (kernel_connect(c->kfd, (struct sockaddr *)&c->ua,
					  c->ulen) == 0 ||
			   errno == EINPROGRESS) {
			kind = SHIM_SK_DEAD;
			shim_stat_kernel(c->fd, ERDMA_PATH_TCP, why, -rs,
					 (struct sockaddr *)&c->ua, c->ulen);
		} else {
			__atomic_store_n(&s->so_error, errno, __ATOMIC_RELAXED);
		}
	}
	shim_settle_end(s, kind);
	__atomic_sub_fetch(&shim_rdma_socks, 1, __ATOMIC_RELAXED);
	shim_sock_ev_fell_back(s);
}

/*
 * The connect thread is done with c's socket: its duplicate of the kernel
 * socket closes and its reference goes.  A close() of the socket's last fd
 * that came after the rendezvous ended waits for this (conn_last_fd), and
 * the release is then that close's: the rsocket and its QP (or, after a
 * fallback, the kernel connection: the duplicate held its file) are gone
 * when close() returns, as for any connection, not a moment later on this
 * thread.  So all of it is done under inbox_mu, where that close looks:
 * the count of s's connect references first, s untouched after its
 * reference drops, which it does here unless it is the last one (no close
 * waits then).  A fork's child sees the count and the reference both or
 * neither.
 */
static void conn_let_go(struct nb_conn *c)
{
	struct shim_sock *s = c->s;
	bool last;

	pthread_mutex_lock(&inbox_mu);
	REAL(close)(c->kfd);
	c->kfd = -1;
	__atomic_add_fetch(&letting_go, 1, __ATOMIC_SEQ_CST);
	__atomic_sub_fetch(&s->cthreads, 1, __ATOMIC_SEQ_CST);
	c->holds = false;
	last = !shim_sock_put_unless_last(s);
	__atomic_sub_fetch(&letting_go, 1, __ATOMIC_SEQ_CST);
	pthread_cond_broadcast(&let_go_cv);
	pthread_mutex_unlock(&inbox_mu);
	if (last)
		shim_sock_put(s);
}

/*
 * The last fd of s, which a connect made, closes (sockfd.c), perhaps
 * between the connect thread's end of the rendezvous and conn_let_go:
 * wait for that, so the release is this close's.  What the thread does
 * there waits for nothing on the network: the bound is for a thread
 * descheduled for long, after which the release comes late, as before.
 * Without the lock when no connect of s is left (the common case, and
 * every accepted connection): cthreads read 0 while a let-go is under way
 * could be one between its count and its reference, so letting_go is
 * read after it.  Handlers wait through it (none runs with inbox_mu held,
 * unless SHIM_SIGQ of them already wait) and run once s is put (sockfd.c).
 */
static void conn_last_fd(struct shim_sock *s)
{
	struct timespec dl;
	int cs;

	if (!__atomic_load_n(&s->cthreads, __ATOMIC_SEQ_CST) &&
	    !__atomic_load_n(&letting_go, __ATOMIC_SEQ_CST))
		return;
	/* a cancel inside the wait would leave inbox_mu held */
	pthread_setcancelstate(PTHREAD_CANCEL_DISABLE, &cs);
	shim_sig_hold();
	pthread_mutex_lock(&inbox_mu);
	if (s->cthreads) {
		dl = shim_deadline(CLOCK_MONOTONIC, LET_GO_WAIT_MS);
		while (s->cthreads &&
		       !pthread_cond_clockwait(&let_go_cv, &inbox_mu,
					       CLOCK_MONOTONIC, &dl))
			;
	}
	pthread_mutex_unlock(&inbox_mu);
	shim_sig_unhold();
	pthread_setcancelstate(cs, NULL);
}

/* c's rendezvous ended: r 0 (connected, c->rs) or -errno.  Under
 * require a refusal is tried again for a moment (as connect_rdma does):
 * false then, c stays. */
static bool nb_end(struct nb_conn *c, int r, int64_t now)
{
	if (r < 0 && c->rs >= 0)
		sg_close(c->rs);
	if (r < 0)
		c->rs = -1;
	if (r == -ECONNREFUSED && shim_cfg.mode == SHIM_MODE_REQUIRE &&
	    now + c->nap_ms <= c->refused_until) {
		c->retry_at = now + c->nap_ms;
		c->nap_ms = c->nap_ms < 100 ? c->nap_ms * 2 : 100;
		return false;
	}
	iwarp_unshare_port(c->kfd, c->reuse);
	if (r < 0) {
		note_failure(&c->rdst, r);
		settle_tcp(c, r, "rsocket connect failed");
	} else {
		settle_rdma(c, c->rs);
	}
	conn_let_go(c);
	c->done = true;
	return true;
}

/* Send c's request (again, after a refusal under require). */
static void nb_begin(struct nb_conn *c, int64_t now)
{
	bool done = false;
	int rs;

	c->opts = shim_sock_opts(c->s);
	rs = sg_connect_begin((struct sockaddr *)&c->rdst, c->dlen,
			      c->srclen ? (struct sockaddr *)&c->src : NULL,
			      c->srclen, &c->opts, &done);
	if (rs == -EBUSY && now < c->deadline) {
		/* a listener call holds the service lock: a little later */
		c->retry_at = now + 2;
		return;
	}
	if (rs < 0) {
		nb_end(c, rs, now);
		return;
	}
	c->rs = rs;
	c->deadline = now + (int64_t)shim_cfg.connect_timeout_ms;
	if (done)
		nb_end(c, 0, now);
}

/*
 * The connects in flight (nb_live: the connect thread's, new ones first),
 * finished ones swept out; the soonest deadline or retry (-1: none) in
 * *wake_at.  The list and each kfd change under inbox_mu, which a fork
 * holds: the child closes the duplicates it inherits (shim_connect_fork_
 * reset), which would hold the socket and its port there.
 */
static struct nb_conn *nb_live;

static void nb_sweep(int64_t now, int64_t *wake_at)
{
	struct nb_conn **pp, *c, *dead = NULL;

	pthread_mutex_lock(&inbox_mu);
	while ((c = inbox)) {
		inbox = c->next;
		c->next = nb_live;
		nb_live = c;
	}
	pthread_mutex_unlock(&inbox_mu);
	*wake_at = -1;
	for (c = nb_live; c; c = c->next) {
		if (!__atomic_load_n(&c->ready, __ATOMIC_ACQUIRE))
			continue; /* its connect() is still at it: it wakes us
				   */
		if (!c->done && c->rs < 0 && c->retry_at <= now)
			nb_begin(c, now);
		if (!c->done && c->rs >= 0 && now >= c->deadline)
			nb_end(c, -ETIMEDOUT, now);
		if (c->done)
			continue;
		int64_t at = c->rs >= 0 ? c->deadline : c->retry_at;

		if (*wake_at < 0 || at < *wake_at)
			*wake_at = at;
	}
	pthread_mutex_lock(&inbox_mu);
	for (pp = &nb_live; (c = *pp);) {
		if (c->done) {
			*pp = c->next;
			c->next = dead;
			dead = c;
		} else {
			pp = &c->next;
		}
	}
	pthread_mutex_unlock(&inbox_mu);
	while ((c = dead)) {
		dead = c->next;
		free(c);
	}
}

static void *conn_thread(void *arg)
{
	struct nb_conn **who = NULL, *c;
	struct pollfd *p = NULL;
	int cap = 0;

	(void)arg;
	for (;;) {
		int64_t now = shim_now_ms(), wake_at;
		int n = 1, r, ms;

		nb_sweep(now, &wake_at);
		for (c = nb_live; c; c = c->next)
			n++;
		if (n > cap) {
			struct pollfd *np = realloc(p, (size_t)n * sizeof(*p));
			struct nb_conn **nw =
			    np ? realloc(who, (size_t)n * sizeof(*who)) : NULL;

			if (np)
				p = np;
			if (!nw) { /* look again in a moment */
				nanosleep(&(struct timespec){0, 10000000L},
					  NULL);
				continue;
			}
			who = nw;
			cap = n;
		}
		n = 0;
		p[n++] = (struct pollfd){.fd = inbox_efd, .events = POLLIN};
		for (c = nb_live; c; c = c->next)
			if (__atomic_load_n(&c->ready, __ATOMIC_ACQUIRE) &&
			    c->rs >= 0) {
				who[n] = c;
				p[n++] = (struct pollfd){.fd = c->rs,
							 .events = POLLOUT};
			}
		ms =
		    wake_at < 0 ? -1 : (int)(wake_at > now ? wake_at - now : 0);
		r = sg_wait(p, (nfds_t)n, ms);
		if (r < 0) /* not expected: do not spin on it */
			nanosleep(&(struct timespec){0, 1000000L}, NULL);
		if (r <= 0)
			continue;
		if (p[0].revents) {
			uint64_t v;

			(void)REAL(read)(inbox_efd, &v, sizeof(v));
		}
		now = shim_now_ms();
		for (int i = 1; i < n; i++) {
			c = who[i];
			r = sg_connect_result(c->rs, p[i].revents);
			if (r != -EINPROGRESS)
				nb_end(c, r, now);
		}
	}
	return NULL;
}

/* The connect thread, started once: 0 or -errno.  Under inbox_mu. */
static int conn_thread_start_locked(void)
{
	int r;

	if (conn_thread_up)
		return 0;
	if (inbox_efd < 0)
		inbox_efd = (int)REAL(syscall)(SYS_eventfd2, 0,
					       EFD_CLOEXEC | EFD_NONBLOCK);
	if (inbox_efd < 0)
		return -errno;
	r = shim_spawn(conn_thread, NULL);
	if (r < 0)
		return r;
	conn_thread_up = true;
	return 0;
}

/*
 * inbox_mu in a program's thread: its handlers wait meanwhile (and run at
 * connect_async's end), so none that closes a connection can come to
 * conn_last_fd, which takes the lock, on a thread that holds it.
 */
static void inbox_lock_prog(void)
{
	shim_sig_hold();
	pthread_mutex_lock(&inbox_mu);
}

static void inbox_unlock_prog(void)
{
	pthread_mutex_unlock(&inbox_mu);
	shim_sig_unhold();
}

/* EINPROGRESS with the rendezvous handed to the connect thread, or
 * -ENOTSUP: connect_slow does it all (not eligible: it falls back and
 * says why; no thread). */
static int connect_async(int fd, struct shim_sock *s,
			 const struct sockaddr_storage *dst, socklen_t dlen,
			 const struct sockaddr *addr, socklen_t len)
{
	struct nb_conn *c = calloc(1, sizeof(*c));
	const char *why;
	int r;

	if (!c)
		return -ENOTSUP;
	/* connect_slow says why it falls back */
	if (rdma_eligible(dst, &c->rdst, &why) < 0 || sg_fds_check() < 0)
		goto sync;
	inbox_lock_prog();
	r = conn_thread_start_locked();
	inbox_unlock_prog();
	if (r < 0)
		goto sync;
	if (reserve_port(fd, s, dst, &c->src, &c->srclen) < 0)
		c->srclen = 0;
	c->s = s;
	c->fd = fd;
	c->rs = -1;
	c->dst = *dst;
	c->dlen = dlen;
	memcpy(&c->ua, addr, len);
	c->ulen = len;
	c->nap_ms = 5;
	c->refused_until = shim_now_ms() + REFUSED_RETRY_MS;
	c->deadline = shim_now_ms() + (int64_t)shim_cfg.connect_timeout_ms;
	/* The duplicate is listed at once, not ready yet: a fork from
	 * another thread meanwhile must find it (shim_connect_fork_reset). */
	inbox_lock_prog();
	c->kfd = REAL(fcntl)(fd, F_DUPFD_CLOEXEC, 0);
	if (c->kfd >= 0) {
		shim_sock_get(s); /* the connect thread's (conn_let_go) */
		__atomic_add_fetch(&s->cthreads, 1, __ATOMIC_SEQ_CST);
		c->holds = true;
		c->next = inbox;
		inbox = c;
	}
	inbox_unlock_prog();
	if (c->kfd < 0)
		goto sync;
	c->reuse = iwarp_share_port(c->kfd);
	__atomic_add_fetch(&shim_rdma_socks, 1, __ATOMIC_RELAXED);
	shim_settle_begin(s);
	shim_sock_ev_changed(s); /* its registrations are emulated */
	__atomic_store_n(&c->ready, true, __ATOMIC_RELEASE);
	(void)eventfd_write(inbox_efd, 1);
	shim_sig_run_if_free();
	return -EINPROGRESS;
sync:
	free(c);
	shim_sig_run_if_free();
	return -ENOTSUP;
}

/* In a fork child: a connect under way is the parent's (its thread is
 * not here): the child's fd answers from the kernel. */
void shim_connect_fork_child(struct shim_sock *s)
{
	shim_settle_forget(s);
	s->kind = SHIM_SK_DEAD;
	__atomic_sub_fetch(&shim_rdma_socks, 1, __ATOMIC_RELAXED);
}

/* A fork child: the parent's connect thread is not here to let go.  Its
 * reference stays (a release here would close the parent's rsocket), but
 * no close in the child waits for it. */
static void close_dups(struct nb_conn *c)
{
	for (; c; c = c->next) {
		if (c->kfd >= 0)
			REAL(close)(c->kfd);
		if (c->holds)
			__atomic_sub_fetch(&c->s->cthreads, 1,
					   __ATOMIC_RELAXED);
	}
}

static void shim_connect_fork_prepare(void)
{
	pthread_mutex_lock(&inbox_mu);
}

static void shim_connect_fork_parent(void)
{
	pthread_mutex_unlock(&inbox_mu);
}

static void shim_connect_fork_reset(void)
{
	/* the parent's connects and thread are not here: nor are their
	 * duplicates of the program's sockets (held since before_fork) */
	close_dups(inbox);
	close_dups(nb_live);
	pthread_mutex_init(&inbox_mu, NULL);
	pthread_cond_init(&let_go_cv, NULL);
	inbox = nb_live = NULL;
	conn_thread_up = false;
	if (inbox_efd >= 0)
		REAL(close)(inbox_efd);
	inbox_efd = -1;
}

/* A fork child's connect under way (fork.c asks the kinds' table). */
static const struct shim_kind_ops connecting_ops = {
    .fork_child = shim_connect_fork_child,
};

/* What a connect's rendezvous ends as, on RDMA or the kernel's own
 * connection: its last close waits for the thread (conn_last_fd). */
static const struct shim_kind_ops connected_ops = {
    .last_fd = conn_last_fd,
};

static void shim_connect_start(void)
{
	shim_kind_set_ops(SHIM_SK_CONNECTING, &connecting_ops);
	shim_kind_set_ops(SHIM_SK_RDMA, &connected_ops);
	shim_kind_set_ops(SHIM_SK_DEAD, &connected_ops);
}
SHIM_STARTUP(CONNECT, .start = shim_connect_start,
	     .prepare = shim_connect_fork_prepare,
	     .parent = shim_connect_fork_parent,
	     .child = shim_connect_fork_reset);

/*
 * After a refusal under require (kernel_refused) the kernel's socket says
 * what follows: the refusal's error to the connect that collects it (a
 * new connect after that tries anew).  1: none was pending.  Not
 * cancellable: the answer is taken before the call that tells it.
 */
static int collect_refusal(int fd, struct shim_sock *s,
			   const struct sockaddr *addr, socklen_t len)
{
	int r, cs;

	if (!__atomic_exchange_n(&s->refused, false, __ATOMIC_RELAXED))
		return 1;
	pthread_setcancelstate(PTHREAD_CANCEL_DISABLE, &cs);
	r = REAL(connect)(fd, addr, len) < 0 ? -errno : 0;
	pthread_setcancelstate(cs, NULL);
	return r;
}

/* connect with a reference to s held; 0, -errno, 1: make the call
 * again (the connect under way ended), or CONNECT_WAIT. */
static int connect_held(int fd, struct shim_sock *s,
			const struct sockaddr *addr, socklen_t len)
{
	int kind = __atomic_load_n(&s->kind, __ATOMIC_ACQUIRE), r;

	if (kind == SHIM_SK_FAILED) {
		/* the failed connect's error first, as the kernel's */
		r = shim_sock_take_failure(s);
		if (r)
			return -r;
		return 1;
	}
	if (kind == SHIM_SK_RDMA || kind == SHIM_SK_CONNECTING ||
	    kind == SHIM_SK_LISTEN) {
		struct sockaddr_storage ua;
		/* The kernel checks the address before the socket's state. */
		r = copy_user_addr(addr, len, &ua);

		if (!r && len < sizeof(sa_family_t))
			r = -EINVAL;
		if (r < 0)
			return r;
	}
	if (kind == SHIM_SK_CONNECTING) {
		/* as the kernel's connecting socket: EALREADY, or a wait */
		return s->nonblock ? -EALREADY : CONNECT_WAIT;
	}
	if (kind == SHIM_SK_RDMA) {
		/* After EINPROGRESS the kernel answers the next connect with
		 * 0 (the completion), and EISCONN from then on. */
		if (__atomic_exchange_n(&s->connect_pending, false,
					__ATOMIC_RELAXED))
			return 0;
		return -EISCONN;
	}
	if (kind == SHIM_SK_LISTEN)
		return -EISCONN; /* what Linux says for a listening socket */
	if (kind == SHIM_SK_TCP && s->twin)
		/* a listener adopted across exec (handover.c), not listened
		 * on again yet: the kernel's listening socket answers */
		return REAL(connect)(fd, addr, len) < 0 ? -errno : 0;
	if (kind == SHIM_SK_DEAD)
		return REAL(connect)(fd, addr, len) < 0 ? -errno : 0;
	r = collect_refusal(fd, s, addr, len);
	return r != 1 ? r : connect_slow(fd, s, addr, len);
}

/* A cancel in connect_wait: its edge goes with it (settle.c puts s). */
static void wait_cancelled(void *arg)
{
	(void)arg;
	shim_sig_edge_leave();
}

/* connect_wait's wait for the rendezvous's end (a cancellation point). */
static int wait_settled(struct shim_sock *s, int ms)
{
	int r;

	pthread_cleanup_push(wait_cancelled, NULL);
	do
		r = shim_settle_wait(s, ms);
	while (shim_wait_restarts(r, ms));
	pthread_cleanup_pop(0);
	return r;
}

/* A cancel in kernel_answer: connect_wait's reference and edge. */
static void answer_cancelled(void *s)
{
	shim_sock_put(s);
	shim_sig_edge_leave();
}

/*
 * The kernel's own connect on fd (SHIM_SK_DEAD: the connect thread handed
 * it there when the rendezvous failed): wait until it has an answer, until
 * end (0: no limit), handlers waiting as in the glue's sleep.  0 with what
 * poll saw in *ev, -EAGAIN (time is up) or -EINTR.
 */
static int kernel_answer(int fd, struct shim_sock *s, int64_t end, short *ev)
{
	struct pollfd p = {.fd = fd, .events = POLLOUT};
	int64_t now = shim_now_ms();
	int r;

	if (end && now >= end)
		return -EAGAIN;
	pthread_cleanup_push(answer_cancelled, s);
	r = shim_sig_poll(&p, 1, end ? (int)(end - now) : -1);
	pthread_cleanup_pop(0);
	*ev = p.revents;
	return r > 0 ? 0 : r == 0 ? -EAGAIN : r;
}

/* 10 ms, handlers waiting (-EINTR), a cancellation point as the wait. */
static int answer_nap(struct shim_sock *s)
{
	int r;

	pthread_cleanup_push(answer_cancelled, s);
	r = shim_sig_poll(NULL, 0, 10);
	pthread_cleanup_pop(0);
	return r;
}

/*
 * The answer of the kernel's connect the connect thread made on fd after a
 * failed rendezvous (SHIM_SK_DEAD), as the blocking call's: wait for it
 * (kernel_answer), then collect it with a connect that does not wait, which
 * leaves the kernel socket as its own blocking call would (connected, or
 * unconnected with the error told).  Only a connect still under way is
 * collected so: a socket closed with no error pending was answered to
 * another call (ECONNABORTED, the kernel's word to a second waiter), and a
 * connect there would start a new handshake.  fd is read again around the
 * wait: if the program closed it meanwhile (its number maybe another
 * file's now), EBADF.
 */
static int fallback_answer(int fd, struct shim_sock *s,
			   const struct sockaddr *addr, socklen_t len,
			   int64_t end)
{
	struct tcp_info ti;
	socklen_t tl;
	short ev = 0;
	int r, cs;

	for (;;) {
		if (shim_fd_get(fd) != s)
			return -EBADF;
		r = kernel_answer(fd, s, end, &ev);
		if (r < 0)
			return r;
		if (shim_fd_get(fd) != s)
			return -EBADF;
		tl = sizeof(ti);
		if (REAL(getsockopt)(fd, IPPROTO_TCP, TCP_INFO, &ti, &tl) < 0)
			return -errno;
		if (ti.tcpi_state != TCP_SYN_SENT &&
		    ti.tcpi_state != TCP_SYN_RECV)
			break;
		/* POLLERR from the error queue (IP_RECVERR) while the
		 * handshake goes on: look again in a moment */
		r = answer_nap(s);
		if (r < 0)
			return r;
	}
	if (ti.tcpi_state == TCP_CLOSE && !(ev & POLLERR))
		return -ECONNABORTED;
	pthread_setcancelstate(PTHREAD_CANCEL_DISABLE, &cs);
	r = kernel_connect(fd, addr, len) < 0 ? -errno : 0;
	pthread_setcancelstate(cs, NULL);
	if (r == -EISCONN)
		r = 0; /* collected by another call: connected */
	if (r == -ECONNREFUSED || r == -ETIMEDOUT || r == -EHOSTUNREACH ||
	    r == -ENETUNREACH)
		forget_peer_of(addr, len);
	return r;
}

/*
 * s's rendezvous ended while a blocking connect waited for it: the answer
 * of the call, from s's own state (not connect_held's, which could start a
 * connect of its own): 0, -errno, or 1 (make the call again: a new connect
 * of another thread is under way).
 */
static int settled_answer(int fd, struct shim_sock *s,
			  const struct sockaddr *addr, socklen_t len,
			  int64_t end)
{
	int r;

	switch (__atomic_load_n(&s->kind, __ATOMIC_ACQUIRE)) {
	case SHIM_SK_RDMA:
		/* every call blocked on it says 0, as the kernel's */
		__atomic_store_n(&s->connect_pending, false, __ATOMIC_RELAXED);
		return 0;
	case SHIM_SK_DEAD:
		return fallback_answer(fd, s, addr, len, end);
	case SHIM_SK_FAILED:
		r = shim_sock_take_failure(s);
		return r ? -r : -ECONNABORTED; /* told to another call */
	case SHIM_SK_TCP:
		/* refused under require: the kernel socket is, too */
		if (shim_fd_get(fd) != s)
			return -EBADF;
		r = collect_refusal(fd, s, addr, len);
		return r == 1 ? -ECONNABORTED : r; /* 1: told to another call */
	}
	return 1;
}

/*
 * A blocking connect of s while its rendezvous runs on the connect thread:
 * the kernel's connecting socket waits, for at most SO_SNDTIMEO (then
 * EINPROGRESS), also through a fallback's own TCP handshake.  A signal
 * ends the wait, not the rendezvous: its handler runs once s's reference
 * is put (the edge), and 1 says "the kernel would restart the call"
 * (SA_RESTART, no timeout); otherwise EINTR, and the connect goes on (the
 * next call waits for it, a non-blocking one says EALREADY).  Puts s's
 * reference; 0, -errno, or 1 (make the call again).
 */
static int connect_wait(int fd, struct shim_sock *s,
			const struct sockaddr *addr, socklen_t len)
{
	int ms = shim_tv_ms(&s->sndtimeo), r;
	int64_t end = ms >= 0 ? shim_now_ms() + ms : 0;

	shim_sig_edge_enter();
	r = wait_settled(s, ms);
	if (r == 0)
		r = settled_answer(fd, s, addr, len, end);
	shim_sock_put(s);
	if (shim_sig_edge_leave() && shim_sig_deliver(r, ms >= 0))
		return 1;
	return r == -EAGAIN ? -EINPROGRESS : r;
}

static void put_cancelled(void *s)
{
	shim_sock_put(s);
}

/* connect_held, where a cancel (in the kernel's connect of an inherited
 * one under way, SHIM_SK_DEAD) puts s. */
static int connect_held_cancellable(int fd, struct shim_sock *s,
				    const struct sockaddr *addr, socklen_t len)
{
	int r;

	pthread_cleanup_push(put_cancelled, s);
	r = connect_held(fd, s, addr, len);
	pthread_cleanup_pop(0);
	return r;
}

/* connect on a sock of ours: out of line, so that the kernel-fd path
 * stays short (connect_held is large).  A restart is a loop, as the
 * kernel's restart of the call: with the fd as it is by then. */
static __attribute__((noinline)) int connect_ours(int fd, struct shim_sock *s,
						  const struct sockaddr *addr,
						  socklen_t len)
{
	int r;

	shim_testcancel(); /* a pending cancel: before anything is done */
	for (;;) {
		/* a close() came first: the fd is another's now */
		if (unlikely(!shim_sock_tryget(
			fd, s, ~SHIM_KINDS_WITH(SHIM_KF_KERNEL))))
			return connect(fd, addr, len);
		r = connect_held_cancellable(fd, s, addr, len);
		if (r == CONNECT_WAIT)
			r = connect_wait(fd, s, addr, len);
		else
			shim_sock_put(s);
		if (r != 1)
			return (int)shim_ret(r);
		s = shim_fd_get(fd);
		if (!s || shim_kind_is(s, SHIM_KF_KERNEL))
			return connect(fd, addr, len);
	}
}

SHIM_EXPORT int connect(int fd, __CONST_SOCKADDR_ARG addr, socklen_t len)
{
	struct shim_sock *s = shim_fd_get(fd);

	if (likely(!s || shim_kind_is(s, SHIM_KF_KERNEL))) {
		if (unlikely(shim_stat_kconnect_on && !s))
			return shim_stat_kconnect(fd, addr.__sockaddr__, len);
		return REAL(connect)(fd, addr, len);
	}
	return connect_ours(fd, s, addr.__sockaddr__, len);
}
