/* Reductions against a reference fold, bit for bit, on inputs that make the
 * order of a floating-point fold visible (tests/common/fold_ref.h):
 * allreduce, reduce-scatter and reduce of every floating type and two
 * integer types, with sum, product, max, min, avg and PreMulSum, in place
 * and out of place, counts from one element to past a chunk: blocks of
 * chunk - 1, chunk and chunk + 1 elements with count % n in {0, 1, n - 1}
 * (tests/common/cuts.h), each element size in turn.
 *
 *   test_ordered MODE NRANKS[,NRANKS...] EXPECT
 *   MODE    threads (one process), procs (one host), hosts (every rank its
 *           own host, NCCL_HOSTID: TCP), pairs (two ranks per host)
 *   EXPECT  ordered: TUTTI_DETERMINISTIC=1 is set; every element must be
 *             folded in rank order 0, 1, ..., n-1 whatever algorithm the
 *             environment (NCCL_ALGO, TUTTI_TUNE, NCCL_BUFFSIZE) forces;
 *           ring: the default mode under NCCL_ALGO=Ring must fold as the
 *             ring always did (block b from rank b around the ring; a
 *             reduce-scatter's shard b from rank b+1; a reduce from
 *             root+1): what deterministic mode leaves unchanged.
 * Prints "N passed, N failed"; exits 1 on any failure. */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "algo/pattern.h"
#include "cuts.h"
#include "fold_ref.h"
#include "nccl.h"
#include "procs.h"
#include "ranks.h"

static const ncclDataType_t types[] = {ncclFloat32,    ncclFloat64,    ncclFloat16, ncclBfloat16,
                                       ncclFloat8e4m3, ncclFloat8e5m2, ncclInt32,   ncclUint8};
#define NTYPES (sizeof types / sizeof types[0])
/* Elements of the whole vector; past a queue: the cut points. */
static const size_t counts[] = {1, 7, 1000};
#define NCOUNTS (sizeof counts / sizeof counts[0])
enum { ALLREDUCE, REDUCESCATTER, REDUCE, NCOLLS };
static const char* const coll_names[NCOLLS] = {"allreduce", "reducescatter", "reduce"};
static const char* const op_names[FR_NOPS] = {"sum", "prod", "max", "min", "avg", "premulsum"};
#define PREMUL_SCALAR 0.75

static const char* mode;
static int expect_ring; /* the reference: 0 rank order, 1 the ring's orders */

/* The order element i of a vector of `total` elements is folded in. */
static void order_of(int coll, int n, int root, size_t total, size_t i, int* ord) {
  int first = 0;
  if (expect_ring && coll == ALLREDUCE) {
    int b = 0;
    while (b + 1 < n && i >= tutti_block_off(total, n, b + 1)) {
      b++;
    }
    first = b;
  } else if (expect_ring && coll == REDUCESCATTER) {
    first = (int)(i / (total / (size_t)n)) + 1;
  } else if (expect_ring) {
    first = root + 1;
  }
  for (int k = 0; k < n; k++) {
    ord[k] = (first + k) % n;
  }
}

struct counts {
  long passed, failed;
};

static void fill(void* buf, ncclDataType_t t, int op, int rank, size_t n) {
  for (size_t i = 0; i < n; i++) {
    fr_put(t, buf, i, fr_input(t, op, rank, i));
  }
}

