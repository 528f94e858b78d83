/* Schedules: a collective becomes, for each rank, a few lanes of steps.
 * A lane is an ordered list of steps; lanes of one operation run
 * concurrently (an all-to-all sends to and receives from every peer at once),
 * steps of one lane run in order. A step moves `bytes` between the rank's
 * buffers and point-to-point connections (send to one peer, receive from
 * one peer), possibly reducing on the way. Schedules are pure functions of
 * (collective, count, nranks, rank, root): they never see a transport. */
#ifndef TUTTI_ALGO_ALGO_H
#define TUTTI_ALGO_ALGO_H

#include <stddef.h>
#include <stdint.h>

#include "nccl.h"

enum tutti_coll {
  TUTTI_COLL_ALLREDUCE = 0,
  TUTTI_COLL_BROADCAST,
  TUTTI_COLL_REDUCE,
  TUTTI_COLL_ALLGATHER,
  TUTTI_COLL_REDUCESCATTER,
  TUTTI_COLL_ALLTOALL,
  TUTTI_COLL_GATHER,
  TUTTI_COLL_SCATTER,
  TUTTI_COLL_SEND,
  TUTTI_COLL_RECV,
  TUTTI_COLL_COUNT
};

enum tutti_algo_id {
  TUTTI_ALGO_RING = 0,
  TUTTI_ALGO_DIRECT, /* one-shot: every rank talks to every rank in one round */
  TUTTI_ALGO_HIER,   /* within each host, then across hosts, then within each host */
  TUTTI_ALGO_TREE,   /* a binary tree: reduce up, broadcast down, pipelined by chunks */
  TUTTI_ALGO_PULL,   /* one host, host buffers: each rank reads its peers' buffers directly */
  TUTTI_ALGO_BOARD,  /* one host, small host buffers: post to a shared board, read every slot */
  /* Device paths that need no schedule (src/device runs them; tune/device.c
   * says when they can): */
  TUTTI_ALGO_MAPPED, /* GPUs that map each other: each rank pushes into its peers' inboxes */
  TUTTI_ALGO_CE,     /* two GPUs: the copy engines move, a kernel combines */
  TUTTI_ALGO_COUNT
};

/* Which buffer a step reads or writes. */
enum tutti_buf {
  TUTTI_BUF_NONE = 0,
  TUTTI_BUF_SEND,    /* the user's send buffer: reading it applies PreMulSum scaling */
  TUTTI_BUF_RECV,    /* the user's receive buffer */
  TUTTI_BUF_SCRATCH, /* per-operation scratch of `scratch_bytes` */
};

enum tutti_step_kind {
  TUTTI_STEP_SEND = 0,              /* src -> send_peer */
  TUTTI_STEP_RECV,                  /* recv_peer -> dst */
  TUTTI_STEP_COPY,                  /* src -> dst */
  TUTTI_STEP_REDUCE,                /* dst = dst OP src (local, src read from `src`) */
  TUTTI_STEP_RECV_REDUCE_SEND,      /* in OP src -> send_peer */
  TUTTI_STEP_RECV_REDUCE_COPY,      /* dst = in OP src */
  TUTTI_STEP_RECV_REDUCE_COPY_SEND, /* dst = in OP src; dst -> send_peer */
  TUTTI_STEP_RECV_COPY_SEND,        /* dst = in; in -> send_peer */
  TUTTI_STEP_WAIT_LANE,             /* wait until lane `wait_lane` of this op has finished */
  /* Single copy between ranks of one host: a rank exposes part of its
   * buffer to one peer, which copies (or reduces) it straight from there.
   * Only the buffer's address travels through the queue. */
  TUTTI_STEP_EXPOSE,      /* let send_peer read src; done once it has finished reading */
  TUTTI_STEP_PULL,        /* dst = what recv_peer exposed */
  TUTTI_STEP_PULL_REDUCE, /* dst = src OP what recv_peer exposed (src may be dst) */
  TUTTI_STEP_PUSH,        /* what recv_peer exposed (of its output) = src */
  /* The board (TUTTI_ALGO_BOARD): every rank of one host posts its
   * contribution into its own slot of the shared board, then reads all. */
  TUTTI_STEP_BOARD_POST,   /* this rank's slot = src (once its previous generation is read) */
  TUTTI_STEP_BOARD_FOLD,   /* dst = slot 0 OP slot 1 OP ... in rank order, once all are posted */
  TUTTI_STEP_BOARD_GATHER, /* block p of dst = slot p, for every peer p, once all are posted
                            * (a broadcast: dst = the root's slot) */
  TUTTI_STEP_KIND_COUNT
};

#define TUTTI_STEP_FINAL 0x1 /* this step produces final results (apply avg division) */
#define TUTTI_STEP_PEER_INPUT \
  0x2 /* PULL*: the peer exposes its user input (scaled as it is read, as SEND steps do) */
#define TUTTI_STEP_OWN 0x4 /* BOARD_GATHER: this rank's own slot too (out of place) */
/* RECV_REDUCE_COPY: dst = src OP in, the accumulator (src) on the left:
 * folds in rank order keep one operand order on every rank, which max and
 * min see (+0 against -0, which NaN wins). A sum's operands commute, so a
 * PreMulSum whose src is user input (scaled as read) keeps in OP src'. */
#define TUTTI_STEP_ACC_LEFT 0x8
/* The step's output is read again soon (a fold in rounds): plain stores,
 * never streaming ones that would evict it from the cache. */
