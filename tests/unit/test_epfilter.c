/* SPDX-License-Identifier: MIT */
/*
 * Unit tests of the epoll emulation's level/edge/one-shot filter
 * (preload/epfilter.c): what a registration reports for what its fd shows,
 * and what a sleeper must still watch.  The arrival count of an rsocket
 * (io.c's shim_rdma_arrived, a peek) is the test's: this file defines it.
 */
#define _GNU_SOURCE
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <string.h>

#include "epfilter.h"
#include "epoll_int.h"

/* What the next count says: its return (0 exact, 1 a lower bound,
 * -errno) and the bytes arrived; calls and the last revents seen.  *out is
 * written even with -errno: the caller must not read it then. */
static int arrived_ret;
static uint64_t arrived_bytes;
static int arrived_calls;
static short arrived_rev;

int shim_rdma_arrived(struct shim_sock *s, short rev, uint64_t *out)
{
	(void)s;
	arrived_calls++;
	arrived_rev = rev;
	*out = arrived_bytes;
	return arrived_ret;
}

static struct shim_sock sock;
static struct ep_reg reg;

/* An RDMA registration of sock with the program's mask events. */
static struct ep_reg *reg_of(uint32_t events)
{
	memset(&sock, 0, sizeof(sock));
	memset(&reg, 0, sizeof(reg));
	reg.s = &sock;
	reg.events = events;
	arrived_ret = 0;
	arrived_bytes = 0;
	arrived_calls = 0;
	arrived_rev = 0;
	return &reg;
}

/* The next count: exact (0) or a lower bound (1) of bytes, or -errno. */
static void arrived(int ret, uint64_t bytes)
{
	arrived_ret = ret;
	arrived_bytes = bytes;
}

#define ET_IN (EPOLLIN | EPOLLET)

/* Level-triggered: every look that finds a bit reports it; no count. */
static void test_lt_every_time(void **st)
{
	struct ep_reg *r = reg_of(EPOLLIN | EPOLLOUT);

	(void)st;
	for (int i = 0; i < 3; i++)
		assert_int_equal(ep_filter(r, EPOLLIN, POLLIN), EPOLLIN);
	assert_int_equal(ep_filter(r, EPOLLIN | EPOLLOUT, POLLIN | POLLOUT),
			 EPOLLIN | EPOLLOUT);
	assert_int_equal(ep_filter(r, 0, 0), 0);
	assert_int_equal(arrived_calls, 0);
	assert_false(r->disabled);
}

/* ET: a bit once; again only after it was seen gone and came back. */
static void test_et_once_until_gone(void **st)
{
	struct ep_reg *r = reg_of(EPOLLOUT | EPOLLET);

	(void)st;
	assert_int_equal(ep_filter(r, EPOLLOUT, POLLOUT), EPOLLOUT);
	assert_int_equal(ep_filter(r, EPOLLOUT, POLLOUT), 0);
	assert_int_equal(ep_filter(r, EPOLLOUT, POLLOUT), 0);
	assert_int_equal(ep_filter(r, 0, 0), 0);
	assert_int_equal(ep_filter(r, EPOLLOUT, POLLOUT), EPOLLOUT);
	assert_int_equal(ep_filter(r, EPOLLOUT, POLLOUT), 0);
}

/* ET: a new bit beside a reported one is an edge, and the event carries
 * all the bits the fd shows, as the kernel's does. */
static void test_et_new_bit(void **st)
{
	struct ep_reg *r = reg_of(EPOLLIN | EPOLLOUT | EPOLLET);

	(void)st;
	arrived(0, 5); /* exact, and no more arrives */
	assert_int_equal(ep_filter(r, EPOLLOUT, POLLOUT), EPOLLOUT);
	assert_int_equal(ep_filter(r, EPOLLIN | EPOLLOUT, POLLIN | POLLOUT),
			 EPOLLIN | EPOLLOUT);
	assert_int_equal(ep_filter(r, EPOLLIN | EPOLLOUT, POLLIN | POLLOUT), 0);
	/* EPOLLIN went away alone: it alone is new when it comes back */
	assert_int_equal(ep_filter(r, EPOLLOUT, POLLOUT), 0);
	assert_int_equal(ep_filter(r, EPOLLIN | EPOLLOUT, POLLIN | POLLOUT),
			 EPOLLIN | EPOLLOUT);
}

