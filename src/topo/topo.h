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

/* Logs, with NCCL_DEBUG=INFO, the hosts, the ring and the transport of each pair. */
void tutti_topo_log(const struct tutti_transport_comm* tc);

#endif
