/* SPDX-License-Identifier: MIT */
#include "log.h"
#include "syms.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

int shim_log_level = SHIM_LOG_WARN;

/*
 * Where the log goes: fd 2 by default, or a file we opened ourselves with
 * O_CLOEXEC.  Either way, a line is written only while that fd is still the
 * file it was when logging started (same device and inode): fd 2 may have
 * been closed where the shim cannot see it (fclose(stderr) closes it inside
 * libc, a socket-activated child starts without it) and then reused by a
 * socket or a file of the program, which must never receive our text.
 */
static int log_fd = 2;
static bool log_enabled = true;
static dev_t log_dev;
static ino_t log_ino;
static char log_path[SHIM_PATH_MAX];

static void remember_target(void)
{
	struct stat sb;

	log_enabled = fstat(log_fd, &sb) == 0;
	if (log_enabled) {
		log_dev = sb.st_dev;
		log_ino = sb.st_ino;
	}
}

static bool target_unchanged(void)
{
	struct stat sb;

	return fstat(log_fd, &sb) == 0 && sb.st_dev == log_dev &&
	       sb.st_ino == log_ino;
}

static void expand_path(const char *tmpl, char *out, size_t len)
{
	size_t o = 0;

	for (const char *p = tmpl; *p && o + 1 < len; p++) {
		if (p[0] == '%' && p[1] == 'p') {
			int n = snprintf(out + o, len - o, "%d", (int)getpid());

			if (n < 0 || (size_t)n >= len - o)
				break;
			o += (size_t)n;
			p++;
		} else {
			out[o++] = *p;
		}
	}
	out[o] = '\0';
}

void shim_log_start(void)
{
	remember_target(); /* fd 2, as it is at start-up */
}

/*
 * ERDMA_SHIM_LOG_FILE is opened the way a root process must open a path in a
 * directory other users write (the man page's /tmp/shim.%p.log): no
 * symlink followed (O_NOFOLLOW), no FIFO or device waited on (O_NONBLOCK,
 * then a regular file only), and an existing file only if it is our euid's
 * -- else another user could have made it first and read every peer the
 * debug log names, or point it at a file of their choice.  Made 0600.
 * Refused: one line on stderr, and the log stays there.  -errno or the fd.
 */
static int log_file_open(const char *path)
{
	struct stat sb;
	int fd = open(path,
		      O_WRONLY | O_CREAT | O_APPEND | O_NOFOLLOW | O_NONBLOCK |
			  O_NOCTTY | O_CLOEXEC,
		      0600);

	if (fd < 0) {
		int e = errno;

		/* O_CREAT|O_NOFOLLOW on a symlink in a sticky directory is
		 * EACCES on some kernels: say what it is */
		return lstat(path, &sb) == 0 && S_ISLNK(sb.st_mode) ? -ELOOP
								    : -e;
	}
	/* one link only: another user's hard link to a file of ours (say
	 * /etc/shadow, with fs.protected_hardlinks=0) is not a log file */
	if (fstat(fd, &sb) || !S_ISREG(sb.st_mode) || sb.st_uid != geteuid() ||
	    sb.st_nlink != 1) {
		REAL(close)(fd); /* resolved before shim_log_open runs */
		return -EPERM;
	}
	return fd;
}

void shim_log_open(const struct shim_config *c)
{
	int fd;

	shim_log_level = c->log_level;
	if (!c->log_file[0])
		return;
	expand_path(c->log_file, log_path, sizeof(log_path));
	fd = log_file_open(log_path);
	if (fd < 0) {
		shim_log_write(SHIM_LOG_WARN,
			       "ERDMA_SHIM_LOG_FILE: cannot open '%s' (%s); "
			       "logging to stderr",
			       log_path,
			       fd == -EPERM || fd == -ENXIO
				   ? "not a regular file of this user"
			       : fd == -ELOOP ? "a symbolic link"
					      : strerror(-fd));
		return;
	}
	log_fd = fd;
	remember_target();
}

void shim_log_fd_changed(int fd, bool closed)
{
	if (fd != log_fd)
		return;
	if (fd == 2 && !closed)
		remember_target(); /* the program's new stderr: fair game */
	else
		log_enabled = false;
}

void shim_log_write(int level, const char *fmt, ...)
{
	static const char *const tag[] = {"error", "warn", "info", "debug"};
	char buf[1024];
	int saved = errno, n, m;
	va_list ap;

	if (!log_enabled || log_fd < 0 || !target_unchanged())
		return;
	n = snprintf(buf, sizeof(buf), "liberdma_shim[%d] %s: ", (int)getpid(),
		     tag[level & 3]);
	va_start(ap, fmt);
	m = vsnprintf(buf + n, sizeof(buf) - (size_t)n - 1, fmt, ap);
	va_end(ap);
	if (m < 0)
		m = 0;
	n += m;
	if (n > (int)sizeof(buf) - 2)
		n = (int)sizeof(buf) - 2;
	buf[n++] = '\n';
	/* The real write: logging must never recurse into the shim. */
	if (REAL(write))
		(void)REAL(write)(log_fd, buf, (size_t)n);
	errno = saved;
}
