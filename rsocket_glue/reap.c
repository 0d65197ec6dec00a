/* SPDX-License-Identifier: MIT */
/*
 * Closing an rsocket without making close() wait for the network.
 *
 * rclose() runs rshutdown(), which makes the rsocket blocking and waits
 * until every send it posted has completed.  With a live peer that takes a
 * moment.  With a peer that is gone (SIGKILLed, its host's link deleted) the
 * sends never complete: soft-RoCE retries them without end (a survivor was
 * still inside close() 140 s after its peer was killed, found by
 * tests/rdma/extra/95-soak.sh), hardware until its retry count runs out.
 * A kernel socket's close() never waits for the peer (without SO_LINGER).
 *
 * So rclose() runs on a reaper thread.  The closing thread waits for it at
 * most REAP_WAIT_MS -- a normal close is done well within that, so its QP is
 * gone when close() returns, as tests/rdma/70-cycles.sh checks.  A peer
 * known to be gone had its QP flushed already (sg_cm_take_end), so its
 * close is quick too.  A close still waiting after the bound is one whose
 * peer vanished unnoticed; the closing thread returns, and the connection's
 * rdma_cm channel is handed to one watcher thread, which flushes the QP
 * when the end event comes (the peer's kernel disconnects, the device
 * goes), and the reaper finishes.  A reaper stuck on a dead rsocket holds
 * only that one: the next close finds no idle reaper and starts another (at
 * most REAP_MAX; beyond that, closes queue and still return).  These
 * threads block every signal: the program's handlers never run on them.
 */
#include "glue.h"
#include "glue_int.h"
#include "log.h"

#include <poll.h>
#include <pthread.h>
#include <rdma/rsocket.h>
#include <signal.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/eventfd.h>
#include <time.h>
#include <unistd.h>

#define REAP_WAIT_MS 500
#define REAP_MAX 32

struct reap_job {
	struct reap_job *next;	/* the reapers' queue */
	struct reap_job *wnext; /* the watcher's list */
	int rs;
	int cmfd; /* duplicate of its rdma_cm channel, or -1 */
	int (*close_fn)(int rs);
	int refs; /* the reaper, the closer while it waits, the watcher */
	bool done, watched, taken;
};

static pthread_mutex_t reap_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t reap_work = PTHREAD_COND_INITIALIZER;
static pthread_cond_t reap_done; /* CLOCK_MONOTONIC, set up on first use */
static pthread_once_t reap_once = PTHREAD_ONCE_INIT;
static struct reap_job *reap_head, *reap_tail;
static int reap_threads, reap_idle;
static struct reap_job *watch_list;
static int watch_efd = -1; /* wakes the watcher; -1: no watcher yet */

static void reap_init(void)
{
	pthread_condattr_t a;

	pthread_condattr_init(&a);
	pthread_condattr_setclock(&a, CLOCK_MONOTONIC);
	pthread_cond_init(&reap_done, &a);
	pthread_condattr_destroy(&a);
}

static void job_put_locked(struct reap_job *j)
{
	if (--j->refs)
		return;
	if (j->cmfd >= 0)
		REAL(close)(j->cmfd);
	free(j);
}

static void watch_kick(void)
{
	uint64_t one = 1;

	if (watch_efd >= 0)
		(void)!REAL(write)(watch_efd, &one, sizeof(one));
}

static void *reaper(void *unused)
{
	struct reap_job *j;

	pthread_mutex_lock(&reap_mu);
	for (;;) {
		while (!reap_head) {
			reap_idle++;
			pthread_cond_wait(&reap_work, &reap_mu);
			reap_idle--;
		}
		j = reap_head;
		reap_head = j->next;
		if (!reap_head)
			reap_tail = NULL;
		pthread_mutex_unlock(&reap_mu);

		(void)j->close_fn(j->rs);

		pthread_mutex_lock(&reap_mu);
		j->done = true;
		pthread_cond_broadcast(&reap_done);
		if (j->watched)
			watch_kick(); /* the watcher lets it go */
		job_put_locked(j);
	}
	return NULL;
}

/* Under reap_mu: the watched jobs still to watch, into p/js (max n). */
static int watch_fill_locked(struct pollfd *p, struct reap_job **js, int n)
{
	struct reap_job **pp = &watch_list, *j;
	int k = 0;

	while ((j = *pp)) {
		if (j->done || j->taken) {
			*pp = j->wnext;
			j->watched = false;
			job_put_locked(j);
			continue;
		}
		if (k < n) {
			p[k] = (struct pollfd){.fd = j->cmfd, .events = POLLIN};
			js[k++] = j;
		}
		pp = &j->wnext;
	}
	return k;
}

/*
 * The watcher: sleeps on the rdma_cm channels of the closes that outlived
 * REAP_WAIT_MS, and flushes a QP when its end event comes.  Only it reads
 * those channels (rsock.c let go of them at close).
 */
