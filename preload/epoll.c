/* SPDX-License-Identifier: MIT */
/*
 * The epoll family over sets that mix kernel fds and RDMA fds.
 *
 * Kernel fds stay in the kernel's epoll set untouched.  A listener's
 * rsocket accept queue is a kernel fd too: it is registered in the kernel
 * set beside the listening fd, with the same events and data.  Only
 * connected RDMA fds need emulation: they live in a registry of the epoll
 * fd (struct ep_set), and epoll_wait is
 *
 *   1. readiness of the registry's rsockets (rpoll, timeout 0), filtered by
 *      level/edge/oneshot rules;
 *   2. the kernel set's ready events (epoll_wait, timeout 0);
 *   3. if nothing and the caller may wait: rpoll(-1) over the epoll fd
 *      itself, the set's wake eventfd and the registry's rsockets — one
 *      sleep that ends when any of them turns ready — then back to 1.
 *
 * Edge-triggered emulation: a registration remembers the bits it reported;
 * a bit is reported again only after it was seen absent, or after the
 * program read (EPOLLIN) or hit a full send queue (EPOLLOUT) on the fd
 * (sock->rd_gen / wr_gen).  A program that reads until EAGAIN, as ET
 * requires, sees exactly one event per readiness edge.
 */
#include "shim.h"
#include "epoll_int.h"
#include "glue.h"
#include "log.h"
#include "sock.h"
#include "io_int.h"

#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <time.h>

struct ep_reg {
	int fd;
	struct shim_sock *s; /* no reference: purged when its last fd goes */
	uint32_t events;     /* the program's mask, with EPOLLET/ONESHOT */
	epoll_data_t data;
	uint32_t reported;   /* ET: bits already reported */
	unsigned int rd_seen, wr_seen;
	bool disabled;	     /* EPOLLONESHOT fired */
	bool in_kernel;	     /* still a kernel registration (not yet RDMA) */
	struct ep_reg *next;
};

struct ep_set {
	int epfd;
	int wake_fd; /* eventfd: epoll_ctl kicks waiters to re-snapshot */
	pthread_mutex_t lock;
	struct ep_reg *regs;
	struct ep_set *next_set; /* all sets, for shim_epoll_sock_changed */
};

static pthread_mutex_t sets_lock = PTHREAD_MUTEX_INITIALIZER;
static struct ep_set *all_sets;

#define EP_RDMA_BITS (EPOLLIN | EPOLLOUT | EPOLLRDNORM | EPOLLWRNORM | EPOLLRDHUP)

static void kick(struct ep_set *set)
{
	uint64_t one = 1;

	(void)REAL(write)(set->wake_fd, &one, sizeof(one));
}

/* Find or make the registry of epfd.  Registering the wake eventfd with no
 * events validates epfd exactly as the kernel would (EBADF, EINVAL...). */
static int get_set(int epfd, struct ep_set **out)
{
	struct shim_sock *es = shim_fd_get(epfd);
	struct epoll_event none = { 0 };
	struct ep_set *set;

	if (es && es->kind == SHIM_SK_EPOLL) {
		*out = es->epset;
		return 0;
	}
	if (es)
		return -EINVAL; /* a socket is no epoll fd */
	/* A closed epfd is EBADF, and must be found so before the eventfd
	 * below can take its number. */
	if (REAL(fcntl)(epfd, F_GETFD) < 0)
		return -errno;
	set = calloc(1, sizeof(*set));
	es = shim_sock_new(SHIM_SK_EPOLL, 0);
	if (!set || !es) {
		free(set);
		free(es);
		return -ENOMEM;
	}
	set->epfd = epfd;
	pthread_mutex_init(&set->lock, NULL);
	set->wake_fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
	if (set->wake_fd < 0 ||
	    REAL(epoll_ctl)(epfd, EPOLL_CTL_ADD, set->wake_fd, &none) < 0) {
		int e = errno;

		if (set->wake_fd >= 0)
			REAL(close)(set->wake_fd);
		free(set);
		free(es);
		return -e;
	}
	es->epset = set;
	pthread_mutex_lock(&sets_lock);
	set->next_set = all_sets;
	all_sets = set;
	pthread_mutex_unlock(&sets_lock);
	shim_fd_install(epfd, es);
	*out = set;
	return 0;
}

