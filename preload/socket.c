/* SPDX-License-Identifier: MIT */
/*
 * Socket lifecycle: creation, listen/accept, naming, close and dup.  Every
 * wrapper starts with the fd table lookup; a NULL entry is a kernel fd the
 * shim leaves alone, and the call goes straight to libc.
 */
#include "shim.h"
#include "glue.h"
#include "log.h"
#include "sock.h"
#include "sockopt.h"
#include "socket.h"
#include "sockfd.h"
#include "stats.h"

#include <sys/stat.h>
#include <sys/uio.h>

#include <dirent.h>
#include <unistd.h>
#include <netinet/tcp.h>
#include <limits.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static bool eligible(int domain, int type, int protocol)
{
	return (domain == AF_INET || domain == AF_INET6) &&
	       (type & 0xf) == SOCK_STREAM &&
	       (protocol == 0 || protocol == IPPROTO_TCP);
}

SHIM_EXPORT int socket(int domain, int type, int protocol)
{
	struct shim_sock *s;
	int fd;

	shim_ensure_init();
	fd = REAL(socket)(domain, type, protocol);
	if (fd < 0 || shim_in_lib())
		return fd;
	if (!eligible(domain, type, protocol) ||
	    shim_cfg.mode == SHIM_MODE_OFF ||
	    (shim_cfg.mode == SHIM_MODE_AUTO && !sg_available())) {
		/* A number reused behind our back (fclose's internal close)
		 * must not keep an old sock. */
		if (unlikely(shim_fd_get(fd)))
			shim_fd_install(fd, NULL);
		return fd;
	}
	s = shim_sock_new(SHIM_SK_TCP, domain);
	if (s)
		s->nonblock = (type & SOCK_NONBLOCK) != 0;
	shim_fd_install(fd, s);
	return fd;
}

SHIM_EXPORT int socketpair(int domain, int type, int protocol, int sv[2])
{
	int r;

	shim_ensure_init();
	/* librdmacm's own pairs (its services' channels, a listener's
	 * queue) mean nothing to an exec'd image: close them there */
	if (unlikely(shim_in_lib()))
		type |= SOCK_CLOEXEC;
	r = REAL(socketpair)(domain, type, protocol, sv);
	if (likely(!shim_in_lib()) || r != 0)
		return r;
	if (shim_pair_capture && *shim_pair_capture < 0)
		*shim_pair_capture = sv[0];
	else if (shim_svc_guard)
		shim_fd_install(sv[0], &shim_svc_sock);
	return r;
}

static bool door_give_way(uint16_t port);

/*
 * On iWARP a listener's RDMA door is a kernel TCP listener at the twin port
 * (sock.h, shim_rdma_port).  The program's own bind of that port must still
 * succeed: the door gives way (its listener serves TCP only from then on)
 * and the bind is tried again.  Another process's door can't be moved: that
 * bind fails as it would with any other program on the port (README).
 */
static int bind_slow(int fd, struct shim_sock *s, const struct sockaddr *addr,
		     socklen_t len)
{
	int kind = shim_kind(s);

	if (shim_kind_has(kind, SHIM_KF_CONN | SHIM_KF_DOOR))
		return -EINVAL; /* already bound, as the kernel says */
	if (REAL(bind)(fd, addr, len) == 0)
		return 0;
	if (errno != EADDRINUSE || !shim_kind_has(kind, SHIM_KF_ELIGIBLE) ||
	    !sg_iwarp() || len < sizeof(struct sockaddr_in) ||
	    (addr->sa_family != AF_INET && addr->sa_family != AF_INET6) ||
	    !door_give_way(shim_addr_port(addr)))
		return -errno;
	/* The driver lets go of the port as the rsocket's close ends; that
	 * close may finish on the reaper thread (rsocket_glue/reap.c). */
	for (int i = 0; REAL(bind)(fd, addr, len) < 0; i++) {
		if (errno != EADDRINUSE || i == 100)
			return -errno;
		nanosleep(&(struct timespec){0, 10 * 1000000}, NULL);
	}
	return 0;
}

SHIM_EXPORT int bind(int fd, __CONST_SOCKADDR_ARG addr, socklen_t len)
{
	struct shim_sock *s = shim_fd_get(fd);
	int r;

	if (likely(!s || shim_kind_is(s, SHIM_KF_KERNEL)))
		return REAL(bind)(fd, addr, len);
	if (unlikely(
		!shim_sock_tryget(fd, s, ~SHIM_KINDS_WITH(SHIM_KF_KERNEL))))
		return bind(fd, addr, len); /* a close() came first */
	r = bind_slow(fd, s, addr.__sockaddr__, len);
	shim_sock_put(s);
	return (int)shim_ret(r);
}

int shim_live_listeners; /* RDMA listeners alive in this process */

/*
 * A listener's RDMA door: the rsocket listener at its address (port +
 * ERDMA_SHIM_PORT_OFFSET).  rsockets completes every RDMA connection in
 * the process that made the door, whether or not it ever calls accept, and
 * a fork child can't use it.  So the door is not made at listen() but by
 * the first wait for a connection in a process (accept, or the listener in
 * a poll, select or epoll set): a prefork master that only listens and
 * forks never makes one, and its first worker to wait gets it (the others
 * serve the port over TCP: rdma_cm has one listener per port).  The cost:
 * a client that connects between a server's listen() and its first wait
 * finds no door and is served over TCP (README, "Process models").
 */

/*
 * A dual-stack listener on [::] (IPV6_V6ONLY off) on iWARP: the drivers'
 * CM listens on the device's own addresses of the id's family (siw: a [::]
 * door takes only the netdev's IPv6 addresses; erdma: IPv4 only), so such a
 * door would refuse every IPv4 client.  It is made at 0.0.0.0 instead: IPv4
 * clients (the VPC's) get RDMA, IPv6 clients TCP.
 */
static void door_iwarp_v4(struct shim_sock *s, struct sockaddr_storage *laddr,
			  socklen_t *alen)
{
	struct sockaddr_in6 *a6 = (struct sockaddr_in6 *)laddr;
	int v6only = 1;
	socklen_t olen = sizeof(v6only);
	uint16_t port = a6->sin6_port;

	if (laddr->ss_family != AF_INET6 ||
	    !IN6_IS_ADDR_UNSPECIFIED(&a6->sin6_addr) || !sg_iwarp() ||
	    REAL(getsockopt)(s->lfd, IPPROTO_IPV6, IPV6_V6ONLY, &v6only,
			     &olen) < 0 ||
	    v6only)
		return;
	memset(laddr, 0, sizeof(*laddr));
	laddr->ss_family = AF_INET;
	((struct sockaddr_in *)laddr)->sin_port = port;
	*alen = sizeof(struct sockaddr_in);
}

/*
 * Options that protect a TCP port -- TCP-MD5 and TCP-AO keys, socket
 * filters, a device binding -- hold on the kernel's listener only: an RDMA
 * door would accept without them, on every RDMA device.  A listener with
 * one opens no door (door_addr), or shuts the one it has (this kind
 * operation, once sockopt.c has recorded the option in s->guard), and its
 * connections stay on TCP, where the protection holds.  One warning per
 * listener.  Clearing the option later does not bring the door back.
 */
