/* SPDX-License-Identifier: MIT */
/*
 * Rendezvous and data path over rsockets.  Thin on purpose: the semantics
 * (fallback, addresses, readiness) live in preload/; this file only turns
 * librdmacm's errno convention into -errno and keeps librdmacm's own libc
 * calls out of the shim.
 */
#include "glue.h"
#include "glue_int.h"
#include "addr.h"
#include "compat.h"
#include "log.h"

#include <arpa/inet.h>
#include <limits.h>
#include <netinet/tcp.h>
#include <rdma/rdma_cma.h>
#include <rdma/rsocket.h>
#include <pthread.h>
#include <sched.h>
#include <infiniband/verbs.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/file.h>
#include <sys/syscall.h>
#include <sys/stat.h>
#include <sys/timerfd.h>
#include <time.h>

static int avail_state; /* 0 unknown, 1 yes, -1 no */
static bool any_iwarp;	/* set with avail_state: an iWARP device is here */

/*
 * librdmacm opens every device's verbs context once, at its first rsocket,
 * and keeps them in static state: a fork child inherits contexts that
 * belong to its parent's address space, and an rsocket made there connects
 * but does not carry data (seen in tests/rdma/85-fork.sh).  So a child of a
 * process that used rsockets stays on TCP; a child forked before any
 * rsocket existed starts afresh and may use RDMA.
 */
static bool lib_used, fork_tainted;

/*
 * librdmacm 44 accepts on one service thread (listen_svc), and its
 * rdma_accept there blocks until the client's connection is established.
 * rlisten() and a listener's rclose() hold the library's service mutex
 * while they wait for that thread; a non-blocking rconnect() takes the same
 * mutex on its way out -- after sending its request, when address and route
 * resolution were done at once (as they can be for a local address).  When
 * the client and the listener are in one process, that is a cycle: the
 * service thread waits for the client, the client (inside rconnect) for the
 * mutex, the mutex holder for the service thread -- until the CM gives up
 * and the connect fails with ETIMEDOUT (tests/rdma/35-shim-semantics.sh,
 * about 1 run in 10: three threads each listening and connecting).  Holding
 * svc_mu around those three calls breaks it: while a listener call waits,
 * no rconnect is in the middle of its request, and a client whose request
 * went out finishes its handshake in sg_wait, which needs neither lock.
 * A connect waits for svc_mu within its own timeout (a listener call can
 * be held up by a remote client that stalls mid-handshake) and falls back.
 */
static pthread_mutex_t svc_mu = PTHREAD_MUTEX_INITIALIZER;

/* The lock's fd while a thread here holds it: a fork child closes its
 * copy (a flock belongs to the open file, so the copy would hold it). */
static int listen_lock_held = -1;

static void bells_fork_child(void);
static void bell_ring(int rs);
static void arming_fork_child(void);
static bool arming_here(int rs);
static void shut_forget(int rs);

static void sg_fork_child(void)
{
	int lk = __atomic_exchange_n(&listen_lock_held, -1, __ATOMIC_ACQ_REL);

	if (lk >= 0)
		REAL(close)(lk); /* the parent's holder lets go of it there */
	pthread_mutex_init(&svc_mu, NULL);
	sg_negcache_fork_child();
	sg_reap_fork_child();
	sg_sleep_fork_child();
	bells_fork_child();
	arming_fork_child();
	if (__atomic_load_n(&lib_used, __ATOMIC_ACQUIRE))
		fork_tainted = true;
}
/* The librdmacm gate (compat.c), read once at start: on a release the
 * shim was not checked against, RDMA is not used at all. */
static struct sg_rdmacm rdmacm;

static void sg_start(void)
{
	char desc[320];

	sg_threads_start();
	sg_rdmacm_probe(&rdmacm);
	sg_rdmacm_describe(&rdmacm, desc, sizeof(desc));
	if (rdmacm.known) {
		shim_info("librdmacm %d.%d (%s): %s", rdmacm.major,
			  rdmacm.minor, rdmacm.path, desc);
		return;
	}
	__atomic_store_n(&avail_state, -1, __ATOMIC_RELEASE);
	shim_warn("librdmacm %s: %s; checked: rdma-core %d.0 to %d.x",
		  rdmacm.path[0] ? rdmacm.path : "(none)", desc,
		  SG_RDMACM_OLDEST_MAJOR, SG_RDMACM_NEWEST_MAJOR);
}
SHIM_STARTUP(GLUE, .start = sg_start, .child = sg_fork_child);

const struct sg_rdmacm *sg_rdmacm(void)
{
	return &rdmacm;
}

int sg_listener_cap(void)
{
	return rdmacm.listener_cap;
}

bool sg_fork_tainted(void)
{
	return fork_tainted;
}

bool sg_available(void)
{
	int st = __atomic_load_n(&avail_state, __ATOMIC_ACQUIRE);

	if (unlikely(fork_tainted))
		return false;
	struct ibv_device **list;
	struct stat sb;
	bool iwarp = false;
	int n = 0;

	if (likely(st))
		return st > 0;
	/* Cheap checks first: no rdma_cm node means no RDMA for sure. */
	if (stat("/dev/infiniband/rdma_cm", &sb) == 0) {
		shim_enter_lib();
		list = ibv_get_device_list(&n);
		for (int i = 0; list && i < n; i++)
			iwarp |= list[i]->transport_type == IBV_TRANSPORT_IWARP;
		if (list)
			ibv_free_device_list(list);
		shim_leave_lib();
	}
	st = n > 0 ? 1 : -1;
	/* Threads asking at once all look; the first to answer says so (and
	 * publishes any_iwarp before avail_state). */
	int unknown = 0;
	__atomic_store_n(&any_iwarp, iwarp, __ATOMIC_RELAXED);
	if (__atomic_compare_exchange_n(&avail_state, &unknown, st, false,
					__ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE))
		shim_info("RDMA %s (%d device%s%s)",
			  st > 0 ? "available" : "not available", n,
			  n == 1 ? "" : "s", iwarp ? ", iWARP" : "");
	return st > 0;
}

bool sg_iwarp(void)
{
	return sg_available() && __atomic_load_n(&any_iwarp, __ATOMIC_RELAXED);
}

/* Wait for a non-blocking rconnect to finish; 0 or -errno. */
static int wait_connected(int rs, int timeout_ms)
{
	struct pollfd p = {.fd = rs, .events = POLLOUT};
	int err = 0, r;
	socklen_t elen = sizeof(err);

	r = sg_wait(&p, 1, timeout_ms);
	if (r == 0)
		return -ETIMEDOUT;
	if (r < 0)
		return r;
	r = (int)LIB_CALL(rgetsockopt(rs, SOL_SOCKET, SO_ERROR, &err, &elen));
	if (r < 0)
		return r;
	if (err)
		return -err;
	/* (POLLHUP alone: connected, and the peer has closed already) */
	if (p.revents & (POLLERR | POLLNVAL))
		return -ECONNREFUSED;
	return 0;
}

static void cm_track(int rs);

/* What is left of a connect's timeout_ms, counted from t0 (>= 0). */
static int ms_left(int64_t t0, int timeout_ms)
{
	long left = timeout_ms - (long)((shim_now_us() - t0) / 1000);

	return left > 0 ? (int)left : 0;
}

/* svc_mu within what is left of a connect's timeout: 0, or -EBUSY (a
 * local wait, not the peer's doing: connect.c does not cache the peer).
 * (pthread_mutex_timedlock: its deadline is CLOCK_REALTIME.) */
static int svc_lock_within(int64_t t0, int timeout_ms)
{
	struct timespec dl;

	if (pthread_mutex_trylock(&svc_mu) == 0)
		return 0;
	dl = shim_deadline(CLOCK_REALTIME, ms_left(t0, timeout_ms));
	return pthread_mutex_timedlock(&svc_mu, &dl) ? -EBUSY : 0;
}

/* Bind the connecting rsocket to src, the kernel socket's address and
 * port.  An address the program chose (bind, IP_BIND_ADDRESS_NO_PORT)
 * must hold: RDMA from another would not leave from it, as the kernel's
 * connection does; -EADDRNOTAVAIL (no RDMA device there: TCP).  The
 * wildcard's port may differ. */
static int bind_src(int rs, const struct sockaddr *src, socklen_t srclen)
{
	long b = LIB_CALL(rbind(rs, src, srclen));

	if (b >= 0)
		return 0;
	if (!shim_addr_is_any(src))
		return -EADDRNOTAVAIL;
	shim_dbg("rsocket %d: rbind to the TCP port failed; ports differ", rs);
	return 0;
}

