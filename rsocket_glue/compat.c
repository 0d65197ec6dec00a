/* SPDX-License-Identifier: MIT */
/*
 * The librdmacm gate.  The glue reaches into rsockets' private behaviour
 * (svc.c rewrites its service-thread messages by their layout; the
 * interposed ibv_get_cq_event and the arming poll rely on how rpoll reads
 * its channels), so the shim uses RDMA only on a librdmacm whose source it
 * was checked against, and applies each workaround where that release
 * needs it.  The release comes from the loaded file's real name: rdma-core
 * installs librdmacm.so.1.<ABI minor>.<PACKAGE_VERSION>, and the soname
 * link points at it.
 *
 * From librdmacm/rsocket.c of every tag v39.0 .. v64.0 (docs/platforms.md):
 *  - struct rs_svc_msg {u32 cmd; u32 status; struct rsocket *rs} and the
 *    command enum (NOOP 0 .. ADD_CM 6, REM_CM 7) are the same in all.
 *  - cm_svc_run's stale pollfd array (the 4th socket of a service thread
 *    frees the array it polls) is fixed by 24061f015: v53.0, and on the
 *    stable branches at the minors of uaf_fixed[] below.
 *  - rpoll's finite timeout leaking the poll gate is fixed by a1747742e:
 *    v63.0, and at the minors of tmo_fixed[] (never on 39.x).
 * A distribution may carry such fixes without a new version: the table
 * then keeps a workaround that was not needed, which costs nothing worse
 * than the listener cap.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE /* dladdr, RTLD_DEFAULT (the CLI builds this file too) */
#endif
#include "compat.h"

#include <dlfcn.h>
#include <errno.h>
#include <limits.h>
#include <link.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The first minor of each stable branch with the fix; a branch not listed
 * below the mainline release with it has none. */
struct fix_at {
	int major, minor;
};

static const struct fix_at uaf_fixed[] = {
    {39, 9}, {40, 8}, {41, 8}, {42, 8}, {43, 7}, {44, 7}, {45, 6},
    {46, 5}, {47, 4}, {48, 3}, {49, 3}, {50, 2}, {51, 2}, {52, 1},
};
#define UAF_MAINLINE 53

static const struct fix_at tmo_fixed[] = {
    {40, 13}, {41, 13}, {42, 13}, {43, 12}, {44, 12}, {45, 11},
    {46, 10}, {47, 9},	{48, 8},  {49, 8},  {50, 7},  {51, 7},
    {52, 6},  {53, 6},	{54, 5},  {55, 4},  {56, 4},  {57, 3},
    {58, 2},  {59, 2},	{60, 2},  {61, 1},  {62, 1},
};
#define TMO_MAINLINE 63

static bool has_fix(const struct fix_at *t, size_t n, int mainline, int major,
		    int minor)
{
	if (major >= mainline)
		return true;
	for (size_t i = 0; i < n; i++)
		if (t[i].major == major)
			return minor >= t[i].minor;
	return false;
}

/* A run of 1..4 digits at *s, moved past; -1 if none or longer. */
static int number(const char **s)
{
	int v = 0, n = 0;

	while (**s >= '0' && **s <= '9') {
		if (++n > 4)
			return -1;
		v = v * 10 + (*(*s)++ - '0');
	}
	return n ? v : -1;
}

int sg_rdmacm_parse(const char *path, int *major, int *minor)
{
	static const char stem[] = "librdmacm.so.1.";
	const char *b = strrchr(path, '/'), *s;
	int abi, maj, min;

	b = b ? b + 1 : path;
	if (strncmp(b, stem, sizeof(stem) - 1))
		return -EINVAL;
	s = b + sizeof(stem) - 1;
	abi = number(&s);
	if (abi < 0 || *s++ != '.')
		return -EINVAL;
	maj = number(&s);
	if (maj < 0 || *s++ != '.')
		return -EINVAL;
	min = number(&s);
	if (min < 0 || *s)
		return -EINVAL;
	*major = maj;
	*minor = min;
	return 0;
}

