/* SPDX-License-Identifier: MIT */
/* readiness: epoll cases (levels, edges, one-shot, data, fairness, ctl,
 * timeouts, signals, two sets, threads). */
#include "readiness.h"

void case_mixed(void)
{
	enum { EFD, C, S };
	struct pair p;
	int ep = ep_new(), efd = new_efd();
	char b[128];

	if (mkpair(&p))
		return;
	ep_add(ep, efd, EPOLLIN, EFD, "efd");
	ep_add(ep, p.c, EPOLLIN | EPOLLOUT, C, "c");
	ep_add(ep, p.s, EPOLLIN | EPOLLOUT | EPOLLRDNORM | EPOLLWRNORM, S, "s");
	ep_settle(ep, 2000, C, EPOLLOUT, S, EPOLLOUT, -1);
	ep_show("idle connection", ep, 0);
	kick(efd);
	ep_settle(ep, 2000, EFD, EPOLLIN, -1);
	ep_show("eventfd written", ep, 0);
	unkick(efd);
	ep_show("eventfd read", ep, 0);
	xsend(p.c, "hello");
	ep_settle(ep, 2000, S, EPOLLIN, -1);
	ep_show("c sent 5 bytes", ep, 0);
	ep_show("again (level-triggered)", ep, 0);
	say("s recv -> %s", recv_str(p.s, 64, b, sizeof(b)));
	ep_show("s read them", ep, 0);
	xsend(p.s, "world");
	kick(efd);
	ep_settle(ep, 2000, C, EPOLLIN, EFD, EPOLLIN, -1);
	ep_show("s sent, eventfd written", ep, 0);
	say("c recv -> %s", recv_str(p.c, 64, b, sizeof(b)));
	unkick(efd);
	ep_show("all consumed", ep, 0);
	close(ep);
	close(efd);
	unpair(&p);
}

/* EPOLLRDHUP / EPOLLHUP: peer shutdown(SHUT_WR), both shut, peer close. */
void case_hup(void)
{
	enum { C, S };
	struct pair p;
	int ep = ep_new();
	char b[128];
	const uint32_t ev = EPOLLIN | EPOLLOUT | EPOLLRDHUP;

	if (mkpair(&p))
		return;
	ep_add(ep, p.c, ev, C, "c");
	ep_add(ep, p.s, ev, S, "s");
	ep_settle(ep, 2000, C, EPOLLOUT, S, EPOLLOUT, -1);
	ep_show("connected", ep, 0);
	say("s shutdown(SHUT_WR) -> %s", res(shutdown(p.s, SHUT_WR)));
	ep_settle(ep, 2000, C, EPOLLRDHUP, -1);
	ep_show("after peer SHUT_WR", ep, 0);
	say("c recv -> %s", recv_str(p.c, 64, b, sizeof(b)));
	ep_show("after reading EOF (level-triggered)", ep, 0);
	say("s send after its own SHUT_WR -> %s",
	    res(send(p.s, "x", 1, MSG_NOSIGNAL)));
	xsend(p.c, "late");
	ep_settle(ep, 2000, S, EPOLLIN, -1);
	ep_show("c still sends to the half-closed peer", ep, 0);
	say("s recv -> %s", recv_str(p.s, 64, b, sizeof(b)));
	say("c shutdown(SHUT_WR) -> %s", res(shutdown(p.c, SHUT_WR)));
	ep_settle(ep, 2000, C, EPOLLHUP, S, EPOLLRDHUP, -1);
	ep_show("both directions shut", ep, 0);
	say("s recv -> %s", recv_str(p.s, 64, b, sizeof(b)));
	close(ep);
	unpair(&p);

	/* the peer closes: FIN only, the socket is still writable */
	if (mkpair(&p))
		return;
	ep = ep_new();
	ep_add(ep, p.c, ev, C, "c");
	ep_settle(ep, 2000, C, EPOLLOUT, -1);
	close(p.s);
	p.s = -1;
	ep_settle(ep, 2000, C, EPOLLRDHUP, -1);
	ep_show("after peer close()", ep, 0);
	say("c recv -> %s", recv_str(p.c, 64, b, sizeof(b)));
	/* events 0: EPOLLHUP/EPOLLERR are reported anyway, nothing else */
	ep_ctl(ep, EPOLL_CTL_MOD, p.c, 0, C, "c");
	ep_show("registered with events 0", ep, 0);
	close(ep);
	unpair(&p);
}

/* EPOLLERR: a write to a closed peer draws a reset; close() with unread
 * data resets the connection. */
void case_err(void)
{
	enum { C };
	struct pair p;
	int ep;
	char b[128];
	const uint32_t ev = EPOLLIN | EPOLLOUT | EPOLLRDHUP;

	if (mkpair(&p))
		return;
	ep = ep_new();
	ep_add(ep, p.c, ev, C, "c");
	close(p.s);
	p.s = -1;
	ep_settle(ep, 2000, C, EPOLLRDHUP, -1);
	say("c recv -> %s", recv_str(p.c, 64, b, sizeof(b)));
	say("c send 1 byte to the closed peer -> %s",
	    res(send(p.c, "x", 1, MSG_NOSIGNAL)));
	ep_settle(ep, 2000, C, EPOLLERR, -1);
	ep_show("after the peer's reset", ep, 0);
	say("SO_ERROR -> %s", so_error(p.c));
	say("SO_ERROR again -> %s", so_error(p.c));
	say("c send again -> %s", res(send(p.c, "x", 1, MSG_NOSIGNAL)));
	close(ep);
	unpair(&p);

	if (mkpair(&p))
		return;
	ep = ep_new();
	ep_add(ep, p.c, ev, C, "c");
	xsend(p.c, "unread");
	{
		struct pollfd q = {.fd = p.s, .events = POLLIN};
		const char *nm[] = {"s"};

		poll_settle(&q, 1, 2000, 0, POLLIN, -1);
		poll_show("s has unread data", &q, nm, 1, 0);
	}
	close(p.s); /* with unread data: a reset */
	p.s = -1;
	ep_settle(ep, 2000, C, EPOLLERR, -1);
	ep_show("peer closed with unread data", ep, 0);
	say("c recv -> %s", recv_str(p.c, 64, b, sizeof(b)));
	say("SO_ERROR -> %s", so_error(p.c));
	say("c recv again -> %s", recv_str(p.c, 64, b, sizeof(b)));
	close(ep);
	unpair(&p);
}

