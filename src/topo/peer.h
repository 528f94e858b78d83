/* The peer table: what a rank knows of every rank after the bootstrap
 * all-gather (each fills its own entry, tutti_topo_fill_self). Topology is
 * derived from it (topo/topo.h); transports, executors and the one-sided
 * service read it to reach and name their peers. */
#ifndef TUTTI_TOPO_PEER_H
#define TUTTI_TOPO_PEER_H

#include <stdint.h>

/* What a rank knows of every rank after the bootstrap all-gather. */
struct tutti_peer_info {
  int rank;
  int cuda_dev;
  int32_t pid;
  uint32_t pad;
  uint64_t host_hash; /* hostname + boot id + network namespace */
  char hostname[64];
  unsigned char gpu_uuid[16]; /* cuda_dev's UUID (all zero without one): the GPU itself */
};

#endif