/* The rendezvous's first step: a non-blocking rsocket (bound to src if
 * given) and its request sent.  svc_mu is waited for within timeout_ms of
 * t0, or (timeout_ms < 0) only tried: -EBUSY.  Returns the rsocket, with
 * *r 0 (connected) or -EINPROGRESS; or -errno (nothing is left). */
static int connect_start(const struct sockaddr *dst, socklen_t len,
			 const struct sockaddr *src, socklen_t srclen,
			 int64_t t0, int timeout_ms,
			 const struct sg_sockopts *bufs, int *r)
{
	bool locked = false;
	int rs;

	/* Only tried: before anything is made (an rsocket made and closed
	 * again on every try would hold its port at the reaper). */
	if (timeout_ms < 0) {
		if (pthread_mutex_trylock(&svc_mu))
			return -EBUSY;
		locked = true;
	}
	__atomic_store_n(&lib_used, true, __ATOMIC_RELEASE);
	rs = (int)LIB_CALL(rsocket(dst->sa_family, SOCK_STREAM, 0));
	if (rs < 0) {
		if (locked)
			pthread_mutex_unlock(&svc_mu);
		return rs;
	}
	shut_forget(rs); /* a number a fork child's old connection had */
	*r = sg_apply_tunables(rs, &shim_cfg, bufs);
	if (*r == 0 && src)
		*r = bind_src(rs, src, srclen);
	if (*r == 0)
		*r = sg_set_nonblock(rs, true);
	if (*r == 0 && !locked) {
		*r = svc_lock_within(t0, timeout_ms);
		locked = *r == 0;
	}
	/* (keepalive talks to rsockets' service threads too: see svc_mu;
	 * refused, the kernel socket has it, and the connection goes on) */
	if (*r == 0)
		(void)sg_apply_keepalive(rs, bufs);
	if (*r == 0) {
		shim_svc_guard = true;
		*r = (int)LIB_CALL_QUIET(rconnect(rs, dst, len));
		shim_svc_guard = false;
		/* A signal handler (a profiling timer, say) says nothing
		 * about the peer: the rendezvous goes on within its time. */
		if (*r == -EINTR)
			*r = -EINPROGRESS;
	}
	if (locked)
		pthread_mutex_unlock(&svc_mu);
	if (*r < 0 && *r != -EINPROGRESS) {
		sg_close(rs);
		return *r;
	}
	return rs;
}

int sg_connect(const struct sockaddr *dst, socklen_t len,
	       const struct sockaddr *src, socklen_t srclen, int timeout_ms,
	       const struct sg_sockopts *bufs)
{
	int64_t t0 = shim_now_us();
	int rs, r = 0;

	rs = connect_start(dst, len, src, srclen, t0, timeout_ms, bufs, &r);
	if (rs < 0)
		return rs;
	while (r == -EINPROGRESS || r == -EINTR)
		r = wait_connected(rs, ms_left(t0, timeout_ms));
	if (r == 0)
		r = sg_set_nonblock(rs, false);
	if (r < 0) {
		sg_close(rs);
		return r;
	}
	cm_track(rs);
	return rs;
}

int sg_connect_begin(const struct sockaddr *dst, socklen_t len,
		     const struct sockaddr *src, socklen_t srclen,
		     const struct sg_sockopts *bufs, bool *done)
{
	int r = 0, rs = connect_start(dst, len, src, srclen, 0, -1, bufs, &r);

	*done = rs >= 0 && r == 0;
	if (*done)
		cm_track(rs);
	return rs;
}

int sg_connect_result(int rs, short revents)
{
	int err = 0, r;
	socklen_t elen = sizeof(err);

	if (!revents)
		return -EINPROGRESS;
	r = (int)LIB_CALL(rgetsockopt(rs, SOL_SOCKET, SO_ERROR, &err, &elen));
	if (r < 0)
		return r;
	if (err)
		return -err;
	/* (POLLHUP alone: connected, and the peer has closed already) */
	if (revents & (POLLERR | POLLNVAL))
		return -ECONNREFUSED;
	if (!(revents & (POLLOUT | POLLHUP)))
		return -EINPROGRESS;
	cm_track(rs);
	return 0;
}

/*
 * Listening rsocket -> its accept-queue fd.  rlisten() creates that queue as
 * its first socketpair(); the shim's socketpair() hands it to us through
 * shim_pair_capture while rlisten runs on this thread.
 */
#define MAX_LISTEN_RS 65536 /* rsocket indexes are below this */
static int listen_pollfd[MAX_LISTEN_RS];
/* rlisten succeeded: its rclose talks to the listen service (svc_mu) */
static unsigned char listening[MAX_LISTEN_RS];

/*
 * A connected rsocket learns that its peer is gone only from rdma_cm's
 * DISCONNECTED event, and in rdma-core 44 only rsockets' connect service
 * thread watches for it: the thread the shim keeps its rsockets away from
 * (svc.c).  So a killed peer (its kernel sends the disconnect) would never
 * be noticed by a reader or a writer blocked on a full window.  The event
 * channel's fd is the rsocket's own number; the shim sleeps on a duplicate
 * of it (rpoll would take the number for the rsocket itself), and once a
 * post-connection event is there the rsocket is "gone": it reads as EOF
 * once drained, sends fail, polls show POLLHUP.  Nothing is added to the
 * busy-poll path: the duplicate is watched only while sleeping.
 */
static int cm_dup[MAX_LISTEN_RS];	     /* duplicate + 1, 0 = none */
static unsigned char cm_gone[MAX_LISTEN_RS]; /* sticky */
static unsigned char tfailed[MAX_LISTEN_RS]; /* sg_timed_out, sticky */
static unsigned char bounded[MAX_LISTEN_RS]; /* see rdma_connect */
static unsigned char ack_to[MAX_LISTEN_RS];  /* see ack_timeout */
/* rshutdown under way: it makes the channel blocking for a while; and an
 * arm's look under way (sg_arm).  Each side raises its own flag, then
 * reads the other's: at least one of them sees the other. */
static unsigned char shutting[MAX_LISTEN_RS];
static unsigned char arming[MAX_LISTEN_RS];
/* The program's own shutdown of rs (sg_shut_note): 1 read, 2 write;
 * shut_noted: whether any was ever noted (a fork child's reset). */
static unsigned char shut_local[MAX_LISTEN_RS];
static bool shut_noted;
static int marks_up; /* how many of the two flags are raised, in all */

static void mark_up(unsigned char *flag)
{
	__atomic_add_fetch(&marks_up, 1, __ATOMIC_RELAXED);
	__atomic_add_fetch(flag, 1, __ATOMIC_SEQ_CST);
}

static void mark_down(unsigned char *flag)
{
	__atomic_sub_fetch(flag, 1, __ATOMIC_SEQ_CST);
	__atomic_sub_fetch(&marks_up, 1, __ATOMIC_RELAXED);
}

static void cm_track(int rs)
{
	int fd;

	if (rs < 0 || rs >= MAX_LISTEN_RS)
		return;
	fd = REAL(fcntl)(rs, F_DUPFD_CLOEXEC, 0);
	cm_gone[rs] = 0;
	shut_forget(rs);
	__atomic_store_n(&tfailed[rs], 0, __ATOMIC_RELAXED);
	cm_dup[rs] = fd >= 0 ? fd + 1 : 0;
}

/* Hand the duplicate over (reap.c watches it while a close is slow): -1
 * if there is none, or if the end was already taken from it. */
static int cm_release(int rs)
{
	int fd;

	if (rs < 0 || rs >= MAX_LISTEN_RS || !cm_dup[rs])
		return -1;
	fd = cm_dup[rs] - 1;
	if (cm_gone[rs]) {
		REAL(close)(fd);
		fd = -1;
	}
	cm_dup[rs] = 0;
	cm_gone[rs] = 0;
	return fd;
}

static bool cm_is_gone(int rs)
{
	return rs >= 0 && rs < MAX_LISTEN_RS && cm_dup[rs] &&
	       __atomic_load_n(&cm_gone[rs], __ATOMIC_ACQUIRE);
}

/*
 * Does the duplicate hold an event?  It is the disconnect unless it is the
 * ESTABLISHED that an accepted rsocket consumes on its first use (which a
 * look at the rsocket does).  Look twice: an ESTABLISHED that arrives just
 * after the first look (a non-blocking accept does not wait for it) is
 * taken by the second, so it is never mistaken for the end -- and never
 * consumed here, which would leave the rsocket accepting for good.  The
 * first thread to see the end takes it.
 */