/* EPOLLET on EPOLLIN: one event per arrival of new data. */
void case_et(void)
{
	enum { S, C };
	struct pair p;
	int ep = ep_new();
	char b[128];

	if (mkpair(&p))
		return;
	ep_add(ep, p.s, EPOLLIN | EPOLLET, S, "s");
	ep_show("registered, no data", ep, 100);
	xsend(p.c, "abc");
	ep_show("c sent 3 bytes", ep, 2000);
	ep_show("no new data", ep, 100);
	say("s recv 1 of 3 -> %s", recv_str(p.s, 1, b, sizeof(b)));
	ep_show("after a partial read, no new data", ep, 100);
	say("s read until EAGAIN -> %ld bytes", drain(p.s));
	say("s recv -> %s", recv_str(p.s, 1, b, sizeof(b)));
	ep_show("drained, no new data", ep, 100);
	xsend(p.c, "defg");
	ep_show("c sent 4 more bytes", ep, 2000);
	ep_show("no new data", ep, 100);
	xsend(p.c, "h");
	ep_show("c sent 1 more byte, previous data unread", ep, 2000);
	ep_show("no new data", ep, 100);
	say("s read until EAGAIN -> %ld bytes", drain(p.s));
	ep_show("drained", ep, 100);
	close(ep);

	/* IN|OUT|ET: the first wait reports the writable edge, new data
	 * reports IN with OUT still set */
	ep = ep_new();
	ep_add(ep, p.c, EPOLLIN | EPOLLOUT | EPOLLET, C, "c");
	ep_show("IN|OUT|ET registered", ep, 2000);
	ep_show("no change", ep, 100);
	xsend(p.s, "ij");
	ep_show("peer sent 2 bytes", ep, 2000);
	ep_show("no change", ep, 100);
	say("c read until EAGAIN -> %ld bytes", drain(p.c));
	ep_show("drained", ep, 100);
	close(ep);
	unpair(&p);
}

/* Send n bytes of filler on fd (blocking until all went). */
static void send_n(int fd, size_t n)
{
	static char fill[32768];
	size_t off = 0;

	memset(fill, 'x', sizeof(fill));
	while (off < n) {
		size_t k = n - off < sizeof(fill) ? n - off : sizeof(fill);
		ssize_t r = send(fd, fill, k, MSG_NOSIGNAL);

		if (r > 0) {
			off += (size_t)r;
			continue;
		}
		if (r < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
			struct pollfd q = {.fd = fd, .events = POLLOUT};

			if (poll(&q, 1, 2000) > 0)
				continue;
		}
		say("send %zu bytes: %s", n, r < 0 ? tl_en(errno) : "stuck");
		return;
	}
}

/* Wait (<= 2 s) until fd has n bytes queued, without reading them: only
 * synchronises with the peer, prints nothing unless it never happens. */
static void wait_inq(int fd, int n)
{
	int64_t end = tl_now_us() + 2000000;
	int q = -1;

	do {
		struct pollfd pq = {.fd = fd, .events = POLLIN};

		(void)poll(&pq, 1, 10);
		if (ioctl(fd, FIONREAD, &q) == 0 && q >= n)
			return;
	} while (tl_now_us() < end);
	say("never saw %d bytes queued (%d)", n, q);
}

/*
 * EPOLLET on EPOLLIN, counted: a sleeper woken by new data behind data it
 * has not read, more queued than one look sees, and the peer's EOF after
 * an exact read of everything.  (A partial read is followed by one more
 * event under the shim: case et, KNOWN.)
 */
void case_et_count(void)
{
	enum { S };
	struct pair p;
	struct epoll_event evs[4];
	struct later l;
	int ep = ep_new(), n;
	int64_t t0;
	char b[128];

	if (mkpair(&p))
		return;
	ep_add(ep, p.s, EPOLLIN | EPOLLET, S, "s");
	xsend(p.c, "abc");
	ep_show("c sent 3 bytes", ep, 2000);
	later_start(&l, p.c, 100, "new");
	t0 = tl_now_us();
	n = epoll_wait(ep, evs, 4, 3000);
	say("asleep with 3 bytes unread, peer sends after 100 ms: %s%s",
	    n > 0 ? evs_str(evs, n, b, sizeof(b))
	    : n	  ? tl_en(errno)
		  : "timeout",
	    tl_now_us() - t0 < 1000000 ? "" : " (late)");
	later_join(&l);
	ep_show("no new data", ep, 100);
	say("s read until EAGAIN -> %ld bytes", drain(p.s));

	/* more than one peek's worth queued */
	xsend(p.c, "abc");
	ep_show("c sent 3 bytes", ep, 2000);
	send_n(p.c, 20000);
	wait_inq(p.s, 20003);
	ep_show("20000 more behind unread data", ep, 2000);
	ep_show("no new data", ep, 100);
	say("s recv 1 -> %s", recv_str(p.s, 1, b, sizeof(b)));
	xsend(p.c, "new");
	wait_inq(p.s, 20005);
	ep_show("read 1, then new data, over 16 KiB unread", ep, 2000);
	say("s read until EAGAIN -> %ld bytes", drain(p.s));
	ep_show("drained", ep, 100);

	/* EOF after reading exactly what came (no EAGAIN seen) */
	xsend(p.c, "xy");
	ep_show("c sent 2 bytes", ep, 2000);
	say("s recv 2 -> %s", recv_str(p.s, 2, b, sizeof(b)));
	ep_show("read exactly, no new data", ep, 100);
	shutdown(p.c, SHUT_WR);
	ep_show("peer SHUT_WR", ep, 2000);
	ep_show("no change", ep, 100);
	say("s recv -> %s", recv_str(p.s, 8, b, sizeof(b)));
	close(ep);
	unpair(&p);
}