static void listen_guarded(struct shim_sock *s)
{
	shim_listen_door_shut(s);
	shim_warn("fd %d: %s set on the listener: its RDMA listener is "
		  "closed, its connections stay on TCP",
		  s->lfd, __atomic_load_n(&s->guard, __ATOMIC_ACQUIRE));
}

/* The door's address (the listener's, port offset), or -errno: a reason
 * to serve the port over TCP only. */
static int door_addr(struct shim_sock *s, struct sockaddr_storage *laddr,
		     socklen_t *alen)
{
	uint16_t port;

	if (__atomic_load_n(&s->guard, __ATOMIC_ACQUIRE))
		return -EPERM; /* a TCP-level protection: listen_guarded */

	*alen =
	    shim_addr_unmap((struct sockaddr *)&s->local, s->local_len, laddr);
	door_iwarp_v4(s, laddr, alen);
	port = shim_addr_port((struct sockaddr *)laddr);
	if (!port)
		return -EADDRNOTAVAIL;
	if (!shim_config_allows(
		&shim_cfg, laddr->ss_family,
		laddr->ss_family == AF_INET
		    ? (void *)&((struct sockaddr_in *)laddr)->sin_addr
		    : (void *)&((struct sockaddr_in6 *)laddr)->sin6_addr,
		port))
		return -EACCES;
	if (!sg_available())
		return -ENODEV;
	if (shim_uring_user())
		return -EPROTONOSUPPORT; /* io_uring I/O: uring.c */
	shim_addr_set_port((struct sockaddr *)laddr, shim_rdma_port(port));
	return 0;
}

/*
 * The twin reservation (rsocket_glue/twin.c): from listen() until a door
 * opens -- in this process or in a fork sibling that shares the listener
 * -- an rdma_cm id holds the door's port, so that no other user can bind
 * it in between.  twin_drop: this process's copy of it closed.
 */
static void twin_reserve(struct shim_sock *s, const struct sockaddr *laddr,
			 socklen_t alen)
{
	int fd, r;

	if (s->twin)
		return; /* listen() again: the one from the first (or from
			 * before an exec: handover.c, twins_import) */
	r = sg_twin_reserve(laddr, alen, false, &fd, &s->twin_id);
	if (r < 0) {
		/* taken already (door_taken will name the holder), or no
		 * rdma_cm here: the door opens as it would without */
		shim_dbg("fd %d: RDMA port %u not reserved (%s)", s->lfd,
			 shim_addr_port(laddr), strerror(-r));
		return;
	}
	s->twin = fd + 1;
}

static void twin_drop(struct shim_sock *s)
{
	if (s->twin) {
		sg_twin_close(s->twin - 1);
		s->twin = 0;
	}
}

/* The rsocket listener for s, or -errno; *blocked: its listen was refused
 * with the port kept reserved (sg_listen). */
static int door_make(struct shim_sock *s, bool *blocked)
{
	struct sockaddr_storage laddr;
	struct sg_twin twin = {.fd = s->twin - 1, .id = s->twin_id};
	struct sg_sockopts o;
	socklen_t alen;
	int r, lrs, cap;

	*blocked = false;
	r = door_addr(s, &laddr, &alen);
	if (r < 0)
		return r;
	/* rdma-core's listen service thread before 44.7/50.2/53.0 has the
	 * stale-array bug of its connect service (svc.c) once it holds a
	 * 4th listener: the cap is the gate's (rsocket_glue/compat.c). */
	cap = sg_listener_cap();
	if (__atomic_add_fetch(&shim_live_listeners, 1, __ATOMIC_RELAXED) >
		cap &&
	    cap) {
		__atomic_sub_fetch(&shim_live_listeners, 1, __ATOMIC_RELAXED);
		return -EMFILE;
	}
	o = shim_sock_opts(s); /* buffers; keepalive's ACK timeout */
	/* P, for ERDMA_SHIM_ACCEPT_FROM's port rules: the program's port,
	 * not the twin laddr now names */
	lrs = sg_listen((struct sockaddr *)&laddr, alen, s->backlog, &o, &twin,
			shim_addr_port((struct sockaddr *)&s->local));
	twin_drop(s); /* handed over at the bind, or no door here */
	if (twin.fd >= 0) {
		/* refused its listen: the port stays reserved, for good */
		s->twin = twin.fd + 1;
		s->twin_id = twin.id;
		*blocked = true;
	}
	if (lrs < 0)
		__atomic_sub_fetch(&shim_live_listeners, 1, __ATOMIC_RELAXED);
	return lrs;
}

/*
 * Is pid (a thread id: rdma_cm names the thread that made the id) one of
 * this listener's own: a thread of this process (another listener here,
 * SO_REUSEPORT), a process running as this one's user (which could take
 * this process over anyway: a prefork worker that dropped privileges can't
 * read its sibling's fds), or one that has this listener's socket open (a
 * prefork sibling, parent or child)?
 */
static bool shares_listener(pid_t pid, ino_t ino)
{
	char path[64], link[64], want[40];
	struct dirent *e;
	struct stat ps;
	bool yes = false;
	DIR *d;

	snprintf(path, sizeof(path), "/proc/self/task/%d", (int)pid);
	if (pid == getpid() || access(path, F_OK) == 0)
		return true;
	snprintf(path, sizeof(path), "/proc/%d", (int)pid);
	if (stat(path, &ps) == 0 && ps.st_uid == geteuid())
		return true;
	snprintf(path, sizeof(path), "/proc/%d/fd", (int)pid);
	d = opendir(path);
	if (!d)
		return false;
	snprintf(want, sizeof(want), "socket:[%lu]", (unsigned long)ino);
	while (!yes && (e = readdir(d))) {
		ssize_t n;

		snprintf(path, sizeof(path), "/proc/%d/fd/%.16s", (int)pid,
			 e->d_name);
		n = readlink(path, link, sizeof(link) - 1);
		if (n > 0) {
			link[n] = 0;
			yes = !strcmp(link, want);
		}
	}
	closedir(d);
	return yes;
}

/* Who holds RDMA port rport, when it is not this listener's processes:
 * "pid N (uid U)", "an unknown holder", or why it can't be told. */
static bool door_holder_ours(struct shim_sock *s, uint16_t rport, char *who,
			     size_t len)
{
	pid_t pids[16];
	struct stat sb;
	int n = sg_port_holders(rport, pids, (int)ARRAY_SIZE(pids));

	if (n < 0 && n != -ESRCH) {
		snprintf(who, len, "a holder this process can't see (%s)",
			 strerror(-n));
		return false;
	}
	if (n <= 0 || fstat(s->lfd, &sb) < 0) {
		snprintf(who, len,
			 "a holder that is no process's (a kernel "
			 "socket or id)");
		return false;
	}
	for (int i = 0; i < n; i++) {
		char proc[32];
		struct stat ps;

		if (shares_listener(pids[i], sb.st_ino))
			continue;
		snprintf(proc, sizeof(proc), "/proc/%d", (int)pids[i]);
		if (stat(proc, &ps) == 0)
			snprintf(who, len, "pid %d (uid %u)", (int)pids[i],
				 (unsigned)ps.st_uid);
		else
			snprintf(who, len, "pid %d", (int)pids[i]);
		return false;
	}
	return true;
}

/*
 * The door's port is taken (EADDRINUSE).  By this listener's own processes
 * (a prefork sibling's door, another SO_REUSEPORT listener's here): the
 * port is on RDMA through it, as before.  By anything else -- another
 * user's program listening on the twin port first -- that holder receives
 * the RDMA clients of this port, and nothing this listener can do stops
 * it (docs/security.md, "Ports and peers"): it opens no door, and says so
 * as a warning, in every mode.
 */