static void cm_check(int rs)
{
	struct pollfd r = {.fd = rs, .events = POLLIN | POLLOUT};
	int d = cm_dup[rs] - 1;
	unsigned char no = 0;
	int ev;

	for (int look = 0; look < 2; look++) {
		if (!sg_cm_ready(d))
			return;
		(void)LIB_CALL(rpoll(&r, 1, 0));
	}
	if (!sg_cm_ready(d))
		return;
	if (!__atomic_compare_exchange_n(&cm_gone[rs], &no, 1, false,
					 __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE))
		return; /* another thread took it */
	ev = sg_cm_take_end(d);
	/* an epoll set's edge on the duplicate is lost if another wait took
	 * the event: the bell tells it (the QP's flush would, later) */
	bell_ring(rs);
	shim_dbg("rsocket %d: the connection ended (rdma_cm event %s)", rs,
		 ev >= 0 ? rdma_event_str((enum rdma_cm_event_type)ev)
			 : "unreadable");
}

/*
 * soft-RoCE reads a transport retry count of 7 as "retry forever"
 * (drivers/infiniband/sw/rxe/rxe_comp.c), where the IB spec and hardware
 * read it as 7 retries, and rsockets always asks for 7: there a keepalive
 * probe to a peer host that vanished is retried without end, and its
 * reader waits for good.  A connection whose program wants such a peer
 * found (keepalive or TCP_USER_TIMEOUT set before its connect) asks for 6
 * instead: on hardware one retry less, on soft-RoCE an end.  rsockets calls
 * rdma_connect through librdmacm's PLT from inside its connect state
 * machine, on whichever thread drives it; the rsocket's number is its
 * rdma_cm channel's fd.  (For IB and RoCE the client's count is also the
 * listener side's; iWARP's retries are its TCP's.)
 */
int sg_update_keepalive(int rs, const struct sg_sockopts *o)
{
	int r;

	if (pthread_mutex_trylock(&svc_mu))
		return -EBUSY;
	r = sg_apply_keepalive(rs, o);
	pthread_mutex_unlock(&svc_mu);
	return r;
}

/*
 * The QP's local ACK timeout, as an exponent (4.096 us << t), for a
 * connection whose program gives a silent peer silence_ms: a transport
 * gives up after its first transmission and 6 retries, 7 timeouts, so
 * each is a seventh of that, rounded up.  Only ever shorter than rdma_cm's
 * usual (19 here on RoCE, ~2.1 s: the end came 16 s after the first
 * unanswered keepalive), never below 67 ms (14): 0 = leave it.
 */
static unsigned char ack_timeout(unsigned int silence_ms)
{
	uint64_t each_us = (uint64_t)silence_ms * 1000 / 7;
	unsigned char t = 14;

	if (!silence_ms)
		return 0;
	while (t < 19 && (4096ull << t) / 1000 < each_us)
		t++;
	return t < 19 ? t : 0;
}

void sg_set_bounded(int rs, bool on)
{
	if (rs >= 0 && rs < MAX_LISTEN_RS)
		__atomic_store_n(&bounded[rs], on, __ATOMIC_RELAXED);
}

static void set_ack_to(int rs, const struct sg_sockopts *o)
{
	if (rs >= 0 && rs < MAX_LISTEN_RS)
		__atomic_store_n(&ack_to[rs],
				 o->bounded ? ack_timeout(o->silence_ms) : 0,
				 __ATOMIC_RELAXED);
}

void sg_set_ack_timeout(int lrs, const struct sg_sockopts *o)
{
	set_ack_to(lrs, o);
}

/* The keepalive and silence bound the program asked for, on rs (its
 * probes: sg_setsockopt in opts.c). */
int sg_apply_keepalive(int rs, const struct sg_sockopts *o)
{
	int r = 0;

	sg_set_bounded(rs, o->bounded);
	sg_set_ack_timeout(rs, o); /* (its ACK timeout: see above) */
	if (!o->keepalive)
		return 0;
	if (o->keepidle > 0)
		r = sg_setsockopt(rs, IPPROTO_TCP, TCP_KEEPIDLE,
				  &(unsigned int){(unsigned int)o->keepidle},
				  sizeof(unsigned int));
	if (r == 0)
		r = sg_setsockopt(rs, SOL_SOCKET, SO_KEEPALIVE, &(int){1},
				  sizeof(int));
	if (r < 0)
		shim_warn("rsocket %d: keepalive refused by rsockets (%s)", rs,
			  strerror(-r));
	return r;
}

/* rdma_cm's id of rsocket rs takes rs's ACK timeout (before its connect or
 * accept moves the QP to RTS); best effort (iWARP has none). */
static void apply_ack_to(struct rdma_cm_id *id, int rs)
{
	uint8_t t;

	if (rs < 0 || rs >= MAX_LISTEN_RS)
		return;
	t = __atomic_load_n(&ack_to[rs], __ATOMIC_RELAXED);
	if (t)
		(void)rdma_set_option(id, RDMA_OPTION_ID,
				      RDMA_OPTION_ID_ACK_TIMEOUT, &t,
				      sizeof(t));
}

/* librdmacm's connect and accept, both of this shape. */
typedef int conn_fn(struct rdma_cm_id *, struct rdma_conn_param *);

SHIM_EXPORT int rdma_connect(struct rdma_cm_id *id,
			     struct rdma_conn_param *param)
{
	static void *real;
	conn_fn *f = (conn_fn *)sg_next_sym(&real, "rdma_connect");
	int rs = id && id->channel ? id->channel->fd : -1;

	if (!f) {
		errno = ENOSYS;
		return -1;
	}
	if (param && param->retry_count > 6 && shim_in_lib() && rs >= 0 &&
	    rs < MAX_LISTEN_RS &&
	    __atomic_load_n(&bounded[rs], __ATOMIC_RELAXED)) {
		param->retry_count = 6;
		apply_ack_to(id, rs);
	}
	return f(id, param);
}

/*
 * A bound on what a listener holds before the program accepts: rsockets
 * completes every RDMA connection on its service thread, each with its QP
 * and pinned buffers (~1 MiB), whether or not the program ever accepts.
 * A listener's completed, not yet accepted connections are capped as the
 * kernel caps its accept queue: backlog (clamped by net.core.somaxconn)
 * plus one.  One more is rejected before rsockets gives it to the queue:
 * its client's connect is refused and falls back to TCP, where the
 * kernel's own backlog applies (a full queue: its SYN waits and is sent
 * again).  Rejecting, not dropping, keeps the client from waiting out an
 * RDMA timeout for a listener that is only busy.
 */
static int pend[MAX_LISTEN_RS];	    /* atomic: accepted, not yet taken */
static int pend_cap[MAX_LISTEN_RS]; /* 0: no bound known */
static unsigned char capped[MAX_LISTEN_RS]; /* the warning, once */

/* The kernel's listen(): a backlog over net.core.somaxconn (a negative one
 * too, as unsigned) is somaxconn. */
static int backlog_cap(int backlog)
{
	static int somax;
	int m = __atomic_load_n(&somax, __ATOMIC_RELAXED);

	if (!m) {
		int fd =
		    open("/proc/sys/net/core/somaxconn", O_RDONLY | O_CLOEXEC);
		char b[16] = "";

		if (fd >= 0) {
			(void)!REAL(read)(fd, b, sizeof(b) - 1);
			REAL(close)(fd);
		}
		m = atoi(b);
		if (m <= 0)
			m = 4096; /* the kernel's default since 5.4 */
		__atomic_store_n(&somax, m, __ATOMIC_RELAXED);
	}
	if ((unsigned int)backlog > (unsigned int)m)
		backlog = m;
	return backlog + 1; /* sk_acceptq_is_full: more than backlog */
}

/* One more completed connection for listener lrs: false when it is full. */
static bool pend_take(int lrs)
{
	int cap;

	if (lrs < 0 || lrs >= MAX_LISTEN_RS)
		return true;
	cap = __atomic_load_n(&pend_cap[lrs], __ATOMIC_RELAXED);
	if (__atomic_add_fetch(&pend[lrs], 1, __ATOMIC_SEQ_CST) <= cap || !cap)
		return true;
	__atomic_sub_fetch(&pend[lrs], 1, __ATOMIC_SEQ_CST);
	if (!__atomic_exchange_n(&capped[lrs], 1, __ATOMIC_RELAXED))
		shim_warn("RDMA listener %d: %d connections wait for accept "
			  "(the backlog): more are refused and fall back to "
			  "TCP",
			  lrs, cap);
	return false;
}

static void pend_give(int lrs)
{
	if (lrs >= 0 && lrs < MAX_LISTEN_RS &&
	    __atomic_sub_fetch(&pend[lrs], 1, __ATOMIC_SEQ_CST) < 0)
		__atomic_store_n(&pend[lrs], 0, __ATOMIC_SEQ_CST);
}

