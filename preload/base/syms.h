/* SPDX-License-Identifier: MIT */
/*
 * The one list of libc functions liberdma_shim interposes.  Every real
 * function is resolved from this list with dlsym(RTLD_NEXT); the exported
 * wrappers must match it one to one (tests/unit/test_exports.sh checks that
 * `nm -D` shows exactly these names).
 *
 * X(name) — the real function's type is taken from libc's own prototype
 * with __typeof__, so a wrapper and its real twin can never disagree.
 */
#ifndef SHIM_SYMS_H
#define SHIM_SYMS_H

#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <spawn.h>
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

#include "compiler.h"

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

#define SHIM_SYMS(X)                                                           \
	X(socket)                                                              \
	X(socketpair)                                                          \
	X(bind)                                                                \
	X(listen)                                                              \
	X(accept)                                                              \
	X(accept4)                                                             \
	X(connect)                                                             \
	X(close)                                                               \
	X(close_range)                                                         \
	X(closefrom)                                                           \
	X(shutdown)                                                            \
	X(read)                                                                \
	X(readv)                                                               \
	X(write)                                                               \
	X(writev)                                                              \
	X(recv)                                                                \
	X(recvfrom)                                                            \
	X(recvmsg)                                                             \
	X(recvmmsg)                                                            \
	X(send)                                                                \
	X(sendto)                                                              \
	X(sendmsg)                                                             \
	X(sendmmsg)                                                            \
	X(sendfile)                                                            \
	X(sendfile64)                                                          \
	X(poll)                                                                \
	X(ppoll)                                                               \
	X(select)                                                              \
	X(pselect)                                                             \
	X(epoll_create)                                                        \
	X(epoll_create1)                                                       \
	X(epoll_ctl)                                                           \
	X(epoll_wait)                                                          \
	X(epoll_pwait)                                                         \
	X(epoll_pwait2)                                                        \
	X(fcntl)                                                               \
	X(fcntl64)                                                             \
	X(ioctl)                                                               \
	X(getsockopt)                                                          \
	X(setsockopt)                                                          \
	X(getsockname)                                                         \
	X(getpeername)                                                         \
	X(dup)                                                                 \
	X(dup2)                                                                \
	X(dup3)                                                                \
	X(fork)                                                                \
	X(vfork)                                                               \
	X(execve)                                                              \
	X(execv)                                                               \
	X(execvp)                                                              \
	X(execvpe)                                                             \
	X(execl)                                                               \
	X(execlp)                                                              \
	X(execle)                                                              \
	X(fexecve)                                                             \
	X(execveat)                                                            \
	X(posix_spawn)                                                         \
	X(posix_spawnp)                                                        \
	X(__read_chk)                                                          \
	X(__recv_chk)                                                          \
	X(__recvfrom_chk)                                                      \
	X(__poll_chk)                                                          \
	X(__ppoll_chk)                                                         \
	X(pthread_cancel)                                                      \
	X(syscall)                                                             \
	X(fdopen)                                                              \
	X(fclose)                                                              \
	X(splice)                                                              \
	X(sigaction)                                                           \
	X(signal)                                                              \
	X(__sysv_signal)                                                       \
	X(sysv_signal)                                                         \
	X(siginterrupt)

/* The table of real libc functions (syms.c fills it at init). */
#define SHIM_DECLARE_REAL(f) extern __typeof__(f) *shim_real_##f SHIM_HIDDEN;
/* siginterrupt is deprecated, and interposed all the same (sig.c) */
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"
SHIM_SYMS(SHIM_DECLARE_REAL)
#pragma GCC diagnostic pop
#undef SHIM_DECLARE_REAL
#define REAL(f) (shim_real_##f)

void shim_syms_resolve(void);

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
 * Set (for good) by the shim's pthread_cancel before it asks for a cancel
 * (cancel.c).  Each exported cancellation point acts on a cancel already
 * pending as it starts, as glibc's do (pthread_testcancel); while no
 * thread of the process was ever asked to cancel, none can be pending,
 * and that check is this one load instead of a call into libc.  seq_cst:
 * a load that reads 0 came before the first cancel was asked (its store
 * precedes the request), so the call began before it, as a glibc call
 * that found no cancel pending.
 */
extern int shim_cancel_asked SHIM_HIDDEN;
static inline void shim_testcancel(void)
{
	if (unlikely(__atomic_load_n(&shim_cancel_asked, __ATOMIC_SEQ_CST)))
		pthread_testcancel();
}

/*
 * A stretch of the shim's own with cancellation disabled
 * (pthread_setcancelstate), counted per thread: the library calls made
 * inside it (LIB_CALL) find it disabled already and skip their own pair
 * of pthread_setcancelstate calls (about 45 instructions).  Only for
 * stretches that leave by their end (no sleep, no jump out).
 */
extern __thread int shim_nocancel;
static inline void shim_nocancel_enter(int *cs)
{
	pthread_setcancelstate(PTHREAD_CANCEL_DISABLE, cs);
	shim_nocancel++;
}
static inline void shim_nocancel_leave(int cs)
{
	shim_nocancel--;
	pthread_setcancelstate(cs, NULL);
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

#endif
