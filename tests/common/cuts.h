/* Counts at the cut points of the chunked algorithms: a round of a ring,
 * tree, hierarchical or ordered schedule moves at most one chunk of each
 * block, a board round one slot, so an off-by-one in how rounds are
 * counted or sliced loses or doubles the element just past a multiple of
 * the chunk. The units come from the library's own functions (queue
 * geometry, chunk, board slot), so the counts move when the tuning moves. */
#ifndef TUTTI_TEST_CUTS_H
#define TUTTI_TEST_CUTS_H

#include <stddef.h>

#include "nccl.h"

#define CUTS_MAX 32 /* counts one call to cuts_counts appends at most */

/* Bytes a chunked schedule moves per round on a host communicator of
 * `nranks` ranks over `nhosts` hosts: the queue NCCL_BUFFSIZE (or the
 * default) gives, cut into the transport's slots, halved. */
size_t cuts_chunk_bytes(int nranks, int nhosts);

/* The same for queues of `buffsize` bytes (an in-memory world's). */
size_t cuts_chunk_of_queue(size_t buffsize);

/* Data bytes of one rank's slot of the host's board (TUTTI_TUNE board.slot). */
size_t cuts_board_bytes(void);

/* Which counts cuts_counts makes. */
enum cuts_shape {
  CUTS_WHOLE = 1, /* the count is one block: k*u - 1, k*u, k*u + 1 (all-gather,
                   * reduce-scatter per rank, a broadcast or tree in rounds) */
  CUTS_SPLIT = 2, /* the count is split into nranks blocks (ring allreduce,
                   * ordered folds): block 0 is k*u - 1, k*u or k*u + 1 long
                   * while count % nranks is 0, 1 or nranks - 1 */
};

/* Appends to out[*len..cap) the counts of `shape` for rounds of `unit_bytes`
 * and elements of `elem_size` bytes among `nranks` ranks, k = 1..kmax,
 * leaving out duplicates and counts above `most` (0: no bound). Returns the
 * number appended. */
int cuts_counts(size_t* out, int* len, int cap, size_t unit_bytes, size_t elem_size, int nranks,
                int kmax, unsigned shape, size_t most);

/* A type of `elem_size` bytes, a different one for each `turn` (integers and
 * floats in turn, so the cut counts meet every kind of reduction). */
ncclDataType_t cuts_type_of_size(size_t elem_size, size_t turn);

#endif
