/* SPDX-License-Identifier: MIT */
/*
 * Internal interface of the preload layer.  Every internal symbol carries
 * the shim_ prefix and hidden visibility (the build adds
 * -fvisibility=hidden); only the libc names listed in syms.h are exported.
 */
#ifndef SHIM_H
#define SHIM_H

#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/epoll.h>
#include <sys/ioctl.h>
#include <sys/select.h>
#include <sys/sendfile.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <fcntl.h>
#include <pthread.h>
#include <time.h>
#include <unistd.h>

#include "syms.h"

#define likely(x) __builtin_expect(!!(x), 1)
#define unlikely(x) __builtin_expect(!!(x), 0)
#define SHIM_EXPORT __attribute__((visibility("default")))
/* On declarations too: -fvisibility=hidden only covers definitions, and an
 * extern without it is reached through the GOT (an extra load per use). */
#define SHIM_HIDDEN __attribute__((visibility("hidden")))
#define ARRAY_SIZE(a) (sizeof(a) / sizeof((a)[0]))

/* glibc's fortify entry points; declared here because <unistd.h> only
 * declares them when the including file is itself built with fortify. */
ssize_t __read_chk(int fd, void *buf, size_t nbytes, size_t buflen);
ssize_t __recv_chk(int fd, void *buf, size_t n, size_t buflen, int flags);
ssize_t __recvfrom_chk(int fd, void *__restrict buf, size_t n, size_t buflen,
		       int flags, __SOCKADDR_ARG addr,
		       socklen_t *__restrict addr_len);
int __poll_chk(struct pollfd *fds, nfds_t nfds, int timeout, size_t fdslen);
int __ppoll_chk(struct pollfd *fds, nfds_t nfds, const struct timespec *timeout,
		const sigset_t *ss, size_t fdslen);
void __chk_fail(void) __attribute__((noreturn));

/* ---- init.c: the table of real libc functions ---- */
#define SHIM_DECLARE_REAL(f) extern __typeof__(f) *shim_real_##f SHIM_HIDDEN;
SHIM_SYMS(SHIM_DECLARE_REAL)
#undef SHIM_DECLARE_REAL
#define REAL(f) (shim_real_##f)

/* 0 = not started, 1 = running, 2 = done.  Read on the slow paths only: the
 * fd fast path folds the init check into the fd table's bounds check (the
 * table has capacity 0 until init has run). */
extern int shim_init_state;
void shim_init_slow(void);
void shim_fork_init(void); /* fork.c: the fork-child handler */
/* handover.c: fresh RDMA connections handed over at fork */
void shim_handover_prepare(void);
void shim_handover_parent(void);
void shim_handover_fork_child(void);
struct shim_sock;
int shim_handover_now(int fd, struct shim_sock *s);

/* Pointers into page zero (NULL included) are never mapped on Linux
 * (vm.mmap_min_addr >= 4096): where the shim itself would touch a buffer
 * the kernel would have copied, it answers those with EFAULT too. */
static inline bool shim_bad_ptr(const void *p)
{
	return (uintptr_t)p < 4096;
}
static inline void shim_ensure_init(void)
{
	if (unlikely(__atomic_load_n(&shim_init_state, __ATOMIC_ACQUIRE) != 2))
		shim_init_slow();
}

/*
 * Calls that librdmacm/libibverbs make while we are inside them (rpoll's
 * poll(), rclose's close(), ...) must reach libc untouched.  Every call into
 * rsocket_glue brackets itself with shim_enter_lib()/shim_leave_lib().
 */
extern __thread int shim_lib_depth;
static inline void shim_enter_lib(void)
{
	shim_lib_depth++;
}
static inline void shim_leave_lib(void)
{
	shim_lib_depth--;
}
static inline bool shim_in_lib(void)
{
	return shim_lib_depth != 0;
}

/*
 * While set (by rsocket_glue around its sleep in rpoll), the poll() that
 * librdmacm makes on this thread is a ppoll with this signal mask: the
 * caller's ppoll/pselect/epoll_pwait mask is applied atomically with the
 * sleep, as the kernel does (a signal it unblocks ends the sleep: EINTR).
 */
