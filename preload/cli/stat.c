/* SPDX-License-Identifier: MIT */
/*
 * erdma-shim stat: the connection tables of shimmed processes
 * (/dev/shm/erdma-shim.PID.PIDNS.UID, layout in preload/stats.h).
 *
 * A table is another process's memory, and any user can make a file under
 * that name: stat reads each table once, with pread into a private copy of
 * exactly the expected size (a table that is not that size is skipped; a
 * file that shrinks meanwhile gives a short read, not a SIGBUS), then checks
 * every field it uses (erdma_stat_check) and never looks at the file again.
 * Strings from a table are printed escaped in every format: text output
 * goes to terminals, and a table can be written by any user.
 */
#define _GNU_SOURCE
#include "stat.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/inet_diag.h>
#include <linux/netlink.h>
#include <linux/rtnetlink.h>
#include <linux/sock_diag.h>
#include <linux/tcp.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

/* A JSON string literal of s: control bytes, and bytes >= 0x80 (as
 * U+0080..U+00FF) escaped, so the output is ASCII and valid JSON whatever
 * bytes s holds. */
void json_str(FILE *f, const char *s)
{
	fputc('"', f);
	for (; *s; s++) {
		unsigned char c = (unsigned char)*s;

		if (c == '"' || c == '\\')
			fprintf(f, "\\%c", c);
		else if (c < 0x20 || c >= 0x7f)
			fprintf(f, "\\u%04x", c);
		else
			fputc(c, f);
	}
	fputc('"', f);
}

/* s for a terminal: control bytes, DEL, bytes >= 0x80 and backslash as \xNN
 * (\\), so a table's bytes can't move the cursor, recolour or fake lines. */
static const char *text_str(char *out, size_t len, const char *s)
{
	size_t o = 0;

	for (; *s && o + 5 < len; s++) {
		unsigned char c = (unsigned char)*s;

		if (c == '\\')
			o += (size_t)snprintf(out + o, len - o, "\\\\");
		else if (c < 0x20 || c >= 0x7f)
			o += (size_t)snprintf(out + o, len - o, "\\x%02x", c);
		else
			out[o++] = (char)c;
	}
	out[o] = '\0';
	return out;
}

struct tcp_bytes {
	uint64_t ino, in, out;
	uint8_t state;
};

struct diag {
	struct tcp_bytes *v;
	size_t n, cap;
};

static void diag_add(struct diag *d, const struct inet_diag_msg *m, int len)
{
	struct tcp_info ti;
	struct rtattr *a = (struct rtattr *)(m + 1);
	int rem = len - (int)NLMSG_ALIGN(sizeof(*m));

	memset(&ti, 0, sizeof(ti));
	for (; RTA_OK(a, rem); a = RTA_NEXT(a, rem))
		if (a->rta_type == INET_DIAG_INFO) {
			size_t l = RTA_PAYLOAD(a);

			memcpy(&ti, RTA_DATA(a),
			       l < sizeof(ti) ? l : sizeof(ti));
		}
	if (d->n == d->cap) {
		size_t cap = d->cap ? d->cap * 2 : 256;
		struct tcp_bytes *v = realloc(d->v, cap * sizeof(*v));

		if (!v)
			return;
		d->v = v;
		d->cap = cap;
	}
	d->v[d->n++] = (struct tcp_bytes){
	    .ino = m->idiag_inode,
	    .in = ti.tcpi_bytes_received,
	    .out = ti.tcpi_bytes_sent - ti.tcpi_bytes_retrans,
	    .state = m->idiag_state,
	};
}

/* Every TCP socket's byte counts, from the kernel (sock_diag, as ss -ti). */
static void diag_dump(struct diag *d, int family)
{
	struct {
		struct nlmsghdr nlh;
		struct inet_diag_req_v2 r;
	} req = {
	    .nlh = {.nlmsg_len = sizeof(req),
		    .nlmsg_type = SOCK_DIAG_BY_FAMILY,
		    .nlmsg_flags = NLM_F_REQUEST | NLM_F_DUMP},
	    .r = {.sdiag_family = (uint8_t)family,
		  .sdiag_protocol = IPPROTO_TCP,
		  .idiag_states = ~0u,
		  .idiag_ext = 1 << (INET_DIAG_INFO - 1)},
	};
	static char buf[65536];
	int fd = socket(AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC, NETLINK_SOCK_DIAG);
	bool done = false;

	if (fd < 0)
		return;
	if (send(fd, &req, sizeof(req), 0) != sizeof(req))
		done = true;
	while (!done) {
		ssize_t n = recv(fd, buf, sizeof(buf), 0);
		struct nlmsghdr *h = (struct nlmsghdr *)buf;

		if (n <= 0)
			break;
		for (; NLMSG_OK(h, (size_t)n); h = NLMSG_NEXT(h, n)) {
			if (h->nlmsg_type == NLMSG_DONE ||
			    h->nlmsg_type == NLMSG_ERROR) {
				done = true;
				break;
			}
			diag_add(d, NLMSG_DATA(h),
				 (int)(h->nlmsg_len - NLMSG_LENGTH(0)));
		}
	}
	close(fd);
}

