/* SPDX-License-Identifier: MIT */
/*
 * The level/edge/one-shot filter of the epoll emulation (see epfilter.h).
 * Called per registration per wait: no locks, no calls but the arrival
 * count of an ET EPOLLIN that is at stake.
 */
#include "epfilter.h"
#include "io_int.h"

#include <errno.h>

/*
 * Refresh a registration's ET memory from the sock's I/O generations.  A
 * read re-arms EPOLLIN even with an exact arrival count: the peer's FIN
 * behind data still queued does not show in rsockets (not in the count, not
 * in rpoll), and the kernel would give an event for it; one extra event
 * after a partial read is the price of never missing that one.
 */
void ep_rearm(struct ep_reg *r)
{
	unsigned int rd = __atomic_load_n(&r->s->rd_gen, __ATOMIC_SEQ_CST);
	unsigned int wr = __atomic_load_n(&r->s->wr_gen, __ATOMIC_SEQ_CST);

	if (rd != r->rd_seen) {
		r->reported &= ~(uint32_t)EP_IN_BITS;
		r->rd_seen = rd;
	}
	if (wr != r->wr_seen) {
		r->reported &= ~(uint32_t)(EPOLLOUT | EPOLLWRNORM);
		r->wr_seen = wr;
	}
}

/* Which bits may still produce an event (what a blocking wait watches). */
uint32_t ep_waitable(const struct ep_reg *r)
{
	uint32_t want = r->events & (r->inner ? EP_NEST_BITS : EP_RDMA_BITS);

	if (r->disabled || !ep_emulated(r))
		return 0;
	if (r->events & EPOLLET)
		want &= ~r->reported;
	return want;
}

/* Does r count arrivals for an edge-triggered EPOLLIN on an rsocket? */
static bool counts_in(const struct ep_reg *r)
{
	return (r->events & EPOLLET) && (r->events & EP_READABLE) &&
	       !r->in_kernel && !r->inner;
}

/*
 * ET EPOLLIN reported on an fd that was still readable at the last look,
 * with an exact count: new data shows only by counting again (rpoll would
 * return at once), so a sleeper must come back now and then to look.
 */
bool ep_in_recheck(const struct ep_reg *r)
{
	return r->in_known && !r->disabled && (r->reported & EP_READABLE);
}

/* r's arrival count if its ET EPOLLIN is at stake (cur readable; rev the
 * rsocket's revents): 0 exact, 1 a lower bound, -errno none taken. */
int ep_in_count(const struct ep_reg *r, uint32_t cur, short rev, uint64_t *now)
{
	if (!counts_in(r) || !(cur & EP_READABLE))
		return -ENODATA;
	return shim_rdma_arrived(r->s, rev, now);
}

/*
 * A new edge of an EPOLLIN already reported, still readable and not read
 * since (a read re-arms it: ep_rearm)?  Iff the count at the last report was
 * exact and more arrived since: new data or the peer's EOF.  A lower bound
 * above it (more queued than one peek sees) is growth too.
 */
bool ep_in_again(const struct ep_reg *r, int got, uint64_t now)
{
	return r->in_known && got >= 0 && now > r->in_base;
}

/*
 * An ET EPOLLIN reported on count got: did a receive run across the count
 * (another thread's recv taking data)?  Then it says nothing, and with no
 * base no later arrival could be seen: the report is not remembered, and
 * the next look reports again with a count of its own.  The price of
 * never losing an edge is one event the kernel may not give, as for a
 * read after a report (ep_rearm).  A lower bound (more than 16 KiB
 * queued) is remembered as unsure: only a read re-arms it.
 */
static bool ep_in_unsure(int got)
{
	return got == -EBUSY;
}

/*
 * Level/edge/one-shot filter: cur is what the fd shows now, rev its rpoll
 * revents (0 for a nested set).  Returns the bits to report (0: none) and
 * updates the registration's memory.  Costs one peek of the rsocket when
 * an ET EPOLLIN is reported or checked for a new edge, nothing otherwise.
 */
uint32_t ep_filter(struct ep_reg *r, uint32_t cur, short rev)
{
	r->reported &= cur; /* gone bits count as new later */
	if (!cur)
		return 0;
	if (r->events & EPOLLET) {
		uint32_t fresh = cur & ~r->reported;
		uint64_t now = 0;
		int got;

		if (!fresh && !r->in_known)
			return 0;
		got = ep_in_count(r, cur, rev, &now);
		if (!fresh && !ep_in_again(r, got, now))
			return 0;
		r->reported = cur;
		r->in_known = got == 0;
		r->in_base = now;
		if (ep_in_unsure(got))
			r->reported &= ~(uint32_t)EP_READABLE;
	}
	if (r->events & EPOLLONESHOT)
		r->disabled = true;
	return cur;
}
