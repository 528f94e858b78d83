/* The collectives tutti-perf measures: one table row each with nccl-tests'
 * size conventions, bandwidth factors, the call itself, and how its buffers
 * are filled and checked. */
#ifndef TUTTI_PERF_COLLS_H
#define TUTTI_PERF_COLLS_H

#include <stddef.h>

#include "data.h"
#include "nccl.h"

/* Element counts for one size, as nccl-tests' GetCollByteCount. */
struct perf_counts {
  size_t send, recv;  /* elements in this rank's send and receive buffers */
  size_t param;       /* the count passed to the call */
  size_t send_ip_off; /* in-place: sendbuff = recvbuff + rank * send_ip_off */
  size_t recv_ip_off; /* in-place: recvbuff = recvbuff + rank * recv_ip_off */
};

/* One call as a rank makes it. */
struct perf_call {
  const void* send;
  void* recv;
  size_t count;
  ncclDataType_t type;
  ncclRedOp_t op;
  int root;
  int rank, nranks;
  ncclComm_t comm;
  cudaStream_t stream;
  ncclWindow_t win; /* one-sided: the window of receive buffers */
  size_t win_off;   /* where `recv` lies in it, on every rank */
};

/* What fill and verify need: host images of one rank's buffers. */
struct perf_images {
  char* send;
  char* recv;
  int rank;
  int root;
  int in_place;
  const struct perf_counts* counts;
  const struct perf_gen* gen;
};

enum perf_busbw { PERF_BUSBW_ONE, PERF_BUSBW_RING, PERF_BUSBW_ALLREDUCE };

struct perf_coll {
  const char* name; /* "allreduce" */
  const char* api;  /* "ncclAllReduce" */
  int has_op, has_root;
  int algbw_times_n;     /* algbw counts param*n elements rather than param */
  enum perf_busbw busbw; /* busbw = algbw * factor(n) */
  int check_in_place;    /* nccl-tests does not check in-place alltoall, sendrecv */
  void (*counts)(size_t count, size_t elt, int n, struct perf_counts* out);
  void (*run)(const struct perf_call* c);
  /* Writes the inputs into the images (the receive image already zeroed). */
  void (*fill)(const struct perf_images* im);
  /* Wrong elements of the result in the receive image. */
  size_t (*verify)(const struct perf_images* im);
  int one_sided; /* peers write the receive buffer, a window: every rank fills before any puts */
};

extern const struct perf_coll perf_colls[];
extern const int perf_ncolls;

/* By name: "allreduce", "all_reduce", "all_reduce_perf", ... NULL if none. */
const struct perf_coll* perf_coll_find(const char* name);
double perf_busbw_factor(enum perf_busbw f, int nranks);

#endif