/*
 * A listener's close must end every connection its client may hold as
 * connected (the kernel resets them).  rsockets puts a connection on the
 * accept queue only when rdma_accept, on its listen service thread,
 * returns: after the connection's ESTABLISHED, which comes after the
 * client's connect returned.  A connection still there when the listener
 * goes was lost for good: rclose of the listener waits for the service
 * thread (RS_SVC_REM_CM), which then queues it on a queue rs_free closes
 * unread -- its QP and rdma_cm id live on, its client hears nothing until
 * the process exits (tests/rdma/52-kexact.sh, lclose).  So a listener's
 * state word: L_CLOSING once sg_listen_close began, below it the
 * connections admitted to the queue and not yet taken from it.  Past
 * L_CLOSING rdma_accept admits none: one that completes then is refused,
 * and rs_accept frees it -- an established one is disconnected by that
 * (rdma_destroy_id: the CM's DREQ), and its client sees the end; one
 * admitted before is waited for on the queue and closed there.
 */
#define L_CLOSING 0x40000000
static int lstate[MAX_LISTEN_RS];

/* One more connection for lrs's accept queue: false if it is closing. */
static bool admit(int lrs)
{
	int v;

	if (lrs < 0 || lrs >= MAX_LISTEN_RS)
		return true;
	v = __atomic_load_n(&lstate[lrs], __ATOMIC_RELAXED);
	do {
		if (v & L_CLOSING)
			return false;
	} while (!__atomic_compare_exchange_n(
	    &lstate[lrs], &v, v + 1, true, __ATOMIC_SEQ_CST, __ATOMIC_RELAXED));
	return true;
}

/* One taken off lrs's queue (raccept). */
static void admit_taken(int lrs)
{
	int v;

	if (lrs < 0 || lrs >= MAX_LISTEN_RS)
		return;
	v = __atomic_load_n(&lstate[lrs], __ATOMIC_RELAXED);
	do {
		if (!(v & ~L_CLOSING))
			return;
	} while (!__atomic_compare_exchange_n(
	    &lstate[lrs], &v, v - 1, true, __ATOMIC_SEQ_CST, __ATOMIC_RELAXED));
}

static bool lrs_closing(int lrs)
{
	return lrs >= 0 && lrs < MAX_LISTEN_RS &&
	       (__atomic_load_n(&lstate[lrs], __ATOMIC_SEQ_CST) & L_CLOSING);
}

/*
 * The server's policy on who may connect (ERDMA_SHIM_ACCEPT_FROM): rules on
 * the client's address and the listener's TCP port P.  A request no rule
 * lets in is refused before rsockets accepts it, as past the backlog: its
 * client falls back to TCP, where the kernel and its firewall decide.  The
 * address is the one the request carries (the new id's destination): what
 * the fabric delivered, not what a TCP handshake checked.
 */
static uint16_t accept_port[MAX_LISTEN_RS];  /* P; 0: not the shim's */
static unsigned char refused[MAX_LISTEN_RS]; /* the warning, once */

static bool peer_let_in(int lrs, struct rdma_cm_id *id)
{
	char ip[INET6_ADDRSTRLEN] = "an address that is not IP";
	struct sockaddr *sa;
	const void *a = NULL;
	uint16_t port;
	int fam;

	if (!shim_cfg.n_accept_from || lrs < 0 || lrs >= MAX_LISTEN_RS)
		return true;
	port = __atomic_load_n(&accept_port[lrs], __ATOMIC_RELAXED);
	if (!port)
		return true; /* the program's own rdma_cm listener */
	sa = rdma_get_peer_addr(id);
	fam = sa->sa_family;
	if (fam == AF_INET)
		a = &((struct sockaddr_in *)sa)->sin_addr;
	else if (fam == AF_INET6)
		a = &((struct sockaddr_in6 *)sa)->sin6_addr;
	if (shim_config_accepts(&shim_cfg, fam, a, port))
		return true;
	if (a)
		inet_ntop(fam, a, ip, sizeof(ip));
	if (!__atomic_exchange_n(&refused[lrs], 1, __ATOMIC_RELAXED))
		shim_warn("RDMA listener for TCP port %u: a connection from "
			  "%s refused (not in ERDMA_SHIM_ACCEPT_FROM): the "
			  "client falls back to TCP; later ones are logged at "
			  "debug",
			  port, ip);
	else
		shim_dbg("RDMA listener for TCP port %u: a connection from "
			 "%s refused (not in ERDMA_SHIM_ACCEPT_FROM)",
			 port, ip);
	return false;
}

/*
 * The listener's side of it: rsockets accepts on its listen service thread
 * (rs_accept), from the connect request event, whose listen_id is the
 * listening rsocket's id (its channel's fd: the listener's number).  The
 * retry count here is the client's (IB/RoCE); the ACK timeout is this
 * side's own.
 */
SHIM_EXPORT int rdma_accept(struct rdma_cm_id *id,
			    struct rdma_conn_param *param)
{
	static void *real;
	conn_fn *f = (conn_fn *)sg_next_sym(&real, "rdma_accept");
	struct rdma_cm_id *lid = id && id->event ? id->event->listen_id : NULL;
	int lrs, r;

	if (!f) {
		errno = ENOSYS;
		return -1;
	}
	if (!lid || !lid->channel)
		return f(id, param);
	lrs = lid->channel->fd;
	apply_ack_to(id, lrs);
	/* refused here, rs_accept rejects the request and frees what it
	 * made for it (rdma-core 44: its QP and buffers, at once) */
	if (lrs_closing(lrs) || !peer_let_in(lrs, id) || !pend_take(lrs)) {
		errno = ECONNREFUSED;
		return -1;
	}
	r = f(id, param);
	/* EAGAIN: rsockets queues it all the same (rs_accepting) */
	if (r && errno != EAGAIN && errno != EWOULDBLOCK) {
		pend_give(lrs);
		return r;
	}
	/* the listener went while this one completed: rs_accept frees it,
	 * and so disconnects it (see lstate) */
	if (!admit(lrs)) {
		pend_give(lrs);
		errno = ECONNREFUSED;
		return -1;
	}
	return r;
}

int sg_listen_pollfd(int lrs)
{
	if (lrs < 0 || lrs >= MAX_LISTEN_RS)
		return -1;
	return listen_pollfd[lrs] - 1; /* stored +1: 0 means none */
}

/* Around bind and listen: see listenlock.c. */
static int listen_lock(void)
{
	return sg_listen_lock(&listen_lock_held);
}

static void listen_unlock(int fd)
{
	sg_listen_unlock(fd, &listen_lock_held);
}

/*
 * The door was bound but rdma_cm refused its listen: another id is bound
 * on an overlapping address (one with SO_REUSEADDR that bound while the
 * reservation gave way to the door: twin.c), or on iWARP the port's kernel
 * TCP port is taken.  Nobody listens there then, and nobody can while an
 * id of ours stays bound: a new reservation is made next to the door
 * before the door is closed, and kept (twin->fd) for the listener's life.
 */
static void listen_refused(const struct sockaddr *addr, socklen_t len, int r,
			   struct sg_twin *twin)
{
	int k;

	if (r != -EADDRINUSE && r != -EADDRNOTAVAIL)
		return;
	k = sg_twin_reserve(addr, len, true, &twin->fd, &twin->id);
	if (k < 0) {
		twin->fd = -1;
		shim_warn("RDMA port %u: its RDMA listener could not listen "
			  "(%s) and the port could not be kept reserved (%s): "
			  "another user may listen there",
			  shim_addr_port(addr), strerror(-r), strerror(-k));
	}
}