static void door_taken(struct shim_sock *s)
{
	uint16_t port = shim_addr_port((struct sockaddr *)&s->local);
	uint16_t rport = shim_rdma_port(port);
	char who[96];

	if (door_holder_ours(s, rport, who, sizeof(who))) {
		shim_info("fd %d: listening on TCP only (its RDMA port %u is "
			  "held by this listener's own processes)",
			  s->lfd, rport);
		return;
	}
	shim_warn("fd %d: %sRDMA port %u (the twin of TCP port %u) is held "
		  "by %s, not by this listener's processes: no RDMA listener "
		  "here; RDMA clients of port %u reach that holder",
		  s->lfd,
		  shim_cfg.mode == SHIM_MODE_REQUIRE ? "RDMA required but "
						     : "",
		  rport, port, who, port);
}

/*
 * The door was bound but could not listen (sg_listen): another id is bound
 * on its port -- another user's, bound in the moment the reservation gave
 * way to the door (rsocket_glue/twin.c) -- or, on iWARP, its kernel TCP
 * port is taken.  Nobody listens there, and the port stays reserved while
 * this listener lives, so nobody can: the port's RDMA clients fall back to
 * TCP.  A warning in every mode, naming the holder when it can be seen (an
 * id bound to a wildcard address is on no device, and not in the kernel's
 * dump).
 */
static void door_blocked(struct shim_sock *s)
{
	uint16_t port = shim_addr_port((struct sockaddr *)&s->local);
	uint16_t rport = shim_rdma_port(port);
	char who[128];

	if (door_holder_ours(s, rport, who, sizeof(who)))
		snprintf(who, sizeof(who),
			 "a holder this process can't name (this listener's "
			 "own, a wildcard id, or a TCP socket)");
	shim_warn("fd %d: %sRDMA port %u (the twin of TCP port %u) is bound "
		  "by %s as its RDMA listener opened: no RDMA listener here; "
		  "the port stays reserved while this listener lives, so "
		  "nobody listens there and RDMA clients of port %u fall back "
		  "to TCP",
		  s->lfd,
		  shim_cfg.mode == SHIM_MODE_REQUIRE ? "RDMA required but "
						     : "",
		  rport, port, who, port);
}

static void door_shut(int lrs);

void shim_listen_door_slow(struct shim_sock *s)
{
	int none = SHIM_DOOR_NONE, opening = SHIM_DOOR_OPENING, lrs;
	bool blocked;

	if (!__atomic_compare_exchange_n(&s->door, &none, SHIM_DOOR_OPENING,
					 false, __ATOMIC_SEQ_CST,
					 __ATOMIC_SEQ_CST)) {
		/* Another thread is opening it: wait for the outcome, so that
		 * this thread's wait watches the door too (rlisten: ms). */
		while (__atomic_load_n(&s->door, __ATOMIC_ACQUIRE) ==
		       SHIM_DOOR_OPENING)
			nanosleep(&(struct timespec){0, 1000000}, NULL);
		return;
	}
	lrs = door_make(s, &blocked);
	if (lrs < 0) {
		__atomic_store_n(&s->door, SHIM_DOOR_SHUT, __ATOMIC_RELEASE);
		/* EADDRINUSE: whose the port's door is (door_taken) */
		if (blocked)
			door_blocked(s);
		else if (lrs == -EADDRINUSE)
			door_taken(s);
		else if (shim_cfg.mode == SHIM_MODE_REQUIRE)
			shim_warn(
			    "fd %d: no RDMA listener (%s): serving TCP only",
			    s->lfd, strerror(-lrs));
		else
			shim_info("fd %d: listening on TCP only (%s)", s->lfd,
				  strerror(-lrs));
		shim_stat_kernel(s->lfd, ERDMA_PATH_LISTEN_TCP, NULL, -lrs,
				 NULL, 0);
		return;
	}
	s->rs = lrs;
	if (!__atomic_compare_exchange_n(&s->door, &opening, SHIM_DOOR_OPEN,
					 false, __ATOMIC_SEQ_CST,
					 __ATOMIC_SEQ_CST)) {
		s->rs = -1; /* shut meanwhile (shutdown): no door after it */
		door_shut(lrs);
		return;
	}
	shim_sock_ev_door_opened(s);
	shim_stat_sock(s, s->lfd, ERDMA_PATH_LISTEN);
	shim_dbg("fd %d: listening on TCP and RDMA", s->lfd);
}

/*
 * Shut the door: the RDMA connections it completed that nobody accepted
 * are ended (their clients see the end at once, as TCP's reset), with the
 * rsocket listener (sg_listen_close).  The caller owns s->rs.
 */
static void door_shut(int lrs)
{
	sg_listen_close(lrs);
	__atomic_sub_fetch(&shim_live_listeners, 1, __ATOMIC_RELAXED);
}

/* Take the door for one raccept: false if it is not open (door_shut waits
 * for its users: a raccept on a closed rsocket reads freed memory). */
static bool door_enter(struct shim_sock *s)
{
	__atomic_add_fetch(&s->door_users, 1, __ATOMIC_SEQ_CST);
	if (__atomic_load_n(&s->door, __ATOMIC_SEQ_CST) == SHIM_DOOR_OPEN)
		return true;
	__atomic_sub_fetch(&s->door_users, 1, __ATOMIC_SEQ_CST);
	return false;
}

static void door_leave(struct shim_sock *s)
{
	__atomic_sub_fetch(&s->door_users, 1, __ATOMIC_SEQ_CST);
}

void shim_listen_door_shut(struct shim_sock *s)
{
	int open = SHIM_DOOR_OPEN;

	if (__atomic_compare_exchange_n(&s->door, &open, SHIM_DOOR_SHUT, false,
					__ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST)) {
		int lrs = s->rs;

		/* users are inside a non-blocking raccept: a moment */
		while (__atomic_load_n(&s->door_users, __ATOMIC_SEQ_CST))
			sched_yield();
		s->rs = -1;
		door_shut(lrs);
	} else {
		/* none yet, or being opened: its opener shuts it */
		__atomic_store_n(&s->door, SHIM_DOOR_SHUT, __ATOMIC_SEQ_CST);
	}
}

/* In a fork child: a listener stays one.  The parent's door (if any)
 * stays the parent's, and the child may open its own at its first wait
 * (a prefork worker).  The twin reservation's file is shared: whichever
 * process opens a door first takes it (twin.c). */
static void listen_fork_child(struct shim_sock *s)
{
	if (s->rs >= 0) {
		s->rs = -1;
		__atomic_sub_fetch(&shim_live_listeners, 1, __ATOMIC_RELAXED);
	}
	__atomic_store_n(&s->door, SHIM_DOOR_NONE, __ATOMIC_RELAXED);
}

/* The listener's last reference in this process. */
static void listen_release(struct shim_sock *s)
{
	shim_listen_door_shut(s);
	twin_drop(s);
}

static const struct shim_kind_ops listen_ops = {
    .release = listen_release,
    .fork_child = listen_fork_child,
    .guarded = listen_guarded,
};

/* An eligible socket holds a reservation only when an exec'd image took
 * one over for its inherited listener (handover.c, twins_import) and the
 * start-up did not make it a listener (listen_adopt: another fd of it
 * went back to the kernel, or no RDMA under auto): it goes with the
 * socket. */
