/* Call agreement, fuzzed: each trial draws a short program of collectives
 * (every collective with host buffers, several types, reductions, roots and
 * counts, board and queue sizes) that 2-4 ranks run in order; in most
 * trials one rank changes one field of one call. Every call before that one
 * must succeed with exact results; that call must fail on every rank with
 * ncclInvalidUsage and a text naming both calls; every later call must fail
 * with the same text. Ranks as threads (many trials) and as processes.
 * Usage: test_agree_fuzz [threads|procs] [trials] [seed] */
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "checker.h"
#include "nccl.h"
#include "procs.h"
#include "ranks.h"
#include "reduce/reduce.h"

#define NCALLS 5

enum { F_AR, F_RS, F_AG, F_BC, F_RED, F_NCOLL };

struct fcall {
  int coll;
  ncclDataType_t type;
  int op;
  size_t count;
  int root;
};

struct trial {
  uint64_t seed;
  int n;
  int bad_call; /* index of the changed call, NCALLS: none */
  int bad_rank;
  struct fcall calls[NCALLS];
};

static uint64_t rnd(uint64_t* s) {
  *s ^= *s << 13;
  *s ^= *s >> 7;
  *s ^= *s << 17;
  return *s;
}

static const ncclDataType_t types[] = {ncclFloat32, ncclInt32,   ncclBfloat16,
                                       ncclInt8,    ncclFloat64, ncclUint32};

static int reduces(int coll) {
  return coll == F_AR || coll == F_RS || coll == F_RED;
}

static int rooted(int coll) {
  return coll == F_BC || coll == F_RED;
}

static struct fcall draw(uint64_t* s, int n) {
  struct fcall c;
  c.coll = (int)(rnd(s) % F_NCOLL);
  c.type = types[rnd(s) % 6];
  c.op = reduces(c.coll) ? (int)(rnd(s) % 4) : ncclSum; /* sum prod max min: exact */
  /* Board sizes (a few elements), then queue sizes (tens of KB). */
  c.count = rnd(s) % 3 == 0 ? 20000 + rnd(s) % 40000 : 1 + rnd(s) % 300;
  c.root = (int)(rnd(s) % (uint64_t)n);
  if (c.op == ncclProd) {
    c.count = c.count > 200 ? 200 : c.count;
  }
  return c;
}

/* One field of c changed so that the calls differ. */
static void change(struct fcall* c, uint64_t* s, int n) {
  for (;;) {
    switch (rnd(s) % 5) {
      case 0:
        c->count += 1 + rnd(s) % 3;
        return;
      case 1: {
        ncclDataType_t t = types[rnd(s) % 6];
        if (t != c->type) {
          c->type = t;
          return;
        }
        break;
      }
      case 2:
        if (reduces(c->coll)) {
          c->op = (c->op + 1 + (int)(rnd(s) % 3)) % 4;
          return;
        }
        break;
      case 3:
        if (rooted(c->coll) && n > 1) {
          c->root = (c->root + 1 + (int)(rnd(s) % (uint64_t)(n - 1))) % n;
          return;
        }
        break;
      default: {
        int k = (int)(rnd(s) % F_NCOLL);
        if (k != c->coll) {
          c->coll = k;
          c->op = reduces(k) ? ncclSum : c->op;
          return;
        }
      }
    }
  }
}

static ncclResult_t issue(const struct fcall* c, char* in, char* out, ncclComm_t comm) {
  const ncclRedOp_t op = (ncclRedOp_t)c->op;
  switch (c->coll) {
    case F_AR:
      return ncclAllReduce(in, out, c->count, c->type, op, comm, NULL);
    case F_RS:
      return ncclReduceScatter(in, out, c->count, c->type, op, comm, NULL);
    case F_AG:
      return ncclAllGather(in, out, c->count, c->type, comm, NULL);
    case F_BC:
      return ncclBroadcast(in, out, c->count, c->type, c->root, comm, NULL);
    default:
      return ncclReduce(in, out, c->count, c->type, op, c->root, comm, NULL);
  }
}

/* Whether `out` holds the exact result of c on rank r of n. */
static int exact(const struct fcall* c, const char* out, int r, int n) {
  const size_t es = tutti_type_size(c->type);
  size_t m = c->coll == F_AG ? c->count * (size_t)n : c->count;
  if (c->coll == F_RED && r != c->root) {
    return 1;
  }
  char* ref = malloc(m * es);
  if (ref == NULL) {
    return 0;
  }
  int ok = 1;
  if (reduces(c->coll)) {
    const size_t first = c->coll == F_RS ? (size_t)r * c->count : 0;
    for (size_t i = 0; i < m && ok; i++) {
      double want = chk_round(c->type, chk_reduce_ref(c->type, c->op, n, first + i, 2));
      ok = chk_equal(c->type, c->op, n, first + i, chk_get(out, c->type, i), want);
    }
  } else {
    for (int p = 0; p < (c->coll == F_AG ? n : 1); p++) {
      chk_fill(ref + (size_t)p * c->count * es, c->type, ncclSum, c->coll == F_AG ? p : c->root, 0,
               c->count);
    }
    ok = memcmp(ref, out, m * es) == 0;
  }
  free(ref);
  return ok;
}

