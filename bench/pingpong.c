/* SPDX-License-Identifier: MIT */
/*
 * pingpong: TCP request/response latency over the plain socket API.  It
 * knows nothing of the shim: run it with and without LD_PRELOAD.
 *
 *   pingpong server ADDR PORT [--count N] [--verbose] [--json]
 *       listen (PORT 0 = ephemeral), print "ready PORT", then serve
 *       connections one after the other until killed or N were served;
 *       --verbose/--json: a line per connection with its round trips and
 *       the server's CPU time (user + sys, warm-up included) and its
 *       context switches per round trip: voluntary (sleeps) and not
 *       (preemptions, yields that let another task run)
 *   pingpong client ADDR PORT --size N (--iters N | --seconds S)
 *                   [--warmup N] [--gap-us N] [--bind LOCAL_ADDR] [--json]
 *       send N bytes, wait for N bytes back, repeat; print round trips/s,
 *       latency percentiles and the client's CPU time (user + sys) over the
 *       timed round trips; --json adds one JSON line (the last line), with
 *       the client's context switches per round trip as the server's;
 *       --bind: connect from LOCAL_ADDR (port 0); --gap-us: sleep that long
 *       before each timed round trip (an idle-ish peer: the server's CPU per
 *       round trip then shows what its waits cost; latencies exclude the
 *       gap, round trips/s include it)
 *
 * Sizes take K/M suffixes (binary).  The client opens with an 8-byte header
 * {magic, size}; after that both sides only move messages of exactly that
 * size with blocking send()/recv() looping on partial transfers.  TCP_NODELAY
 * is set on both ends.  With --seconds the run stops at the first round trip
 * that ends after S seconds (and after --iters round trips if both given).
 */
#define BENCH_NAME "pingpong"
#include "bench.h"

#define PP_MAGIC 0x474e5050u /* "PPNG" */
#define PP_MAX_SIZE (16u << 20)

static void usage(void) __attribute__((noreturn));
static void usage(void)
{
	fprintf(stderr,
		"usage: %s server ADDR PORT [--count N] [--verbose] [--json]\n"
		"       %s client ADDR PORT --size N (--iters N | --seconds S)"
		" [--warmup N] [--gap-us N] [--bind LOCAL_ADDR] [--json]\n",
		prog, prog);
	exit(2);
}

static void set_nodelay(int fd)
{
	int one = 1;

	if (setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one)) < 0)
		die("setsockopt TCP_NODELAY");
}

/* ---- server ---- */

static void serve_one(int fd, unsigned long idx, bool verbose, bool json)
{
	uint32_t hdr[2];
	uint64_t n = 0, v0, i0, v1, i1;
	double c0 = cpu_s(), cpu;
	char *buf;
	int r;

	set_nodelay(fd);
	csw(&v0, &i0);
	r = recv_all(fd, hdr, sizeof(hdr));
	if (r <= 0 || hdr[0] != PP_MAGIC || !hdr[1] || hdr[1] > PP_MAX_SIZE) {
		fprintf(stderr, "%s: connection %lu: bad header\n", prog, idx);
		return;
	}
	buf = malloc(hdr[1]);
	if (!buf)
		die("malloc");
	for (;;) {
		r = recv_all(fd, buf, hdr[1]);
		if (r <= 0)
			break;
		if (send_all(fd, buf, hdr[1]) < 0) {
			r = -1;
			break;
		}
		n++;
	}
	if (r < 0)
		fprintf(stderr, "%s: connection %lu: %s\n", prog, idx,
			strerror(errno));
	cpu = cpu_s() - c0;
	csw(&v1, &i1);
	if (verbose)
		printf("connection %lu: %llu round trips of %u B, cpu %.3f s\n",
		       idx, (unsigned long long)n, (unsigned)hdr[1], cpu);
	if (json)
		printf("{\"bench\":\"pingpong\",\"side\":\"server\","
		       "\"connection\":%lu,\"size\":%u,\"round_trips\":%llu,"
		       "\"cpu_s\":%.6f,\"cpu_us_per_rt\":%.4f,"
		       "\"vcsw_per_rt\":%.3f,\"ivcsw_per_rt\":%.3f}\n",
		       idx, (unsigned)hdr[1], (unsigned long long)n, cpu,
		       n ? cpu * 1e6 / (double)n : 0.0,
		       n ? (double)(v1 - v0) / (double)n : 0.0,
		       n ? (double)(i1 - i0) / (double)n : 0.0);
	fflush(stdout);
	free(buf);
}

static int run_server(const char *addr, const char *port, int argc, char **argv)
{
	unsigned long count = 0, served = 0;
	bool verbose = false, json = false;
	int lfd;

	for (int i = 0; i < argc; i++) {
		if (!strcmp(argv[i], "--count") && i + 1 < argc)
			count = (unsigned long)parse_size(argv[i], argv[i + 1]),
			i++;
		else if (!strcmp(argv[i], "--verbose"))
			verbose = true;
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
		serve_one(fd, ++served, verbose, json);
		close(fd);
	}
	close(lfd);
	return 0;
}

/* ---- client ---- */