static const struct tcp_bytes *diag_find(const struct diag *d, uint64_t ino)
{
	for (size_t i = 0; i < d->n; i++)
		if (d->v[i].ino == ino)
			return &d->v[i];
	return NULL;
}

/*
 * A socket's byte counts through a copy of the owner's fd (pidfd_getfd,
 * Linux 5.6; needs ptrace rights over pid).  The fallback when sock_diag
 * has no answer (its tcp_diag module not loaded and not loadable).
 */
static bool bytes_via_pidfd(int pid, int fd, uint64_t ino, struct tcp_bytes *tb)
{
	int pfd = (int)syscall(SYS_pidfd_open, pid, 0), sfd;
	struct tcp_info ti;
	socklen_t tl = sizeof(ti);
	struct stat sb;
	bool ok = false;

	if (pfd < 0)
		return false;
	sfd = (int)syscall(SYS_pidfd_getfd, pfd, fd, 0);
	close(pfd);
	if (sfd < 0)
		return false;
	memset(&ti, 0, sizeof(ti));
	if (fstat(sfd, &sb) == 0 && (uint64_t)sb.st_ino == ino &&
	    getsockopt(sfd, IPPROTO_TCP, TCP_INFO, &ti, &tl) == 0) {
		*tb = (struct tcp_bytes){
		    .ino = ino,
		    .in = ti.tcpi_bytes_received,
		    .out = ti.tcpi_bytes_sent - ti.tcpi_bytes_retrans,
		    .state = ti.tcpi_state,
		};
		ok = true;
	}
	close(sfd);
	return ok;
}

/* Is fd of pid still the socket the slot was filled for?  -1: can't tell
 * (another user's process). */
static int fd_is(int pid, int fd, uint64_t ino)
{
	char path[64], link[64], want[40];
	ssize_t n;

	snprintf(path, sizeof(path), "/proc/%d/fd/%d", pid, fd);
	n = readlink(path, link, sizeof(link) - 1);
	if (n < 0)
		return errno == ENOENT ? 0 : -1;
	link[n] = '\0';
	snprintf(want, sizeof(want), "socket:[%llu]", (unsigned long long)ino);
	return !strcmp(link, want);
}

/* One table as stat shows it: a private, checked copy. */
struct table {
	struct erdma_stat_hdr *h; /* ERDMA_STAT_SIZE bytes */
	bool local; /* its pid is in our pid namespace: /proc/PID is it */
};

/* Does pid still map the table `name`?  After an exec (same pid) it doesn't.
 * -1: can't tell. */
static int maps_segment(int pid, const char *name)
{
	char path[64], line[512];
	FILE *f;
	int found = 0;

	snprintf(path, sizeof(path), "/proc/%d/maps", pid);
	f = fopen(path, "re");
	if (!f)
		return -1;
	while (!found && fgets(line, sizeof(line), f))
		found = strstr(line, name) != NULL;
	fclose(f);
	return found;
}

static bool has_nul(const char *s, size_t n)
{
	return memchr(s, '\0', n) != NULL;
}

static bool addr_ok(const struct erdma_stat_addr *a)
{
	return a->family == 0 || a->family == AF_INET || a->family == AF_INET6;
}

int erdma_stat_check(struct erdma_stat_hdr *h, size_t len, const char **why)
{
	*why = NULL;
	if (len != ERDMA_STAT_SIZE)
		*why = "wrong size";
	else if (h->magic != ERDMA_STAT_MAGIC)
		*why = "bad magic";
	else if (h->version != ERDMA_STAT_VERSION)
		*why = "another version";
	else if (h->nslots != ERDMA_STAT_SLOTS ||
		 h->slot_size != sizeof(struct erdma_stat_slot))
		*why = "bad slot count or size";
	else if (h->pid <= 0 || h->rdma_state > 2)
		*why = "bad pid or rdma state";
	else if (!has_nul(h->shim_version, sizeof(h->shim_version)) ||
		 !has_nul(h->mode, sizeof(h->mode)) ||
		 !has_nul(h->comm, sizeof(h->comm)))
		*why = "unterminated string";
	if (*why)
		return -1;
	/* A bad slot is left out, not the table: free it in our copy. */
	for (unsigned int i = 0; i < ERDMA_STAT_SLOTS; i++) {
		struct erdma_stat_slot *s = &h->slot[i];

		if (s->path > ERDMA_PATH_LISTEN_TCP || s->path < 0 ||
		    s->fd < 0 || !has_nul(s->reason, sizeof(s->reason)) ||
		    !addr_ok(&s->local) || !addr_ok(&s->peer))
			s->path = ERDMA_PATH_FREE;
	}
	return 0;
}