static const struct shim_kind_ops tcp_ops = {
    .release = twin_drop,
};

static void socket_start(void)
{
	shim_kind_set_ops(SHIM_SK_LISTEN, &listen_ops);
	shim_kind_set_ops(SHIM_SK_TCP, &tcp_ops);
}
SHIM_STARTUP(SOCKET, .start = socket_start);

/* Shut the open doors of ours at RDMA port `port`; did one give way? */
static bool door_give_way(uint16_t port)
{
	unsigned int span = shim_fdtable_span();
	bool gave = false;

	for (unsigned int fd = 0; fd < span; fd++) {
		struct shim_sock *s = shim_fd_get((int)fd);
		uint16_t p;

		if (!s || !shim_kind_is(s, SHIM_KF_DOOR) ||
		    !(s = shim_sock_ref((int)fd)))
			continue;
		p = shim_addr_port((struct sockaddr *)&s->local);
		if (!shim_kind_is(s, SHIM_KF_DOOR) ||
		    __atomic_load_n(&s->door, __ATOMIC_ACQUIRE) !=
			SHIM_DOOR_OPEN ||
		    !p || shim_rdma_port(p) != port) {
			shim_sock_put(s);
			continue;
		}
		shim_listen_door_shut(s);
		shim_info(
		    "fd %d: its RDMA listener on port %u gives way to the "
		    "program's bind; port %u is served over TCP only",
		    (int)fd, port, p);
		shim_sock_put(s);
		gave = true;
	}
	return gave;
}

/* A listener of ours on port (the program's TCP port), door not open. */
void shim_listen_door_port(uint16_t port)
{
	unsigned int span = shim_fdtable_span();

	for (unsigned int fd = 0; fd < span; fd++) {
		struct shim_sock *s = shim_fd_get((int)fd);

		if (!s || !shim_kind_is(s, SHIM_KF_DOOR) ||
		    !(s = shim_sock_ref((int)fd)))
			continue;
		if (shim_addr_port((struct sockaddr *)&s->local) == port)
			shim_listen_door(s); /* if none yet */
		shim_sock_put(s);
	}
}

static int listen_held(int fd, struct shim_sock *s, int backlog);

/* listen() on a sock of ours that is not eligible: out of line, so that
 * the kernel-fd path stays one test and a tail call. */
static __attribute__((noinline)) int listen_slow(int fd, struct shim_sock *s,
						 int kind, int backlog)
{
	int r;

	if (shim_kind_has(kind, SHIM_KF_SETTLING)) {
		errno = EINVAL; /* the kernel's, while it connects */
		return -1;
	}
	if (unlikely(!shim_sock_tryget(
		fd, s, SHIM_KINDS_WITH(SHIM_KF_ELIGIBLE | SHIM_KF_DOOR))))
		return listen(fd, backlog); /* a close() came first */
	if (shim_kind_is(s, SHIM_KF_DOOR)) {
		/* listen() again (on an inherited listener this image adopted
		 * too: listen_adopt): the kernel's backlog changes, and so
		 * does the door's if it is not open yet */
		r = REAL(listen)(fd, backlog);
		if (r == 0 && __atomic_load_n(&s->door, __ATOMIC_ACQUIRE) ==
				  SHIM_DOOR_NONE)
			s->backlog = backlog;
	} else {
		r = listen_held(fd, s, backlog);
	}
	shim_sock_put(s);
	return r;
}

SHIM_EXPORT int listen(int fd, int backlog)
{
	struct shim_sock *s = shim_fd_get(fd);
	int kind = s ? shim_kind(s) : 0;

	if (likely(!shim_kind_has(kind, SHIM_KF_ELIGIBLE | SHIM_KF_SETTLING |
					    SHIM_KF_DOOR)))
		return REAL(listen)(fd, backlog);
	return listen_slow(fd, s, kind, backlog);
}

/*
 * What listen() makes of TCP sock s once the kernel listens on fd (a
 * reference held): a listener of ours whose door opens at the first wait,
 * with backlog for the door, or the kernel's, with one line saying why.
 * -errno only where listen() is to fail: no door under require.  adopted:
 * an inherited listener taken at start-up (listen_adopt), where nothing
 * can fail: under require it goes to the kernel, with a warning.
 */
static int listen_take(int fd, struct shim_sock *s, int backlog, bool adopted)
{
	struct sockaddr_storage laddr;
	socklen_t alen;
	int r;

	s->local_len = sizeof(s->local);
	s->lfd = fd;
	if (!__atomic_load_n(&s->guard, __ATOMIC_ACQUIRE)) {
		const char *g = shim_kernel_guard(fd);

		if (g)
			__atomic_store_n(&s->guard, g, __ATOMIC_RELEASE);
	}
	if (__atomic_load_n(&s->guard, __ATOMIC_ACQUIRE)) {
		/* the operator's protection: TCP only, in every mode */
		shim_warn("fd %d: %s set on the listener: no RDMA listener, "
			  "its connections stay on TCP",
			  fd, s->guard);
		shim_stat_kernel(fd, ERDMA_PATH_LISTEN_TCP, NULL, EPERM, NULL,
				 0);
		shim_fd_install(fd, NULL);
		return 0;
	}
	r = REAL(getsockname)(fd, (struct sockaddr *)&s->local, &s->local_len);
	r = r < 0 ? -errno : door_addr(s, &laddr, &alen);
	if (r < 0) {
		if (adopted && shim_cfg.mode == SHIM_MODE_REQUIRE)
			shim_warn("fd %d: RDMA required but the inherited "
				  "listener is on TCP only (%s)",
				  fd, strerror(-r));
		else
			shim_info("fd %d: listening on TCP only (%s)", fd,
				  strerror(-r));
		if (shim_cfg.mode == SHIM_MODE_REQUIRE && !adopted)
			return r; /* listen() fails, the sock stays */
		shim_stat_kernel(fd, ERDMA_PATH_LISTEN_TCP, NULL, -r, NULL, 0);
		shim_fd_install(fd, NULL);
		return 0;
	}
	s->backlog = backlog;
	twin_reserve(s, (struct sockaddr *)&laddr, alen);
	shim_sock_ka_load(s, fd);
	shim_sock_attach(s, SHIM_SK_LISTEN, -1);
	return 0;
}

/* listen on TCP sock s, a reference held: 0, or -1 and errno. */
static int listen_held(int fd, struct shim_sock *s, int backlog)
{
	int r;

	r = REAL(listen)(fd, backlog);
	if (r < 0)
		return r;
	r = listen_take(fd, s, backlog, false);
	return r < 0 ? (int)shim_ret(r) : 0;
}

/*
 * Inherited listeners (docs/security.md, "What the reservation leaves
 * open"): a listening TCP socket this image was started with -- systemd's
 * LISTEN_FDS, an inetd "wait" service's stdin, a supervisor's fork+exec or
 * posix_spawn child, subprocess's pass_fds, gunicorn/uvicorn --fd -- is
 * taken at start-up as listen() takes one, since such a program never
 * calls listen() itself: the same guard and eligibility checks (a device
 * binding or filter read back from the kernel, the mode, the port rules),
 * the twin reservation carried across the exec if there is one for its
 * socket (handover.c, twins_import: then s is that TCP sock already), else
 * a fresh one, and the door opens at the first wait, as any listener's:
 * a parent that holds the socket too and never waits (systemd, a
 * supervisor) is untouched, and one that has a door on the port already
 * keeps it (door_taken: the exec'd image has the listener's socket open,
 * so it is the holder's own, and serves over TCP).
 *
 * The door's backlog is the kernel's for that socket, read back: a
 * listener's TCP_INFO has sk_max_ack_backlog (the program's backlog as
 * the kernel clamped it) in tcpi_sacked; SOMAXCONN if that can't be read.
 */
