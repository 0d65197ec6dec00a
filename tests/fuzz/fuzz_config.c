/* SPDX-License-Identifier: MIT */
/*
 * libFuzzer target for the ERDMA_SHIM_* parser (preload/base/config.c): the
 * input is split at newlines into environment entries (the first bytes pick
 * a variable name so the fuzzer reaches every parser quickly), parsed, and
 * every reported line is checked: exactly one line, printable, bounded.
 * Then the rules are exercised with addresses derived from the input.
 */
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config.h"

struct shim_config shim_cfg;

static const char *const names[] = {
	"ERDMA_SHIM", "ERDMA_SHIM_LOG", "ERDMA_SHIM_LOG_FILE", "ERDMA_SHIM_ALLOW",
	"ERDMA_SHIM_DENY", "ERDMA_SHIM_PORT_OFFSET",
	"ERDMA_SHIM_CONNECT_TIMEOUT_MS", "ERDMA_SHIM_NEGCACHE_TTL_S",
	"ERDMA_SHIM_SNDBUF", "ERDMA_SHIM_RCVBUF", "ERDMA_SHIM_SQ_SIZE",
	"ERDMA_SHIM_RQ_SIZE", "ERDMA_SHIM_INLINE", "ERDMA_SHIM_POLL_US",
	"ERDMA_SHIM_STATS", "ERDMA_SHIM_STATS_SHM", "ERDMA_SHIM_ACCEPT_FROM",
	"ERDMA_SHIM_X",
};

static void check_line(const char *msg, bool invalid, void *arg)
{
	size_t n = strlen(msg);

	(void)invalid;
	(void)arg;
	if (n == 0 || n > 400)
		abort();
	for (size_t i = 0; i < n; i++)
		if ((unsigned char)msg[i] < 0x20 || (unsigned char)msg[i] == 0x7f)
			abort(); /* a value must never split or forge a line */
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char *env[9] = { 0 };
	struct shim_config c;
	size_t pos = 0;
	int n = 0;

	while (pos < size && n < 8) {
		size_t end = pos;
		char *e;

		while (end < size && data[end] != '\n')
			end++;
		if (end > pos) {
			const char *name = names[data[pos] % (sizeof(names) / sizeof(names[0]))];
			size_t vlen = end - pos - 1;

			e = malloc(strlen(name) + 1 + vlen + 1);
			sprintf(e, "%s=", name);
			memcpy(e + strlen(e), data + pos + 1, vlen);
			e[strlen(name) + 1 + vlen] = '\0'; /* NULs cut the value short */
			env[n++] = e;
		}
		pos = end + 1;
	}
	shim_config_defaults(&c);
	shim_config_parse(&c, env, check_line, NULL);
	if (c.invalid && c.mode != SHIM_MODE_OFF)
		abort(); /* a bad value must mean passthrough */
	if (c.n_allow > SHIM_MAX_RULES || c.n_deny > SHIM_MAX_RULES ||
	    c.n_accept_from > SHIM_MAX_RULES)
		abort();
	for (size_t i = 0; i + 18 <= size; i += 18) {
		uint16_t port = (uint16_t)(data[i] | data[i + 1] << 8);

		shim_config_allows(&c, AF_INET, data + i + 2, port);
		shim_config_allows(&c, AF_INET6, data + i + 2, port);
		shim_config_accepts(&c, AF_INET, data + i + 2, port);
		shim_config_accepts(&c, AF_INET6, data + i + 2, port);
		shim_config_accepts(&c, 27 /* AF_IB */, data + i + 2, port);
	}
	for (int i = 0; i < n; i++)
		free(env[i]);
	return 0;
}
