/* SPDX-License-Identifier: MIT */
/*
 * Shared by the transcript programs (kexact, kalive): one line per step,
 * "CASE: what -> result", flushed at once (a run killed by its watchdog
 * still shows how far it got), and errno values by name.
 */
#ifndef TESTS_TRANSCRIPT_H
#define TESTS_TRANSCRIPT_H

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

static inline void tx_vsay(const char *c, const char *fmt, va_list ap)
{
	printf("%s: ", c);
	vprintf(fmt, ap);
	putchar('\n');
	fflush(stdout);
}

/* errno's name ("ETIMEDOUT"), as the transcripts compare them. */
static inline const char *en(int e)
{
	const char *s = strerrorname_np(e);

	return s ? s : "E?";
}

#endif
