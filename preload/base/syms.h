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
	X(__read_chk)                                                          \
	X(__recv_chk)                                                          \
	X(__recvfrom_chk)                                                      \
	X(__poll_chk)                                                          \
	X(__ppoll_chk)                                                         \
	X(pthread_cancel)                                                      \
	X(syscall)                                                             \
	X(fdopen)                                                              \
	X(fclose)                                                              \
	X(splice)

#endif
