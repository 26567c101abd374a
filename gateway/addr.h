/* addr.h: IPv4 address text, shared by sluiced, the sluice CLI and sluice-cni. */
#ifndef SLUICE_ADDR_H
#define SLUICE_ADDR_H

#include <stdbool.h>
#include <stdint.h>

/*
 * Splits "a.b.c.d" or "a.b.c.d/len" (len: 0..32, in digits only) into the
 * address, in network order, and the prefix length, -1 when s has none.
 * False, with neither written, for anything else. The policy's CIDR
 * entries have their own parser (policy.c), which says what is wrong.
 */
bool gw_addr_split(const char *s, uint32_t *addr, int *plen);

#endif
