/* SPDX-License-Identifier: MIT */
/* readiness: 64 connections, 4 threads, edge-triggered, checksummed. */
#include "readiness.h"

/* ---- stress: 64 connections, 4 threads, ET, checksummed ---- */

#define SCONNS 64
#define STHREADS 4
#define SMAX (256 * 1024)

/* How many bytes seed's stream carries: 1 .. SMAX. */
static uint64_t stream_len(uint64_t seed)
{
	struct tl_rng r;

	tl_rng_seed(&r, seed ^ 0x2545F4914F6CDD1Dull);
	return 1 + tl_rng_next(&r) % SMAX;
}

struct sside {
	int fd;
	uint64_t tx_total, rx_total, tx, rx, bad;
	struct tl_rng gtx, grx;	      /* the bytes */
	struct tl_rng rnd_tx, rnd_rx; /* the chunk sizes */
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
			size_t want = 1 + tl_rng_next(&x->rnd_tx) % 65536;

			if (want > x->tx_total - x->tx)
				want = (size_t)(x->tx_total - x->tx);
			tl_rng_fill(&x->gtx, x->pend, want);
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

/* Read what x has; buf holds 2 x 64 KiB (what came, what was due). */
static void s_read(struct sside *x, uint8_t *buf)
{
	for (;;) {
		size_t want = 1 + tl_rng_next(&x->rnd_rx) % 65536;
		ssize_t r = recv(x->fd, buf, want, 0);

		if (r > 0) {
			uint8_t *exp = buf + 65536;

			tl_rng_fill(&x->grx, exp, (size_t)r);
			for (ssize_t i = 0; i < r; i++)
				x->bad += buf[i] != exp[i];
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
	uint8_t *buf = malloc(2 * 65536); /* what came, what was due */
	int active = t->n;
	int64_t last = tl_now_us();

	while (active > 0) {
		struct epoll_event evs[64];
		int n;

		if (tl_now_us() > t->deadline) {
			snprintf(t->why, sizeof(t->why), "deadline passed");
			break;
		}
		if (tl_now_us() - last > 10 * 1000000LL) {
			snprintf(t->why, sizeof(t->why),
				 "no progress for 10 s");
			break;
		}
		n = epoll_wait(t->ep, evs, 64, 500);
		if (n < 0 && errno != EINTR) {
			snprintf(t->why, sizeof(t->why), "epoll_wait: %s",
				 tl_en(errno));
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
				last = tl_now_us();
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

void case_stress(void)
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
			tl_rng_seed(&x->gtx, mine);
			tl_rng_seed(&x->grx, theirs);
			tl_rng_seed(&x->rnd_tx, mine * 7919 + 1);
			tl_rng_seed(&x->rnd_rx, mine * 104729 + 3);
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
	t0 = tl_now_us();
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
					say("epoll_ctl ADD: %s", tl_en(errno));
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
	       SCONNS, total, (double)(tl_now_us() - t0) / 1e6);
	if (hold_file) {
		struct stat sb;

		fprintf(stderr, "holding\n");
		fflush(stderr);
		for (int i = 0; i < 1200 && stat(hold_file, &sb) < 0; i++)
			tl_sleep_ms(50);
	}
	for (int t = 0; t < STHREADS; t++)
		close(th[t].ep);
	for (int i = 0; i < SCONNS; i++)
		for (int k = 0; k < 2; k++) {
			close(sconns[i].side[k].fd);
			free(sconns[i].side[k].pend);
		}
}
