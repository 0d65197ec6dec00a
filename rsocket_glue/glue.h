/* SPDX-License-Identifier: MIT */
/*
 * rsocket_glue: the only code that talks to librdmacm.  Every function
 * returns a value >= 0 or -errno, and brackets its librdmacm calls with
 * shim_enter_lib()/shim_leave_lib() so that what librdmacm itself calls
 * (poll, close, socket...) reaches libc untouched.
 */
#ifndef SHIM_GLUE_H
#define SHIM_GLUE_H

#include <poll.h>
#include <signal.h>
#include <stdbool.h>
#include <sys/socket.h>
#include <sys/types.h>
#include <sys/uio.h>

#include "base.h"
#include "config.h"

/* Options the program set on its socket that reach the rsocket. */
struct sg_sockopts {
	unsigned int snd, rcv; /* SO_SNDBUF/SO_RCVBUF (0 = not set) */
	bool keepalive;	       /* SO_KEEPALIVE */
	int keepidle;	       /* TCP_KEEPIDLE, seconds (0 = the system's) */
	/* keepalive or TCP_USER_TIMEOUT: a peer that vanished is to be
	 * found (see rdma_connect in rsock.c) */
	bool bounded;
	/* how long a silent peer is given, ms: TCP_USER_TIMEOUT, else with
	 * keepalive TCP_KEEPINTVL x TCP_KEEPCNT (0: no bound) */
	unsigned int silence_ms;
};

/*
 * limits.c: connections keep their fds (SHIM_CONN_FDS each, config.h) to
 * ERDMA_SHIM_FD_SHARE percent of RLIMIT_NOFILE.  sg_fds_check: 0 if one more
 * fits, else -EMFILE (and the warning, once).  sg_shortage: a connection to
 * peer fell back for want of err (-EMFILE/-ENFILE: fds, -ENOMEM: locked memory,
 * -ENOBUFS: the device's queues; others are no shortage): one warning per cause
 * per process.
 */
int sg_fds_check(void);
void sg_shortage(int err, const char *peer);

/* The librdmacm the process runs on and the mode chosen for it, decided
 * once at start (compat.c): RDMA only on a known release. */
struct sg_rdmacm;
const struct sg_rdmacm *sg_rdmacm(void);
/* RDMA listeners this librdmacm serves per process (0: no cap). */
int sg_listener_cap(void);

/* Is there an RDMA device and an rdma_cm to reach it? (cached) */
bool sg_available(void);
/* Is one of them iWARP, whose rdma_cm ports are kernel TCP ports? */
bool sg_iwarp(void);
/* In a fork child: no RDMA if the parent used rsockets (see rsock.c). */
bool sg_fork_tainted(void);

/* pthread_cancel(th) has been called: wake th if it sleeps in rsockets
 * (sleep.c). */
void sg_sleep_cancelled(pthread_t th);
/* A write on librdmacm's service socketpair (the shim's svc marker): its
 * registration requests made no-ops (svc.c). */
ssize_t sg_svc_write(int fd, const void *buf, size_t n);

/*
 * Client rendezvous: an rsocket connected to dst (AF_INET/AF_INET6, v4-mapped
 * already unmapped by the caller) within timeout_ms, bound first to src when
 * given (so its port is the program's TCP port; a bind that fails is not
 * fatal).  Returns the rsocket in blocking mode, or -errno (the caller falls
 * back to TCP).
 */
int sg_connect(const struct sockaddr *dst, socklen_t len,
	       const struct sockaddr *src, socklen_t srclen, int timeout_ms,
	       const struct sg_sockopts *bufs);

/* Server: an rsocket listening on addr (port already offset); non-blocking.
 * Accepted rsockets inherit its buffer sizes.  twin->fd >= 0: the port's
 * reservation (twin.c), handed over to the rsocket at its bind with no
 * moment the port is free.  On return twin->fd is -1, or, when the rsocket
 * was bound but another id bound on its port kept it from listening
 * (-EADDRINUSE, -EADDRNOTAVAIL), a new reservation (its file and id, made
 * before the rsocket let go of the port): the caller keeps it for the
 * listener's life.  tcp_port: the program's port P (host order), the one
 * ERDMA_SHIM_ACCEPT_FROM's rules name: a request from a client no rule
 * lets in is refused (rdma_accept). */
struct sg_twin {
	int fd; /* -1: none */
	uint32_t id;
};
int sg_listen(const struct sockaddr *addr, socklen_t len, int backlog,
	      const struct sg_sockopts *bufs, struct sg_twin *twin,
	      uint16_t tcp_port);

