/* SPDX-License-Identifier: MIT */
/*
 * Connections handed over at fork (issue 14: fork per connection).
 *
 * A QP can't cross fork, yet a fork-per-connection server (ForkingTCPServer,
 * inetd, sshd, PostgreSQL) accepts a connection, forks, and lets the child
 * serve it while the parent closes its copy; a client may connect and fork
 * in the same way.  Nothing tells, before the fork, which process will use
 * the connection, and with the kernel both may.
 *
 * So a fork hands over every RDMA connection nothing has used yet (no I/O,
 * no poll or epoll registration since it was made: shim_sock_used): just
 * before the fork its fd becomes a kernel TCP socket connected over
 * loopback to a relay in the forking process, which carries the bytes to and
 * from the rsocket until both directions end.  Parent and child then share a
 * real kernel socket, exactly as without the shim: either may use it, close
 * it, exec with it as stdin; the last close ends the connection.  Nothing
 * already received is lost (the relay forwards what the rsocket holds).
 *
 * Why not the alternatives: keeping the connection in the parent and giving
 * only the child a loopback socket hangs a child whose parent keeps its copy
 * open until the child is done; handing over every connection at every fork
 * would put a gRPC process's live connections behind a relay each time it
 * spawns a helper.  A used connection stays the forking process's own; the
 * child's copy is bare (fork.c), as before.
 *
 * Cost, on the handed-over connection only: a loopback TCP hop and two relay
 * threads in the forking process; the addresses the program sees stay the
 * original ones (getsockname/getpeername), in an exec'd image too (see
 * relayed_export).  If the forking process exits, its relays end and the
 * connection with them.
 */
#include "shim.h"
#include "config.h"
#include "log.h"
#include "sock.h"
#include "socket.h"
#include "glue.h"

#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdlib.h>
#include <unistd.h>
#include <string.h>
#include <arpa/inet.h>
#include <sys/eventfd.h>
#include <dirent.h>
#include <limits.h>
#include <stdint.h>
#include <sys/stat.h>

struct relay {
	struct shim_sock *s; /* the connection: a reference, for its rsocket */
	int lo;		     /* the loopback end the relay reads and writes */
	int stop;	     /* eventfd: wakes the rsocket reader at the end */
	int live;	     /* atomic: relay threads still running */
	struct relay *next;  /* made before the fork, started after it */
	struct relay **prev_live, *next_live; /* running (the handover lock) */
};

/* Between the prepare handler and the parent/child ones: the forking
 * thread's alone. */
static struct relay *pending;
/* Relays running (under the handover lock, which a fork holds throughout): a
 * later fork child closes its copies of their fds. */
static struct relay *live;

static int loopback(int family, struct sockaddr_storage *a, socklen_t *len)
{
	memset(a, 0, sizeof(*a));
	if (family == AF_INET6) {
		struct sockaddr_in6 *a6 = (struct sockaddr_in6 *)a;

		a6->sin6_family = AF_INET6;
		a6->sin6_addr = in6addr_loopback;
		*len = sizeof(*a6);
	} else {
		struct sockaddr_in *a4 = (struct sockaddr_in *)a;

		a4->sin_family = AF_INET;
		a4->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
		*len = sizeof(*a4);
	}
	return REAL(socket)(family, SOCK_STREAM | SOCK_CLOEXEC, 0);
}

static bool same_addr(const struct sockaddr_storage *a, socklen_t alen,
		      const struct sockaddr_storage *b, socklen_t blen)
{
	return alen == blen && !memcmp(a, b, alen);
}

/*
 * A connected loopback pair of family: *prog for the program, *relay for us.
 * The accepted end is checked to be our own connect (anyone on the host
 * could connect to the short-lived listener).
 */
