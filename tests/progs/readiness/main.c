/* SPDX-License-Identifier: MIT */
/*
 * readiness: what epoll, poll and select report on TCP sockets, printed as
 * a transcript.  Plain socket API only: run it over kernel TCP and under the
 * shim (LD_PRELOAD, ERDMA_SHIM=require) and the transcripts must be equal.
 *
 *   readiness [--hold FILE] ADDR [CASE...]
 *
 * One process plays both ends: it listens on ADDR (port 0) and connects to
 * itself, so under the shim both ends of every connection are rsockets.
 * Each case prints lines "CASE: what -> result"; nothing in them depends on
 * timing, fd numbers or ports.  A line starting with "FIGURE:" (the
 * stress run's duration) is not part of the transcript; measurements of
 * wake-up latency and idle CPU are bench/wakeup's.
 * A TCP arrival that must stay on TCP (case listen) comes from a socket made
 * with raw system calls, which no preloaded library sees.
 *
 * CASE defaults to every case but "refused", which connects to a port
 * without any listener and so must run with fallback allowed
 * (ERDMA_SHIM=auto).  --hold FILE: once the stress case's 64 connections
 * are verified, print "holding" on stderr and wait (<= 60 s) until FILE
 * exists, so the caller can count the process's queue pairs.
 *
 * Every wait is bounded: blocking waits that the kernel would end by itself
 * get a rescue (an eventfd in the same set written after a few seconds, so a
 * missing wake-up shows in the transcript instead of hanging), and a
 * watchdog ends the process after 75 s.
 *
 * Files: main.c (this: the case list), common.c (helpers every case uses,
 * declared in readiness.h), epoll.c, poll.c (poll/ppoll/select/pselect),
 * lifecycle.c (a connection's life under every API: registration before
 * connect, close while registered, listeners, connects), stress.c.
 */
#include "readiness.h"

struct sockaddr_in laddr; /* the listener, port filled in */
struct in_addr bind_ip;
int lfd = -1;
const char *cur = "main";
const char *hold_file;

/* ---- main ------------------------------------------------------------- */

static const struct {
	const char *name;
	void (*fn)(void);
	bool dflt;
} cases[] = {
    {"mixed", case_mixed, true},
    {"hup", case_hup, true},
    {"err", case_err, true},
    {"et", case_et, true},
    {"et-count", case_et_count, true},
    {"et-out", case_et_out, true},
    {"oneshot", case_oneshot, true},
    {"data", case_data, true},
    {"fair", case_fair, true},
    {"taken", case_taken, true},
    {"ended", case_ended, true},
    {"shut", case_shut, true},
    {"ctl", case_ctl, true},
    {"timeout", case_timeout, true},
    {"eintr", case_eintr, true},
    {"two-sets", case_two_sets, true},
    {"pre-connect", case_pre_connect, true},
    {"closed", case_closed, true},
    {"epfd-poll", case_epfd_poll, true},
    {"listen", case_listen, true},
    {"nb-connect", case_nb_connect, true},
    {"refused", case_refused, false},
    {"poll", case_poll, true},
    {"select", case_select, true},
    {"threads", case_threads, true},
    {"stress", case_stress, true},
    {"idlecpu", case_idlecpu, true},
};

static void *watchdog(void *arg)
{
	(void)arg;
	tl_sleep_ms(75 * 1000);
	printf("%s: WATCHDOG: still running after 75 s\n", cur);
	fflush(stdout);
	_exit(3);
}

static void usage(void)
{
	fprintf(stderr,
		"usage: readiness [--hold FILE] ADDR [CASE...]\ncases:");
	for (size_t i = 0; i < ARRAY_SIZE(cases); i++)
		fprintf(stderr, " %s%s", cases[i].name,
			cases[i].dflt ? "" : "(*)");
	fprintf(stderr, "\n(*) only when named\n");
	exit(2);
}

static void run_case(size_t i)
{
	cur = cases[i].name;
	cases[i].fn();
	cur = "main";
}

int main(int argc, char **argv)
{
	int i = 1, one = 1;
	socklen_t len = sizeof(laddr);

	if (i + 1 < argc && !strcmp(argv[i], "--hold")) {
		hold_file = argv[i + 1];
		i += 2;
	}
	if (i >= argc || inet_pton(AF_INET, argv[i], &bind_ip) != 1)
		usage();
	i++;
	signal(SIGPIPE, SIG_IGN);
	spawn(watchdog, NULL);
	guard_fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);

	lfd = socket(AF_INET, SOCK_STREAM, 0);
	laddr.sin_family = AF_INET;
	laddr.sin_addr = bind_ip;
	setsockopt(lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	if (lfd < 0 ||
	    bind(lfd, (struct sockaddr *)&laddr, sizeof(laddr)) < 0 ||
	    listen(lfd, 128) < 0 ||
	    getsockname(lfd, (struct sockaddr *)&laddr, &len) < 0) {
		printf("main: listener: %s\n", tl_en(errno));
		return 2;
	}
	if (i == argc) {
		for (size_t k = 0; k < ARRAY_SIZE(cases); k++)
			if (cases[k].dflt)
				run_case(k);
	} else {
		for (; i < argc; i++) {
			size_t k;

			for (k = 0; k < ARRAY_SIZE(cases); k++)
				if (!strcmp(argv[i], cases[k].name))
					break;
			if (k == ARRAY_SIZE(cases))
				usage();
			run_case(k);
		}
	}
	close(lfd);
	printf("main: done\n");
	fflush(stdout);
	return 0;
}
