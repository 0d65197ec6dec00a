/* SPDX-License-Identifier: MIT */
/*
 * Ways to a socket around the socket API: libc's syscall(), stdio on an
 * fdopen'ed socket, splice.  An RDMA connection's bytes live in its rsocket,
 * so each of these met the bare kernel socket underneath (ENOTCONN) in the
 * middle of a working connection.
 *
 * syscall(): the numbers of the calls the shim follows on sockets (I/O,
 * shutdown, close, fcntl, ioctl) go to its own wrappers, as the same call by
 * its libc name would, whenever the fd is one the shim knows; every other
 * call straight through.  fclose: libc closes the fd itself, so the shim
 * forgets it first, as close() does.
 *
 * fdopen, splice: the bytes would then move where the shim can't see them
 * (stdio reads and writes with libc's internal calls; splice inside the
 * kernel), so the connection is handed over first (handover.c): its fd
 * becomes a kernel socket fed by a relay, which every path reaches, at the
 * relay's cost.  A connection that can't be handed over (a second fd, an
 * epoll registration, another thread's call in flight) stays as it was,
 * with one line in the log.
 *
 * Left (README): io_uring, whose calls are not libc functions (liburing
 * makes them itself), and system calls made without libc.
 */
#include "shim.h"
#include "log.h"
#include "sock.h"
#include "socket.h"

#include <stdarg.h>
#include <string.h>
#include <sys/syscall.h>

/* The system calls syscall() hands to the shim's wrappers. */
static bool followed(long n)
{
	switch (n) {
	case SYS_read:
	case SYS_write:
	case SYS_readv:
	case SYS_writev:
	case SYS_recvfrom:
	case SYS_sendto:
	case SYS_recvmsg:
	case SYS_sendmsg:
	case SYS_shutdown:
	case SYS_close:
	case SYS_fcntl:
	case SYS_ioctl:
		return true;
	default:
		return false;
	}
}

static long by_name(long n, const long *a)
{
	int fd = (int)a[0];

	switch (n) {
	case SYS_read:
		return read(fd, (void *)a[1], (size_t)a[2]);
	case SYS_write:
		return write(fd, (const void *)a[1], (size_t)a[2]);
	case SYS_readv:
		return readv(fd, (const struct iovec *)a[1], (int)a[2]);
	case SYS_writev:
		return writev(fd, (const struct iovec *)a[1], (int)a[2]);
	case SYS_recvfrom:
		return recvfrom(fd, (void *)a[1], (size_t)a[2], (int)a[3],
				(struct sockaddr *)a[4], (socklen_t *)a[5]);
	case SYS_sendto:
		return sendto(fd, (const void *)a[1], (size_t)a[2], (int)a[3],
			      (const struct sockaddr *)a[4], (socklen_t)a[5]);
	case SYS_recvmsg:
		return recvmsg(fd, (struct msghdr *)a[1], (int)a[2]);
	case SYS_sendmsg:
		return sendmsg(fd, (const struct msghdr *)a[1], (int)a[2]);
	case SYS_shutdown:
		return shutdown(fd, (int)a[1]);
	case SYS_fcntl:
		return fcntl(fd, (int)a[1], a[2]);
	case SYS_ioctl:
		return ioctl(fd, (unsigned long)a[1], (void *)a[2]);
	default:
		return close(fd);
	}
}

/* Before the library's init there is no real syscall() to call yet, and
 * init must not run from here (an allocator's bootstrap calls syscall()
 * while it holds its own locks): the system call is made directly. */
