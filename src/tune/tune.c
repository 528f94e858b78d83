/* Algorithm selection. Direct (one round, every rank to every rank) wins
 * while latency dominates; the ring wins once bandwidth does, because it
 * moves 2(N-1)/N of the data per rank instead of N-1 times it. */
#define _GNU_SOURCE
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "tune/tune.h"
#include "util/log.h"
#include "util/param.h"

/* Bytes each rank receives in a direct algorithm below which it is chosen. */
static TUTTI_PARAM(direct_max_bytes, "TUTTI_DIRECT_MAX_BYTES", 256 * 1024);

static unsigned allowed_mask[TUTTI_COLL_COUNT];
static pthread_once_t algo_once = PTHREAD_ONCE_INIT;

static unsigned algo_bits(const char* list) {
  unsigned bits = 0;
  int invert = list[0] == '^';
  char buf[256];
  snprintf(buf, sizeof buf, "%s", list + invert);
  char* save = NULL;
  for (char* tok = strtok_r(buf, ",", &save); tok != NULL; tok = strtok_r(NULL, ",", &save)) {
    int known = 0;
    for (int id = 0; id < TUTTI_ALGO_COUNT; id++) {
      if (strcasecmp(tok, tutti_algo_get(id)->name) == 0) {
        bits |= 1u << id;
        known = 1;
      }
    }
    /* NCCL's names: its Tree is host-hierarchical too; the others are
     * one-round algorithms on one host, tutti's direct. */
    if (strcasecmp(tok, "Tree") == 0 || strcasecmp(tok, "CollnetChain") == 0) {
      bits |= 1u << TUTTI_ALGO_HIER;
      known = 1;
    }
    if (strcasecmp(tok, "NVLS") == 0 || strcasecmp(tok, "NVLSTree") == 0 ||
        strcasecmp(tok, "CollnetDirect") == 0 || strcasecmp(tok, "PAT") == 0) {
      bits |= 1u << TUTTI_ALGO_DIRECT;
      known = 1;
    }
    if (!known) {
      WARN("NCCL_ALGO names \"%s\", which tutti does not know: use Ring, Direct, Hier or Tree",
           tok);
    }
  }
  unsigned all = (1u << TUTTI_ALGO_COUNT) - 1;
  return invert ? (all & ~bits) : bits;
}

void tutti_tune_parse_algo(const char* spec, unsigned allowed[TUTTI_COLL_COUNT]) {
  unsigned all = (1u << TUTTI_ALGO_COUNT) - 1;
  for (int c = 0; c < TUTTI_COLL_COUNT; c++) {
    allowed[c] = all;
  }
  if (spec == NULL || *spec == '\0') {
    return;
  }
  if (strchr(spec, ':') == NULL) {
    unsigned bits = algo_bits(spec);
    for (int c = 0; c < TUTTI_COLL_COUNT; c++) {
      allowed[c] = bits;
    }
    return;
  }
  /* Per collective: "allreduce:ring;broadcast:direct". */
  char buf[512];
  snprintf(buf, sizeof buf, "%s", spec);
  char* save = NULL;
  for (char* part = strtok_r(buf, ";", &save); part != NULL; part = strtok_r(NULL, ";", &save)) {
    char* colon = strchr(part, ':');
    if (colon == NULL) {
      continue;
    }
    *colon = '\0';
    for (int c = 0; c < TUTTI_COLL_COUNT; c++) {
      if (strcasecmp(part, tutti_coll_name(c)) == 0) {
        allowed[c] = algo_bits(colon + 1);
      }
    }
  }
}

static int algo_named; /* NCCL_ALGO was given */

static void load_algo_env(void) {
  const char* spec = tutti_getenv("NCCL_ALGO");
  algo_named = spec != NULL && spec[0] != '\0';
  tutti_tune_parse_algo(spec, allowed_mask);
}

int tutti_tune_algo_named(void) {
  pthread_once(&algo_once, load_algo_env);
  return algo_named;
}

/* Bytes the busiest rank moves in a direct algorithm: every rank receives
 * N-1 blocks in the reductions and all-gather, the root sends or receives N-1
 * blocks in broadcast, gather and scatter. */
static size_t direct_bytes(const struct tutti_coll_args* a) {
  size_t b = a->count * a->elem_size;
  switch (a->coll) {
    case TUTTI_COLL_SEND:
    case TUTTI_COLL_RECV:
    case TUTTI_COLL_ALLTOALL:
      return b;
    default:
      return b * (size_t)(a->nranks - 1);
  }
}

