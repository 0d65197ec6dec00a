/* SPDX-License-Identifier: MIT */
/*
 * The exec family: a listener's twin reservation goes across the exec that
 * keeps the listener (handover.c, shim_twins_pass; docs/security.md, "What
 * the reservation leaves open").
 *
 * The decision is taken at the exec, not at a fork before it: the listener
 * may be made inheritable after the fork (dup2 in the child, a spawner's
 * pass_fds), or the process may exec with no fork at all.  Every variant
 * is wrapped on its own, since glibc's execl, execv, execvp, fexecve...
 * reach the system call through its internal __execve, never through
 * execve's PLT entry.  execv, execvp and execl(p) pass environ; execle,
 * execve, execvpe, fexecve and execveat the caller's envp; posix_spawn and
 * posix_spawnp theirs (below).  Not covered: an exec by a raw system call,
 * and glibc's own spawns (system, popen: its internal __spawni).
 *
 * The caller may be a vfork child sharing its parent's memory: nothing here
 * allocates, locks or uses stdio, and neither the caller's envp nor environ
 * is touched.  The new envp is built on this stack: the caller's entries
 * but any LIBERDMA_SHIM_TWINS (stale: from an environment the shim did not
 * make), then ours.  With nothing to carry and nothing stale, the caller's
 * envp goes as it is.
 */
#include "shim.h"

#include <limits.h>
#include <sys/mman.h>
#include <stdarg.h>
#include <stdlib.h>
#include <unistd.h>

/* The most environment entries rebuilt on the stack (8 bytes each); past
 * it the caller's envp goes as it is, and its listeners' reservations do
 * not. */
#define ENV_MAX 16384
/* At most this many pointers (2 KiB) go on the stack, the rest in a
 * mapping of their own. */
#define ENV_STACK 256

/* One exec, given the envp to pass. */
struct exec_call {
	int (*fn)(const struct exec_call *x, char *const envp[]);
	int fd, flags;
	const char *path;
	char *const *argv;
	/* posix_spawn's */
	pid_t *pid;
	const posix_spawn_file_actions_t *acts;
	const posix_spawnattr_t *attr;
};

static int call_execve(const struct exec_call *x, char *const envp[])
{
	return REAL(execve)(x->path, x->argv, envp);
}

static int call_execvpe(const struct exec_call *x, char *const envp[])
{
	return REAL(execvpe)(x->path, x->argv, envp);
}

static int call_fexecve(const struct exec_call *x, char *const envp[])
{
	return REAL(fexecve)(x->fd, x->argv, envp);
}

static int call_execveat(const struct exec_call *x, char *const envp[])
{
	return REAL(execveat)(x->fd, x->path, x->argv, envp, x->flags);
}

/* posix_spawn: its child execs inside libc (the file actions, then the
 * kernel's execve), and the call returns in the parent, where the files
 * passed are close-on-exec again as after a failed exec. */
static int call_spawn(const struct exec_call *x, char *const envp[])
{
	return REAL(posix_spawn)(x->pid, x->path, x->acts, x->attr, x->argv,
				 envp);
}

static int call_spawnp(const struct exec_call *x, char *const envp[])
{
	return REAL(posix_spawnp)(x->pid, x->path, x->acts, x->attr, x->argv,
				  envp);
}

/* envp's first n entries without LIBERDMA_SHIM_TWINS, then kv (if any),
 * into out (room for n + 2): n as counted, so that another thread's setenv
 * growing environ meanwhile can't write past out. */
static void env_build(char *const envp[], size_t n, const char *kv, char **out)
{
	size_t j = 0;

	for (size_t i = 0; i < n && envp[i]; i++)
		if (!shim_twins_named(envp[i]))
			out[j++] = envp[i];
	if (kv)
		out[j++] = (char *)kv;
	out[j] = NULL;
}

