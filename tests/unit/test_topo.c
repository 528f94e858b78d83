/* Topology from the peer table: ranks grouped by host (numbered in the
 * order of each host's first rank), ranks per host, and one process. */
#include <string.h>

#include "harness.h"
#include "topo/topo.h"

#define MAXN 16

/* A table of n ranks: rank r on host hosts[r] in process pids[r]. */
static void table(struct tutti_peer_info* peers, int n, const uint64_t* hosts,
                  const int32_t* pids) {
  memset(peers, 0, (size_t)n * sizeof *peers);
  for (int r = 0; r < n; r++) {
    peers[r].rank = r;
    peers[r].host_hash = hosts[r];
    peers[r].pid = pids[r];
  }
}

static void test_hosts(void) {
  struct tutti_peer_info peers[MAXN];
  int32_t host_of[MAXN];
  int nhosts, max_local;
  /* Hosts interleaved: b a b c a b, numbered by first appearance. */
  const uint64_t hosts[] = {0xb, 0xa, 0xb, 0xc, 0xa, 0xb};
  const int32_t pids[] = {10, 11, 12, 13, 14, 15};
  table(peers, 6, hosts, pids);
  tutti_topo_hosts(peers, 6, host_of, &nhosts, &max_local);
  const int32_t want[] = {0, 1, 0, 2, 1, 0};
  for (int r = 0; r < 6; r++) {
    CHECK(host_of[r] == want[r], "rank %d on host %d, expected %d", r, host_of[r], want[r]);
  }
  CHECK(nhosts == 3 && max_local == 3, "3 hosts, at most 3 ranks on one: %d, %d", nhosts,
        max_local);
  CHECK(tutti_topo_local_count(host_of, 6, 0) == 3 && tutti_topo_local_count(host_of, 6, 1) == 2 &&
            tutti_topo_local_count(host_of, 6, 3) == 1,
        "ranks per host");
  CHECK(!tutti_topo_one_process(peers, 6, 0), "six processes");

  /* Every rank alone on its host. */
  const uint64_t alone[] = {1, 2, 3, 4};
  table(peers, 4, alone, pids);
  tutti_topo_hosts(peers, 4, host_of, &nhosts, &max_local);
  CHECK(nhosts == 4 && max_local == 1, "every rank alone: %d hosts, max %d", nhosts, max_local);
  CHECK(tutti_topo_local_count(host_of, 4, 2) == 1, "alone");

  /* One host, one process: threads. */
  const uint64_t one[] = {7, 7, 7, 7};
  const int32_t same[] = {42, 42, 42, 42};
  table(peers, 4, one, same);
  tutti_topo_hosts(peers, 4, host_of, &nhosts, &max_local);
  CHECK(nhosts == 1 && max_local == 4, "one host: %d hosts, max %d", nhosts, max_local);
  CHECK(tutti_topo_one_process(peers, 4, 1), "threads of one process");
  /* The same pid on another host is another process (containers number
   * their processes from 1 each). */
  const uint64_t two[] = {7, 7, 8, 8};
  table(peers, 4, two, same);
  CHECK(!tutti_topo_one_process(peers, 4, 0), "same pid, two hosts");
  const int32_t mixed[] = {42, 42, 43, 42};
  table(peers, 4, one, mixed);
  CHECK(!tutti_topo_one_process(peers, 4, 3), "one rank in another process");

  /* One rank. */
  table(peers, 1, one, same);
  tutti_topo_hosts(peers, 1, host_of, &nhosts, &max_local);
  CHECK(nhosts == 1 && max_local == 1 && host_of[0] == 0, "one rank");
  CHECK(tutti_topo_one_process(peers, 1, 0) && tutti_topo_local_count(host_of, 1, 0) == 1,
        "one rank, one process");
}

int main(void) {
  test_hosts();
  return test_summary("topo");
}
