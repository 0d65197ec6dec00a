/* SPDX-License-Identifier: MIT */
/* shim_sock lifetime and address helpers. */
#include "sock.h"
#include "glue.h"
#include "log.h"

#include <errno.h>
#include <sched.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

int shim_rdma_socks;

uint16_t shim_rdma_port(uint16_t port)
{
	return shim_port_map(port, shim_port_offset(&shim_cfg, sg_iwarp()));
}

/*
 * Socks are type-stable: one whose last reference went is kept here and
 * given out again by shim_sock_new, never returned to malloc (the kernel's
 * SLAB_TYPESAFE_BY_RCU, without the RCU).  A call that loaded a sock from
 * the fd table while another thread's close() released it still reads a
 * sock, and shim_sock_tryget tells it the sock is no longer that fd's.
 * The list is as long as the most socks ever alive at once.
 */
static struct shim_sock *pool;
static int pool_busy; /* a spin lock: held for a pointer swap */

/* Markers the fd table holds for the shim's own fds: the log's fd 2, and
 * librdmacm's socketpair to its service thread (rsocket_glue/svc.c). */
struct shim_sock shim_internal_sock = {.kind = SHIM_SK_INTERNAL};
struct shim_sock shim_svc_sock = {.kind = SHIM_SK_SVC};

static void pool_lock(void)
{
	while (__atomic_exchange_n(&pool_busy, 1, __ATOMIC_ACQUIRE))
		sched_yield();
}

static void pool_unlock(void)
{
	__atomic_store_n(&pool_busy, 0, __ATOMIC_RELEASE);
}

/*
 * Under ASan a pooled sock is poisoned past its kind, refs and next_free,
 * the only fields a call that lost the race with close() may read (the
 * kernel-fd path reads kind, tryget reads refs): any other use of a
 * released sock is reported as ASan reports a use after free.
 */
#if defined(__SANITIZE_ADDRESS__)
#include <sanitizer/asan_interface.h>
#define POOLED_TAIL(s) ((char *)(s) + offsetof(struct shim_sock, fdrefs))
#define POOLED_LEN                                                             \
	(sizeof(struct shim_sock) - offsetof(struct shim_sock, fdrefs))
static void pool_poison(struct shim_sock *s, bool on)
{
	if (on)
		ASAN_POISON_MEMORY_REGION(POOLED_TAIL(s), POOLED_LEN);
	else
		ASAN_UNPOISON_MEMORY_REGION(POOLED_TAIL(s), POOLED_LEN);
}
#else
static void pool_poison(struct shim_sock *s, bool on)
{
	(void)s;
	(void)on;
}
#endif

/* Held across fork by the forking thread (base/startup.h), so that no
 * other thread's half-done pool step is copied into the child. */
static void shim_sock_fork_prepare(void)
{
	pool_lock();
}

static void shim_sock_fork_parent(void)
{
	pool_unlock();
}

static void shim_sock_fork_child(void)
{
	pool_busy = 0;
}

/* The log's fd is watched, so a close() or dup2() onto it is noticed. */
static void sock_start(void)
{
	shim_fd_xchg(2, &shim_internal_sock);
}
SHIM_STARTUP(SOCK, .start = sock_start, .prepare = shim_sock_fork_prepare,
	     .parent = shim_sock_fork_parent, .child = shim_sock_fork_child);

struct shim_sock *shim_sock_new(int kind, int family)
{
	struct shim_sock *s;

	pool_lock();
	s = pool;
	if (s)
		pool = s->next_free;
	pool_unlock();
	if (!s && !(s = calloc(1, sizeof(*s))))
		return NULL;
	pool_poison(s, false);
	/* refs stays 0 (a racing tryget fails) until the sock is whole */
	memset((char *)s + offsetof(struct shim_sock, fdrefs), 0,
	       sizeof(*s) - offsetof(struct shim_sock, fdrefs));
	__atomic_store_n(&s->kind, kind, __ATOMIC_RELAXED);
	s->rs = -1;
	s->settle_fd = -1;
	s->family = family;
	__atomic_store_n(&s->refs, 1, __ATOMIC_RELEASE);
	return s;
}

int shim_fresh_conns;