/* A short write (wr_gen) re-arms EPOLLOUT, and only it. */
static void test_et_rearm_write(void **st)
{
	struct ep_reg *r = reg_of(EPOLLIN | EPOLLOUT | EPOLLET);
	const uint32_t both = EPOLLIN | EPOLLOUT;

	(void)st;
	arrived(0, 10);
	assert_int_equal(ep_filter(r, both, POLLIN | POLLOUT), both);
	ep_rearm(r); /* no I/O: nothing re-armed */
	assert_int_equal(ep_filter(r, both, POLLIN | POLLOUT), 0);
	sock.wr_gen++;
	ep_rearm(r);
	assert_int_equal(r->reported, EPOLLIN);
	assert_int_equal(ep_filter(r, both, POLLIN | POLLOUT), both);
	ep_rearm(r); /* seen: once per generation */
	assert_int_equal(ep_filter(r, both, POLLIN | POLLOUT), 0);
}

/* A read (rd_gen) re-arms EPOLLIN even when the count has not grown: the
 * peer's FIN behind unread data shows nowhere else. */
static void test_et_rearm_read(void **st)
{
	struct ep_reg *r = reg_of(ET_IN | EPOLLRDHUP | EPOLLOUT);

	(void)st;
	arrived(0, 100);
	assert_int_equal(ep_filter(r, EPOLLIN | EPOLLOUT, POLLIN | POLLOUT),
			 EPOLLIN | EPOLLOUT);
	assert_int_equal(ep_filter(r, EPOLLIN | EPOLLOUT, POLLIN | POLLOUT), 0);
	sock.rd_gen++;
	ep_rearm(r);
	assert_int_equal(r->reported, EPOLLOUT);
	assert_int_equal(ep_filter(r, EPOLLIN | EPOLLOUT, POLLIN | POLLOUT),
			 EPOLLIN | EPOLLOUT);
	ep_rearm(r); /* seen: once per generation */
	assert_int_equal(ep_filter(r, EPOLLIN | EPOLLOUT, POLLIN | POLLOUT), 0);
}

/* Reported EPOLLIN, unread: an exact count that grew is a new edge (new
 * data, or the EOF); one that did not is none. */
static void test_et_in_again_exact(void **st)
{
	struct ep_reg *r = reg_of(ET_IN);

	(void)st;
	arrived(0, 100);
	assert_int_equal(ep_filter(r, EPOLLIN, POLLIN), EPOLLIN);
	assert_true(r->in_known);
	assert_int_equal(r->in_base, 100);
	assert_int_equal(ep_filter(r, EPOLLIN, POLLIN), 0);
	arrived(0, 150);
	assert_int_equal(ep_filter(r, EPOLLIN, POLLIN), EPOLLIN);
	assert_int_equal(r->in_base, 150);
	assert_int_equal(ep_filter(r, EPOLLIN, POLLIN), 0);
	assert_int_equal(arrived_calls, 4);
	assert_int_equal(arrived_rev, POLLIN); /* the rsocket's revents */
}

/* A lower bound above the exact base is growth too; one equal to it, or
 * no count (-errno), is no edge. */
static void test_et_in_again_unsure(void **st)
{
	struct ep_reg *r = reg_of(ET_IN);

	(void)st;
	arrived(0, 100);
	assert_int_equal(ep_filter(r, EPOLLIN, POLLIN), EPOLLIN);
	arrived(1, 100);
	assert_int_equal(ep_filter(r, EPOLLIN, POLLIN), 0);
	arrived(-EBUSY, 1000); /* no count: its bytes mean nothing */
	assert_int_equal(ep_filter(r, EPOLLIN, POLLIN), 0);
	assert_true(r->in_known); /* no edge: the exact base stays */
	assert_int_equal(r->in_base, 100);
	arrived(1, 101);
	assert_int_equal(ep_filter(r, EPOLLIN, POLLIN), EPOLLIN);
	assert_false(r->in_known);
}

/*
 * Reported with a receive running across the count (the reviewer's race:
 * another thread's recv takes part of the data): the report is not kept,
 * so the next look reports again and counts afresh; from an exact count
 * on, only growth is an edge.  No arrival can go without one.
 */