void shim_epoll_free(struct ep_set *set)
{
	struct ep_set **pp;
	struct ep_reg *r, *n;

	pthread_mutex_lock(&sets_lock);
	for (pp = &all_sets; *pp; pp = &(*pp)->next_set)
		if (*pp == set) {
			*pp = set->next_set;
			break;
		}
	pthread_mutex_unlock(&sets_lock);
	for (r = set->regs; r; r = n) {
		n = r->next;
		__atomic_sub_fetch(&r->s->ep_regs, 1, __ATOMIC_RELAXED);
		free(r);
	}
	REAL(close)(set->wake_fd);
	pthread_mutex_destroy(&set->lock);
	free(set);
}

static struct ep_reg **find_reg(struct ep_set *set, int fd)
{
	struct ep_reg **pp;

	for (pp = &set->regs; *pp; pp = &(*pp)->next)
		if ((*pp)->fd == fd)
			return pp;
	return NULL;
}

static void for_each_reg_of(struct shim_sock *s,
			    void (*fn)(struct ep_set *, struct ep_reg **))
{
	struct ep_set *set;

	pthread_mutex_lock(&sets_lock);
	for (set = all_sets; set; set = set->next_set) {
		struct ep_reg **pp = &set->regs;

		pthread_mutex_lock(&set->lock);
		while (*pp) {
			struct ep_reg *r = *pp;

			if (r->s == s)
				fn(set, pp);
			if (*pp == r)
				pp = &r->next;
		}
		pthread_mutex_unlock(&set->lock);
	}
	pthread_mutex_unlock(&sets_lock);
}

static void move_to_rdma(struct ep_set *set, struct ep_reg **pp)
{
	struct ep_reg *r = *pp;

	if (r->in_kernel) {
		REAL(epoll_ctl)(set->epfd, EPOLL_CTL_DEL, r->fd, NULL);
		r->in_kernel = false;
		r->reported = 0;
		kick(set);
	}
}

void shim_epoll_sock_changed(struct shim_sock *s)
{
	if (__atomic_load_n(&s->ep_regs, __ATOMIC_ACQUIRE))
		for_each_reg_of(s, move_to_rdma);
}

static void kick_reg(struct ep_set *set, struct ep_reg **pp)
{
	(void)pp;
	kick(set);
}

void shim_epoll_kick_parked(struct shim_sock *s)
{
	if (__atomic_exchange_n(&s->ep_parked, 0, __ATOMIC_SEQ_CST))
		for_each_reg_of(s, kick_reg);
}

static void drop_reg(struct ep_set *set, struct ep_reg **pp)
{
	struct ep_reg *r = *pp;

	*pp = r->next;
	__atomic_sub_fetch(&r->s->ep_regs, 1, __ATOMIC_RELAXED);
	free(r);
	kick(set);
}

void shim_epoll_forget(struct shim_sock *s)
{
	for_each_reg_of(s, drop_reg);
}

/* A listener: the kernel listening fd plus the rsocket's accept queue,
 * both in the kernel set with the program's event and data. */
static int ctl_listener(int epfd, int op, int fd, struct shim_sock *s,
			struct epoll_event *ev)
{
	int qfd = sg_listen_pollfd(s->rs);
	int r = REAL(epoll_ctl)(epfd, op, fd, ev);

	if (r == 0 && qfd >= 0)
		REAL(epoll_ctl)(epfd, op, qfd, ev);
	return r;
}

static int ctl_slow(int epfd, int op, int fd, struct shim_sock *s,
		    struct epoll_event *ev)
{
	struct ep_set *set = NULL;
	struct ep_reg **pp, *r;
	int err = 0;

