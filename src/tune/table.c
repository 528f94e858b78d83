/* The schedule table: which algorithm runs a call, by collective, size and
 * place, with where each default was measured written beside its row; and
 * TUTTI_TUNE, the one string that overrides it.
 *
 * A call takes the first row that matches it (collective, conditions, size
 * in the row's measure) and whose algorithm can run here and is allowed by
 * NCCL_ALGO; the rows of TUTTI_TUNE come before the defaults. */
#define _GNU_SOURCE /* sched_getaffinity */
#include <ctype.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "tune/internal.h"
#include "util/log.h"

/* Conditions a row may require (all of them). */
enum {
  W_ONE_HOST = 1 << 0,     /* every rank on one host */
  W_HOSTS = 1 << 1,        /* several hosts */
  W_OVERSUB = 1 << 2,      /* a host has more ranks than cores */
  W_CORES = 1 << 3,        /* a core for every rank */
  W_OUT_OF_PLACE = 1 << 4, /* the output is not the input */
  W_LOCAL_MANY = 1 << 5,   /* some host has several ranks */
  W_HOSTS_4 = 1 << 6,      /* TREE_MIN_HOSTS hosts or more */
  W_HOST_BUFS = 1 << 7,    /* host buffers */
  W_DEVICE_BUFS = 1 << 8,  /* device buffers */
  W_FORCED = 1 << 9,       /* a TUTTI_TUNE row: "worth it" rules do not apply */
  W_RANKS_2 = 1 << 10,     /* two ranks */
  W_RANKS_3 = 1 << 11,     /* three ranks or more */
  W_ONE_PROCESS = 1 << 12  /* device buffers: every peer's memory is this process's */
};

/* What a row's size range is compared with. */
enum measure {
  M_BYTES,   /* count x element size: the buffer NCCL's count describes */
  M_MESSAGE, /* the whole message: an all-gather's output, a reduce-scatter's input */
  M_BUSIEST  /* what the busiest rank moves in a one-round algorithm */
};

struct row {
  unsigned colls; /* a bit per enum tutti_coll; ~0u: every one */
  unsigned when;
  enum measure measure;
  size_t lo, hi; /* lo <= size <= hi */
  enum tutti_algo_id algo;
  const char* why;
};

#define C(c) (1u << TUTTI_COLL_##c)
#define ANY (~0u)
#define KB ((size_t)1 << 10)
#define MB ((size_t)1 << 20)
#define INF SIZE_MAX
/* The tree's range: from this many hosts, messages up to this size. */
#define TREE_MIN_HOSTS 4
#define TREE_MAX_BYTES (1 * MB)

/* Measured on this project's 2-core VM and 16-core hosts (bench/RESULTS.md,
 * "CPU: host buffers on one host") unless said otherwise. */