/*
 * twin.c: the door's port reserved from listen() until the door opens.
 * sg_twin_reserve: an rdma_cm id bound to addr (the door's address), with
 * SO_REUSEADDR if reuse, on a close-on-exec file of its own: 0 and *fd,
 * *id, or -errno.  sg_twin_hold: the id taken from that file (any process
 * that has it: a fork copy will do) into a new file of this process's,
 * still bound, with SO_REUSEADDR now (so that the door binds beside it):
 * that file, or -errno (-ENOENT, -EINVAL: a sibling took it first; it is
 * not held then).  sg_twin_let_go: the held id destroyed and its file
 * closed.  sg_twin_close: this process's copy of the file closed (the id
 * goes with the last one).
 */
int sg_twin_reserve(const struct sockaddr *addr, socklen_t len, bool reuse,
		    int *fd, uint32_t *id);
int sg_twin_hold(int fd, uint32_t id);
int sg_twin_let_go(int mine, uint32_t id);
void sg_twin_close(int fd);
/* Across exec (preload/handover.c): sg_twin_pass, just before an exec
 * that keeps the listener (maybe in a vfork child: no allocation, no
 * lock): this process's copy of the file fd survives the exec (0, or
 * -ENOENT if fd is not the reservation's any more).  sg_twin_take,
 * at an image's start: fd, a number the environment named, is a
 * reservation's file (rdma_cm's, marked): made close-on-exec again and
 * known to sg_twin_hold and sg_twin_close; 0, or -errno and fd is left
 * alone. */
int sg_twin_pass(int fd);
int sg_twin_take(int fd);

/* A pending connection on a listening rsocket, or -EAGAIN.  Blocking mode. */
int sg_accept(int lrs, struct sockaddr *peer, socklen_t *len);
/*
 * Close a listening rsocket and every connection it accepted that nobody
 * took, each ended for its client (as a kernel listener's close resets
 * them) -- also one still completing on rsockets' listen service thread.
 * Waits at most a moment (a starved service thread) beyond the closes.
 */
int sg_listen_close(int lrs);

/*
 * The same rendezvous in steps, for a thread that drives many (connect.c):
 * begin returns the rsocket (*done: connected already) or -errno, -EBUSY
 * when a listener call holds the service lock (try again a little later);
 * the rsocket is then polled for POLLOUT (sg_wait drives its handshake)
 * and result says what its revents mean: 0 connected, -EINPROGRESS not
 * yet, -errno failed (the caller closes it).
 */
int sg_connect_begin(const struct sockaddr *dst, socklen_t len,
		     const struct sockaddr *src, socklen_t srclen,
		     const struct sg_sockopts *bufs, bool *done);
int sg_connect_result(int rs, short revents);
int sg_close(int rs);
int sg_shutdown(int rs, int how);
/* The program shut rs down (how; the write side already by sg_shutdown):
 * from now on it polls as the kernel's socket would (IN, OUT, HUP), and
 * threads asleep on it look again. */
void sg_shut_note(int rs, int how);
int sg_set_nonblock(int rs, bool nonblock);
int sg_getsockname(int rs, struct sockaddr *addr, socklen_t *len);

ssize_t sg_recv(int rs, void *buf, size_t len, int flags);
ssize_t sg_send(int rs, const void *buf, size_t len, int flags);
ssize_t sg_sendv(int rs, const struct iovec *iov, int iovcnt, int flags);
/* sg_sendv after a look at rs (rpoll): when that shows HUP or ERR (in
 * *rev, with the shim's own gone and shut bits), nothing is sent and 0 is
 * returned.  One library call for both. */
ssize_t sg_sendv_look(int rs, const struct iovec *iov, int iovcnt, int flags,
		      short *rev);

/* rpoll over a mix of rsockets and kernel fds; timeout 0 or -1 only. */
int sg_poll(struct pollfd *fds, nfds_t nfds, int timeout_ms);
/*
 * The same with any timeout.  rsockets v44.0's rpoll leaks its poll gate
 * when a finite timeout expires (every later blocking rpoll then spins), so
 * a finite wait is rpoll(-1) over the set plus a timerfd.  Returns like
 * poll(): the number of entries with revents, 0 on timeout, or -errno.
 */
