/* SPDX-License-Identifier: MIT */
/*
 * What the test programs (tests/progs) share: transcript lines, fatal
 * errors, errno names, one monotonic clock, the FNV-1a checksum and one
 * deterministic byte stream.  Plain C and libc only: the programs must not
 * know about the shim.  Linked into every program as testlib.o.
 */
#ifndef TESTS_TESTLIB_H
#define TESTS_TESTLIB_H

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

/*
 * One transcript line: prefix, the message, a newline, flushed at once (a
 * run killed by its watchdog still shows how far it got).  Lines from
 * several threads never interleave.
 */
void tl_vline(const char *prefix, const char *fmt, va_list ap);
void tl_line(const char *prefix, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
/* The transcripts' "TAG: message" line. */
void tl_vsay(const char *tag, const char *fmt, va_list ap);

/* Who the errors name: the program's name unless set ("rs_bulk server"). */
extern const char *tl_name;

/* "NAME: what: strerror(errno)" on stderr, exit 2. */
void tl_die(const char *what) __attribute__((noreturn));
/* "NAME: message" on stderr, exit 2. */
void tl_dief(const char *fmt, ...)
    __attribute__((noreturn, format(printf, 1, 2)));

/* Is fd open?  (Any answer but EBADF from the kernel.) */
int tl_fd_open(int fd);

/* errno's name, as the transcripts compare them ("0" for none). */
const char *tl_en(int e);

/* CLOCK_MONOTONIC. */
int64_t tl_now_us(void);
int64_t tl_now_ms(void);
/* Sleep ms whatever signals arrive (a behaviour under test, e.g. a peer
 * that answers late: never a way to order two threads). */
void tl_sleep_ms(int ms);

/* FNV-1a, 64 bits: h = tl_fnv(TL_FNV0, p, n), then chained. */
#define TL_FNV0 0xcbf29ce484222325ULL
uint64_t tl_fnv(uint64_t h, const void *p, size_t n);

/*
 * A deterministic byte stream (xorshift64, 8 bytes a step) from a seed.
 * The bytes do not depend on how the stream is cut: filling 3 then 5 bytes
 * gives what filling 8 does, so a receiver can check any chunking.
 */
struct tl_rng {
	uint64_t x;
	uint8_t buf[8];
	unsigned int left;
};
void tl_rng_seed(struct tl_rng *r, uint64_t seed);
uint64_t tl_rng_next(struct tl_rng *r);
void tl_rng_fill(struct tl_rng *r, void *p, size_t n);
/* n bytes of the stream of seed: a buffer's contents named by a number. */
void tl_pattern(void *p, size_t n, uint64_t seed);
/* FNV-1a of the first n bytes of seed's stream. */
uint64_t tl_stream_sum(uint64_t seed, uint64_t n);

#endif