/*
 * Slot i of t as stat shows it: false if free, or a kernel slot whose fd is
 * no longer that socket (the library reaps those lazily).  *tb: a TCP
 * connection's kernel byte counts (in *own if read through pidfd), NULL if
 * not known or not TCP.  Only a table of our pid namespace is looked up in
 * /proc and through pidfd: another namespace's pid is another process here.
 */
static bool slot_view(const struct table *t, unsigned int i,
		      const struct diag *d, struct erdma_stat_slot *s,
		      struct tcp_bytes *own, const struct tcp_bytes **tb)
{
	int pid = t->h->pid;

	*tb = NULL;
	*s = t->h->slot[i];
	if (s->path <= ERDMA_PATH_FREE)
		return false;
	if (s->path != ERDMA_PATH_RDMA && s->path != ERDMA_PATH_LISTEN &&
	    t->local && fd_is(pid, s->fd, s->ino) == 0)
		return false;
	if (s->path == ERDMA_PATH_TCP) {
		*tb = diag_find(d, s->ino);
		if (!*tb && t->local &&
		    bytes_via_pidfd(pid, s->fd, s->ino, own))
			*tb = own;
	}
	return true;
}

static void conn_out(bool json, int n, int pid, const struct erdma_stat_slot *s,
		     const struct tcp_bytes *tb)
{
	char la[64], pa[64], reason[4 * sizeof(s->reason) + 1];
	bool rdma = s->path == ERDMA_PATH_RDMA;
	bool known = rdma || tb;
	unsigned long long in = rdma ? s->bytes_in : tb ? tb->in : 0;
	unsigned long long out = rdma ? s->bytes_out : tb ? tb->out : 0;

	erdma_stat_addr_text(&s->local, la, sizeof(la));
	erdma_stat_addr_text(&s->peer, pa, sizeof(pa));
	if (json) {
		printf("%s\n      {\"fd\": %d, \"path\": \"%s\", \"local\": "
		       "\"%s\", \"peer\": \"%s\", ",
		       n ? "," : "", s->fd, erdma_stat_path_name(s->path), la,
		       pa);
		if (known)
			printf("\"bytes_in\": %llu, \"bytes_out\": %llu, ", in,
			       out);
		else
			printf("\"bytes_in\": null, \"bytes_out\": null, ");
		if (rdma)
			printf("\"msgs_in\": %llu, \"msgs_out\": %llu, ",
			       (unsigned long long)s->msgs_in,
			       (unsigned long long)s->msgs_out);
		else
			printf("\"msgs_in\": null, \"msgs_out\": null, ");
		printf("\"reason\": ");
		json_str(stdout, s->reason);
		printf("}");
		return;
	}
	char bi[24] = "-", bo[24] = "-", mi[24] = "-", mo[24] = "-";

	if (known) {
		snprintf(bi, sizeof(bi), "%llu", in);
		snprintf(bo, sizeof(bo), "%llu", out);
	}
	if (rdma) {
		snprintf(mi, sizeof(mi), "%llu",
			 (unsigned long long)s->msgs_in);
		snprintf(mo, sizeof(mo), "%llu",
			 (unsigned long long)s->msgs_out);
	}
	printf("%7d %4d  %-10s %-24s %-24s %12s %12s %8s %8s  %s\n", pid, s->fd,
	       erdma_stat_path_name(s->path), la, pa, bi, bo, mi, mo,
	       text_str(reason, sizeof(reason), s->reason));
}

static const char *const rdma_word[] = {"unknown", "available",
					"not available"};

