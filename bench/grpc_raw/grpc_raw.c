// SPDX-License-Identifier: MIT
/*
 * grpc_raw: a gRPC throughput/latency bench on the gRPC core C API (Debian's
 * libgrpc-dev 1.51), the C equivalent of the C++ grpc_raw bench.  One binary,
 * both ends: --job_type server | client.
 *
 * Unary RPCs on one method, "/grpc_raw.Bench/Send", with raw byte buffers (no
 * protobuf).  The client builds its payload slice once and every call's byte
 * buffer takes a reference to it (grpc_raw_byte_buffer_create refs the
 * slice): nothing is copied per message on our side.  The server discards
 * the payload (after checking it with --verify) and answers with
 * --response_size bytes (0: an empty message), also one shared slice.
 *
 * Options (both "--opt value" and "--opt=value"; sizes take K/M/G = 2^10..):
 *   --job_type server|client     (required)
 *   --target_ip IP               server: address to listen on (default
 *                                0.0.0.0); client: server address (127.0.0.1)
 *   --port N                     default 50051; server: 0 picks a free port
 *   --server_threads N           server completion queues, one thread each (2)
 *   --max_seconds S              server: exit after S s (0: on SIGTERM/SIGINT
 *                                only); client: give up (exit 3) after S s
 *   --message_size SIZE          request payload (default 100M)
 *   --response_size SIZE         client: response payload the server is
 *                                asked for (metadata "x-grpc-raw-resp";
 *                                default 0: an empty message)
 *   --total_message N            measured RPCs in all, over every channel; or
 *   --duration S                 issue measured RPCs for S s (default 10 s
 *                                when --total_message is not given)
 *   --warmup N | Ns              N RPCs, or N seconds, before measuring (0)
 *   --client_channels N          channels, each its own TCP connection and
 *                                completion queue + thread (default 1)
 *   --client_channel_concurrent N  RPCs in flight per channel (default 1)
 *   --verify                     client: payload is pseudo-random, its
 *                                FNV-1a 64 travels in metadata
 *                                "x-grpc-raw-fnv1a"; the server hashes every
 *                                payload it receives and fails the RPC with
 *                                DATA_LOSS on a mismatch; the client counts
 *                                those and exits 1
 *   --interval S                 progress line period (default 2 s)
 *   --hold FILE                  test hook: after the summary, print
 *                                "holding" and keep the channels (their
 *                                connections) open until FILE exists (60 s
 *                                at most), so a test can look at them
 *   --bad_checksum N             test hook: the first N RPCs carry a wrong
 *                                checksum (with --verify), to show that the
 *                                server checks and the client counts
 *
 * Output: "ready PORT" (server, once listening); every --interval a line
 * "progress t=... gbps=..."; the client ends with "throughput X Gb/s" and a
 * one-line JSON summary {"bench":"grpc_raw","side":"client",...} (Gb/s,
 * msgs/s, p50/p99/p99.9 latency in us, CPU user+sys of the process and of
 * the measured part, cpu_s_per_gb = the latter per GB moved, counts); the
 * server prints {"bench":"grpc_raw","side":"server",...} (messages, bytes,
 * mismatches, CPU) when it exits.  Client exit status: 0 when every RPC
 * succeeded (and, with --total_message, exactly that many were measured), 1
 * otherwise, 2 on bad options, 3 when --max_seconds hit.
 *
 * On two real hosts (A serves, B is the client; A_IP = A's address on the
 * RDMA interface; the same build on both, `ulimit -l unlimited` for RDMA):
 *   kernel TCP:
 *     A: build/bench/grpc_raw --job_type server --target_ip A_IP --port 50051
 * --server_threads 4
 *     B: build/bench/grpc_raw --job_type client --target_ip A_IP --port 50051 \
 *          --client_channels 4 --client_channel_concurrent 2 --duration 20
 * --warmup 2s over RDMA, the same commands with the shim in front on both
 * hosts: A: LD_PRELOAD=/path/liberdma_shim.so ERDMA_SHIM=require
 * build/bench/grpc_raw --job_type server ... B:
 * LD_PRELOAD=/path/liberdma_shim.so ERDMA_SHIM=require build/bench/grpc_raw
 * --job_type client ... (require: a connection that cannot use RDMA fails
 * instead of falling back to TCP; `rdma res show qp` on either host lists the
 * RC QPs meanwhile.) Stop the server with Ctrl-C / SIGTERM: it prints its CPU
 * time and counts.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <math.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include <grpc/byte_buffer.h>
#include <grpc/byte_buffer_reader.h>
#include <grpc/grpc.h>
#include <grpc/grpc_security.h>
#include <grpc/slice.h>
#include <grpc/support/time.h>

#define METHOD "/grpc_raw.Bench/Send"
#define MD_FNV "x-grpc-raw-fnv1a"
#define MD_RESP "x-grpc-raw-resp"
#define SRV_SLOTS_PER_CQ 16 /* calls requested ahead on each server CQ */