size_t tutti_tune_chunk(size_t queue_bytes, size_t piece_bytes) {
  size_t c = queue_bytes / 2;
  if (piece_bytes > 0) {
    c -= c % piece_bytes;
    c = c < piece_bytes ? piece_bytes : c;
  }
  return c;
}

/* Device buffers: every collective's ring moves each byte over each link
 * once and needs no scratch (so a captured graph allocates nothing); one-shot
 * direct schedules stay for what has no ring (all-to-all, gather, scatter,
 * point-to-point) and when NCCL_ALGO asks for them. (Single collectives
 * between mapped GPUs take the device's own direct path instead, with its
 * limit TUTTI_DEVICE_DIRECT_MAX_BYTES: src/device/direct_host.cu.) */
static TUTTI_PARAM(device_direct_max_bytes, "TUTTI_DEVICE_DIRECT_SCHEDULE_MAX_BYTES", 0);

static enum tutti_algo_id pick_allowed(const struct tutti_coll_args* a, enum tutti_algo_id pick,
                                       const char** why);

/* Across hosts: from this many hosts on, messages up to TUTTI_TREE_MAX_BYTES
 * cross the network along a tree (2 log2 H steps) rather than a ring
 * (2(H-1) steps); with several ranks per host the hierarchical allreduce
 * keeps one rank per host on the network. */
static TUTTI_PARAM(tree_min_hosts, "TUTTI_TREE_MIN_HOSTS", 4);
static TUTTI_PARAM(tree_max_bytes, "TUTTI_TREE_MAX_BYTES", 1 << 20);

/* Single copy on one host (TUTTI_ALGO_PULL): from this many bytes of the
 * whole message on (the output of all-gather, the input of reduce-scatter),
 * ranks read their peers' buffers directly instead of passing the data
 * through the shared-memory queues; TUTTI_PULL=0 turns it off. Below, the
 * offer and its answer per peer cost more than the second copy saves
 * (all-gather, 2 ranks: equal at 256 KB, 1.3x faster at 512 KB).
 * Reductions between processes gain nothing by default (TUTTI_PULL_CMA_REDUCE
 * turns them on): process_vm_readv must copy the peer's bytes into this
 * process before they are combined, which is the copy the queue makes too;
 * measured 1.1-1.5x slower than the ring at 1-4 MB (bench/RESULTS.md). */
static TUTTI_PARAM(pull_enable, "TUTTI_PULL", 1);
static TUTTI_PARAM(pull_min_bytes, "TUTTI_PULL_MIN_BYTES", 512 * 1024);
static TUTTI_PARAM(pull_cma_reduce, "TUTTI_PULL_CMA_REDUCE", 0);
/* With more ranks on the host than cores, every offer and read needs the
 * peer to be scheduled, and a rank waits for each of its peers where the
 * ring waits only for a neighbour: 4 ranks on 2 cores measured slower with
 * Pull up to 2-8 MB (all-gather, broadcast), faster from 8-32 MB. */
static TUTTI_PARAM(pull_min_bytes_oversub, "TUTTI_PULL_MIN_BYTES_OVERSUBSCRIBED", 8 << 20);

/* The board (TUTTI_ALGO_BOARD): allreduces of up to this many bytes, where
 * every rank of the communicator shares one host's board (and its slots
 * hold them: TUTTI_BOARD_BYTES). */
static TUTTI_PARAM(board_max_bytes, "TUTTI_BOARD_MAX_BYTES", 64 * 1024);
/* All-gathers go through the board from this much output, and at every
 * size when the host has more ranks than cores. Below it, with a core per
 * rank, Pull's reads straight from the peers' buffers were faster (2 ranks,
 * one size per run: 1 MB 105 µs against 150-160, 4 MB 478 against 700);
 * from 16 MB the board was (3.2 ms against 3.8-3.9), and with 4 ranks on
 * 2 cores it was level with Pull at 1-4 MB, 1.9x faster at 16 MB and
 * 1.3-1.6x faster than the queues below 1 MB (bench/RESULTS.md). */