	if (epfd == fd)
		return -EINVAL;
	if ((op == EPOLL_CTL_ADD || op == EPOLL_CTL_MOD) && !ev)
		return -EFAULT;
	if (op != EPOLL_CTL_ADD && op != EPOLL_CTL_MOD && op != EPOLL_CTL_DEL)
		return -EINVAL;
	err = get_set(epfd, &set);
	if (!err && op == EPOLL_CTL_MOD && (ev->events & EPOLLEXCLUSIVE))
		err = -EINVAL; /* as the kernel: EXCLUSIVE is for ADD only */
	if (err)
		return err;
	pthread_mutex_lock(&set->lock);
	pp = find_reg(set, fd);
	if (op == EPOLL_CTL_MOD && pp && ((*pp)->events & EPOLLEXCLUSIVE)) {
		pthread_mutex_unlock(&set->lock);
		return -EINVAL;
	}
	switch (op) {
	case EPOLL_CTL_ADD:
		if (pp) {
			err = -EEXIST;
			break;
		}
		r = calloc(1, sizeof(*r));
		if (!r) {
			err = -ENOMEM;
			break;
		}
		if (s->kind == SHIM_SK_TCP) {
			/* Not RDMA (yet): the kernel watches it until
			 * connect decides. */
			if (REAL(epoll_ctl)(epfd, op, fd, ev) < 0) {
				err = -errno;
				free(r);
				break;
			}
			r->in_kernel = true;
		}
		r->fd = fd;
		r->s = s;
		r->events = ev->events;
		r->data = ev->data;
		r->rd_seen = __atomic_load_n(&s->rd_gen, __ATOMIC_RELAXED);
		r->wr_seen = __atomic_load_n(&s->wr_gen, __ATOMIC_RELAXED);
		__atomic_add_fetch(&s->ep_regs, 1, __ATOMIC_RELAXED);
		r->next = set->regs;
		set->regs = r;
		break;
	case EPOLL_CTL_MOD:
		if (!pp) {
			err = -ENOENT;
			break;
		}
		r = *pp;
		if (r->in_kernel && REAL(epoll_ctl)(epfd, op, fd, ev) < 0) {
			err = -errno;
			break;
		}
		r->events = ev->events;
		r->data = ev->data;
		r->disabled = false;
		r->reported = 0; /* a MOD re-arms, as in the kernel */
		break;
	case EPOLL_CTL_DEL:
		if (!pp) {
			err = -ENOENT;
			break;
		}
		if ((*pp)->in_kernel)
			REAL(epoll_ctl)(epfd, op, fd, NULL);
		r = *pp;
		*pp = r->next;
		__atomic_sub_fetch(&s->ep_regs, 1, __ATOMIC_RELAXED);
		free(r);
		break;
	}
	pthread_mutex_unlock(&set->lock);
	shim_dbg("epoll_ctl(%d, %s, %d, 0x%x): %s", epfd,
		 op == EPOLL_CTL_ADD ? "ADD" : op == EPOLL_CTL_MOD ? "MOD" : "DEL",
		 fd, ev ? ev->events : 0, err ? strerror(-err) : "ok");
	if (!err)
		kick(set);
	return err;
}

SHIM_EXPORT int epoll_ctl(int epfd, int op, int fd, struct epoll_event *ev)
{
	struct shim_sock *s = shim_fd_get(fd);

	if (likely(!s || s->kind == SHIM_SK_INTERNAL || s->kind == SHIM_SK_EPOLL))
		return REAL(epoll_ctl)(epfd, op, fd, ev);
	if (s->kind == SHIM_SK_LISTEN)
		return ctl_listener(epfd, op, fd, s, ev);
	return (int)shim_ret(ctl_slow(epfd, op, fd, s, ev));
}

SHIM_EXPORT int epoll_create(int size)
{
	shim_ensure_init();
	return REAL(epoll_create)(size);
}

SHIM_EXPORT int epoll_create1(int flags)
{
	shim_ensure_init();
	return REAL(epoll_create1)(flags);
}

/* rpoll revents of an rsocket -> epoll bits the kernel would show. */
static uint32_t rdma_bits(struct shim_sock *s, short rev, uint32_t want)
{
	return (uint32_t)shim_rdma_revents(s, rev, (short)(want & 0xffff)) |
	       ((want & EPOLLRDHUP) && shim_rdma_peer_eof(s, rev) ? EPOLLRDHUP : 0);
}

