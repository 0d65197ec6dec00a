/* SPDX-License-Identifier: MIT */
/* readiness: a connection's life under every API: registered before
 * connect, closed while registered, the epoll fd polled, listeners,
 * non-blocking and refused connects. */
#include "readiness.h"

void case_pre_connect(void)
{
	enum { C };
	int ep = ep_new(), c, s, r;
	char b[128];

	c = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);
	ep_add(ep, c, EPOLLIN | EPOLLOUT | EPOLLRDHUP, C, "c");
	ep_show("registered, not connected", ep, 0);
	r = connect(c, (struct sockaddr *)&laddr, sizeof(laddr));
	say("connect -> %s", r < 0 ? tl_en(errno) : "0");
	ep_settle(ep, 2000, C, EPOLLOUT, -1);
	ep_show("connected", ep, 0);
	say("SO_ERROR -> %s", so_error(c));
	s = accept_nb();
	say("accept -> %s", res(s));
	if (s < 0) {
		close(c);
		close(ep);
		return;
	}
	xsend(s, "hi");
	ep_settle(ep, 2000, C, EPOLLIN, -1);
	ep_show("peer sent", ep, 0);
	say("c recv -> %s", recv_str(c, 64, b, sizeof(b)));
	xsend(c, "back");
	{
		struct pollfd q = {.fd = s, .events = POLLIN};
		const char *nm[] = {"s"};

		poll_settle(&q, 1, 2000, 0, POLLIN, -1);
		poll_show("peer", &q, nm, 1, 0);
	}
	say("s recv -> %s", recv_str(s, 64, b, sizeof(b)));
	close(ep);

	/* the same, edge-triggered and registered for EPOLLIN only */
	{
		int c2 = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0), s2;

		ep = ep_new();
		ep_add(ep, c2, EPOLLIN | EPOLLET, C, "c");
		r = connect(c2, (struct sockaddr *)&laddr, sizeof(laddr));
		say("ET: connect -> %s", r < 0 ? tl_en(errno) : "0");
		s2 = accept_nb();
		say("ET: accept -> %s", res(s2));
		ep_show("ET: connected, nothing sent", ep, 200);
		if (s2 >= 0)
			xsend(s2, "et");
		ep_show("ET: peer sent", ep, 2000);
		ep_show("ET: no new data", ep, 100);
		say("ET: c recv -> %s", recv_str(c2, 64, b, sizeof(b)));
		close(c2);
		if (s2 >= 0)
			close(s2);
		close(ep);
	}
	close(c);
	close(s);
}

/* Closing a registered fd removes its registration (unless a dup keeps the
 * file open), even when the number is reused. */
void case_closed(void)
{
	enum { A, B, EFD };
	struct pair pa, pb;
	int ep = ep_new(), efd = new_efd(), pp[2], d;

	if (mkpair(&pa) || mkpair(&pb))
		return;
	ep_add(ep, pa.s, EPOLLIN, A, "a");
	ep_add(ep, pb.s, EPOLLIN, B, "b");
	ep_add(ep, efd, EPOLLIN, EFD, "efd");
	xsend(pa.c, "A");
	xsend(pb.c, "B");
	ep_settle(ep, 2000, A, EPOLLIN, B, EPOLLIN, -1);
	ep_show("both have data", ep, 0);
	drain(pa.s);
	close(pa.s);
	pa.s = -1;
	ep_show("a closed", ep, 0);
	ep_show("a closed, waiting 100 ms", ep, 100);
	if (pipe2(pp, O_CLOEXEC | O_NONBLOCK) == 0) {
		(void)!write(pp[1], "p", 1);
		ep_show("a new pipe may reuse a's number", ep, 0);
		close(pp[0]);
		close(pp[1]);
	}
	close(pa.c);
	pa.c = -1;
	ep_show("the closed a's peer closed too", ep, 100);
	d = dup(pb.s);
	close(pb.s);
	pb.s = -1;
	ep_show("b closed, a dup keeps it open", ep, 0);
	xsend(pb.c, "B2");
	ep_show("more data for b through the dup", ep, 0);
	say("dup recv -> %ld bytes", drain(d));
	ep_show("dup drained", ep, 0);
	xsend(pb.c, "B3");
	ep_settle(ep, 2000, B, EPOLLIN, -1);
	ep_show("new data", ep, 0);
	close(d);
	ep_show("dup closed too", ep, 100);
	kick(efd);
	ep_show("the set still works", ep, 1000);
	close(ep);
	close(efd);
	unpair(&pa);
	unpair(&pb);
}

