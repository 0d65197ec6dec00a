/* SPDX-License-Identifier: MIT */
/*
 * The exec family under the shim (preload/exec.c), on a host without RDMA
 * (no reservation to carry): each variant runs /bin/sh, which prints
 * what its environment holds -- a LIBERDMA_SHIM_TWINS put in the envp or
 * environ by the caller (stale: the shim did not make it) and two other
 * variables; then each variant fails on a path that does not exist and
 * on one that is not executable, and prints errno and whether the envp
 * array it was given is as it was.  tests/host/87-exec.sh compares the
 * transcript with and without the shim.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#define SHOW "echo $0 $A$B ${LIBERDMA_SHIM_TWINS-unset}"
static const char *const names[] = {"execve",  "execv",	  "execvp",
				    "execvpe", "execl",	  "execlp",
				    "execle",  "fexecve", "execveat"};
#define NV (int)(sizeof(names) / sizeof(names[0]))

/* Variant k of path (a name for the p forms) with envp (where taken). */
static int variant(int k, const char *path, char *const envp[])
{
	char *av[] = {(char *)names[k], "-c", SHOW, NULL};
	int fd, r = -1;

	switch (k) {
	case 0:
		return execve(path, av, envp);
	case 1:
		return execv(path, av);
	case 2:
		return execvp(path, av);
	case 3:
		return execvpe(path, av, envp);
	case 4:
		return execl(path, names[k], "-c", SHOW, (char *)0);
	case 5:
		return execlp(path, names[k], "-c", SHOW, (char *)0);
	case 6:
		return execle(path, names[k], "-c", SHOW, (char *)0, envp);
	case 7:
		fd = open(path, O_RDONLY | O_CLOEXEC);
		if (fd < 0)
			return -1;
		r = fexecve(fd, av, envp);
		close(fd);
		return r;
	default:
		return execveat(AT_FDCWD, path, av, envp, 0);
	}
}

int main(void)
{
	char *envp[] = {"A=1", "LIBERDMA_SHIM_TWINS=5,6,7", "B=2", NULL};
	char *const orig[] = {envp[0], envp[1], envp[2], NULL};

	setenv("LIBERDMA_SHIM_TWINS", "9,9,9", 1);
	setenv("A", "e", 1);
	setenv("B", "", 1);
	for (int k = 0; k < NV; k++) {
		pid_t p;

		fflush(stdout);
		p = fork();
		if (p == 0) {
			variant(k,
				k == 2 || k == 3 || k == 5 ? "sh" : "/bin/sh",
				envp);
			_exit(99);
		}
		waitpid(p, NULL, 0);
	}
	for (int k = 0; k < NV; k++) {
		const char *bad[] = {"/nonexistent/x", "/etc/passwd"};

		for (int b = 0; b < 2; b++) {
			int r, e;

			errno = 0;
			r = variant(k, bad[b], envp);
			e = errno;
			printf("%s %s: %d %s, envp %s, environ %s\n", names[k],
			       bad[b], r, strerror(e),
			       memcmp(envp, orig, sizeof(orig)) ? "changed"
								: "as it was",
			       getenv("LIBERDMA_SHIM_TWINS") ? "has it"
							     : "has not");
		}
	}
	return 0;
}
