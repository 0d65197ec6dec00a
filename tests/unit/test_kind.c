/* SPDX-License-Identifier: MIT */
/*
 * Unit tests of the kinds' table (preload/kind.[ch]): every kind is in it
 * once, with a name; the properties keep the rules the families rely on
 * (an emulated readiness needs every slow path, a kernel-answered fd none);
 * the sets the families asked for before the table (issue 17) are the
 * table's; a kind's operations are set slot by slot.
 */
#define _GNU_SOURCE
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <string.h>

#include "kind.h"

#define K(k) SHIM_SK(SHIM_SK_##k)
#define ALL_KINDS (SHIM_SK(SHIM_SK_N) - 2u) /* bits 1 .. N-1 */
#define ALL_FLAGS ((SHIM_KF_OPTS << 1) - 1u)

/* Each kind has a name of its own; kind 0 (no sock) has no property. */
static void test_every_kind_named(void **state)
{
	(void)state;
	for (int k = 1; k < SHIM_SK_N; k++) {
		assert_non_null(shim_kinds[k].name);
		assert_string_equal(shim_kind_name(k), shim_kinds[k].name);
		for (int j = 1; j < k; j++)
			assert_string_not_equal(shim_kinds[j].name,
						shim_kinds[k].name);
	}
	assert_string_equal(shim_kind_name(SHIM_SK_N), "?");
	assert_string_equal(shim_kind_name(-1), "?");
	assert_false(shim_kind_has(0, ALL_FLAGS));
	assert_int_equal(SHIM_KINDS_WITH(ALL_FLAGS) & ~ALL_KINDS, 0);
}

/* The compile-time sets and the array say the same. */
static void test_sets_match_array(void **state)
{
	(void)state;
	for (unsigned int f = 1; f <= SHIM_KF_OPTS; f <<= 1)
		for (int k = 1; k < SHIM_SK_N; k++)
			assert_int_equal(shim_kind_has(k, f),
					 (shim_kinds[k].props & f) != 0);
}

#define SUBSET(a, b)                                                           \
	assert_int_equal(SHIM_KINDS_WITH(a) & ~SHIM_KINDS_WITH(b), 0)
#define DISJOINT(a, b)                                                         \
	assert_int_equal(SHIM_KINDS_WITH(a) & SHIM_KINDS_WITH(b), 0)

/* What the families count on, whatever kinds come. */
static void test_rules(void **state)
{
	(void)state;
	/* Readiness the emulation keeps: the data calls must tell it of
	 * what they do (io.c), and poll must look past the kernel fd. */
	SUBSET(SHIM_KF_EMUL, SHIM_KF_IO_SLOW);
	SUBSET(SHIM_KF_EMUL, SHIM_KF_POLL_SLOW);
	/* An rsocket, a door or a rendezvous is past the kernel fd. */
	SUBSET(SHIM_KF_CONN | SHIM_KF_DOOR | SHIM_KF_SETTLING,
	       SHIM_KF_POLL_SLOW);
	SUBSET(SHIM_KF_CONN | SHIM_KF_SETTLING, SHIM_KF_EMUL);
	/* A failed rendezvous's error is the next data call's answer. */
	SUBSET(SHIM_KF_FAILED, SHIM_KF_IO_SLOW);
	/* Whatever has or may get an rsocket keeps the program's options
	 * for it. */
	SUBSET(SHIM_KF_ELIGIBLE | SHIM_KF_CONN | SHIM_KF_DOOR |
		   SHIM_KF_SETTLING | SHIM_KF_FAILED | SHIM_KF_IO_SLOW,
	       SHIM_KF_OPTS);
	/* The kernel answers: none of the shim's paths. */
	DISJOINT(SHIM_KF_KERNEL, SHIM_KF_IO_SLOW | SHIM_KF_POLL_SLOW |
				     SHIM_KF_OPTS | SHIM_KF_EMUL |
				     SHIM_KF_EPSET | SHIM_KF_ELIGIBLE);
	/* The states are one kind each, the sentinels too. */
	assert_int_equal(SHIM_KINDS_WITH(SHIM_KF_ELIGIBLE), K(TCP));
	assert_int_equal(SHIM_KINDS_WITH(SHIM_KF_CONN), K(RDMA));
	assert_int_equal(SHIM_KINDS_WITH(SHIM_KF_DOOR), K(LISTEN));
	assert_int_equal(SHIM_KINDS_WITH(SHIM_KF_EPSET), K(EPOLL));
	assert_int_equal(SHIM_KINDS_WITH(SHIM_KF_SETTLING), K(CONNECTING));
	assert_int_equal(SHIM_KINDS_WITH(SHIM_KF_FAILED), K(FAILED));
	assert_true(shim_kind_has(SHIM_SK_INTERNAL, SHIM_KF_KERNEL));
	assert_true(shim_kind_has(SHIM_SK_SVC, SHIM_KF_KERNEL));
	/* DEAD answers from the kernel, but its epoll registrations are
	 * the emulation's to drop (connect.c): not KERNEL. */
	assert_false(shim_kind_has(SHIM_SK_DEAD, ALL_FLAGS));
}

