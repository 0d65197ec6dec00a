/* SPDX-License-Identifier: MIT */
/*
 * poll, ppoll, select, pselect and their fortify twins.
 *
 * While no RDMA or listening rsocket exists in the process these are plain
 * libc calls.  Otherwise each call is rewritten: a connected RDMA fd is
 * polled as its rsocket, a listener as its kernel fd plus its rsocket's
 * accept queue, everything else as itself; the waiting is done by rpoll
 * when an rsocket is involved and by the kernel when not.  An epoll fd
 * with RDMA fds in it is readable when the kernel says so or when one of
 * those is ready (epoll.c peeks); poll_epolls() handles such sets.
 */
#include "shim.h"
#include "epoll_int.h"
#include "settle.h"
#include "glue.h"
#include "sock.h"
#include "socket.h"
#include "io_int.h"

#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static inline bool rdma_in_use(void)
{
	return __atomic_load_n(&shim_rdma_socks, __ATOMIC_RELAXED) != 0 &&
	       !shim_in_lib();
}

/* The socks a poll holds, given back when it returns or when its thread
 * is cancelled in the sleep (poll is a cancellation point): else the
 * connections would stay open after their close. */
struct held {
	struct shim_sock **s, **stack;
	struct pollfd *p, *pstack;
	unsigned char *kind, *kstack;
	nfds_t n;
};

static void held_release(void *arg)
{
	struct held *h = arg;

	for (nfds_t i = 0; i < h->n; i++)
		if (h->s[i])
			shim_sock_put(h->s[i]);
	if (h->p != h->pstack)
		free(h->p);
	if (h->s != h->stack)
		free(h->s);
	if (h->kind != h->kstack)
		free(h->kind);
}

/* The sleep of poll_slow over h->p (n entries), or -errno. */
static int wait_holding(struct held *h, nfds_t n, bool rdma, int timeout_ms,
			const struct timespec *tmo, const sigset_t *mask)
{
	int r;

	pthread_cleanup_push(held_release, h);
	if (rdma) {
		r = shim_wait_masked(h->p, n, timeout_ms, mask);
	} else {
		r = REAL(ppoll)(h->p, n, tmo, mask);
		if (r < 0)
			r = -errno;
	}
	pthread_cleanup_pop(0);
	return r;
}

/*
 * The rewritten poll.  Returns like poll() but -errno.  tmo/mask are ppoll's
 * (tmo NULL = infinite); timeout_ms is used for the rpoll path.
 */
