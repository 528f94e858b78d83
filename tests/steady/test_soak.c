/* A seeded random sequence of collectives and send/recv pairs, with random
 * sizes (0 to about 1 MB), datatypes, reductions and roots, sometimes several
 * in one ncclGroupStart/End, on two communicators (the world and one from
 * ncclCommSplit), ranks as processes; every result is checked exactly (a
 * tolerance only for avg on floating types). Usage:
 *   test_soak [--ranks N] [--seconds S] [--iters N] [--seed X]
 * Defaults: 4 ranks, 20 seconds, no iteration limit, a seed from the clock;
 * TUTTI_SOAK_SEED and TUTTI_SOAK_SECONDS set the seed and duration too (the
 * arguments win). Prints the seed first and "N passed, N failed" last. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "checker.h"
#include "procs.h"
#include "nccl.h"
#include "reduce/reduce.h"

enum {
  K_ALLREDUCE,
  K_BROADCAST,
  K_REDUCE,
  K_ALLGATHER,
  K_REDUCESCATTER,
  K_ALLTOALL,
  K_GATHER,
  K_SCATTER,
  K_SENDRECV,
  K_NKIND
};
static const char* kname[K_NKIND] = {"AllReduce", "Broadcast",     "Reduce",
                                     "AllGather", "ReduceScatter", "AlltoAll",
                                     "Gather",    "Scatter",       "SendRecv"};

#define MAX_BYTES (1 << 20)
#define MAX_GROUP 4
#define CHECK_EVERY 8 /* operations between the ranks' agreement on stopping */

static long passed, failed;
static int nprinted;

/* One write per line, so that lines of several ranks do not mix. */
#define FAILF(...)                                \
  do {                                            \
    failed++;                                     \
    if (nprinted++ < 20) {                        \
      char line_[600];                            \
      snprintf(line_, sizeof line_, __VA_ARGS__); \
      fprintf(stderr, "%s\n", line_);             \
    }                                             \
  } while (0)

/* xorshift64*: the same sequence on every rank from the same seed. */
static uint64_t rng_state;
static uint64_t rnd(void) {
  rng_state ^= rng_state >> 12;
  rng_state ^= rng_state << 25;
  rng_state ^= rng_state >> 27;
  return rng_state * 2685821657736338717ull;
}
static uint32_t below(uint32_t n) {
  return n ? (uint32_t)(rnd() >> 33) % n : 0;
}

struct op {
  int kind, which; /* which communicator: 0 world, 1 split */
  ncclDataType_t t;
  int red;
  size_t count;
  uint32_t root_draw, shift_draw;
  int inplace;
  /* this rank's view */
  int n, r, root, to, from;
  char *send, *recv;
  char* sbuf;
  char* rbuf;
};

static int reduces(int k) {
  return k == K_ALLREDUCE || k == K_REDUCE || k == K_REDUCESCATTER;
}

/* Draws one operation; every rank draws the same. */
static void draw(struct op* o) {
  memset(o, 0, sizeof *o);
  o->kind = (int)below(K_NKIND);
  o->which = (int)below(2);
  o->t = (ncclDataType_t)below(ncclNumTypes);
  o->red = (int)below(ncclNumOps);
  /* Sizes spread over every power of two up to MAX_BYTES, zero included. */
  size_t bytes = below(8) == 0 ? 0 : (size_t)below(1u << below(21));
  o->count = bytes / tutti_type_size(o->t);
  o->root_draw = (uint32_t)rnd();
  o->shift_draw = (uint32_t)rnd();
  o->inplace = (int)below(2);
}

/* Allocates and fills this rank's buffers for `o` on a communicator of `n`
 * ranks where it is rank `r`. */
