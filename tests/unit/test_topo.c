/* Topology from the peer table: ranks grouped by host (numbered in the
 * order of each host's first rank), ranks per host, runs of ranks per host,
 * one process, and which ranks drive the same GPU. */
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

/* Runs of consecutive ranks on one host, as host_of numbers them. */
static void test_host_run(void) {
  const int32_t even[] = {0, 0, 0, 0, 1, 1, 1, 1, 2, 2}; /* 4, 4, 2 */
  const int32_t odd[] = {0, 0, 1, 1, 1};                 /* 2, 3 */
  const int32_t back[] = {0, 0, 1, 1, 0, 0};             /* a host again later */
  const int32_t alone[] = {0, 1, 2};                     /* every rank alone */
  const int32_t one[] = {0, 0, 0, 0, 0, 0};
  CHECK(tutti_topo_host_run(even, 10) == 2, "runs 4 4 2: %d", tutti_topo_host_run(even, 10));
  CHECK(tutti_topo_host_run(odd, 5) == 1, "runs 2 3: %d", tutti_topo_host_run(odd, 5));
  CHECK(tutti_topo_host_run(back, 6) == 2, "runs 2 2 2: %d", tutti_topo_host_run(back, 6));
  CHECK(tutti_topo_host_run(alone, 3) == 1, "alone: %d", tutti_topo_host_run(alone, 3));
  CHECK(tutti_topo_host_run(one, 6) == 6, "one host: %d", tutti_topo_host_run(one, 6));
  CHECK(tutti_topo_host_run(one, 1) == 1, "one rank: %d", tutti_topo_host_run(one, 1));
}

/* The same GPU by UUID (across hosts and device ordinals), or without one by
 * host, process and ordinal; the most ranks on one GPU. */
static void test_same_gpu(void) {
  struct tutti_peer_info peers[6];
  const uint64_t hosts[] = {1, 2, 1, 1, 1, 1};
  const int32_t pids[] = {10, 11, 12, 13, 13, 13};
  const int32_t host_of[] = {0, 1, 0, 0, 0, 0};
  table(peers, 6, hosts, pids);
  /* Ranks 0 and 1: one GPU under two host identities (NCCL_HOSTID) and two
   * ordinals (CUDA_VISIBLE_DEVICES); rank 2 another GPU. */
  memset(peers[0].gpu_uuid, 0xa1, 16);
  memset(peers[1].gpu_uuid, 0xa1, 16);
  memset(peers[2].gpu_uuid, 0xb2, 16);
  peers[0].cuda_dev = 0;
  peers[1].cuda_dev = 3;
  peers[2].cuda_dev = 0;
  /* Ranks 3, 4 and 5: one process without UUIDs; 3 and 4 on ordinal 1. */
  peers[3].cuda_dev = 1;
  peers[4].cuda_dev = 1;
  peers[5].cuda_dev = 2;
  CHECK(tutti_topo_same_gpu(peers, host_of, 0, 1), "one UUID on two hosts");
  CHECK(!tutti_topo_same_gpu(peers, host_of, 0, 2), "two UUIDs on one host, one ordinal");
  CHECK(tutti_topo_same_gpu(peers, host_of, 3, 4), "no UUID: one process, one ordinal");
  CHECK(!tutti_topo_same_gpu(peers, host_of, 4, 5), "no UUID: two ordinals");
  CHECK(!tutti_topo_same_gpu(peers, host_of, 2, 3), "a UUID on one side only: two processes");
  CHECK(tutti_topo_gpu_sharers(peers, host_of, 6) == 2, "two on one GPU: %d",
        tutti_topo_gpu_sharers(peers, host_of, 6));
  peers[5].cuda_dev = 1;
  CHECK(tutti_topo_gpu_sharers(peers, host_of, 6) == 3, "three on one GPU: %d",
        tutti_topo_gpu_sharers(peers, host_of, 6));
  /* Without UUIDs the same pid on another host is another process. */
  const int32_t apart[] = {0, 1, 0, 0, 2, 0};
  CHECK(!tutti_topo_same_gpu(peers, apart, 3, 4), "no UUID: another host");
  CHECK(tutti_topo_gpu_sharers(peers, apart, 1) == 1, "one rank");
}

int main(void) {
  test_hosts();
  test_host_run();
  test_same_gpu();
  return test_summary("topo");
}