static void proc_out(bool json, bool first, const struct table *t,
		     const struct diag *d)
{
	const struct erdma_stat_hdr *h = t->h;
	char comm[4 * sizeof(h->comm) + 1],
	    ver[4 * sizeof(h->shim_version) + 1], mode[4 * sizeof(h->mode) + 1],
	    ns[48] = "";
	struct erdma_stat_slot s;
	struct tcp_bytes own;
	int n = 0;

	if (json) {
		printf("%s\n  {\"pid\": %d, \"pidns\": %llu, \"uid\": %u, "
		       "\"comm\": ",
		       first ? "" : ",", h->pid, (unsigned long long)h->pidns,
		       h->uid);
		json_str(stdout, h->comm);
		printf(", \"shim_version\": ");
		json_str(stdout, h->shim_version);
		printf(", \"mode\": ");
		json_str(stdout, h->mode);
		printf(
		    ", \"rdma\": \"%s\", \"since\": %llu,\n    \"totals\": "
		    "{\"rdma\": %llu, \"tcp\": %llu, \"listen\": %llu, "
		    "\"listen_tcp\": %llu, \"not_counted\": %llu, "
		    "\"closed_rdma_bytes_in\": %llu, "
		    "\"closed_rdma_bytes_out\": %llu},\n    \"connections\": [",
		    rdma_word[h->rdma_state], (unsigned long long)h->started,
		    (unsigned long long)h->n_rdma, (unsigned long long)h->n_tcp,
		    (unsigned long long)h->n_listen,
		    (unsigned long long)h->n_listen_tcp,
		    (unsigned long long)h->n_untracked,
		    (unsigned long long)h->closed_bytes_in,
		    (unsigned long long)h->closed_bytes_out);
	} else {
		if (!t->local)
			snprintf(ns, sizeof(ns), " in pid namespace %llu",
				 (unsigned long long)h->pidns);
		printf("pid %d%s (%s), uid %u: liberdma_shim %s, mode %s, RDMA "
		       "%s; since start: %llu rdma, %llu tcp connections, %llu "
		       "listeners\n",
		       h->pid, ns, text_str(comm, sizeof(comm), h->comm),
		       h->uid, text_str(ver, sizeof(ver), h->shim_version),
		       text_str(mode, sizeof(mode), h->mode),
		       rdma_word[h->rdma_state], (unsigned long long)h->n_rdma,
		       (unsigned long long)h->n_tcp,
		       (unsigned long long)(h->n_listen + h->n_listen_tcp));
		printf("%7s %4s  %-10s %-24s %-24s %12s %12s %8s %8s  %s\n",
		       "PID", "FD", "PATH", "LOCAL", "PEER", "BYTES_IN",
		       "BYTES_OUT", "MSGS_IN", "MSGS_OUT", "REASON");
	}
	for (unsigned int i = 0; i < ERDMA_STAT_SLOTS; i++) {
		const struct tcp_bytes *tb;

		if (slot_view(t, i, d, &s, &own, &tb))
			conn_out(json, n++, h->pid, &s, tb);
	}
	if (json)
		printf("%s]}", n ? "\n    " : "");
}

/* ---- stat --prometheus: text exposition format 0.0.4 ---- */

/* Open connections (or listeners) of one path with one reason. */
struct prom_group {
	int path;
	unsigned long long n;
	char reason[sizeof(((struct erdma_stat_slot *)0)->reason)];
};

/* One process, summed per path, copied out of its segment. */
struct prom_proc {
	struct erdma_stat_hdr h; /* the header only (no slots) */
	/* [path]: bytes/messages in and out of the open connections */
	unsigned long long in[5], out[5], min[5], mout[5];
	struct prom_group *g;
	size_t ng;
};

static void prom_add(struct prom_proc *p, const struct erdma_stat_slot *s,
		     const struct tcp_bytes *tb)
{
	char why[sizeof(s->reason)];
	size_t i, k;

	if (s->path == ERDMA_PATH_RDMA) {
		p->in[s->path] += s->bytes_in;
		p->out[s->path] += s->bytes_out;
		p->min[s->path] += s->msgs_in;
		p->mout[s->path] += s->msgs_out;
	} else if (tb) {
		p->in[s->path] += tb->in;
		p->out[s->path] += tb->out;
	}
	/* Grouped by the reason as its label prints (prom_label): two
	 * reasons that differ only in bytes printed as '?' are one series. */
	for (k = 0; k + 1 < sizeof(why) && s->reason[k]; k++) {
		unsigned char c = (unsigned char)s->reason[k];

		why[k] = c != '\n' && (c < 0x20 || c >= 0x7f) ? '?' : (char)c;
	}
	why[k] = '\0';
	for (i = 0; i < p->ng; i++)
		if (p->g[i].path == s->path && !strcmp(p->g[i].reason, why))
			break;
	if (i == p->ng) {
		/* at most one group per slot: g has ERDMA_STAT_SLOTS entries */
		p->g[i].path = s->path;
		p->g[i].n = 0;
		memcpy(p->g[i].reason, why, sizeof(why));
		p->ng++;
	}
	p->g[i].n++;
}

