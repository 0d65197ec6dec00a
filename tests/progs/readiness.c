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
 * timing, fd numbers or ports.  Lines starting with "FIGURE:" are
 * measurements (wake-up latency, idle CPU), not part of the transcript.
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
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/ioctl.h>
#include <sys/eventfd.h>
#include <sys/resource.h>
#include <sys/select.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

#define ARRAY_SIZE(a) (sizeof(a) / sizeof((a)[0]))

static struct sockaddr_in laddr; /* the listener, port filled in */
static struct in_addr bind_ip;
static int lfd = -1;
static const char *cur = "main";
static const char *hold_file;

/* ---- output ---------------------------------------------------------- */

static pthread_mutex_t out_lock = PTHREAD_MUTEX_INITIALIZER;

static void say(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void say(const char *fmt, ...)
{
	va_list ap;

	pthread_mutex_lock(&out_lock);
	printf("%s: ", cur);
	va_start(ap, fmt);
	vprintf(fmt, ap);
	va_end(ap);
	putchar('\n');
	fflush(stdout);
	pthread_mutex_unlock(&out_lock);
}

static void figure(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void figure(const char *fmt, ...)
{
	va_list ap;

	pthread_mutex_lock(&out_lock);
	fputs("FIGURE: ", stdout);
	va_start(ap, fmt);
	vprintf(fmt, ap);
	va_end(ap);
	putchar('\n');
	fflush(stdout);
	pthread_mutex_unlock(&out_lock);
}

static const char *en(int e)
{
	const char *s = strerrorname_np(e);

	return s ? s : "E?";
}

/* "ok" or the errno name of a call's result. */
static const char *res(long r)
{
	return r >= 0 ? "ok" : en(errno);
}

static int64_t now_us(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

static void sleep_ms(int ms)
{
	struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};

	while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
		;
}

/* ---- event masks and names ------------------------------------------- */

static const struct {
	uint32_t bit;
	const char *name;
} bitnames[] = {
    {EPOLLIN, "IN"},	     {EPOLLPRI, "PRI"},	      {EPOLLOUT, "OUT"},
    {EPOLLERR, "ERR"},	     {EPOLLHUP, "HUP"},	      {POLLNVAL, "NVAL"},
    {EPOLLRDNORM, "RDNORM"}, {EPOLLRDBAND, "RDBAND"}, {EPOLLWRNORM, "WRNORM"},
    {EPOLLWRBAND, "WRBAND"}, {EPOLLMSG, "MSG"},	      {EPOLLRDHUP, "RDHUP"},
};

static char *mask_str(uint32_t m, char *buf, size_t len)
{
	size_t o = 0;

	buf[0] = 0;
	for (size_t i = 0; i < ARRAY_SIZE(bitnames); i++)
		if (m & bitnames[i].bit) {
			o += (size_t)snprintf(buf + o, len - o, "%s%s",
					      o ? "|" : "", bitnames[i].name);
			m &= ~bitnames[i].bit;
		}
	if (m)
		o += (size_t)snprintf(buf + o, len - o, "%s0x%x", o ? "|" : "",
				      m);
	if (!o)
		snprintf(buf, len, "0");
	return buf;
}

/* epoll_data: a recognisable 64-bit value per registration id, so a value
 * that does not come back intact shows. */
#define MAXID 32
static const char *idname[MAXID];

static uint64_t key(int id)
{
	return 0xC0DE00000000A5A5ull | ((uint64_t)id << 16);
}

static int key_id(uint64_t k)
{
	uint64_t id = (k >> 16) & 0xffffffffu;

	if ((k & 0xFFFF00000000FFFFull) != 0xC0DE00000000A5A5ull || id >= MAXID)
		return -1;
	return (int)id;
}

static int cmp_ev(const void *a, const void *b)
{
	const struct epoll_event *x = a, *y = b;
	int i = key_id(x->data.u64), j = key_id(y->data.u64);

	if (i != j)
		return i < j ? -1 : 1;
	return x->events < y->events ? -1 : x->events > y->events;
}

static char *evs_str(struct epoll_event *evs, int n, char *buf, size_t len)
{
	size_t o = 0;
	char m[128];

	buf[0] = 0;
	qsort(evs, (size_t)n, sizeof(*evs), cmp_ev);
	for (int i = 0; i < n && o < len; i++) {
		int id = key_id(evs[i].data.u64);

		mask_str(evs[i].events, m, sizeof(m));
		if (id >= 0 && idname[id])
			o += (size_t)snprintf(buf + o, len - o, "%s%s:%s",
					      i ? " " : "", idname[id], m);
		else
			o += (size_t)snprintf(buf + o, len - o,
					      "%sdata=0x%016" PRIx64 ":%s",
					      i ? " " : "", evs[i].data.u64, m);
	}
	return buf;
}

/* ---- epoll helpers ---------------------------------------------------- */

static int ep_ctl(int ep, int op, int fd, uint32_t events, int id,
		  const char *name)
{
	struct epoll_event e = {.events = events, .data.u64 = key(id)};
	static const char *const ops[] = {"?", "ADD", "DEL", "MOD"};

	if (id >= 0 && id < MAXID && name)
		idname[id] = name;
	if (epoll_ctl(ep, op, fd, &e) < 0) {
		int er = errno;

		say("epoll_ctl %s %s: %s", ops[op & 3], name ? name : "?",
		    en(er));
		errno = er;
		return -1;
	}
	return 0;
}

static int ep_add(int ep, int fd, uint32_t events, int id, const char *name)
{
	return ep_ctl(ep, EPOLL_CTL_ADD, fd, events, id, name);
}

static int ep_new(void)
{
	int ep = epoll_create1(EPOLL_CLOEXEC);

	if (ep < 0) {
		say("epoll_create1: %s", en(errno));
		exit(2);
	}
	return ep;
}

/* One epoll_wait, printed as "LABEL: events" / "nothing" / "timeout". */
static int ep_show(const char *label, int ep, int timeout)
{
	struct epoll_event evs[32];
	char b[1024];
	int n = epoll_wait(ep, evs, 32, timeout);

	if (n < 0)
		say("%s: %s", label, en(errno));
	else if (n == 0)
		say("%s: %s", label, timeout ? "timeout" : "nothing");
	else
		say("%s: %s", label, evs_str(evs, n, b, sizeof(b)));
	return n;
}

/*
 * Level-triggered sets only: wait (<= ms) until one epoll_wait shows every
 * (id, bits) pair given (terminated by -1).  It only synchronises with the
 * peer; the caller then prints a fresh snapshot, whatever it shows.
 */
static bool ep_settle(int ep, int ms, ...)
{
	int ids[8], k = 0;
	uint32_t bits[8];
	int64_t end = now_us() + (int64_t)ms * 1000;
	va_list ap;

	va_start(ap, ms);
	for (;;) {
		int id = va_arg(ap, int);

		if (id < 0 || k == 8)
			break;
		ids[k] = id;
		bits[k++] = va_arg(ap, unsigned int);
	}
	va_end(ap);
	do {
		struct epoll_event evs[32];
		int n = epoll_wait(ep, evs, 32, 20), ok = 0;

		for (int i = 0; i < k; i++)
			for (int j = 0; j < n; j++)
				if (key_id(evs[j].data.u64) == ids[i] &&
				    (evs[j].events & bits[i]) == bits[i]) {
					ok++;
					break;
				}
		if (n >= 0 && ok == k)
			return true;
		if (n > 0)
			sleep_ms(1);
	} while (now_us() < end);
	return false;
}

/* ---- poll helpers ----------------------------------------------------- */

static char *pfds_str(const struct pollfd *p, const char *const *names, int n,
		      char *buf, size_t len)
{
	size_t o = 0;
	char m[128];

	buf[0] = 0;
	for (int i = 0; i < n && o < len; i++)
		if (p[i].revents)
			o += (size_t)snprintf(
			    buf + o, len - o, "%s%s:%s", o ? " " : "", names[i],
			    mask_str((uint16_t)p[i].revents, m, sizeof(m)));
	return buf;
}

static int show_poll_result(const char *label, int r, int er,
			    const struct pollfd *p, const char *const *names,
			    int n, bool zero)
{
	char b[1024];

	if (r < 0)
		say("%s: %s", label, en(er));
	else if (r == 0)
		say("%s: %s", label, zero ? "nothing" : "timeout");
	else
		say("%s: %d ready: %s", label, r,
		    pfds_str(p, names, n, b, sizeof(b)));
	return r;
}

static int poll_show(const char *label, struct pollfd *p,
		     const char *const *names, int n, int timeout)
{
	int r = poll(p, (nfds_t)n, timeout);

	return show_poll_result(label, r, errno, p, names, n, timeout == 0);
}

static int ppoll_show(const char *label, struct pollfd *p,
		      const char *const *names, int n, int timeout_ms,
		      const sigset_t *mask)
{
	struct timespec ts = {timeout_ms / 1000,
			      (long)(timeout_ms % 1000) * 1000000L};
	int r = ppoll(p, (nfds_t)n, timeout_ms < 0 ? NULL : &ts, mask);

	return show_poll_result(label, r, errno, p, names, n, timeout_ms == 0);
}

/* Wait (<= ms) until poll shows bits on entry idx (pairs, -1 ends). */
static bool poll_settle(struct pollfd *p, int n, int ms, ...)
{
	int idx[8], k = 0;
	short bits[8];
	int64_t end = now_us() + (int64_t)ms * 1000;
	va_list ap;

	va_start(ap, ms);
	for (;;) {
		int i = va_arg(ap, int);

		if (i < 0 || k == 8)
			break;
		idx[k] = i;
		bits[k++] = (short)va_arg(ap, int);
	}
	va_end(ap);
	do {
		int r = poll(p, (nfds_t)n, 20), ok = 0;

		for (int i = 0; r > 0 && i < k; i++)
			ok += (p[idx[i]].revents & bits[i]) == bits[i];
		if (r >= 0 && ok == k)
			return true;
		if (r > 0)
			sleep_ms(1);
	} while (now_us() < end);
	return false;
}

/* select over named fds: "n=K r=a,b w=c" */
struct sfd {
	int fd;
	const char *name;
	bool r, w;
};

static void sel_build(const struct sfd *f, int n, fd_set *r, fd_set *w,
		      int *maxfd)
{
	FD_ZERO(r);
	FD_ZERO(w);
	*maxfd = -1;
	for (int i = 0; i < n; i++) {
		if (f[i].r)
			FD_SET(f[i].fd, r);
		if (f[i].w)
			FD_SET(f[i].fd, w);
		if (f[i].fd > *maxfd)
			*maxfd = f[i].fd;
	}
}

static void sel_print(const char *label, int r, int er, const struct sfd *f,
		      int n, fd_set *rs, fd_set *ws, bool zero,
		      const char *extra)
{
	char b[512];
	size_t o = 0;

	if (r < 0) {
		say("%s: %s%s", label, en(er), extra);
		return;
	}
	if (r == 0) {
		say("%s: %s%s", label, zero ? "nothing" : "timeout", extra);
		return;
	}
	o += (size_t)snprintf(b + o, sizeof(b) - o, "n=%d r=", r);
	for (int i = 0, c = 0; i < n; i++)
		if (f[i].r && FD_ISSET(f[i].fd, rs))
			o += (size_t)snprintf(b + o, sizeof(b) - o, "%s%s",
					      c++ ? "," : "", f[i].name);
	o += (size_t)snprintf(b + o, sizeof(b) - o, " w=");
	for (int i = 0, c = 0; i < n; i++)
		if (f[i].w && FD_ISSET(f[i].fd, ws))
			o += (size_t)snprintf(b + o, sizeof(b) - o, "%s%s",
					      c++ ? "," : "", f[i].name);
	say("%s: %s%s", label, b, extra);
}

static int select_show(const char *label, const struct sfd *f, int n,
		       int timeout_ms)
{
	fd_set rs, ws;
	int maxfd, r;
	struct timeval tv = {timeout_ms / 1000, (timeout_ms % 1000) * 1000};

	sel_build(f, n, &rs, &ws, &maxfd);
	r = select(maxfd + 1, &rs, &ws, NULL, timeout_ms < 0 ? NULL : &tv);
	sel_print(label, r, errno, f, n, &rs, &ws, timeout_ms == 0, "");
	return r;
}

static int pselect_show(const char *label, const struct sfd *f, int n,
			int timeout_ms, const sigset_t *mask)
{
	fd_set rs, ws;
	int maxfd, r;
	struct timespec ts = {timeout_ms / 1000,
			      (long)(timeout_ms % 1000) * 1000000L};

	sel_build(f, n, &rs, &ws, &maxfd);
	r = pselect(maxfd + 1, &rs, &ws, NULL, timeout_ms < 0 ? NULL : &ts,
		    mask);
	sel_print(label, r, errno, f, n, &rs, &ws, timeout_ms == 0, "");
	return r;
}

/* ---- sockets ---------------------------------------------------------- */

struct pair {
	int c, s; /* connecting end, accepted end; both non-blocking */
};

static void set_nb(int fd, bool on)
{
	int fl = fcntl(fd, F_GETFL);

	if (fl >= 0)
		fcntl(fd, F_SETFL, on ? fl | O_NONBLOCK : fl & ~O_NONBLOCK);
}

/* accept4 on the listener, waiting <= 5 s for an arrival. */
static int accept_nb(void)
{
	struct pollfd q = {.fd = lfd, .events = POLLIN};

	if (poll(&q, 1, 5000) == 0) {
		errno = ETIMEDOUT;
		return -1;
	}
	return accept4(lfd, NULL, NULL, SOCK_NONBLOCK);
}

/* Connect to our own listener (blocking), accept, make both non-blocking. */
static int mkpair(struct pair *p)
{
	p->c = p->s = -1;
	p->c = socket(AF_INET, SOCK_STREAM, 0);
	if (p->c < 0) {
		say("pair: socket: %s", en(errno));
		return -1;
	}
	if (connect(p->c, (struct sockaddr *)&laddr, sizeof(laddr)) < 0) {
		say("pair: connect: %s", en(errno));
		close(p->c);
		return -1;
	}
	p->s = accept_nb();
	if (p->s < 0) {
		say("pair: accept: %s", en(errno));
		close(p->c);
		return -1;
	}
	set_nb(p->c, true);
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

static void xsend(int fd, const char *msg)
{
	ssize_t r = send(fd, msg, strlen(msg), MSG_NOSIGNAL);

	if (r != (ssize_t)strlen(msg))
		say("send \"%s\": %s", msg, r < 0 ? en(errno) : "short");
}

/* Non-blocking read of what is there: "\"text\"", "EOF", "EAGAIN"... */
static const char *recv_str(int fd, size_t max, char *buf, size_t len)
{
	char data[100];
	ssize_t r;

	if (max > sizeof(data) - 1)
		max = sizeof(data) - 1;
	r = recv(fd, data, max, MSG_DONTWAIT);
	if (r > 0) {
		data[r] = 0;
		snprintf(buf, len, "\"%s\"", data);
	} else if (r == 0) {
		snprintf(buf, len, "EOF");
	} else {
		snprintf(buf, len, "%s", en(errno));
	}
	return buf;
}

/* Read until EAGAIN/EOF/error; bytes read, or -errno if nothing read. */
static long drain(int fd)
{
	char buf[65536];
	long total = 0;

	for (;;) {
		ssize_t r = recv(fd, buf, sizeof(buf), MSG_DONTWAIT);

		if (r > 0) {
			total += r;
			continue;
		}
		if (r == 0 || errno == EAGAIN || errno == EWOULDBLOCK)
			return total;
		return total ? total : -errno;
	}
}

static const char *so_error(int fd)
{
	int err = -1;
	socklen_t len = sizeof(err);

	if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len) < 0)
		return en(errno);
	return err ? en(err) : "0";
}

static int new_efd(void)
{
	int fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);

	if (fd < 0) {
		say("eventfd: %s", en(errno));
		exit(2);
	}
	return fd;
}

