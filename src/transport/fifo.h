/* A single-producer single-consumer queue of slots in memory both sides can
 * reach (a shared segment, or the heap for ranks simulated in one process),
 * and the connection objects that drive it. */
#ifndef TUTTI_TRANSPORT_FIFO_H
#define TUTTI_TRANSPORT_FIFO_H

#include <stddef.h>
#include <stdint.h>

#include "transport/transport.h"

#define TUTTI_FIFO_MAX_SLOTS 64
#define TUTTI_FIFO_HEADER 4096 /* head, tail and sizes; slots start page-aligned */

struct tutti_fifo {
  uint64_t head; /* slots posted: written by the sender only */
  char pad0[56];
  uint64_t tail; /* slots freed: written by the receiver only */
  char pad1[56];
  uint32_t sizes[TUTTI_FIFO_MAX_SLOTS];
};

struct tutti_fifo_conn {
  struct tutti_conn base;
  struct tutti_fifo* fifo;
  char* data;
  uint32_t nslots;
  uint64_t pos;                /* sender: slots posted; receiver: slots freed */
  uint64_t seen;               /* sender: last tail read; receiver: last head read */
  struct tutti_doorbell* wake; /* the other side's doorbell (may be NULL) */
};

/* Bytes a queue of `nslots` slots of `slot_bytes` takes, header included. */
size_t tutti_fifo_bytes(uint32_t nslots, size_t slot_bytes);

/* Splits NCCL_BUFFSIZE-style `buffsize` into a slot count and slot size. */
void tutti_fifo_geometry(size_t buffsize, uint32_t* nslots, size_t* slot_bytes);

/* Initializes the two ends over the queue at `mem` (already zeroed). Either
 * end may be NULL when only one side lives in this process. */
void tutti_fifo_conn_init(struct tutti_fifo_conn* send, struct tutti_fifo_conn* recv, void* mem,
                          uint32_t nslots, size_t slot_bytes, int send_peer, int recv_peer,
                          struct tutti_doorbell* recv_bell, struct tutti_doorbell* send_bell);

#endif
