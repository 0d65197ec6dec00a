/* SPDX-License-Identifier: MIT */
/*
 * Data path wrappers.  On a kernel fd each is one fd-table load and a call
 * through the real-function pointer.  On an RDMA fd, everything funnels into
 * one receive core and one send core over iovecs, so every entry point
 * (read, recvmsg, writev, sendfile...) shares the same TCP semantics.
 *
 * The rsocket itself is always non-blocking: blocking, SO_RCVTIMEO and
 * SO_SNDTIMEO are implemented here with shim_rdma_wait() (rsockets v44 can
 * only wait safely with rpoll timeouts of 0 or -1).
 */
#include "shim.h"
#include "glue.h"
#include "io_int.h"
#include "log.h"
#include "sock.h"
#include "stats.h"
#include "settle.h"

#include <limits.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

static ssize_t not_rdma(int fd, struct shim_sock *s, bool dontwait,
			const struct timeval *tmo);

/*
 * Wait until rs has ev or the socket timeout expires (-EAGAIN, as the
 * kernel reports an expired SO_RCVTIMEO/SO_SNDTIMEO).  The timeout bounds
 * the whole call, as the kernel's does: *deadline (0 before the call's
 * first wait) is fixed then and kept across the call's later waits.  A
 * handler's EINTR restarts the wait when the kernel would restart the call
 * (SA_RESTART, no timeout: signal(7)).
 */
static void put_cb(void *s)
{
	shim_sock_put(s);
}

/*
 * The waits of the data path are cancellation points (a blocking recv is
 * one): cancelled in one, the thread gives back its caller's (RDMA_CALL's)
 * reference to s, or the connection would outlive its close.  Here, not in
 * RDMA_CALL, so that the wrappers' kernel-fd path stays a tail call.
 */
static int sg_wait_cancellable(struct shim_sock *s, struct pollfd *p, int ms)
{
	int r;

	pthread_cleanup_push(put_cb, s);
	r = sg_wait(p, 1, ms);
	pthread_cleanup_pop(0);
	return r;
}

static int nap_cancellable(struct shim_sock *s, const struct timespec *ts)
{
	int r;

	pthread_cleanup_push(put_cb, s);
	r = nanosleep(ts, NULL);
	pthread_cleanup_pop(0);
	return r;
}

static int wait_for(struct shim_sock *s, short ev, const struct timeval *tmo,
		    int64_t *deadline)
{
	struct pollfd p = {.fd = s->rs, .events = ev};
	int ms = shim_tv_ms(tmo), left = -1, r;

	/* a signal came with the last wake: the call ends (what it moved, or
	 * EINTR) and its handler runs at the call's end, as in the kernel */
	if (shim_sig_waiting())
		return -EINTR;
	for (;;) {
		if (ms >= 0) {
			if (!*deadline)
				*deadline = shim_now_ms() + ms;
			left = (int)(*deadline - shim_now_ms());
			if (left <= 0)
				return -EAGAIN;
		}
		r = sg_wait_cancellable(s, &p, left);
		if (r == 0)
			return -EAGAIN;
		/* a handler waiting runs at the call's end, which then
		 * makes the call again if the kernel would (RDMA_CALL_F) */
		if (shim_wait_restarts(r, ms))
			continue;
		return r < 0 ? r : 0;
	}
}

/*
 * A zero-length read returns 0 once data or the peer's EOF is there; on a
 * blocking socket the kernel waits for it, on a non-blocking one it says
 * EAGAIN.
 */
static ssize_t recv_none(struct shim_sock *s, bool dontwait)
{
	int64_t deadline = 0;
	char c;

	for (;;) {
		ssize_t r = sg_recv(s->rs, &c, 1, MSG_PEEK | MSG_DONTWAIT);

		if (r != -EAGAIN)
			return r < 0 ? r : 0;
		if (s->rd_shut)
			return 0;
		if (dontwait)
			return -EAGAIN;
		r = wait_for(s, POLLIN, &s->rcvtimeo, &deadline);
		if (r < 0)
			return r;
	}
}

/*
 * MSG_PEEK|MSG_WAITALL on a blocking socket: the kernel waits until all of
 * it is queued.  rsockets shows no "more arrived" while data is queued (the
 * rsocket stays readable), so look again after a pause that doubles from
 * 1 ms to 32 ms.  0: look again; -errno: return what was peeked.
 */
static int peek_pause(struct shim_sock *s, int *pause_ms, int64_t *deadline)
{
	struct pollfd p = {.fd = s->rs, .events = POLLIN};
	int ms = shim_tv_ms(&s->rcvtimeo), nap = *pause_ms, r;
	struct timespec ts;

	if (s->rd_shut ||
	    (sg_poll(&p, 1, 0) > 0 && (p.revents & (POLLHUP | POLLERR))))
		return -EPIPE; /* no more will come */
	if (shim_sig_waiting())
		return -EINTR; /* wait_for */
	if (ms >= 0) {
		if (!*deadline)
			*deadline = shim_now_ms() + ms;
		if (*deadline - shim_now_ms() < nap)
			nap = (int)(*deadline - shim_now_ms());
		if (nap <= 0)
			return -EAGAIN;
	}
	ts = (struct timespec){0, nap * 1000000L};
	r = nap_cancellable(s, &ts);
	if (r < 0 && (ms >= 0 || !shim_eintr_restarts()))
		return -EINTR;
	*pause_ms = *pause_ms < 32 ? *pause_ms * 2 : 32;
	return 0;
}

/*
 * The kernel answers a NULL (or page-zero) buffer or iovec array of non-zero
 * length with EFAULT; rsockets would copy through it.  Other unmapped
 * pointers are not checked on the data path (a system call per I/O).
 */
static bool bad_iov(const struct iovec *iov, int cnt)
{
	if (cnt && shim_bad_ptr(iov))
		return true;
	for (int k = 0; k < cnt; k++)
		if (iov[k].iov_len && shim_bad_ptr(iov[k].iov_base))
			return true;
	return false;
}

