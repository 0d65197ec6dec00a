/* SPDX-License-Identifier: MIT */
/*
 * Per-process connection statistics, readable by `erdma-shim stat`.
 *
 * The library keeps a fixed table of connection slots in a shared memory
 * segment, /dev/shm/erdma-shim.PID.PIDNS.UID (created on the first
 * connection, removed at exit; ERDMA_SHIM_STATS_SHM=0 keeps it in private
 * memory instead).  PIDNS (the inode of the maker's pid namespace) and UID
 * (its euid) are in the name because /dev/shm is shared by every user and,
 * with --ipc=host, by containers whose pids overlap.  The first half of this
 * file is the segment's layout, shared with the CLI (preload/cli/stat.c); it
 * has no dependency on the library.
 *
 * The table is made with O_EXCL|O_NOFOLLOW, 0600, and a name that exists is
 * replaced only when it is a regular file of our euid with one link (see
 * docs/security.md, "Local files").  Whoever unlinks another process's
 * table (the library's sweep, `erdma-shim stat`) first takes its flock
 * LOCK_EX, checks the name still names that file and that its process is
 * gone, and unlinks under the lock; a process replacing a table left under
 * its own name takes the same lock, so a sweep that judged a reused pid dead
 * can never unlink the new process's table.
 *
 * Writers: a slot's identity (fd, addresses, path, reason) is written once,
 * under its seqlock (seq odd while written); its counters are relaxed atomic
 * adds by whichever thread moves the bytes.  Readers copy a slot and retry
 * while seq is odd or changed.
 *
 * Byte counts of kernel TCP connections are not kept here (the data path of
 * a kernel fd is never slowed down): readers take them from the kernel's own
 * tcp_info (bytes sent / received by the socket), matched by inode.
 */
#ifndef SHIM_STATS_H
#define SHIM_STATS_H

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define ERDMA_STAT_MAGIC 0x53444d45u /* "EMDS" */
#define ERDMA_STAT_VERSION 2
#define ERDMA_STAT_SLOTS 1024
#define ERDMA_STAT_DIR "/dev/shm"
#define ERDMA_STAT_BASE "erdma-shim." /* + PID.PIDNS.UID */

enum erdma_stat_path {
	ERDMA_PATH_FREE = 0,
	ERDMA_PATH_RDMA,   /* connection over an rsocket */
	ERDMA_PATH_TCP,	   /* connection over kernel TCP (reason says why) */
	ERDMA_PATH_LISTEN, /* listener on TCP and RDMA */
	ERDMA_PATH_LISTEN_TCP, /* listener on TCP only (reason says why) */
};

/* An address as family, port (host order) and 16 address bytes. */
struct erdma_stat_addr {
	uint16_t family;
	uint16_t port;
	uint8_t addr[16];
};

struct erdma_stat_slot {
	uint32_t seq; /* odd while the identity is being written */
	int32_t path; /* enum erdma_stat_path */
	int32_t fd;   /* the program's fd when the slot was filled */
	uint32_t pad;
	uint64_t ino;	 /* the kernel socket's inode (tells a reused fd) */
	uint64_t opened; /* CLOCK_REALTIME seconds */
	struct erdma_stat_addr local, peer;
	char reason[80];
	/* RDMA path only (kernel TCP: see above). */
	uint64_t bytes_in, bytes_out;
	uint64_t msgs_in, msgs_out; /* calls that moved at least one byte */
};

struct erdma_stat_hdr {
	uint32_t magic; /* written last: a reader sees a complete header */
	uint32_t version;
	int32_t pid;
	uint32_t nslots;
	uint32_t slot_size;
	uint32_t rdma_state; /* 0 unknown, 1 available, 2 not available */
	uint64_t started;    /* CLOCK_REALTIME s when the table was made */
	uint32_t uid;	     /* the maker's euid (the file's owner) */
	uint32_t pad;
	uint64_t pidns; /* inode of the maker's pid namespace (pid's meaning) */
	char shim_version[16];
	char mode[16];
	char comm[32];
	/* Totals since start (relaxed atomics). */
	uint64_t n_rdma, n_tcp, n_listen, n_listen_tcp, n_untracked;
	uint64_t closed_bytes_in, closed_bytes_out; /* RDMA, closed slots */
	struct erdma_stat_slot slot[];
};

#define ERDMA_STAT_SIZE                                                        \
	(sizeof(struct erdma_stat_hdr) +                                       \
	 ERDMA_STAT_SLOTS * sizeof(struct erdma_stat_slot))

/* A table's name in ERDMA_STAT_DIR. */
static inline void erdma_stat_name(char *buf, size_t len, int pid,
				   uint64_t pidns, unsigned int uid)
{
	snprintf(buf, len, ERDMA_STAT_BASE "%d.%llu.%u", pid,
		 (unsigned long long)pidns, uid);
}

/* PID, PIDNS and UID of a table's name; false if it is not one (exactly
 * as erdma_stat_name writes it: no sign, space or leading zero). */
static inline bool erdma_stat_parse_name(const char *name, int *pid,
					 uint64_t *pidns, unsigned int *uid)
{
	char tail, again[64];
	unsigned long long ns;

	if (strncmp(name, ERDMA_STAT_BASE, sizeof(ERDMA_STAT_BASE) - 1) ||
	    sscanf(name + sizeof(ERDMA_STAT_BASE) - 1, "%d.%llu.%u%c", pid, &ns,
		   uid, &tail) != 3 ||
	    *pid <= 0 || !ns)
		return false;
	erdma_stat_name(again, sizeof(again), *pid, ns, *uid);
	if (strcmp(again, name))
		return false;
	*pidns = ns;
	return true;
}