static TUTTI_PARAM(board_allgather_min_bytes, "TUTTI_BOARD_ALLGATHER_MIN_BYTES", 16 << 20);
/* Broadcasts go through the board from these sizes: with ranks outnumbering
 * cores from 256 KB (4 ranks on 2 cores, in place: 1.3-1.9x faster than the
 * chain and Pull from 256 KB, up to 3x slower below 64 KB, where the chain
 * waits only for the root); with a core per rank out of place from 1 MB
 * (1.2-1.5x faster than Pull); in place Pull, whose root writes part of the
 * peers' outputs itself, was level (bench/RESULTS.md). */
static TUTTI_PARAM(board_bcast_min_bytes, "TUTTI_BOARD_BROADCAST_MIN_BYTES", 1 << 20);
/* TUTTI_BOARD_BROADCAST=0 keeps broadcasts off the board. */
static TUTTI_PARAM(board_bcast, "TUTTI_BOARD_BROADCAST", 1);
static TUTTI_PARAM(board_bcast_min_bytes_oversub, "TUTTI_BOARD_BROADCAST_MIN_BYTES_OVERSUBSCRIBED",
                   256 * 1024);

static int host_cpus;
static pthread_once_t cpus_once = PTHREAD_ONCE_INIT;

static void load_cpus(void) {
  cpu_set_t set;
  host_cpus = sched_getaffinity(0, sizeof set, &set) == 0 ? CPU_COUNT(&set) : 1;
}

static int use_pull(const struct tutti_coll_args* a) {
  size_t bytes = a->count * a->elem_size;
  const int reduces = a->coll == TUTTI_COLL_ALLREDUCE || a->coll == TUTTI_COLL_REDUCESCATTER;
  if (a->coll == TUTTI_COLL_ALLGATHER || a->coll == TUTTI_COLL_REDUCESCATTER) {
    bytes *= (size_t)a->nranks;
  }
  if (reduces && a->can_pull != 2 && !tutti_param_pull_cma_reduce()) {
    return 0;
  }
  pthread_once(&cpus_once, load_cpus);
  const size_t min = (size_t)(a->max_local > host_cpus ? tutti_param_pull_min_bytes_oversub()
                                                       : tutti_param_pull_min_bytes());
  return a->can_pull && tutti_param_pull_enable() && a->nranks > 1 &&
         tutti_algo_pull.build[a->coll] != NULL && bytes >= min;
}

static int use_board(const struct tutti_coll_args* a) {
  const size_t bytes = a->count * a->elem_size;
  if (a->board_bytes == 0 || a->nranks < 2) {
    return 0;
  }
  pthread_once(&cpus_once, load_cpus);
  const int oversubscribed = a->max_local > host_cpus;
  if (a->coll == TUTTI_COLL_ALLGATHER) {
    return oversubscribed ||
           bytes * (size_t)a->nranks >= (size_t)tutti_param_board_allgather_min_bytes();
  }
  if (a->coll == TUTTI_COLL_BROADCAST) {
    if (!tutti_param_board_bcast()) {
      return 0;
    }
    return oversubscribed ? bytes >= (size_t)tutti_param_board_bcast_min_bytes_oversub()
                          : !a->in_place && bytes >= (size_t)tutti_param_board_bcast_min_bytes();
  }
  return a->coll == TUTTI_COLL_ALLREDUCE && bytes <= a->board_bytes &&
         bytes <= (size_t)tutti_param_board_max_bytes();
}

/* The host buffers' choice, and the rule that made it. */
static enum tutti_algo_id host_pick(const struct tutti_coll_args* a, const char** why) {
  enum tutti_algo_id pick = TUTTI_ALGO_RING;
  *why = "ring: bandwidth-bound, 2(N-1)/N of the data per rank";
  if (direct_bytes(a) <= (size_t)tutti_param_direct_max_bytes()) {
    pick = TUTTI_ALGO_DIRECT;
    *why = "direct: the busiest rank moves at most TUTTI_DIRECT_MAX_BYTES";
  }
  if (use_pull(a)) {
    pick = TUTTI_ALGO_PULL;
    *why = "pull: one host, peers' buffers readable, from TUTTI_PULL_MIN_BYTES of message";
  }
  if (use_board(a)) {
    pick = TUTTI_ALGO_BOARD;
    *why = a->coll == TUTTI_COLL_ALLREDUCE ? "board: one host, fits TUTTI_BOARD_MAX_BYTES"
           : a->coll == TUTTI_COLL_ALLGATHER
               ? "board: one host, from TUTTI_BOARD_ALLGATHER_MIN_BYTES of output or ranks "
                 "outnumbering cores"
               : "board: one host, from TUTTI_BOARD_BROADCAST_MIN_BYTES";
  }
  const int tree = tutti_tune_inter(a) == TUTTI_ALGO_TREE;
  if (a->coll == TUTTI_COLL_ALLREDUCE && pick == TUTTI_ALGO_RING && a->nhosts > 1) {
    pick = a->max_local > 1 ? TUTTI_ALGO_HIER : tree ? TUTTI_ALGO_TREE : TUTTI_ALGO_RING;
    *why = a->max_local > 1 ? "hier: several hosts, several ranks on some host"
           : tree           ? "tree: from TUTTI_TREE_MIN_HOSTS hosts, up to TUTTI_TREE_MAX_BYTES"
                            : "ring: several hosts, one rank each";
  }
  return pick;
}

