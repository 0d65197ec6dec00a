/* SPDX-License-Identifier: MIT */
/*
 * Socket options, fcntl and ioctl.
 *
 * The program's fd is a real kernel socket, so every option is applied to
 * it first: getsockopt then answers SO_TYPE, SO_DOMAIN, SO_REUSEPORT... from
 * the kernel, and a fallback connection already carries its options.  On an
 * RDMA connection the options rsockets understands are forwarded too.
 *
 * Options the RDMA path cannot honour are refused on every socket that may
 * go over RDMA, with the errno of a kernel that lacks them, so programs
 * take their fallback path from the start (gRPC: TCP_INQ, SO_ZEROCOPY).
 */
#include "shim.h"
#include "glue.h"
#include "io_int.h"
#include "log.h"
#include "sock.h"
#include "sockopt.h"
#include "sockfd.h"

#include <linux/sockios.h>
#include <net/if.h>
#include <netinet/tcp.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>

#ifndef TCP_INQ
#define TCP_INQ 36
#endif
#ifndef SO_ZEROCOPY
#define SO_ZEROCOPY 60
#endif
#ifndef TCP_ZEROCOPY_RECEIVE
#define TCP_ZEROCOPY_RECEIVE 35
#endif
#ifndef TCP_ULP
#define TCP_ULP 31
#endif

/* The kinds whose options are remembered for an rsocket (kind.h). */
#define MAYBE_RDMA SHIM_KINDS_WITH(SHIM_KF_OPTS)

static bool maybe_rdma(const struct shim_sock *s)
{
	return s && shim_kind_is(s, SHIM_KF_OPTS);
}

static bool refused(int level, int name)
{
	if (level == IPPROTO_TCP)
		return name == TCP_INQ || name == TCP_ZEROCOPY_RECEIVE ||
		       name == TCP_ULP || name == TCP_FASTOPEN_CONNECT;
	if (level == SOL_SOCKET)
		return name == SO_ZEROCOPY;
	return false;
}

#ifndef TCP_AO_ADD_KEY
#define TCP_AO_ADD_KEY 38 /* Linux 6.7 */
#endif
#ifndef SO_BINDTOIFINDEX
#define SO_BINDTOIFINDEX 62
#endif

const char *shim_kernel_guard(int fd)
{
	char dev[IFNAMSIZ];
	socklen_t l = sizeof(dev);

	if (REAL(getsockopt)(fd, SOL_SOCKET, SO_BINDTODEVICE, dev, &l) == 0 &&
	    l > 0 && dev[0])
		return "SO_BINDTODEVICE";
	l = 0; /* the filter's length, in instructions */
	if (REAL(getsockopt)(fd, SOL_SOCKET, SO_GET_FILTER, NULL, &l) == 0 &&
	    l > 0)
		return "SO_ATTACH_FILTER";
	return NULL;
}

/*
 * The options that protect a TCP port (a listener's: socket.c,
 * listen_guarded; a client's: connect.c): the name of the one set, or NULL.  A
 * device binding that was just cleared (an empty name, index 0) protects
 * nothing.
 */
static const char *guard_opt(int fd, int level, int name)
{
	if (level == IPPROTO_TCP)
		return name == TCP_MD5SIG	? "TCP_MD5SIG"
		       : name == TCP_MD5SIG_EXT ? "TCP_MD5SIG_EXT"
		       : name == TCP_AO_ADD_KEY ? "TCP_AO"
						: NULL;
	if (level != SOL_SOCKET)
		return NULL;
	switch (name) {
	case SO_ATTACH_FILTER:
		return "SO_ATTACH_FILTER";
	case SO_ATTACH_BPF:
		return "SO_ATTACH_BPF";
	case SO_ATTACH_REUSEPORT_CBPF:
		return "SO_ATTACH_REUSEPORT_CBPF";
	case SO_ATTACH_REUSEPORT_EBPF:
		return "SO_ATTACH_REUSEPORT_EBPF";
	case SO_BINDTODEVICE:
	case SO_BINDTOIFINDEX:
		return shim_kernel_guard(fd) ? "SO_BINDTODEVICE" : NULL;
	}
	return NULL;
}

