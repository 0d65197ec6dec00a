/* SPDX-License-Identifier: MIT */
/* readiness: the helpers every case uses (output, masks, epoll/poll/select
 * wrappers, socket pairs, threads, rescues, signals). */
#include "readiness.h"

/* ---- output ---------------------------------------------------------- */

/* One transcript line of the current case. */
void say(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	tl_vsay(cur, fmt, ap);
	va_end(ap);
}

/* A measurement, not part of the transcript. */
void figure(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	tl_vline("FIGURE: ", fmt, ap);
	va_end(ap);
}

/* "ok" or the errno name of a call's result. */
const char *res(long r)
{
	return r >= 0 ? "ok" : tl_en(errno);
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

char *mask_str(uint32_t m, char *buf, size_t len)
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
const char *idname[MAXID];

uint64_t key(int id)
{
	return 0xC0DE00000000A5A5ull | ((uint64_t)id << 16);
}

int key_id(uint64_t k)
{
	uint64_t id = (k >> 16) & 0xffffffffu;

	if ((k & 0xFFFF00000000FFFFull) != 0xC0DE00000000A5A5ull || id >= MAXID)
		return -1;
	return (int)id;
}

int cmp_ev(const void *a, const void *b)
{
	const struct epoll_event *x = a, *y = b;
	int i = key_id(x->data.u64), j = key_id(y->data.u64);

	if (i != j)
		return i < j ? -1 : 1;
	return x->events < y->events ? -1 : x->events > y->events;
}

char *evs_str(struct epoll_event *evs, int n, char *buf, size_t len)
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

int ep_ctl(int ep, int op, int fd, uint32_t events, int id, const char *name)
{
	struct epoll_event e = {.events = events, .data.u64 = key(id)};
	static const char *const ops[] = {"?", "ADD", "DEL", "MOD"};

	if (id >= 0 && id < MAXID && name)
		idname[id] = name;
	if (epoll_ctl(ep, op, fd, &e) < 0) {
		int er = errno;

		say("epoll_ctl %s %s: %s", ops[op & 3], name ? name : "?",
		    tl_en(er));
		errno = er;
		return -1;
	}
	return 0;
}

int ep_add(int ep, int fd, uint32_t events, int id, const char *name)
{
	return ep_ctl(ep, EPOLL_CTL_ADD, fd, events, id, name);
}

int ep_new(void)
{
	int ep = epoll_create1(EPOLL_CLOEXEC);

	if (ep < 0) {
		say("epoll_create1: %s", tl_en(errno));
		exit(2);
	}
	return ep;
}

/* One epoll_wait, printed as "LABEL: events" / "nothing" / "timeout". */
int ep_show(const char *label, int ep, int timeout)
{
	struct epoll_event evs[32];
	char b[1024];
	int n = epoll_wait(ep, evs, 32, timeout);

	if (n < 0)
		say("%s: %s", label, tl_en(errno));
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
bool ep_settle(int ep, int ms, ...)
{
	int ids[8], k = 0;
	uint32_t bits[8];
	int64_t end = tl_now_us() + (int64_t)ms * 1000;
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
			tl_sleep_ms(1);
	} while (tl_now_us() < end);
	return false;
}

/* Timeouts: 0, finite (never early, bounded late), -1 woken by data. */
void timed_show(const char *label, int n, int er, int64_t t0, int ms)
{
	int64_t el = (tl_now_us() - t0) / 1000;

	if (n < 0)
		say("%s: %s", label, tl_en(er));
	else if (n > 0)
		say("%s: %d ready", label, n);
	else if (el < ms - 1 || el > ms + 2000)
		say("%s: timeout after %" PRId64 " ms (asked %d)", label, el,
		    ms);
	else
		say("%s: timeout", label);
}

/* ---- poll helpers ----------------------------------------------------- */

char *pfds_str(const struct pollfd *p, const char *const *names, int n,
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

int show_poll_result(const char *label, int r, int er, const struct pollfd *p,
		     const char *const *names, int n, bool zero)
{
	char b[1024];

	if (r < 0)
		say("%s: %s", label, tl_en(er));
	else if (r == 0)
		say("%s: %s", label, zero ? "nothing" : "timeout");
	else
		say("%s: %d ready: %s", label, r,
		    pfds_str(p, names, n, b, sizeof(b)));
	return r;
}

int poll_show(const char *label, struct pollfd *p, const char *const *names,
	      int n, int timeout)
{
	int r = poll(p, (nfds_t)n, timeout);

	return show_poll_result(label, r, errno, p, names, n, timeout == 0);
}

int ppoll_show(const char *label, struct pollfd *p, const char *const *names,
	       int n, int timeout_ms, const sigset_t *mask)
{
	struct timespec ts = {timeout_ms / 1000,
			      (long)(timeout_ms % 1000) * 1000000L};
	int r = ppoll(p, (nfds_t)n, timeout_ms < 0 ? NULL : &ts, mask);

	return show_poll_result(label, r, errno, p, names, n, timeout_ms == 0);
}

/* Wait (<= ms) until poll shows bits on entry idx (pairs, -1 ends). */
bool poll_settle(struct pollfd *p, int n, int ms, ...)
{
	int idx[8], k = 0;
	short bits[8];
	int64_t end = tl_now_us() + (int64_t)ms * 1000;
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
			tl_sleep_ms(1);
	} while (tl_now_us() < end);
	return false;
}

void sel_build(const struct sfd *f, int n, fd_set *r, fd_set *w, int *maxfd)
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

void sel_print(const char *label, int r, int er, const struct sfd *f, int n,
	       fd_set *rs, fd_set *ws, bool zero, const char *extra)
{
	char b[512];
	size_t o = 0;

	if (r < 0) {
		say("%s: %s%s", label, tl_en(er), extra);
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

int select_show(const char *label, const struct sfd *f, int n, int timeout_ms)
{
	fd_set rs, ws;
	int maxfd, r;
	struct timeval tv = {timeout_ms / 1000, (timeout_ms % 1000) * 1000};

	sel_build(f, n, &rs, &ws, &maxfd);
	r = select(maxfd + 1, &rs, &ws, NULL, timeout_ms < 0 ? NULL : &tv);
	sel_print(label, r, errno, f, n, &rs, &ws, timeout_ms == 0, "");
	return r;
}

int pselect_show(const char *label, const struct sfd *f, int n, int timeout_ms,
		 const sigset_t *mask)
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

void set_nb(int fd, bool on)
{
	int fl = fcntl(fd, F_GETFL);

	if (fl >= 0)
		fcntl(fd, F_SETFL, on ? fl | O_NONBLOCK : fl & ~O_NONBLOCK);
}

/* accept4 on the listener, waiting <= 5 s for an arrival. */
int accept_nb(void)
{
	struct pollfd q = {.fd = lfd, .events = POLLIN};

	if (poll(&q, 1, 5000) == 0) {
		errno = ETIMEDOUT;
		return -1;
	}
	return accept4(lfd, NULL, NULL, SOCK_NONBLOCK);
}

/* Connect to our own listener (blocking), accept, make both non-blocking. */
int mkpair(struct pair *p)
{
	p->c = p->s = -1;
	p->c = socket(AF_INET, SOCK_STREAM, 0);
	if (p->c < 0) {
		say("pair: socket: %s", tl_en(errno));
		return -1;
	}
	if (connect(p->c, (struct sockaddr *)&laddr, sizeof(laddr)) < 0) {
		say("pair: connect: %s", tl_en(errno));
		close(p->c);
		return -1;
	}
	p->s = accept_nb();
	if (p->s < 0) {
		say("pair: accept: %s", tl_en(errno));
		close(p->c);
		return -1;
	}
	set_nb(p->c, true);
	return 0;
}

void unpair(struct pair *p)
{
	if (p->c >= 0)
		close(p->c);
	if (p->s >= 0)
		close(p->s);
	p->c = p->s = -1;
}

void xsend(int fd, const char *msg)
{
	ssize_t r = send(fd, msg, strlen(msg), MSG_NOSIGNAL);

	if (r != (ssize_t)strlen(msg))
		say("send \"%s\": %s", msg, r < 0 ? tl_en(errno) : "short");
}

/* Non-blocking read of what is there: "\"text\"", "EOF", "EAGAIN"... */
const char *recv_str(int fd, size_t max, char *buf, size_t len)
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
		snprintf(buf, len, "%s", tl_en(errno));
	}
	return buf;
}

/* Read until EAGAIN/EOF/error; bytes read, or -errno if nothing read. */
long drain(int fd)
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

const char *so_error(int fd)
{
	int err = -1;
	socklen_t len = sizeof(err);

	if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len) < 0)
		return tl_en(errno);
	return err ? tl_en(err) : "0";
}

