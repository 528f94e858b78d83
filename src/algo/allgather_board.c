/* Board all-gather: in rounds of one board slot, every rank of one host
 * copies a piece of its block into its own slot, then copies every peer's
 * slot into its output. Each block is copied into shared memory once and
 * out of it by every reader, all in user space: with N ranks a rank copies
 * N + 1 pieces per round where the single-copy Pull makes the kernel copy
 * N - 1 (process_vm_readv, ~1.3x a memcpy's time) and copies its own, and
 * the piece a reader copies was just written, still in the shared cache.
 * Tune's choice from 16 MB, and at every size when ranks outnumber cores
 * (bench/RESULTS.md, "Large messages, 512 KB–256 MB"). Rounds follow each other on every rank:
 * round k + 2 reuses the slots of round k, posted only after every rank finished reading them
 * (exec/board.c says why). */
#include "algo/builders.h"
#include "algo/steps.h"

TUTTI_BUILDER(allgather_board) {
  const size_t bb = a->count * a->elem_size;
  /* Pieces of whole elements, as large as a slot holds. */
  const size_t piece = a->board_bytes / a->elem_size * a->elem_size;
  if (piece == 0) {
    return ncclInvalidUsage; /* no board: tune picks another */
  }
  const enum tutti_buf src = a->in_place ? TUTTI_BUF_RECV : TUTTI_BUF_SEND;
  const size_t src_base = a->in_place ? (size_t)a->rank * bb : 0;
  const int flags = a->in_place ? 0 : TUTTI_STEP_OWN;
  NCCLCHECK(tutti_sched_lane(s));
  int round = 0;
  for (size_t off = 0; off < bb; off += piece, round++) {
    const size_t len = bb - off < piece ? bb - off : piece;
    NCCLCHECK(tutti_add_board(s, TUTTI_STEP_BOARD_POST, 0, src, src_base + off, TUTTI_BUF_NONE, 0,
                              len, round));
    NCCLCHECK(tutti_add_board(s, TUTTI_STEP_BOARD_GATHER, flags, TUTTI_BUF_NONE, 0, TUTTI_BUF_RECV,
                              off, len, round));
  }
  return ncclSuccess;
}