int sg_listen(const struct sockaddr *addr, socklen_t len, int backlog,
	      const struct sg_sockopts *bufs, struct sg_twin *twin,
	      uint16_t tcp_port)
{
	int rs, r, one = 1, qfd = -1, lk = -1, held = -1, twin_fd = twin->fd;
	uint32_t twin_id = twin->id;

	twin->fd = -1; /* from here on: a new reservation, if one is made */
	__atomic_store_n(&lib_used, true, __ATOMIC_RELEASE);
	rs = (int)LIB_CALL(rsocket(addr->sa_family, SOCK_STREAM, 0));
	if (rs < 0)
		return rs;
	shut_forget(rs);
	if (rs >= MAX_LISTEN_RS) {
		sg_close(rs);
		return -EMFILE;
	}
	r = sg_apply_tunables(rs, &shim_cfg, bufs);
	sg_set_ack_timeout(rs, bufs);
	/* Non-blocking before rlisten: the accept queue inherits it. */
	if (r == 0)
		r = sg_set_nonblock(rs, true);
	if (r == 0)
		r = (int)LIB_CALL(rsetsockopt(rs, SOL_SOCKET, SO_REUSEADDR,
					      &one, sizeof(one)));
	if (r == 0) {
		lk = listen_lock();
		/* the reservation stays bound, with SO_REUSEADDR now, until
		 * the door is bound beside it; then it goes, and the door
		 * listens: the port is never free in between (twin.c) */
		if (twin_fd >= 0)
			held = sg_twin_hold(twin_fd, twin_id);
		r = (int)LIB_CALL(rbind(rs, addr, len));
		if (held >= 0)
			(void)sg_twin_let_go(held, twin_id);
	}
	if (r == 0) {
		/* before rlisten: its service thread may accept at once */
		__atomic_store_n(&pend[rs], 0, __ATOMIC_SEQ_CST);
		__atomic_store_n(&capped[rs], 0, __ATOMIC_RELAXED);
		__atomic_store_n(&pend_cap[rs], backlog_cap(backlog),
				 __ATOMIC_RELAXED);
		__atomic_store_n(&refused[rs], 0, __ATOMIC_RELAXED);
		__atomic_store_n(&accept_port[rs], tcp_port, __ATOMIC_RELAXED);
		__atomic_store_n(&lstate[rs], 0, __ATOMIC_SEQ_CST);
		pthread_mutex_lock(&svc_mu);
		shim_pair_capture = &qfd;
		r = (int)LIB_CALL_QUIET(rlisten(rs, backlog));
		shim_pair_capture = NULL;
		if (r == 0)
			listening[rs] = 1; /* even if we close it below */
		pthread_mutex_unlock(&svc_mu);
		if (r < 0)
			listen_refused(addr, len, r, twin);
	}
	if (lk >= 0)
		listen_unlock(lk);
	if (r == 0 && qfd < 0)
		r = -EPROTO; /* not the rsockets we know: stay on TCP */
	if (r < 0) {
		sg_close(rs);
		return r;
	}
	listen_pollfd[rs] = qfd + 1;
	return rs;
}

int sg_accept(int lrs, struct sockaddr *peer, socklen_t *len)
{
	int rs;

	shim_svc_guard = true;
	rs = (int)LIB_CALL_QUIET(raccept(lrs, peer, len));
	shim_svc_guard = false;

	if (rs == -EWOULDBLOCK)
		return -EAGAIN;
	if (rs < 0)
		return rs;
	pend_give(lrs); /* off the queue: room for one more */
	admit_taken(lrs);
	/* raccept hands back a socket that inherits nothing we rely on:
	 * make its mode explicit. */
	sg_set_nonblock(rs, false);
	cm_track(rs);
	return rs;
}

/*
 * How long a listener's close waits for a connection admitted to its
 * queue to appear there: rdma_accept has returned, and rs_accept writes
 * it at once -- only a starved service thread takes longer.  A connection
 * still in rdma_accept (its client's RTU not yet in) is not waited for.
 */
#define LCLOSE_WAIT_MS 2000

static int listen_close(int lrs)
{
	int64_t t0 = shim_now_us();
	int qfd = sg_listen_pollfd(lrs), rs, left;

	if (lrs >= 0 && lrs < MAX_LISTEN_RS)
		__atomic_or_fetch(&lstate[lrs], L_CLOSING, __ATOMIC_SEQ_CST);
	for (;;) {
		/* their clients see the end at once, as TCP's reset */
		while ((rs = sg_accept(lrs, NULL, NULL)) >= 0)
			sg_close(rs);
		if (lrs < 0 || lrs >= MAX_LISTEN_RS || qfd < 0 ||
		    !(__atomic_load_n(&lstate[lrs], __ATOMIC_SEQ_CST) &
		      ~L_CLOSING))
			break;
		left = ms_left(t0, LCLOSE_WAIT_MS);
		if (!left) {
			shim_warn("RDMA listener %d: a connection it accepted "
				  "is not on its queue after %d ms (a starved "
				  "thread): its client may see its end only "
				  "when this process exits",
				  lrs, LCLOSE_WAIT_MS);
			break;
		}
		(void)REAL(poll)(&(struct pollfd){.fd = qfd, .events = POLLIN},
				 1, left);
	}
	return sg_close(lrs);
}

/* With cancellation disabled: a cancel acted on in the wait for the queue
 * would leave the listener's rsocket, its port and the program's fd
 * behind (the close never reaches them). */
int sg_listen_close(int lrs)
{
	int cs, r;

	pthread_setcancelstate(PTHREAD_CANCEL_DISABLE, &cs);
	r = listen_close(lrs);
	pthread_setcancelstate(cs, NULL);
	return r;
}

/* Is the peer known to be gone (a disconnect seen now or before)? */
static bool cm_gone_now(int rs)
{
	if (rs < 0 || rs >= MAX_LISTEN_RS || !cm_dup[rs])
		return false;
	if (!cm_is_gone(rs))
		cm_check(rs);
	return cm_is_gone(rs);
}

/*
 * rclose waits for the rsocket's sends: it runs on a reaper (reap.c) that
 * close() waits for a bounded time.  A peer known to be gone has had its
 * QP moved to the error state (cm_check), so that close is quick.
 * The reaper runs rclose_locked, the rclose itself: see svc_mu for the lock.
 */
static int rclose_locked(int rs);

static void bell_close(int rs);

/* The thread is inside rshutdown, which may wait for a completion event
 * (see ibv_get_cq_event): saved and restored around it. */
static __thread bool cq_wait_ok;

int sg_close(int rs)
{
	(void)cm_gone_now(rs);
	bell_close(rs);
	if (rs >= 0 && rs < MAX_LISTEN_RS) {
		listen_pollfd[rs] = 0;
		__atomic_store_n(&pend_cap[rs], 0, __ATOMIC_RELAXED);
		__atomic_store_n(&accept_port[rs], 0, __ATOMIC_RELAXED);
		/* the number may name a program's own rdma_cm channel next */
		__atomic_store_n(&bounded[rs], 0, __ATOMIC_RELAXED);
		shut_forget(rs);
		__atomic_store_n(&ack_to[rs], 0, __ATOMIC_RELAXED);
	}
	return sg_reap(rs, cm_release(rs), rclose_locked);
}

static int rclose_locked(int rs)
{
	bool lsn = rs >= 0 && rs < MAX_LISTEN_RS && listening[rs];
	bool was = cq_wait_ok;
	int r;

	cq_wait_ok = true; /* rclose's rshutdown waits for its sends */
	if (lsn) {
		pthread_mutex_lock(&svc_mu);
		listening[rs] = 0; /* before rclose frees the number */
	}
	r = (int)LIB_CALL_QUIET(rclose(rs));
	if (lsn) {
		/* the listen service is done with it (RS_SVC_REM_CM): the
		 * number may name a program's own rdma_cm channel next, whose
		 * accepts the hook must not refuse (before any rlisten can
		 * take the number again: that waits for svc_mu) */
		__atomic_store_n(&lstate[rs], 0, __ATOMIC_SEQ_CST);
		pthread_mutex_unlock(&svc_mu);
	}
	cq_wait_ok = was;
	return r;
}

/* rshutdown(SHUT_WR/RDWR) waits for the sends too: a gone peer's end is
 * taken first (see sg_close). */
int sg_shutdown(int rs, int how)
{
	bool mark = rs >= 0 && rs < MAX_LISTEN_RS, was;
	int r;

	(void)cm_gone_now(rs);
	if (mark) {
		mark_up(&shutting[rs]);
		/* an arm that began before it ends first: a look, no sleep
		 * (not this thread's own, from a signal handler inside it) */
		while (__atomic_load_n(&arming[rs], __ATOMIC_SEQ_CST) >
		       (arming_here(rs) ? 1 : 0))
			sched_yield();
	}
	was = cq_wait_ok;
	cq_wait_ok = true; /* its wait for the sends (ibv_get_cq_event) */
	r = (int)LIB_CALL_QUIET(rshutdown(rs, how));
	cq_wait_ok = was;
	if (mark)
		mark_down(&shutting[rs]);
	return r;
}

int sg_set_nonblock(int rs, bool nonblock)
{
	long fl = LIB_CALL(rfcntl(rs, F_GETFL));

	if (fl < 0)
		return (int)fl;
	fl = nonblock ? (fl | O_NONBLOCK) : (fl & ~(long)O_NONBLOCK);
	return (int)LIB_CALL(rfcntl(rs, F_SETFL, (int)fl));
}

int sg_getsockname(int rs, struct sockaddr *addr, socklen_t *len)
{
	return (int)LIB_CALL(rgetsockname(rs, addr, len));
}

