/* Which ranks drive the same GPU: pure functions of the all-gathered peer
 * table, so that every rank computes the same answers (the device
 * executor cuts its blocks by them). */
#include <string.h>

#include "topo/topo.h"

int tutti_topo_same_gpu(const struct tutti_peer_info* peers, const int32_t* host_of, int p, int q) {
  static const unsigned char none[16] = {0};
  const struct tutti_peer_info* a = &peers[p];
  const struct tutti_peer_info* b = &peers[q];
  if (memcmp(a->gpu_uuid, none, 16) != 0 && memcmp(b->gpu_uuid, none, 16) != 0) {
    return memcmp(a->gpu_uuid, b->gpu_uuid, 16) == 0;
  }
  return host_of[p] == host_of[q] && a->pid == b->pid && a->cuda_dev == b->cuda_dev;
}

int tutti_topo_gpu_sharers(const struct tutti_peer_info* peers, const int32_t* host_of, int n) {
  int most = 1;
  for (int p = 0; p < n; p++) {
    int k = 0;
    for (int q = p; q < n; q++) {
      k += tutti_topo_same_gpu(peers, host_of, p, q);
    }
    most = k > most ? k : most;
  }
  return most;
}