/*
 * The connection's transport failed with no end from its peer (a keepalive
 * probe or data the peer never acknowledged: sg_timed_out).  From then on
 * it is a kernel TCP socket after such a timeout: ETIMEDOUT pending once
 * (SO_ERROR, or the next recv or send takes it), then closed both ways
 * (EOF, EPIPE; poll IN|OUT|HUP, and ERR while the error is pending).
 * Asked only where rsockets shows an end (EOF, ECONNRESET, POLLERR).
 */
bool shim_rdma_timed_out(struct shim_sock *s)
{
	int no = 0;

	if (__atomic_load_n(&s->tfail, __ATOMIC_ACQUIRE))
		return true;
	if (!sg_timed_out(s->rs))
		return false;
	if (__atomic_compare_exchange_n(&s->tfail, &no, 1, false,
					__ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE)) {
		__atomic_store_n(&s->so_error, ETIMEDOUT, __ATOMIC_RELEASE);
		__atomic_store_n(&s->reset, 1, __ATOMIC_RELEASE);
		shim_dbg("rsocket %d: transport timed out (ETIMEDOUT)", s->rs);
	}
	return true;
}

/*
 * One rrecv on the program's behalf.  What it consumes is counted in
 * rx_bytes (peeks are not), and rd_busy brackets the call so that a count
 * taken meanwhile by shim_rdma_arrived() knows it may be off.
 */
static ssize_t take(struct shim_sock *s, void *buf, size_t len, int flags)
{
	ssize_t r;

	if (flags & MSG_PEEK)
		return sg_recv(s->rs, buf, len, flags);
	__atomic_add_fetch(&s->rd_busy, 1, __ATOMIC_SEQ_CST);
	r = sg_recv(s->rs, buf, len, flags);
	if (r > 0)
		__atomic_add_fetch(&s->rx_bytes, (uint64_t)r, __ATOMIC_SEQ_CST);
	__atomic_sub_fetch(&s->rd_busy, 1, __ATOMIC_SEQ_CST);
	return r;
}

/*
 * A call that found s on its fd just as a fork handed s over (handover.c):
 * the fd is a kernel socket now, and the call is the kernel's.
 */
static ssize_t handed_io(struct shim_sock *s, const struct iovec *iov, int cnt,
			 int flags, bool wr)
{
	struct msghdr m = {.msg_iov = (struct iovec *)iov,
			   .msg_iovlen = (size_t)cnt};
	ssize_t r = wr ? REAL(sendmsg)(s->hfd, &m, flags)
		       : REAL(recvmsg)(s->hfd, &m, flags);

	return r < 0 ? -errno : r;
}

static char *scratch(void);
#define ARRIVED_PEEK_CAP (16 * 1024)
/* MSG_PEEK|MSG_TRUNC looks at this much at most (rsockets' receive buffer
 * is smaller unless ERDMA_SHIM_RCVBUF says otherwise). */
#define TRUNC_PEEK_CAP (4u << 20)

static ssize_t recvv(struct shim_sock *s, const struct iovec *iov, int cnt,
		     int flags, int64_t *deadline);

/*
 * A peek's sink: it must see what is queued all at once, so it is as large
 * as the program asked -- but never larger than the connection's receive
 * buffer (more can't be queued), so the peer's data can't make a call
 * allocate more than the connection holds already; the thread's scratch
 * when that is enough.
 */
static size_t peek_cap(struct shim_sock *s, size_t want)
{
	int rbuf = sg_rcvbuf(s->rs);
	size_t cap = want < TRUNC_PEEK_CAP ? want : TRUNC_PEEK_CAP;

	return rbuf > 0 && (size_t)rbuf < cap ? (size_t)rbuf : cap;
}

/*
 * MSG_TRUNC on TCP: up to want bytes are consumed (with MSG_PEEK: looked
 * at) and counted, never copied: the program's buffer may be NULL or
 * shorter than its length, and is not written.  Here they go through a
 * sink of the shim's: the thread's scratch (what lands there is thrown
 * away, so a handler's poll that reuses it meanwhile harms nothing), or
 * for a peek larger than that, a buffer (peek_cap).  The pieces share one
 * deadline: SO_RCVTIMEO bounds the call, as the kernel's.
 */
static ssize_t recv_discard(struct shim_sock *s, size_t want, int flags)
{
	bool peek = flags & MSG_PEEK;
	size_t cap = peek ? peek_cap(s, want) : ARRIVED_PEEK_CAP;
	bool own = cap > ARRIVED_PEEK_CAP;
	char *sink = own ? malloc(cap) : scratch();
	int64_t deadline = 0;
	size_t got = 0;
	ssize_t r;

	if (!sink)
		return -ENOMEM;
	flags &= ~MSG_TRUNC;
	do {
		struct iovec v = {.iov_base = sink,
				  .iov_len =
				      want - got < cap ? want - got : cap};

		/* the first piece waits as the call would; the rest is what
		 * is queued, unless MSG_WAITALL asks for all of it */
		r = recvv(s, &v, 1,
			  got && !(flags & MSG_WAITALL) ? flags | MSG_DONTWAIT
							: flags,
			  &deadline);
		if (r > 0)
			got += (size_t)r;
	} while (r > 0 && !peek && got < want);
	if (own)
		free(sink);
	return got ? (ssize_t)got : r;
}

/*
 * A peek over several buffers.  rsockets' peek always starts at the head
 * of what is queued, so a piece per buffer would show every buffer the
 * same bytes, and the kernel fills them in order: so one peek into a sink
 * (peek_cap: no larger than what can be queued), spread over the buffers.
 */
static ssize_t recv_peekv(struct shim_sock *s, const struct iovec *iov, int cnt,
			  size_t want, int flags, int64_t *deadline)
{
	char stack[512];
	size_t cap = peek_cap(s, want), off = 0;
	char *sink = cap <= sizeof(stack) ? stack : malloc(cap);
	struct iovec v = {.iov_base = sink, .iov_len = cap};
	ssize_t r;

	if (!sink)
		return -ENOMEM;
	r = recvv(s, &v, 1, flags, deadline);
	for (int k = 0; k < cnt && r > 0 && off < (size_t)r; k++) {
		size_t n = (size_t)r - off;

		if (n > iov[k].iov_len)
			n = iov[k].iov_len;
		memcpy(iov[k].iov_base, sink + off, n);
		off += n;
	}
	if (sink != stack)
		free(sink);
	return r;
}

