/*
 * rs_bulk: bulk transfer over rsockets (librdmacm), used by the RDMA test bed
 * (tests/rdma/20-rsocket-bulk.sh) to prove that the bed moves data correctly
 * without any help from the preload library.
 *
 *   rs_bulk server ADDR PORT [options]
 *   rs_bulk client ADDR PORT [options]
 *
 * options:
 *   --bytes N       bytes the client sends (suffix K, M or G; default 64M)
 *   --seed S        seed of the pseudo-random stream (default 1)
 *   --bind ADDR     client: bind to this local address before connecting
 *   --hold-file F   server: after verifying, keep the connection open until
 *                   file F exists (at most --timeout seconds), so that a test
 *                   can look at the live queue pairs
 *   --timeout S     give up after S seconds (default 60)
 *
 * The client sends a 24-byte header (magic "RSBK", version, length, seed) and
 * then the stream: testlib's xorshift stream of the seed (tl_rng).
 * The server regenerates the same stream, compares every byte, computes the
 * FNV-1a 64 hash of what it received, and answers with a 24-byte report
 * (magic "RSOK"/"RSNG", bytes received, hash). Both sides print
 * "RESULT: ..." lines; the server prints "listening" once it accepts
 * connections. Exit status 0 only when every byte arrived intact.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <inttypes.h>
#include <netdb.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>
#include <unistd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <rdma/rsocket.h>

#include "testlib.h"

#define MAGIC_HELLO 0x4b425352u /* "RSBK" */
#define MAGIC_OK 0x4b4f5352u	/* "RSOK" */
#define MAGIC_BAD 0x474e5352u	/* "RSNG" */
#define PROTO_VERSION 2u	/* 2: the stream is testlib's tl_rng */
#define CHUNK (256 * 1024)

struct hello {
	uint32_t magic, version;
	uint64_t length, seed;
};

struct report {
	uint32_t magic, pad;
	uint64_t received, hash;
};

static void on_alarm(int sig)
{
	static const char msg[] = "rs_bulk: timed out\n";

	(void)sig;
	if (write(2, msg, sizeof(msg) - 1) < 0)
		_exit(3);
	_exit(3);
}

static double now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

static void send_all(int fd, const void *buf, size_t len)
{
	const char *p = buf;

	while (len > 0) {
		ssize_t n = rsend(fd, p, len, 0);

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			tl_dief("rsend: %s",
				n < 0 ? strerror(errno) : "returned 0");
		p += n;
		len -= (size_t)n;
	}
}

/* Returns bytes read; fewer than len only at end of stream. */
static size_t recv_all(int fd, void *buf, size_t len)
{
	char *p = buf;
	size_t got = 0;

	while (got < len) {
		ssize_t n = rrecv(fd, p + got, len - got, 0);

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			tl_dief("rrecv: %s", strerror(errno));
		if (n == 0)
			break;
		got += (size_t)n;
	}
	return got;
}

static struct addrinfo *resolve(const char *host, const char *port, int passive)
{
	struct addrinfo hints, *ai;
	int rc;

	memset(&hints, 0, sizeof(hints));
	hints.ai_family = AF_UNSPEC;
	hints.ai_socktype = SOCK_STREAM;
	hints.ai_flags =
	    AI_NUMERICHOST | AI_NUMERICSERV | (passive ? AI_PASSIVE : 0);
	rc = getaddrinfo(host, port, &hints, &ai);
	if (rc)
		tl_dief("%s port %s: %s", host, port, gai_strerror(rc));
	return ai;
}

static uint64_t parse_size(const char *s)
{
	char *end;
	unsigned long long v = strtoull(s, &end, 0);

	switch (*end) {
	case 'k':
	case 'K':
		v <<= 10;
		end++;
		break;
	case 'm':
	case 'M':
		v <<= 20;
		end++;
		break;
	case 'g':
	case 'G':
		v <<= 30;
		end++;
		break;
	}
	if (*end || end == s)
		tl_dief("bad size: %s", s);
	return v;
}

