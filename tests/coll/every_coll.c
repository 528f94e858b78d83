/* See every_coll.h. */
#include "every_coll.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "checker.h"
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
static const char* const names[C_NCOLL] = {"AllReduce", "Reduce",   "ReduceScatter", "Broadcast",
                                           "AllGather", "AlltoAll", "Gather",        "Scatter"};
static const size_t counts[] = {1, 1031};

struct one {
  ncclComm_t comm;
  int n, r;
  const char* what;
  const struct every_mem* mem; /* NULL: host buffers */
  void* stream;
};

/* A case's two buffers: on the host, and where the call reads and writes
 * them (the same, or device copies). */
struct bufs {
  char *s, *r;   /* host */
  char *ds, *dr; /* the call's */
  size_t bytes;
};

static int bufs_get(const struct one* o, struct bufs* b, size_t bytes) {
  b->bytes = bytes;
  b->s = calloc(1, bytes);
  b->r = malloc(bytes);
  memset(b->r, 0x5a, bytes);
  b->ds = o->mem != NULL ? o->mem->alloc(bytes) : b->s;
  b->dr = o->mem != NULL ? o->mem->alloc(bytes) : b->r;
  return b->ds != NULL && b->dr != NULL;
}

/* The call's address of host address p. */
static void* dev(const struct bufs* b, const char* p) {
  return p >= b->s && p < b->s + b->bytes ? b->ds + (p - b->s) : b->dr + (p - b->r);
}

/* Before the call (to the device) or after it (back), with the stream done. */
static int bufs_move(const struct one* o, struct bufs* b, int back) {
  if (o->mem == NULL) {
    return 1;
  }
  if (back) {
    return o->mem->sync(o->stream) == 0 && o->mem->copy(b->s, b->ds, b->bytes) == 0 &&
           o->mem->copy(b->r, b->dr, b->bytes) == 0;
  }
  return o->mem->copy(b->ds, b->s, b->bytes) == 0 && o->mem->copy(b->dr, b->r, b->bytes) == 0;
}

static void bufs_put(const struct one* o, struct bufs* b) {
  if (o->mem != NULL) {
    o->mem->release(b->ds);
    o->mem->release(b->dr);
  }
  free(b->s);
  free(b->r);
}

static int reduces(int c) {
  return c <= C_REDUCESCATTER;
}

static ncclResult_t call(const struct one* o, int c, const void* s, void* d, size_t count,
                         ncclDataType_t t, ncclRedOp_t op, int root) {
  switch (c) {
    case C_ALLREDUCE:
      return ncclAllReduce(s, d, count, t, op, o->comm, o->stream);
    case C_REDUCE:
      return ncclReduce(s, d, count, t, op, root, o->comm, o->stream);
    case C_REDUCESCATTER:
      return ncclReduceScatter(s, d, count, t, op, o->comm, o->stream);
    case C_BROADCAST:
      return ncclBroadcast(s, d, count, t, root, o->comm, o->stream);
    case C_ALLGATHER:
      return ncclAllGather(s, d, count, t, o->comm, o->stream);
    case C_ALLTOALL:
      return ncclAlltoAll(s, d, count, t, o->comm, o->stream);
    case C_GATHER:
      return ncclGather(s, d, count, t, root, o->comm, o->stream);
    default:
      return ncclScatter(s, d, count, t, root, o->comm, o->stream);
  }
}

/* Whether rank r's result of collective c is right (`op` ncclNumOps: PreMulSum by 2). */
static int check(const struct one* o, int c, const char* d, ncclDataType_t t, int op, size_t count,
                 int root, char* ref) {
  const size_t es = tutti_type_size(t), big = count * (size_t)o->n;
  if (reduces(c)) {
    const size_t first = c == C_REDUCESCATTER ? (size_t)o->r * count : 0;
    for (size_t i = 0; (c != C_REDUCE || o->r == root) && i < count; i++) {
      double want = chk_round(t, chk_reduce_ref(t, op, o->n, first + i, 2));
      if (!chk_equal(t, op, o->n, first + i, chk_get(d, t, i), want)) {
        return 0;
      }
    }
    return 1;
  }
  size_t out = big;
  for (int p = 0; p < o->n; p++) {
    switch (c) {
      case C_BROADCAST:
        chk_fill(ref, t, ncclSum, root, 0, count);
        out = count;
        break;
      case C_SCATTER:
        chk_fill(ref, t, ncclSum, root, (size_t)o->r * count, count);
        out = count;
        break;
      case C_ALLTOALL:
        chk_fill(ref + (size_t)p * count * es, t, ncclSum, p, (size_t)o->r * count, count);
        break;
      default: /* allgather, gather */
        chk_fill(ref + (size_t)p * count * es, t, ncclSum, p, 0, count);
        out = c == C_GATHER && o->r != root ? 0 : big;
        break;
    }
  }
  return out == 0 || memcmp(d, ref, out * es) == 0;
}