struct opts {
	bool server;
	const char *ip;
	int port;
	int server_threads;
	double max_seconds;
	uint64_t msg_size;
	uint64_t resp_size;
	uint64_t total;
	double duration;
	uint64_t warmup_n;
	double warmup_s;
	int channels;
	int concurrent;
	bool verify;
	double interval;
	uint64_t bad_checksum;
	const char *hold;
};

static struct opts O = {
    .port = 50051,
    .server_threads = 2,
    .msg_size = 100ull << 20,
    .channels = 1,
    .concurrent = 1,
    .interval = 2.0,
};

/* ---- helpers --------------------------------------------------------------
 */

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

static void cpu_times(double *user, double *sys)
{
	struct rusage ru;

	getrusage(RUSAGE_SELF, &ru);
	*user = ru.ru_utime.tv_sec + ru.ru_utime.tv_usec / 1e6;
	*sys = ru.ru_stime.tv_sec + ru.ru_stime.tv_usec / 1e6;
}

#define FNV_OFFSET 0xcbf29ce484222325ull
#define FNV_PRIME 0x100000001b3ull

static uint64_t fnv1a(uint64_t h, const uint8_t *p, size_t n)
{
	for (size_t i = 0; i < n; i++)
		h = (h ^ p[i]) * FNV_PRIME;
	return h;
}

/* "100M" -> 104857600; K/M/G are binary, "KiB"/"KB" accepted too. */
static int parse_size(const char *s, uint64_t *out)
{
	char *end;
	unsigned long long v;
	int shift = 0;

	errno = 0;
	v = strtoull(s, &end, 10);
	if (errno || end == s || *s == '-')
		return -EINVAL;
	switch (*end) {
	case 'k':
	case 'K':
		shift = 10;
		end++;
		break;
	case 'm':
	case 'M':
		shift = 20;
		end++;
		break;
	case 'g':
	case 'G':
		shift = 30;
		end++;
		break;
	}
	if (shift && (!strcmp(end, "iB") || !strcmp(end, "B")))
		end += strlen(end);
	if (*end || (shift && v > (UINT64_MAX >> shift)))
		return -EINVAL;
	*out = (uint64_t)v << shift;
	return 0;
}

static int parse_num(const char *s, double *out)
{
	char *end;

	errno = 0;
	*out = strtod(s, &end);
	return (errno || end == s || *end || *out < 0 || !isfinite(*out))
		   ? -EINVAL
		   : 0;
}

static int parse_int(const char *s, int lo, int hi, int *out)
{
	char *end;
	long v;

	errno = 0;
	v = strtol(s, &end, 10);
	if (errno || end == s || *end || v < lo || v > hi)
		return -EINVAL;
	*out = (int)v;
	return 0;
}

/* "--warmup 10" = 10 RPCs, "--warmup 2s" = 2 seconds. */
static int parse_warmup(const char *s)
{
	size_t n = strlen(s);
	char buf[64];

	if (n && n < sizeof(buf) && s[n - 1] == 's') {
		memcpy(buf, s, n - 1);
		buf[n - 1] = 0;
		return parse_num(buf, &O.warmup_s);
	}
	return parse_size(s, &O.warmup_n);
}

static void usage(void)
{
	fprintf(
	    stderr,
	    "usage: grpc_raw --job_type server|client [--target_ip IP] [--port "
	    "N]\n"
	    "  [--server_threads N] [--max_seconds S] [--message_size SIZE] "
	    "[--response_size SIZE]\n"
	    "  [--total_message N | --duration S] [--warmup N|Ns] "
	    "[--client_channels N]\n"
	    "  [--client_channel_concurrent N] [--verify] [--interval S]\n"
	    "  [--bad_checksum N] [--hold FILE]\n"
	    "  (see the comment at the top of bench/grpc_raw/grpc_raw.c)\n");
	exit(2);
}

