/* Tree allreduce: the ranks form a binary tree in rank order (children of i:
 * 2i+1 and 2i+2); each chunk is reduced up to rank 0 and broadcast back
 * down, chunk after chunk, so the two waves pipeline. 2*log2(N) steps of
 * latency instead of the ring's 2(N-1): the choice for small messages among
 * many hosts. Every rank gets the root's bits, so results agree everywhere. */
#include "algo/builders.h"
#include "algo/pattern.h"
#include "algo/steps.h"

TUTTI_BUILDER(allreduce_tree) {
  const int n = a->nranks, r = a->rank;
  const size_t es = a->elem_size;
  NCCLCHECK(tutti_sched_lane(s));
  if (n == 1) {
    return ADD_COPY(s, TUTTI_STEP_FINAL, TUTTI_BUF_SEND, 0, TUTTI_BUF_RECV, 0, a->count * es);
  }
  const int parent = r == 0 ? -1 : (r - 1) / 2;
  int kids[2], nk = 0;
  for (int c = 2 * r + 1; c <= 2 * r + 2 && c < n; c++) {
    kids[nk++] = c;
  }
  const size_t chunk = tutti_chunk_elems(a->chunk_bytes, es);
  const size_t rounds = tutti_rounds(a->count, chunk);
  for (size_t k = 0; k < rounds; k++) {
    size_t o, l;
    tutti_round_slice(0, a->count, k, chunk, &o, &l);
    const size_t off = o * es, bytes = l * es;
    /* Up: the partial result of this subtree goes to the parent (the root
     * keeps the full, final one in its receive buffer). */
    if (nk == 0) {
      NCCLCHECK(ADD_SEND(s, 0, TUTTI_BUF_SEND, off, bytes, parent));
    } else {
      enum tutti_buf acc = TUTTI_BUF_SEND; /* what the next reduction adds to */
      for (int i = 0; i < nk; i++) {
        const int last = i == nk - 1;
        if (last && parent >= 0) {
          NCCLCHECK(tutti_add(s, TUTTI_STEP_RECV_REDUCE_SEND, 0, acc, off, TUTTI_BUF_NONE, 0, bytes,
                              parent, kids[i]));
        } else {
          NCCLCHECK(tutti_add(s, TUTTI_STEP_RECV_REDUCE_COPY, last ? TUTTI_STEP_FINAL : 0, acc, off,
                              TUTTI_BUF_RECV, off, bytes, -1, kids[i]));
        }
        acc = TUTTI_BUF_RECV;
      }
    }
    /* Down: the final result from the parent, forwarded to the children. */
    if (parent >= 0 && nk == 0) {
      NCCLCHECK(ADD_RECV(s, 0, TUTTI_BUF_RECV, off, bytes, parent));
    } else if (parent >= 0) {
      NCCLCHECK(tutti_add(s, TUTTI_STEP_RECV_COPY_SEND, 0, TUTTI_BUF_NONE, 0, TUTTI_BUF_RECV, off,
                          bytes, kids[0], parent));
      if (nk == 2) {
        NCCLCHECK(ADD_SEND(s, 0, TUTTI_BUF_RECV, off, bytes, kids[1]));
      }
    } else {
      for (int i = 0; i < nk; i++) {
        NCCLCHECK(ADD_SEND(s, 0, TUTTI_BUF_RECV, off, bytes, kids[i]));
      }
    }
  }
  return ncclSuccess;
}