/* The keepalive options, in struct shim_keepalive's order. */
static const struct {
	int level, name;
} ka_opt[] = {
    {SOL_SOCKET, SO_KEEPALIVE},	     {IPPROTO_TCP, TCP_KEEPIDLE},
    {IPPROTO_TCP, TCP_KEEPINTVL},    {IPPROTO_TCP, TCP_KEEPCNT},
    {IPPROTO_TCP, TCP_USER_TIMEOUT},
};
enum { KA_ON, KA_IDLE, KA_INTVL, KA_CNT, KA_UTO };

static int ka_index(int level, int name)
{
	for (int i = 0; i < (int)ARRAY_SIZE(ka_opt); i++)
		if (ka_opt[i].level == level && ka_opt[i].name == name)
			return i;
	return -1;
}

/* Option i of s as set, or def.  (Atomic: the connect thread reads them
 * while the program may set them.) */
static int ka_get(const struct shim_sock *s, int i, int def)
{
	unsigned char set = __atomic_load_n(&s->ka.set, __ATOMIC_ACQUIRE);

	return set & 1u << i ? __atomic_load_n(&s->ka.val[i], __ATOMIC_RELAXED)
			     : def;
}

static void ka_put(struct shim_sock *s, int i, int v)
{
	__atomic_store_n(&s->ka.val[i], v, __ATOMIC_RELAXED);
	__atomic_or_fetch(&s->ka.set, (unsigned char)(1u << i),
			  __ATOMIC_RELEASE);
}

/* The kernel's defaults for what was not set (net.ipv4.tcp_keepalive_intvl
 * and _probes as shipped; a host's own sysctls are not read). */
#define KA_INTVL_DEFAULT 75
#define KA_CNT_DEFAULT 9

struct sg_sockopts shim_sock_opts(const struct shim_sock *s)
{
	bool on = ka_get(s, KA_ON, 0) != 0;
	int uto = ka_get(s, KA_UTO, 0);
	unsigned int silence =
	    uto > 0 ? (unsigned int)uto
	    : on    ? (unsigned int)(ka_get(s, KA_INTVL, KA_INTVL_DEFAULT) *
				     ka_get(s, KA_CNT, KA_CNT_DEFAULT)) *
		       1000u
		 : 0;

	return (struct sg_sockopts){
	    .snd = s->sndbuf,
	    .rcv = s->rcvbuf,
	    .keepalive = on,
	    .keepidle = ka_get(s, KA_IDLE, 0),
	    .bounded = on || uto > 0,
	    .silence_ms = silence,
	};
}

/* A buffer size the listener's socket had set, onto an accepted one's new
 * kernel socket: the FORCE form gives back exactly the listener's value
 * (kernel_buf halved it); without CAP_NET_ADMIN the plain one does, as the
 * listener's was clamped the same way. */
static void inherit_buf(int nfd, bool snd, unsigned int v)
{
	int iv = (int)v;

	if (!v)
		return;
	if (REAL(setsockopt)(nfd, SOL_SOCKET,
			     snd ? SO_SNDBUFFORCE : SO_RCVBUFFORCE, &iv,
			     sizeof(iv)) < 0)
		(void)REAL(setsockopt)(nfd, SOL_SOCKET,
				       snd ? SO_SNDBUF : SO_RCVBUF, &iv,
				       sizeof(iv));
}

/*
 * Options that only read back on an RDMA connection (rsockets sends at
 * once, has no urgent data, no TOS of its own) and that the kernel's
 * accepted socket has from its listener: copied, from the listener's
 * kernel socket, only when the program set them there.
 */
static const struct {
	int level, name;
} inh_opt[] = {
    {IPPROTO_TCP, TCP_NODELAY},	 {SOL_SOCKET, SO_LINGER},
    {SOL_SOCKET, SO_OOBINLINE},	 {IPPROTO_IP, IP_TOS},
    {IPPROTO_IPV6, IPV6_TCLASS},
};

static void inh_mark(struct shim_sock *s, int level, int name)
{
	for (int i = 0; i < (int)ARRAY_SIZE(inh_opt); i++)
		if (inh_opt[i].level == level && inh_opt[i].name == name)
			__atomic_or_fetch(&s->inh, (unsigned char)(1u << i),
					  __ATOMIC_RELAXED);
}

/* lfd: the listener's fd, still ls's (a close and a new socket on the
 * number would give another socket's options). */
