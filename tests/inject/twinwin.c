/* SPDX-License-Identifier: MIT */
/*
 * twinwin.so: stops a listener's RDMA door, as it opens, at the moment its
 * port's reservation is destroyed, for a test (tests/rdma/57-ports.sh, window).
 * Preloaded after the shim, it sees the shim's raw rdma_cm commands (the
 * shim writes them through its dlsym(RTLD_NEXT) of write): the door's
 * opener takes the reservation over into a file of its own
 * (RDMA_USER_CM_CMD_MIGRATE_ID) and destroys it there (DESTROY_ID)
 * (rsocket_glue/twin.c).  After the first such DESTROY_ID in the process
 * has returned, it writes "paused" to ERDMA_INJECT_TWIN_DIR/paused and waits
 * (no bound: the test ends it) until a line can be read from the FIFO
 * ERDMA_INJECT_TWIN_DIR/go.  Nothing happens when the variable is unset.
 * The shim has no code for it.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <fcntl.h>
#include <limits.h>
#include <rdma/rdma_user_cm.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static ssize_t (*next_write)(int, const void *, size_t);
static int migrated = -1; /* the fd a MIGRATE_ID went to */
static int done;

static int is_ucma(int fd)
{
	struct stat sb, dev;

	return !fstat(fd, &sb) && S_ISCHR(sb.st_mode) &&
	       !stat("/dev/infiniband/rdma_cm", &dev) &&
	       sb.st_rdev == dev.st_rdev;
}

static void pause_here(const char *dir)
{
	char path[PATH_MAX], c;
	int fd;

	snprintf(path, sizeof(path), "%s/paused", dir);
	fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	if (fd >= 0) {
		(void)!next_write(fd, "paused\n", 7);
		close(fd);
	}
	snprintf(path, sizeof(path), "%s/go", dir);
	fd = open(path, O_RDONLY | O_CLOEXEC); /* until the test writes */
	if (fd >= 0) {
		while (read(fd, &c, 1) < 0)
			;
		close(fd);
	}
}

ssize_t write(int fd, const void *buf, size_t len)
{
	const struct rdma_ucm_cmd_hdr *h = buf;
	const char *dir = getenv("ERDMA_INJECT_TWIN_DIR");
	ssize_t r;

	if (!next_write)
		next_write = (ssize_t(*)(int, const void *, size_t))dlsym(
		    RTLD_NEXT, "write");
	if (!dir || done || len < sizeof(*h))
		return next_write(fd, buf, len);
	if (h->cmd == RDMA_USER_CM_CMD_MIGRATE_ID &&
	    len == sizeof(*h) + sizeof(struct rdma_ucm_migrate_id) &&
	    is_ucma(fd)) {
		r = next_write(fd, buf, len);
		if (r > 0)
			migrated = fd;
		return r;
	}
	if (h->cmd != RDMA_USER_CM_CMD_DESTROY_ID || fd != migrated ||
	    len != sizeof(*h) + sizeof(struct rdma_ucm_destroy_id))
		return next_write(fd, buf, len);
	r = next_write(fd, buf, len);
	done = 1;
	pause_here(dir);
	return r;
}