/* Refresh a registration's ET memory from the sock's I/O generations. */
static void rearm(struct ep_reg *r)
{
	unsigned int rd = __atomic_load_n(&r->s->rd_gen, __ATOMIC_SEQ_CST);
	unsigned int wr = __atomic_load_n(&r->s->wr_gen, __ATOMIC_SEQ_CST);

	if (rd != r->rd_seen) {
		r->reported &= ~(uint32_t)(EPOLLIN | EPOLLRDNORM | EPOLLRDHUP);
		r->rd_seen = rd;
	}
	if (wr != r->wr_seen) {
		r->reported &= ~(uint32_t)(EPOLLOUT | EPOLLWRNORM);
		r->wr_seen = wr;
	}
}

/* Which bits may still produce an event (what a blocking wait watches). */
static uint32_t waitable(const struct ep_reg *r)
{
	uint32_t want = r->events & EP_RDMA_BITS;

	if (r->disabled || r->in_kernel)
		return 0;
	if (r->events & EPOLLET)
		want &= ~r->reported;
	return want;
}

/* Step 1: events of the registry's RDMA fds, at most max. */
static int collect(struct ep_set *set, struct epoll_event *evs, int max)
{
	struct pollfd stack[64], *p = stack;
	struct ep_reg *r;
	int n = 0, k = 0, out = 0;

	pthread_mutex_lock(&set->lock);
	for (r = set->regs; r; r = r->next)
		n++;
	if (!n) {
		pthread_mutex_unlock(&set->lock);
		return 0;
	}
	if (n > (int)ARRAY_SIZE(stack)) {
		p = malloc((size_t)n * sizeof(*p));
		if (!p) {
			pthread_mutex_unlock(&set->lock);
			return -ENOMEM;
		}
	}
	for (r = set->regs; r; r = r->next) {
		rearm(r);
		p[k].fd = r->disabled || r->in_kernel ? -1 : r->s->rs;
		p[k].events = (short)((r->events & EP_RDMA_BITS) | POLLIN | POLLOUT);
		p[k].revents = 0;
		k++;
	}
	if (sg_poll(p, (nfds_t)k, 0) > 0) {
		k = 0;
		for (r = set->regs; r && out < max; r = r->next, k++) {
			uint32_t cur;

			if (p[k].fd < 0)
				continue;
			if (!p[k].revents) {
				r->reported = 0;
				continue;
			}
			cur = rdma_bits(r->s, p[k].revents, r->events) &
			      (r->events | EPOLLERR | EPOLLHUP);
			r->reported &= cur; /* gone bits count as new later */
			if (!cur)
				continue;
			if (r->events & EPOLLET) {
				if (!(cur & ~r->reported))
					continue;
				r->reported = cur;
			}
			evs[out].events = cur;
			evs[out].data = r->data;
			out++;
			if (r->events & EPOLLONESHOT)
				r->disabled = true;
		}
	} else {
		/* nothing ready: every bit is absent, so every bit re-arms */
		for (r = set->regs; r; r = r->next)
			r->reported = 0;
	}
	if (p != stack)
		free(p);
	pthread_mutex_unlock(&set->lock);
	return out;
}

/* Step 3: sleep until the kernel set, a kick or a watched rsocket is ready.
 * Holds a reference on each watched sock so close() can't free it. */
