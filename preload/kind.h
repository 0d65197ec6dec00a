/* SPDX-License-Identifier: MIT */
/*
 * A sock's kind and what follows from it (kind.c), in the manner of
 * OpenOnload's per-fd-type protocol tables: a family asks the table what
 * a kind does (shim_kind_is: "are its data calls the shim's?"), not which
 * kind it is.  Two parts:
 *
 * - the properties: one const table, SHIM_KIND_TABLE, read at compile
 *   time: SHIM_KINDS_WITH(f) is a constant set of kinds (SHIM_SK() bits),
 *   so a lookup costs what a comparison did, and the same set serves
 *   shim_sock_tryget;
 * - the operations that differ per kind and belong to the room that owns
 *   the kind (struct shim_kind_ops): set by that room's start step
 *   (base/startup.h), so the socket object and fork.c call into a family
 *   without naming it.
 *
 * A kind's value stays the state of a sock's state machine: the code that
 * moves a sock from one kind to another (connect.c, settle.c, fork's
 * children) names kinds, not properties.
 */
#ifndef SHIM_KIND_H
#define SHIM_KIND_H

#include <stdbool.h>

struct shim_sock;

enum shim_kind {
	SHIM_SK_INTERNAL = 1, /* the shim's own fd (log): watched, not owned */
	SHIM_SK_TCP,	/* eligible TCP socket, not yet connected/listening */
	SHIM_SK_RDMA,	/* connection carried by an rsocket */
	SHIM_SK_LISTEN, /* kernel listener plus an rsocket listener */
	SHIM_SK_EPOLL,	/* an epoll fd with RDMA registrations */
	SHIM_SK_DEAD,	/* inherited over fork, or a connect fell back:
			 * the kernel fd answers */
	SHIM_SK_SVC,	/* librdmacm's service-thread socket (see svc.c) */
	SHIM_SK_RELAY,	/* handed over at fork (handover.c): a loopback TCP
			 * socket whose peer a relay feeds from the rsocket */
	SHIM_SK_CONNECTING, /* a non-blocking connect's RDMA rendezvous runs
			     * on a thread (connect.c); the fd is a bound,
			     * unconnected kernel socket meanwhile */
	SHIM_SK_FAILED,	    /* that rendezvous failed and no kernel connect
			     * followed: so_error is the connect's error,
			     * which the next call reports, as the kernel's
			     * sock_error; then s is fail_kind */
	SHIM_SK_N
};

/* A set of kinds (shim_sock_tryget's argument). */
#define SHIM_SK(k) (1u << (k))
#define SHIM_SK_ANY (~0u)

/* What a kind is, as the families ask it. */
enum shim_kind_flag {
	/* The kernel's socket answers its calls: the shim marks the fd for
	 * its own reasons (its log, librdmacm's service socket) or keeps
	 * only its names (a relay); bind, connect and epoll_ctl pass. */
	SHIM_KF_KERNEL = 1u << 0,
	/* TCP not yet connected or listening: connect and listen may take
	 * it to RDMA. */
	SHIM_KF_ELIGIBLE = 1u << 1,
	/* An RDMA connection: its data moves on s->rs, which poll watches
	 * and options reach; a fork hands a fresh one over. */
	SHIM_KF_CONN = 1u << 2,
	/* A listener with an RDMA door (socket.c): accept, and poll and
	 * epoll watch the door's queue too. */
	SHIM_KF_DOOR = 1u << 3,
	/* An epoll fd whose set the shim keeps (s->epset). */
	SHIM_KF_EPSET = 1u << 4,
	/* A non-blocking connect's rendezvous is under way: nothing is
	 * ready until it ends (settle.c). */
	SHIM_KF_SETTLING = 1u << 5,
	/* That rendezvous failed: its error is the next call's answer. */
	SHIM_KF_FAILED = 1u << 6,
	/* Readiness is the emulation's, not the kernel fd's (poll, epoll). */
	SHIM_KF_EMUL = 1u << 7,
	/* The data calls take io.c's slow path. */
	SHIM_KF_IO_SLOW = 1u << 8,
	/* poll and select look past the kernel fd (rsocket, door, the
	 * rendezvous's end). */
	SHIM_KF_POLL_SLOW = 1u << 9,
	/* getsockname/getpeername answer from the sock. */
	SHIM_KF_NAMES = 1u << 10,
	/* Has, or may yet have, an rsocket: socket options are remembered
	 * for it (sockopt.c). */
	SHIM_KF_OPTS = 1u << 11,
};

