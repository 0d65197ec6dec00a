/* SPDX-License-Identifier: MIT */
/*
 * stream: one-way TCP throughput over the plain socket API.  It knows
 * nothing of the shim: run it with and without LD_PRELOAD.
 *
 *   stream server ADDR PORT [--count N] [--json]
 *       listen (PORT 0 = ephemeral), print "ready PORT", then serve
 *       connections one after the other until killed or N were served;
 *       prints its own figures (and CPU time) after each connection
 *   stream client ADDR PORT --msg-size N (--total BYTES | --seconds S)
 *                 [--recv-size N] [--verify] [--seed N] [--nodelay]
 *                 [--bind LOCAL_ADDR] [--json]
 *       send messages of N bytes until BYTES were sent (the last message
 *       is cut to fit) or S seconds passed, then shut down the write side
 *       and wait for the server's report; --bind: connect from LOCAL_ADDR
 *
 * Sizes take K/M/G suffixes (binary).  Gb/s are 10^9 bits per second.
 *
 * Protocol: the client sends a header {magic, flags, msg size, seed, server
 * recv size}, then the data, then shuts down its write side.  At EOF the
 * server answers with a report {bytes, recv calls, FNV-1a of what it got,
 * FNV-1a of what it expected, its user/sys CPU time, its elapsed time}.  The
 * client's time runs from just before the header until the report arrives,
 * so every byte has been received by the server when the clock stops.
 *
 * --verify: the payload is a splitmix64 byte stream from --seed (each 64-bit
 * output taken least significant byte first); both sides compute the 64-bit
 * FNV-1a of the bytes they moved and print it; the server also regenerates
 * the stream and checks the data against it.  Exit status 1 when anything
 * disagrees.  Without --verify the payload is a constant pattern and no
 * per-byte work is done on either side.
 */
#define BENCH_NAME "stream"
#include "bench.h"

#define ST_MAGIC 0x4d525453u  /* "STRM" */
#define ST_REPORT 0x54505252u /* "RRPT" */
#define ST_F_VERIFY 1u
#define ST_MAX_MSG (256ull << 20)

struct st_hdr {
	uint32_t magic;
	uint32_t flags;
	uint64_t msg_size;
	uint64_t seed;
	uint64_t recv_size;
};

struct st_report {
	uint32_t magic;
	uint32_t verify_ok; /* 1 when --verify and the data matched */
	uint64_t bytes;
	uint64_t recv_calls;
	uint64_t fnv;
	uint64_t fnv_expect;
	uint64_t bad_offset; /* first mismatching byte, or UINT64_MAX */
	uint64_t user_us, sys_us;
	uint64_t elapsed_ns;
};

static void usage(void) __attribute__((noreturn));
static void usage(void)
{
	fprintf(stderr,
		"usage: %s server ADDR PORT [--count N] [--json]\n"
		"       %s client ADDR PORT --msg-size N (--total BYTES |"
		" --seconds S)\n"
		"              [--recv-size N] [--verify] [--seed N]"
		" [--nodelay] [--bind LOCAL_ADDR] [--json]\n",
		prog, prog);
	exit(2);
}

/* ---- payload: splitmix64 bytes, FNV-1a 64 ---- */

struct prng {
	uint64_t x;
	uint64_t word; /* bytes of the current output not handed out yet */
	unsigned int left;
};

static uint64_t splitmix64(uint64_t *x)
{
	uint64_t z = (*x += 0x9e3779b97f4a7c15ull);

	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

static void prng_init(struct prng *g, uint64_t seed)
{
	g->x = seed;
	g->word = 0;
	g->left = 0;
}

/* The next n bytes of the stream, however the stream is cut up. */
static void prng_fill(struct prng *g, unsigned char *p, size_t n)
{
	while (n && g->left) {
		*p++ = (unsigned char)g->word;
		g->word >>= 8;
		g->left--;
		n--;
	}
	while (n >= 8) {
		uint64_t w = splitmix64(&g->x);

		for (int i = 0; i < 8; i++, w >>= 8)
			p[i] = (unsigned char)w;
		p += 8;
		n -= 8;
	}
	if (n) {
		g->word = splitmix64(&g->x);
		g->left = 8;
		prng_fill(g, p, n);
	}
}

#define FNV_OFFSET 0xcbf29ce484222325ull
#define FNV_PRIME 0x100000001b3ull

static uint64_t fnv1a(uint64_t h, const unsigned char *p, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		h ^= p[i];
		h *= FNV_PRIME;
	}
	return h;
}