static int sleep_on(struct ep_set *set, int timeout_ms, const sigset_t *mask)
{
	struct shim_sock *held_stack[64], **held = held_stack;
	struct pollfd stack[66], *p = stack;
	struct ep_reg *r;
	sigset_t old;
	int n = 2, k, ret;
	uint64_t drain;

	pthread_mutex_lock(&set->lock);
	for (r = set->regs; r; r = r->next)
		n++;
	if (n > (int)ARRAY_SIZE(stack)) {
		p = malloc((size_t)n * sizeof(*p));
		held = malloc((size_t)n * sizeof(*held));
		if (!p || !held) {
			pthread_mutex_unlock(&set->lock);
			free(p == stack ? NULL : p);
			free(held == held_stack ? NULL : held);
			return -ENOMEM;
		}
	}
	p[0] = (struct pollfd){ .fd = set->epfd, .events = POLLIN };
	p[1] = (struct pollfd){ .fd = set->wake_fd, .events = POLLIN };
	k = 2;
	for (r = set->regs; r; r = r->next) {
		uint32_t w;

		/* Park first, then sample the generations: an I/O racing
		 * with us either moves a generation we see, or sees the park
		 * and kicks us (shim_epoll_io). */
		if (!r->in_kernel && !r->disabled)
			__atomic_store_n(&r->s->ep_parked, 1, __ATOMIC_SEQ_CST);
		rearm(r);
		w = waitable(r);
		if (!w)
			continue;
		shim_sock_get(r->s);
		held[k - 2] = r->s;
		p[k++] = (struct pollfd){ .fd = r->s->rs, .events = (short)w };
	}
	pthread_mutex_unlock(&set->lock);
	shim_dbg("epoll %d: sleeping on %d rsocket(s), timeout %d", set->epfd,
		 k - 2, timeout_ms);

	if (mask)
		pthread_sigmask(SIG_SETMASK, mask, &old);
	ret = sg_wait(p, (nfds_t)k, timeout_ms);
	if (mask)
		pthread_sigmask(SIG_SETMASK, &old, NULL);
	if (ret > 0 && p[1].revents)
		(void)REAL(read)(set->wake_fd, &drain, sizeof(drain));
	for (int i = 2; i < k; i++)
		shim_sock_put(held[i - 2]);
	if (p != stack)
		free(p);
	if (held != held_stack)
		free(held);
	return ret;
}

static long mono_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1000L + ts.tv_nsec / 1000000L;
}

static int wait_slow(struct shim_sock *es, struct epoll_event *evs, int max,
		     int timeout, const sigset_t *mask)
{
	struct ep_set *set = es->epset;
	long deadline = timeout > 0 ? mono_ms() + timeout : 0;

	if (max <= 0 || max > (int)(INT_MAX / sizeof(*evs)))
		return -EINVAL;
	for (;;) {
		int n = collect(set, evs, max), k, left = timeout, r;

		if (n < 0)
			return n;
		if (n < max) {
			k = REAL(epoll_wait)(set->epfd, evs + n, max - n, 0);
			if (k < 0 && !n)
				return -errno;
			if (k > 0)
				n += k;
		}
		if (n > 0 || timeout == 0)
			return n;
		if (timeout > 0) {
			left = (int)(deadline - mono_ms());
			if (left <= 0)
				return 0;
		}
		r = sleep_on(set, left, mask);
		if (r < 0)
			return r;
		if (r == 0 && timeout > 0)
			return 0;
	}
}

#define EPOLL_WAIT_BODY(real_call)                                             \
	struct shim_sock *es = shim_fd_get(epfd);                              \
	int r;                                                                 \
	if (likely(!es || es->kind != SHIM_SK_EPOLL || shim_in_lib()))         \
		return real_call;                                              \
	shim_sock_get(es);                                                     \
	r = wait_slow(es, evs, max, timeout, sigmask);                         \
	shim_sock_put(es);                                                     \
	return (int)shim_ret(r)

SHIM_EXPORT int epoll_wait(int epfd, struct epoll_event *evs, int max,
			   int timeout)
{
	const sigset_t *sigmask = NULL;

	EPOLL_WAIT_BODY(REAL(epoll_wait)(epfd, evs, max, timeout));
}

SHIM_EXPORT int epoll_pwait(int epfd, struct epoll_event *evs, int max,
			    int timeout, const sigset_t *sigmask)
{
	EPOLL_WAIT_BODY(REAL(epoll_pwait)(epfd, evs, max, timeout, sigmask));
}

SHIM_EXPORT int epoll_pwait2(int epfd, struct epoll_event *evs, int max,
			     const struct timespec *tmo,
			     const sigset_t *sigmask)
{
	int timeout;

	if (!REAL(epoll_pwait2)) {
		errno = ENOSYS;
		return -1;
	}
	timeout = shim_ts_to_ms(tmo);
	EPOLL_WAIT_BODY(REAL(epoll_pwait2)(epfd, evs, max, tmo, sigmask));
}