/* One case; returns 0 when the call failed. */
static int run_case(const struct one* o, int c, ncclDataType_t t, int op, size_t count, int inplace,
                    int root, long* passed, long* failed) {
  const size_t es = tutti_type_size(t), big = count * (size_t)o->n;
  struct bufs b;
  char* ref = malloc(big * es);
  ncclRedOp_t rop = (ncclRedOp_t)op;
  ncclResult_t res = bufs_get(o, &b, big * es) ? ncclSuccess : ncclSystemError;
  char* sbuf = b.s;
  char* rbuf = b.r;
  if (res == ncclSuccess && op == ncclNumOps) {
    char two[8];
    chk_two(t, two);
    res = ncclRedOpCreatePreMulSum(&rop, two, t, ncclScalarHostImmediate, o->comm);
  }
  char* s = sbuf;
  char* d = rbuf;
  const size_t mine = (size_t)o->r * count * es;
  if (inplace) {
    /* Where NCCL's in-place variant of each collective keeps its input. */
    const int at_root = o->r == root;
    s = c == C_ALLGATHER || (c == C_GATHER && at_root) ? rbuf + mine
        : c == C_REDUCESCATTER || c == C_SCATTER       ? sbuf
                                                       : rbuf;
    d = c == C_REDUCESCATTER || (c == C_SCATTER && at_root) ? sbuf + mine : rbuf;
  }
  const size_t in = c == C_REDUCESCATTER || c == C_ALLTOALL || c == C_SCATTER ? big : count;
  chk_fill(s, t, reduces(c) && op != ncclNumOps ? op : ncclSum, o->r, 0, in);
  if (res == ncclSuccess) {
    res = bufs_move(o, &b, 0) ? call(o, c, dev(&b, s), dev(&b, d), count, t, rop, root)
                              : ncclSystemError;
  }
  if (res == ncclSuccess && !bufs_move(o, &b, 1)) {
    res = ncclSystemError;
  }
  if (op == ncclNumOps && rop != (ncclRedOp_t)op) {
    ncclRedOpDestroy(rop, o->comm);
  }
  const int ok = res == ncclSuccess && check(o, c, d, t, op, count, root, ref);
  if (!ok) {
    fprintf(stderr, "%s: rank %d/%d: %s %s op %d count %zu %s root %d: %s\n", o->what, o->r, o->n,
            names[c], tutti_type_name(t), op, count, inplace ? "in place" : "out of place", root,
            res != ncclSuccess ? ncclGetLastError(o->comm) : "wrong result");
  }
  *passed += ok;
  *failed += !ok;
  bufs_put(o, &b);
  free(ref);
  return res == ncclSuccess;
}

/* Every rank sends block p of its buffer to rank p and receives block p from it. */
static int run_p2p(const struct one* o, long* passed, long* failed) {
  const size_t count = 4099;
  struct bufs b;
  ncclResult_t res = bufs_get(o, &b, (size_t)o->n * count * 4) ? ncclSuccess : ncclSystemError;
  int32_t* out = (int32_t*)b.s;
  int32_t* in = (int32_t*)b.r;
  for (size_t i = 0; res == ncclSuccess && i < (size_t)o->n * count; i++) {
    out[i] = (int32_t)(o->r * 1000003 + (int)i);
  }
  if (res == ncclSuccess && !bufs_move(o, &b, 0)) {
    res = ncclSystemError;
  }
  if (res == ncclSuccess) {
    ncclGroupStart();
    for (int p = 0; p < o->n; p++) {
      ncclSend(dev(&b, (char*)(out + (size_t)p * count)), count, ncclInt32, p, o->comm, o->stream);
      ncclRecv(dev(&b, (char*)(in + (size_t)p * count)), count, ncclInt32, p, o->comm, o->stream);
    }
    res = ncclGroupEnd();
  }
  if (res == ncclSuccess && !bufs_move(o, &b, 1)) {
    res = ncclSystemError;
  }
  int ok = res == ncclSuccess;
  for (size_t i = 0; ok && i < (size_t)o->n * count; i++) {
    ok = in[i] == (int32_t)((int)(i / count) * 1000003 + (int)((size_t)o->r * count + i % count));
  }
  if (!ok) {
    fprintf(stderr, "%s: rank %d/%d: send/recv with every rank: %s\n", o->what, o->r, o->n,
            res != ncclSuccess ? ncclGetLastError(o->comm) : "wrong result");
  }
  *passed += ok;
  *failed += !ok;
  bufs_put(o, &b);
  return res == ncclSuccess;
}

int every_coll(ncclComm_t comm, const char* what, long* passed, long* failed) {
  return every_coll_mem(comm, what, NULL, passed, failed);
}

int every_coll_mem(ncclComm_t comm, const char* what, const struct every_mem* mem, long* passed,
                   long* failed) {
  struct one o = {comm, 0, -1, what, mem, mem != NULL ? mem->stream : NULL};
  if (ncclCommCount(comm, &o.n) != ncclSuccess || ncclCommUserRank(comm, &o.r) != ncclSuccess) {
    fprintf(stderr, "%s: not a communicator: %s\n", what, ncclGetLastError(NULL));
    (*failed)++;
    return 0;
  }
  static const ncclDataType_t moved[] = {ncclInt8, ncclInt32, ncclFloat64};
  int k = 0;
  for (int c = 0; c < C_NCOLL; c++) {
    const int ntypes = reduces(c) ? ncclNumTypes : 3;
    for (int ti = 0; ti < ntypes; ti++) {
      const ncclDataType_t t = reduces(c) ? (ncclDataType_t)ti : moved[ti];
      const int all_ops = t == ncclInt32 || t == ncclFloat32 || t == ncclBfloat16;
      for (int op = 0; op < (reduces(c) ? (all_ops ? ncclNumOps + 1 : 1) : 1); op++) {
        for (size_t ci = 0; ci < sizeof counts / sizeof counts[0]; ci++) {
          for (int ip = 0; ip < 2; ip++) {
            if (!run_case(&o, c, t, op, counts[ci], ip, (k++) % o.n, passed, failed)) {
              return 0;
            }
          }
        }
      }
    }
  }
  return run_p2p(&o, passed, failed);
}
