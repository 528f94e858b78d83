/* Every collective x datatype x reduction x in-place/out-of-place x count,
 * with ranks as separate processes over shared memory, checked bit for bit
 * (a tolerance only for avg on floating types). Usage:
 *   test_coll_procs [nranks,...] [algo,...]     (defaults: 1,2,3,4,8 and default,Ring,Direct)
 * Prints one summary line per configuration and a final "N passed, N failed". */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "checker.h"
#include "procs.h"
#include "nccl.h"
#include "reduce/reduce.h"

enum {
  C_ALLREDUCE,
  C_REDUCE,
  C_REDUCESCATTER,
  C_BROADCAST,
  C_BCAST,
  C_ALLGATHER,
  C_ALLTOALL,
  C_GATHER,
  C_SCATTER,
  C_NCOLL
};
static const char* cname[C_NCOLL] = {"AllReduce", "Reduce",   "ReduceScatter", "Broadcast", "Bcast",
                                     "AllGather", "AlltoAll", "Gather",        "Scatter"};
static const size_t counts[] = {0, 1, 7, 1031, 20011};

static long passed, failed;
static int nprinted;

#define FAILF(...)                  \
  do {                              \
    failed++;                       \
    if (nprinted++ < 20) {          \
      fprintf(stderr, __VA_ARGS__); \
      fputc('\n', stderr);          \
    }                               \
  } while (0)

static int reduces(int c) {
  return c == C_ALLREDUCE || c == C_REDUCE || c == C_REDUCESCATTER;
}

static void run_case(ncclComm_t comm, int n, int r, int c, ncclDataType_t t, int op, size_t count,
                     int inplace, int root) {
  const size_t es = tutti_type_size(t);
  const size_t big = count * (size_t)n;
  char* sbuf = malloc(big * es + 64);
  char* rbuf = malloc(big * es + 64);
  char* ref = malloc(big * es + 64);
  memset(rbuf, 0x5a, big * es + 64);
  ncclRedOp_t rop = (ncclRedOp_t)op;
  double premul = 1;
  if (op == ncclNumOps) {
    /* PreMulSum by 2, the scalar alternately immediate and by pointer. */
    static char scalar[8];
    chk_two(t, scalar);
    premul = 2;
    ncclScalarResidence_t res = (count & 1) ? ncclScalarHostImmediate : ncclScalarDevice;
    if (ncclRedOpCreatePreMulSum(&rop, scalar, t, res, comm) != ncclSuccess) {
      FAILF("RedOpCreatePreMulSum failed: %s", ncclGetLastError(comm));
      goto out;
    }
  }
  /* Where this rank's input lives, and where its output goes. */
  char* send = sbuf;
  char* recv = rbuf;
  size_t in_elems = (c == C_REDUCESCATTER || c == C_ALLTOALL || c == C_SCATTER) ? big : count;
  if (inplace) {
    switch (c) {
      case C_ALLGATHER:
        send = rbuf + (size_t)r * count * es;
        break;
      case C_REDUCESCATTER:
        recv = sbuf + (size_t)r * count * es;
        break;
      case C_GATHER:
        send = r == root ? rbuf + (size_t)r * count * es : sbuf;
        break;
      case C_SCATTER:
        recv = r == root ? sbuf + (size_t)r * count * es : rbuf;
        break;
      default:
        send = rbuf;
        break;
    }
  }
  chk_fill(send, t, reduces(c) ? (op == ncclNumOps ? ncclSum : op) : ncclSum, r, 0, in_elems);
  ncclResult_t res = ncclSuccess;
  switch (c) {
    case C_ALLREDUCE:
      res = ncclAllReduce(send, recv, count, t, rop, comm, NULL);
      break;
    case C_REDUCE:
      res = ncclReduce(send, recv, count, t, rop, root, comm, NULL);
      break;
    case C_REDUCESCATTER:
      res = ncclReduceScatter(send, recv, count, t, rop, comm, NULL);
      break;
    case C_BROADCAST:
      res = ncclBroadcast(send, recv, count, t, root, comm, NULL);
      break;
    case C_BCAST:
      res = ncclBcast(r == root ? send : recv, count, t, root, comm, NULL);
      recv = r == root ? send : recv;
      break;
    case C_ALLGATHER:
      res = ncclAllGather(send, recv, count, t, comm, NULL);
      break;
    case C_ALLTOALL:
      res = ncclAlltoAll(send, recv, count, t, comm, NULL);
      break;
    case C_GATHER:
      res = ncclGather(send, recv, count, t, root, comm, NULL);
      break;
    case C_SCATTER:
      res = ncclScatter(send, recv, count, t, root, comm, NULL);
      break;
  }
  if (op == ncclNumOps) {
    ncclRedOpDestroy(rop, comm);
  }
  char what[160];
  snprintf(what, sizeof what, "rank %d/%d %s %s op %d count %zu %s root %d", r, n, cname[c],
           tutti_type_name(t), op, count, inplace ? "in-place" : "out-of-place", root);
  if (res != ncclSuccess) {
    FAILF("%s: returned %d: %s", what, (int)res, ncclGetLastError(comm));
    goto out;
  }
  int ok = 1;
  if (reduces(c)) {
    int has = c != C_REDUCE || r == root;
    size_t first = c == C_REDUCESCATTER ? (size_t)r * count : 0;
    for (size_t i = 0; has && i < count && ok; i++) {
      double want =
          chk_round(t, chk_reduce_ref(t, op == ncclNumOps ? ncclNumOps : op, n, first + i, premul));
      double got = chk_get(recv, t, i);
      if (!chk_equal(t, op, n, first + i, got, want)) {
        FAILF("%s: element %zu is %g, expected %g", what, i, got, want);
        ok = 0;
      }
    }
  } else {
    /* Build the exact expected bytes from the ranks' inputs. */
    size_t out_elems = count;
    switch (c) {
      case C_BROADCAST:
      case C_BCAST:
        chk_fill(ref, t, ncclSum, root, 0, count);
        break;
      case C_ALLGATHER:
      case C_GATHER:
        for (int p = 0; p < n; p++)
          chk_fill(ref + (size_t)p * count * es, t, ncclSum, p, 0, count);
        out_elems = (c == C_GATHER && r != root) ? 0 : big;
        break;
      case C_ALLTOALL:
        for (int p = 0; p < n; p++)
          chk_fill(ref + (size_t)p * count * es, t, ncclSum, p, (size_t)r * count, count);
        out_elems = big;
        break;
      case C_SCATTER:
        chk_fill(ref, t, ncclSum, root, (size_t)r * count, count);
        break;
    }
    if (out_elems > 0 && memcmp(recv, ref, out_elems * es) != 0) {
      FAILF("%s: received bytes differ from the expected ones", what);
      ok = 0;
    }
  }
  if (ok)
    passed++;
out:
  free(sbuf);
  free(rbuf);
  free(ref);
}