/*
 * Did rs's transport fail -- its QP's retries spent on a keepalive probe
 * or on data the peer never acknowledged -- with no end from its peer (no
 * rdma_cm event: that is a close or a reset)?  rsockets then reads as
 * EOF, writes as ECONNRESET and polls as POLLERR, with SO_ERROR EIO, which
 * this look takes: the answer is kept (tfailed, until the number's next
 * connection: cm_track).  Asked of a connection whose program wants a
 * dead peer found (bounded) only: elsewhere the end stays rsockets' EOF.
 * A peer's death also flushes the QP, and on iWARP the QP's error can come
 * a moment before the rdma_cm event that tells it: a timeout came after
 * seconds of silence, so waiting 20 ms for such an event costs nothing.
 */
bool sg_timed_out(int rs)
{
	socklen_t len = sizeof(int);
	int err = 0;

	if (rs < 0 || rs >= MAX_LISTEN_RS)
		return false;
	if (__atomic_load_n(&tfailed[rs], __ATOMIC_ACQUIRE))
		return true;
	if (!__atomic_load_n(&bounded[rs], __ATOMIC_RELAXED) ||
	    cm_gone_now(rs) ||
	    LIB_CALL(rgetsockopt(rs, SOL_SOCKET, SO_ERROR, &err, &len)) < 0 ||
	    err != EIO)
		return false;
	if (cm_dup[rs]) {
		struct pollfd p = {.fd = cm_dup[rs] - 1, .events = POLLIN};

		(void)REAL(poll)(&p, 1, 20);
		if (cm_gone_now(rs))
			return false;
	}
	__atomic_store_n(&tfailed[rs], 1, __ATOMIC_RELEASE);
	return true;
}

/* A gone rsocket: what is queued still reads, then EOF; sends fail. */
static ssize_t rd_gone(int rs, ssize_t r)
{
	return r == -EAGAIN && cm_is_gone(rs) ? 0 : r;
}

static ssize_t wr_gone(int rs, ssize_t r)
{
	return r == -EAGAIN && cm_is_gone(rs) ? -ECONNRESET : r;
}

ssize_t sg_recv(int rs, void *buf, size_t len, int flags)
{
	return rd_gone(rs, LIB_CALL(rrecv(rs, buf, len, flags)));
}

ssize_t sg_send(int rs, const void *buf, size_t len, int flags)
{
	return wr_gone(rs, LIB_CALL(rsend(rs, buf, len, flags)));
}

ssize_t sg_sendv(int rs, const struct iovec *iov, int iovcnt, int flags)
{
	struct msghdr m = {.msg_iov = (struct iovec *)iov,
			   .msg_iovlen = (size_t)iovcnt};

	return wr_gone(rs, LIB_CALL(rsendmsg(rs, &m, flags)));
}

/* What the program's own shutdown makes rs show, as the kernel's tcp_poll
 * does: reads and writes no longer wait, and HUP once shut both ways.
 * Inline: every send's look and every poll's entry ask it. */
static inline __attribute__((always_inline)) short shut_bits(int rs,
							     short events)
{
	unsigned char m;
	short b = 0;

	if (rs < 0 || rs >= MAX_LISTEN_RS)
		return 0;
	m = __atomic_load_n(&shut_local[rs], __ATOMIC_SEQ_CST);
	if (likely(!m))
		return 0;
	if (m & 1)
		b |= POLLIN | POLLRDHUP;
	if (m & 2)
		b |= POLLOUT;
	if (m == 3)
		b |= POLLHUP;
	return b & (short)(events | POLLHUP);
}

/* One rpoll(0) of rs for POLLOUT, then, unless it shows the connection's
 * end (HUP or ERR, which go to *rev), the send: both inside one library
 * call.  A single slice goes by rsend, which rsockets can post inline
 * from the program's buffer (rsendmsg copies it to its buffer first).
 * Returns what the send returned, 0 when *rev stopped it. */
static long look_send(int rs, const struct iovec *iov, int iovcnt, int flags,
		      short *rev)
{
	struct pollfd p = {.fd = rs, .events = POLLOUT};
	struct msghdr m;

	*rev = 0;
	if (rpoll(&p, 1, 0) >= 0) { /* as sg_poll marks it */
		*rev = p.revents | shut_bits(rs, POLLOUT);
		if (cm_is_gone(rs))
			*rev |= POLLHUP;
		if (*rev & (POLLHUP | POLLERR))
			return 0;
	}
	if (iovcnt == 1)
		return rsend(rs, iov[0].iov_base, iov[0].iov_len, flags);
	/* set up only here: a 1-byte send's look and send are ~100
	 * instructions of the shim's own */
	m = (struct msghdr){.msg_iov = (struct iovec *)iov,
			    .msg_iovlen = (size_t)iovcnt};
	return rsendmsg(rs, &m, flags);
}

ssize_t sg_sendv_look(int rs, const struct iovec *iov, int iovcnt, int flags,
		      short *rev)
{
	return wr_gone(rs, LIB_CALL(look_send(rs, iov, iovcnt, flags, rev)));
}

/* Is any of fds shut down by the program? */
static bool shut_any(const struct pollfd *fds, nfds_t nfds)
{
	for (nfds_t i = 0; i < nfds; i++)
		if (shut_bits(fds[i].fd, fds[i].events))
			return true;
	return false;
}

/* Gone rsockets show POLLHUP (their EOF), shut ones what shut_bits says;
 * returns the new count. */
static int mark_gone(struct pollfd *fds, nfds_t nfds)
{
	int n = 0;

	for (nfds_t i = 0; i < nfds; i++) {
		if (cm_is_gone(fds[i].fd))
			fds[i].revents |= POLLHUP;
		fds[i].revents |= shut_bits(fds[i].fd, fds[i].events);
		n += fds[i].revents != 0;
	}
	return n;
}

void sg_shut_note(int rs, int how)
{
	unsigned char m = how == SHUT_RD ? 1 : how == SHUT_WR ? 2 : 3;

	if (rs < 0 || rs >= MAX_LISTEN_RS)
		return;
	/* seq_cst: a sleeper parks, then looks (shut_bits); the caller
	 * then reads the park (shim_sock_ev_io): one of them sees the other */
	__atomic_store_n(&shut_noted, true, __ATOMIC_RELAXED);
	__atomic_or_fetch(&shut_local[rs], m, __ATOMIC_SEQ_CST);
	sg_sleep_kick(rs); /* a thread asleep on rs looks again */
}

/* rs is a new rsocket's number, or free: nothing shut */
static void shut_forget(int rs)
{
	if (rs >= 0 && rs < MAX_LISTEN_RS)
		__atomic_store_n(&shut_local[rs], 0, __ATOMIC_SEQ_CST);
}

int sg_poll(struct pollfd *fds, nfds_t nfds, int timeout_ms)
{
	int r = (int)LIB_CALL(rpoll(fds, nfds, timeout_ms < 0 ? -1 : 0));

	return r < 0 ? r : mark_gone(fds, nfds);
}

/*
 * Arming one connection for a wait the kernel does (epoll.c's O(ready)
 * sleep).  rsockets arms a connection's completion queue only inside
 * rpoll's sleep (rs_poll_arm), and takes a fired event off the queue's
 * channel only after that sleep's poll (rs_poll_events); rpoll(0) does
 * neither.  So sg_arm runs rpoll(-1) on the one rsocket with the poll
 * inside it made a look (lib_poll hands it to sg_arm_poll): a pending
 * event is taken and the queue armed again, round after round, until a
 * look finds the channel quiet.  The queue is then armed with nothing
 * pending: the next completion makes the channel readable.  The quiet
 * look ends rpoll as an interrupted poll would (-1), the path on which
 * rpoll gives its poll gate back (rs_poll_exit).  The channel's number is
 * learned from that look: rs_poll_arm puts it in the poll for a connected
 * rsocket (the rdma_cm channel, which is rs itself, before that).
 */
#define ARM_ROUNDS 64

struct arm_state {
	bool quiet;
	bool tracker; /* the caller is one of rs's trackers */
	int rs, chan, rounds;
};

__thread bool sg_arming;
static __thread struct arm_state arm;

int sg_arm_poll(struct pollfd *fds, nfds_t nfds)
{
	int r;

	/* rpoll's own poll: the rsocket's channel, then its signal fd */
	if (nfds != 2 || ++arm.rounds > ARM_ROUNDS) {
		errno = EINTR;
		return -1;
	}
	arm.chan = fds[0].fd;
	r = REAL(poll)(fds, 1, 0);
	fds[1].revents = 0;
	if (r != 0)
		return r;
	arm.quiet = true;
	errno = EINTR;
	return -1;
}

/* The rsocket this thread arms, from before its flag goes up until after
 * it comes down (a signal handler's shutdown may come in between). */
static __thread int arming_rs = -1;

static bool arming_here(int rs)
{
	return arming_rs == rs;
}

/* A parent's thread that was arming or shutting down is not here: its
 * flags would make a shutdown wait for ever, or every arm refuse. */