static void kick(int efd)
{
	uint64_t one = 1;

	if (write(efd, &one, sizeof(one)) != sizeof(one))
		say("eventfd write: %s", en(errno));
}

static void unkick(int efd)
{
	uint64_t v;

	(void)!read(efd, &v, sizeof(v));
}

/* An fd number that is not open: the lowest free one, so it is within the
 * fd table (select ignores numbers beyond it).  Call it right before use:
 * the next open takes the number. */
static int closed_fd(void)
{
	int fd = dup(0);

	if (fd >= 0)
		close(fd);
	return fd;
}

/* Empty a pipe or eventfd. */
static void drain_pipe(int fd)
{
	char buf[256];

	while (read(fd, buf, sizeof(buf)) > 0)
		;
}

/* A kernel TCP connection the shim can't see: raw system calls. */
static int raw_tcp_connect(void)
{
	int fd =
	    (int)syscall(SYS_socket, AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);

	if (fd < 0)
		return -errno;
	if (syscall(SYS_connect, fd, &laddr, sizeof(laddr)) < 0) {
		int e = errno;

		syscall(SYS_close, fd);
		return -e;
	}
	return fd;
}

/* ---- threads ---------------------------------------------------------- */

/* Helper threads never take the program's signals (SIGALRM is for the
 * thread under test). */
