/* Where the ranks are: grouped by host, counted per host, in runs of
 * consecutive ranks per host, and whether they share one process. Pure
 * functions of the all-gathered peer table, so that every rank computes the
 * same answers; and the INFO lines that show them. */
#include <stdio.h>

#include "topo/topo.h"
#include "util/log.h"

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

static int gcd(int a, int b) {
  while (b != 0) {
    int t = a % b;
    a = b;
    b = t;
  }
  return a;
}

int tutti_topo_host_run(const int32_t* host_of, int n) {
  int size = 0, run = 1;
  for (int r = 1; r <= n; r++) {
    if (r < n && host_of[r] == host_of[r - 1]) {
      run++;
      continue;
    }
    size = gcd(size, run);
    run = 1;
  }
  return size > 0 ? size : 1;
}

void tutti_topo_log(const struct tutti_peer_info* peers, int n, int rank, const char* next_via) {
  if (!TUTTI_LOG_ENABLED(TUTTI_LOG_INFO)) {
    return;
  }
  int nhosts = 0;
  for (int r = 0; r < n; r++) {
    int first = 1;
    for (int q = 0; q < r && first; q++) {
      first = peers[q].host_hash != peers[r].host_hash;
    }
    nhosts += first;
  }
  INFO(TUTTI_INIT, "rank %d of %d on host %s (pid %d); %d host(s)", rank, n, peers[rank].hostname,
       (int)peers[rank].pid, nhosts);
  if (rank == 0) {
    char line[512];
    int o = snprintf(line, sizeof line, "Channel 00 :");
    for (int r = 0; r < n && o < (int)sizeof line - 16; r++) {
      o += snprintf(line + o, sizeof line - (size_t)o, " %d", r);
    }
    INFO(TUTTI_INIT | TUTTI_GRAPH, "%s", line);
  }
  int next = (rank + 1) % n;
  if (next_via != NULL) {
    INFO(TUTTI_INIT | TUTTI_P2P, "Channel 00 : %d[%d] -> %d[%d] via %s", rank, peers[rank].cuda_dev,
         next, peers[next].cuda_dev, next_via);
  }
}