static int exec_carrying(const struct exec_call *x, char *const envp[])
{
	struct shim_twins_carry c;
	size_t n = 0, stale = 0;
	int r, e;

	shim_ensure_init();
	for (; envp && envp[n]; n++)
		stale += envp[n][0] == 'L' && shim_twins_named(envp[n]);
	shim_twins_pass(&c);
	if ((!c.n && !stale) || n > ENV_MAX) {
		if (c.n && n > ENV_MAX) {
			shim_twins_unpass(&c);
			c.n = 0;
		}
		return x->fn(x, envp);
	}
	if (n + 2 <= ENV_STACK) {
		char *ne[ENV_STACK];

		env_build(envp, n, c.n ? c.kv : NULL, ne);
		r = x->fn(x, ne);
		e = errno;
	} else {
		/* a large environment: not on this stack, which may be a
		 * thread's small one (no stack-clash protection here); mmap
		 * is a system call, safe in a vfork child, and gone with the
		 * image on success */
		size_t sz = (n + 2) * sizeof(char *);
		char **ne = mmap(NULL, sz, PROT_READ | PROT_WRITE,
				 MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

		if (ne == MAP_FAILED) {
			shim_twins_unpass(&c);
			return x->fn(x, envp);
		}
		env_build(envp, n, c.n ? c.kv : NULL, ne);
		r = x->fn(x, ne);
		e = errno;
		munmap(ne, sz);
	}
	/* failed (it returned), or a posix_spawn: errno as the kernel or
	 * libc said it */
	shim_twins_unpass(&c);
	errno = e;
	return r;
}

SHIM_EXPORT int execve(const char *path, char *const argv[], char *const envp[])
{
	struct exec_call x = {.fn = call_execve, .path = path, .argv = argv};

	return exec_carrying(&x, envp);
}

SHIM_EXPORT int execv(const char *path, char *const argv[])
{
	struct exec_call x = {.fn = call_execve, .path = path, .argv = argv};

	return exec_carrying(&x, environ);
}

SHIM_EXPORT int execvpe(const char *file, char *const argv[],
			char *const envp[])
{
	struct exec_call x = {.fn = call_execvpe, .path = file, .argv = argv};

	return exec_carrying(&x, envp);
}

SHIM_EXPORT int execvp(const char *file, char *const argv[])
{
	struct exec_call x = {.fn = call_execvpe, .path = file, .argv = argv};

	return exec_carrying(&x, environ);
}

SHIM_EXPORT int fexecve(int fd, char *const argv[], char *const envp[])
{
	if (!envp) /* glibc's EINVAL, nothing carried */
		return REAL(fexecve)(fd, argv, envp);

	struct exec_call x = {.fn = call_fexecve, .fd = fd, .argv = argv};

	return exec_carrying(&x, envp);
}

SHIM_EXPORT int execveat(int fd, const char *path, char *const argv[],
			 char *const envp[], int flags)
{
	struct exec_call x = {.fn = call_execveat,
			      .fd = fd,
			      .flags = flags,
			      .path = path,
			      .argv = argv};

	return exec_carrying(&x, envp);
}

/*
 * posix_spawn and posix_spawnp carry as an exec does: the listeners that
 * are inheritable in this process at the call (the file actions are
 * opaque: a listener that only they make inheritable, adddup2 of a
 * close-on-exec fd, goes across without its reservation, and the new
 * image's door then finds it held by this process: TCP there).  A NULL
 * envp (the kernel's empty environment) goes as it is, nothing carried.
 */
SHIM_EXPORT int posix_spawn(pid_t *pid, const char *path,
			    const posix_spawn_file_actions_t *acts,
			    const posix_spawnattr_t *attr, char *const argv[],
			    char *const envp[])
{
	struct exec_call x = {.fn = call_spawn,
			      .path = path,
			      .argv = argv,
			      .pid = pid,
			      .acts = acts,
			      .attr = attr};

	if (!envp)
		return REAL(posix_spawn)(pid, path, acts, attr, argv, envp);
	return exec_carrying(&x, envp);
}

SHIM_EXPORT int posix_spawnp(pid_t *pid, const char *file,
			     const posix_spawn_file_actions_t *acts,
			     const posix_spawnattr_t *attr, char *const argv[],
			     char *const envp[])
{
	struct exec_call x = {.fn = call_spawnp,
			      .path = file,
			      .argv = argv,
			      .pid = pid,
			      .acts = acts,
			      .attr = attr};

	if (!envp)
		return REAL(posix_spawnp)(pid, file, acts, attr, argv, envp);
	return exec_carrying(&x, envp);
}

/*
 * The list forms, as glibc builds them: the arguments counted, then copied
 * into an array on the stack (execle's envp follows the NULL).
 */
#define ARGV_FROM_LIST(arg, argv, envp_out)                                    \
	size_t argc_ = 1;                                                      \
	va_list ap_;                                                           \
	va_start(ap_, arg);                                                    \
	while (va_arg(ap_, char *))                                            \
		if (++argc_ >= INT_MAX) {                                      \
			va_end(ap_);                                           \
			errno = E2BIG;                                         \
			return -1;                                             \
		}                                                              \
	va_end(ap_);                                                           \
	char *argv[argc_ + 1];                                                 \
	argv[0] = (char *)(arg);                                               \
	va_start(ap_, arg);                                                    \
	for (size_t i_ = 1; i_ <= argc_; i_++)                                 \
		argv[i_] = va_arg(ap_, char *);                                \
	envp_out;                                                              \
	va_end(ap_)

SHIM_EXPORT int execl(const char *path, const char *arg, ...)
{
	ARGV_FROM_LIST(arg, argv, (void)0);
	return execv(path, argv);
}

SHIM_EXPORT int execlp(const char *file, const char *arg, ...)
{
	ARGV_FROM_LIST(arg, argv, (void)0);
	return execvp(file, argv);
}

SHIM_EXPORT int execle(const char *path, const char *arg, ...)
{
	char *const *envp;

	ARGV_FROM_LIST(arg, argv, envp = va_arg(ap_, char *const *));
	return execve(path, argv, envp);
}