static void arming_fork_child(void)
{
	/* the child's connections are not the parent's (fork.c disowns
	 * them): a number the child reuses, for an rsocket or a plain fd
	 * in a mixed look, must show no shutdown */
	if (__atomic_load_n(&shut_noted, __ATOMIC_RELAXED)) {
		memset(shut_local, 0, sizeof(shut_local));
		shut_noted = false;
	}
	if (!__atomic_load_n(&marks_up, __ATOMIC_RELAXED))
		return; /* the usual case: no page of them touched */
	memset(arming, 0, sizeof(arming));
	memset(shutting, 0, sizeof(shutting));
	marks_up = 0;
}

int sg_arm(int rs, short events, bool tracker, struct sg_armed *out)
{
	struct pollfd p = {.fd = rs, .events = events};
	bool mark = rs >= 0 && rs < MAX_LISTEN_RS;
	int r;

	/* rshutdown makes the channel blocking meanwhile: a look that raced
	 * with it could then block in rsockets' read of the channel (see
	 * shutting: sg_shutdown waits for an arm that began first) */
	if (mark) {
		arming_rs = rs;
		mark_up(&arming[rs]);
		if (__atomic_load_n(&shutting[rs], __ATOMIC_SEQ_CST)) {
			mark_down(&arming[rs]);
			arming_rs = -1;
			return -EBUSY;
		}
	}
	arm = (struct arm_state){.chan = -1, .rs = rs, .tracker = tracker};
	sg_arming = true;
	r = (int)LIB_CALL(rpoll(&p, 1, -1));
	sg_arming = false;
	if (mark) {
		mark_down(&arming[rs]);
		arming_rs = -1;
	}
	out->chan = arm.chan != rs ? arm.chan : -1;
	out->cm =
	    rs >= 0 && rs < MAX_LISTEN_RS && cm_dup[rs] ? cm_dup[rs] - 1 : -1;
	if (r < 0 && !arm.quiet)
		return r;
	if (r < 0)
		p.revents = 0;
	return mark_gone(&p, 1) ? p.revents : 0;
}

/*
 * Bells.  A kernel epoll set reports an edge only if the fd is still
 * readable when the set is read: a completion event that another rpoll of
 * this process takes off the channel first (a blocking send's, a poll()'s,
 * rshutdown's, another set's arm) is lost to it, and that taker leaves the
 * queue unarmed.  So every event taken off a tracked channel rings the
 * connection's bell, an eventfd beside the channel in each tracking set's
 * chan_ep that is never drained: each ring is an edge the set reads.  The
 * events are taken in ibv_get_cq_event, which librdmacm calls through its
 * PLT (interposed below).  A tracker arming its own connection needs no
 * ring when it is the only one (it re-arms and looks itself).
 */
static int bell[MAX_LISTEN_RS];	    /* eventfd + 1, 0 = none */
static int chan_rs[MAX_LISTEN_RS];  /* channel fd -> rs + 1 */
static int rs_chan[MAX_LISTEN_RS];  /* rs -> channel fd + 1 */
static int trackers[MAX_LISTEN_RS]; /* atomic */

int sg_track(int rs, int chan)
{
	int fd, none = 0;

	if (rs < 0 || rs >= MAX_LISTEN_RS || chan < 0 || chan >= MAX_LISTEN_RS)
		return -ERANGE;
	if (!__atomic_load_n(&bell[rs], __ATOMIC_ACQUIRE)) {
		fd = (int)REAL(syscall)(SYS_eventfd2, 0,
					EFD_CLOEXEC | EFD_NONBLOCK);
		if (fd < 0)
			return -errno;
		if (!__atomic_compare_exchange_n(&bell[rs], &none, fd + 1,
						 false, __ATOMIC_ACQ_REL,
						 __ATOMIC_ACQUIRE))
			REAL(close)(fd); /* another set made it first */
	}
	__atomic_store_n(&rs_chan[rs], chan + 1, __ATOMIC_RELAXED);
	__atomic_store_n(&chan_rs[chan], rs + 1, __ATOMIC_RELEASE);
	__atomic_add_fetch(&trackers[rs], 1, __ATOMIC_SEQ_CST);
	return __atomic_load_n(&bell[rs], __ATOMIC_ACQUIRE) - 1;
}

void sg_untrack(int rs)
{
	int n;

	if (rs < 0 || rs >= MAX_LISTEN_RS)
		return;
	n = __atomic_load_n(&trackers[rs], __ATOMIC_RELAXED);
	while (n > 0 &&
	       !__atomic_compare_exchange_n(&trackers[rs], &n, n - 1, true,
					    __ATOMIC_SEQ_CST, __ATOMIC_RELAXED))
		;
}

/* A fork child's rsockets are not its own (fork.c): nothing it does may
 * ring a number the parent's table names (its bells stay open, as the
 * rsockets' own fds do). */
static void bells_fork_child(void)
{
	memset(chan_rs, 0, sizeof(chan_rs));
	memset(rs_chan, 0, sizeof(rs_chan));
	memset(trackers, 0, sizeof(trackers));
	memset(bell, 0, sizeof(bell));
}

/* rs closes: its bell goes, and its channel's number may be reused. */
static void bell_close(int rs)
{
	int b, c;

	if (rs < 0 || rs >= MAX_LISTEN_RS)
		return;
	c = __atomic_exchange_n(&rs_chan[rs], 0, __ATOMIC_ACQ_REL) - 1;
	if (c >= 0 && __atomic_load_n(&chan_rs[c], __ATOMIC_RELAXED) == rs + 1)
		__atomic_store_n(&chan_rs[c], 0, __ATOMIC_RELEASE);
	__atomic_store_n(&trackers[rs], 0, __ATOMIC_RELAXED);
	b = __atomic_exchange_n(&bell[rs], 0, __ATOMIC_ACQ_REL) - 1;
	if (b >= 0)
		REAL(close)(b);
}

static void bell_ring(int rs)
{
	uint64_t one = 1;
	int b;

	if (rs < 0 || rs >= MAX_LISTEN_RS ||
	    !__atomic_load_n(&trackers[rs], __ATOMIC_SEQ_CST))
		return;
	b = __atomic_load_n(&bell[rs], __ATOMIC_ACQUIRE) - 1;
	if (b >= 0)
		(void)REAL(syscall)(SYS_write, b, &one, sizeof(one));
}

static void ring(int chan)
{
	int rs;

	if (chan < 0 || chan >= MAX_LISTEN_RS)
		return;
	rs = __atomic_load_n(&chan_rs[chan], __ATOMIC_ACQUIRE) - 1;
	if (rs < 0)
		return;
	if (sg_arming && arm.rs == rs && arm.tracker &&
	    __atomic_load_n(&trackers[rs], __ATOMIC_SEQ_CST) == 1)
		return;
	bell_ring(rs);
}

typedef int gce_fn(struct ibv_comp_channel *, struct ibv_cq **, void **);

/*
 * Only a thread inside rshutdown (sg_shutdown, or rclose on a reaper) waits
 * for a completion event: every other read of a connection's completion
 * channel that the shim's calls make is rpoll's, after its poll() saw an
 * event.  rshutdown makes the channel blocking while it runs (and leaves
 * it so once the connection is over), re-arms the CQ and reads events
 * itself; an event it takes between rpoll's poll() and read() leaves
 * rpoll's read blocking -- for good if the completion rshutdown waited for
 * was its last and came before its re-arm (no event is due any more), and
 * that sleeper was the one that would see the peer's end (cm_check): an
 * epoll_wait that never returns, whatever its timeout, and a gRPC server
 * whose stop never ends.  Readers of a channel take rsockets' cq_wait_lock
 * around the read, so an event seen here is still there when read.
 * (cq_wait_ok: the thread is inside rshutdown.)
 */
/* Not sg_cm_ready: an error (POLLERR: the device went) must reach the
 * read too, which makes rsockets see it, or rpoll would spin on it. */
static bool chan_has_event(int fd)
{
	struct pollfd p = {.fd = fd, .events = POLLIN};

	return REAL(poll)(&p, 1, 0) == 1;
}

SHIM_EXPORT int ibv_get_cq_event(struct ibv_comp_channel *ch,
				 struct ibv_cq **cq, void **ctx)
{
	static void *real;
	gce_fn *f = (gce_fn *)sg_next_sym(&real, "ibv_get_cq_event");
	int r;

	if (!f) {
		errno = ENOSYS;
		return -1;
	}
	/* the program's own calls (depth 0) are the library's */
	if (ch && shim_in_lib() && !cq_wait_ok && !chan_has_event(ch->fd)) {
		errno = EAGAIN; /* rsockets: "no event", the CQ stays armed */
		return -1;
	}
	r = f(ch, cq, ctx);
	if (!r && ch)
		ring(ch->fd);
	return r;
}