static void inh_copy(int nfd, const struct shim_sock *ls, int lfd)
{
	unsigned char set = __atomic_load_n(&ls->inh, __ATOMIC_RELAXED);

	for (int i = 0; set && i < (int)ARRAY_SIZE(inh_opt); i++) {
		struct linger v; /* the largest of them */
		socklen_t l = sizeof(v);

		if (!(set & 1u << i) || shim_fd_get(lfd) != ls ||
		    REAL(getsockopt)(lfd, inh_opt[i].level, inh_opt[i].name, &v,
				     &l) < 0)
			continue;
		(void)REAL(setsockopt)(nfd, inh_opt[i].level, inh_opt[i].name,
				       &v, l);
	}
}

void shim_sock_inherit(struct shim_sock *ns, int nfd,
		       const struct shim_sock *ls, int lfd)
{
	inh_copy(nfd, ls, lfd);
	/* The kernel's accepted socket is a copy of its listener's: the
	 * buffer sizes the program set there read back on it (the rsocket
	 * has them from the door, sg_listen). */
	ns->sndbuf = ls->sndbuf;
	ns->rcvbuf = ls->rcvbuf;
	inherit_buf(nfd, true, ls->sndbuf);
	inherit_buf(nfd, false, ls->rcvbuf);
	/* and its timeouts, which bound the new connection's calls (and
	 * read back) as on the kernel's copy */
	ns->rcvtimeo = ls->rcvtimeo;
	ns->sndtimeo = ls->sndtimeo;
	if (ls->rcvtimeo.tv_sec || ls->rcvtimeo.tv_usec)
		(void)REAL(setsockopt)(nfd, SOL_SOCKET, SO_RCVTIMEO,
				       &ls->rcvtimeo, sizeof(ls->rcvtimeo));
	if (ls->sndtimeo.tv_sec || ls->sndtimeo.tv_usec)
		(void)REAL(setsockopt)(nfd, SOL_SOCKET, SO_SNDTIMEO,
				       &ls->sndtimeo, sizeof(ls->sndtimeo));
	for (int i = 0; i < (int)ARRAY_SIZE(ka_opt); i++) {
		int v = ka_get(ls, i, -1);

		if (v == -1)
			continue;
		ka_put(ns, i, v);
		(void)REAL(setsockopt)(nfd, ka_opt[i].level, ka_opt[i].name, &v,
				       sizeof(v));
	}
}

/*
 * A listener's keepalive options as its kernel socket has them at listen():
 * set before an exec, or by whoever passed the socket on, they are
 * inherited all the same (read only when keepalive or a user timeout is
 * on: 2 calls per listen otherwise).
 */
static int ka_read(int fd, int i)
{
	socklen_t l = sizeof(int);
	int v = 0;

	if (REAL(getsockopt)(fd, ka_opt[i].level, ka_opt[i].name, &v, &l) < 0)
		return 0;
	return v;
}

void shim_sock_ka_load(struct shim_sock *s, int fd)
{
	int on = ka_read(fd, KA_ON), uto = ka_read(fd, KA_UTO);

	if (!on && !uto)
		return;
	for (int i = 0; i < (int)ARRAY_SIZE(ka_opt); i++)
		ka_put(s, i,
		       i == KA_ON    ? on
		       : i == KA_UTO ? uto
				     : ka_read(fd, i));
}

/*
 * The buffer size the kernel gave fd's socket for SO_SNDBUF/SO_RCVBUF or
 * their FORCE forms (which it lets only CAP_NET_ADMIN use): min(val,
 * net.core.wmem_max/rmem_max) doubled, or the FORCE value doubled, never
 * under its minimum.  Halved: rsockets doubles what it is given (opts.c),
 * so an rsocket pins what the kernel would let the socket hold -- never the
 * program's value as asked.  0 when it can't be read.
 */
static unsigned int kernel_buf(int fd, bool snd)
{
	socklen_t l = sizeof(int);
	int v = 0;

	if (REAL(getsockopt)(fd, SOL_SOCKET, snd ? SO_SNDBUF : SO_RCVBUF, &v,
			     &l) < 0 ||
	    v <= 0)
		return 0;
	return (unsigned int)v / 2;
}

static bool buf_opt(int level, int name)
{
	return level == SOL_SOCKET &&
	       (name == SO_SNDBUF || name == SO_RCVBUF ||
		name == SO_SNDBUFFORCE || name == SO_RCVBUFFORCE);
}

#ifndef SO_RCVTIMEO_NEW
#define SO_RCVTIMEO_NEW 66
#define SO_SNDTIMEO_NEW 67
#endif

