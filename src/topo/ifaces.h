/* Which network interface the job uses, chosen as NCCL does:
 * NCCL_SOCKET_IFNAME (prefixes, ^ to exclude, = for exact names) and
 * NCCL_SOCKET_FAMILY (AF_INET / AF_INET6). */
#ifndef TUTTI_TOPO_IFACES_H
#define TUTTI_TOPO_IFACES_H

#include <net/if.h>

#include "nccl.h"
#include "util/socket.h"

struct tutti_iface {
  char name[IF_NAMESIZE];
  union tutti_socket_addr addr; /* port 0 */
  int loopback;
};

/* Pure rule: does interface `name` pass `spec` (an NCCL_SOCKET_IFNAME
 * value)? With spec NULL or "", the default rule: not loopback-named and
 * not a container / bridge decoy (docker, veth, virbr, br-, lo). */
int tutti_iface_match(const char* spec, const char* name);

/* NCCL_SOCKET_IFNAME's value (environment or config file), NULL when unset. */
const char* tutti_param_socket_ifname(void);

/* NCCL_SOCKET_FAMILY as AF_UNSPEC, AF_INET or AF_INET6. */
int tutti_iface_family(void);

/* Every up interface address that passes the rules, best first (IPv4
 * before IPv6, loopback last; loopback only as a last resort when
 * NCCL_SOCKET_IFNAME is unset). Writes up to `max`; returns how many
 * exist (which may exceed max), or -1 if the interfaces cannot be read. */
int tutti_iface_list(struct tutti_iface* out, int max);

/* The interface the job uses: the first of tutti_iface_list. */
ncclResult_t tutti_iface_pick(struct tutti_iface* out);

#endif