static int poll_slow(struct pollfd *fds, nfds_t nfds, int timeout_ms,
		     const struct timespec *tmo, const sigset_t *mask)
{
	struct pollfd stack[64], *p = stack;
	struct shim_sock *held_stack[64], **held = held_stack;
	unsigned char kind_stack[64], *kind = kind_stack;
	struct held h = {
	    .stack = held_stack, .pstack = stack, .kstack = kind_stack};
	nfds_t n = 0, extra = 0, i;
	bool rdma = false;
	int r, count = 0, cs;

	if (nfds > (nfds_t)INT_MAX / 2)
		return -EINVAL;
	for (i = 0; i < nfds; i++) {
		struct shim_sock *s = shim_fd_get(fds[i].fd);

		if (s && shim_kind_is(s, SHIM_KF_DOOR))
			extra++;
	}
	if (nfds + extra > ARRAY_SIZE(stack)) {
		p = malloc((nfds + extra) * sizeof(*p));
		held = malloc(nfds * sizeof(*held));
		kind = malloc(nfds);
		if (!p || !held || !kind) {
			free(p == stack ? NULL : p);
			free(held == held_stack ? NULL : held);
			free(kind == kind_stack ? NULL : kind);
			return -ENOMEM;
		}
	}
	n = nfds;
	/* no cancellation while references are taken (a listener's door
	 * opens in rsockets): only in the sleep, which has the cleanup */
	shim_nocancel_enter(&cs);
	/*
	 * Each entry's kind is read once, here, and kept: another thread
	 * may close an fd and make a listener of its number, or listen() on
	 * it, after the count above (the door's slot then has no room: the
	 * entry is polled as the kernel listener it is), or while this
	 * waits (the results below must read the slots filled here).
	 */
	for (i = 0; i < nfds; i++) {
		struct shim_sock *s = shim_sock_ref(fds[i].fd);

		held[i] = s;
		kind[i] = s ? (unsigned char)shim_kind(s) : 0;
		p[i] = fds[i];
		p[i].revents = 0;
		if (!s)
			continue;
		if (shim_kind_has(kind[i], SHIM_KF_DOOR) && n == nfds + extra)
			kind[i] = 0;
		if (shim_kind_has(kind[i], SHIM_KF_CONN)) {
			p[i].fd = s->rs;
			rdma = true;
		} else if (shim_kind_has(kind[i], SHIM_KF_SETTLING)) {
			p[i].fd = -1; /* nothing is ready while it connects */
		} else if (shim_kind_has(kind[i], SHIM_KF_DOOR)) {
			if (fds[i].events & POLLIN)
				shim_listen_door(s);
			p[n] =
			    (struct pollfd){.fd = shim_listen_qfd(s),
					    .events = fds[i].events & POLLIN};
			n++;
		}
	}
	/* The wait's first look, made here: inside this stretch rsockets'
	 * call needs no cancellation pair of its own (LIB_CALL), and a set
	 * with something ready returns without the sleep's set-up (its
	 * cleanup frame, the busy-poll window's clock read). */
	r = rdma ? sg_poll(p, n, 0) : 0;
	shim_nocancel_leave(cs);
	h.s = held;
	h.p = p;
	h.kind = kind;
	h.n = nfds;
	if (r == 0 && (timeout_ms != 0 || !rdma))
		r = wait_holding(&h, n, rdma, timeout_ms, tmo, mask);
	if (r >= 0) {
		nfds_t x = nfds;

		for (i = 0; i < nfds; i++) {
			short rev = p[i].revents;
			struct shim_sock *s = held[i];

			if (shim_kind_has(kind[i], SHIM_KF_CONN)) {
				short want = fds[i].events;

				rev =
				    (short)(shim_rdma_revents(s, rev, want) |
					    ((want & POLLRDHUP) &&
						     shim_rdma_peer_eof(s, rev)
						 ? POLLRDHUP
						 : 0));
				rev &= (short)(want | POLLERR | POLLHUP |
					       POLLNVAL);
			} else if (shim_kind_has(kind[i], SHIM_KF_DOOR))
				rev |= p[x++].revents;
			fds[i].revents = rev;
			count += rev != 0;
		}
		r = count;
	}
	held_release(&h);
	return r;
}

/* s, held: an epoll fd whose set emulates something. */
static bool is_epoll_emul(const struct shim_sock *s)
{
	return s && shim_kind_is(s, SHIM_KF_EPSET) &&
	       shim_epoll_emulating(s->epset);
}

/* The same for fd, looked up: its set is read under a reference (a
 * close() in another thread frees it with the sock). */
static bool epoll_emul_fd(int fd)
{
	struct shim_sock *s = shim_fd_get(fd);
	bool emul;

	if (!s || !shim_kind_is(s, SHIM_KF_EPSET))
		return false;
	s = shim_sock_ref(fd);
	emul = is_epoll_emul(s);
	if (s)
		shim_sock_put(s);
	return emul;
}

static bool is_ours(int fd)
{
	struct shim_sock *s = shim_fd_get(fd);

	return s && (shim_kind_is(s, SHIM_KF_POLL_SLOW) || epoll_emul_fd(fd));
}

static bool any_ours(const struct pollfd *fds, nfds_t nfds)
{
	for (nfds_t i = 0; i < nfds; i++)
		if (is_ours(fds[i].fd))
			return true;
	return false;
}

/* Add what a sleeper on fds must watch, as poll_slow rewrites it, plus the
 * emulated side of each epoll fd. */
static int watch_fds(const struct pollfd *fds, nfds_t nfds, struct watch *w)
{
	int err = 0;

	for (nfds_t i = 0; i < nfds && !err; i++) {
		struct pollfd q = {.fd = fds[i].fd, .events = fds[i].events};
		struct shim_sock *s = shim_sock_ref(fds[i].fd);
		int kind = s ? shim_kind(s) : 0; /* read once */

		if (shim_kind_has(kind, SHIM_KF_CONN)) {
			q.fd = s->rs;
			err = shim_watch_add(w, q, s, NULL, NULL);
		} else if (shim_kind_has(kind, SHIM_KF_SETTLING)) {
			err = shim_settle_watch(w, s);
		} else {
			err = shim_watch_add(w, q, NULL, NULL, NULL);
			if (!err && shim_kind_has(kind, SHIM_KF_DOOR))
				err = shim_watch_add(
				    w,
				    (struct pollfd){.fd = shim_listen_qfd(s),
						    .events = POLLIN},
				    NULL, NULL, NULL);
			else if (!err && shim_kind_has(kind, SHIM_KF_EPSET) &&
				 shim_epoll_emulating(s->epset))
				err = shim_epoll_watch(s->epset, w);
		}
		if (s)
			shim_sock_put(s);
	}
	return err;
}

