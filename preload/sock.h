/* SPDX-License-Identifier: MIT */
/*
 * What the shim knows about an fd it cares about.  A kernel fd it does not
 * care about has no shim_sock at all (fdtable entry NULL: the fast path).
 *
 * Lifetime: refs counts the fds that map to the sock (dup shares it) plus
 * calls in flight (a blocked recv, an epoll_wait's snapshot).  The rsocket
 * is closed when the last reference goes, so close() in one thread never
 * pulls an rsocket from under another thread that is using it — the same
 * rule the kernel applies to a file.
 */
#ifndef SHIM_SOCK_H
#define SHIM_SOCK_H

#include "fdtable.h"
#include "addr.h"
#include "kind.h"

#include <netinet/in.h>
#include <pthread.h>

/*
 * What the epoll emulation must hear of a sock, as it happens: the socket
 * object and the families below epoll tell it through these, which epoll.c
 * sets at its start step, so none of them calls up into epoll.
 * - changed: s became RDMA or connecting: its kernel registrations move
 *   into the emulation;  fell_back: its rendezvous ended on the kernel;
 * - door_opened: listener s opened its RDMA door: its registrations watch
 *   the door's accept queue too;
 * - forget: the last fd of s was closed: its registrations go, as in the
 *   kernel;  fd_closing: fd of epoll sock s closes, s lives on elsewhere;
 * - kick_parked: the program did I/O on s while an epoll_wait that stopped
 *   watching it (ET bits reported) sleeps: it must look again.
 */
struct shim_sock_ev {
	void (*changed)(struct shim_sock *s);
	void (*fell_back)(struct shim_sock *s);
	void (*door_opened)(struct shim_sock *s);
	void (*forget)(struct shim_sock *s);
	void (*fd_closing)(struct shim_sock *s, int fd);
	void (*kick_parked)(struct shim_sock *s);
};
extern const struct shim_sock_ev *shim_sock_ev;
void shim_sock_on_events(const struct shim_sock_ev *ev);

struct shim_sock {
	int kind;
	int refs; /* atomic: fds + calls in flight; 0: released */
	/* Released, in sock.c's pool: the next one.  What follows is
	 * unreadable there under ASan (sock.c, pool_poison). */
	struct shim_sock *next_free;
	int fdrefs;    /* atomic: fds only (dup shares the sock) */
	int cthreads;  /* the connect thread's references (connect.c, under
			* its inbox_mu) */
	int ep_regs;   /* atomic: epoll registrations naming this sock */
	int ep_parked; /* atomic: a sleeping epoll_wait stopped watching it */
	/* epoll.c's registrations naming this sock, linked through their
	 * s_next (under epoll.c's bysock_mu) */
	struct ep_reg *ep_list;
	struct ep_set *epset; /* SHIM_SK_EPOLL */
	/* SHIM_SK_LISTEN: its RDMA door, the rsocket listener, is opened by
	 * the first wait for a connection in this process (socket.c). */
	int door;	/* atomic: SHIM_DOOR_* */
	int door_users; /* atomic: threads inside a raccept on it */
	int backlog;	/* the program's */
	/* The door's port reserved since listen(), until a door opens
	 * (rsocket_glue/twin.c): this process's copy of the reservation's
	 * file + 1 (0: none), and the id in it. */
	int twin;
	uint32_t twin_id;
	/* atomic: the name of a TCP-level protection set on it (TCP-MD5,
	 * a socket filter, SO_BINDTODEVICE...): a listener with one opens
	 * no RDMA door (socket.c, listen_guarded); NULL: none */
	const char *guard;
	int lfd;       /* the listening fd, for the log and the stats */
	int rs;	       /* rsocket, -1 if none */
	int family;    /* the program's socket family */
	bool nonblock; /* the program's view of O_NONBLOCK */
	/* atomic, SHIM_SK_LISTEN: no io_uring, so this process made the
	 * file non-blocking underneath (socket.c, force_nonblock); a
	 * listener's accept and F_GETFL go by nonblock either way */
	bool nb_forced;
	/* atomic: an RDMA connection nothing has used yet (no I/O, poll or
	 * epoll registration since it was made): a fork hands it over
	 * (handover.c) */
	bool fresh;
	bool handed; /* atomic: a fork's handover took it (handover.c) */
	int hfd;     /* the fd it was handed over on: calls go there since */
	bool connect_pending;  /* EINPROGRESS given, completion not yet told */
	bool rd_shut, wr_shut; /* shutdown() seen */
	bool wr_full;	       /* the last send could not all go (atomic) */
	int so_error;	       /* pending SO_ERROR for the program */
	/* SHIM_SK_CONNECTING: an eventfd that the rendezvous's end makes
	 * readable, made for the first sleeper (-1: none), and the sleepers
	 * watching it; both under connect.c's settle_mu */
	int settle_fd, settle_users;
	int fail_kind; /* SHIM_SK_FAILED: the kind after its error is told */
	/* atomic: TCP, its kernel socket refused for a failed rendezvous
	 * (connect.c, kernel_refused): the next connect is the kernel's */
	bool refused;
	/* atomic: the peer has gone and the one send TCP lets through after
	 * that went (dropped): the connection is reset (io.c, past_end) */
	int reset;
	/* atomic: its transport failed, ETIMEDOUT (io.c, shim_rdma_timed_out)
	 */
	int tfail;
	/* Program options remembered for the rsocket (0 = unset). */
	unsigned int sndbuf, rcvbuf;
	struct timeval rcvtimeo, sndtimeo;
	/* atomic: which of the options an accepted socket copies from its
	 * listener (sockopt.c, inh_opt) the program set on this one */
	unsigned char inh;
	/* Keepalive options as set (sockopt.c): the rsocket's, and an
	 * accepted connection's inheritance from its listener. */
	struct shim_keepalive {
		unsigned char set; /* bit i: opt[i] was set (sockopt.c) */
		int val[5];
	} ka;
	/* Readiness generations: bumped when the program reads, or when a
	 * write comes back short or EAGAIN (epoll ET re-arming). */
	unsigned int rd_gen, wr_gen;
	/* Addresses as the program expects them (its family, its ports). */
	struct sockaddr_storage local, peer;
	socklen_t local_len, peer_len;
	/* Statistics.  rx_bytes (atomic) counts the bytes handed to the
	 * program, never peeks: epoll's ET accounting relies on it, and on
	 * rd_busy (atomic), the receives under way (see shim_rdma_arrived). */
	uint64_t tx_bytes, rx_bytes;
	int rd_busy;
	unsigned int stat_ref; /* slot in the stats table (stats.h), 0 = none */
};

