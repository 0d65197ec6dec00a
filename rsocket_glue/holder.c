/* SPDX-License-Identifier: MIT */
/*
 * Who holds an rdma_cm port: the processes whose rdma_cm ids are bound to
 * it, from the kernel's RDMA netlink resource dump (what `rdma res show
 * cm_id` prints).  Asked only when a listener's door finds its port taken
 * (preload/socket.c): the holder may be a sibling of the listener's, or
 * another user's program squatting the twin port.
 */
#include "glue.h"
#include "glue_int.h"

#include <linux/netlink.h>
#include <rdma/rdma_netlink.h>
#include <netinet/in.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#define NL_BUF 32768
#define MAX_DEVS 64

struct nl_req {
	struct nlmsghdr h;
	struct nlattr a;
	uint32_t dev;
};

/* Send one dump request (dev >= 0: for that device). */
static int nl_ask(int fd, int cmd, int dev, uint32_t seq)
{
	struct nl_req q = {
	    .h = {.nlmsg_type = RDMA_NL_GET_TYPE(RDMA_NL_NLDEV, cmd),
		  .nlmsg_flags = NLM_F_REQUEST | NLM_F_DUMP,
		  .nlmsg_seq = seq},
	    .a = {.nla_len = NLA_HDRLEN + sizeof(uint32_t),
		  .nla_type = RDMA_NLDEV_ATTR_DEV_INDEX},
	    .dev = (uint32_t)dev,
	};

	q.h.nlmsg_len = dev >= 0 ? sizeof(q) : NLMSG_HDRLEN;
	return REAL(send)(fd, &q, q.h.nlmsg_len, 0) < 0 ? -errno : 0;
}

struct walk {
	uint16_t port;
	int *devs, ndev;
	pid_t *pids;
	int npid, max;
	bool unknown; /* a holder without a pid (the kernel's own) */
};

static void on_attrs(struct walk *w, const char *p, int len, int depth);

/* a whole attribute in the len bytes left (lengths are the kernel's, but
 * checked all the same) */
static bool nla_ok(const struct nlattr *a, int len)
{
	return len >= NLA_HDRLEN && a->nla_len >= NLA_HDRLEN &&
	       a->nla_len <= len;
}

static const struct nlattr *nla_next(const struct nlattr *a, int *len)
{
	*len -= NLA_ALIGN(a->nla_len);
	return (const void *)((const char *)a + NLA_ALIGN(a->nla_len));
}

/* One cm_id entry: its source port and owner. */
static void on_entry(struct walk *w, const char *p, int len)
{
	struct sockaddr_storage src;
	bool have_src = false;
	pid_t pid = 0;
	uint16_t port;

	for (const struct nlattr *a = (const void *)p; nla_ok(a, len);
	     a = nla_next(a, &len)) {
		const void *v = (const char *)a + NLA_HDRLEN;
		int vl = a->nla_len - NLA_HDRLEN;
		int t = a->nla_type & NLA_TYPE_MASK;

		if (t == RDMA_NLDEV_ATTR_RES_PID && vl >= 4)
			pid = (pid_t) * (const uint32_t *)v;
		if (t == RDMA_NLDEV_ATTR_RES_SRC_ADDR &&
		    vl >= (int)sizeof(sa_family_t)) {
			memset(&src, 0, sizeof(src));
			memcpy(&src, v,
			       vl < (int)sizeof(src) ? (size_t)vl
						     : sizeof(src));
			have_src = true;
		}
	}
	if (!have_src)
		return;
	port = src.ss_family == AF_INET ? ((struct sockaddr_in *)&src)->sin_port
	       : src.ss_family == AF_INET6
		   ? ((struct sockaddr_in6 *)&src)->sin6_port
		   : 0;
	if (ntohs(port) != w->port)
		return;
	if (!pid) {
		w->unknown = true;
		return;
	}
	for (int i = 0; i < w->npid; i++)
		if (w->pids[i] == pid)
			return;
	if (w->npid < w->max)
		w->pids[w->npid++] = pid;
	else
		w->unknown = true; /* more than we can check: not trusted */
}

static void on_attrs(struct walk *w, const char *p, int len, int depth)
{
	for (const struct nlattr *a = (const void *)p; nla_ok(a, len);
	     a = nla_next(a, &len)) {
		const char *v = (const char *)a + NLA_HDRLEN;
		int vl = a->nla_len - NLA_HDRLEN;
		int t = a->nla_type & NLA_TYPE_MASK;

		if (t == RDMA_NLDEV_ATTR_DEV_INDEX && vl >= 4 && w->devs &&
		    w->ndev < MAX_DEVS)
			w->devs[w->ndev++] = (int)*(const uint32_t *)v;
		else if (t == RDMA_NLDEV_ATTR_RES_CM_ID && depth == 0)
			on_attrs(w, v, vl, 1);
		else if (t == RDMA_NLDEV_ATTR_RES_CM_ID_ENTRY && depth == 1)
			on_entry(w, v, vl);
	}
}

/* Read one dump's answers to its end; 0 or -errno. */
static int nl_read(int fd, char *buf, struct walk *w, uint32_t seq)
{
	for (;;) {
		ssize_t n = REAL(recv)(fd, buf, NL_BUF, 0);

		if (n < 0)
			return -errno;
		for (struct nlmsghdr *h = (void *)buf; NLMSG_OK(h, (size_t)n);
		     h = NLMSG_NEXT(h, n)) {
			if (h->nlmsg_seq != seq)
				continue;
			if (h->nlmsg_type == NLMSG_DONE)
				return 0;
			if (h->nlmsg_type == NLMSG_ERROR) {
				const struct nlmsgerr *e = NLMSG_DATA(h);

				return e->error ? e->error : 0;
			}
			on_attrs(w, (const char *)NLMSG_DATA(h),
				 (int)h->nlmsg_len - NLMSG_HDRLEN, 0);
		}
	}
}

int sg_port_holders(uint16_t port, pid_t *pids, int max)
{
	int devs[MAX_DEVS], fd, r;
	struct walk w = {.devs = devs, .pids = pids, .max = max};
	char *buf = malloc(NL_BUF);
	uint32_t seq = 1;

	if (!buf)
		return -ENOMEM;
	fd = REAL(socket)(AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC, NETLINK_RDMA);
	if (fd < 0) {
		free(buf);
		return -errno;
	}
	/* a bounded wait: the kernel answers at once, or not at all */
	(void)REAL(setsockopt)(fd, SOL_SOCKET, SO_RCVTIMEO,
			       &(struct timeval){.tv_sec = 1},
			       sizeof(struct timeval));
	r = nl_ask(fd, RDMA_NLDEV_CMD_GET, -1, seq);
	if (r == 0)
		r = nl_read(fd, buf, &w, seq);
	w.devs = NULL; /* from here on, entries only */
	w.port = port;
	for (int i = 0; r == 0 && i < w.ndev; i++) {
		r = nl_ask(fd, RDMA_NLDEV_CMD_RES_CM_ID_GET, devs[i], ++seq);
		if (r == 0)
			r = nl_read(fd, buf, &w, seq);
	}
	REAL(close)(fd);
	free(buf);
	if (r < 0)
		return r;
	return w.unknown ? -ESRCH : w.npid;
}