static pthread_t spawn(void *(*fn)(void *), void *arg)
{
	sigset_t all, old;
	pthread_t t;

	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	if (pthread_create(&t, NULL, fn, arg)) {
		fprintf(stderr, "pthread_create failed\n");
		exit(2);
	}
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	return t;
}

static bool join_within(pthread_t t, int ms)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	ts.tv_sec += ms / 1000;
	ts.tv_nsec += (long)(ms % 1000) * 1000000L;
	if (ts.tv_nsec >= 1000000000L) {
		ts.tv_sec++;
		ts.tv_nsec -= 1000000000L;
	}
	return pthread_timedjoin_np(t, NULL, &ts) == 0;
}

/* Rescue: write an eventfd after ms unless stopped first. */
struct rescue {
	int fd, ms;
	bool stop, fired;
	pthread_t t;
	pthread_mutex_t m;
	pthread_cond_t cv;
};

static void *rescue_main(void *arg)
{
	struct rescue *r = arg;
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	ts.tv_sec += r->ms / 1000;
	ts.tv_nsec += (long)(r->ms % 1000) * 1000000L;
	if (ts.tv_nsec >= 1000000000L) {
		ts.tv_sec++;
		ts.tv_nsec -= 1000000000L;
	}
	pthread_mutex_lock(&r->m);
	while (!r->stop)
		if (pthread_cond_timedwait(&r->cv, &r->m, &ts) == ETIMEDOUT) {
			if (!r->stop) {
				r->fired = true;
				kick(r->fd);
			}
			break;
		}
	pthread_mutex_unlock(&r->m);
	return NULL;
}

