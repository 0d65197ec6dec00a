/* SPDX-License-Identifier: MIT */
/*
 * Which librdmacm the process runs on, and what the shim does on it
 * (compat.c).  Self-contained (libc and libdl only): the library's start
 * step, `erdma-shim doctor` and the unit tests all use it.
 */
#ifndef SHIM_COMPAT_H
#define SHIM_COMPAT_H

#include <stdbool.h>
#include <stddef.h>

/* The rdma-core releases whose librdmacm/rsocket.c this shim was checked
 * against (docs/platforms.md): same struct rs_svc_msg, same service
 * command numbers, same rpoll/rshutdown/raccept paths the glue relies on. */
#define SG_RDMACM_OLDEST_MAJOR 39
#define SG_RDMACM_NEWEST_MAJOR 64

struct sg_rdmacm {
	char path[256];	  /* the real file of the loaded librdmacm, or "" */
	int major, minor; /* rdma-core's PACKAGE_VERSION; -1: unknown */
	/* Known: the version is in the checked range; RDMA is used.  Not
	 * known: connections stay on TCP (why says so). */
	bool known;
	/* rconnect/raccept's RS_SVC_ADD_CM is made a no-op (svc.c): relies
	 * on the private struct rs_svc_msg, so only where it is known. */
	bool svc_noop;
	/* The service thread's stale pollfd array (use-after-free past 3
	 * sockets, rdma-core b60c79d .. 24061f015): RDMA listeners per
	 * process; 0 = no cap. */
	int listener_cap;
	/* rpoll leaks its poll gate when a finite timeout expires (fixed by
	 * a1747742e): informational, sg_wait never gives rpoll one. */
	bool rpoll_timeout_bug;
	const char *why; /* one phrase: the mode's reason */
};

/*
 * "librdmacm.so.1.3.44.0" (a path or a base name; rdma-core names the file
 * librdmacm.so.1.<ABI minor>.<PACKAGE_VERSION>) -> 44, 0.  0, or -EINVAL
 * for a name of any other shape.
 */
int sg_rdmacm_parse(const char *path, int *major, int *minor);
/* The decision table: fills everything but path from major.minor (-1:
 * unknown). */
void sg_rdmacm_decide(struct sg_rdmacm *c, int major, int minor);
/* Find the librdmacm loaded in this process, then decide.  0, or -ENOENT
 * (none loaded; c says unknown). */
int sg_rdmacm_probe(struct sg_rdmacm *c);
/* "rdma; listeners capped at 3 (...)" -- the mode, for logs and doctor. */
void sg_rdmacm_describe(const struct sg_rdmacm *c, char *out, size_t len);

#endif
