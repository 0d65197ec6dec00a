/* SPDX-License-Identifier: MIT */
/* Unit tests of the ERDMA_SHIM_* parser (preload/base/config.c). */
#define _GNU_SOURCE
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <arpa/inet.h>
#include <stdio.h>
#include <string.h>

#include "config.h"

struct shim_config shim_cfg;

static char last_msg[512];
static int n_msgs, n_invalid;

static void report(const char *msg, bool invalid, void *arg)
{
	(void)arg;
	snprintf(last_msg, sizeof(last_msg), "%s", msg);
	n_msgs++;
	n_invalid += invalid;
}

static int parse1(struct shim_config *c, const char *entry)
{
	char *env[] = {(char *)entry, NULL};

	shim_config_defaults(c);
	n_msgs = n_invalid = 0;
	last_msg[0] = '\0';
	return shim_config_parse(c, env, report, NULL);
}

static void test_defaults(void **st)
{
	struct shim_config c;

	(void)st;
	assert_int_equal(parse1(&c, "PATH=/bin"), 0);
	assert_int_equal(c.mode, SHIM_MODE_AUTO);
	assert_int_equal(c.log_level, SHIM_LOG_WARN);
	assert_int_equal(c.port_offset, SHIM_PORT_OFFSET_AUTO);
	assert_int_equal(c.connect_timeout_ms, 1000);
	assert_int_equal(c.fd_share, 50);
	assert_false(c.invalid);
	assert_int_equal(n_msgs, 0);
}

static void test_modes_and_levels(void **st)
{
	struct shim_config c;

	(void)st;
	assert_int_equal(parse1(&c, "ERDMA_SHIM=require"), 0);
	assert_int_equal(c.mode, SHIM_MODE_REQUIRE);
	assert_int_equal(parse1(&c, "ERDMA_SHIM=off"), 0);
	assert_int_equal(c.mode, SHIM_MODE_OFF);
	assert_int_equal(parse1(&c, "ERDMA_SHIM_LOG=debug"), 0);
	assert_int_equal(c.log_level, SHIM_LOG_DEBUG);
	/* case matters, as it does for every other variable */
	assert_int_equal(parse1(&c, "ERDMA_SHIM=Auto"), 1);
	assert_true(c.invalid);
}

static void test_invalid_is_one_clear_line(void **st)
{
	struct shim_config c;

	(void)st;
	assert_int_equal(parse1(&c, "ERDMA_SHIM=bogus"), 1);
	assert_int_equal(n_msgs, 1);
	assert_int_equal(n_invalid, 1);
	assert_non_null(strstr(last_msg, "ERDMA_SHIM='bogus'"));
	assert_null(strchr(last_msg, '\n'));
	assert_int_equal(c.mode, SHIM_MODE_OFF); /* passthrough */

	/* a huge value is shown truncated, still on one line */
	char big[4096] = "ERDMA_SHIM_PORT_OFFSET=";
	memset(big + strlen(big), '9', 3000);
	assert_int_equal(parse1(&c, big), 1);
	assert_true(strlen(last_msg) < 300);
	assert_non_null(strstr(last_msg, "ERDMA_SHIM_PORT_OFFSET="));
}

/* A value can't split or forge a log line: control bytes come out escaped. */
static void test_value_escaped(void **st)
{
	struct shim_config c;

	(void)st;
	assert_int_equal(
	    parse1(&c, "ERDMA_SHIM=a\nliberdma_shim[1] info: x\r\x1b"), 1);
	assert_null(strchr(last_msg, '\n'));
	assert_null(strchr(last_msg, '\r'));
	assert_null(strchr(last_msg, '\x1b'));
	assert_non_null(strstr(
	    last_msg, "ERDMA_SHIM='a\\x0aliberdma_shim[1] info: x\\x0d\\x1b'"));
	assert_int_equal(parse1(&c, "ERDMA_SHIM_\x01X=1"), 1);
	assert_null(strchr(last_msg, '\x01'));
}

static void test_unknown_name_warns_only(void **st)
{
	struct shim_config c;

	(void)st;
	assert_int_equal(parse1(&c, "ERDMA_SHIM_PORTOFFSET=1"), 1);
	assert_int_equal(n_invalid, 0);
	assert_false(c.invalid);
	assert_int_equal(c.mode, SHIM_MODE_AUTO);
	assert_non_null(strstr(last_msg, "ERDMA_SHIM_PORTOFFSET"));
}