static void rescue_start(struct rescue *r, int fd, int ms)
{
	memset(r, 0, sizeof(*r));
	r->fd = fd;
	r->ms = ms;
	pthread_mutex_init(&r->m, NULL);
	pthread_cond_init(&r->cv, NULL);
	r->t = spawn(rescue_main, r);
}

static bool rescue_stop(struct rescue *r)
{
	pthread_mutex_lock(&r->m);
	r->stop = true;
	pthread_cond_signal(&r->cv);
	pthread_mutex_unlock(&r->m);
	pthread_join(r->t, NULL);
	pthread_mutex_destroy(&r->m);
	pthread_cond_destroy(&r->cv);
	return r->fired;
}

/* The guard: one eventfd that every unbounded poll/select here also waits
 * on, written if the call has not returned within ms. */
static int guard_fd = -1;
static struct rescue guard_r;

static void guard_start(int ms)
{
	rescue_start(&guard_r, guard_fd, ms);
}

static void guard_stop(const char *what)
{
	if (rescue_stop(&guard_r)) {
		say("%s: did not return by itself (guard fired after %d ms)",
		    what, guard_r.ms);
		drain_pipe(guard_fd);
	}
}

/* Later: after ms, send a message on fd (or kick an eventfd). */
struct later {
	int fd, ms;
	bool is_efd;
	const char *msg;
	pthread_t t;
};

static void *later_main(void *arg)
{
	struct later *l = arg;

	sleep_ms(l->ms);
	if (l->is_efd)
		kick(l->fd);
	else
		(void)!write(l->fd, l->msg, strlen(l->msg));
	return NULL;
}

static void later_start(struct later *l, int fd, int ms, const char *msg)
{
	l->fd = fd;
	l->ms = ms;
	l->msg = msg;
	l->is_efd = msg == NULL;
	l->t = spawn(later_main, l);
}

static void later_join(struct later *l)
{
	pthread_join(l->t, NULL);
}

/* A thread blocked in epoll_wait. */
struct waiter {
	int ep, timeout, n, err;
	int done; /* atomic */
	char res[512];
	pthread_t t;
};

static void *waiter_main(void *arg)
{
	struct waiter *w = arg;
	struct epoll_event evs[16];

	w->n = epoll_wait(w->ep, evs, 16, w->timeout);
	w->err = errno;
	if (w->n > 0)
		evs_str(evs, w->n, w->res, sizeof(w->res));
	__atomic_store_n(&w->done, 1, __ATOMIC_RELEASE);
	return NULL;
}

static void waiter_start(struct waiter *w, int ep, int timeout)
{
	memset(w, 0, sizeof(*w));
	w->ep = ep;
	w->timeout = timeout;
	w->t = spawn(waiter_main, w);
}

static bool waiter_done(struct waiter *w)
{
	return __atomic_load_n(&w->done, __ATOMIC_ACQUIRE);
}

/* Join (<= ms); if it is still blocked, rescue it through efd.  Prints
 * what the waiter saw. */
static void waiter_finish(struct waiter *w, const char *label, int ms, int efd)
{
	if (!join_within(w->t, ms)) {
		say("%s: still blocked after %d ms", label, ms);
		kick(efd);
		if (!join_within(w->t, 5000)) {
			say("%s: hung even after the rescue kick", label);
			fflush(stdout);
			_exit(3);
		}
	}
	if (w->n < 0)
		say("%s: %s", label, en(w->err));
	else if (w->n == 0)
		say("%s: timeout", label);
	else
		say("%s: %s", label, w->res);
}

/* ---- signals ---------------------------------------------------------- */

static volatile sig_atomic_t alarms;

static void on_alarm(int sig)
{
	(void)sig;
	alarms++;
}

static void arm_alarm(int ms)
{
	struct itimerval it = {.it_value = {ms / 1000, (ms % 1000) * 1000}};

	setitimer(ITIMER_REAL, &it, NULL);
}

static void disarm_alarm(void)
{
	struct itimerval it = {0};

	setitimer(ITIMER_REAL, &it, NULL);
}

/* The handler ran (waiting <= 500 ms for a pending signal to land). */
static const char *alarm_seen(void)
{
	for (int i = 0; i < 50 && !alarms; i++)
		sleep_ms(10);
	return alarms ? "yes" : "no";
}

/* =================================================================== */
/* Cases                                                                */
/* =================================================================== */

/* epoll over a kernel fd (eventfd) and two RDMA fds, level-triggered. */
static void case_mixed(void)
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
static void case_hup(void)
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
static void case_err(void)
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
static void case_et(void)
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
		say("send %zu bytes: %s", n, r < 0 ? en(errno) : "stuck");
		return;
	}
}

/* Wait (<= 2 s) until fd has n bytes queued, without reading them: only
 * synchronises with the peer, prints nothing unless it never happens. */
static void wait_inq(int fd, int n)
{
	int64_t end = now_us() + 2000000;
	int q = -1;

	do {
		struct pollfd pq = {.fd = fd, .events = POLLIN};

		(void)poll(&pq, 1, 10);
		if (ioctl(fd, FIONREAD, &q) == 0 && q >= n)
			return;
	} while (now_us() < end);
	say("never saw %d bytes queued (%d)", n, q);
}

/*
 * EPOLLET on EPOLLIN, counted: a sleeper woken by new data behind data it
 * has not read, more queued than one look sees, and the peer's EOF after
 * an exact read of everything.  (A partial read is followed by one more
 * event under the shim: case et, KNOWN.)
 */
static void case_et_count(void)
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
	t0 = now_us();
	n = epoll_wait(ep, evs, 4, 3000);
	say("asleep with 3 bytes unread, peer sends after 100 ms: %s%s",
	    n > 0 ? evs_str(evs, n, b, sizeof(b))
	    : n	  ? en(errno)
		  : "timeout",
	    now_us() - t0 < 1000000 ? "" : " (late)");
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
static void case_et_out(void)
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
		say("c send until it fails -> %s", r < 0 ? en(errno) : "0");
		break;
	}
	ep_show("send queue full", ep, 0);
	end = now_us() + 20 * 1000000LL;
	while (got < sent && now_us() < end) {
		struct pollfd q = {.fd = p.s, .events = POLLIN};
		long n;

		poll(&q, 1, 100);
		n = drain(p.s);
		if (n < 0) {
			say("peer drain: %s", en((int)-n));
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
static void case_oneshot(void)
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
	int64_t end = now_us() + 3000000;

	do {
		n = epoll_wait(ep, evs, 8, 20);
		if (n >= want)
			break;
	} while (now_us() < end);
	for (int i = 0; i < n; i++)
		v[i] = evs[i].data.u64;
	qsort(v, (size_t)(n > 0 ? n : 0), sizeof(v[0]), cmp_u64);
	b[0] = 0;
	for (int i = 0; i < n; i++)
		o += (size_t)snprintf(b + o, sizeof(b) - o, "%s0x%016" PRIx64,
				      i ? " " : "", v[i]);
	say("%s: %s", label, n > 0 ? b : "none");
}

static void case_data(void)
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
		int64_t end = now_us() + 3000000;

		do {
			n = epoll_wait(ep, evs, 8, 20);
			for (int i = 0; i < n; i++)
				found |= evs[i].data.ptr == &anchor;
		} while (!found && now_us() < end);
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
	    er ? ", error " : "", er ? en(er) : "", total ? b : "none");
}