/*
 * The table: each kind, its name (for logs) and its properties.  The one
 * place a kind's behaviour is chosen; kind.c lays it out as an array, and
 * tests/unit/test_kind.c checks its rules (a readiness the emulation keeps
 * needs the slow paths, and so on).
 */
#define SHIM_KIND_TABLE(X, a)                                                  \
	X(INTERNAL, "internal", SHIM_KF_KERNEL, a)                             \
	X(TCP, "tcp", SHIM_KF_ELIGIBLE | SHIM_KF_OPTS, a)                      \
	X(RDMA, "rdma",                                                        \
	  SHIM_KF_CONN | SHIM_KF_EMUL | SHIM_KF_IO_SLOW | SHIM_KF_POLL_SLOW |  \
	      SHIM_KF_NAMES | SHIM_KF_OPTS,                                    \
	  a)                                                                   \
	X(LISTEN, "listen", SHIM_KF_DOOR | SHIM_KF_POLL_SLOW | SHIM_KF_OPTS,   \
	  a)                                                                   \
	X(EPOLL, "epoll", SHIM_KF_EPSET, a)                                    \
	X(DEAD, "dead", 0, a)                                                  \
	X(SVC, "svc", SHIM_KF_KERNEL, a)                                       \
	X(RELAY, "relay", SHIM_KF_KERNEL | SHIM_KF_NAMES, a)                   \
	X(CONNECTING, "connecting",                                            \
	  SHIM_KF_SETTLING | SHIM_KF_EMUL | SHIM_KF_IO_SLOW |                  \
	      SHIM_KF_POLL_SLOW | SHIM_KF_OPTS,                                \
	  a)                                                                   \
	X(FAILED, "failed", SHIM_KF_FAILED | SHIM_KF_IO_SLOW | SHIM_KF_OPTS, a)

#define SHIM_KIND_IF_(k, name, props, f)                                       \
	| (((props) & (f)) ? SHIM_SK(SHIM_SK_##k) : 0u)
/* The kinds with any of the properties f: a constant when f is. */
#define SHIM_KINDS_WITH(f) (0u SHIM_KIND_TABLE(SHIM_KIND_IF_, f))

/* Has kind (a value read once; 0: no sock) any of the properties f?  A
 * macro: the set folds where it is written (in an inline function it
 * folds too late, and the kernel-fd path of read() grew a stack frame). */
#define shim_kind_has(kind, f) ((SHIM_SK(kind) & SHIM_KINDS_WITH(f)) != 0)

/* The table as an array, for logs and tests. */
struct shim_kind_info {
	const char *name;
	unsigned int props;
};
extern const struct shim_kind_info shim_kinds[SHIM_SK_N];
const char *shim_kind_name(int kind);

/*
 * What the room that owns a kind does for a sock of that kind:
 * - release: the last reference went, before the sock returns to the pool
 *   (epoll.c: the set's registrations; socket.c: the listener's door);
 * - fork_child: in a fork child, for each fd that names such a sock (a
 *   dup'ed sock once per fd): what the parent's RDMA was becomes the
 *   child's (fork.c);
 * - last_fd: the program closed the last fd naming s (close, dup2 over
 *   it, close_range), the fd's reference still held (sockfd.c); not for
 *   a fork's handover, which puts another sock on the same file.
 * Set at the room's start step; a NULL slot is "nothing to do".
 */
typedef void shim_kind_fn(struct shim_sock *s);
struct shim_kind_ops {
	shim_kind_fn *release;
	shim_kind_fn *fork_child;
	shim_kind_fn *last_fd;
	shim_kind_fn *guarded; /* a TCP-level protection was just set
				* (s->guard, sockopt.c) */
};
/* Set ops's non-NULL slots for kind (a room may set some, another
 * room others). */
void shim_kind_set_ops(int kind, const struct shim_kind_ops *ops);
extern struct shim_kind_ops shim_kind_ops_[SHIM_SK_N];
/* kind's operations; kind is one that was read from a sock */
static inline const struct shim_kind_ops *shim_kind_ops(int kind)
{
	return &shim_kind_ops_[kind > 0 && kind < SHIM_SK_N ? kind : 0];
}

#endif
