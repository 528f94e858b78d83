/* The algorithm tables: which builder implements which collective. A NULL
 * entry means "not implemented by this algorithm": tune falls back. */
#include "algo/builders.h"

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