struct adopted {
	ino_t ino;
	struct shim_sock *s; /* NULL: that listener stays the kernel's */
};
#define ADOPT_MAX 64

/* fd's backlog, as the kernel keeps it */
static int adopt_backlog(int fd)
{
	struct tcp_info ti;
	socklen_t l = sizeof(ti);

	memset(&ti, 0, sizeof(ti));
	if (REAL(getsockopt)(fd, IPPROTO_TCP, TCP_INFO, &ti, &l) < 0 ||
	    l < offsetof(struct tcp_info, tcpi_sacked) +
		    sizeof(ti.tcpi_sacked) ||
	    ti.tcpi_state != TCP_LISTEN || !ti.tcpi_sacked ||
	    ti.tcpi_sacked > INT_MAX)
		return SOMAXCONN;
	return (int)ti.tcpi_sacked;
}

/* Is fd a TCP listener (of its family in *dom)? */
static bool adopt_candidate(int fd, int *dom)
{
	int type = 0, proto = 0, acc = 0;
	socklen_t l = sizeof(int);

	*dom = 0;
	return REAL(getsockopt)(fd, SOL_SOCKET, SO_ACCEPTCONN, &acc, &l) == 0 &&
	       acc &&
	       REAL(getsockopt)(fd, SOL_SOCKET, SO_DOMAIN, dom, &l) == 0 &&
	       REAL(getsockopt)(fd, SOL_SOCKET, SO_TYPE, &type, &l) == 0 &&
	       REAL(getsockopt)(fd, SOL_SOCKET, SO_PROTOCOL, &proto, &l) == 0 &&
	       eligible(*dom, type, proto);
}

/* One inherited listener at fd (socket inode ino): taken as listen()
 * takes one, or another fd of one taken already (a dup: one sock, as dup
 * makes it). */
static void adopt_one(int fd, ino_t ino, struct adopted *seen, unsigned int *n)
{
	struct shim_sock *s = shim_fd_get(fd);
	int dom, backlog, fl;

	for (unsigned int i = 0; i < *n; i++) {
		if (seen[i].ino != ino)
			continue;
		if (seen[i].s && !s) {
			shim_sock_get(seen[i].s);
			shim_fd_install(fd, seen[i].s);
		}
		return;
	}
	/* not ours yet, or a TCP sock that carries its reservation across
	 * the exec (twins_import); anything else (the log's fd) is left */
	if ((s && shim_kind(s) != SHIM_SK_TCP) || *n == ADOPT_MAX ||
	    !adopt_candidate(fd, &dom))
		return;
	/* asked only once a listener is there (a device list: not at every
	 * start of every image); under auto without RDMA socket() makes no
	 * sock either */
	if (shim_cfg.mode == SHIM_MODE_AUTO && !sg_available())
		return;
	if (!s) {
		s = shim_sock_new(SHIM_SK_TCP, dom);
		if (!s)
			return;
		fl = REAL(fcntl)(fd, F_GETFL);
		s->nonblock = fl >= 0 && (fl & O_NONBLOCK);
		shim_fd_install(fd, s);
	}
	s = shim_sock_ref(fd);
	if (!s)
		return;
	backlog = adopt_backlog(fd);
	listen_take(fd, s, backlog, true);
	seen[*n].ino = ino;
	seen[*n].s = shim_kind(s) == SHIM_SK_LISTEN ? s : NULL;
	(*n)++;
	if (seen[*n - 1].s)
		shim_dbg("fd %d: an inherited TCP listener, taken as listen() "
			 "takes one (backlog %d)",
			 fd, backlog);
	shim_sock_put(s);
}

static void listen_adopt(void)
{
	struct adopted seen[ADOPT_MAX];
	unsigned int n = 0;
	struct dirent *de;
	DIR *d;

	/* a setuid image: its fds are its caller's, as its environment */
	if (shim_cfg.env_ignored || shim_cfg.mode == SHIM_MODE_OFF)
		return;
	d = opendir("/proc/self/fd");
	if (!d) {
		shim_dbg("inherited listeners not looked for: /proc/self/fd: "
			 "%s",
			 strerror(errno));
		return;
	}
	while ((de = readdir(d))) {
		char *end;
		long fd = strtol(de->d_name, &end, 10);
		struct stat sb;

		if (end == de->d_name || *end || fd < 0 || fd > INT_MAX ||
		    fd == dirfd(d) || fstat((int)fd, &sb) < 0 ||
		    !S_ISSOCK(sb.st_mode))
			continue;
		adopt_one((int)fd, sb.st_ino, seen, &n);
	}
	closedir(d);
}
/* at load, not at init: it probes RDMA devices (libibverbs), and init
 * may run inside a sanitizer's own start (startup.h, loaded) */
SHIM_STARTUP(ADOPT, .loaded = listen_adopt);

/* Give an accepted rsocket a kernel socket of the program's family. */
static int adopt_accepted(struct shim_sock *ls, int lfd, int rs,
			  const struct sockaddr *peer, int flags)
{
	struct sockaddr_storage here;
	socklen_t hlen = sizeof(here);
	struct sg_sockopts o;
	struct shim_sock *ns;
	int nfd;

	nfd = REAL(socket)(
	    ls->family, SOCK_STREAM | (flags & (SOCK_NONBLOCK | SOCK_CLOEXEC)),
	    0);
	ns = nfd >= 0 ? shim_sock_new(SHIM_SK_RDMA, ls->family) : NULL;
	if (!ns) {
		int e = nfd < 0 ? errno : ENOMEM;

		if (nfd >= 0)
			REAL(close)(nfd);
		sg_close(rs);
		return -e;
	}
	ns->nonblock = (flags & SOCK_NONBLOCK) != 0;
	/* The shim does the blocking itself (io.c), as for a connected one:
	 * a later fcntl(O_NONBLOCK) then only changes ns->nonblock. */
	sg_set_nonblock(rs, true);
	ns->peer_len = shim_addr_to_family(peer, ls->family, &ns->peer);
	/* Local: the address the peer reached, with the listener's TCP port
	 * (never the rsocket's own). */
	if (sg_getsockname(rs, (struct sockaddr *)&here, &hlen) < 0)
		memcpy(&here, &ls->local, sizeof(here));
	ns->local_len = shim_addr_to_family((struct sockaddr *)&here,
					    ls->family, &ns->local);
	shim_addr_set_port((struct sockaddr *)&ns->local,
			   shim_addr_port((struct sockaddr *)&ls->local));
	shim_sock_inherit(ns, nfd, ls, lfd);
	o = shim_sock_opts(ns);
	sg_apply_keepalive(rs, &o);
	shim_sock_attach(ns, SHIM_SK_RDMA, rs);
	shim_fd_install(nfd, ns);
	shim_stat_sock(ns, nfd, ERDMA_PATH_RDMA);
	return nfd;
}

