/* SPDX-License-Identifier: MIT */
/*
 * sendfile_http: a minimal HTTP/1.0 file server whose body goes out with
 * sendfile(2) — what nginx-style servers do, and what the shim must carry
 * over RDMA by copying through a buffer.
 *
 *   sendfile_http ADDR PORT FILE N   serve FILE to N requests, one at a
 *                                    time; prints "ready PORT"
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/sendfile.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include "testlib.h"

int main(int argc, char **argv)
{
	struct addrinfo hints = {.ai_socktype = SOCK_STREAM,
				 .ai_flags = AI_NUMERICHOST},
			*ai;
	struct sockaddr_storage ss;
	socklen_t len = sizeof(ss);
	struct stat sb;
	int l, one = 1, n;

	if (argc != 5)
		return fprintf(stderr,
			       "usage: sendfile_http ADDR PORT FILE N\n"),
		       2;
	n = atoi(argv[4]);
	if (getaddrinfo(argv[1], argv[2], &hints, &ai))
		tl_die("getaddrinfo");
	l = socket(ai->ai_family, SOCK_STREAM, 0);
	setsockopt(l, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	if (l < 0 || bind(l, ai->ai_addr, ai->ai_addrlen) || listen(l, 16))
		tl_die("listen");
	getsockname(l, (struct sockaddr *)&ss, &len);
	printf("ready %u\n", ntohs(((struct sockaddr_in *)&ss)->sin_port));
	fflush(stdout);
	for (int i = 0; i < n; i++) {
		char req[4096], hdr[256];
		size_t got = 0;
		off_t off = 0;
		int c = accept(l, NULL, NULL), f;

		if (c < 0)
			tl_die("accept");
		/* read the request head */
		while (got < sizeof(req) - 1) {
			ssize_t r =
			    recv(c, req + got, sizeof(req) - 1 - got, 0);

			if (r <= 0)
				tl_die("recv");
			got += (size_t)r;
			req[got] = '\0';
			if (strstr(req, "\r\n\r\n"))
				break;
		}
		f = open(argv[3], O_RDONLY);
		if (f < 0 || fstat(f, &sb))
			tl_die("open");
		len = (socklen_t)snprintf(
		    hdr, sizeof(hdr),
		    "HTTP/1.0 200 OK\r\nContent-Length: %lld\r\n"
		    "Content-Type: application/octet-stream\r\n\r\n",
		    (long long)sb.st_size);
		if (send(c, hdr, len, MSG_NOSIGNAL) != (ssize_t)len)
			tl_die("send header");
		while (off < sb.st_size) {
			ssize_t r =
			    sendfile(c, f, &off, (size_t)(sb.st_size - off));

			if (r < 0 && errno == EINTR)
				continue;
			if (r <= 0)
				tl_die("sendfile");
		}
		close(f);
		close(c);
	}
	printf("served %d\n", n);
	return 0;
}