/* EPOLLOUT|EPOLLET after the send queue filled up. */
void case_et_out(void)
{
	enum { C };
	struct pair p;
	int ep = ep_new();
	static char chunk[65536];
	long sent = 0, got = 0;
	int64_t end;

	if (mkpair(&p))
		return;
	ep_add(ep, p.c, EPOLLOUT | EPOLLET, C, "c");
	ep_show("registered", ep, 2000);
	ep_show("no change", ep, 100);
	for (;;) {
		ssize_t r = send(p.c, chunk, sizeof(chunk), MSG_NOSIGNAL);

		if (r > 0) {
			sent += r;
			if (sent > (1L << 30))
				break;
			continue;
		}
		say("c send until it fails -> %s", r < 0 ? tl_en(errno) : "0");
		break;
	}
	ep_show("send queue full", ep, 0);
	end = tl_now_us() + 20 * 1000000LL;
	while (got < sent && tl_now_us() < end) {
		struct pollfd q = {.fd = p.s, .events = POLLIN};
		long n;

		poll(&q, 1, 100);
		n = drain(p.s);
		if (n < 0) {
			say("peer drain: %s", tl_en((int)-n));
			break;
		}
		got += n;
	}
	say("peer read everything -> %s", got == sent ? "yes" : "no");
	ep_show("after the peer drained", ep, 2000);
	ep_show("no change", ep, 100);
	close(ep);
	unpair(&p);
}

/* EPOLLONESHOT, re-arming with EPOLL_CTL_MOD, EPOLL_CTL_DEL. */
void case_oneshot(void)
{
	enum { S };
	struct pair p;
	int ep = ep_new();
	struct epoll_event e = {0};

	if (mkpair(&p))
		return;
	ep_add(ep, p.s, EPOLLIN | EPOLLONESHOT, S, "s");
	xsend(p.c, "a");
	ep_show("c sent", ep, 2000);
	ep_show("fired once, data still unread", ep, 100);
	xsend(p.c, "b");
	ep_show("more data while disarmed", ep, 100);
	say("MOD EPOLLIN|EPOLLONESHOT -> %s",
	    res(ep_ctl(ep, EPOLL_CTL_MOD, p.s, EPOLLIN | EPOLLONESHOT, S,
		       "s")));
	ep_show("re-armed with data pending", ep, 2000);
	ep_show("disarmed again", ep, 100);
	say("MOD EPOLLIN -> %s",
	    res(ep_ctl(ep, EPOLL_CTL_MOD, p.s, EPOLLIN, S, "s")));
	ep_show("level-triggered", ep, 0);
	ep_show("level-triggered again", ep, 0);
	say("s read until EAGAIN -> %ld bytes", drain(p.s));
	say("DEL -> %s", res(epoll_ctl(ep, EPOLL_CTL_DEL, p.s, NULL)));
	xsend(p.c, "c");
	ep_show("data after DEL", ep, 200);
	e.events = EPOLLIN;
	say("MOD after DEL -> %s", res(epoll_ctl(ep, EPOLL_CTL_MOD, p.s, &e)));
	say("DEL after DEL -> %s",
	    res(epoll_ctl(ep, EPOLL_CTL_DEL, p.s, NULL)));
	say("ADD again -> %s", res(ep_add(ep, p.s, EPOLLIN, S, "s")));
	ep_show("re-added with data pending", ep, 2000);
	close(ep);
	unpair(&p);
}

/* epoll_data comes back as registered, for kernel and RDMA fds. */
static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

static void data_snapshot(int ep, int want, const char *label)
{
	struct epoll_event evs[8];
	uint64_t v[8];
	char b[256];
	size_t o = 0;
	int n = 0;
	int64_t end = tl_now_us() + 3000000;

	do {
		n = epoll_wait(ep, evs, 8, 20);
		if (n >= want)
			break;
	} while (tl_now_us() < end);
	for (int i = 0; i < n; i++)
		v[i] = evs[i].data.u64;
	qsort(v, (size_t)(n > 0 ? n : 0), sizeof(v[0]), cmp_u64);
	b[0] = 0;
	for (int i = 0; i < n; i++)
		o += (size_t)snprintf(b + o, sizeof(b) - o, "%s0x%016" PRIx64,
				      i ? " " : "", v[i]);
	say("%s: %s", label, n > 0 ? b : "none");
}

void case_data(void)
{
	struct pair p;
	int ep = ep_new(), efd = new_efd();
	struct epoll_event e;
	static int anchor;

	if (mkpair(&p))
		return;
	e.events = EPOLLIN;
	e.data.u64 = 0xfedcba9876543210ull;
	epoll_ctl(ep, EPOLL_CTL_ADD, efd, &e);
	e.events = EPOLLOUT;
	e.data.u64 = 0x8000000000000001ull;
	epoll_ctl(ep, EPOLL_CTL_ADD, p.c, &e);
	e.events = EPOLLIN;
	e.data.u64 = 0x00000000ffffffffull;
	epoll_ctl(ep, EPOLL_CTL_ADD, p.s, &e);
	kick(efd);
	xsend(p.c, "d");
	data_snapshot(ep, 3, "u64 values back");
	e.events = EPOLLOUT;
	e.data.u64 = 0x0123456789abcdefull;
	say("MOD c with a new value -> %s",
	    res(epoll_ctl(ep, EPOLL_CTL_MOD, p.c, &e)));
	data_snapshot(ep, 3, "after MOD");
	e.events = EPOLLIN;
	e.data.ptr = &anchor;
	say("MOD s with a pointer -> %s",
	    res(epoll_ctl(ep, EPOLL_CTL_MOD, p.s, &e)));
	{
		struct epoll_event evs[8];
		int n = 0, found = 0;
		int64_t end = tl_now_us() + 3000000;

		do {
			n = epoll_wait(ep, evs, 8, 20);
			for (int i = 0; i < n; i++)
				found |= evs[i].data.ptr == &anchor;
		} while (!found && tl_now_us() < end);
		say("pointer back -> %s", found ? "yes" : "no");
	}
	close(ep);
	close(efd);
	unpair(&p);
}

/*
 * Fairness: with more ready registrations than maxevents, repeated waits go
 * round all of them, as the kernel's ready list does (a level-triggered
 * item it reports goes to the list's tail): none starves, whatever its kind
 * (RDMA connections, an eventfd, a listener).  Prints, per name, how often
 * CALLS waits of MAX events reported it.
 */
