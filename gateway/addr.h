/* addr.h: IPv4 address text and a string copy (sluiced, sluice, sluice-cni). */
#ifndef SLUICE_ADDR_H
#define SLUICE_ADDR_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/*
 * Splits "a.b.c.d" or "a.b.c.d/len" (len: 0..32, in digits only) into the
 * address, in network order, and the prefix length, -1 when s has none.
 * False, with neither written, for anything else. The policy's CIDR
 * entries have their own parser (policy.c), which says what is wrong.
 */
bool gw_addr_split(const char *s, uint32_t *addr, int *plen);

/*
 * a (network order) as "a.b.c.d" in buf, which holds at least
 * INET_ADDRSTRLEN (16) bytes; returns buf. inet_ntop's text without its
 * sprintf: every row of the log has two of these.
 */
char *gw_addr_str(uint32_t a, char *buf);

/*
 * src (NULL: "") into dst of size bytes (> 0), cut to fit, always
 * terminated: snprintf(dst, size, "%s", src) without the format engine,
 * for the strings a connection's decision and row copy.
 */
void gw_strcopy(char *dst, size_t size, const char *src);

#endif
