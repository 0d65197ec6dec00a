/* SPDX-License-Identifier: MIT */
/*
 * One kernel accept that waits without making the listener non-blocking.
 *
 * A listener whose RDMA door is open waits on two queues: the kernel's and
 * the door's (socket.c).  That needs a kernel accept that can be abandoned
 * when the door's queue wins.  O_NONBLOCK would do, but it is a flag of the
 * open file, which a prefork master shares with its workers and an exec'd
 * image inherits: set by the shim, another process's blocking accept would
 * get EAGAIN.  An io_uring accept is non-blocking per request instead: the
 * kernel tries it without blocking whatever the file's flag, then arms it
 * on the listener's wait queue, and it can be cancelled.  The thread polls
 * the ring's fd (readable when the accept completed) beside the door.
 *
 * One small ring per thread, made at its first such wait and kept until
 * the thread exits, not one per wait.  Closing a ring is not quiet: the
 * kernel's exit work for it later interrupts every thread that used it
 * (task work with TWA_SIGNAL), and an epoll_wait that thread is in then
 * returns EINTR with no signal sent -- an error the kernel's own accept
 * would never cause (kexact, case ring-eintr).  At thread exit nobody is
 * waiting.  A fork child does not use its parent's rings (their mappings
 * are not even copied: MADV_DONTFORK); it closes them (their fds), which
 * interrupts nobody while the parent's fds keep the rings open.
 */
#include "shim.h"
#include "log.h"

#include <dlfcn.h>
#include <pthread.h>
#include <linux/io_uring.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>

#define NEEDED                                                                 \
	(IORING_FEAT_SINGLE_MMAP | IORING_FEAT_FAST_POLL |                     \
	 IORING_FEAT_NATIVE_WORKERS)
#define ACCEPT_TAG 1
#define CANCEL_TAG 2

static void *ring_map(int fd, size_t len, off_t off)
{
	void *p = mmap(NULL, len, PROT_READ | PROT_WRITE,
		       MAP_SHARED | MAP_POPULATE, fd, off);

	if (p == MAP_FAILED)
		return NULL;
	madvise(p, len, MADV_DONTFORK);
	return p;
}

void shim_uring_close(struct shim_uring *u)
{
	if (u->sqes)
		munmap(u->sqes, u->sqes_len);
	if (u->ring)
		munmap(u->ring, u->ring_len);
	if (u->fd >= 0)
		REAL(close)(u->fd);
	u->fd = -1;
	u->ring = u->sqes = NULL;
}

/* 0, or -errno: ENOSYS (no io_uring, or a kernel before 5.12), EPERM (a
 * seccomp filter, as in container runtimes' default profiles), EMFILE,
 * ENOMEM. */
int shim_uring_open(struct shim_uring *u)
{
	struct io_uring_params p;
	size_t sq_len, cq_len;
	char *r;

	memset(u, 0, sizeof(*u));
	memset(&p, 0, sizeof(p));
	u->fd = (int)REAL(syscall)(__NR_io_uring_setup, 2, &p);
	if (u->fd < 0)
		return -errno;
	/* Accept and cancel came in 5.5, armed on the socket's wait queue
	 * (not a worker blocked in accept) in 5.7, native workers in 5.12:
	 * older kernels are refused, and the caller falls back. */
	sq_len = p.sq_off.array + p.sq_entries * sizeof(unsigned);
	cq_len = p.cq_off.cqes + p.cq_entries * sizeof(struct io_uring_cqe);
	u->ring_len = sq_len > cq_len ? sq_len : cq_len;
	u->sqes_len = p.sq_entries * sizeof(struct io_uring_sqe);
	if ((p.features & NEEDED) != NEEDED ||
	    !(u->ring = ring_map(u->fd, u->ring_len, IORING_OFF_SQ_RING)) ||
	    !(u->sqes = ring_map(u->fd, u->sqes_len, IORING_OFF_SQES))) {
		int e = (p.features & NEEDED) == NEEDED ? ENOMEM : ENOSYS;

		shim_uring_close(u);
		return -e;
	}
	r = u->ring;
	u->sq_tail = (unsigned *)(r + p.sq_off.tail);
	u->sq_mask = *(unsigned *)(r + p.sq_off.ring_mask);
	u->sq_array = (unsigned *)(r + p.sq_off.array);
	u->cq_head = (unsigned *)(r + p.cq_off.head);
	u->cq_tail = (unsigned *)(r + p.cq_off.tail);
	u->cq_mask = *(unsigned *)(r + p.cq_off.ring_mask);
	u->cqes = (struct io_uring_cqe *)(r + p.cq_off.cqes);
	return 0;
}

