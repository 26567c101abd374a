/* siphash.c: SipHash-2-4, the keyed hash of the resolver's tables and of
 * the flow table (nfq/flows.c). */
#include <stdint.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <sys/random.h>

#include "dns/dns.h"

/*
 * Names and addresses in the bindings and the answer cache come from
 * sandboxes and from zones an attacker may run: with an unkeyed hash
 * they could be chosen to land in one chain and make every lookup walk
 * it. SipHash with a key from the kernel's generator makes the buckets
 * unpredictable (Aumasson and Bernstein, 2012).
 */

static uint64_t
rotl64(uint64_t x, unsigned r)
{
	return x << r | x >> (64 - r);
}

static void
sip_round(uint64_t v[4])
{
	v[0] += v[1]; v[1] = rotl64(v[1], 13); v[1] ^= v[0];
	v[0] = rotl64(v[0], 32);
	v[2] += v[3]; v[3] = rotl64(v[3], 16); v[3] ^= v[2];
	v[0] += v[3]; v[3] = rotl64(v[3], 21); v[3] ^= v[0];
	v[2] += v[1]; v[1] = rotl64(v[1], 17); v[1] ^= v[2];
	v[2] = rotl64(v[2], 32);
}

/* The 8 bytes at p as a little-endian number, whatever the host's order. */
static uint64_t
le64(const uint8_t *p, size_t n)
{
	uint64_t m = 0;

	while (n-- > 0)
		m = m << 8 | p[n];
	return m;
}

static void
sip_init(uint64_t v[4], const struct dns_hash_key *k)
{
	v[0] = k->k0 ^ 0x736f6d6570736575ULL;
	v[1] = k->k1 ^ 0x646f72616e646f6dULL;
	v[2] = k->k0 ^ 0x6c7967656e657261ULL;
	v[3] = k->k1 ^ 0x7465646279746573ULL;
}

/* One 8-byte block, two compression rounds. */
static void
sip_block(uint64_t v[4], uint64_t m)
{
	v[3] ^= m;
	sip_round(v);
	sip_round(v);
	v[0] ^= m;
}

static uint64_t
sip_final(uint64_t v[4])
{
	v[2] ^= 0xff;
	sip_round(v);
	sip_round(v);
	sip_round(v);
	sip_round(v);
	return v[0] ^ v[1] ^ v[2] ^ v[3];
}

uint64_t
dns_siphash(const struct dns_hash_key *k, const void *data, size_t len)
{
	const uint8_t *p = data;
	uint64_t v[4];
	size_t left = len;

	sip_init(v, k);
	for (; left >= 8; p += 8, left -= 8)
		sip_block(v, le64(p, 8));
	/* the tail, with the length's low byte on top */
	sip_block(v, le64(p, left) | (uint64_t)(len & 0xff) << 56);
	return sip_final(v);
}

uint64_t
dns_siphash_words(const struct dns_hash_key *k, const uint64_t *w, size_t n)
{
	uint64_t v[4];
	size_t i;

	sip_init(v, k);
	for (i = 0; i < n; i++)
		sip_block(v, w[i]);
	/* no tail: the last block is the length alone */
	sip_block(v, (uint64_t)((n * 8) & 0xff) << 56);
	return sip_final(v);
}

void
dns_hash_key_new(struct dns_hash_key *k, const void *salt)
{
	uint64_t r[2];
	struct timespec ts;

	if (getrandom(r, sizeof(r), GRND_NONBLOCK) == (ssize_t)sizeof(r)) {
		k->k0 = r[0];
		k->k1 = r[1];
		return;
	}
	/* Only before the kernel's pool is initialised: weaker, but still
	 * nothing a sandbox can read. */
	clock_gettime(CLOCK_MONOTONIC, &ts);
	k->k0 = (uint64_t)ts.tv_nsec << 32 ^ (uint64_t)ts.tv_sec ^
	    (uint64_t)(uintptr_t)salt;
	k->k1 = (uint64_t)getpid() * 0x9e3779b97f4a7c15ULL ^
	    (uint64_t)(uintptr_t)&ts;
}
