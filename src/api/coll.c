/* The collective and point-to-point entry points: argument checks, the
 * executor tune gives the buffers, a host call's plan and schedule, then
 * the call queued in the caller's group (a device call is planned at the
 * group's end: api/launch.c). */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "api/api.h"
#include "api/coll.h"
#include "bootstrap/bootstrap.h"
#include "api/comm.h"
#include "api/group.h"
#include "api/redop.h"
#include "api/register.h"
#include "call/agree.h"
#include "reduce/reduce.h"
#include "tune/tune.h"
#include "util/check.h"
#include "util/cuda.h"
#include "util/proc.h"

/* Elements this rank's send and receive buffers hold, in units of count. */
static size_t send_blocks(const struct tutti_coll_call* c, int nranks) {
  return (c->coll == TUTTI_COLL_REDUCESCATTER || c->coll == TUTTI_COLL_ALLTOALL ||
          c->coll == TUTTI_COLL_SCATTER)
             ? (size_t)nranks
             : 1;
}

static size_t recv_blocks(const struct tutti_coll_call* c, int nranks) {
  return (c->coll == TUTTI_COLL_ALLGATHER || c->coll == TUTTI_COLL_ALLTOALL ||
          c->coll == TUTTI_COLL_GATHER)
             ? (size_t)nranks
             : 1;
}

/* Whether a buffer of `bytes` of memory kind `k` can exist on this rank. */
static ncclResult_t check_fits_slow(const struct ncclComm* comm, const struct tutti_coll_call* c,
                                    enum tutti_mem k, size_t bytes, const char* which) {
  static unsigned long long host_bytes;
  if (host_bytes == 0) {
    host_bytes = tutti_host_mem_bytes();
  }
  const unsigned long long dev = comm->dev_mem_bytes;
  const unsigned long long have = k == TUTTI_MEM_DEVICE    ? dev
                                  : k == TUTTI_MEM_MANAGED ? (dev != 0 ? dev + host_bytes : 0)
                                                           : host_bytes;
  if (have != 0 && bytes > have) {
    return tutti_error(ncclInvalidArgument,
                       "%s: count %zu of %s needs a %s of %zu bytes on rank %d, more than the "
                       "%llu bytes of %s memory there: the count is wrong",
                       c->fn, c->count, tutti_type_name(c->type), which, bytes, comm->rank, have,
                       k == TUTTI_MEM_DEVICE    ? "device"
                       : k == TUTTI_MEM_MANAGED ? "device and host"
                                                : "host");
  }
  return ncclSuccess;
}

/* Every machine holds a GiB: only larger buffers are compared. */
static inline ncclResult_t check_fits(const struct ncclComm* comm, const struct tutti_coll_call* c,
                                      enum tutti_mem k, int needed, size_t bytes,
                                      const char* which) {
  return needed && bytes >= ((size_t)1 << 30) ? check_fits_slow(comm, c, k, bytes, which)
                                              : ncclSuccess;
}