/*
 * Held from a fork's prepare handler through the fork (the parent handler
 * lets go, the child makes it anew): a call that finds its fresh sock
 * being handed over waits here, then goes to the kernel fd the handover
 * left.
 */
static pthread_mutex_t handover_mu = PTHREAD_MUTEX_INITIALIZER;

void shim_sock_handover_lock(void)
{
	pthread_mutex_lock(&handover_mu);
}

void shim_sock_handover_unlock(void)
{
	pthread_mutex_unlock(&handover_mu);
}

void shim_sock_handover_reset(void)
{
	pthread_mutex_init(&handover_mu, NULL);
}

bool shim_first_use_slow(struct shim_sock *s)
{
	bool ok;

	pthread_mutex_lock(&handover_mu);
	ok = !__atomic_load_n(&s->handed, __ATOMIC_SEQ_CST);
	if (ok)
		shim_sock_used(s);
	pthread_mutex_unlock(&handover_mu);
	return ok;
}

void shim_sock_attach(struct shim_sock *s, int kind, int rs)
{
	s->rs = rs;
	/* registered in an epoll set before its connect: used already */
	if (shim_kind_has(kind, SHIM_KF_CONN) &&
	    !__atomic_load_n(&s->ep_regs, __ATOMIC_ACQUIRE)) {
		__atomic_add_fetch(&shim_fresh_conns, 1, __ATOMIC_RELAXED);
		__atomic_store_n(&s->fresh, true, __ATOMIC_RELEASE);
	}
	__atomic_store_n(&s->kind, kind, __ATOMIC_RELEASE);
	__atomic_add_fetch(&shim_rdma_socks, 1, __ATOMIC_RELAXED);
}

const struct shim_sock_ev *shim_sock_ev;

void shim_sock_on_events(const struct shim_sock_ev *ev)
{
	__atomic_store_n(&shim_sock_ev, ev, __ATOMIC_RELEASE);
}

/* The last reference went: the rsocket closes, the sock goes to the pool.
 * Out of line, so that shim_sock_put's common case (sock.h, inline) sets
 * up no frame. */
__attribute__((noinline)) void shim_sock_release(struct shim_sock *s)
{
	int e = errno; /* a caller's errno survives the last reference */
	int kind = shim_kind(s);
	shim_kind_fn *release = shim_kind_ops(kind)->release;

	shim_sock_used(s); /* uncounts a fresh one */
	if (release)
		release(s);
	if (shim_kind_has(kind, SHIM_KF_DOOR)) {
		/* counted from listen(), door or not */
		__atomic_sub_fetch(&shim_rdma_socks, 1, __ATOMIC_RELAXED);
	} else if (s->rs >= 0) {
		sg_close(s->rs);
		__atomic_sub_fetch(&shim_rdma_socks, 1, __ATOMIC_RELAXED);
	}
	pool_poison(s, true);
	pool_lock();
	s->next_free = pool;
	pool = s;
	pool_unlock();
	errno = e;
}

bool shim_sock_put_unless_last(struct shim_sock *s)
{
	int r = __atomic_load_n(&s->refs, __ATOMIC_RELAXED);

	do {
		if (r <= 1)
			return false;
	} while (!__atomic_compare_exchange_n(
	    &s->refs, &r, r - 1, true, __ATOMIC_ACQ_REL, __ATOMIC_RELAXED));
	return true;
}

struct shim_sock *shim_sock_ref(int fd)
{
	struct shim_sock *s;

	/* A close() racing with this lookup is the program's own race: the
	 * call then comes after it (a sock released meanwhile is not taken,
	 * and the table is read again). */
	do {
		s = shim_fd_get(fd);
		if (!s || shim_sock_is_sentinel(s))
			return NULL;
	} while (!shim_sock_tryget(fd, s, SHIM_SK_ANY));
	/* The reference before the handover check: a handover raises
	 * handed, then counts the references (handover.c), so one of the
	 * two sees the other (tryget's increment is seq_cst). */
	if (shim_kind_is(s, SHIM_KF_CONN) && !shim_sock_usable(s)) {
		shim_sock_put(s); /* handed over: the fd is a kernel socket */
		return NULL;
	}
	return s;
}