static void fair_rounds(int ep, int max, int calls)
{
	int seen[MAXID] = {0}, total = 0, er = 0;
	char b[256];
	size_t o = 0;

	for (int i = 0; i < calls; i++) {
		struct epoll_event evs[8];
		int n = epoll_wait(ep, evs, max, 0);

		if (n < 0)
			er = errno;
		for (int j = 0; j < n; j++) {
			int id = key_id(evs[j].data.u64);

			seen[id >= 0 ? id : 0]++;
			total++;
		}
	}
	b[0] = 0;
	for (int id = 0; id < MAXID; id++)
		if (seen[id])
			o += (size_t)snprintf(
			    b + o, sizeof(b) - o, "%s%s x%d", o ? ", " : "",
			    idname[id] ? idname[id] : "?", seen[id]);
	say("%d waits of maxevents=%d -> %d events%s%s: %s", calls, max, total,
	    er ? ", error " : "", er ? tl_en(er) : "", total ? b : "none");
}

void case_fair(void)
{
	enum { A, B, C, EFD, L };
	struct pair p[3];
	int ep = ep_new(), efd = new_efd(), c, a;
	static const char *const names[] = {"a", "b", "c"};

	for (int i = 0; i < 3; i++)
		if (mkpair(&p[i]))
			return;
	for (int i = 0; i < 3; i++) {
		xsend(p[i].c, "x");
		ep_add(ep, p[i].s, EPOLLIN, A + i, names[i]);
	}
	kick(efd);
	ep_add(ep, efd, EPOLLIN, EFD, "efd");
	ep_add(ep, lfd, EPOLLIN, L, "listener");
	c = socket(AF_INET, SOCK_STREAM, 0);
	say("connect to the listener -> %s",
	    res(connect(c, (struct sockaddr *)&laddr, sizeof(laddr))));
	ep_settle(ep, 2000, A, EPOLLIN, B, EPOLLIN, C, EPOLLIN, EFD, EPOLLIN, L,
		  EPOLLIN, -1);
	ep_show("five ready (level-triggered)", ep, 0);
	fair_rounds(ep, 1, 5);
	fair_rounds(ep, 2, 5);
	fair_rounds(ep, 3, 5);
	fair_rounds(ep, 1, 10);
	ep_show("all still ready", ep, 0);
	set_nb(lfd, true);
	a = accept4(lfd, NULL, NULL, SOCK_NONBLOCK);
	say("accept -> %s", res(a));
	set_nb(lfd, false);
	if (a >= 0)
		close(a);
	close(c);
	close(ep);
	close(efd);
	for (int i = 0; i < 3; i++)
		unpair(&p[i]);
}

/* epoll_ctl / epoll_wait errors. */
void case_ctl(void)
{
	struct pair p;
	int ep = ep_new(), efd = new_efd(), bad;
	struct epoll_event e = {.events = EPOLLIN}, evs[4];

	if (mkpair(&p))
		return;
	say("ADD c -> %s", res(epoll_ctl(ep, EPOLL_CTL_ADD, p.c, &e)));
	say("ADD c again -> %s", res(epoll_ctl(ep, EPOLL_CTL_ADD, p.c, &e)));
	say("MOD s (not registered) -> %s",
	    res(epoll_ctl(ep, EPOLL_CTL_MOD, p.s, &e)));
	say("DEL s (not registered) -> %s",
	    res(epoll_ctl(ep, EPOLL_CTL_DEL, p.s, NULL)));
	bad = closed_fd();
	say("ADD closed fd -> %s", res(epoll_ctl(ep, EPOLL_CTL_ADD, bad, &e)));
	say("ADD epfd to itself -> %s",
	    res(epoll_ctl(ep, EPOLL_CTL_ADD, ep, &e)));
	bad = closed_fd();
	say("ADD s, epfd closed -> %s",
	    res(epoll_ctl(bad, EPOLL_CTL_ADD, p.s, &e)));
	say("ADD s, epfd an eventfd -> %s",
	    res(epoll_ctl(efd, EPOLL_CTL_ADD, p.s, &e)));
	say("ADD s, epfd a socket -> %s",
	    res(epoll_ctl(p.c, EPOLL_CTL_ADD, p.s, &e)));
	say("ADD s, event NULL -> %s",
	    res(epoll_ctl(ep, EPOLL_CTL_ADD, p.s, NULL)));
	say("op 99 on s -> %s", res(epoll_ctl(ep, 99, p.s, &e)));
	say("ADD eventfd -> %s", res(epoll_ctl(ep, EPOLL_CTL_ADD, efd, &e)));
	say("ADD eventfd again -> %s",
	    res(epoll_ctl(ep, EPOLL_CTL_ADD, efd, &e)));
	e.events = EPOLLIN | EPOLLEXCLUSIVE;
	say("ADD s EPOLLEXCLUSIVE -> %s",
	    res(epoll_ctl(ep, EPOLL_CTL_ADD, p.s, &e)));
	say("MOD s EPOLLEXCLUSIVE -> %s",
	    res(epoll_ctl(ep, EPOLL_CTL_MOD, p.s, &e)));
	say("epoll_wait maxevents 0 -> %s", res(epoll_wait(ep, evs, 0, 0)));
	bad = closed_fd();
	say("epoll_wait closed epfd -> %s", res(epoll_wait(bad, evs, 4, 0)));
	say("epoll_wait on an eventfd -> %s", res(epoll_wait(efd, evs, 4, 0)));
	say("DEL c -> %s", res(epoll_ctl(ep, EPOLL_CTL_DEL, p.c, NULL)));
	say("DEL c again -> %s", res(epoll_ctl(ep, EPOLL_CTL_DEL, p.c, NULL)));
	close(ep);
	close(efd);
	unpair(&p);
}

