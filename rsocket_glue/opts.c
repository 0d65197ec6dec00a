/* SPDX-License-Identifier: MIT */
/* Socket options and ERDMA_SHIM_* tunables mapped onto rsockets. */
#include "glue.h"
#include "glue_int.h"
#include "log.h"

#include <netinet/tcp.h>
#include <pthread.h>
#include <rdma/rsocket.h>
#include <signal.h>
#include <string.h>

static int rset(int rs, int level, int name, unsigned int v)
{
	return (int)LIB_CALL(rsetsockopt(rs, level, name, &v, sizeof(v)));
}

int sg_apply_tunables(int rs, const struct shim_config *c,
		      const struct sg_sockopts *bufs)
{
	static const struct {
		size_t off;
		int level, name;
		const char *what;
	} map[] = {
	    {offsetof(struct shim_config, sndbuf), SOL_SOCKET, SO_SNDBUF,
	     "ERDMA_SHIM_SNDBUF"},
	    {offsetof(struct shim_config, rcvbuf), SOL_SOCKET, SO_RCVBUF,
	     "ERDMA_SHIM_RCVBUF"},
	    {offsetof(struct shim_config, sq_size), SOL_RDMA, RDMA_SQSIZE,
	     "ERDMA_SHIM_SQ_SIZE"},
	    {offsetof(struct shim_config, rq_size), SOL_RDMA, RDMA_RQSIZE,
	     "ERDMA_SHIM_RQ_SIZE"},
	    {offsetof(struct shim_config, inline_size), SOL_RDMA, RDMA_INLINE,
	     "ERDMA_SHIM_INLINE"},
	};

	for (size_t i = 0; i < ARRAY_SIZE(map); i++) {
		unsigned int v =
		    *(const unsigned int *)((const char *)c + map[i].off);
		int r;

		/* The program's SO_SNDBUF/SO_RCVBUF, when larger: never
		 * smaller, or a writer ahead of its reader would stall on
		 * the peer's window where TCP buffers (see config.c). */
		if (bufs && map[i].level == SOL_SOCKET) {
			unsigned int p =
			    map[i].name == SO_SNDBUF ? bufs->snd : bufs->rcv;

			/* 0 = rsockets' default: 128 KiB, i.e. 64K in
			 * SO_*BUF units (rsockets doubles them) */
			if (p > (v ? v : 65536u))
				v = p;
		}
		if (!v)
			continue;
		r = rset(rs, map[i].level, map[i].name, v);
		if (r < 0) {
			/* A tunable the device refuses is not worth losing
			 * RDMA over: say so once per socket and go on. */
			shim_warn("%s=%u refused by rsockets (%s)", map[i].what,
				  v, strerror(-r));
		}
	}
	return 0;
}

/*
 * rsockets' keepalive: its service thread (tcp_svc) sends each such
 * connection a zero-length RDMA write every TCP_KEEPIDLE seconds.  A peer
 * that is gone never acknowledges it, and once the QP's transport retries
 * are spent the connection is in error: readers and writers wake with it.
 * TCP_KEEPINTVL/TCP_KEEPCNT have no counterpart (the retries are the
 * fabric's, see rdma_connect in rsock.c).  SO_KEEPALIVE and TCP_KEEPIDLE
 * talk to that thread (and the first starts it): LIB_CALL_QUIET.
 */
int sg_setsockopt(int rs, int level, int name, const void *val, socklen_t len)
{
	if ((level == SOL_SOCKET && name == SO_KEEPALIVE) ||
	    (level == IPPROTO_TCP && name == TCP_KEEPIDLE))
		return (int)LIB_CALL_QUIET(
		    rsetsockopt(rs, level, name, val, len));
	return (int)LIB_CALL(rsetsockopt(rs, level, name, val, len));
}

int sg_rcvbuf(int rs)
{
	int v = 0;
	socklen_t l = sizeof(v);

	if (LIB_CALL(rgetsockopt(rs, SOL_SOCKET, SO_RCVBUF, &v, &l)) < 0)
		return -1;
	return v;
}
