/* SPDX-License-Identifier: MIT */
/*
 * Unit tests of the negative cache (rsocket_glue/negcache.c): peers known
 * to have no RDMA listener, each for a TTL that doubles with each refusal
 * in a row, up to the configured one.  The clock is the test's: this file
 * defines clock_gettime, which the object's calls reach instead of libc's.
 */
#define _GNU_SOURCE
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <string.h>
#include <time.h>

#include "glue.h"

static int64_t fake_ms = 1000000;

int clock_gettime(clockid_t clk, struct timespec *ts)
{
	(void)clk;
	ts->tv_sec = fake_ms / 1000;
	ts->tv_nsec = (fake_ms % 1000) * 1000000L;
	return 0;
}

static struct sockaddr_in peer(const char *a, uint16_t port)
{
	struct sockaddr_in s = {.sin_family = AF_INET, .sin_port = htons(port)};

	inet_pton(AF_INET, a, &s.sin_addr);
	return s;
}

#define SA(x) ((const struct sockaddr *)(const void *)&(x))

static int setup(void **st)
{
	(void)st;
	fake_ms += 1000000; /* every entry of a former test long expired */
	return 0;
}

static void test_miss_then_hit(void **st)
{
	struct sockaddr_in p = peer("192.168.77.1", 5001);

	(void)st;
	assert_false(sg_negcache_hit(SA(p), 30));
	sg_negcache_add(SA(p));
	assert_true(sg_negcache_hit(SA(p), 30));
	/* ttl 0 (ERDMA_SHIM_NEGCACHE_TTL_S=0): the cache is off */
	assert_false(sg_negcache_hit(SA(p), 0));
	sg_negcache_del(SA(p));
	assert_false(sg_negcache_hit(SA(p), 30));
}

/* 1 s after the first refusal, 2 s after the second, 4 s ..., at most
 * the configured TTL. */
static void test_ttl_doubles_to_cap(void **st)
{
	struct sockaddr_in p = peer("192.168.77.1", 5002);
	const int64_t want[] = {1000, 2000, 4000, 5000, 5000};

	(void)st;
	for (unsigned int i = 0; i < sizeof(want) / sizeof(want[0]); i++) {
		sg_negcache_add(SA(p));
		fake_ms += want[i] - 1;
		assert_true(sg_negcache_hit(SA(p), 5));
		fake_ms += 1;
		assert_false(sg_negcache_hit(SA(p), 5));
	}
}

/* Quiet for more than twice the TTL: the strikes start over (1 s). */
static void test_strikes_start_over(void **st)
{
	struct sockaddr_in p = peer("192.168.77.1", 5003);

	(void)st;
	for (int i = 0; i < 4; i++)
		sg_negcache_add(SA(p)); /* 8 s */
	fake_ms += 10001;		/* > 2 x 5 s: forgotten at this look */
	assert_false(sg_negcache_hit(SA(p), 5));
	sg_negcache_add(SA(p));
	assert_true(sg_negcache_hit(SA(p), 5));
	fake_ms += 1000;
	assert_false(sg_negcache_hit(SA(p), 5));
}

/* Address, port and family are the key; only AF_INET/AF_INET6 cached. */
static void test_keys(void **st)
{
	struct sockaddr_in a = peer("192.168.77.1", 5004);
	struct sockaddr_in b = peer("192.168.77.2", 5004);
	struct sockaddr_in c = peer("192.168.77.1", 5005);
	struct sockaddr_in6 d = {.sin6_family = AF_INET6,
				 .sin6_port = htons(5004)};
	struct sockaddr_in6 e = d;
	struct sockaddr u = {.sa_family = AF_UNIX};

	(void)st;
	inet_pton(AF_INET6, "fe80::1", &d.sin6_addr);
	inet_pton(AF_INET6, "fe80::2", &e.sin6_addr);
	sg_negcache_add(SA(a));
	sg_negcache_add(SA(d));
	sg_negcache_add(&u);
	assert_true(sg_negcache_hit(SA(a), 30));
	assert_false(sg_negcache_hit(SA(b), 30));
	assert_false(sg_negcache_hit(SA(c), 30));
	assert_true(sg_negcache_hit(SA(d), 30));
	assert_false(sg_negcache_hit(SA(e), 30));
	assert_false(sg_negcache_hit(&u, 30));
}

/* Bounded: an address scan does not grow it past 4096 entries; a peer
 * seen after that is simply not cached. */
static void test_bounded(void **st)
{
	struct sockaddr_in p = peer("10.0.0.0", 1);
	unsigned int cached = 0;

	(void)st;
	for (uint32_t i = 0; i < 5000; i++) {
		p.sin_addr.s_addr = htonl(0x0a000000u + i);
		sg_negcache_add(SA(p));
	}
	for (uint32_t i = 0; i < 5000; i++) {
		p.sin_addr.s_addr = htonl(0x0a000000u + i);
		cached += sg_negcache_hit(SA(p), 30);
	}
	assert_true(cached <= 4096);
	assert_true(cached >= 4096 - 16); /* the earlier tests' few */
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test_setup(test_miss_then_hit, setup),
	    cmocka_unit_test_setup(test_ttl_doubles_to_cap, setup),
	    cmocka_unit_test_setup(test_strikes_start_over, setup),
	    cmocka_unit_test_setup(test_keys, setup),
	    cmocka_unit_test_setup(test_bounded, setup),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