static int parse_opts(int argc, char **argv)
{
	static const struct option lo[] = {
	    {"job_type", required_argument, 0, 'j'},
	    {"target_ip", required_argument, 0, 'i'},
	    {"port", required_argument, 0, 'p'},
	    {"server_threads", required_argument, 0, 't'},
	    {"max_seconds", required_argument, 0, 'x'},
	    {"message_size", required_argument, 0, 'm'},
	    {"response_size", required_argument, 0, 'r'},
	    {"total_message", required_argument, 0, 'n'},
	    {"duration", required_argument, 0, 'd'},
	    {"warmup", required_argument, 0, 'w'},
	    {"client_channels", required_argument, 0, 'c'},
	    {"client_channel_concurrent", required_argument, 0, 'k'},
	    {"verify", no_argument, 0, 'v'},
	    {"interval", required_argument, 0, 'I'},
	    {"bad_checksum", required_argument, 0, 'B'},
	    {"hold", required_argument, 0, 'H'},
	    {"help", no_argument, 0, 'h'},
	    {0, 0, 0, 0},
	};
	int c, idx = 0, err = 0, job = -1;
	bool have_total = false, have_dur = false;

	while ((c = getopt_long(argc, argv, "", lo, &idx)) != -1) {
		switch (c) {
		case 'j':
			job = !strcmp(optarg, "server")	  ? 1
			      : !strcmp(optarg, "client") ? 0
							  : -1;
			err = job < 0 ? -EINVAL : 0;
			break;
		case 'i':
			O.ip = optarg;
			break;
		case 'p':
			err = parse_int(optarg, 0, 65535, &O.port);
			break;
		case 't':
			err = parse_int(optarg, 1, 256, &O.server_threads);
			break;
		case 'x':
			err = parse_num(optarg, &O.max_seconds);
			break;
		case 'm':
			err = parse_size(optarg, &O.msg_size);
			break;
		case 'r':
			err = parse_size(optarg, &O.resp_size);
			break;
		case 'n':
			err = parse_size(optarg, &O.total);
			have_total = true;
			break;
		case 'd':
			err = parse_num(optarg, &O.duration);
			have_dur = true;
			break;
		case 'w':
			err = parse_warmup(optarg);
			break;
		case 'c':
			err = parse_int(optarg, 1, 1024, &O.channels);
			break;
		case 'k':
			err = parse_int(optarg, 1, 4096, &O.concurrent);
			break;
		case 'v':
			O.verify = true;
			break;
		case 'I':
			err = parse_num(optarg, &O.interval);
			break;
		case 'B':
			err = parse_size(optarg, &O.bad_checksum);
			break;
		case 'H':
			O.hold = optarg;
			break;
		default:
			usage();
		}
		if (err) {
			fprintf(stderr, "grpc_raw: bad value for --%s: %s\n",
				lo[idx].name, optarg);
			usage();
		}
	}
	if (optind < argc || job < 0 || (have_total && have_dur) ||
	    O.interval <= 0)
		usage();
	/* gRPC's message length limit is an int: stay below 2 GiB. */
	if (O.msg_size > INT32_MAX - 4096 || O.resp_size > INT32_MAX - 4096) {
		fprintf(stderr, "grpc_raw: sizes must be below 2 GiB\n");
		exit(2);
	}
	O.server = job == 1;
	if (!O.ip)
		O.ip = O.server ? "0.0.0.0" : "127.0.0.1";
	if (!have_total && !have_dur)
		O.duration = 10;
	if (have_total && !O.total)
		usage();
	return 0;
}

/* Both ends lift gRPC's 4 MiB default receive limit (and any send limit). */
static grpc_channel_args *bench_args(int channel_id)
{
	static grpc_arg a[4];
	static grpc_channel_args args;
	int n = 0;

	a[n].type = GRPC_ARG_INTEGER;
	a[n].key = (char *)GRPC_ARG_MAX_RECEIVE_MESSAGE_LENGTH;
	a[n++].value.integer = -1;
	a[n].type = GRPC_ARG_INTEGER;
	a[n].key = (char *)GRPC_ARG_MAX_SEND_MESSAGE_LENGTH;
	a[n++].value.integer = -1;
	if (channel_id >= 0) {
		/* Without these, channels with equal args share one subchannel:
		 * one TCP connection for all --client_channels. */
		a[n].type = GRPC_ARG_INTEGER;
		a[n].key = (char *)GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL;
		a[n++].value.integer = 1;
		a[n].type = GRPC_ARG_INTEGER;
		a[n].key = (char *)"grpc_raw.channel_id";
		a[n++].value.integer = channel_id;
	}
	args.num_args = n;
	args.args = a;
	return &args;
}

/*
 * SIGINT/SIGTERM are blocked in every thread (before grpc_init starts its
 * own) and taken synchronously by the main thread with sigtimedwait, which
 * doubles as its tick: no handler runs inside gRPC.
 */
static sigset_t stop_sigs;

static void block_stop_signals(void)
{
	sigemptyset(&stop_sigs);
	sigaddset(&stop_sigs, SIGINT);
	sigaddset(&stop_sigs, SIGTERM);
	pthread_sigmask(SIG_BLOCK, &stop_sigs, NULL);
}

/* Waits up to ms for a stop signal; returns the signal or 0. */
static int tick(int ms)
{
	struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
	int sig = sigtimedwait(&stop_sigs, NULL, &ts);

	return sig > 0 ? sig : 0;
}

/* Payload of n bytes: splitmix64 stream (so a checksum means something). */
static grpc_slice make_payload(size_t n, uint64_t seed)
{
	grpc_slice s = grpc_slice_malloc(n);
	uint8_t *p = GRPC_SLICE_START_PTR(s);
	uint64_t x = seed;

	for (size_t i = 0; i < n; i += 8) {
		uint64_t z = (x += 0x9e3779b97f4a7c15ull);

		z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
		z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
		z ^= z >> 31;
		memcpy(p + i, &z, n - i < 8 ? n - i : 8);
	}
	return s;
}

/* ---- server ---------------------------------------------------------------
 */

enum { SC_REQUESTED, SC_ANSWERING };

struct srv_call {
	int state;
	grpc_completion_queue *cq;
	grpc_call *call;
	gpr_timespec deadline;
	grpc_metadata_array md;
	grpc_byte_buffer *payload;
	grpc_byte_buffer *resp;
	grpc_slice details;
	int cancelled;
};