static ncclResult_t check_call(struct ncclComm* comm, struct tutti_coll_call* c) {
  NCCLCHECK(tutti_comm_check_active(comm, c->fn));
  /* After a failed collective every call fails with its cause, as on the
   * peers: the ranks no longer agree on where they are. */
  NCCLCHECK(tutti_agree_sticky(comm->er.bell));
  ncclResult_t job = tutti_bootstrap_job_check(comm->boot);
  if (job != ncclSuccess) {
    /* Another job came on this job's NCCL_COMM_ID: the peers hear it too. */
    tutti_agree_fail(tutti_exec_bells(&comm->er), job, comm->rank, comm->er.call_seq + 1, 0);
    return job;
  }
  if ((int)c->type < 0 || c->type >= ncclNumTypes) {
    return tutti_error(ncclInvalidArgument, "%s: invalid datatype %d (valid: 0..%d)", c->fn,
                       (int)c->type, ncclNumTypes - 1);
  }
  const int n = comm->nranks, r = comm->rank;
  const int rooted = c->coll == TUTTI_COLL_BROADCAST || c->coll == TUTTI_COLL_REDUCE ||
                     c->coll == TUTTI_COLL_GATHER || c->coll == TUTTI_COLL_SCATTER ||
                     c->coll == TUTTI_COLL_SEND || c->coll == TUTTI_COLL_RECV;
  if (rooted && (c->root < 0 || c->root >= n)) {
    return tutti_error(ncclInvalidArgument, "%s: %s %d is out of range [0, %d)", c->fn,
                       c->coll == TUTTI_COLL_SEND || c->coll == TUTTI_COLL_RECV ? "peer" : "root",
                       c->root, n);
  }
  const int is_root = rooted && c->root == r;
  c->needs_send = c->coll != TUTTI_COLL_RECV;
  c->needs_recv = c->coll != TUTTI_COLL_SEND;
  if (c->coll == TUTTI_COLL_BROADCAST || c->coll == TUTTI_COLL_SCATTER) {
    c->needs_send = is_root;
  }
  if (c->coll == TUTTI_COLL_REDUCE || c->coll == TUTTI_COLL_GATHER) {
    c->needs_recv = is_root;
  }
  const size_t es = tutti_type_size(c->type);
  size_t blocks = send_blocks(c, n) > recv_blocks(c, n) ? send_blocks(c, n) : recv_blocks(c, n);
  if (c->count > SIZE_MAX / es / blocks) {
    return tutti_error(ncclInvalidArgument, "%s: count %zu of %s overflows the address space",
                       c->fn, c->count, tutti_type_name(c->type));
  }
  if (c->count > 0 &&
      ((c->needs_send && c->sendbuff == NULL) || (c->needs_recv && c->recvbuff == NULL))) {
    return tutti_error(ncclInvalidArgument, "%s: %s is NULL on rank %d (count %zu)", c->fn,
                       c->needs_send && c->sendbuff == NULL ? "sendbuff" : "recvbuff", r, c->count);
  }
  /* Where the buffers live decides the executor (tune's rule); a rank that
   * passes no buffer (count 0, a broadcast's non-root send side) follows
   * the other. */
  enum tutti_mem ks = c->needs_send ? tutti_cuda_mem_kind(c->sendbuff) : TUTTI_MEM_MANAGED;
  enum tutti_mem kr = c->needs_recv ? tutti_cuda_mem_kind(c->recvbuff) : TUTTI_MEM_MANAGED;
  const int zero = c->count == 0;
  const int dev_only =
      (c->needs_send && ks == TUTTI_MEM_DEVICE) || (c->needs_recv && kr == TUTTI_MEM_DEVICE);
  const int host_only =
      !zero && ((c->needs_send && ks == TUTTI_MEM_HOST) || (c->needs_recv && kr == TUTTI_MEM_HOST));
  if (dev_only && host_only) {
    return tutti_error(ncclInvalidArgument,
                       "%s: rank %d passed one buffer in device memory and one in host memory: "
                       "pass both on the device or both on the host",
                       c->fn, r);
  }
  const int reachable = (c->needs_send && c->sendbuff != NULL && ks != TUTTI_MEM_HOST) ||
                        (c->needs_recv && c->recvbuff != NULL && kr != TUTTI_MEM_HOST);
  c->device = tutti_tune_executor(dev_only, host_only, reachable, comm->dev != NULL);
  /* A buffer larger than the memory it lives in cannot be valid: refused
   * before anything is sized from the count. */
  NCCLCHECK(check_fits(comm, c, ks, c->needs_send, send_blocks(c, n) * c->count * es, "sendbuff"));
  NCCLCHECK(check_fits(comm, c, kr, c->needs_recv, recv_blocks(c, n) * c->count * es, "recvbuff"));
  if (c->device && comm->dev == NULL) {
    return tutti_error(ncclInvalidUsage,
                       "%s: rank %d passed device buffers, which this "
                       "communicator cannot move: %s",
                       c->fn, r, comm->dev_why);
  }
  return ncclSuccess;
}

static int in_place(const struct tutti_coll_call* c, int rank, size_t bytes) {
  const char* s = c->sendbuff;
  const char* d = c->recvbuff;
  switch (c->coll) {
    case TUTTI_COLL_ALLGATHER:
      return s == d + (size_t)rank * bytes;
    case TUTTI_COLL_REDUCESCATTER:
      return d == s + (size_t)rank * bytes;
    case TUTTI_COLL_GATHER:
      return s == d + (size_t)c->root * bytes;
    case TUTTI_COLL_SCATTER:
      return d == s + (size_t)c->root * bytes;
    default:
      return s == d;
  }
}