static const struct row defaults[] = {
    /* 2-4 ranks: 8 B - 4 KB at or below Open MPI's time with 2 ranks, half
     * of it with 4; the board's slot holds at most `board.slot` (knobs.c). */
    {C(ALLREDUCE), W_HOST_BUFS | W_ONE_HOST, M_BYTES, 0, 64 * KB, TUTTI_ALGO_BOARD,
     "board: one host, up to 64 KB"},
    /* 4 ranks on 2 cores: level with Pull at 1-4 MB, 1.9x faster at 16 MB,
     * 1.3-1.6x faster than the queues below 1 MB. */
    {C(ALLGATHER), W_HOST_BUFS | W_ONE_HOST | W_OVERSUB, M_MESSAGE, 0, INF, TUTTI_ALGO_BOARD,
     "board: one host, ranks outnumber cores"},
    /* A core per rank: Pull's reads were faster below (1 MB 105 us against
     * 150-160), the board from 16 MB (3.2 ms against 3.8-3.9). */
    {C(ALLGATHER), W_HOST_BUFS | W_ONE_HOST, M_MESSAGE, 16 * MB, INF, TUTTI_ALGO_BOARD,
     "board: one host, from 16 MB of output"},
    /* 4 ranks on 2 cores, in place: 1.3-1.9x faster than the chain and Pull
     * from 256 KB, up to 3x slower below 64 KB (the chain waits only for
     * the root). */
    {C(BROADCAST), W_HOST_BUFS | W_ONE_HOST | W_OVERSUB, M_BYTES, 256 * KB, INF, TUTTI_ALGO_BOARD,
     "board: one host, ranks outnumber cores, from 256 KB"},
    /* A core per rank, out of place: 1.2-1.5x faster than Pull from 1 MB;
     * in place Pull (whose root writes part of the outputs) was level. */
    {C(BROADCAST), W_HOST_BUFS | W_ONE_HOST | W_CORES | W_OUT_OF_PLACE, M_BYTES, 1 * MB, INF,
     TUTTI_ALGO_BOARD, "board: one host, out of place, from 1 MB"},
    /* Below, the offer and its answer per peer cost more than the second
     * copy saves (all-gather, 2 ranks: equal at 256 KB, 1.3x faster at
     * 512 KB). Reductions between processes gain nothing: process_vm_readv
     * copies the peer's bytes in before they are combined, the copy the
     * queue makes too (1.1-1.5x slower than the ring at 1-4 MB). */
    {ANY, W_HOST_BUFS | W_ONE_HOST | W_CORES, M_MESSAGE, 512 * KB, INF, TUTTI_ALGO_PULL,
     "pull: one host, peers' buffers readable, from 512 KB of message"},
    /* 4 ranks on 2 cores: every read needs the peer scheduled; slower than
     * the ring up to 2-8 MB, faster from 8-32 MB. */
    {ANY, W_HOST_BUFS | W_ONE_HOST | W_OVERSUB, M_MESSAGE, 8 * MB, INF, TUTTI_ALGO_PULL,
     "pull: one host, ranks outnumber cores, from 8 MB of message"},
    /* Latency-bound: one round instead of 2(N-1) steps. */
    {ANY, W_HOST_BUFS, M_BUSIEST, 0, 256 * KB, TUTTI_ALGO_DIRECT,
     "direct: the busiest rank moves at most 256 KB"},
    /* Device buffers, the paths without a schedule (tune/device.c says
     * where they can run), measured on 2 x H200 (NV18) against NCCL 2.28.9
     * (bench/RESULTS.md, "GPU: device buffers, 2 × H200"; the diary,
     * docs/history/results-diary.md, "GPU: 4 × H200"):
     * the copy engines for reduce-scatter from 32 MB per rank, for
     * allreduce from 64 MB when one process drives both GPUs (1.07-1.13x
     * NCCL there; with a process per GPU 5-25% slower than the ring). Two
     * ranks only: on 4 x H200 the path ran 3x slower than the ring
     * (allreduce, one process, 128 MB 1996 us against 639). */
    {C(REDUCESCATTER), W_DEVICE_BUFS | W_RANKS_2, M_BYTES, 32 * MB, INF, TUTTI_ALGO_CE,
     "copy engines: two ranks, from 32 MB per rank"},
    {C(ALLREDUCE), W_DEVICE_BUFS | W_RANKS_2 | W_ONE_PROCESS, M_BYTES, 64 * MB, INF, TUTTI_ALGO_CE,
     "copy engines: two ranks in one process, from 64 MB"},
    /* The mapped kernel (one handshake instead of a ring's three) halves
     * the time of small collectives and, every thread pushing and the
     * combine inlined, beats the ring to 16 MB per rank (8 MB allreduce
     * 45.6 against 55.4 us; reduce-scatter and all-gather of 8 MB per rank
     * 47.9 / 47.1 against 58.0 / 53.7); from 32 MB the ring's pipeline
     * catches up. A broadcast's ring is a plain chain already at the link:
     * the mapped kernel is slower from 8 MB. With more ranks an allreduce,
     * broadcast or reduce pushes n-1 copies out of one GPU: up to 1 MB (not
     * measured on more than two GPUs). */
    {C(BROADCAST), W_DEVICE_BUFS | W_RANKS_2, M_BYTES, 0, 4 * MB, TUTTI_ALGO_MAPPED,
     "mapped kernel: two ranks, broadcasts up to 4 MB"},
    {C(ALLREDUCE) | C(REDUCESCATTER) | C(ALLGATHER) | C(REDUCE), W_DEVICE_BUFS | W_RANKS_2, M_BYTES,
     0, 16 * MB, TUTTI_ALGO_MAPPED, "mapped kernel: two ranks, up to 16 MB"},
    {ANY, W_DEVICE_BUFS | W_RANKS_3, M_BYTES, 0, 1 * MB, TUTTI_ALGO_MAPPED,
     "mapped kernel: up to 1 MB"},
    /* Device schedules: a call that moves nothing (a point-to-point pair of
     * 0 bytes) runs as one round. */
    {ANY, W_DEVICE_BUFS, M_BUSIEST, 0, 0, TUTTI_ALGO_DIRECT, "direct schedule: nothing to move"},
    /* Device schedules: the ring moves each byte over each link once and
     * needs no scratch (a captured graph allocates nothing). */
    {ANY, W_DEVICE_BUFS, M_BYTES, 0, INF, TUTTI_ALGO_RING,
     "ring schedule: each byte over each link once, no scratch"},
    /* Several hosts, several ranks on some host: one rank per host on the
     * network. */
    {C(ALLREDUCE), W_HOSTS | W_LOCAL_MANY, M_BYTES, 0, INF, TUTTI_ALGO_HIER,
     "hier: several hosts, several ranks on some host"},
    /* 2 log2 H steps instead of 2(H-1): latency-bound steps halved (not
     * measured: no run had four hosts). */
    {C(ALLREDUCE), W_HOSTS | W_HOSTS_4, M_BYTES, 0, TREE_MAX_BYTES, TUTTI_ALGO_TREE,
     "tree: from 4 hosts, up to 1 MB"},
    {ANY, 0, M_BYTES, 0, INF, TUTTI_ALGO_RING,
     "ring: bandwidth-bound, 2(N-1)/N of the data per rank"},
};