static struct {
	grpc_server *server;
	void *method;
	grpc_completion_queue **cqs;
	pthread_t *th;
	grpc_slice resp;
	atomic_bool stopping;
	atomic_bool shutdown_done;
	atomic_uint_fast64_t msgs, bytes, mismatches, errors;
} S;

static char srv_shutdown_tag;

static void srv_request(struct srv_call *c)
{
	grpc_completion_queue *cq = c->cq;
	grpc_call_error e;

	memset(c, 0, sizeof(*c));
	c->cq = cq;
	grpc_metadata_array_init(&c->md);
	c->state = SC_REQUESTED;
	e = grpc_server_request_registered_call(S.server, S.method, &c->call,
						&c->deadline, &c->md,
						&c->payload, c->cq, c->cq, c);
	if (e != GRPC_CALL_OK) {
		fprintf(stderr,
			"grpc_raw server: request_registered_call: %d\n", e);
		grpc_metadata_array_destroy(&c->md);
		free(c);
	}
}

/* A number the client sent in metadata KEY (hex): true and *v set. */
static bool srv_md_num(const grpc_metadata_array *md, const char *key,
		       uint64_t *v)
{
	for (size_t i = 0; i < md->count; i++) {
		grpc_slice val = md->metadata[i].value;
		char buf[24];
		size_t n = GRPC_SLICE_LENGTH(val);

		if (grpc_slice_str_cmp(md->metadata[i].key, key) ||
		    n >= sizeof(buf))
			continue;
		memcpy(buf, GRPC_SLICE_START_PTR(val), n);
		buf[n] = 0;
		*v = strtoull(buf, NULL, 16);
		return true;
	}
	return false;
}

/*
 * The response: a reference to one shared slice of the size asked for
 * (rebuilt only when a client asks for another size).
 */
static grpc_byte_buffer *srv_response(const grpc_metadata_array *md)
{
	static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
	uint64_t n = 0;
	grpc_byte_buffer *bb;

	if (!srv_md_num(md, MD_RESP, &n) || !n || n > INT32_MAX - 4096)
		return grpc_raw_byte_buffer_create(NULL, 0);
	pthread_mutex_lock(&lock);
	if (GRPC_SLICE_LENGTH(S.resp) != n) {
		grpc_slice_unref(S.resp);
		S.resp = make_payload(n, 2);
	}
	bb = grpc_raw_byte_buffer_create(&S.resp, 1);
	pthread_mutex_unlock(&lock);
	return bb;
}

/* Hashes the payload slice by slice, in place. */
static uint64_t srv_payload_fnv(grpc_byte_buffer *bb)
{
	grpc_byte_buffer_reader r;
	grpc_slice s;
	uint64_t h = FNV_OFFSET;

	if (!bb || !grpc_byte_buffer_reader_init(&r, bb))
		return h;
	while (grpc_byte_buffer_reader_next(&r, &s)) {
		h = fnv1a(h, GRPC_SLICE_START_PTR(s), GRPC_SLICE_LENGTH(s));
		grpc_slice_unref(s);
	}
	grpc_byte_buffer_reader_destroy(&r);
	return h;
}

static void srv_answer(struct srv_call *c)
{
	grpc_op ops[4];
	grpc_status_code st = GRPC_STATUS_OK;
	uint64_t want,
	    len = c->payload ? grpc_byte_buffer_length(c->payload) : 0;
	grpc_call_error e;

	if (srv_md_num(&c->md, MD_FNV, &want) &&
	    srv_payload_fnv(c->payload) != want) {
		st = GRPC_STATUS_DATA_LOSS;
		atomic_fetch_add(&S.mismatches, 1);
	}
	atomic_fetch_add(&S.msgs, 1);
	atomic_fetch_add(&S.bytes, len);
	c->details = grpc_slice_from_static_string(
	    st ? "payload checksum mismatch" : "");
	c->resp = srv_response(&c->md);
	memset(ops, 0, sizeof(ops));
	ops[0].op = GRPC_OP_SEND_INITIAL_METADATA;
	ops[1].op = GRPC_OP_SEND_MESSAGE;
	ops[1].data.send_message.send_message = c->resp;
	ops[2].op = GRPC_OP_SEND_STATUS_FROM_SERVER;
	ops[2].data.send_status_from_server.status = st;
	ops[2].data.send_status_from_server.status_details = &c->details;
	ops[3].op = GRPC_OP_RECV_CLOSE_ON_SERVER;
	ops[3].data.recv_close_on_server.cancelled = &c->cancelled;
	c->state = SC_ANSWERING;
	e = grpc_call_start_batch(c->call, ops, 4, c, NULL);
	if (e != GRPC_CALL_OK) {
		fprintf(stderr, "grpc_raw server: start_batch: %d\n", e);
		atomic_fetch_add(&S.errors, 1);
	}
}

static void srv_release(struct srv_call *c)
{
	if (c->payload)
		grpc_byte_buffer_destroy(c->payload);
	if (c->resp)
		grpc_byte_buffer_destroy(c->resp);
	grpc_metadata_array_destroy(&c->md);
	if (c->call)
		grpc_call_unref(c->call);
}