ssize_t shim_rdma_recvv(struct shim_sock *s, const struct iovec *iov, int cnt,
			int flags)
{
	int64_t deadline = 0;

	return recvv(s, iov, cnt, flags, &deadline);
}

/* deadline: SO_RCVTIMEO's end for this call, 0 until a wait sets it. */
static ssize_t recvv(struct shim_sock *s, const struct iovec *iov, int cnt,
		     int flags, int64_t *deadline)
{
	bool dontwait = s->nonblock || (flags & MSG_DONTWAIT);
	int rflags = MSG_DONTWAIT | (flags & MSG_PEEK);
	size_t got = 0, want = 0;
	int i = 0, pause_ms = 1;
	size_t off = 0;

	if (unlikely(!shim_sock_usable(s)))
		return handed_io(s, iov, cnt, flags, false);
	if (flags & MSG_OOB)
		return -EINVAL; /* no urgent data on this connection */
	if (flags & MSG_ERRQUEUE)
		return -EAGAIN; /* nothing is ever queued there */
	if (cnt < 0 || cnt > IOV_MAX)
		return -EINVAL;
	if (cnt && shim_bad_ptr(iov))
		return -EFAULT;
	for (int k = 0; k < cnt; k++)
		want += iov[k].iov_len;
	if (!want)
		return recv_none(s, dontwait);
	if (flags & MSG_TRUNC) /* the buffers are not touched: unchecked */
		return recv_discard(s, want, flags);
	if (bad_iov(iov, cnt))
		return -EFAULT;
	if ((flags & MSG_PEEK) && cnt > 1)
		return recv_peekv(s, iov, cnt, want, flags, deadline);
	/* After shutdown(SHUT_RD) what is queued still reads, then EOF: the
	 * kernel neither drops it nor waits. */
	if (s->rd_shut)
		dontwait = true;
	__atomic_add_fetch(&s->rd_gen, 1, __ATOMIC_SEQ_CST);
	shim_sock_ev_io(s);

	while (i < cnt) {
		ssize_t r;

		if (off == iov[i].iov_len) {
			i++, off = 0;
			continue;
		}
		r = take(s, (char *)iov[i].iov_base + off, iov[i].iov_len - off,
			 rflags);
		if (r > 0) {
			got += (size_t)r;
			off += (size_t)r;
			/* A peek can't advance through the stream: with
			 * WAITALL it looks again from the start. */
			if (!(flags & MSG_PEEK))
				continue;
			if (!(flags & MSG_WAITALL) || dontwait || got == want ||
			    cnt != 1 || peek_pause(s, &pause_ms, deadline) < 0)
				break;
			got = 0, off = 0;
			continue;
		}
		if (r == 0) { /* EOF, or the transport's timeout (once) */
			int e;

			if (got || (flags & MSG_PEEK) ||
			    !shim_rdma_timed_out(s))
				break;
			e = __atomic_exchange_n(&s->so_error, 0,
						__ATOMIC_ACQ_REL);
			if (e)
				return -e;
			break;
		}
		if (r != -EAGAIN)
			return got ? (ssize_t)got : r;
		/* Nothing more queued: return what we have unless the caller
		 * asked for all of it. */
		if (got && !(flags & MSG_WAITALL))
			break;
		/* shut for reading meanwhile (another thread): no waiting */
		if (dontwait || s->rd_shut)
			return got ? (ssize_t)got : s->rd_shut ? 0 : -EAGAIN;
		r = wait_for(s, POLLIN, &s->rcvtimeo, deadline);
		if (r < 0)
			return got ? (ssize_t)got : r;
	}
	shim_stat_rx(s->stat_ref, flags & MSG_PEEK ? 0 : got);
	return (ssize_t)got;
}

/* Kernel TCP reports a write to a dead or shut connection as EPIPE and,
 * unless MSG_NOSIGNAL, raises SIGPIPE; rsockets says ECONNRESET. */
static ssize_t broken_pipe(int flags)
{
	if (!(flags & MSG_NOSIGNAL))
		raise(SIGPIPE);
	return -EPIPE;
}

/* A send on a reset connection: the pending error if any (SO_ERROR's, which
 * the kernel's send consumes), else EPIPE. */
static ssize_t broken_pipe_reset(struct shim_sock *s, int flags)
{
	int e = __atomic_exchange_n(&s->so_error, 0, __ATOMIC_ACQ_REL);

	if (e && e != EPIPE)
		return -e;
	return broken_pipe(flags);
}

/*
 * A send after the peer's end (rev: POLLHUP, its close; POLLERR, a broken
 * connection).  Kernel TCP lets the first send after the peer's close go
 * out: its bytes draw the peer's reset and are lost; from then on the
 * socket shows ERR (SO_ERROR EPIPE) and HUP, and sends fail with EPIPE.
 * rsockets has no reset, so the shim plays it: the first such send counts
 * as sent and its bytes are dropped, and the connection is reset at once
 * (on loopback the kernel's reset is back before send() returns).  A send
 * that raced with the end and reached rsockets before it showed was a send
 * before the peer's close arrived, as over a network: the next one is
 * still the one let through.
 */
static ssize_t past_end(struct shim_sock *s, size_t want, short rev, int flags)
{
	if (rev & POLLERR)
		return broken_pipe(flags);
	/* Our data was in flight when the peer went: the reset is in, and
	 * no send goes through (shim_rdma_revents shows it). */
	if (__atomic_load_n(&s->wr_full, __ATOMIC_RELAXED)) {
		__atomic_store_n(&s->reset, 1, __ATOMIC_RELEASE);
		return broken_pipe(flags);
	}
	if (__atomic_exchange_n(&s->reset, 1, __ATOMIC_ACQ_REL))
		return broken_pipe_reset(s, flags);
	__atomic_store_n(&s->so_error, EPIPE, __ATOMIC_RELEASE);
	__atomic_add_fetch(&s->tx_bytes, want, __ATOMIC_RELAXED);
	shim_stat_tx(s->stat_ref, want);
	shim_sock_ev_io(s);
	return (ssize_t)want;
}

