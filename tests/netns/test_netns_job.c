/* One rank of a job spread over namespace "hosts" (tests/netns), started by
 * tuttirun in each host (RANK, WORLD_SIZE and NCCL_COMM_ID from it):
 *   test_netns_job matrix   every collective x datatype x op x count x
 *                           in/out-of-place, and a send/recv all-to-all,
 *                           checked bit for bit; exits 1 on any mismatch
 *   test_netns_job loop S [B]  allreduces of B bytes (default 1 MB) for up
 *                           to S seconds while the test cuts a host off or
 *                           stops it; prints "LOST at <epoch s>: <error>"
 *                           when the library reports it and exits 0, exits 1
 *                           if no error came; "looping (pid P)" once started
 *   test_netns_job trial SEED S  the same with random collectives (allreduce,
 *                           allgather, reducescatter, broadcast, alltoall,
 *                           a send/recv ring) of random sizes, drawn alike
 *                           on every rank from SEED; ignores SIGTERM
 *   test_netns_job bw B N   N timed allreduces of B bytes of floats (after
 *                           2 warm-up ones); rank 0 prints the bus bandwidth
 *   test_netns_job rma      one-sided operations: an all-to-all of puts with
 *                           signals (every rank at once, waits after) and a
 *                           relay of put + signal around the ring, each
 *                           checked byte for byte, in several rounds
 *   test_netns_job threads N  the matrix with N ranks as threads of this
 *                           process (no tuttirun): with NCCL_SHM_DISABLE=1
 *                           every pair crosses the network transport, such
 *                           as an in-process network plugin */
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "checker.h"
#include "cuts.h"
#include "harness.h"
#include "nccl.h"
#include "reduce/reduce.h"

enum {
  C_ALLREDUCE,
  C_REDUCE,
  C_REDUCESCATTER,
  C_BROADCAST,
  C_ALLGATHER,
  C_ALLTOALL,
  C_GATHER,
  C_SCATTER,
  C_NCOLL
};
static const char* const cname[C_NCOLL] = {"AllReduce", "Reduce",   "ReduceScatter", "Broadcast",
                                           "AllGather", "AlltoAll", "Gather",        "Scatter"};
static const size_t counts[] = {0, 1, 7, 1031, 20011};
static __thread long passed, failed; /* per rank: ranks may be threads */

static int reduces(int c) {
  return c == C_ALLREDUCE || c == C_REDUCE || c == C_REDUCESCATTER;
}

