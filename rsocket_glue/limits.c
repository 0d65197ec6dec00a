/* SPDX-License-Identifier: MIT */
/*
 * What RDMA connections may take of the process, and what the operator is
 * told when a connection falls back to TCP for want of something.
 *
 * An RDMA connection holds fds the program never sees (SHIM_CONN_FDS: its
 * rdma_cm channel, its completion channel, the glue's duplicate of the
 * first, and its bell once an epoll set has slept with it).  Unchecked they
 * would grow up to RLIMIT_NOFILE, and the program's own next socket(),
 * accept() or open() would get an EMFILE that kernel TCP would not have
 * given it.  So connections keep to ERDMA_SHIM_FD_SHARE percent of the soft
 * limit: past it, a new one is refused its completion channel and falls
 * back to TCP.  That one place serves both sides, because rsockets makes
 * the channel for a connect (in rconnect) and for an accept (on its listen
 * thread, which then rejects the request: the client falls back at once)
 * alike, through libibverbs' PLT.
 *
 * Each kind of shortage is told once a process, not once a connection: a
 * busy server out of locked memory would otherwise log every connect.
 */
#include "glue.h"
#include "glue_int.h"

#include <errno.h>
#include <infiniband/verbs.h>
#include <rdma/rdma_cma.h>
#include <rdma/rsocket.h>
#include <string.h>
#include <sys/resource.h>

/* The completion channels rsockets holds now (one per connection), and
 * which fds they are (a destroy counts down only what was counted). */
#define MAX_CHAN_FD 65536
static int live_chans;
static unsigned char counted[MAX_CHAN_FD];

/* This thread's last channel was refused by the share (the warning is the
 * refusal's, not the EMFILE's the connect then reports). */
static __thread bool share_refused;

enum shortage { SH_SHARE, SH_FDS, SH_MEMLOCK, SH_DEVICE, SH_N };
static bool said[SH_N];

static bool first_time(enum shortage k)
{
	return !__atomic_exchange_n(&said[k], true, __ATOMIC_RELAXED);
}

/* May one more connection's fds be taken?  (n: connections with it.) */
static bool within_share(int n, rlim_t *limit)
{
	struct rlimit rl;

	if (shim_cfg.fd_share >= 100 || getrlimit(RLIMIT_NOFILE, &rl) ||
	    rl.rlim_cur == RLIM_INFINITY)
		return true;
	*limit = rl.rlim_cur;
	return (unsigned long long)n <=
	       shim_fd_share_conns(&shim_cfg, rl.rlim_cur);
}

/* May a connection (n with it) take its fds?  If not, the warning (once),
 * and this thread remembers that the refusal was the share's. */
static bool share_allows(int n)
{
	rlim_t limit = 0;

	share_refused = !within_share(n, &limit);
	if (share_refused && first_time(SH_SHARE))
		shim_warn("RDMA connections would take more than %u%% of "
			  "RLIMIT_NOFILE (%llu; %d fds a connection): new "
			  "connections use TCP (raise ulimit -n, or "
			  "ERDMA_SHIM_FD_SHARE); not repeated",
			  shim_cfg.fd_share, (unsigned long long)limit,
			  SHIM_CONN_FDS);
	return !share_refused;
}

typedef struct ibv_comp_channel *ccc_fn(struct ibv_context *);
typedef int dcc_fn(struct ibv_comp_channel *);

SHIM_EXPORT struct ibv_comp_channel *
ibv_create_comp_channel(struct ibv_context *ctx)
{
	static void *real;
	ccc_fn *f = (ccc_fn *)sg_next_sym(&real, "ibv_create_comp_channel");
	struct ibv_comp_channel *ch;
	int n, e;

	if (!f) {
		errno = ENOSYS;
		return NULL;
	}
	if (!sg_from_librdmacm(__builtin_return_address(0)))
		return f(ctx);
	n = __atomic_add_fetch(&live_chans, 1, __ATOMIC_RELAXED);
	if (!share_allows(n)) {
		__atomic_sub_fetch(&live_chans, 1, __ATOMIC_RELAXED);
		errno = EMFILE;
		return NULL;
	}
	ch = f(ctx);
	if (!ch || ch->fd < 0 || ch->fd >= MAX_CHAN_FD) {
		e = errno;
		__atomic_sub_fetch(&live_chans, 1, __ATOMIC_RELAXED);
		errno = e;
		return ch; /* beyond the table: not counted */
	}
	__atomic_store_n(&counted[ch->fd], 1, __ATOMIC_RELAXED);
	return ch;
}

SHIM_EXPORT int ibv_destroy_comp_channel(struct ibv_comp_channel *ch)
{
	static void *real;
	dcc_fn *f = (dcc_fn *)sg_next_sym(&real, "ibv_destroy_comp_channel");
	int fd = ch ? ch->fd : -1, r;
	bool was;

	if (!f)
		return ENOSYS; /* libibverbs' convention: the error itself */
	/* cleared while the fd is still this channel's: once destroyed, its
	 * number may be a new channel's at once */
	was = fd >= 0 && fd < MAX_CHAN_FD &&
	      __atomic_exchange_n(&counted[fd], 0, __ATOMIC_RELAXED);
	r = f(ch);
	if (was && !r)
		__atomic_sub_fetch(&live_chans, 1, __ATOMIC_RELAXED);
	else if (was)
		__atomic_store_n(&counted[fd], 1, __ATOMIC_RELAXED);
	return r;
}

int sg_fds_check(void)
{
	return share_allows(__atomic_load_n(&live_chans, __ATOMIC_RELAXED) + 1)
		   ? 0
		   : -EMFILE;
}

void sg_shortage(int err, const char *peer)
{
	bool shared = share_refused;

	share_refused = false;
	switch (err) {
	case -EMFILE:
	case -ENFILE:
		if (shared) /* told by share_warn */
			break;
		if (first_time(SH_FDS))
			shim_warn("RDMA with %s: out of file descriptors (%s): "
				  "new connections use TCP until some are "
				  "freed (raise ulimit -n); not repeated",
				  peer, strerror(-err));
		break;
	case -ENOMEM:
		if (first_time(SH_MEMLOCK))
			shim_warn("RDMA with %s: %s: new connections use TCP "
				  "(check ulimit -l: RDMA buffers are locked "
				  "memory); not repeated",
				  peer, strerror(-err));
		break;
	case -ENOBUFS:
		if (first_time(SH_DEVICE))
			shim_warn("RDMA with %s: the device is out of queues "
				  "(%s): new connections use TCP; not repeated",
				  peer, strerror(-err));
		break;
	}
}

typedef int rej_fn(struct rdma_cm_id *, const void *, uint8_t);

/*
 * rsockets' listen thread rejects a connect request it could not set up
 * (rs_accept), with the cause still in errno: the client falls back to
 * TCP, and this side's operator hears why here -- the client's only hears
 * "refused".
 */
SHIM_EXPORT int rdma_reject(struct rdma_cm_id *id, const void *data,
			    uint8_t len)
{
	static void *real;
	rej_fn *f = (rej_fn *)sg_next_sym(&real, "rdma_reject");
	int e = errno;

	if (!f) {
		errno = ENOSYS;
		return -1;
	}
	if (id && id->event &&
	    id->event->event == RDMA_CM_EVENT_CONNECT_REQUEST &&
	    sg_from_librdmacm(__builtin_return_address(0)))
		sg_shortage(-e, "a connecting peer");
	errno = e;
	return f(id, data, len);
}