static int run_client(const char *addr, const char *port, int argc, char **argv)
{
	uint64_t size = 0, iters = 0, warmup = 1000, done = 0, cap, gap_us = 0;
	double seconds = 0, sum = 0, elapsed, c0, cpu;
	bool json = false;
	const char *bind_addr = NULL;
	uint64_t *lat, t0, tprev, deadline = 0, v0, i0, v1, i1;
	uint32_t hdr[2];
	char *buf;
	int fd;

	for (int i = 0; i < argc; i++) {
		const char *a = argv[i];

		if (!strcmp(a, "--json")) {
			json = true;
			continue;
		}
		if (i + 1 >= argc)
			usage();
		if (!strcmp(a, "--size"))
			size = parse_size(a, argv[++i]);
		else if (!strcmp(a, "--iters"))
			iters = parse_size(a, argv[++i]);
		else if (!strcmp(a, "--warmup"))
			warmup = parse_size(a, argv[++i]);
		else if (!strcmp(a, "--seconds"))
			seconds = parse_seconds(a, argv[++i]);
		else if (!strcmp(a, "--gap-us"))
			gap_us = parse_size(a, argv[++i]);
		else if (!strcmp(a, "--bind"))
			bind_addr = argv[++i];
		else
			usage();
	}
	if (!size || size > PP_MAX_SIZE) {
		fprintf(stderr, "%s: --size must be 1..%u\n", prog,
			PP_MAX_SIZE);
		return 2;
	}
	if (!iters && !seconds)
		iters = 100000;

	buf = malloc(size);
	cap = iters ? iters : 1u << 20;
	lat = malloc(cap * sizeof(*lat));
	if (!buf || !lat)
		die("malloc");
	memset(buf, 0x5a, size);

	fd = connect_to(addr, port, bind_addr);
	set_nodelay(fd);
	hdr[0] = PP_MAGIC;
	hdr[1] = (uint32_t)size;
	if (send_all(fd, hdr, sizeof(hdr)) < 0)
		die("send header");

	for (uint64_t i = 0; i < warmup; i++)
		if (send_all(fd, buf, size) < 0 || recv_all(fd, buf, size) != 1)
			die("warmup round trip");

	c0 = cpu_s();
	csw(&v0, &i0);
	t0 = tprev = now_ns();
	if (seconds)
		deadline = t0 + (uint64_t)(seconds * 1e9);
	for (;;) {
		uint64_t t;

		if (gap_us) {
			struct timespec gap = {
			    .tv_sec = (time_t)(gap_us / 1000000),
			    .tv_nsec = (long)(gap_us % 1000000) * 1000};

			nanosleep(&gap, NULL);
			tprev = now_ns();
		}
		if (send_all(fd, buf, size) < 0 || recv_all(fd, buf, size) != 1)
			die("round trip");
		t = now_ns();
		if (done == cap) {
			cap *= 2;
			lat = realloc(lat, cap * sizeof(*lat));
			if (!lat)
				die("realloc");
		}
		lat[done++] = t - tprev;
		tprev = t;
		if (iters && done >= iters)
			break;
		if (deadline && t >= deadline)
			break;
	}
	elapsed = (double)(now_ns() - t0) / 1e9;
	cpu = cpu_s() - c0;
	csw(&v1, &i1);
	close(fd);

	for (uint64_t i = 0; i < done; i++)
		sum += (double)lat[i];
	qsort(lat, done, sizeof(*lat), cmp_u64);
	{
		double rate = (double)done / elapsed;
		double p50 = pct_us(lat, done, 50), p99 = pct_us(lat, done, 99);
		double p999 = pct_us(lat, done, 99.9);
		double mn = (double)lat[0] / 1e3;
		double mx = (double)lat[done - 1] / 1e3;
		double mean = sum / (double)done / 1e3;

		printf("pingpong %s:%s size %llu B: %llu round trips in "
		       "%.3f s\n",
		       addr, port, (unsigned long long)size,
		       (unsigned long long)done, elapsed);
		printf("  round trips/s %.1f\n", rate);
		printf("  client cpu %.3f s = %.3f us per round trip\n", cpu,
		       cpu * 1e6 / (double)done);
		printf("  latency us: min %.2f p50 %.2f p99 %.2f p99.9 %.2f "
		       "max %.2f mean %.2f\n",
		       mn, p50, p99, p999, mx, mean);
		if (json)
			printf("{\"bench\":\"pingpong\",\"addr\":\"%s\","
			       "\"port\":%d,\"size\":%llu,\"warmup\":%llu,"
			       "\"iters\":%llu,\"seconds\":%.6f,"
			       "\"rtt_per_s\":%.1f,\"min_us\":%.3f,"
			       "\"p50_us\":%.3f,\"p99_us\":%.3f,"
			       "\"p999_us\":%.3f,\"max_us\":%.3f,"
			       "\"mean_us\":%.3f,\"cpu_s\":%.6f,"
			       "\"cpu_us_per_rt\":%.4f,\"vcsw_per_rt\":%.3f,"
			       "\"ivcsw_per_rt\":%.3f}\n",
			       addr, atoi(port), (unsigned long long)size,
			       (unsigned long long)warmup,
			       (unsigned long long)done, elapsed, rate, mn, p50,
			       p99, p999, mx, mean, cpu,
			       cpu * 1e6 / (double)done,
			       (double)(v1 - v0) / (double)done,
			       (double)(i1 - i0) / (double)done);
	}
	free(lat);
	free(buf);
	return 0;
}

int main(int argc, char **argv)
{
	return bench_main(argc, argv, run_server, run_client, usage);
}
