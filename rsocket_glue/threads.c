/* SPDX-License-Identifier: MIT */
/*
 * The threads librdmacm starts in the program's process are deaf to the
 * program's signals, as the shim's own are (shim_spawn).
 *
 * rsockets starts a service thread (listen, connect, keepalive) with
 * pthread_create(..., NULL, ...) whenever the service gets its first
 * socket, so the thread takes the signal mask of whatever thread called
 * into the library -- under the shim often a program thread inside its
 * poll or select, with its signals unblocked, or one that had not blocked
 * them yet.  The kernel gives a process-directed signal to any thread that
 * does not block it.  A program that blocks its signals everywhere but at
 * one point of one thread then has its handlers run on the rsockets thread,
 * concurrently with the code they were meant to interrupt only at that
 * point; one that takes its signals through signalfd or sigwait loses them
 * to that thread.  PostgreSQL's postmaster is the first kind: its SIGCHLD
 * and SIGUSR1 handlers (reaping backends, starting parallel workers) ran on
 * the listen service thread while its main loop walked the same lists --
 * a postmaster that died of a general protection fault, and, before that,
 * parallel queries that counted rows short (issue 42).
 *
 * So a pthread_create made by librdmacm, or on a thread inside a call the
 * glue made into it (LIB_CALL: a sanitizer's interceptor of pthread_create
 * stands between librdmacm and this wrapper), runs with every signal
 * blocked; the new thread inherits that mask.  Every other caller passes
 * straight through.
 */
#include "glue.h"
#include "glue_int.h"

#include <errno.h>
#include <link.h>
#include <pthread.h>
#include <rdma/rsocket.h>
#include <signal.h>
#include <stdint.h>

/* librdmacm's executable segments, found once at start-up (GLUE): the
 * glue's one test of "is this caller librdmacm" (sg_from_librdmacm, also
 * limits.c's) takes no lock (dladdr takes the loader's, which a dlopen
 * holds across constructors), and librdmacm is never unloaded. */
static uintptr_t text_lo, text_hi;

static int find_text(struct dl_phdr_info *info, size_t size, void *want)
{
	uintptr_t a = (uintptr_t)want, lo = UINTPTR_MAX, hi = 0;
	bool mine = false;

	(void)size;
	for (int i = 0; i < info->dlpi_phnum; i++) {
		const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
		uintptr_t b = info->dlpi_addr + ph->p_vaddr;

		if (ph->p_type != PT_LOAD)
			continue;
		if (a >= b && a < b + ph->p_memsz)
			mine = true;
		if (!(ph->p_flags & PF_X))
			continue;
		lo = b < lo ? b : lo;
		hi = b + ph->p_memsz > hi ? b + ph->p_memsz : hi;
	}
	if (!mine || hi <= lo)
		return 0;
	__atomic_store_n(&text_lo, lo, __ATOMIC_RELAXED);
	__atomic_store_n(&text_hi, hi, __ATOMIC_RELEASE);
	return 1;
}

void sg_threads_start(void)
{
	dl_iterate_phdr(find_text, (void *)rsocket);
}

bool sg_from_librdmacm(const void *caller)
{
	uintptr_t a = (uintptr_t)caller;
	uintptr_t hi = __atomic_load_n(&text_hi, __ATOMIC_ACQUIRE);

	return a < hi && a >= __atomic_load_n(&text_lo, __ATOMIC_RELAXED);
}

bool sg_sig_quiet(sigset_t *old)
{
	sigset_t m;

	if (!shim_sig_caught(&m))
		return false; /* nothing the program catches: no EINTR */
	pthread_sigmask(SIG_BLOCK, &m, old);
	return true;
}

typedef int pc_fn(pthread_t *, const pthread_attr_t *, void *(*)(void *),
		  void *);

/*
 * Exported as pthread_create; its C name is its own, because the loader
 * binds every pthread_create of the process to it -- the shim's own
 * shim_spawn (base) included, which passes straight through: base calls
 * libc's function, and only the loader puts this one in between.
 */
int sg_pthread_create(pthread_t *t, const pthread_attr_t *attr,
		      void *(*fn)(void *), void *arg) __asm__("pthread_create");

SHIM_EXPORT int sg_pthread_create(pthread_t *t, const pthread_attr_t *attr,
				  void *(*fn)(void *), void *arg)
{
	static void *real;
	pc_fn *f = (pc_fn *)sg_next_sym(&real, "pthread_create");
	sigset_t all, old;
	int r;

	if (!f)
		return ENOSYS; /* pthreads' convention: the error itself */
	if (!shim_in_lib() && !sg_from_librdmacm(__builtin_return_address(0)))
		return f(t, attr, fn, arg);
	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	r = f(t, attr, fn, arg);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	return r;
}
