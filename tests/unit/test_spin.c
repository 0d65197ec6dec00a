/* SPDX-License-Identifier: MIT */
/*
 * Unit tests of the adaptive spin window (rsocket_glue/spin.c): how long a
 * blocking wait busy-polls before it sleeps, per thread, at most max
 * (ERDMA_SHIM_POLL_US).  The window is read back through sg_spin_window
 * with no timeout; a fresh window needs a fresh thread.
 */
#define _GNU_SOURCE
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <pthread.h>

#include "glue_int.h"

#define MAX 100U
/* Waits, in us, against MAX: one that found the peer busy, one idle. */
#define SHORT_WAIT 50L
#define IDLE_WAIT ((long)MAX * SPIN_IDLE_X + 1)

static long window(unsigned int max)
{
	return sg_spin_window(max, -1);
}

/* This thread's window down to 0, by idle waits. */
static void to_zero(unsigned int max)
{
	(void)window(max);
	for (int i = 0; i < 64 && window(max); i++)
		sg_spin_adapt(max, (long)max * SPIN_IDLE_X + 1);
	assert_int_equal(window(max), 0);
}

/* This thread's window to max, by short waits: enough to climb from 0,
 * or to come down from a former test's larger max. */
static void to_max(unsigned int max)
{
	(void)window(max);
	for (int i = 0; i < 64; i++)
		sg_spin_adapt(max, 0);
	assert_int_equal(window(max), max);
}

/* What a new thread sees: its first window, and the next after one idle
 * wait. */
struct probe {
	unsigned int max;
	long first, next;
};

static void *probe_thread(void *arg)
{
	struct probe *p = arg;

	p->first = window(p->max);
	sg_spin_adapt(p->max, (long)p->max * SPIN_IDLE_X + 1);
	p->next = window(p->max);
	return NULL;
}

static struct probe probe(unsigned int max)
{
	struct probe p = {.max = max};
	pthread_t th;

	assert_int_equal(pthread_create(&th, NULL, probe_thread, &p), 0);
	assert_int_equal(pthread_join(th, NULL), 0);
	return p;
}

/* A thread starts ready to spin, briefly: its first window is the
 * maximum or SPIN_START_US, whichever is less. */
static void test_starts_at_max(void **st)
{
	(void)st;
	assert_int_equal(probe(MAX).first, MAX);
	assert_int_equal(probe(SPIN_START_US / 2).first, SPIN_START_US / 2);
	assert_int_equal(probe(250000).first, SPIN_START_US);
}

/* A wait that slept but was short doubles the window, from 0 to
 * SPIN_MIN_US first, up to the maximum. */
static void test_short_wait_doubles(void **st)
{
	const long want[] = {SPIN_MIN_US, 20, 40, 80, MAX, MAX};

	(void)st;
	to_zero(MAX);
	for (unsigned int i = 0; i < sizeof(want) / sizeof(want[0]); i++) {
		sg_spin_adapt(MAX, SHORT_WAIT);
		assert_int_equal(window(MAX), want[i]);
	}
}

/* A wait over SPIN_IDLE_X x max halves it, and below SPIN_MIN_US it is 0;
 * a wait of exactly that long still counts as short. */
static void test_idle_wait_halves(void **st)
{
	const long want[] = {50, 25, 12, 0, 0};

	(void)st;
	to_max(MAX);
	for (unsigned int i = 0; i < sizeof(want) / sizeof(want[0]); i++) {
		sg_spin_adapt(MAX, IDLE_WAIT);
		assert_int_equal(window(MAX), want[i]);
	}
	to_max(MAX);
	sg_spin_adapt(MAX, IDLE_WAIT);
	sg_spin_adapt(MAX, (long)MAX * SPIN_IDLE_X);
	assert_int_equal(window(MAX), MAX);
}

/* Never above the maximum: not by doubling, not when the maximum is lower
 * than the window grew to, not below SPIN_MIN_US. */
static void test_capped_at_max(void **st)
{
	(void)st;
	to_max(1000);
	assert_int_equal(window(MAX), MAX);
	sg_spin_adapt(MAX, SHORT_WAIT);
	assert_int_equal(window(1000), MAX);
	to_zero(5);
	sg_spin_adapt(5, 1);
	assert_int_equal(window(5), 5);
}