static void case_fair(void)
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
static void case_ctl(void)
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

/* Timeouts: 0, finite (never early, bounded late), -1 woken by data. */
static void timed_show(const char *label, int n, int er, int64_t t0, int ms)
{
	int64_t el = (now_us() - t0) / 1000;

	if (n < 0)
		say("%s: %s", label, en(er));
	else if (n > 0)
		say("%s: %d ready", label, n);
	else if (el < ms - 1 || el > ms + 2000)
		say("%s: timeout after %" PRId64 " ms (asked %d)", label, el,
		    ms);
	else
		say("%s: timeout", label);
}

static void case_timeout(void)
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
	t0 = now_us();
	n = epoll_wait(ep, evs, 4, 200);
	timed_show("epoll_wait(200 ms), idle", n, errno, t0, 200);
	{
		struct timespec ts = {0, 150 * 1000000L};

		t0 = now_us();
		n = epoll_pwait2(ep, evs, 4, &ts, NULL);
		timed_show("epoll_pwait2(150 ms), idle", n, errno, t0, 150);
	}
	t0 = now_us();
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
static void case_eintr(void)
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
			n < 0 ? en(er) : evs_str(evs, n, b, sizeof(b))));
	INTERRUPTED("epoll_pwait(-1, NULL)",
		    (n = epoll_pwait(ep, evs, 4, -1, NULL), er = errno),
		    say("epoll_pwait(-1, no mask) + SIGALRM: %s",
			n < 0 ? en(er) : evs_str(evs, n, b, sizeof(b))));
	INTERRUPTED("epoll_wait(5000)",
		    (n = epoll_wait(ep, evs, 4, 5000), er = errno),
		    say("epoll_wait(5000) + SIGALRM: %s",
			n < 0 ? en(er) : evs_str(evs, n, b, sizeof(b))));
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
	    n < 0 ? en(er)
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
	    n < 0 ? en(er)
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
static void case_two_sets(void)
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
static void case_pre_connect(void)
{
	enum { C };
	int ep = ep_new(), c, s, r;
	char b[128];

	c = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);
	ep_add(ep, c, EPOLLIN | EPOLLOUT | EPOLLRDHUP, C, "c");
	ep_show("registered, not connected", ep, 0);
	r = connect(c, (struct sockaddr *)&laddr, sizeof(laddr));
	say("connect -> %s", r < 0 ? en(errno) : "0");
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
		say("ET: connect -> %s", r < 0 ? en(errno) : "0");
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
static void case_closed(void)
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
static void case_epfd_poll(void)
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
static void case_listen(void)
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
	    k >= 0 ? "ok" : en(-k));
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
	    k >= 0 ? "ok" : en(-k));
	sleep_ms(200);
	ep_settle(ep, 2000, L, EPOLLIN, -1);
	ep_show("epoll, two arrivals", ep, 0);
	poll_show("poll, two arrivals", &q, nm, 1, 0);
	n = 0;
	for (int i = 0; i < 3; i++) {
		a = accept4(lfd, NULL, NULL, SOCK_NONBLOCK);
		if (a < 0) {
			say("accept #%d -> %s", i + 1, en(errno));
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
static void case_nb_connect(void)
{
	enum { C };
	int ep = ep_new(), c, s, r;
	char b[128];

	c = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);
	r = connect(c, (struct sockaddr *)&laddr, sizeof(laddr));
	say("connect -> %s", r < 0 ? en(errno) : "0");
	ep_add(ep, c, EPOLLOUT, C, "c");
	ep_settle(ep, 2000, C, EPOLLOUT, -1);
	ep_show("epoll", ep, 0);
	say("SO_ERROR -> %s", so_error(c));
	r = connect(c, (struct sockaddr *)&laddr, sizeof(laddr));
	say("connect again -> %s", r < 0 ? en(errno) : "0");
	r = connect(c, (struct sockaddr *)&laddr, sizeof(laddr));
	say("connect a third time -> %s", r < 0 ? en(errno) : "0");
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
	say("poll: connect -> %s", r < 0 ? en(errno) : "0");
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
	say("select: connect -> %s", r < 0 ? en(errno) : "0");
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
static void case_refused(void)
{
	enum { C };
	struct sockaddr_in dst = {.sin_family = AF_INET, .sin_addr = bind_ip};
	socklen_t len = sizeof(dst);
	int c, ep, r;

	/* a free port: bound once, then released */
	c = socket(AF_INET, SOCK_STREAM, 0);
	if (bind(c, (struct sockaddr *)&dst, sizeof(dst)) < 0 ||
	    getsockname(c, (struct sockaddr *)&dst, &len) < 0) {
		say("no free port: %s", en(errno));
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
	say("registered before: connect -> %s", r < 0 ? en(errno) : "0");
	ep_settle(ep, 2000, C, EPOLLERR, -1);
	ep_show("registered before: epoll", ep, 0);
	say("registered before: SO_ERROR -> %s", so_error(c));
	say("registered before: SO_ERROR again -> %s", so_error(c));
	close(c);
	close(ep);

	ep = ep_new();
	c = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);
	r = connect(c, (struct sockaddr *)&dst, sizeof(dst));
	say("registered after: connect -> %s", r < 0 ? en(errno) : "0");
	ep_add(ep, c, EPOLLOUT | EPOLLET, C, "c");
	ep_show("registered after (ET): epoll", ep, 2000);
	ep_show("registered after (ET): again", ep, 100);
	say("registered after: SO_ERROR -> %s", so_error(c));
	close(c);
	close(ep);

	c = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);
	r = connect(c, (struct sockaddr *)&dst, sizeof(dst));
	say("poll: connect -> %s", r < 0 ? en(errno) : "0");
	{
		struct pollfd q = {.fd = c, .events = POLLOUT};
		const char *nm[] = {"c"};

		poll_show("poll(POLLOUT, 3000)", &q, nm, 1, 3000);
	}
	say("poll: SO_ERROR -> %s", so_error(c));
	close(c);

	c = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);
	r = connect(c, (struct sockaddr *)&dst, sizeof(dst));
	say("select: connect -> %s", r < 0 ? en(errno) : "0");
	{
		struct sfd f[1] = {{c, "c", true, true}};

		select_show("select(r+w, 3000)", f, 1, 3000);
	}
	say("select: SO_ERROR -> %s", so_error(c));
	close(c);
}