void sg_rdmacm_decide(struct sg_rdmacm *c, int major, int minor)
{
	c->major = major;
	c->minor = minor;
	c->known = major >= SG_RDMACM_OLDEST_MAJOR &&
		   major <= SG_RDMACM_NEWEST_MAJOR && minor >= 0;
	c->svc_noop = c->known;
	c->listener_cap = 0;
	c->rpoll_timeout_bug = false;
	if (major < 0) {
		c->why = "its rdma-core release is unknown (file name not "
			 "librdmacm.so.1.N.MAJOR.MINOR)";
		return;
	}
	if (!c->known) {
		c->why = major < SG_RDMACM_OLDEST_MAJOR
			     ? "rdma-core older than the oldest this shim was "
			       "checked against"
			     : "rdma-core newer than the newest this shim was "
			       "checked against";
		return;
	}
	if (!has_fix(uaf_fixed, sizeof(uaf_fixed) / sizeof(uaf_fixed[0]),
		     UAF_MAINLINE, major, minor))
		c->listener_cap = 3;
	c->rpoll_timeout_bug =
	    !has_fix(tmo_fixed, sizeof(tmo_fixed) / sizeof(tmo_fixed[0]),
		     TMO_MAINLINE, major, minor);
	c->why = "a release this shim was checked against";
}

struct find {
	char *out;
	size_t len;
};

static int find_cb(struct dl_phdr_info *info, size_t size, void *arg)
{
	struct find *f = arg;
	const char *b = strrchr(info->dlpi_name, '/');

	(void)size;
	b = b ? b + 1 : info->dlpi_name;
	if (strncmp(b, "librdmacm.so", 12))
		return 0;
	snprintf(f->out, f->len, "%s", info->dlpi_name);
	return 1;
}

/* The name librdmacm was loaded by: the object that defines rsocket(),
 * else the first object named librdmacm.so*. */
static int loaded_name(char *out, size_t len)
{
	void *sym = dlsym(RTLD_DEFAULT, "rsocket");
	struct find f = {out, len};
	Dl_info di;

	out[0] = '\0';
	if (sym && dladdr(sym, &di) && di.dli_fname &&
	    strstr(di.dli_fname, "librdmacm.so"))
		snprintf(out, len, "%s", di.dli_fname);
	else
		dl_iterate_phdr(find_cb, &f);
	return out[0] ? 0 : -ENOENT;
}

int sg_rdmacm_probe(struct sg_rdmacm *c)
{
	char name[PATH_MAX], *real;
	int major = -1, minor = -1;

	if (loaded_name(name, sizeof(name))) {
		c->path[0] = '\0';
		sg_rdmacm_decide(c, -1, -1);
		c->why = "no librdmacm is loaded";
		return -ENOENT;
	}
	real = realpath(name, NULL);
	snprintf(c->path, sizeof(c->path), "%s", real ? real : name);
	free(real);
	if (sg_rdmacm_parse(c->path, &major, &minor))
		major = minor = -1;
	sg_rdmacm_decide(c, major, minor);
	return 0;
}

void sg_rdmacm_describe(const struct sg_rdmacm *c, char *out, size_t len)
{
	if (!c->known) {
		snprintf(out, len, "tcp: %s: connections stay on kernel TCP",
			 c->why);
		return;
	}
	snprintf(out, len, "rdma: %s%s%s", c->why,
		 c->listener_cap ? "; RDMA listeners capped at 3 per process "
				   "(rsockets' service thread fails past 3 "
				   "sockets before the fix of 44.7/50.2/53.0)"
				 : "",
		 c->rpoll_timeout_bug ? "; rpoll's finite-timeout defect "
					"avoided (rpoll(-1) + timerfd)"
				      : "");
}