/* The sets the families compared kinds against before the table. */
static void test_old_sets(void **state)
{
	(void)state;
	assert_int_equal(SHIM_KINDS_WITH(SHIM_KF_EMUL),
			 K(RDMA) | K(CONNECTING)); /* SHIM_SK_EMUL */
	assert_int_equal(SHIM_KINDS_WITH(SHIM_KF_IO_SLOW),
			 K(RDMA) | K(CONNECTING) | K(FAILED)); /* io.c */
	assert_int_equal(SHIM_KINDS_WITH(SHIM_KF_NAMES),
			 K(RDMA) | K(RELAY)); /* shim_sock_names */
	assert_int_equal(SHIM_KINDS_WITH(SHIM_KF_POLL_SLOW),
			 K(RDMA) | K(LISTEN) | K(CONNECTING)); /* is_ours */
	assert_int_equal(SHIM_KINDS_WITH(SHIM_KF_OPTS),
			 K(TCP) | K(RDMA) | K(LISTEN) | K(CONNECTING) |
			     K(FAILED)); /* sockopt.c, MAYBE_RDMA */
	assert_int_equal(SHIM_KINDS_WITH(SHIM_KF_KERNEL),
			 K(INTERNAL) | K(SVC) | K(RELAY)); /* epoll_ctl */
}

static int released, forked;
static void on_release(struct shim_sock *s)
{
	(void)s;
	released++;
}
static void on_fork_child(struct shim_sock *s)
{
	(void)s;
	forked++;
}

/* Two rooms may set slots of one kind; an unset kind has none; a kind
 * out of range gets the empty slot 0. */
static void test_ops(void **state)
{
	(void)state;
	shim_kind_set_ops(SHIM_SK_LISTEN, &(struct shim_kind_ops){
					      .release = on_release,
					  });
	shim_kind_set_ops(SHIM_SK_LISTEN, &(struct shim_kind_ops){
					      .fork_child = on_fork_child,
					  });
	shim_kind_set_ops(SHIM_SK_N, &(struct shim_kind_ops){
					 .release = on_release,
				     });
	shim_kind_set_ops(0, &(struct shim_kind_ops){
				 .release = on_release,
			     });
	shim_kind_ops(SHIM_SK_LISTEN)->release(NULL);
	shim_kind_ops(SHIM_SK_LISTEN)->fork_child(NULL);
	assert_int_equal(released, 1);
	assert_int_equal(forked, 1);
	assert_null(shim_kind_ops(SHIM_SK_TCP)->release);
	assert_null(shim_kind_ops(SHIM_SK_N)->release);
	assert_null(shim_kind_ops(0)->release);
	assert_null(shim_kind_ops(-1)->fork_child);
}

/* Every slot the table has is one set_ops copies: a slot added to struct
 * shim_kind_ops but not to set_ops would stay NULL, and the kind's
 * operation would never run (a listener's 'guarded' once did not). */
static void test_ops_every_slot(void **state)
{
	enum { N = sizeof(struct shim_kind_ops) / sizeof(shim_kind_fn *) };

	(void)state;
	_Static_assert(sizeof(struct shim_kind_ops) ==
			   N * sizeof(shim_kind_fn *),
		       "struct shim_kind_ops holds only operations");
	for (size_t i = 0; i < N; i++) {
		struct shim_kind_ops in = {0};
		const struct shim_kind_ops *out;

		((shim_kind_fn **)&in)[i] = on_fork_child;
		shim_kind_set_ops(SHIM_SK_RELAY, &in);
		out = shim_kind_ops(SHIM_SK_RELAY);
		assert_ptr_equal(((shim_kind_fn *const *)out)[i],
				 on_fork_child);
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_every_kind_named),
	    cmocka_unit_test(test_sets_match_array),
	    cmocka_unit_test(test_rules),
	    cmocka_unit_test(test_old_sets),
	    cmocka_unit_test(test_ops),
	    cmocka_unit_test(test_ops_every_slot),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
