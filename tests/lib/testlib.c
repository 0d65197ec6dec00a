/* SPDX-License-Identifier: MIT */
/* The test programs' shared helpers: see testlib.h. */
#define _GNU_SOURCE
#include "testlib.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

const char *tl_name;

static pthread_mutex_t out_lock = PTHREAD_MUTEX_INITIALIZER;

/*
 * A program that forks while another thread prints: the child must not
 * inherit the lock held.  Take it across fork (the child is the thread
 * that took it, so it may let go).
 */
static void out_lock_take(void)
{
	pthread_mutex_lock(&out_lock);
}

static void out_lock_give(void)
{
	pthread_mutex_unlock(&out_lock);
}

__attribute__((constructor)) static void tl_start(void)
{
	tl_name = program_invocation_short_name;
	pthread_atfork(out_lock_take, out_lock_give, out_lock_give);
}

/* Not a cancellation point: a thread cancelled in the write would leave
 * the lock held (and every later line, and fork, waiting for it). */
void tl_vline(const char *prefix, const char *fmt, va_list ap)
{
	int cs;

	pthread_setcancelstate(PTHREAD_CANCEL_DISABLE, &cs);
	pthread_mutex_lock(&out_lock);
	fputs(prefix, stdout);
	vprintf(fmt, ap);
	putchar('\n');
	fflush(stdout);
	pthread_mutex_unlock(&out_lock);
	pthread_setcancelstate(cs, NULL);
}

void tl_line(const char *prefix, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	tl_vline(prefix, fmt, ap);
	va_end(ap);
}

void tl_vsay(const char *tag, const char *fmt, va_list ap)
{
	char prefix[96];

	snprintf(prefix, sizeof(prefix), "%s: ", tag);
	tl_vline(prefix, fmt, ap);
}

void tl_die(const char *what)
{
	int e = errno;

	fflush(stdout);
	fprintf(stderr, "%s: %s: %s\n", tl_name, what, strerror(e));
	exit(2);
}

void tl_dief(const char *fmt, ...)
{
	va_list ap;

	fflush(stdout);
	fprintf(stderr, "%s: ", tl_name);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
	exit(2);
}

int tl_fd_open(int fd)
{
	return fcntl(fd, F_GETFD) >= 0 || errno != EBADF;
}

const char *tl_en(int e)
{
	const char *s = e ? strerrorname_np(e) : "0";

	return s ? s : "E?";
}

int64_t tl_now_us(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

int64_t tl_now_ms(void)
{
	return tl_now_us() / 1000;
}

void tl_sleep_ms(int ms)
{
	struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};

	while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
		;
}

uint64_t tl_fnv(uint64_t h, const void *p, size_t n)
{
	const unsigned char *b = p;

	for (size_t i = 0; i < n; i++)
		h = (h ^ b[i]) * 0x100000001b3ULL;
	return h;
}

void tl_rng_seed(struct tl_rng *r, uint64_t seed)
{
	/* xorshift stays 0 from 0: one seed of 2^64 gives it, none in use */
	r->x = seed * 0x9E3779B97F4A7C15ULL + 1;
	r->left = 0;
}

uint64_t tl_rng_next(struct tl_rng *r)
{
	r->x ^= r->x << 13;
	r->x ^= r->x >> 7;
	r->x ^= r->x << 17;
	return r->x;
}

void tl_rng_fill(struct tl_rng *r, void *p, size_t n)
{
	unsigned char *b = p;

	while (n) {
		size_t k;

		if (!r->left) {
			uint64_t w = tl_rng_next(r);

			memcpy(r->buf, &w, sizeof(w));
			r->left = sizeof(w);
		}
		k = n < r->left ? n : r->left;
		memcpy(b, r->buf + sizeof(r->buf) - r->left, k);
		r->left -= (unsigned int)k;
		b += k;
		n -= k;
	}
}

void tl_pattern(void *p, size_t n, uint64_t seed)
{
	struct tl_rng r;

	tl_rng_seed(&r, seed);
	tl_rng_fill(&r, p, n);
}

uint64_t tl_stream_sum(uint64_t seed, uint64_t n)
{
	unsigned char b[65536];
	struct tl_rng r;
	uint64_t h = TL_FNV0;

	tl_rng_seed(&r, seed);
	while (n) {
		size_t k = n < sizeof(b) ? (size_t)n : sizeof(b);

		tl_rng_fill(&r, b, k);
		h = tl_fnv(h, b, k);
		n -= k;
	}
	return h;
}