#define TUTTI_STEP_KEEP 0x10

struct tutti_step {
  uint8_t kind;
  uint8_t flags;
  uint8_t src_buf;
  uint8_t dst_buf;
  int32_t send_peer; /* -1 when the step sends nothing */
  int32_t recv_peer; /* -1 when the step receives nothing */
  union {
    int32_t wait_lane;   /* WAIT_LANE */
    int32_t board_round; /* BOARD_*: which of the operation's board generations, from 0 */
  };
  size_t src_off; /* bytes */
  size_t dst_off; /* bytes */
  size_t bytes;
};

struct tutti_lane {
  int first_step; /* index into the schedule's steps */
  int nsteps;
};

struct tutti_schedule {
  enum tutti_algo_id algo;
  int nlanes;
  int nsteps;
  int cap_lanes;
  int cap_steps;
  struct tutti_lane* lanes;
  struct tutti_step* steps;
  size_t scratch_bytes;
  int board_gens; /* board generations the schedule uses (rounds 0 .. board_gens - 1) */
};

/* What a schedule is built from. Counts are in elements of `elem_size` bytes:
 * `count` is what the NCCL call took (per-rank count for allgather /
 * reducescatter / alltoall / gather / scatter, as in the API). */
struct tutti_coll_args {
  enum tutti_coll coll;
  size_t count;
  size_t elem_size;
  int nranks;
  int rank;
  int root; /* root of broadcast / reduce / gather / scatter; peer of send / recv */
  int in_place;
  /* Ring algorithms move their blocks in rounds of at most this many bytes
   * per step (0: one round). A step may complete before its receiver reads
   * it only if it fits in the queue, so tune keeps this at half the queue. */
  size_t chunk_bytes;
  /* Host index of every rank ([nranks]; NULL: all on one host), the number
   * of hosts and the most ranks any host has. */
  const int32_t* host_of;
  int nhosts;
  int max_local;
  /* The hierarchical allreduce's exchange among hosts: TUTTI_ALGO_RING or
   * TUTTI_ALGO_TREE (chosen by tune; 0 is the ring). */
  int inter_algo;
  /* Every rank may read every other rank's host buffers (one host, and
   * either one process or cross-memory attach allowed), so TUTTI_ALGO_PULL
   * can run: 0 no, 1 with a copy out of another process, 2 in place (all
   * ranks are threads of one process). Tune decides whether it does. */
  int can_pull;
  /* Data bytes of one slot of the host's board that every rank shares (0:
   * none), so that TUTTI_ALGO_BOARD can run on contributions up to this. */
  size_t board_bytes;
  /* The buffers are device memory: tune chooses among the device
   * executor's algorithms (the schedule's steps are the same). */
  int device;
  /* TUTTI_DETERMINISTIC: reductions fold every element in rank order,
   * whatever the algorithm (algo/ordered.c; docs/design.md). */
  int deterministic;
  /* A call's own configuration (ncclCollConfig_t; 0: none): the algorithms
   * it may use (a bit per enum tutti_algo_id, within NCCL_ALGO), and the
   * fewest and most channels the schedules' kernel cuts it into. */
  unsigned call_algos;
  int min_channels;
  int max_channels;
};

/* One algorithm: a name and a builder for each collective it implements
 * (NULL where it does not; none at all for the device paths, which run
 * without a schedule). A builder appends lanes and steps to `s`. */
typedef ncclResult_t (*tutti_schedule_fn)(const struct tutti_coll_args* a,
                                          struct tutti_schedule* s);

struct tutti_algo {
  enum tutti_algo_id id;
  const char* name; /* as NCCL_ALGO spells it */
  tutti_schedule_fn build[TUTTI_COLL_COUNT];
};

extern const struct tutti_algo tutti_algo_ring;
extern const struct tutti_algo tutti_algo_direct;
extern const struct tutti_algo tutti_algo_hier;
extern const struct tutti_algo tutti_algo_tree;
extern const struct tutti_algo tutti_algo_pull;
extern const struct tutti_algo tutti_algo_board;
extern const struct tutti_algo tutti_algo_mapped;
extern const struct tutti_algo tutti_algo_ce;

/* The table of every algorithm, indexed by enum tutti_algo_id. */
const struct tutti_algo* tutti_algo_get(enum tutti_algo_id id);
const char* tutti_coll_name(enum tutti_coll coll);

/* Builds the schedule of `a` with algorithm `id` into `s` (reset first).
 * ncclInvalidUsage (quietly, no error text) when the algorithm does not
 * implement that collective. */
ncclResult_t tutti_schedule_build(enum tutti_algo_id id, const struct tutti_coll_args* a,
                                  struct tutti_schedule* s);
void tutti_schedule_free(struct tutti_schedule* s);

/* Deterministic mode: the pipelines whose partial sums travel (the ring's,
 * the tree's, the hierarchy's) would fold in their own order, so for
 * reductions they build the owners' folds in rank order instead, moving as
 * many bytes (algo/ordered.c). 1 when `id` does so for `a`. */
int tutti_algo_ordered(const struct tutti_coll_args* a, enum tutti_algo_id id);

/* Builder helpers (algo/schedule.c). */
ncclResult_t tutti_sched_lane(struct tutti_schedule* s);
ncclResult_t tutti_sched_step(struct tutti_schedule* s, const struct tutti_step* step);

#endif