/* One non-blocking look at fds, the epoll fds' emulated sides included. */
static int poll_now(struct pollfd *fds, nfds_t nfds)
{
	struct timespec zero = {0, 0};
	int r = poll_slow(fds, nfds, 0, &zero, NULL);

	if (r < 0)
		return r;
	for (nfds_t i = 0; i < nfds; i++) {
		struct shim_sock *s = shim_sock_ref(fds[i].fd);

		if (is_epoll_emul(s) && (fds[i].events & POLLIN) &&
		    !(fds[i].revents & POLLIN) && shim_epoll_peek(s->epset)) {
			r += !fds[i].revents;
			fds[i].revents |= POLLIN;
		}
		if (s)
			shim_sock_put(s);
	}
	return r;
}

static void watch_release(void *w)
{
	shim_watch_done(w);
}

/* watch_fds with cancellation off: it takes references, and rsockets'
 * looks at the connections are cancellation points (the sleep after it
 * has the cleanup). */
static int watch_fds_uncancelled(const struct pollfd *fds, nfds_t nfds,
				 struct watch *w)
{
	int r, cs;

	pthread_setcancelstate(PTHREAD_CANCEL_DISABLE, &cs);
	r = watch_fds(fds, nfds, w);
	pthread_setcancelstate(cs, NULL);
	return r;
}

static int watch_wait(struct watch *w, int timeout_ms, const sigset_t *mask)
{
	int r;

	pthread_cleanup_push(watch_release, w);
	r = shim_watch_wait(w, timeout_ms, mask);
	pthread_cleanup_pop(0);
	return r;
}

/* poll over a set holding an epoll fd with RDMA fds in it: look, sleep on
 * everything that can change the answer, look again.  (A thread cancelled
 * in the sleep gives back what it watched.) */
static int poll_epolls(struct pollfd *fds, nfds_t nfds, int timeout_ms,
		       const sigset_t *mask)
{
	int64_t deadline = timeout_ms > 0 ? shim_now_ms() + timeout_ms : 0;

	for (;;) {
		struct watch w = {0};
		int r = poll_now(fds, nfds), left = timeout_ms;

		if (r != 0 || timeout_ms == 0)
			return r;
		if (shim_sig_waiting())
			return -EINTR; /* a handler that woke the last sleep */
		if (timeout_ms > 0) {
			left = (int)(deadline - shim_now_ms());
			if (left <= 0)
				return 0;
		}
		r = watch_fds_uncancelled(fds, nfds, &w);
		if (!r)
			r = watch_wait(&w, left, mask);
		shim_watch_done(&w);
		if (r < 0)
			return r;
	}
}

/* Does a sleeper on fds need poll_epolls' watch: an epoll fd with RDMA
 * fds in it, or a connect under way (its end shows in no fd of its own)? */
static bool any_epoll_emul(const struct pollfd *fds, nfds_t nfds)
{
	for (nfds_t i = 0; i < nfds; i++) {
		struct shim_sock *s = shim_fd_get(fds[i].fd);

		if (s && (shim_kind_is(s, SHIM_KF_SETTLING) ||
			  epoll_emul_fd(fds[i].fd)))
			return true;
	}
	return false;
}

static int poll_pick(struct pollfd *fds, nfds_t nfds, int timeout_ms,
		     const struct timespec *tmo, const sigset_t *mask)
{
	if (any_epoll_emul(fds, nfds))
		return poll_epolls(fds, nfds, timeout_ms, mask);
	return poll_slow(fds, nfds, timeout_ms, tmo, mask);
}

/* A handler of a signal that ended the sleep runs here, once the
 * references to the polled sockets are given back (base/sigdefer.c); poll
 * and select are never restarted.  What a ppoll/pselect mask blocks stays
 * blocked for the whole call, not only in its sleeps, as in the kernel
 * (see epoll.c, wait_slow); cancelled, the wait's mask stays
 * (shim_wait_mask_cancelled). */
