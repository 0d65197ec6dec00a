/* SPDX-License-Identifier: MIT */
/* readiness: poll, ppoll, select and pselect cases. */
#include "readiness.h"

void case_poll(void)
{
	struct pair p;
	int pp[2], bad;
	struct pollfd q[4];
	const char *nm[] = {"pipe", "c", "s", "neg"};
	struct later l;
	char b[128];

	if (mkpair(&p) || pipe2(pp, O_NONBLOCK | O_CLOEXEC))
		return;
	q[0] = (struct pollfd){.fd = pp[0], .events = POLLIN};
	q[1] = (struct pollfd){.fd = p.c, .events = POLLIN | POLLOUT};
	q[2] = (struct pollfd){.fd = p.s, .events = POLLIN | POLLRDHUP};
	q[3] = (struct pollfd){.fd = -1, .events = POLLIN};
	poll_settle(q, 4, 2000, 1, POLLOUT, -1);
	poll_show("poll(0), idle", q, nm, 4, 0);
	ppoll_show("ppoll(0), idle", q, nm, 4, 0, NULL);
	(void)!write(pp[1], "p", 1);
	xsend(p.c, "q");
	poll_settle(q, 4, 2000, 0, POLLIN, 2, POLLIN, -1);
	poll_show("poll(0), pipe and RDMA data", q, nm, 4, 0);
	ppoll_show("ppoll(0), pipe and RDMA data", q, nm, 4, 0, NULL);
	q[1].events = POLLIN | POLLOUT | POLLRDNORM | POLLWRNORM;
	q[2].events = POLLIN | POLLRDNORM | POLLPRI;
	poll_show("poll(0), RDNORM/WRNORM/PRI asked", q, nm, 4, 0);
	q[1].events = POLLIN;
	q[2].events = POLLOUT;
	poll_show("poll(0), directions swapped", q, nm, 4, 0);
	q[1].events = 0;
	q[2].events = 0;
	poll_show("poll(0), events 0", q, nm, 4, 0);
	q[1].events = POLLIN | POLLOUT;
	q[2].events = POLLIN | POLLRDHUP;
	drain_pipe(pp[0]);
	say("s recv -> %s", recv_str(p.s, 64, b, sizeof(b)));
	{
		struct pollfd r2[3] = {{.fd = pp[0], .events = POLLIN},
				       {.fd = p.s, .events = POLLIN},
				       {.fd = guard_fd, .events = POLLIN}};
		const char *n2[] = {"pipe", "s", "guard"};
		int64_t t0 = tl_now_us();
		int n = poll(r2, 3, 150);

		timed_show("poll(150), nothing readable", n, errno, t0, 150);
		t0 = tl_now_us();
		{
			struct timespec ts = {0, 150 * 1000000L};

			n = ppoll(r2, 3, &ts, NULL);
		}
		timed_show("ppoll(150 ms), nothing readable", n, errno, t0,
			   150);
		later_start(&l, p.c, 100, "w");
		guard_start(3000);
		poll_show("poll(-1), peer sends after 100 ms", r2, n2, 3, -1);
		guard_stop("poll(-1)");
		later_join(&l);
		drain(p.s);
		later_start(&l, p.c, 100, "w");
		guard_start(3000);
		ppoll_show("ppoll(NULL), peer sends after 100 ms", r2, n2, 3,
			   -1, NULL);
		guard_stop("ppoll(NULL)");
		later_join(&l);
		drain(p.s);
		later_start(&l, p.c, 100, "w");
		poll_show("poll(3000), peer sends after 100 ms", r2, n2, 3,
			  3000);
		later_join(&l);
		drain(p.s);
		later_start(&l, pp[1], 100, "w");
		guard_start(3000);
		poll_show("poll(-1), pipe written after 100 ms", r2, n2, 3, -1);
		guard_stop("poll(-1)");
		later_join(&l);
		drain_pipe(pp[0]);
	}
	bad = closed_fd();
	{
		struct pollfd r3[2] = {{.fd = bad, .events = POLLIN},
				       {.fd = p.c, .events = POLLOUT}};
		const char *n3[] = {"closed", "c"};

		poll_show("poll(0) with a closed fd", r3, n3, 2, 0);
	}
	say("c shutdown(SHUT_WR) -> %s", res(shutdown(p.c, SHUT_WR)));
	poll_settle(q, 4, 2000, 2, POLLRDHUP, -1);
	poll_show("poll(0), peer shut down writing", q, nm, 4, 0);
	say("s recv -> %s", recv_str(p.s, 64, b, sizeof(b)));
	say("s shutdown(SHUT_WR) -> %s", res(shutdown(p.s, SHUT_WR)));
	q[1].events = POLLIN | POLLOUT | POLLRDHUP;
	poll_settle(q, 4, 2000, 1, POLLHUP, -1);
	poll_show("poll(0), both shut", q, nm, 4, 0);
	close(pp[0]);
	close(pp[1]);
	unpair(&p);
}

