/* Board broadcast: in rounds of one board slot, the root copies a piece of
 * its buffer into its slot and every other rank copies it out; the other
 * ranks post empty pieces, which say "I have read the round before", so
 * that the root reuses a slot only once every rank has read it (the
 * board's rule, exec/board.c). The root copies the data once, every peer
 * once, all in user space and while the piece is in the shared cache,
 * where Pull's peers copy it through the kernel (process_vm_readv) and the
 * chain copies it twice per hop. */
#include "algo/builders.h"
#include "algo/steps.h"

TUTTI_BUILDER(broadcast_board) {
  const int r = a->rank, root = a->root;
  const size_t bytes = a->count * a->elem_size;
  const size_t piece = a->board_bytes / a->elem_size * a->elem_size;
  if (piece == 0) {
    return ncclInvalidUsage; /* no board: tune picks another */
  }
  const enum tutti_buf src = a->in_place ? TUTTI_BUF_RECV : TUTTI_BUF_SEND;
  /* The root copies its own slot out only out of place. */
  const int flags = r != root || !a->in_place ? TUTTI_STEP_OWN : 0;
  NCCLCHECK(tutti_sched_lane(s));
  int round = 0;
  for (size_t off = 0; off < bytes; off += piece, round++) {
    const size_t len = bytes - off < piece ? bytes - off : piece;
    NCCLCHECK(tutti_add_board(s, TUTTI_STEP_BOARD_POST, 0, r == root ? src : TUTTI_BUF_NONE,
                              r == root ? off : 0, TUTTI_BUF_NONE, 0, r == root ? len : 0, round));
    NCCLCHECK(tutti_add_board(s, TUTTI_STEP_BOARD_GATHER, flags, TUTTI_BUF_NONE, 0, TUTTI_BUF_RECV,
                              off, len, round));
  }
  return ncclSuccess;
}
