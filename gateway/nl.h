/* nl.h: rtnetlink requests (libmnl) for sandbox plumbing: veths, addresses, routes. */
#ifndef SLUICE_NL_H
#define SLUICE_NL_H

#include <stddef.h>
#include <stdint.h>

/*
 * One NETLINK_ROUTE socket. It acts on the network namespace it was opened
 * in, whatever namespace the calling thread moves to later: to work in a
 * namespace, enter it, open, and go back.
 *
 * Every request waits for the kernel's answer. Functions returning int
 * return 0, or -1 with errno set (the kernel's error for a refused request)
 * and err filled with what was asked, strerror and, when the kernel gave
 * one, its extended-ACK message. Addresses are IPv4 in network order.
 * Not thread-safe: one user at a time per handle.
 */
struct gw_nl;

/* Opens a socket in the calling thread's network namespace. Returns NULL
 * with errno and err on failure; the caller frees it with gw_nl_close. */
struct gw_nl *gw_nl_open(char *err, size_t errlen);
void gw_nl_close(struct gw_nl *nl);

/*
 * Creates a veth pair: name here, peer in the namespace peer_nsfd (an open
 * /run/netns/X or /proc/PID/ns/net; -1 for this one), both down. Fails
 * with EEXIST if either name is taken on its side.
 */
int gw_nl_veth_add(struct gw_nl *nl, const char *name, const char *peer,
    int peer_nsfd, char *err, size_t errlen);

/* The ifindex of the interface called name; -1 with ENODEV if none is. */
int gw_nl_link_index(struct gw_nl *nl, const char *name, uint32_t *ifindex,
    char *err, size_t errlen);

/*
 * The ifindex, in the namespace peer_nsfd, of the other end of the veth
 * called name here. -1 with ENODEV if no interface is called name, with
 * ENOENT if it is not a veth or its other end is not in peer_nsfd.
 */
int gw_nl_veth_peer(struct gw_nl *nl, const char *name, int peer_nsfd,
    uint32_t *peer, char *err, size_t errlen);

/* The interface's Ethernet address, into mac; -1 with ENODEV if there is
 * no such interface, EPROTO if it has no 6-byte address. */
#define GW_NL_MAC_LEN	6
int gw_nl_link_mac(struct gw_nl *nl, uint32_t ifindex,
    uint8_t mac[GW_NL_MAC_LEN], char *err, size_t errlen);

int gw_nl_link_up(struct gw_nl *nl, uint32_t ifindex, char *err,
    size_t errlen);
/* The interface's alias (IFLA_IFALIAS, `ip link show` prints it). */
int gw_nl_link_set_alias(struct gw_nl *nl, uint32_t ifindex,
    const char *alias, char *err, size_t errlen);
/* Deletes the interface; a veth's peer goes with it. */
int gw_nl_link_del(struct gw_nl *nl, uint32_t ifindex, char *err,
    size_t errlen);
/* Puts the interface in a group (IFLA_GROUP; 0 is the default one). */
int gw_nl_link_set_group(struct gw_nl *nl, uint32_t ifindex, uint32_t group,
    char *err, size_t errlen);
/* Deletes every interface of the group in the socket's namespace in one
 * go: the kernel waits for its RCU grace periods once for all of them.
 * ENODEV: the group has none. */
int gw_nl_group_del(struct gw_nl *nl, uint32_t group, char *err,
    size_t errlen);

/* Adds addr/plen to the interface; EEXIST if it is there already. */
int gw_nl_addr_add(struct gw_nl *nl, uint32_t ifindex, uint32_t addr,
    unsigned plen, char *err, size_t errlen);

/* Sets a permanent neighbour entry (ARP) on the interface: addr is at
 * mac. Replaces an entry for addr there. */
int gw_nl_neigh_set(struct gw_nl *nl, uint32_t ifindex, uint32_t addr,
    const uint8_t mac[GW_NL_MAC_LEN], char *err, size_t errlen);

/* Adds a default route via gateway out of the interface (the main table);
 * EEXIST if there is one. */
int gw_nl_route_add_default(struct gw_nl *nl, uint32_t ifindex,
    uint32_t gateway, char *err, size_t errlen);

/*
 * Calls cb once per interface of the namespace with its index and name
 * (valid during the call only). cb must not use nl. Returns 0 when all
 * were seen; -1 with errno (EAGAIN if the kernel reports that the list
 * changed while it was read) and err otherwise.
 */
typedef void (*gw_nl_link_cb)(uint32_t ifindex, const char *name, void *arg);
int gw_nl_links(struct gw_nl *nl, gw_nl_link_cb cb, void *arg, char *err,
    size_t errlen);

/*
 * Calls cb once per IPv4 address of the namespace (its local address, in
 * network order), as gw_nl_links; and, with broadcast, once more for each
 * broadcast address the kernel makes local with it: the one given
 * (IFA_BROADCAST) and, below a /31, the subnet's all-ones and all-zeros
 * addresses (the kernel routes the first, and older kernels the second,
 * as broadcast: delivered to the namespace's own sockets). Addresses may
 * come more than once.
 */
typedef void (*gw_nl_addr_cb)(uint32_t addr, void *arg);
int gw_nl_addrs(struct gw_nl *nl, bool broadcast, gw_nl_addr_cb cb,
    void *arg, char *err, size_t errlen);

#endif