ssize_t shim_rdma_sendv(struct shim_sock *s, const struct iovec *iov, int cnt,
			int flags)
{
	bool dontwait = s->nonblock || (flags & MSG_DONTWAIT);
	struct iovec v[64];
	size_t sent = 0, want = 0;
	int64_t deadline = 0;
	bool looked = false;
	int i = 0;
	size_t off = 0;

	if (unlikely(!shim_sock_usable(s)))
		return handed_io(s, iov, cnt, flags, true);
	if (flags & MSG_OOB)
		return -EOPNOTSUPP;
	if (cnt < 0 || cnt > IOV_MAX)
		return -EINVAL;
	if (bad_iov(iov, cnt))
		return -EFAULT;
	for (int k = 0; k < cnt; k++)
		want += iov[k].iov_len;
	if (s->wr_shut)
		return broken_pipe(flags);
	if (!want)
		return 0;
	if (__atomic_load_n(&s->reset, __ATOMIC_ACQUIRE))
		return broken_pipe_reset(s, flags);

	while (sent < want) {
		const struct iovec *vp = v;
		int n = 0;
		ssize_t r;

		if (unlikely(s->wr_shut)) { /* by another thread meanwhile */
			if (!sent)
				return broken_pipe(flags);
			break;
		}

		if (cnt == 1 && !off) {
			/* one slice (send, write), none of it sent yet: as
			 * it is (want > 0: not empty) */
			vp = iov;
			n = 1;
		} else {
			/* Gather up to 64 iovecs per rsendmsg: one RDMA write
			 * for many small slices (gRPC sends up to 260 per
			 * sendmsg). */
			while (i < cnt && !iov[i].iov_len)
				i++;
			for (int k = i; k < cnt && n < 64; k++) {
				size_t o = k == i ? off : 0;

				if (iov[k].iov_len <= o)
					continue;
				v[n].iov_base = (char *)iov[k].iov_base + o;
				v[n].iov_len = iov[k].iov_len - o;
				n++;
			}
		}
		/* rsockets accepts sends into its buffer long after the peer
		 * has gone (until credits run out): the first send looks
		 * first (in the same library call), so that what follows is
		 * TCP's answer, not bytes queued for nobody. */
		if (!looked) {
			short rev;

			looked = true;
			r = sg_sendv_look(s->rs, vp, n, MSG_DONTWAIT, &rev);
			if (rev & (POLLHUP | POLLERR)) {
				/* shut both ways by another thread since the
				 * check above: that HUP is ours, not the
				 * peer's end */
				if (s->wr_shut)
					return broken_pipe(flags);
				if ((rev & POLLERR) && shim_rdma_timed_out(s))
					return broken_pipe_reset(s, flags);
				return past_end(s, want, rev, flags);
			}
		} else {
			r = sg_sendv(s->rs, vp, n, MSG_DONTWAIT);
		}
		if (r > 0) {
			sent += (size_t)r;
			/* advance (i, off) by r bytes */
			while (r > 0) {
				size_t room = iov[i].iov_len - off;

				if ((size_t)r < room) {
					off += (size_t)r;
					r = 0;
				} else {
					r -= (ssize_t)room;
					i++, off = 0;
				}
			}
			continue;
		}
		if (r == -EAGAIN || r == 0) {
			if (dontwait)
				break;
			r = wait_for(s, POLLOUT, &s->sndtimeo, &deadline);
			if (r == 0)
				continue;
		}
		if (sent)
			break;
		if (r == -ECONNRESET && shim_rdma_timed_out(s))
			return broken_pipe_reset(s, flags);
		if (r == -ECONNRESET || r == -EPIPE || r == -ENOTCONN)
			return broken_pipe(flags);
		return r;
	}
	/* A send that could not all go leaves data in flight: the peer's
	 * close is then a reset (see shim_rdma_revents). */
	__atomic_store_n(&s->wr_full, sent < want, __ATOMIC_RELAXED);
	if (sent < want) {
		__atomic_add_fetch(&s->wr_gen, 1, __ATOMIC_SEQ_CST);
		shim_sock_ev_io(s);
	}
	if (!sent)
		return -EAGAIN;
	__atomic_add_fetch(&s->tx_bytes, sent, __ATOMIC_RELAXED);
	shim_stat_tx(s->stat_ref, sent);
	return (ssize_t)sent;
}

short shim_rdma_revents(struct shim_sock *s, short rev, short want)
{
	if (unlikely(rev & POLLERR) &&
	    !__atomic_load_n(&s->reset, __ATOMIC_ACQUIRE))
		(void)shim_rdma_timed_out(s);
	/* Reset (past_end): closed both ways, as a TCP socket after a reset;
	 * ERR while its error is pending. */
	if (__atomic_load_n(&s->reset, __ATOMIC_ACQUIRE)) {
		rev |= POLLIN | POLLOUT | POLLHUP;
		if (__atomic_load_n(&s->so_error, __ATOMIC_ACQUIRE))
			rev |= POLLERR;
	} else if ((rev & POLLHUP) && !(s->rd_shut && s->wr_shut) &&
		   __atomic_load_n(&s->wr_full, __ATOMIC_RELAXED)) {
		/* The peer went with our data still in flight (its window
		 * was full): TCP would have had a reset, IN|OUT|ERR|HUP,
		 * which no mask hides, so a writer waiting for OUT wakes. */
		rev |= POLLIN | POLLOUT | POLLERR;
	} else if (rev & POLLHUP) {
		rev |= POLLIN; /* EOF is readable */
		if (!s->wr_shut)
			rev &= (short)~POLLHUP;
	}
	if (s->rd_shut)
		rev |= POLLIN; /* reads no longer wait */
	if (s->wr_shut)
		rev |= POLLOUT; /* nor writes: they fail (EPIPE) */
	if (s->rd_shut && s->wr_shut)
		rev |= POLLHUP; /* shut both ways: the kernel's HUP */
	if (rev & POLLIN)
		rev |= POLLRDNORM;
	if (rev & POLLOUT)
		rev |= POLLWRNORM;
	(void)want;
	return rev;
}

bool shim_rdma_peer_eof(struct shim_sock *s, short rev)
{
	char c;

	if ((rev & POLLHUP) || s->rd_shut)
		return true; /* the kernel shows RDHUP for our own SHUT_RD too
			      */
	if (!(rev & POLLIN))
		return false;
	return sg_recv(s->rs, &c, 1, MSG_PEEK | MSG_DONTWAIT) == 0;
}