static double gbps(uint64_t bytes, double s)
{
	return s > 0 ? (double)bytes * 8 / s / 1e9 : 0;
}

/* ---- server ---- */

static bool serve_one(int fd, unsigned long idx, bool json)
{
	struct st_hdr h;
	struct st_report rep = {.magic = ST_REPORT,
				.fnv = FNV_OFFSET,
				.fnv_expect = FNV_OFFSET,
				.bad_offset = UINT64_MAX};
	uint64_t u0, s0, u1, s1, t0;
	unsigned char *buf, *want = NULL;
	struct prng g;
	bool verify, ok = true;
	size_t rsz;
	double el;
	char hex[24];

	if (recv_all(fd, &h, sizeof(h)) != 1 || h.magic != ST_MAGIC ||
	    !h.msg_size || h.msg_size > ST_MAX_MSG ||
	    h.recv_size > ST_MAX_MSG) {
		fprintf(stderr, "%s: connection %lu: bad header\n", prog, idx);
		return false;
	}
	verify = h.flags & ST_F_VERIFY;
	rsz = (size_t)(h.recv_size ? h.recv_size : h.msg_size);
	buf = malloc(rsz);
	if (verify)
		want = malloc(rsz);
	if (!buf || (verify && !want))
		die("malloc");
	prng_init(&g, h.seed);

	cpu_us(&u0, &s0);
	t0 = now_ns();
	for (;;) {
		ssize_t r = recv(fd, buf, rsz, 0);

		if (r < 0) {
			if (errno == EINTR)
				continue;
			fprintf(stderr, "%s: connection %lu: recv: %s\n", prog,
				idx, strerror(errno));
			ok = false;
			break;
		}
		if (r == 0)
			break;
		rep.recv_calls++;
		if (verify) {
			prng_fill(&g, want, (size_t)r);
			rep.fnv = fnv1a(rep.fnv, buf, (size_t)r);
			/* Until the first bad byte both sums are the same
			 * and only one needs computing. */
			if (rep.bad_offset == UINT64_MAX &&
			    !memcmp(buf, want, (size_t)r)) {
				rep.fnv_expect = rep.fnv;
			} else {
				if (rep.bad_offset == UINT64_MAX) {
					size_t i = 0;

					while (buf[i] == want[i])
						i++;
					rep.bad_offset = rep.bytes + i;
				}
				rep.fnv_expect =
				    fnv1a(rep.fnv_expect, want, (size_t)r);
			}
		}
		rep.bytes += (uint64_t)r;
	}
	rep.elapsed_ns = now_ns() - t0;
	cpu_us(&u1, &s1);
	rep.user_us = u1 - u0;
	rep.sys_us = s1 - s0;
	rep.verify_ok = verify && ok && rep.bad_offset == UINT64_MAX &&
			rep.fnv == rep.fnv_expect;
	if (ok && send_all(fd, &rep, sizeof(rep)) < 0) {
		fprintf(stderr, "%s: connection %lu: sending report: %s\n",
			prog, idx, strerror(errno));
		ok = false;
	}

	el = (double)rep.elapsed_ns / 1e9;
	printf("stream server: connection %lu: %llu bytes in %.3f s = %.3f "
	       "Gb/s, %llu recv calls of <= %zu B\n",
	       idx, (unsigned long long)rep.bytes, el, gbps(rep.bytes, el),
	       (unsigned long long)rep.recv_calls, rsz);
	printf("  server cpu: user %.3f s sys %.3f s (%.0f%% of one core)\n",
	       (double)rep.user_us / 1e6, (double)rep.sys_us / 1e6,
	       el > 0 ? (double)(rep.user_us + rep.sys_us) / 1e4 / el : 0.0);
	if (verify) {
		printf("  server fnv1a 0x%016llx expected 0x%016llx: %s\n",
		       (unsigned long long)rep.fnv,
		       (unsigned long long)rep.fnv_expect,
		       rep.verify_ok ? "OK" : "MISMATCH");
		if (rep.bad_offset != UINT64_MAX)
			printf("  first bad byte at offset %llu\n",
			       (unsigned long long)rep.bad_offset);
	}
	snprintf(hex, sizeof(hex), "\"0x%016llx\"",
		 (unsigned long long)rep.fnv);
	if (json)
		printf("{\"bench\":\"stream\",\"side\":\"server\","
		       "\"connection\":%lu,\"bytes\":%llu,\"seconds\":%.6f,"
		       "\"gbps\":%.4f,\"recv_calls\":%llu,\"recv_size\":%zu,"
		       "\"cpu_user_s\":%.6f,\"cpu_sys_s\":%.6f,"
		       "\"verify\":%s,\"fnv1a\":%s}\n",
		       idx, (unsigned long long)rep.bytes, el,
		       gbps(rep.bytes, el), (unsigned long long)rep.recv_calls,
		       rsz, (double)rep.user_us / 1e6, (double)rep.sys_us / 1e6,
		       !verify	       ? "null"
		       : rep.verify_ok ? "true"
				       : "false",
		       verify ? hex : "null");
	fflush(stdout);
	free(want);
	free(buf);
	return ok && (!verify || rep.verify_ok);
}