/* A label value: \, " and newline escaped; other control bytes and
 * non-ASCII bytes (comm is any bytes) as '?', so the value is UTF-8. */
static void prom_label(const char *name, const char *v, size_t max)
{
	printf("%s=\"", name);
	for (size_t i = 0; i < max && v[i]; i++) {
		unsigned char c = (unsigned char)v[i];

		if (c == '\\' || c == '"')
			printf("\\%c", c);
		else if (c == '\n')
			printf("\\n");
		else
			putchar(c < 0x20 || c >= 0x7f ? '?' : c);
	}
	putchar('"');
}

/* name{pid="..",comm=".." and a path label if path >= 0 */
static void prom_series(const char *name, const struct prom_proc *p, int path)
{
	printf("%s{pid=\"%d\",", name, p->h.pid);
	prom_label("comm", p->h.comm, sizeof(p->h.comm));
	if (path >= 0) {
		putchar(',');
		prom_label("path", erdma_stat_path_name(path), 16);
	}
}

static void prom_family(const char *name, const char *type, const char *help)
{
	printf("# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
}

/* bytes/messages in or out per path: which: 0 in, 1 out, 2 msgs in,
 * 3 msgs out; RDMA bytes include closed connections. */
static void prom_traffic(const struct prom_proc *v, int n, const char *name,
			 const char *help, int which)
{
	prom_family(name, "counter", help);
	for (int i = 0; i < n; i++) {
		const struct prom_proc *p = &v[i];

		for (int path = ERDMA_PATH_RDMA; path <= ERDMA_PATH_TCP;
		     path++) {
			unsigned long long x = which == 0   ? p->in[path]
					       : which == 1 ? p->out[path]
					       : which == 2 ? p->min[path]
							    : p->mout[path];

			if (which >= 2 && path != ERDMA_PATH_RDMA)
				continue; /* TCP messages are not known */
			if (path == ERDMA_PATH_RDMA && which == 0)
				x += p->h.closed_bytes_in;
			if (path == ERDMA_PATH_RDMA && which == 1)
				x += p->h.closed_bytes_out;
			prom_series(name, p, path);
			printf("} %llu\n", x);
		}
	}
}

/* Open connections (listeners: lst) by path and reason. */
static void prom_open(const struct prom_proc *v, int n, const char *name,
		      const char *help, bool lst)
{
	prom_family(name, "gauge", help);
	for (int i = 0; i < n; i++)
		for (size_t j = 0; j < v[i].ng; j++) {
			const struct prom_group *g = &v[i].g[j];
			bool is_lst = g->path == ERDMA_PATH_LISTEN ||
				      g->path == ERDMA_PATH_LISTEN_TCP;

			if (is_lst != lst)
				continue;
			prom_series(name, &v[i], g->path);
			putchar(',');
			prom_label("reason", g->reason, sizeof(g->reason));
			printf("} %llu\n", g->n);
		}
}

/* Totals since the table was made, per path (two paths from a..b). */
static void prom_since(const struct prom_proc *v, int n, const char *name,
		       const char *help, int a)
{
	prom_family(name, "counter", help);
	for (int i = 0; i < n; i++)
		for (int path = a; path <= a + 1; path++) {
			const struct erdma_stat_hdr *h = &v[i].h;
			unsigned long long x =
			    path == ERDMA_PATH_RDMA	? h->n_rdma
			    : path == ERDMA_PATH_TCP	? h->n_tcp
			    : path == ERDMA_PATH_LISTEN ? h->n_listen
							: h->n_listen_tcp;

			prom_series(name, &v[i], path);
			printf("} %llu\n", x);
		}
}

static void prom_out(const struct prom_proc *v, int n)
{
	prom_family(
	    "erdma_shim_processes", "gauge",
	    "Processes running with liberdma_shim's statistics "
	    "table (/dev/shm/erdma-shim.PID.PIDNS.UID) readable by this user.");
	printf("erdma_shim_processes %d\n", n);
	prom_family("erdma_shim_process_info", "gauge",
		    "A shimmed process (always 1): library version, mode "
		    "(ERDMA_SHIM) and whether RDMA is available to it.");
	for (int i = 0; i < n; i++) {
		const struct erdma_stat_hdr *h = &v[i].h;

		prom_series("erdma_shim_process_info", &v[i], -1);
		putchar(',');
		prom_label("version", h->shim_version, sizeof(h->shim_version));
		putchar(',');
		prom_label("mode", h->mode, sizeof(h->mode));
		putchar(',');
		prom_label("rdma", rdma_word[h->rdma_state], 16);
		printf("} 1\n");
	}
	prom_family("erdma_shim_stats_since_seconds", "gauge",
		    "When the process's statistics table was made (its first "
		    "connection), Unix time.");
	for (int i = 0; i < n; i++) {
		prom_series("erdma_shim_stats_since_seconds", &v[i], -1);
		printf("} %llu\n", (unsigned long long)v[i].h.started);
	}
	prom_traffic(v, n, "erdma_shim_received_bytes_total",
		     "Bytes received, per path. rdma: counted by the shim, "
		     "closed connections included. tcp: the kernel's "
		     "tcp_info of the connections open now (a closed one "
		     "leaves the sum).",
		     0);
	prom_traffic(v, n, "erdma_shim_sent_bytes_total",
		     "Bytes sent, per path. rdma: counted by the shim, closed "
		     "connections included. tcp: the kernel's tcp_info of the "
		     "connections open now (a closed one leaves the sum).",
		     1);
	prom_traffic(v, n, "erdma_shim_received_messages_total",
		     "Receive calls that moved at least one byte, RDMA "
		     "connections open now (TCP: not counted).",
		     2);
	prom_traffic(v, n, "erdma_shim_sent_messages_total",
		     "Send calls that moved at least one byte, RDMA "
		     "connections open now (TCP: not counted).",
		     3);
	prom_open(v, n, "erdma_shim_connections",
		  "Open connections by path (rdma, tcp) and, for tcp, why "
		  "the connection is not on RDMA.",
		  false);
	prom_since(v, n, "erdma_shim_connections_total",
		   "Connections made or accepted since the table was made, "
		   "per path.",
		   ERDMA_PATH_RDMA);
	prom_open(v, n, "erdma_shim_listeners",
		  "Open listeners by path (listen: TCP and RDMA, listen-tcp: "
		  "TCP only) and, for listen-tcp, why.",
		  true);
	prom_since(v, n, "erdma_shim_listeners_total",
		   "Listeners made since the table was made, per path.",
		   ERDMA_PATH_LISTEN);
	prom_family("erdma_shim_untracked_connections_total", "counter",
		    "Connections the full table could not list (not in the "
		    "other metrics).");
	for (int i = 0; i < n; i++) {
		prom_series("erdma_shim_untracked_connections_total", &v[i],
			    -1);
		printf("} %llu\n", (unsigned long long)v[i].h.n_untracked);
	}
}

/* Sum t's open connections into p (p->g: room for ERDMA_STAT_SLOTS). */
static void prom_take(struct prom_proc *p, const struct table *t,
		      const struct diag *d)
{
	struct erdma_stat_slot s;
	struct tcp_bytes own;

	p->h = *t->h;
	for (unsigned int i = 0; i < ERDMA_STAT_SLOTS; i++) {
		const struct tcp_bytes *tb;

		if (slot_view(t, i, d, &s, &own, &tb))
			prom_add(p, &s, tb);
	}
}

/* All of fd into buf (len bytes); false on a short read (it shrank). */
static bool pread_all(int fd, void *buf, size_t len)
{
	size_t o = 0;

	while (o < len) {
		ssize_t n = pread(fd, (char *)buf + o, len - o, (off_t)o);

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return false;
		o += (size_t)n;
	}
	return true;
}

/*
 * A copy of the table in fd: read twice more at most to settle slots being
 * written (a slot's copy counts when its seq is even and the same in the
 * next read: the seqlock, with the reads in the roles of the loads); a slot
 * still unsettled is left out.  NULL if fd is not a table of exactly our
 * layout's size.
 */
static struct erdma_stat_hdr *table_copy(int fd)
{
	struct erdma_stat_hdr *a = malloc(ERDMA_STAT_SIZE);
	struct erdma_stat_hdr *b = malloc(ERDMA_STAT_SIZE);
	bool ok = a && b && pread_all(fd, a, ERDMA_STAT_SIZE);
	unsigned int unsettled = ok;
	static bool moved[ERDMA_STAT_SLOTS]; /* copied from the last read */

	for (int round = 0; ok && unsettled && round < 3; round++) {
		ok = pread_all(fd, b, ERDMA_STAT_SIZE);
		unsettled = 0;
		for (unsigned int i = 0; ok && i < ERDMA_STAT_SLOTS; i++) {
			uint32_t sa = a->slot[i].seq, sb = b->slot[i].seq;

			moved[i] = (sa & 1) || sa != sb;
			if (moved[i]) {
				a->slot[i] = b->slot[i];
				unsettled++;
			}
		}
	}
	/* a slot taken from the last read has no later read to check it */
	for (unsigned int i = 0; ok && unsettled && i < ERDMA_STAT_SLOTS; i++)
		if (moved[i])
			a->slot[i].path = ERDMA_PATH_FREE;
	free(b);
	if (!ok) {
		free(a);
		return NULL;
	}
	return a;
}

struct cli_gone {
	int pid;
	const char *name;
};

/* With the table's lock held (erdma_stat_unlink_stale): its process is
 * dead, or exec'd away (a complete table -- the magic is written after the
 * mapping is made -- that the pid no longer maps). */
static bool cli_gone(int fd, void *arg)
{
	const struct cli_gone *g = arg;
	uint32_t magic;

	if (kill(g->pid, 0) && errno == ESRCH)
		return true;
	return pread(fd, &magic, sizeof(magic), 0) == sizeof(magic) &&
	       magic == ERDMA_STAT_MAGIC && maps_segment(g->pid, g->name) == 0;
}

/*
 * Read the table `name`; NULL if not shown.  A table of our namespace
 * whose process is gone is not shown, and removed if it is ours (our
 * euid: another user's is theirs to remove, by their next shimmed
 * process); *stale says it was.  The file must be a regular file whose
 * owner is the uid in its name, with the size of our layout; its header
 * must name the same pid, namespace and uid.
 */
static struct erdma_stat_hdr *table_open(int dfd, const char *name, int pid,
					 uint64_t ns, unsigned int uid,
					 bool local, bool *stale)
{
	struct erdma_stat_hdr *h;
	const char *why;
	struct stat sb;
	int fd, m = -1;

	*stale = false;
	if (local) {
		bool alive = !(kill(pid, 0) && errno == ESRCH);

		m = alive ? maps_segment(pid, name) : 0;
		if (m == 0) {
			struct cli_gone g = {pid, name};

			*stale =
			    uid == geteuid() &&
			    erdma_stat_unlink_stale(dfd, name, uid, 20,
						    cli_gone, &g, close) == 0;
			return NULL;
		}
	}
	fd = openat(dfd, name,
		    O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
	if (fd < 0)
		return NULL;
	if (fstat(fd, &sb) || !S_ISREG(sb.st_mode) || sb.st_uid != uid ||
	    (size_t)sb.st_size != ERDMA_STAT_SIZE) {
		close(fd);
		return NULL;
	}
	h = table_copy(fd);
	close(fd);
	if (!h)
		return NULL;
	if (erdma_stat_check(h, ERDMA_STAT_SIZE, &why) == 0 &&
	    (h->pid != pid || h->pidns != ns || h->uid != uid))
		why = "its header names another process";
	if (why) {
		fprintf(stderr, "erdma-shim stat: %s/%s: %s: skipped\n",
			ERDMA_STAT_DIR, name, why);
		free(h);
		return NULL;
	}
	return h;
}

/* The initial pid namespace's inode (PROC_PID_INIT_INO, fixed). */
#define PID_NS_INIT_INO 0xEFFFFFFCull

struct ns_set {
	uint64_t *v;
	size_t n, cap;
};

/*
 * Every pid namespace a process lives in, from /proc: only root in the
 * initial pid namespace sees every process, so only it can tell that
 * another namespace is gone (a killed container's tables have no one else
 * to remove them).  false when not that caller (or /proc can't be read).
 */
static bool live_namespaces(struct ns_set *set, uint64_t own_ns)
{
	DIR *d;
	struct dirent *e;
	char path[300];
	struct stat sb;

	if (geteuid() != 0 || own_ns != PID_NS_INIT_INO ||
	    !(d = opendir("/proc")))
		return false;
	while ((e = readdir(d))) {
		if (e->d_name[0] < '1' || e->d_name[0] > '9')
			continue;
		snprintf(path, sizeof(path), "/proc/%s/ns/pid", e->d_name);
		if (stat(path, &sb))
			continue; /* exited meanwhile, or a kernel thread */
		if (set->n == set->cap) {
			size_t cap = set->cap ? set->cap * 2 : 64;
			uint64_t *v = realloc(set->v, cap * sizeof(*v));

			if (!v) {
				closedir(d);
				return false; /* can't tell: remove nothing */
			}
			set->v = v;
			set->cap = cap;
		}
		set->v[set->n++] = sb.st_ino;
	}
	closedir(d);
	return true;
}

static bool ns_live(const struct ns_set *set, uint64_t ns)
{
	for (size_t i = 0; i < set->n; i++)
		if (set->v[i] == ns)
			return true;
	return false;
}

static bool ns_gone(int fd, void *arg)
{
	return true; /* decided by the caller: its namespace is gone */
}

/* The names of the tables in /dev/shm. */
static int name_list(int dfd, char ***out)
{
	int d2 = fcntl(dfd, F_DUPFD_CLOEXEC, 0), k = 0;
	DIR *d = d2 >= 0 ? fdopendir(d2) : NULL;
	struct dirent *e;
	char **names = NULL;
	size_t cap = 0;

	if (!d) {
		if (d2 >= 0)
			close(d2);
		return 0;
	}
	while ((e = readdir(d))) {
		int pid;
		uint64_t ns;
		unsigned int uid;
		char **nv;

		if (!erdma_stat_parse_name(e->d_name, &pid, &ns, &uid))
			continue;
		if ((size_t)k == cap) {
			cap = cap ? cap * 2 : 16;
			nv = realloc(names, cap * sizeof(*nv));
			if (!nv)
				break;
			names = nv;
		}
		if (!(names[k] = strdup(e->d_name)))
			break;
		k++;
	}
	closedir(d);
	*out = names;
	return k;
}

void erdma_stat_print(struct erdma_stat_hdr *h, int fmt)
{
	struct table t = {h, false};
	struct diag d = {0};
	struct prom_proc p = {0};

	switch (fmt) {
	case 0:
	case 1:
		proc_out(fmt == 1, true, &t, &d);
		break;
	default:
		p.g = calloc(ERDMA_STAT_SLOTS, sizeof(*p.g));
		if (!p.g)
			return;
		prom_take(&p, &t, &d);
		prom_out(&p, 1);
		free(p.g);
	}
}

int cmd_stat(int one, bool json, bool prom)
{
	bool stale;
	int n, shown = 0, dfd;
	uint64_t own_ns = erdma_stat_pidns();
	struct ns_set live = {0};
	bool all_ns = false;
	struct diag d = {0};
	struct prom_proc *pv = NULL;
	char **names = NULL;

	dfd = open(ERDMA_STAT_DIR, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	n = dfd >= 0 ? name_list(dfd, &names) : 0;
	if (n && !one)
		all_ns = live_namespaces(&live, own_ns);
	if (prom && n && !(pv = calloc((size_t)n, sizeof(*pv)))) {
		n = 0;
		prom = false;
	}
	diag_dump(&d, AF_INET);
	diag_dump(&d, AF_INET6);
	if (json)
		printf("[");
	for (int i = 0; i < n; i++) {
		struct erdma_stat_hdr *h;
		unsigned int uid = 0;
		uint64_t ns = 0;
		int pid = 0;

		if (!erdma_stat_parse_name(names[i], &pid, &ns, &uid) ||
		    (one && (pid != one || ns != own_ns)))
			continue;
		if (all_ns && ns != own_ns && !ns_live(&live, ns)) {
			if (erdma_stat_unlink_stale(dfd, names[i], uid, 20,
						    ns_gone, NULL, close) == 0)
				fprintf(stderr,
					"erdma-shim stat: removed the stale "
					"segment of pid %d of pid namespace "
					"%llu (no process left in it)\n",
					pid, (unsigned long long)ns);
			continue;
		}
		h = table_open(dfd, names[i], pid, ns, uid, ns == own_ns,
			       &stale);
		if (stale)
			fprintf(stderr,
				"erdma-shim stat: removed the stale segment of "
				"pid %d (no longer running with the shim)\n",
				pid);
		if (!h)
			continue;
		struct table t = {h, ns == own_ns};

		if (prom) {
			pv[shown].g =
			    calloc(ERDMA_STAT_SLOTS, sizeof(*pv[shown].g));
			if (!pv[shown].g) {
				free(h);
				continue;
			}
			prom_take(&pv[shown], &t, &d);
		} else {
			proc_out(json, !shown, &t, &d);
		}
		free(h);
		shown++;
	}
	if (prom) {
		prom_out(pv, shown);
		for (int i = 0; i < shown; i++)
			free(pv[i].g);
		free(pv);
	} else if (json)
		printf("%s]\n", shown ? "\n" : "");
	else if (!shown && !one)
		printf("no process is running with liberdma_shim's statistics "
		       "(ERDMA_SHIM_STATS_SHM=1, the default, and at least one "
		       "connection)\n");
	for (int i = 0; i < n; i++)
		free(names[i]);
	free(names);
	free(live.v);
	free(d.v);
	if (dfd >= 0)
		close(dfd);
	if (one && !shown) {
		fprintf(stderr,
			"erdma-shim stat: pid %d: no statistics (not running "
			"with liberdma_shim, no connection yet, or "
			"ERDMA_SHIM_STATS_SHM=0)\n",
			one);
		return 1;
	}
	return 0;
}