int shim_listen_qfd(struct shim_sock *s)
{
	if (__atomic_load_n(&s->door, __ATOMIC_ACQUIRE) != SHIM_DOOR_OPEN)
		return -1;
	return sg_listen_pollfd(s->rs);
}

/*
 * Wait for either listener: kfd (the listening fd, or the ring whose
 * accept is armed on it) or the door's queue.  SO_RCVTIMEO bounds accept
 * as in the kernel (EAGAIN when it expires).  A program's handler waits
 * for accept's end (accept_slow): one that jumps away then leaves nothing
 * held, no ring's accept armed.  An EINTR without one waiting (a handler
 * the shim does not wrap ran inside) restarts the wait when the kernel
 * would restart accept (SA_RESTART, no timeout).
 */
static int accept_wait(int kfd, struct shim_sock *s, int64_t *deadline)
{
	const struct timeval *tv = &s->rcvtimeo;
	bool timed = tv->tv_sec || tv->tv_usec;
	int left = -1;

	/* Both are kernel fds here (the rsocket's accept queue): rpoll on a
	 * listening rsocket can lag by seconds. */
	struct pollfd p[2] = {{.fd = kfd, .events = POLLIN},
			      {.fd = shim_listen_qfd(s), .events = POLLIN}};
	int r;

	for (;;) {
		if (timed) {
			if (!*deadline)
				*deadline = shim_now_ms() + tv->tv_sec * 1000 +
					    (tv->tv_usec + 999) / 1000;
			left = (int)(*deadline - shim_now_ms());
			if (left <= 0)
				return -EAGAIN;
		}
		r = shim_sig_poll(p, 2, left);
		if (r >= 0)
			return 0;
		if (!shim_wait_restarts(r, left))
			return r;
	}
}

/*
 * The program's buffers get the kernel's checks (EFAULT, EINVAL for a
 * negative length) before the shim writes the RDMA connection's address:
 * the kernel socket under the fd validates them, its answer is overwritten.
 */
static int check_name_args(int fd, struct sockaddr *addr, socklen_t *len,
			   socklen_t *cap)
{
	struct iovec here = {cap, sizeof(*cap)}, there = {len, sizeof(*len)};
	ssize_t n = process_vm_readv(getpid(), &here, 1, &there, 1, 0);

	if (n < 0 && errno != EFAULT)
		*cap = *len; /* no such call here (seccomp): read it plainly */
	else if (n != (ssize_t)sizeof(*cap)) {
		errno = EFAULT;
		return -1;
	}
	return REAL(getsockname)(fd, addr, len);
}

/*
 * An RDMA connection from the door's queue: its new fd, or -EAGAIN.  The
 * kernel's accept writes no length without an address, and one it cannot
 * write the address through (a NULL or bad length, a negative one) takes
 * the connection and drops it (EFAULT, EINVAL): checked as getsockname
 * checks the same arguments, on the listener's kernel socket.
 */
static int door_take(int fd, struct shim_sock *s, struct sockaddr *addr,
		     socklen_t *len, int flags)
{
	struct sockaddr_storage peer, pname;
	socklen_t plen = sizeof(peer), cap;
	int r = -EAGAIN, nfd;

	if (door_enter(s)) {
		r = sg_accept(s->rs, (struct sockaddr *)&peer, &plen);
		door_leave(s);
	}
	if (r < 0)
		return -EAGAIN;
	if (addr && check_name_args(fd, addr, len, &cap) < 0) {
		int e = errno;

		sg_close(r);
		return -e;
	}
	nfd = adopt_accepted(s, fd, r, (struct sockaddr *)&peer, flags);
	if (nfd < 0 || !addr)
		return nfd;
	/* the name from here, not from the new sock: another thread may
	 * close nfd already */
	plen = shim_addr_to_family((struct sockaddr *)&peer, s->family, &pname);
	shim_addr_copy_out(&pname, plen, addr, &cap);
	*len = cap;
	return nfd;
}

static int tcp_accepted(int r)
{
	if (r >= 0)
		shim_stat_kernel(r, ERDMA_PATH_TCP, "peer connected over TCP",
				 0, NULL, 0);
	return r;
}

/* The ring's accept withdrawn; a connection it took in the meantime is
 * closed (pthread_cancel: nobody will hear of it).  The ring stays the
 * thread's (uring.c). */
static void ring_drop(void *arg)
{
	struct shim_uring *u = arg;
	int r = shim_uring_cancel(u);

	if (r >= 0)
		REAL(close)(r);
}

/*
 * A blocking accept with the door open, the listener's file blocking: the
 * kernel's accept is armed on a ring (uring.c) and the door's queue
 * watched beside it.  When the door's queue wakes the thread, the kernel
 * accept is withdrawn; one that completed meanwhile is given out (the
 * RDMA connection stays queued for the next accept).
 */
static int accept_ring(int fd, struct shim_sock *s, struct shim_uring *u,
		       struct sockaddr *addr, socklen_t *len, int flags)
{
	int64_t deadline = 0;
	int r, res;

	for (;;) {
		/* a ring that can't take the request: out of memory, as
		 * far as accept can say */
		if (shim_uring_accept(u, fd, addr, len, flags) < 0)
			return -ENOMEM;
		r = accept_wait(u->fd, s, &deadline);
		res = shim_uring_cancel(u);
		if (res != -ECANCELED && res != -EINTR)
			return tcp_accepted(res);
		if (r < 0)
			return r;
		r = door_take(fd, s, addr, len, flags);
		if (r != -EAGAIN)
			return r;
	}
}

/*
 * No io_uring here (ENOSYS: none, or older than 5.12; EPERM: a seccomp
 * profile): the door's holder makes the listener's file non-blocking
 * underneath, as before the ring.  Every process sharing the file sees the
 * flag, so accept, F_GETFL and FIONBIO go by the program's own view
 * (s->nonblock, kept in every process by socket/fcntl/ioctl), and shimmed
 * siblings keep blocking; a process without the shim sees it (README).
 */
static void force_nonblock(int fd, struct shim_sock *s, int why)
{
	static bool said;
	int fl = REAL(fcntl)(fd, F_GETFL);

	if (fl >= 0 && !(fl & O_NONBLOCK))
		REAL(fcntl)(fd, F_SETFL, fl | O_NONBLOCK);
	__atomic_store_n(&s->nb_forced, true, __ATOMIC_RELEASE);
	if (why && !__atomic_exchange_n(&said, true, __ATOMIC_RELAXED))
		shim_info("no io_uring (%s): a listener with an RDMA door "
			  "runs non-blocking underneath (fd %d)",
			  strerror(why), fd);
}

/* accept_door's word for "no door open, the listener's file blocking":
 * the kernel's own accept, outside the hold (not an fd, not -errno). */
#define ACCEPT_IN_KERNEL INT_MIN

/* accept from the door or the kernel's queue, without blocking outside
 * shim_sig_poll: the program's handlers wait meanwhile (accept_both). */
