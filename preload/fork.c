/* SPDX-License-Identifier: MIT */
/*
 * fork and vfork.
 *
 * A QP can't cross fork: the child shares the parent's rsockets' memory
 * registrations and connection state, and an rclose (or rshutdown) there
 * would disconnect the parent.  So in the child every inherited rsocket is
 * disowned without a call into librdmacm: its fd becomes the unconnected
 * kernel socket it always was underneath, and using it gets the kernel's
 * clean error (ENOTCONN/EPIPE) — never a crash, never a hang, and the
 * parent's connection is untouched.
 */
#include "shim.h"
#include "sock.h"

/* An inherited RDMA connection: its fd is the bare kernel socket it
 * always was underneath.  The same sock may sit on several fds (dup): it
 * is DEAD after the first. */
static void disown_conn(struct shim_sock *s)
{
	if (s->rs >= 0) {
		s->rs = -1;
		__atomic_sub_fetch(&shim_rdma_socks, 1, __ATOMIC_RELAXED);
	}
	shim_sock_used(s);
	s->kind = SHIM_SK_DEAD;
}

/* Each inherited sock as its kind's room says (kind.h, fork_child): a
 * connection (above), a listener (socket.c), a connect under way
 * (connect.c). */
static void disown_inherited(void)
{
	unsigned int span = shim_fdtable_span();

	for (unsigned int fd = 0; fd < span; fd++) {
		struct shim_sock *s = shim_fd_get((int)fd);
		shim_kind_fn *fn;

		if (s && (fn = shim_kind_ops(shim_kind(s))->fork_child))
			fn(s);
	}
}

/* In every fork child, after every other room's reset (startup.h). */
static void fork_child(void)
{
	if (__atomic_load_n(&shim_rdma_socks, __ATOMIC_RELAXED))
		disown_inherited();
}

static const struct shim_kind_ops conn_ops = {
    .fork_child = disown_conn,
};

static void fork_start(void)
{
	shim_kind_set_ops(SHIM_SK_RDMA, &conn_ops);
}
SHIM_STARTUP(FORK, .start = fork_start, .child = fork_child);

SHIM_EXPORT pid_t fork(void)
{
	shim_ensure_init();
	return REAL(fork)(); /* the child runs child_after_fork */
}

/*
 * A vfork child borrows the caller's stack, so a C wrapper around the real
 * vfork would return into a frame the child has already torn down.  POSIX
 * lets vfork behave as fork; doing so costs a page-table copy and keeps
 * every fork rule of the shim in one place.
 */
SHIM_EXPORT pid_t vfork(void)
{
	return fork();
}