static int poll_any(struct pollfd *fds, nfds_t nfds, int timeout_ms,
		    const struct timespec *tmo, const sigset_t *mask)
{
	struct shim_wait_mask wm;
	bool held;
	int r;

	/* a cancellation point: a cancel pending acts as the call starts,
	 * whether or not an fd is ready, as glibc's */
	shim_testcancel();
	held = shim_wait_mask_begin(&wm, mask);

	shim_sig_edge_enter();
	if (held) { /* the cleanup's frame only for a masked wait */
		pthread_cleanup_push(shim_wait_mask_cancelled, &wm);
		r = poll_pick(fds, nfds, timeout_ms, tmo, mask);
		pthread_cleanup_pop(0);
		pthread_sigmask(SIG_SETMASK, &wm.old, NULL);
	} else {
		r = poll_pick(fds, nfds, timeout_ms, tmo, mask);
	}
	if (shim_sig_edge_leave())
		shim_sig_run();
	return r;
}

/*
 * librdmacm's own poll, with the caller's wait mask if one is set
 * (shim_lib_sigmask) -- on rpoll's sleep only: its zero-timeout looks at
 * plain fds ignore what poll returns, so a signal delivered there would
 * be lost, not an EINTR.
 */
static int lib_poll(struct pollfd *fds, nfds_t nfds, int timeout)
{
	struct timespec ts;

	if (unlikely(sg_arming))
		return sg_arm_poll(fds, nfds);
	if (likely(!shim_lib_sigmask) || timeout == 0)
		return REAL(poll)(fds, nfds, timeout);
	ts.tv_sec = timeout / 1000;
	ts.tv_nsec = (long)(timeout % 1000) * 1000000L;
	return REAL(ppoll)(fds, nfds, timeout < 0 ? NULL : &ts,
			   shim_lib_sigmask);
}

SHIM_EXPORT int poll(struct pollfd *fds, nfds_t nfds, int timeout)
{
	struct timespec ts, *tp = NULL;

	shim_ensure_init();
	if (unlikely(shim_in_lib()))
		return lib_poll(fds, nfds, timeout);
	if (likely(!rdma_in_use()) || !any_ours(fds, nfds))
		return REAL(poll)(fds, nfds, timeout);
	if (timeout >= 0) {
		ts.tv_sec = timeout / 1000;
		ts.tv_nsec = (long)(timeout % 1000) * 1000000L;
		tp = &ts;
	}
	return (int)shim_ret(poll_any(fds, nfds, timeout, tp, NULL));
}

SHIM_EXPORT int __poll_chk(struct pollfd *fds, nfds_t nfds, int timeout,
			   size_t fdslen)
{
	if (fdslen / sizeof(*fds) < nfds)
		__chk_fail();
	return poll(fds, nfds, timeout);
}

SHIM_EXPORT int ppoll(struct pollfd *fds, nfds_t nfds,
		      const struct timespec *tmo, const sigset_t *sigmask)
{
	shim_ensure_init();
	if (likely(!rdma_in_use()) || !any_ours(fds, nfds))
		return REAL(ppoll)(fds, nfds, tmo, sigmask);
	if (!shim_ts_valid(tmo)) {
		errno = EINVAL; /* before any fd is looked at, as the kernel */
		return -1;
	}
	return (int)shim_ret(
	    poll_any(fds, nfds, shim_ts_to_ms(tmo), tmo, sigmask));
}

SHIM_EXPORT int __ppoll_chk(struct pollfd *fds, nfds_t nfds,
			    const struct timespec *tmo, const sigset_t *sigmask,
			    size_t fdslen)
{
	if (fdslen / sizeof(*fds) < nfds)
		__chk_fail();
	return ppoll(fds, nfds, tmo, sigmask);
}

/* poll_any over a set select_slow allocated: cancelled in the call (a
 * pending cancel acts as it starts), the set goes with the cleanup. */
static int poll_freeing(struct pollfd *p, int n, const struct timespec *tmo,
			const sigset_t *mask)
{
	int ret;

	pthread_cleanup_push(free, p);
	ret = poll_any(p, (nfds_t)n, shim_ts_to_ms(tmo), tmo, mask);
	pthread_cleanup_pop(0);
	return ret;
}