static void prepare(struct op* o, int n, int r) {
  const size_t es = tutti_type_size(o->t);
  /* Operations over n blocks keep the whole under MAX_BYTES. */
  if (o->kind == K_ALLGATHER || o->kind == K_REDUCESCATTER || o->kind == K_ALLTOALL ||
      o->kind == K_GATHER || o->kind == K_SCATTER)
    o->count /= (size_t)n;
  o->n = n;
  o->r = r;
  o->root = (int)(o->root_draw % (uint32_t)n);
  uint32_t shift = o->shift_draw % (uint32_t)n;
  o->to = (r + (int)shift) % n;
  o->from = (r - (int)shift + n) % n;
  const size_t big = o->count * (size_t)n;
  o->sbuf = malloc(big * es + 64);
  o->rbuf = malloc(big * es + 64);
  memset(o->rbuf, 0x5a, big * es + 64);
  o->send = o->sbuf;
  o->recv = o->rbuf;
  int k = o->kind;
  size_t in_elems = (k == K_REDUCESCATTER || k == K_ALLTOALL || k == K_SCATTER) ? big : o->count;
  if (o->inplace && k != K_SENDRECV) {
    switch (k) {
      case K_ALLGATHER:
        o->send = o->rbuf + (size_t)r * o->count * es;
        break;
      case K_REDUCESCATTER:
        o->recv = o->sbuf + (size_t)r * o->count * es;
        break;
      case K_GATHER:
        o->send = r == o->root ? o->rbuf + (size_t)r * o->count * es : o->sbuf;
        break;
      case K_SCATTER:
        o->recv = r == o->root ? o->sbuf + (size_t)r * o->count * es : o->rbuf;
        break;
      default:
        o->send = o->rbuf;
        break;
    }
  }
  chk_fill(o->send, o->t, reduces(k) ? o->red : ncclSum, r, 0, in_elems);
}

static ncclResult_t issue(struct op* o, ncclComm_t comm) {
  switch (o->kind) {
    case K_ALLREDUCE:
      return ncclAllReduce(o->send, o->recv, o->count, o->t, (ncclRedOp_t)o->red, comm, NULL);
    case K_BROADCAST:
      return ncclBroadcast(o->send, o->recv, o->count, o->t, o->root, comm, NULL);
    case K_REDUCE:
      return ncclReduce(o->send, o->recv, o->count, o->t, (ncclRedOp_t)o->red, o->root, comm, NULL);
    case K_ALLGATHER:
      return ncclAllGather(o->send, o->recv, o->count, o->t, comm, NULL);
    case K_REDUCESCATTER:
      return ncclReduceScatter(o->send, o->recv, o->count, o->t, (ncclRedOp_t)o->red, comm, NULL);
    case K_ALLTOALL:
      return ncclAlltoAll(o->send, o->recv, o->count, o->t, comm, NULL);
    case K_GATHER:
      return ncclGather(o->send, o->recv, o->count, o->t, o->root, comm, NULL);
    case K_SCATTER:
      return ncclScatter(o->send, o->recv, o->count, o->t, o->root, comm, NULL);
    default: {
      ncclResult_t a = ncclGroupStart();
      ncclResult_t b = ncclSend(o->send, o->count, o->t, o->to, comm, NULL);
      ncclResult_t c = ncclRecv(o->recv, o->count, o->t, o->from, comm, NULL);
      ncclResult_t d = ncclGroupEnd();
      return a != ncclSuccess ? a : b != ncclSuccess ? b : c != ncclSuccess ? c : d;
    }
  }
}

