/* SPDX-License-Identifier: MIT */
/*
 * sigfork: fork while another thread installs signal handlers.  Plain libc
 * only: run it with and without LD_PRELOAD of the shim and the output must
 * be the same.
 *
 *   sigfork FORKS
 *
 * A thread installs and removes a handler for SIGPIPE without pause (the
 * shim's sigaction takes a lock); the main thread forks FORKS times, and
 * each child installs and removes a handler of its own, then exits.  A
 * child not back within 5 s hung in sigaction (a lock the other thread
 * held at the fork; with every signal blocked, alarm() cannot end it): it
 * is killed and counted.  Prints "forks: N, hung: H" and exits 0 only when
 * none hung.
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <sys/wait.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

static volatile int stop;

static void on_sig(int sig)
{
	(void)sig;
}

static void *churn(void *arg)
{
	struct sigaction sa = {.sa_handler = on_sig};

	(void)arg;
	sigemptyset(&sa.sa_mask);
	while (!stop) {
		sigaction(SIGPIPE, &sa, NULL);
		signal(SIGPIPE, SIG_IGN);
	}
	return NULL;
}

/* Has child p exited within ms?  (Reaped if so.) */
static int back_within(pid_t p, int ms)
{
	struct timespec ts = {0, 1000000L};
	int st;

	for (int i = 0; i < ms; i++) {
		if (waitpid(p, &st, WNOHANG) == p)
			return 1;
		nanosleep(&ts, NULL);
	}
	return 0;
}

int main(int argc, char **argv)
{
	int forks = argc > 1 ? atoi(argv[1]) : 300, hung = 0, i;
	pthread_t t;

	pthread_create(&t, NULL, churn, NULL);
	for (i = 0; i < forks; i++) {
		pid_t p = fork();
		int st;

		if (p == 0) {
			signal(SIGUSR2, on_sig);
			signal(SIGUSR2, SIG_DFL);
			_exit(0);
		}
		if (p < 0)
			break;
		if (!back_within(p, 5000)) {
			kill(p, SIGKILL);
			waitpid(p, &st, 0);
			if (++hung == 3)
				break; /* enough to say it */
		}
	}
	stop = 1;
	pthread_join(t, NULL);
	printf("forks: %d, hung: %d\n", i, hung);
	return hung ? 1 : 0;
}
