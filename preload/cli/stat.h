/* SPDX-License-Identifier: MIT */
/* erdma-shim stat (stat.c), and what the CLI and the fuzzer share with it. */
#ifndef ERDMA_CLI_STAT_H
#define ERDMA_CLI_STAT_H

#include "stats.h"

#include <stdbool.h>
#include <stdio.h>

/* erdma-shim stat [PID] [--json | --prometheus], the arguments checked
 * (erdma-shim.c): one is the PID or 0 for all; 0, or 1 when PID was given
 * and not found. */
int cmd_stat(int one, bool json, bool prom);

/* A JSON string literal of s (ASCII, every byte escaped as needed). */
void json_str(FILE *f, const char *s);

/*
 * Check a private copy of a table, len bytes, before anything is printed
 * from it: size, magic, version, slot count and size, pid, rdma state and
 * the header's strings' NUL.  A slot with a bad path, fd, address family or
 * unterminated reason is freed in the copy (left out).  0, or -1 and *why.
 */
int erdma_stat_check(struct erdma_stat_hdr *h, size_t len, const char **why);

/* Print a checked table to stdout: fmt 0 text, 1 JSON, 2 Prometheus.  As a
 * table of another pid namespace: no /proc look-ups (the fuzzer's entry). */
void erdma_stat_print(struct erdma_stat_hdr *h, int fmt);

#endif
