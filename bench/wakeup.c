/* SPDX-License-Identifier: MIT */
/*
 * wakeup: how long a thread blocked in epoll_wait takes to return once its
 * peer sends, and what it costs while nothing comes.  Plain socket API: run
 * it with and without LD_PRELOAD (bench/wakeup-run interleaves the two).
 *
 *   wakeup ADDR [--idle N] [--samples K] [--json]
 *
 * One process plays both ends: it listens on ADDR (port 0) and connects to
 * itself, 1 + N times.  The accepted ends are registered (EPOLLIN,
 * level-triggered) in one set, the busy one first, and a waiter thread
 * blocks in epoll_wait(100 events, -1) on it.  K times: the main thread
 * waits until the waiter is back in epoll_wait and 2 ms more (so it is
 * asleep, not spinning), sends 1 byte on the busy connection, and the
 * waiter stamps its return: the wake-up latency, peer send -> return.
 * Then, 0.5 s after the last wake-up, the waiter blocks 2 s with nothing
 * coming: its CPU time, and the process's, in that time.  Prints percentiles in
 * microseconds and the CPU in milliseconds; --json adds one JSON line (the
 * last).
 */
#define BENCH_NAME "wakeup"
#include "bench.h"

#include <pthread.h>
#include <sched.h>
#include <sys/epoll.h>

struct waiter {
	int ep, busy, samples;
	uint64_t *woke; /* now_ns() at each return */
	int done;	/* atomic: returns so far */
	int quit;	/* atomic: the main thread's "stop" */
};

static void *waiter_main(void *arg)
{
	struct waiter *w = arg;
	struct epoll_event ev[100];
	char b[64];

	while (!__atomic_load_n(&w->quit, __ATOMIC_ACQUIRE)) {
		int n = epoll_wait(w->ep, ev, 100, -1);
		int i = __atomic_load_n(&w->done, __ATOMIC_RELAXED);

		if (n <= 0)
			continue;
		if (i < w->samples)
			w->woke[i] = now_ns();
		while (recv(w->busy, b, sizeof(b), MSG_DONTWAIT) > 0)
			;
		__atomic_store_n(&w->done, i + 1, __ATOMIC_RELEASE);
	}
	return NULL;
}