static void srv_event(struct srv_call *c, int ok)
{
	if (c->state == SC_REQUESTED && ok) {
		srv_answer(c);
		return;
	}
	/* A failed request (server shutting down) or an answered call. */
	srv_release(c);
	if (ok && !atomic_load(&S.stopping))
		srv_request(c);
	else
		free(c);
}

static void *srv_thread(void *arg)
{
	grpc_completion_queue *cq = arg;

	for (;;) {
		grpc_event ev = grpc_completion_queue_next(
		    cq, gpr_inf_future(GPR_CLOCK_MONOTONIC), NULL);

		if (ev.type == GRPC_QUEUE_SHUTDOWN)
			return NULL;
		if (ev.type != GRPC_OP_COMPLETE)
			continue;
		if (ev.tag == &srv_shutdown_tag)
			atomic_store(&S.shutdown_done, true);
		else
			srv_event(ev.tag, ev.success);
	}
}

static void srv_print_json(double secs)
{
	double u, s;

	cpu_times(&u, &s);
	printf("{\"bench\":\"grpc_raw\",\"side\":\"server\",\"threads\":%d,"
	       "\"messages\":%" PRIu64 ",\"bytes\":%" PRIu64
	       ",\"mismatches\":%" PRIu64 ",\"errors\":%" PRIu64
	       ",\"seconds\":%.3f,\"cpu_user_s\":%.3f,\"cpu_sys_s\":%.3f}\n",
	       O.server_threads, (uint64_t)atomic_load(&S.msgs),
	       (uint64_t)atomic_load(&S.bytes),
	       (uint64_t)atomic_load(&S.mismatches),
	       (uint64_t)atomic_load(&S.errors), secs, u, s);
	fflush(stdout);
}

static int srv_start(void)
{
	grpc_server_credentials *cr = grpc_insecure_server_credentials_create();
	char addr[300];
	int port;

	S.server = grpc_server_create(bench_args(-1), NULL);
	S.method = grpc_server_register_method(
	    S.server, METHOD, NULL, GRPC_SRM_PAYLOAD_READ_INITIAL_BYTE_BUFFER,
	    0);
	S.cqs = calloc(O.server_threads, sizeof(*S.cqs));
	S.th = calloc(O.server_threads, sizeof(*S.th));
	for (int i = 0; i < O.server_threads; i++) {
		S.cqs[i] = grpc_completion_queue_create_for_next(NULL);
		grpc_server_register_completion_queue(S.server, S.cqs[i], NULL);
	}
	snprintf(addr, sizeof(addr), strchr(O.ip, ':') ? "[%s]:%d" : "%s:%d",
		 O.ip, O.port);
	port = grpc_server_add_http2_port(S.server, addr, cr);
	grpc_server_credentials_release(cr);
	if (port <= 0) {
		fprintf(stderr, "grpc_raw server: cannot listen on %s\n", addr);
		return -EADDRINUSE;
	}
	grpc_server_start(S.server);
	S.resp = grpc_empty_slice();
	for (int i = 0; i < O.server_threads; i++) {
		for (int j = 0; j < SRV_SLOTS_PER_CQ; j++) {
			struct srv_call *c = calloc(1, sizeof(*c));

			c->cq = S.cqs[i];
			srv_request(c);
		}
		pthread_create(&S.th[i], NULL, srv_thread, S.cqs[i]);
	}
	return port;
}

/* Shutdown in gRPC's order: server (notify, cancel calls), then the CQs. */
static void srv_stop(void)
{
	double t = now_s();

	atomic_store(&S.stopping, true);
	grpc_server_shutdown_and_notify(S.server, S.cqs[0], &srv_shutdown_tag);
	grpc_server_cancel_all_calls(S.server);
	while (!atomic_load(&S.shutdown_done) && now_s() - t < 30)
		tick(20);
	if (!atomic_load(&S.shutdown_done)) {
		fprintf(stderr,
			"grpc_raw server: shutdown did not complete in 30 s\n");
		return; /* leak rather than destroy a server still in use */
	}
	grpc_server_destroy(S.server);
	for (int i = 0; i < O.server_threads; i++)
		grpc_completion_queue_shutdown(S.cqs[i]);
	for (int i = 0; i < O.server_threads; i++) {
		pthread_join(S.th[i], NULL);
		grpc_completion_queue_destroy(S.cqs[i]);
	}
	grpc_slice_unref(S.resp);
}

static int run_server(void)
{
	double t0 = now_s(), last = t0;
	uint64_t last_bytes = 0;
	int port = srv_start(), sig = 0;

	if (port < 0)
		return 1;
	printf("ready %d\n", port);
	fflush(stdout);
	while (!sig) {
		double t = now_s();

		if (O.max_seconds > 0 && t - t0 >= O.max_seconds)
			break;
		if (t - last >= O.interval) {
			uint64_t b = atomic_load(&S.bytes);

			printf("progress t=%.1f gbps=%.4f messages=%" PRIu64
			       "\n",
			       t - t0, (b - last_bytes) * 8 / (t - last) / 1e9,
			       (uint64_t)atomic_load(&S.msgs));
			fflush(stdout);
			last = t, last_bytes = b;
		}
		sig = tick(100);
	}
	srv_stop();
	srv_print_json(now_s() - t0);
	return 0;
}