/* The epoll fd itself is pollable: poll(), select() and a nested epoll see
 * it readable when a registered fd is ready. */
void case_epfd_poll(void)
{
	enum { S, EFD, INNER };
	struct pair p;
	int ep = ep_new(), outer = ep_new(), efd = new_efd();
	struct pollfd q = {.events = POLLIN};
	const char *nm[] = {"epfd"};
	struct sfd f[1];

	if (mkpair(&p))
		return;
	q.fd = ep;
	f[0] = (struct sfd){ep, "epfd", true, false};
	ep_add(ep, p.s, EPOLLIN, S, "s");
	ep_add(ep, efd, EPOLLIN, EFD, "efd");
	ep_add(outer, ep, EPOLLIN, INNER, "inner");
	poll_show("poll(epfd, 0), idle", &q, nm, 1, 0);
	ep_show("outer epoll, idle", outer, 0);
	xsend(p.c, "x");
	ep_settle(ep, 2000, S, EPOLLIN, -1);
	ep_show("inner set (RDMA fd ready)", ep, 0);
	poll_show("poll(epfd, 2000), RDMA fd ready", &q, nm, 1, 2000);
	select_show("select(epfd, 2000), RDMA fd ready", f, 1, 2000);
	ep_show("outer epoll(2000), RDMA fd ready", outer, 2000);
	drain(p.s);
	poll_show("poll(epfd, 0), drained", &q, nm, 1, 0);
	kick(efd);
	poll_show("poll(epfd, 2000), eventfd ready", &q, nm, 1, 2000);
	ep_show("outer epoll(2000), eventfd ready", outer, 2000);
	unkick(efd);
	close(outer);
	close(ep);
	close(efd);
	unpair(&p);
}