/* Accept one connection on lfd, made by connecting to addr:port. */
static void pair(int lfd, const char *addr, const char *port, int *c, int *s)
{
	int one = 1;

	*c = connect_to(addr, port, NULL);
	*s = accept(lfd, NULL, NULL);
	if (*s < 0)
		die("accept");
	setsockopt(*c, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
}

static void add_in(int ep, int fd)
{
	struct epoll_event ev = {.events = EPOLLIN, .data.fd = fd};

	if (epoll_ctl(ep, EPOLL_CTL_ADD, fd, &ev) < 0)
		die("epoll_ctl");
}

/* Until the waiter has returned n times (it then drains and waits again). */
static void wait_done(struct waiter *w, int n)
{
	uint64_t end = now_ns() + 10000000000ull;

	while (__atomic_load_n(&w->done, __ATOMIC_ACQUIRE) < n)
		if (now_ns() > end) {
			fprintf(stderr, "%s: the waiter did not wake in 10 s\n",
				prog);
			exit(3);
		} else {
			sched_yield();
		}
}

static double thread_cpu_ms(pthread_t t)
{
	struct timespec ts;
	clockid_t cid;

	if (pthread_getcpuclockid(t, &cid) || clock_gettime(cid, &ts))
		die("thread CPU clock");
	return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

static void usage(void) __attribute__((noreturn));
static void usage(void)
{
	fprintf(stderr, "usage: %s ADDR [--idle N] [--samples K] [--json]\n",
		prog);
	exit(2);
}

int main(int argc, char **argv)
{
	struct waiter w = {0};
	long idle = 0, samples = 200;
	uint64_t *sent, *lat;
	double wcpu, pcpu;
	char port[16];
	int lfd, c, json = 0;
	pthread_t t;

	if (argc < 2)
		usage();
	for (int i = 2; i < argc; i++) {
		if (!strcmp(argv[i], "--json"))
			json = 1;
		else if (i + 1 == argc)
			usage();
		else if (!strcmp(argv[i], "--idle"))
			idle = (long)parse_size(argv[i], argv[i + 1]), i++;
		else if (!strcmp(argv[i], "--samples"))
			samples = (long)parse_size(argv[i], argv[i + 1]), i++;
		else
			usage();
	}
	if (samples < 10 || samples > 100000)
		usage();
	raise_nofile((rlim_t)idle * 10 + 64);
	signal(SIGPIPE, SIG_IGN);
	lfd = listen_ready(argv[1], "0");
	{
		struct sockaddr_storage ss;
		socklen_t sl = sizeof(ss);

		getsockname(lfd, (struct sockaddr *)&ss, &sl);
		snprintf(port, sizeof(port), "%u",
			 ntohs(((struct sockaddr_in *)&ss)->sin_port));
	}
	w.ep = epoll_create1(EPOLL_CLOEXEC);
	if (w.ep < 0)
		die("epoll_create1");
	pair(lfd, argv[1], port, &c, &w.busy);
	add_in(w.ep, w.busy);
	for (long i = 0; i < idle; i++) {
		int ic, is;

		pair(lfd, argv[1], port, &ic, &is);
		add_in(w.ep, is);
	}
	w.samples = (int)samples;
	w.woke = calloc((size_t)samples, sizeof(*w.woke));
	sent = calloc((size_t)samples, sizeof(*sent));
	lat = calloc((size_t)samples, sizeof(*lat));
	if (!w.woke || !sent || !lat)
		die("calloc");
	if (pthread_create(&t, NULL, waiter_main, &w))
		die("pthread_create");
	for (int i = 0; i < samples; i++) {
		struct timespec nap = {0, 2000000};

		wait_done(&w, i);
		nanosleep(&nap, NULL); /* let the waiter fall asleep */
		sent[i] = now_ns();
		if (send(c, "w", 1, MSG_NOSIGNAL) != 1)
			die("send");
	}
	wait_done(&w, (int)samples);
	for (int i = 0; i < samples; i++)
		lat[i] = w.woke[i] - sent[i];
	qsort(lat, (size_t)samples, sizeof(*lat), cmp_u64);

	/* 2 s with nothing coming, once the waiter has gone back to sleep
	 * (its way there -- with N idle rsockets, a look at each and each
	 * CQ armed -- is a cost of the last wake-up, not of being idle) */
	{
		struct timespec settle = {0, 500000000}, two = {2, 0};
		double w0, p0;

		nanosleep(&settle, NULL);
		w0 = thread_cpu_ms(t);
		p0 = cpu_s();
		nanosleep(&two, NULL);
		wcpu = thread_cpu_ms(t) - w0;
		pcpu = (cpu_s() - p0) * 1e3;
	}
	__atomic_store_n(&w.quit, 1, __ATOMIC_RELEASE);
	(void)!send(c, "q", 1, MSG_NOSIGNAL);
	pthread_join(t, NULL);

	{
		size_t n = (size_t)samples;
		double p10 = pct_us(lat, n, 10), p50 = pct_us(lat, n, 50);
		double p90 = pct_us(lat, n, 90), max = pct_us(lat, n, 100);

		printf("wakeup: %ld idle connections, %ld samples: p10 %.1f "
		       "us, p50 %.1f us, p90 %.1f us, max %.1f us; 2 s idle: "
		       "waiter %.1f ms CPU, process %.1f ms CPU\n",
		       idle, samples, p10, p50, p90, max, wcpu, pcpu);
		if (json)
			printf(
			    "{\"idle\": %ld, \"samples\": %ld, \"p10_us\": "
			    "%.1f, \"p50_us\": %.1f, \"p90_us\": %.1f, "
			    "\"max_us\": %.1f, \"idle_waiter_cpu_ms\": %.1f, "
			    "\"idle_process_cpu_ms\": %.1f}\n",
			    idle, samples, p10, p50, p90, max, wcpu, pcpu);
	}
	return 0;
}