/* select and pselect over a pipe and RDMA fds. */
void case_select(void)
{
	struct pair p;
	int pp[2], bad, n;
	struct later l;
	char b[128];

	if (mkpair(&p) || pipe2(pp, O_NONBLOCK | O_CLOEXEC))
		return;
	{
		struct pollfd q = {.fd = p.c, .events = POLLOUT};

		poll_settle(&q, 1, 2000, 0, POLLOUT, -1);
	}
	struct sfd f[3] = {{pp[0], "pipe", true, false},
			   {p.c, "c", true, true},
			   {p.s, "s", true, false}};
	select_show("select(0), idle", f, 3, 0);
	pselect_show("pselect(0), idle", f, 3, 0, NULL);
	(void)!write(pp[1], "p", 1);
	xsend(p.c, "q");
	{
		struct pollfd q = {.fd = p.s, .events = POLLIN};

		poll_settle(&q, 1, 2000, 0, POLLIN, -1);
	}
	select_show("select(0), pipe and RDMA data", f, 3, 0);
	pselect_show("pselect(0), pipe and RDMA data", f, 3, 0, NULL);
	drain_pipe(pp[0]);
	say("s recv -> %s", recv_str(p.s, 64, b, sizeof(b)));

	struct sfd g[3] = {{pp[0], "pipe", true, false},
			   {p.s, "s", true, false},
			   {guard_fd, "guard", true, false}};
	{
		fd_set rs, ws;
		int maxfd;
		struct timeval tv = {0, 150000};
		struct timespec ts = {0, 150 * 1000000L};
		int64_t t0 = tl_now_us();

		sel_build(g, 3, &rs, &ws, &maxfd);
		n = select(maxfd + 1, &rs, &ws, NULL, &tv);
		timed_show("select(150 ms), nothing readable", n, errno, t0,
			   150);
		say("select: timeval after the timeout -> %s",
		    tv.tv_sec == 0 && tv.tv_usec == 0 ? "zero" : "not zero");
		sel_build(g, 3, &rs, &ws, &maxfd);
		t0 = tl_now_us();
		n = pselect(maxfd + 1, &rs, &ws, NULL, &ts, NULL);
		timed_show("pselect(150 ms), nothing readable", n, errno, t0,
			   150);
		say("pselect: timespec after the timeout -> %s",
		    ts.tv_sec == 0 && ts.tv_nsec == 150 * 1000000L ? "unchanged"
								   : "changed");

		/* Linux select() writes back the time not slept */
		sel_build(g, 3, &rs, &ws, &maxfd);
		tv = (struct timeval){3, 0};
		later_start(&l, p.c, 100, "w");
		n = select(maxfd + 1, &rs, &ws, NULL, &tv);
		sel_print("select(3 s), peer sends after 100 ms", n, errno, g,
			  3, &rs, &ws, false, "");
		later_join(&l);
		say("select: timeval afterwards -> %s",
		    tv.tv_sec < 3 && (tv.tv_sec > 0 || tv.tv_usec > 0)
			? "time left"
		    : tv.tv_sec == 3 && tv.tv_usec == 0 ? "unchanged"
							: "other");
		drain(p.s);
	}
	later_start(&l, p.c, 100, "w");
	guard_start(3000);
	select_show("select(NULL), peer sends after 100 ms", g, 3, -1);
	guard_stop("select(NULL)");
	later_join(&l);
	drain(p.s);
	later_start(&l, p.c, 100, "w");
	guard_start(3000);
	pselect_show("pselect(NULL), peer sends after 100 ms", g, 3, -1, NULL);
	guard_stop("pselect(NULL)");
	later_join(&l);
	drain(p.s);
	later_start(&l, pp[1], 100, "w");
	guard_start(3000);
	select_show("select(NULL), pipe written after 100 ms", g, 3, -1);
	guard_stop("select(NULL)");
	later_join(&l);
	drain_pipe(pp[0]);
	bad = closed_fd();
	{
		struct sfd h[2] = {{bad, "closed", true, false},
				   {p.c, "c", false, true}};

		select_show("select(0) with a closed fd", h, 2, 0);
	}
	say("c shutdown(SHUT_WR) -> %s", res(shutdown(p.c, SHUT_WR)));
	{
		struct pollfd q = {.fd = p.s, .events = POLLIN};

		poll_settle(&q, 1, 2000, 0, POLLIN, -1);
	}
	select_show("select(0), peer shut down writing", f, 3, 0);
	say("s shutdown(SHUT_WR) -> %s", res(shutdown(p.s, SHUT_WR)));
	{
		struct pollfd q = {.fd = p.c, .events = POLLIN};

		poll_settle(&q, 1, 2000, 0, POLLIN, -1);
	}
	select_show("select(0), both shut", f, 3, 0);
	close(pp[0]);
	close(pp[1]);
	unpair(&p);
}

/* Another thread changes the set while one waits in epoll_wait(-1). */