/* Point-to-point: a ring exchange and a full all-to-all written as N sends
 * and N receives (self included) in one group. */
static void run_p2p(ncclComm_t comm, int n, int r) {
  const size_t count = 5003;
  int32_t* out = malloc((size_t)n * count * 4);
  int32_t* in = malloc((size_t)n * count * 4);
  for (size_t i = 0; i < (size_t)n * count; i++)
    out[i] = (int32_t)(r * 100000 + (int)i);
  ncclGroupStart();
  for (int p = 0; p < n; p++) {
    ncclSend(out + (size_t)p * count, count, ncclInt32, p, comm, NULL);
    ncclRecv(in + (size_t)p * count, count, ncclInt32, p, comm, NULL);
  }
  ncclResult_t res = ncclGroupEnd();
  int ok = res == ncclSuccess;
  for (int p = 0; p < n && ok; p++) {
    for (size_t i = 0; i < count; i++) {
      if (in[(size_t)p * count + i] != (int32_t)(p * 100000 + (int)((size_t)r * count + i))) {
        ok = 0;
        break;
      }
    }
  }
  if (ok)
    passed++;
  else
    FAILF("rank %d/%d: send/recv all-to-all group failed (%d): %s", r, n, (int)res,
          ncclGetLastError(comm));
  free(out);
  free(in);
}

/* Allreduces of mixed sizes in one group: several small ones in a row
 * (each a generation of the board, where it runs, reusing slot sets while
 * the group is in flight) between larger ones that take the queues. */
static void run_group_allreduces(ncclComm_t comm, int n, int r) {
  enum { K = 7 };
  const size_t counts_k[K] = {1, 1000, 3, 20011, 2, 4097, 16};
  int32_t* bufs[K];
  ncclGroupStart();
  for (int g = 0; g < K; g++) {
    bufs[g] = malloc(counts_k[g] * sizeof(int32_t));
    for (size_t i = 0; i < counts_k[g]; i++)
      bufs[g][i] = (int32_t)((r + 1) * (g + 1)) + (int32_t)(i % 5);
    ncclAllReduce(bufs[g], bufs[g], counts_k[g], ncclInt32, ncclSum, comm, NULL);
  }
  ncclResult_t res = ncclGroupEnd();
  int ok = res == ncclSuccess;
  for (int g = 0; g < K; g++) {
    for (size_t i = 0; ok && i < counts_k[g]; i++) {
      ok = bufs[g][i] == (int32_t)((g + 1) * n * (n + 1) / 2) + n * (int32_t)(i % 5);
    }
    free(bufs[g]);
  }
  if (ok)
    passed++;
  else
    FAILF("rank %d/%d: a group of %d allreduces of mixed sizes failed (%d): %s", r, n, K, (int)res,
          ncclGetLastError(comm));
}