/*
 * Bytes that ever arrived on s, EOF counting as one: consumed + queued now
 * (+ 1 once the peer's EOF shows).  epoll's edge-triggered EPOLLIN fires
 * again when this grows (rsockets has no "new data" signal of its own).
 * Queued bytes are measured by a peek of at most ARRIVED_PEEK_CAP; rev is
 * the rsocket's rpoll revents (POLLHUP: the peer is gone).  Returns 0 when
 * *out is exact, 1 when it is only a lower bound (the peek filled the cap),
 * -EBUSY when a receive ran meanwhile (the count may be off either way),
 * or another -errno.  Counting past the cap was tried and taken out: a
 * copy of all that is queued, paid at every look at a connection the
 * program has stopped reading, and at nearly every event of a streaming
 * reader (docs/limits.md, edge-triggered EPOLLIN).
 */
/* The peek's scratch: one per thread, made on first use, freed at thread
 * exit -- not on the stack, where 16 KiB could overrun a program's small
 * thread stacks deep inside epoll_wait. */
static pthread_key_t scratch_key;
static pthread_once_t scratch_once = PTHREAD_ONCE_INIT;
static __thread char *scratch_buf;

static void scratch_key_init(void)
{
	(void)pthread_key_create(&scratch_key, free);
}

static char *scratch(void)
{
	if (likely(scratch_buf))
		return scratch_buf;
	pthread_once(&scratch_once, scratch_key_init);
	scratch_buf = malloc(ARRIVED_PEEK_CAP);
	if (scratch_buf)
		(void)pthread_setspecific(scratch_key, scratch_buf);
	return scratch_buf;
}

int shim_rdma_arrived(struct shim_sock *s, short rev, uint64_t *out)
{
	char *buf = scratch();
	uint64_t before;
	ssize_t r;
	bool eof;

	if (!buf)
		return -ENOMEM;
	if (s->rd_shut)
		return -ESHUTDOWN; /* readable for good: nothing to count */
	before = __atomic_load_n(&s->rx_bytes, __ATOMIC_SEQ_CST);
	if (__atomic_load_n(&s->rd_busy, __ATOMIC_SEQ_CST))
		return -EBUSY;
	r = sg_recv(s->rs, buf, ARRIVED_PEEK_CAP, MSG_PEEK | MSG_DONTWAIT);
	/* busy before consumed: a receive that took bytes before our peek
	 * is either still counted busy or already in rx_bytes. */
	if (__atomic_load_n(&s->rd_busy, __ATOMIC_SEQ_CST) ||
	    __atomic_load_n(&s->rx_bytes, __ATOMIC_SEQ_CST) != before)
		return -EBUSY;
	if (r < 0 && r != -EAGAIN)
		return (int)r;
	eof = r == 0 || (rev & POLLHUP); /* rrecv's 0 is EOF */
	if (r < 0)
		r = 0; /* nothing queued */
	*out = before + (uint64_t)r + eof;
	return r == ARRIVED_PEEK_CAP;
}

static inline ssize_t recv1(struct shim_sock *s, void *buf, size_t n, int flags)
{
	struct iovec v = {.iov_base = buf, .iov_len = n};

	return shim_rdma_recvv(s, &v, 1, flags);
}

static inline ssize_t send1(struct shim_sock *s, const void *buf, size_t n,
			    int flags)
{
	struct iovec v = {.iov_base = (void *)buf, .iov_len = n};

	return shim_rdma_sendv(s, &v, 1, flags);
}

/* The slow path of every wrapper: hold a reference across the call so a
 * concurrent close() can't free the rsocket underneath us.  When that close
 * came first (tryget fails), the whole call is made again: the fd then
 * names the kernel's socket or a new one.  (If the thread is cancelled in
 * the call, the waits give the reference back: see wait_for.)  A handler
 * of a signal that ended a wait runs after the put (base/sigdefer.c): one
 * that leaves by siglongjmp leaves nothing held; after one that returns,
 * the call is made again from the fd when the kernel would restart it. */
/* Every wrapper's RDMA part is a function of its own, NAME_slow, out of
 * line so that the kernel-fd path stays one load and a tail call. */
/* A connect still under way (SHIM_SK_CONNECTING) answers as the kernel's
 * connecting socket: EAGAIN, or a wait for its end and the call again. */
/* Each call is a cancellation point (sendfile's runs with cancellation off,
 * sendfile_slow): a cancel pending acts as it starts, ready or not, as
 * glibc's; before the reference is taken, so nothing is held. */
#define RDMA_CALL_F(fd, s, fl, tmo, expr, again)                               \
	({                                                                     \
		__label__ retry_;                                              \
		ssize_t r_;                                                    \
		bool timed_;                                                   \
		shim_testcancel();                                             \
	retry_:                                                                \
		if (unlikely(!shim_sock_tryget(                                \
			fd, s, SHIM_KINDS_WITH(SHIM_KF_CONN))))                \
			return not_rdma(fd, s, (fl)&MSG_DONTWAIT, tmo)         \
				   ?: again;                                   \
		timed_ = shim_tv_ms(tmo) >= 0;                                 \
		shim_sig_edge_enter();                                         \
		r_ = (expr);                                                   \
		shim_sock_put(s);                                              \
		if (shim_sig_edge_leave() && shim_sig_deliver(r_, timed_)) {   \
			s = shim_fd_get(fd);                                   \
			if (!s)                                                \
				return again;                                  \
			goto retry_;                                           \
		}                                                              \
		shim_ret(r_);                                                  \
	})
#define RDMA_CALL_RD(fd, s, fl, expr, again)                                   \
	RDMA_CALL_F(fd, s, fl, &(s)->rcvtimeo, expr, again)
#define RDMA_CALL_WR(fd, s, fl, expr, again)                                   \
	RDMA_CALL_F(fd, s, fl, &(s)->sndtimeo, expr, again)

#define IS_RDMA(s) unlikely((s) && shim_kind_is(s, SHIM_KF_IO_SLOW))

