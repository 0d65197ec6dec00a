/* SPDX-License-Identifier: MIT */
/*
 * ringcost: what preload/uring.c's one-wait ring costs a blocking accept
 * on a listener with an RDMA door (docs/limits.md, "Process models"): the mean
 * time of io_uring_setup(2 entries), the two mappings (populated, not
 * copied by fork) and their undoing, over N rounds (default 2000).
 *
 *   build/bench/ringcost [N]
 */
#define _GNU_SOURCE
#include <linux/io_uring.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

static void *map(int fd, size_t len, off_t off)
{
	void *p = mmap(NULL, len, PROT_READ | PROT_WRITE,
		       MAP_SHARED | MAP_POPULATE, fd, off);

	if (p == MAP_FAILED) {
		perror("mmap");
		exit(1);
	}
	madvise(p, len, MADV_DONTFORK);
	return p;
}

int main(int argc, char **argv)
{
	int n = argc > 1 ? atoi(argv[1]) : 2000;
	struct timespec a, b;

	if (n < 1)
		n = 2000;
	clock_gettime(CLOCK_MONOTONIC, &a);
	for (int i = 0; i < n; i++) {
		struct io_uring_params p;
		size_t sq, cq, rl, el;
		void *r, *e;
		int fd;

		memset(&p, 0, sizeof(p));
		fd = (int)syscall(__NR_io_uring_setup, 2, &p);
		if (fd < 0) {
			perror("io_uring_setup");
			return 1;
		}
		sq = p.sq_off.array + p.sq_entries * sizeof(unsigned);
		cq = p.cq_off.cqes + p.cq_entries * sizeof(struct io_uring_cqe);
		rl = sq > cq ? sq : cq;
		el = p.sq_entries * sizeof(struct io_uring_sqe);
		r = map(fd, rl, IORING_OFF_SQ_RING);
		e = map(fd, el, IORING_OFF_SQES);
		munmap(e, el);
		munmap(r, rl);
		close(fd);
	}
	clock_gettime(CLOCK_MONOTONIC, &b);
	printf("ring set-up and tear-down: %.1f us mean over %d rounds\n",
	       ((b.tv_sec - a.tv_sec) * 1e9 + (b.tv_nsec - a.tv_nsec)) / n /
		   1e3,
	       n);
	return 0;
}
