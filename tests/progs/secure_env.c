/* SPDX-License-Identifier: MIT */
/*
 * secure_env: reports whether it runs in glibc's secure mode (AT_SECURE)
 * and whether liberdma_shim is mapped, then makes one socket so the shim's
 * entry points run.  The Makefile links it against the shim itself
 * (DT_NEEDED, absolute rpath): for a setuid/setgid program the loader
 * ignores LD_PRELOAD paths, and tests/host/81-setuid.sh needs the shim
 * loaded into exactly such a program.
 */
#define _GNU_SOURCE
#include <stdio.h>
#include <string.h>
#include <sys/auxv.h>
#include <sys/socket.h>
#include <unistd.h>

static int shim_mapped(void)
{
	char line[512];
	int found = 0;
	FILE *f = fopen("/proc/self/maps", "r");

	if (!f)
		return -1;
	while (fgets(line, sizeof(line), f))
		if (strstr(line, "liberdma_shim"))
			found = 1;
	fclose(f);
	return found;
}

int main(void)
{
	int fd = socket(AF_INET, SOCK_STREAM, 0);

	printf("secure=%lu shim=%d socket=%s\n", getauxval(AT_SECURE),
	       shim_mapped(), fd >= 0 ? "ok" : "failed");
	if (fd >= 0)
		close(fd);
	return fd >= 0 ? 0 : 1;
}