/* What every rank must agree on (call/agree.c); its number is given when
 * it runs (api/group.c), so calls a failed group drops count for nothing.
 * Sends and receives pair by peer instead: no record. */
static void call_record(const struct ncclComm* comm, const struct tutti_coll_call* c,
                        struct tutti_call* out) {
  memset(out, 0, sizeof *out);
  if (c->coll == TUTTI_COLL_SEND || c->coll == TUTTI_COLL_RECV) {
    return;
  }
  const int rooted = c->coll == TUTTI_COLL_BROADCAST || c->coll == TUTTI_COLL_REDUCE ||
                     c->coll == TUTTI_COLL_GATHER || c->coll == TUTTI_COLL_SCATTER;
  out->count = c->count;
  out->root = rooted ? c->root : -1;
  out->coll = (uint8_t)c->coll;
  out->type = (uint8_t)c->type;
  out->device = (uint8_t)c->device;
  out->red = TUTTI_CALL_RED_NONE;
  if (c->reduces && (int)c->op < (int)ncclNumOps) {
    out->red = (uint8_t)c->op;
  } else if (c->reduces) {
    const int idx = (int)c->op - (int)ncclNumOps;
    out->red = comm->redops[idx].residence == ncclScalarDevice ? TUTTI_CALL_RED_PREMUL_DEV
                                                               : TUTTI_CALL_RED_PREMUL_HOST;
  }
}

/* A call's own configuration onto its arguments: the algorithms it may use
 * (NCCL's rule: a selection that cannot run here is an error when forced,
 * else the call chooses as if none was given) and its channels' bounds. */
static ncclResult_t apply_config(const struct tutti_coll_call* c, const struct tutti_coll_cfg* cfg,
                                 struct tutti_coll_args* a) {
  a->min_channels = cfg->min_channels;
  a->max_channels = cfg->max_channels;
  if (cfg->algos == 0) {
    return ncclSuccess;
  }
  const unsigned runs = tutti_tune_runnable(a, cfg->algos & tutti_tune_implements(c->coll));
  if (runs != 0) {
    a->call_algos = runs;
  } else if (cfg->force) {
    return tutti_error(ncclInvalidArgument,
                       "%s: ncclCollConfig_t.algSelection \"%s\" cannot be honoured for this "
                       "%s of %zu %s on %d ranks (%s buffers): none of the algorithms it names "
                       "runs it here (set forceAlgSelection to 0 to let the call choose)",
                       c->fn, cfg->selection, tutti_coll_name(c->coll), c->count,
                       tutti_type_name(c->type), a->nranks, c->device ? "device" : "host");
  } else {
    INFO(TUTTI_TUNING, "%s: algSelection \"%s\" cannot run this call here: chosen as usual", c->fn,
         cfg->selection);
  }
  return ncclSuccess;
}

