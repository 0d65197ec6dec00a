/* SPDX-License-Identifier: MIT */
/*
 * handlerfork: a signal handler that runs while the program forks makes a
 * socket and an epoll fd and closes them (socket, epoll_create1 and close
 * are plain system calls for the kernel, safe in a handler).  Plain libc
 * only: run it with and without the shim, both with tests/inject/forksig.so
 * preloaded last, which raises the signal inside fork(); the output must
 * be the same.
 *
 *   ERDMA_INJECT_FORK_SIG=10 LD_PRELOAD=[shim:]forksig.so handlerfork N
 *
 * Forks N times; each child exits at once.  Prints "forks: N, handler ran
 * in fork(): H, its calls failed: F" once every fork() has returned; a
 * handler that waits for a lock its own thread holds for the fork never
 * returns (the test's timeout says so).
 */
#define _GNU_SOURCE
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

static volatile sig_atomic_t ran, failed;

static void on_usr1(int sig)
{
	int s = socket(AF_INET, SOCK_STREAM, 0), e = epoll_create1(0);

	(void)sig;
	failed += s < 0 || e < 0 || close(s) != 0 || close(e) != 0;
	ran++;
}

int main(int argc, char **argv)
{
	int n = argc > 1 ? atoi(argv[1]) : 20, in_fork = 0;
	struct sigaction sa = {.sa_handler = on_usr1};

	sigemptyset(&sa.sa_mask);
	sigaction(SIGUSR1, &sa, NULL);
	for (int i = 0; i < n; i++) {
		int before = ran, st;
		pid_t p = fork();

		if (p == 0)
			_exit(0);
		if (p < 0) {
			perror("handlerfork: fork");
			return 1;
		}
		in_fork += ran == before + 1;
		waitpid(p, &st, 0);
	}
	printf("forks: %d, handler ran in fork(): %d, its calls failed: %d\n",
	       n, in_fork, (int)failed);
	return 0;
}
