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
 *   1. readiness of the registry's candidates -- the rsockets that may be
 *      ready (rpoll, timeout 0) -- filtered by level/edge/oneshot rules;
 *   2. the kernel set's ready events (epoll_wait, timeout 0);
 *   3. if nothing and the caller may wait: arm each candidate's connection
 *      and let the kernel watch it (arm_locked: those armed leave the
 *      candidates), then sleep on the epoll fd itself, the set's wake
 *      eventfd and chan_ep, the epoll set of the connections' completion
 *      channels -- then back to 1, with the connections that chan_ep says
 *      changed back among the candidates (drain_chan).
 *
 * So a wait costs what is ready, not what is registered: an idle
 * connection is looked at only when something happened on it.
 *
 * 1 and 2 take turns within maxevents, fairly as the kernel's ready list
 * goes round (an fd it reports goes to its tail): a candidate that gives an
 * event goes to the tail, a turn of 1 visits each candidate once over as
 * many calls as it takes, and then the kernel's ready events have their
 * turn (gather).
 *
 * Edge-triggered emulation: a registration remembers the bits it reported;
 * a bit is reported again only after it was seen absent, or on a new edge:
 *
 *   - EPOLLOUT: the program hit a full send queue (sock->wr_gen);
 *   - EPOLLIN: as in the kernel, once per arrival of new data (or of the
 *     peer's EOF) while the program has not read.  rsockets has no "new
 *     data" signal, so bytes are counted: arrived = consumed
 *     (sock->rx_bytes) + queued now (a peek of at most 16 KiB) + 1 at EOF,
 *     noted at each report; more later is a new edge (shim_rdma_arrived).
 *     A read re-arms it (sock->rd_gen), as before counting: the peer's FIN
 *     behind unread data shows nowhere in rsockets, so a read that leaves
 *     data behind is followed by one more event (the kernel gives it only
 *     if new data or the FIN came); an extra event at worst, never a lost
 *     one.  With more than 16 KiB queued the peek is of all of it (a
 *     copy, at most the receive buffer), so the count stays exact and every
 *     arrival is an edge, read or not.  A report on a count a read ran
 *     across (another thread's) is not remembered: the next look reports
 *     again -- again one extra event at worst.  Only an ET EPOLLIN that
 *     is readable pays a peek, once per report or re-check; LT and kernel
 *     fds pay nothing.
 *
 * A sleeper leaves reported ET bits out of its rpoll (the fd would wake it
 * at once); for EPOLLIN with an exact count it looks again after 1 ms,
 * doubling to 50 ms while nothing comes (shim_watch_wait), since new data
 * behind unread data shows no readiness change.  A read by another thread
 * wakes a parked sleeper (sock->ep_parked) to look again at once.
 * The peer's SHUT_WR behind data the program has not touched since the
 * last event is not seen (rsockets shows it as readability only): no event
 * for it until the program reads.
 *
 * Two kinds of kernel registration carry a marker (the ep_reg's address)
 * instead of the program's data, and are mapped back by translate(): a
 * listener (its fd and its accept-queue fd: one event, as the kernel gives
 * for one fd) and an epoll fd nested in this one (its kernel side; its RDMA
 * side is computed by peeking at its registry).  An epoll fd with RDMA
 * registrations is also pollable by poll/select (shim_epoll_peek/_watch).
 */
#include "shim.h"
#include "epoll_int.h"
#include "settle.h"
#include "epfilter.h"
#include "glue.h"
#include "log.h"
#include "sock.h"
#include "socket.h"
#include "io_int.h"

#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/syscall.h>
#include <time.h>

struct ep_set {
	/*
	 * The number the set's kernel calls use (read with kfd()): the
	 * program's epoll fd until the set gets its first registration of
	 * ours, then own_fd, the shim's private duplicate of it.  A waiter
	 * makes several kernel calls per wait, and the program may close its
	 * number meanwhile and reuse it for a new file: the kernel's waiter
	 * holds the epoll file it entered with, and so must ours.
	 */
	int epfd;
	int own_fd;  /* the private duplicate, or -1 */
	int wake_fd; /* eventfd: epoll_ctl kicks waiters to re-snapshot */
	/* The epoll sock whose registry this is: a sleeper watching the
	 * wake eventfd holds it, so a close() of the epoll fd meanwhile
	 * frees neither the set nor the eventfd under the sleeper. */
	struct shim_sock *owner;
	pthread_mutex_t lock;
	struct ep_reg *regs;
	struct ep_reg *grave; /* unlinked marked registrations, see reap */
	int nemul;	      /* atomic: RDMA and nested registrations */
	int nmarked;	      /* marked registrations (under lock) */
	int direct_waiters;   /* atomic: threads asleep in the kernel's wait */
	unsigned int stamp;   /* per collect */
	/*
	 * O(ready): the emulated registrations that may be ready (cand, a
	 * list in visiting order), and an epoll set of the kernel fds that
	 * turn readable when an RDMA connection changes (chan_ep: each
	 * connection's completion channel, rdma_cm duplicate and bell, edge-
	 * triggered, data: the ep_reg, CM_TAG for the duplicate).  See
	 * arm_locked.  -1: none (EMFILE): every registration stays a
	 * candidate, and sleepers watch the rsockets themselves.
	 */
	struct ep_reg *cand, *cand_tail;
	int chan_ep;
	/*
	 * Fairness (gather): turns alternate between a pass over the
	 * candidates, in which a registration that gives an event goes to
	 * the list's tail (as the kernel's ready list does), and one over the
	 * kernel's ready list (kturn), which the kernel rotates itself.  A
	 * candidates' turn visits each once (ep_reg.turn == turn: visited),
	 * over as many calls as maxevents makes it take.  A
	 * kernel turn gives as many events as the kernel had ready when last
	 * seen whole (kready: a fetch that got fewer than asked; -1 unknown),
	 * counted in kgiven; without that number it ends when an event comes
	 * back that the turn already gave (kseen, a bitmap of hashed epoll
	 * data): the kernel's list went round.
	 */
	bool kturn;
	unsigned int turn;
	int kready, kgiven;
	uint64_t kseen[4];
	struct ep_set *next_set; /* all sets, for ep_on_sock_changed */
};

/* Kernel data of the wake eventfd: never a valid ep_reg address. */
#define WAKE_MARK(set) ((uint64_t)(uintptr_t) & (set)->wake_fd)
/* The accept queue of a listener: its reg's address with bit 0 set. */
#define QFD_TAG 1u
/* In chan_ep: a connection's rdma_cm duplicate (else its completion
 * channel). */
#define CM_TAG 1u

static int kfd(const struct ep_set *set)
{
	return __atomic_load_n(&set->epfd, __ATOMIC_ACQUIRE);
}

static pthread_mutex_t sets_lock = PTHREAD_MUTEX_INITIALIZER;
static struct ep_set *all_sets;
/*
 * Guards every sock's list of its registrations (shim_sock.ep_list), so
 * that the program's I/O on a parked sock finds its registrations without
 * walking every set (kick_parked).  Taken last: nothing else is locked
 * while it is held.
 */
static pthread_mutex_t bysock_mu = PTHREAD_MUTEX_INITIALIZER;

/*
 * fork copies the fd table first and the memory later, and the other
 * threads run in between: an epoll fd or wake eventfd made in that window
 * is recorded in the child's memory but absent from its fds, and freeing
 * that record there closed whatever fd the child had since put on the
 * number (its own new epoll fd: tests/rdma/46-forkstorm.sh, 1 child in
 * ~2,000 under ASan).  Making an fd and recording it are one step under
 * this lock, which the forking thread holds across the fork.
 */
static pthread_mutex_t fork_mu = PTHREAD_MUTEX_INITIALIZER;

static void shim_epoll_free(struct ep_set *set);

static void shim_epoll_fork_prepare(void)
{
	pthread_mutex_lock(&fork_mu);
}

static void shim_epoll_fork_parent(void)
{
	pthread_mutex_unlock(&fork_mu);
}

/*
 * Wake the set's waiters so that they take a new snapshot.  Those asleep in
 * sleep_on() poll the eventfd; those asleep in the kernel's epoll_wait (a
 * set with nothing to emulate) see it through a one-shot registration.
 */
static void kick(struct ep_set *set)
{
	uint64_t one = 1;

	/* libc's syscall(), not write(): kick runs under the set's locks,
	 * and write() is a cancellation point (a thread cancelled there
	 * would leave them held for good). */
	(void)REAL(syscall)(SYS_write, set->wake_fd, &one, sizeof(one));
	if (__atomic_load_n(&set->direct_waiters, __ATOMIC_SEQ_CST)) {
		struct epoll_event ev = {.events = EPOLLIN | EPOLLONESHOT,
					 .data.u64 = WAKE_MARK(set)};

		REAL(epoll_ctl)(kfd(set), EPOLL_CTL_MOD, set->wake_fd, &ev);
	}
}

static void drain_wake(struct ep_set *set)
{
	uint64_t v;

	(void)REAL(read)(set->wake_fd, &v, sizeof(v));
}

/* A sleeper's watch ends: drain the wake eventfd if it fired. */
static void wake_end(void *set, short revents)
{
	if (revents)
		drain_wake(set);
}

/* Connected over RDMA, or on the way (a non-blocking connect's rendezvous):
 * emulated.  Read under the set's lock: a connect that settles changes the
 * kind first and then visits the sets (ep_on_fell_back). */
static bool conn_kind(const struct shim_sock *s)
{
	return shim_kind_has(__atomic_load_n(&s->kind, __ATOMIC_SEQ_CST),
			     SHIM_KF_EMUL);
}

static void cand_add(struct ep_set *set, struct ep_reg *r)
{
	if (r->cand || !ep_emulated(r))
		return;
	r->cand = true;
	r->cand_next = NULL;
	r->cand_prev = set->cand_tail;
	if (set->cand_tail)
		set->cand_tail->cand_next = r;
	else
		set->cand = r;
	set->cand_tail = r;
}

static void cand_del(struct ep_set *set, struct ep_reg *r)
{
	if (!r->cand)
		return;
	if (r->cand_prev)
		r->cand_prev->cand_next = r->cand_next;
	else
		set->cand = r->cand_next;
	if (r->cand_next)
		r->cand_next->cand_prev = r->cand_prev;
	else
		set->cand_tail = r->cand_prev;
	r->cand = false;
	r->cand_prev = r->cand_next = NULL;
}

/* r's connection is no longer watched through chan_ep (its rsocket is still
 * open: the numbers are its own). */
static void chan_forget(struct ep_set *set, struct ep_reg *r)
{
	if (r->chan_fd >= 0) {
		REAL(epoll_ctl)(set->chan_ep, EPOLL_CTL_DEL, r->chan_fd, NULL);
		REAL(epoll_ctl)(set->chan_ep, EPOLL_CTL_DEL, r->cm_fd, NULL);
		REAL(epoll_ctl)(set->chan_ep, EPOLL_CTL_DEL, r->bell_fd, NULL);
		sg_untrack(r->s->rs);
	}
	r->chan_fd = r->cm_fd = r->bell_fd = -1;
}

static void reg_link(struct ep_set *set, struct ep_reg *r)
{
	/* seq_cst: pairs with the last close's fdrefs/ep_regs (ctl_slow) */
	__atomic_add_fetch(&r->s->ep_regs, 1, __ATOMIC_SEQ_CST);
	if (ep_emulated(r))
		__atomic_add_fetch(&set->nemul, 1, __ATOMIC_SEQ_CST);
	set->nmarked += r->marked;
	r->next = set->regs;
	set->regs = r;
	r->set = set;
	pthread_mutex_lock(&bysock_mu);
	r->s_next = r->s->ep_list;
	r->s->ep_list = r;
	pthread_mutex_unlock(&bysock_mu);
	cand_add(set, r);
}

/* Free the graves once no thread is in the kernel's wait: one that is may
 * bring back an event naming a marked registration removed meanwhile. */
static void reap_locked(struct ep_set *set)
{
	struct ep_reg *r;

	if (__atomic_load_n(&set->direct_waiters, __ATOMIC_SEQ_CST))
		return;
	while ((r = set->grave)) {
		set->grave = r->next;
		free(r);
	}
}

static void reg_unlink(struct ep_set *set, struct ep_reg **pp)
{
	struct ep_reg *r = *pp;

	*pp = r->next;
	chan_forget(set, r);
	cand_del(set, r);
	pthread_mutex_lock(&bysock_mu);
	for (struct ep_reg **sp = &r->s->ep_list; *sp; sp = &(*sp)->s_next)
		if (*sp == r) {
			*sp = r->s_next;
			break;
		}
	pthread_mutex_unlock(&bysock_mu);
	__atomic_sub_fetch(&r->s->ep_regs, 1, __ATOMIC_RELAXED);
	if (ep_emulated(r))
		__atomic_sub_fetch(&set->nemul, 1, __ATOMIC_SEQ_CST);
	set->nmarked -= r->marked;
	if (r->marked) {
		r->next = set->grave;
		set->grave = r;
		reap_locked(set);
	} else {
		free(r);
	}
}

static struct ep_set *set_new(int epfd)
{
	struct ep_set *set = calloc(1, sizeof(*set));

	if (!set)
		return NULL;
	set->epfd = epfd;
	set->own_fd = -1;
	set->wake_fd = -1;
	set->chan_ep = -1;
	set->kready = -1;
	set->turn = 1; /* a new registration's is 0: not visited */
	pthread_mutex_init(&set->lock, NULL);
	return set;
}

/* Make set the registry of epfd (a new epoll fd, or one found in use). */
static int set_install(int epfd, struct ep_set *set)
{
	struct shim_sock *es = shim_sock_new(SHIM_SK_EPOLL, 0);

	if (!es)
		return -ENOMEM;
	es->epset = set;
	set->owner = es;
	pthread_mutex_lock(&sets_lock);
	set->next_set = all_sets;
	all_sets = set;
	pthread_mutex_unlock(&sets_lock);
	shim_fd_install(epfd, es);
	return 0;
}

/*
 * From now on the set's kernel calls go through a duplicate of the
 * program's epoll fd (see struct ep_set).  Without one (EMFILE) they keep
 * the program's number: a close of it while a thread waits then sends
 * that thread's later calls to whatever takes the number.  (The duplicate
 * is of what the number names now: a close of it racing this epoll_ctl,
 * and a new file on the number, is the program's own race, which the
 * kernel's epoll_ctl would lose the same way.)
 */
static void own_dup(struct ep_set *set)
{
	int d = REAL(fcntl)(kfd(set), F_DUPFD_CLOEXEC, 0);

	if (d < 0) {
		shim_dbg("epoll %d: no private duplicate (%s)", kfd(set),
			 strerror(errno));
		return;
	}
	set->own_fd = d;
	__atomic_store_n(&set->epfd, d, __ATOMIC_RELEASE);
}

/*
 * The wake eventfd, made when the set first gets a registration of ours.
 * It sits in the kernel set disarmed (no events: the epoll fd must not look
 * readable because of it); kick() arms it, one-shot, when a thread is
 * asleep in the kernel's epoll_wait on this set, which then wakes, finds
 * the marker, and looks again.
 */
static int ensure_wake(struct ep_set *set)
{
	struct epoll_event ev = {.events = 0, .data.u64 = WAKE_MARK(set)};
	int fd, err = 0;

	if (__atomic_load_n(&set->wake_fd, __ATOMIC_ACQUIRE) >= 0)
		return 0;
	pthread_mutex_lock(&fork_mu);
	fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
	if (fd < 0) {
		err = -errno;
	} else if (REAL(epoll_ctl)(kfd(set), EPOLL_CTL_ADD, fd, &ev) < 0) {
		err = -errno;
		REAL(close)(fd);
	} else {
		own_dup(set);
		/* none (EMFILE): the set waits as before O(ready) */
		set->chan_ep = REAL(epoll_create1)(EPOLL_CLOEXEC);
		__atomic_store_n(&set->wake_fd, fd, __ATOMIC_RELEASE);
	}
	pthread_mutex_unlock(&fork_mu);
	return err;
}

/* Find or make the registry of epfd, with a reference to its sock (*held:
 * a close() of epfd in another thread meanwhile can't free the registry).
 * For an epoll fd we did not see made (inherited, or made while passing a
 * library's calls through), adding the wake eventfd validates epfd exactly
 * as the kernel would (EBADF, EINVAL). */
static int get_set(int epfd, struct ep_set **out, struct shim_sock **held)
{
	struct shim_sock *es;
	struct ep_set *set;
	int err;

again:
	es = shim_fd_get(epfd);
	if (es && shim_kind_is(es, SHIM_KF_EPSET)) {
		if (!shim_sock_tryget(epfd, es, SHIM_KINDS_WITH(SHIM_KF_EPSET)))
			goto again; /* a close() came first */
		*held = es;
		*out = es->epset;
		return 0;
	}
	if (es)
		return -EINVAL; /* a socket is no epoll fd */
	/* A closed epfd is EBADF, and must be found so before the eventfd
	 * can take its number. */
	if (REAL(fcntl)(epfd, F_GETFD) < 0)
		return -errno;
	set = set_new(epfd);
	if (!set)
		return -ENOMEM;
	err = ensure_wake(set);
	if (!err)
		err = set_install(epfd, set);
	if (err) {
		shim_epoll_free(set);
		return err;
	}
	goto again; /* now it is found, and held */
}

/*
 * fd, one of the numbers of epoll sock s, is being closed while others
 * remain (dup, F_DUPFD): the registry's kernel calls go through another
 * one from now on, as the kernel's epoll set lives on behind it (only
 * while the set has no private duplicate, see own_dup).
 */
static void ep_on_fd_closing(struct shim_sock *s, int fd)
{
	struct ep_set *set = s->epset;
	unsigned int span = shim_fdtable_span();

	if (!set || kfd(set) != fd) /* (never its own duplicate) */
		return;
	for (unsigned int k = 0; k < span; k++)
		if ((int)k != fd && shim_fd_get((int)k) == s) {
			__atomic_store_n(&set->epfd, (int)k, __ATOMIC_RELEASE);
			return;
		}
}

/*
 * A fork child shares the parent's chan_ep (one kernel object behind both
 * fds): a registration made or dropped here would be the parent's too.  So
 * the child lets go of it and starts a set of its own, with every
 * registration a candidate again.
 */
static void chan_fork_child(struct ep_set *set)
{
	if (set->chan_ep < 0)
		return;
	REAL(close)(set->chan_ep);
	set->chan_ep = REAL(epoll_create1)(EPOLL_CLOEXEC);
	for (struct ep_reg *r = set->regs; r; r = r->next) {
		r->chan_fd = r->cm_fd = r->bell_fd = -1;
		cand_add(set, r);
	}
}

/*
 * A fork child has only the thread that forked: a lock another thread of
 * the parent held is held for good here unless made anew, and no thread
 * waits in any set.
 */
static void shim_epoll_fork_child(void)
{
	pthread_mutex_init(&fork_mu, NULL);
	pthread_mutex_init(&sets_lock, NULL);
	pthread_mutex_init(&bysock_mu, NULL);
	for (struct ep_set *set = all_sets; set; set = set->next_set) {
		pthread_mutex_init(&set->lock, NULL);
		set->direct_waiters = 0;
		chan_fork_child(set);
	}
}

/* The last reference to an epoll fd's sock went. */
static void ep_release(struct shim_sock *s)
{
	if (s->epset)
		shim_epoll_free(s->epset);
}

static void ep_on_sock_changed(struct shim_sock *s);
static void ep_on_fell_back(struct shim_sock *s);
static void ep_on_door_opened(struct shim_sock *s);
static void ep_on_forget(struct shim_sock *s);
static void ep_on_kick_parked(struct shim_sock *s);

static const struct shim_sock_ev ep_events = {
    .changed = ep_on_sock_changed,
    .fell_back = ep_on_fell_back,
    .door_opened = ep_on_door_opened,
    .forget = ep_on_forget,
    .fd_closing = ep_on_fd_closing,
    .kick_parked = ep_on_kick_parked,
};

static const struct shim_kind_ops ep_ops = {
    .release = ep_release,
};

static void ep_start(void)
{
	shim_kind_set_ops(SHIM_SK_EPOLL, &ep_ops);
	shim_sock_on_events(&ep_events);
}

SHIM_STARTUP(EPOLL, .start = ep_start, .prepare = shim_epoll_fork_prepare,
	     .parent = shim_epoll_fork_parent, .child = shim_epoll_fork_child);

/*
 * The registrations go while the set is still found by for_each_reg_of
 * (sets_lock held throughout): a registered fd closed meanwhile either
 * finds its registration here or finds it gone, never a set that is
 * leaving with it (the fd's sock could be released while this still
 * pointed at it).
 */
static void shim_epoll_free(struct ep_set *set)
{
	struct ep_set **pp;

	pthread_mutex_lock(&sets_lock);
	pthread_mutex_lock(&set->lock);
	while (set->regs)
		reg_unlink(set, &set->regs);
	pthread_mutex_unlock(&set->lock);
	for (pp = &all_sets; *pp; pp = &(*pp)->next_set)
		if (*pp == set) {
			*pp = set->next_set;
			break;
		}
	pthread_mutex_unlock(&sets_lock);
	set->direct_waiters = 0;
	reap_locked(set);
	if (set->wake_fd >= 0)
		REAL(close)(set->wake_fd);
	if (set->own_fd >= 0)
		REAL(close)(set->own_fd);
	if (set->chan_ep >= 0)
		REAL(close)(set->chan_ep);
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

	if (r->in_kernel && !r->marked) {
		REAL(epoll_ctl)(kfd(set), EPOLL_CTL_DEL, r->fd, NULL);
		r->in_kernel = false;
		r->reported = 0;
		r->in_known = false;
		__atomic_add_fetch(&set->nemul, 1, __ATOMIC_SEQ_CST);
		cand_add(set, r);
		kick(set);
	}
}

static void ep_on_sock_changed(struct shim_sock *s)
{
	/* seq_cst: after the kind's store (an epoll_ctl ADD: ctl_slow) */
	if (__atomic_load_n(&s->ep_regs, __ATOMIC_SEQ_CST))
		for_each_reg_of(s, move_to_rdma);
}

/* A connecting sock fell back to its kernel socket: its registrations go
 * to the kernel set with the program's mask and data, as if made there.
 * They stay listed, as a TCP sock's are (one whose connect failed may be
 * connected again, and over RDMA: move_to_rdma). */
static void move_to_kernel(struct ep_set *set, struct ep_reg **pp)
{
	struct ep_reg *r = *pp;
	struct epoll_event ev = {.events = r->events, .data = r->data};

	if (r->in_kernel || r->inner || r->marked)
		return;
	if (r->disabled) /* a one-shot that fired stays disarmed */
		ev.events &= EPOLLONESHOT | EPOLLET;
	(void)REAL(epoll_ctl)(kfd(set), EPOLL_CTL_ADD, r->fd, &ev);
	chan_forget(set, r);
	cand_del(set, r);
	r->in_kernel = true;
	__atomic_sub_fetch(&set->nemul, 1, __ATOMIC_SEQ_CST);
	kick(set);
}

static void ep_on_fell_back(struct shim_sock *s)
{
	/* seq_cst: after the kind's store (an epoll_ctl ADD: ctl_slow) */
	if (__atomic_load_n(&s->ep_regs, __ATOMIC_SEQ_CST))
		for_each_reg_of(s, move_to_kernel);
}

static void add_door(struct ep_set *set, struct ep_reg **pp)
{
	struct ep_reg *r = *pp;
	struct epoll_event kev = {.events = r->events,
				  .data.u64 = (uint64_t)(uintptr_t)r | QFD_TAG};
	int qfd = shim_listen_qfd(r->s);

	if (r->marked && qfd >= 0)
		(void)REAL(epoll_ctl)(kfd(set), EPOLL_CTL_ADD, qfd, &kev);
	kick(set);
}

static void ep_on_door_opened(struct shim_sock *s)
{
	if (__atomic_load_n(&s->ep_regs, __ATOMIC_ACQUIRE))
		for_each_reg_of(s, add_door);
}

/* The program used r's fd: r may show new events (ep_rearm). */
static void kick_reg(struct ep_set *set, struct ep_reg **pp)
{
	cand_add(set, *pp);
	kick(set);
}

/*
 * The sets that hold registrations of s (at most max; -1: more), from its
 * list.  sets_lock held: a set found here is not freed until it is let go
 * (shim_epoll_free unlinks its registrations under it first).
 */
static int sets_of(struct shim_sock *s, struct ep_set **sets, int max)
{
	int n = 0;

	pthread_mutex_lock(&bysock_mu);
	for (struct ep_reg *r = s->ep_list; r && n >= 0; r = r->s_next) {
		int k = 0;

		while (k < n && sets[k] != r->set)
			k++;
		if (k == n)
			n = n < max ? n + 1 : -1;
		if (n > 0 && k < max)
			sets[k] = r->set;
	}
	pthread_mutex_unlock(&bysock_mu);
	return n;
}

/* The program used s, which a sleeper stopped watching: its registrations
 * are candidates again, and their sets' sleepers look again.  Costs the
 * registrations of s, not those of its sets. */
static void ep_on_kick_parked(struct shim_sock *s)
{
	struct ep_set *sets[4];
	int n;

	if (!__atomic_exchange_n(&s->ep_parked, 0, __ATOMIC_SEQ_CST))
		return;
	pthread_mutex_lock(&sets_lock);
	n = sets_of(s, sets, (int)ARRAY_SIZE(sets));
	for (int k = 0; k < n; k++) {
		struct ep_set *set = sets[k];

		pthread_mutex_lock(&set->lock);
		pthread_mutex_lock(&bysock_mu);
		for (struct ep_reg *r = s->ep_list; r; r = r->s_next)
			if (r->set == set)
				cand_add(set, r);
		pthread_mutex_unlock(&bysock_mu);
		kick(set);
		pthread_mutex_unlock(&set->lock);
	}
	pthread_mutex_unlock(&sets_lock);
	if (n < 0) /* registered in more sets than that: all of them */
		for_each_reg_of(s, kick_reg);
}

/* The kernel side of a marked registration: the fd itself and, for a
 * listener, its accept queue; both name the reg, not the program's data. */
static int kernel_ctl(struct ep_set *set, int op, struct ep_reg *r,
		      const struct epoll_event *ev)
{
	struct epoll_event kev = {0};
	int qfd = -1;

	if (!r->marked)
		return REAL(epoll_ctl)(kfd(set), op, r->fd,
				       (struct epoll_event *)ev) < 0
			   ? -errno
			   : 0;
	if (ev)
		kev.events = ev->events;
	kev.data.u64 = (uint64_t)(uintptr_t)r;
	if (REAL(epoll_ctl)(kfd(set), op, r->fd, &kev) < 0)
		return -errno;
	if (shim_kind_is(r->s, SHIM_KF_DOOR))
		qfd = shim_listen_qfd(r->s);
	if (qfd >= 0) {
		/* Best effort: the listening fd itself is registered, and a
		 * second registration of the same listener (a dup) finds the
		 * queue taken. */
		kev.data.u64 |= QFD_TAG;
		(void)REAL(epoll_ctl)(kfd(set), op, qfd, &kev);
	}
	return 0;
}

/*
 * The last fd of r's file is being closed (we run before the real close).
 * A marked registration leaves the kernel set now, not at the close: in
 * between, another thread could fetch an event carrying the marker of a
 * registration already freed, and hand our pointer to the program as its
 * epoll data.  A listener's queue lives on until its rsocket does.
 */
static void drop_reg(struct ep_set *set, struct ep_reg **pp)
{
	struct ep_reg *r = *pp;

	if (r->marked) {
		REAL(epoll_ctl)(kfd(set), EPOLL_CTL_DEL, r->fd, NULL);
		int qfd = shim_kind_is(r->s, SHIM_KF_DOOR)
			      ? shim_listen_qfd(r->s)
			      : -1;

		if (qfd >= 0)
			REAL(epoll_ctl)(kfd(set), EPOLL_CTL_DEL, qfd, NULL);
	}
	reg_unlink(set, pp);
	kick(set);
}

static void ep_on_forget(struct shim_sock *s)
{
	for_each_reg_of(s, drop_reg);
}

static int ctl_add(struct ep_set *set, int fd, struct shim_sock *s,
		   const struct epoll_event *ev)
{
	struct ep_reg *r = calloc(1, sizeof(*r));
	/* read once, as conn_kind reads it */
	int kind = __atomic_load_n(&s->kind, __ATOMIC_SEQ_CST), err;

	if (!r)
		return -ENOMEM;
	r->fd = fd;
	r->s = s;
	r->chan_fd = r->cm_fd = r->bell_fd = -1;
	r->events = ev->events;
	r->data = ev->data;
	/* Not (yet) RDMA: the kernel watches it, with the program's data
	 * until connect decides; listeners and nested sets with a marker. */
	r->in_kernel = !shim_kind_has(kind, SHIM_KF_EMUL);
	r->marked = shim_kind_has(kind, SHIM_KF_DOOR | SHIM_KF_EPSET);
	r->inner = shim_kind_has(kind, SHIM_KF_EPSET) ? s->epset : NULL;
	if (r->in_kernel) {
		err = kernel_ctl(set, EPOLL_CTL_ADD, r, ev);
		if (err) {
			free(r);
			return err;
		}
	}
	r->rd_seen = __atomic_load_n(&s->rd_gen, __ATOMIC_RELAXED);
	r->wr_seen = __atomic_load_n(&s->wr_gen, __ATOMIC_RELAXED);
	reg_link(set, r);
	return 0;
}

static int ctl_mod(struct ep_set *set, struct ep_reg *r,
		   const struct epoll_event *ev)
{
	int err;

	if (r->events & EPOLLEXCLUSIVE)
		return -EINVAL;
	if (r->in_kernel) {
		err = kernel_ctl(set, EPOLL_CTL_MOD, r, ev);
		if (err)
			return err;
	}
	r->events = ev->events;
	r->data = ev->data;
	r->disabled = false;
	r->reported = 0; /* a MOD re-arms, as in the kernel */
	r->in_known = false;
	cand_add(set, r);
	return 0;
}

static int ctl_slow(int epfd, int op, int fd, struct shim_sock *s,
		    struct epoll_event *ev)
{
	struct ep_set *set = NULL;
	struct shim_sock *es = NULL;
	struct ep_reg **pp;
	int err = 0;

	if (epfd == fd)
		return -EINVAL;
	if ((op == EPOLL_CTL_ADD || op == EPOLL_CTL_MOD) && !ev)
		return -EFAULT;
	if (op != EPOLL_CTL_ADD && op != EPOLL_CTL_MOD && op != EPOLL_CTL_DEL)
		return -EINVAL;
	err = get_set(epfd, &set, &es);
	if (!err && op == EPOLL_CTL_MOD && (ev->events & EPOLLEXCLUSIVE))
		err = -EINVAL; /* as the kernel: EXCLUSIVE is for ADD only */
	if (!err)
		err = ensure_wake(set);
	/* A nested set's kicks must reach the outer set's sleepers, who
	 * watch its wake eventfd. */
	if (!err && shim_kind_is(s, SHIM_KF_EPSET))
		err = ensure_wake(s->epset);
	if (err) {
		if (es)
			shim_sock_put(es);
		return err;
	}
	pthread_mutex_lock(&set->lock);
	pp = find_reg(set, fd);
	if (op == EPOLL_CTL_ADD) {
		err = pp ? -EEXIST : ctl_add(set, fd, s, ev);
		/* The fd's last close came meanwhile, and may have looked for
		 * registrations before this one was linked: it goes now, as
		 * the kernel's goes with the file (ctl_add linked it first). */
		if (!err && !__atomic_load_n(&s->fdrefs, __ATOMIC_SEQ_CST))
			drop_reg(set, &set->regs);
		/* So did the start or the end of its connect, which may have
		 * looked for registrations to move before this one was linked
		 * (seq_cst: reg_link's ep_regs, then the kind here; the kind,
		 * then ep_regs there): each mover is a no-op when the other
		 * side moved it. */
		else if (!err && !conn_kind(s))
			move_to_kernel(set, &set->regs);
		else if (!err)
			move_to_rdma(set, &set->regs);
	} else if (!pp)
		err = -ENOENT;
	else if (op == EPOLL_CTL_MOD)
		err = ctl_mod(set, *pp, ev);
	else {
		if ((*pp)->in_kernel)
			kernel_ctl(set, EPOLL_CTL_DEL, *pp, NULL);
		reg_unlink(set, pp);
	}
	pthread_mutex_unlock(&set->lock);
	shim_dbg("epoll_ctl(%d, %s, %d, 0x%x): %s", epfd,
		 op == EPOLL_CTL_ADD   ? "ADD"
		 : op == EPOLL_CTL_MOD ? "MOD"
				       : "DEL",
		 fd, ev ? ev->events : 0, err ? strerror(-err) : "ok");
	if (!err)
		kick(set);
	shim_sock_put(es);
	return err;
}

SHIM_EXPORT int epoll_ctl(int epfd, int op, int fd, struct epoll_event *ev)
{
	struct shim_sock *s = shim_fd_get(fd);

	int r;

	/* (a DEAD sock may have registrations listed: a connect that fell
	 * back to the kernel, connect.c) */
	if (likely(!s || shim_kind_is(s, SHIM_KF_KERNEL) || shim_in_lib()))
		return REAL(epoll_ctl)(epfd, op, fd, ev);
	s = shim_sock_ref(fd);
	if (!s)
		return REAL(epoll_ctl)(epfd, op, fd, ev);
	/* A listener watched for connections: this process waits on it. */
	if (op != EPOLL_CTL_DEL && !shim_bad_ptr(ev) && (ev->events & EPOLLIN))
		shim_listen_door(s);
	r = (int)shim_ret(ctl_slow(epfd, op, fd, s, ev));
	shim_sock_put(s);
	return r;
}

/*
 * Every epoll fd the program makes gets its (empty) registry at once, so
 * that it can be nested or polled later with RDMA fds in it, and so that a
 * thread asleep on it can be woken when the first RDMA fd is added.  It
 * costs no fd until then (the wake eventfd and the private duplicate of
 * the epoll fd are made on first use).
 */
static int adopt_epfd(int epfd)
{
	struct ep_set *set;

	if (epfd < 0 || shim_in_lib())
		return epfd;
	set = set_new(epfd);
	if (!set || set_install(epfd, set)) {
		free(set); /* left to get_set(), as for an inherited epfd */
		return epfd;
	}
	return epfd;
}

/* The epoll fd and its record are made as one step (fork_mu). */
SHIM_EXPORT int epoll_create(int size)
{
	int fd;

	shim_ensure_init();
	pthread_mutex_lock(&fork_mu);
	fd = adopt_epfd(REAL(epoll_create)(size));
	pthread_mutex_unlock(&fork_mu);
	return fd;
}

SHIM_EXPORT int epoll_create1(int flags)
{
	int fd;

	shim_ensure_init();
	pthread_mutex_lock(&fork_mu);
	fd = adopt_epfd(REAL(epoll_create1)(flags));
	pthread_mutex_unlock(&fork_mu);
	return fd;
}

/* rpoll revents of an rsocket -> epoll bits the kernel would show. */
static uint32_t rdma_bits(struct shim_sock *s, short rev, uint32_t want)
{
	return (uint32_t)shim_rdma_revents(s, rev, (short)(want & 0xffff)) |
	       ((want & EPOLLRDHUP) && shim_rdma_peer_eof(s, rev) ? EPOLLRDHUP
								  : 0);
}

static bool peek_locked(struct ep_set *set, int depth);

/* Readiness of a nested set's emulated side (its kernel side is the
 * kernel's), without consuming anything: what the kernel's poll of an
 * epoll fd does. */
static bool peek(struct ep_set *set, int depth)
{
	bool ready;

	if (depth > 8 || !__atomic_load_n(&set->nemul, __ATOMIC_RELAXED))
		return false;
	pthread_mutex_lock(&set->lock);
	ready = peek_locked(set, depth);
	pthread_mutex_unlock(&set->lock);
	return ready;
}

static bool peek_locked(struct ep_set *set, int depth)
{
	struct ep_reg *r;

	for (r = set->regs; r; r = r->next) {
		uint32_t w, cur;
		struct pollfd pfd;
		bool again;
		uint64_t now = 0;

		ep_rearm(r);
		w = ep_waitable(r);
		again = ep_in_recheck(r);
		if (!w && !again)
			continue;
		if (r->inner) {
			if (peek(r->inner, depth + 1))
				return true;
			continue;
		}
		if (shim_sock_connecting(r->s))
			continue; /* nothing is ready while it connects */
		pfd =
		    (struct pollfd){.fd = r->s->rs, .events = POLLIN | POLLOUT};
		if (sg_poll(&pfd, 1, 0) < 0)
			continue;
		cur = pfd.revents ? rdma_bits(r->s, pfd.revents, r->events) : 0;
		/* As ep_filter(): gone bits count as new later, and a drained
		 * fd needs no recheck (watch_locked) while a sleeper waits. */
		r->reported &= cur;
		if (cur & (w | EPOLLERR | EPOLLHUP))
			return true;
		/* New data behind reported data: ready, as the kernel's ready
		 * list would hold r again (the count stays for epoll_wait). */
		if (again &&
		    ep_in_again(r, ep_in_count(r, cur, pfd.revents, &now), now))
			return true;
	}
	return false;
}

static int watch_locked(struct ep_set *set, struct watch *w, int depth);

/*
 * Before a sleep: park r first, then sample its generations (an I/O racing
 * with us either moves a generation we see, or sees the park and kicks us:
 * shim_sock_ev_io).  Returns what r can still produce (ep_waitable); a
 * count to look at again sets w's recheck.
 */
static uint32_t reg_park(struct ep_reg *r, struct watch *w)
{
	if (ep_emulated(r) && !r->inner && !r->disabled)
		__atomic_store_n(&r->s->ep_parked, 1, __ATOMIC_SEQ_CST);
	ep_rearm(r);
	if (ep_in_recheck(r))
		w->recheck = true;
	return ep_waitable(r);
}

/* Watch r for want (reg_park's) in the sleep itself: a nested set's side,
 * a connect's end, or the rsocket, which the sleep's rpoll arms. */
static int watch_reg(struct ep_reg *r, struct watch *w, uint32_t want,
		     int depth)
{
	int err;

	if (r->inner) {
		pthread_mutex_lock(&r->inner->lock);
		err = watch_locked(r->inner, w, depth + 1);
		pthread_mutex_unlock(&r->inner->lock);
		return err;
	}
	if (shim_sock_connecting(r->s))
		return shim_settle_watch(w, r->s);
	return shim_watch_add(
	    w, (struct pollfd){.fd = r->s->rs, .events = (short)want}, r->s,
	    NULL, NULL);
}

/* What a sleeper on set must watch besides its epfd: the wake eventfd and
 * the rsockets (and nested sets) that can still produce an event. */
static int watch_locked(struct ep_set *set, struct watch *w, int depth)
{
	struct ep_reg *r;
	int err = 0;

	if (depth > 8)
		return 0;
	if (set->wake_fd >= 0)
		err = shim_watch_add(
		    w, (struct pollfd){.fd = set->wake_fd, .events = POLLIN},
		    set->owner, wake_end, set);
	for (r = set->regs; r && !err; r = r->next) {
		uint32_t want = reg_park(r, w);

		if (want)
			err = watch_reg(r, w, want, depth);
	}
	return err;
}

/* For poll/select on an epoll fd (poll.c): is its emulated side ready, and
 * what must a sleeper watch for it. */
bool shim_epoll_peek(struct ep_set *set)
{
	return peek(set, 0);
}

bool shim_epoll_emulating(struct ep_set *set)
{
	return __atomic_load_n(&set->nemul, __ATOMIC_ACQUIRE) != 0;
}

int shim_epoll_watch(struct ep_set *set, struct watch *w)
{
	int err;

	pthread_mutex_lock(&set->lock);
	err = watch_locked(set, w, 0);
	pthread_mutex_unlock(&set->lock);
	return err;
}

/* Note out[slot] as r's event in this collect; a registration the kernel's
 * turn already named (a nested set's kernel side) gets one event. */
static void emit(struct ep_set *set, struct ep_reg *r, uint32_t bits,
		 struct epoll_event *evs, int *out)
{
	if (r->stamp == set->stamp && r->slot) {
		evs[r->slot - 1].events |= bits;
		return;
	}
	evs[*out].events = bits;
	evs[*out].data = r->data;
	r->stamp = set->stamp;
	r->slot = (unsigned int)*out + 1;
	(*out)++;
}

/* One rpoll of the candidates' rsockets, in list order. */
struct scan {
	struct pollfd *p, p_stack[64];
	struct ep_reg **v, *v_stack[64];
	int n, at, left; /* left: not yet visited in this call */
	int skipped;	 /* candidates left out (visited in this turn) */
};

static void scan_done(struct scan *sc)
{
	if (sc->p != sc->p_stack)
		free(sc->p);
	if (sc->v != sc->v_stack)
		free(sc->v);
}

/* Not visited in this turn, nor in this call (a turn that ended in it). */
static bool scan_wants(const struct ep_set *set, const struct ep_reg *r)
{
	return r->turn != set->turn && r->seen != set->stamp;
}

static int scan_take(struct ep_set *set, struct scan *sc)
{
	struct ep_reg *r;
	int n = 0, k = 0, all = 0;

	sc->p = sc->p_stack;
	sc->v = sc->v_stack;
	sc->n = sc->at = sc->left = sc->skipped = 0;
	if (!__atomic_load_n(&set->nemul, __ATOMIC_RELAXED))
		return 0;
	for (r = set->cand; r; r = r->cand_next, all++)
		n += scan_wants(set, r);
	sc->skipped = all - n;
	if (!n) /* nothing to look at (a second turn of a call that saw
		 * every candidate already): no rpoll of none */
		return 0;
	if (n > (int)ARRAY_SIZE(sc->p_stack)) {
		sc->p = malloc((size_t)n * sizeof(*sc->p));
		sc->v = malloc((size_t)n * sizeof(*sc->v));
		if (!sc->p || !sc->v) {
			scan_done(sc);
			sc->p = sc->p_stack;
			sc->v = sc->v_stack;
			return -ENOMEM;
		}
	}
	for (r = set->cand; r && k < n; r = r->cand_next) {
		if (!scan_wants(set, r))
			continue;
		ep_rearm(r);
		sc->v[k] = r;
		sc->p[k].fd =
		    r->disabled || r->in_kernel || shim_sock_connecting(r->s)
			? -1
			: r->s->rs;
		sc->p[k].events =
		    (short)((r->events & EP_RDMA_BITS) | POLLIN | POLLOUT);
		sc->p[k].revents = 0;
		k++;
	}
	if (sg_poll(sc->p, (nfds_t)n, 0) < 0)
		for (k = 0; k < n; k++)
			sc->p[k].revents = 0; /* as "nothing ready" */
	sc->n = sc->left = n;
	return 0;
}

/* Filter r's readiness (p: its rpoll entry) and note its event, if any:
 * r then goes to the candidates' tail. */
static void visit(struct ep_set *set, struct ep_reg *r, const struct pollfd *p,
		  struct epoll_event *evs, int *out)
{
	uint32_t cur;

	if (r->inner && !r->disabled)
		cur = peek(r->inner, 1) ? r->events & EP_NEST_BITS : 0;
	else if (p->fd < 0)
		return;
	else
		cur = p->revents ? rdma_bits(r->s, p->revents, r->events) &
				       (r->events | EPOLLERR | EPOLLHUP)
				 : 0;
	cur = ep_filter(r, cur, p->revents);
	if (cur) {
		emit(set, r, cur, evs, out);
		cand_del(set, r);
		cand_add(set, r);
	}
}

/*
 * Step 1, the candidates' turn: their events, in list order, into
 * evs[out, max).  Reaching the list's end ends the turn: the kernel's is
 * next.  Those that gave an event went to the tail, so the next turn
 * begins with those not visited yet.  Locked.
 */
static int rdma_turn(struct ep_set *set, struct scan *sc,
		     struct epoll_event *evs, int out, int max)
{
	while (out < max && sc->left > 0) {
		sc->v[sc->at]->turn = set->turn;
		sc->v[sc->at]->seen = set->stamp;
		visit(set, sc->v[sc->at], &sc->p[sc->at], evs, &out);
		sc->left--;
		if (++sc->at == sc->n) {
			set->kturn = true;
			set->turn++;
			break;
		}
	}
	return out;
}

/* Was data (probably) given in this kernel turn already?  Notes it. */
static bool kseen_add(struct ep_set *set, uint64_t data)
{
	unsigned int h = (unsigned int)((data * 0x9E3779B97F4A7C15ull) >> 56);
	uint64_t bit = 1ull << (h & 63);
	bool seen = set->kseen[h >> 6] & bit;

	set->kseen[h >> 6] |= bit;
	return seen;
}

/* The kernel's turn is over; the next starts with evs[0, k) given. */
static void kernel_turn_over(struct ep_set *set, const struct epoll_event *evs,
			     int k)
{
	memset(set->kseen, 0, sizeof(set->kseen));
	set->kgiven = 0;
	for (int i = 0; i < k; i++, set->kgiven++)
		(void)kseen_add(set, evs[i].data.u64);
	set->kturn = false;
}

/*
 * How many events to ask the kernel for, want at most: what its turn has
 * left, and at a turn's start one more, so that a fetch that comes back
 * short confirms kready (a longer one shows it grew).
 */
static int kernel_ask(const struct ep_set *set, int want)
{
	int rest;

	if (set->kready < 0)
		return want;
	rest = set->kready - set->kgiven + !set->kgiven;
	return rest < 1 ? 1 : rest < want ? rest : want;
}

/*
 * Account the kernel's answer evs[0, k) to asked for.  Short: that was all
 * it had ready (kready), the turn is over.  An event this turn already gave:
 * its list went round, the turn ended before that event, and the events
 * from it on open the next turn (they can't be put back).  A false repeat
 * (hash collision, equal data) only ends a turn early.
 */
static void kernel_turn_end(struct ep_set *set, const struct epoll_event *evs,
			    int k, int asked)
{
	if (k < asked) {
		set->kready = k;
		kernel_turn_over(set, evs, 0);
		return;
	}
	for (int i = 0; i < k; i++) {
		if (evs[i].data.u64 == WAKE_MARK(set))
			continue;
		if (kseen_add(set, evs[i].data.u64)) {
			set->kready = -1;
			kernel_turn_over(set, evs + i, k - i);
			return;
		}
		set->kgiven++;
	}
	if (set->kready >= 0 && set->kgiven >= set->kready) {
		if (set->kgiven > set->kready)
			set->kready = -1; /* more than last time: unknown */
		kernel_turn_over(set, evs, 0);
	}
}

static int translate_locked(struct ep_set *set, struct epoll_event *evs,
			    int from, int n);

/*
 * A zero-timeout look at a kernel epoll set, made only under the set's
 * lock with cancellation disabled (gather): the system call itself, not
 * libc's epoll_wait, a cancellation point whose bracket (asynchronous
 * cancellation on and off around the call, about 30 instructions) has
 * nothing to do here.  -1 and errno, as epoll_wait.
 */
static int kernel_look(int epfd, struct epoll_event *evs, int max)
{
#ifdef SYS_epoll_wait
	return (int)REAL(syscall)(SYS_epoll_wait, (long)epfd, evs, (long)max,
				  0L);
#else
	return (int)REAL(syscall)(SYS_epoll_pwait, (long)epfd, evs, (long)max,
				  0L, NULL, (long)(_NSIG / 8));
#endif
}

/* Step 2, the kernel's turn: its ready events into evs[out, max).  Locked. */
static int kernel_turn(struct ep_set *set, struct epoll_event *evs, int out,
		       int max)
{
	int ask = kernel_ask(set, max - out);
	int k = kernel_look(kfd(set), evs + out, ask);

	if (k < 0)
		return out ? out : -errno;
	kernel_turn_end(set, evs + out, k, ask);
	return k ? translate_locked(set, evs, out, k) : out;
}

/* The marked registration data names: live (returned), gone meanwhile
 * (*gone: the event is dropped), or none (the program's own data). */
static struct ep_reg *marked_reg(struct ep_set *set, uint64_t data, bool *gone)
{
	uint64_t addr = data & ~(uint64_t)QFD_TAG;
	struct ep_reg *r;

	*gone = false;
	for (r = set->regs; r; r = r->next)
		if (r->marked && (uint64_t)(uintptr_t)r == addr)
			return r;
	for (r = set->grave; r; r = r->next)
		if ((uint64_t)(uintptr_t)r == addr) {
			*gone = true;
			break;
		}
	return NULL;
}

/*
 * Step 2's kernel events evs[from, from + n): drop wake events, give marked
 * ones their registration's data, and merge a registration's several
 * events (listener + queue, nested kernel + RDMA side) into one.  Locked.
 * Returns the new total.
 */
static int translate_locked(struct ep_set *set, struct epoll_event *evs,
			    int from, int n)
{
	int out = from;

	for (int i = from; i < from + n; i++) {
		struct epoll_event ev = evs[i];
		struct ep_reg *r;
		bool gone;

		if (ev.data.u64 == WAKE_MARK(set)) {
			drain_wake(set);
			continue;
		}
		if (!set->nmarked && !set->grave) {
			evs[out++] = ev;
			continue;
		}
		r = marked_reg(set, ev.data.u64, &gone);
		if (gone)
			continue;
		if (!r) {
			evs[out++] = ev;
			continue;
		}
		if (r->stamp == set->stamp && r->slot) {
			evs[r->slot - 1].events |= ev.events;
			continue;
		}
		if (r->disabled)
			continue;
		if (r->events & EPOLLONESHOT)
			r->disabled = true;
		ev.data = r->data;
		evs[out] = ev;
		r->stamp = set->stamp;
		r->slot = (unsigned int)out + 1;
		out++;
	}
	return out;
}

/*
 * O(ready).  A registration leaves the candidates only when its connection
 * is armed (sg_arm) with both of its kernel fds in chan_ep: from then on,
 * anything that can change what it shows -- a completion (data, room to
 * send, the peer's close) or an rdma_cm event (the peer gone) -- makes
 * one of them readable, and chan_ep gives the edge, which brings the
 * registration back (drain_chan).  An edge is lost if another wait of the
 * process takes the completion event first (the kernel drops an item no
 * longer readable when the set is read): that taker rings the
 * connection's bell, also in chan_ep (rsock.c, sg_track).  The program's
 * own I/O on the fd brings it back too (parked: kick_reg), for the ET
 * rules that follow a read or a short write (ep_rearm).  A wait then
 * costs what is ready, not what is registered.
 */
static void drain_chan(struct ep_set *set)
{
	struct epoll_event ev[64];
	int n;

	if (set->chan_ep < 0)
		return;
	do {
		n = kernel_look(set->chan_ep, ev, ARRAY_SIZE(ev));
		for (int i = 0; i < n; i++) {
			struct ep_reg *r =
			    (struct ep_reg *)(uintptr_t)(ev[i].data.u64 &
							 ~(uint64_t)CM_TAG);

			if (ev[i].data.u64 & CM_TAG)
				sg_cm_fired(r->s->rs);
			cand_add(set, r);
		}
	} while (n == (int)ARRAY_SIZE(ev));
}

/* Put a's fds, and the connection's bell (sg_track), in chan_ep for r: 1 if
 * r had none there before (the arm that found them is not yet watched), 0
 * if it had, -errno if they can't be. */
static int chan_track(struct ep_set *set, struct ep_reg *r,
		      const struct sg_armed *a)
{
	struct epoll_event ev = {.events = EPOLLIN | EPOLLET};
	uint64_t me = (uint64_t)(uintptr_t)r;
	int fds[3] = {a->chan, a->cm, -1}, k, err = 0;

	if (r->chan_fd >= 0)
		return 0;
	if (a->chan < 0 || a->cm < 0)
		return -ENOENT;
	fds[2] = sg_track(r->s->rs, a->chan);
	if (fds[2] < 0)
		return fds[2];
	for (k = 0; k < 3 && !err; k++) {
		ev.data.u64 = k == 1 ? me | CM_TAG : me;
		/* e.g. EEXIST: a dup of the fd has them here */
		if (REAL(epoll_ctl)(set->chan_ep, EPOLL_CTL_ADD, fds[k], &ev) <
		    0)
			err = -errno;
	}
	if (err) {
		for (k -= 2; k >= 0; k--)
			REAL(epoll_ctl)
		(set->chan_ep, EPOLL_CTL_DEL, fds[k], NULL);
		sg_untrack(r->s->rs);
		return err;
	}
	r->chan_fd = a->chan;
	r->cm_fd = a->cm;
	r->bell_fd = fds[2];
	return 1;
}

/*
 * sg_arm found rs showing rev: an event for the program makes the sleep a
 * look.  A connection that has ended shows POLLHUP for good, which the
 * program may not be told (its HUP shows as EOF, or was told, ET): if that
 * is all, it leaves the candidates (its own I/O brings it back).
 */
static int arm_ready(struct ep_set *set, struct ep_reg *r, struct watch *w,
		     uint32_t want, int rev)
{
	uint32_t bits = rdma_bits(r->s, (short)rev, r->events) &
			(want | EPOLLERR | EPOLLHUP);

	if (r->events & EPOLLET)
		bits &= ~r->reported;
	if (!bits && (rev & (POLLHUP | POLLERR))) {
		cand_del(set, r);
		return 0;
	}
	w->now = true;
	return 0;
}

/*
 * Before a sleep: candidate r of the sleeper's own set either leaves the
 * list (armed and watched by chan_ep, or with nothing to wait for until
 * the program uses the fd), or stays and is watched as before O(ready):
 * a nested set, a connect under way, an ET count to look at again, a
 * connection that could not be armed.  One that shows an event now makes
 * the sleep a look.
 */
static int arm_reg(struct ep_set *set, struct ep_reg *r, struct watch *w,
		   int *armed)
{
	struct sg_armed a;
	uint32_t want;
	int ready;

	if (!ep_emulated(r) || r->disabled) {
		cand_del(set, r);
		return 0;
	}
	want = reg_park(r, w);
	if (r->inner || shim_sock_connecting(r->s))
		return want ? watch_reg(r, w, want, 0) : 0;
	if (!want) {
		if (ep_in_recheck(r))
			return 0;
		/* Nothing the program asked for can come: only a hang-up,
		 * which is armed for unless it was told (ET) already. */
		if ((r->reported & (EPOLLHUP | EPOLLERR)) || set->chan_ep < 0) {
			cand_del(set, r);
			return 0;
		}
	}
	for (int round = 0; set->chan_ep >= 0 && round < 2; round++) {
		bool watched = r->chan_fd >= 0; /* before this arm */

		/* a tracker rechecking an ET count wants the ring its own
		 * arm would skip: new data shows nowhere else */
		ready = sg_arm(r->s->rs, (short)want,
			       watched && !ep_in_recheck(r), &a);
		(*armed)++;
		if (ready > 0)
			return arm_ready(set, r, w, want, ready);
		if (ready < 0)
			break;
		if (watched && a.chan == r->chan_fd) {
			if (!ep_in_recheck(r))
				cand_del(set, r);
			return 0;
		}
		/* newly watched: arm again, now that chan_ep sees it */
		if (watched || chan_track(set, r, &a) != 1)
			break;
	}
	return watch_reg(r, w, want, 0);
}

/* What a sleeper on its own set watches: the wake eventfd, chan_ep, and
 * what the candidates still need (arm_reg). */
static int arm_locked(struct ep_set *set, struct watch *w, int *armed)
{
	struct ep_reg *r, *next;
	int err = 0;

	if (set->wake_fd >= 0)
		err = shim_watch_add(
		    w, (struct pollfd){.fd = set->wake_fd, .events = POLLIN},
		    set->owner, wake_end, set);
	if (!err && set->chan_ep >= 0)
		err = shim_watch_add(
		    w, (struct pollfd){.fd = set->chan_ep, .events = POLLIN},
		    NULL, NULL, NULL);
	for (r = set->cand; r && !err; r = next) {
		next = r->cand_next;
		err = arm_reg(set, r, w, armed);
	}
	return err;
}

/* Step 3: sleep until the kernel set, a kick or a watched rsocket is ready. */
/*
 * What a sleeper holds, given back by wait_cancelled when its thread is
 * cancelled in the sleep (a cancellation point, as epoll_wait is): else
 * the connections it watches would stay open after their close.
 */
struct wait_hold {
	struct watch *w;      /* the sleep's watch */
	struct shim_sock *es; /* the caller's reference to the epoll sock */
};

static void wait_cancelled(void *arg)
{
	struct wait_hold *h = arg;

	shim_watch_done(h->w);
	shim_sock_put(h->es);
}

static int sleep_on(struct shim_sock *es, int timeout_ms, const sigset_t *mask)
{
	struct ep_set *set = es->epset;
	struct watch w = {0};
	struct wait_hold h = {.w = &w, .es = es};
	int ret, cs, armed = 0;

	/* no cancellation while the watch takes its references (rsockets'
	 * looks at the connections are cancellation points): only in the
	 * sleep, where the cleanup gives them back */
	pthread_setcancelstate(PTHREAD_CANCEL_DISABLE, &cs);
	ret = shim_watch_add(&w,
			     (struct pollfd){.fd = kfd(set), .events = POLLIN},
			     NULL, NULL, NULL);
	if (!ret) {
		pthread_mutex_lock(&set->lock);
		ret = arm_locked(set, &w, &armed);
		pthread_mutex_unlock(&set->lock);
	}
	pthread_setcancelstate(cs, NULL);
	if (ret) {
		shim_watch_done(&w);
		return ret;
	}
	/* (tests/rdma/56-idlecost.sh reads this line) */
	shim_dbg("epoll %d: sleeping on %d fd(s), timeout %d%s; %d emulated, "
		 "%d armed",
		 kfd(set), w.n, timeout_ms, w.recheck ? " (rechecking)" : "",
		 __atomic_load_n(&set->nemul, __ATOMIC_RELAXED), armed);
	pthread_cleanup_push(wait_cancelled, &h);
	ret = shim_watch_wait(&w, timeout_ms, mask);
	pthread_cleanup_pop(0);
	shim_watch_done(&w);
	return ret;
}

/*
 * Nothing to emulate: the kernel waits, with the caller's timeout and
 * sigmask (atomically), counted as a direct waiter (by the caller) so
 * that kick() can wake it.  Returns events, 0 on timeout or a wake-up that
 * brought none.
 */
/* The kernel's wait, or -errno.  No cancellation cleanup here: it would
 * cost every epoll_wait a sigsetjmp (about 100 instructions), and a thread
 * cancelled in it holds no connection, only the epoll sock's reference
 * and its count as a direct waiter (memory, until exit). */
static int pwait_direct(struct shim_sock *es, struct epoll_event *evs, int max,
			int timeout, const sigset_t *mask)
{
	int n = REAL(epoll_pwait)(kfd(es->epset), evs, max, timeout, mask);

	return n < 0 ? -errno : n;
}

static int wait_direct(struct shim_sock *es, struct epoll_event *evs, int max,
		       int timeout, const sigset_t *mask)
{
	struct ep_set *set = es->epset;
	int n, e = 0;

	n = pwait_direct(es, evs, max, timeout, mask);
	if (n < 0)
		e = -n;
	/* Translated while still counted: the graves stay until then. */
	if (n > 0 && __atomic_load_n(&set->wake_fd, __ATOMIC_ACQUIRE) >= 0) {
		pthread_mutex_lock(&set->lock);
		set->stamp++;
		n = translate_locked(set, evs, 0, n);
		pthread_mutex_unlock(&set->lock);
	}
	__atomic_sub_fetch(&set->direct_waiters, 1, __ATOMIC_SEQ_CST);
	if (__atomic_load_n(&set->grave, __ATOMIC_ACQUIRE)) {
		pthread_mutex_lock(&set->lock);
		reap_locked(set);
		pthread_mutex_unlock(&set->lock);
	}
	return n < 0 ? -e : n;
}

/*
 * Steps 1 and 2, under the set's lock so that no registration can go
 * between the kernel's answer and its translation.  Fair as the kernel's
 * ready list: the registry's and the kernel's turns alternate (see
 * ep_set.cursor), each fd at most once per call, so with more ready than
 * max every ready fd still comes up in turn, whatever its kind.  The walk
 * is still one rpoll over the whole registry.
 */
static int gather(struct ep_set *set, struct epoll_event *evs, int max)
{
	struct scan sc;
	bool fetched = false, rescanned = false;
	int out = 0, cs;

	/* The kernel's and rsockets' zero-timeout looks under the lock are
	 * cancellation points: a cancel here would leave the lock held. */
	shim_nocancel_enter(&cs);
	pthread_mutex_lock(&set->lock);
	set->stamp++;
	drain_chan(set);
	out = scan_take(set, &sc);
	if (!out && !sc.n) {
		set->kturn = true; /* nothing (more) to walk in this turn */
		set->turn++;
	}
	while (out >= 0 && out < max) {
		if (set->kturn && !fetched) {
			fetched = true;
			out = kernel_turn(set, evs, out, max);
		} else if (!set->kturn && sc.left) {
			out = rdma_turn(set, &sc, evs, out, max);
		} else if (!set->kturn && !rescanned && sc.skipped) {
			/* a turn ended in this call and the kernel had its
			 * own: the next turn, of those this call has not seen
			 * (none when its first look took every candidate:
			 * under the lock, only the walk adds one, and only
			 * one it has seen) */
			rescanned = true;
			scan_done(&sc);
			if (scan_take(set, &sc) < 0 || !sc.n)
				break;
		} else {
			break;
		}
	}
	pthread_mutex_unlock(&set->lock);
	shim_nocancel_leave(cs);
	scan_done(&sc);
	return out;
}

static int wait_loop(struct shim_sock *es, struct epoll_event *evs, int max,
		     int timeout, const sigset_t *mask)
{
	struct ep_set *set = es->epset;
	int64_t deadline = timeout > 0 ? shim_now_ms() + timeout : 0;

	if (max <= 0 || max > (int)(INT_MAX / sizeof(*evs)))
		return -EINVAL;
	for (;;) {
		int n, left = timeout, r;
		/* a handler waits (it came with the last wake, or inside
		 * librdmacm): look, and say EINTR if nothing is there, as the
		 * kernel's wait does -- never sleep with it waiting */
		bool intr = shim_sig_waiting();

		if (timeout > 0) {
			left = (int)(deadline - shim_now_ms());
			if (left < 0)
				left = 0;
		}
		/* Count ourselves before looking (kick() reads the count
		 * after adding): one of us sees the other. */
		__atomic_add_fetch(&set->direct_waiters, 1, __ATOMIC_SEQ_CST);
		if (!__atomic_load_n(&set->nemul, __ATOMIC_SEQ_CST)) {
			n = wait_direct(es, evs, max, intr ? 0 : left, mask);
			if (n == 0 && intr)
				return -EINTR;
			if (n != 0 || left == 0)
				return n;
			continue;
		}
		__atomic_sub_fetch(&set->direct_waiters, 1, __ATOMIC_SEQ_CST);
		n = gather(set, evs, max);
		if (n > 0)
			shim_watch_delivered();
		if (n != 0 || left == 0)
			return n;
		if (intr || shim_sig_waiting())
			return -EINTR;
		r = sleep_on(es, left, mask);
		if (r < 0)
			return r;
	}
}

/*
 * What epoll_pwait's mask blocks stays blocked for the whole call, as the
 * kernel sets the mask for it: the shim's wait looks, spins and sleeps in
 * pieces, and only its sleeps take the mask (atomically, so a signal the
 * mask lets through still ends them with EINTR); a signal the mask blocks
 * must not land between two pieces, where the call would say EINTR while
 * the kernel's times out and runs the handler after.  So the mask's
 * signals are added to the thread's for the call, and the thread's own
 * mask is back before the edge ends: a signal held meanwhile is run by the
 * caller (EPOLL_WAIT_BODY) once the result is decided.  Two system calls,
 * only for a wait with a mask on a set with RDMA registrations.
 */
static int wait_slow(struct shim_sock *es, struct epoll_event *evs, int max,
		     int timeout, const sigset_t *mask)
{
	struct shim_wait_mask wm;
	int r;

	if (!shim_wait_mask_begin(&wm, mask))
		return wait_loop(es, evs, max, timeout, mask);
	/* cancelled: the wait's mask stays, as the kernel's (sigdefer.h) */
	pthread_cleanup_push(shim_wait_mask_cancelled, &wm);
	r = wait_loop(es, evs, max, timeout, mask);
	pthread_cleanup_pop(0);
	pthread_sigmask(SIG_SETMASK, &wm.old, NULL);
	return r;
}

/* A close() of epfd that came first sends the call to what epfd names
 * after it (tryget fails).  A handler of a signal that ended the sleep
 * runs at the end, with nothing held (base/sigdefer.c). */
#define EPOLL_WAIT_BODY(real_call)                                             \
	struct shim_sock *es;                                                  \
	int r;                                                                 \
	do {                                                                   \
		es = shim_fd_get(epfd);                                        \
		if (likely(!es || !shim_kind_is(es, SHIM_KF_EPSET) ||          \
			   shim_in_lib()))                                     \
			return real_call;                                      \
		/* a cancellation point: a cancel pending acts as the call     \
		 * starts, ready or not, as glibc's; before the reference */   \
		shim_testcancel();                                             \
	} while (unlikely(                                                     \
	    !shim_sock_tryget(epfd, es, SHIM_KINDS_WITH(SHIM_KF_EPSET))));     \
	shim_sig_edge_enter();                                                 \
	r = wait_slow(es, evs, max, timeout, sigmask);                         \
	shim_sock_put(es);                                                     \
	if (shim_sig_edge_leave())                                             \
		shim_sig_run();                                                \
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
	struct shim_sock *set0;
	int timeout;

	if (!REAL(epoll_pwait2)) {
		errno = ENOSYS;
		return -1;
	}
	/* a kernel epoll fd: the kernel checks the timeout itself */
	set0 = shim_fd_get(epfd);
	if (likely(!set0 || !shim_kind_is(set0, SHIM_KF_EPSET) ||
		   shim_in_lib()))
		return REAL(epoll_pwait2)(epfd, evs, max, tmo, sigmask);
	if (unlikely(!shim_ts_valid(tmo))) {
		errno = EINVAL; /* the kernel's first check, before epfd's */
		return -1;
	}
	timeout = shim_ts_to_ms(tmo);
	EPOLL_WAIT_BODY(REAL(epoll_pwait2)(epfd, evs, max, tmo, sigmask));
}