/* Checks the result of `o` and frees its buffers. */
static void verify(struct op* o, long seq, int world_rank) {
  const size_t es = tutti_type_size(o->t);
  const size_t count = o->count, big = count * (size_t)o->n;
  int k = o->kind, n = o->n, r = o->r;
  char what[200];
  snprintf(what, sizeof what,
           "op %ld: world rank %d, rank %d/%d of comm %d: %s %s op %d count %zu %s root %d", seq,
           world_rank, r, n, o->which, kname[k], tutti_type_name(o->t), o->red, count,
           o->inplace ? "in-place" : "out-of-place", o->root);
  int ok = 1;
  if (reduces(k)) {
    int has = k != K_REDUCE || r == o->root;
    size_t first = k == K_REDUCESCATTER ? (size_t)r * count : 0;
    for (size_t i = 0; has && i < count && ok; i++) {
      double want = chk_round(o->t, chk_reduce_ref(o->t, o->red, n, first + i, 1));
      double got = chk_get(o->recv, o->t, i);
      if (!chk_equal(o->t, o->red, n, first + i, got, want)) {
        FAILF("%s: element %zu is %g, expected %g", what, i, got, want);
        ok = 0;
      }
    }
  } else {
    char* ref = malloc(big * es + 64);
    size_t out_elems = count;
    switch (k) {
      case K_BROADCAST:
        chk_fill(ref, o->t, ncclSum, o->root, 0, count);
        break;
      case K_ALLGATHER:
      case K_GATHER:
        for (int p = 0; p < n; p++)
          chk_fill(ref + (size_t)p * count * es, o->t, ncclSum, p, 0, count);
        out_elems = (k == K_GATHER && r != o->root) ? 0 : big;
        break;
      case K_ALLTOALL:
        for (int p = 0; p < n; p++)
          chk_fill(ref + (size_t)p * count * es, o->t, ncclSum, p, (size_t)r * count, count);
        out_elems = big;
        break;
      case K_SCATTER:
        chk_fill(ref, o->t, ncclSum, o->root, (size_t)r * count, count);
        break;
      default: /* send/recv: what `from` sent */
        chk_fill(ref, o->t, ncclSum, o->from, 0, count);
        break;
    }
    if (out_elems > 0 && memcmp(o->recv, ref, out_elems * es) != 0) {
      FAILF("%s: received bytes differ from the expected ones", what);
      ok = 0;
    }
    free(ref);
  }
  if (ok)
    passed++;
  free(o->sbuf);
  free(o->rbuf);
}

static double now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* Whether any rank wants to stop (its time is up or it saw a failure). */
static int agree_stop(ncclComm_t world, int mine) {
  int32_t* flag = malloc(sizeof *flag);
  *flag = mine;
  ncclResult_t res = ncclAllReduce(flag, flag, 1, ncclInt32, ncclMax, world, NULL);
  int stop = res != ncclSuccess || *flag != 0;
  if (res != ncclSuccess)
    FAILF("stop agreement failed: %s", ncclGetLastError(world));
  free(flag);
  return stop;
}

static void run_rank(int n, int r, ncclUniqueId id, uint64_t seed, double seconds, long iters) {
  ncclComm_t comm[2];
  if (ncclCommInitRank(&comm[0], n, id, r) != ncclSuccess) {
    FAILF("rank %d/%d: init failed: %s", r, n, ncclGetLastError(NULL));
    return;
  }
  /* Two halves, ordered backwards, so split ranks differ from world ranks. */
  if (ncclCommSplit(comm[0], r % 2, n - r, &comm[1], NULL) != ncclSuccess) {
    FAILF("rank %d/%d: split failed: %s", r, n, ncclGetLastError(comm[0]));
    ncclCommDestroy(comm[0]);
    return;
  }
  int size[2], rank[2];
  for (int c = 0; c < 2; c++) {
    ncclCommCount(comm[c], &size[c]);
    ncclCommUserRank(comm[c], &rank[c]);
  }
  rng_state = seed ? seed : 1;
  const int verbose = getenv("TUTTI_SOAK_VERBOSE") != NULL;
  const double end = now() + seconds;
  long seq = 0;
  for (long step = 0; iters == 0 || seq < iters; step++) {
    if (step % CHECK_EVERY == 0 && agree_stop(comm[0], failed > 0 || (seconds > 0 && now() > end)))
      break;
    /* One operation alone, or a group of several. */
    int grouped = below(4) == 0;
    int nops = grouped ? 1 + (int)below(MAX_GROUP) : 1;
    struct op ops[MAX_GROUP];
    for (int i = 0; i < nops; i++) {
      draw(&ops[i]);
      prepare(&ops[i], size[ops[i].which], rank[ops[i].which]);
    }
    if (verbose && r == 0) {
      for (int i = 0; i < nops; i++)
        printf("op %ld%s: comm %d %s %s op %d count %zu%s root %d shift %u\n", seq + i,
               grouped ? " (grouped)" : "", ops[i].which, kname[ops[i].kind],
               tutti_type_name(ops[i].t), ops[i].red, ops[i].count,
               ops[i].inplace ? " in-place" : "", ops[i].root, ops[i].shift_draw % (uint32_t)n);
      fflush(stdout);
    }
    ncclResult_t gres = grouped ? ncclGroupStart() : ncclSuccess;
    int bad = 0;
    for (int i = 0; i < nops; i++) {
      ncclResult_t res = issue(&ops[i], comm[ops[i].which]);
      if (res != ncclSuccess && res != ncclInProgress) {
        FAILF("op %ld: rank %d: %s returned %d: %s", seq + i, r, kname[ops[i].kind], (int)res,
              ncclGetLastError(comm[ops[i].which]));
        bad = 1;
      }
    }
    if (grouped)
      gres = ncclGroupEnd();
    if (gres != ncclSuccess) {
      FAILF("op %ld: rank %d: group of %d returned %d: %s", seq, r, nops, (int)gres,
            ncclGetLastError(comm[0]));
      bad = 1;
    }
    for (int i = 0; i < nops; i++) {
      if (!bad)
        verify(&ops[i], seq + i, r);
      else {
        free(ops[i].sbuf);
        free(ops[i].rbuf);
      }
    }
    seq += nops;
    if (bad)
      break; /* after a failed call the communicators are unusable */
  }
  ncclCommDestroy(comm[1]);
  ncclCommDestroy(comm[0]);
}