/* Rank r's side of trial t: the number of wrong outcomes. */
static long run_trial(const struct trial* t, int r, const ncclUniqueId* id) {
  long bad = 0;
  const int n = t->n;
  const size_t cap = 60000 * (size_t)n * 8 + 64;
  char* in = malloc(cap);
  char* out = malloc(cap);
  ncclComm_t comm;
  ncclUniqueId own;
  if (id == NULL && ncclGetUniqueId(&own) == ncclSuccess) {
    id = &own;
  }
  if (in == NULL || out == NULL || id == NULL ||
      ncclCommInitRank(&comm, n, *id, r) != ncclSuccess) {
    fprintf(stderr, "trial %llx rank %d: init failed\n", (unsigned long long)t->seed, r);
    free(in);
    free(out);
    return 1;
  }
  char first[1024] = "";
  for (int k = 0; k < NCALLS; k++) {
    struct fcall c = t->calls[k];
    if (k == t->bad_call && r == t->bad_rank) {
      uint64_t s = t->seed ^ 0x5555;
      change(&c, &s, n);
    }
    const size_t es = tutti_type_size(c.type);
    const int fop = reduces(c.coll) ? c.op : ncclSum;
    chk_fill(in, c.type, fop, r, 0, c.coll == F_RS ? c.count * (size_t)n : c.count);
    memset(out, 0x5a, c.count * (size_t)n * es);
    ncclResult_t res = issue(&c, in, out, comm);
    const char* why = ncclGetLastError(comm);
    if (k < t->bad_call) {
      if (res != ncclSuccess || !exact(&c, out, r, n)) {
        fprintf(stderr, "trial %llx rank %d call %d: matching call gave %d (%s)\n",
                (unsigned long long)t->seed, r, k, (int)res, res ? why : "inexact");
        bad++;
        break;
      }
    } else if (k == t->bad_call) {
      if (res != ncclInvalidUsage || strstr(why, "mismatched collective calls") == NULL) {
        fprintf(stderr, "trial %llx rank %d call %d: the changed call gave %d: %s\n",
                (unsigned long long)t->seed, r, k, (int)res, why);
        bad++;
        break;
      }
      snprintf(first, sizeof first, "%s", why);
    } else if (res != ncclInvalidUsage || strcmp(why, first) != 0) {
      fprintf(stderr, "trial %llx rank %d call %d: after the failure %d: %s\n",
              (unsigned long long)t->seed, r, k, (int)res, why);
      bad++;
      break;
    }
  }
  ncclCommDestroy(comm);
  free(in);
  free(out);
  return bad;
}

static struct trial make_trial(uint64_t seed) {
  struct trial t;
  uint64_t s = seed * 0x9e3779b97f4a7c15ull + 1;
  t.seed = seed;
  t.n = 2 + (int)(rnd(&s) % 3);
  for (int k = 0; k < NCALLS; k++) {
    t.calls[k] = draw(&s, t.n);
  }
  t.bad_call = rnd(&s) % 4 == 0 ? NCALLS : (int)(rnd(&s) % NCALLS);
  t.bad_rank = (int)(rnd(&s) % (uint64_t)t.n);
  return t;
}

struct thread_job {
  const struct trial* t;
  long bad;
  pthread_mutex_t lock;
};

static void thread_body(struct rank_ctx* c) {
  struct thread_job* j = c->user;
  long bad = run_trial(j->t, c->rank, &c->id);
  pthread_mutex_lock(&j->lock);
  j->bad += bad;
  pthread_mutex_unlock(&j->lock);
  c->result = bad == 0;
}

static void proc_body(int r, void* arg, long* p, long* f) {
  long bad = run_trial(arg, r, NULL);
  *p += bad == 0;
  *f += bad;
}

int main(int argc, char** argv) {
  const char* mode = argc > 1 ? argv[1] : "threads";
  const int trials = argc > 2 ? atoi(argv[2]) : 200;
  const uint64_t seed0 = argc > 3 ? strtoull(argv[3], NULL, 0) : 1;
  long passed = 0, failed = 0;
  for (int i = 0; i < trials; i++) {
    struct trial t = make_trial(seed0 + (uint64_t)i);
    if (strcmp(mode, "procs") == 0) {
      if (procs_comm_id() != 0) {
        return 1;
      }
      procs_run(t.n, proc_body, &t, &passed, &failed);
    } else {
      struct thread_job j = {&t, 0, PTHREAD_MUTEX_INITIALIZER};
      run_ranks(t.n, thread_body, &j);
      passed += j.bad == 0;
      failed += j.bad;
    }
  }
  printf("%ld passed, %ld failed\n", passed, failed);
  return failed == 0 ? 0 : 1;
}
