/* The peer table's entry: where one rank is, as it tells every other rank
 * in the all-gather at init (topo/identity.c fills a rank's own). */
#ifndef TUTTI_TOPO_PEER_H
#define TUTTI_TOPO_PEER_H

#include <stdint.h>

struct tutti_peer_info {
  int rank;
  int cuda_dev;
  int32_t pid;
  uint32_t pad;
  uint64_t host_hash; /* hostname + boot id + network namespace */
  char hostname[64];
  unsigned char gpu_uuid[16]; /* cuda_dev's UUID (all zero without one): the GPU itself */
  /* Where its process's RAS listener takes peers' queries (ras/ras.h),
   * packed as util/socket.h packs addresses (24 bytes; all zero: none). */
  unsigned char ras[24];
};

#endif