void sg_cm_fired(int rs)
{
	if (rs >= 0 && rs < MAX_LISTEN_RS && cm_dup[rs] && !cm_is_gone(rs))
		cm_check(rs);
}

/*
 * Check fds until ready or us (the window, spin.c) have passed; one look
 * when us is 0.  Each round yields the CPU: with more waiting threads than
 * CPUs, a spinner must not starve the thread (or, with soft-RoCE, the
 * kernel) that would produce what it waits for.  With nothing else
 * runnable the yield returns at once.
 */
static int spin(struct pollfd *fds, nfds_t nfds, long us, int64_t t0)
{
	int r;

	for (int k = 0;; k++) {
		r = sg_poll(fds, nfds, 0);
		if (r != 0 || us <= 0 || shim_now_us() - t0 >= us) {
			WS_ADD(yields, (unsigned long)k);
			if (r > 0)
				WS_ADD(first, k == 0);
			if (r > 0)
				WS_ADD(spun, k > 0);
			return r;
		}
		sched_yield();
	}
}

/*
 * Sleep in rpoll(-1) over fds, the cm duplicates of their rsockets, and a
 * timerfd that ends a finite wait (timeout_ms > 0).  The program's signal
 * handlers wait until the sleep is over (base/sigdefer.c): -EINTR.
 */
static int sleep_fds(struct pollfd *fds, nfds_t nfds, int timeout_ms,
		     const sigset_t *mask)
{
	struct itimerspec its = {0};
	struct pollfd stack[64], *all = stack;
	int tfd = -1, r, wfd = -1, cs = 0;
	bool asleep = false;
	nfds_t n = nfds, i;

	/* a handler waits (from librdmacm's calls): the wait is interrupted,
	 * and the handler runs at the exported call's end or here */
	if (shim_sig_waiting()) {
		if (shim_sigd.edge)
			return -EINTR;
		shim_sig_run();
	}
	/* No cancellation inside rpoll (see sleep.c): a cancel wakes the
	 * sleep through wfd and is acted on after it.  Entered before what
	 * the sleep makes (the fds array, the timerfd): the cancel acted on
	 * here, before it is disabled, finds none of it made. */
	wfd = sg_sleep_enter(&cs, fds, nfds);
	asleep = true;
	/* from here to sg_sleep_leave the program's handlers wait (the sleep
	 * record is linked), and end the sleep through wfd */
	shim_sig_sleep_enter(wfd);
	if (2 * nfds + 2 > ARRAY_SIZE(stack)) {
		all = malloc((2 * nfds + 2) * sizeof(*all));
		if (!all) {
			r = -ENOMEM;
			goto out;
		}
	}
	memcpy(all, fds, nfds * sizeof(*fds));
	for (i = 0; i < nfds; i++) {
		int rs = fds[i].fd;

		if (rs >= 0 && rs < MAX_LISTEN_RS && cm_dup[rs] &&
		    !cm_is_gone(rs))
			all[n++] = (struct pollfd){.fd = cm_dup[rs] - 1,
						   .events = POLLIN};
	}
	if (timeout_ms > 0) {
		tfd =
		    timerfd_create(CLOCK_MONOTONIC, TFD_CLOEXEC | TFD_NONBLOCK);
		if (tfd < 0) {
			r = -errno;
			goto out;
		}
		its.it_value.tv_sec = timeout_ms / 1000;
		its.it_value.tv_nsec = (long)(timeout_ms % 1000) * 1000000L;
		timerfd_settime(tfd, 0, &its, NULL);
		all[n++] = (struct pollfd){.fd = tfd, .events = POLLIN};
	}
	/* shut down since the caller looked, before a kick could find us */
	if (shut_any(fds, nfds)) {
		for (i = 0; i < nfds; i++)
			fds[i].revents = 0;
		r = mark_gone(fds, nfds);
		goto out;
	}
	if (wfd >= 0)
		all[n++] = (struct pollfd){.fd = wfd, .events = POLLIN};
	shim_lib_sigmask = mask;
	r = (int)LIB_CALL(rpoll(all, n, -1));
	if (r < 0)
		r = -errno; /* the callers take -errno, not rpoll's -1 */
	shim_lib_sigmask = NULL;
	if (wfd >= 0)
		n--; /* not the caller's, nor a cm duplicate */
	if (r < 0)
		goto out;
	/* A cm duplicate that fired: is its rsocket gone? */
	for (i = nfds; i < n; i++)
		if (all[i].revents && all[i].fd != tfd)
			for (nfds_t k = 0; k < nfds; k++)
				if (fds[k].fd >= 0 &&
				    fds[k].fd < MAX_LISTEN_RS &&
				    cm_dup[fds[k].fd] - 1 == all[i].fd)
					cm_check(fds[k].fd);
	for (i = 0; i < nfds; i++)
		fds[i].revents = all[i].revents;
	r = mark_gone(fds, nfds);
	if (r == 0 && shim_sig_waiting())
		r = -EINTR; /* a handler waits: the wait is interrupted */
out:
	if (tfd >= 0)
		REAL(close)(tfd);
	if (all != stack)
		free(all);
	/* a cancellation point, with nothing of ours held here; a cancel
	 * not acted on (disabled) was no event: the caller sleeps again */
	if (asleep) {
		bool woken;

		shim_sigd.wake_fd = -1; /* sg_sleep_leave closes it */
		woken = sg_sleep_leave(cs);
		shim_sig_sleep_leave();
		if (woken) {
			pthread_testcancel(); /* nothing of the sleep's left */
			if (r == 0)
				r = -EINPROGRESS;
		}
	}
	/* here, unless the exported call runs them once it holds nothing */
	shim_sig_run_if_free();
	return r;
}

/* This thread's CPU time, ns (a system call: only on the sleep path). */
static uint64_t thread_cpu_ns(void)
{
	struct timespec ts;

	if (clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts))
		return 0;
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

int sg_wait(struct pollfd *fds, nfds_t nfds, int timeout_ms)
{
	return sg_wait_masked(fds, nfds, timeout_ms, NULL);
}

int sg_wait_masked(struct pollfd *fds, nfds_t nfds, int timeout_ms,
		   const sigset_t *mask)
{
	unsigned int max = shim_cfg.poll_us;
	int64_t t0 = 0;
	uint64_t c0 = 0;
	bool sample;
	long left_us;
	bool slept = true;
	int r;

	if (timeout_ms == 0)
		return sg_poll(fds, nfds, 0);
	if (max)
		t0 = shim_now_us();
	{
		long win = max ? sg_spin_window(max, timeout_ms) : 0;

		WS_ADD(waits, 1);
		WS_ADD(win0, win == 0);
		WS_ADD(win_us, (unsigned long)win);
		r = spin(fds, nfds, win, t0);
	}
	if (r != 0)
		return r;
	WS_ADD(slept, 1);
	/* what this thread's sleeps cost it, now and then (spin.c) */
	sample = max && sg_spin_sample();
	if (sample)
		c0 = thread_cpu_ns();
	sample = sample && c0; /* no CPU clock: no figure, not a 0 one */
	if (timeout_ms < 0) {
		/* 0: woken with nothing for the caller (a cancel the thread
		 * does not act on, an rdma_cm event that was not the end) */
		do
			r = sleep_fds(fds, nfds, -1, mask);
		while (r == 0 || r == -EINPROGRESS);
	} else {
		if (!max)
			t0 = shim_now_us();
		/* The spin counts against the caller's timeout. */
		do {
			left_us =
			    timeout_ms * 1000L - (long)(shim_now_us() - t0);
			r = 0;
			slept = left_us > 0;
			if (slept)
				r = sleep_fds(fds, nfds,
					      (int)((left_us + 999) / 1000),
					      mask);
		} while (r == -EINPROGRESS);
	}
	/* a sleep's cost is sampled only from a sleep that happened */
	if (sample && slept && r >= 0) {
		uint64_t c1 = thread_cpu_ns(); /* 0: the clock failed */

		if (c1 > c0) {
			WS_ADD(sampled, 1);
			WS_ADD(sleep_cpu_ns, (unsigned long)(c1 - c0));
			sg_spin_cost((unsigned long)(c1 - c0));
		}
	}
	if (max && r >= 0) { /* woken, or timed out: how long did it take? */
		WS_ADD(slept_us, (unsigned long)(shim_now_us() - t0));
		/* a wait that timed out found its peers idle for all of it,
		 * however short the caller's timeout: a loop that polls with
		 * a short one must not keep its window growing */
		sg_spin_adapt(max,
			      r == 0 ? LONG_MAX : (long)(shim_now_us() - t0));
	}
	return r;
}