/*
 * A read, readv or writev of nothing never reaches a socket: the kernel's
 * sock_read_iter returns 0 for it at once ("Match SYS5 behaviour"; a
 * recv(0) waits for data), and readv/writev with an empty total stop in
 * the VFS (no EPIPE after SHUT_WR either).  So the fd's own kernel socket
 * answers them, the VFS's checks (EINVAL, EFAULT) included.
 */
static bool iov_kernel(const struct iovec *iov, int cnt)
{
	if (cnt <= 0 || cnt > IOV_MAX || shim_bad_ptr(iov))
		return true;
	for (int k = 0; k < cnt; k++)
		if (iov[k].iov_len)
			return false;
	return true;
}

static __attribute__((noinline)) ssize_t read_slow(struct shim_sock *s, int fd,
						   void *buf, size_t n)
{
	if (!n)
		return REAL(read)(fd, buf, n);
	return RDMA_CALL_RD(fd, s, 0, recv1(s, buf, n, 0), read(fd, buf, n));
}

SHIM_EXPORT ssize_t read(int fd, void *buf, size_t n)
{
	struct shim_sock *s = shim_fd_get(fd);

	if (likely(!IS_RDMA(s)))
		return REAL(read)(fd, buf, n);
	return read_slow(s, fd, buf, n);
}

static __attribute__((noinline)) ssize_t
__read_chk_slow(struct shim_sock *s, int fd, void *buf, size_t n, size_t buflen)
{
	if (!n)
		return REAL(read)(fd, buf, n); /* as read_slow */
	return RDMA_CALL_RD(fd, s, 0, recv1(s, buf, n, 0),
			    __read_chk(fd, buf, n, buflen));
}

SHIM_EXPORT ssize_t __read_chk(int fd, void *buf, size_t n, size_t buflen)
{
	struct shim_sock *s = shim_fd_get(fd);

	if (likely(!IS_RDMA(s)))
		return REAL(__read_chk)(fd, buf, n, buflen);
	if (n > buflen)
		__chk_fail();
	return __read_chk_slow(s, fd, buf, n, buflen);
}

static __attribute__((noinline)) ssize_t
readv_slow(struct shim_sock *s, int fd, const struct iovec *iov, int iovcnt)
{
	if (iov_kernel(iov, iovcnt))
		return REAL(readv)(fd, iov, iovcnt);
	return RDMA_CALL_RD(fd, s, 0, shim_rdma_recvv(s, iov, iovcnt, 0),
			    readv(fd, iov, iovcnt));
}

SHIM_EXPORT ssize_t readv(int fd, const struct iovec *iov, int iovcnt)
{
	struct shim_sock *s = shim_fd_get(fd);

	if (likely(!IS_RDMA(s)))
		return REAL(readv)(fd, iov, iovcnt);
	return readv_slow(s, fd, iov, iovcnt);
}

static __attribute__((noinline)) ssize_t write_slow(struct shim_sock *s, int fd,
						    const void *buf, size_t n)
{
	return RDMA_CALL_WR(fd, s, 0, send1(s, buf, n, 0), write(fd, buf, n));
}

SHIM_EXPORT ssize_t write(int fd, const void *buf, size_t n)
{
	struct shim_sock *s = shim_fd_get(fd);

	if (likely(!IS_RDMA(s))) {
		if (unlikely(s == &shim_svc_sock))
			return sg_svc_write(fd, buf, n);
		return REAL(write)(fd, buf, n);
	}
	return write_slow(s, fd, buf, n);
}

static __attribute__((noinline)) ssize_t
writev_slow(struct shim_sock *s, int fd, const struct iovec *iov, int iovcnt)
{
	if (iov_kernel(iov, iovcnt))
		return REAL(writev)(fd, iov, iovcnt);
	return RDMA_CALL_WR(fd, s, 0, shim_rdma_sendv(s, iov, iovcnt, 0),
			    writev(fd, iov, iovcnt));
}

SHIM_EXPORT ssize_t writev(int fd, const struct iovec *iov, int iovcnt)
{
	struct shim_sock *s = shim_fd_get(fd);

	if (likely(!IS_RDMA(s)))
		return REAL(writev)(fd, iov, iovcnt);
	return writev_slow(s, fd, iov, iovcnt);
}

static __attribute__((noinline)) ssize_t
recv_slow(struct shim_sock *s, int fd, void *buf, size_t n, int flags)
{
	return RDMA_CALL_RD(fd, s, flags, recv1(s, buf, n, flags),
			    recv(fd, buf, n, flags));
}

SHIM_EXPORT ssize_t recv(int fd, void *buf, size_t n, int flags)
{
	struct shim_sock *s = shim_fd_get(fd);

	if (likely(!IS_RDMA(s)))
		return REAL(recv)(fd, buf, n, flags);
	return recv_slow(s, fd, buf, n, flags);
}

static __attribute__((noinline)) ssize_t
__recv_chk_slow(struct shim_sock *s, int fd, void *buf, size_t n, size_t buflen,
		int flags)
{
	return RDMA_CALL_RD(fd, s, flags, recv1(s, buf, n, flags),
			    __recv_chk(fd, buf, n, buflen, flags));
}

SHIM_EXPORT ssize_t __recv_chk(int fd, void *buf, size_t n, size_t buflen,
			       int flags)
{
	struct shim_sock *s = shim_fd_get(fd);

	if (likely(!IS_RDMA(s)))
		return REAL(__recv_chk)(fd, buf, n, buflen, flags);
	if (n > buflen)
		__chk_fail();
	return __recv_chk_slow(s, fd, buf, n, buflen, flags);
}

/* A TCP recvfrom never fills in a source address: length 0. */
static ssize_t recvfrom_rdma(struct shim_sock *s, void *buf, size_t n,
			     int flags, socklen_t *alen)
{
	ssize_t r = recv1(s, buf, n, flags);

	if (r >= 0 && alen)
		*alen = 0;
	return r;
}

static __attribute__((noinline)) ssize_t
recvfrom_slow(struct shim_sock *s, int fd, void *__restrict buf, size_t n,
	      int flags, __SOCKADDR_ARG addr, socklen_t *__restrict alen)
{
	return RDMA_CALL_RD(
	    fd, s, flags,
	    recvfrom_rdma(s, buf, n, flags, addr.__sockaddr__ ? alen : NULL),
	    recvfrom(fd, buf, n, flags, addr, alen));
}