int new_efd(void)
{
	int fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);

	if (fd < 0) {
		say("eventfd: %s", tl_en(errno));
		exit(2);
	}
	return fd;
}

void kick(int efd)
{
	uint64_t one = 1;

	if (write(efd, &one, sizeof(one)) != sizeof(one))
		say("eventfd write: %s", tl_en(errno));
}

void unkick(int efd)
{
	uint64_t v;

	(void)!read(efd, &v, sizeof(v));
}

/* An fd number that is not open: the lowest free one, so it is within the
 * fd table (select ignores numbers beyond it).  Call it right before use:
 * the next open takes the number. */
int closed_fd(void)
{
	int fd = dup(0);

	if (fd >= 0)
		close(fd);
	return fd;
}

/* Empty a pipe or eventfd. */
void drain_pipe(int fd)
{
	char buf[256];

	while (read(fd, buf, sizeof(buf)) > 0)
		;
}

/* A kernel TCP connection the shim can't see: raw system calls. */
int raw_tcp_connect(void)
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
pthread_t spawn(void *(*fn)(void *), void *arg)
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

bool join_within(pthread_t t, int ms)
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

void *rescue_main(void *arg)
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

void rescue_start(struct rescue *r, int fd, int ms)
{
	memset(r, 0, sizeof(*r));
	r->fd = fd;
	r->ms = ms;
	pthread_mutex_init(&r->m, NULL);
	pthread_cond_init(&r->cv, NULL);
	r->t = spawn(rescue_main, r);
}