/* The inode of this process's pid namespace; 0 when it can't be told (no
 * /proc): then pids can't be told apart from other namespaces'. */
static inline uint64_t erdma_stat_pidns(void)
{
	char link[64];
	unsigned long long ns;
	ssize_t n = readlink("/proc/self/ns/pid", link, sizeof(link) - 1);

	if (n <= 0)
		return 0;
	link[n] = '\0';
	return sscanf(link, "pid:[%llu]", &ns) == 1 ? ns : 0;
}

/*
 * Unlink the table `name` in directory dfd, if it is a regular file owned
 * by uid with one link and gone(fd, arg) says its process is gone.  gone is
 * asked with the file's flock held LOCK_EX (tries LOCK_NB attempts, 1 ms
 * apart) and the name checked to still be that file: whoever else unlinks
 * or replaces the table takes the same lock, so a table made meanwhile
 * under the name is never removed.  0 when removed, else -errno (-EPERM:
 * not ours, -EBUSY: locked or alive).  closefn: the library's real close.
 */
static inline int erdma_stat_unlink_stale(int dfd, const char *name,
					  unsigned int uid, int tries,
					  bool (*gone)(int fd, void *arg),
					  void *arg, int (*closefn)(int))
{
	struct stat sb, now;
	struct timespec ms = {0, 1000000};
	int fd, r = -EBUSY;

	fd = openat(dfd, name,
		    O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	if (fstat(fd, &sb) || !S_ISREG(sb.st_mode) || sb.st_uid != uid ||
	    sb.st_nlink != 1) {
		closefn(fd);
		return -EPERM;
	}
	for (int i = 1; flock(fd, LOCK_EX | LOCK_NB); i++) {
		if (i >= tries)
			goto out;
		nanosleep(&ms, NULL);
	}
	if (fstatat(dfd, name, &now, AT_SYMLINK_NOFOLLOW) ||
	    now.st_ino != sb.st_ino || now.st_dev != sb.st_dev) {
		r = -ESTALE; /* removed or replaced meanwhile */
		goto out;
	}
	if (gone(fd, arg))
		r = unlinkat(dfd, name, 0) ? -errno : 0;
out:
	closefn(fd); /* lets go of the lock */
	return r;
}

static inline const char *erdma_stat_path_name(int path)
{
	static const char *const names[] = {"free", "rdma", "tcp", "listen",
					    "listen-tcp"};

	return path >= 0 && path < 5 ? names[path] : "?";
}

/* "ip:port" / "[ip6]:port" / "-" of a slot address (library and CLI). */
static inline void erdma_stat_addr_text(const struct erdma_stat_addr *a,
					char *buf, size_t len)
{
	char ip[INET6_ADDRSTRLEN];

	if (!a->family) {
		snprintf(buf, len, "-");
		return;
	}
	/* the CLI reads tables other users can write: any family */
	if ((a->family != AF_INET && a->family != AF_INET6) ||
	    !inet_ntop(a->family, a->addr, ip, sizeof(ip))) {
		snprintf(buf, len, "?");
		return;
	}
	snprintf(buf, len, a->family == AF_INET6 ? "[%s]:%u" : "%s:%u", ip,
		 a->port);
}

/* ---- the library's side ---- */
#ifdef SHIM_H
struct shim_sock;

extern struct erdma_stat_hdr *shim_stat_seg SHIM_HIDDEN;
extern unsigned int shim_stat_epoch SHIM_HIDDEN;
/* Stats on (either variable) and mode auto: connect() of a socket the shim
 * does not track goes through shim_stat_kconnect. */
extern bool shim_stat_kconnect_on SHIM_HIDDEN;

/* init.c, after the configuration is read. */

/* Give s (an RDMA connection or listener on fd) a slot. */
void shim_stat_sock(struct shim_sock *s, int fd, int path);
/* The last fd of s is gone: free its slot. */
void shim_stat_release(struct shim_sock *s);
/* A kernel TCP connection or listener on fd (no sock), why it is not on
 * RDMA (err: an errno shown beside it, 0 for none), its peer if known. */
void shim_stat_kernel(int fd, int path, const char *why, int err,
		      const struct sockaddr *peer, socklen_t plen);
/* connect() of an untracked socket: the real connect, recorded. */
int shim_stat_kconnect(int fd, const struct sockaddr *addr, socklen_t len);

static inline struct erdma_stat_slot *shim_stat_slot(unsigned int ref)
{
	struct erdma_stat_hdr *h = shim_stat_seg;

	if (!ref || !h || ref >> 16 != (shim_stat_epoch & 0xffff))
		return NULL;
	return &h->slot[(ref & 0xffff) - 1];
}

/* The data path's counters: one test of ref when stats are off. */
static inline void shim_stat_count(unsigned int ref, size_t n, int dir)
{
	struct erdma_stat_slot *sl;

	if (likely(!ref) || !n || !(sl = shim_stat_slot(ref)))
		return;
	__atomic_add_fetch(dir ? &sl->bytes_out : &sl->bytes_in, n,
			   __ATOMIC_RELAXED);
	__atomic_add_fetch(dir ? &sl->msgs_out : &sl->msgs_in, 1,
			   __ATOMIC_RELAXED);
}
#define shim_stat_rx(ref, n) shim_stat_count((ref), (n), 0)
#define shim_stat_tx(ref, n) shim_stat_count((ref), (n), 1)
#endif

#endif
