/* SPDX-License-Identifier: MIT */
/*
 * The library's one clock: CLOCK_MONOTONIC, in ms or us, and the timeout
 * conversions every family shares.  (The pthread timed waits take an
 * absolute deadline on their own clock: shim_deadline.)
 */
#ifndef SHIM_CLOCK_H
#define SHIM_CLOCK_H

#include <stdint.h>
#include <sys/time.h>
#include <time.h>

static inline int64_t shim_now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static inline int64_t shim_now_us(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

/* now + ms on clock clk, for pthread_cond_timedwait and the like. */
static inline struct timespec shim_deadline(clockid_t clk, long ms)
{
	struct timespec t;

	clock_gettime(clk, &t);
	t.tv_sec += ms / 1000;
	t.tv_nsec += (ms % 1000) * 1000000L;
	if (t.tv_nsec >= 1000000000L) {
		t.tv_sec++;
		t.tv_nsec -= 1000000000L;
	}
	return t;
}

/* A socket timeout (SO_RCVTIMEO/SO_SNDTIMEO) in whole milliseconds, rounded
 * up; -1 when unset (zero: forever).  A negative one is 0, expired at once:
 * the kernel stores it as 0 jiffies (sock_set_timeout), and a wait then
 * fails with EAGAIN at once. */
static inline int shim_tv_ms(const struct timeval *tv)
{
	long long ms;

	if (!tv->tv_sec && !tv->tv_usec)
		return -1;
	if (tv->tv_sec < 0)
		return 0;
	ms = (long long)tv->tv_sec * 1000 + (tv->tv_usec + 999) / 1000;
	return ms > 0x7fffffff ? 0x7fffffff : (int)ms;
}

/* Is ts a timeout the kernel takes (poll_select_set_timeout: no negative
 * seconds, nanoseconds in [0, 1e9))?  NULL is: no timeout. */
static inline bool shim_ts_valid(const struct timespec *ts)
{
	return !ts ||
	       (ts->tv_sec >= 0 && (unsigned long)ts->tv_nsec < 1000000000UL);
}

/* A timespec timeout in whole milliseconds, rounded up; NULL = -1 (forever). */
static inline int shim_ts_to_ms(const struct timespec *ts)
{
	long long ms;

	if (!ts)
		return -1;
	ms = (long long)ts->tv_sec * 1000 + (ts->tv_nsec + 999999) / 1000000;
	return ms > 0x7fffffff ? 0x7fffffff : (int)ms;
}

#endif
