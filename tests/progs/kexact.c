/* SPDX-License-Identifier: MIT */
/*
 * kexact: signals, hang-ups and timeouts on TCP sockets, printed as a
 * transcript (issue 15).  Plain socket API only: run it over kernel TCP and
 * under the shim (LD_PRELOAD, ERDMA_SHIM=require) and the transcripts must
 * be equal.
 *
 *   kexact ADDR [CASE...]
 *
 * One process plays both ends: it listens on ADDR (port 0) and connects to
 * itself, so under the shim both ends of every connection are rsockets.
 * Each case prints "CASE: what -> result".  Durations are printed as
 * classes ("now" < 0.2 s, "0.2-1s", "1-2.5s", "later" >= 2.5 s) chosen so
 * that every expected answer sits far from a class boundary.  The delays
 * here are the behaviour under test (a peer that answers after 500 ms, a
 * timer that fires every 50 ms), never a way to order two threads: every
 * cross-thread step waits for the event it needs.  A watchdog ends the
 * process after 100 s.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/sockios.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/ioctl.h>
#include <sys/select.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/resource.h>
#include <sys/time.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#include "testlib.h"

static struct sockaddr_in laddr;
static int lfd = -1;
static const char *cur = "main";

static void say(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void say(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	tl_vsay(cur, fmt, ap);
	va_end(ap);
}

static const char *dur(int64_t ms)
{
	if (ms < 200)
		return "now";
	if (ms < 1000)
		return "0.2-1s";
	if (ms < 2500)
		return "1-2.5s";
	return "later";
}

/*
 * How long a cancelled thread took to be joined.  It waits for data that
 * never comes, so being joined at all shows the cancel acted; the class
 * is coarse because a cancel and a join cross the scheduler twice, which
 * in an emulated bed under load has taken over 0.2 s over kernel TCP too.
 * A cancel that waited for a timeout of its own would still show.
 */
static const char *join_dur(int64_t ms)
{
	if (ms < 1000)
		return "within 1s";
	return ms < 2500 ? "after 1-2.5s" : "after later";
}

/* Join th, waiting at most secs: 0, or the error (ETIMEDOUT: it runs
 * on, and the case says so rather than hang the suite). */
static int join_within(pthread_t th, int secs)
{
	struct timespec dl;

	clock_gettime(CLOCK_REALTIME, &dl);
	dl.tv_sec += secs;
	return pthread_timedjoin_np(th, NULL, &dl);
}

/* "N" for a count, or the errno name. */
static const char *rstr(long r, char *buf, size_t len)
{
	if (r < 0)
		return tl_en(errno);
	snprintf(buf, len, "%ld", r);
	return buf;
}

/* ---- connections to ourselves ---------------------------------------- */

struct pair {
	int c, s;
};

static int accept_wait(void)
{
	struct pollfd p = {.fd = lfd, .events = POLLIN};

	if (poll(&p, 1, 10000) != 1)
		return -1;
	return accept(lfd, NULL, NULL);
}

static int mkpair(struct pair *p)
{
	p->s = -1;
	p->c = socket(AF_INET, SOCK_STREAM, 0);
	if (p->c < 0 ||
	    connect(p->c, (struct sockaddr *)&laddr, sizeof(laddr)) < 0) {
		say("pair: connect: %s", tl_en(errno));
		if (p->c >= 0)
			close(p->c);
		return -1;
	}
	p->s = accept_wait();
	if (p->s < 0) {
		say("pair: accept: %s", tl_en(errno));
		close(p->c);
		return -1;
	}
	return 0;
}

static void unpair(struct pair *p)
{
	if (p->c >= 0)
		close(p->c);
	if (p->s >= 0)
		close(p->s);
	p->c = p->s = -1;
}

static void set_nb(int fd, bool on)
{
	int fl = fcntl(fd, F_GETFL);

	fcntl(fd, F_SETFL, on ? fl | O_NONBLOCK : fl & ~O_NONBLOCK);
}

static bool wait_readable(int fd)
{
	struct pollfd p = {.fd = fd, .events = POLLIN};

	return poll(&p, 1, 10000) == 1;
}

/* ---- signals --------------------------------------------------------- */

static volatile sig_atomic_t handled;

static void on_sig(int sig)
{
	(void)sig;
	handled++;
}

static void catch (int sig, int flags)
{
	struct sigaction sa = {.sa_handler = on_sig, .sa_flags = flags};

	sigemptyset(&sa.sa_mask);
	sigaction(sig, &sa, NULL);
	handled = 0;
}

static void uncatch(int sig)
{
	signal(sig, SIG_IGN);
}

/*
 * A timer that sends SIGALRM to this thread only (other threads, the
 * shim's or librdmacm's included, never take it), not armed yet.
 */
static timer_t thread_timer_new(void)
{
	struct sigevent sev = {.sigev_notify = SIGEV_THREAD_ID,
			       .sigev_signo = SIGALRM};
	timer_t t;

	sev._sigev_un._tid = (pid_t)syscall(SYS_gettid);
	if (timer_create(CLOCK_MONOTONIC, &sev, &t) < 0) {
		say("timer_create: %s", tl_en(errno));
		exit(1);
	}
	return t;
}

/* The same, every period_ms from now. */
static timer_t thread_timer(int period_ms)
{
	struct itimerspec its = {{0, period_ms * 1000000L},
				 {0, period_ms * 1000000L}};
	timer_t t = thread_timer_new();

	timer_settime(t, 0, &its, NULL);
	return t;
}

/* A thread that writes msg to fd after delay_ms, SIGALRM blocked. */
struct later {
	pthread_t th;
	int fd, delay_ms;
	const char *msg;
	int conn; /* connect instead of writing */
};

static void *later_main(void *arg)
{
	struct later *l = arg;
	sigset_t all;

	sigfillset(&all);
	pthread_sigmask(SIG_BLOCK, &all, NULL);
	tl_sleep_ms(l->delay_ms);
	if (l->conn) {
		l->fd = socket(AF_INET, SOCK_STREAM, 0);
		if (connect(l->fd, (struct sockaddr *)&laddr, sizeof(laddr)) <
		    0)
			say("later: connect: %s", tl_en(errno));
	} else if (send(l->fd, l->msg, strlen(l->msg), MSG_NOSIGNAL) < 0) {
		say("later: send: %s", tl_en(errno));
	}
	return NULL;
}

static void later_start(struct later *l, int fd, const char *msg, int delay_ms)
{
	*l = (struct later){.fd = fd, .msg = msg, .delay_ms = delay_ms};
	pthread_create(&l->th, NULL, later_main, l);
}

static void later_connect(struct later *l, int delay_ms)
{
	*l = (struct later){.fd = -1, .delay_ms = delay_ms, .conn = 1};
	pthread_create(&l->th, NULL, later_main, l);
}

static void later_join(struct later *l)
{
	pthread_join(l->th, NULL);
}

/* ---- cases ----------------------------------------------------------- */

/*
 * ppoll/pselect/epoll_pwait with a signal pending and blocked, and a wait
 * mask that unblocks it: the kernel delivers it at once, EINTR.
 */
static void pending_one(const char *what, int fd, int ep)
{
	sigset_t block, empty;
	int64_t t0;
	int r = 0;

	sigemptyset(&block);
	sigaddset(&block, SIGUSR1);
	sigemptyset(&empty);
	catch (SIGUSR1, 0);
	pthread_sigmask(SIG_BLOCK, &block, NULL);
	raise(SIGUSR1);
	t0 = tl_now_ms();
	if (!strcmp(what, "epoll_pwait")) {
		struct epoll_event ev;

		r = epoll_pwait(ep, &ev, 1, 3000, &empty);
	} else if (!strcmp(what, "ppoll")) {
		struct pollfd p = {.fd = fd, .events = POLLIN};
		struct timespec ts = {3, 0};

		r = ppoll(&p, 1, &ts, &empty);
	} else {
		fd_set rd;
		struct timespec ts = {3, 0};

		FD_ZERO(&rd);
		FD_SET(fd, &rd);
		r = pselect(fd + 1, &rd, NULL, NULL, &ts, &empty);
	}
	say("%s, SIGUSR1 pending, empty mask -> %d %s after %s, handler ran %s",
	    what, r, r < 0 ? tl_en(errno) : "-", dur(tl_now_ms() - t0),
	    handled ? "yes" : "no");
	pthread_sigmask(SIG_UNBLOCK, &block, NULL);
	uncatch(SIGUSR1);
}

static void case_pending(void)
{
	struct pair p;
	struct epoll_event ev = {.events = EPOLLIN};
	int ep;

	if (mkpair(&p))
		return;
	ep = epoll_create1(0);
	epoll_ctl(ep, EPOLL_CTL_ADD, p.s, &ev);
	pending_one("epoll_pwait", p.s, ep);
	pending_one("ppoll", p.s, ep);
	pending_one("pselect", p.s, ep);
	close(ep);
	unpair(&p);
}

/*
 * A blocking recv while a timer interrupts it every 50 ms and the peer
 * answers after 500 ms: restarted under SA_RESTART (signal(7)), EINTR
 * without it, EINTR with SA_RESTART once SO_RCVTIMEO is set.
 */
static void restart_recv(const char *what, int flags, int rcvtimeo_ms)
{
	struct pair p;
	struct later l;
	char buf[16], n[24];
	timer_t t;
	int64_t t0;
	long r;

	if (mkpair(&p))
		return;
	if (rcvtimeo_ms) {
		struct timeval tv = {rcvtimeo_ms / 1000,
				     (rcvtimeo_ms % 1000) * 1000};

		setsockopt(p.s, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	}
	catch (SIGALRM, flags);
	later_start(&l, p.c, "x", 500);
	t = thread_timer(50);
	t0 = tl_now_ms();
	r = recv(p.s, buf, sizeof(buf), 0);
	say("recv, %s, peer writes after 0.5 s -> %s after %s, interrupted %s",
	    what, rstr(r, n, sizeof(n)), dur(tl_now_ms() - t0),
	    handled ? "yes" : "no");
	timer_delete(t);
	uncatch(SIGALRM);
	later_join(&l);
	unpair(&p);
}

static void restart_accept(void)
{
	struct later l;
	timer_t t;
	int64_t t0;
	int fd;

	catch (SIGALRM, SA_RESTART);
	later_connect(&l, 500);
	t = thread_timer(50);
	t0 = tl_now_ms();
	fd = accept(lfd, NULL, NULL);
	say("accept, SA_RESTART, peer connects after 0.5 s -> %s after %s, "
	    "interrupted %s",
	    fd >= 0 ? "fd" : tl_en(errno), dur(tl_now_ms() - t0),
	    handled ? "yes" : "no");
	timer_delete(t);
	uncatch(SIGALRM);
	later_join(&l);
	if (fd < 0)
		fd = accept_wait(); /* the connection came anyway */
	if (fd >= 0)
		close(fd);
	if (l.fd >= 0)
		close(l.fd);
}

static void case_restart(void)
{
	restart_recv("SA_RESTART", SA_RESTART, 0);
	restart_recv("no SA_RESTART", 0, 0);
	restart_recv("SA_RESTART and SO_RCVTIMEO 5 s", SA_RESTART, 5000);
	/* another handler without SA_RESTART, its signal never sent: the
	 * kernel goes by the signal that came */
	catch (SIGUSR2, 0);
	restart_recv("SA_RESTART, SIGUSR2 caught without it", SA_RESTART, 0);
	uncatch(SIGUSR2);
	restart_accept();
}

static const char *ev_str(uint32_t m, char *buf, size_t len)
{
	static const struct {
		uint32_t bit;
		const char *name;
	} names[] = {{EPOLLIN, "IN"},
		     {EPOLLOUT, "OUT"},
		     {EPOLLERR, "ERR"},
		     {EPOLLHUP, "HUP"},
		     {EPOLLRDHUP, "RDHUP"}};
	size_t o = 0;

	buf[0] = 0;
	for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++)
		if (m & names[i].bit)
			o += (size_t)snprintf(buf + o, len - o, "%s%s",
					      o ? "|" : "", names[i].name);
	if (!o)
		snprintf(buf, len, "none");
	return buf;
}

/* Fill c's send path until EAGAIN: the peer must read before more goes. */
static void fill(int c)
{
	static char chunk[65536];

	set_nb(c, true);
	for (int i = 0; i < 100000; i++)
		if (send(c, chunk, sizeof(chunk), MSG_NOSIGNAL) < 0)
			break;
}

/*
 * A sender whose window is full waits for OUT only; the peer closes with
 * data unread (TCP: a reset).  The kernel reports ERR and HUP, which no
 * mask can hide, at once; the wait must not last.
 */
static void case_hup_out(void)
{
	char b1[64], n[24];
	struct pair p;
	struct epoll_event ev = {.events = EPOLLOUT}, got = {0};
	struct pollfd pf;
	int64_t t0;
	int ep, r;

	if (mkpair(&p))
		return;
	fill(p.c);
	ep = epoll_create1(0);
	epoll_ctl(ep, EPOLL_CTL_ADD, p.c, &ev);
	r = epoll_wait(ep, &got, 1, 0);
	say("full window, epoll OUT only -> %d", r);
	close(p.s);
	p.s = -1;
	t0 = tl_now_ms();
	r = epoll_wait(ep, &got, 1, 5000);
	say("peer closed with data unread: epoll_wait(OUT only) -> %d %s after "
	    "%s",
	    r, r > 0 ? ev_str(got.events, b1, sizeof(b1)) : "-",
	    dur(tl_now_ms() - t0));
	pf = (struct pollfd){.fd = p.c, .events = POLLOUT};
	t0 = tl_now_ms();
	r = poll(&pf, 1, 5000);
	say("poll(POLLOUT only) -> %d %s after %s", r,
	    ev_str((uint32_t)pf.revents, b1, sizeof(b1)),
	    dur(tl_now_ms() - t0));
	pf = (struct pollfd){.fd = p.c, .events = 0};
	r = poll(&pf, 1, 5000);
	say("poll(no events) -> %d %s", r,
	    ev_str((uint32_t)pf.revents, b1, sizeof(b1)));
	r = (int)send(p.c, "x", 1, MSG_NOSIGNAL);
	say("then a send -> %s", r < 0 ? "fails" : rstr(r, n, sizeof(n)));
	close(ep);
	unpair(&p);
}

/* shutdown(SHUT_RD): queued data still reads, then EOF without waiting. */
static void case_shut_rd(void)
{
	char buf[16], n[24];
	struct pair p;
	long r;

	if (mkpair(&p))
		return;
	send(p.c, "hello", 5, 0);
	wait_readable(p.s);
	say("shutdown(SHUT_RD) -> %s",
	    shutdown(p.s, SHUT_RD) ? tl_en(errno) : "ok");
	r = recv(p.s, buf, sizeof(buf), 0);
	say("recv with 5 bytes queued -> %s", rstr(r, n, sizeof(n)));
	r = recv(p.s, buf, sizeof(buf), 0);
	say("recv again -> %s", rstr(r, n, sizeof(n)));
	unpair(&p);
}

/* Zero-length reads; MSG_PEEK|MSG_WAITALL waits for all of it. */
static void case_recv0(void)
{
	char buf[16], n[24];
	struct pair p;
	struct later l;
	int64_t t0;
	long r;

	if (mkpair(&p))
		return;
	r = recv(p.s, buf, 0, MSG_DONTWAIT);
	say("recv(0, MSG_DONTWAIT), nothing queued -> %s",
	    rstr(r, n, sizeof(n)));
	later_start(&l, p.c, "ab", 300);
	t0 = tl_now_ms();
	r = recv(p.s, buf, 0, 0);
	say("blocking recv(0), 2 bytes after 0.3 s -> %s after %s",
	    rstr(r, n, sizeof(n)), dur(tl_now_ms() - t0));
	later_join(&l);
	wait_readable(p.s);
	r = recv(p.s, buf, 0, 0);
	say("recv(0), 2 bytes queued -> %s", rstr(r, n, sizeof(n)));
	later_start(&l, p.c, "cd", 300);
	t0 = tl_now_ms();
	r = recv(p.s, buf, 4, MSG_PEEK | MSG_WAITALL);
	say("recv(4, PEEK|WAITALL), 2 queued, 2 more after 0.3 s -> %s "
	    "\"%.*s\" after %s",
	    rstr(r, n, sizeof(n)), r > 0 ? (int)r : 0, buf,
	    dur(tl_now_ms() - t0));
	later_join(&l);
	r = recv(p.s, buf, 4, MSG_WAITALL);
	say("then recv(4, WAITALL) -> %s \"%.*s\"", rstr(r, n, sizeof(n)),
	    r > 0 ? (int)r : 0, buf);
	unpair(&p);
}

/* Socket timeouts bound the whole call, not each internal wait. */
struct drip {
	pthread_t th;
	int fd;
};

