/* One collective call on device buffers, split into the three things a
 * test does with it on each rank: prepare (fill the input on the host and
 * copy it to the GPU), issue (the NCCL call on a stream), verify (copy the
 * output back and compare it bit for bit with checker.h's reference).
 * Splitting them lets one thread drive several ranks (ncclCommInitAll). */
#ifndef TUTTI_TEST_GPU_CASE_H
#define TUTTI_TEST_GPU_CASE_H

#include <cuda_runtime.h>
#include <stddef.h>

#include "nccl.h"

enum {
  G_ALLREDUCE,
  G_REDUCE,
  G_REDUCESCATTER,
  G_BROADCAST,
  G_ALLGATHER,
  G_ALLTOALL,
  G_GATHER,
  G_SCATTER,
  G_NCOLL
};

struct gcase {
  int coll;
  ncclDataType_t type;
  int op; /* ncclSum..ncclAvg, or ncclNumOps for PreMulSum (scalar 2) */
  size_t count;
  int inplace;
  int root;
  int scalar_on_device; /* PreMulSum: the scalar resides in device memory */
  size_t salt;          /* shifts the inputs, so that concurrent cases differ */
};

/* Kinds of memory a CUDA program hands in (grank_alloc_kinds). */
enum {
  G_MEM_DEVICE,     /* cudaMalloc */
  G_MEM_MANAGED,    /* cudaMallocManaged */
  G_MEM_PINNED,     /* cudaMallocHost */
  G_MEM_REGISTERED, /* malloc + cudaHostRegister */
  G_MEM_NCCL,       /* ncclMemAlloc */
  G_MEM_VMM,        /* cuMemCreate + cuMemMap (virtual memory management) */
  G_MEM_NKINDS
};
extern const char* const g_mem_name[G_MEM_NKINDS];

/* Per rank: the device buffers (sized for the largest case) and the host copies. */
struct grank {
  ncclComm_t comm;
  cudaStream_t stream;
  int rank, nranks, dev;
  char *dsend, *drecv, *dscalar; /* device */
  char *hbuf, *ref;              /* host */
  size_t cap;                    /* bytes of each buffer */
  int ksend, krecv;              /* G_MEM_* of dsend and drecv */
  size_t vmm_send, vmm_recv;     /* bytes mapped, for G_MEM_VMM */
  ncclRedOp_t rop;
  char* send; /* this case's pointers into dsend / drecv */
  char* recv;
};

int grank_alloc(struct grank* g, size_t cap);
/* As grank_alloc, with dsend and drecv of the given G_MEM_* kinds. */
int grank_alloc_kinds(struct grank* g, size_t cap, int ksend, int krecv);
void grank_free(struct grank* g);
const char* gcase_name(const struct gcase* c, const struct grank* g, char* buf, size_t len);
int gcase_reduces(int coll);
/* Returns 0 on failure, with the reason printed. */
int gcase_prepare(const struct gcase* c, struct grank* g);
ncclResult_t gcase_issue(const struct gcase* c, struct grank* g);
int gcase_verify(const struct gcase* c, struct grank* g);

/* Sets the variables a procs-style mode runs under (nop2p, net, ring, rounds,
 * simple, ce). */
void gcase_mode_env(const char* mode);
/* After a mode's cases: the path the mode forces (gcase_mode_env) is the
 * one this process's launches took, by the device executor's own counts. */
void gcase_assert_path(const char* mode);

/* Mode "config" (gpu_config.c): whether cases go through the
 * nccl<Coll>Config calls, and the call that issues them so. */
int gcase_config_on(void);
ncclResult_t gcase_issue_config(const struct gcase* c, struct grank* g);

#endif