static double wall(void) {
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static ncclResult_t call(ncclComm_t comm, int c, const void* s, void* r, size_t count,
                         ncclDataType_t t, ncclRedOp_t op, int root) {
  switch (c) {
    case C_ALLREDUCE:
      return ncclAllReduce(s, r, count, t, op, comm, NULL);
    case C_REDUCE:
      return ncclReduce(s, r, count, t, op, root, comm, NULL);
    case C_REDUCESCATTER:
      return ncclReduceScatter(s, r, count, t, op, comm, NULL);
    case C_BROADCAST:
      return ncclBroadcast(s, r, count, t, root, comm, NULL);
    case C_ALLGATHER:
      return ncclAllGather(s, r, count, t, comm, NULL);
    case C_ALLTOALL:
      return ncclAlltoAll(s, r, count, t, comm, NULL);
    case C_GATHER:
      return ncclGather(s, r, count, t, root, comm, NULL);
    default:
      return ncclScatter(s, r, count, t, root, comm, NULL);
  }
}

/* One case; returns 0 when the communicator is no longer usable. */
static int run_case(ncclComm_t comm, int n, int r, int c, ncclDataType_t t, int op, size_t count,
                    int inplace, int root) {
  const size_t es = tutti_type_size(t), big = count * (size_t)n;
  char* sbuf = malloc(big * es + 64);
  char* rbuf = malloc(big * es + 64);
  char* ref = malloc(big * es + 64);
  memset(rbuf, 0x5a, big * es + 64);
  ncclRedOp_t rop = (ncclRedOp_t)op;
  char scalar[8];
  if (op == ncclNumOps) {
    chk_two(t, scalar);
    if (ncclRedOpCreatePreMulSum(&rop, scalar, t, ncclScalarHostImmediate, comm) != ncclSuccess) {
      rop = ncclSum;
    }
  }
  char* send = sbuf;
  char* recv = rbuf;
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
  size_t in_elems = (c == C_REDUCESCATTER || c == C_ALLTOALL || c == C_SCATTER) ? big : count;
  chk_fill(send, t, reduces(c) && op != ncclNumOps ? op : ncclSum, r, 0, in_elems);
  ncclResult_t res = call(comm, c, send, recv, count, t, rop, root);
  if (op == ncclNumOps) {
    ncclRedOpDestroy(rop, comm);
  }
  int ok = res == ncclSuccess;
  if (!ok) {
    fprintf(stderr, "rank %d: %s %s op %d count %zu returned %d: %s\n", r, cname[c],
            tutti_type_name(t), op, count, (int)res, ncclGetLastError(comm));
  } else if (reduces(c)) {
    size_t first = c == C_REDUCESCATTER ? (size_t)r * count : 0;
    for (size_t i = 0; (c != C_REDUCE || r == root) && i < count && ok; i++) {
      double want = chk_round(t, chk_reduce_ref(t, op, n, first + i, 2));
      ok = chk_equal(t, op, n, first + i, chk_get(recv, t, i), want);
    }
  } else {
    size_t out = count;
    for (int p = 0; p < n; p++) {
      switch (c) {
        case C_BROADCAST:
          chk_fill(ref, t, ncclSum, root, 0, count);
          break;
        case C_SCATTER:
          chk_fill(ref, t, ncclSum, root, (size_t)r * count, count);
          break;
        case C_ALLTOALL:
          chk_fill(ref + (size_t)p * count * es, t, ncclSum, p, (size_t)r * count, count);
          out = big;
          break;
        default: /* allgather, gather */
          chk_fill(ref + (size_t)p * count * es, t, ncclSum, p, 0, count);
          out = (c == C_GATHER && r != root) ? 0 : big;
          break;
      }
    }
    ok = out == 0 || memcmp(recv, ref, out * es) == 0;
  }
  if (res == ncclSuccess && !ok) {
    fprintf(stderr, "rank %d/%d: %s %s op %d count %zu %s root %d: wrong result\n", r, n, cname[c],
            tutti_type_name(t), op, count, inplace ? "in-place" : "out-of-place", root);
  }
  passed += ok;
  failed += !ok;
  free(sbuf);
  free(rbuf);
  free(ref);
  return res == ncclSuccess;
}

/* N sends and N receives (self included) in one group. */
static void run_p2p(ncclComm_t comm, int n, int r) {
  const size_t count = 50003;
  int32_t* out = malloc((size_t)n * count * 4);
  int32_t* in = malloc((size_t)n * count * 4);
  for (size_t i = 0; i < (size_t)n * count; i++)
    out[i] = (int32_t)(r * 1000003 + (int)i);
  ncclGroupStart();
  for (int p = 0; p < n; p++) {
    ncclSend(out + (size_t)p * count, count, ncclInt32, p, comm, NULL);
    ncclRecv(in + (size_t)p * count, count, ncclInt32, p, comm, NULL);
  }
  int ok = ncclGroupEnd() == ncclSuccess;
  for (size_t i = 0; ok && i < (size_t)n * count; i++) {
    size_t p = i / count;
    ok = in[i] == (int32_t)((int)p * 1000003 + (int)((size_t)r * count + i % count));
  }
  if (!ok)
    fprintf(stderr, "rank %d: send/recv all-to-all failed: %s\n", r, ncclGetLastError(comm));
  passed += ok;
  failed += !ok;
  free(out);
  free(in);
}

/* TEST_TYPES=sizes: one type of each element size (int8, bfloat16, float32,
 * float64), for the runs whose subject is the way between ranks (a network
 * ABI, an interface named, a plugin, encryption) rather than the reductions,
 * which the default runs and coll.procs check in every type. */
static int type_skipped(int t) {
  const char* v = getenv("TEST_TYPES");
  return v != NULL && strcmp(v, "sizes") == 0 && t != ncclInt8 && t != ncclBfloat16 &&
         t != ncclFloat32 && t != ncclFloat64;
}

/* TEST_CUTS=1: every collective at the chunks' cut points
 * (tests/common/cuts.h) for each element size, the queues NCCL_BUFFSIZE
 * gives: blocks of k*chunk - 1, k*chunk and k*chunk + 1 elements, count % n
 * in {0, 1, n - 1}, so that a round sliced one element short or long across
 * hosts fails here. */
static int cut_points(ncclComm_t comm, int n, int r, int* k) {
  const size_t chunk = cuts_chunk_bytes(n, n);
  int usable = 1;
  if (getenv("TEST_CUTS") == NULL || atoi(getenv("TEST_CUTS")) == 0) {
    return usable;
  }
  for (size_t es = 1; es <= 8 && usable; es *= 2) {
    for (int c = 0; c < C_NCOLL && usable; c++) {
      const int split = c == C_ALLREDUCE || c == C_BROADCAST;
      size_t cs[2 * CUTS_MAX];
      int len = 0;
      cuts_counts(cs, &len, 2 * CUTS_MAX, chunk, es, n, 2, CUTS_WHOLE | (split ? CUTS_SPLIT : 0),
                  0);
      for (int i = 0; i < len && usable; i++) {
        const int op = reduces(c) ? (i + c) % (ncclNumOps + 1) : 0;
        usable = run_case(comm, n, r, c, cuts_type_of_size(es, (size_t)i), op, cs[i],
                          (i + (int)es) & 1, (*k)++ % n);
      }
    }
  }
  return usable;
}

static int matrix(ncclComm_t comm, int n, int r) {
  int k = 0, usable = cut_points(comm, n, r, &k);
  for (int c = 0; c < C_NCOLL && usable; c++) {
    for (int t = 0; t < ncclNumTypes && usable; t++) {
      if (type_skipped(t)) {
        continue;
      }
      for (int op = 0; op < (reduces(c) ? ncclNumOps + 1 : 1) && usable; op++) {
        for (size_t ci = 0; ci < sizeof counts / sizeof counts[0] && usable; ci++) {
          for (int ip = 0; ip < 2 && usable; ip++) {
            usable = run_case(comm, n, r, c, (ncclDataType_t)t, op, counts[ci], ip, (k++) % n);
          }
        }
      }
    }
  }
  if (usable)
    run_p2p(comm, n, r);
  printf("rank %d/%d: %ld passed, %ld failed\n", r, n, passed, failed);
  return failed == 0 && usable ? 0 : 1;
}

/* One-sided operations across hosts (mode rma). Each rank's window holds a
 * block per rank (odd sizes, more than a queue, different per rank); every
 * byte a put writes is known from (origin, target, round, index). */
#define RMA_BLK 100003
#define RMA_RELAY 300007

static uint8_t rma_byte(int origin, int target, int round, size_t i) {
  uint32_t x = (uint32_t)origin * 0x9E3779B1u ^ (uint32_t)target * 0x85EBCA77u ^
               (uint32_t)round * 0xC2B2AE3Du ^ (uint32_t)i * 0x27D4EB2Fu;
  x ^= x >> 15;
  x *= 0x2C1B3C6Du;
  return (uint8_t)(x ^ (x >> 12));
}

static size_t rma_wsize(int n, int r) {
  return (size_t)n * RMA_BLK + RMA_RELAY + 64 + (size_t)r * 17;
}

static int rma_check(int r, const char* what, int round, const uint8_t* got, const uint8_t* want,
                     size_t bytes) {
  size_t i = 0;
  while (i < bytes && got[i] == want[i]) {
    i++;
  }
  if (i < bytes) {
    fprintf(stderr, "rank %d: %s round %d: byte %zu is 0x%02x, expected 0x%02x\n", r, what, round,
            i, got[i], want[i]);
  }
  passed += i == bytes;
  failed += i < bytes;
  return i == bytes;
}

static int rma_job(ncclComm_t comm, int n, int r) {
  const size_t ws = rma_wsize(n, r), relay_off = (size_t)n * RMA_BLK + 5;
  uint8_t* win_buf = malloc(ws);
  uint8_t* want = malloc(ws);
  uint8_t* src = malloc((size_t)n * RMA_BLK + RMA_RELAY);
  ncclWaitSignalDesc_t* d = calloc((size_t)n, sizeof *d);
  ncclWindow_t win = NULL;
  int32_t one = 1;
  int ok = win_buf != NULL && want != NULL && src != NULL && d != NULL;
  if (ok) {
    memset(win_buf, 0xA5, ws);
    ok = ncclCommWindowRegister(comm, win_buf, ws, &win, 0) == ncclSuccess;
  }
  for (int round = 0; round < 3 && ok; round++) {
    /* All-to-all: block p of every window is rank p's, at an odd offset. */
    ncclGroupStart();
    for (int k = 0; k < n; k++) {
      const int p = (r + 1 + k) % n;
      uint8_t* s = src + (size_t)p * RMA_BLK;
      for (size_t i = 0; i < RMA_BLK - 3; i++) {
        s[i] = rma_byte(r, p, round, i);
      }
      ncclPutSignal(s, RMA_BLK - 3, ncclUint8, p, win, (size_t)r * RMA_BLK + 1, 0, 0, 0, comm,
                    NULL);
      d[k] = (ncclWaitSignalDesc_t){1, p, 0, 0};
    }
    ok = ncclGroupEnd() == ncclSuccess && ncclWaitSignal(n, d, comm, NULL) == ncclSuccess;
    if (!ok) {
      fprintf(stderr, "rank %d: one-sided all-to-all failed: %s\n", r, ncclGetLastError(comm));
      break;
    }
    memset(want, 0xA5, ws);
    for (int p = 0; p < n; p++) {
      for (size_t i = 0; i < RMA_BLK - 3; i++) {
        want[(size_t)p * RMA_BLK + 1 + i] = rma_byte(p, r, round, i);
      }
    }
    /* All but the relay's part, which a peer may be writing already. */
    rma_check(r, "all-to-all", round, win_buf, want, relay_off);
    rma_check(r, "all-to-all", round, win_buf + relay_off + RMA_RELAY, want + relay_off + RMA_RELAY,
              ws - relay_off - RMA_RELAY);
    /* The relay: rank 0 starts it; each rank waits for its predecessor's
     * put, checks it and passes it on; rank 0 gets its own bytes back. */
    const int next = (r + 1) % n, prev = (r + n - 1) % n;
    ncclWaitSignalDesc_t w1 = {1, prev, 3, 0};
    uint8_t* relay = src + (size_t)n * RMA_BLK;
    for (size_t i = 0; i < RMA_RELAY; i++) {
      relay[i] = rma_byte(0, 0, round + 100, i);
    }
    if (r == 0) {
      ok = ncclPutSignal(relay, RMA_RELAY, ncclUint8, next, win, relay_off, 3, 0, 0, comm, NULL) ==
           ncclSuccess;
    }
    ok = ok && ncclWaitSignal(1, &w1, comm, NULL) == ncclSuccess;
    ok = ok && rma_check(r, "relay", round, win_buf + relay_off, relay, RMA_RELAY);
    if (ok && r != 0) {
      ok = ncclPutSignal(win_buf + relay_off, RMA_RELAY, ncclUint8, next, win, relay_off, 3, 0, 0,
                         comm, NULL) == ncclSuccess;
    }
    /* Nobody writes a window its owner still checks. */
    ok = ok && ncclAllReduce(&one, &one, 1, ncclInt32, ncclSum, comm, NULL) == ncclSuccess;
    if (!ok) {
      fprintf(stderr, "rank %d: one-sided relay failed: %s\n", r, ncclGetLastError(comm));
    }
  }
  if (win != NULL && ncclCommWindowDeregister(comm, win) != ncclSuccess) {
    ok = 0;
  }
  failed += !ok;
  printf("rank %d/%d: %ld passed, %ld failed\n", r, n, passed, failed);
  free(win_buf);
  free(want);
  free(src);
  free(d);
  return failed == 0 && ok ? 0 : 1;
}

/* One collective drawn from `rng` (the same draws on every rank): a kind,
 * a count up to `cap` elements of buffer, a root. */
static ncclResult_t random_op(ncclComm_t comm, int n, int r, uint64_t* rng, float* a, float* b,
                              size_t cap) {
  const int kind = (int)(test_xorshift(rng) % 6);
  const size_t count = 1 + (size_t)(test_xorshift(rng) % (cap / (size_t)n));
  const int root = (int)(test_xorshift(rng) % (uint64_t)n);
  switch (kind) {
    case 0:
      return ncclAllReduce(a, b, count, ncclFloat, ncclSum, comm, NULL);
    case 1:
      return ncclAllGather(a, b, count, ncclFloat, comm, NULL);
    case 2:
      return ncclReduceScatter(a, b, count, ncclFloat, ncclSum, comm, NULL);
    case 3:
      return ncclBroadcast(a, b, count, ncclFloat, root, comm, NULL);
    case 4:
      return ncclAlltoAll(a, b, count, ncclFloat, comm, NULL);
    default:
      ncclGroupStart();
      ncclSend(a, count, ncclFloat, (r + 1) % n, comm, NULL);
      ncclRecv(b, count, ncclFloat, (r + n - 1) % n, comm, NULL);
      return ncclGroupEnd();
  }
}

/* Allreduces (seed 0) or random collectives (seed > 0) for up to `seconds`,
 * while the test makes a fault. */
static int loop(ncclComm_t comm, int n, int r, double seconds, uint64_t seed, size_t count) {
  float* buf = calloc(count, sizeof *buf);
  float* out = calloc(count, sizeof *out);
  double end = wall() + seconds;
  long iters = 0;
  uint64_t rng = seed * 0x9E3779B97F4A7C15ull + 1;
  if (seed != 0) {
    signal(SIGTERM, SIG_IGN); /* tuttirun stops a dead rank's siblings: they must see it first */
  }
  while (wall() < end) {
    ncclResult_t res = seed == 0 ? ncclAllReduce(buf, buf, count, ncclFloat, ncclSum, comm, NULL)
                                 : random_op(comm, n, r, &rng, buf, out, count);
    if (res != ncclSuccess) {
      printf("rank %d LOST at %.3f after %ld collectives: %s\n", r, wall(), iters,
             ncclGetLastError(comm));
      fflush(stdout);
      ncclCommAbort(comm); /* tells the peers why this rank leaves */
      free(buf);
      free(out);
      return 0;
    }
    if (iters++ == 0) {
      printf("rank %d looping (pid %d)\n", r, (int)getpid());
      fflush(stdout);
    }
  }
  printf("rank %d NOFAULT: %ld collectives and no error in %.0f s\n", r, iters, seconds);
  ncclCommDestroy(comm);
  free(buf);
  free(out);
  return 1;
}

static double mono(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static int bandwidth(ncclComm_t comm, int n, int r, size_t bytes, int iters) {
  const size_t count = bytes / sizeof(float);
  float* buf = calloc(count, sizeof *buf);
  ncclResult_t res = ncclSuccess;
  double t0 = 0;
  for (int i = -2; i < iters && res == ncclSuccess; i++) {
    if (i == 0) {
      t0 = mono();
    }
    res = ncclAllReduce(buf, buf, count, ncclFloat, ncclSum, comm, NULL);
  }
  const double t = (mono() - t0) / iters, algbw = (double)(count * sizeof(float)) / t / 1e9;
  if (res != ncclSuccess) {
    fprintf(stderr, "rank %d: allreduce failed: %s\n", r, ncclGetLastError(comm));
  } else if (r == 0) {
    printf("allreduce bytes %zu ranks %d time_ms %.1f algbw %.3f busbw %.3f GB/s\n",
           count * sizeof(float), n, t * 1e3, algbw, algbw * 2 * (n - 1) / n);
  }
  free(buf);
  ncclCommDestroy(comm);
  return res != ncclSuccess;
}

struct thread_rank {
  int r, n;
  ncclUniqueId id;
  int rc;
};

static void* thread_main(void* p) {
  struct thread_rank* t = p;
  ncclComm_t comm;
  if (ncclCommInitRank(&comm, t->n, t->id, t->r) != ncclSuccess) {
    fprintf(stderr, "rank %d: init failed: %s\n", t->r, ncclGetLastError(NULL));
    t->rc = 1;
    return NULL;
  }
  t->rc = matrix(comm, t->n, t->r);
  ncclCommDestroy(comm);
  return NULL;
}

static int threads(int n) {
  setenv("NCCL_BUFFSIZE", "65536", 0);
  struct thread_rank* t = calloc((size_t)n, sizeof *t);
  pthread_t* th = calloc((size_t)n, sizeof *th);
  ncclUniqueId id;
  if (t == NULL || th == NULL || ncclGetUniqueId(&id) != ncclSuccess) {
    fprintf(stderr, "cannot start %d ranks: %s\n", n, ncclGetLastError(NULL));
    return 1;
  }
  for (int r = 0; r < n; r++) {
    t[r] = (struct thread_rank){r, n, id, 0};
    pthread_create(&th[r], NULL, thread_main, &t[r]);
  }
  int rc = 0;
  for (int r = 0; r < n; r++) {
    pthread_join(th[r], NULL);
    rc |= t[r].rc;
  }
  free(t);
  free(th);
  return rc;
}

int main(int argc, char** argv) {
  const char* mode = argc > 1 ? argv[1] : "matrix";
  setvbuf(stdout, NULL, _IOLBF, 0);
  if (strcmp(mode, "threads") == 0) {
    return threads(argc > 2 ? atoi(argv[2]) : 3);
  }
  const char* rs = getenv("RANK");
  const char* ns = getenv("WORLD_SIZE");
  if (rs == NULL || ns == NULL || getenv("NCCL_COMM_ID") == NULL) {
    fprintf(stderr, "%s: run under tuttirun (RANK, WORLD_SIZE, NCCL_COMM_ID)\n", argv[0]);
    return 2;
  }
  if (strcmp(mode, "matrix") == 0 || strcmp(mode, "rma") == 0) {
    setenv("NCCL_BUFFSIZE", "65536", 0); /* small queues: counts far exceed them */
  }
  int r = atoi(rs), n = atoi(ns);
  /* ncclSetEncryption for the encryption tests: TEST_PSK on every rank,
   * except rank TEST_PSK_ODD_RANK, which gets TEST_PSK_ODD. */
  const char* psk = getenv("TEST_PSK");
  const char* odd = getenv("TEST_PSK_ODD_RANK");
  if (odd != NULL && atoi(odd) == r && getenv("TEST_PSK_ODD") != NULL) {
    psk = getenv("TEST_PSK_ODD");
  }
  if (psk != NULL && psk[0] != '\0') {
    ncclEncryptionConfig_t e = NCCL_ENCRYPTION_CONFIG_INITIALIZER;
    e.mode = NCCL_ENCRYPTION_MODE_PSK;
    e.psk = psk;
    if (ncclSetEncryption(&e) != ncclSuccess) {
      fprintf(stderr, "rank %d: ncclSetEncryption failed: %s\n", r, ncclGetLastError(NULL));
      return 3;
    }
  }
  ncclUniqueId id;
  ncclComm_t comm;
  if (ncclGetUniqueId(&id) != ncclSuccess || ncclCommInitRank(&comm, n, id, r) != ncclSuccess) {
    fprintf(stderr, "rank %d: init failed: %s\n", r, ncclGetLastError(NULL));
    return 1;
  }
  if (strcmp(mode, "loop") == 0) {
    return loop(comm, n, r, argc > 2 ? atof(argv[2]) : 60, 0,
                argc > 3 ? strtoull(argv[3], NULL, 0) / sizeof(float) : 1 << 18);
  }
  if (strcmp(mode, "trial") == 0) {
    return loop(comm, n, r, argc > 3 ? atof(argv[3]) : 60,
                argc > 2 ? strtoull(argv[2], NULL, 0) | 1 : 1, 1 << 18);
  }
  if (strcmp(mode, "bw") == 0) {
    return bandwidth(comm, n, r, argc > 2 ? strtoull(argv[2], NULL, 0) : 64u << 20,
                     argc > 3 ? atoi(argv[3]) : 5);
  }
  int rc = strcmp(mode, "rma") == 0 ? rma_job(comm, n, r) : matrix(comm, n, r);
  ncclCommDestroy(comm);
  return rc;
}
