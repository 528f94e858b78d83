/* The board: one host's shared area where each rank posts into its own
 * slot and every rank reads all slots in place. The shared-memory
 * transport makes it (transport/shm.c) when it joins a host's ranks; the
 * host executor runs its steps (exec/board.c). */
#ifndef TUTTI_TRANSPORT_BOARD_H
#define TUTTI_TRANSPORT_BOARD_H

#include <stddef.h>
#include <stdint.h>

#include "call/call.h"

/* The board: the ranks of one host post small contributions side by side
 * and read each other's in place, a header per rank instead of a queue per
 * pair (exec/board.c runs its steps). Two generations of one slot per rank:
 * slot (g, r) is a header (struct tutti_board_header, TUTTI_BOARD_HEADER
 * bytes) then `slot_bytes` of data, (g & 1) * nranks + r slots from base. */
struct tutti_board {
  char* base;        /* NULL: no board */
  size_t slot_bytes; /* data bytes of one slot */
  int nranks;        /* slots of one generation: the host's ranks */
};
#define TUTTI_BOARD_HEADER 64

struct tutti_board_header {
  uint64_t gen;   /* the generation the slot holds (0: none yet) */
  uint64_t bytes; /* its size, to catch ranks that called different counts */
  /* The poster's call: read with its data by every rank, so board
   * collectives compare every rank's call at no cost (exec/board.c). */
  struct tutti_call call;
};

/* Rank `rank`'s slot of generation `gen`. */
static inline struct tutti_board_header* tutti_board_slot(const struct tutti_board* b, uint64_t gen,
                                                          int rank) {
  const size_t stride = TUTTI_BOARD_HEADER + b->slot_bytes;
  return (struct tutti_board_header*)(b->base +
                                      ((size_t)(gen & 1) * (size_t)b->nranks + (size_t)rank) *
                                          stride);
}

static inline void* tutti_board_data(struct tutti_board_header* h) {
  return (char*)h + TUTTI_BOARD_HEADER;
}

/* The generation a slot holds; its data, size and call may be read once it
 * is the one awaited (acquire). */
static inline uint64_t tutti_board_posted(const struct tutti_board_header* h) {
  return __atomic_load_n(&h->gen, __ATOMIC_ACQUIRE);
}

/* Publishes generation `gen` in a slot whose data, size and call are
 * written. Sequentially consistent, as the loads of the peers' doorbells'
 * `sleeping` that follow need: a peer about to sleep either sees this
 * generation or is woken (tutti_doorbell_ring). */
static inline void tutti_board_post(struct tutti_board_header* h, uint64_t gen) {
  __atomic_store_n(&h->gen, gen, __ATOMIC_SEQ_CST);
}

#endif
