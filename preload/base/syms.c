/* SPDX-License-Identifier: MIT */
/*
 * The table of real libc functions, and the per-thread state of calls
 * into librdmacm (syms.h).  The lowest file of the library: it uses
 * nothing of ours.
 */
#include "syms.h"

#include <dlfcn.h>

#define SHIM_DEFINE_REAL(f) __typeof__(f) *shim_real_##f;
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"
SHIM_SYMS(SHIM_DEFINE_REAL)
#pragma GCC diagnostic pop
#undef SHIM_DEFINE_REAL

__thread int shim_lib_depth;
__thread int shim_nocancel;
__thread int *shim_pair_capture;
__thread const sigset_t *shim_lib_sigmask;
__thread bool shim_svc_guard;

/*
 * dlsym may allocate; nothing it calls is interposed by us, and any wrapper
 * reached meanwhile on this thread sees init running (init.c) and the
 * already-resolved pointers.
 */
void shim_syms_resolve(void)
{
#define SHIM_RESOLVE(f) shim_real_##f = (__typeof__(f) *)dlsym(RTLD_NEXT, #f);
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"
	SHIM_SYMS(SHIM_RESOLVE)
#pragma GCC diagnostic pop
#undef SHIM_RESOLVE
}