extern __thread const sigset_t *shim_lib_sigmask;

/* While set (by rsocket_glue around rlisten), the next socketpair() made on
 * this thread stores its first fd here. */
extern __thread int *shim_pair_capture;

/* Set by rsocket_glue around rconnect/raccept: see preload/svc.c. */
extern __thread bool shim_svc_guard;

/*
 * cancel.c: the shim's sleep in rsockets runs with cancellation disabled
 * (a thread cancelled inside rpoll would leave its poll gate held); enter
 * returns an eventfd that pthread_cancel writes, to add to the sleep's fds.
 * leave restores the state and, if a cancel came, acts on it (a cancellation
 * point: hold nothing of ours across it).
 */
int shim_sleep_enter(int *cancel_state);
bool shim_sleep_leave(int cancel_state); /* true: woken by a cancel */
void shim_sleep_fork_child(void);

/* sig.c: would the kernel restart a socket call that a handler interrupted
 * (SA_RESTART, no socket timeout)?  Asked after an internal wait's EINTR. */
bool shim_eintr_restarts(void);

/*
 * uring.c: one kernel accept armed on an io_uring, so a wait for either of
 * a listener's queues never makes the shared listener file non-blocking.
 */
struct io_uring_sqe;
struct io_uring_cqe;
struct shim_uring {
	int fd;
	bool armed; /* the accept is in the kernel's hands */
	void *ring, *sqes;
	size_t ring_len, sqes_len;
	unsigned *sq_tail, *sq_array, *cq_head, *cq_tail;
	unsigned sq_mask, cq_mask;
	struct io_uring_cqe *cqes;
};
int shim_uring_open(struct shim_uring *u);
void shim_uring_close(struct shim_uring *u);
int shim_uring_accept(struct shim_uring *u, int fd, struct sockaddr *addr,
		      socklen_t *len, int flags);
bool shim_uring_done(struct shim_uring *u, int *res);
int shim_uring_cancel(struct shim_uring *u);
bool shim_uring_user(void); /* liburing loaded: keep to TCP */

/* The monotonic clock in milliseconds. */
static inline int64_t shim_now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/*
 * One of the shim's own threads: detached, with a 256 KiB stack, deaf to
 * the program's signals (every one blocked from its start).  0 or -errno.
 */
static inline int shim_spawn(void *(*fn)(void *), void *arg)
{
	pthread_attr_t attr;
	sigset_t all, old;
	pthread_t t;
	int err;

	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	pthread_attr_init(&attr);
	pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
	pthread_attr_setstacksize(&attr, 256 * 1024);
	err = pthread_create(&t, &attr, fn, arg);
	pthread_attr_destroy(&attr);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	return -err;
}

/* The same in microseconds. */
static inline int64_t shim_now_us(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

/* A socket timeout (SO_RCVTIMEO/SO_SNDTIMEO) in whole milliseconds, rounded
 * up; -1 when unset (zero: forever). */
static inline int shim_tv_ms(const struct timeval *tv)
{
	long long ms;

	if (!tv->tv_sec && !tv->tv_usec)
		return -1;
	ms = (long long)tv->tv_sec * 1000 + (tv->tv_usec + 999) / 1000;
	return ms > 0x7fffffff ? 0x7fffffff : (int)ms;
}

/* A timespec timeout in whole milliseconds, rounded up; NULL = -1 (forever). */
static inline int shim_ts_to_ms(const struct timespec *ts)
{
	long long ms;

	if (!ts)
		return -1;
	ms = (long long)ts->tv_sec * 1000 + (ts->tv_nsec + 999999) / 1000000;
	return ms > 0x7fffffff ? 0x7fffffff : (int)ms;
}

/* Set errno from an internal -errno result; return -1 or the value. */
static inline long shim_ret(long r)
{
	if (r < 0) {
		errno = (int)-r;
		return -1;
	}
	return r;
}

#endif
