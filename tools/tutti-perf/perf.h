/* tutti-perf: the options, the process's world (ranks, threads, output) and
 * one rank's buffers, shared by every file of the tool. */
#ifndef TUTTI_PERF_H
#define TUTTI_PERF_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

#include "nccl.h"

#define PERF_MAX_TYPES ncclNumTypes
#define PERF_MAX_OPS 6
/* As in nccl-tests: "mulsum" stands for a PreMulSum operator that every
 * rank creates (and destroys) around each call. */
#define PERF_OP_MULSUM ((int)ncclNumOps)
#define PERF_OP_NONE (-1)
/* -r -1: every root in turn, for the rooted collectives. */
#define PERF_ALL_ROOTS (-1)

enum perf_device { PERF_DEV_AUTO, PERF_DEV_HOST, PERF_DEV_GPU };

struct perf_coll;

struct perf_opts {
  const struct perf_coll* coll;
  int nthreads, ngpus;
  size_t minbytes, maxbytes, stepbytes, stepfactor;
  int iters, warmup, agg_iters, check;
  int parallel_init, blocking, stream_null, timeout_s, graphs, report_cputime, average;
  ncclDataType_t types[PERF_MAX_TYPES];
  int ntypes;
  int ops[PERF_MAX_OPS];
  int nops;
  int root;
  enum perf_device device;
  int share_gpus;    /* --share-gpus: device index modulo the visible count */
  const char* lib;   /* --lib, NULL: the default search */
  const char* label; /* --label, NULL: derived from the library's file name */
  const char* json;  /* --json FILE or NULL */
  char cmdline[1024];
};

/* One rank: a thread drives -g of them. */
struct perf_rank {
  int rank; /* global */
  int dev;  /* CUDA device, -1 for host buffers */
  ncclComm_t comm;
  cudaStream_t stream;
  char* send; /* what the library sees: device memory in GPU mode */
  char* recv;
  char* send_img; /* host images that are filled and verified; == send/recv on host */
  char* recv_img;
  void* xbuf; /* scratch for exchanges between processes through the library */
  /* One-sided operations: the receive buffer is the window peers put into,
   * the send buffer a window too (NCCL wants a put's source in one). */
  ncclWindow_t recv_win, send_win;
  size_t free_before; /* device memory free before the communicator existed */
};

struct perf_json;

struct perf_world {
  const struct perf_opts* o;
  int gpu;  /* buffers are device memory */
  int ndev; /* visible GPUs */
  int nprocs, proc, local_rank;
  int nranks; /* nprocs * nthreads * ngpus */
  char host[256];
  char lib_label[64];
  pthread_barrier_t barrier;
  double* slots; /* one per thread, for in-process reductions */
  struct perf_json* json;
  char* lines;       /* nranks "# Using devices" lines */
  uint64_t progress; /* bumped as collectives complete; read by the watchdog */
};

struct perf_thread {
  struct perf_world* w;
  int index; /* thread within the process */
  struct perf_rank* ranks;
  pthread_t tid;
  double bw_sum;
  int bw_count;
  int errors;   /* rows (per placement) with wrong values */
  uint32_t rep; /* check passes so far: the seed, the same on every rank */
  int mem_reported;
};

/* Prints the message, marks the JSON file failed and ends the process: a
 * rank that cannot go on would leave the others waiting forever. */
void perf_die(const char* fmt, ...) __attribute__((format(printf, 1, 2), noreturn));

/* Exits with a report of the NCCL error, including ncclGetLastError. */
#define PERF_NCCL(call, comm, rank)                                       \
  do {                                                                    \
    ncclResult_t perf_r_ = (call);                                        \
    if (perf_r_ != ncclSuccess && perf_r_ != ncclInProgress) {            \
      perf_nccl_fail(#call, perf_r_, (comm), (rank), __FILE__, __LINE__); \
    }                                                                     \
  } while (0)

void perf_nccl_fail(const char* what, ncclResult_t r, ncclComm_t comm, int rank, const char* file,
                    int line) __attribute__((noreturn));

double perf_now(void); /* CLOCK_MONOTONIC seconds */

#endif
