/* SPDX-License-Identifier: MIT */
/*
 * Per-process connection statistics, readable by `erdma-shim stat`.
 *
 * The library keeps a fixed table of connection slots in a shared memory
 * segment, /dev/shm/erdma-shim.PID (created on the first connection, removed
 * at exit; ERDMA_SHIM_STATS_SHM=0 keeps it in private memory instead).  The
 * first half of this file is the segment's layout, shared with the CLI
 * (preload/cli/erdma-shim.c); it has no dependency on the library.
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
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#define ERDMA_STAT_MAGIC 0x53444d45u /* "EMDS" */
#define ERDMA_STAT_VERSION 1
#define ERDMA_STAT_SLOTS 1024
#define ERDMA_STAT_PREFIX "/dev/shm/erdma-shim."
#define ERDMA_STAT_SHM_NAME "/erdma-shim." /* shm_open name, + pid */

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
	inet_ntop(a->family, a->addr, ip, sizeof(ip));
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