struct soak_job {
  int n;
  uint64_t seed;
  double seconds;
  long iters;
};

static void soak_child(int r, void* arg, long* p, long* f) {
  const struct soak_job* j = arg;
  ncclUniqueId id; /* from NCCL_COMM_ID (procs_comm_id): the same on every rank */
  if (ncclGetUniqueId(&id) != ncclSuccess) {
    fprintf(stderr, "rank %d: ncclGetUniqueId failed: %s\n", r, ncclGetLastError(NULL));
    failed++;
  } else {
    run_rank(j->n, r, id, j->seed, j->seconds, j->iters);
  }
  *p = passed;
  *f = failed;
}

int main(int argc, char** argv) {
  int n = 4;
  double seconds = 20;
  int seconds_set = 0;
  long iters = 0;
  uint64_t seed = (uint64_t)time(NULL) ^ ((uint64_t)getpid() << 20);
  const char* env = getenv("TUTTI_SOAK_SEED");
  if (env && *env)
    seed = strtoull(env, NULL, 0);
  env = getenv("TUTTI_SOAK_SECONDS");
  if (env && *env)
    seconds = atof(env), seconds_set = 1;
  for (int i = 1; i < argc; i++) {
    const char* v = i + 1 < argc ? argv[i + 1] : NULL;
    if (strcmp(argv[i], "--ranks") == 0 && v)
      n = atoi(v), i++;
    else if (strcmp(argv[i], "--seconds") == 0 && v)
      seconds = atof(v), seconds_set = 1, i++;
    else if (strcmp(argv[i], "--iters") == 0 && v)
      iters = atol(v), i++;
    else if (strcmp(argv[i], "--seed") == 0 && v)
      seed = strtoull(v, NULL, 0), i++;
    else {
      fprintf(stderr, "usage: %s [--ranks N] [--seconds S] [--iters N] [--seed X]\n", argv[0]);
      return 2;
    }
  }
  if (n < 1 || n > 8) {
    fprintf(stderr, "--ranks must be 1 to 8 (the checker's inputs are exact up to 8)\n");
    return 2;
  }
  if (iters > 0 && !seconds_set)
    seconds = 0; /* --iters alone: run them all */
  printf("seed %llu, %d ranks, %g seconds, %ld iterations (0: no limit)\n",
         (unsigned long long)seed, n, seconds, iters);
  fflush(stdout);
  /* Small queues, so that sizes far exceed them. */
  setenv("NCCL_BUFFSIZE", "65536", 0);
  if (procs_comm_id() != 0) {
    fprintf(stderr, "no free loopback port for NCCL_COMM_ID\n");
    return 1;
  }
  struct soak_job j = {n, seed, seconds, iters};
  long p = 0, f = 0;
  procs_run(n, soak_child, &j, &p, &f);
  printf("seed %llu: %ld passed, %ld failed\n", (unsigned long long)seed, p, f);
  return f == 0 ? 0 : 1;
}
