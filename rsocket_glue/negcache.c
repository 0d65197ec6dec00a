/* SPDX-License-Identifier: MIT */
/*
 * Peers known to have no RDMA listener.  The first connect to such a peer
 * pays for the rsocket probe; later ones within the TTL go straight to TCP.
 * Sparse keys (address, port): uthash under one mutex — this is the connect
 * slow path, never the data path.
 */
#include "glue.h"
#include "shim.h"

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
	time_t added;
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

static time_t mono_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec;
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
		if (mono_s() - e->added < (time_t)ttl_s) {
			hit = true;
		} else {
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
	if (e)
		e->added = mono_s();
	pthread_mutex_unlock(&neg_lock);
}

/* The peer turned out to be down altogether (its TCP connect failed too):
 * it is not "TCP only", and a restarted peer must get its RDMA back. */
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