SHIM_EXPORT ssize_t recvfrom(int fd, void *__restrict buf, size_t n, int flags,
			     __SOCKADDR_ARG addr, socklen_t *__restrict alen)
{
	struct shim_sock *s = shim_fd_get(fd);

	if (likely(!IS_RDMA(s)))
		return REAL(recvfrom)(fd, buf, n, flags, addr, alen);
	return recvfrom_slow(s, fd, buf, n, flags, addr, alen);
}

static __attribute__((noinline)) ssize_t
__recvfrom_chk_slow(struct shim_sock *s, int fd, void *__restrict buf, size_t n,
		    size_t buflen, int flags, __SOCKADDR_ARG addr,
		    socklen_t *__restrict alen)
{
	return RDMA_CALL_RD(
	    fd, s, flags,
	    recvfrom_rdma(s, buf, n, flags, addr.__sockaddr__ ? alen : NULL),
	    __recvfrom_chk(fd, buf, n, buflen, flags, addr, alen));
}

SHIM_EXPORT ssize_t __recvfrom_chk(int fd, void *__restrict buf, size_t n,
				   size_t buflen, int flags,
				   __SOCKADDR_ARG addr,
				   socklen_t *__restrict alen)
{
	struct shim_sock *s = shim_fd_get(fd);

	if (likely(!IS_RDMA(s)))
		return REAL(__recvfrom_chk)(fd, buf, n, buflen, flags, addr,
					    alen);
	if (n > buflen)
		__chk_fail();
	return __recvfrom_chk_slow(s, fd, buf, n, buflen, flags, addr, alen);
}

static ssize_t recvmsg_rdma(struct shim_sock *s, struct msghdr *msg, int flags)
{
	ssize_t r;

	if (shim_bad_ptr(msg))
		return -EFAULT;
	if (msg->msg_iovlen > IOV_MAX)
		return -EMSGSIZE;
	r = shim_rdma_recvv(s, msg->msg_iov, (int)msg->msg_iovlen, flags);
	if (r >= 0) {
		/* No ancillary data on this path (TCP_INQ is refused on
		 * eligible sockets, so no SCM_INQ is expected). */
		msg->msg_namelen = 0;
		msg->msg_controllen = 0;
		msg->msg_flags = 0;
	}
	return r;
}

static __attribute__((noinline)) ssize_t
recvmsg_slow(struct shim_sock *s, int fd, struct msghdr *msg, int flags)
{
	return RDMA_CALL_RD(fd, s, flags, recvmsg_rdma(s, msg, flags),
			    recvmsg(fd, msg, flags));
}

SHIM_EXPORT ssize_t recvmsg(int fd, struct msghdr *msg, int flags)
{
	struct shim_sock *s = shim_fd_get(fd);

	if (likely(!IS_RDMA(s)))
		return REAL(recvmsg)(fd, msg, flags);
	return recvmsg_slow(s, fd, msg, flags);
}

static int recvmmsg_rdma(struct shim_sock *s, struct mmsghdr *vmsg,
			 unsigned int vlen, int flags)
{
	unsigned int i;

	for (i = 0; i < vlen; i++) {
		ssize_t r =
		    recvmsg_rdma(s, &vmsg[i].msg_hdr,
				 i ? (flags | MSG_DONTWAIT) & ~MSG_WAITFORONE
				   : flags & ~MSG_WAITFORONE);

		if (r < 0)
			return i ? (int)i : (int)r;
		vmsg[i].msg_len = (unsigned int)r;
		if (r == 0)
			return (int)i + 1;
	}
	return (int)i;
}

static __attribute__((noinline)) int recvmmsg_slow(struct shim_sock *s, int fd,
						   struct mmsghdr *vmsg,
						   unsigned int vlen, int flags,
						   struct timespec *tmo)
{
	return (int)RDMA_CALL_RD(fd, s, flags,
				 recvmmsg_rdma(s, vmsg, vlen, flags),
				 recvmmsg(fd, vmsg, vlen, flags, tmo));
}

SHIM_EXPORT int recvmmsg(int fd, struct mmsghdr *vmsg, unsigned int vlen,
			 int flags, struct timespec *tmo)
{
	struct shim_sock *s = shim_fd_get(fd);

	if (likely(!IS_RDMA(s)))
		return REAL(recvmmsg)(fd, vmsg, vlen, flags, tmo);
	return recvmmsg_slow(s, fd, vmsg, vlen, flags, tmo);
}

static __attribute__((noinline)) ssize_t
send_slow(struct shim_sock *s, int fd, const void *buf, size_t n, int flags)
{
	return RDMA_CALL_WR(fd, s, flags, send1(s, buf, n, flags),
			    send(fd, buf, n, flags));
}

SHIM_EXPORT ssize_t send(int fd, const void *buf, size_t n, int flags)
{
	struct shim_sock *s = shim_fd_get(fd);

	if (likely(!IS_RDMA(s)))
		return REAL(send)(fd, buf, n, flags);
	return send_slow(s, fd, buf, n, flags);
}

static __attribute__((noinline)) ssize_t
sendto_slow(struct shim_sock *s, int fd, const void *buf, size_t n, int flags,
	    __CONST_SOCKADDR_ARG addr, socklen_t alen)
{
	return RDMA_CALL_WR(fd, s, flags, send1(s, buf, n, flags),
			    sendto(fd, buf, n, flags, addr, alen));
}

SHIM_EXPORT ssize_t sendto(int fd, const void *buf, size_t n, int flags,
			   __CONST_SOCKADDR_ARG addr, socklen_t alen)
{
	struct shim_sock *s = shim_fd_get(fd);

	if (likely(!IS_RDMA(s)))
		return REAL(sendto)(fd, buf, n, flags, addr, alen);
	/* On a connected TCP socket the kernel ignores the address. */
	return sendto_slow(s, fd, buf, n, flags, addr, alen);
}

static ssize_t sendmsg_rdma(struct shim_sock *s, const struct msghdr *msg,
			    int flags)
{
	if (shim_bad_ptr(msg))
		return -EFAULT;
	if (msg->msg_iovlen > IOV_MAX)
		return -EMSGSIZE;
	return shim_rdma_sendv(s, msg->msg_iov, (int)msg->msg_iovlen, flags);
}