/* The listening fd is readable for an RDMA arrival and for a TCP one. */
void case_listen(void)
{
	enum { L };
	int ep = ep_new(), c, a, k, n;
	struct pollfd q = {.fd = lfd, .events = POLLIN};
	const char *nm[] = {"listener"};
	struct sfd f[1] = {{lfd, "listener", true, false}};
	char b[128];

	set_nb(lfd, true);
	ep_add(ep, lfd, EPOLLIN, L, "listener");
	ep_show("nothing pending", ep, 0);
	poll_show("poll, nothing pending", &q, nm, 1, 0);

	c = socket(AF_INET, SOCK_STREAM, 0);
	say("connect (this program's socket) -> %s",
	    res(connect(c, (struct sockaddr *)&laddr, sizeof(laddr))));
	ep_settle(ep, 2000, L, EPOLLIN, -1);
	ep_show("epoll, one arrival", ep, 0);
	poll_show("poll, one arrival", &q, nm, 1, 0);
	select_show("select, one arrival", f, 1, 0);
	a = accept4(lfd, NULL, NULL, SOCK_NONBLOCK);
	say("accept -> %s", res(a));
	if (a >= 0) {
		xsend(c, "r");
		{
			struct pollfd qa = {.fd = a, .events = POLLIN};
			const char *na[] = {"accepted"};

			poll_settle(&qa, 1, 2000, 0, POLLIN, -1);
			poll_show("accepted", &qa, na, 1, 0);
		}
		say("accepted recv -> %s", recv_str(a, 64, b, sizeof(b)));
		close(a);
	}
	close(c);
	ep_show("accepted, nothing pending", ep, 0);
	poll_show("poll, nothing pending", &q, nm, 1, 0);

	k = raw_tcp_connect();
	say("connect (raw system calls, kernel TCP) -> %s",
	    k >= 0 ? "ok" : tl_en(-k));
	ep_settle(ep, 2000, L, EPOLLIN, -1);
	ep_show("epoll, TCP arrival", ep, 0);
	poll_show("poll, TCP arrival", &q, nm, 1, 0);
	select_show("select, TCP arrival", f, 1, 0);
	a = accept4(lfd, NULL, NULL, SOCK_NONBLOCK);
	say("accept -> %s", res(a));
	if (a >= 0 && k >= 0) {
		struct pollfd qa = {.fd = a, .events = POLLIN};
		const char *na[] = {"accepted"};

		(void)!syscall(SYS_write, k, "t", 1);
		poll_settle(&qa, 1, 2000, 0, POLLIN, -1);
		poll_show("accepted", &qa, na, 1, 0);
		say("accepted recv -> %s", recv_str(a, 64, b, sizeof(b)));
	}
	if (a >= 0)
		close(a);
	if (k >= 0)
		syscall(SYS_close, k);
	ep_show("accepted, nothing pending", ep, 0);

	/* both kinds pending at once: still one event for the one fd */
	c = socket(AF_INET, SOCK_STREAM, 0);
	say("connect (this program's socket) -> %s",
	    res(connect(c, (struct sockaddr *)&laddr, sizeof(laddr))));
	k = raw_tcp_connect();
	say("connect (raw system calls, kernel TCP) -> %s",
	    k >= 0 ? "ok" : tl_en(-k));
	tl_sleep_ms(200);
	ep_settle(ep, 2000, L, EPOLLIN, -1);
	ep_show("epoll, two arrivals", ep, 0);
	poll_show("poll, two arrivals", &q, nm, 1, 0);
	n = 0;
	for (int i = 0; i < 3; i++) {
		a = accept4(lfd, NULL, NULL, SOCK_NONBLOCK);
		if (a < 0) {
			say("accept #%d -> %s", i + 1, tl_en(errno));
			break;
		}
		n++;
		close(a);
	}
	say("accepted %d", n);
	ep_show("all accepted", ep, 100);
	close(c);
	if (k >= 0)
		syscall(SYS_close, k);
	close(ep);
	set_nb(lfd, false);
}

/* Non-blocking connect to a listener: EPOLLOUT, SO_ERROR 0. */
void case_nb_connect(void)
{
	enum { C };
	int ep = ep_new(), c, s, r;
	char b[128];

	c = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);
	r = connect(c, (struct sockaddr *)&laddr, sizeof(laddr));
	say("connect -> %s", r < 0 ? tl_en(errno) : "0");
	ep_add(ep, c, EPOLLOUT, C, "c");
	ep_settle(ep, 2000, C, EPOLLOUT, -1);
	ep_show("epoll", ep, 0);
	say("SO_ERROR -> %s", so_error(c));
	r = connect(c, (struct sockaddr *)&laddr, sizeof(laddr));
	say("connect again -> %s", r < 0 ? tl_en(errno) : "0");
	r = connect(c, (struct sockaddr *)&laddr, sizeof(laddr));
	say("connect a third time -> %s", r < 0 ? tl_en(errno) : "0");
	s = accept_nb();
	say("accept -> %s", res(s));
	if (s >= 0) {
		xsend(s, "n");
		ep_ctl(ep, EPOLL_CTL_MOD, c, EPOLLIN | EPOLLOUT, C, "c");
		ep_settle(ep, 2000, C, EPOLLIN, -1);
		ep_show("peer sent", ep, 0);
		say("c recv -> %s", recv_str(c, 64, b, sizeof(b)));
		close(s);
	}
	close(c);
	close(ep);

	c = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);
	r = connect(c, (struct sockaddr *)&laddr, sizeof(laddr));
	say("poll: connect -> %s", r < 0 ? tl_en(errno) : "0");
	{
		struct pollfd q = {.fd = c, .events = POLLOUT};
		const char *nm[] = {"c"};

		poll_show("poll(POLLOUT, 3000)", &q, nm, 1, 3000);
	}
	say("poll: SO_ERROR -> %s", so_error(c));
	s = accept_nb();
	say("poll: accept -> %s", res(s));
	if (s >= 0)
		close(s);
	close(c);

	c = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);
	r = connect(c, (struct sockaddr *)&laddr, sizeof(laddr));
	say("select: connect -> %s", r < 0 ? tl_en(errno) : "0");
	{
		struct sfd f[1] = {{c, "c", true, true}};

		select_show("select(r+w, 3000)", f, 1, 3000);
	}
	say("select: SO_ERROR -> %s", so_error(c));
	s = accept_nb();
	say("select: accept -> %s", res(s));
	if (s >= 0)
		close(s);
	close(c);
}