static long raw_syscall(long n, const long *a)
{
	long r;
#if defined(__x86_64__)
	register long r10 __asm__("r10") = a[3];
	register long r8 __asm__("r8") = a[4];
	register long r9 __asm__("r9") = a[5];

	__asm__ volatile("syscall"
			 : "=a"(r)
			 : "a"(n), "D"(a[0]), "S"(a[1]), "d"(a[2]), "r"(r10),
			   "r"(r8), "r"(r9)
			 : "rcx", "r11", "memory");
#elif defined(__aarch64__)
	register long x8 __asm__("x8") = n;
	register long x0 __asm__("x0") = a[0];
	register long x1 __asm__("x1") = a[1];
	register long x2 __asm__("x2") = a[2];
	register long x3 __asm__("x3") = a[3];
	register long x4 __asm__("x4") = a[4];
	register long x5 __asm__("x5") = a[5];

	__asm__ volatile("svc 0"
			 : "+r"(x0)
			 : "r"(x8), "r"(x1), "r"(x2), "r"(x3), "r"(x4), "r"(x5)
			 : "memory");
	r = x0;
#else
#error "raw_syscall: add this architecture's system call sequence"
#endif
	if ((unsigned long)r > -4096UL) {
		errno = (int)-r;
		return -1;
	}
	return r;
}

SHIM_EXPORT long syscall(long n, ...)
{
	va_list ap;
	long a[6];

	/* six argument registers, whatever the call uses (as glibc's own
	 * syscall() reads them) */
	va_start(ap, n);
	for (int i = 0; i < 6; i++)
		a[i] = va_arg(ap, long);
	va_end(ap);
	/* no fd is the shim's before init (and the lookup would run it) */
	if (unlikely(followed(n)) &&
	    __atomic_load_n(&shim_init_state, __ATOMIC_ACQUIRE) == 2 &&
	    shim_fd_get((int)a[0]))
		return by_name(n, a);
	if (unlikely(!REAL(syscall)))
		return raw_syscall(n, a);
	return REAL(syscall)(n, a[0], a[1], a[2], a[3], a[4], a[5]);
}

/* fd, an RDMA connection, is about to be used by call, a path the shim
 * can't follow: hand it over to a relay if it can be. */
static __attribute__((noinline)) void unseen(int fd, const char *call)
{
	struct shim_sock *s = shim_sock_ref(fd);
	static bool said;
	int r;

	if (!s)
		return;
	r = shim_handover_now(fd, s); /* -EBUSY unless an RDMA one */
	if (r == 0)
		shim_info("fd %d: %s: the connection runs through a relay "
			  "from now on (the shim can't follow that call)",
			  fd, call);
	else if (!__atomic_exchange_n(&said, true, __ATOMIC_RELAXED))
		shim_warn("fd %d: %s can't reach its RDMA connection (%s)", fd,
			  call,
			  r == -EBUSY ? "it has another fd, an epoll "
					"registration or a call in flight"
				      : strerror(-r));
	shim_sock_put(s);
}

#define IS_RDMA(s) unlikely((s) && shim_kind_is(s, SHIM_KF_CONN))

SHIM_EXPORT FILE *fdopen(int fd, const char *mode)
{
	if (IS_RDMA(shim_fd_get(fd)))
		unseen(fd, "fdopen");
	return REAL(fdopen)(fd, mode);
}

/* libc closes the fd inside fclose, out of the shim's sight: forget it
 * first, as close() does. */
SHIM_EXPORT int fclose(FILE *f)
{
	int fd = f ? fileno(f) : -1;
	struct shim_sock *s = fd >= 0 ? shim_fd_get(fd) : NULL;
	int r, cs;

	if (likely(!s))
		return REAL(fclose)(f);
	shim_sig_edge_enter();
	shim_fd_forget(fd, s);
	cs = shim_forgot_begin();
	r = REAL(fclose)(f);
	shim_forgot_end(cs);
	return r;
}

SHIM_EXPORT ssize_t splice(int in, loff_t *in_off, int out, loff_t *out_off,
			   size_t len, unsigned int flags)
{
	if (IS_RDMA(shim_fd_get(in)))
		unseen(in, "splice");
	if (IS_RDMA(shim_fd_get(out)))
		unseen(out, "splice");
	return REAL(splice)(in, in_off, out, out_off, len, flags);
}
