/* Every collective x datatype x reduction x in-place/out-of-place x count,
 * with ranks as separate processes over shared memory, checked bit for bit
 * (a tolerance only for avg on floating types), and every collective at the
 * chunked algorithms' cut points (tests/common/cuts.h) for every element
 * size. Each rank waits a random while before each call (seeded: the seed
 * is printed, TEST_SEED repeats it; TEST_JITTER_US bounds the wait, 0 none),
 * so that a peer's late or early arrival is not left to chance. Usage:
 *   test_coll_procs [nranks,...] [algo,...] [nranks,...]
 *   (defaults: 1,2,3,4,8, default,Ring,Direct, none; "-" is none; the third list runs
 *   only the cut points); TEST_RANKS_PER_HOST=k makes hosts of k ranks.
 * Prints one summary line per configuration and a final "N passed, N failed". */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "checker.h"
#include "cuts.h"
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
/* Counts past the queue and its pieces come from the cut points. */
static const size_t counts[] = {0, 1, 7, 1031};

static unsigned long long jitter_seed;
static uint64_t jitter_state;
static unsigned jitter_us = 200;

/* splitmix64: the same waits for the same seed, rank and call. */
static uint64_t jitter_next(void) {
  uint64_t z = (jitter_state += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

/* Before each call: no wait one time in four, else up to jitter_us. */
static void jitter(void) {
  const uint64_t v = jitter_next();
  if (jitter_us > 0 && (v & 3) != 0) {
    usleep((useconds_t)((v >> 2) % jitter_us));
  }
}

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
  jitter();
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
  jitter();
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
  jitter();
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

/* Under a sanitizer (GCC's macros). */
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define SANITIZED 1
#else
#define SANITIZED 0
#endif

static int ranks_per_host(void) {
  const char* v = getenv("TEST_RANKS_PER_HOST");
  return v != NULL && atoi(v) > 0 ? atoi(v) : 0;
}

/* Every collective at the cut points of the chunk (and of the board's slot,
 * where its rounds are small), for each element size: blocks of k*chunk - 1,
 * k*chunk and k*chunk + 1 elements, with count % n in {0, 1, n - 1} where
 * the vector is split into blocks. Each count goes in place or out of place
 * in turn (both for each collective and size), the reductions' ops in turn. */
static void run_cuts(ncclComm_t comm, int n, int r, int* k) {
  const int rph = ranks_per_host(), nhosts = rph > 0 ? (n + rph - 1) / rph : 1;
  const size_t chunk = cuts_chunk_bytes(n, nhosts), slot = cuts_board_bytes();
  for (size_t es = 1; es <= 8; es *= 2) {
    for (int c = 0; c < C_NCOLL; c++) {
      /* Split into n blocks: the ring allreduce's, the pull broadcast's. */
      const int split = c == C_ALLREDUCE || c == C_BROADCAST;
      const unsigned shape = CUTS_WHOLE | (split ? CUTS_SPLIT : 0);
      size_t cs[2 * CUTS_MAX];
      int len = 0;
      cuts_counts(cs, &len, 2 * CUTS_MAX, chunk, es, n, 1, shape, 0);
      if (split && nhosts > 1 && nhosts < n) { /* Hier: the ring of hosts splits by hosts */
        cuts_counts(cs, &len, 2 * CUTS_MAX, chunk, es, nhosts, 1, CUTS_SPLIT, 0);
      }
      /* The board's slot only where a round is no larger than the chunk's
       * share of a queue set (TUTTI_TUNE board.slot=4k): 1 MB slots would
       * take minutes here. */
      cuts_counts(cs, &len, 2 * CUTS_MAX, slot, es, n, 1, shape, (size_t)(n + 1) * chunk / es);
      for (int i = 0; i < len && failed == 0; i++) {
        const int op = reduces(c) ? (i + c) % (ncclNumOps + 1) : 0;
        run_case(comm, n, r, c, cuts_type_of_size(es, (size_t)i), op, cs[i], (i + (int)es) & 1,
                 (*k)++ % n);
      }
    }
  }
}

static int run_rank(int n, int r, ncclUniqueId id, int cuts_only) {
  ncclComm_t comm;
  if (ncclCommInitRank(&comm, n, id, r) != ncclSuccess) {
    FAILF("rank %d/%d: init failed: %s", r, n, ncclGetLastError(NULL));
    return 0;
  }
  int k = 0;
  run_cuts(comm, n, r, &k);
  for (int c = 0; c < C_NCOLL && !cuts_only; c++) {
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
   * spend minutes here; the small counts above cover 4 and 8 ranks. Every
   * type where the planner chooses (coll.procs.default in the release
   * build); one type of each element size under a sanitizer, which watches
   * where bytes go and not what they hold, and where an algorithm is forced
   * (its steps move bytes alike for every type of a size): these counts
   * were half of each run's time. */
  const int every_type = !SANITIZED && getenv("NCCL_ALGO") == NULL;
  const int big_colls[] = {C_ALLREDUCE, C_REDUCESCATTER, C_ALLGATHER, C_BROADCAST};
  const int big_ops[] = {ncclSum, ncclAvg, ncclNumOps};
  for (size_t ci = 0; n <= 3 && !cuts_only && ci < sizeof big_colls / sizeof big_colls[0]; ci++) {
    const int c = big_colls[ci];
    for (int t = 0; t < ncclNumTypes; t++) {
      if (!every_type && t != ncclInt8 && t != ncclBfloat16 && t != ncclFloat32 &&
          t != ncclFloat64) {
        continue;
      }
      for (size_t oi = 0; oi < (reduces(c) ? 3u : 1u); oi++) {
        for (int ip = 0; ip < 2 && failed == 0; ip++) {
          run_case(comm, n, r, c, (ncclDataType_t)t, big_ops[oi], 300007, ip, (k++) % n);
        }
      }
    }
  }
  if (!cuts_only) {
    run_p2p(comm, n, r);
    run_group_allreduces(comm, n, r);
  }
  ncclCommDestroy(comm);
  return 1;
}

struct child_arg {
  int n;
  int cuts_only;
};

static void rank_child(int r, void* arg, long* p, long* f) {
  const struct child_arg* ca = arg;
  const int n = ca->n;
  jitter_state = jitter_seed ^ ((uint64_t)(r + 1) << 32) ^ (uint64_t)n;
  /* TEST_RANKS_PER_HOST=k: ranks as hosts of k ranks (NCCL_HOSTID), so that
   * the hierarchical algorithm has hosts to cross. */
  if (ranks_per_host() > 0) {
    char host[32];
    snprintf(host, sizeof host, "procs-host-%d", r / ranks_per_host());
    setenv("NCCL_HOSTID", host, 1);
  }
  ncclUniqueId id; /* from NCCL_COMM_ID (procs_comm_id): the same on every rank */
  if (ncclGetUniqueId(&id) != ncclSuccess) {
    fprintf(stderr, "rank %d/%d: ncclGetUniqueId: %s\n", r, n, ncclGetLastError(NULL));
    failed++;
  } else {
    run_rank(n, r, id, ca->cuts_only);
  }
  *p = passed;
  *f = failed;
}

int main(int argc, char** argv) {
  const char* nlist = argc > 1 ? argv[1] : "1,2,3,4,8";
  const char* alist = argc > 2 ? argv[2] : "default,Ring,Direct";
  const char* clist = argc > 3 ? argv[3] : "";
  const char* seed = getenv("TEST_SEED");
  jitter_seed = seed != NULL
                    ? strtoull(seed, NULL, 0)
                    : (unsigned long long)time(NULL) ^ ((unsigned long long)getpid() << 20);
  if (getenv("TEST_JITTER_US") != NULL)
    jitter_us = (unsigned)atoi(getenv("TEST_JITTER_US"));
  printf("jitter: up to %u us before each call, seed %llu (TEST_SEED=%llu repeats it)\n", jitter_us,
         jitter_seed, jitter_seed);
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
    char nbuf[256];
    /* The full matrix at nlist's rank counts, then the cut points at clist's. */
    snprintf(nbuf, sizeof nbuf, "%s%s%s", nlist, clist[0] ? ",/," : "", clist);
    struct child_arg ca = {0, 0};
    for (char *ns = NULL, *tok = strtok_r(nbuf, ",", &ns); tok; tok = strtok_r(NULL, ",", &ns)) {
      if (strcmp(tok, "/") == 0 || strcmp(tok, "-") == 0) {
        ca.cuts_only |= tok[0] == '/';
        continue; /* "-": no rank counts in this list */
      }
      ca.n = atoi(tok);
      if (procs_comm_id() != 0) {
        fprintf(stderr, "no free loopback port for NCCL_COMM_ID\n");
        return 1;
      }
      long p = 0, f = 0;
      procs_run(ca.n, rank_child, &ca, &p, &f);
      printf("algo %-7s nranks %d%s: %ld passed, %ld failed\n", algo, ca.n,
             ca.cuts_only ? " (cut points)" : "", p, f);
      fflush(stdout);
      tp += p;
      tf += f;
    }
  }
  printf("%ld passed, %ld failed\n", tp, tf);
  return tf == 0 ? 0 : 1;
}
