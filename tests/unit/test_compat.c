/* SPDX-License-Identifier: MIT */
/*
 * Unit tests of the librdmacm gate (rsocket_glue/compat.c): the release
 * read from the library's file name, and the decision table -- RDMA only
 * on a release the shim was checked against, the listener cap only where
 * rsockets' service thread has its stale-array bug, the rpoll defect
 * noted where it is not fixed (docs/platforms.md has the sources).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <dlfcn.h>
#include <errno.h>
#include <string.h>

#include "compat.h"

static void parse_ok(const char *name, int want_major, int want_minor)
{
	int major = -7, minor = -7;

	assert_int_equal(sg_rdmacm_parse(name, &major, &minor), 0);
	assert_int_equal(major, want_major);
	assert_int_equal(minor, want_minor);
}

static void parse_bad(const char *name)
{
	int major = -7, minor = -7;

	assert_int_equal(sg_rdmacm_parse(name, &major, &minor), -EINVAL);
	assert_int_equal(major, -7); /* untouched */
	assert_int_equal(minor, -7);
}

static void test_parse(void **state)
{
	(void)state;
	parse_ok("/usr/lib/x86_64-linux-gnu/librdmacm.so.1.3.44.0", 44, 0);
	parse_ok("librdmacm.so.1.3.39.13", 39, 13);
	parse_ok("/opt/rc/build/lib/librdmacm.so.1.3.50.7", 50, 7);
	parse_ok("/usr/lib64/librdmacm.so.1.4.64.0", 64, 0); /* ABI 1.4 */
	/* a directory that looks like a version says nothing */
	parse_ok("/x/librdmacm.so.1.3.1.1/librdmacm.so.1.3.56.4", 56, 4);
}

static void test_parse_rejects(void **state)
{
	(void)state;
	parse_bad("/usr/lib/x86_64-linux-gnu/librdmacm.so.1"); /* a link */
	parse_bad("librdmacm.so");
	parse_bad("librdmacm.so.1.3.44");	   /* no minor */
	parse_bad("librdmacm.so.1.3.44.");	   /* empty minor */
	parse_bad("librdmacm.so.1.3.44.0.1");	   /* one more */
	parse_bad("librdmacm.so.1.3.44.0-ubuntu"); /* a suffix */
	parse_bad("librdmacm.so.1.3.44.0 ");
	parse_bad("librdmacm.so.1.3.-44.0");
	parse_bad("librdmacm.so.1.3.44444.0"); /* beyond 4 digits */
	parse_bad("librdmacm.so.1.3.44.99999");
	parse_bad("librdmacmX.so.1.3.44.0");
	parse_bad("libibverbs.so.1.14.44.0");
	parse_bad("/librdmacm.so.1.3.44.0/x"); /* the base name counts */
	parse_bad("");
}

static struct sg_rdmacm at(int major, int minor)
{
	struct sg_rdmacm c;

	memset(&c, 0x5a, sizeof(c)); /* every field must be set */
	sg_rdmacm_decide(&c, major, minor);
	return c;
}

/* Known releases: RDMA, the service rewrite (the layout is the same in
 * all of them), the cap where the stale-array bug is. */
