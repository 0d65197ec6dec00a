/* SPDX-License-Identifier: MIT */
/*
 * Connection statistics: the slot table behind `erdma-shim stat` and the
 * ERDMA_SHIM_STATS=1 summary at exit.  Layout and reader rules: stats.h.
 *
 * Nothing here runs on the data path of a kernel fd.  Slots are filled where
 * the shim already handles a socket (connect, listen, accept); the RDMA data
 * path adds to its slot's counters with relaxed atomics.
 */
#include "shim.h"
#include "config.h"
#include "glue.h"
#include "log.h"
#include "sock.h"
#include "stats.h"

#include <arpa/inet.h>
#include <dirent.h>
#include <linux/tcp.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <time.h>

struct erdma_stat_hdr *shim_stat_seg;
unsigned int shim_stat_epoch = 1; /* bumped in a fork child: see stat_ref */
bool shim_stat_kconnect_on;

static bool stat_on;	/* ERDMA_SHIM_STATS or ERDMA_SHIM_STATS_SHM */
static bool seg_shared; /* shim_stat_seg is /dev/shm/erdma-shim.PID */
static bool seg_failed; /* creation failed once: don't retry per connect */
static pthread_mutex_t seg_lock = PTHREAD_MUTEX_INITIALIZER;

static uint64_t now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (uint64_t)ts.tv_sec;
}

static bool pid_gone(int fd, void *arg)
{
	return kill((pid_t)(intptr_t)arg, 0) && errno == ESRCH;
}

static bool always_gone(int fd, void *arg)
{
	return true;
}

static int real_close(int fd)
{
	return REAL(close)(fd);
}

/* Tables of processes that died without removing theirs (killed, or a fork
 * child that left with _exit): the first table a process makes sweeps
 * them, so they can't pile up between two `erdma-shim stat` runs.  Only
 * tables of our euid and our pid namespace: another namespace's pid 42 is
 * not our pid 42, and kill() can't see it.  A live pid keeps its table,
 * even if the pid was reused (that process replaces it when it makes its
 * own, or it stays until then). */
static void sweep_dead(int dfd, uint64_t ns)
{
	int d2 = REAL(fcntl)(dfd, F_DUPFD_CLOEXEC, 0); /* fdopendir owns it */
	DIR *d = d2 >= 0 ? fdopendir(d2) : NULL;
	unsigned int uid = geteuid(), u;
	struct dirent *e;
	uint64_t n;
	int pid;

	if (!d) {
		if (d2 >= 0)
			REAL(close)(d2);
		return;
	}
	while ((e = readdir(d)))
		if (erdma_stat_parse_name(e->d_name, &pid, &n, &u) && n == ns &&
		    u == uid && pid != getpid())
			erdma_stat_unlink_stale(dfd, e->d_name, uid, 1,
						pid_gone, (void *)(intptr_t)pid,
						real_close);
	closedir(d);
}

static char seg_name[64]; /* our table's name in /dev/shm */

/*
 * Make our table in /dev/shm: O_EXCL|O_NOFOLLOW, 0600, so no other user's
 * file is ever opened, followed or mapped here.  A file already under our
 * name is a table left by an earlier process with our pid in our namespace
 * (a dead one, or our own image before an exec): replaced only if it is a
 * regular file of ours, under its lock.  Anything else (another user made
 * it first) means no shared table, said once.  Returns the fd or -errno.
 */