/* One call on rank `rank`; checks its output against the reference. */
static void one_case(ncclComm_t comm, int rank, int n, int coll, ncclDataType_t t, int op,
                     size_t total, int in_place, struct counts* c) {
  const size_t es = tutti_type_size(t);
  const size_t per = coll == REDUCESCATTER ? total / (size_t)n : total;
  const int root = n - 1;
  char* send = malloc(total * es + 64);
  char* recv = malloc(total * es + 64);
  if (send == NULL || recv == NULL) {
    c->failed++;
    free(send);
    free(recv);
    return;
  }
  fill(send, t, op, rank, total);
  memset(recv, 0xa5, total * es);
  char* out = recv;
  const char* in = send;
  if (in_place) {
    /* NCCL's in-place layouts: a reduce-scatter's output is the rank's block. */
    out = coll == REDUCESCATTER ? send + (size_t)rank * per * es : send;
  }
  ncclRedOp_t rop = (ncclRedOp_t)op;
  uint64_t scalar = 0;
  if (op == FR_PREMUL) {
    scalar = fr_is_float(t) ? fr_enc_f(t, (float)PREMUL_SCALAR) : 1;
    if (t == ncclFloat64) {
      double d = PREMUL_SCALAR;
      memcpy(&scalar, &d, 8);
    }
    if (ncclRedOpCreatePreMulSum(&rop, &scalar, t, ncclScalarHostImmediate, comm) != ncclSuccess) {
      c->failed++;
      goto done;
    }
  }
  ncclResult_t res;
  if (coll == ALLREDUCE) {
    res = ncclAllReduce(in, out, total, t, rop, comm, NULL);
  } else if (coll == REDUCESCATTER) {
    res = ncclReduceScatter(in, out, per, t, rop, comm, NULL);
  } else {
    res = ncclReduce(in, out, total, t, rop, root, comm, NULL);
  }
  if (op == FR_PREMUL) {
    ncclRedOpDestroy(rop, comm);
  }
  if (res != ncclSuccess) {
    fprintf(stderr, "FAIL rank %d: %s %s %s count %zu: %s\n", rank, coll_names[coll],
            tutti_type_name(t), op_names[op], total, ncclGetLastError(comm));
    c->failed++;
    goto done;
  }
  if (coll == REDUCE && rank != root) {
    goto done; /* nothing to check */
  }
  const size_t first = coll == REDUCESCATTER ? (size_t)rank * per : 0;
  const double sc = fr_is_float(t) ? PREMUL_SCALAR : 1.0;
  long bad = 0;
  int ord[64];
  uint64_t xs[64];
  for (size_t j = 0; j < per; j++) {
    const size_t i = first + j;
    order_of(coll, n, root, coll == REDUCESCATTER ? per * (size_t)n : total, i, ord);
    for (int r = 0; r < n; r++) {
      xs[r] = fr_input(t, op, r, i);
    }
    const uint64_t want = fr_fold(t, op, n, ord, xs, sc);
    const uint64_t got = fr_get(t, out, j);
    if (!fr_same(t, op, got, want) && bad++ < 3) {
      fprintf(stderr,
              "FAIL %s rank %d/%d: %s %s %s count %zu%s: element %zu is 0x%llx, the fold "
              "(first rank %d) gives 0x%llx\n",
              mode, rank, n, coll_names[coll], tutti_type_name(t), op_names[op], total,
              in_place ? " in place" : "", i, (unsigned long long)got, ord[0],
              (unsigned long long)want);
    }
  }
  *(bad ? &c->failed : &c->passed) += 1;
done:
  free(send);
  free(recv);
}

/* One type of `es` bytes, taken in turn. */
static ncclDataType_t type_of_size(size_t es, size_t turn) {
  ncclDataType_t of[NTYPES];
  size_t k = 0;
  for (size_t ti = 0; ti < NTYPES; ti++) {
    if (tutti_type_size(types[ti]) == es) {
      of[k++] = types[ti];
    }
  }
  return of[turn % k];
}

static void run_cases(ncclComm_t comm, int rank, int n, int nhosts, struct counts* c) {
  for (int coll = 0; coll < NCOLLS; coll++) {
    for (size_t k = 0; k < NCOUNTS; k++) {
      /* Reduce-scatter: the whole vector a multiple of n. */
      const size_t total =
          coll == REDUCESCATTER ? (counts[k] / (size_t)n + 1) * (size_t)n : counts[k];
      for (size_t ti = 0; ti < NTYPES; ti++) {
        for (int op = 0; op < FR_NOPS; op++) {
          for (int ip = 0; ip < 2; ip++) {
            one_case(comm, rank, n, coll, types[ti], op, total, ip, c);
          }
        }
      }
    }
  }
  /* The cut points of the chunk this placement's queues give: types, ops
   * and placements in turn. A reduce-scatter's shard is one block. */
  const size_t chunk = cuts_chunk_bytes(n, nhosts);
  for (int coll = 0; coll < NCOLLS; coll++) {
    for (size_t es = 1, ei = 0; es <= 8; es *= 2, ei++) {
      if (chunk > (256u << 10) && ei != (size_t)(coll + n) % 4) {
        continue; /* chunks of megabytes (default queues): one size a collective, in turn */
      }
      size_t cs[CUTS_MAX];
      int len = 0;
      cuts_counts(cs, &len, CUTS_MAX, chunk, es, n, 1,
                  coll == REDUCESCATTER ? CUTS_WHOLE : CUTS_WHOLE | CUTS_SPLIT, 0);
      for (int i = 0; i < len; i++) {
        const size_t total = coll == REDUCESCATTER ? cs[i] * (size_t)n : cs[i];
        one_case(comm, rank, n, coll, type_of_size(es, (size_t)i), (i + coll) % FR_NOPS, total,
                 (i + (int)es) & 1, c);
      }
    }
  }
}

