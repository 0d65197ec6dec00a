/* SPDX-License-Identifier: MIT */
/*
 * The base of the library, which every room may use and which uses no
 * room above it: the table of real libc functions and init (init.c), the
 * log (log.h), the configuration (config.h), the fd table (fdtable.h), the
 * one clock (clock.h) and the ordered start-up list (startup.h).  Every
 * internal symbol carries the shim_ prefix and hidden visibility (the
 * build adds -fvisibility=hidden); only the libc names listed in syms.h
 * (and two librdmacm ones, rsocket_glue) are exported.
 */
#ifndef SHIM_BASE_H
#define SHIM_BASE_H

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
#include "clock.h"
#include "startup.h"

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

static inline void shim_ensure_init(void)
{
	if (unlikely(__atomic_load_n(&shim_init_state, __ATOMIC_ACQUIRE) != 2))
		shim_init_slow();
}

/* Pointers into page zero (NULL included) are never mapped on Linux
 * (vm.mmap_min_addr >= 4096): where the shim itself would touch a buffer
 * the kernel would have copied, it answers those with EFAULT too. */
static inline bool shim_bad_ptr(const void *p)
{
	return (uintptr_t)p < 4096;
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
 * What rsocket_glue tells the wrappers about the library call it is in,
 * per thread (it sets them; the wrappers that librdmacm's own calls reach
 * read them):
 * - shim_lib_sigmask: while set (around the sleep in rpoll), librdmacm's
 *   poll() on this thread is a ppoll with this mask, so the caller's
 *   ppoll/pselect/epoll_pwait mask is applied atomically with the sleep,
 *   as the kernel does (a signal it unblocks ends the sleep: EINTR);
 * - shim_pair_capture: while set (around rlisten), the next socketpair()
 *   stores its first fd here;
 * - shim_svc_guard: while set (around rconnect/raccept), the socketpair
 *   librdmacm makes for its service thread is marked, and what is written
 *   on it goes through sg_svc_write (rsocket_glue/svc.c).
 */
extern __thread const sigset_t *shim_lib_sigmask;
extern __thread int *shim_pair_capture;
extern __thread bool shim_svc_guard;

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