static ncclResult_t enqueue(struct ncclComm* comm, struct tutti_coll_call* c, cudaStream_t stream,
                            const struct tutti_coll_cfg* cfg) {
  NCCLCHECK(check_call(comm, c));
  struct tutti_op* op = tutti_op_get(&comm->er);
  if (op == NULL) {
    return tutti_error(ncclSystemError, "%s: out of host memory", c->fn);
  }
  ncclResult_t res = ncclSuccess;
  op->redop.type = c->type;
  op->device = c->device;
  op->stream = stream;
  op->launch_event = cfg != NULL ? cfg->event : NULL;
  op->scalar_dev = NULL;
  if (c->reduces) {
    NCCLCHECKGOTO(
        tutti_redop_resolve(comm, c->op, c->type, c->fn, c->device, &op->redop, &op->scalar_dev),
        res, fail);
  }
  if (c->count == 0 && c->coll != TUTTI_COLL_SEND && c->coll != TUTTI_COLL_RECV) {
    /* Nothing to move on any rank (every rank passes the same count): no
     * launch, no exchange, as NCCL does. Point-to-point calls still pair.
     * The launch that did not happen is complete now. */
    tutti_op_put(op);
    return cfg != NULL && cfg->event != NULL ? tutti_cuda_event_record(cfg->event, stream)
                                             : ncclSuccess;
  }
  const size_t es = tutti_type_size(c->type);
  struct tutti_coll_args a;
  memset(&a, 0, sizeof a); /* compared whole below: padding included */
  a.coll = c->coll;
  a.count = c->count;
  a.elem_size = es;
  a.nranks = comm->nranks;
  a.rank = comm->rank;
  a.root = c->root;
  a.in_place = in_place(c, comm->rank, c->count * es);
  /* The device executor cuts rounds itself, per channel (device/work.h). */
  a.chunk_bytes = c->device ? 0 : tutti_tune_chunk(comm->er.queue_bytes, comm->er.piece_bytes);
  a.host_of = comm->host_of;
  a.nhosts = comm->nhosts;
  a.max_local = comm->max_local;
  a.can_pull = c->device ? 0 : comm->can_pull;
  a.board_bytes = c->device ? 0 : comm->board_bytes;
  a.inter_algo = tutti_tune_inter(&a);
  a.device = c->device;
  a.deterministic = comm->deterministic;
  if (cfg != NULL) {
    NCCLCHECKGOTO(apply_config(c, cfg, &a), res, fail);
  }
  /* Operations come back from the pool with their last plan and schedule:
   * a loop of identical calls plans and builds once (both depend on `a`
   * alone). A device call's plan waits for its launch, where what the
   * device communicator offers it is known (api/launch.c). */
  if (!op->sched_valid || memcmp(&op->args, &a, sizeof a) != 0) {
    op->args = a;
    op->sched_valid = 0;
    if (!c->device) {
      tutti_tune_plan(&a, &op->plan);
      NCCLCHECKGOTO(tutti_schedule_build(op->plan.algo, &a, &op->sched), res, fail);
      op->sched_valid = 1;
    }
  }
  if (!c->device) {
    NCCLCHECKGOTO(tutti_op_scratch(op), res, fail);
  }
  op->bufs[TUTTI_BUF_SEND] = (void*)c->sendbuff;
  op->bufs[TUTTI_BUF_RECV] = c->recvbuff;
  op->bufs[TUTTI_BUF_SCRATCH] = c->device ? NULL : op->scratch;
  op->seq = ++comm->er.op_count;
  if (c->device) {
    tutti_reg_call(comm, c->fn, op->seq, c->sendbuff, send_blocks(c, comm->nranks) * c->count * es,
                   c->recvbuff, recv_blocks(c, comm->nranks) * c->count * es);
  }
  call_record(comm, c, &op->call);
  op->call.tag = cfg != NULL ? cfg->tag : 0;
  op->board_gen = 0; /* given when the operation runs (api/group.c) */
  TRACE(TUTTI_COLL, "%s #%llu: count %zu %s root %d algo %s in-place %d %s tag %llu", c->fn,
        (unsigned long long)op->seq, c->count, tutti_type_name(c->type), c->root,
        c->device ? "(at launch)" : tutti_algo_get(op->plan.algo)->name, a.in_place,
        c->device ? "device" : "host", (unsigned long long)op->call.tag);
  return tutti_group_add_op(op, comm, stream);
fail:
  tutti_op_put(op);
  return res;
}

ncclResult_t tutti_coll_run(struct ncclComm* comm, struct tutti_coll_call c, cudaStream_t stream,
                            const struct tutti_coll_cfg* cfg) {
  ncclResult_t res = enqueue(comm, &c, stream, cfg);
  /* An invalid call inside a group makes the whole group fail, as in NCCL. */
  return res == ncclSuccess ? res : tutti_group_fail(res);
}

NCCL_API ncclResult_t ncclAllReduce(const void* sendbuff, void* recvbuff, size_t count,
                                    ncclDataType_t datatype, ncclRedOp_t op, ncclComm_t comm,
                                    cudaStream_t stream) {
  struct tutti_coll_call c = {
      TUTTI_COLL_ALLREDUCE, "ncclAllReduce", sendbuff, recvbuff, count, datatype, op, 0, 1};
  return tutti_coll_run(comm, c, stream, NULL);
}

NCCL_API ncclResult_t ncclBroadcast(const void* sendbuff, void* recvbuff, size_t count,
                                    ncclDataType_t datatype, int root, ncclComm_t comm,
                                    cudaStream_t stream) {
  struct tutti_coll_call c = {
      TUTTI_COLL_BROADCAST, "ncclBroadcast", sendbuff, recvbuff, count, datatype, ncclSum, root, 0};
  return tutti_coll_run(comm, c, stream, NULL);
}

