/* SPDX-License-Identifier: MIT */
/* What the readiness program's files share (see main.c). */
#ifndef READINESS_H
#define READINESS_H

#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif

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

#include "testlib.h"

#define ARRAY_SIZE(a) (sizeof(a) / sizeof((a)[0]))

extern struct sockaddr_in laddr;
extern struct in_addr bind_ip;
extern int lfd;
extern const char *cur;
extern const char *hold_file;

#define MAXID 32
/* select over named fds: "n=K r=a,b w=c" */
struct sfd {
	int fd;
	const char *name;
	bool r, w;
};

struct pair {
	int c, s; /* connecting end, accepted end; both non-blocking */
};

/* Rescue: write an eventfd after ms unless stopped first. */
struct rescue {
	int fd, ms;
	bool stop, fired;
	pthread_t t;
	pthread_mutex_t m;
	pthread_cond_t cv;
};

/* Later: after ms, send a message on fd (or kick an eventfd). */
struct later {
	int fd, ms;
	bool is_efd;
	const char *msg;
	pthread_t t;
};

/* A thread blocked in epoll_wait. */
struct waiter {
	int ep, timeout, n, err;
	int done; /* atomic */
	char res[512];
	pthread_t t;
};

void say(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
void figure(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
const char *res(long r);
char *mask_str(uint32_t m, char *buf, size_t len);
extern const char *idname[MAXID];
uint64_t key(int id);
int key_id(uint64_t k);
int cmp_ev(const void *a, const void *b);
char *evs_str(struct epoll_event *evs, int n, char *buf, size_t len);
int ep_ctl(int ep, int op, int fd, uint32_t events, int id, const char *name);
int ep_add(int ep, int fd, uint32_t events, int id, const char *name);
int ep_new(void);
int ep_show(const char *label, int ep, int timeout);
bool ep_settle(int ep, int ms, ...);
void timed_show(const char *label, int n, int er, int64_t t0, int ms);
char *pfds_str(const struct pollfd *p, const char *const *names, int n,
	       char *buf, size_t len);
int show_poll_result(const char *label, int r, int er, const struct pollfd *p,
		     const char *const *names, int n, bool zero);
int poll_show(const char *label, struct pollfd *p, const char *const *names,
	      int n, int timeout);
int ppoll_show(const char *label, struct pollfd *p, const char *const *names,
	       int n, int timeout_ms, const sigset_t *mask);
bool poll_settle(struct pollfd *p, int n, int ms, ...);
void sel_build(const struct sfd *f, int n, fd_set *r, fd_set *w, int *maxfd);
void sel_print(const char *label, int r, int er, const struct sfd *f, int n,
	       fd_set *rs, fd_set *ws, bool zero, const char *extra);
int select_show(const char *label, const struct sfd *f, int n, int timeout_ms);
int pselect_show(const char *label, const struct sfd *f, int n, int timeout_ms,
		 const sigset_t *mask);
void set_nb(int fd, bool on);
int accept_nb(void);
int mkpair(struct pair *p);
void unpair(struct pair *p);
void xsend(int fd, const char *msg);
const char *recv_str(int fd, size_t max, char *buf, size_t len);
long drain(int fd);
const char *so_error(int fd);
int new_efd(void);
void kick(int efd);
void unkick(int efd);
int closed_fd(void);
void drain_pipe(int fd);
int raw_tcp_connect(void);
pthread_t spawn(void *(*fn)(void *), void *arg);
bool join_within(pthread_t t, int ms);
void *rescue_main(void *arg);
void rescue_start(struct rescue *r, int fd, int ms);
bool rescue_stop(struct rescue *r);
extern int guard_fd;
extern struct rescue guard_r;
void guard_start(int ms);
void guard_stop(const char *what);
void *later_main(void *arg);
void later_start(struct later *l, int fd, int ms, const char *msg);
void later_join(struct later *l);
void *waiter_main(void *arg);
void waiter_start(struct waiter *w, int ep, int timeout);
bool waiter_done(struct waiter *w);
void waiter_finish(struct waiter *w, const char *label, int ms, int efd);
extern volatile sig_atomic_t alarms;
void on_alarm(int sig);
void arm_alarm(int ms);
void disarm_alarm(void);
const char *alarm_seen(void);

void case_mixed(void);
void case_hup(void);
void case_err(void);
void case_et(void);
void case_et_count(void);
void case_et_out(void);
void case_oneshot(void);
void case_data(void);
void case_fair(void);
void case_taken(void);
void case_ended(void);
void case_shut(void);
void case_ctl(void);
void case_timeout(void);
void case_eintr(void);
void case_two_sets(void);
void case_pre_connect(void);
void case_closed(void);
void case_epfd_poll(void);
void case_listen(void);
void case_nb_connect(void);
void case_refused(void);
void case_poll(void);
void case_select(void);
void case_threads(void);
void case_stress(void);
void case_idlecpu(void);

#endif