/* SO_RCVTIMEO/SO_SNDTIMEO (a struct timeval), or their _NEW forms (the
 * kernel's pair of 64-bit counts, whatever time_t is): the same timeout
 * to the kernel, so the same to the RDMA calls.  (The kernel took len.) */
static void remember_timeo(struct shim_sock *s, int name, const void *val,
			   socklen_t len)
{
	bool rcv = name == SO_RCVTIMEO || name == SO_RCVTIMEO_NEW;
	struct timeval *tv = rcv ? &s->rcvtimeo : &s->sndtimeo;
	int64_t v[2];

	if (name == SO_RCVTIMEO || name == SO_SNDTIMEO) {
		if (len >= sizeof(*tv))
			memcpy(tv, val, sizeof(*tv));
	} else if ((name == SO_RCVTIMEO_NEW || name == SO_SNDTIMEO_NEW) &&
		   len >= sizeof(v)) {
		memcpy(v, val, sizeof(v));
		tv->tv_sec = (time_t)v[0];
		tv->tv_usec = (suseconds_t)v[1];
	}
}

static void remember(struct shim_sock *s, int fd, int level, int name,
		     const void *val, socklen_t len)
{
	int k = ka_index(level, name);

	inh_mark(s, level, name);
	if (k >= 0 && val && len >= sizeof(int)) {
		int v;

		memcpy(&v, val, sizeof(v));
		ka_put(s, k, v);
	}
	if (level != SOL_SOCKET || !val)
		return;
	/* Buffer sizes reach the rsocket at connect/listen (sg_bufs), as
	 * the kernel clamped them. */
	if (buf_opt(level, name)) {
		bool snd = name == SO_SNDBUF || name == SO_SNDBUFFORCE;
		unsigned int v = kernel_buf(fd, snd);

		if (v)
			*(snd ? &s->sndbuf : &s->rcvbuf) = v;
	}
	remember_timeo(s, name, val, len);
}

/* Forward what rsockets honours on a live connection; the rest is kept by
 * the kernel socket alone (harmless: the QP has its own flow control).
 * Keepalive: see sg_setsockopt (rsocket_glue/opts.c). */
static void forward(struct shim_sock *s, int level, int name, const void *val,
		    socklen_t len)
{
	if ((level == IPPROTO_TCP &&
	     (name == TCP_NODELAY || name == TCP_KEEPIDLE)) ||
	    (level == SOL_SOCKET &&
	     (name == SO_LINGER || name == SO_KEEPALIVE)))
		sg_setsockopt(s->rs, level, name, val, len);
	if (ka_index(level, name) >= 0) /* a dead peer is to be found */
		sg_set_bounded(s->rs, shim_sock_opts(s).bounded);
}

/* Record protection `what` (a static name) on s, a listener or a socket
 * that may become one or connect, and tell its kind (once). */
static void guard_set(struct shim_sock *s, const char *what)
{
	const char *none = NULL;
	shim_kind_fn *fn;

	if (!__atomic_compare_exchange_n(&s->guard, &none, what, false,
					 __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE))
		return; /* said already */
	fn = shim_kind_ops(shim_kind(s))->guarded;
	if (fn)
		fn(s);
}

SHIM_EXPORT int setsockopt(int fd, int level, int name, const void *val,
			   socklen_t len)
{
	struct shim_sock *s = shim_fd_get(fd);
	int r;

	if (likely(!maybe_rdma(s)))
		return REAL(setsockopt)(fd, level, name, val, len);
	if (refused(level, name)) {
		errno = ENOPROTOOPT;
		return -1;
	}
	if (unlikely(!shim_sock_tryget(fd, s,
				       MAYBE_RDMA))) /* a close() came first */
		return setsockopt(fd, level, name, val, len);
	r = REAL(setsockopt)(fd, level, name, val, len);
	if (r == 0) {
		const char *g = guard_opt(fd, level, name);

		if (g && !shim_kind_is(s, SHIM_KF_CONN))
			guard_set(s, g);
		remember(s, fd, level, name, val, len);
		if (shim_kind_is(s, SHIM_KF_CONN))
			forward(s, level, name, val, len);
	}
	shim_sock_put(s); /* keeps errno */
	return r;
}

/* SO_ERROR of an RDMA connection (conn) or of a failed connect: the
 * pending error, cleared. */