static int run_server(const char *addr, const char *port, int argc, char **argv)
{
	unsigned long count = 0, served = 0;
	bool json = false, all_ok = true;
	int lfd;

	for (int i = 0; i < argc; i++) {
		if (!strcmp(argv[i], "--count") && i + 1 < argc)
			count = (unsigned long)parse_size(argv[i], argv[i + 1]),
			i++;
		else if (!strcmp(argv[i], "--json"))
			json = true;
		else
			usage();
	}
	lfd = listen_ready(addr, port);

	while (!count || served < count) {
		int fd = accept(lfd, NULL, NULL);

		if (fd < 0) {
			if (errno == EINTR || errno == ECONNABORTED)
				continue;
			die("accept");
		}
		if (!serve_one(fd, ++served, json))
			all_ok = false;
		close(fd);
	}
	close(lfd);
	return all_ok ? 0 : 1;
}

/* ---- client ---- */

static int run_client(const char *addr, const char *port, int argc, char **argv)
{
	uint64_t msg = 0, total = 0, recv_size = 0, seed = 1;
	uint64_t sent = 0, msgs = 0, u0, s0, u1, s1, t0, t1, deadline = 0;
	uint64_t fnv = FNV_OFFSET;
	double seconds = 0, el, cu, cs, su, ss_;
	bool verify = false, json = false, nodelay = false, ok = true;
	const char *bind_addr = NULL;
	struct st_hdr h;
	struct st_report rep;
	struct prng g;
	unsigned char *buf;
	unsigned int check_every;
	char hex_c[24], hex_s[24];
	int fd;

	for (int i = 0; i < argc; i++) {
		const char *a = argv[i];

		if (!strcmp(a, "--verify")) {
			verify = true;
			continue;
		}
		if (!strcmp(a, "--json")) {
			json = true;
			continue;
		}
		if (!strcmp(a, "--nodelay")) {
			nodelay = true;
			continue;
		}
		if (i + 1 >= argc)
			usage();
		if (!strcmp(a, "--msg-size"))
			msg = parse_size(a, argv[++i]);
		else if (!strcmp(a, "--total"))
			total = parse_size(a, argv[++i]);
		else if (!strcmp(a, "--seconds"))
			seconds = parse_seconds(a, argv[++i]);
		else if (!strcmp(a, "--recv-size"))
			recv_size = parse_size(a, argv[++i]);
		else if (!strcmp(a, "--seed"))
			seed = parse_size(a, argv[++i]);
		else if (!strcmp(a, "--bind"))
			bind_addr = argv[++i];
		else
			usage();
	}
	if (!msg || msg > ST_MAX_MSG || recv_size > ST_MAX_MSG) {
		fprintf(stderr, "%s: --msg-size/--recv-size must be 1..%llu\n",
			prog, (unsigned long long)ST_MAX_MSG);
		return 2;
	}
	if (!total && !seconds) {
		fprintf(stderr, "%s: give --total or --seconds\n", prog);
		return 2;
	}
	buf = malloc(msg);
	if (!buf)
		die("malloc");
	memset(buf, 0xa5, msg);
	prng_init(&g, seed);
	/* In --seconds mode read the clock about every 4 KiB sent. */
	check_every = msg >= 4096 ? 1 : (unsigned int)(4096 / msg);

	fd = connect_to(addr, port, bind_addr);
	if (nodelay) {
		int one = 1;

		if (setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one,
			       sizeof(one)) < 0)
			die("setsockopt TCP_NODELAY");
	}

	memset(&h, 0, sizeof(h));
	h.magic = ST_MAGIC;
	h.flags = verify ? ST_F_VERIFY : 0;
	h.msg_size = msg;
	h.seed = seed;
	h.recv_size = recv_size;
	cpu_us(&u0, &s0);
	t0 = now_ns();
	if (seconds)
		deadline = t0 + (uint64_t)(seconds * 1e9);
	if (send_all(fd, &h, sizeof(h)) < 0)
		die("send header");
	for (;;) {
		size_t n = (size_t)msg;

		if (total) {
			if (sent >= total)
				break;
			if (total - sent < n)
				n = (size_t)(total - sent);
		}
		if (deadline && msgs % check_every == 0 && now_ns() >= deadline)
			break;
		if (verify) {
			prng_fill(&g, buf, n);
			fnv = fnv1a(fnv, buf, n);
		}
		if (send_all(fd, buf, n) < 0)
			die("send");
		sent += n;
		msgs++;
	}
	if (shutdown(fd, SHUT_WR) < 0)
		die("shutdown");
	if (recv_all(fd, &rep, sizeof(rep)) != 1 || rep.magic != ST_REPORT) {
		fprintf(stderr, "%s: no report from the server\n", prog);
		return 2;
	}
	t1 = now_ns();
	cpu_us(&u1, &s1);
	close(fd);

	el = (double)(t1 - t0) / 1e9;
	cu = (double)(u1 - u0) / 1e6;
	cs = (double)(s1 - s0) / 1e6;
	su = (double)rep.user_us / 1e6;
	ss_ = (double)rep.sys_us / 1e6;
	if (rep.bytes != sent)
		ok = false;
	if (verify && (!rep.verify_ok || rep.fnv != fnv))
		ok = false;

	printf("stream %s:%s msg %llu B: %llu bytes in %llu messages, "
	       "%.3f s\n",
	       addr, port, (unsigned long long)msg, (unsigned long long)sent,
	       (unsigned long long)msgs, el);
	printf("  %.3f Gb/s, %.1f msgs/s\n", gbps(sent, el), (double)msgs / el);
	printf("  client cpu: user %.3f s sys %.3f s (%.0f%% of one core)\n",
	       cu, cs, (cu + cs) / el * 100);
	printf("  server cpu: user %.3f s sys %.3f s (%.0f%% of one core), "
	       "%llu recv calls\n",
	       su, ss_, (su + ss_) / el * 100,
	       (unsigned long long)rep.recv_calls);
	if (rep.bytes != sent)
		printf("  BYTE COUNT MISMATCH: server got %llu\n",
		       (unsigned long long)rep.bytes);
	if (verify)
		printf("  fnv1a client 0x%016llx server 0x%016llx: %s\n",
		       (unsigned long long)fnv, (unsigned long long)rep.fnv,
		       ok ? "OK" : "MISMATCH");
	snprintf(hex_c, sizeof(hex_c), "\"0x%016llx\"",
		 (unsigned long long)fnv);
	snprintf(hex_s, sizeof(hex_s), "\"0x%016llx\"",
		 (unsigned long long)rep.fnv);
	if (json)
		printf("{\"bench\":\"stream\",\"side\":\"client\","
		       "\"addr\":\"%s\",\"port\":%d,\"msg_size\":%llu,"
		       "\"bytes\":%llu,\"msgs\":%llu,\"seconds\":%.6f,"
		       "\"gbps\":%.4f,\"msgs_per_s\":%.1f,"
		       "\"client_cpu_user_s\":%.6f,\"client_cpu_sys_s\":%.6f,"
		       "\"server_cpu_user_s\":%.6f,\"server_cpu_sys_s\":%.6f,"
		       "\"server_bytes\":%llu,\"server_recv_calls\":%llu,"
		       "\"verify\":%s,\"fnv1a\":%s,\"server_fnv1a\":%s,"
		       "\"ok\":%s}\n",
		       addr, atoi(port), (unsigned long long)msg,
		       (unsigned long long)sent, (unsigned long long)msgs, el,
		       gbps(sent, el), (double)msgs / el, cu, cs, su, ss_,
		       (unsigned long long)rep.bytes,
		       (unsigned long long)rep.recv_calls,
		       verify ? "true" : "false", verify ? hex_c : "null",
		       verify ? hex_s : "null", ok ? "true" : "false");
	free(buf);
	return ok ? 0 : 1;
}

int main(int argc, char **argv)
{
	return bench_main(argc, argv, run_server, run_client, usage);
}
