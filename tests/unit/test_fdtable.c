/* SPDX-License-Identifier: MIT */
/* Unit tests of the fd table (preload/base/fdtable.c). */
#define _GNU_SOURCE
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <pthread.h>
#include <sys/resource.h>

#include "fdtable.h"

/* The table's slow path starts init; here init is the test's business. */
int shim_init_state = 2;
void shim_init_slow(void) {}
/* Its start-up step logs a failure; no test runs the step. */
int shim_log_level;
void shim_log_write(int level, const char *fmt, ...)
{
	(void)level;
	(void)fmt;
}

static struct shim_sock *S(uintptr_t n)
{
	return (struct shim_sock *)(n * 8);
}

static int setup(void **st)
{
	(void)st;
	return shim_fdtable_init(4096);
}

static int teardown(void **st)
{
	(void)st;
	shim_fdtable_fini();
	return 0;
}

static void test_empty(void **st)
{
	(void)st;
	assert_true(shim_fdtab_cap >= 1024);
	for (int fd = 0; fd < 5000; fd++)
		assert_null(shim_fd_get(fd));
	assert_null(shim_fd_get(-1));
	assert_null(shim_fd_get(-100000));
}

static void test_set_get_clear(void **st)
{
	(void)st;
	assert_null(shim_fd_xchg(3, S(1)));
	assert_ptr_equal(shim_fd_get(3), S(1));
	assert_null(shim_fd_get(4));
	assert_ptr_equal(shim_fd_xchg(3, S(2)), S(1));
	assert_ptr_equal(shim_fd_xchg(3, NULL), S(2));
	assert_null(shim_fd_get(3));
	assert_true(shim_fdtable_span() >= 4);
}

/* fds past the flat table must still be found (locked overflow hash). */
static void test_beyond_cap(void **st)
{
	int big[] = {(int)shim_fdtab_cap, (int)shim_fdtab_cap + 1, 1 << 20,
		     (1 << 30) + 7, 0x7fffffff};

	(void)st;
	for (size_t i = 0; i < 5; i++)
		assert_null(shim_fd_xchg(big[i], S(10 + i)));
	for (size_t i = 0; i < 5; i++)
		assert_ptr_equal(shim_fd_get(big[i]), S(10 + i));
	assert_null(shim_fd_get((int)shim_fdtab_cap + 2));
	for (size_t i = 0; i < 5; i++)
		assert_ptr_equal(shim_fd_xchg(big[i], NULL), S(10 + i));
	for (size_t i = 0; i < 5; i++)
		assert_null(shim_fd_get(big[i]));
	assert_true(shim_fdtable_span() == 0x80000000u);
	assert_null(shim_fd_xchg(-5, S(1))); /* negative fds are ignored */
	assert_null(shim_fd_get(-5));
}

/* Sized from RLIMIT_NOFILE's hard limit, bounded by the cap argument. */
static void test_sizing(void **st)
{
	struct rlimit rl;

	(void)st;
	assert_int_equal(getrlimit(RLIMIT_NOFILE, &rl), 0);
	shim_fdtable_fini();
	assert_int_equal(shim_fdtable_init(1u << 22), 0);
	if (rl.rlim_max != RLIM_INFINITY && rl.rlim_max <= (1u << 22) &&
	    rl.rlim_max >= 1024)
		assert_int_equal(shim_fdtab_cap, rl.rlim_max);
	/* the last slot of the flat table is usable */
	int last = (int)shim_fdtab_cap - 1;
	assert_null(shim_fd_xchg(last, S(3)));
	assert_ptr_equal(shim_fd_get(last), S(3));
	shim_fd_xchg(last, NULL);
}

#define THREADS 4
#define ROUNDS 20000

static void *hammer(void *arg)
{
	int base = (int)(intptr_t)arg * 1000;

	for (int r = 0; r < ROUNDS; r++) {
		int fd = base + r % 997;
		int big = 100000000 + base + r % 13;

		if (shim_fd_xchg(fd, S((uintptr_t)fd)) != NULL)
			return (void *)1;
		if (shim_fd_get(fd) != S((uintptr_t)fd))
			return (void *)1;
		shim_fd_xchg(big, S(2));
		if (shim_fd_get(big) != S(2))
			return (void *)1;
		if (shim_fd_xchg(fd, NULL) != S((uintptr_t)fd))
			return (void *)1;
		shim_fd_xchg(big, NULL);
	}
	return NULL;
}

/* Threads on disjoint fds never see each other's entries. */
static void test_threads(void **st)
{
	pthread_t t[THREADS];
	void *rv;

	(void)st;
	for (intptr_t i = 0; i < THREADS; i++)
		assert_int_equal(
		    pthread_create(&t[i], NULL, hammer, (void *)(i + 1)), 0);
	for (int i = 0; i < THREADS; i++) {
		assert_int_equal(pthread_join(t[i], &rv), 0);
		assert_null(rv);
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test_setup_teardown(test_empty, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_set_get_clear, setup,
					    teardown),
	    cmocka_unit_test_setup_teardown(test_beyond_cap, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_sizing, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_threads, setup, teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