static int so_error(struct shim_sock *s, bool conn, void *val, socklen_t *len)
{
	int err;

	if (shim_bad_ptr(len) || (*len && shim_bad_ptr(val)))
		return -EFAULT;
	if ((int)*len < 0)
		return -EINVAL; /* the kernel reads it as an int */
	if (*len > sizeof(err))
		*len = sizeof(err);
	if (conn && !__atomic_load_n(&s->so_error, __ATOMIC_ACQUIRE))
		(void)shim_rdma_timed_out(s); /* a timeout nothing saw yet */
	err = __atomic_exchange_n(&s->so_error, 0, __ATOMIC_RELAXED);
	memcpy(val, &err, *len);
	return 0;
}

/* Has the peer ended its side (its FIN or its close)?  rsockets shows a
 * FIN only behind the data before it: a peek that finds EOF, or HUP. */
static bool peer_ended(struct shim_sock *s)
{
	struct pollfd p = {.fd = s->rs, .events = POLLIN};
	char c;

	if (sg_poll(&p, 1, 0) < 0)
		return false;
	if (p.revents & (POLLHUP | POLLERR))
		return true;
	return (p.revents & POLLIN) &&
	       sg_recv(s->rs, &c, 1, MSG_PEEK | MSG_DONTWAIT) == 0;
}

/*
 * tcpi_state of an RDMA connection, from its own marks, as tcp_info would
 * show it once the FINs are acknowledged (at once on an RDMA path): a reset
 * or a failed transport is CLOSE; our SHUT_WR is FIN_WAIT2, and CLOSE once
 * the peer's FIN is in too (its TIME_WAIT, or LAST_ACK acknowledged, leaves
 * the program's socket CLOSE); the peer's alone is CLOSE_WAIT.
 */
static unsigned char rdma_tcp_state(struct shim_sock *s)
{
	bool peer;

	if (__atomic_load_n(&s->reset, __ATOMIC_ACQUIRE) ||
	    __atomic_load_n(&s->tfail, __ATOMIC_ACQUIRE))
		return TCP_CLOSE;
	peer = peer_ended(s);
	if (s->wr_shut)
		return peer ? TCP_CLOSE : TCP_FIN_WAIT2;
	return peer ? TCP_CLOSE_WAIT : TCP_ESTABLISHED;
}

/* Is RDMA connection s CLOSE?  Cheaply first: one neither reset, failed
 * nor shut for writing can't be, and needs no look at the rsocket. */
bool shim_rdma_closed(struct shim_sock *s)
{
	if (!s->wr_shut && !__atomic_load_n(&s->reset, __ATOMIC_ACQUIRE) &&
	    !__atomic_load_n(&s->tfail, __ATOMIC_ACQUIRE))
		return false;
	return rdma_tcp_state(s) == TCP_CLOSE;
}

/*
 * TCP_INFO of an RDMA connection: the kernel socket's answer (its length
 * rules: a short optlen gets a prefix, as tcp_get_info's copy), with the
 * connection's state in tcpi_state, the first byte.  The rest is that of
 * an unconnected TCP socket (counters and tcpi_rtt 0): rsockets keeps no
 * such figures (docs/limits.md).
 */
static int tcp_info_rdma(int fd, struct shim_sock *s, void *val, socklen_t *len)
{
	unsigned char st = rdma_tcp_state(s);

	if (REAL(getsockopt)(fd, IPPROTO_TCP, TCP_INFO, val, len) < 0)
		return -errno;
	if (*len >= 1)
		memcpy(val, &st, 1);
	return 0;
}

/*
 * SO_PEERNAME of an RDMA connection (its kernel socket has no peer):
 * sk_getsockopt's rules -- the name as getname gives it, even once closed;
 * a length past the name's is EINVAL, a shorter one gets a prefix.
 */
static int peername_opt(struct shim_sock *s, void *val, socklen_t *len)
{
	/* the program's memory read and written as the kernel does: an
	 * unmapped (or read-only) address is EFAULT, not a fault here */
	socklen_t want;
	struct iovec k = {&want, sizeof(want)}, u = {len, sizeof(*len)};
	ssize_t n = process_vm_readv(getpid(), &k, 1, &u, 1, 0);

	if (n < 0 && errno != EFAULT)
		want = *len; /* no such call here (seccomp): plainly */
	else if (n != (ssize_t)sizeof(want))
		return -EFAULT;
	if ((int)want < 0 || want > s->peer_len)
		return -EINVAL;
	if (!want)
		return 0;
	k = (struct iovec){&s->peer, want};
	u = (struct iovec){val, want};
	n = process_vm_writev(getpid(), &k, 1, &u, 1, 0);
	if (n < 0 && errno != EFAULT)
		memcpy(val, &s->peer, want);
	else if (n != (ssize_t)want)
		return -EFAULT;
	return 0;
}