NCCL_API ncclResult_t ncclBcast(void* buff, size_t count, ncclDataType_t datatype, int root,
                                ncclComm_t comm, cudaStream_t stream) {
  struct tutti_coll_call c = {
      TUTTI_COLL_BROADCAST, "ncclBcast", buff, buff, count, datatype, ncclSum, root, 0};
  return tutti_coll_run(comm, c, stream, NULL);
}

NCCL_API ncclResult_t ncclReduce(const void* sendbuff, void* recvbuff, size_t count,
                                 ncclDataType_t datatype, ncclRedOp_t op, int root, ncclComm_t comm,
                                 cudaStream_t stream) {
  struct tutti_coll_call c = {TUTTI_COLL_REDUCE, "ncclReduce", sendbuff, recvbuff, count,
                              datatype,          op,           root,     1};
  return tutti_coll_run(comm, c, stream, NULL);
}

NCCL_API ncclResult_t ncclAllGather(const void* sendbuff, void* recvbuff, size_t sendcount,
                                    ncclDataType_t datatype, ncclComm_t comm, cudaStream_t stream) {
  struct tutti_coll_call c = {TUTTI_COLL_ALLGATHER,
                              "ncclAllGather",
                              sendbuff,
                              recvbuff,
                              sendcount,
                              datatype,
                              ncclSum,
                              0,
                              0};
  return tutti_coll_run(comm, c, stream, NULL);
}

NCCL_API ncclResult_t ncclReduceScatter(const void* sendbuff, void* recvbuff, size_t recvcount,
                                        ncclDataType_t datatype, ncclRedOp_t op, ncclComm_t comm,
                                        cudaStream_t stream) {
  struct tutti_coll_call c = {TUTTI_COLL_REDUCESCATTER,
                              "ncclReduceScatter",
                              sendbuff,
                              recvbuff,
                              recvcount,
                              datatype,
                              op,
                              0,
                              1};
  return tutti_coll_run(comm, c, stream, NULL);
}

NCCL_API ncclResult_t ncclAlltoAll(const void* sendbuff, void* recvbuff, size_t count,
                                   ncclDataType_t datatype, ncclComm_t comm, cudaStream_t stream) {
  struct tutti_coll_call c = {
      TUTTI_COLL_ALLTOALL, "ncclAlltoAll", sendbuff, recvbuff, count, datatype, ncclSum, 0, 0};
  return tutti_coll_run(comm, c, stream, NULL);
}

NCCL_API ncclResult_t ncclGather(const void* sendbuff, void* recvbuff, size_t count,
                                 ncclDataType_t datatype, int root, ncclComm_t comm,
                                 cudaStream_t stream) {
  struct tutti_coll_call c = {TUTTI_COLL_GATHER, "ncclGather", sendbuff, recvbuff, count,
                              datatype,          ncclSum,      root,     0};
  return tutti_coll_run(comm, c, stream, NULL);
}

NCCL_API ncclResult_t ncclScatter(const void* sendbuff, void* recvbuff, size_t count,
                                  ncclDataType_t datatype, int root, ncclComm_t comm,
                                  cudaStream_t stream) {
  struct tutti_coll_call c = {TUTTI_COLL_SCATTER, "ncclScatter", sendbuff, recvbuff, count,
                              datatype,           ncclSum,       root,     0};
  return tutti_coll_run(comm, c, stream, NULL);
}

NCCL_API ncclResult_t ncclSend(const void* sendbuff, size_t count, ncclDataType_t datatype,
                               int peer, ncclComm_t comm, cudaStream_t stream) {
  struct tutti_coll_call c = {TUTTI_COLL_SEND, "ncclSend", sendbuff, NULL, count,
                              datatype,        ncclSum,    peer,     0};
  return tutti_coll_run(comm, c, stream, NULL);
}

NCCL_API ncclResult_t ncclRecv(void* recvbuff, size_t count, ncclDataType_t datatype, int peer,
                               ncclComm_t comm, cudaStream_t stream) {
  struct tutti_coll_call c = {TUTTI_COLL_RECV, "ncclRecv", NULL, recvbuff, count,
                              datatype,        ncclSum,    peer, 0};
  return tutti_coll_run(comm, c, stream, NULL);
}
