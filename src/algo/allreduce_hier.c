/* Hierarchical allreduce: each host reduces to its first rank (a chain
 * through the host's ranks), those leaders allreduce around a ring of hosts,
 * (or a tree of hosts, for small messages among many hosts: tune decides),
 * and each leader broadcasts within its host (a chain again). Only one rank
 * per host crosses the network, with one ring step per host instead of one
 * per rank. The phases reuse the ring builders on sub-rings of rank indices,
 * translated to the real ranks. */
#include <stdlib.h>

#include "algo/builders.h"
#include "algo/steps.h"

/* Appends the steps of `sub` (one lane) to the current lane of `s`, with
 * peers mapped through `map`; `to_recv` turns send-buffer sources into the
 * receive buffer (later phases work on partial results, never re-scaled). */
static ncclResult_t append(struct tutti_schedule* s, struct tutti_schedule* sub, const int* map,
                           int to_recv, int keep_final) {
  if (sub->nlanes > 1) {
    return tutti_error(ncclInternalError, "hierarchical allreduce: a phase has %d lanes",
                       sub->nlanes);
  }
  for (int i = 0; i < sub->nsteps; i++) {
    struct tutti_step st = sub->steps[i];
    st.send_peer = st.send_peer >= 0 ? map[st.send_peer] : -1;
    st.recv_peer = st.recv_peer >= 0 ? map[st.recv_peer] : -1;
    if (to_recv && st.src_buf == TUTTI_BUF_SEND) {
      st.src_buf = TUTTI_BUF_RECV;
    }
    if (!keep_final) {
      st.flags &= (uint8_t)~TUTTI_STEP_FINAL;
    }
    NCCLCHECK(tutti_sched_step(s, &st));
  }
  return ncclSuccess;
}

/* A phase's schedule, built straight from its builder (as
 * tutti_schedule_build does through the registry). */
static ncclResult_t build_sub(tutti_schedule_fn build, enum tutti_algo_id id,
                              const struct tutti_coll_args* a, struct tutti_schedule* sub) {
  sub->nlanes = 0;
  sub->nsteps = 0;
  sub->scratch_bytes = 0;
  sub->board_gens = 0;
  sub->algo = id;
  return build(a, sub);
}

TUTTI_BUILDER(allreduce_hier) {
  const int n = a->nranks, r = a->rank;
  ncclResult_t res = ncclSuccess;
  int* local = malloc((size_t)n * sizeof(int));   /* ranks of my host */
  int* leaders = malloc((size_t)n * sizeof(int)); /* first rank of each host */
  struct tutti_schedule sub = {0};
  if (local == NULL || leaders == NULL) {
    res = tutti_error(ncclSystemError, "out of host memory building a schedule");
    goto out;
  }
  int nl = 0, ng = 0, li = 0, gi = -1;
  for (int q = 0; q < n; q++) {
    int h = a->host_of ? a->host_of[q] : 0;
    int first = 1;
    for (int p = 0; p < q && first; p++) {
      first = (a->host_of ? a->host_of[p] : 0) != h;
    }
    if (first) {
      gi = q == r ? ng : gi;
      leaders[ng++] = q;
    }
    if (h == (a->host_of ? a->host_of[r] : 0)) {
      li = q == r ? nl : li;
      local[nl++] = q;
    }
  }
  NCCLCHECKGOTO(tutti_sched_lane(s), res, out);
  /* 1. Reduce to the host's leader. With one host it is already final. */
  struct tutti_coll_args sa = *a;
  sa.coll = TUTTI_COLL_REDUCE;
  sa.nranks = nl;
  sa.rank = li;
  sa.root = 0;
  sa.host_of = NULL;
  NCCLCHECKGOTO(build_sub(tutti_build_reduce_ring, TUTTI_ALGO_RING, &sa, &sub), res, out);
  NCCLCHECKGOTO(append(s, &sub, local, 0, ng == 1), res, out);
  /* 2. Allreduce among the leaders, in place on their partial results. */
  if (gi >= 0 && ng > 1) {
    sa = *a;
    sa.nranks = ng;
    sa.rank = gi;
    sa.in_place = 1;
    sa.host_of = NULL;
    const int tree = a->inter_algo == TUTTI_ALGO_TREE;
    NCCLCHECKGOTO(build_sub(tree ? tutti_build_allreduce_tree : tutti_build_allreduce_ring,
                            tree ? TUTTI_ALGO_TREE : TUTTI_ALGO_RING, &sa, &sub),
                  res, out);
    NCCLCHECKGOTO(append(s, &sub, leaders, 1, 1), res, out);
  }
  /* 3. Broadcast within the host. */
  sa = *a;
  sa.coll = TUTTI_COLL_BROADCAST;
  sa.nranks = nl;
  sa.rank = li;
  sa.root = 0;
  sa.in_place = 1;
  sa.host_of = NULL;
  NCCLCHECKGOTO(build_sub(tutti_build_broadcast_ring, TUTTI_ALGO_RING, &sa, &sub), res, out);
  NCCLCHECKGOTO(append(s, &sub, local, 1, 0), res, out);
out:
  tutti_schedule_free(&sub);
  free(local);
  free(leaders);
  return res;
}
