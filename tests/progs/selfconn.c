/* SPDX-License-Identifier: MIT */
/*
 * selfconn: threads of one process, each opening a listener, connecting to
 * it, accepting, moving a checksummed block and closing everything, round
 * after round.  Listener opens and closes in one thread overlap connects in
 * the others: the pattern that deadlocked rdma-core 44's listen service
 * against a connect in the same process (rsocket_glue/rsock.c, svc_mu).
 *
 *   selfconn ADDR THREADS ROUNDS
 *
 * Prints one line per failed round and a summary; exit 1 if any failed.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "testlib.h"

#define BLOCK 4096
#define MAX_THREADS 8

static struct sockaddr_in base;
static int rounds;

struct job {
	int id, ok, failed;
	long max_connect_us;
};

static int xfer(int from, int to, unsigned seed)
{
	unsigned char out[BLOCK], in[BLOCK];
	size_t got = 0;

	tl_pattern(out, BLOCK, seed);
	if (send(from, out, BLOCK, 0) != BLOCK)
		return -1;
	while (got < BLOCK) {
		ssize_t r = recv(to, in + got, BLOCK - got, 0);

		if (r <= 0)
			return -1;
		got += (size_t)r;
	}
	return tl_fnv(TL_FNV0, in, BLOCK) == tl_fnv(TL_FNV0, out, BLOCK) ? 0
									 : -2;
}

/* One round: 0, or a failure printed with what failed. */
static int round_once(struct job *j, int r)
{
	struct sockaddr_in a = base;
	socklen_t alen = sizeof(a);
	int lfd, cfd = -1, sfd = -1, rc = -1;
	const char *what = "socket";
	long t0;

	lfd = socket(AF_INET, SOCK_STREAM, 0);
	if (lfd < 0)
		goto out;
	what = "listen";
	if (bind(lfd, (struct sockaddr *)&a, sizeof(a)) || listen(lfd, 8) ||
	    getsockname(lfd, (struct sockaddr *)&a, &alen))
		goto out;
	what = "connect";
	cfd = socket(AF_INET, SOCK_STREAM, 0);
	t0 = tl_now_us();
	if (cfd < 0 || connect(cfd, (struct sockaddr *)&a, sizeof(a)))
		goto out;
	if (tl_now_us() - t0 > j->max_connect_us)
		j->max_connect_us = tl_now_us() - t0;
	what = "accept";
	sfd = accept(lfd, NULL, NULL);
	if (sfd < 0)
		goto out;
	what = "transfer";
	rc = xfer(cfd, sfd, (unsigned)(j->id * 1000 + r));
	if (rc == -2)
		what = "checksum";
out:
	if (rc)
		printf("FAIL thread %d round %d: %s: %s\n", j->id, r, what,
		       rc == -2 ? "mismatch" : strerror(errno));
	if (cfd >= 0)
		close(cfd);
	if (sfd >= 0)
		close(sfd);
	if (lfd >= 0)
		close(lfd);
	return rc;
}

static void *run(void *arg)
{
	struct job *j = arg;

	for (int r = 0; r < rounds; r++) {
		if (round_once(j, r))
			j->failed++;
		else
			j->ok++;
	}
	return NULL;
}

int main(int argc, char **argv)
{
	struct job jobs[MAX_THREADS] = {0};
	pthread_t th[MAX_THREADS];
	int nt, ok = 0, failed = 0;
	long max_us = 0;

	if (argc != 4 || inet_pton(AF_INET, argv[1], &base.sin_addr) != 1 ||
	    (nt = atoi(argv[2])) < 1 || nt > MAX_THREADS ||
	    (rounds = atoi(argv[3])) < 1) {
		fprintf(stderr, "usage: selfconn IPV4 THREADS(1-%d) ROUNDS\n",
			MAX_THREADS);
		return 2;
	}
	setvbuf(stdout, NULL, _IOLBF, 0);
	base.sin_family = AF_INET;
	for (int i = 0; i < nt; i++) {
		jobs[i].id = i;
		if (pthread_create(&th[i], NULL, run, &jobs[i]))
			return 2;
	}
	for (int i = 0; i < nt; i++) {
		pthread_join(th[i], NULL);
		ok += jobs[i].ok;
		failed += jobs[i].failed;
		if (jobs[i].max_connect_us > max_us)
			max_us = jobs[i].max_connect_us;
	}
	printf("selfconn: %d threads x %d rounds: %d ok, %d failed\n", nt,
	       rounds, ok, failed);
	printf("FIGURE: slowest connect %ld ms\n", max_us / 1000);
	return failed ? 1 : 0;
}
