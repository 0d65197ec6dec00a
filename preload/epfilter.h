/* SPDX-License-Identifier: MIT */
/*
 * The level/edge/one-shot filter of the epoll emulation (epoll.c, whose
 * head comment tells the rules): what an emulated registration reports,
 * and what a sleeper must still watch for it.  Pure logic over one
 * registration; the one thing it asks outside is the arrival count of an
 * rsocket (shim_rdma_arrived), so it is unit-tested on its own
 * (tests/unit/test_epfilter.c).
 */
#ifndef SHIM_EPFILTER_H
#define SHIM_EPFILTER_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/epoll.h>

struct ep_set;
struct shim_sock;

struct ep_reg {
	int fd;
	struct shim_sock *s; /* no reference: purged when its last fd goes */
	uint32_t events;     /* the program's mask, with EPOLLET/ONESHOT */
	epoll_data_t data;
	uint32_t reported; /* ET: bits already reported */
	unsigned int rd_seen, wr_seen;
	/* ET EPOLLIN of an rsocket: bytes arrived at its last report
	 * (shim_rdma_arrived), when that count was exact (in_known). */
	uint64_t in_base;
	bool in_known;
	bool disabled;	      /* EPOLLONESHOT fired */
	bool in_kernel;	      /* still a kernel registration (not yet RDMA) */
	bool marked;	      /* kernel registration(s) carry the marker */
	struct ep_set *inner; /* a nested epoll fd's registry */
	unsigned int stamp, slot; /* translate(): this call's event index+1 */
	struct ep_reg *next;
	/* epoll.c's O(ready) wait: on the set's candidate list (cand), and
	 * the kernel fds registered for it in the set's chan_ep (-1: none) */
	bool cand;
	struct ep_reg *cand_prev, *cand_next;
	unsigned int turn; /* the set's turn in which it was last visited */
	/* the set it is in, and the next registration of the same sock
	 * (shim_sock.ep_list) */
	struct ep_set *set;
	struct ep_reg *s_next;
	int chan_fd, cm_fd, bell_fd;
	unsigned int seen; /* the set's stamp of the call that visited it */
};

#define EP_RDMA_BITS                                                           \
	(EPOLLIN | EPOLLOUT | EPOLLRDNORM | EPOLLWRNORM | EPOLLRDHUP)
#define EP_IN_BITS (EPOLLIN | EPOLLRDNORM | EPOLLRDHUP)
#define EP_READABLE (EPOLLIN | EPOLLRDNORM)
#define EP_NEST_BITS (EPOLLIN | EPOLLRDNORM)

/* An rsocket or a nested set: readiness is ours to compute. */
static inline bool ep_emulated(const struct ep_reg *r)
{
	return !r->in_kernel || r->inner;
}

void ep_rearm(struct ep_reg *r);
uint32_t ep_waitable(const struct ep_reg *r);
bool ep_in_recheck(const struct ep_reg *r);
int ep_in_count(const struct ep_reg *r, uint32_t cur, short rev, uint64_t *now);
bool ep_in_again(const struct ep_reg *r, int got, uint64_t now);
uint32_t ep_filter(struct ep_reg *r, uint32_t cur, short rev);

#endif