void case_timeout(void)
{
	enum { S, EFD };
	struct pair p;
	int ep = ep_new(), efd = new_efd(), n;
	struct epoll_event evs[4];
	struct later l;
	struct rescue r;
	int64_t t0;
	char b[128];

	if (mkpair(&p))
		return;
	ep_add(ep, p.s, EPOLLIN, S, "s");
	ep_show("epoll_wait(0), idle", ep, 0);
	t0 = tl_now_us();
	n = epoll_wait(ep, evs, 4, 200);
	timed_show("epoll_wait(200 ms), idle", n, errno, t0, 200);
	{
		struct timespec ts = {0, 150 * 1000000L};

		t0 = tl_now_us();
		n = epoll_pwait2(ep, evs, 4, &ts, NULL);
		timed_show("epoll_pwait2(150 ms), idle", n, errno, t0, 150);
	}
	t0 = tl_now_us();
	n = epoll_pwait(ep, evs, 4, 120, NULL);
	timed_show("epoll_pwait(120 ms, no mask), idle", n, errno, t0, 120);
	ep_add(ep, efd, EPOLLIN, EFD, "efd");
	rescue_start(&r, efd, 5000);
	later_start(&l, p.c, 100, "wake");
	ep_show("epoll_wait(-1), peer sends after 100 ms", ep, -1);
	later_join(&l);
	if (rescue_stop(&r))
		say("rescued: the wait did not end by itself");
	say("s recv -> %s", recv_str(p.s, 64, b, sizeof(b)));
	rescue_start(&r, efd, 5000);
	later_start(&l, efd, 100, NULL);
	ep_show("epoll_wait(-1), eventfd kicked after 100 ms", ep, -1);
	later_join(&l);
	rescue_stop(&r);
	unkick(efd);
	later_start(&l, p.c, 100, "late");
	ep_show("epoll_wait(3000), peer sends after 100 ms", ep, 3000);
	later_join(&l);
	say("s recv -> %s", recv_str(p.s, 64, b, sizeof(b)));
	close(ep);
	close(efd);
	unpair(&p);
}

/* EINTR on a signal, and none when the wait masks it. */
void case_eintr(void)
{
	enum { S, EFD };
	struct pair p;
	int ep = ep_new(), efd = new_efd(), n, er;
	struct epoll_event evs[4];
	struct sigaction sa = {0};
	struct rescue r;
	sigset_t block;
	char b[512];
	const char *nm[] = {"s", "efd"};
	struct pollfd q[2];
	struct sfd f[2];

	if (mkpair(&p))
		return;
	sa.sa_handler = on_alarm;
	sigemptyset(&sa.sa_mask);
	sa.sa_flags = 0; /* no SA_RESTART */
	sigaction(SIGALRM, &sa, NULL);
	sigemptyset(&block);
	sigaddset(&block, SIGALRM);
	ep_add(ep, p.s, EPOLLIN, S, "s");
	ep_add(ep, efd, EPOLLIN, EFD, "efd");
	q[0] = (struct pollfd){.fd = p.s, .events = POLLIN};
	q[1] = (struct pollfd){.fd = efd, .events = POLLIN};
	f[0] = (struct sfd){p.s, "s", true, false};
	f[1] = (struct sfd){efd, "efd", true, false};

#define INTERRUPTED(label, call, show)                                         \
	do {                                                                   \
		alarms = 0;                                                    \
		rescue_start(&r, efd, 3000);                                   \
		arm_alarm(100);                                                \
		call;                                                          \
		disarm_alarm();                                                \
		if (rescue_stop(&r))                                           \
			unkick(efd);                                           \
		show;                                                          \
		say("%s: handler ran -> %s", label, alarm_seen());             \
	} while (0)

	INTERRUPTED("epoll_wait(-1)",
		    (n = epoll_wait(ep, evs, 4, -1), er = errno),
		    say("epoll_wait(-1) + SIGALRM: %s",
			n < 0 ? tl_en(er) : evs_str(evs, n, b, sizeof(b))));
	INTERRUPTED("epoll_pwait(-1, NULL)",
		    (n = epoll_pwait(ep, evs, 4, -1, NULL), er = errno),
		    say("epoll_pwait(-1, no mask) + SIGALRM: %s",
			n < 0 ? tl_en(er) : evs_str(evs, n, b, sizeof(b))));
	INTERRUPTED("epoll_wait(5000)",
		    (n = epoll_wait(ep, evs, 4, 5000), er = errno),
		    say("epoll_wait(5000) + SIGALRM: %s",
			n < 0 ? tl_en(er) : evs_str(evs, n, b, sizeof(b))));
	INTERRUPTED(
	    "poll(-1)", n = poll(q, 2, -1),
	    show_poll_result("poll(-1) + SIGALRM", n, errno, q, nm, 2, false));
	INTERRUPTED("poll(5000)", n = poll(q, 2, 5000),
		    show_poll_result("poll(5000) + SIGALRM", n, errno, q, nm, 2,
				     false));
	INTERRUPTED("ppoll(NULL)", n = ppoll(q, 2, NULL, NULL),
		    show_poll_result("ppoll(NULL, no mask) + SIGALRM", n, errno,
				     q, nm, 2, false));
	INTERRUPTED("select(NULL)",
		    n = select_show("select(NULL) + SIGALRM", f, 2, -1),
		    (void)n);
	INTERRUPTED("pselect(NULL)",
		    n = pselect_show("pselect(NULL, no mask) + SIGALRM", f, 2,
				     -1, NULL),
		    (void)n);

	/* the signal blocked for the duration of the wait: no EINTR */
	alarms = 0;
	arm_alarm(100);
	n = epoll_pwait(ep, evs, 4, 400, &block);
	er = errno;
	say("epoll_pwait(400 ms, SIGALRM blocked) + SIGALRM at 100 ms: %s",
	    n < 0 ? tl_en(er)
	    : n	  ? evs_str(evs, n, b, sizeof(b))
		  : "timeout");
	say("epoll_pwait masked: handler ran afterwards -> %s", alarm_seen());
	alarms = 0;
	arm_alarm(100);
	{
		struct timespec ts = {0, 400 * 1000000L};

		n = epoll_pwait2(ep, evs, 4, &ts, &block);
		er = errno;
	}
	say("epoll_pwait2(400 ms, SIGALRM blocked) + SIGALRM at 100 ms: %s",
	    n < 0 ? tl_en(er)
	    : n	  ? evs_str(evs, n, b, sizeof(b))
		  : "timeout");
	say("epoll_pwait2 masked: handler ran afterwards -> %s", alarm_seen());
	alarms = 0;
	arm_alarm(100);
	ppoll_show("ppoll(400 ms, SIGALRM blocked) + SIGALRM at 100 ms", q, nm,
		   2, 400, &block);
	say("ppoll masked: handler ran afterwards -> %s", alarm_seen());
	alarms = 0;
	arm_alarm(100);
	pselect_show("pselect(400 ms, SIGALRM blocked) + SIGALRM at 100 ms", f,
		     2, 400, &block);
	say("pselect masked: handler ran afterwards -> %s", alarm_seen());
#undef INTERRUPTED
	disarm_alarm();
	signal(SIGALRM, SIG_IGN);
	close(ep);
	close(efd);
	unpair(&p);
}