static int seg_create(int dfd, uint64_t ns)
{
	const int fl = O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC;
	struct stat sb;
	int fd, r;

	erdma_stat_name(seg_name, sizeof(seg_name), (int)getpid(), ns,
			geteuid());
	fd = openat(dfd, seg_name, fl, 0600);
	if (fd < 0 && errno == EEXIST) {
		r = erdma_stat_unlink_stale(dfd, seg_name, geteuid(), 20,
					    always_gone, NULL, real_close);
		if (r && r != -ESTALE && r != -ENOENT) {
			shim_info("stats: no shared table: " ERDMA_STAT_DIR
				  "/%s exists and is %s",
				  seg_name,
				  r == -EPERM	? "not a file of ours"
				  : r == -ELOOP ? "a symlink"
						: "busy");
			return r;
		}
		fd = openat(dfd, seg_name, fl, 0600);
	}
	if (fd < 0) {
		r = -errno;
		shim_info("stats: cannot create " ERDMA_STAT_DIR "/%s (%s)",
			  seg_name, strerror(-r));
		return r;
	}
	/* O_EXCL made it: ours.  Checked all the same (one fstat). */
	if (fstat(fd, &sb) || sb.st_uid != geteuid() || !S_ISREG(sb.st_mode)) {
		REAL(close)(fd);
		return -EPERM;
	}
	return fd;
}

