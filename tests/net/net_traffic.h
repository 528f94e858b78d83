/* Connections and messages over a struct tutti_net, for the loader's tests
 * (tests/unit/test_net_load.c): a pair of comms made through the
 * connect / accept retry loop, messages posted all at once and checked byte
 * for byte. Failures are CHECKs (harness.h). */
#ifndef TUTTI_TEST_NET_TRAFFIC_H
#define TUTTI_TEST_NET_TRAFFIC_H

#include <stddef.h>

#include "net/net.h"

struct net_pair {
  void* listen;
  void* send; /* connect's */
  void* recv; /* accept's */
};

/* Listens on dev, then connects and accepts until both comms are up. */
void net_pair_open(struct tutti_net* n, int dev, struct net_pair* p);
void net_pair_close(struct tutti_net* n, struct net_pair* p);

/* Tests req until done; test's last result (*sizes: what it reported). */
ncclResult_t net_wait(struct tutti_net* n, void* req, int* sizes);

/* count messages (at most TUTTI_NET_MAX_REQUESTS) of the given sizes each
 * way, every receive then every send posted before any is tested; checks
 * the bytes and the sizes test reports. */
void net_round_trip(struct tutti_net* n, const struct net_pair* ab, const struct net_pair* ba,
                    const size_t* sizes, int count);

/* A grouped receive of three buffers filled by three sends with their
 * tags, posted in another order. */
void net_grouped(struct tutti_net* n, const struct net_pair* p);

#endif