/* getsockopt on a sock that may be RDMA: out of line, so that the
 * kernel-fd path stays a tail call. */
static __attribute__((noinline)) int getsockopt_slow(int fd,
						     struct shim_sock *s,
						     int level, int name,
						     void *val, socklen_t *len)
{
	if (refused(level, name)) {
		errno = ENOPROTOOPT;
		return -1;
	}
	/* an RDMA connection's error, or a non-blocking connect's that
	 * failed (connect.c, settle_tcp); so_error is read under a
	 * reference: without one s may be back in the pool */
	if (level == SOL_SOCKET && name == SO_ERROR) {
		bool conn;
		int r;

		if (unlikely(!shim_sock_tryget(fd, s, SHIM_SK_ANY)))
			return getsockopt(fd, level, name, val, len);
		conn = shim_kind_is(s, SHIM_KF_CONN);
		if (conn || __atomic_load_n(&s->so_error, __ATOMIC_RELAXED)) {
			r = so_error(s, conn, val, len);
			shim_sock_put(s);
			return (int)shim_ret(r);
		}
		shim_sock_put(s);
	}
	if ((level == IPPROTO_TCP && name == TCP_INFO) ||
	    (level == SOL_SOCKET && name == SO_PEERNAME)) {
		int r;

		if (unlikely(!shim_sock_tryget(fd, s, SHIM_SK_ANY)))
			return getsockopt(fd, level, name, val, len);
		if (shim_kind_is(s, SHIM_KF_CONN)) {
			r = level == IPPROTO_TCP
				? tcp_info_rdma(fd, s, val, len)
				: peername_opt(s, val, len);
			shim_sock_put(s);
			return (int)shim_ret(r);
		}
		shim_sock_put(s);
	}
	return REAL(getsockopt)(fd, level, name, val, len);
}

SHIM_EXPORT int getsockopt(int fd, int level, int name, void *__restrict val,
			   socklen_t *__restrict len)
{
	struct shim_sock *s = shim_fd_get(fd);

	if (likely(!maybe_rdma(s)))
		return REAL(getsockopt)(fd, level, name, val, len);
	return getsockopt_slow(fd, s, level, name, val, len);
}

/*
 * O_NONBLOCK is the program's view, kept in s->nonblock: an RDMA sock's
 * rsocket always runs non-blocking.  A listener's file keeps the program's
 * flag, except without io_uring, where the door's holder (in any process
 * sharing the file) makes it non-blocking underneath (socket.c,
 * force_nonblock): F_GETFL on a listener shows what this process set.
 */
static bool forced(const struct shim_sock *s)
{
	return shim_kind_is(s, SHIM_KF_DOOR) &&
	       __atomic_load_n(&s->nb_forced, __ATOMIC_ACQUIRE);
}

/* Gives back the caller's reference to s. */
static int fcntl_slow(int fd, struct shim_sock *s, int cmd, void *arg)
{
	int r;

	if (cmd == F_SETFL) {
		int fl = (int)(intptr_t)arg;

		r = REAL(fcntl)(fd, F_SETFL, forced(s) ? fl | O_NONBLOCK : fl);
		if (r == 0)
			s->nonblock = (fl & O_NONBLOCK) != 0;
		shim_sock_put(s); /* keeps errno */
		return r;
	}
	r = REAL(fcntl)(fd, cmd, arg);
	if (cmd == F_GETFL && r >= 0 && shim_kind_is(s, SHIM_KF_DOOR))
		r = (r & ~O_NONBLOCK) | (s->nonblock ? O_NONBLOCK : 0);
	/* what fd names now, as dup does: a close and a new socket may have
	 * come between the lookup of s and the kernel's dup */
	if ((cmd == F_DUPFD || cmd == F_DUPFD_CLOEXEC) && r >= 0)
		shim_fd_share(fd, r);
	shim_sock_put(s); /* keeps errno */
	return r;
}

/*
 * fcntl/ioctl are variadic; every command's argument fits in a pointer-sized
 * register, so one is fetched and forwarded as is (what glibc does too).
 */