bool rescue_stop(struct rescue *r)
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
int guard_fd = -1;
struct rescue guard_r;

void guard_start(int ms)
{
	rescue_start(&guard_r, guard_fd, ms);
}

void guard_stop(const char *what)
{
	if (rescue_stop(&guard_r)) {
		say("%s: did not return by itself (guard fired after %d ms)",
		    what, guard_r.ms);
		drain_pipe(guard_fd);
	}
}

void *later_main(void *arg)
{
	struct later *l = arg;

	tl_sleep_ms(l->ms);
	if (l->is_efd)
		kick(l->fd);
	else
		(void)!write(l->fd, l->msg, strlen(l->msg));
	return NULL;
}

void later_start(struct later *l, int fd, int ms, const char *msg)
{
	l->fd = fd;
	l->ms = ms;
	l->msg = msg;
	l->is_efd = msg == NULL;
	l->t = spawn(later_main, l);
}

void later_join(struct later *l)
{
	pthread_join(l->t, NULL);
}

void *waiter_main(void *arg)
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

void waiter_start(struct waiter *w, int ep, int timeout)
{
	memset(w, 0, sizeof(*w));
	w->ep = ep;
	w->timeout = timeout;
	w->t = spawn(waiter_main, w);
}

bool waiter_done(struct waiter *w)
{
	return __atomic_load_n(&w->done, __ATOMIC_ACQUIRE);
}

/* Join (<= ms); if it is still blocked, rescue it through efd.  Prints
 * what the waiter saw. */
void waiter_finish(struct waiter *w, const char *label, int ms, int efd)
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
		say("%s: %s", label, tl_en(w->err));
	else if (w->n == 0)
		say("%s: timeout", label);
	else
		say("%s: %s", label, w->res);
}

/* ---- signals ---------------------------------------------------------- */

volatile sig_atomic_t alarms;

void on_alarm(int sig)
{
	(void)sig;
	alarms++;
}

void arm_alarm(int ms)
{
	struct itimerval it = {.it_value = {ms / 1000, (ms % 1000) * 1000}};

	setitimer(ITIMER_REAL, &it, NULL);
}

void disarm_alarm(void)
{
	struct itimerval it = {0};

	setitimer(ITIMER_REAL, &it, NULL);
}

/* The handler ran (waiting <= 500 ms for a pending signal to land). */
const char *alarm_seen(void)
{
	for (int i = 0; i < 50 && !alarms; i++)
		tl_sleep_ms(10);
	return alarms ? "yes" : "no";
}

/* =================================================================== */
/* Cases                                                                */
/* =================================================================== */

/* epoll over a kernel fd (eventfd) and two RDMA fds, level-triggered. */