/* A finite timeout lowers this wait's window, and only this wait's. */
static void test_timeout_lowers(void **st)
{
	(void)st;
	to_max(100000);
	assert_int_equal(sg_spin_window(100000, 5), 5000);
	assert_int_equal(sg_spin_window(100000, 1000), 100000);
	assert_int_equal(window(100000), 100000);
	to_max(MAX);
	assert_int_equal(sg_spin_window(MAX, 1), MAX);
}

/* Idle waits from the start: at most 2x the maximum spun in all. */
static void test_idle_costs_2x_max(void **st)
{
	const unsigned int maxes[] = {SPIN_MIN_US, MAX, 999, 1000000};

	(void)st;
	for (unsigned int i = 0; i < sizeof(maxes) / sizeof(maxes[0]); i++) {
		unsigned int max = maxes[i];
		long sum = 0, w;
		int waits = 0;

		to_max(max);
		while ((w = window(max)) > 0) {
			sum += w;
			sg_spin_adapt(max, (long)max * SPIN_IDLE_X + 1);
			assert_true(++waits < 64);
		}
		assert_true(sum <= 2L * max);
	}
}

/* Each thread has its own window: another's idle waits leave this one's
 * alone, and a new thread starts at the maximum whatever this one's is. */
static void test_per_thread(void **st)
{
	struct probe p;

	(void)st;
	to_zero(MAX);
	p = probe(MAX);
	assert_int_equal(p.first, MAX);
	assert_int_equal(p.next, 50);
	assert_int_equal(window(MAX), 0);
	to_max(MAX);
	p = probe(MAX);
	assert_int_equal(p.next, 50);
	assert_int_equal(window(MAX), MAX);
}

/* The ceiling follows what this thread's sleeps cost: SPIN_COST_X times
 * their CPU time (a moving average), never above max nor below
 * SPIN_MIN_US; the idle judgement and the doubling follow it. */
static void *cost_thread(void *arg)
{
	long *got = arg;

	(void)window(1000);
	sg_spin_cost(50000); /* 50 us a sleep: ceiling 200 */
	for (int i = 0; i < 8; i++)
		sg_spin_adapt(1000, 0); /* grows to the ceiling, not max */
	got[0] = window(1000);
	sg_spin_adapt(1000, 200L * SPIN_IDLE_X); /* not idle: stays */
	got[1] = window(1000);
	sg_spin_adapt(1000, 200L * SPIN_IDLE_X + 1); /* idle: halves */
	got[2] = window(1000);
	for (int i = 0; i < 8; i++)
		sg_spin_cost(1000000); /* 1 ms a sleep: ceiling max */
	for (int i = 0; i < 8; i++)
		sg_spin_adapt(1000, 0);
	got[3] = window(1000);
	for (int i = 0; i < 32; i++)
		sg_spin_cost(100); /* 0.1 us: the floor */
	got[4] = window(1000);
	got[5] = window(5); /* max still caps */
	return NULL;
}

static void test_cost_ceiling(void **st)
{
	long got[6];
	pthread_t th;

	(void)st;
	assert_int_equal(pthread_create(&th, NULL, cost_thread, got), 0);
	assert_int_equal(pthread_join(th, NULL), 0);
	assert_int_equal(got[0], 50 * SPIN_COST_X);
	assert_int_equal(got[1], 50 * SPIN_COST_X);
	assert_int_equal(got[2], 25 * SPIN_COST_X);
	assert_int_equal(got[3], 1000);
	assert_int_equal(got[4], SPIN_MIN_US);
	assert_int_equal(got[5], 5);
}

/* One sleep in SPIN_SAMPLE is measured, the first included. */
static void *sample_thread(void *arg)
{
	int *n = arg;

	for (int i = 0; i < 3 * SPIN_SAMPLE; i++)
		*n += sg_spin_sample();
	return NULL;
}

static void test_sample_rate(void **st)
{
	int n = 0;
	pthread_t th;

	(void)st;
	assert_int_equal(pthread_create(&th, NULL, sample_thread, &n), 0);
	assert_int_equal(pthread_join(th, NULL), 0);
	assert_int_equal(n, 3);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_starts_at_max),
	    cmocka_unit_test(test_short_wait_doubles),
	    cmocka_unit_test(test_idle_wait_halves),
	    cmocka_unit_test(test_capped_at_max),
	    cmocka_unit_test(test_timeout_lowers),
	    cmocka_unit_test(test_idle_costs_2x_max),
	    cmocka_unit_test(test_per_thread),
	    cmocka_unit_test(test_cost_ceiling),
	    cmocka_unit_test(test_sample_rate),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
