/* SPDX-License-Identifier: MIT */
/*
 * Internal interface of the preload layer (the exported families and the
 * socket object), on top of the base (base/base.h).
 */
#ifndef SHIM_H
#define SHIM_H

#include "base.h"

/* handover.c: fresh RDMA connections handed over at fork */
struct shim_sock;
int shim_handover_now(int fd, struct shim_sock *s);
/* handover.c: the twin reservations an exec carries (exec.c) */
#define SHIM_TWINS_MAX 64
struct shim_twins_carry {
	unsigned int n;			   /* files passed */
	int fd[SHIM_TWINS_MAX];		   /* their numbers */
	char kv[32 + SHIM_TWINS_MAX * 48]; /* "LIBERDMA_SHIM_TWINS=..." */
};
void shim_twins_pass(struct shim_twins_carry *c);
void shim_twins_unpass(const struct shim_twins_carry *c);
/* Is environment entry e a LIBERDMA_SHIM_TWINS one? */
bool shim_twins_named(const char *e);

/* sig.c: would the kernel restart a socket call that a handler interrupted
 * (SA_RESTART, no socket timeout)?  Asked after an internal wait's EINTR. */
bool shim_eintr_restarts(void);
/* An internal wait without a timeout (ms < 0) of a blocking call ended
 * with r: go on waiting, as the kernel would restart the call?  Only when
 * r is EINTR, no handler waits to run at the call's end (that end makes
 * the call again if it should: shim_sig_deliver) and every caught signal
 * has SA_RESTART. */
bool shim_wait_restarts(long r, int ms);
/* At an exported call's end, with handlers waiting for it (sigdefer.h):
 * run them, and say whether the call starts again (its result r was
 * -EINTR and the kernel would restart it; timed: a socket timeout). */
bool shim_sig_deliver(long r, bool timed);

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
/* This thread's ring, kept until it exits: NULL with -errno in *err. */
struct shim_uring *shim_uring_thread(int *err);
void shim_uring_close(struct shim_uring *u);
int shim_uring_accept(struct shim_uring *u, int fd, struct sockaddr *addr,
		      socklen_t *len, int flags);
bool shim_uring_done(struct shim_uring *u, int *res);
int shim_uring_cancel(struct shim_uring *u);
bool shim_uring_user(void); /* liburing loaded: keep to TCP */

#endif
