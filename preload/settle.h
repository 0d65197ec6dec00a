/* SPDX-License-Identifier: MIT */
/* The end of a non-blocking connect's rendezvous (settle.c). */
#ifndef SHIM_SETTLE_H
#define SHIM_SETTLE_H

#include "sock.h"
#include "watch.h"

/* connect.c: s's rendezvous begins (s is CONNECTING); it ends as kind (the
 * kernel's: DEAD, FAILED) or as an RDMA connection over rsocket rs.
 * Sleepers watching s wake. */
void shim_settle_begin(struct shim_sock *s);
void shim_settle_end(struct shim_sock *s, int kind);
void shim_settle_end_rdma(struct shim_sock *s, int rs);

/* In a fork child (fork.c, through connect.c): forget connecting s's
 * eventfd and its watchers, the parent's. */
void shim_settle_forget(struct shim_sock *s);

/* Watch connecting s's end: 0 or -errno (w->now set if it ended
 * already); shim_watch_done lets go of it. */
int shim_settle_watch(struct watch *w, struct shim_sock *s);
void shim_settle_unwatch(struct shim_sock *s);
/* Sleep until connecting s is settled: 0, -EINTR, or -EAGAIN once
 * timeout_ms (>= 0) ran out.  Cancelled, gives back the caller's
 * reference to s. */
int shim_settle_wait(struct shim_sock *s, int timeout_ms);
/* A non-blocking data call on connecting s: -EAGAIN; a blocking one waits
 * for the end of the rendezvous (0: make the call again). */
ssize_t shim_connecting_io(struct shim_sock *s, bool dontwait,
			   const struct timeval *tmo);
/* A call found s SHIM_SK_FAILED: the connect's error (cleared), or 0
 * when another call took it; s is of its next kind after it. */
int shim_sock_take_failure(struct shim_sock *s);

#endif
