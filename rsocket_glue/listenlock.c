/* SPDX-License-Identifier: MIT */
/*
 * The listen lock (rsock.c's sg_listen): rdma_cm lets two ids bind one port
 * with SO_REUSEADDR (which listeners need: a restarted server's old ids
 * linger after its exit), and then refuses rdma_listen to each of them, as
 * each sees the other bound: the workers of a prefork server opening their
 * port's door at once (see preload/socket.c) all ended on TCP.  A lock
 * around bind and listen lets the first through; the others find it
 * listening.
 *
 * It is the user's, not the host's: the workers that share a port share an
 * euid, and a file in /dev/shm, which every user writes, must be one no
 * other user can make first, hold, or point elsewhere.  So
 * /dev/shm/erdma-shim.listen.EUID.lock, made O_CREAT|O_EXCL|O_NOFOLLOW 0600
 * and used only while it is a regular file of our euid; and never waited
 * for without bound (LOCK_NB, retried for SG_LISTEN_LOCK_MS): a sibling
 * stuck holding it (its bind can wait on a remote client's handshake) must
 * not stall our listen().  Without the lock we go on as if it were ours:
 * what it prevents costs at worst a listener on TCP only, said in one line.
 */
#include "glue.h"
#include "log.h"
#include "syms.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define LOCK_FMT "/dev/shm/erdma-shim.listen.%u.lock"

/* Open (or make) our lock file; the fd or -errno. */
static int lock_open(const char *path)
{
	const int ro =
	    O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY | O_CLOEXEC;
	struct stat sb;
	int fd = open(path, ro);

	if (fd < 0 && errno == ENOENT) {
		fd = open(path, ro | O_CREAT | O_EXCL, 0600);
		if (fd < 0 && errno == EEXIST) /* a sibling's, just made */
			fd = open(path, ro);
	}
	if (fd < 0)
		return -errno;
	if (fstat(fd, &sb) || !S_ISREG(sb.st_mode) || sb.st_uid != geteuid()) {
		REAL(close)(fd);
		return -EPERM;
	}
	return fd;
}

/*
 * A fork while the lock is held copies its fd, and a flock belongs to the
 * open file: the child's copy would hold it after our close, until the
 * child exits (our siblings then wait their 1 s and go on without it).  So
 * *held names the fd from its open on (a fork child closes its copy, rsock.c
 * sg_fork_child), and sg_listen_unlock lets go with LOCK_UN, which frees it
 * whatever copies a fork made, before the close.
 */
int sg_listen_lock(int *held)
{
	struct timespec ms = {0, 1000000};
	char path[64];
	int fd, i;

	snprintf(path, sizeof(path), LOCK_FMT, (unsigned int)geteuid());
	fd = lock_open(path);
	if (fd >= 0)
		__atomic_store_n(held, fd, __ATOMIC_RELEASE);
	for (i = 0; fd >= 0 && flock(fd, LOCK_EX | LOCK_NB); i++) {
		if ((errno != EWOULDBLOCK && errno != EINTR) ||
		    i >= SG_LISTEN_LOCK_MS) {
			int e = errno == EWOULDBLOCK ? -ETIMEDOUT : -errno;

			__atomic_store_n(held, -1, __ATOMIC_RELEASE);
			REAL(close)(fd);
			fd = e;
		} else {
			nanosleep(&ms, NULL);
		}
	}
	if (fd < 0)
		shim_info("listen: going on without the listen lock %s (%s): "
			  "two processes opening an RDMA listener on one port "
			  "at once may leave it on TCP",
			  path,
			  fd == -EPERM	     ? "not a regular file of this user"
			  : fd == -ELOOP     ? "a symbolic link"
			  : fd == -ETIMEDOUT ? "held for over 1 s"
					     : strerror(-fd));
	return fd;
}

void sg_listen_unlock(int fd, int *held)
{
	flock(fd, LOCK_UN);
	__atomic_store_n(held, -1, __ATOMIC_RELEASE);
	REAL(close)(fd);
}