/* One RDMA fd in two epoll sets. */
void case_two_sets(void)
{
	enum { S1, S2, C3, C4 };
	struct pair p;
	int ep1 = ep_new(), ep2 = ep_new(), ep3 = ep_new(), ep4 = ep_new();

	if (mkpair(&p))
		return;
	ep_add(ep1, p.s, EPOLLIN, S1, "s@1");
	ep_add(ep2, p.s, EPOLLIN, S2, "s@2");
	xsend(p.c, "two");
	ep_settle(ep1, 2000, S1, EPOLLIN, -1);
	ep_settle(ep2, 2000, S2, EPOLLIN, -1);
	ep_show("set 1", ep1, 0);
	ep_show("set 2", ep2, 0);
	say("s read until EAGAIN -> %ld bytes", drain(p.s));
	ep_show("set 1 after the read", ep1, 0);
	ep_show("set 2 after the read", ep2, 0);
	say("DEL from set 1 -> %s",
	    res(epoll_ctl(ep1, EPOLL_CTL_DEL, p.s, NULL)));
	xsend(p.c, "more");
	ep_settle(ep2, 2000, S2, EPOLLIN, -1);
	ep_show("set 1 after DEL", ep1, 0);
	ep_show("set 2 after DEL from set 1", ep2, 0);
	drain(p.s);

	ep_add(ep3, p.c, EPOLLIN | EPOLLET, C3, "c@3");
	ep_add(ep4, p.c, EPOLLIN | EPOLLET, C4, "c@4");
	xsend(p.s, "et");
	ep_show("ET set 3", ep3, 2000);
	ep_show("ET set 4", ep4, 2000);
	ep_show("ET set 3 again", ep3, 100);
	ep_show("ET set 4 again", ep4, 100);
	xsend(p.s, "et2");
	ep_show("ET set 3, new data", ep3, 2000);
	ep_show("ET set 4, new data", ep4, 2000);
	drain(p.c);
	close(ep1);
	close(ep2);
	close(ep3);
	close(ep4);
	unpair(&p);
}

/* A non-blocking socket registered before connect() made it a connection. */
void case_threads(void)
{
	enum { KICK, A, B, C, D };
	struct pair pa, pb, pc, pd;
	int ep = ep_new(), efd = new_efd();
	struct waiter w;

	if (mkpair(&pa) || mkpair(&pb) || mkpair(&pc) || mkpair(&pd))
		return;
	ep_add(ep, efd, EPOLLIN, KICK, "kick");
	ep_add(ep, pa.s, EPOLLIN, A, "a");

	waiter_start(&w, ep, -1);
	tl_sleep_ms(100);
	say("waiter blocked -> %s", waiter_done(&w) ? "no" : "yes");
	xsend(pb.c, "b");
	tl_sleep_ms(50);
	ep_add(ep, pb.s, EPOLLIN, B, "b");
	waiter_finish(&w, "ADD of an fd with data pending: waiter saw", 3000,
		      efd);
	unkick(efd);
	drain(pb.s);

	waiter_start(&w, ep, -1);
	tl_sleep_ms(100);
	ep_add(ep, pc.s, EPOLLIN, C, "c");
	tl_sleep_ms(100);
	say("waiter blocked after ADD of an idle fd -> %s",
	    waiter_done(&w) ? "no" : "yes");
	xsend(pc.c, "c");
	waiter_finish(&w, "data for the added fd: waiter saw", 3000, efd);
	unkick(efd);
	drain(pc.s);

	xsend(pd.c, "d");
	ep_add(ep, pd.s, 0, D, "d");
	waiter_start(&w, ep, -1);
	tl_sleep_ms(100);
	say("waiter blocked, d registered with events 0 -> %s",
	    waiter_done(&w) ? "no" : "yes");
	ep_ctl(ep, EPOLL_CTL_MOD, pd.s, EPOLLIN, D, "d");
	waiter_finish(&w, "MOD d to EPOLLIN: waiter saw", 3000, efd);
	unkick(efd);
	drain(pd.s);

	waiter_start(&w, ep, -1);
	tl_sleep_ms(100);
	close(pa.s);
	pa.s = -1;
	/* TCP lets the first send after the peer's close through; the shim
	 * too, whether or not the close has shown yet (io.c, past_end). */
	xsend(pa.c, "gone");
	tl_sleep_ms(200);
	say("waiter blocked after another thread closed a -> %s",
	    waiter_done(&w) ? "no" : "yes");
	kick(efd);
	waiter_finish(&w, "then the eventfd kick: waiter saw", 3000, efd);
	unkick(efd);

	waiter_start(&w, ep, -1);
	tl_sleep_ms(100);
	kick(efd);
	waiter_finish(&w, "eventfd kick, RDMA fds idle: waiter saw", 3000, efd);
	unkick(efd);

	waiter_start(&w, ep, -1);
	tl_sleep_ms(100);
	say("DEL b from another thread -> %s",
	    res(epoll_ctl(ep, EPOLL_CTL_DEL, pb.s, NULL)));
	xsend(pb.c, "b");
	tl_sleep_ms(200);
	say("waiter blocked after DEL b and data for b -> %s",
	    waiter_done(&w) ? "no" : "yes");
	xsend(pc.c, "c");
	waiter_finish(&w, "then data for c: waiter saw", 3000, efd);
	unkick(efd);
	close(ep);
	drain(pc.s);

	/* A set holding only a kernel fd: the waiter sleeps in the kernel.
	 * The first socket added must still reach it. */
	ep = ep_new();
	ep_add(ep, efd, EPOLLIN, KICK, "kick");
	waiter_start(&w, ep, -1);
	tl_sleep_ms(100);
	say("waiter blocked on a set of one eventfd -> %s",
	    waiter_done(&w) ? "no" : "yes");
	xsend(pc.c, "c");
	ep_add(ep, pc.s, EPOLLIN, C, "c");
	waiter_finish(&w, "ADD of a socket with data to that set: waiter saw",
		      3000, efd);
	unkick(efd);
	drain(pc.s);

	/* Nested: the waiter sleeps on an outer set holding the inner one;
	 * another thread adds a socket with data to the inner set. */
	{
		int outer = ep_new(), inner = ep_new();

		ep_add(outer, inner, EPOLLIN, A, "inner");
		ep_add(outer, efd, EPOLLIN, KICK, "kick"); /* the rescue */
		waiter_start(&w, outer, -1);
		tl_sleep_ms(100);
		say("waiter blocked on an outer set -> %s",
		    waiter_done(&w) ? "no" : "yes");
		xsend(pd.c, "d");
		ep_add(inner, pd.s, EPOLLIN, D, "d");
		waiter_finish(&w,
			      "ADD of a socket with data to the inner set: "
			      "outer waiter saw",
			      3000, efd);
		unkick(efd);
		drain(pd.s);
		close(outer);
		close(inner);
	}
	close(ep);
	close(efd);
	unpair(&pa);
	unpair(&pb);
	unpair(&pc);
	unpair(&pd);
}

