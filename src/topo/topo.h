/* What is here: this host's identity, the ranks grouped by host and by
 * process, which ranks share a GPU. Interfaces: topo/ifaces.h. */
#ifndef TUTTI_TOPO_TOPO_H
#define TUTTI_TOPO_TOPO_H

#include <stdint.h>

#include "nccl.h"
#include "topo/peer.h"

/* Identity of this host as ranks see it (topo/identity.c): hostname, boot id and network
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

/* The length of the equal runs of consecutive ranks on one host: the gcd
 * of the lengths of the runs host_of[0 .. n) makes (runs of 4, 4 and 2
 * ranks give 2; of 2 and 3, 1). Where a host's GPUs map each other, NCCL's
 * load/store team (api/devcomm.c). */
int tutti_topo_host_run(const int32_t* host_of, int n);

/* Whether ranks p and q drive the same GPU (topo/gpus.c): their GPUs' UUIDs
 * match, whatever hosts NCCL_HOSTID makes of them or whichever ordinal
 * CUDA_VISIBLE_DEVICES gives the GPU; without a UUID on either side, one
 * process on one host with one device ordinal. */
int tutti_topo_same_gpu(const struct tutti_peer_info* peers, const int32_t* host_of, int p, int q);

/* The most ranks driving any one GPU (at least 1). */
int tutti_topo_gpu_sharers(const struct tutti_peer_info* peers, const int32_t* host_of, int n);

/* Logs, with NCCL_DEBUG=INFO, rank `rank`'s host, the number of hosts, the
 * ring, and how it reaches the next rank (`next_via`, the connection's name
 * as transports give it; NULL: none). */
void tutti_topo_log(const struct tutti_peer_info* peers, int n, int rank, const char* next_via);

#endif
