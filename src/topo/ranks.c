/* Where the ranks are: grouped by host, counted per host, and whether they
 * share one process. Pure functions of the all-gathered peer table, so
 * that every rank computes the same answers. */
#include "topo/topo.h"

void tutti_topo_hosts(const struct tutti_peer_info* peers, int n, int32_t* host_of, int* nhosts,
                      int* max_local) {
  *nhosts = 0;
  *max_local = 0;
  for (int r = 0; r < n; r++) {
    int h = -1, count = 0;
    for (int q = 0; q < r && h < 0; q++) {
      h = peers[q].host_hash == peers[r].host_hash ? host_of[q] : -1;
    }
    host_of[r] = h >= 0 ? h : (*nhosts)++;
    for (int q = 0; q <= r; q++) {
      count += host_of[q] == host_of[r];
    }
    *max_local = count > *max_local ? count : *max_local;
  }
}

int tutti_topo_local_count(const int32_t* host_of, int n, int rank) {
  int local = 0;
  for (int r = 0; r < n; r++) {
    local += host_of[r] == host_of[rank];
  }
  return local;
}

int tutti_topo_one_process(const struct tutti_peer_info* peers, int n, int rank) {
  for (int r = 0; r < n; r++) {
    if (peers[r].pid != peers[rank].pid || peers[r].host_hash != peers[rank].host_hash) {
      return 0;
    }
  }
  return 1;
}