/* poll and ppoll over a pipe (kernel) and RDMA fds. */
static void case_poll(void)
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
		int64_t t0 = now_us();
		int n = poll(r2, 3, 150);

		timed_show("poll(150), nothing readable", n, errno, t0, 150);
		t0 = now_us();
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
static void case_select(void)
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
		int64_t t0 = now_us();

		sel_build(g, 3, &rs, &ws, &maxfd);
		n = select(maxfd + 1, &rs, &ws, NULL, &tv);
		timed_show("select(150 ms), nothing readable", n, errno, t0,
			   150);
		say("select: timeval after the timeout -> %s",
		    tv.tv_sec == 0 && tv.tv_usec == 0 ? "zero" : "not zero");
		sel_build(g, 3, &rs, &ws, &maxfd);
		t0 = now_us();
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
static void case_threads(void)
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
	sleep_ms(100);
	say("waiter blocked -> %s", waiter_done(&w) ? "no" : "yes");
	xsend(pb.c, "b");
	sleep_ms(50);
	ep_add(ep, pb.s, EPOLLIN, B, "b");
	waiter_finish(&w, "ADD of an fd with data pending: waiter saw", 3000,
		      efd);
	unkick(efd);
	drain(pb.s);

	waiter_start(&w, ep, -1);
	sleep_ms(100);
	ep_add(ep, pc.s, EPOLLIN, C, "c");
	sleep_ms(100);
	say("waiter blocked after ADD of an idle fd -> %s",
	    waiter_done(&w) ? "no" : "yes");
	xsend(pc.c, "c");
	waiter_finish(&w, "data for the added fd: waiter saw", 3000, efd);
	unkick(efd);
	drain(pc.s);

	xsend(pd.c, "d");
	ep_add(ep, pd.s, 0, D, "d");
	waiter_start(&w, ep, -1);
	sleep_ms(100);
	say("waiter blocked, d registered with events 0 -> %s",
	    waiter_done(&w) ? "no" : "yes");
	ep_ctl(ep, EPOLL_CTL_MOD, pd.s, EPOLLIN, D, "d");
	waiter_finish(&w, "MOD d to EPOLLIN: waiter saw", 3000, efd);
	unkick(efd);
	drain(pd.s);

	waiter_start(&w, ep, -1);
	sleep_ms(100);
	close(pa.s);
	pa.s = -1;
	/* TCP lets the first send after the peer's close through; the shim
	 * too, whether or not the close has shown yet (io.c, past_end). */
	xsend(pa.c, "gone");
	sleep_ms(200);
	say("waiter blocked after another thread closed a -> %s",
	    waiter_done(&w) ? "no" : "yes");
	kick(efd);
	waiter_finish(&w, "then the eventfd kick: waiter saw", 3000, efd);
	unkick(efd);

	waiter_start(&w, ep, -1);
	sleep_ms(100);
	kick(efd);
	waiter_finish(&w, "eventfd kick, RDMA fds idle: waiter saw", 3000, efd);
	unkick(efd);

	waiter_start(&w, ep, -1);
	sleep_ms(100);
	say("DEL b from another thread -> %s",
	    res(epoll_ctl(ep, EPOLL_CTL_DEL, pb.s, NULL)));
	xsend(pb.c, "b");
	sleep_ms(200);
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
	sleep_ms(100);
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
		sleep_ms(100);
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

/* ---- stress: 64 connections, 4 threads, ET, checksummed ---- */

#define SCONNS 64
#define STHREADS 4
#define SMAX (256 * 1024)

static uint64_t xs64(uint64_t *x)
{
	*x ^= *x << 13;
	*x ^= *x >> 7;
	*x ^= *x << 17;
	return *x;
}

struct gen {
	uint64_t x;
	uint8_t buf[8];
	unsigned int left;
};

static void gen_init(struct gen *g, uint64_t seed)
{
	g->x = seed * 0x9E3779B97F4A7C15ull + 1;
	g->left = 0;
}

static uint8_t gen_byte(struct gen *g)
{
	if (!g->left) {
		xs64(&g->x);
		memcpy(g->buf, &g->x, 8);
		g->left = 8;
	}
	return g->buf[8 - g->left--];
}

static uint64_t stream_len(uint64_t seed)
{
	uint64_t x = seed * 0x2545F4914F6CDD1Dull + 7;

	xs64(&x);
	return 1 + xs64(&x) % SMAX;
}

struct sside {
	int fd;
	uint64_t tx_total, rx_total, tx, rx, bad;
	struct gen gtx, grx;
	uint64_t rnd_tx, rnd_rx;
	uint8_t *pend;
	size_t plen, poff;
	bool eof, err;
};

struct sconn {
	struct sside side[2];
	bool done;
};

struct sthread {
	int ep;
	struct sconn *c[SCONNS / STHREADS];
	int n;
	int64_t deadline;
	char why[160];
};

static bool side_done(const struct sside *x)
{
	return x->tx == x->tx_total && x->poff == x->plen &&
	       x->rx == x->rx_total;
}

