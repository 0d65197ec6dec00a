/* SPDX-License-Identifier: MIT */
/*
 * libFuzzer target for erdma-shim stat's table reader (preload/cli/stat.c):
 * a table in /dev/shm can be written by any user, so every byte of it is
 * the attacker's.  The input is checked twice by erdma_stat_check: as a
 * whole table of its own length (the size check), and laid over a valid
 * table (header and first slots; the first byte's low bit keeps the header's
 * magic, version, slot count and size valid so the fuzzer gets past them).
 * A table that passes is printed in the three formats into a memfd, and
 * every output byte must be a newline or printable ASCII: a table's bytes
 * must never reach a terminal or a scraper raw.
 */
#define _GNU_SOURCE
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "stat.h"

static struct erdma_stat_hdr *tmpl;
static char *out;

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	int fd = memfd_create("fuzz_stat_out", 0);

	(void)argc;
	(void)argv;
	/* stdout into a memfd: the formats print there */
	if (fd < 0 || dup2(fd, 1) < 0)
		abort();
	close(fd);
	tmpl = calloc(1, ERDMA_STAT_SIZE);
	out = malloc(1 << 22);
	if (!tmpl || !out)
		abort();
	tmpl->magic = ERDMA_STAT_MAGIC;
	tmpl->version = ERDMA_STAT_VERSION;
	tmpl->pid = 42;
	tmpl->nslots = ERDMA_STAT_SLOTS;
	tmpl->slot_size = sizeof(struct erdma_stat_slot);
	tmpl->pidns = 4026531836u;
	strcpy(tmpl->shim_version, "0.1.0");
	strcpy(tmpl->mode, "auto");
	strcpy(tmpl->comm, "victim");
	for (int i = 0; i < 8; i++) {
		struct erdma_stat_slot *s = &tmpl->slot[i];

		s->path = 1 + i % 4;
		s->fd = 3 + i;
		s->local.family = AF_INET;
		s->peer.family = i & 1 ? AF_INET6 : AF_INET;
		s->peer.port = 80;
		strcpy(s->reason, "no RDMA device");
	}
	return 0;
}

static void print_checked(struct erdma_stat_hdr *h, int fmt)
{
	off_t n;

	fflush(stdout);
	if (ftruncate(1, 0) || lseek(1, 0, SEEK_SET))
		abort();
	erdma_stat_print(h, fmt);
	fflush(stdout);
	n = lseek(1, 0, SEEK_CUR);
	if (n < 0 || n > (1 << 22) || pread(1, out, (size_t)n, 0) != n)
		abort();
	for (off_t i = 0; i < n; i++) {
		unsigned char c = (unsigned char)out[i];

		if (c != '\n' && (c < 0x20 || c >= 0x7f)) {
			fprintf(stderr, "format %d: raw byte 0x%02x at %lld\n",
				fmt, c, (long long)i);
			abort();
		}
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct erdma_stat_hdr *h = malloc(size ? size : 1);
	const char *why;

	if (!h)
		return 0;
	memcpy(h, data, size);
	if (erdma_stat_check(h, size, &why) == 0)
		for (int fmt = 0; fmt < 3; fmt++)
			print_checked(h, fmt);
	free(h);

	h = malloc(ERDMA_STAT_SIZE);
	if (!h)
		return 0;
	memcpy(h, tmpl, ERDMA_STAT_SIZE);
	memcpy(h, data, size < ERDMA_STAT_SIZE ? size : ERDMA_STAT_SIZE);
	if (size && (data[0] & 1)) {
		h->magic = tmpl->magic;
		h->version = tmpl->version;
		h->nslots = tmpl->nslots;
		h->slot_size = tmpl->slot_size;
	}
	if (erdma_stat_check(h, ERDMA_STAT_SIZE, &why) == 0)
		for (int fmt = 0; fmt < 3; fmt++)
			print_checked(h, fmt);
	else if (!why)
		abort(); /* a refusal always says why */
	free(h);
	return 0;
}