static __attribute__((noinline)) ssize_t
sendmsg_slow(struct shim_sock *s, int fd, const struct msghdr *msg, int flags)
{
	return RDMA_CALL_WR(fd, s, flags, sendmsg_rdma(s, msg, flags),
			    sendmsg(fd, msg, flags));
}

SHIM_EXPORT ssize_t sendmsg(int fd, const struct msghdr *msg, int flags)
{
	struct shim_sock *s = shim_fd_get(fd);

	if (likely(!IS_RDMA(s)))
		return REAL(sendmsg)(fd, msg, flags);
	return sendmsg_slow(s, fd, msg, flags);
}

static int sendmmsg_rdma(struct shim_sock *s, struct mmsghdr *vmsg,
			 unsigned int vlen, int flags)
{
	unsigned int i;

	for (i = 0; i < vlen; i++) {
		ssize_t r = sendmsg_rdma(s, &vmsg[i].msg_hdr, flags);

		if (r < 0)
			return i ? (int)i : (int)r;
		vmsg[i].msg_len = (unsigned int)r;
	}
	return (int)i;
}

static __attribute__((noinline)) int sendmmsg_slow(struct shim_sock *s, int fd,
						   struct mmsghdr *vmsg,
						   unsigned int vlen, int flags)
{
	return (int)RDMA_CALL_WR(fd, s, flags,
				 sendmmsg_rdma(s, vmsg, vlen, flags),
				 sendmmsg(fd, vmsg, vlen, flags));
}

SHIM_EXPORT int sendmmsg(int fd, struct mmsghdr *vmsg, unsigned int vlen,
			 int flags)
{
	struct shim_sock *s = shim_fd_get(fd);

	if (likely(!IS_RDMA(s)))
		return REAL(sendmmsg)(fd, vmsg, vlen, flags);
	return sendmmsg_slow(s, fd, vmsg, vlen, flags);
}

/* sendfile onto an RDMA fd: copy through a buffer, keeping the kernel's
 * offset rules (update *offset, or the file position when it is NULL). */
static ssize_t sendfile_rdma(struct shim_sock *s, int in_fd, off_t *offset,
			     size_t count)
{
	const size_t chunk = 256 * 1024;
	off_t pos = offset ? *offset : lseek(in_fd, 0, SEEK_CUR);
	size_t total = 0;
	char *buf;

	if (pos < 0)
		return -errno;
	buf = malloc(chunk);
	if (!buf)
		return -ENOMEM;
	while (total < count) {
		size_t want = count - total < chunk ? count - total : chunk;
		ssize_t n = pread(in_fd, buf, want, pos);
		ssize_t r;

		if (n < 0) {
			if (!total) {
				free(buf);
				return -errno;
			}
			break;
		}
		if (n == 0)
			break;
		r = send1(s, buf, (size_t)n, 0);
		if (r < 0) {
			if (!total) {
				free(buf);
				return r;
			}
			break;
		}
		pos += r;
		total += (size_t)r;
		if (r < n)
			break;
	}
	free(buf);
	if (offset)
		*offset = pos;
	else
		lseek(in_fd, pos, SEEK_SET);
	return (ssize_t)total;
}

static ssize_t sendfile_call(struct shim_sock *s, int out_fd, int in_fd,
			     off_t *offset, size_t count)
{
	return RDMA_CALL_WR(out_fd, s, 0,
			    sendfile_rdma(s, in_fd, offset, count),
			    sendfile(out_fd, in_fd, offset, count));
}

/*
 * sendfile is no cancellation point, but over RDMA it reads the file with
 * pread and waits for room as send does, both cancellation points, while
 * it holds the socket's reference and its bounce buffer: so cancellation
 * is off for the whole call, as the kernel's sendfile never acts on one.
 */
static __attribute__((noinline)) ssize_t sendfile_slow(struct shim_sock *s,
						       int out_fd, int in_fd,
						       off_t *offset,
						       size_t count)
{
	ssize_t r;
	int cs, e;

	shim_nocancel_enter(&cs);
	r = sendfile_call(s, out_fd, in_fd, offset, count);
	e = errno;
	shim_nocancel_leave(cs);
	errno = e;
	return r;
}

SHIM_EXPORT ssize_t sendfile(int out_fd, int in_fd, off_t *offset, size_t count)
{
	struct shim_sock *s = shim_fd_get(out_fd);

	if (likely(!IS_RDMA(s)))
		return REAL(sendfile)(out_fd, in_fd, offset, count);
	return sendfile_slow(s, out_fd, in_fd, offset, count);
}

/* off64_t is off_t here (LP64): sendfile64's RDMA path is sendfile's, its
 * fallback through sendfile (the same kernel call) */
_Static_assert(sizeof(off_t) == sizeof(off64_t), "LP64 only");

SHIM_EXPORT ssize_t sendfile64(int out_fd, int in_fd, off64_t *offset,
			       size_t count)
{
	struct shim_sock *s = shim_fd_get(out_fd);

	if (likely(!IS_RDMA(s)))
		return REAL(sendfile64)(out_fd, in_fd, offset, count);
	return sendfile_slow(s, out_fd, in_fd, (off_t *)offset, count);
}

/*
 * A data call's sock was not (or no longer) RDMA: a connect under way, a
 * connect that failed, or anything else.  The call's answer (-1, errno
 * set), or 0: make the call again from the fd (a close came first, or the
 * connect ended meanwhile).  Out of line: the wrappers' kernel-fd path
 * stays a tail call.
 */
static __attribute__((noinline)) ssize_t
not_rdma(int fd, struct shim_sock *s, bool dontwait, const struct timeval *tmo)
{
	ssize_t r;

	if (!shim_sock_tryget(
		fd, s, SHIM_KINDS_WITH(SHIM_KF_SETTLING | SHIM_KF_FAILED)))
		return 0;
	if (shim_kind_is(s, SHIM_KF_FAILED))
		r = -shim_sock_take_failure(s);
	else
		r = shim_connecting_io(s, dontwait, tmo);
	shim_sock_put(s);
	return r ? shim_ret(r) : 0;
}