static void s_write(struct sside *x)
{
	while (x->tx < x->tx_total || x->poff < x->plen) {
		ssize_t r;

		if (x->poff == x->plen) {
			size_t want = 1 + xs64(&x->rnd_tx) % 65536;

			if (want > x->tx_total - x->tx)
				want = (size_t)(x->tx_total - x->tx);
			for (size_t i = 0; i < want; i++)
				x->pend[i] = gen_byte(&x->gtx);
			x->plen = want;
			x->poff = 0;
			x->tx += want;
		}
		r = send(x->fd, x->pend + x->poff, x->plen - x->poff,
			 MSG_NOSIGNAL);
		if (r > 0) {
			x->poff += (size_t)r;
			continue;
		}
		if (r < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
			return;
		x->err = true;
		return;
	}
}

static void s_read(struct sside *x, uint8_t *buf)
{
	for (;;) {
		size_t want = 1 + xs64(&x->rnd_rx) % 65536;
		ssize_t r = recv(x->fd, buf, want, 0);

		if (r > 0) {
			for (ssize_t i = 0; i < r; i++)
				x->bad += buf[i] != gen_byte(&x->grx);
			x->rx += (uint64_t)r;
			continue;
		}
		if (r == 0) {
			x->eof = true;
			return;
		}
		if (errno != EAGAIN && errno != EWOULDBLOCK)
			x->err = true;
		return;
	}
}

static void *stress_main(void *arg)
{
	struct sthread *t = arg;
	uint8_t *buf = malloc(65536);
	int active = t->n;
	int64_t last = now_us();

	while (active > 0) {
		struct epoll_event evs[64];
		int n;

		if (now_us() > t->deadline) {
			snprintf(t->why, sizeof(t->why), "deadline passed");
			break;
		}
		if (now_us() - last > 10 * 1000000LL) {
			snprintf(t->why, sizeof(t->why),
				 "no progress for 10 s");
			break;
		}
		n = epoll_wait(t->ep, evs, 64, 500);
		if (n < 0 && errno != EINTR) {
			snprintf(t->why, sizeof(t->why), "epoll_wait: %s",
				 en(errno));
			break;
		}
		for (int i = 0; i < n; i++) {
			int j = (int)(evs[i].data.u64 >> 1),
			    k = (int)(evs[i].data.u64 & 1);
			struct sconn *sc = t->c[j];
			struct sside *x = &sc->side[k];
			uint64_t before = x->tx + x->rx + x->poff;

			if (evs[i].events &
			    (EPOLLIN | EPOLLERR | EPOLLHUP | EPOLLRDHUP))
				s_read(x, buf);
			if (evs[i].events & (EPOLLOUT | EPOLLERR | EPOLLHUP))
				s_write(x);
			if (x->tx + x->rx + x->poff != before)
				last = now_us();
			if (x->err || x->eof) {
				snprintf(t->why, sizeof(t->why),
					 "conn %d side %d: %s", j, k,
					 x->err ? "I/O error"
						: "unexpected EOF");
				active = -1;
				break;
			}
			if (!sc->done && side_done(&sc->side[0]) &&
			    side_done(&sc->side[1])) {
				sc->done = true;
				active--;
			}
		}
	}
	free(buf);
	return NULL;
}

static struct sconn sconns[SCONNS];

static void case_stress(void)
{
	struct sthread th[STHREADS];
	pthread_t tid[STHREADS];
	uint64_t total = 0;
	int ok = 0, made = 0;
	int64_t t0;

	memset(th, 0, sizeof(th));
	for (int i = 0; i < SCONNS; i++) {
		struct pair p;

		if (mkpair(&p))
			break;
		made++;
		for (int k = 0; k < 2; k++) {
			struct sside *x = &sconns[i].side[k];
			uint64_t mine = 1000 + (uint64_t)i * 2 + (uint64_t)k;
			uint64_t theirs =
			    1000 + (uint64_t)i * 2 + (uint64_t)(1 - k);

			memset(x, 0, sizeof(*x));
			x->fd = k ? p.s : p.c;
			x->tx_total = stream_len(mine);
			x->rx_total = stream_len(theirs);
			gen_init(&x->gtx, mine);
			gen_init(&x->grx, theirs);
			x->rnd_tx = mine * 7919 + 1;
			x->rnd_rx = mine * 104729 + 3;
			x->pend = malloc(65536);
			total += x->tx_total;
		}
		sconns[i].done = false;
	}
	if (made < SCONNS) {
		say("only %d of %d connections", made, SCONNS);
		for (int i = 0; i < made; i++)
			for (int k = 0; k < 2; k++) {
				close(sconns[i].side[k].fd);
				free(sconns[i].side[k].pend);
			}
		return;
	}
	t0 = now_us();
	for (int t = 0; t < STHREADS; t++) {
		th[t].ep = ep_new();
		th[t].deadline = t0 + 60 * 1000000LL;
		for (int i = t; i < SCONNS; i += STHREADS) {
			int j = th[t].n++;

			th[t].c[j] = &sconns[i];
			for (int k = 0; k < 2; k++) {
				struct epoll_event e = {
				    .events = EPOLLIN | EPOLLOUT | EPOLLRDHUP |
					      EPOLLET,
				    .data.u64 =
					((uint64_t)j << 1) | (uint64_t)k,
				};

				if (epoll_ctl(th[t].ep, EPOLL_CTL_ADD,
					      sconns[i].side[k].fd, &e))
					say("epoll_ctl ADD: %s", en(errno));
			}
		}
	}
	for (int t = 0; t < STHREADS; t++)
		tid[t] = spawn(stress_main, &th[t]);
	for (int t = 0; t < STHREADS; t++) {
		if (!join_within(tid[t], 90000)) {
			say("thread %d hung", t);
			fflush(stdout);
			_exit(3);
		}
		if (th[t].why[0]) {
			say("thread %d failed: %s", t, th[t].why);
			fprintf(stderr, "stress thread %d: %s\n", t, th[t].why);
		}
	}
	for (int i = 0; i < SCONNS; i++)
		for (int k = 0; k < 2; k++) {
			struct sside *x = &sconns[i].side[k];

			if (side_done(x) && !x->bad && !x->err)
				ok++;
			else
				fprintf(stderr,
					"stress conn %d side %d: tx %" PRIu64
					"/%" PRIu64 " rx %" PRIu64 "/%" PRIu64
					" bad %" PRIu64 "%s%s\n",
					i, k, x->tx, x->tx_total, x->rx,
					x->rx_total, x->bad,
					x->err ? " err" : "",
					x->eof ? " eof" : "");
		}
	say("%d connections, %d threads, %" PRIu64
	    " bytes: %d of %d streams complete and verified",
	    SCONNS, STHREADS, total, ok, 2 * SCONNS);
	figure("stress: %d connections x 2 directions, %" PRIu64
	       " bytes in %.2f s",
	       SCONNS, total, (double)(now_us() - t0) / 1e6);
	if (hold_file) {
		struct stat sb;

		fprintf(stderr, "holding\n");
		fflush(stderr);
		for (int i = 0; i < 1200 && stat(hold_file, &sb) < 0; i++)
			sleep_ms(50);
	}
	for (int t = 0; t < STHREADS; t++)
		close(th[t].ep);
	for (int i = 0; i < SCONNS; i++)
		for (int k = 0; k < 2; k++) {
			close(sconns[i].side[k].fd);
			free(sconns[i].side[k].pend);
		}
}

/* ---- figures ---------------------------------------------------------- */

#define LAT_N 200

struct latw {
	int ep, s;
	int64_t t1[LAT_N];
	int done; /* atomic: iterations finished */
};

static void *lat_main(void *arg)
{
	struct latw *w = arg;

	for (int i = 0; i < LAT_N; i++) {
		struct epoll_event e;
		int n = epoll_wait(w->ep, &e, 1, 5000);

		w->t1[i] = n == 1 ? now_us() : -1;
		drain(w->s);
		__atomic_store_n(&w->done, i + 1, __ATOMIC_RELEASE);
	}
	return NULL;
}

static int cmp_i64(const void *a, const void *b)
{
	int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;

	return x < y ? -1 : x > y;
}

static void case_latency(void)
{
	static struct latw w;
	int64_t t0[LAT_N], lat[LAT_N];
	struct pair p;
	pthread_t t;
	int bad = 0;

	if (mkpair(&p))
		return;
	memset(&w, 0, sizeof(w));
	w.ep = ep_new();
	w.s = p.s;
	ep_add(w.ep, p.s, EPOLLIN, 0, "s");
	t = spawn(lat_main, &w);
	for (int i = 0; i < LAT_N; i++) {
		int64_t end = now_us() + 6000000;

		while (__atomic_load_n(&w.done, __ATOMIC_ACQUIRE) < i &&
		       now_us() < end)
			sched_yield();
		usleep(2000); /* let the waiter block again */
		t0[i] = now_us();
		(void)!send(p.c, "L", 1, MSG_NOSIGNAL);
	}
	if (!join_within(t, 10000)) {
		say("waiter hung");
		fflush(stdout);
		_exit(3);
	}
	for (int i = 0; i < LAT_N; i++) {
		if (w.t1[i] < 0)
			bad++;
		lat[i] = w.t1[i] - t0[i];
	}
	qsort(lat, LAT_N, sizeof(lat[0]), cmp_i64);
	say("%d sends, %s", LAT_N,
	    bad ? "some wake-ups missing" : "every one woke the waiter");
	figure("epoll_wait wake-up latency, peer send -> return (LT, 1 fd): "
	       "median %" PRId64 " us, p10 %" PRId64 " us, p90 %" PRId64
	       " us, max %" PRId64 " us (n=%d)",
	       lat[LAT_N / 2], lat[LAT_N / 10], lat[LAT_N * 9 / 10],
	       lat[LAT_N - 1], LAT_N);
	close(w.ep);
	unpair(&p);
}

static double tv_ms(struct timeval tv)
{
	return (double)tv.tv_sec * 1e3 + (double)tv.tv_usec / 1e3;
}

static void case_idlecpu(void)
{
	enum { KICK, A, B, C, D };
	struct pair p1, p2;
	int ep = ep_new(), efd = new_efd();
	struct waiter w;
	struct rusage r0, r1;
	clockid_t cid;
	struct timespec c0, c1;
	double wms, pms;

	if (mkpair(&p1) || mkpair(&p2))
		return;
	ep_add(ep, efd, EPOLLIN, KICK, "kick");
	ep_add(ep, p1.c, EPOLLIN, A, "a");
	ep_add(ep, p1.s, EPOLLIN, B, "b");
	ep_add(ep, p2.c, EPOLLIN, C, "c");
	ep_add(ep, p2.s, EPOLLIN, D, "d");
	waiter_start(&w, ep, -1);
	sleep_ms(200);
	pthread_getcpuclockid(w.t, &cid);
	getrusage(RUSAGE_SELF, &r0);
	clock_gettime(cid, &c0);
	sleep_ms(2000);
	clock_gettime(cid, &c1);
	getrusage(RUSAGE_SELF, &r1);
	kick(efd);
	waiter_finish(&w,
		      "2 s blocked on 4 idle fds, then the kick: waiter saw",
		      3000, efd);
	wms = (double)(c1.tv_sec - c0.tv_sec) * 1e3 +
	      (double)(c1.tv_nsec - c0.tv_nsec) / 1e6;
	pms = tv_ms(r1.ru_utime) + tv_ms(r1.ru_stime) - tv_ms(r0.ru_utime) -
	      tv_ms(r0.ru_stime);
	say("waiter CPU while blocked for 2 s -> %s",
	    wms < 40 ? "under 2%" : "2% or more");
	figure("idle epoll_wait(-1) on 4 idle fds for 2.0 s: waiter thread "
	       "%.1f ms CPU, "
	       "whole process %.1f ms CPU",
	       wms, pms);
	close(ep);
	close(efd);
	unpair(&p1);
	unpair(&p2);
}

/* ---- main ------------------------------------------------------------- */

static const struct {
	const char *name;
	void (*fn)(void);
	bool dflt;
} cases[] = {
    {"mixed", case_mixed, true},       {"hup", case_hup, true},
    {"err", case_err, true},	       {"et", case_et, true},
    {"et-count", case_et_count, true}, {"et-out", case_et_out, true},
    {"oneshot", case_oneshot, true},   {"data", case_data, true},
    {"fair", case_fair, true},	       {"ctl", case_ctl, true},
    {"timeout", case_timeout, true},   {"eintr", case_eintr, true},
    {"two-sets", case_two_sets, true}, {"pre-connect", case_pre_connect, true},
    {"closed", case_closed, true},     {"epfd-poll", case_epfd_poll, true},
    {"listen", case_listen, true},     {"nb-connect", case_nb_connect, true},
    {"refused", case_refused, false},  {"poll", case_poll, true},
    {"select", case_select, true},     {"threads", case_threads, true},
    {"stress", case_stress, true},     {"latency", case_latency, true},
    {"idlecpu", case_idlecpu, true},
};

static void *watchdog(void *arg)
{
	(void)arg;
	sleep_ms(75 * 1000);
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
		printf("main: listener: %s\n", en(errno));
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