/* TUTTI_TUNE's rows (override.c parses them once), as rows. */
#define OVERRIDE_MAX TUTTI_TUNE_MAX_RULES
static struct row overrides[OVERRIDE_MAX];
static int noverrides;
static pthread_once_t override_once = PTHREAD_ONCE_INIT;
static int host_cpus;

static void load(void) {
  cpu_set_t set;
  host_cpus = sched_getaffinity(0, sizeof set, &set) == 0 ? CPU_COUNT(&set) : 1;
  const struct tutti_tune_override* o = tutti_tune_override();
  for (int i = 0; i < o->nrules; i++) {
    const struct tutti_tune_rule* r = &o->rules[i];
    overrides[i] = (struct row){r->colls, W_FORCED, M_BYTES, r->lo, r->hi, r->algo, "TUTTI_TUNE"};
  }
  noverrides = o->nrules;
}

static size_t measure(const struct tutti_coll_args* a, enum measure m) {
  const size_t b = a->count * a->elem_size;
  switch (m) {
    case M_MESSAGE:
      return a->coll == TUTTI_COLL_ALLGATHER || a->coll == TUTTI_COLL_REDUCESCATTER
                 ? b * (size_t)a->nranks
                 : b;
    case M_BUSIEST:
      return a->coll == TUTTI_COLL_SEND || a->coll == TUTTI_COLL_RECV ||
                     a->coll == TUTTI_COLL_ALLTOALL
                 ? b
                 : b * (size_t)(a->nranks - 1);
    default:
      return b;
  }
}