static void test_decide_known(void **state)
{
	static const struct {
		int major, minor, cap;
		bool tmo_bug;
	} t[] = {
	    {39, 0, 3, true},  {39, 8, 3, true},   {39, 9, 0, true},
	    {39, 13, 0, true}, {40, 7, 3, true},   {40, 13, 0, false},
	    {43, 6, 3, true},  {43, 7, 0, true},   {43, 12, 0, false},
	    {44, 0, 3, true},  {44, 6, 3, true},   {44, 7, 0, true},
	    {44, 11, 0, true}, {44, 12, 0, false}, {48, 2, 3, true},
	    {48, 3, 0, true},  {50, 0, 3, true},   {50, 1, 3, true},
	    {50, 2, 0, true},  {50, 6, 0, true},   {50, 7, 0, false},
	    {52, 0, 3, true},  {52, 1, 0, true},   {53, 0, 0, true},
	    {56, 0, 0, true},  {56, 4, 0, false},  {62, 0, 0, true},
	    {62, 1, 0, false}, {63, 0, 0, false},  {64, 0, 0, false},
	    {64, 3, 0, false},
	};

	(void)state;
	for (size_t i = 0; i < sizeof(t) / sizeof(t[0]); i++) {
		struct sg_rdmacm c = at(t[i].major, t[i].minor);

		if (!c.known || !c.svc_noop || c.major != t[i].major ||
		    c.minor != t[i].minor || c.listener_cap != t[i].cap ||
		    c.rpoll_timeout_bug != t[i].tmo_bug || !c.why)
			fail_msg("%d.%d: known %d svc %d cap %d tmo %d",
				 t[i].major, t[i].minor, c.known, c.svc_noop,
				 c.listener_cap, c.rpoll_timeout_bug);
	}
}

/* Anything else: TCP, and nothing that relies on a private layout. */
static void test_decide_unknown(void **state)
{
	static const int t[][2] = {{-1, -1}, {38, 14}, {36, 0}, {1, 0},
				   {65, 0},  {99, 9},  {44, -1}};
	char d[320];

	(void)state;
	for (size_t i = 0; i < sizeof(t) / sizeof(t[0]); i++) {
		struct sg_rdmacm c = at(t[i][0], t[i][1]);

		assert_false(c.known);
		assert_false(c.svc_noop);
		assert_int_equal(c.listener_cap, 0);
		assert_non_null(c.why);
		c.path[0] = '\0';
		sg_rdmacm_describe(&c, d, sizeof(d));
		assert_non_null(strstr(d, "stay on kernel TCP"));
	}
	assert_non_null(strstr(at(38, 0).why, "older"));
	assert_non_null(strstr(at(65, 0).why, "newer"));
	assert_non_null(strstr(at(-1, -1).why, "unknown"));
}

static void test_describe(void **state)
{
	struct sg_rdmacm c = at(44, 0);
	char d[320];

	(void)state;
	sg_rdmacm_describe(&c, d, sizeof(d));
	assert_true(!strncmp(d, "rdma: ", 6));
	assert_non_null(strstr(d, "capped at 3"));
	c = at(64, 0);
	sg_rdmacm_describe(&c, d, sizeof(d));
	assert_null(strstr(d, "capped"));
	assert_null(strstr(d, "rpoll"));
	sg_rdmacm_describe(&c, d, 8); /* truncated, terminated */
	assert_int_equal(strlen(d), 7);
}

/* The test binary does not link librdmacm: the probe finds none. */
static void test_probe_none(void **state)
{
	struct sg_rdmacm c;

	(void)state;
	assert_int_equal(sg_rdmacm_probe(&c), -ENOENT);
	assert_false(c.known);
	assert_string_equal(c.path, "");
}

/* Once it is loaded (as the library's DT_NEEDED loads it), the probe
 * finds its real file -- not the soname link -- and reads the release. */
static void test_probe_loaded(void **state)
{
	struct sg_rdmacm c;
	int major, minor;

	(void)state;
	if (!dlopen("librdmacm.so.1", RTLD_NOW | RTLD_GLOBAL))
		skip();
	assert_int_equal(sg_rdmacm_probe(&c), 0);
	print_message("librdmacm: %s (%d.%d)\n", c.path, c.major, c.minor);
	assert_int_equal(sg_rdmacm_parse(c.path, &major, &minor), 0);
	assert_int_equal(c.major, major);
	assert_int_equal(c.minor, minor);
	assert_true(major >= 17);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_parse),
	    cmocka_unit_test(test_parse_rejects),
	    cmocka_unit_test(test_decide_known),
	    cmocka_unit_test(test_decide_unknown),
	    cmocka_unit_test(test_describe),
	    cmocka_unit_test(test_probe_none),
	    cmocka_unit_test(test_probe_loaded),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