static int run_rank(int n, int r, ncclUniqueId id) {
  ncclComm_t comm;
  if (ncclCommInitRank(&comm, n, id, r) != ncclSuccess) {
    FAILF("rank %d/%d: init failed: %s", r, n, ncclGetLastError(NULL));
    return 0;
  }
  int k = 0;
  for (int c = 0; c < C_NCOLL; c++) {
    for (int t = 0; t < ncclNumTypes; t++) {
      int nops = reduces(c) ? ncclNumOps + 1 : 1;
      for (int op = 0; op < nops; op++) {
        for (size_t ci = 0; ci < sizeof counts / sizeof counts[0]; ci++) {
          for (int ip = 0; ip < 2; ip++) {
            if (failed > 0)
              break; /* after a failed call the communicator is unusable */
            run_case(comm, n, r, c, (ncclDataType_t)t, op, counts[ci], ip, (k++) % n);
          }
        }
      }
    }
  }
  /* Counts beyond the pieces the executor cuts steps into (1 MB per copy,
   * and smaller buffers where another process's bytes are reduced), odd so
   * that blocks end unaligned: sum, avg (integer division, float scaling)
   * and PreMulSum for the collectives that have single-copy schedules. */
  /* Up to 3 ranks (even and odd splits): with more, the sanitizer builds
   * spend minutes here; the small counts above cover 4 and 8 ranks. */
  const int big_colls[] = {C_ALLREDUCE, C_REDUCESCATTER, C_ALLGATHER, C_BROADCAST};
  const int big_ops[] = {ncclSum, ncclAvg, ncclNumOps};
  for (size_t ci = 0; n <= 3 && ci < sizeof big_colls / sizeof big_colls[0]; ci++) {
    const int c = big_colls[ci];
    for (int t = 0; t < ncclNumTypes; t++) {
      for (size_t oi = 0; oi < (reduces(c) ? 3u : 1u); oi++) {
        for (int ip = 0; ip < 2 && failed == 0; ip++) {
          run_case(comm, n, r, c, (ncclDataType_t)t, big_ops[oi], 300007, ip, (k++) % n);
        }
      }
    }
  }
  run_p2p(comm, n, r);
  run_group_allreduces(comm, n, r);
  ncclCommDestroy(comm);
  return 1;
}

static void rank_child(int r, void* arg, long* p, long* f) {
  const int n = *(const int*)arg;
  ncclUniqueId id; /* from NCCL_COMM_ID (procs_comm_id): the same on every rank */
  if (ncclGetUniqueId(&id) != ncclSuccess) {
    fprintf(stderr, "rank %d/%d: ncclGetUniqueId: %s\n", r, n, ncclGetLastError(NULL));
    failed++;
  } else {
    run_rank(n, r, id);
  }
  *p = passed;
  *f = failed;
}

int main(int argc, char** argv) {
  const char* nlist = argc > 1 ? argv[1] : "1,2,3,4,8";
  const char* alist = argc > 2 ? argv[2] : "default,Ring,Direct";
  /* Small queues, so that counts far exceed them. */
  setenv("NCCL_BUFFSIZE", "65536", 0);
  if (getenv("TEST_PSK") != NULL) { /* tcp.procs.encrypted: ncclSetEncryption, then the forks */
    ncclEncryptionConfig_t e = NCCL_ENCRYPTION_CONFIG_INITIALIZER;
    e.mode = NCCL_ENCRYPTION_MODE_PSK;
    e.psk = getenv("TEST_PSK");
    if (ncclSetEncryption(&e) != ncclSuccess) {
      fprintf(stderr, "ncclSetEncryption: %s\n", ncclGetLastError(NULL));
      return 1;
    }
  }
  long tp = 0, tf = 0;
  char abuf[128];
  snprintf(abuf, sizeof abuf, "%s", alist);
  for (char *as = NULL, *algo = strtok_r(abuf, ",", &as); algo; algo = strtok_r(NULL, ",", &as)) {
    if (strcmp(algo, "default") == 0)
      unsetenv("NCCL_ALGO");
    else
      setenv("NCCL_ALGO", algo, 1);
    char nbuf[128];
    snprintf(nbuf, sizeof nbuf, "%s", nlist);
    for (char *ns = NULL, *tok = strtok_r(nbuf, ",", &ns); tok; tok = strtok_r(NULL, ",", &ns)) {
      int n = atoi(tok);
      if (procs_comm_id() != 0) {
        fprintf(stderr, "no free loopback port for NCCL_COMM_ID\n");
        return 1;
      }
      long p = 0, f = 0;
      procs_run(n, rank_child, &n, &p, &f);
      printf("algo %-7s nranks %d: %ld passed, %ld failed\n", algo, n, p, f);
      fflush(stdout);
      tp += p;
      tf += f;
    }
  }
  printf("%ld passed, %ld failed\n", tp, tf);
  return tf == 0 ? 0 : 1;
}
