/* Single copy between ranks of one host: a rank reads a peer's memory
 * directly, with a plain copy when the peer is a thread of this process and
 * with cross-memory attach (process_vm_readv) when it is another process. */
#ifndef TUTTI_TRANSPORT_CMA_H
#define TUTTI_TRANSPORT_CMA_H

#include <stddef.h>
#include <stdint.h>

#include "transport/transport.h"

/* What an exposing rank posts in one queue slot: where the bytes are. */
struct tutti_cma_desc {
  uint64_t addr;  /* in the exposing process */
  uint64_t bytes; /* checked against what the reader expects */
  int32_t pid;    /* the exposing process */
  uint32_t magic; /* TUTTI_CMA_MAGIC: a slot of data here means mismatched calls */
};
#define TUTTI_CMA_MAGIC 0x70756c6cu /* "pull" */

/* Copies `bytes` at `addr` of process `pid` into `dst`. Returns 0 or an errno
 * (ESRCH: the process is gone; EPERM: the kernel does not allow it). */
int tutti_cma_read(int32_t pid, void* dst, uint64_t addr, size_t bytes);

/* Copies `bytes` at `src` into `addr` of process `pid`; 0 or an errno. */
int tutti_cma_write(int32_t pid, uint64_t addr, const void* src, size_t bytes);

/* The local address of `bytes` at `addr` of process `pid` when that is this
 * process (readable in place), else NULL. */
const void* tutti_cma_local(int32_t pid, uint64_t addr);

/* Whether this rank can read the memory of every rank of its host (through
 * the doorbells the shared-memory transport published): 1, or 0 with the
 * reason logged. Ranks must agree on the result before relying on it. */
int tutti_cma_probe(const struct tutti_transport_comm* tc);

#endif