#define WATCH_MAX 64
static void *watcher(void *unused)
{
	struct pollfd p[WATCH_MAX + 1];
	struct reap_job *js[WATCH_MAX];
	uint64_t v;
	int n;

	for (;;) {
		pthread_mutex_lock(&reap_mu);
		n = watch_fill_locked(p + 1, js, WATCH_MAX);
		pthread_mutex_unlock(&reap_mu);
		p[0] = (struct pollfd){.fd = watch_efd, .events = POLLIN};
		if (REAL(poll)(p, (nfds_t)n + 1, -1) < 0)
			continue;
		if (p[0].revents & POLLIN)
			(void)!REAL(read)(watch_efd, &v, sizeof(v));
		for (int i = 0; i < n; i++) {
			if (!(p[i + 1].revents & (POLLIN | POLLERR | POLLHUP)))
				continue;
			/* the watched job stays referenced until we unlist it
			 */
			shim_dbg("rsocket %d: end event for a close still "
				 "waiting: flushing",
				 js[i]->rs);
			(void)sg_cm_take_end(js[i]->cmfd);
			pthread_mutex_lock(&reap_mu);
			js[i]->taken = true;
			pthread_mutex_unlock(&reap_mu);
		}
	}
	return NULL;
}

/* Under reap_mu: a thread running fn (shim_spawn: signals blocked). */
static int spawn_locked(void *(*fn)(void *))
{
	return shim_spawn(fn, NULL);
}

static int spawn_reaper_locked(void)
{
	int r = spawn_locked(reaper);

	if (!r)
		reap_threads++;
	return r;
}

/* Under reap_mu: j's close outlived the bound; watch its channel. */
static void watch_locked(struct reap_job *j)
{
	if (j->cmfd < 0 || j->watched)
		return;
	if (watch_efd < 0) {
		watch_efd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
		if (watch_efd < 0)
			return;
		if (spawn_locked(watcher) < 0) {
			REAL(close)(watch_efd);
			watch_efd = -1;
			return;
		}
	}
	j->watched = true;
	j->refs++;
	j->wnext = watch_list;
	watch_list = j;
	watch_kick();
}

static void wait_locked(struct reap_job *j)
{
	struct timespec dl = shim_deadline(CLOCK_MONOTONIC, REAP_WAIT_MS);

	while (!j->done)
		if (pthread_cond_timedwait(&reap_done, &reap_mu, &dl))
			break;
	if (j->done)
		return;
	shim_dbg("rsocket %d: close still waiting for its sends after %d ms; "
		 "finishing in the background",
		 j->rs, REAP_WAIT_MS);
	watch_locked(j);
}

static int reap(int rs, int cmfd, int (*close_fn)(int rs))
{
	struct reap_job *j = calloc(1, sizeof(*j));

	pthread_once(&reap_once, reap_init);
	if (!j) {
		if (cmfd >= 0)
			REAL(close)(cmfd);
		return close_fn(rs);
	}
	j->rs = rs;
	j->cmfd = cmfd;
	j->close_fn = close_fn;
	j->refs = 2;
	pthread_mutex_lock(&reap_mu);
	if (!reap_idle && reap_threads < REAP_MAX &&
	    spawn_reaper_locked() < 0 && !reap_threads) {
		/* no thread at all: close here, as rclose would */
		pthread_mutex_unlock(&reap_mu);
		if (cmfd >= 0)
			REAL(close)(cmfd);
		free(j);
		return close_fn(rs);
	}
	if (reap_tail)
		reap_tail->next = j;
	else
		reap_head = j;
	reap_tail = j;
	pthread_cond_signal(&reap_work);
	wait_locked(j);
	job_put_locked(j);
	pthread_mutex_unlock(&reap_mu);
	return 0;
}

/*
 * With cancellation disabled: glibc acts on a cancel inside the condition
 * wait by taking reap_mu back and unwinding with it held, and every later
 * close of an RDMA socket in the process (and the reaper) would wait for
 * it for good.  A close, once begun, completes, as the kernel's does.
 */
int sg_reap(int rs, int cmfd, int (*close_fn)(int rs))
{
	int cs, r;

	pthread_setcancelstate(PTHREAD_CANCEL_DISABLE, &cs);
	r = reap(rs, cmfd, close_fn);
	pthread_setcancelstate(cs, NULL);
	return r;
}

/* A fork child has none of its parent's threads, and the lock may have
 * been held by one of them at the fork. */
void sg_reap_fork_child(void)
{
	pthread_mutex_init(&reap_mu, NULL);
	pthread_cond_init(&reap_work, NULL);
	reap_once = (pthread_once_t)PTHREAD_ONCE_INIT;
	reap_head = reap_tail = NULL;
	reap_threads = reap_idle = 0;
	watch_list = NULL;
	if (watch_efd >= 0)
		REAL(close)(watch_efd);
	watch_efd = -1;
}