static void test_et_in_busy_reports_again(void **st)
{
	struct ep_reg *r = reg_of(ET_IN);

	(void)st;
	arrived(-EBUSY, 0);
	assert_int_equal(ep_filter(r, EPOLLIN, POLLIN), EPOLLIN);
	assert_false(r->in_known);
	assert_int_equal(ep_waitable(r), EPOLLIN); /* a sleeper watches it */
	arrived(0, 1000);
	assert_int_equal(ep_filter(r, EPOLLIN, POLLIN), EPOLLIN);
	assert_true(r->in_known);
	assert_true(ep_in_recheck(r));
	assert_int_equal(ep_filter(r, EPOLLIN, POLLIN), 0);
	arrived(0, 1001);
	assert_int_equal(ep_filter(r, EPOLLIN, POLLIN), EPOLLIN);
}

/* A lower bound (a receive buffer above 4 MiB, full past it) is kept as
 * unsure: no count is taken again, and no event comes until the fd is read
 * or turns unreadable. */
static void test_et_in_lower_bound_waits(void **st)
{
	struct ep_reg *r = reg_of(ET_IN);
	int calls;

	(void)st;
	arrived(1, 4u << 20);
	assert_int_equal(ep_filter(r, EPOLLIN, POLLIN), EPOLLIN);
	assert_false(r->in_known);
	calls = arrived_calls;
	arrived(0, 5u << 20);
	assert_int_equal(ep_filter(r, EPOLLIN, POLLIN), 0);
	assert_int_equal(arrived_calls, calls);
	assert_int_equal(ep_filter(r, 0, 0), 0);
	assert_int_equal(ep_filter(r, EPOLLIN, POLLIN), EPOLLIN);
	assert_true(r->in_known);
}

/* Only an ET EPOLLIN of an rsocket that is readable takes a count. */
static void test_in_count(void **st)
{
	struct ep_reg *r;
	uint64_t now = 7;
	struct ep_set *inner = (struct ep_set *)&now;

	(void)st;
	r = reg_of(EPOLLIN);
	assert_int_equal(ep_in_count(r, EPOLLIN, POLLIN, &now), -ENODATA);
	r = reg_of(EPOLLOUT | EPOLLET);
	assert_int_equal(ep_in_count(r, EPOLLOUT, POLLOUT, &now), -ENODATA);
	assert_int_equal(ep_in_count(r, EPOLLIN, POLLIN, &now), -ENODATA);
	r = reg_of(ET_IN);
	assert_int_equal(ep_in_count(r, EPOLLOUT, POLLOUT, &now), -ENODATA);
	r->in_kernel = true;
	assert_int_equal(ep_in_count(r, EPOLLIN, POLLIN, &now), -ENODATA);
	r = reg_of(ET_IN);
	r->inner = inner;
	assert_int_equal(ep_in_count(r, EPOLLIN, 0, &now), -ENODATA);
	assert_int_equal(arrived_calls, 0);
	assert_int_equal(now, 7);
	r = reg_of(EPOLLRDNORM | EPOLLET);
	arrived(1, 42);
	assert_int_equal(ep_in_count(r, EPOLLRDNORM, POLLRDNORM, &now), 1);
	assert_int_equal(now, 42);
	assert_int_equal(arrived_rev, POLLRDNORM);
}

/* A new edge needs an exact base, a count, and growth past the base. */
static void test_in_again(void **st)
{
	struct ep_reg *r = reg_of(ET_IN);

	(void)st;
	r->in_base = 100;
	assert_false(ep_in_again(r, 0, 200)); /* base unsure */
	r->in_known = true;
	assert_true(ep_in_again(r, 0, 101));
	assert_true(ep_in_again(r, 1, 101));
	assert_false(ep_in_again(r, 0, 100));
	assert_false(ep_in_again(r, 1, 100));
	assert_false(ep_in_again(r, 0, 99));
	assert_false(ep_in_again(r, -EBUSY, 200));
}