static int accept_door(int fd, struct shim_sock *s, struct sockaddr *addr,
		       socklen_t *len, int flags)
{
	int64_t deadline = 0;
	int r, fl;

	r = door_take(fd, s, addr, len, flags);
	if (r != -EAGAIN)
		return r;
	fl = REAL(fcntl)(fd, F_GETFL);
	if (fl < 0)
		return -errno;
	if (!(fl & O_NONBLOCK)) {
		struct shim_uring *u;

		if (__atomic_load_n(&s->door, __ATOMIC_ACQUIRE) !=
		    SHIM_DOOR_OPEN)
			return ACCEPT_IN_KERNEL;
		u = shim_uring_thread(&r);
		if (u) {
			pthread_cleanup_push(ring_drop, u);
			r = accept_ring(fd, s, u, addr, len, flags);
			pthread_cleanup_pop(0);
			return r;
		}
		if (r != -ENOSYS && r != -EPERM)
			return r; /* EMFILE, ENOMEM: accept's own errors */
		force_nonblock(fd, s, -r);
	}
	for (;;) {
		r = REAL(accept4)(fd, addr, len, flags);
		if (r >= 0 || (errno != EAGAIN && errno != EWOULDBLOCK))
			return tcp_accepted(r < 0 ? -errno : r);
		if (s->nonblock)
			return -EAGAIN; /* the program's non-blocking file */
		r = accept_wait(fd, s, &deadline);
		if (r < 0)
			return r;
		r = door_take(fd, s, addr, len, flags);
		if (r != -EAGAIN)
			return r;
		/* a process without the shim cleared the flag meanwhile */
		if (__atomic_load_n(&s->nb_forced, __ATOMIC_ACQUIRE))
			force_nonblock(fd, s, 0);
	}
}

static void unhold(void *unused)
{
	shim_sig_unhold();
}

/*
 * Handlers wait through accept_door (shim_sig_hold): a jump from one run
 * between arming the ring's accept and the wait, or after the wait and
 * before the ring's cancel, would leave the kernel's accept armed, and one
 * that accepts there would arm a second.  They run at accept's end
 * (accept_once).  Outside the hold: opening the door (it may wait for the
 * host-wide listen lock) and the kernel's own blocking accept, which runs
 * them inside, as the kernel does.
 */
static int accept_both(int fd, struct shim_sock *s, struct sockaddr *addr,
		       socklen_t *len, int flags)
{
	struct pollfd p = {.fd = fd, .events = POLLIN};
	int r, fl;

	shim_listen_door(s);
	for (;;) {
		shim_sig_hold();
		pthread_cleanup_push(unhold, NULL); /* ppoll: cancellation */
		r = accept_door(fd, s, addr, len, flags);
		pthread_cleanup_pop(1);
		if (r != ACCEPT_IN_KERNEL)
			return r;
		/* One came in the hold: it runs first (accept_once), unless
		 * a connection is there to take, as the kernel's would. */
		if (shim_sig_waiting() && REAL(poll)(&p, 1, 0) <= 0)
			return -EINTR;
		/* No door (a sibling's, or none): the kernel's own accept,
		 * blocking, timeouts and restarts included. */
		r = REAL(accept4)(fd, addr, len, flags);
		if (r >= 0 || (errno != EAGAIN && errno != EWOULDBLOCK) ||
		    s->nonblock)
			return tcp_accepted(r < 0 ? -errno : r);
		/* EAGAIN on the program's blocking listener: a timeout, or
		 * the door's holder (a sibling without io_uring) made the
		 * shared file non-blocking since accept_door looked; then
		 * accept_door waits, as the program's accept blocks. */
		fl = REAL(fcntl)(fd, F_GETFL);
		if (fl < 0 || !(fl & O_NONBLOCK))
			return -EAGAIN;
	}
}

static void accept_end(void *s)
{
	shim_sock_put(s);
	shim_sig_edge_leave();
}

/* One accept with a reference to s; gives it back, then runs the handlers
 * that waited: true when accept is to be made again (EINTR, all of them
 * SA_RESTART, no SO_RCVTIMEO), as the kernel restarts it. */
static bool accept_once(int fd, struct shim_sock *s, struct sockaddr *addr,
			socklen_t *len, int flags, int *res)
{
	bool timed = s->rcvtimeo.tv_sec || s->rcvtimeo.tv_usec;
	int r;

	shim_sig_edge_enter();
	pthread_cleanup_push(accept_end, s); /* a cancellation point */
	r = accept_both(fd, s, addr, len, flags);
	pthread_cleanup_pop(0);
	shim_sock_put(s);
	*res = r;
	return shim_sig_edge_leave() && shim_sig_deliver(r, timed);
}

/* Out of line: the cleanup's frame would cost accept4's kernel-fd path
 * its tail call.  A restart is a loop here, not a call: a server idle in
 * accept under a frequent SA_RESTART signal must not grow its stack. */
static __attribute__((noinline)) int accept_slow(int fd, struct shim_sock *s,
						 struct sockaddr *addr,
						 socklen_t *len, int flags)
{
	int r;

	while (accept_once(fd, s, addr, len, flags, &r)) {
		s = shim_fd_get(fd);
		if (!s || !shim_kind_is(s, SHIM_KF_DOOR) ||
		    !shim_sock_tryget(fd, s, SHIM_KINDS_WITH(SHIM_KF_DOOR)))
			return accept4(fd, addr, len, flags); /* not ours now */
	}
	return (int)shim_ret(r);
}

SHIM_EXPORT int accept4(int fd, __SOCKADDR_ARG addr, socklen_t *len, int flags)
{
	struct shim_sock *s = shim_fd_get(fd);

	if (likely(!s || !shim_kind_is(s, SHIM_KF_DOOR)))
		return REAL(accept4)(fd, addr, len, flags);
	if (flags & ~(SOCK_NONBLOCK | SOCK_CLOEXEC)) {
		errno = EINVAL;
		return -1;
	}
	if (unlikely(!shim_sock_tryget(fd, s, SHIM_KINDS_WITH(SHIM_KF_DOOR))))
		return accept4(fd, addr, len, flags); /* a close() came first */
	return accept_slow(fd, s, addr.__sockaddr__, len, flags);
}

SHIM_EXPORT int accept(int fd, __SOCKADDR_ARG addr, socklen_t *len)
{
	struct shim_sock *s = shim_fd_get(fd);

	if (likely(!s || !shim_kind_is(s, SHIM_KF_DOOR)))
		return REAL(accept)(fd, addr, len);
	return accept4(fd, addr, len, 0);
}

/* shutdown of an RDMA connection or listener: out of line, so that the
 * kernel-fd path stays a tail call. */
static __attribute__((noinline)) int shutdown_slow(int fd, struct shim_sock *s,
						   int how)
{
	int r;

	/* a reference first, then the handover check (handover.c) */
	if (unlikely(!shim_sock_tryget(
		fd, s, SHIM_KINDS_WITH(SHIM_KF_CONN | SHIM_KF_DOOR))))
		return shutdown(fd, how); /* a close() came first */
	if (shim_kind_is(s, SHIM_KF_DOOR)) {
		/* No RDMA connection is accepted after it, as no TCP one is:
		 * the queued ones end now (door_shut). */
		r = REAL(shutdown)(fd, how);
		if (r == 0 && how != SHUT_WR)
			shim_listen_door_shut(s);
		shim_sock_put(s);
		return r;
	}
	if (how != SHUT_RD && how != SHUT_WR && how != SHUT_RDWR) {
		shim_sock_put(s);
		errno = EINVAL;
		return -1;
	}
	if (!shim_sock_usable(s)) { /* handed over meanwhile */
		shim_sock_put(s);
		return REAL(shutdown)(fd, how);
	}
	/* SHUT_RD tells the peer nothing in TCP, and the kernel still reads
	 * out what is queued (io.c): rsockets' own SHUT_RD would hide it, so
	 * it stays ours.  SHUT_RDWR is the peer's FIN plus that. */
	r = how == SHUT_RD ? 0 : sg_shutdown(s->rs, SHUT_WR);
	if (r == 0) {
		s->rd_shut |= how != SHUT_WR;
		s->wr_shut |= how != SHUT_RD;
		/* its readiness changed (IN, OUT, HUP): threads asleep on it
		 * and epoll sleepers that parked it look again, as the
		 * kernel's shutdown wakes its waiters (the note first: see
		 * sg_shut_note) */
		sg_shut_note(s->rs, how);
		/* the kernel's wake-up is an edge for ET registrations too */
		if (how != SHUT_WR)
			__atomic_add_fetch(&s->rd_gen, 1, __ATOMIC_SEQ_CST);
		if (how != SHUT_RD)
			__atomic_add_fetch(&s->wr_gen, 1, __ATOMIC_SEQ_CST);
		shim_sock_ev_io(s);
	}
	shim_sock_put(s);
	return (int)shim_ret(r);
}