/*
 * No spinning while idle: a waiter blocked on idle fds takes (almost) no
 * CPU.  How long a wake-up takes, and the CPU in numbers: bench/wakeup.
 */
void case_idlecpu(void)
{
	enum { KICK, A, B, C, D };
	struct pair p1, p2;
	int ep = ep_new(), efd = new_efd();
	struct waiter w;
	clockid_t cid;
	struct timespec c0, c1;
	double wms;

	if (mkpair(&p1) || mkpair(&p2))
		return;
	ep_add(ep, efd, EPOLLIN, KICK, "kick");
	ep_add(ep, p1.c, EPOLLIN, A, "a");
	ep_add(ep, p1.s, EPOLLIN, B, "b");
	ep_add(ep, p2.c, EPOLLIN, C, "c");
	ep_add(ep, p2.s, EPOLLIN, D, "d");
	waiter_start(&w, ep, -1);
	tl_sleep_ms(200);
	pthread_getcpuclockid(w.t, &cid);
	clock_gettime(cid, &c0);
	tl_sleep_ms(2000);
	clock_gettime(cid, &c1);
	kick(efd);
	waiter_finish(&w,
		      "2 s blocked on 4 idle fds, then the kick: waiter saw",
		      3000, efd);
	wms = (double)(c1.tv_sec - c0.tv_sec) * 1e3 +
	      (double)(c1.tv_nsec - c0.tv_nsec) / 1e6;
	say("waiter CPU while blocked for 2 s -> %s",
	    wms < 40 ? "under 2%" : "2% or more");
	close(ep);
	close(efd);
	unpair(&p1);
	unpair(&p2);
}

/*
 * Readiness that another wait in the process took first.  The set's
 * sleeper has armed a registered connection and left it (an epoll_wait
 * that timed out); then a blocking send on it waits for room -- a wait of
 * its own, which under the shim takes the connection's completion events
 * and may leave its completion queue unarmed -- while the peer reads it
 * all.  Only then, told so by the sender, the peer replies: the next
 * epoll_wait reports the reply, as the kernel does.
 */
struct taken {
	int fd, go; /* go: an eventfd the sender writes once its send is done */
	long want, got;
};

static void *taken_peer(void *arg)
{
	struct taken *t = arg;
	char buf[65536];
	struct pollfd q = {.fd = t->go, .events = POLLIN};

	while (t->got < t->want) {
		struct pollfd d = {.fd = t->fd, .events = POLLIN};
		ssize_t r;

		if (poll(&d, 1, 10000) <= 0)
			break;
		r = recv(t->fd, buf, sizeof(buf), MSG_DONTWAIT);
		if (r <= 0 && errno != EAGAIN)
			break;
		if (r > 0)
			t->got += r;
	}
	if (poll(&q, 1, 10000) == 1)
		xsend(t->fd, "r");
	return NULL;
}

void case_taken(void)
{
	struct pair p;
	struct taken t = {.want = 4 << 20, .go = new_efd()};
	int ep = ep_new();
	char *big, b[64];
	ssize_t sent = 0;
	pthread_t th;

	if (mkpair(&p))
		return;
	ep_add(ep, p.s, EPOLLIN, 1, "s");
	ep_show("s registered, nothing sent", ep, 50);
	big = calloc(1, (size_t)t.want);
	t.fd = p.c;
	th = spawn(taken_peer, &t);
	set_nb(p.s, false);
	while (big && sent < t.want) {
		ssize_t r = send(p.s, big + sent, (size_t)(t.want - sent),
				 MSG_NOSIGNAL);

		if (r <= 0)
			break;
		sent += r;
	}
	set_nb(p.s, true);
	say("blocking send of 4 MiB on s -> %ld bytes", (long)sent);
	kick(t.go);
	ep_show("the peer's reply, sent after the send", ep, 5000);
	if (!join_within(th, 15000))
		say("peer: still reading");
	say("peer read %ld bytes; s reads %s", t.got,
	    recv_str(p.s, 10, b, sizeof(b)));
	free(big);
	close(t.go);
	close(ep);
	unpair(&p);
}

/*
 * A registration that asks for no events, on a connection whose peer has
 * closed: the kernel has nothing to report (a FIN alone is no EPOLLHUP),
 * and a wait times out without spinning (its CPU well under its length).
 */
static long thread_cpu_ms(void)
{
	struct timespec t;

	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
	return t.tv_sec * 1000L + t.tv_nsec / 1000000L;
}

void case_ended(void)
{
	struct pair p;
	struct pollfd q;
	int ep = ep_new();
	long c0;

	if (mkpair(&p))
		return;
	ep_add(ep, p.s, 0, 1, "s");
	ep_show("registered with no events", ep, 50);
	close(p.c);
	p.c = -1;
	q = (struct pollfd){.fd = p.s, .events = POLLIN};
	say("the peer closed: s readable -> %s",
	    poll(&q, 1, 5000) == 1 ? "yes" : "no");
	c0 = thread_cpu_ms();
	ep_show("a wait of 300 ms", ep, 300);
	say("its CPU under 100 ms -> %s",
	    thread_cpu_ms() - c0 < 100 ? "yes" : "no");
	close(ep);
	unpair(&p);
}