/* Non-blocking connect to a port nobody listens on (TCP nor RDMA). */
void case_refused(void)
{
	enum { C };
	struct sockaddr_in dst = {.sin_family = AF_INET, .sin_addr = bind_ip};
	socklen_t len = sizeof(dst);
	int c, ep, r;

	/* a free port: bound once, then released */
	c = socket(AF_INET, SOCK_STREAM, 0);
	if (bind(c, (struct sockaddr *)&dst, sizeof(dst)) < 0 ||
	    getsockname(c, (struct sockaddr *)&dst, &len) < 0) {
		say("no free port: %s", tl_en(errno));
		close(c);
		return;
	}
	close(c);

	c = socket(AF_INET, SOCK_STREAM, 0);
	say("blocking connect -> %s",
	    res(connect(c, (struct sockaddr *)&dst, sizeof(dst))));
	close(c);

	ep = ep_new();
	c = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);
	ep_add(ep, c, EPOLLIN | EPOLLOUT | EPOLLRDHUP, C, "c");
	r = connect(c, (struct sockaddr *)&dst, sizeof(dst));
	say("registered before: connect -> %s", r < 0 ? tl_en(errno) : "0");
	ep_settle(ep, 2000, C, EPOLLERR, -1);
	ep_show("registered before: epoll", ep, 0);
	say("registered before: SO_ERROR -> %s", so_error(c));
	say("registered before: SO_ERROR again -> %s", so_error(c));
	close(c);
	close(ep);

	ep = ep_new();
	c = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);
	r = connect(c, (struct sockaddr *)&dst, sizeof(dst));
	say("registered after: connect -> %s", r < 0 ? tl_en(errno) : "0");
	ep_add(ep, c, EPOLLOUT | EPOLLET, C, "c");
	ep_show("registered after (ET): epoll", ep, 2000);
	ep_show("registered after (ET): again", ep, 100);
	say("registered after: SO_ERROR -> %s", so_error(c));
	close(c);
	close(ep);

	c = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);
	r = connect(c, (struct sockaddr *)&dst, sizeof(dst));
	say("poll: connect -> %s", r < 0 ? tl_en(errno) : "0");
	{
		struct pollfd q = {.fd = c, .events = POLLOUT};
		const char *nm[] = {"c"};

		poll_show("poll(POLLOUT, 3000)", &q, nm, 1, 3000);
	}
	say("poll: SO_ERROR -> %s", so_error(c));
	close(c);

	c = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);
	r = connect(c, (struct sockaddr *)&dst, sizeof(dst));
	say("select: connect -> %s", r < 0 ? tl_en(errno) : "0");
	{
		struct sfd f[1] = {{c, "c", true, true}};

		select_show("select(r+w, 3000)", f, 1, 3000);
	}
	say("select: SO_ERROR -> %s", so_error(c));
	close(c);
}

/* poll and ppoll over a pipe (kernel) and RDMA fds. */
