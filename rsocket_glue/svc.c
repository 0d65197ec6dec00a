/* SPDX-License-Identifier: MIT */
/*
 * Keeping rsockets out of librdmacm 44.0's connect service.
 *
 * rdma-core 44.0 (Debian 12) registers every non-blocking rconnect and every
 * raccept'ed rsocket with a service thread (connect_svc) that watches their
 * rdma_cm channels.  That thread caches its pollfd array, and the fourth
 * registration grows the array under it: use-after-free, seen here as a
 * crash with 64 connections and a hang with 4 (fixed upstream in v44.7).
 *
 * The shim needs none of that thread's work: the shim drives a connect to
 * completion itself (rpoll runs rsockets' connect state machine), and an
 * established connection learns of an orderly close in-band.  So while
 * rsocket_glue is inside rconnect/raccept (shim_svc_guard), the socketpair
 * librdmacm creates to talk to the service is marked (the socketpair
 * wrapper), and the registration request written on it (RS_SVC_ADD_CM)
 * is rewritten into a no-op here, where the write wrapper sends it.  The
 * thread answers, sees nothing registered, exits, and is joined — the
 * rsocket never enters the broken set, and rclose never asks to leave it.
 *
 * The message layout and command numbers are rdma-core's (librdmacm/
 * rsocket.c: struct rs_svc_msg, RS_SVC_NOOP = 0, RS_SVC_ADD_CM = 6), the
 * same in every release from 39.0 to 64.0; only on those (compat.c:
 * svc_noop) is it rewritten, and a write of any other shape passes
 * through untouched.  Releases with the fix need it too: since 44.12,
 * 50.7 and 63.0 rconnect registers even a connect that succeeded at once,
 * and the service thread would then take rdma_cm events the glue reads
 * itself (cmend.c).
 */
#include "glue.h"
#include "glue_int.h"
#include "compat.h"

#include <string.h>

struct svc_msg {
	uint32_t cmd;
	uint32_t status;
	void *rs;
};

#define SVC_NOOP 0
#define SVC_ADD_CM 6

ssize_t sg_svc_write(int fd, const void *buf, size_t n)
{
	struct svc_msg m;

	if (n != sizeof(m) || !shim_in_lib() || !sg_rdmacm()->svc_noop)
		return REAL(write)(fd, buf, n);
	memcpy(&m, buf, sizeof(m));
	if (m.cmd == SVC_ADD_CM)
		m.cmd = SVC_NOOP;
	return REAL(write)(fd, &m, sizeof(m));
}