/* s's kind.  It changes under other threads' feet (a connect settles on
 * the connect thread, connect.c, after writing rs and the names): read it
 * once, with acquire (a plain load on x86). */
static inline int shim_kind(const struct shim_sock *s)
{
	return __atomic_load_n(&s->kind, __ATOMIC_ACQUIRE);
}

/* Has s's kind any of the properties f (kind.h)?  One read of the kind;
 * a function that asks twice and needs one answer reads shim_kind once
 * and asks shim_kind_has. */
#define shim_kind_is(s, f) shim_kind_has(shim_kind(s), f)

/* A non-blocking connect's rendezvous is under way on s (connect.c). */
static inline bool shim_sock_connecting(const struct shim_sock *s)
{
	return shim_kind(s) == SHIM_SK_CONNECTING;
}

/* The one object every internal fd maps to, and the one that marks
 * librdmacm's connect-service socket.  Neither is reference counted. */
extern struct shim_sock shim_internal_sock;
extern struct shim_sock shim_svc_sock;
static inline bool shim_sock_is_sentinel(const struct shim_sock *s)
{
	return s == &shim_internal_sock || s == &shim_svc_sock;
}

/* Number of live RDMA and LISTEN socks: 0 keeps poll/select on libc. */
extern int shim_rdma_socks;

struct shim_sock *shim_sock_new(int kind, int family);
static inline void shim_sock_get(struct shim_sock *s)
{
	/* seq_cst: a handover's store of handed and its load of refs pair
	 * with a caller's increment here and its load of handed after */
	__atomic_add_fetch(&s->refs, 1, __ATOMIC_SEQ_CST);
}
void shim_sock_release(struct shim_sock *s);
/* Inline: every RDMA call puts what it took (its common case is a test and
 * a decrement; 0-2 instructions an op saved, bench/cost-table). */
static inline void shim_sock_put(struct shim_sock *s)
{
	if (shim_sock_is_sentinel(s))
		return;
	if (unlikely(!__atomic_sub_fetch(&s->refs, 1, __ATOMIC_ACQ_REL)))
		shim_sock_release(s);
}
/* Drop a reference unless it is the last one: false, and nothing done,
 * when it is (the caller puts it where a release may run). */
bool shim_sock_put_unless_last(struct shim_sock *s);
/*
 * A reference to s, which the caller found on fd without one and whose
 * kind it then read as one of kinds (SHIM_SK() bits); false when a
 * concurrent close() released s meanwhile, fd no longer names it, or s is
 * now of another kind -- a released sock comes back from the pool, often
 * on the same fd number (the lowest free one), as a new socket.  The
 * caller then starts its call over from the fd table.  Safe on a released
 * sock: socks are type-stable.
 */