/* select on top of poll_slow: only when one of the fds is ours. */
static int select_slow(int nfds, fd_set *r, fd_set *w, fd_set *e,
		       const struct timespec *tmo, const sigset_t *mask,
		       bool *handled)
{
	struct pollfd stack[64], *p = stack;
	int n = 0, ret, count = 0;
	bool ours = false;

	*handled = false;
	if (nfds < 0 || nfds > FD_SETSIZE)
		return 0;
	for (int fd = 0; fd < nfds; fd++) {
		short ev = 0;

		if (r && FD_ISSET(fd, r))
			ev |= POLLIN;
		if (w && FD_ISSET(fd, w))
			ev |= POLLOUT;
		if (e && FD_ISSET(fd, e))
			ev |= POLLPRI;
		if (!ev)
			continue;
		if (n == (int)ARRAY_SIZE(stack) && p == stack) {
			p = malloc(FD_SETSIZE * sizeof(*p));
			if (!p)
				return 0;
			memcpy(p, stack, sizeof(stack));
		}
		p[n++] = (struct pollfd){.fd = fd, .events = ev};
		ours |= is_ours(fd);
	}
	if (!ours)
		goto out;
	*handled = true;
	if (p != stack)
		ret = poll_freeing(p, n, tmo, mask);
	else
		ret = poll_any(p, (nfds_t)n, shim_ts_to_ms(tmo), tmo, mask);
	if (ret < 0) {
		count = ret;
		goto out;
	}
	/* an fd that is not open: EBADF, the sets as they were */
	for (int i = 0; i < n; i++) {
		if (p[i].revents & POLLNVAL) {
			count = -EBADF;
			goto out;
		}
	}
	for (int i = 0; i < n; i++) {
		short rev = p[i].revents;
		int fd = p[i].fd;

		/* select's view: an error or hang-up makes a read ready */
		if (r && FD_ISSET(fd, r) &&
		    !(rev & (POLLIN | POLLHUP | POLLERR)))
			FD_CLR(fd, r);
		if (w && FD_ISSET(fd, w) && !(rev & (POLLOUT | POLLERR)))
			FD_CLR(fd, w);
		if (e && FD_ISSET(fd, e) && !(rev & POLLPRI))
			FD_CLR(fd, e);
		count += (r && FD_ISSET(fd, r)) + (w && FD_ISSET(fd, w)) +
			 (e && FD_ISSET(fd, e));
	}
out:
	if (p != stack)
		free(p);
	return count;
}

/* Linux's select writes the time not slept back into the timeval. */
static void time_left(struct timeval *tmo, int64_t t0_us)
{
	long long left_us;

	left_us = (long long)tmo->tv_sec * 1000000 + tmo->tv_usec -
		  (shim_now_us() - t0_us);
	if (left_us < 0)
		left_us = 0;
	tmo->tv_sec = (time_t)(left_us / 1000000);
	tmo->tv_usec = (suseconds_t)(left_us % 1000000);
}

SHIM_EXPORT int select(int nfds, fd_set *__restrict r, fd_set *__restrict w,
		       fd_set *__restrict e, struct timeval *__restrict tmo)
{
	struct timespec ts;
	int64_t t0 = 0;
	bool handled;
	int ret;

	shim_ensure_init();
	if (likely(!rdma_in_use()))
		return REAL(select)(nfds, r, w, e, tmo);
	if (tmo) {
		/* glibc's select: the microseconds taken as 32 bits,
		 * negative parts are EINVAL, a microsecond count of a second
		 * or more carries into the seconds (as the old select system
		 * call did) */
		int32_t us = (int32_t)tmo->tv_usec;

		if (tmo->tv_sec < 0 || us < 0) {
			errno = EINVAL;
			return -1;
		}
		ts.tv_sec = us / 1000000 > LONG_MAX - tmo->tv_sec
				? LONG_MAX
				: tmo->tv_sec + us / 1000000;
		ts.tv_nsec = (us % 1000000) * 1000L;
		t0 = shim_now_us();
	}
	ret = select_slow(nfds, r, w, e, tmo ? &ts : NULL, NULL, &handled);
	if (!handled)
		return REAL(select)(nfds, r, w, e, tmo);
	if (tmo)
		time_left(tmo, t0);
	return (int)shim_ret(ret);
}

SHIM_EXPORT int pselect(int nfds, fd_set *__restrict r, fd_set *__restrict w,
			fd_set *__restrict e,
			const struct timespec *__restrict tmo,
			const sigset_t *__restrict sigmask)
{
	bool handled;
	int ret;

	shim_ensure_init();
	if (likely(!rdma_in_use()))
		return REAL(pselect)(nfds, r, w, e, tmo, sigmask);
	if (!shim_ts_valid(tmo)) {
		errno = EINVAL; /* the kernel's first check */
		return -1;
	}
	ret = select_slow(nfds, r, w, e, tmo, sigmask, &handled);
	if (!handled)
		return REAL(pselect)(nfds, r, w, e, tmo, sigmask);
	return (int)shim_ret(ret);
}