/* ---- client ---------------------------------------------------------------
 */

struct cli_chan {
	grpc_channel *ch;
	void *reg;
	grpc_completion_queue *cq;
	pthread_t th;
};

struct cli_call {
	struct cli_chan *ch;
	grpc_call *call;
	grpc_byte_buffer *send;
	grpc_byte_buffer *recv;
	grpc_metadata_array imd, tmd;
	grpc_status_code status;
	grpc_slice details;
	grpc_metadata md[2];
	double t0;
	bool warm;
};

static struct {
	struct cli_chan *chans;
	grpc_slice payload;
	char fnv_hex[24], bad_hex[24], resp_hex[24];
	atomic_uint_fast64_t bad_left;
	pthread_mutex_t lock;
	double t_start, meas_start, meas_end;
	double cpu0; /* process CPU (user+sys) when the measured RPCs began */
	uint64_t warm_issued, meas_issued, warm_done, meas_ok;
	uint64_t mismatches, errors, inflight;
	double *lat;
	size_t nlat, cap;
	bool finished;
	atomic_uint_fast64_t bytes_all;
} C = {.lock = PTHREAD_MUTEX_INITIALIZER};

enum { CLAIM_NONE = -1, CLAIM_MEAS = 0, CLAIM_WARM = 1 };

/* Next RPC to issue, under C.lock: warm-up, measured, or none left. */
static int cli_claim(double t)
{
	if ((O.warmup_n && C.warm_issued < O.warmup_n) ||
	    (O.warmup_s > 0 && t < C.t_start + O.warmup_s)) {
		C.warm_issued++;
		return CLAIM_WARM;
	}
	if (!C.meas_issued) {
		double u, s;

		cpu_times(&u, &s);
		C.cpu0 = u + s;
		C.meas_start = t;
	}
	if (O.total ? C.meas_issued < O.total : t < C.meas_start + O.duration) {
		C.meas_issued++;
		return CLAIM_MEAS;
	}
	return CLAIM_NONE;
}

/* One of the --bad_checksum RPCs left? (decrements without going below 0) */
static bool take_bad(void)
{
	uint_fast64_t n = atomic_load(&C.bad_left);

	while (n && !atomic_compare_exchange_weak(&C.bad_left, &n, n - 1))
		;
	return n != 0;
}

static int cli_start(struct cli_call *c)
{
	grpc_op ops[6];
	grpc_slice p = grpc_slice_ref(C.payload); /* this call's reference */

	c->call = grpc_channel_create_registered_call(
	    c->ch->ch, NULL, GRPC_PROPAGATE_DEFAULTS, c->ch->cq, c->ch->reg,
	    gpr_inf_future(GPR_CLOCK_REALTIME), NULL);
	c->send = grpc_raw_byte_buffer_create(&p, 1);
	grpc_slice_unref(p); /* the byte buffer holds its own */
	c->recv = NULL;
	grpc_metadata_array_init(&c->imd);
	grpc_metadata_array_init(&c->tmd);
	memset(ops, 0, sizeof(ops));
	ops[0].op = GRPC_OP_SEND_INITIAL_METADATA;
	ops[0].data.send_initial_metadata.metadata = c->md;
	if (O.resp_size) {
		c->md[0].key = grpc_slice_from_static_string(MD_RESP);
		c->md[0].value = grpc_slice_from_static_string(C.resp_hex);
		ops[0].data.send_initial_metadata.count++;
	}
	if (O.verify) {
		grpc_metadata *m =
		    &c->md[ops[0].data.send_initial_metadata.count++];

		m->key = grpc_slice_from_static_string(MD_FNV);
		m->value = grpc_slice_from_static_string(
		    take_bad() ? C.bad_hex : C.fnv_hex);
	}
	ops[1].op = GRPC_OP_SEND_MESSAGE;
	ops[1].data.send_message.send_message = c->send;
	ops[2].op = GRPC_OP_SEND_CLOSE_FROM_CLIENT;
	ops[3].op = GRPC_OP_RECV_INITIAL_METADATA;
	ops[3].data.recv_initial_metadata.recv_initial_metadata = &c->imd;
	ops[4].op = GRPC_OP_RECV_MESSAGE;
	ops[4].data.recv_message.recv_message = &c->recv;
	ops[5].op = GRPC_OP_RECV_STATUS_ON_CLIENT;
	ops[5].data.recv_status_on_client.trailing_metadata = &c->tmd;
	ops[5].data.recv_status_on_client.status = &c->status;
	ops[5].data.recv_status_on_client.status_details = &c->details;
	c->t0 = now_s();
	return grpc_call_start_batch(c->call, ops, 6, c, NULL) == GRPC_CALL_OK
		   ? 0
		   : -EIO;
}

static void cli_release(struct cli_call *c)
{
	grpc_byte_buffer_destroy(c->send);
	if (c->recv)
		grpc_byte_buffer_destroy(c->recv);
	grpc_metadata_array_destroy(&c->imd);
	grpc_metadata_array_destroy(&c->tmd);
	grpc_slice_unref(c->details);
	grpc_call_unref(c->call);
}

