/* SPDX-License-Identifier: MIT */
/*
 * A connection's end, as its rdma_cm channel tells it.  Below rsock.c and
 * reap.c, which both take ends: rsock.c when a wait sees the event, the
 * reaper's watcher for a close still waiting on a vanished peer.
 */
#include "glue_int.h"

#include <infiniband/verbs.h>
#include <poll.h>
#include <rdma/rdma_cma.h>

/* Does an rdma_cm channel (or a duplicate) hold an event now? */
bool sg_cm_ready(int fd)
{
	struct pollfd p = {.fd = fd, .events = POLLIN};

	return REAL(poll)(&p, 1, 0) == 1 && (p.revents & POLLIN);
}

/*
 * The rdma_cm event waiting on a connection's channel (fd: the channel or a
 * duplicate of it) is its end: take it, move the QP to the error state --
 * every work request still posted completes (flushed), so nothing in
 * rsockets waits for the dead peer any more: rshutdown and rclose wait
 * until every send completed, and soft-RoCE retries a send to a vanished
 * peer without end -- and ack it (rdma_destroy_id waits for that).  The
 * caller makes sure it is the only one to read this channel: the read
 * blocks if the event is gone.  Returns the event, or -errno.
 */
int sg_cm_take_end(int fd)
{
	struct rdma_event_channel ch = {.fd = fd};
	struct ibv_qp_attr a = {.qp_state = IBV_QPS_ERR};
	struct rdma_cm_event *ev;
	int what;

	if (!sg_cm_ready(fd))
		return -EAGAIN;
	if (LIB_CALL(rdma_get_cm_event(&ch, &ev)) < 0)
		return -EIO;
	what = (int)ev->event;
	if (what != RDMA_CM_EVENT_ESTABLISHED && ev->id && ev->id->qp)
		(void)LIB_CALL(ibv_modify_qp(ev->id->qp, &a, IBV_QP_STATE));
	(void)LIB_CALL(rdma_ack_cm_event(ev));
	return what;
}
