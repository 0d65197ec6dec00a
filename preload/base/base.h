/* SPDX-License-Identifier: MIT */
/*
 * The base of the library, which every room may use and which uses no
 * room above it: the table of real libc functions (syms.h), init (init.h),
 * the log (log.h), the configuration (config.h), the fd table (fdtable.h),
 * the one clock (clock.h), the ordered start-up list (startup.h) and the
 * program's signal handlers, deferred across sleeps (sigdefer.h).  This
 * header gathers them for the rooms above; the base's own files include
 * only the headers they use, so the base has no circle.  Every
 * internal symbol carries the shim_ prefix and hidden visibility (the
 * build adds -fvisibility=hidden); only the libc names listed in syms.h
 * (and two librdmacm ones, rsocket_glue) are exported.
 */
#ifndef SHIM_BASE_H
#define SHIM_BASE_H

#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include "compiler.h"
#include "syms.h"
#include "init.h"
#include "clock.h"
#include "startup.h"
#include "sigdefer.h"

#include <stdint.h>

/* Pointers into page zero (NULL included) are never mapped on Linux
 * (vm.mmap_min_addr >= 4096): where the shim itself would touch a buffer
 * the kernel would have copied, it answers those with EFAULT too. */
static inline bool shim_bad_ptr(const void *p)
{
	return (uintptr_t)p < 4096;
}

/*
 * One of the shim's own threads: detached, with a 256 KiB stack, deaf to
 * the program's signals (every one blocked from its start).  0 or -errno.
 */
static inline int shim_spawn(void *(*fn)(void *), void *arg)
{
	pthread_attr_t attr;
	sigset_t all, old;
	pthread_t t;
	int err;

	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	pthread_attr_init(&attr);
	pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
	pthread_attr_setstacksize(&attr, 256 * 1024);
	err = pthread_create(&t, &attr, fn, arg);
	pthread_attr_destroy(&attr);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	return -err;
}

/* Set errno from an internal -errno result; return -1 or the value. */
static inline long shim_ret(long r)
{
	if (r < 0) {
		errno = (int)-r;
		return -1;
	}
	return r;
}

#endif
