/* What is here: this host's identity and the grouping of ranks by host. */
#ifndef TUTTI_TOPO_TOPO_H
#define TUTTI_TOPO_TOPO_H

#include <stdint.h>

#include "nccl.h"
#include "transport/transport.h"

/* Identity of this host as ranks see it: hostname, boot id and network
 * namespace (ranks in different network namespaces count as different hosts,
 * which is how the multi-host tests run on one machine). TUTTI_HOSTID, or
 * else NCCL_HOSTID (as NCCL), overrides it. */
uint64_t tutti_topo_host_hash(void);

/* Fills this rank's entry of the all-gathered table. */
void tutti_topo_fill_self(struct tutti_peer_info* info, int rank, int cuda_dev);

/* Groups the ranks by host (topo/ranks.c): host_of[r] is the index of rank
 * r's host, hosts numbered in the order of their first rank; *nhosts the
 * number of hosts, *max_local the most ranks on one of them. host_of has
 * n entries. Every rank alone on its host is *nhosts == n. */
void tutti_topo_hosts(const struct tutti_peer_info* peers, int n, int32_t* host_of, int* nhosts,
                      int* max_local);

/* How many ranks share rank `rank`'s host (itself included). */
int tutti_topo_local_count(const int32_t* host_of, int n, int rank);

/* Whether every rank is a thread of rank `rank`'s process (then they read
 * each other's buffers in place). */
int tutti_topo_one_process(const struct tutti_peer_info* peers, int n, int rank);

/* Logs, with NCCL_DEBUG=INFO, the hosts, the ring and the transport of each pair. */
void tutti_topo_log(const struct tutti_transport_comm* tc);

#endif