/* The rsocket port map: one-to-one over 1..65535, wrapping past 65535. */
static void test_port_map(void **st)
{
	static unsigned char seen[65536];
	static const unsigned int offs[] = {0, 1, 20000, 65534, 65535};

	(void)st;
	assert_int_equal(shim_port_map(7600, 0), 7600);
	assert_int_equal(shim_port_map(7600, 20000), 27600);
	assert_int_equal(shim_port_map(45535, 20000), 65535);
	assert_int_equal(shim_port_map(45536, 20000), 1);
	assert_int_equal(shim_port_map(50051, 20000), 4516);
	assert_int_equal(shim_port_map(1, 65535), 1);
	for (size_t i = 0; i < sizeof(offs) / sizeof(offs[0]); i++) {
		memset(seen, 0, sizeof(seen));
		for (unsigned int p = 1; p <= 65535; p++) {
			uint16_t m = shim_port_map((uint16_t)p, offs[i]);

			assert_true(m >= 1);
			assert_int_equal(seen[m], 0);
			seen[m] = 1;
		}
	}
}

static void test_numbers(void **st)
{
	struct shim_config c;

	(void)st;
	assert_int_equal(parse1(&c, "ERDMA_SHIM_PORT_OFFSET=65535"), 0);
	assert_int_equal(c.port_offset, 65535);
	assert_int_equal(parse1(&c, "ERDMA_SHIM_PORT_OFFSET=0"), 0);
	assert_int_equal(c.port_offset, 0); /* set to 0: not by transport */
	static const char *bad[] = {
	    "ERDMA_SHIM_PORT_OFFSET=65536",
	    "ERDMA_SHIM_PORT_OFFSET=-1",
	    "ERDMA_SHIM_PORT_OFFSET=+1",
	    "ERDMA_SHIM_PORT_OFFSET= 1",
	    "ERDMA_SHIM_PORT_OFFSET=1 ",
	    "ERDMA_SHIM_PORT_OFFSET=",
	    "ERDMA_SHIM_PORT_OFFSET=0x10",
	    "ERDMA_SHIM_PORT_OFFSET=99999999999999999999999",
	    "ERDMA_SHIM_CONNECT_TIMEOUT_MS=0",
	    "ERDMA_SHIM_CONNECT_TIMEOUT_MS=600001",
	    "ERDMA_SHIM_SNDBUF=12Q",
	    "ERDMA_SHIM_SNDBUF=100",
	    "ERDMA_SHIM_SNDBUF=2G",
	    "ERDMA_SHIM_SNDBUF=17179869184K",
	    "ERDMA_SHIM_STATS=yes",
	    "ERDMA_SHIM_INLINE=4097",
	    "ERDMA_SHIM_FD_SHARE=0",
	    "ERDMA_SHIM_FD_SHARE=101",
	    "ERDMA_SHIM_FD_SHARE=50%",
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		assert_int_equal(parse1(&c, bad[i]), 1);
		assert_true(c.invalid);
	}
	assert_int_equal(parse1(&c, "ERDMA_SHIM_FD_SHARE=100"), 0);
	assert_int_equal(c.fd_share, 100);
	assert_int_equal(parse1(&c, "ERDMA_SHIM_SNDBUF=256K"), 0);
	assert_int_equal(c.sndbuf, 256 * 1024);
	assert_int_equal(parse1(&c, "ERDMA_SHIM_RCVBUF=1G"), 0);
	assert_int_equal(c.rcvbuf, 1u << 30);
	assert_int_equal(parse1(&c, "ERDMA_SHIM_SNDBUF=0"), 0);
	assert_int_equal(c.sndbuf, 0);
	assert_int_equal(parse1(&c, "ERDMA_SHIM_STATS=1"), 0);
	assert_true(c.stats);
	/* The stats segment is on unless switched off. */
	assert_int_equal(parse1(&c, "ERDMA_SHIM_STATS=0"), 0);
	assert_true(c.stats_shm);
	assert_int_equal(parse1(&c, "ERDMA_SHIM_STATS_SHM=0"), 0);
	assert_false(c.stats_shm);
	assert_int_equal(parse1(&c, "ERDMA_SHIM_STATS_SHM=on"), 1);
	assert_true(c.invalid);
}

static void test_log_file(void **st)
{
	struct shim_config c;
	char big[400] = "ERDMA_SHIM_LOG_FILE=/";

	(void)st;
	assert_int_equal(parse1(&c, "ERDMA_SHIM_LOG_FILE=/tmp/s.%p.log"), 0);
	assert_string_equal(c.log_file, "/tmp/s.%p.log");
	assert_int_equal(parse1(&c, "ERDMA_SHIM_LOG_FILE="), 1);
	memset(big + strlen(big), 'a', 300);
	assert_int_equal(parse1(&c, big), 1);
}