static int wait_for_file(const char *path, int timeout_s)
{
	struct stat st;
	double limit = now() + timeout_s;

	while (stat(path, &st) != 0) {
		if (now() > limit)
			return -1;
		usleep(10000);
	}
	return 0;
}

static int run_server(const char *addr, const char *port, const char *hold_file,
		      int timeout_s)
{
	struct addrinfo *ai = resolve(addr, port, 1);
	unsigned char *got = malloc(CHUNK), *want = malloc(CHUNK);
	struct hello h;
	struct report rep;
	struct tl_rng rng;
	uint64_t received = 0, hash = TL_FNV0, first_bad = UINT64_MAX;
	int lfd, fd, one = 1;
	double t0, secs;

	tl_name = "rs_bulk server";
	if (!got || !want)
		tl_dief("out of memory");
	lfd = rsocket(ai->ai_family, SOCK_STREAM, 0);
	if (lfd < 0)
		tl_dief("rsocket: %s", strerror(errno));
	rsetsockopt(lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	if (rbind(lfd, ai->ai_addr, ai->ai_addrlen))
		tl_dief("rbind %s:%s: %s", addr, port, strerror(errno));
	if (rlisten(lfd, 4))
		tl_dief("rlisten: %s", strerror(errno));
	freeaddrinfo(ai);
	printf("listening on %s port %s pid %d\n", addr, port, (int)getpid());
	fflush(stdout);

	fd = raccept(lfd, NULL, NULL);
	if (fd < 0)
		tl_dief("raccept: %s", strerror(errno));
	printf("accepted\n");
	fflush(stdout);
	if (recv_all(fd, &h, sizeof(h)) != sizeof(h))
		tl_dief("connection closed before the header");
	if (h.magic != MAGIC_HELLO || h.version != PROTO_VERSION)
		tl_dief("bad header (magic %#x version %u)", h.magic,
			h.version);

	tl_rng_seed(&rng, h.seed);
	t0 = now();
	while (received < h.length) {
		size_t want_n =
		    h.length - received < CHUNK ? h.length - received : CHUNK;
		size_t n = recv_all(fd, got, want_n);

		if (n == 0)
			break;
		tl_rng_fill(&rng, want, n);
		if (first_bad == UINT64_MAX && memcmp(got, want, n)) {
			for (size_t i = 0; i < n; i++)
				if (got[i] != want[i]) {
					first_bad = received + i;
					break;
				}
		}
		hash = tl_fnv(hash, got, n);
		received += n;
		if (n < want_n)
			break;
	}
	secs = now() - t0;

	int ok = received == h.length && first_bad == UINT64_MAX;

	rep.magic = ok ? MAGIC_OK : MAGIC_BAD;
	rep.pad = 0;
	rep.received = received;
	rep.hash = hash;
	if (ok)
		printf("RESULT: server verified %" PRIu64
		       " bytes, fnv1a64 %016" PRIx64 ", %.1f MB/s\n",
		       received, hash, secs > 0 ? received / secs / 1e6 : 0.0);
	else if (first_bad != UINT64_MAX)
		printf("RESULT: server MISMATCH at byte %" PRIu64 " of %" PRIu64
		       "\n",
		       first_bad, h.length);
	else
		printf("RESULT: server SHORT: %" PRIu64 " of %" PRIu64
		       " bytes\n",
		       received, h.length);
	fflush(stdout);

	if (hold_file) {
		printf("holding the connection until %s exists\n", hold_file);
		fflush(stdout);
		if (wait_for_file(hold_file, timeout_s))
			tl_dief("%s did not appear", hold_file);
	}
	if (received == h.length)
		send_all(fd, &rep, sizeof(rep));
	rshutdown(fd, SHUT_RDWR);
	rclose(fd);
	rclose(lfd);
	free(got);
	free(want);
	return ok ? 0 : 1;
}

static int run_client(const char *addr, const char *port, const char *bind_addr,
		      uint64_t length, uint64_t seed)
{
	struct addrinfo *ai = resolve(addr, port, 0);
	unsigned char *buf = malloc(CHUNK);
	struct hello h = {MAGIC_HELLO, PROTO_VERSION, length, seed};
	struct report rep;
	struct tl_rng rng;
	uint64_t sent = 0, hash = TL_FNV0;
	double t0, secs;
	int fd;

	tl_name = "rs_bulk client";
	if (!buf)
		tl_dief("out of memory");
	fd = rsocket(ai->ai_family, SOCK_STREAM, 0);
	if (fd < 0)
		tl_dief("rsocket: %s", strerror(errno));
	if (bind_addr) {
		struct addrinfo *b = resolve(bind_addr, "0", 1);

		if (rbind(fd, b->ai_addr, b->ai_addrlen))
			tl_dief("rbind %s: %s", bind_addr, strerror(errno));
		freeaddrinfo(b);
	}
	if (rconnect(fd, ai->ai_addr, ai->ai_addrlen))
		tl_dief("rconnect %s:%s: %s", addr, port, strerror(errno));
	freeaddrinfo(ai);

	t0 = now();
	send_all(fd, &h, sizeof(h));
	tl_rng_seed(&rng, seed);
	while (sent < length) {
		size_t n = length - sent < CHUNK ? length - sent : CHUNK;

		tl_rng_fill(&rng, buf, n);
		hash = tl_fnv(hash, buf, n);
		send_all(fd, buf, n);
		sent += n;
	}
	if (recv_all(fd, &rep, sizeof(rep)) != sizeof(rep))
		tl_dief("no report from the server");
	secs = now() - t0;
	rclose(fd);
	free(buf);

	if (rep.magic != MAGIC_OK || rep.received != length ||
	    rep.hash != hash) {
		printf("RESULT: client FAILED: server says %s, %" PRIu64
		       " bytes, fnv1a64 %016" PRIx64 " (sent %" PRIu64
		       ", fnv1a64 %016" PRIx64 ")\n",
		       rep.magic == MAGIC_OK ? "ok" : "bad", rep.received,
		       rep.hash, length, hash);
		return 1;
	}
	printf("RESULT: client sent %" PRIu64 " bytes, fnv1a64 %016" PRIx64
	       " confirmed, %.1f MB/s\n",
	       length, hash, secs > 0 ? length / secs / 1e6 : 0.0);
	return 0;
}

static void usage(void)
{
	fprintf(
	    stderr,
	    "usage: rs_bulk server ADDR PORT [--hold-file F] [--timeout S]\n"
	    "       rs_bulk client ADDR PORT [--bytes N] [--seed S] [--bind "
	    "ADDR] [--timeout S]\n");
	exit(2);
}

int main(int argc, char **argv)
{
	const char *bind_addr = NULL, *hold_file = NULL;
	uint64_t length = 64ull << 20, seed = 1;
	int timeout_s = 60;

	if (argc < 4)
		usage();
	for (int i = 4; i < argc; i++) {
		const char *o = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;

		if (!v)
			usage();
		if (!strcmp(o, "--bytes"))
			length = parse_size(v);
		else if (!strcmp(o, "--seed"))
			seed = strtoull(v, NULL, 0);
		else if (!strcmp(o, "--bind"))
			bind_addr = v;
		else if (!strcmp(o, "--hold-file"))
			hold_file = v;
		else if (!strcmp(o, "--timeout"))
			timeout_s = atoi(v);
		else
			usage();
		i++;
	}
	setvbuf(stdout, NULL, _IOLBF, 0);
	signal(SIGALRM, on_alarm);
	signal(SIGPIPE, SIG_IGN);
	if (timeout_s > 0)
		alarm((unsigned)timeout_s +
		      (hold_file ? (unsigned)timeout_s : 0));
	if (!strcmp(argv[1], "server"))
		return run_server(argv[2], argv[3], hold_file, timeout_s);
	if (!strcmp(argv[1], "client"))
		return run_client(argv[2], argv[3], bind_addr, length, seed);
	usage();
	return 2;
}