/* EPOLLONESHOT: one report disables the registration. */
static void test_oneshot(void **st)
{
	struct ep_reg *r = reg_of(EPOLLIN | EPOLLONESHOT);

	(void)st;
	assert_int_equal(ep_filter(r, 0, 0), 0);
	assert_false(r->disabled);
	assert_int_equal(ep_waitable(r), EPOLLIN);
	assert_int_equal(ep_filter(r, EPOLLIN, POLLIN), EPOLLIN);
	assert_true(r->disabled);
	assert_int_equal(ep_waitable(r), 0);
	r = reg_of(EPOLLOUT | EPOLLET | EPOLLONESHOT);
	assert_int_equal(ep_filter(r, EPOLLOUT, POLLOUT), EPOLLOUT);
	assert_true(r->disabled);
}

/* What a sleeper watches: the program's emulable bits, less reported ET
 * ones; nothing of a disabled or kernel registration; a nested set's
 * readability only. */
static void test_waitable(void **st)
{
	uint64_t any;
	struct ep_set *inner = (struct ep_set *)&any;
	struct ep_reg *r = reg_of(EPOLLIN | EPOLLOUT | EPOLLPRI | EPOLLRDHUP);

	(void)st;
	assert_int_equal(ep_waitable(r), EPOLLIN | EPOLLOUT | EPOLLRDHUP);
	r->reported = EPOLLIN; /* LT: reported bits still count */
	assert_int_equal(ep_waitable(r), EPOLLIN | EPOLLOUT | EPOLLRDHUP);
	r->events |= EPOLLET;
	assert_int_equal(ep_waitable(r), EPOLLOUT | EPOLLRDHUP);
	r->disabled = true;
	assert_int_equal(ep_waitable(r), 0);
	r = reg_of(EPOLLIN | EPOLLOUT);
	r->in_kernel = true;
	assert_false(ep_emulated(r));
	assert_int_equal(ep_waitable(r), 0);
	r->inner = inner; /* a nested epoll fd: emulated, readable only */
	assert_true(ep_emulated(r));
	assert_int_equal(ep_waitable(r), EPOLLIN);
}

/* A sleeper must come back to count again iff an ET EPOLLIN was reported
 * on an exact count and is still seen readable. */
static void test_in_recheck(void **st)
{
	struct ep_reg *r = reg_of(ET_IN);

	(void)st;
	assert_false(ep_in_recheck(r));
	arrived(0, 5);
	assert_int_equal(ep_filter(r, EPOLLIN, POLLIN), EPOLLIN);
	assert_true(ep_in_recheck(r));
	r->disabled = true;
	assert_false(ep_in_recheck(r));
	r->disabled = false;
	assert_int_equal(ep_filter(r, 0, 0), 0); /* drained */
	assert_false(ep_in_recheck(r));
	arrived(1, 9);
	assert_int_equal(ep_filter(r, EPOLLIN, POLLIN), EPOLLIN);
	assert_false(ep_in_recheck(r)); /* unsure: waits for a read */
	r = reg_of(EPOLLOUT | EPOLLET);
	assert_int_equal(ep_filter(r, EPOLLOUT, POLLOUT), EPOLLOUT);
	assert_false(ep_in_recheck(r));
}

/* A nested set (rev 0) is not counted: ET reports it once per edge. */
static void test_nested_et(void **st)
{
	uint64_t any;
	struct ep_reg *r = reg_of(ET_IN);

	(void)st;
	r->in_kernel = true;
	r->inner = (struct ep_set *)&any;
	assert_int_equal(ep_filter(r, EPOLLIN, 0), EPOLLIN);
	assert_int_equal(ep_filter(r, EPOLLIN, 0), 0);
	assert_false(ep_in_recheck(r));
	assert_int_equal(arrived_calls, 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_lt_every_time),
	    cmocka_unit_test(test_et_once_until_gone),
	    cmocka_unit_test(test_et_new_bit),
	    cmocka_unit_test(test_et_rearm_write),
	    cmocka_unit_test(test_et_rearm_read),
	    cmocka_unit_test(test_et_in_again_exact),
	    cmocka_unit_test(test_et_in_again_unsure),
	    cmocka_unit_test(test_et_in_busy_reports_again),
	    cmocka_unit_test(test_et_in_lower_bound_waits),
	    cmocka_unit_test(test_in_count),
	    cmocka_unit_test(test_in_again),
	    cmocka_unit_test(test_oneshot),
	    cmocka_unit_test(test_waitable),
	    cmocka_unit_test(test_in_recheck),
	    cmocka_unit_test(test_nested_et),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