static int ring_enter(struct shim_uring *u, unsigned submit, unsigned wait)
{
	for (;;) {
		long r =
		    REAL(syscall)(__NR_io_uring_enter, u->fd, submit, wait,
				  wait ? IORING_ENTER_GETEVENTS : 0, NULL, 0);

		if (r >= 0)
			return 0;
		/* calls here either submit or wait: EINTR is the wait's */
		if (errno != EINTR || !wait)
			return -errno;
	}
}

static int ring_submit(struct shim_uring *u, const struct io_uring_sqe *sqe)
{
	unsigned tail = *u->sq_tail, i = tail & u->sq_mask;

	memcpy((char *)u->sqes + i * sizeof(*sqe), sqe, sizeof(*sqe));
	u->sq_array[i] = i;
	__atomic_store_n(u->sq_tail, tail + 1, __ATOMIC_RELEASE);
	return ring_enter(u, 1, 0);
}

/* Arm accept4(fd, addr, len, flags); the kernel writes addr and *len when
 * it completes, so they must outlive shim_uring_done/cancel. */
int shim_uring_accept(struct shim_uring *u, int fd, struct sockaddr *addr,
		      socklen_t *len, int flags)
{
	struct io_uring_sqe sqe;
	int r;

	memset(&sqe, 0, sizeof(sqe));
	sqe.opcode = IORING_OP_ACCEPT;
	sqe.fd = fd;
	sqe.addr = (uintptr_t)addr;
	sqe.addr2 = (uintptr_t)len;
	sqe.accept_flags = (unsigned)flags;
	sqe.user_data = ACCEPT_TAG;
	r = ring_submit(u, &sqe);
	u->armed = r == 0;
	return r;
}

/* The accept's completion, if it came: true and its result (a new fd or
 * -errno) in *res. */
bool shim_uring_done(struct shim_uring *u, int *res)
{
	unsigned head = *u->cq_head;
	unsigned tail = __atomic_load_n(u->cq_tail, __ATOMIC_ACQUIRE);
	bool got = false;

	for (; head != tail; head++) {
		const struct io_uring_cqe *c = &u->cqes[head & u->cq_mask];

		if (c->user_data == ACCEPT_TAG) {
			*res = c->res;
			got = true;
		}
	}
	__atomic_store_n(u->cq_head, head, __ATOMIC_RELEASE);
	if (got)
		u->armed = false;
	return got;
}

/* Withdraw the accept: its result, -ECANCELED if it had not completed (a
 * connection it took in the meantime is the caller's to hand out). */
int shim_uring_cancel(struct shim_uring *u)
{
	struct io_uring_sqe sqe;
	int res = -ECANCELED;

	if (!u->armed || shim_uring_done(u, &res))
		return res;
	memset(&sqe, 0, sizeof(sqe));
	sqe.opcode = IORING_OP_ASYNC_CANCEL;
	sqe.fd = -1;
	sqe.addr = ACCEPT_TAG;
	sqe.user_data = CANCEL_TAG;
	if (ring_submit(u, &sqe) < 0) {
		/* no room to say it: closing the ring cancels it (and the
		 * result, if one raced in, is lost with its connection) */
		u->armed = false;
		return -ECANCELED;
	}
	while (!shim_uring_done(u, &res))
		if (ring_enter(u, 0, 1) < 0)
			break;
	u->armed = false;
	return res;
}

