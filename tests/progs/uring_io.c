/* SPDX-License-Identifier: MIT */
/*
 * uring_io: a connection whose bytes move by io_uring (IORING_OP_SEND and
 * IORING_OP_RECV), as a liburing program's would; the ring is driven by
 * the system calls themselves (no liburing headers needed).
 *
 *   uring_io ADDR [BYTES]
 *
 * Listens on ADDR (port 0), connects to itself, sends BYTES (default 1 MiB)
 * from the client by io_uring and receives them on the accepted end by
 * io_uring, in 64 KiB requests, then prints
 *   "uring: N of BYTES bytes, same bytes" (or DIFFERENT / the error)
 * and exits 0 only if every byte arrived intact.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <linux/io_uring.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <unistd.h>

struct ring {
	int fd;
	unsigned *sq_tail, *sq_mask, *sq_array, *cq_head, *cq_tail, *cq_mask;
	struct io_uring_sqe *sqes;
	struct io_uring_cqe *cqes;
};

static int ring_init(struct ring *r)
{
	struct io_uring_params p;
	size_t sl, cl;
	char *m;

	memset(&p, 0, sizeof(p));
	r->fd = (int)syscall(__NR_io_uring_setup, 4, &p);
	if (r->fd < 0)
		return -1;
	sl = p.sq_off.array + p.sq_entries * sizeof(unsigned);
	cl = p.cq_off.cqes + p.cq_entries * sizeof(struct io_uring_cqe);
	m = mmap(NULL, sl > cl ? sl : cl, PROT_READ | PROT_WRITE,
		 MAP_SHARED | MAP_POPULATE, r->fd, IORING_OFF_SQ_RING);
	r->sqes = mmap(NULL, p.sq_entries * sizeof(struct io_uring_sqe),
		       PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE, r->fd,
		       IORING_OFF_SQES);
	if (m == MAP_FAILED || r->sqes == MAP_FAILED)
		return -1;
	r->sq_tail = (unsigned *)(m + p.sq_off.tail);
	r->sq_mask = (unsigned *)(m + p.sq_off.ring_mask);
	r->sq_array = (unsigned *)(m + p.sq_off.array);
	r->cq_head = (unsigned *)(m + p.cq_off.head);
	r->cq_tail = (unsigned *)(m + p.cq_off.tail);
	r->cq_mask = (unsigned *)(m + p.cq_off.ring_mask);
	r->cqes = (struct io_uring_cqe *)(m + p.cq_off.cqes);
	return 0;
}

/* One request, waited for: its result (bytes or -errno). */
static int ring_io(struct ring *r, int op, int fd, void *buf, size_t len)
{
	unsigned t = *r->sq_tail, i = t & *r->sq_mask, h;
	struct io_uring_sqe *e = &r->sqes[i];
	int res;

	memset(e, 0, sizeof(*e));
	e->opcode = (unsigned char)op;
	e->fd = fd;
	e->addr = (uintptr_t)buf;
	e->len = (unsigned)len;
	r->sq_array[i] = i;
	__atomic_store_n(r->sq_tail, t + 1, __ATOMIC_RELEASE);
	if (syscall(__NR_io_uring_enter, r->fd, 1, 1, IORING_ENTER_GETEVENTS,
		    NULL, 0) < 0)
		return -errno;
	h = *r->cq_head;
	while (h == __atomic_load_n(r->cq_tail, __ATOMIC_ACQUIRE))
		if (syscall(__NR_io_uring_enter, r->fd, 0, 1,
			    IORING_ENTER_GETEVENTS, NULL, 0) < 0 &&
		    errno != EINTR)
			return -errno;
	res = r->cqes[h & *r->cq_mask].res;
	__atomic_store_n(r->cq_head, h + 1, __ATOMIC_RELEASE);
	return res;
}

int main(int argc, char **argv)
{
	size_t size = argc > 2 ? strtoul(argv[2], NULL, 0) : 1 << 20, sent = 0,
	       got = 0;
	struct sockaddr_in a = {.sin_family = AF_INET};
	socklen_t al = sizeof(a);
	unsigned char *out, *in;
	struct pollfd pl;
	struct ring r;
	int l, c, s, res = 0;

	if (argc < 2 || inet_pton(AF_INET, argv[1], &a.sin_addr) != 1) {
		fprintf(stderr, "usage: uring_io ADDR [BYTES]\n");
		return 2;
	}
	signal(SIGPIPE, SIG_IGN); /* a send on a bare socket: EPIPE, said */
	out = malloc(size);
	in = calloc(1, size);
	for (size_t i = 0; i < size; i++)
		out[i] = (unsigned char)((i * 131 + 7) >> 3);
	l = socket(AF_INET, SOCK_STREAM, 0);
	if (!out || !in || l < 0 || bind(l, (struct sockaddr *)&a, al) < 0 ||
	    listen(l, 4) < 0 ||
	    getsockname(l, (struct sockaddr *)&a, &al) < 0 ||
	    (c = socket(AF_INET, SOCK_STREAM, 0)) < 0 ||
	    connect(c, (struct sockaddr *)&a, al) < 0) {
		perror("uring_io: set-up");
		return 1;
	}
	pl = (struct pollfd){.fd = l, .events = POLLIN};
	if (poll(&pl, 1, 10000) != 1 || (s = accept(l, NULL, NULL)) < 0 ||
	    ring_init(&r) < 0) {
		perror("uring_io: accept/ring");
		return 1;
	}
	while (got < size) {
		if (sent < size) {
			size_t n = size - sent < 65536 ? size - sent : 65536;

			res = ring_io(&r, IORING_OP_SEND, c, out + sent, n);
			if (res <= 0)
				break;
			sent += (size_t)res;
		}
		res = ring_io(&r, IORING_OP_RECV, s, in + got,
			      size - got < 65536 ? size - got : 65536);
		if (res <= 0)
			break;
		got += (size_t)res;
	}
	if (res < 0)
		printf("uring: %zu of %zu bytes, then %s\n", got, size,
		       strerror(-res));
	else
		printf("uring: %zu of %zu bytes, %s\n", got, size,
		       got == size && !memcmp(in, out, size) ? "same bytes"
							     : "DIFFERENT");
	return got == size && !memcmp(in, out, size) ? 0 : 1;
}
