/* SPDX-License-Identifier: MIT */
/*
 * The twin reservation (docs/security.md, "Ports and peers"): a listener's
 * RDMA door opens lazily, at the first wait for a connection (see
 * preload/socket.c), and until then another user could bind the door's
 * rdma_cm port and receive the port's RDMA clients.  So listen() binds an
 * rdma_cm id to the door's address at once, without listening, and the
 * door's opener hands the port over to the door (sg_listen, under the
 * listen lock) with no moment in which it is free: the id is given
 * SO_REUSEADDR (sg_twin_hold), the door (SO_REUSEADDR too) is bound next to
 * it, and only then the id is destroyed (sg_twin_let_go) and the door
 * listens.  rdma_cm (cma.c, cma_check_port and rdma_listen) lets an id with
 * SO_REUSEADDR bind beside ids that all have it, and lets an id listen only
 * when no other id is bound on an overlapping address, clearing its
 * SO_REUSEADDR as it does: so an id that another user binds in between (it
 * must have SO_REUSEADDR to bind at all) can never listen while the door's
 * id is there, and the door's listen fails instead.  sg_listen then keeps
 * the port with a new reservation (sg_twin_reserve with reuse: bound next
 * to the others, it still keeps every other id from listening) for the
 * listener's life, and the listener serves TCP.
 *
 * The id is made through the kernel's rdma_cm interface directly (not
 * librdmacm: a fork child of a process that used librdmacm gets no RDMA,
 * rsock.c), one file of /dev/infiniband/rdma_cm per listener.  The id is
 * bound without SO_REUSEADDR, so no other id can bind an overlapping
 * address while it is there; in rdma_cm a bound id that does not listen
 * answers no connection request (its clients fall back to TCP, as with no
 * listener at all).
 *
 * Across fork the file is shared, but rdma_cm refuses commands written to
 * a file opened under other credentials (a fork child has its own; a worker
 * that dropped privileges has others): so the opener moves the id into a
 * file of its own (RDMA_USER_CM_CMD_MIGRATE_ID, which only needs the old
 * file's fd) and destroys it there.  Of several prefork siblings the first
 * takes it; the others find it gone (ENOENT) and the door taken, as before
 * (a listening id has no SO_REUSEADDR left: their doors' binds fail).
 * The file is close-on-exec, except in a process whose listener goes
 * across the exec it is making (sg_twin_pass, from preload/exec.c): the
 * new image takes the file back (sg_twin_take) and its start-up's taking
 * of the inherited listener (preload/socket.c, listen_adopt) keeps the
 * reservation.
 */
#include "glue.h"
#include "log.h"
#include "syms.h"

#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <rdma/rdma_user_cm.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define UCMA_DEV "/dev/infiniband/rdma_cm"
/*
 * The reservation's file is told from another rdma_cm file at the same
 * number (the program may close every fd, and librdmacm open one there,
 * whose ids reuse numbers) by its F_SETSIG value, a property of the open
 * file that fork copies share; it means nothing without O_ASYNC, which is
 * never set here, and librdmacm never sets it.
 */
#define TWIN_MARK 61

/* One command on an rdma_cm file: 0 or -errno. */
static int ucma_cmd(int fd, unsigned int cmd, const void *in, size_t in_len,
		    size_t out_len)
{
	struct {
		struct rdma_ucm_cmd_hdr h;
		union {
			struct rdma_ucm_create_id create;
			struct rdma_ucm_bind bind;
			struct rdma_ucm_destroy_id destroy;
			struct rdma_ucm_migrate_id migrate;
			struct rdma_ucm_set_option opt;
		} u;
	} msg;

	memset(&msg, 0, sizeof(msg));
	msg.h.cmd = cmd;
	msg.h.in = (__u16)in_len;
	msg.h.out = (__u16)out_len;
	memcpy(&msg.u, in, in_len);
	if (REAL(write)(fd, &msg, sizeof(msg.h) + in_len) < 0)
		return -errno;
	return 0;
}

/* The device's number, from the first open (a chroot or a mount namespace
 * later may hide the path; the files opened before stay its files). */
static dev_t ucma_rdev;

/* A file of rdma_cm's, at 3 or above (never where the program's stdio
 * would be, were 0-2 closed), or -errno. */
static int ucma_open(void)
{
	int fd = open(UCMA_DEV, O_RDWR | O_CLOEXEC | O_NOCTTY), d;
	struct stat sb;

	if (fd < 0)
		return -errno;
	if (fd < 3) {
		d = REAL(fcntl)(fd, F_DUPFD_CLOEXEC, 3);
		REAL(close)(fd);
		if (d < 0)
			return -errno;
		fd = d;
	}
	if (fstat(fd, &sb) == 0)
		__atomic_store_n(&ucma_rdev, sb.st_rdev, __ATOMIC_RELAXED);
	return fd;
}

/* Is fd still the reservation's file (or a fork's copy of it)? */
static bool twin_file(int fd)
{
	struct stat sb;

	return fstat(fd, &sb) == 0 && S_ISCHR(sb.st_mode) &&
	       REAL(fcntl)(fd, F_GETSIG) == TWIN_MARK &&
	       sb.st_rdev == __atomic_load_n(&ucma_rdev, __ATOMIC_RELAXED);
}

/* SO_REUSEADDR on the id in fd: 0 or -errno.  rdma_cm takes it on an id
 * that is bound and not listening (rdma_set_reuseaddr). */
