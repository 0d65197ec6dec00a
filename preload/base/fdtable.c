/* SPDX-License-Identifier: MIT */
#include "fdtable.h"
#include "log.h"
#include "startup.h"

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <uthash.h>

/* 4 Mi fds = 32 MiB of address space, reserved but not committed. */
#define SHIM_FDTAB_MAX (1u << 22)

struct shim_sock **shim_fdtab;
unsigned int shim_fdtab_cap;

static size_t fdtab_bytes;
static unsigned int fdtab_span; /* 1 + highest fd ever stored */

struct overflow_ent {
	int fd;
	struct shim_sock *s;
	UT_hash_handle hh;
};

static struct overflow_ent *overflow;
static pthread_mutex_t overflow_lock = PTHREAD_MUTEX_INITIALIZER;

void shim_fdtable_fork_child(void)
{
	pthread_mutex_init(&overflow_lock, NULL);
}

int shim_fdtable_init(unsigned int cap_limit)
{
	struct rlimit rl;
	rlim_t want = 65536;
	void *p;

	if (getrlimit(RLIMIT_NOFILE, &rl) == 0) {
		want = rl.rlim_max;
		if (want == RLIM_INFINITY || want < rl.rlim_cur)
			want = rl.rlim_cur;
	}
	if (want > cap_limit)
		want = cap_limit;
	if (want < 1024)
		want = 1024;

	fdtab_bytes = (size_t)want * sizeof(*shim_fdtab);
	p = mmap(NULL, fdtab_bytes, PROT_READ | PROT_WRITE,
		 MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	if (p == MAP_FAILED)
		return -errno;
	shim_fdtab = p;
	/* Publish the capacity last: it is what opens the fast path. */
	__atomic_store_n(&shim_fdtab_cap, (unsigned int)want, __ATOMIC_RELEASE);
	return 0;
}

void shim_fdtable_fini(void)
{
	struct overflow_ent *e, *tmp;

	__atomic_store_n(&shim_fdtab_cap, 0, __ATOMIC_RELEASE);
	if (shim_fdtab)
		munmap(shim_fdtab, fdtab_bytes);
	shim_fdtab = NULL;
	fdtab_span = 0;
	pthread_mutex_lock(&overflow_lock);
	HASH_ITER (hh, overflow, e, tmp) {
		HASH_DEL(overflow, e);
		free(e);
	}
	pthread_mutex_unlock(&overflow_lock);
}

static struct shim_sock *overflow_get(int fd)
{
	struct overflow_ent *e;
	struct shim_sock *s = NULL;

	pthread_mutex_lock(&overflow_lock);
	HASH_FIND_INT(overflow, &fd, e);
	if (e)
		s = e->s;
	pthread_mutex_unlock(&overflow_lock);
	return s;
}

struct shim_sock *shim_fd_get_slow(int fd)
{
	if (fd < 0)
		return NULL;
	if (__atomic_load_n(&shim_init_state, __ATOMIC_ACQUIRE) != 2) {
		shim_init_slow();
		if ((unsigned int)fd < shim_fdtab_cap)
			return __atomic_load_n(&shim_fdtab[fd],
					       __ATOMIC_ACQUIRE);
		if (!shim_fdtab_cap)
			return NULL; /* init is still running on this thread */
	}
	return overflow_get(fd);
}

static struct shim_sock *overflow_xchg(int fd, struct shim_sock *s)
{
	struct overflow_ent *e;
	struct shim_sock *old = NULL;

	pthread_mutex_lock(&overflow_lock);
	HASH_FIND_INT(overflow, &fd, e);
	if (e) {
		old = e->s;
		if (s) {
			e->s = s;
		} else {
			HASH_DEL(overflow, e);
			free(e);
		}
	} else if (s) {
		e = calloc(1, sizeof(*e));
		if (e) {
			e->fd = fd;
			e->s = s;
			HASH_ADD_INT(overflow, fd, e);
		}
	}
	pthread_mutex_unlock(&overflow_lock);
	return old;
}

struct shim_sock *shim_fd_xchg(int fd, struct shim_sock *s)
{
	if (fd < 0)
		return NULL;
	if (s) {
		unsigned int span =
		    __atomic_load_n(&fdtab_span, __ATOMIC_RELAXED);

		while ((unsigned int)fd >= span &&
		       !__atomic_compare_exchange_n(
			   &fdtab_span, &span, (unsigned int)fd + 1, false,
			   __ATOMIC_RELAXED, __ATOMIC_RELAXED))
			;
	}
	if ((unsigned int)fd < shim_fdtab_cap)
		return __atomic_exchange_n(&shim_fdtab[fd], s,
					   __ATOMIC_ACQ_REL);
	return overflow_xchg(fd, s);
}

unsigned int shim_fdtable_span(void)
{
	return __atomic_load_n(&fdtab_span, __ATOMIC_RELAXED);
}

/* The first start-up step: every room after it keeps state per fd. */
static void fdtable_start(void)
{
	if (shim_fdtable_init(SHIM_FDTAB_MAX))
		shim_err("cannot map the fd table; running on TCP only");
}

SHIM_STARTUP(FDTABLE, .start = fdtable_start, .child = shim_fdtable_fork_child);