SHIM_EXPORT int shutdown(int fd, int how)
{
	struct shim_sock *s = shim_fd_get(fd);

	if (likely(!s || !shim_kind_is(s, SHIM_KF_CONN | SHIM_KF_DOOR)))
		return REAL(shutdown)(fd, how);
	return shutdown_slow(fd, s, how);
}

/* getsockname (peer false) or getpeername of a sock that keeps its names
 * (NAMES).  Out of line: the kernel-fd path stays a tail call. */
static __attribute__((noinline)) int names_slow(int fd, struct shim_sock *s,
						struct sockaddr *addr,
						socklen_t *len, bool peer)
{
	socklen_t cap;

	if (unlikely(!shim_sock_tryget(fd, s, SHIM_KINDS_WITH(SHIM_KF_NAMES))))
		/* a close() came first */
		return peer ? getpeername(fd, addr, len)
			    : getsockname(fd, addr, len);
	/* the kernel's inet_getname: no peer once the connection is closed
	 * (both FINs in, or a reset), before it looks at the arguments */
	if (peer && shim_kind_is(s, SHIM_KF_CONN) && shim_rdma_closed(s)) {
		shim_sock_put(s);
		errno = ENOTCONN;
		return -1;
	}
	if (check_name_args(fd, addr, len, &cap) < 0) {
		shim_sock_put(s);
		return -1;
	}
	if (peer)
		shim_addr_copy_out(&s->peer, s->peer_len, addr, &cap);
	else
		shim_addr_copy_out(&s->local, s->local_len, addr, &cap);
	shim_sock_put(s);
	*len = cap;
	return 0;
}

SHIM_EXPORT int getsockname(int fd, __SOCKADDR_ARG addr, socklen_t *len)
{
	struct shim_sock *s = shim_fd_get(fd);

	if (likely(!s || !shim_kind_is(s, SHIM_KF_NAMES)))
		return REAL(getsockname)(fd, addr, len);
	return names_slow(fd, s, addr.__sockaddr__, len, false);
}

SHIM_EXPORT int getpeername(int fd, __SOCKADDR_ARG addr, socklen_t *len)
{
	struct shim_sock *s = shim_fd_get(fd);

	if (likely(!s || !shim_kind_is(s, SHIM_KF_NAMES)))
		return REAL(getpeername)(fd, addr, len);
	return names_slow(fd, s, addr.__sockaddr__, len, true);
}

int shim_forgot_begin(void)
{
	int cs;

	/* None held: the edge ends here, before a real call that may be a
	 * cancellation point (close, fclose's flush) and so may never return.
	 * None can come meanwhile: a handler waits only inside librdmacm, a
	 * sleep or a hold, whose owners run it. */
	if (likely(!shim_sig_waiting())) {
		(void)shim_sig_edge_leave();
		return -1;
	}
	pthread_setcancelstate(PTHREAD_CANCEL_DISABLE, &cs);
	return cs;
}

void shim_forgot_end(int cancel_state)
{
	int e = errno;

	if (cancel_state < 0)
		return;
	pthread_setcancelstate(cancel_state, NULL);
	/* unless the shim is still inside something of its own: librdmacm
	 * closes its service socket from inside raccept */
	if (shim_sig_edge_leave())
		shim_sig_run_if_free();
	errno = e;
}

static __attribute__((noinline)) int close_ours(int fd, struct shim_sock *s)
{
	int r, cs;

	shim_sig_edge_enter();
	shim_fd_forget(fd, s);
	cs = shim_forgot_begin();
	r = REAL(close)(fd);
	shim_forgot_end(cs);
	return r;
}

SHIM_EXPORT int close(int fd)
{
	struct shim_sock *s = shim_fd_get(fd);

	if (likely(!s))
		return REAL(close)(fd);
	return close_ours(fd, s);
}

static void forget_range(unsigned int first, unsigned int last)
{
	unsigned int span = shim_fdtable_span();

	if (last >= span)
		last = span ? span - 1 : 0;
	for (unsigned int fd = first; fd <= last && fd < span; fd++)
		if (shim_fd_get((int)fd))
			shim_fd_install((int)fd, NULL);
}

SHIM_EXPORT int close_range(unsigned int first, unsigned int last, int flags)
{
	int r, cs;

	shim_ensure_init();
	if (!REAL(close_range)) {
		errno = ENOSYS;
		return -1;
	}
	/* CLOSE_RANGE_CLOEXEC only marks the fds: nothing is closed yet;
	 * nor with a flag the kernel does not know (EINVAL). */
	if ((flags & ~CLOSE_RANGE_UNSHARE) || first > last)
		return REAL(close_range)(first, last, flags);
	shim_sig_edge_enter();
	forget_range(first, last);
	cs = shim_forgot_begin();
	r = REAL(close_range)(first, last, flags);
	shim_forgot_end(cs);
	return r;
}

SHIM_EXPORT void closefrom(int lowfd)
{
	int cs;

	shim_ensure_init();
	if (lowfd < 0)
		lowfd = 0;
	shim_sig_edge_enter();
	forget_range((unsigned int)lowfd, ~0u);
	cs = shim_forgot_begin();
	REAL(closefrom)(lowfd);
	shim_forgot_end(cs);
}

SHIM_EXPORT int dup(int fd)
{
	int r;

	if (likely(!shim_fd_get(fd)))
		return REAL(dup)(fd);
	r = REAL(dup)(fd);
	if (r >= 0)
		shim_fd_share(fd, r);
	return r;
}

SHIM_EXPORT int dup2(int oldfd, int newfd)
{
	int r;

	if (likely(!shim_fd_get(newfd) && !shim_fd_get(oldfd)))
		return REAL(dup2)(oldfd, newfd);
	r = REAL(dup2)(oldfd, newfd);
	if (r >= 0 && oldfd != newfd)
		shim_fd_share(oldfd, newfd);
	return r;
}

SHIM_EXPORT int dup3(int oldfd, int newfd, int flags)
{
	int r;

	if (likely(!shim_fd_get(newfd) && !shim_fd_get(oldfd)))
		return REAL(dup3)(oldfd, newfd, flags);
	r = REAL(dup3)(oldfd, newfd, flags);
	if (r >= 0)
		shim_fd_share(oldfd, newfd);
	return r;
}