static void cli_note_error(struct cli_call *c, int ok, uint64_t rlen)
{
	if (C.errors + C.mismatches > 5)
		return;
	if (c->status == GRPC_STATUS_DATA_LOSS)
		fprintf(stderr, "grpc_raw client: server reports a payload "
				"checksum mismatch\n");
	else
		fprintf(stderr,
			"grpc_raw client: RPC failed: ok %d status %d \"%.*s\" "
			"response %" PRIu64 " bytes\n",
			ok, c->status, (int)GRPC_SLICE_LENGTH(c->details),
			(const char *)GRPC_SLICE_START_PTR(c->details), rlen);
}

/* Counts one finished RPC, under C.lock. */
static void cli_account(struct cli_call *c, int ok, double t)
{
	uint64_t rlen = c->recv ? grpc_byte_buffer_length(c->recv) : UINT64_MAX;
	bool good = ok && c->status == GRPC_STATUS_OK && rlen == O.resp_size;

	if (!good) {
		cli_note_error(c, ok, rlen);
		if (c->status == GRPC_STATUS_DATA_LOSS)
			C.mismatches++;
		else
			C.errors++;
		return;
	}
	atomic_fetch_add(&C.bytes_all, O.msg_size);
	if (c->warm) {
		C.warm_done++;
		return;
	}
	if (C.nlat == C.cap) {
		size_t cap = C.cap ? C.cap * 2 : 4096;
		double *l = realloc(C.lat, cap * sizeof(*l));

		if (!l)
			return;
		C.lat = l, C.cap = cap;
	}
	C.lat[C.nlat++] = (t - c->t0) * 1e6;
	C.meas_ok++;
	C.meas_end = t;
}

static void cli_event(struct cli_call *c, int ok)
{
	double t = now_s();
	int claim;

	pthread_mutex_lock(&C.lock);
	cli_account(c, ok, t);
	cli_release(c);
	claim = cli_claim(t);
	if (claim == CLAIM_NONE && --C.inflight == 0)
		C.finished = true;
	pthread_mutex_unlock(&C.lock);
	if (claim == CLAIM_NONE) {
		free(c);
		return;
	}
	c->warm = claim == CLAIM_WARM;
	if (cli_start(c)) {
		fprintf(stderr, "grpc_raw client: start_batch failed\n");
		exit(1);
	}
}

static void *cli_thread(void *arg)
{
	grpc_completion_queue *cq = arg;

	for (;;) {
		grpc_event ev = grpc_completion_queue_next(
		    cq, gpr_inf_future(GPR_CLOCK_MONOTONIC), NULL);

		if (ev.type == GRPC_QUEUE_SHUTDOWN)
			return NULL;
		if (ev.type == GRPC_OP_COMPLETE)
			cli_event(ev.tag, ev.success);
	}
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return (x > y) - (x < y);
}

/* Nearest-rank percentile of the sorted latencies. */
static double pct(double p)
{
	size_t i;

	if (!C.nlat)
		return NAN;
	i = (size_t)ceil(p / 100 * C.nlat);
	return C.lat[i ? i - 1 : 0];
}

static void json_num(const char *key, double v, const char *fmt)
{
	printf(",\"%s\":", key);
	if (isfinite(v))
		printf(fmt, v);
	else
		printf("null");
}

static int cli_report(void)
{
	double secs = C.meas_ok ? C.meas_end - C.meas_start : NAN, u, s,
	       mean = 0, gbps, gb, win;
	uint64_t bytes = C.meas_ok * O.msg_size;
	bool ok =
	    !C.errors && !C.mismatches && (!O.total || C.meas_ok == O.total);

	cpu_times(&u, &s);
	win = u + s - C.cpu0;
	qsort(C.lat, C.nlat, sizeof(double), cmp_double);
	for (size_t i = 0; i < C.nlat; i++)
		mean += C.lat[i] / C.nlat;
	gbps = secs > 0 ? bytes * 8 / secs / 1e9 : NAN;
	gb = (C.meas_ok * (O.msg_size + O.resp_size)) / 1e9;
	printf("throughput %.4f Gb/s (%" PRIu64 " messages of %" PRIu64
	       " bytes in %.3f s)\n",
	       gbps, C.meas_ok, O.msg_size, secs);
	printf("{\"bench\":\"grpc_raw\",\"side\":\"client\",\"target\":\"%s:%"
	       "d\",\"message_size\":%" PRIu64 ",\"response_size\":%" PRIu64
	       ",\"channels\":%d,\"concurrent\":%d,\"verify\":%s"
	       ",\"warmup_messages\":%" PRIu64 ",\"messages\":%" PRIu64
	       ",\"bytes\":%" PRIu64,
	       O.ip, O.port, O.msg_size, O.resp_size, O.channels, O.concurrent,
	       O.verify ? "true" : "false", C.warm_done, C.meas_ok, bytes);
	json_num("seconds", secs, "%.4f");
	json_num("gbps", gbps, "%.4f");
	json_num("msgs_per_s", secs > 0 ? C.meas_ok / secs : NAN, "%.2f");
	json_num("mean_us", C.nlat ? mean : NAN, "%.1f");
	json_num("p50_us", pct(50), "%.1f");
	json_num("p99_us", pct(99), "%.1f");
	json_num("p999_us", pct(99.9), "%.1f");
	json_num("cpu_user_s", u, "%.3f");
	json_num("cpu_sys_s", s, "%.3f");
	json_num("cpu_window_s", win, "%.3f");
	json_num("cpu_s_per_gb", gb > 0 ? win / gb : NAN, "%.3f");
	printf(",\"mismatches\":%" PRIu64 ",\"errors\":%" PRIu64
	       ",\"ok\":%s}\n",
	       C.mismatches, C.errors, ok ? "true" : "false");
	fflush(stdout);
	return ok ? 0 : 1;
}