static int loop_pair(int family, int *prog, int *relay)
{
	struct sockaddr_storage la, xa, ya;
	socklen_t ll, xl = sizeof(xa), yl = sizeof(ya);
	int l, x = -1, y = -1, one = 1, err = 0;

	l = loopback(family, &la, &ll);
	if (l < 0)
		return -errno;
	if (REAL(bind)(l, (struct sockaddr *)&la, ll) < 0 ||
	    REAL(listen)(l, 1) < 0 ||
	    REAL(getsockname)(l, (struct sockaddr *)&la, &ll) < 0 ||
	    (x = REAL(socket)(family, SOCK_STREAM | SOCK_CLOEXEC, 0)) < 0 ||
	    REAL(connect)(x, (struct sockaddr *)&la, ll) < 0 ||
	    (y = REAL(accept4)(l, NULL, NULL, SOCK_CLOEXEC)) < 0 ||
	    REAL(getsockname)(x, (struct sockaddr *)&xa, &xl) < 0 ||
	    REAL(getpeername)(y, (struct sockaddr *)&ya, &yl) < 0)
		err = -errno;
	else if (!same_addr(&xa, xl, &ya, yl))
		err = -ECONNREFUSED;
	REAL(close)(l);
	if (err) {
		if (x >= 0)
			REAL(close)(x);
		if (y >= 0)
			REAL(close)(y);
		return err;
	}
	/* the relay is a hop, not a stage: no Nagle delay on either end */
	REAL(setsockopt)(x, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	REAL(setsockopt)(y, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	*prog = x;
	*relay = y;
	return 0;
}

/* What the program set on the connection that a kernel socket keeps. */
static void carry_options(const struct shim_sock *s, int x)
{
	socklen_t tl = sizeof(struct timeval);
	int fl, r = 0;

	if (s->rcvtimeo.tv_sec || s->rcvtimeo.tv_usec)
		r |= REAL(setsockopt)(x, SOL_SOCKET, SO_RCVTIMEO, &s->rcvtimeo,
				      tl);
	if (s->sndtimeo.tv_sec || s->sndtimeo.tv_usec)
		r |= REAL(setsockopt)(x, SOL_SOCKET, SO_SNDTIMEO, &s->sndtimeo,
				      tl);
	if (r)
		shim_dbg("handover: a socket timeout was not carried over");
	if (s->nonblock && (fl = REAL(fcntl)(x, F_GETFL)) >= 0)
		REAL(fcntl)(x, F_SETFL, fl | O_NONBLOCK);
}

/*
 * fd, the only fd of fresh RDMA connection s: put a loopback socket in its
 * place and queue the relay that will carry it.  s stays as it is, the
 * rsocket its own: the relay holds a reference to it, and a call that
 * looked s up before the swap finds it handed (shim_sock_usable) and goes
 * to the kernel fd instead.  The last to let go of s closes the rsocket.
 */
static int hand_over(int fd, struct shim_sock *s)
{
	struct relay *r = calloc(1, sizeof(*r));
	struct shim_sock *ns = shim_sock_new(SHIM_SK_RELAY, s->family);
	int x = -1, fdfl, err;

	err = r && ns ? 0 : -ENOMEM;
	if (r)
		r->lo = r->stop = -1;
	if (!err)
		err = loop_pair(s->family, &x, &r->lo);
	if (!err) {
		r->stop = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
		if (r->stop < 0)
			err = -errno;
	}
	fdfl = err ? -1 : REAL(fcntl)(fd, F_GETFD);
	if (!err && fdfl < 0)
		err = -errno;
	if (!err) {
		carry_options(s, x);
		/* the one step the program could see: fd now names the
		 * kernel socket, with its close-on-exec flag kept */
		if (REAL(dup3)(x, fd, (fdfl & FD_CLOEXEC) ? O_CLOEXEC : 0) < 0)
			err = -errno;
	}
	if (x >= 0)
		REAL(close)(x);
	if (err) {
		if (r && r->lo >= 0)
			REAL(close)(r->lo);
		if (r && r->stop >= 0)
			REAL(close)(r->stop);
		free(r);
		if (ns)
			shim_sock_put(
			    ns); /* never installed: back to the pool */
		return err;
	}
	memcpy(&ns->local, &s->local, sizeof(ns->local));
	memcpy(&ns->peer, &s->peer, sizeof(ns->peer));
	ns->local_len = s->local_len;
	ns->peer_len = s->peer_len;
	ns->nonblock = s->nonblock;
	s->hfd = fd;
	shim_sock_get(s);
	r->s = s;
	r->live = 2;
	shim_fd_replace(fd, ns); /* drops fd's reference to s */
	r->next = pending;
	pending = r;
	return 0;
}

/*
 * Claim s for a handover: handed is raised before fresh is taken, so a
 * call that sees fresh gone also sees handed, and waits (sock.c,
 * shim_first_use_slow).  A use that came first keeps s.
 */
static bool claim(struct shim_sock *s)
{
	__atomic_store_n(&s->handed, true, __ATOMIC_SEQ_CST);
	if (__atomic_exchange_n(&s->fresh, false, __ATOMIC_SEQ_CST)) {
		__atomic_sub_fetch(&shim_fresh_conns, 1, __ATOMIC_RELAXED);
		return true;
	}
	__atomic_store_n(&s->handed, false, __ATOMIC_SEQ_CST);
	return false;
}

/* Before every fork: a lock and one load when no connection is fresh. */
static void shim_handover_prepare(void)
{
	unsigned int span;

	shim_sock_handover_lock();
	if (!__atomic_load_n(&shim_fresh_conns, __ATOMIC_ACQUIRE))
		return;
	span = shim_fdtable_span();
	for (unsigned int fd = 0; fd < span; fd++) {
		struct shim_sock *s = shim_fd_get((int)fd);
		int64_t t0;
		int err;

		/* held: another thread's dup2 onto fd may release s */
		if (!s || !shim_kind_is(s, SHIM_KF_CONN) ||
		    !shim_sock_tryget((int)fd, s,
				      SHIM_KINDS_WITH(SHIM_KF_CONN)))
			continue;
		/* a dup'ed connection (fd refs > 1) stays: the child's
		 * copies are bare, as before */
		if (!__atomic_load_n(&s->fresh, __ATOMIC_ACQUIRE) ||
		    __atomic_load_n(&s->fdrefs, __ATOMIC_ACQUIRE) != 1 ||
		    __atomic_load_n(&s->ep_regs, __ATOMIC_ACQUIRE) ||
		    !claim(s)) {
			shim_sock_put(s);
			continue;
		}
		t0 = shim_now_us();
		err = hand_over((int)fd, s);
		if (err) {
			/* s stays the forking process's, used */
			__atomic_store_n(&s->handed, false, __ATOMIC_SEQ_CST);
			shim_warn("fd %d: not handed over at fork (%s): a "
				  "fork child can't use it",
				  (int)fd, strerror(-err));
		} else {
			shim_info("fd %d: handed over at fork in %lld us: "
				  "parent and child share it through a relay "
				  "in pid %d",
				  (int)fd, (long long)(shim_now_us() - t0),
				  (int)getpid());
		}
		shim_sock_put(s);
	}
}

static void relay_put(struct relay *r)
{
	if (__atomic_sub_fetch(&r->live, 1, __ATOMIC_ACQ_REL))
		return;
	shim_sock_handover_lock();
	if (r->prev_live) {
		*r->prev_live = r->next_live;
		if (r->next_live)
			r->next_live->prev_live = r->prev_live;
	}
	shim_sock_handover_unlock();
	shim_sock_put(r->s); /* the last reference closes the rsocket */
	REAL(close)(r->lo);
	REAL(close)(r->stop);
	free(r);
}

static int send_all_lo(int lo, const char *p, size_t n)
{
	while (n) {
		ssize_t w = REAL(send)(lo, p, n, MSG_NOSIGNAL);

		if (w < 0 && errno == EINTR)
			continue;
		if (w < 0)
			return -errno;
		p += w;
		n -= (size_t)w;
	}
	return 0;
}

/* One direction failed: the other ends too (its rsocket wait wakes on stop,
 * its loopback read on the shutdown). */
static void end_both(struct relay *r)
{
	uint64_t one = 1;

	sg_shutdown(r->s->rs, SHUT_RDWR);
	REAL(shutdown)(r->lo, SHUT_RDWR);
	if (REAL(write)(r->stop, &one, sizeof(one)) < 0)
		shim_dbg("relay: stop: %s", strerror(errno));
}

/* rsocket -> loopback.  Ends at the peer's EOF (passed on as one) or an
 * error, or when the other direction failed (r->stop). */
static void *relay_down(void *arg)
{
	struct relay *r = arg;
	struct pollfd p[2] = {{.fd = r->s->rs, .events = POLLIN},
			      {.fd = r->stop, .events = POLLIN}};
	char buf[64 * 1024];
	ssize_t n;

	for (;;) {
		n = sg_recv(r->s->rs, buf, sizeof(buf), 0);
		if (n == -EAGAIN || n == -EINTR) {
			if (sg_wait(p, 2, -1) < 0 || p[1].revents)
				break;
			continue;
		}
		if (n <= 0 || send_all_lo(r->lo, buf, (size_t)n) < 0)
			break;
	}
	/* EOF: the program reads it; anything else ends both directions */
	if (n == 0)
		REAL(shutdown)(r->lo, SHUT_WR);
	else
		end_both(r);
	relay_put(r);
	return NULL;
}

static int send_all_rs(struct relay *r, const char *p, size_t n)
{
	struct pollfd w[2] = {{.fd = r->s->rs, .events = POLLOUT},
			      {.fd = r->stop, .events = POLLIN}};

	while (n) {
		ssize_t s = sg_send(r->s->rs, p, n, 0);

		/* the other direction's failure (stop) ends this one too */
		if (s == -EAGAIN || s == -EINTR) {
			if (sg_wait(w, 2, -1) < 0 || w[1].revents)
				return -EIO;
			continue;
		}
		if (s < 0)
			return (int)s;
		p += s;
		n -= (size_t)s;
	}
	return 0;
}

/* loopback -> rsocket: the program's bytes, and its EOF, to the peer. */
static void *relay_up(void *arg)
{
	struct relay *r = arg;
	char buf[64 * 1024];
	ssize_t n;

	for (;;) {
		n = REAL(recv)(r->lo, buf, sizeof(buf), 0);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0 || send_all_rs(r, buf, (size_t)n) < 0)
			break;
	}
	if (n == 0)
		sg_shutdown(r->s->rs, SHUT_WR);
	else
		end_both(r);
	relay_put(r);
	return NULL;
}

static void start(struct relay *r)
{
	/* each direction puts its reference once, thread or not */
	for (int i = 0; i < 2; i++)
		if (shim_spawn(i ? relay_up : relay_down, r)) {
			shim_warn("relay: no thread: the connection ends");
			end_both(r);
			relay_put(r);
		}
}

/* r joins the running relays (the handover lock held). */
static void link_live(struct relay *r)
{
	r->next_live = live;
	r->prev_live = &live;
	if (live)
		live->prev_live = &r->next_live;
	live = r;
}

/*
 * A path the shim can't follow is about to use fd, RDMA connection s (the
 * caller holds a reference): stdio on an fdopen'ed stream, splice.  Hand
 * it over now, as a fork would, so that fd is a kernel socket every path
 * reaches.  Only when fd is the connection's one fd, in no epoll set, and
 * no other call is in flight on it (handed is raised first and every user
 * takes its reference before it looks at handed, so a call that starts
 * meanwhile either is counted here or waits in shim_first_use_slow and
 * then goes to the kernel socket); else -EBUSY, and the caller meets the
 * bare kernel socket as before.
 */
int shim_handover_now(int fd, struct shim_sock *s)
{
	struct relay *r;
	int err = -EBUSY;

	shim_sock_handover_lock();
	if (__atomic_exchange_n(&s->handed, true, __ATOMIC_SEQ_CST)) {
		shim_sock_handover_unlock(); /* not ours to undo */
		return -EBUSY;
	}
	/* state the loopback socket would not carry (shutdowns, a pending
	 * connect's completion, a reset or error to report) keeps it too */
	if (shim_kind_is(s, SHIM_KF_CONN) && shim_fd_get(fd) == s &&
	    __atomic_load_n(&s->fdrefs, __ATOMIC_SEQ_CST) == 1 &&
	    !__atomic_load_n(&s->ep_regs, __ATOMIC_SEQ_CST) &&
	    __atomic_load_n(&s->refs, __ATOMIC_SEQ_CST) == 2 && !s->rd_shut &&
	    !s->wr_shut && !s->connect_pending &&
	    !__atomic_load_n(&s->reset, __ATOMIC_RELAXED) &&
	    !__atomic_load_n(&s->so_error, __ATOMIC_RELAXED)) {
		shim_sock_used(s); /* no fork will take it now */
		err = hand_over(fd, s);
	}
	if (err) {
		__atomic_store_n(&s->handed, false, __ATOMIC_SEQ_CST);
		shim_sock_handover_unlock();
		return err;
	}
	r = pending;
	pending = r->next;
	link_live(r);
	shim_sock_handover_unlock();
	start(r);
	return 0;
}

/* After the fork, in the forking process (also when fork failed): the
 * relays start. */
static void shim_handover_parent(void)
{
	struct relay *go = pending;

	pending = NULL;
	for (struct relay *r = go; r; r = r->next)
		link_live(r);
	shim_sock_handover_unlock();
	while (go) {
		struct relay *r = go;

		go = r->next;
		start(r);
	}
}

/*
 * A handed-over connection's names across exec (sshd re-executes itself per
 * connection, inetd runs a handler): the program's fd is a loopback socket,
 * whose own names say 127.0.0.1, and a fresh image knows nothing of the
 * relay.  Access rules and logs (sshd's "from", pg_hba, hosts.allow,
 * fail2ban) would take a remote peer for a local one.  So a fork child
 * names each relayed socket it holds in its environment -- the loopback
 * socket's two ports, then the addresses the program saw -- and an image
 * started with it takes back, for each socket whose kernel names are
 * exactly those loopback ports, the addresses named.  Entries of sockets
 * gone since match nothing.  A setuid image ignores it, as it ignores the
 * shim's other variables (shim_cfg.env_ignored).
 */
/* not ERDMA_SHIM_*: those are the user's settings, checked by name */
#define RELAYED_ENV "LIBERDMA_SHIM_RELAYED"
#define RELAYED_MAX 64

struct relayed {
	int family;
	uint16_t lo_port, lo_peer;
	struct sockaddr_storage local, peer;
};

static bool addr_text(const struct sockaddr_storage *a, char *b, size_t len)
{
	const void *ip =
	    a->ss_family == AF_INET6
		? (const void *)&((struct sockaddr_in6 *)a)->sin6_addr
		: (const void *)&((struct sockaddr_in *)a)->sin_addr;

	return inet_ntop(a->ss_family, ip, b, (socklen_t)len) != NULL;
}

/* The address loopback() binds the relay's ends to. */
static bool relay_lo(const struct sockaddr_storage *a)
{
	if (a->ss_family == AF_INET6)
		return IN6_IS_ADDR_LOOPBACK(
		    &((struct sockaddr_in6 *)a)->sin6_addr);
	return a->ss_family == AF_INET &&
	       ((struct sockaddr_in *)a)->sin_addr.s_addr ==
		   htonl(INADDR_LOOPBACK);
}

/* fd's kernel ports, if it is a socket on the relay's loopback both ways. */
static bool lo_ports(int fd, uint16_t *port, uint16_t *peer, int *family)
{
	struct sockaddr_storage a, b;
	socklen_t al = sizeof(a), bl = sizeof(b);

	if (REAL(getsockname)(fd, (struct sockaddr *)&a, &al) < 0 ||
	    REAL(getpeername)(fd, (struct sockaddr *)&b, &bl) < 0 ||
	    a.ss_family != b.ss_family || !relay_lo(&a) || !relay_lo(&b))
		return false;
	*family = a.ss_family;
	*port = shim_addr_port((struct sockaddr *)&a);
	*peer = shim_addr_port((struct sockaddr *)&b);
	return true;
}

/*
 * Put name=val in this fork child's environment (val NULL: only take name
 * out), without setenv: glibc's environment lock is not reset at fork, and
 * another thread of the parent may have held it then.  The child is
 * single-threaded here; a new array replaces environ (the old one is left
 * as it was, so a copy of it the program kept stays valid, only without
 * the entry).
 */
static void child_env_put(const char *name, const char *val)
{
	size_t n = 0, j = 0, klen = strlen(name);
	char **e, *kv = NULL;

	while (environ && environ[n])
		n++;
	e = malloc((n + 2) * sizeof(*e));
	if (val)
		kv = malloc(klen + 1 + strlen(val) + 1);
	if (!e || (val && !kv)) {
		free(e);
		free(kv);
		return;
	}
	for (size_t i = 0; i < n; i++)
		if (strncmp(environ[i], name, klen) || environ[i][klen] != '=')
			e[j++] = environ[i];
	if (kv) {
		memcpy(kv, name, klen);
		kv[klen] = '=';
		strcpy(kv + klen + 1, val);
		e[j++] = kv;
	}
	e[j] = NULL;
	environ = e;
}

/* In a fork child: the relayed sockets it holds, into its environment. */
static void relayed_export(void)
{
	unsigned int span = shim_fdtable_span(), n = 0;
	char buf[RELAYED_MAX * 120] = "", la[64], pa[64];
	size_t used = 0;

	for (unsigned int fd = 0; fd < span && n < RELAYED_MAX; fd++) {
		struct shim_sock *s = shim_fd_get((int)fd);
		uint16_t lp, pp;
		int fam, w;

		if (!s || shim_kind(s) != SHIM_SK_RELAY ||
		    !lo_ports((int)fd, &lp, &pp, &fam) ||
		    !addr_text(&s->local, la, sizeof(la)) ||
		    !addr_text(&s->peer, pa, sizeof(pa)))
			continue;
		w = snprintf(buf + used, sizeof(buf) - used,
			     "%s%u,%u,%s,%u,%s,%u", n ? ";" : "", lp, pp, la,
			     shim_addr_port((struct sockaddr *)&s->local), pa,
			     shim_addr_port((struct sockaddr *)&s->peer));
		if (w < 0 || (size_t)w >= sizeof(buf) - used)
			break;
		used += (size_t)w;
		n++;
	}
	if (n)
		child_env_put(RELAYED_ENV, buf);
}

static bool parse_addr(const char *ip, unsigned long port,
		       struct sockaddr_storage *a)
{
	struct sockaddr_in *a4 = (struct sockaddr_in *)a;
	struct sockaddr_in6 *a6 = (struct sockaddr_in6 *)a;

	memset(a, 0, sizeof(*a));
	if (port > 65535)
		return false;
	if (inet_pton(AF_INET, ip, &a4->sin_addr) == 1) {
		a4->sin_family = AF_INET;
		a4->sin_port = htons((uint16_t)port);
		return true;
	}
	if (inet_pton(AF_INET6, ip, &a6->sin6_addr) == 1) {
		a6->sin6_family = AF_INET6;
		a6->sin6_port = htons((uint16_t)port);
		return true;
	}
	return false;
}

/* A decimal of at most max at *s, moved past its digits; -1 if none or
 * more.  (Not strtoul or atoi: this runs at start-up, maybe inside a
 * sanitizer's own start, whose interceptors of those abort then.) */
static long long dec(const char **s, long long max)
{
	long long v = 0;
	int n = 0;

	while (**s >= '0' && **s <= '9') {
		int d = *(*s)++ - '0';

		if (v > (max - d) / 10)
			return -1;
		v = v * 10 + d;
		n++;
	}
	return n ? v : -1;
}

/* One "lo_port,lo_peer,local,lport,peer,pport" entry, ending at ';' or
 * the end; false: malformed. */
static bool parse_entry(const char *e, struct relayed *r)
{
	char ip[2][INET6_ADDRSTRLEN];
	long long lp, pp, p[2];
	const char *q = e;

	lp = dec(&q, 65535);
	if (lp < 0 || *q++ != ',')
		return false;
	pp = dec(&q, 65535);
	if (pp < 0 || *q++ != ',')
		return false;
	for (int k = 0; k < 2; k++) {
		size_t n = 0;

		while (*q && *q != ',' && n < sizeof(ip[k]) - 1)
			ip[k][n++] = *q++;
		ip[k][n] = 0;
		if (*q++ != ',')
			return false;
		p[k] = dec(&q, 65535);
		if (p[k] < 0 || (k == 0 && *q++ != ',') ||
		    (k == 1 && *q && *q != ';'))
			return false;
	}
	if (!parse_addr(ip[0], (unsigned long)p[0], &r->local) ||
	    !parse_addr(ip[1], (unsigned long)p[1], &r->peer))
		return false;
	r->lo_port = (uint16_t)lp;
	r->lo_peer = (uint16_t)pp;
	r->family = r->peer.ss_family;
	return true;
}

static void relayed_adopt(int fd, const struct relayed *r)
{
	struct shim_sock *ns = shim_sock_new(SHIM_SK_RELAY, r->family);
	int fl = REAL(fcntl)(fd, F_GETFL);

	if (!ns)
		return;
	memcpy(&ns->local, &r->local, sizeof(ns->local));
	memcpy(&ns->peer, &r->peer, sizeof(ns->peer));
	ns->local_len = ns->peer_len = r->family == AF_INET6
					   ? sizeof(struct sockaddr_in6)
					   : sizeof(struct sockaddr_in);
	ns->nonblock = fl >= 0 && (fl & O_NONBLOCK);
	shim_fd_install(fd, ns);
}

/* At start-up: the relayed sockets this image was started with. */
static void relayed_import(void)
{
	const char *env = getenv(RELAYED_ENV);
	struct relayed r[RELAYED_MAX];
	unsigned int n = 0, adopted = 0;
	struct dirent *de;
	DIR *d;

	/* a setuid image's environment is its caller's: not trusted */
	if (shim_cfg.env_ignored || !env)
		return;
	for (const char *e = env; e && *e && n < RELAYED_MAX;) {
		const char *end = strchr(e, ';');

		if (parse_entry(e, &r[n]))
			n++;
		e = end ? end + 1 : NULL;
	}
	if (!n)
		return;
	/* the fds that are open (fd 2 left out: the log watches it, and the
	 * SOCK step takes its place after this one) */
	d = opendir("/proc/self/fd");
	while (d && (de = readdir(d))) {
		const char *nm = de->d_name;
		int fd = (int)dec(&nm, 1 << 20);
		uint16_t lp, pp;
		int fam;

		if (fd < 0 || *nm || fd == 2 || fd == dirfd(d) ||
		    !lo_ports(fd, &lp, &pp, &fam))
			continue;
		for (unsigned int i = 0; i < n; i++)
			if (r[i].lo_port == lp && r[i].lo_peer == pp &&
			    r[i].family == fam) {
				relayed_adopt(fd, &r[i]);
				adopted++;
				break;
			}
	}
	if (d)
		closedir(d);
	if (adopted)
		shim_dbg("handover: %u relayed socket%s named as before exec",
			 adopted, adopted == 1 ? "" : "s");
}

/*
 * A listener's twin reservation across exec (socket.c, twin_reserve;
 * docs/security.md, "Ports and peers").  A supervisor listens, forks, and
 * its child execs a server image that calls listen() again on the
 * inherited listener, while the supervisor keeps its copy and never
 * accepts: the reservation, close-on-exec and still the supervisor's,
 * would keep the child's door off the port.  So at an exec (exec.c), each
 * listener that the exec keeps (an fd of it not close-on-exec at that
 * moment: made inheritable before a fork or after it, by dup2 or a
 * spawner's pass_fds) has its reservation's file kept across the exec too
 * (this process's fd only: a fork parent's stays close-on-exec) and named
 * in the new image's environment -- the listening socket's inode (not its
 * fd number, which the program may move), the file's fd, the id -- and an
 * image started with it takes the file back (close-on-exec again) and puts
 * it on the socket with that inode, as an eligible TCP socket, so that the
 * start-up's taking of inherited listeners (socket.c, listen_adopt) keeps
 * it instead of reserving anew, and its door's opener frees
 * it as any.  Files no socket matches are closed.  An image without the
 * shim (or a setuid one) keeps the file unused, its fd open, holding the
 * reservation while it lives.
 */
#define TWINS_ENV "LIBERDMA_SHIM_TWINS"

struct twin_entry {
	unsigned long long ino; /* the listening socket's */
	int fd;			/* the reservation's file; -1: not one */
	uint32_t id;
	struct shim_sock *s; /* the listener that took it */
};

/* Has s an fd that an exec keeps? */
static bool survives_exec(const struct shim_sock *s, unsigned int span)
{
	for (unsigned int fd = 0; fd < span; fd++) {
		int fl;

		if (shim_fd_get((int)fd) == s &&
		    (fl = REAL(fcntl)((int)fd, F_GETFD)) >= 0 &&
		    !(fl & FD_CLOEXEC))
			return true;
	}
	return false;
}

/* v in decimal at p (no snprintf: this may run in a vfork child); the
 * end. */
static char *put_dec(char *p, unsigned long long v)
{
	char d[20];
	int n = 0;

	do
		d[n++] = (char)('0' + v % 10);
	while ((v /= 10));
	while (n)
		*p++ = d[--n];
	return p;
}

bool shim_twins_named(const char *e)
{
	return !strncmp(e, TWINS_ENV "=", sizeof(TWINS_ENV));
}

/*
 * Just before an exec: the reservations of the listeners it keeps, their
 * files made inheritable (their numbers in c->fd) and named in c->kv
 * ("LIBERDMA_SHIM_TWINS=ino,fd,id;...").  No allocation, lock or stdio:
 * the caller may be a vfork child.  A thread of this process that forks
 * and execs meanwhile may take a file across too, unnamed: its image holds
 * it unused (as one without the shim), and this image's door frees the id
 * from its own copy all the same (twin.c).
 */
void shim_twins_pass(struct shim_twins_carry *c)
{
	unsigned int span = shim_fdtable_span();
	const struct shim_sock *seen[SHIM_TWINS_MAX];
	char *p = c->kv, *end = c->kv + sizeof(c->kv);

	c->n = 0;
	for (unsigned int fd = 0; fd < span && c->n < SHIM_TWINS_MAX; fd++) {
		struct shim_sock *s = shim_fd_get((int)fd);
		struct stat sb;
		bool dup = false;

		/* a listener, or an eligible socket adopted at start-up */
		if (!s || !s->twin ||
		    (shim_kind(s) != SHIM_SK_LISTEN &&
		     shim_kind(s) != SHIM_SK_TCP))
			continue;
		for (unsigned int i = 0; i < c->n; i++)
			dup |= seen[i] == s;
		/* room for one more: the name, ';', three numbers, ',' twice,
		 * NUL */
		if (dup || end - p < 72 || fstat((int)fd, &sb) < 0 ||
		    !S_ISSOCK(sb.st_mode) || !survives_exec(s, span) ||
		    sg_twin_pass(s->twin - 1) < 0)
			continue;
		if (c->n) {
			*p++ = ';';
		} else {
			memcpy(p, TWINS_ENV "=", sizeof(TWINS_ENV));
			p += sizeof(TWINS_ENV);
		}
		p = put_dec(p, (unsigned long long)sb.st_ino);
		*p++ = ',';
		p = put_dec(p, (unsigned long long)(s->twin - 1));
		*p++ = ',';
		p = put_dec(p, s->twin_id);
		*p = 0;
		c->fd[c->n] = s->twin - 1;
		seen[c->n++] = s;
	}
}

/* The exec failed: the files passed are close-on-exec again (the process
 * goes on, and a later exec must not take them unnamed). */
void shim_twins_unpass(const struct shim_twins_carry *c)
{
	for (unsigned int i = 0; i < c->n; i++)
		REAL(fcntl)(c->fd[i], F_SETFD, FD_CLOEXEC);
}

/* One "ino,fd,id" entry, ending at ';' or the end; false: malformed. */
static bool parse_twin(const char *e, struct twin_entry *t)
{
	long long ino, fd, id;

	ino = dec(&e, LLONG_MAX);
	if (ino < 0 || *e++ != ',')
		return false;
	fd = dec(&e, INT_MAX);
	if (fd < 0 || *e++ != ',')
		return false;
	id = dec(&e, UINT32_MAX);
	if (id < 0 || (*e && *e != ';'))
		return false;
	t->ino = (unsigned long long)ino;
	t->fd = (int)fd;
	t->id = (uint32_t)id;
	return true;
}

/* fd, socket ino of t: an eligible TCP listener carrying t's reservation.
 * Start-up's listen_adopt keeps it (socket.c, twin_reserve), its close
 * drops it. */
static struct shim_sock *twin_adopt(int fd, const struct twin_entry *t)
{
	int dom = 0, type = 0, proto = 0, acc = 0, fl;
	socklen_t l = sizeof(int);
	struct shim_sock *s;

	if (REAL(getsockopt)(fd, SOL_SOCKET, SO_DOMAIN, &dom, &l) < 0 ||
	    REAL(getsockopt)(fd, SOL_SOCKET, SO_TYPE, &type, &l) < 0 ||
	    REAL(getsockopt)(fd, SOL_SOCKET, SO_PROTOCOL, &proto, &l) < 0 ||
	    REAL(getsockopt)(fd, SOL_SOCKET, SO_ACCEPTCONN, &acc, &l) < 0 ||
	    (dom != AF_INET && dom != AF_INET6) || type != SOCK_STREAM ||
	    proto != IPPROTO_TCP || !acc)
		return NULL;
	s = shim_sock_new(SHIM_SK_TCP, dom);
	if (!s)
		return NULL;
	fl = REAL(fcntl)(fd, F_GETFL);
	s->nonblock = fl >= 0 && (fl & O_NONBLOCK);
	s->twin = t->fd + 1;
	s->twin_id = t->id;
	shim_fd_install(fd, s);
	shim_dbg("fd %d: its RDMA port's reservation kept across exec "
		 "(rdma_cm file at fd %d)",
		 fd, t->fd);
	return s;
}

/* At start-up: the reservations this image was started with. */
static void twins_import(void)
{
	const char *env = getenv(TWINS_ENV);
	struct twin_entry t[SHIM_TWINS_MAX];
	unsigned int n = 0, left = 0;
	struct dirent *de;
	DIR *d;

	if (shim_cfg.env_ignored || !env)
		return;
	for (const char *e = env; e && *e && n < SHIM_TWINS_MAX;) {
		const char *end = strchr(e, ';');

		t[n].s = NULL;
		if (parse_twin(e, &t[n])) {
			/* a number named twice is one file */
			for (unsigned int i = 0; i < n; i++)
				if (t[i].fd == t[n].fd)
					t[n].fd = -1;
			/* not the reservation's: left alone */
			if (t[n].fd >= 0 && sg_twin_take(t[n].fd) < 0)
				t[n].fd = -1;
			left += t[n].fd >= 0;
			n++;
		}
		e = end ? end + 1 : NULL;
	}
	/* the shim's own: the program never sees it (an exec of its own
	 * names anew what it keeps: exec.c) */
	unsetenv(TWINS_ENV);
	if (!left)
		return;
	/* the sockets that are open (fd 2 left out, as in relayed_import) */
	d = shim_cfg.mode == SHIM_MODE_OFF ? NULL : opendir("/proc/self/fd");
	while (d && (de = readdir(d))) {
		const char *nm = de->d_name;
		int fd = (int)dec(&nm, 1 << 20);
		struct stat sb;

		if (fd < 0 || *nm || fd == 2 || fd == dirfd(d) ||
		    fstat(fd, &sb) < 0 || !S_ISSOCK(sb.st_mode))
			continue;
		for (unsigned int i = 0; i < n; i++) {
			if (t[i].fd < 0 || t[i].ino != sb.st_ino)
				continue;
			if (t[i].s) {
				/* another fd of the listener (a dup): one
				 * sock, as dup makes it */
				shim_sock_get(t[i].s);
				shim_fd_install(fd, t[i].s);
			} else {
				t[i].s = twin_adopt(fd, &t[i]);
			}
			break;
		}
	}
	if (d)
		closedir(d);
	/* no listener of this image's has them: the port is free of it */
	for (unsigned int i = 0; i < n; i++)
		if (t[i].fd >= 0 && !t[i].s)
			sg_twin_close(t[i].fd);
}

static void handover_start(void)
{
	relayed_import();
	twins_import();
}

/* In the child: the relays are the parent's (their connections' socks are
 * left unreferenced from here: never freed, their rsockets never closed). */
static void shim_handover_fork_child(void)
{
	shim_sock_handover_reset();
	for (struct relay *r = live; r; r = r->next_live) {
		REAL(close)(r->lo);
		REAL(close)(r->stop);
	}
	live = NULL;
	while (pending) {
		struct relay *r = pending;

		pending = r->next;
		REAL(close)(r->lo);
		REAL(close)(r->stop);
		free(r);
	}
	relayed_export();
}
SHIM_STARTUP(HANDOVER, .start = handover_start,
	     .prepare = shim_handover_prepare, .parent = shim_handover_parent,
	     .child = shim_handover_fork_child);