static int ucma_reuse(int fd, uint32_t id)
{
	int one = 1;
	struct rdma_ucm_set_option o = {.optval = (uintptr_t)&one,
					.id = id,
					.level = RDMA_OPTION_ID,
					.optname = RDMA_OPTION_ID_REUSEADDR,
					.optlen = sizeof(one)};

	return ucma_cmd(fd, RDMA_USER_CM_CMD_SET_OPTION, &o, sizeof(o), 0);
}

int sg_twin_reserve(const struct sockaddr *addr, socklen_t len, bool reuse,
		    int *fdp, uint32_t *idp)
{
	struct rdma_ucm_create_id_resp cresp = {0};
	struct rdma_ucm_create_id c = {
	    .response = (uintptr_t)&cresp, .ps = RDMA_PS_TCP, .qp_type = 2};
	struct rdma_ucm_bind b = {0};
	int fd, r;

	if (len > sizeof(b.addr) ||
	    (addr->sa_family != AF_INET && addr->sa_family != AF_INET6))
		return -EAFNOSUPPORT;
	fd = ucma_open();
	if (fd < 0)
		return fd;
	r = REAL(fcntl)(fd, F_SETSIG, TWIN_MARK) < 0 ? -errno : 0;
	if (r == 0)
		r = ucma_cmd(fd, RDMA_USER_CM_CMD_CREATE_ID, &c, sizeof(c),
			     sizeof(cresp));
	if (r == 0 && reuse)
		r = ucma_reuse(fd, cresp.id);
	if (r == 0) {
		b.id = cresp.id;
		b.addr_size = addr->sa_family == AF_INET
				  ? sizeof(struct sockaddr_in)
				  : sizeof(struct sockaddr_in6);
		memcpy(&b.addr, addr, b.addr_size);
		r = ucma_cmd(fd, RDMA_USER_CM_CMD_BIND, &b, sizeof(b), 0);
	}
	if (r < 0) {
		REAL(close)(fd); /* the id, if made, goes with its file */
		return r;
	}
	*fdp = fd;
	*idp = cresp.id;
	return 0;
}

int sg_twin_let_go(int mine, uint32_t id)
{
	struct rdma_ucm_destroy_id_resp dresp = {0};
	struct rdma_ucm_destroy_id d = {.response = (uintptr_t)&dresp,
					.id = id};
	int r;

	r = ucma_cmd(mine, RDMA_USER_CM_CMD_DESTROY_ID, &d, sizeof(d),
		     sizeof(dresp));
	/* and a destroy that failed: the id goes with this file, which no
	 * other process has (close-on-exec; a fork just now may have
	 * copied it, then it goes with that child's copy) */
	REAL(close)(mine);
	return r;
}

int sg_twin_hold(int fd, uint32_t id)
{
	struct rdma_ucm_migrate_resp mresp = {0};
	struct rdma_ucm_migrate_id m = {
	    .response = (uintptr_t)&mresp, .id = id, .fd = (uint32_t)fd};
	int mine, r;

	if (!twin_file(fd))
		return -ENOENT; /* closed under us: the id went with it */
	mine = ucma_open();
	if (mine < 0)
		return mine;
	/* an error (EINVAL: the id is in another file now): a sibling
	 * took it first, or it went with its file */
	r = ucma_cmd(mine, RDMA_USER_CM_CMD_MIGRATE_ID, &m, sizeof(m),
		     sizeof(mresp));
	if (r < 0) {
		REAL(close)(mine);
		return r;
	}
	r = ucma_reuse(mine, id);
	if (r < 0) {
		/* a kernel that refuses it: the door's bind would fail on
		 * the id, so it goes first, as before this was done */
		shim_dbg("RDMA port reservation: SO_REUSEADDR refused (%s): "
			 "let go of before the RDMA listener's bind",
			 strerror(-r));
		(void)sg_twin_let_go(mine, id);
		return r;
	}
	return mine;
}

void sg_twin_close(int fd)
{
	/* the program may have closed the number (a daemon closing every
	 * fd) and something else have it now */
	if (twin_file(fd))
		REAL(close)(fd);
}

int sg_twin_pass(int fd)
{
	int fl;

	if (!twin_file(fd))
		return -ENOENT;
	/* FD_CLOEXEC is this fd's, not the file's: the parent's copy stays
	 * close-on-exec */
	fl = REAL(fcntl)(fd, F_GETFD);
	if (fl < 0 || REAL(fcntl)(fd, F_SETFD, fl & ~FD_CLOEXEC) < 0)
		return -errno;
	return 0;
}

int sg_twin_take(int fd)
{
	struct stat sb, dev;

	/* a number named in the environment: only rdma_cm's file with the
	 * mark is a reservation's (a fork's copy of it) */
	if (fstat(fd, &sb) < 0)
		return -errno;
	if (!S_ISCHR(sb.st_mode) || stat(UCMA_DEV, &dev) < 0 ||
	    !S_ISCHR(dev.st_mode) || sb.st_rdev != dev.st_rdev ||
	    REAL(fcntl)(fd, F_GETSIG) != TWIN_MARK)
		return -EBADF;
	if (REAL(fcntl)(fd, F_SETFD, FD_CLOEXEC) < 0)
		return -errno;
	__atomic_store_n(&ucma_rdev, sb.st_rdev, __ATOMIC_RELAXED);
	return 0;
}
