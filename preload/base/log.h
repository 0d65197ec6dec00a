/* SPDX-License-Identifier: MIT */
#ifndef SHIM_LOG_H
#define SHIM_LOG_H

#include "compiler.h"
#include "config.h"

extern int shim_log_level;

/* Start logging to fd 2 (before the configuration is read: its errors are
 * logged), then apply the configuration's level and file. */
void shim_log_start(void);
void shim_log_open(const struct shim_config *c);
void shim_log_write(int level, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/* Level test first, so a disabled message costs one compare. */
#define shim_log(level, ...)                                                   \
	do {                                                                   \
		if (unlikely((level) <= shim_log_level))                       \
			shim_log_write((level), __VA_ARGS__);                  \
	} while (0)
#define shim_err(...) shim_log(SHIM_LOG_ERROR, __VA_ARGS__)
#define shim_warn(...) shim_log(SHIM_LOG_WARN, __VA_ARGS__)
#define shim_info(...) shim_log(SHIM_LOG_INFO, __VA_ARGS__)
#define shim_dbg(...) shim_log(SHIM_LOG_DEBUG, __VA_ARGS__)

/*
 * The program changed fd (closed it or dup'ed onto it).  If that fd is where
 * the log goes, stop writing there: after close(2) the number may be reused
 * by a socket, and the log must never land in the program's data.
 */
void shim_log_fd_changed(int fd, bool closed);

#endif
