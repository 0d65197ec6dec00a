/* SPDX-License-Identifier: MIT */
/* Unit tests of the address helpers (preload/base/addr.c). */
#define _GNU_SOURCE
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <string.h>

#include "addr.h"

static struct sockaddr_in v4(const char *a, uint16_t port)
{
	struct sockaddr_in s = {.sin_family = AF_INET, .sin_port = htons(port)};

	assert_int_equal(inet_pton(AF_INET, a, &s.sin_addr), 1);
	return s;
}

static struct sockaddr_in6 v6(const char *a, uint16_t port)
{
	struct sockaddr_in6 s = {.sin6_family = AF_INET6,
				 .sin6_port = htons(port)};

	assert_int_equal(inet_pton(AF_INET6, a, &s.sin6_addr), 1);
	return s;
}

/* ::ffff:a.b.c.d is the AF_INET address a.b.c.d, port kept. */
static void test_unmap_mapped(void **st)
{
	struct sockaddr_in6 in = v6("::ffff:192.168.77.1", 7001);
	struct sockaddr_storage out;
	struct sockaddr_in *o = (void *)&out;

	(void)st;
	assert_int_equal(shim_addr_unmap((void *)&in, sizeof(in), &out),
			 sizeof(struct sockaddr_in));
	assert_int_equal(o->sin_family, AF_INET);
	assert_int_equal(ntohs(o->sin_port), 7001);
	assert_int_equal(o->sin_addr.s_addr, inet_addr("192.168.77.1"));
}

/* A real IPv6 address, an AF_INET one, and a short AF_INET6 one (not
 * read past its length) are copied as they are. */
static void test_unmap_others(void **st)
{
	struct sockaddr_in6 in6 = v6("fe80::1", 80);
	struct sockaddr_in in4 = v4("10.0.0.1", 81);
	struct sockaddr_storage out;

	(void)st;
	assert_int_equal(shim_addr_unmap((void *)&in6, sizeof(in6), &out),
			 sizeof(in6));
	assert_memory_equal(&out, &in6, sizeof(in6));
	assert_int_equal(shim_addr_unmap((void *)&in4, sizeof(in4), &out),
			 sizeof(in4));
	assert_memory_equal(&out, &in4, sizeof(in4));
	in6 = v6("::ffff:1.2.3.4", 82);
	assert_int_equal(shim_addr_unmap((void *)&in6, 8, &out), 8);
	assert_int_equal(out.ss_family, AF_INET6);
}

/* AF_INET in AF_INET6 is v4-mapped; in its own family it is a copy. */
static void test_to_family(void **st)
{
	struct sockaddr_in in4 = v4("192.168.77.2", 443);
	struct sockaddr_in6 want = v6("::ffff:192.168.77.2", 443);
	struct sockaddr_in6 in6 = v6("2001:db8::5", 444);
	struct sockaddr_storage out;

	(void)st;
	assert_int_equal(shim_addr_to_family((void *)&in4, AF_INET6, &out),
			 sizeof(want));
	assert_memory_equal(&out, &want, sizeof(want));
	assert_int_equal(shim_addr_to_family((void *)&in4, AF_INET, &out),
			 sizeof(in4));
	assert_memory_equal(&out, &in4, sizeof(in4));
	assert_int_equal(shim_addr_to_family((void *)&in6, AF_INET6, &out),
			 sizeof(in6));
	assert_memory_equal(&out, &in6, sizeof(in6));
}

static void test_ports(void **st)
{
	struct sockaddr_in in4 = v4("127.0.0.1", 1);
	struct sockaddr_in6 in6 = v6("::1", 2);

	(void)st;
	assert_int_equal(shim_addr_port((void *)&in4), 1);
	assert_int_equal(shim_addr_port((void *)&in6), 2);
	shim_addr_set_port((void *)&in4, 65535);
	shim_addr_set_port((void *)&in6, 20001);
	assert_int_equal(ntohs(in4.sin_port), 65535);
	assert_int_equal(ntohs(in6.sin6_port), 20001);
	assert_int_equal(in4.sin_addr.s_addr, htonl(INADDR_LOOPBACK));
}

/* As getsockname(2): at most *len bytes are written, *len becomes the
 * whole length; a NULL buffer or a zero length writes nothing. */
static void test_copy_out(void **st)
{
	struct sockaddr_in6 a6 = v6("2001:db8::7", 9);
	struct sockaddr_storage a;
	unsigned char buf[64];
	socklen_t len;

	(void)st;
	memset(&a, 0, sizeof(a));
	memcpy(&a, &a6, sizeof(a6));
	memset(buf, 0xaa, sizeof(buf));
	len = 8;
	shim_addr_copy_out(&a, sizeof(a6), (void *)buf, &len);
	assert_int_equal(len, sizeof(a6));
	assert_memory_equal(buf, &a6, 8);
	assert_int_equal(buf[8], 0xaa);
	len = sizeof(buf);
	shim_addr_copy_out(&a, sizeof(a6), (void *)buf, &len);
	assert_int_equal(len, sizeof(a6));
	assert_memory_equal(buf, &a6, sizeof(a6));
	assert_int_equal(buf[sizeof(a6)], 0xaa);
	len = 0;
	shim_addr_copy_out(&a, sizeof(a6), NULL, &len);
	assert_int_equal(len, sizeof(a6));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_unmap_mapped),
	    cmocka_unit_test(test_unmap_others),
	    cmocka_unit_test(test_to_family),
	    cmocka_unit_test(test_ports),
	    cmocka_unit_test(test_copy_out),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