static bool allows(const struct shim_config *c, const char *ip, int port)
{
	uint8_t a[16];

	if (inet_pton(AF_INET, ip, a) == 1)
		return shim_config_allows(c, AF_INET, a, (uint16_t)port);
	assert_int_equal(inet_pton(AF_INET6, ip, a), 1);
	return shim_config_allows(c, AF_INET6, a, (uint16_t)port);
}

static void test_default_rules(void **st)
{
	struct shim_config c;

	(void)st;
	parse1(&c, "X=1");
	assert_true(allows(&c, "192.168.77.1", 80));
	assert_true(allows(&c, "fd00::1", 80));
	assert_false(allows(&c, "127.0.0.1", 80));
	assert_false(allows(&c, "127.3.2.1", 80));
	assert_false(allows(&c, "::1", 80));
	assert_false(allows(&c, "::ffff:127.0.0.1", 80));
	assert_true(allows(&c, "::ffff:10.1.2.3", 80));
}

static void test_allow_deny(void **st)
{
	struct shim_config c;
	char *env[] = {
	    "ERDMA_SHIM_ALLOW=10.0.0.0/8:5000-6000,[fd00::]/16,*:7000",
	    "ERDMA_SHIM_DENY=10.9.0.0/16,10.1.1.1:5500", NULL};

	(void)st;
	shim_config_defaults(&c);
	assert_int_equal(shim_config_parse(&c, env, report, NULL), 0);
	assert_int_equal(c.n_allow, 3);
	assert_int_equal(c.n_deny, 2);
	assert_true(allows(&c, "10.2.3.4", 5000));
	assert_true(allows(&c, "10.2.3.4", 6000));
	assert_false(allows(&c, "10.2.3.4", 6001));
	assert_false(allows(&c, "11.2.3.4", 5000));
	assert_true(allows(&c, "::ffff:10.2.3.4", 5001)); /* v4-mapped */
	assert_false(allows(&c, "10.9.3.4", 5001));	  /* deny wins */
	assert_false(allows(&c, "10.1.1.1", 5500));
	assert_true(allows(&c, "10.1.1.1", 5501));
	assert_true(allows(&c, "fd00:1::5", 1));
	assert_false(allows(&c, "fd01::5", 1));
	assert_true(allows(&c, "8.8.8.8", 7000));   /* '*' with a port */
	assert_true(allows(&c, "127.0.0.1", 7000)); /* explicit allow */

	assert_int_equal(parse1(&c, "ERDMA_SHIM_ALLOW=[::1]:443"), 0);
	assert_true(allows(&c, "::1", 443));
	assert_false(allows(&c, "::1", 444));
	assert_int_equal(parse1(&c, "ERDMA_SHIM_ALLOW=fe80::1"), 0);
	assert_true(allows(&c, "fe80::1", 9));
	assert_int_equal(parse1(&c, "ERDMA_SHIM_DENY=10.0.0.0/9"), 0);
	assert_false(allows(&c, "10.127.0.1", 1));
	assert_true(allows(&c, "10.128.0.1", 1));
}

static bool accepts(const struct shim_config *c, const char *ip, int port)
{
	uint8_t a[16];

	if (inet_pton(AF_INET, ip, a) == 1)
		return shim_config_accepts(c, AF_INET, a, (uint16_t)port);
	assert_int_equal(inet_pton(AF_INET6, ip, a), 1);
	return shim_config_accepts(c, AF_INET6, a, (uint16_t)port);
}

/* ERDMA_SHIM_ACCEPT_FROM: the listener's side, apart from ALLOW/DENY. */
static void test_accept_from(void **st)
{
	struct shim_config c;
	char *env[] = {"ERDMA_SHIM_ACCEPT_FROM=10.1.0.0/16:5000-5001,[fd00::]/"
		       "16,*:7000",
		       "ERDMA_SHIM_DENY=10.1.2.3", NULL};
	uint8_t ib[16] = {0};

	(void)st;
	/* unset: everyone, loopback too (it is not ALLOW's default) */
	parse1(&c, "X=1");
	assert_int_equal(c.n_accept_from, 0);
	assert_true(accepts(&c, "192.168.77.2", 80));
	assert_true(accepts(&c, "127.0.0.1", 80));
	assert_true(accepts(&c, "::1", 80));
	assert_true(shim_config_accepts(&c, 27 /* AF_IB */, ib, 80));

	shim_config_defaults(&c);
	assert_int_equal(shim_config_parse(&c, env, report, NULL), 0);
	assert_int_equal(c.n_accept_from, 3);
	assert_int_equal(c.n_allow, 0); /* a table of its own */
	assert_false(c.allow_set);
	assert_true(accepts(&c, "10.1.9.9", 5000));
	assert_true(accepts(&c, "10.1.9.9", 5001));
	assert_false(accepts(&c, "10.1.9.9", 5002)); /* P outside */
	assert_false(accepts(&c, "10.2.9.9", 5000)); /* address outside */
	assert_true(accepts(&c, "10.1.2.3", 5000));  /* DENY: outgoing only */
	assert_true(accepts(&c, "::ffff:10.1.9.9", 5000)); /* v4-mapped */
	assert_false(accepts(&c, "::ffff:10.2.9.9", 5000));
	assert_true(accepts(&c, "fd00:1::5", 1));
	assert_false(accepts(&c, "fd01::5", 1));
	assert_true(accepts(&c, "8.8.8.8", 7000));  /* '*' with a port */
	assert_false(accepts(&c, "127.0.0.1", 80)); /* set: no default */
	/* an address that is not IP (AF_IB) matches only a '*' rule */
	assert_false(shim_config_accepts(&c, 27, ib, 5000));
	assert_true(shim_config_accepts(&c, 27, ib, 7000));
	/* and outgoing connects are not filtered by it */
	assert_true(allows(&c, "10.2.9.9", 5000));

	assert_int_equal(parse1(&c, "ERDMA_SHIM_ACCEPT_FROM=[::1]:443"), 0);
	assert_true(accepts(&c, "::1", 443));
	assert_false(accepts(&c, "::1", 444));
	assert_false(accepts(&c, "127.0.0.1", 443));
}

