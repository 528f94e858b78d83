/* Board allreduce: every rank of one host writes its (scaled) input into its
 * own slot of the shared board, then, once every slot holds this
 * generation, reduces all of them in rank order 0, 1, ..., N-1 straight into
 * its output: the same order on every rank, so the same bits. One post and
 * one read of N-1 cache-line flags, where the direct allreduce sends N-1
 * messages and receives N-1: the choice for small messages on one host,
 * above all when ranks outnumber cores and every hand-over costs a context
 * switch (bench/RESULTS.md, "Small messages, 8 B–256 KB"). */
#include "algo/builders.h"
#include "algo/steps.h"

TUTTI_BUILDER(allreduce_board) {
  const size_t bytes = a->count * a->elem_size;
  if (bytes > a->board_bytes) {
    return ncclInvalidUsage; /* no board, or too small for it: tune picks another */
  }
  NCCLCHECK(tutti_sched_lane(s));
  NCCLCHECK(
      tutti_add_board(s, TUTTI_STEP_BOARD_POST, 0, TUTTI_BUF_SEND, 0, TUTTI_BUF_NONE, 0, bytes, 0));
  return tutti_add_board(s, TUTTI_STEP_BOARD_FOLD, TUTTI_STEP_FINAL, TUTTI_BUF_NONE, 0,
                         TUTTI_BUF_RECV, 0, bytes, 0);
}