static void rank_body(int rank, int n, const ncclUniqueId* id, struct counts* c) {
  char host[32];
  if (strcmp(mode, "hosts") == 0 || strcmp(mode, "pairs") == 0) {
    snprintf(host, sizeof host, "ordered-host-%d", strcmp(mode, "hosts") == 0 ? rank : rank / 2);
    setenv("NCCL_HOSTID", host, 1);
  }
  ncclComm_t comm;
  if (ncclCommInitRank(&comm, n, *id, rank) != ncclSuccess) {
    fprintf(stderr, "FAIL rank %d: init: %s\n", rank, ncclGetLastError(NULL));
    c->failed++;
    return;
  }
  const int nhosts = strcmp(mode, "hosts") == 0 ? n : strcmp(mode, "pairs") == 0 ? (n + 1) / 2 : 1;
  run_cases(comm, rank, n, nhosts, c);
  ncclCommDestroy(comm);
}

static void proc_body(int rank, void* arg, long* passed, long* failed) {
  const int n = *(const int*)arg;
  ncclUniqueId id;
  struct counts c = {0, 0};
  if (ncclGetUniqueId(&id) != ncclSuccess) {
    c.failed++;
  } else {
    rank_body(rank, n, &id, &c);
  }
  *passed = c.passed;
  *failed = c.failed;
}

static struct counts thread_counts[64];

static void thread_body(struct rank_ctx* ctx) {
  rank_body(ctx->rank, ctx->nranks, &ctx->id, &thread_counts[ctx->rank]);
  ctx->result = thread_counts[ctx->rank].failed == 0;
}

/* Rank order and the ring's differ somewhere on these inputs (else the
 * test could not tell them apart): float sums over n ranks. */
static int orders_differ(int n) {
  int a[64], b[64];
  uint64_t xs[64];
  for (size_t i = 0; i < 1000; i++) {
    for (int k = 0; k < n; k++) {
      a[k] = k;
      b[k] = (k + 1) % n;
      xs[k] = fr_input(ncclFloat32, ncclSum, k, i);
    }
    if (!fr_same(ncclFloat32, ncclSum, fr_fold(ncclFloat32, ncclSum, n, a, xs, 1),
                 fr_fold(ncclFloat32, ncclSum, n, b, xs, 1))) {
      return 1;
    }
  }
  return 0;
}

int main(int argc, char** argv) {
  if (argc != 4 || (strcmp(argv[3], "ordered") != 0 && strcmp(argv[3], "ring") != 0)) {
    fprintf(stderr, "usage: %s threads|procs|hosts|pairs NRANKS[,NRANKS...] ordered|ring\n",
            argv[0]);
    return 2;
  }
  mode = argv[1];
  expect_ring = strcmp(argv[3], "ring") == 0;
  if (!expect_ring) {
    setenv("TUTTI_DETERMINISTIC", "1", 1);
  }
  long passed = 0, failed = 0;
  char list[64];
  snprintf(list, sizeof list, "%s", argv[2]);
  for (char* tok = strtok(list, ","); tok != NULL; tok = strtok(NULL, ",")) {
    int n = atoi(tok);
    if (n < 1 || n > 16) {
      fprintf(stderr, "bad rank count %s\n", tok);
      return 2;
    }
    if (n >= 3 && !orders_differ(n)) {
      fprintf(stderr, "FAIL: the inputs do not tell rank order from the ring's (n=%d)\n", n);
      failed++;
    }
    if (strcmp(mode, "threads") == 0) {
      memset(thread_counts, 0, sizeof thread_counts);
      run_ranks(n, thread_body, NULL);
      for (int r = 0; r < n; r++) {
        passed += thread_counts[r].passed;
        failed += thread_counts[r].failed;
      }
    } else {
      if (procs_comm_id() != 0) {
        fprintf(stderr, "FAIL: no free port for NCCL_COMM_ID\n");
        return 1;
      }
      procs_run(n, proc_body, &n, &passed, &failed);
    }
    printf("%s n=%d %s: %ld passed, %ld failed so far\n", mode, n, argv[3], passed, failed);
    fflush(stdout);
  }
  printf("%ld passed, %ld failed\n", passed, failed);
  return failed == 0 ? 0 : 1;
}
