/* The algorithm registry: which builder implements which collective (a
 * NULL entry: not implemented by this algorithm, tune falls back), and
 * building a schedule with one of them. */
#include "algo/builders.h"
#include "util/check.h"

const struct tutti_algo tutti_algo_ring = {
    .id = TUTTI_ALGO_RING,
    .name = "Ring",
    .build =
        {
            [TUTTI_COLL_ALLREDUCE] = tutti_build_allreduce_ring,
            [TUTTI_COLL_BROADCAST] = tutti_build_broadcast_ring,
            [TUTTI_COLL_REDUCE] = tutti_build_reduce_ring,
            [TUTTI_COLL_ALLGATHER] = tutti_build_allgather_ring,
            [TUTTI_COLL_REDUCESCATTER] = tutti_build_reducescatter_ring,
            [TUTTI_COLL_SEND] = tutti_build_send,
            [TUTTI_COLL_RECV] = tutti_build_recv,
        },
};

const struct tutti_algo tutti_algo_direct = {
    .id = TUTTI_ALGO_DIRECT,
    .name = "Direct",
    .build =
        {
            [TUTTI_COLL_ALLREDUCE] = tutti_build_allreduce_direct,
            [TUTTI_COLL_BROADCAST] = tutti_build_broadcast_direct,
            [TUTTI_COLL_REDUCE] = tutti_build_reduce_direct,
            [TUTTI_COLL_ALLGATHER] = tutti_build_allgather_direct,
            [TUTTI_COLL_REDUCESCATTER] = tutti_build_reducescatter_direct,
            [TUTTI_COLL_ALLTOALL] = tutti_build_alltoall_direct,
            [TUTTI_COLL_GATHER] = tutti_build_gather_direct,
            [TUTTI_COLL_SCATTER] = tutti_build_scatter_direct,
            [TUTTI_COLL_SEND] = tutti_build_send,
            [TUTTI_COLL_RECV] = tutti_build_recv,
        },
};

const struct tutti_algo tutti_algo_hier = {
    .id = TUTTI_ALGO_HIER,
    .name = "Hier",
    .build =
        {
            [TUTTI_COLL_ALLREDUCE] = tutti_build_allreduce_hier,
        },
};

const struct tutti_algo tutti_algo_tree = {
    .id = TUTTI_ALGO_TREE,
    .name = "Tree",
    .build =
        {
            [TUTTI_COLL_ALLREDUCE] = tutti_build_allreduce_tree,
        },
};

const struct tutti_algo tutti_algo_pull = {
    .id = TUTTI_ALGO_PULL,
    .name = "Pull",
    .build =
        {
            [TUTTI_COLL_ALLREDUCE] = tutti_build_allreduce_pull,
            [TUTTI_COLL_BROADCAST] = tutti_build_broadcast_pull,
            [TUTTI_COLL_ALLGATHER] = tutti_build_allgather_pull,
            [TUTTI_COLL_REDUCESCATTER] = tutti_build_reducescatter_pull,
        },
};

const struct tutti_algo tutti_algo_board = {
    .id = TUTTI_ALGO_BOARD,
    .name = "Board",
    .build =
        {
            [TUTTI_COLL_ALLREDUCE] = tutti_build_allreduce_board,
            [TUTTI_COLL_BROADCAST] = tutti_build_broadcast_board,
            [TUTTI_COLL_ALLGATHER] = tutti_build_allgather_board,
        },
};

/* The device paths: named here so that NCCL_ALGO and TUTTI_TUNE can ask
 * for them or leave them out; they build no schedule (src/device runs
 * them, tune/device.c says when they can). */
const struct tutti_algo tutti_algo_mapped = {.id = TUTTI_ALGO_MAPPED, .name = "Mapped"};
const struct tutti_algo tutti_algo_ce = {.id = TUTTI_ALGO_CE, .name = "CE"};

static const struct tutti_algo* const algos[TUTTI_ALGO_COUNT] = {
    [TUTTI_ALGO_RING] = &tutti_algo_ring,     [TUTTI_ALGO_DIRECT] = &tutti_algo_direct,
    [TUTTI_ALGO_HIER] = &tutti_algo_hier,     [TUTTI_ALGO_TREE] = &tutti_algo_tree,
    [TUTTI_ALGO_PULL] = &tutti_algo_pull,     [TUTTI_ALGO_BOARD] = &tutti_algo_board,
    [TUTTI_ALGO_MAPPED] = &tutti_algo_mapped, [TUTTI_ALGO_CE] = &tutti_algo_ce,
};

const struct tutti_algo* tutti_algo_get(enum tutti_algo_id id) {
  return (id >= 0 && id < TUTTI_ALGO_COUNT) ? algos[id] : NULL;
}

static int folds(const struct tutti_coll_args* a) {
  return a->deterministic && (a->coll == TUTTI_COLL_ALLREDUCE || a->coll == TUTTI_COLL_REDUCE ||
                              a->coll == TUTTI_COLL_REDUCESCATTER);
}

/* Two ranks: every reduction of the ring combines a rank's own input with
 * the other's, so the ring itself folds in rank order once rank 0 keeps
 * its own on the left; it is not replaced (docs/design.md). */
static int ring_of_two(const struct tutti_coll_args* a, enum tutti_algo_id id) {
  return folds(a) && a->nranks == 2 && id == TUTTI_ALGO_RING;
}

int tutti_algo_ordered(const struct tutti_coll_args* a, enum tutti_algo_id id) {
  return folds(a) && !ring_of_two(a, id) &&
         (id == TUTTI_ALGO_RING || id == TUTTI_ALGO_TREE || id == TUTTI_ALGO_HIER);
}

ncclResult_t tutti_schedule_build(enum tutti_algo_id id, const struct tutti_coll_args* a,
                                  struct tutti_schedule* s) {
  s->nlanes = 0;
  s->nsteps = 0;
  s->scratch_bytes = 0;
  s->board_gens = 0;
  s->algo = id;
  if (tutti_algo_ordered(a, id)) {
    switch (a->coll) {
      case TUTTI_COLL_ALLREDUCE:
        return tutti_build_allreduce_ordered(a, s);
      case TUTTI_COLL_REDUCE:
        return tutti_build_reduce_ordered(a, s);
      case TUTTI_COLL_REDUCESCATTER:
        return tutti_build_reducescatter_ordered(a, s);
      default:
        break;
    }
  }
  const struct tutti_algo* algo = tutti_algo_get(id);
  if (algo == NULL || algo->build[a->coll] == NULL) {
    return ncclInvalidUsage;
  }
  NCCLCHECK(algo->build[a->coll](a, s));
  for (int i = 0; ring_of_two(a, id) && i < s->nsteps; i++) {
    struct tutti_step* st = &s->steps[i];
    if (st->kind == TUTTI_STEP_RECV_REDUCE_COPY || st->kind == TUTTI_STEP_RECV_REDUCE_COPY_SEND) {
      st->flags = (uint8_t)(a->rank == 0 ? st->flags | TUTTI_STEP_ACC_LEFT
                                         : st->flags & ~TUTTI_STEP_ACC_LEFT);
    }
  }
  return ncclSuccess;
}
