/* SPDX-License-Identifier: MIT */
/*
 * Start-up: resolve the real libc functions, start the log, read the
 * configuration, then run the start steps in the order of startup.h (the
 * fd table's first), and drive their fork handlers.  Runs from the constructor
 * and, because another library's constructor may call socket() before ours has
 * run, lazily from any entry point (shim_ensure_init / the fd table's slow
 * path).
 */
#include "init.h"
#include "config.h"
#include "log.h"
#include "sigdefer.h"
#include "startup.h"
#include "syms.h"

#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <string.h>
#include <sys/auxv.h>

int shim_init_state;
struct shim_config shim_cfg;

static __thread bool in_init; /* this thread is running init */

extern char **environ;

static void report_config(const char *msg, bool invalid, void *arg)
{
	(void)arg;
	shim_log_write(invalid ? SHIM_LOG_ERROR : SHIM_LOG_WARN, "%s", msg);
}

static void read_config(void)
{
	shim_config_defaults(&shim_cfg);
	/* setuid/setgid: never let the environment steer a privileged
	 * program (same rule as secure_getenv). */
	if (getauxval(AT_SECURE)) {
		shim_cfg.env_ignored = true;
		return;
	}
	shim_config_parse(&shim_cfg, environ, report_config, NULL);
}

/* The steps SHIM_STARTUP registered (weak: a unit test that links a
 * room's object alone has none). */
extern const struct shim_startup __start_shim_startup[] __attribute__((weak));
extern const struct shim_startup __stop_shim_startup[] __attribute__((weak));
static const struct shim_startup *steps[SHIM_STARTUP_N];

static void find_steps(void)
{
	const struct shim_startup *p;

	for (p = __start_shim_startup; p && p < __stop_shim_startup; p++) {
		if (p->order < 0 || p->order >= SHIM_STARTUP_N ||
		    steps[p->order]) {
			shim_err("start-up step %d: unknown or twice",
				 p->order);
			continue;
		}
		steps[p->order] = p;
	}
	for (int i = 0; i < SHIM_STARTUP_N; i++)
		if (!steps[i])
			shim_err("start-up step %d not registered", i);
}

/*
 * Signals stay blocked on the forking thread from the first prepare
 * handler to the last parent or child one.  A handler that ran in between
 * (a timer's, SIGCHLD's) and closed a socket or made an epoll fd would
 * wait for a lock this very thread holds for the fork: for good.  It
 * runs instead in the parent, still inside fork(), once the rooms' parent
 * handlers have let go of their locks; the child never runs it.  Faults
 * stay unblocked: they must run at the faulting instruction.
 */
static __thread sigset_t fork_mask;

/* Before every fork, in the forking thread: the rooms take the locks that
 * keep fds and their records in step (released by the handlers below, in
 * parent and child). */
static void before_fork(void)
{
	sigset_t all;

	sigfillset(&all);
	for (int sig = 1; sig < NSIG; sig++)
		if (shim_sig_is_fault(sig))
			sigdelset(&all, sig);
	pthread_sigmask(SIG_BLOCK, &all, &fork_mask);
	for (int i = 0; i < SHIM_STARTUP_N; i++)
		if (steps[i] && steps[i]->prepare)
			steps[i]->prepare();
}

static void parent_after_fork(void)
{
	for (int i = SHIM_STARTUP_N - 1; i >= 0; i--)
		if (steps[i] && steps[i]->parent)
			steps[i]->parent();
	pthread_sigmask(SIG_SETMASK, &fork_mask, NULL);
}

/*
 * Run in every fork child, also those of forks inside libc that no wrapper
 * sees (daemon(), and fork() called by other libraries' internal paths).
 * Locks first: another thread of the parent may have held one at the fork,
 * and it never lets go here (tests/rdma/46-forkstorm.sh).  The child's
 * mask is the one the program forked with.
 */
static void child_after_fork(void)
{
	for (int i = 0; i < SHIM_STARTUP_N; i++)
		if (steps[i] && steps[i]->child)
			steps[i]->child();
	pthread_sigmask(SIG_SETMASK, &fork_mask, NULL);
}

static void do_init(void)
{
	char desc[512];

	shim_syms_resolve();
	shim_log_start();
	read_config();
	shim_log_open(&shim_cfg);
	find_steps();
	for (int i = 0; i < SHIM_STARTUP_N; i++)
		if (steps[i] && steps[i]->start)
			steps[i]->start();
	pthread_atfork(before_fork, parent_after_fork, child_after_fork);
	shim_config_describe(&shim_cfg, desc, sizeof(desc));
	shim_info("liberdma_shim %s mode=%s%s%s", SHIM_VERSION,
		  shim_mode_name(shim_cfg.mode), desc[0] ? " " : "", desc);
}

void shim_init_slow(void)
{
	int expect = 0;

	if (in_init)
		return; /* recursion from inside init: use what is resolved */
	if (__atomic_compare_exchange_n(&shim_init_state, &expect, 1, false,
					__ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE)) {
		in_init = true;
		do_init();
		in_init = false;
		__atomic_store_n(&shim_init_state, 2, __ATOMIC_RELEASE);
		return;
	}
	/* Another thread is initialising: wait for it, briefly. */
	while (__atomic_load_n(&shim_init_state, __ATOMIC_ACQUIRE) != 2)
		sched_yield();
}

__attribute__((constructor)) static void shim_constructor(void)
{
	shim_ensure_init();
	for (int i = 0; i < SHIM_STARTUP_N; i++)
		if (steps[i] && steps[i]->loaded)
			steps[i]->loaded();
}