/*
 * The calling thread's ring, made on first use: NULL and -errno in *err
 * (shim_uring_open's).  Every thread's ring is on one list, so that a fork
 * child can close them all.
 */
struct ring_node {
	struct shim_uring u;
	struct ring_node *next;
};

static pthread_mutex_t rings_mu = PTHREAD_MUTEX_INITIALIZER;
static struct ring_node *rings;
static pthread_key_t ring_key;
static pthread_once_t ring_once = PTHREAD_ONCE_INIT;
static __thread struct ring_node *my_ring;

/* Thread exit: its ring goes (the exit work interrupts a thread that is
 * leaving). */
static void ring_gone(void *arg)
{
	struct ring_node *n = arg, **pp;

	pthread_mutex_lock(&rings_mu);
	for (pp = &rings; *pp; pp = &(*pp)->next)
		if (*pp == n) {
			*pp = n->next;
			break;
		}
	pthread_mutex_unlock(&rings_mu);
	shim_uring_close(&n->u);
	free(n);
}

static void ring_key_make(void)
{
	(void)pthread_key_create(&ring_key, ring_gone);
}

struct shim_uring *shim_uring_thread(int *err)
{
	struct ring_node *n = my_ring;

	if (n)
		return &n->u;
	pthread_once(&ring_once, ring_key_make);
	n = calloc(1, sizeof(*n));
	if (!n) {
		*err = -ENOMEM;
		return NULL;
	}
	*err = shim_uring_open(&n->u);
	if (*err) {
		free(n);
		return NULL;
	}
	pthread_mutex_lock(&rings_mu);
	n->next = rings;
	rings = n;
	pthread_mutex_unlock(&rings_mu);
	my_ring = n;
	(void)pthread_setspecific(ring_key, n);
	return &n->u;
}

/* A fork child: the parent's rings (every thread's) are closed, not used;
 * the list's lock may have been held by a thread not here. */
static void rings_fork_child(void)
{
	struct ring_node *n, *next;
	bool mine = my_ring != NULL;

	pthread_mutex_init(&rings_mu, NULL);
	for (n = rings; n; n = next) {
		next = n->next;
		if (n->u.fd >= 0)
			REAL(close)(n->u.fd);
		/* the mappings were not copied (MADV_DONTFORK) */
		free(n);
	}
	rings = NULL;
	my_ring = NULL;
	if (mine) /* no destructor for a ring that is gone */
		(void)pthread_setspecific(ring_key, NULL);
}

static void rings_fork_prepare(void)
{
	pthread_mutex_lock(&rings_mu);
}

static void rings_fork_parent(void)
{
	pthread_mutex_unlock(&rings_mu);
}

SHIM_STARTUP(URING, .prepare = rings_fork_prepare, .parent = rings_fork_parent,
	     .child = rings_fork_child);

/*
 * Does this process use io_uring?  Its socket I/O goes to the kernel socket
 * directly, which for an RDMA connection is a bare one (ENOTCONN).  The
 * system calls can't be seen, but the library most programs make them with
 * can: while liburing is loaded, connections stay on TCP (connect.c; and
 * listeners open no RDMA door, socket.c).  A program that makes its own
 * io_uring system calls is not detected (README).
 */
bool shim_uring_user(void)
{
	static const char *const libs[] = {"liburing.so.2", "liburing-ffi.so.2",
					   "liburing.so.1"};
	static bool said;

	for (size_t i = 0; i < ARRAY_SIZE(libs); i++) {
		void *h = dlopen(libs[i], RTLD_LAZY | RTLD_NOLOAD);

		if (!h)
			continue;
		dlclose(h);
		if (!__atomic_exchange_n(&said, true, __ATOMIC_RELAXED))
			shim_info("%s is loaded: this process's connections "
				  "stay on TCP (io_uring's socket I/O can't "
				  "reach an RDMA connection)",
				  libs[i]);
		return true;
	}
	return false;
}