/*
 * A registration that asks for no events, its set asleep, and the program
 * shuts the connection down both ways from another thread: the kernel
 * wakes the sleeper with EPOLLHUP (never maskable).  Under the shim the
 * sleeper has parked the registration; the shutdown must send it to look
 * again.
 */
/* What poll() and epoll show of a connection after the program's own
 * shutdown(how), the peer idle. */
static void shut_one(int how, const char *name)
{
	static const char *const nm[] = {"s"};
	struct pair p;
	struct pollfd q = {.events = POLLIN | POLLOUT | POLLRDHUP};
	int ep = ep_new(), r;
	char label[64];
	int64_t t0;

	if (mkpair(&p))
		return;
	ep_add(ep, p.s, EPOLLIN | EPOLLOUT | EPOLLRDHUP, 1, "s");
	q.fd = p.s;
	snprintf(label, sizeof(label), "after %s: poll", name);
	say("%s -> %s", name, res(shutdown(p.s, how)));
	poll_show(label, &q, nm, 1, 0);
	snprintf(label, sizeof(label), "after %s: epoll", name);
	ep_show(label, ep, 0);
	/* a wait for only what the shutdown grants (SHUT_RD: IN; SHUT_RDWR:
	 * HUP, with no events asked) ends at once; SHUT_WR grants no IN */
	q.events = how == SHUT_RD   ? POLLIN | POLLRDHUP
		   : how == SHUT_WR ? POLLIN
				    : 0;
	t0 = tl_now_ms();
	r = poll(&q, 1, how == SHUT_WR ? 200 : 2000);
	if (how == SHUT_WR)
		say("after %s: a poll for IN (200 ms) -> %d", name, r);
	else
		say("after %s: a poll of up to 2 s for %s -> %d, at once -> %s",
		    name, how == SHUT_RD ? "IN" : "nothing", r,
		    tl_now_ms() - t0 < 1000 ? "yes" : "no");
	close(ep);
	unpair(&p);
}

/* A thread blocked on s (recv, or poll for IN), and the program shuts s
 * down for reading from another thread: the kernel wakes the blocked
 * thread at once (recv 0, poll IN|RDHUP). */
struct blocked {
	int fd;
	bool use_poll;
	long r;
	short rev;
};

static void *blocked_main(void *arg)
{
	struct blocked *b = arg;
	char c;

	if (b->use_poll) {
		struct pollfd q = {.fd = b->fd, .events = POLLIN | POLLRDHUP};

		b->r = poll(&q, 1, 10000);
		b->rev = q.revents;
	} else {
		b->r = recv(b->fd, &c, 1, 0);
	}
	return NULL;
}

static void shut_blocked(bool use_poll)
{
	struct pair p;
	struct blocked b = {.use_poll = use_poll, .r = -9};
	const char *what = use_poll ? "poll(IN)" : "a blocking recv";
	char m[64];
	pthread_t th;

	if (mkpair(&p))
		return;
	set_nb(p.s, false);
	b.fd = p.s;
	th = spawn(blocked_main, &b);
	tl_sleep_ms(100); /* blocked by then, most likely; the answer is the
			   * same either way */
	say("%s blocked, then shutdown(s, SHUT_RD) -> %s", what,
	    res(shutdown(p.s, SHUT_RD)));
	if (!join_within(th, 3000)) {
		say("%s: still blocked after 3 s", what);
		xsend(p.c, "x"); /* the rescue */
		if (!join_within(th, 5000)) {
			say("%s: hung even after the rescue", what);
			fflush(stdout);
			_exit(3);
		}
	}
	if (use_poll)
		say("%s returned %ld: %s", what, b.r,
		    mask_str((uint32_t)(unsigned short)b.rev, m, sizeof(m)));
	else
		say("%s returned %ld", what, b.r);
	unpair(&p);
}

/* Shut both ways with sends still queued (the peer reads nothing): HUP,
 * never ERR -- the end is ours, not a reset. */
static void shut_full(void)
{
	static const char *const nm[] = {"s"};
	static char buf[65536];
	struct pair p;
	struct pollfd q;
	int ep = ep_new();
	long sent = 0;
	ssize_t r;

	if (mkpair(&p))
		return;
	ep_add(ep, p.s, 0, 1, "s");
	while ((r = send(p.s, buf, sizeof(buf), MSG_DONTWAIT | MSG_NOSIGNAL)) >
	       0)
		sent += r;
	say("full: sent until %s", r < 0 ? tl_en(errno) : "0");
	say("full: shutdown(s, SHUT_RDWR) -> %s",
	    res(shutdown(p.s, SHUT_RDWR)));
	q = (struct pollfd){.fd = p.s, .events = POLLIN | POLLOUT};
	poll_show("full: poll", &q, nm, 1, 0);
	ep_show("full: epoll, no events asked", ep, 0);
	close(ep);
	unpair(&p);
	(void)sent;
}

void case_shut(void)
{
	struct pair p;
	int ep = ep_new(), efd = new_efd();
	struct waiter w;

	if (mkpair(&p))
		return;
	ep_add(ep, efd, EPOLLIN, 2, "kick");
	ep_add(ep, p.s, 0, 1, "s");
	ep_show("registered with no events", ep, 50);
	waiter_start(&w, ep, -1);
	tl_sleep_ms(100); /* asleep by then, most likely; the result is the
			   * same either way */
	say("waiter blocked -> %s", waiter_done(&w) ? "no" : "yes");
	say("shutdown(s, SHUT_RDWR) -> %s", res(shutdown(p.s, SHUT_RDWR)));
	waiter_finish(&w, "the waiter saw", 3000, efd);
	close(efd);
	close(ep);
	unpair(&p);
	shut_one(SHUT_WR, "SHUT_WR");
	shut_one(SHUT_RD, "SHUT_RD");
	shut_one(SHUT_RDWR, "SHUT_RDWR");
	shut_blocked(false);
	shut_blocked(true);
	shut_full();
}