static inline bool shim_sock_tryget(int fd, struct shim_sock *s,
				    unsigned int kinds)
{
	int r = __atomic_load_n(&s->refs, __ATOMIC_RELAXED);

	if (shim_sock_is_sentinel(s))
		return true; /* never released */
	do {
		if (r <= 0)
			return false;
	} while (!__atomic_compare_exchange_n(
	    &s->refs, &r, r + 1, true, __ATOMIC_SEQ_CST, __ATOMIC_RELAXED));
	if (likely(
		shim_fd_get(fd) == s &&
		(SHIM_SK(__atomic_load_n(&s->kind, __ATOMIC_ACQUIRE)) & kinds)))
		return true;
	shim_sock_put(s);
	return false;
}
/* RDMA connections not used yet (a fork hands them over: handover.c);
 * 0 keeps fork cheap. */
extern int shim_fresh_conns;
/* s is being used: it is no longer one a fork hands over. */
static inline void shim_sock_used(struct shim_sock *s)
{
	if (unlikely(__atomic_load_n(&s->fresh, __ATOMIC_RELAXED)) &&
	    __atomic_exchange_n(&s->fresh, false, __ATOMIC_ACQ_REL))
		__atomic_sub_fetch(&shim_fresh_conns, 1, __ATOMIC_RELAXED);
}
/*
 * May a call that found s on its fd use s's rsocket?  Yes, except when a
 * fork's handover has taken (or is taking) s: the fd then names a kernel
 * socket, and the caller goes to the kernel with it.  Waits out a handover
 * in progress (the handover lock, below).  The first use of a fresh s
 * marks it used.
 */
bool shim_first_use_slow(struct shim_sock *s);
/* The handover lock: held by a fork's handover (handover.c) from before
 * the fork through it; made anew in the child. */
void shim_sock_handover_lock(void);
void shim_sock_handover_unlock(void);
void shim_sock_handover_reset(void);
static inline bool shim_sock_usable(struct shim_sock *s)
{
	if (likely(!__atomic_load_n(&s->fresh, __ATOMIC_SEQ_CST) &&
		   !__atomic_load_n(&s->handed, __ATOMIC_SEQ_CST)))
		return true;
	return shim_first_use_slow(s);
}
/* Make s an RDMA/LISTEN sock over rs (counts it in shim_rdma_socks). */
void shim_sock_attach(struct shim_sock *s, int kind, int rs);

/* fd -> sock with a reference held; NULL for fds the shim leaves alone. */
struct shim_sock *shim_sock_ref(int fd);

enum { SHIM_DOOR_NONE, SHIM_DOOR_OPENING, SHIM_DOOR_OPEN, SHIM_DOOR_SHUT };

/*
 * The port of TCP port's RDMA twin: the rsocket listener a server opens and
 * a client connects to (sock.c).  Both ends compute it the same way, with no
 * configuration: port + ERDMA_SHIM_PORT_OFFSET when that is set, else +0
 * on InfiniBand/RoCE (rdma_cm's port space is its own) and
 * +SHIM_IWARP_PORT_OFFSET when an iWARP device is present (there an rsocket
 * listener is a kernel TCP listener: on the program's own port it would
 * collide with the program's listener).  port must be 1..65535.
 */
uint16_t shim_rdma_port(uint16_t port);

/* ---- telling the epoll emulation (struct shim_sock_ev) ---- */
#define SHIM_SOCK_EV(name, ...)                                                \
	do {                                                                   \
		const struct shim_sock_ev *ev_ =                               \
		    __atomic_load_n(&shim_sock_ev, __ATOMIC_ACQUIRE);          \
		if (ev_)                                                       \
			ev_->name(__VA_ARGS__);                                \
	} while (0)

static inline void shim_sock_ev_changed(struct shim_sock *s)
{
	SHIM_SOCK_EV(changed, s);
}
static inline void shim_sock_ev_fell_back(struct shim_sock *s)
{
	SHIM_SOCK_EV(fell_back, s);
}
static inline void shim_sock_ev_door_opened(struct shim_sock *s)
{
	SHIM_SOCK_EV(door_opened, s);
}
static inline void shim_sock_ev_forget(struct shim_sock *s)
{
	SHIM_SOCK_EV(forget, s);
}
static inline void shim_sock_ev_fd_closing(struct shim_sock *s, int fd)
{
	SHIM_SOCK_EV(fd_closing, s, fd);
}
/* The program did I/O on s (its generations moved).  Cheap unless an
 * epoll_wait is parked on s. */
static inline void shim_sock_ev_io(struct shim_sock *s)
{
	if (unlikely(__atomic_load_n(&s->ep_parked, __ATOMIC_SEQ_CST)))
		SHIM_SOCK_EV(kick_parked, s);
}

#endif