static void *drip_main(void *arg)
{
	struct drip *d = arg;

	for (int i = 0; i < 10; i++) {
		tl_sleep_ms(100);
		send(d->fd, "z", 1, MSG_NOSIGNAL);
	}
	return NULL;
}

static void case_timeo(void)
{
	struct timeval tv = {0, 300000};
	char buf[16], n[24];
	struct pair p;
	struct drip d;
	int64_t t0;
	long r;
	int fd;

	if (mkpair(&p))
		return;
	setsockopt(p.s, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	d.fd = p.c;
	pthread_create(&d.th, NULL, drip_main, &d);
	t0 = tl_now_ms();
	r = recv(p.s, buf, 10, MSG_WAITALL);
	say("recv(10, WAITALL), SO_RCVTIMEO 0.3 s, a byte every 0.1 s -> %s "
	    "after %s",
	    r > 0 && r < 10 ? "part" : rstr(r, n, sizeof(n)),
	    dur(tl_now_ms() - t0));
	pthread_join(d.th, NULL);
	unpair(&p);

	/* the kernel's timeout bounds the whole send, however many times it
	 * waits for room: what fit is sent, the rest is not */
	if (mkpair(&p))
		return;
	setsockopt(p.c, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
	{
		size_t big = 64u << 20;
		char *m = calloc(1, big);

		t0 = tl_now_ms();
		r = m ? send(p.c, m, big, 0) : -1;
		say("send(64 MiB), SO_SNDTIMEO 0.3 s, the peer never reads -> "
		    "%s after %s",
		    r > 0 && (size_t)r < big ? "part" : rstr(r, n, sizeof(n)),
		    dur(tl_now_ms() - t0));
		free(m);
	}
	unpair(&p);

	setsockopt(lfd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	t0 = tl_now_ms();
	fd = accept(lfd, NULL, NULL);
	say("accept, SO_RCVTIMEO 0.3 s, nobody connects -> %s after %s",
	    fd >= 0 ? "fd" : tl_en(errno), dur(tl_now_ms() - t0));
	if (fd >= 0)
		close(fd);
	tv = (struct timeval){0, 0};
	setsockopt(lfd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
}

/* A second listener, as the process's own: polled once (this process
 * waits on it), never accepted from. */
static int listener2(struct sockaddr_in *a)
{
	socklen_t len = sizeof(*a);
	struct pollfd p;
	int l = socket(AF_INET, SOCK_STREAM, 0);

	*a = laddr;
	a->sin_port = 0;
	if (bind(l, (struct sockaddr *)a, sizeof(*a)) < 0 || listen(l, 8) < 0 ||
	    getsockname(l, (struct sockaddr *)a, &len) < 0)
		say("listener2: %s", tl_en(errno));
	p = (struct pollfd){.fd = l, .events = POLLIN};
	poll(&p, 1, 0);
	return l;
}

/*
 * close() or shutdown() of a listener with connections queued, never
 * accepted: their clients see the end at once (TCP: a reset), and after a
 * shutdown nothing more is accepted.
 */
static void case_lclose(void)
{
	struct timeval tv = {3, 0};
	struct sockaddr_in a;
	char buf[8];
	int64_t t0;
	int c[2], l;
	long r;

	for (int how = 0; how < 2; how++) {
		l = listener2(&a);
		for (int i = 0; i < 2; i++) {
			c[i] = socket(AF_INET, SOCK_STREAM, 0);
			r = connect(c[i], (struct sockaddr *)&a, sizeof(a));
			say("connect %d to a listener that never accepts -> %s",
			    i, r ? tl_en(errno) : "ok");
			setsockopt(c[i], SOL_SOCKET, SO_RCVTIMEO, &tv,
				   sizeof(tv));
		}
		t0 = tl_now_ms();
		if (how)
			say("shutdown(listener) -> %s",
			    shutdown(l, SHUT_RDWR) ? tl_en(errno) : "ok");
		else
			close(l);
		/* not in the transcript: the shim's may take a moment */
		fprintf(stderr, "lclose: %s of the listener took %lld ms\n",
			how ? "shutdown" : "close",
			(long long)(tl_now_ms() - t0));
		for (int i = 0; i < 2; i++) {
			t0 = tl_now_ms();
			r = recv(c[i], buf, sizeof(buf), 0);
			say("%s: queued client %d's recv -> %s after %s",
			    how ? "shutdown" : "close", i,
			    r == 0 || (r < 0 && errno == ECONNRESET) ? "ended"
			    : r < 0 ? tl_en(errno)
				    : "data",
			    dur(tl_now_ms() - t0));
			close(c[i]);
		}
		if (how) {
			c[0] = socket(AF_INET, SOCK_STREAM, 0);
			r = connect(c[0], (struct sockaddr *)&a, sizeof(a));
			say("connect after shutdown -> %s",
			    r ? tl_en(errno) : "ok");
			close(c[0]);
			close(l);
		}
	}
}

/*
 * accept's address arguments on a connection that is queued: with no
 * address the length is left as it was; an address with no length, a
 * negative length or an address that is not mapped takes the connection
 * and drops it (EFAULT, EINVAL), and its client sees the end; a closed
 * accepted connection's client too.  Bad pointers: volatile, so that the
 * compiler does not see them.
 */
static void *volatile unmapped = (void *)16;

static void case_acceptargs(void)
{
	static const char *const what[] = {
	    "no address, length 77", "an address, no length",
	    "an address, length -1", "an unmapped address, length 16"};
	struct timeval tv = {3, 0};
	struct sockaddr_in a, peer;
	socklen_t len;
	char buf[8];
	int c, l, fd = -1;
	long r;

	l = listener2(&a);
	for (int i = 0; i < 4; i++) {
		c = socket(AF_INET, SOCK_STREAM, 0);
		if (connect(c, (struct sockaddr *)&a, sizeof(a)) < 0) {
			say("connect %d -> %s", i, tl_en(errno));
			close(c);
			continue;
		}
		setsockopt(c, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
		len = i == 2 ? (socklen_t)-1 : i ? sizeof(peer) : 77;
		if (i == 0)
			fd = accept(l, NULL, &len);
		else if (i == 1)
			fd = accept(l, (struct sockaddr *)&peer, NULL);
		else
			fd = accept(l, i == 2 ? (void *)&peer : unmapped, &len);
		say("accept(%s) -> %s, length %d", what[i],
		    fd >= 0 ? "a connection" : tl_en(errno), (int)len);
		if (fd >= 0)
			close(fd);
		r = recv(c, buf, sizeof(buf), 0);
		say("  its client's recv -> %s",
		    r == 0 || (r < 0 && errno == ECONNRESET) ? "ended"
		    : r < 0				     ? tl_en(errno)
							     : "data");
		close(c);
	}
	close(l);
}

static void *recv_main(void *arg)
{
	char b;

	recv(*(int *)arg, &b, 1, 0);
	return NULL;
}

static void *poll_main(void *arg)
{
	struct pollfd p = {.fd = *(int *)arg, .events = POLLIN};

	poll(&p, 1, -1);
	return NULL;
}

static void *epwait_main(void *arg)
{
	int ep = ((int *)arg)[1];
	struct epoll_event ev;

	epoll_wait(ep, &ev, 1, -1);
	return NULL;
}

/*
 * pthread_cancel of a thread blocked in poll or epoll_wait on a connection:
 * it ends at once, and the socket's close then ends the connection for the
 * peer (the wait's hold on it went with the thread).
 */
static void cancel_in(const char *what, void *(*fn)(void *))
{
	struct timeval tv = {3, 0};
	struct epoll_event ev = {.events = EPOLLIN};
	struct pair p;
	pthread_t th;
	int arg[2], r;
	char buf[8], n[24];
	int64_t t0;

	if (mkpair(&p))
		return;
	arg[0] = p.s;
	arg[1] = epoll_create1(EPOLL_CLOEXEC);
	epoll_ctl(arg[1], EPOLL_CTL_ADD, p.s, &ev);
	pthread_create(&th, NULL, fn, arg);
	t0 = tl_now_ms();
	pthread_cancel(th);
	r = join_within(th, 3);
	say("cancel a thread blocked in %s -> %s %s", what,
	    r ? "not joined" : "joined", join_dur(tl_now_ms() - t0));
	close(arg[1]);
	close(p.s);
	p.s = -1;
	setsockopt(p.c, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	r = (int)recv(p.c, buf, sizeof(buf), 0);
	say("close of the socket it waited on: its peer reads -> %s",
	    r == 0 ? "EOF" : rstr(r, n, sizeof(n)));
	unpair(&p);
}

static long cpu_ms(void)
{
	struct rusage ru;

	getrusage(RUSAGE_SELF, &ru);
	return (ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) * 1000L +
	       (ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) / 1000;
}

/*
 * pthread_cancel of a thread blocked in recv: it ends at once; the rest of
 * the process still sleeps when it waits (no spinning), and closing the
 * socket then ends the connection for the peer.
 */
static void case_cancel(void)
{
	struct timeval tv = {3, 0};
	struct pair p1, p2;
	struct later l;
	pthread_t th;
	char buf[8], n[24];
	int64_t t0;
	long r, c0;

	if (mkpair(&p1) || mkpair(&p2))
		return;
	pthread_create(&th, NULL, recv_main, &p1.s);
	t0 = tl_now_ms();
	pthread_cancel(th);
	r = join_within(th, 3);
	say("cancel a thread blocked in recv -> %s %s",
	    r ? "not joined" : "joined", join_dur(tl_now_ms() - t0));
	later_start(&l, p2.c, "x", 500);
	c0 = cpu_ms();
	t0 = tl_now_ms();
	r = recv(p2.s, buf, sizeof(buf), 0);
	say("then another recv, data after 0.5 s -> %s after %s, CPU %s",
	    rstr(r, n, sizeof(n)), dur(tl_now_ms() - t0),
	    cpu_ms() - c0 < 250 ? "idle" : "busy");
	later_join(&l);
	close(p1.s);
	p1.s = -1;
	setsockopt(p1.c, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	r = recv(p1.c, buf, sizeof(buf), 0);
	say("close of the cancelled thread's socket: its peer reads -> %s",
	    r == 0 ? "EOF" : rstr(r, n, sizeof(n)));
	unpair(&p1);
	unpair(&p2);
}

/* The lowest fd number free now (what the next socket would get). */
static int lowest_free_fd(void)
{
	int fd = dup(0);

	close(fd);
	return fd;
}

struct pending {
	int fd;
	pthread_barrier_t b;
};

/* Calls poll only once the cancel is pending (barriers are not
 * cancellation points). */
static void *poll_pending_main(void *arg)
{
	struct pending *pe = arg;
	struct pollfd p = {.fd = pe->fd, .events = POLLIN};

	pthread_barrier_wait(&pe->b); /* main cancels us */
	pthread_barrier_wait(&pe->b);
	poll(&p, 1, 10000);
	return NULL;
}

/*
 * A thread that calls poll (with a timeout) on a connection while a cancel
 * is pending: poll, a cancellation point, acts on it at once, and leaves no
 * fd behind.
 */
static void cancel_pending(void)
{
	struct pending pe;
	struct pair p;
	pthread_t th;
	int64_t t0;
	int fd0, r;

	if (mkpair(&p))
		return;
	pe.fd = p.s;
	pthread_barrier_init(&pe.b, NULL, 2);
	fd0 = lowest_free_fd();
	pthread_create(&th, NULL, poll_pending_main, &pe);
	pthread_barrier_wait(&pe.b);
	t0 = tl_now_ms();
	pthread_cancel(th);
	pthread_barrier_wait(&pe.b);
	r = join_within(th, 3);
	say("cancel pending as a thread calls poll (10 s) -> %s %s, "
	    "lowest free fd %s",
	    r ? "not joined" : "joined", join_dur(tl_now_ms() - t0),
	    lowest_free_fd() == fd0 ? "as before" : "moved (an fd left open)");
	pthread_barrier_destroy(&pe.b);
	unpair(&p);
}

/* The same for a thread blocked in poll, then one in epoll_wait; and a
 * cancel already pending when poll is called. */
static void case_cancel_wait(void)
{
	cancel_in("poll", poll_main);
	cancel_in("epoll_wait", epwait_main);
	cancel_pending();
}

/*
 * siglongjmp out of a blocked call: a handler that leaves the call so
 * (alarm() bounding a recv, an interpreter's timeout) must leave nothing of
 * it behind -- the thread's later waits sleep and see the sockets, a cancel
 * still reaches it, and the sockets it waited on close for their peers.
 */
static __thread sigjmp_buf *jump_to;

static void on_jump(int sig)
{
	(void)sig;
	if (jump_to)
		siglongjmp(*jump_to, 1);
}

struct jumper {
	struct pair a, b, c, d; /* a, c, d: left by a jump; b: used after */
	int l;			/* a listener left by a jump out of accept */
};

enum jump_in { IN_RECV, IN_POLL, IN_EPOLL, IN_ACCEPT };

/* Block in recv, poll or epoll_wait on fd until a 50 ms alarm's handler
 * jumps. */
static void jump_out(const char *what, int fd, enum jump_in how)
{
	struct epoll_event ev = {.events = EPOLLIN};
	int ep = epoll_create1(EPOLL_CLOEXEC);
	struct itimerspec its = {{0, 0}, {0, 50 * 1000000L}};
	struct pollfd p = {.fd = fd, .events = POLLIN};
	int64_t t0 = tl_now_ms();
	timer_t t = thread_timer_new(); /* armed once the jump can land */
	sigjmp_buf jb;
	char c;

	if (how == IN_EPOLL)
		epoll_ctl(ep, EPOLL_CTL_ADD, fd, &ev);
	if (sigsetjmp(jb, 1) == 0) {
		jump_to = &jb;
		timer_settime(t, 0, &its, NULL);
		if (how == IN_POLL)
			poll(&p, 1, -1);
		else if (how == IN_EPOLL)
			epoll_wait(ep, &ev, 1, -1);
		else if (how == IN_ACCEPT)
			accept(fd, NULL, NULL);
		else
			recv(fd, &c, 1, 0);
		say("%s returned without the jump", what);
	} else {
		say("siglongjmp out of a blocked %s -> after %s", what,
		    dur(tl_now_ms() - t0));
	}
	jump_to = NULL;
	timer_delete(t);
	close(ep);
}

static void *jumper_main(void *arg)
{
	struct jumper *j = arg;
	struct pollfd p = {.fd = j->b.s, .events = POLLIN};
	char buf[8], n[24];
	struct later l;
	int64_t t0;
	long r, c0;
	int r0;

	jump_out("recv", j->a.s, IN_RECV);
	jump_out("poll", j->c.s, IN_POLL);
	jump_out("epoll_wait", j->d.s, IN_EPOLL);
	jump_out("accept", j->l, IN_ACCEPT);
	c0 = cpu_ms();
	later_start(&l, j->b.c, "x", 300);
	t0 = tl_now_ms();
	r = poll(&p, 1, 3000);
	say("then poll in that thread, data after 0.3 s -> %s (%s) after %s",
	    rstr(r, n, sizeof(n)), p.revents == POLLIN ? "IN" : "not IN",
	    dur(tl_now_ms() - t0));
	later_join(&l);
	r = recv(j->b.s, buf, sizeof(buf), 0);
	say("recv -> %s", rstr(r, n, sizeof(n)));
	later_start(&l, j->b.c, "y", 300);
	t0 = tl_now_ms();
	r = recv(j->b.s, buf, sizeof(buf), 0);
	say("recv, data after 0.3 s -> %s after %s; CPU over both waits %s",
	    rstr(r, n, sizeof(n)), dur(tl_now_ms() - t0),
	    cpu_ms() - c0 < 250 ? "idle" : "busy");
	later_join(&l);
	/* The shim's sleep runs with cancellation disabled: a jump out of
	 * it must not leave it so.  (Read, not shown by a pthread_cancel:
	 * under ASan a cancelled thread's unwinding gives false reports.) */
	pthread_setcancelstate(PTHREAD_CANCEL_ENABLE, &r0);
	say("that thread's cancellation -> %s",
	    r0 == PTHREAD_CANCEL_ENABLE ? "enabled" : "disabled");
	return NULL;
}

static void jumped_close(const char *what, struct pair *p)
{
	struct timeval tv = {3, 0};
	char buf[8], n[24];
	long r;

	close(p->s);
	p->s = -1;
	setsockopt(p->c, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	r = recv(p->c, buf, sizeof(buf), 0);
	say("close of the socket left by the jump out of %s: its peer reads "
	    "-> %s",
	    what, r == 0 ? "EOF" : rstr(r, n, sizeof(n)));
}

/* The listener a jump left out of accept, closed: its port refuses. */
static void jumped_listener(int l, const struct sockaddr_in *a)
{
	int c = socket(AF_INET, SOCK_STREAM, 0);

	close(l);
	say("close of the listener left by the jump out of accept: a connect "
	    "to it -> %s",
	    connect(c, (const struct sockaddr *)a, sizeof(*a)) ? tl_en(errno)
							       : "ok");
	close(c);
}

static void case_longjmp(void)
{
	struct sigaction sa = {.sa_handler = on_jump};
	struct sockaddr_in la;
	struct jumper j;
	pthread_t th;

	if (mkpair(&j.a) || mkpair(&j.b) || mkpair(&j.c) || mkpair(&j.d))
		return;
	j.l = listener2(&la);
	sigemptyset(&sa.sa_mask);
	sigaction(SIGALRM, &sa, NULL);
	pthread_create(&th, NULL, jumper_main, &j);
	if (join_within(th, 20))
		say("that thread did not end");
	uncatch(SIGALRM);
	jumped_close("recv", &j.a);
	jumped_close("poll", &j.c);
	jumped_close("epoll_wait", &j.d);
	jumped_listener(j.l, &la);
	unpair(&j.a);
	unpair(&j.b);
	unpair(&j.c);
	unpair(&j.d);
}

/*
 * alarm() in the main thread, blocked in recv, with another thread that
 * lets SIGALRM through: the kernel gives a process's signal to its main
 * thread when that thread takes it, so the recv ends (EINTR) and the
 * handler runs there.
 */
static volatile pid_t alarm_tid;

static void on_alarm_tid(int sig)
{
	(void)sig;
	alarm_tid = (pid_t)syscall(SYS_gettid);
}

static void *bystander_main(void *arg)
{
	char c;

	(void)!read(*(int *)arg, &c, 1); /* until the case ends */
	return NULL;
}

static void case_alarm(void)
{
	struct sigaction sa = {.sa_handler = on_alarm_tid};
	struct itimerval it = {{0, 0}, {0, 50000}};
	int pp[2] = {-1, -1};
	char buf[8], n[24];
	struct pair p;
	pthread_t th;
	int64_t t0;
	long r;

	if (mkpair(&p) || pipe(pp) < 0)
		return;
	sigemptyset(&sa.sa_mask);
	sigaction(SIGALRM, &sa, NULL);
	pthread_create(&th, NULL, bystander_main, &pp[0]);
	alarm_tid = 0;
	t0 = tl_now_ms();
	setitimer(ITIMER_REAL, &it, NULL);
	r = recv(p.s, buf, sizeof(buf), 0);
	say("setitimer's SIGALRM, main thread in recv, another thread taking "
	    "it too -> %s after %s; the handler ran on %s",
	    rstr(r, n, sizeof(n)), dur(tl_now_ms() - t0),
	    alarm_tid == (pid_t)syscall(SYS_gettid) ? "the main thread"
	    : alarm_tid				    ? "another thread"
						    : "no thread");
	(void)!write(pp[1], "x", 1);
	pthread_join(th, NULL);
	uncatch(SIGALRM);
	close(pp[0]);
	close(pp[1]);
	unpair(&p);
}

/*
 * A process-directed signal that every thread of the program blocks stays
 * pending until one unblocks it, or is read from a signalfd: the threads
 * the shim or librdmacm start must not take it (issue 42: PostgreSQL's
 * postmaster blocks its signals except inside select, and its handlers ran
 * on an rsockets service thread, concurrently with its main loop).  The
 * connection is made first, with the signals unblocked, as the postmaster
 * listens and accepts: any service thread exists by then.
 */
static volatile int usr1_runs;

static void on_usr1(int sig)
{
	(void)sig;
	alarm_tid = (pid_t)syscall(SYS_gettid);
	usr1_runs++;
}

static const char *who(void)
{
	if (!alarm_tid)
		return "no thread";
	return alarm_tid == (pid_t)syscall(SYS_gettid) ? "this thread"
						       : "another thread";
}

static void case_sigmask(void)
{
	struct sigaction sa = {.sa_handler = on_usr1};
	struct signalfd_siginfo si;
	sigset_t set, old;
	char c = 'x', n[24];
	struct pair p;
	int sfd;
	long r;

	if (mkpair(&p))
		return;
	sigemptyset(&sa.sa_mask);
	sigaction(SIGUSR1, &sa, NULL);
	sigaction(SIGUSR2, &sa, NULL);
	sigemptyset(&set);
	sigaddset(&set, SIGUSR1);
	sigaddset(&set, SIGUSR2);
	pthread_sigmask(SIG_BLOCK, &set, &old);
	alarm_tid = 0;
	usr1_runs = 0;
	kill(getpid(), SIGUSR1);
	/* a round trip on the connection: time for any thread to take it */
	r = send(p.c, &c, 1, 0) == 1 ? recv(p.s, &c, 1, 0) : -1;
	say("SIGUSR1 sent to the process, blocked in this thread -> round trip "
	    "%s; the handler ran %d times, on %s",
	    rstr(r, n, sizeof(n)), usr1_runs, who());
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	say("unblocked -> the handler ran %d times, on %s", usr1_runs, who());
	pthread_sigmask(SIG_BLOCK, &set, NULL);
	sfd = signalfd(-1, &set, SFD_CLOEXEC);
	alarm_tid = 0;
	usr1_runs = 0;
	kill(getpid(), SIGUSR2);
	r = poll(&(struct pollfd){.fd = sfd, .events = POLLIN}, 1, 1000);
	r = r == 1 ? read(sfd, &si, sizeof(si)) : -1;
	say("SIGUSR2 to the process, blocked, read from a signalfd -> %s, "
	    "signal %s; the handler ran %d times",
	    r == (long)sizeof(si) ? "read" : "nothing",
	    r == (long)sizeof(si) && si.ssi_signo == SIGUSR2 ? "SIGUSR2" : "-",
	    usr1_runs);
	close(sfd);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	uncatch(SIGUSR1);
	uncatch(SIGUSR2);
	unpair(&p);
}

/* A copy of an epoll fd made by fcntl(F_DUPFD) is the same epoll set. */
static void case_epdup(void)
{
	struct epoll_event ev = {.events = EPOLLIN}, got;
	struct pair p;
	struct later l;
	int64_t t0;
	int ep, ep2, r;

	if (mkpair(&p))
		return;
	ep = epoll_create1(0);
	epoll_ctl(ep, EPOLL_CTL_ADD, p.s, &ev);
	ep2 = fcntl(ep, F_DUPFD_CLOEXEC, 0);
	say("fcntl(epfd, F_DUPFD_CLOEXEC) -> %s",
	    ep2 >= 0 ? "fd" : tl_en(errno));
	later_start(&l, p.c, "x", 300);
	t0 = tl_now_ms();
	r = epoll_wait(ep2, &got, 1, 3000);
	say("epoll_wait on the copy, data after 0.3 s -> %d after %s", r,
	    dur(tl_now_ms() - t0));
	later_join(&l);
	close(ep);
	r = epoll_wait(ep2, &got, 1, 0);
	say("after close(original): the copy still shows it -> %d", r);
	close(ep2);
	unpair(&p);
}

/*
 * Is thread tid asleep in a wait (poll, ppoll, epoll_wait, epoll_pwait):
 * the kernel's, or the shim's sleep inside it?  Waits up to 10 s.
 */
static bool asleep_in_wait(pid_t tid)
{
	static const long waits[] = {SYS_poll, SYS_ppoll, SYS_epoll_wait,
				     SYS_epoll_pwait, 441 /* epoll_pwait2 */};
	char path[64], st[512];
	int64_t end = tl_now_ms() + 10000;

	while (tl_now_ms() < end) {
		FILE *f;
		char *p;
		long nr = -1;
		bool sleeping = false;

		snprintf(path, sizeof(path), "/proc/self/task/%d/stat", tid);
		f = fopen(path, "r");
		if (f && fgets(st, sizeof(st), f) && (p = strrchr(st, ')')))
			sleeping = p[2] == 'S';
		if (f)
			fclose(f);
		snprintf(path, sizeof(path), "/proc/self/task/%d/syscall", tid);
		f = fopen(path, "r");
		if (f && fscanf(f, "%ld", &nr) != 1)
			nr = -1;
		if (f)
			fclose(f);
		for (size_t i = 0;
		     sleeping && i < sizeof(waits) / sizeof(*waits); i++)
			if (nr == waits[i])
				return true;
		sched_yield();
	}
	return false;
}

struct epclose {
	int ep, n, err;
	pid_t tid;
	int64_t ms;
	uint64_t data[4];
};

static void *epclose_main(void *arg)
{
	struct epclose *e = arg;
	struct epoll_event ev[4];
	int64_t t0 = tl_now_ms();

	__atomic_store_n(&e->tid, (pid_t)syscall(SYS_gettid), __ATOMIC_RELEASE);
	e->n = epoll_wait(e->ep, ev, 4, 3000);
	e->err = errno;
	e->ms = tl_now_ms() - t0;
	for (int i = 0; i < e->n; i++)
		e->data[i] = ev[i].data.u64;
	return NULL;
}

static const char *tags(const uint64_t *d, int n, char *buf, size_t len)
{
	static const char *name[] = {"?", "conn", "eventfd"};

	buf[0] = 0;
	for (int i = 0; i < n; i++)
		snprintf(buf + strlen(buf), len - strlen(buf), "%s%s",
			 i ? "," : "", name[d[i] < 3 ? d[i] : 0]);
	return n > 0 ? buf : "-";
}

/*
 * An epoll fd closed while another thread waits on it, its number then
 * taken by a new epoll fd with a ready eventfd: the waiter still waits on
 * the set it entered (the kernel holds that file), and wakes for its
 * connection's data only.
 */
static void case_epclose(void)
{
	struct epoll_event ev = {.events = EPOLLIN};
	struct epoll_event got[4];
	struct epclose e = {0};
	uint64_t d[4];
	char b[64];
	struct pair p;
	pthread_t th;
	pid_t tid;
	int ep2, efd, r;

	if (mkpair(&p))
		return;
	e.ep = epoll_create1(EPOLL_CLOEXEC);
	ev.data.u64 = 1;
	epoll_ctl(e.ep, EPOLL_CTL_ADD, p.s, &ev);
	pthread_create(&th, NULL, epclose_main, &e);
	while (!(tid = __atomic_load_n(&e.tid, __ATOMIC_ACQUIRE)))
		sched_yield();
	say("a thread waits in epoll_wait -> %s",
	    asleep_in_wait(tid) ? "asleep" : "not seen asleep");
	close(e.ep);
	ep2 = epoll_create1(EPOLL_CLOEXEC);
	say("close it; a new epoll fd takes its number -> %s",
	    ep2 == e.ep ? "yes" : "no");
	efd = eventfd(1, EFD_CLOEXEC);
	ev.data.u64 = 2;
	epoll_ctl(ep2, EPOLL_CTL_ADD, efd, &ev);
	send(p.c, "x", 1, MSG_NOSIGNAL);
	pthread_join(th, NULL);
	say("data on its connection: the waiter -> %d %s after %s", e.n,
	    e.n < 0 ? tl_en(e.err) : tags(e.data, e.n, b, sizeof(b)),
	    dur(e.ms));
	r = epoll_wait(ep2, got, 4, 0);
	for (int i = 0; i < r; i++)
		d[i] = got[i].data.u64;
	say("the new epoll fd -> %d %s", r,
	    r < 0 ? tl_en(errno) : tags(d, r, b, sizeof(b)));
	close(ep2);
	close(efd);
	unpair(&p);
}

/* ---- ways around the socket API -------------------------------------- */

/* libc's syscall() with the socket calls' numbers. */
static void case_syscall(void)
{
	char buf[16], n[24];
	struct iovec v = {.iov_base = buf, .iov_len = sizeof(buf)};
	struct msghdr m = {.msg_iov = &v, .msg_iovlen = 1};
	struct pair p;
	long r;

	if (mkpair(&p))
		return;
	r = syscall(SYS_write, p.c, "hello", 5);
	say("syscall(SYS_write, 5 bytes) -> %s", rstr(r, n, sizeof(n)));
	wait_readable(p.s);
	r = syscall(SYS_read, p.s, buf, sizeof(buf));
	say("syscall(SYS_read) -> %s \"%.*s\"", rstr(r, n, sizeof(n)),
	    r > 0 ? (int)r : 0, buf);
	r = syscall(SYS_sendto, p.s, "pong", 4, 0, NULL, 0);
	say("syscall(SYS_sendto, 4 bytes) -> %s", rstr(r, n, sizeof(n)));
	wait_readable(p.c);
	r = syscall(SYS_recvmsg, p.c, &m, 0);
	say("syscall(SYS_recvmsg) -> %s \"%.*s\"", rstr(r, n, sizeof(n)),
	    r > 0 ? (int)r : 0, buf);
	r = syscall(SYS_shutdown, p.c, SHUT_WR);
	say("syscall(SYS_shutdown, SHUT_WR) -> %s", rstr(r, n, sizeof(n)));
	r = syscall(SYS_recvfrom, p.s, buf, sizeof(buf), 0, NULL, NULL);
	say("syscall(SYS_recvfrom) after the peer's shutdown -> %s",
	    rstr(r, n, sizeof(n)));
	say("syscall(SYS_getpid) is getpid() -> %s",
	    syscall(SYS_getpid) == getpid() ? "yes" : "no");
	r = syscall(SYS_close, p.c);
	say("syscall(SYS_close) -> %s", rstr(r, n, sizeof(n)));
	r = recv(p.s, buf, sizeof(buf), 0);
	say("the peer's recv after it -> %s", rstr(r, n, sizeof(n)));
	p.c = -1;
	unpair(&p);
}

/* stdio on fdopen'ed connected sockets, both ends: 200 lines each way. */
static void case_fdopen(void)
{
	char line[64], n[24];
	uint64_t hw = TL_FNV0, hr = hw;
	struct pair p;
	FILE *fc, *fs;
	int got = 0;

	if (mkpair(&p))
		return;
	fc = fdopen(p.c, "r+");
	fs = fdopen(p.s, "r+");
	if (!fc || !fs) {
		say("fdopen -> %s", tl_en(errno));
		unpair(&p);
		return;
	}
	say("fileno of the streams is their fds -> %s",
	    fileno(fc) == p.c && fileno(fs) == p.s ? "yes" : "no");
	for (int i = 0; i < 200; i++) {
		snprintf(line, sizeof(line), "line %d of the client\n", i);
		hw = tl_fnv(hw, line, strlen(line));
		fputs(line, fc);
	}
	fflush(fc);
	say("shutdown(SHUT_WR) of the client's fd -> %s",
	    shutdown(p.c, SHUT_WR) ? tl_en(errno) : "ok");
	while (fgets(line, sizeof(line), fs)) {
		hr = tl_fnv(hr, line, strlen(line));
		got++;
	}
	say("server's fgets: %d lines, %s, then %s", got,
	    hr == hw ? "same bytes" : "DIFFERENT bytes",
	    feof(fs) ? "EOF" : tl_en(errno));
	fprintf(fs, "%d lines\n", got);
	fflush(fs);
	if (fgets(line, sizeof(line), fc))
		say("client's fgets -> \"%.*s\"", (int)strcspn(line, "\n"),
		    line);
	else
		say("client's fgets -> nothing (%s)", tl_en(errno));
	say("fclose both -> %s",
	    fclose(fc) == 0 && fclose(fs) == 0 ? "ok" : tl_en(errno));
	(void)n;
}

/* splice: socket -> pipe and pipe -> socket, 1 MiB each way. */
static void case_splice(void)
{
	enum { SZ = 1 << 20 };
	static unsigned char out[SZ], in[SZ];
	char n[24];
	size_t done = 0, back = 0;
	struct pair p;
	int pp[2];
	long r = 0;

	if (mkpair(&p) || pipe(pp) < 0)
		return;
	tl_pattern(out, SZ, 7);
	/* client -> server socket -> pipe -> buffer */
	while (done < SZ) {
		size_t w = SZ - done < 65536 ? SZ - done : 65536;

		if (send(p.c, out + done, w, 0) != (ssize_t)w)
			break;
		for (size_t moved = 0; moved < w; moved += (size_t)r) {
			r = splice(p.s, NULL, pp[1], NULL, w - moved, 0);
			if (r <= 0)
				break;
			if (read(pp[0], in + done + moved, (size_t)r) != r)
				break;
		}
		if (r <= 0)
			break;
		done += w;
	}
	/* how the bytes came in chunks is timing: only an error is said */
	say("socket -> pipe: %zu of %d bytes, %s%s%s", done, SZ,
	    done == SZ && !memcmp(in, out, SZ) ? "same bytes" : "DIFFERENT",
	    r < 0 ? ", then " : "", r < 0 ? rstr(r, n, sizeof(n)) : "");
	/* buffer -> pipe -> server socket -> client */
	tl_pattern(out, SZ, 11);
	memset(in, 0, SZ);
	for (done = 0; done < SZ;) {
		size_t w = SZ - done < 65536 ? SZ - done : 65536;

		if (write(pp[1], out + done, w) != (ssize_t)w)
			break;
		for (size_t moved = 0; moved < w; moved += (size_t)r) {
			r = splice(pp[0], NULL, p.s, NULL, w - moved, 0);
			if (r <= 0)
				break;
		}
		if (r <= 0)
			break;
		done += w;
		while (back < done) {
			ssize_t g = recv(p.c, in + back, done - back, 0);

			if (g <= 0)
				break;
			back += (size_t)g;
		}
	}
	say("pipe -> socket: %zu of %d bytes, %s%s%s", back, SZ,
	    back == SZ && !memcmp(in, out, SZ) ? "same bytes" : "DIFFERENT",
	    r < 0 ? ", then " : "", r < 0 ? rstr(r, n, sizeof(n)) : "");
	close(pp[0]);
	close(pp[1]);
	unpair(&p);
}

/* ---- non-blocking connect -------------------------------------------- */

static const char *evs(short ev, char *buf)
{
	snprintf(buf, 32, "%s%s%s%s", ev & POLLOUT ? "OUT" : "",
		 ev & POLLIN ? "|IN" : "", ev & POLLERR ? "|ERR" : "",
		 ev & POLLHUP ? "|HUP" : "");
	return ev ? buf : "-";
}

/* accept one connection and read n bytes of it: "what came" */
static void serve_one(const char *who, size_t n)
{
	char buf[16] = "", rb[24];
	int s = accept_wait();
	ssize_t r = -1;

	if (s >= 0 && wait_readable(s))
		r = recv(s, buf, n, MSG_WAITALL);
	say("%s: the listener's end got %s \"%.*s\"", who,
	    rstr(r, rb, sizeof(rb)), r > 0 ? (int)r : 0, buf);
	if (s >= 0)
		close(s);
}

/*
 * A non-blocking connect returns EINPROGRESS at once, also towards a peer
 * that never answers; meanwhile the socket is neither readable nor
 * writable, its data calls say EAGAIN and connect EALREADY; a connection
 * to a listener turns writable while the other is still pending.  The
 * same after the socket is made blocking: connect and send wait for it.
 */
static void case_nbconnect(void)
{
	struct sockaddr_in hole = laddr;
	uint8_t *ip = (uint8_t *)&hole.sin_addr;
	int b = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);
	int g = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);
	int h = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);
	int ep = epoll_create1(0), err = -1, r;
	struct epoll_event ev = {.events = EPOLLOUT | EPOLLET}, got[4];
	socklen_t elen = sizeof(err);
	char n[24], eb[32];
	int64_t t0;
	char c;

	ip[3] = ip[3] == 99 ? 98 : 99; /* no such host on the bed's link */
	t0 = tl_now_ms();
	r = connect(b, (struct sockaddr *)&hole, sizeof(hole));
	say("connect to a peer that never answers -> %s, %s",
	    rstr(r, n, sizeof(n)), dur(tl_now_ms() - t0));
	ev.data.fd = g;
	epoll_ctl(ep, EPOLL_CTL_ADD, g, &ev); /* before its connect */
	t0 = tl_now_ms();
	r = connect(g, (struct sockaddr *)&laddr, sizeof(laddr));
	say("connect to the listener -> %s, %s", rstr(r, n, sizeof(n)),
	    dur(tl_now_ms() - t0));
	r = (int)recv(b, &c, 1, 0);
	say("pending: recv -> %s", rstr(r, n, sizeof(n)));
	r = (int)send(b, "x", 1, 0);
	say("pending: send -> %s", rstr(r, n, sizeof(n)));
	r = connect(b, (struct sockaddr *)&hole, sizeof(hole));
	say("pending: connect again -> %s", rstr(r, n, sizeof(n)));
	r = epoll_wait(ep, got, 4, 10000);
	say("epoll_wait for the listener's connection -> %d %s", r,
	    r == 1 && got[0].data.fd == g ? evs((short)got[0].events, eb)
					  : "?");
	{
		struct pollfd p[2] = {{.fd = b, .events = POLLOUT},
				      {.fd = g, .events = POLLOUT}};

		r = poll(p, 2, 0);
		say("poll both -> %d: unanswered %s, listener's %s", r,
		    evs(p[0].revents, eb), evs(p[1].revents, eb + 16));
	}
	getsockopt(g, SOL_SOCKET, SO_ERROR, &err, &elen);
	say("listener's: SO_ERROR %d", err);
	r = connect(g, (struct sockaddr *)&laddr, sizeof(laddr));
	say("listener's: connect again -> %s", rstr(r, n, sizeof(n)));
	r = connect(g, (struct sockaddr *)&laddr, sizeof(laddr));
	say("listener's: and again -> %s", rstr(r, n, sizeof(n)));
	r = (int)send(g, "hi", 2, 0);
	say("listener's: send -> %s", rstr(r, n, sizeof(n)));
	serve_one("listener's", 2);

	/* made blocking while it connects: the calls wait for it */
	r = connect(h, (struct sockaddr *)&laddr, sizeof(laddr));
	say("third: connect -> %s", rstr(r, n, sizeof(n)));
	set_nb(h, false);
	r = connect(h, (struct sockaddr *)&laddr, sizeof(laddr));
	say("third, blocking: connect again -> %s", rstr(r, n, sizeof(n)));
	r = (int)send(h, "abc", 3, 0);
	say("third, blocking: send -> %s", rstr(r, n, sizeof(n)));
	serve_one("third", 3);

	{
		struct pollfd p = {.fd = b, .events = POLLOUT};

		t0 = tl_now_ms();
		r = poll(&p, 1, 300);
		say("unanswered after 300 ms more: poll -> %d %s, %s", r,
		    evs(p.revents, eb), dur(tl_now_ms() - t0));
	}
	close(b);
	close(g);
	close(h);
	close(ep);
}

/*
 * A non-blocking connect refused: writable with every error bit, the error
 * told once (here by send, not SO_ERROR), then the socket is closed for
 * good: EPIPE, EOF, and connect says ECONNABORTED before a new attempt.
 */
static void case_nbrefused(void)
{
	struct sockaddr_in a = laddr;
	socklen_t len = sizeof(a);
	int t = socket(AF_INET, SOCK_STREAM, 0);
	int s = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);
	struct pollfd p = {.fd = s, .events = POLLIN | POLLOUT};
	char n[24], eb[32], c;
	int r;

	a.sin_port = 0; /* a port held without listening: nobody answers */
	if (bind(t, (struct sockaddr *)&a, sizeof(a)) < 0 ||
	    getsockname(t, (struct sockaddr *)&a, &len) < 0) {
		say("bind: %s", tl_en(errno));
		return;
	}
	r = connect(s, (struct sockaddr *)&a, sizeof(a));
	say("connect -> %s", rstr(r, n, sizeof(n)));
	r = poll(&p, 1, 10000);
	say("poll -> %d %s", r, evs(p.revents, eb));
	r = (int)send(s, "x", 1, MSG_NOSIGNAL);
	say("send -> %s", rstr(r, n, sizeof(n)));
	r = (int)send(s, "x", 1, MSG_NOSIGNAL);
	say("send again -> %s", rstr(r, n, sizeof(n)));
	r = (int)recv(s, &c, 1, 0);
	say("recv -> %s", rstr(r, n, sizeof(n)));
	p.revents = 0;
	r = poll(&p, 1, 0);
	say("poll -> %d %s", r, evs(p.revents, eb));
	r = connect(s, (struct sockaddr *)&a, sizeof(a));
	say("connect again -> %s", rstr(r, n, sizeof(n)));
	close(s);
	close(t);
}

/*
 * epoll_ctl(ADD) in one thread while another connects the same
 * non-blocking socket: the registration sees the connection's state,
 * whichever call comes first.  The kernel's reports the connection
 * writable and nothing else; under the shim a registration that read the
 * socket's kind just before the connect began stayed in the kernel's set,
 * which saw an unconnected socket: OUT|HUP while the connection was being
 * made.  The events are counted by kind over the rounds.
 */
struct ctl_race {
	pthread_barrier_t go;
	int ep, fd;
};

static void *ctl_race_add(void *arg)
{
	struct ctl_race *c = arg;
	struct epoll_event ev = {.events = EPOLLIN | EPOLLOUT,
				 .data.fd = c->fd};

	pthread_barrier_wait(&c->go);
	epoll_ctl(c->ep, EPOLL_CTL_ADD, c->fd, &ev);
	return NULL;
}

static void case_ctl_race(void)
{
	enum { ROUNDS = 30 };
	int out = 0, other = 0, none = 0;
	char eb[32] = "-";

	for (int i = 0; i < ROUNDS; i++) {
		struct ctl_race c = {.ep = epoll_create1(0)};
		struct epoll_event got;
		pthread_t th;
		int s;

		c.fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);
		pthread_barrier_init(&c.go, NULL, 2);
		pthread_create(&th, NULL, ctl_race_add, &c);
		pthread_barrier_wait(&c.go);
		(void)connect(c.fd, (struct sockaddr *)&laddr, sizeof(laddr));
		pthread_join(th, NULL);
		pthread_barrier_destroy(&c.go);
		if (epoll_wait(c.ep, &got, 1, 10000) != 1)
			none++;
		else if (got.events == EPOLLOUT)
			out++;
		else if (!other++)
			evs((short)got.events, eb);
		s = accept_wait();
		if (s >= 0)
			close(s);
		close(c.fd);
		close(c.ep);
	}
	say("%d rounds: OUT %d, nothing %d, other %d (first: %s)", ROUNDS, out,
	    none, other, eb);
}

/*
 * A blocking accept, then an unrelated epoll_wait in the same thread: the
 * wait runs to its timeout.  Under the shim a blocking accept on a
 * listener with an RDMA door arms the kernel's accept on an io_uring;
 * when a ring is closed the kernel later runs exit work that interrupts
 * each thread that used it (task work with TWA_SIGNAL), and epoll_wait
 * returns EINTR for that, with no signal sent.  The thread is seen asleep
 * in accept (/proc) before the peer connects, so the accept waits.
 */
struct racc {
	int fd, n, err;
	pid_t tid;
	bool in; /* atomic: about to accept */
};

static void *ring_acceptor(void *arg)
{
	struct racc *a = arg;
	struct epoll_event ev = {.events = EPOLLIN}, out;
	int ep = epoll_create1(EPOLL_CLOEXEC);
	int efd = eventfd(0, EFD_CLOEXEC);

	epoll_ctl(ep, EPOLL_CTL_ADD, efd, &ev);
	a->tid = (pid_t)syscall(SYS_gettid);
	__atomic_store_n(&a->in, true, __ATOMIC_RELEASE);
	a->fd = accept(lfd, NULL, NULL);
	a->n = epoll_wait(ep, &out, 1, 200);
	a->err = a->n < 0 ? errno : 0;
	close(ep);
	close(efd);
	return NULL;
}

/* Until thread tid sleeps (state S in /proc), at most 5 s. */
static void wait_asleep(pid_t tid)
{
	char path[64], st[512];

	snprintf(path, sizeof(path), "/proc/self/task/%d/stat", (int)tid);
	for (int i = 0; i < 5000; i++) {
		FILE *f = fopen(path, "r");
		char *p = NULL;

		if (f) {
			p = fgets(st, sizeof(st), f);
			fclose(f);
		}
		p = p ? strrchr(st, ')') : NULL;
		if (p && p[1] == ' ' && p[2] == 'S')
			return;
		tl_sleep_ms(1);
	}
}

static void case_ring_eintr(void)
{
	enum { ROUNDS = 10 };
	int timeouts = 0, other = 0, first = 0;

	for (int i = 0; i < ROUNDS; i++) {
		struct racc a = {.fd = -1};
		pthread_t t;
		int c;

		pthread_create(&t, NULL, ring_acceptor, &a);
		while (!__atomic_load_n(&a.in, __ATOMIC_ACQUIRE))
			sched_yield();
		wait_asleep(a.tid);
		c = socket(AF_INET, SOCK_STREAM, 0);
		if (connect(c, (struct sockaddr *)&laddr, sizeof(laddr)) < 0)
			say("connect: %s", tl_en(errno));
		pthread_join(t, NULL);
		if (a.fd >= 0)
			close(a.fd);
		close(c);
		if (a.n == 0)
			timeouts++;
		else if (!other++)
			first = a.n < 0 ? a.err : 0;
	}
	say("%d blocking accepts, then epoll_wait(200 ms) in the same thread: "
	    "%d timed out, %d otherwise (first: %s)",
	    ROUNDS, timeouts, other, other ? tl_en(first) : "-");
}

/*
 * A client that bound its source address with IP_BIND_ADDRESS_NO_PORT,
 * leaving the port to connect (KEXACT_SRC: a second local address): the
 * connection leaves from that address, and the flag reads back as set.
 */
static void case_bindaddr(void)
{
	const char *src = getenv("KEXACT_SRC");
	struct sockaddr_in a = {.sin_family = AF_INET}, me, peer;
	socklen_t ml = sizeof(me), pl = sizeof(peer), ol = sizeof(int);
	char b1[INET_ADDRSTRLEN], b2[INET_ADDRSTRLEN];
	int one = 1, nop = 0, c, s;

	if (!src || inet_pton(AF_INET, src, &a.sin_addr) != 1) {
		say("no KEXACT_SRC: not run");
		return;
	}
	c = socket(AF_INET, SOCK_STREAM, 0);
	setsockopt(c, IPPROTO_IP, IP_BIND_ADDRESS_NO_PORT, &one, sizeof(one));
	if (bind(c, (struct sockaddr *)&a, sizeof(a)) < 0 ||
	    getsockname(c, (struct sockaddr *)&me, &ml) < 0) {
		say("bind: %s", tl_en(errno));
		close(c);
		return;
	}
	say("bound: port %s", me.sin_port ? "drawn" : "left to connect");
	if (connect(c, (struct sockaddr *)&laddr, sizeof(laddr)) < 0) {
		say("connect: %s", tl_en(errno));
		close(c);
		return;
	}
	s = accept_wait();
	ml = sizeof(me);
	getsockname(c, (struct sockaddr *)&me, &ml);
	if (s < 0 || getpeername(s, (struct sockaddr *)&peer, &pl) < 0) {
		say("accept: %s", tl_en(errno));
		close(c);
		return;
	}
	getsockopt(c, IPPROTO_IP, IP_BIND_ADDRESS_NO_PORT, &nop, &ol);
	say("client %s (source as bound: %s), server sees %s, same port %s, "
	    "flag %d",
	    inet_ntop(AF_INET, &me.sin_addr, b1, sizeof(b1)),
	    me.sin_addr.s_addr == a.sin_addr.s_addr ? "yes" : "no",
	    inet_ntop(AF_INET, &peer.sin_addr, b2, sizeof(b2)),
	    me.sin_port == peer.sin_port ? "yes" : "no", nop);
	close(s);
	close(c);
}

/* A blocking connect to a host that never answers, SIGALRM from a timer of
 * this thread after 300 ms: "-> result after time". */
static const char *connect_alarmed(int fd, const struct sockaddr_in *to,
				   char *out, size_t len)
{
	struct itimerspec once = {{0, 0}, {0, 300000000L}};
	timer_t t = thread_timer_new();
	char n[24];
	int64_t t0 = tl_now_ms();
	int r;

	timer_settime(t, 0, &once, NULL);
	r = connect(fd, (const struct sockaddr *)to, sizeof(*to));
	snprintf(out, len, "%s after %s, handler ran %d", rstr(r, n, sizeof(n)),
		 dur(tl_now_ms() - t0), (int)handled);
	timer_delete(t);
	return out;
}

/*
 * A blocking connect and signals.  Towards a host that never answers, a
 * handler without SA_RESTART ends the call with EINTR when it runs, and the
 * connect goes on: the next call waits again, a non-blocking one says
 * EALREADY.  To the listener, a timer every 2 ms whose handler has
 * SA_RESTART never ends one: the kernel restarts the call (signal(7)).
 */
static void case_connect_intr(void)
{
	struct sockaddr_in hole = laddr;
	uint8_t *ip = (uint8_t *)&hole.sin_addr;
	int b = socket(AF_INET, SOCK_STREAM, 0), ok = 0, r;
	char out[96], n[24];
	timer_t t;

	/* not nbconnect's host: its failed lookup must not end this one */
	ip[3] = ip[3] == 97 ? 96 : 97;
	catch (SIGALRM, 0);
	say("blocking connect to a host that never answers, SIGALRM at "
	    "0.3 s -> %s",
	    connect_alarmed(b, &hole, out, sizeof(out)));
	handled = 0;
	say("connect again, the same alarm -> %s",
	    connect_alarmed(b, &hole, out, sizeof(out)));
	set_nb(b, true);
	r = connect(b, (struct sockaddr *)&hole, sizeof(hole));
	say("made non-blocking: connect again -> %s", rstr(r, n, sizeof(n)));
	close(b);

	catch (SIGALRM, SA_RESTART);
	t = thread_timer(2);
	for (int i = 0; i < 10; i++) {
		int c = socket(AF_INET, SOCK_STREAM, 0), a;

		if (connect(c, (struct sockaddr *)&laddr, sizeof(laddr)) == 0)
			ok++;
		else
			say("connect %d under the timer -> %s", i,
			    tl_en(errno));
		do /* poll is never restarted */
			a = accept_wait();
		while (a < 0 && errno == EINTR);
		close(a);
		close(c);
	}
	timer_delete(t);
	uncatch(SIGALRM);
	say("10 blocking connects to the listener under a 2 ms timer "
	    "(SA_RESTART) -> %d connected",
	    ok);
}

/* The fds this process holds now (the directory's own fd not counted). */
static int count_fds(void)
{
	DIR *d = opendir("/proc/self/fd");
	struct dirent *e;
	int n = 0;

	if (!d)
		return -1;
	while ((e = readdir(d)))
		n += e->d_name[0] != '.' && atoi(e->d_name) != dirfd(d);
	closedir(d);
	return n;
}

/* One connection: connect, 8 bytes there and back, both ends closed. */
static int echo_cycle(void)
{
	char buf[8] = "cycle-8";
	struct pair p;
	int ok;

	if (mkpair(&p))
		return -1;
	ok = send(p.c, buf, 8, 0) == 8 && recv(p.s, buf, 8, MSG_WAITALL) == 8 &&
	     send(p.s, buf, 8, 0) == 8 && recv(p.c, buf, 8, MSG_WAITALL) == 8;
	unpair(&p);
	return ok ? 0 : -1;
}

/* The fd count once it is at most n0, waited for up to 2 s: the shim
 * releases a closed RDMA connection's own fds (its rdma_cm channel, kept
 * while rsockets' close runs on a reaper) a little after close() returns.
 * The kernel's count is back at once. */
static int count_fds_settled(int n0)
{
	int64_t end = tl_now_ms() + 2000;
	int n;

	while ((n = count_fds()) > n0 && tl_now_ms() < end)
		tl_sleep_ms(1);
	return n;
}

/*
 * No fd outlives its connection: over 20 connections, each connected, an
 * echo of 8 bytes, both ends closed, the process's fd count after each
 * close comes back to the one it had after the first connection's (which
 * is not counted: what a first connection sets up for good, the shim's
 * threads and the device, stays).  A leak per connection grows it, and no
 * wait brings it back.  The release may lag close() a little (a count
 * below the first one's, when that one was counted before its lag ended,
 * is no leak); 70-cycles (--strict, slowclose.so) is the test that the
 * release follows close().
 */
static void case_close_fds(void)
{
	int n0, n, changed = 0, failed = 0;

	if (echo_cycle())
		failed++;
	n0 = count_fds();
	for (int i = 0; i < 20; i++) {
		if (echo_cycle())
			failed++;
		n = count_fds_settled(n0);
		if (n > n0 && changed++ < 3)
			say("cycle %d: %d fds 2 s after its close, %d before",
			    i, n, n0);
	}
	say("20 connections, each: connect, echo 8 bytes, close both ends -> "
	    "%d failed, fd count %s",
	    failed, changed ? "grew" : "as before after every close");
}

/* What fd is now, told by its file: "the connection" (conn's), "/dev/null"
 * (null's) or "closed" (no file, or another one: a number closed may be
 * taken at once by a thread of the shim's). */
static const char *fd_now(int fd, const struct stat *conn,
			  const struct stat *null)
{
	struct stat st;

	if (fstat(fd, &st) < 0)
		return "closed";
	if (st.st_dev == conn->st_dev && st.st_ino == conn->st_ino)
		return "the connection";
	if (st.st_dev == null->st_dev && st.st_ino == null->st_ino)
		return "/dev/null";
	return "closed";
}

enum close_how { BY_CLOSE, BY_CLOSE_RANGE, BY_DUP2 };

/* End a connection's client fd as how says, just after its connect, while
 * a 50 ms timer's handler jumps away: over kernel TCP the call is long
 * done when it jumps (from pause); under slowclose.so (52-kexact's second
 * pass) it lands while the shim waits for its connect thread to let go. */
static void close_jumped(const char *what, enum close_how how)
{
	struct itimerspec its = {{0, 0}, {0, 50 * 1000000L}};
	int null = open("/dev/null", O_RDONLY | O_CLOEXEC);
	timer_t t = thread_timer_new();
	struct stat conn, nst;
	const char *now;
	struct pair p;
	sigjmp_buf jb;

	fstat(null, &nst);
	if (mkpair(&p))
		goto out;
	fstat(p.c, &conn);
	if (sigsetjmp(jb, 1) == 0) {
		jump_to = &jb;
		timer_settime(t, 0, &its, NULL);
		if (how == BY_CLOSE)
			close(p.c);
		else if (how == BY_CLOSE_RANGE)
			close_range((unsigned int)p.c, (unsigned int)p.c, 0);
		else
			dup2(null, p.c);
		for (;;)
			pause();
	}
	jump_to = NULL;
	now = fd_now(p.c, &conn, &nst);
	say("%s on a connection just connected, a handler jumps away at "
	    "50 ms -> fd is %s",
	    what, now);
	if (strcmp(now, "closed"))
		close(p.c);
	close(p.s);
out:
	timer_delete(t);
	close(null);
}

/* close_range with a flag the kernel does not know closes nothing. */
static void close_range_bad(void)
{
	char buf[4] = "abc", n[24];
	struct pair p;
	long r;

	if (mkpair(&p))
		return;
	r = close_range((unsigned int)p.c, (unsigned int)p.c, 1u << 7);
	say("close_range(fd, fd, an unknown flag) -> %s",
	    rstr(r, n, sizeof(n)));
	r = send(p.c, buf, 4, 0) == 4 ? recv(p.s, buf, 4, MSG_WAITALL) : -1;
	say("then 4 bytes through it -> %s", rstr(r, n, sizeof(n)));
	unpair(&p);
}

static void case_close_jump(void)
{
	struct sigaction sa = {.sa_handler = on_jump};

	sigemptyset(&sa.sa_mask);
	sigaction(SIGALRM, &sa, NULL);
	close_jumped("close(fd)", BY_CLOSE);
	close_jumped("close_range(fd, fd, 0)", BY_CLOSE_RANGE);
	close_jumped("dup2(/dev/null, fd)", BY_DUP2);
	close_range_bad();
	uncatch(SIGALRM);
}

/*
 * A connection whose peer closed, its EOF read, watched for no event
 * (events 0: only what no mask hides, ERR and HUP, which a peer's FIN
 * alone is not): poll and epoll_wait sleep their whole 0.5 s.
 */
static void case_poll_none(void)
{
	struct epoll_event ev = {.events = 0};
	struct pair p;
	char c, n[24];
	int64_t t0;
	int ep, r;

	if (mkpair(&p))
		return;
	close(p.s);
	p.s = -1;
	r = (int)recv(p.c, &c, 1, 0);
	say("peer closed -> recv %s", r == 0 ? "EOF" : rstr(r, n, sizeof(n)));
	t0 = tl_now_ms();
	r = poll(&(struct pollfd){.fd = p.c, .events = 0}, 1, 500);
	say("poll, events 0, 0.5 s -> %s after %s", rstr(r, n, sizeof(n)),
	    dur(tl_now_ms() - t0));
	ep = epoll_create1(EPOLL_CLOEXEC);
	epoll_ctl(ep, EPOLL_CTL_ADD, p.c, &ev);
	t0 = tl_now_ms();
	r = epoll_wait(ep, &ev, 1, 500);
	say("epoll_wait, events 0, 0.5 s -> %s after %s", rstr(r, n, sizeof(n)),
	    dur(tl_now_ms() - t0));
	close(ep);
	unpair(&p);
}

/*
 * recv with MSG_TRUNC: TCP consumes (with MSG_PEEK, looks at) up to len
 * bytes and says how many, without writing the buffer -- which may be NULL
 * or shorter than len.  A guard pattern around and beyond the length proves
 * nothing was written.
 */
struct guarded {
	char buf[4];
	char guard[124];
};

static void guard_fill(struct guarded *g)
{
	memset(g, '#', sizeof(*g));
}

/* "untouched", or how many bytes of g were written */
static const char *guard_str(const struct guarded *g, char *out, size_t len)
{
	const char *p = (const char *)g;
	int n = 0;

	for (size_t i = 0; i < sizeof(*g); i++)
		n += p[i] != '#';
	if (!n)
		return "untouched";
	snprintf(out, len, "%d bytes written", n);
	return out;
}

static void trunc_one(const char *what, int fd, void *buf, size_t len,
		      int flags, struct guarded *g)
{
	char n[24], w[40];
	long r;

	guard_fill(g);
	r = recv(fd, buf, len, flags);
	say("%s -> %s, buffer %s", what, rstr(r, n, sizeof(n)),
	    guard_str(g, w, sizeof(w)));
}

static void case_trunc(void)
{
	struct guarded g;
	struct pair p;
	struct later l;
	struct iovec v;
	struct msghdr m;
	char n[24], w[40], all[16];
	int64_t t0;
	long r;

	if (mkpair(&p))
		return;
	send(p.c, "0123456789", 10, 0);
	r = recv(p.s, all, 10, MSG_PEEK | MSG_WAITALL);
	say("10 bytes queued (peeked) -> %s", rstr(r, n, sizeof(n)));
	trunc_one("recv(buf, 4, PEEK|TRUNC)", p.s, g.buf, 4,
		  MSG_PEEK | MSG_TRUNC, &g);
	trunc_one("recv(buf, 4, TRUNC)", p.s, g.buf, 4, MSG_TRUNC, &g);
	r = recv(p.s, NULL, 3, MSG_TRUNC);
	say("recv(NULL, 3, TRUNC) -> %s", rstr(r, n, sizeof(n)));
	r = recv(p.s, NULL, 100, MSG_PEEK | MSG_TRUNC);
	say("recv(NULL, 100, PEEK|TRUNC), 3 queued -> %s",
	    rstr(r, n, sizeof(n)));
	guard_fill(&g);
	r = recv(p.s, g.buf, 2, 0);
	say("then recv(buf, 2) -> %s \"%.2s\", beyond it %s",
	    rstr(r, n, sizeof(n)), g.buf,
	    g.buf[2] != '#' || g.buf[3] != '#' || g.guard[0] != '#'
		? "written"
		: "untouched");
	/* a 4-byte buffer, a length of 100: a drain that the kernel never
	 * lets write past the buffer */
	trunc_one("recv(4-byte buf, 100, TRUNC), 1 queued", p.s, g.buf, 100,
		  MSG_TRUNC, &g);
	trunc_one("recv(buf, 100, TRUNC|DONTWAIT), none queued", p.s, g.buf,
		  100, MSG_TRUNC | MSG_DONTWAIT, &g);
	later_start(&l, p.c, "abcdef", 300);
	t0 = tl_now_ms();
	guard_fill(&g);
	r = recv(p.s, g.buf, 6, MSG_TRUNC | MSG_WAITALL);
	say("blocking recv(buf, 6, TRUNC|WAITALL), 6 bytes after 0.3 s -> %s "
	    "after %s, buffer %s",
	    rstr(r, n, sizeof(n)), dur(tl_now_ms() - t0),
	    guard_str(&g, w, sizeof(w)));
	later_join(&l);
	send(p.c, "xyz", 3, 0);
	r = recv(p.s, all, 3, MSG_PEEK | MSG_WAITALL);
	guard_fill(&g);
	v = (struct iovec){.iov_base = g.buf, .iov_len = 2};
	m = (struct msghdr){.msg_iov = &v, .msg_iovlen = 1};
	r = recvmsg(p.s, &m, MSG_TRUNC);
	say("recvmsg(2, TRUNC), 3 queued -> %s, msg_flags %#x, buffer %s",
	    rstr(r, n, sizeof(n)), (unsigned)m.msg_flags,
	    guard_str(&g, w, sizeof(w)));
	r = recv(p.s, all, sizeof(all), 0);
	say("then recv -> %s \"%.*s\"", rstr(r, n, sizeof(n)),
	    r > 0 ? (int)r : 0, all);
	shutdown(p.c, SHUT_WR);
	r = recv(p.s, NULL, 10, MSG_TRUNC);
	say("recv(NULL, 10, TRUNC) after the peer's FIN -> %s",
	    rstr(r, n, sizeof(n)));
	unpair(&p);
}

/*
 * SO_RCVBUF/SO_SNDBUF as the kernel takes them: clamped to
 * net.core.rmem_max/wmem_max and doubled, never under its minimum; the
 * FORCE forms only with CAP_NET_ADMIN; an accepted connection has its
 * listener's.  A client asking for 1 GiB before its connect still
 * connects and carries data (an rsocket given that much would pin it).
 */
static long sysctl_long(const char *path)
{
	FILE *f = fopen(path, "r");
	long v = -1;

	if (f) {
		if (fscanf(f, "%ld", &v) != 1)
			v = -1;
		fclose(f);
	}
	return v;
}

static const char *buf_str(int fd, int name, char *out, size_t len)
{
	long max =
	    sysctl_long(name == SO_RCVBUF ? "/proc/sys/net/core/rmem_max"
					  : "/proc/sys/net/core/wmem_max");
	socklen_t l = sizeof(int);
	int v = 0;

	if (getsockopt(fd, SOL_SOCKET, name, &v, &l) < 0)
		return tl_en(errno);
	if (v == 2 * max)
		return name == SO_RCVBUF ? "2 x rmem_max" : "2 x wmem_max";
	snprintf(out, len, "%d", v);
	return out;
}

static void bufs_say(const char *who, int fd)
{
	char a[24], b[24];

	say("%s: SO_RCVBUF %s, SO_SNDBUF %s", who,
	    buf_str(fd, SO_RCVBUF, a, sizeof(a)),
	    buf_str(fd, SO_SNDBUF, b, sizeof(b)));
}

static void case_bufsz(void)
{
	struct sockaddr_in a = laddr;
	socklen_t alen = sizeof(a);
	int big = 1 << 30, small = 1, mib = 1 << 20, l, c, s = -1;
	struct pollfd pf;
	static char data[64 * 1024];
	char n[24], w[24];
	long r;

	l = socket(AF_INET, SOCK_STREAM, 0);
	setsockopt(l, SOL_SOCKET, SO_RCVBUF, &big, sizeof(big));
	setsockopt(l, SOL_SOCKET, SO_SNDBUF, &big, sizeof(big));
	a.sin_port = 0;
	if (bind(l, (struct sockaddr *)&a, sizeof(a)) < 0 || listen(l, 8) < 0 ||
	    getsockname(l, (struct sockaddr *)&a, &alen) < 0)
		say("listener: %s", tl_en(errno));
	bufs_say("listener, 1 GiB asked", l);
	pf = (struct pollfd){.fd = l, .events = POLLIN};
	poll(&pf, 1, 0);
	c = socket(AF_INET, SOCK_STREAM, 0);
	setsockopt(c, SOL_SOCKET, SO_RCVBUF, &big, sizeof(big));
	setsockopt(c, SOL_SOCKET, SO_SNDBUF, &big, sizeof(big));
	r = connect(c, (struct sockaddr *)&a, sizeof(a));
	say("client, 1 GiB asked: connect -> %s", rstr(r, n, sizeof(n)));
	if (r == 0 && poll(&pf, 1, 10000) == 1)
		s = accept(l, NULL, NULL);
	if (s < 0) {
		say("accept: %s", tl_en(errno));
		close(c);
		close(l);
		return;
	}
	bufs_say("client", c);
	bufs_say("accepted", s);
	memset(data, 'd', sizeof(data));
	r = send(c, data, sizeof(data), 0);
	say("send 64 KiB -> %s", rstr(r, n, sizeof(n)));
	r = recv(s, data, sizeof(data), MSG_WAITALL);
	say("recv(64 KiB, WAITALL) -> %s", rstr(r, n, sizeof(n)));
	r = setsockopt(s, SOL_SOCKET, SO_RCVBUF, &small, sizeof(small));
	say("accepted: SO_RCVBUF 1 -> %s, reads %s", rstr(r, n, sizeof(n)),
	    buf_str(s, SO_RCVBUF, w, sizeof(w)));
	r = setsockopt(s, SOL_SOCKET, SO_RCVBUFFORCE, &mib, sizeof(mib));
	say("accepted: SO_RCVBUFFORCE 1 MiB -> %s, reads %s",
	    rstr(r, n, sizeof(n)), buf_str(s, SO_RCVBUF, w, sizeof(w)));
	close(s);
	close(c);
	close(l);
}

/*
 * recv(NULL, n, MSG_TRUNC|MSG_WAITALL) with SO_RCVTIMEO 0.5 s while the
 * peer sends 16 KiB every 0.3 s: the timeout bounds the whole call (the
 * kernel's counts every wait of the call against it), which returns what
 * it drained by then -- not each 16 KiB the shim drains at a time.
 */
struct pacer {
	pthread_t th;
	int fd, n, every_ms;
};

static void *pacer_main(void *arg)
{
	static char chunk[16384];
	struct pacer *pc = arg;
	sigset_t all;

	sigfillset(&all);
	pthread_sigmask(SIG_BLOCK, &all, NULL);
	for (int i = 0; i < pc->n; i++) {
		if (i)
			tl_sleep_ms(pc->every_ms);
		if (send(pc->fd, chunk, sizeof(chunk), MSG_NOSIGNAL) < 0)
			say("pacer: send: %s", tl_en(errno));
	}
	return NULL;
}

static void case_trunc_timeo(void)
{
	struct timeval tv = {0, 500000};
	struct pacer pc;
	struct pair p;
	char n[24];
	int64_t t0;
	long r;

	if (mkpair(&p))
		return;
	setsockopt(p.s, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	pc = (struct pacer){.fd = p.c, .n = 5, .every_ms = 300};
	pthread_create(&pc.th, NULL, pacer_main, &pc);
	t0 = tl_now_ms();
	r = recv(p.s, NULL, 5 * 16384, MSG_TRUNC | MSG_WAITALL);
	say("recv(NULL, 80 KiB, TRUNC|WAITALL), SO_RCVTIMEO 0.5 s, 16 KiB "
	    "every 0.3 s -> %s after %s",
	    r == 5 * 16384 ? "all of it"
	    : r > 0	   ? "a part"
			   : rstr(r, n, sizeof(n)),
	    dur(tl_now_ms() - t0));
	pthread_join(pc.th, NULL);
	unpair(&p);
}

/*
 * A cancel pending when a thread calls poll, epoll_wait, recv or send with
 * its answer ready: each is a cancellation point, and glibc acts on a
 * pending cancel as the call starts, whether or not it would wait.
 */
struct ready_call {
	const char *op;
	int fd, ep;
	volatile int returned;
	pthread_barrier_t b;
};

static void *ready_main(void *arg)
{
	struct ready_call *rc = arg;
	struct pollfd p = {.fd = rc->fd, .events = POLLIN};
	struct epoll_event ev;
	char c;

	pthread_barrier_wait(&rc->b); /* main cancels us */
	pthread_barrier_wait(&rc->b);
	if (!strcmp(rc->op, "poll"))
		poll(&p, 1, 10000);
	else if (!strcmp(rc->op, "epoll_wait"))
		epoll_wait(rc->ep, &ev, 1, 10000);
	else if (!strcmp(rc->op, "recv"))
		recv(rc->fd, &c, 1, MSG_PEEK);
	else
		send(rc->fd, "y", 1, 0);
	rc->returned = 1;
	return NULL;
}

static void case_cancel_ready(void)
{
	static const char *ops[] = {"poll", "epoll_wait", "recv", "send"};

	for (size_t i = 0; i < sizeof(ops) / sizeof(ops[0]); i++) {
		struct epoll_event ev = {.events = EPOLLIN};
		struct ready_call rc = {.op = ops[i]};
		struct pair p;
		pthread_t th;
		int r;

		if (mkpair(&p))
			return;
		if (send(p.c, "x", 1, 0) != 1 || !wait_readable(p.s)) {
			say("%s: no data to be ready", ops[i]);
			unpair(&p);
			return;
		}
		rc.fd = p.s;
		rc.ep = epoll_create1(EPOLL_CLOEXEC);
		epoll_ctl(rc.ep, EPOLL_CTL_ADD, p.s, &ev);
		pthread_barrier_init(&rc.b, NULL, 2);
		pthread_create(&th, NULL, ready_main, &rc);
		pthread_barrier_wait(&rc.b);
		pthread_cancel(th);
		pthread_barrier_wait(&rc.b);
		r = join_within(th, 3);
		say("cancel pending as a thread calls %s, its answer ready -> "
		    "%s, the call %s",
		    ops[i], r ? "not joined" : "joined",
		    rc.returned ? "returned" : "did not return");
		pthread_barrier_destroy(&rc.b);
		close(rc.ep);
		unpair(&p);
	}
}

/*
 * A serial server: it accepts a connection and reads it to its end before
 * it accepts the next.  The client connects twice and writes on its second
 * connection first.  Over TCP both connects complete in the kernel without
 * the server program (connect never waits for accept), so this finishes;
 * a transport whose connect or first send waited for the server's accept
 * would hang here (docs/security.md, the bound handshake's plan).
 */
struct serial {
	pthread_t th;
	char got[2][8];
};

static void *serial_main(void *arg)
{
	struct serial *sv = arg;

	for (int k = 0; k < 2; k++) {
		int fd = accept_wait();
		size_t n = 0;
		ssize_t r = 1;

		/* the first to its end; the second until its 3 bytes */
		while (fd >= 0 && r > 0 &&
		       n < (k ? 3 : sizeof(sv->got[k]) - 1)) {
			r = recv(fd, sv->got[k] + n, sizeof(sv->got[k]) - 1 - n,
				 0);
			n += r > 0 ? (size_t)r : 0;
		}
		if (fd >= 0)
			close(fd);
	}
	return NULL;
}

static void case_serial(void)
{
	struct serial sv = {0};
	int c[2] = {-1, -1}, err = 0;
	bool ok = true;

	for (int k = 0; k < 2 && ok; k++) {
		c[k] = socket(AF_INET, SOCK_STREAM, 0);
		ok = c[k] >= 0 && connect(c[k], (struct sockaddr *)&laddr,
					  sizeof(laddr)) == 0;
	}
	if (!ok) {
		say("connect: %s", tl_en(errno));
		goto out;
	}
	pthread_create(&sv.th, NULL, serial_main, &sv);
	ok = send(c[1], "two", 3, 0) == 3 && send(c[0], "one", 3, 0) == 3;
	err = errno;
	close(c[0]);
	c[0] = -1;
	if (join_within(sv.th, 10)) {
		/* it waits on the second connection's end: give it */
		say("two connects, the second written first, a serial "
		    "server -> hung");
		close(c[1]);
		c[1] = -1;
		pthread_join(sv.th, NULL);
		goto out;
	}
	say("two connects, the second written first, a serial server -> "
	    "sends %s, first accepted '%s', second '%s'",
	    ok ? "ok" : tl_en(err), sv.got[0], sv.got[1]);
out:
	for (int k = 0; k < 2; k++)
		if (c[k] >= 0)
			close(c[k]);
}

/*
 * pthread_cancel of a thread in ppoll/epoll_pwait given a mask (SIGUSR1;
 * the thread's own blocks SIGUSR2): cancelled while it waits, its cleanup
 * handlers run with the wait's mask (the kernel's call replaced the
 * thread's); a cancel pending when the call is made acts before the wait,
 * with the thread's own.
 */
struct cmask {
	int fd, ep;
	bool epoll, pending;
	pid_t tid;
	pthread_barrier_t b;
	int usr1, usr2;
};

static void cmask_cleanup(void *arg)
{
	struct cmask *c = arg;
	sigset_t now;

	pthread_sigmask(SIG_SETMASK, NULL, &now);
	c->usr1 = sigismember(&now, SIGUSR1);
	c->usr2 = sigismember(&now, SIGUSR2);
}

static void *cmask_main(void *arg)
{
	struct cmask *c = arg;
	struct pollfd p = {.fd = c->fd, .events = POLLIN};
	struct epoll_event ev;
	struct timespec ts = {10, 0};
	sigset_t own, m;

	c->tid = (pid_t)syscall(SYS_gettid);
	sigemptyset(&own);
	sigaddset(&own, SIGUSR2);
	pthread_sigmask(SIG_BLOCK, &own, NULL);
	sigemptyset(&m);
	sigaddset(&m, SIGUSR1);
	pthread_cleanup_push(cmask_cleanup, c);
	pthread_barrier_wait(&c->b);
	if (c->pending)
		pthread_barrier_wait(&c->b); /* main cancelled us meanwhile */
	if (c->epoll)
		epoll_pwait(c->ep, &ev, 1, 10000, &m);
	else
		ppoll(&p, 1, &ts, &m);
	pthread_cleanup_pop(0);
	return NULL;
}

/* Is thread tid inside a poll-family system call? */
static bool in_wait_call(pid_t tid)
{
	char path[64], buf[64];
	long nr = -1;
	FILE *f;

	snprintf(path, sizeof(path), "/proc/self/task/%d/syscall", (int)tid);
	f = fopen(path, "r");
	if (!f)
		return false;
	if (!fgets(buf, sizeof(buf), f) || sscanf(buf, "%ld", &nr) != 1)
		nr = -1;
	fclose(f);
	return nr == SYS_ppoll || nr == SYS_poll || nr == SYS_epoll_pwait ||
	       nr == SYS_epoll_wait
#ifdef SYS_epoll_pwait2
	       || nr == SYS_epoll_pwait2
#endif
	    ;
}

static void cmask_one(struct pair *p, int ep, bool epoll, bool pending)
{
	struct cmask c = {.fd = p->s,
			  .ep = ep,
			  .epoll = epoll,
			  .pending = pending,
			  .usr1 = -1,
			  .usr2 = -1};
	pthread_t th;
	int r;

	pthread_barrier_init(&c.b, NULL, 2);
	pthread_create(&th, NULL, cmask_main, &c);
	pthread_barrier_wait(&c.b);
	if (!pending) /* until it waits (bounded: 5 s) */
		for (int i = 0; i < 5000 && !in_wait_call(c.tid); i++)
			tl_sleep_ms(1);
	pthread_cancel(th);
	if (pending)
		pthread_barrier_wait(&c.b);
	r = join_within(th, 3);
	say("cancel %s %s (mask SIGUSR1, the thread's SIGUSR2) -> %s; its "
	    "cleanup sees SIGUSR1 %s, SIGUSR2 %s",
	    pending ? "pending as a thread calls" : "a thread waiting in",
	    epoll ? "epoll_pwait" : "ppoll", r ? "not joined" : "joined",
	    c.usr1 == 1 ? "blocked" : "not blocked",
	    c.usr2 == 1 ? "blocked" : "not blocked");
	pthread_barrier_destroy(&c.b);
}

static void case_cancel_mask(void)
{
	struct epoll_event ev = {.events = EPOLLIN};
	struct pair p;
	int ep;

	if (mkpair(&p))
		return;
	ep = epoll_create1(EPOLL_CLOEXEC);
	epoll_ctl(ep, EPOLL_CTL_ADD, p.s, &ev);
	for (int e = 0; e < 2; e++) {
		cmask_one(&p, ep, e, true);
		cmask_one(&p, ep, e, false);
	}
	close(ep);
	unpair(&p);
}

/*
 * review3: zero-length read()/readv() on a socket return 0 at once in the
 * kernel, blocking or not (sock_read_iter: "Match SYS5 behaviour"), unlike
 * recv(0), which waits (case recv0).
 */
static void case_read0(void)
{
	char buf[16], n[24];
	struct iovec v = {.iov_base = buf, .iov_len = 0};
	struct pair p;
	struct later l;
	int64_t t0;
	long r;

	if (mkpair(&p))
		return;
	later_start(&l, p.c, "ab", 300);
	t0 = tl_now_ms();
	r = read(p.s, buf, 0);
	say("blocking read(0), nothing queued, 2 bytes after 0.3 s -> %s %s",
	    rstr(r, n, sizeof(n)), dur(tl_now_ms() - t0));
	later_join(&l);
	recv(p.s, buf, 2, MSG_WAITALL);
	later_start(&l, p.c, "cd", 300);
	t0 = tl_now_ms();
	r = readv(p.s, &v, 1);
	say("blocking readv(one empty iovec), 2 bytes after 0.3 s -> %s %s",
	    rstr(r, n, sizeof(n)), dur(tl_now_ms() - t0));
	later_join(&l);
	recv(p.s, buf, 2, MSG_WAITALL);
	set_nb(p.s, true);
	r = read(p.s, buf, 0);
	say("non-blocking read(0), nothing queued -> %s",
	    rstr(r, n, sizeof(n)));
	/* the same for writes: the kernel's writev of nothing never reaches
	 * the socket, a write(0) does (EPIPE once shut; SIGPIPE ignored) */
	shutdown(p.s, SHUT_WR);
	r = writev(p.s, &v, 1);
	say("after shutdown(SHUT_WR): writev(one empty iovec) -> %s",
	    rstr(r, n, sizeof(n)));
	r = write(p.s, buf, 0);
	say("after shutdown(SHUT_WR): write(0) -> %s", rstr(r, n, sizeof(n)));
	unpair(&p);
}

/* review3: a MSG_PEEK recvmsg fills every iovec, as a plain one does. */
static void case_peekv(void)
{
	char data[50], a[4], b[100], all[50], n[24];
	struct iovec v[2] = {{.iov_base = a, .iov_len = sizeof(a)},
			     {.iov_base = b, .iov_len = sizeof(b)}};
	struct msghdr m = {.msg_iov = v, .msg_iovlen = 2};
	struct pair p;
	long r;

	if (mkpair(&p))
		return;
	memset(data, 'x', sizeof(data));
	send(p.c, data, sizeof(data), 0);
	r = recv(p.s, all, sizeof(all), MSG_PEEK | MSG_WAITALL);
	say("all 50 bytes queued (a PEEK|WAITALL) -> %s",
	    rstr(r, n, sizeof(n)));
	r = recvmsg(p.s, &m, MSG_PEEK);
	say("recvmsg(PEEK) over iovecs of 4 and 100 bytes -> %s",
	    rstr(r, n, sizeof(n)));
	r = recvmsg(p.s, &m, 0);
	say("then recvmsg over the same -> %s", rstr(r, n, sizeof(n)));
	unpair(&p);
}

static const char *tcp_state(int fd, char *buf, size_t len)
{
	struct tcp_info ti;
	socklen_t l = sizeof(ti);

	if (getsockopt(fd, IPPROTO_TCP, TCP_INFO, &ti, &l) < 0)
		return tl_en(errno);
	snprintf(buf, len, "%s",
		 ti.tcpi_state == TCP_ESTABLISHED  ? "ESTABLISHED"
		 : ti.tcpi_state == TCP_CLOSE_WAIT ? "CLOSE_WAIT"
		 : ti.tcpi_state == TCP_CLOSE	   ? "CLOSE"
		 : ti.tcpi_state == TCP_FIN_WAIT1  ? "FIN_WAIT1"
		 : ti.tcpi_state == TCP_FIN_WAIT2  ? "FIN_WAIT2"
		 : ti.tcpi_state == TCP_LAST_ACK   ? "LAST_ACK"
						   : "other");
	return buf;
}

/* review3: getsockopt(TCP_INFO) says what state the connection is in. */
static void case_tcpinfo(void)
{
	char buf[4], n[24];
	struct pair p;

	if (mkpair(&p))
		return;
	say("client: tcpi_state %s", tcp_state(p.c, n, sizeof(n)));
	say("server: tcpi_state %s", tcp_state(p.s, n, sizeof(n)));
	close(p.c);
	p.c = -1;
	say("server: the client's close read (%ld), tcpi_state %s",
	    (long)recv(p.s, buf, sizeof(buf), 0), tcp_state(p.s, n, sizeof(n)));
	unpair(&p);
	/* both ends shut for writing, each FIN read: CLOSE both (TIME_WAIT
	 * and LAST_ACK acknowledged leave the program's socket closed) */
	if (mkpair(&p))
		return;
	shutdown(p.c, SHUT_WR);
	say("server: the client's SHUT_WR read (%ld), tcpi_state %s",
	    (long)recv(p.s, buf, sizeof(buf), 0), tcp_state(p.s, n, sizeof(n)));
	shutdown(p.s, SHUT_WR);
	say("client: the server's SHUT_WR read (%ld), tcpi_state %s",
	    (long)recv(p.c, buf, sizeof(buf), 0), tcp_state(p.c, n, sizeof(n)));
	unpair(&p);
}

/* review3: SIOCOUTQ counts what was sent and not yet taken by the peer. */
static void case_outq(void)
{
	static char data[64 * 1024];
	struct pair p;
	long total = 0, r;
	int q = -1;

	if (mkpair(&p))
		return;
	set_nb(p.c, true);
	do {
		r = send(p.c, data, sizeof(data), 0);
		total += r > 0 ? r : 0;
	} while (r > 0 && total < (256L << 20));
	say("sent until %s", r < 0 ? tl_en(errno) : "256 MiB");
	if (ioctl(p.c, SIOCOUTQ, &q) < 0)
		say("SIOCOUTQ -> %s", tl_en(errno));
	else
		say("SIOCOUTQ with the peer not reading -> %s",
		    q > 0 ? "more than 0" : "0");
	unpair(&p);
}

/* review3: SO_RCVLOWAT holds readiness until that many bytes are queued
 * (tcp_poll).  (Not a blocking recv across two arrivals: the kernel's
 * wake-up then compares what is left to the whole mark and never comes.) */
static void case_rcvlowat(void)
{
	struct pollfd pf = {.fd = -1, .events = POLLIN};
	struct epoll_event ev = {.events = EPOLLIN}, out;
	struct timeval tv = {0, 500000};
	char buf[64], n[24];
	struct pair p;
	int lowat = 10, r, ep;
	int64_t t0;
	long got;

	if (mkpair(&p))
		return;
	setsockopt(p.s, SOL_SOCKET, SO_RCVLOWAT, &lowat, sizeof(lowat));
	pf.fd = p.s;
	ep = epoll_create1(0);
	epoll_ctl(ep, EPOLL_CTL_ADD, p.s, &ev);
	send(p.c, "12345", 5, 0);
	tl_sleep_ms(100); /* (only so that the 5 bytes are surely there) */
	r = poll(&pf, 1, 300);
	say("SO_RCVLOWAT 10, 5 bytes queued: poll(IN, 0.3 s) -> %d", r);
	r = epoll_wait(ep, &out, 1, 300);
	say("epoll_wait(IN, 0.3 s) -> %d", r);
	/* a blocking peek waits for the mark too (tcp_recvmsg's target),
	 * until SO_RCVTIMEO: then what is there */
	setsockopt(p.s, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	t0 = tl_now_ms();
	got = recv(p.s, buf, sizeof(buf), MSG_PEEK);
	say("blocking recv(PEEK), SO_RCVTIMEO 0.5 s -> %s %s",
	    rstr(got, n, sizeof(n)), dur(tl_now_ms() - t0));
	send(p.c, "67890", 5, 0);
	r = poll(&pf, 1, 5000);
	say("5 more: poll -> %d, epoll_wait -> %d", r,
	    epoll_wait(ep, &out, 1, 5000));
	got = recv(p.s, buf, sizeof(buf), MSG_DONTWAIT);
	say("recv -> %s", rstr(got, n, sizeof(n)));
	close(ep);
	unpair(&p);
}

/* A negative SO_RCVTIMEO is stored as 0 jiffies (sock_set_timeout): a
 * blocking recv with nothing queued fails at once. */
static void case_timeo_neg(void)
{
	struct timeval tv = {-1, 0};
	char buf[4], n[24];
	struct pair p;
	int64_t t0;
	long r;

	if (mkpair(&p))
		return;
	r = setsockopt(p.s, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	say("SO_RCVTIMEO -1 s -> %s", rstr(r, n, sizeof(n)));
	t0 = tl_now_ms();
	r = recv(p.s, buf, sizeof(buf), 0);
	say("blocking recv, nothing queued -> %s %s", rstr(r, n, sizeof(n)),
	    dur(tl_now_ms() - t0));
	unpair(&p);
}

/* One epoll_wait of ep (one event at most): "N event(s), IN" or "0". */
static void et_wait(int ep, int ms, const char *what)
{
	struct epoll_event ev;
	int n = epoll_wait(ep, &ev, 1, ms);

	if (n < 0)
		say("%s -> %s", what, tl_en(errno));
	else
		say("%s -> %d%s", what, n,
		    n > 0 && (ev.events & EPOLLIN) ? " IN" : "");
}

/*
 * Edge-triggered EPOLLIN: the kernel gives a new edge on every arrival,
 * read or not (sk_data_ready -> ep_poll_callback), also with more queued
 * than the shim's first 16 KiB look sees: 40 KiB queued and reported,
 * nothing read, then one byte more (twice), and nothing more; then 100
 * bytes read and one byte more.  A program that reads one message per
 * event and waits again hangs if such an edge is lost.
 */
static void case_etedge(void)
{
	static char big[40 * 1024];
	struct epoll_event ev = {.events = EPOLLIN | EPOLLET};
	char n[24];
	struct pair p;
	long r;
	int ep;

	if (mkpair(&p))
		return;
	memset(big, 'e', sizeof(big));
	r = send(p.c, big, sizeof(big), 0);
	say("sent %s", rstr(r, n, sizeof(n)));
	r = recv(p.s, big, sizeof(big), MSG_PEEK | MSG_WAITALL);
	say("all queued (a PEEK|WAITALL before the set) -> %s",
	    rstr(r, n, sizeof(n)));
	set_nb(p.s, true);
	ep = epoll_create1(EPOLL_CLOEXEC);
	ev.data.fd = p.s;
	epoll_ctl(ep, EPOLL_CTL_ADD, p.s, &ev);
	et_wait(ep, 2000, "40 KiB queued: epoll_wait(ET IN, 2 s)");
	send(p.c, "x", 1, 0);
	et_wait(ep, 2000, "nothing read, 1 byte more: epoll_wait");
	send(p.c, "y", 1, 0);
	et_wait(ep, 2000, "nothing read, 1 byte more again: epoll_wait");
	et_wait(ep, 300, "nothing read, nothing new: epoll_wait(0.3 s)");
	r = recv(p.s, big, 100, 0);
	say("read %s", rstr(r, n, sizeof(n)));
	send(p.c, "z", 1, 0);
	et_wait(ep, 2000, "1 byte more: epoll_wait");
	close(ep);
	unpair(&p);
}

/* ---- review4: options, connect, poll/select, fcntl ------------------- */

/* getpeername: "port ok" when it names the other end, or the errno. */
static const char *peer_str(int fd, int other, char *buf, size_t len)
{
	struct sockaddr_in a, b;
	socklen_t al = sizeof(a), bl = sizeof(b);

	if (getpeername(fd, (struct sockaddr *)&a, &al) < 0)
		return tl_en(errno);
	if (getsockname(other, (struct sockaddr *)&b, &bl) < 0)
		return tl_en(errno);
	snprintf(buf, len, "%s", a.sin_port == b.sin_port ? "the peer" : "?");
	return buf;
}

/* review4: getpeername is ENOTCONN once the connection is closed
 * (inet_getname: TCP_CLOSE), as after both FINs are in; before that, and
 * in CLOSE_WAIT, it names the peer. */
static void case_peername(void)
{
	char buf[4], n[24], m[24];
	struct pair p;
	long r;

	if (mkpair(&p))
		return;
	say("established: client %s, server %s", peer_str(p.c, p.s, n, 24),
	    peer_str(p.s, p.c, m, 24));
	shutdown(p.c, SHUT_WR);
	r = recv(p.s, buf, sizeof(buf), 0);
	say("client SHUT_WR, read by the server (%ld): client %s, server %s", r,
	    peer_str(p.c, p.s, n, 24), peer_str(p.s, p.c, m, 24));
	shutdown(p.s, SHUT_WR);
	r = recv(p.c, buf, sizeof(buf), 0);
	say("server SHUT_WR, read by the client (%ld): client %s, server %s", r,
	    peer_str(p.c, p.s, n, 24), peer_str(p.s, p.c, m, 24));
	unpair(&p);
}

/* review4: select's timeval is normalised (glibc, as the old select
 * system call): 1.2 million microseconds is 1.2 s, not EINVAL; ppoll and
 * pselect say EINVAL for a timespec out of range before they look at
 * the fds (poll_select_set_timeout), even one that is ready. */
static void case_seltmo(void)
{
	struct timespec neg = {-1, 0}, big = {0, 1000000000};
	struct timeval tv = {0, 1200000};
	struct pollfd pf = {.fd = -1, .events = POLLIN};
	struct epoll_event ev = {.events = EPOLLOUT};
	char n[24];
	struct pair p;
	fd_set rs;
	int64_t t0;
	long r;
	int ep;

	if (mkpair(&p))
		return;
	FD_ZERO(&rs);
	FD_SET(p.s, &rs);
	t0 = tl_now_ms();
	r = select(p.s + 1, &rs, NULL, NULL, &tv);
	say("select(IN, {0 s, 1200000 us}), nothing queued -> %s %s, left "
	    "{%ld, %ld}",
	    rstr(r, n, sizeof(n)), dur(tl_now_ms() - t0), (long)tv.tv_sec,
	    (long)tv.tv_usec);
	tv = (struct timeval){0, -1};
	FD_SET(p.s, &rs);
	r = select(p.s + 1, &rs, NULL, NULL, &tv);
	say("select with tv_usec -1 -> %s", rstr(r, n, sizeof(n)));
	pf.fd = p.c;
	pf.events = POLLOUT;
	r = ppoll(&pf, 1, &neg, NULL);
	say("ppoll(OUT, ready, {-1 s, 0}) -> %s", rstr(r, n, sizeof(n)));
	pf.fd = p.s;
	pf.events = POLLIN;
	t0 = tl_now_ms();
	r = ppoll(&pf, 1, &big, NULL);
	say("ppoll(IN, nothing queued, {0, 1e9 ns}) -> %s %s",
	    rstr(r, n, sizeof(n)), dur(tl_now_ms() - t0));
	FD_ZERO(&rs);
	FD_SET(p.s, &rs);
	t0 = tl_now_ms();
	r = pselect(p.s + 1, &rs, NULL, NULL, &big, NULL);
	say("pselect(IN, nothing queued, {0, 1e9 ns}) -> %s %s",
	    rstr(r, n, sizeof(n)), dur(tl_now_ms() - t0));
	ep = epoll_create1(EPOLL_CLOEXEC);
	epoll_ctl(ep, EPOLL_CTL_ADD, p.c, &ev);
	r = epoll_pwait2(ep, &ev, 1, &neg, NULL);
	say("epoll_pwait2(OUT, ready, {-1 s, 0}) -> %s", rstr(r, n, sizeof(n)));
	close(ep);
	unpair(&p);
}

/* review4: close with SO_LINGER {1, 0} resets the connection: the peer's
 * next read is ECONNRESET, then EOF. */
static void case_linger0(void)
{
	struct linger lg = {1, 0}, rd;
	socklen_t l = sizeof(rd);
	struct pollfd pf = {.fd = -1, .events = POLLIN | POLLRDHUP};
	char buf[8], n[24], e[48];
	struct pair p;
	int err = 0;
	long r;

	if (mkpair(&p))
		return;
	r = setsockopt(p.c, SOL_SOCKET, SO_LINGER, &lg, sizeof(lg));
	getsockopt(p.c, SOL_SOCKET, SO_LINGER, &rd, &l);
	say("SO_LINGER {1, 0} -> %s, reads {%d, %d}", rstr(r, n, sizeof(n)),
	    rd.l_onoff, rd.l_linger);
	close(p.c);
	p.c = -1;
	pf.fd = p.s;
	r = poll(&pf, 1, 5000);
	say("client closed: server poll(IN|RDHUP) -> %ld %s", r,
	    ev_str((uint32_t)pf.revents, e, sizeof(e)));
	r = recv(p.s, buf, sizeof(buf), MSG_DONTWAIT);
	say("recv -> %s", rstr(r, n, sizeof(n)));
	l = sizeof(err);
	getsockopt(p.s, SOL_SOCKET, SO_ERROR, &err, &l);
	say("SO_ERROR -> %s", err ? tl_en(err) : "0");
	r = recv(p.s, buf, sizeof(buf), MSG_DONTWAIT);
	say("recv -> %s", rstr(r, n, sizeof(n)));
	unpair(&p);
}

static volatile sig_atomic_t got_io;

static void on_io(int sig)
{
	(void)sig;
	got_io++;
}

/* review4: O_ASYNC with F_SETOWN: data arriving raises SIGIO. */
static void case_async(void)
{
	struct sigaction sa = {.sa_handler = on_io}, old;
	struct pollfd pf = {.fd = -1, .events = POLLIN};
	struct pair p;
	int64_t t0;
	long r;

	if (mkpair(&p))
		return;
	sigemptyset(&sa.sa_mask);
	sigaction(SIGIO, &sa, &old);
	fcntl(p.s, F_SETOWN, getpid());
	r = fcntl(p.s, F_SETFL, fcntl(p.s, F_GETFL) | O_ASYNC);
	say("F_SETOWN, O_ASYNC -> %ld, F_GETFL has O_ASYNC: %s", r,
	    fcntl(p.s, F_GETFL) & O_ASYNC ? "yes" : "no");
	got_io = 0;
	send(p.c, "sig", 3, 0);
	pf.fd = p.s;
	poll(&pf, 1, 5000);
	/* the data is in: its signal was sent with it */
	t0 = tl_now_ms();
	while (!got_io && tl_now_ms() - t0 < 1000)
		tl_sleep_ms(10);
	say("3 bytes in: SIGIO %s", got_io ? "taken" : "none within 1 s");
	fcntl(p.s, F_SETFL, fcntl(p.s, F_GETFL) & ~O_ASYNC);
	sigaction(SIGIO, &old, NULL);
	unpair(&p);
}

/* review4: select on exceptfds only (POLLPRI, out-of-band data) of a
 * connection whose peer closed: nothing to say, it sleeps its timeout. */
static void case_select_ex(void)
{
	struct timeval tv = {0, 500000};
	char buf[4], n[24];
	struct pair p;
	fd_set es;
	int64_t t0;
	long r;

	if (mkpair(&p))
		return;
	close(p.c);
	p.c = -1;
	r = recv(p.s, buf, sizeof(buf), 0);
	say("peer closed, EOF read (%ld)", r);
	FD_ZERO(&es);
	FD_SET(p.s, &es);
	t0 = tl_now_ms();
	r = select(p.s + 1, NULL, NULL, &es, &tv);
	say("select(exceptfds only, 0.5 s) -> %s %s", rstr(r, n, sizeof(n)),
	    dur(tl_now_ms() - t0));
	unpair(&p);
}

/* review4: connect(AF_UNSPEC) disconnects (tcp_disconnect): on a
 * connection the peer is reset and the socket can connect again; on a
 * listener it stops listening. */
static void case_unspec(void)
{
	struct sockaddr_in un = {.sin_family = AF_UNSPEC};
	struct pollfd pf = {.fd = -1, .events = POLLIN};
	struct sockaddr_in la = laddr;
	socklen_t al = sizeof(la);
	char buf[4], n[24], m[24];
	struct pair p;
	int l, c;
	long r;

	if (mkpair(&p))
		return;
	r = connect(p.c, (struct sockaddr *)&un, sizeof(un));
	say("connected: connect(AF_UNSPEC) -> %s, getpeername %s",
	    rstr(r, n, sizeof(n)), peer_str(p.c, p.s, m, sizeof(m)));
	pf.fd = p.s;
	poll(&pf, 1, 1000); /* (the reset is at once over loopback) */
	r = recv(p.s, buf, sizeof(buf), MSG_DONTWAIT);
	say("the peer's recv -> %s", rstr(r, n, sizeof(n)));
	close(p.s);
	p.s = -1;
	r = connect(p.c, (struct sockaddr *)&laddr, sizeof(laddr));
	say("connect again -> %s", rstr(r, n, sizeof(n)));
	if (r == 0) {
		p.s = accept_wait();
		r = send(p.c, "abc", 3, 0);
		say("accepted %s, send -> %s, peer recv -> %ld",
		    p.s >= 0 ? "yes" : "no", rstr(r, n, sizeof(n)),
		    p.s >= 0 ? (long)recv(p.s, buf, sizeof(buf), 0) : -1L);
	}
	unpair(&p);

	l = socket(AF_INET, SOCK_STREAM, 0);
	la.sin_port = 0;
	if (bind(l, (struct sockaddr *)&la, sizeof(la)) < 0 || listen(l, 4) ||
	    getsockname(l, (struct sockaddr *)&la, &al) < 0) {
		say("listener: %s", tl_en(errno));
		close(l);
		return;
	}
	r = connect(l, (struct sockaddr *)&un, sizeof(un));
	say("listener: connect(AF_UNSPEC) -> %s", rstr(r, n, sizeof(n)));
	set_nb(l, true);
	r = accept(l, NULL, NULL);
	say("listener: accept -> %s", rstr(r, n, sizeof(n)));
	if (r >= 0)
		close((int)r);
	c = socket(AF_INET, SOCK_STREAM, 0);
	r = connect(c, (struct sockaddr *)&la, sizeof(la));
	say("a client of its port: connect -> %s", rstr(r, n, sizeof(n)));
	close(c);
	close(l);
}

/* review4: TCP_MAXSEG of a connection is its path's MSS, not the 536 an
 * unconnected TCP socket reads; IP_MTU is its path's MTU (ENOTCONN on an
 * unconnected one). */
static void case_maxseg(void)
{
	struct pair p;
	socklen_t l = sizeof(int);
	int v = 0, u = 0, fd;

	if (mkpair(&p))
		return;
	getsockopt(p.c, IPPROTO_TCP, TCP_MAXSEG, &v, &l);
	fd = socket(AF_INET, SOCK_STREAM, 0);
	l = sizeof(int);
	getsockopt(fd, IPPROTO_TCP, TCP_MAXSEG, &u, &l);
	close(fd);
	say("unconnected socket: %d; connection: %s", u,
	    v > u    ? "more"
	    : v == u ? "the same"
		     : "less");
	l = sizeof(int);
	v = 0;
	if (getsockopt(p.c, IPPROTO_IP, IP_MTU, &v, &l) < 0)
		say("connection: IP_MTU -> %s", tl_en(errno));
	else
		say("connection: IP_MTU -> %s",
		    v >= 576 ? "576 or more" : "less than 576");
	unpair(&p);
}

struct late {
	int fd, ms;
};

static void *late_main(void *arg)
{
	struct late *l = arg;

	tl_sleep_ms(l->ms); /* the peer that writes late: what is tested */
	send(l->fd, "L", 1, MSG_NOSIGNAL);
	return NULL;
}

/* A blocking recv on fd whose peer (other) sends 1 byte after 1.2 s: the
 * answer and how long it took; then the byte is drained. */
static void recv_late(const char *what, int fd, int other)
{
	struct late l = {other, 1200};
	pthread_t th;
	char c, n[24];
	int64_t t0;
	long r;

	pthread_create(&th, NULL, late_main, &l);
	t0 = tl_now_ms();
	r = recv(fd, &c, 1, 0);
	say("%s: blocking recv, the peer sends at 1.2 s -> %s %s", what,
	    rstr(r, n, sizeof(n)), dur(tl_now_ms() - t0));
	pthread_join(th, NULL);
	if (r < 0 && wait_readable(fd))
		recv(fd, &c, 1, MSG_DONTWAIT);
}

/* ls, with the options a case set on it, listens on the test's address;
 * a client connects (*c) and ls accepts it (*s): 0, or -1 (said). */
static int accepted_from(int ls, int *c, int *s)
{
	struct sockaddr_in la = laddr;
	struct pollfd pf = {.fd = ls, .events = POLLIN};
	socklen_t al = sizeof(la);

	la.sin_port = 0;
	if (bind(ls, (struct sockaddr *)&la, sizeof(la)) < 0 ||
	    listen(ls, 4) < 0 ||
	    getsockname(ls, (struct sockaddr *)&la, &al) < 0 ||
	    (*c = socket(AF_INET, SOCK_STREAM, 0)) < 0 ||
	    connect(*c, (struct sockaddr *)&la, sizeof(la)) < 0) {
		say("listener: %s", tl_en(errno));
		return -1;
	}
	if (poll(&pf, 1, 10000) != 1 || (*s = accept(ls, NULL, NULL)) < 0) {
		say("accept: %s", tl_en(errno));
		return -1;
	}
	return 0;
}

/* review4: an accepted socket has its listener's SO_RCVTIMEO and
 * SO_SNDTIMEO (sk_clone_lock copies the sock); SO_RCVTIMEO_NEW (the
 * 64-bit form, 66) sets the same timeout as SO_RCVTIMEO. */
static void case_timeo_inherit(void)
{
	struct timeval tv = {0, 300000}, rd;
	int64_t tnew[2] = {0, 300000};
	socklen_t l = sizeof(rd);
	struct pair p;
	char n[24];
	int ls, c = -1, s = -1;
	long r;

	if (mkpair(&p))
		return;
	r = setsockopt(p.s, SOL_SOCKET, 66 /* SO_RCVTIMEO_NEW */, tnew,
		       sizeof(tnew));
	say("SO_RCVTIMEO_NEW 0.3 s -> %s", rstr(r, n, sizeof(n)));
	recv_late("SO_RCVTIMEO_NEW", p.s, p.c);
	unpair(&p);

	ls = socket(AF_INET, SOCK_STREAM, 0);
	setsockopt(ls, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	setsockopt(ls, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
	if (accepted_from(ls, &c, &s) < 0)
		goto out;
	memset(&rd, 0, sizeof(rd));
	getsockopt(s, SOL_SOCKET, SO_RCVTIMEO, &rd, &l);
	say("listener with SO_RCVTIMEO/SO_SNDTIMEO 0.3 s: accepted socket's "
	    "SO_RCVTIMEO reads {%ld, %ld}",
	    (long)rd.tv_sec, (long)rd.tv_usec);
	recv_late("accepted", s, c);
out:
	if (s >= 0)
		close(s);
	if (c >= 0)
		close(c);
	close(ls);
}

/* review4: TCP_DEFER_ACCEPT on a listener: a connection that has sent
 * nothing is not ready to accept (within the option's 5 s); its first
 * byte makes it so. */
static void case_defer_accept(void)
{
	struct sockaddr_in la = laddr;
	socklen_t al = sizeof(la);
	struct pollfd pf = {.fd = -1, .events = POLLIN};
	int ls, c = -1, s, secs = 5, r;
	int64_t t0;
	char buf[4];

	ls = socket(AF_INET, SOCK_STREAM, 0);
	la.sin_port = 0;
	setsockopt(ls, IPPROTO_TCP, TCP_DEFER_ACCEPT, &secs, sizeof(secs));
	if (bind(ls, (struct sockaddr *)&la, sizeof(la)) < 0 ||
	    listen(ls, 4) < 0 ||
	    getsockname(ls, (struct sockaddr *)&la, &al) < 0 ||
	    (c = socket(AF_INET, SOCK_STREAM, 0)) < 0 ||
	    connect(c, (struct sockaddr *)&la, sizeof(la)) < 0) {
		say("listener: %s", tl_en(errno));
		goto out;
	}
	pf.fd = ls;
	t0 = tl_now_ms();
	r = poll(&pf, 1, 600);
	say("TCP_DEFER_ACCEPT 5 s, connected, nothing sent: poll(listener, "
	    "0.6 s) -> %d %s",
	    r, dur(tl_now_ms() - t0));
	send(c, "d", 1, 0);
	r = poll(&pf, 1, 5000);
	s = r == 1 ? accept(ls, NULL, NULL) : -1;
	say("1 byte sent: poll -> %d, accepted %s, recv -> %ld", r,
	    s >= 0 ? "yes" : "no",
	    s >= 0 && wait_readable(s) ? (long)recv(s, buf, sizeof(buf), 0)
				       : -1L);
	if (s >= 0)
		close(s);
out:
	if (c >= 0)
		close(c);
	close(ls);
}

static int opt_int(int fd, int level, int name)
{
	socklen_t l = sizeof(int);
	int v = -1;

	if (getsockopt(fd, level, name, &v, &l) < 0)
		return -errno;
	return v;
}

/* review4: an accepted socket reads back the TCP_NODELAY, SO_LINGER,
 * SO_OOBINLINE and IP_TOS its listener had (sk_clone_lock copies them). */
static void case_opt_inherit(void)
{
	socklen_t l;
	struct linger lg = {1, 7}, rd = {0, 0};
	int ls, c = -1, s = -1, one = 1, tos = 0x10;

	ls = socket(AF_INET, SOCK_STREAM, 0);
	setsockopt(ls, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	setsockopt(ls, SOL_SOCKET, SO_LINGER, &lg, sizeof(lg));
	setsockopt(ls, SOL_SOCKET, SO_OOBINLINE, &one, sizeof(one));
	setsockopt(ls, IPPROTO_IP, IP_TOS, &tos, sizeof(tos));
	if (accepted_from(ls, &c, &s) < 0)
		goto out;
	l = sizeof(rd);
	getsockopt(s, SOL_SOCKET, SO_LINGER, &rd, &l);
	say("accepted: TCP_NODELAY %d, SO_LINGER {%d, %d}, SO_OOBINLINE %d, "
	    "IP_TOS %#x",
	    opt_int(s, IPPROTO_TCP, TCP_NODELAY), rd.l_onoff, rd.l_linger,
	    opt_int(s, SOL_SOCKET, SO_OOBINLINE),
	    opt_int(s, IPPROTO_IP, IP_TOS));
	say("the client (none set): TCP_NODELAY %d, IP_TOS %#x",
	    opt_int(c, IPPROTO_TCP, TCP_NODELAY),
	    opt_int(c, IPPROTO_IP, IP_TOS));
out:
	if (s >= 0)
		close(s);
	if (c >= 0)
		close(c);
	close(ls);
}

/* review4: select with an fd that is not open among its sets: EBADF, and
 * the sets are left as they were (core_sys_select copies nothing back). */
static void case_select_badf(void)
{
	struct timeval tv = {0, 300000};
	struct pair p;
	char n[24];
	int64_t t0;
	fd_set rs;
	int bad;
	long r;

	if (mkpair(&p))
		return;
	/* the highest number select takes: no fd the shim's threads open
	 * (lowest free numbers) can take it between the close and the call */
	bad = dup2(p.s, FD_SETSIZE - 1);
	close(bad);
	FD_ZERO(&rs);
	FD_SET(p.s, &rs);
	FD_SET(bad, &rs);
	t0 = tl_now_ms();
	r = select(bad + 1, &rs, NULL, NULL, &tv);
	say("select(IN: a connection, nothing queued; a closed fd above it) "
	    "-> %s %s, the connection's bit %s, the closed fd's %s",
	    rstr(r, n, sizeof(n)), dur(tl_now_ms() - t0),
	    FD_ISSET(p.s, &rs) ? "kept" : "cleared",
	    FD_ISSET(bad, &rs) ? "kept" : "cleared");
	unpair(&p);
}

/* review4: connect on a listener checks its address first (EINVAL for a
 * length short of a family, EFAULT for a bad pointer), then its state:
 * EISCONN (inet_stream_connect). */
static void case_lconnect(void)
{
	char n[24];
	long r;

	r = connect(lfd, NULL, 0);
	say("connect(listener, NULL, 0) -> %s", rstr(r, n, sizeof(n)));
	r = connect(lfd, (struct sockaddr *)&laddr, 1);
	say("connect(listener, addr, 1) -> %s", rstr(r, n, sizeof(n)));
	r = connect(lfd, (struct sockaddr *)8, sizeof(laddr));
	say("connect(listener, an unmapped address) -> %s",
	    rstr(r, n, sizeof(n)));
	r = connect(lfd, (struct sockaddr *)&laddr, sizeof(laddr));
	say("connect(listener, its own address) -> %s", rstr(r, n, sizeof(n)));
}

/* review4: getsockopt(SO_PEERNAME) gives the peer's address with
 * sk_getsockopt's length rules (a prefix; EINVAL past the name), also
 * once the connection is closed (getname with peer 2). */
static void peername_opt_say(const char *what, int fd, int other, int len)
{
	struct sockaddr_storage st;
	struct sockaddr_in b;
	socklen_t sl = (socklen_t)len, bl = sizeof(b);
	char n[24];
	long r;

	memset(&st, 0, sizeof(st));
	r = getsockopt(fd, SOL_SOCKET, SO_PEERNAME, &st, &sl);
	getsockname(other, (struct sockaddr *)&b, &bl);
	say("%s: SO_PEERNAME, length %d -> %s, length %u, %s", what, len,
	    rstr(r, n, sizeof(n)), sl,
	    ((struct sockaddr_in *)&st)->sin_port == b.sin_port ? "the peer"
								: "no port");
}

static void case_peername_opt(void)
{
	struct sockaddr_in sin;
	struct pair p;
	socklen_t l;
	char buf[4];
	int r;

	if (mkpair(&p))
		return;
	peername_opt_say("client", p.c, p.s, (int)sizeof(struct sockaddr_in));
	peername_opt_say("server", p.s, p.c, (int)sizeof(struct sockaddr_in));
	peername_opt_say("client", p.c, p.s, 4);
	peername_opt_say("client", p.c, p.s,
			 (int)sizeof(struct sockaddr_storage));
	/* unmapped buffers: EFAULT, as the kernel's copies say */
	l = sizeof(sin);
	r = getsockopt(p.c, SOL_SOCKET, SO_PEERNAME, unmapped, &l);
	say("client SO_PEERNAME into an unmapped address -> %s",
	    r ? tl_en(errno) : "ok");
	r = getsockopt(p.c, SOL_SOCKET, SO_PEERNAME, &sin, unmapped);
	say("client SO_PEERNAME with an unmapped length -> %s",
	    r ? tl_en(errno) : "ok");
	shutdown(p.c, SHUT_WR);
	recv(p.s, buf, sizeof(buf), 0);
	shutdown(p.s, SHUT_WR);
	recv(p.c, buf, sizeof(buf), 0);
	peername_opt_say("closed client", p.c, p.s,
			 (int)sizeof(struct sockaddr_in));
	unpair(&p);
}

static const struct {
	const char *name;
	void (*fn)(void);
} cases[] = {
    {"epdup", case_epdup},
    {"epclose", case_epclose},
    {"cancel", case_cancel},
    {"cancel-wait", case_cancel_wait},
    {"cancel-ready", case_cancel_ready},
    {"lclose", case_lclose},
    {"acceptargs", case_acceptargs},
    {"pending", case_pending},
    {"restart", case_restart},
    {"hup-out", case_hup_out},
    {"shut-rd", case_shut_rd},
    {"recv0", case_recv0},
    {"timeo", case_timeo},
    {"syscall", case_syscall},
    {"fdopen", case_fdopen},
    {"splice", case_splice},
    {"nbconnect", case_nbconnect},
    {"nbrefused", case_nbrefused},
    {"ctl-race", case_ctl_race},
    {"ring-eintr", case_ring_eintr},
    {"longjmp", case_longjmp},
    {"alarm", case_alarm},
    {"bindaddr", case_bindaddr},
    {"connect-intr", case_connect_intr},
    {"close-fds", case_close_fds},
    {"close-jump", case_close_jump},
    {"poll-none", case_poll_none},
    {"sigmask", case_sigmask},
    {"trunc", case_trunc},
    {"bufsz", case_bufsz},
    {"trunc-timeo", case_trunc_timeo},
    {"cancel-mask", case_cancel_mask},
    {"serial", case_serial},
    {"read0", case_read0},
    {"peekv", case_peekv},
    {"tcpinfo", case_tcpinfo},
    {"outq", case_outq},
    {"rcvlowat", case_rcvlowat},
    {"etedge", case_etedge},
    {"timeo-neg", case_timeo_neg},
    {"peername", case_peername},
    {"seltmo", case_seltmo},
    {"linger0", case_linger0},
    {"async", case_async},
    {"select-ex", case_select_ex},
    {"unspec", case_unspec},
    {"maxseg", case_maxseg},
    {"timeo-inherit", case_timeo_inherit},
    {"defer-accept", case_defer_accept},
    {"opt-inherit", case_opt_inherit},
    {"select-badf", case_select_badf},
    {"lconnect", case_lconnect},
    {"peername-opt", case_peername_opt},
};

static void *watchdog(void *arg)
{
	sigset_t all;

	(void)arg;
	sigfillset(&all);
	pthread_sigmask(SIG_BLOCK, &all, NULL);
	sleep(100);
	fprintf(stderr, "kexact: watchdog: still running after 100 s\n");
	_exit(3);
}

/* Is name one of the words of KEXACT_SKIP? */
static bool skipped(const char *skip, const char *name)
{
	size_t n = strlen(name);

	for (const char *w = skip; w && *w;) {
		size_t l = strcspn(w, " ");

		if (l == n && !strncmp(w, name, n))
			return true;
		w += l;
		w += strspn(w, " ");
	}
	return false;
}

int main(int argc, char **argv)
{
	socklen_t len = sizeof(laddr);
	pthread_t wd;
	int one = 1;

	if (argc < 2) {
		fprintf(stderr, "usage: kexact ADDR [CASE...]\n");
		return 2;
	}
	pthread_create(&wd, NULL, watchdog, NULL);
	signal(SIGPIPE, SIG_IGN);
	laddr.sin_family = AF_INET;
	if (inet_pton(AF_INET, argv[1], &laddr.sin_addr) != 1) {
		fprintf(stderr, "kexact: bad address %s\n", argv[1]);
		return 2;
	}
	lfd = socket(AF_INET, SOCK_STREAM, 0);
	setsockopt(lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	if (bind(lfd, (struct sockaddr *)&laddr, sizeof(laddr)) < 0 ||
	    listen(lfd, 16) < 0 ||
	    getsockname(lfd, (struct sockaddr *)&laddr, &len) < 0) {
		fprintf(stderr, "kexact: listen: %s\n", strerror(errno));
		return 1;
	}
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		bool run = argc == 2;
		const char *skip = getenv("KEXACT_SKIP");

		for (int a = 2; a < argc; a++)
			run |= !strcmp(argv[a], cases[i].name);
		if (!run || skipped(skip, cases[i].name))
			continue;
		cur = cases[i].name;
		cases[i].fn();
	}
	cur = "main";
	say("done");
	return 0;
}