static unsigned conditions(const struct tutti_coll_args* a, const struct tutti_tune_offer* o) {
  const int oversub = a->max_local > host_cpus;
  return (a->nhosts == 1 ? W_ONE_HOST : W_HOSTS) | (oversub ? W_OVERSUB : W_CORES) |
         (a->in_place ? 0 : W_OUT_OF_PLACE) | (a->max_local > 1 ? W_LOCAL_MANY : 0) |
         (a->nhosts >= TREE_MIN_HOSTS ? W_HOSTS_4 : 0) | (a->device ? W_DEVICE_BUFS : W_HOST_BUFS) |
         (a->nranks == 2  ? W_RANKS_2
          : a->nranks > 2 ? W_RANKS_3
                          : 0) |
         (o != NULL && o->caps->one_process ? W_ONE_PROCESS : 0);
}

/* Where a device path can run at all: a single collective it implements,
 * between GPUs that map each other (and, for the copy engines, no scalar to
 * scale by, no graph being captured). */
static int device_can_run(const struct tutti_coll_args* a, enum tutti_algo_id algo,
                          const struct tutti_tune_offer* o) {
  const struct tutti_dev_caps* c = o->caps;
  const int single = o->nops == 1 && (c->colls & (1u << a->coll)) && a->count * a->elem_size > 0 &&
                     a->nranks >= 2 && a->nranks <= c->lim.mapped_max_ranks;
  if (algo == TUTTI_ALGO_CE) {
    return single && c->ce_slot_bytes != 0 && !o->premulsum && !c->capturing;
  }
  return single && algo == TUTTI_ALGO_MAPPED && c->mapped_chan_bytes != 0;
}

/* Whether `algo` can run `a` here (forced: also where it is not worth it;
 * o: a device launch, NULL when a schedule is wanted). */
static int can_run(const struct tutti_coll_args* a, enum tutti_algo_id algo, int forced,
                   const struct tutti_tune_offer* o) {
  if (algo == TUTTI_ALGO_MAPPED || algo == TUTTI_ALGO_CE) {
    return o != NULL && device_can_run(a, algo, o);
  }
  if (tutti_algo_get(algo)->build[a->coll] == NULL) {
    return 0;
  }
  const size_t bytes = a->count * a->elem_size;
  switch (algo) {
    case TUTTI_ALGO_PULL: {
      const int reduces = a->coll == TUTTI_COLL_ALLREDUCE || a->coll == TUTTI_COLL_REDUCESCATTER;
      return a->can_pull && a->nranks > 1 && (forced || !reduces || a->can_pull == 2);
    }
    case TUTTI_ALGO_BOARD:
      return a->board_bytes > 0 && a->nranks > 1 &&
             (a->coll != TUTTI_COLL_ALLREDUCE || bytes <= a->board_bytes);
    default:
      return 1;
  }
}

enum tutti_algo_id tutti_tune_table(const struct tutti_coll_args* a, unsigned allowed,
                                    const struct tutti_tune_offer* o, const char** why) {
  pthread_once(&override_once, load);
  const unsigned have = conditions(a, o);
  const size_t nd = sizeof defaults / sizeof defaults[0];
  for (size_t i = 0; i < (size_t)noverrides + nd; i++) {
    const struct row* r = i < (size_t)noverrides ? &overrides[i] : &defaults[i - noverrides];
    const unsigned need = r->when & ~(unsigned)W_FORCED;
    const size_t size = measure(a, r->measure);
    if (!(r->colls & (1u << a->coll)) || (have & need) != need || size < r->lo || size > r->hi ||
        !(allowed & (1u << r->algo)) || !can_run(a, r->algo, (r->when & W_FORCED) != 0, o)) {
      continue;
    }
    *why = r->why;
    return r->algo;
  }
  *why = NULL;
  return TUTTI_ALGO_COUNT;
}

int tutti_tune_table_inter(const struct tutti_coll_args* a) {
  /* The tree row's range, for the hierarchical allreduce's exchange among
   * one rank per host. */
  return a->nhosts >= TREE_MIN_HOSTS && a->count * a->elem_size <= TREE_MAX_BYTES ? TUTTI_ALGO_TREE
                                                                                  : TUTTI_ALGO_RING;
}

int tutti_tune_table_can_run(const struct tutti_coll_args* a, enum tutti_algo_id algo) {
  return can_run(a, algo, 1, NULL);
}