int sg_wait(struct pollfd *fds, nfds_t nfds, int timeout_ms);
/* The same with a signal mask applied atomically with the sleep, as ppoll
 * does (NULL: the thread's own).  The busy-poll before it keeps the
 * thread's mask: a signal the wait mask unblocks stays pending until the
 * sleep, which it then ends (-EINTR) -- unless something was ready first,
 * as in the kernel. */
int sg_wait_masked(struct pollfd *fds, nfds_t nfds, int timeout_ms,
		   const sigset_t *mask);

/*
 * O(ready) waits (epoll.c): a wait that lets the kernel watch a connection
 * for it.  sg_arm leaves rs so that its next change -- a completion, or an
 * rdma_cm event (the peer gone) -- makes one of two kernel fds readable,
 * returned in *out (-1: not known yet, e.g. before rs is connected):
 * returns 0 then, or the revents rs shows now for events (>0: nothing is
 * armed for sure; look again after using them), or -errno.  sg_cm_fired:
 * the second fd turned readable.  lib_poll (poll.c) gives rpoll's own poll
 * to sg_arm_poll while sg_arming.
 */
struct sg_armed {
	int chan; /* the completion channel */
	int cm;	  /* the duplicate of the rdma_cm channel */
};
int sg_arm(int rs, short events, bool tracker, struct sg_armed *out);
void sg_cm_fired(int rs);
/* A set watches rs's channel chan (learned by sg_arm) and rs's bell, which
 * rings when anyone else takes an event off that channel: returns the
 * bell's fd (rs's own, closed with rs) or -errno.  untrack: it stopped. */
int sg_track(int rs, int chan);
void sg_untrack(int rs);
extern __thread bool sg_arming;
int sg_arm_poll(struct pollfd *fds, nfds_t nfds);

/* The kernel fd that turns readable when a listening rsocket has a
 * connection to accept (its accept queue), or -1.  Lets listeners be
 * polled by the kernel alone (rpoll on a listener can lag by seconds). */
int sg_listen_pollfd(int lrs);

/* listenlock.c: the user's listen lock, LOCK_EX, waited for at most
 * SG_LISTEN_LOCK_MS; its fd (sg_listen_unlock lets go), or -errno (said in
 * one info line) and the caller goes on without.  *held: the fd from its
 * open to its close, -1 otherwise (what a fork child closes). */
#define SG_LISTEN_LOCK_MS 1000
int sg_listen_lock(int *held);
void sg_listen_unlock(int fd, int *held);

/* Socket options, mapped onto what rsockets can honour (opts.c). */
int sg_setsockopt(int rs, int level, int name, const void *val, socklen_t len);
/* rs's receive buffer, bytes (the most that can be queued on it), or -1. */
int sg_rcvbuf(int rs);
/* Apply the ERDMA_SHIM_* tunables to a fresh rsocket (before connect/listen),
 * and the program's own buffer sizes where they are larger. */
int sg_apply_tunables(int rs, const struct shim_config *c,
		      const struct sg_sockopts *bufs);
/* The program's keepalive, on a connecting or accepted rsocket (opts.c). */
int sg_apply_keepalive(int rs, const struct sg_sockopts *o);
/* The same on an rsocket that just connected, from the thread that drives
 * rendezvous (connect.c): -EBUSY when a listener call holds the service
 * lock, which that thread must never wait for (rsock.c, svc_mu). */
int sg_update_keepalive(int rs, const struct sg_sockopts *o);
/* Connects of rs ask for transport retries that end (rsock.c). */
void sg_set_bounded(int rs, bool bounded);
/* rs's QP (a listener's: its connections' QPs) gets the ACK timeout that
 * o's silence_ms asks for, at its connect or accept (rsock.c). */
void sg_set_ack_timeout(int lrs, const struct sg_sockopts *o);
/* rs's transport failed, with no end from its peer (rsock.c): kernel TCP
 * says ETIMEDOUT there. */
bool sg_timed_out(int rs);

/* The processes with rdma_cm ids bound to port (host order), from the
 * kernel's RDMA netlink (holder.c): their number, at most max, in pids (0:
 * none seen); -ESRCH when one has no pid (the kernel's own) or there are
 * more than max; or -errno (no RDMA netlink). */
int sg_port_holders(uint16_t port, pid_t *pids, int max);

/* Negative cache of peers with no RDMA listener (negcache.c). */
bool sg_negcache_hit(const struct sockaddr *dst, unsigned int ttl_s);
void sg_negcache_add(const struct sockaddr *dst);
void sg_negcache_del(const struct sockaddr *dst);
void sg_negcache_fork_child(void);

#endif