#define VA_ONE_ARG(last, var)                                                  \
	do {                                                                   \
		va_list ap_;                                                   \
		va_start(ap_, last);                                           \
		var = va_arg(ap_, void *);                                     \
		va_end(ap_);                                                   \
	} while (0)

/* fcntl's slow path: RDMA-able sockets, and an epoll fd's duplicates (the
 * copy must find the same registry, as dup's does). */
static unsigned int fcntl_kinds(int cmd)
{
	return MAYBE_RDMA | (cmd == F_DUPFD || cmd == F_DUPFD_CLOEXEC
				 ? SHIM_KINDS_WITH(SHIM_KF_EPSET)
				 : 0);
}

/* Is s one of them (its kind read once: tryget checks the same set)? */
static bool fcntl_ours(const struct shim_sock *s, int cmd)
{
	return s && (SHIM_SK(shim_kind(s)) & fcntl_kinds(cmd));
}

SHIM_EXPORT int fcntl(int fd, int cmd, ...)
{
	struct shim_sock *s;
	void *arg;

	VA_ONE_ARG(cmd, arg);
	s = shim_fd_get(fd);
	if (likely(!fcntl_ours(s, cmd)))
		return REAL(fcntl)(fd, cmd, arg);
	if (unlikely(!shim_sock_tryget(fd, s, fcntl_kinds(cmd))))
		return fcntl(fd, cmd, arg); /* a close() came first */
	return fcntl_slow(fd, s, cmd, arg);
}

SHIM_EXPORT int fcntl64(int fd, int cmd, ...)
{
	struct shim_sock *s;
	void *arg;

	VA_ONE_ARG(cmd, arg);
	s = shim_fd_get(fd);
	if (likely(!fcntl_ours(s, cmd)))
		return REAL(fcntl64)(fd, cmd, arg);
	if (unlikely(!shim_sock_tryget(fd, s, fcntl_kinds(cmd))))
		return fcntl64(fd, cmd, arg); /* a close() came first */
	return fcntl_slow(fd, s, cmd, arg);
}

/* Bytes readable now on an RDMA fd: peek without consuming. */
static int rdma_inq(struct shim_sock *s)
{
	size_t cap = 4u << 20;
	char *buf = malloc(cap);
	struct iovec v = {.iov_base = buf, .iov_len = cap};
	ssize_t r;

	if (!buf)
		return -ENOMEM;
	r = shim_rdma_recvv(s, &v, 1, MSG_PEEK | MSG_DONTWAIT);
	free(buf);
	if (r == -EAGAIN)
		return 0;
	return (int)r;
}

static int ioctl_slow(int fd, struct shim_sock *s, unsigned long req, void *arg)
{
	int r;

	if (req == FIONBIO && arg) {
		int on = *(int *)arg;

		if (forced(s)) {
			s->nonblock = on != 0;
			return 0; /* the kernel fd stays non-blocking */
		}
		r = REAL(ioctl)(fd, req, arg);
		if (r == 0)
			s->nonblock = on != 0;
		return r;
	}
	if (shim_kind_is(s, SHIM_KF_CONN) &&
	    (req == FIONREAD || req == SIOCOUTQ)) {
		if (!arg) {
			errno = EFAULT;
			return -1;
		}
		if (req == SIOCOUTQ) {
			/* Nothing unacknowledged is held here: rsockets
			 * sends only into room the peer granted, and its
			 * adapter acknowledges a write at once; what the
			 * peer has not read waits in the peer's buffer
			 * (docs/limits.md, SIOCOUTQ). */
			*(int *)arg = 0;
			return 0;
		}
		r = rdma_inq(s);
		if (r < 0)
			return (int)shim_ret(r);
		*(int *)arg = r;
		return 0;
	}
	return REAL(ioctl)(fd, req, arg);
}

SHIM_EXPORT int ioctl(int fd, unsigned long req, ...)
{
	struct shim_sock *s;
	void *arg;
	int r;

	VA_ONE_ARG(req, arg);
	s = shim_fd_get(fd);
	if (likely(!maybe_rdma(s)))
		return REAL(ioctl)(fd, req, arg);
	if (unlikely(!shim_sock_tryget(fd, s, MAYBE_RDMA)))
		return ioctl(fd, req, arg); /* a close() came first */
	r = ioctl_slow(fd, s, req, arg);
	shim_sock_put(s); /* keeps errno */
	return r;
}