static void cli_setup(void)
{
	grpc_channel_credentials *cr = grpc_insecure_credentials_create();
	char target[300];

	C.payload = make_payload(O.msg_size, 1);
	snprintf(C.fnv_hex, sizeof(C.fnv_hex), "%016" PRIx64,
		 O.verify ? fnv1a(FNV_OFFSET, GRPC_SLICE_START_PTR(C.payload),
				  O.msg_size)
			  : 0);
	snprintf(C.bad_hex, sizeof(C.bad_hex), "%016" PRIx64,
		 (uint64_t)strtoull(C.fnv_hex, NULL, 16) ^ 1);
	atomic_store(&C.bad_left, O.bad_checksum);
	snprintf(C.resp_hex, sizeof(C.resp_hex), "%" PRIx64, O.resp_size);
	snprintf(target, sizeof(target),
		 strchr(O.ip, ':') ? "ipv6:[%s]:%d" : "ipv4:%s:%d", O.ip,
		 O.port);
	C.chans = calloc(O.channels, sizeof(*C.chans));
	for (int i = 0; i < O.channels; i++) {
		struct cli_chan *ch = &C.chans[i];

		ch->ch = grpc_channel_create(target, cr, bench_args(i));
		ch->reg =
		    grpc_channel_register_call(ch->ch, METHOD, NULL, NULL);
		ch->cq = grpc_completion_queue_create_for_next(NULL);
		pthread_create(&ch->th, NULL, cli_thread, ch->cq);
	}
	grpc_channel_credentials_release(cr);
}

/* Puts --client_channel_concurrent RPCs in flight on every channel. */
static void cli_kick(void)
{
	for (int i = 0; i < O.channels; i++) {
		for (int j = 0; j < O.concurrent; j++) {
			struct cli_call *c;
			int claim;

			pthread_mutex_lock(&C.lock);
			claim = cli_claim(now_s());
			if (claim != CLAIM_NONE)
				C.inflight++;
			else if (!C.inflight)
				C.finished = true;
			pthread_mutex_unlock(&C.lock);
			if (claim == CLAIM_NONE)
				return;
			c = calloc(1, sizeof(*c));
			c->ch = &C.chans[i];
			c->warm = claim == CLAIM_WARM;
			if (cli_start(c)) {
				fprintf(
				    stderr,
				    "grpc_raw client: start_batch failed\n");
				exit(1);
			}
		}
	}
}

static void cli_teardown(void)
{
	for (int i = 0; i < O.channels; i++)
		grpc_completion_queue_shutdown(C.chans[i].cq);
	for (int i = 0; i < O.channels; i++) {
		pthread_join(C.chans[i].th, NULL);
		grpc_channel_destroy(C.chans[i].ch);
		grpc_completion_queue_destroy(C.chans[i].cq);
	}
	grpc_slice_unref(C.payload);
}

static int run_client(void)
{
	double last, t0;
	uint64_t last_bytes = 0;
	bool done = false;
	int rc;

	cli_setup();
	t0 = last = C.t_start = now_s();
	cli_kick();
	while (!done) {
		double t;

		if (tick(50)) {
			fprintf(stderr, "grpc_raw client: interrupted\n");
			exit(3);
		}
		t = now_s();
		if (O.max_seconds > 0 && t - t0 >= O.max_seconds) {
			fprintf(stderr,
				"grpc_raw client: --max_seconds %.0f reached, "
				"giving up\n",
				O.max_seconds);
			exit(3);
		}
		if (t - last >= O.interval) {
			uint64_t b = atomic_load(&C.bytes_all);

			printf("progress t=%.1f gbps=%.4f\n", t - t0,
			       (b - last_bytes) * 8 / (t - last) / 1e9);
			fflush(stdout);
			last = t, last_bytes = b;
		}
		pthread_mutex_lock(&C.lock);
		done = C.finished;
		pthread_mutex_unlock(&C.lock);
	}
	rc = cli_report();
	if (O.hold) {
		double t = now_s();

		printf("holding\n");
		fflush(stdout);
		while (access(O.hold, F_OK) && now_s() - t < 60 && !tick(50))
			;
	}
	cli_teardown();
	free(C.lat);
	return rc;
}

int main(int argc, char **argv)
{
	int rc;

	parse_opts(argc, argv);
	block_stop_signals();
	grpc_init();
	rc = O.server ? run_server() : run_client();
	grpc_shutdown();
	return rc;
}
