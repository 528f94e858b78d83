/* Single copy between ranks of one host: a rank reads a peer's memory
 * directly (struct tutti_peer_mem_ops), with a plain copy when the peer is a
 * thread of this process and with cross-memory attach (process_vm_readv)
 * when it is another process. */
#ifndef TUTTI_TRANSPORT_CMA_H
#define TUTTI_TRANSPORT_CMA_H

#include <stdint.h>

#include "transport/transport.h"

/* How a connection to a peer running in process `peer_pid` of this host
 * reaches its memory. */
const struct tutti_peer_mem_ops* tutti_cma_ops(int32_t peer_pid);

/* Whether this rank can read the memory of every rank of its host (through
 * the doorbells the shared-memory transport published): 1, or 0 with the
 * reason logged. Ranks must agree on the result before relying on it. */
int tutti_cma_probe(const struct tutti_transport_comm* tc);

#endif
