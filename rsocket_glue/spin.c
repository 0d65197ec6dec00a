/* SPDX-License-Identifier: MIT */
/*
 * ERDMA_SHIM_POLL_US: the most a wait keeps checking before it sleeps
 * (0 = no window of our own; rsockets spins 10 us inside rpoll either way).
 * A sleep costs a wake-up (under rpoll(-1): CQ arm, poll, CQ event read,
 * poll-gate read), far more than a short wait for the peer's next message.
 *
 * The window's ceiling is what a sleep costs here, not a constant: each
 * thread measures the CPU time its sleeps take (every SPIN_SAMPLE-th, and
 * its first) and spins at most SPIN_COST_X times that (never more than the
 * maximum).  Spinning about as long as a sleep would cost is the classic
 * spin-then-block rule (never more than about twice the better choice's
 * cost), and it scales with the machine: a few tens of us where system
 * calls are cheap, and the hundreds of us a round trip takes under
 * emulation, where a fixed window shorter than the round trip made every
 * wait sleep (issue 41).
 *
 * The window adapts per thread so that idle connections stop paying for it:
 * a wait that lasted over SPIN_IDLE_X times the ceiling found the peer idle,
 * and halves the window (to 0 below SPIN_MIN_US); any shorter wait that
 * ended in sleep doubles it again, up to the ceiling.  "Shorter" is judged
 * against a multiple of the ceiling, not the ceiling itself: once both ends
 * sleep, every wait also carries the peer's wake-up, and a rule that only
 * grew on waits under the ceiling would never climb back out of that.
 * Cost: a thread whose waits are all idle spins at most 2x the ceiling in
 * all before its window reaches 0; a busy one spins up to the ceiling per
 * wait, i.e. while its peer is active (yielding to any other runnable
 * thread, see spin() in rsock.c).
 */
#include "glue_int.h"

static __thread unsigned int spin_win_us;
static __thread bool spin_win_set;
static __thread unsigned long sleep_cost_ns; /* 0: not measured yet */
static __thread unsigned int sleeps;

/* The window's ceiling: max, or less where a sleep costs less. */
static unsigned int spin_cap(unsigned int max)
{
	unsigned long c = sleep_cost_ns / 1000 * SPIN_COST_X;

	if (!sleep_cost_ns)
		return max;
	if (c < SPIN_MIN_US)
		c = SPIN_MIN_US;
	return c < max ? (unsigned int)c : max;
}

/* Should this sleep's CPU time be measured (and given to sg_spin_cost)? */
bool sg_spin_sample(void)
{
	return sleeps++ % SPIN_SAMPLE == 0;
}

/* A measured sleep took cpu_ns of this thread's CPU time. */
void sg_spin_cost(unsigned long cpu_ns)
{
	sleep_cost_ns =
	    sleep_cost_ns ? (3 * sleep_cost_ns + cpu_ns) / 4 : cpu_ns;
	if (!sleep_cost_ns)
		sleep_cost_ns = 1;
}

/* The current window, at most the ceiling (which a finite timeout
 * lowers). */
long sg_spin_window(unsigned int max, int timeout_ms)
{
	unsigned int cap = spin_cap(max);
	long w;

	if (!spin_win_set) {
		/* start ready to spin, briefly: a thread that makes one
		 * wait on an idle peer pays little before anything is known */
		spin_win_us = max < SPIN_START_US ? max : SPIN_START_US;
		spin_win_set = true;
	}
	w = spin_win_us < cap ? spin_win_us : cap;
	if (timeout_ms > 0 && w > timeout_ms * 1000L)
		w = timeout_ms * 1000L;
	return w;
}

/* A wait that slept, waited_us in all: would a longer spin have paid? */
void sg_spin_adapt(unsigned int max, long waited_us)
{
	unsigned int cap = spin_cap(max);

	if (spin_win_us > cap)
		spin_win_us = cap;
	if (waited_us <= (long)cap * SPIN_IDLE_X) {
		WS_ADD(grow, 1);
		spin_win_us =
		    spin_win_us < SPIN_MIN_US ? SPIN_MIN_US : spin_win_us * 2;
		if (spin_win_us > cap)
			spin_win_us = cap;
	} else {
		WS_ADD(shrink, 1);
		spin_win_us /= 2;
		if (spin_win_us < SPIN_MIN_US)
			spin_win_us = 0;
	}
}

#ifdef SG_WAITSTATS
/*
 * Diagnostics, compiled in only with -DSG_WAITSTATS (bench/sweep --diag
 * builds such a library beside the real one): what each blocking wait of
 * the process did, printed to stderr at exit.  Relaxed atomic adds: a few
 * per wait, none on the kernel-fd path.
 */
#include <stdio.h>
#include <unistd.h>

struct sg_waitstats sg_ws;

static void __attribute__((destructor)) waitstats_print(void)
{
	struct sg_waitstats *w = &sg_ws;
	unsigned long n = w->waits ? w->waits : 1;

	fprintf(
	    stderr,
	    "waitstats pid %d: waits %lu first-look %lu spin-won %lu "
	    "slept %lu win0 %lu mean-win-us %.1f yields/wait %.2f "
	    "mean-slept-wait-us %.1f sleep-cpu-us %.1f grow %lu shrink %lu\n",
	    (int)getpid(), w->waits, w->first, w->spun, w->slept, w->win0,
	    (double)w->win_us / (double)n, (double)w->yields / (double)n,
	    w->slept ? (double)w->slept_us / (double)w->slept : 0.0,
	    w->slept ? (double)w->sleep_cpu_ns / 1e3 / (double)w->slept : 0.0,
	    w->grow, w->shrink);
}
#endif