static void test_bad_rules(void **st)
{
	struct shim_config c;
	static const char *bad[] = {
	    "ERDMA_SHIM_ALLOW=10.0.0.0/33",
	    "ERDMA_SHIM_ALLOW=10.0.0.0/",
	    "ERDMA_SHIM_ALLOW=300.1.1.1",
	    "ERDMA_SHIM_ALLOW=10.0.0.1:70000",
	    "ERDMA_SHIM_ALLOW=10.0.0.1:90-80",
	    "ERDMA_SHIM_ALLOW=",
	    "ERDMA_SHIM_ALLOW=,",
	    "ERDMA_SHIM_DENY=[::1",
	    "ERDMA_SHIM_DENY=[::1]x",
	    "ERDMA_SHIM_DENY=*/8",
	    "ERDMA_SHIM_DENY=::/129",
	    "ERDMA_SHIM_DENY=host.example:80",
	    "ERDMA_SHIM_DENY=1.2.3.4:",
	    "ERDMA_SHIM_ACCEPT_FROM=",
	    "ERDMA_SHIM_ACCEPT_FROM=10.0.0.0/33",
	    "ERDMA_SHIM_ACCEPT_FROM=10.0.0.1:0-70000",
	    "ERDMA_SHIM_ACCEPT_FROM=client.example",
	};

	(void)st;
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		assert_int_equal(parse1(&c, bad[i]), 1);
		assert_true(c.invalid);
		assert_int_equal(c.mode, SHIM_MODE_OFF);
	}
	/* 33 rules is one too many */
	char many[2048] = "ERDMA_SHIM_DENY=";
	for (int i = 0; i < 33; i++)
		strcat(many, "1.1.1.1,");
	assert_int_equal(parse1(&c, many), 1);
}

static void test_describe(void **st)
{
	struct shim_config c;
	char *env[] = {"ERDMA_SHIM=require", "ERDMA_SHIM_PORT_OFFSET=7",
		       "ERDMA_SHIM_DENY=1.1.1.1",
		       "ERDMA_SHIM_ACCEPT_FROM=10.0.0.0/8,10.1.0.0/16", NULL};
	char buf[256];

	(void)st;
	shim_config_defaults(&c);
	shim_config_describe(&c, buf, sizeof(buf));
	assert_string_equal(buf, "");
	shim_config_parse(&c, env, report, NULL);
	shim_config_describe(&c, buf, sizeof(buf));
	assert_string_equal(buf, "ERDMA_SHIM=require ERDMA_SHIM_DENY=1 rule(s) "
				 "ERDMA_SHIM_ACCEPT_FROM=2 rule(s) "
				 "ERDMA_SHIM_PORT_OFFSET=7");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_defaults),
	    cmocka_unit_test(test_modes_and_levels),
	    cmocka_unit_test(test_invalid_is_one_clear_line),
	    cmocka_unit_test(test_value_escaped),
	    cmocka_unit_test(test_unknown_name_warns_only),
	    cmocka_unit_test(test_numbers),
	    cmocka_unit_test(test_port_map),
	    cmocka_unit_test(test_log_file),
	    cmocka_unit_test(test_default_rules),
	    cmocka_unit_test(test_allow_deny),
	    cmocka_unit_test(test_accept_from),
	    cmocka_unit_test(test_bad_rules),
	    cmocka_unit_test(test_describe),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