void tutti_tune_plan(const struct tutti_coll_args* a, struct tutti_plan* plan) {
  pthread_once(&algo_once, load_algo_env);
  const char* why;
  enum tutti_algo_id pick;
  if (a->device) {
    const int direct = direct_bytes(a) <= (size_t)tutti_param_device_direct_max_bytes();
    pick = direct ? TUTTI_ALGO_DIRECT : TUTTI_ALGO_RING;
    why = direct ? "direct schedule: up to TUTTI_DEVICE_DIRECT_SCHEDULE_MAX_BYTES"
                 : "ring schedule: each byte over each link once, no scratch";
  } else {
    pick = host_pick(a, &why);
  }
  plan->algo = pick_allowed(a, pick, &why);
  plan->why = why;
  /* A device call's line comes at its launch, which may take another path
   * (tutti_tune_device). */
  if (!a->device && tutti_log_wants(TUTTI_LOG_INFO, TUTTI_TUNING) &&
      tutti_tune_first_sight(tutti_tune_shape(a, TUTTI_PATH_SCHEDULE))) {
    INFO(TUTTI_TUNING, "%s of %zu bytes, %d ranks on %d host%s%s, host buffers: %s (%s)",
         tutti_coll_name(a->coll), a->count * a->elem_size, a->nranks, a->nhosts,
         a->nhosts == 1 ? "" : "s", a->in_place ? ", in place" : "",
         tutti_algo_get(plan->algo)->name, why);
  }
}

int tutti_tune_inter(const struct tutti_coll_args* a) {
  const size_t bytes = a->count * a->elem_size;
  return a->nhosts >= tutti_param_tree_min_hosts() && bytes <= (size_t)tutti_param_tree_max_bytes()
             ? TUTTI_ALGO_TREE
             : TUTTI_ALGO_RING;
}

static enum tutti_algo_id pick_allowed(const struct tutti_coll_args* a, enum tutti_algo_id pick,
                                       const char** why) {
  unsigned allowed = allowed_mask[a->coll];
  if (!a->can_pull) {
    allowed &= ~(1u << TUTTI_ALGO_PULL); /* peers' buffers cannot be read from here */
  }
  if (a->board_bytes == 0 ||
      (a->coll == TUTTI_COLL_ALLREDUCE && a->count * a->elem_size > a->board_bytes)) {
    allowed &= ~(1u << TUTTI_ALGO_BOARD); /* no board here, or its slots are too small */
  }
  const struct tutti_algo* algo = tutti_algo_get(pick);
  if ((allowed & (1u << pick)) && algo->build[a->coll] != NULL) {
    return pick;
  }
  for (int id = 0; id < TUTTI_ALGO_COUNT; id++) {
    if ((allowed & (1u << id)) && tutti_algo_get(id)->build[a->coll] != NULL) {
      *why = algo_named ? "NCCL_ALGO: the first allowed algorithm that runs this collective"
                        : "the first algorithm that can run here";
      return (enum tutti_algo_id)id;
    }
  }
  /* Nothing allowed implements it: any algorithm that does. */
  for (int id = 0; id < TUTTI_ALGO_COUNT; id++) {
    if (tutti_algo_get(id)->build[a->coll] != NULL) {
      *why = "NCCL_ALGO allows no algorithm for this collective: the first that runs it";
      return (enum tutti_algo_id)id;
    }
  }
  return TUTTI_ALGO_DIRECT;
}
