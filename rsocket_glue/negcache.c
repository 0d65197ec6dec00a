/* SPDX-License-Identifier: MIT */
/*
 * Peers known to have no RDMA listener.  The first connect to such a peer
 * pays for the rsocket probe; later ones within the TTL go straight to TCP.
 * The TTL grows with each refusal in a row: 1 s, 2 s, 4 s ... up to
 * ERDMA_SHIM_NEGCACHE_TTL_S.  A shimmed server's RDMA listener comes a
 * moment after its TCP one (at its first wait: preload/socket.c), and a
 * client that connects in between must not stay on TCP for the whole TTL;
 * a TCP-only peer costs a handful of extra probes before the full TTL.
 * Sparse keys (address, port): uthash under one mutex — this is the connect
 * slow path, never the data path.
 */
#include "glue.h"

#include <netinet/in.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <uthash.h>

struct neg_key {
	uint8_t addr[16];
	uint16_t port;
	uint16_t family;
};

struct neg_ent {
	struct neg_key key;
	int64_t added_ms;
	unsigned int strikes; /* refusals in a row */
	UT_hash_handle hh;
};

static struct neg_ent *neg;
static pthread_mutex_t neg_lock = PTHREAD_MUTEX_INITIALIZER;
static unsigned int neg_count;
#define NEG_MAX 4096 /* bound memory: an address scan must not grow us */

static bool make_key(const struct sockaddr *sa, struct neg_key *k)
{
	memset(k, 0, sizeof(*k));
	k->family = sa->sa_family;
	if (sa->sa_family == AF_INET) {
		const struct sockaddr_in *in = (const void *)sa;

		memcpy(k->addr, &in->sin_addr, 4);
		k->port = in->sin_port;
		return true;
	}
	if (sa->sa_family == AF_INET6) {
		const struct sockaddr_in6 *in6 = (const void *)sa;

		memcpy(k->addr, &in6->sin6_addr, 16);
		k->port = in6->sin6_port;
		return true;
	}
	return false;
}

/* This entry's TTL in ms: 1 s doubled per strike, at most ttl_s. */
static int64_t ttl_ms(const struct neg_ent *e, unsigned int ttl_s)
{
	int64_t t = 1000LL << (e->strikes > 16 ? 15 : e->strikes - 1);

	return t < ttl_s * 1000LL ? t : ttl_s * 1000LL;
}

bool sg_negcache_hit(const struct sockaddr *dst, unsigned int ttl_s)
{
	struct neg_key k;
	struct neg_ent *e;
	bool hit = false;

	if (!ttl_s || !make_key(dst, &k))
		return false;
	pthread_mutex_lock(&neg_lock);
	HASH_FIND(hh, neg, &k, sizeof(k), e);
	if (e) {
		int64_t age = shim_now_ms() - e->added_ms;

		if (age < ttl_ms(e, ttl_s)) {
			hit = true;
		} else if (age > 2 * ttl_s * 1000LL) {
			/* quiet for long: the strikes start over */
			HASH_DEL(neg, e);
			free(e);
			neg_count--;
		}
	}
	pthread_mutex_unlock(&neg_lock);
	return hit;
}

void sg_negcache_add(const struct sockaddr *dst)
{
	struct neg_key k;
	struct neg_ent *e;

	if (!make_key(dst, &k))
		return;
	pthread_mutex_lock(&neg_lock);
	HASH_FIND(hh, neg, &k, sizeof(k), e);
	if (!e && neg_count < NEG_MAX) {
		e = calloc(1, sizeof(*e));
		if (e) {
			e->key = k;
			HASH_ADD(hh, neg, key, sizeof(k), e);
			neg_count++;
		}
	}
	if (e) {
		e->added_ms = shim_now_ms();
		e->strikes += e->strikes < 32;
	}
	pthread_mutex_unlock(&neg_lock);
}

/* The peer turned out to be down altogether (its TCP connect failed too):
 * it is not "TCP only", and a restarted peer must get its RDMA back. */
void sg_negcache_fork_child(void)
{
	pthread_mutex_init(&neg_lock, NULL);
}

void sg_negcache_del(const struct sockaddr *dst)
{
	struct neg_key k;
	struct neg_ent *e;

	if (!make_key(dst, &k))
		return;
	pthread_mutex_lock(&neg_lock);
	HASH_FIND(hh, neg, &k, sizeof(k), e);
	if (e) {
		HASH_DEL(neg, e);
		free(e);
		neg_count--;
	}
	pthread_mutex_unlock(&neg_lock);
}