/* The shared table, mapped; NULL when it can't be made. */
static void *seg_map_shared(void)
{
	uint64_t ns = erdma_stat_pidns();
	void *p = MAP_FAILED;
	int dfd, fd;

	if (!ns) {
		shim_info("stats: no shared table: this process's pid "
			  "namespace is unknown (/proc not mounted)");
		return NULL;
	}
	dfd = open(ERDMA_STAT_DIR, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (dfd < 0) {
		shim_info("stats: cannot open " ERDMA_STAT_DIR " (%s)",
			  strerror(errno));
		return NULL;
	}
	fd = seg_create(dfd, ns);
	if (fd >= 0) {
		if (ftruncate(fd, (off_t)ERDMA_STAT_SIZE) == 0)
			p = mmap(NULL, ERDMA_STAT_SIZE, PROT_READ | PROT_WRITE,
				 MAP_SHARED, fd, 0);
		if (p == MAP_FAILED) {
			shim_info("stats: cannot map " ERDMA_STAT_DIR
				  "/%s (%s)",
				  seg_name, strerror(errno));
			unlinkat(dfd, seg_name, 0);
		}
		REAL(close)(fd);
	}
	if (p != MAP_FAILED)
		sweep_dead(dfd, ns);
	REAL(close)(dfd);
	return p == MAP_FAILED ? NULL : p;
}

/* Map the table: shared under /dev/shm, or private when only the exit
 * summary wants it.  NULL when neither works. */
static struct erdma_stat_hdr *seg_map(void)
{
	void *p = NULL;

	if (shim_cfg.stats_shm) {
		p = seg_map_shared();
		seg_shared = p != NULL;
	}
	if (!p && shim_cfg.stats) {
		p = mmap(NULL, ERDMA_STAT_SIZE, PROT_READ | PROT_WRITE,
			 MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
		if (p == MAP_FAILED)
			p = NULL;
	}
	return p;
}

static void seg_fill_header(struct erdma_stat_hdr *h)
{
	h->version = ERDMA_STAT_VERSION;
	h->pid = (int32_t)getpid();
	h->uid = geteuid();
	h->pidns = erdma_stat_pidns();
	h->nslots = ERDMA_STAT_SLOTS;
	h->slot_size = sizeof(struct erdma_stat_slot);
	h->started = now_s();
	h->rdma_state = sg_available() ? 1 : 2;
	snprintf(h->shim_version, sizeof(h->shim_version), "%s", SHIM_VERSION);
	snprintf(h->mode, sizeof(h->mode), "%s", shim_mode_name(shim_cfg.mode));
	prctl(PR_GET_NAME, h->comm, 0, 0, 0);
	__atomic_store_n(&h->magic, ERDMA_STAT_MAGIC, __ATOMIC_RELEASE);
}

/* The table, created on first use (most processes never connect). */
static struct erdma_stat_hdr *seg_get(void)
{
	struct erdma_stat_hdr *h =
	    __atomic_load_n(&shim_stat_seg, __ATOMIC_ACQUIRE);

	if (likely(h) || !stat_on || seg_failed)
		return h;
	pthread_mutex_lock(&seg_lock);
	h = shim_stat_seg;
	if (!h && !seg_failed) {
		h = seg_map();
		if (h) {
			seg_fill_header(h);
			__atomic_store_n(&shim_stat_seg, h, __ATOMIC_RELEASE);
		} else {
			seg_failed = true;
		}
	}
	pthread_mutex_unlock(&seg_lock);
	return h;
}

static void addr_from(struct erdma_stat_addr *o, const struct sockaddr *sa,
		      socklen_t len)
{
	struct sockaddr_storage u;

	memset(o, 0, sizeof(*o));
	if (!sa || len < sizeof(sa_family_t))
		return;
	shim_addr_unmap(sa, len, &u);
	if (u.ss_family == AF_INET) {
		memcpy(o->addr, &((struct sockaddr_in *)&u)->sin_addr, 4);
	} else if (u.ss_family == AF_INET6) {
		memcpy(o->addr, &((struct sockaddr_in6 *)&u)->sin6_addr, 16);
	} else {
		return;
	}
	o->family = u.ss_family;
	o->port = shim_addr_port((struct sockaddr *)&u);
}

/* Seqlock writer brackets around a slot's identity. */
static void slot_write_begin(struct erdma_stat_slot *sl)
{
	__atomic_store_n(&sl->seq, sl->seq + 1, __ATOMIC_RELAXED);
	__atomic_thread_fence(__ATOMIC_RELEASE);
}

static void slot_write_end(struct erdma_stat_slot *sl, int path)
{
	__atomic_store_n(&sl->path, path, __ATOMIC_RELAXED);
	__atomic_store_n(&sl->seq, sl->seq + 1, __ATOMIC_RELEASE);
}

static void slot_free(struct erdma_stat_slot *sl)
{
	slot_write_begin(sl);
	sl->bytes_in = sl->bytes_out = sl->msgs_in = sl->msgs_out = 0;
	slot_write_end(sl, ERDMA_PATH_FREE);
}

static uint64_t fd_ino(int fd)
{
	struct stat sb;

	return fstat(fd, &sb) == 0 ? (uint64_t)sb.st_ino : 0;
}

/* Kernel slots have no close we could see.  A slot of fd itself is gone
 * (its number is being reused, so the old file was closed); with all set,
 * also every slot whose fd is now another file or none (an fstat each, so
 * only when the table is full). */
static void reap_kernel_slots(struct erdma_stat_hdr *h, int fd, bool all)
{
	for (unsigned int i = 0; i < ERDMA_STAT_SLOTS; i++) {
		struct erdma_stat_slot *sl = &h->slot[i];
		int p = __atomic_load_n(&sl->path, __ATOMIC_ACQUIRE);

		if (p != ERDMA_PATH_TCP && p != ERDMA_PATH_LISTEN_TCP)
			continue;
		if (sl->fd == fd || (all && fd_ino(sl->fd) != sl->ino)) {
			int expect = p;

			/* Claim it first: another thread may reap it too. */
			if (__atomic_compare_exchange_n(&sl->path, &expect, -1,
							false, __ATOMIC_ACQ_REL,
							__ATOMIC_RELAXED))
				slot_free(sl);
		}
	}
}

static struct erdma_stat_slot *claim_free(struct erdma_stat_hdr *h,
					  unsigned int *idx)
{
	/* Start after the last claim: the slots before it are likely taken. */
	static unsigned int next;
	unsigned int start = __atomic_load_n(&next, __ATOMIC_RELAXED);

	for (unsigned int k = 0; k < ERDMA_STAT_SLOTS; k++) {
		unsigned int i = (start + k) % ERDMA_STAT_SLOTS;
		struct erdma_stat_slot *sl = &h->slot[i];
		int expect = ERDMA_PATH_FREE;

		if (__atomic_load_n(&sl->path, __ATOMIC_RELAXED) !=
		    ERDMA_PATH_FREE)
			continue;
		if (__atomic_compare_exchange_n(&sl->path, &expect, -1, false,
						__ATOMIC_ACQ_REL,
						__ATOMIC_RELAXED)) {
			*idx = i;
			__atomic_store_n(&next, i + 1, __ATOMIC_RELAXED);
			return sl;
		}
	}
	return NULL;
}

/* A free slot for fd, claimed (path -1); NULL when the table is full. */
static struct erdma_stat_slot *slot_claim(struct erdma_stat_hdr *h, int fd,
					  unsigned int *idx)
{
	struct erdma_stat_slot *sl;

	reap_kernel_slots(h, fd, false);
	sl = claim_free(h, idx);
	if (!sl) {
		reap_kernel_slots(h, -1, true);
		sl = claim_free(h, idx);
	}
	if (!sl)
		__atomic_add_fetch(&h->n_untracked, 1, __ATOMIC_RELAXED);
	return sl;
}

static uint64_t *path_total(struct erdma_stat_hdr *h, int path)
{
	switch (path) {
	case ERDMA_PATH_RDMA:
		return &h->n_rdma;
	case ERDMA_PATH_TCP:
		return &h->n_tcp;
	case ERDMA_PATH_LISTEN:
		return &h->n_listen;
	default:
		return &h->n_listen_tcp;
	}
}

/* Fill a claimed slot; returns its reference (epoch << 16 | index + 1). */
static unsigned int slot_fill(struct erdma_stat_hdr *h,
			      struct erdma_stat_slot *sl, unsigned int idx,
			      int fd, int path, const struct sockaddr *local,
			      socklen_t llen, const struct sockaddr *peer,
			      socklen_t plen, const char *reason)
{
	slot_write_begin(sl);
	sl->fd = fd;
	sl->ino = fd_ino(fd);
	sl->opened = now_s();
	addr_from(&sl->local, local, llen);
	addr_from(&sl->peer, peer, plen);
	snprintf(sl->reason, sizeof(sl->reason), "%s", reason ? reason : "");
	sl->bytes_in = sl->bytes_out = sl->msgs_in = sl->msgs_out = 0;
	slot_write_end(sl, path);
	__atomic_add_fetch(path_total(h, path), 1, __ATOMIC_RELAXED);
	return (shim_stat_epoch & 0xffff) << 16 | (idx + 1);
}

void shim_stat_sock(struct shim_sock *s, int fd, int path)
{
	struct erdma_stat_hdr *h = seg_get();
	struct erdma_stat_slot *sl;
	unsigned int idx;
	int saved = errno;

	if (!h || s->stat_ref)
		return;
	sl = slot_claim(h, fd, &idx);
	if (sl)
		s->stat_ref = slot_fill(
		    h, sl, idx, fd, path, (struct sockaddr *)&s->local,
		    s->local_len,
		    path == ERDMA_PATH_RDMA ? (struct sockaddr *)&s->peer
					    : NULL,
		    s->peer_len, NULL);
	errno = saved;
}

void shim_stat_release(struct shim_sock *s)
{
	unsigned int ref =
	    __atomic_exchange_n(&s->stat_ref, 0, __ATOMIC_ACQ_REL);
	struct erdma_stat_slot *sl = shim_stat_slot(ref);
	struct erdma_stat_hdr *h = shim_stat_seg;

	if (!sl)
		return;
	/* A thread still inside a send on this sock may add after this: the
	 * few bytes land in a freed slot's zeroed counters at worst. */
	__atomic_add_fetch(&h->closed_bytes_in, sl->bytes_in, __ATOMIC_RELAXED);
	__atomic_add_fetch(&h->closed_bytes_out, sl->bytes_out,
			   __ATOMIC_RELAXED);
	slot_free(sl);
}

/* Why listen_rdma (socket.c) declined; *err is cleared where the text says
 * it all. */
static const char *listen_why(int e, int *err)
{
	const char *why = "rsocket listen failed";

	switch (e) {
	case ENODEV:
		why = "no RDMA device";
		break;
	case EACCES:
		why = "address not allowed (ERDMA_SHIM_ALLOW/DENY)";
		break;
	case ERANGE:
		why = "port + ERDMA_SHIM_PORT_OFFSET exceeds 65535";
		break;
	case EMFILE:
		why = "this librdmacm serves at most 3 RDMA listeners "
		      "(rdma-core before 44.7/50.2/53.0)";
		break;
	default:
		return why;
	}
	*err = 0;
	return why;
}

void shim_stat_kernel(int fd, int path, const char *why, int err,
		      const struct sockaddr *peer, socklen_t plen)
{
	struct erdma_stat_hdr *h = seg_get();
	struct sockaddr_storage local, pbuf;
	socklen_t llen = sizeof(local);
	struct erdma_stat_slot *sl;
	char reason[80];
	unsigned int idx;
	int saved = errno;

	if (!h)
		return;
	if (REAL(getsockname)(fd, (struct sockaddr *)&local, &llen) < 0)
		llen = 0;
	if (!peer && path == ERDMA_PATH_TCP) {
		plen = sizeof(pbuf);
		if (REAL(getpeername)(fd, (struct sockaddr *)&pbuf, &plen) == 0)
			peer = (struct sockaddr *)&pbuf;
	}
	if (!why)
		why = listen_why(err, &err);
	if (err)
		snprintf(reason, sizeof(reason), "%s (%s)", why, strerror(err));
	else
		snprintf(reason, sizeof(reason), "%s", why);
	sl = slot_claim(h, fd, &idx);
	if (sl)
		slot_fill(h, sl, idx, fd, path, (struct sockaddr *)&local, llen,
			  peer, plen, reason);
	errno = saved;
}

/* Would socket() have tracked fd had there been a device?  Cheapest test
 * first: most untracked connects are AF_UNIX, or run where RDMA exists. */
static bool untracked_for_want_of_device(int fd, const struct sockaddr *addr,
					 socklen_t len)
{
	int type = 0;
	socklen_t tlen = sizeof(type);

	if (!addr || len < sizeof(sa_family_t) ||
	    (addr->sa_family != AF_INET && addr->sa_family != AF_INET6) ||
	    sg_available())
		return false;
	return REAL(getsockopt)(fd, SOL_SOCKET, SO_TYPE, &type, &tlen) == 0 &&
	       type == SOCK_STREAM;
}

int shim_stat_kconnect(int fd, const struct sockaddr *addr, socklen_t len)
{
	int r = REAL(connect)(fd, addr, len);
	int saved = errno;

	/* Only the sockets socket() left alone for want of a device: any
	 * other untracked socket is not the shim's to report. */
	if ((r == 0 || saved == EINPROGRESS) &&
	    untracked_for_want_of_device(fd, addr, len))
		shim_stat_kernel(fd, ERDMA_PATH_TCP, "no RDMA device", 0, addr,
				 len);
	errno = saved;
	return r;
}

/* ---- ERDMA_SHIM_STATS=1: the summary at exit ---- */

/* Kernel TCP bytes of fd from tcp_info; false if fd is not that socket. */
static bool tcp_bytes(const struct erdma_stat_slot *sl, uint64_t *in,
		      uint64_t *out)
{
	struct tcp_info ti;
	socklen_t tl = sizeof(ti);

	if (fd_ino(sl->fd) != sl->ino)
		return false;
	memset(&ti, 0, sizeof(ti));
	if (REAL(getsockopt)(sl->fd, IPPROTO_TCP, TCP_INFO, &ti, &tl) < 0)
		return false;
	*in = ti.tcpi_bytes_received;
	*out = ti.tcpi_bytes_sent - ti.tcpi_bytes_retrans;
	return true;
}

static void summary_slot(const struct erdma_stat_slot *sl)
{
	char la[64], pa[64], extra[120] = "";
	uint64_t in = sl->bytes_in, out = sl->bytes_out;

	if (sl->path == ERDMA_PATH_TCP && !tcp_bytes(sl, &in, &out))
		return; /* closed behind our back */
	erdma_stat_addr_text(&sl->local, la, sizeof(la));
	erdma_stat_addr_text(&sl->peer, pa, sizeof(pa));
	if (sl->path == ERDMA_PATH_RDMA)
		snprintf(extra, sizeof(extra), " msgs_in %llu msgs_out %llu",
			 (unsigned long long)sl->msgs_in,
			 (unsigned long long)sl->msgs_out);
	if (sl->reason[0])
		snprintf(extra + strlen(extra), sizeof(extra) - strlen(extra),
			 " reason \"%s\"", sl->reason);
	shim_log_write(
	    SHIM_LOG_INFO,
	    "stats: fd %d %s local %s peer %s bytes_in %llu bytes_out %llu%s",
	    sl->fd, erdma_stat_path_name(sl->path), la, pa,
	    (unsigned long long)in, (unsigned long long)out, extra);
}

static void print_summary(struct erdma_stat_hdr *h)
{
	unsigned int live = 0;

	if (!h) {
		shim_log_write(SHIM_LOG_INFO, "stats: no connections");
		return;
	}
	for (unsigned int i = 0; i < ERDMA_STAT_SLOTS; i++)
		live += h->slot[i].path > 0;
	shim_log_write(
	    SHIM_LOG_INFO,
	    "stats: %llu rdma, %llu tcp connections; %llu listeners (%llu "
	    "tcp-only); %u open; closed rdma bytes_in %llu bytes_out %llu%s",
	    (unsigned long long)h->n_rdma, (unsigned long long)h->n_tcp,
	    (unsigned long long)(h->n_listen + h->n_listen_tcp),
	    (unsigned long long)h->n_listen_tcp, live,
	    (unsigned long long)h->closed_bytes_in,
	    (unsigned long long)h->closed_bytes_out,
	    h->n_untracked ? " (table full: some not counted)" : "");
	for (unsigned int i = 0; i < ERDMA_STAT_SLOTS; i++)
		if (h->slot[i].path > 0)
			summary_slot(&h->slot[i]);
}

/* A fork child starts without a table (it makes its own on its first
 * connection); the inherited socks' references die with the old epoch. */
static void stat_atfork_child(void)
{
	struct erdma_stat_hdr *h = shim_stat_seg;

	if (!stat_on)
		return;
	shim_stat_seg = NULL;
	if (h)
		munmap(h, ERDMA_STAT_SIZE);
	seg_shared = false;
	seg_failed = false;
	shim_stat_epoch++;
	pthread_mutex_init(&seg_lock, NULL);
}

static void shim_stat_init(void)
{
	stat_on = !shim_cfg.env_ignored && shim_cfg.mode != SHIM_MODE_OFF &&
		  (shim_cfg.stats || shim_cfg.stats_shm);
	shim_stat_kconnect_on = stat_on && shim_cfg.mode == SHIM_MODE_AUTO;
}
SHIM_STARTUP(STATS, .start = shim_stat_init, .child = stat_atfork_child);

__attribute__((destructor)) static void shim_stat_fini(void)
{
	struct erdma_stat_hdr *h = shim_stat_seg;
	char name[96];

	if (stat_on && shim_cfg.stats)
		print_summary(h);
	/* Our own name: only we (our euid) or root could have replaced it
	 * in the sticky /dev/shm, so no lock is needed to remove it. */
	if (h && seg_shared && h->pid == (int32_t)getpid()) {
		snprintf(name, sizeof(name), ERDMA_STAT_DIR "/%s", seg_name);
		unlink(name);
	}
}
