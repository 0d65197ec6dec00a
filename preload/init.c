/* SPDX-License-Identifier: MIT */
/*
 * Start-up: resolve the real libc functions, read the configuration, set up
 * the fd table and the log.  Runs from the constructor and, because another
 * library's constructor may call socket() before ours has run, lazily from
 * any entry point (shim_ensure_init / the fd table's slow path).
 */
#include "shim.h"
#include "config.h"
#include "fdtable.h"
#include "log.h"
#include "sock.h"
#include "stats.h"

#include <dlfcn.h>
#include <sched.h>
#include <string.h>
#include <sys/auxv.h>

#define SHIM_DEFINE_REAL(f) __typeof__(f) *shim_real_##f;
SHIM_SYMS(SHIM_DEFINE_REAL)
#undef SHIM_DEFINE_REAL

int shim_init_state;
__thread int shim_lib_depth;
__thread int *shim_pair_capture;
__thread const sigset_t *shim_lib_sigmask;
__thread bool shim_svc_guard;
struct shim_config shim_cfg;
struct shim_sock shim_internal_sock = {.kind = SHIM_SK_INTERNAL};
struct shim_sock shim_svc_sock = {.kind = SHIM_SK_SVC};

static __thread bool in_init; /* this thread is running init */

extern char **environ;

static void resolve_symbols(void)
{
	/* dlsym may allocate; nothing it calls is interposed by us, and any
	 * wrapper reached meanwhile on this thread sees in_init and the
	 * already-resolved pointers. */
#define SHIM_RESOLVE(f) shim_real_##f = (__typeof__(f) *)dlsym(RTLD_NEXT, #f);
	SHIM_SYMS(SHIM_RESOLVE)
#undef SHIM_RESOLVE
}

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

static void do_init(void)
{
	char desc[512];

	resolve_symbols();
	shim_log_start();
	read_config();
	shim_log_open(&shim_cfg);
	if (shim_fdtable_init(1u << 22))
		shim_err("cannot map the fd table; running on TCP only");
	/* Watch the log's fd so a close() or dup2() onto it is noticed. */
	shim_fd_xchg(2, &shim_internal_sock);
	shim_stat_init();
	shim_fork_init();
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
}
