/* See gpu_case.h. */
#include "gpu_case.h"

#include <cuda.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "checker.h"
#include "device/device.h"
#include "gpu_run.h"
#include "reduce/reduce.h"

static const char* cname[G_NCOLL] = {"AllReduce", "Reduce",   "ReduceScatter", "Broadcast",
                                     "AllGather", "AlltoAll", "Gather",        "Scatter"};

int gcase_reduces(int coll) {
  return coll == G_ALLREDUCE || coll == G_REDUCE || coll == G_REDUCESCATTER;
}

const char* const g_mem_name[G_MEM_NKINDS] = {"device",     "managed",      "pinned",
                                              "registered", "ncclMemAlloc", "VMM"};

/* Driver calls for G_MEM_VMM, found through the runtime (no -lcuda). */
typedef CUresult (*gran_fn)(size_t*, const CUmemAllocationProp*, CUmemAllocationGranularity_flags);
typedef CUresult (*create_fn)(CUmemGenericAllocationHandle*, size_t, const CUmemAllocationProp*,
                              unsigned long long);
typedef CUresult (*reserve_fn)(CUdeviceptr*, size_t, size_t, CUdeviceptr, unsigned long long);
typedef CUresult (*map_fn)(CUdeviceptr, size_t, size_t, CUmemGenericAllocationHandle,
                           unsigned long long);
typedef CUresult (*access_fn)(CUdeviceptr, size_t, const CUmemAccessDesc*, size_t);
typedef CUresult (*unmap_fn)(CUdeviceptr, size_t);
typedef CUresult (*release_fn)(CUmemGenericAllocationHandle);
typedef CUresult (*addr_free_fn)(CUdeviceptr, size_t);

static void* driver_fn(const char* name) {
  void* f = NULL;
  enum cudaDriverEntryPointQueryResult q;
  if (cudaGetDriverEntryPointByVersion(name, &f, 12000, cudaEnableDefault, &q) != cudaSuccess ||
      q != cudaDriverEntryPointSuccess) {
    return NULL;
  }
  return f;
}

/* Device memory as cuMem maps it: a physical allocation mapped into a
 * reserved range, access granted to `dev`. */
static void* vmm_alloc(size_t bytes, int dev, size_t* mapped) {
  gran_fn gran = (gran_fn)driver_fn("cuMemGetAllocationGranularity");
  create_fn create = (create_fn)driver_fn("cuMemCreate");
  reserve_fn reserve = (reserve_fn)driver_fn("cuMemAddressReserve");
  map_fn map = (map_fn)driver_fn("cuMemMap");
  access_fn access = (access_fn)driver_fn("cuMemSetAccess");
  release_fn release = (release_fn)driver_fn("cuMemRelease");
  if (!gran || !create || !reserve || !map || !access || !release) {
    return NULL;
  }
  CUmemAllocationProp p;
  memset(&p, 0, sizeof p);
  p.type = CU_MEM_ALLOCATION_TYPE_PINNED;
  p.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  p.location.id = dev;
  size_t g = 0;
  if (gran(&g, &p, CU_MEM_ALLOC_GRANULARITY_MINIMUM) != CUDA_SUCCESS || g == 0) {
    return NULL;
  }
  const size_t size = (bytes + g - 1) / g * g;
  CUmemGenericAllocationHandle h;
  CUdeviceptr va = 0;
  if (create(&h, size, &p, 0) != CUDA_SUCCESS) {
    return NULL;
  }
  CUmemAccessDesc a;
  memset(&a, 0, sizeof a);
  a.location = p.location;
  a.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
  if (reserve(&va, size, g, 0, 0) != CUDA_SUCCESS || map(va, size, 0, h, 0) != CUDA_SUCCESS ||
      access(va, size, &a, 1) != CUDA_SUCCESS) {
    release(h);
    return NULL;
  }
  release(h); /* the mapping keeps the memory */
  *mapped = size;
  return (void*)(uintptr_t)va;
}

static void vmm_free(void* p, size_t size) {
  unmap_fn unmap = (unmap_fn)driver_fn("cuMemUnmap");
  addr_free_fn addr_free = (addr_free_fn)driver_fn("cuMemAddressFree");
  if (p != NULL && unmap != NULL && addr_free != NULL) {
    unmap((CUdeviceptr)(uintptr_t)p, size);
    addr_free((CUdeviceptr)(uintptr_t)p, size);
  }
}

static char* mem_alloc(int kind, size_t cap, int dev, size_t* mapped) {
  void* p = NULL;
  switch (kind) {
    case G_MEM_DEVICE:
      return cudaMalloc(&p, cap) == cudaSuccess ? p : NULL;
    case G_MEM_MANAGED:
      return cudaMallocManaged(&p, cap, cudaMemAttachGlobal) == cudaSuccess ? p : NULL;
    case G_MEM_PINNED:
      return cudaMallocHost(&p, cap) == cudaSuccess ? p : NULL;
    case G_MEM_REGISTERED:
      p = malloc(cap);
      if (p != NULL && cudaHostRegister(p, cap, cudaHostRegisterDefault) != cudaSuccess) {
        free(p);
        p = NULL;
      }
      return p;
    case G_MEM_NCCL:
      return ncclMemAlloc(&p, cap) == ncclSuccess ? p : NULL;
    case G_MEM_VMM:
      return vmm_alloc(cap, dev, mapped);
    default:
      return NULL;
  }
}

static void mem_free(int kind, void* p, size_t mapped) {
  if (p == NULL) {
    return;
  }
  switch (kind) {
    case G_MEM_PINNED:
      cudaFreeHost(p);
      break;
    case G_MEM_REGISTERED:
      cudaHostUnregister(p);
      free(p);
      break;
    case G_MEM_NCCL:
      ncclMemFree(p);
      break;
    case G_MEM_VMM:
      vmm_free(p, mapped);
      break;
    default:
      cudaFree(p);
      break;
  }
}

/* Host-side kinds are written by the CPU; the others by CUDA. */
static int mem_fill(int kind, void* p, int byte, size_t n) {
  if (kind == G_MEM_PINNED || kind == G_MEM_REGISTERED) {
    memset(p, byte, n);
    return 1;
  }
  return cudaMemset(p, byte, n) == cudaSuccess && cudaDeviceSynchronize() == cudaSuccess;
}

int grank_alloc_kinds(struct grank* g, size_t cap, int ksend, int krecv) {
  g->cap = cap;
  g->ksend = ksend;
  g->krecv = krecv;
  g->hbuf = malloc(cap);
  g->ref = malloc(cap);
  g->dsend = mem_alloc(ksend, cap, g->dev, &g->vmm_send);
  g->drecv = mem_alloc(krecv, cap, g->dev, &g->vmm_recv);
  return g->hbuf != NULL && g->ref != NULL && g->dsend != NULL && g->drecv != NULL &&
         cudaMalloc((void**)&g->dscalar, 64) == cudaSuccess;
}

int grank_alloc(struct grank* g, size_t cap) {
  return grank_alloc_kinds(g, cap, G_MEM_DEVICE, G_MEM_DEVICE);
}

void grank_free(struct grank* g) {
  mem_free(g->ksend, g->dsend, g->vmm_send);
  mem_free(g->krecv, g->drecv, g->vmm_recv);
  cudaFree(g->dscalar);
  free(g->hbuf);
  free(g->ref);
  g->dsend = g->drecv = g->dscalar = g->hbuf = g->ref = NULL;
}

const char* gcase_name(const struct gcase* c, const struct grank* g, char* buf, size_t len) {
  snprintf(buf, len, "rank %d/%d (GPU %d) %s %s op %d count %zu %s root %d", g->rank, g->nranks,
           g->dev, cname[c->coll], tutti_type_name(c->type), c->op, c->count,
           c->inplace ? "in-place" : "out-of-place", c->root);
  return buf;
}

static size_t in_elems(const struct gcase* c, int n) {
  return (c->coll == G_REDUCESCATTER || c->coll == G_ALLTOALL || c->coll == G_SCATTER)
             ? c->count * (size_t)n
             : c->count;
}

int gcase_prepare(const struct gcase* c, struct grank* g) {
  const size_t es = tutti_type_size(c->type);
  const int n = g->nranks, r = g->rank;
  const size_t big = c->count * (size_t)n * es;
  char name[200];
  if (big > g->cap) {
    fprintf(stderr, "%s: buffers too small\n", gcase_name(c, g, name, sizeof name));
    return 0;
  }
  cudaSetDevice(g->dev);
  g->send = g->dsend;
  g->recv = g->drecv;
  if (c->inplace) {
    switch (c->coll) {
      case G_ALLGATHER:
        g->send = g->drecv + (size_t)r * c->count * es;
        break;
      case G_REDUCESCATTER:
        g->recv = g->dsend + (size_t)r * c->count * es;
        break;
      case G_GATHER:
        g->send = r == c->root ? g->drecv + (size_t)r * c->count * es : g->dsend;
        break;
      case G_SCATTER:
        g->recv = r == c->root ? g->dsend + (size_t)r * c->count * es : g->drecv;
        break;
      default:
        g->send = g->drecv;
        break;
    }
  }
  /* Poison the output, then place the input. */
  if (!mem_fill(g->krecv, g->drecv, 0x5a, big > 0 ? big : 1)) {
    return 0;
  }
  int fop = gcase_reduces(c->coll) ? (c->op == ncclNumOps ? ncclSum : c->op) : ncclSum;
  size_t ne = in_elems(c, n);
  chk_fill(g->hbuf, c->type, fop, r, c->salt, ne);
  if (ne > 0 && cudaMemcpy(g->send, g->hbuf, ne * es, cudaMemcpyDefault) != cudaSuccess) {
    return 0;
  }
  g->rop = (ncclRedOp_t)c->op;
  if (c->op == ncclNumOps) {
    char s[8];
    chk_two(c->type, s);
    void* where = s;
    if (c->scalar_on_device) {
      cudaMemcpy(g->dscalar, s, 8, cudaMemcpyHostToDevice);
      where = g->dscalar;
    }
    if (ncclRedOpCreatePreMulSum(&g->rop, where, c->type,
                                 c->scalar_on_device ? ncclScalarDevice : ncclScalarHostImmediate,
                                 g->comm) != ncclSuccess) {
      fprintf(stderr, "%s: ncclRedOpCreatePreMulSum: %s\n", gcase_name(c, g, name, sizeof name),
              ncclGetLastError(g->comm));
      return 0;
    }
  }
  return 1;
}

ncclResult_t gcase_issue(const struct gcase* c, struct grank* g) {
  if (gcase_config_on()) {
    return gcase_issue_config(c, g); /* gpu_config.c */
  }
  cudaStream_t s = g->stream;
  switch (c->coll) {
    case G_ALLREDUCE:
      return ncclAllReduce(g->send, g->recv, c->count, c->type, g->rop, g->comm, s);
    case G_REDUCE:
      return ncclReduce(g->send, g->recv, c->count, c->type, g->rop, c->root, g->comm, s);
    case G_REDUCESCATTER:
      return ncclReduceScatter(g->send, g->recv, c->count, c->type, g->rop, g->comm, s);
    case G_BROADCAST:
      return ncclBroadcast(g->send, g->recv, c->count, c->type, c->root, g->comm, s);
    case G_ALLGATHER:
      return ncclAllGather(g->send, g->recv, c->count, c->type, g->comm, s);
    case G_ALLTOALL:
      return ncclAlltoAll(g->send, g->recv, c->count, c->type, g->comm, s);
    case G_GATHER:
      return ncclGather(g->send, g->recv, c->count, c->type, c->root, g->comm, s);
    case G_SCATTER:
      return ncclScatter(g->send, g->recv, c->count, c->type, c->root, g->comm, s);
    default:
      return ncclInvalidArgument;
  }
}

int gcase_verify(const struct gcase* c, struct grank* g) {
  const size_t es = tutti_type_size(c->type);
  const int n = g->nranks, r = g->rank;
  const size_t big = c->count * (size_t)n;
  char name[200];
  gcase_name(c, g, name, sizeof name);
  cudaSetDevice(g->dev);
  cudaError_t e = cudaStreamSynchronize(g->stream);
  if (c->op == ncclNumOps) {
    ncclRedOpDestroy(g->rop, g->comm);
  }
  if (e != cudaSuccess) {
    fprintf(stderr, "%s: stream: %s\n", name, cudaGetErrorString(e));
    return 0;
  }
  size_t out_elems = c->count;
  if (c->coll == G_ALLGATHER || c->coll == G_ALLTOALL || (c->coll == G_GATHER && r == c->root)) {
    out_elems = big;
  }
  if ((c->coll == G_REDUCE || c->coll == G_GATHER) && r != c->root) {
    out_elems = 0;
  }
  if (out_elems > 0 &&
      cudaMemcpy(g->hbuf, g->recv, out_elems * es, cudaMemcpyDefault) != cudaSuccess) {
    fprintf(stderr, "%s: copying the result back failed\n", name);
    return 0;
  }
  if (gcase_reduces(c->coll)) {
    size_t first = c->salt + (c->coll == G_REDUCESCATTER ? (size_t)r * c->count : 0);
    for (size_t i = 0; i < out_elems; i++) {
      double want = chk_round(c->type, chk_reduce_ref(c->type, c->op, n, first + i, 2));
      double got = chk_get(g->hbuf, c->type, i);
      if (!chk_equal(c->type, c->op, n, first + i, got, want)) {
        fprintf(stderr, "%s: element %zu is %g, expected %g\n", name, i, got, want);
        return 0;
      }
    }
    return 1;
  }
  const size_t s0 = c->salt;
  switch (c->coll) {
    case G_BROADCAST:
      chk_fill(g->ref, c->type, ncclSum, c->root, s0, c->count);
      break;
    case G_ALLGATHER:
    case G_GATHER:
      for (int p = 0; p < n; p++) {
        chk_fill(g->ref + (size_t)p * c->count * es, c->type, ncclSum, p, s0, c->count);
      }
      break;
    case G_ALLTOALL:
      for (int p = 0; p < n; p++) {
        chk_fill(g->ref + (size_t)p * c->count * es, c->type, ncclSum, p, s0 + (size_t)r * c->count,
                 c->count);
      }
      break;
    case G_SCATTER:
      chk_fill(g->ref, c->type, ncclSum, c->root, s0 + (size_t)r * c->count, c->count);
      break;
  }
  if (out_elems > 0 && memcmp(g->hbuf, g->ref, out_elems * es) != 0) {
    fprintf(stderr, "%s: received bytes differ from the expected ones\n", name);
    return 0;
  }
  return 1;
}

/* The environment of a procs-style mode (see test_gpu.c), set in each
 * rank's process before its communicator exists. */
void gcase_mode_env(const char* mode) {
  if (strcmp(mode, "nop2p") == 0 || strncmp(mode, "net", 3) == 0) {
    setenv("NCCL_P2P_DISABLE", "1", 1);
  }
  if (strncmp(mode, "net", 3) == 0) {
    setenv("NCCL_SHM_DISABLE", "1", 1);
  }
  if (strcmp(mode, "ring") == 0) {
    setenv("NCCL_ALGO", "^Mapped", 1);
  }
  if (strcmp(mode, "config") == 0) {
    setenv("TUTTI_GPU_CONFIG", "1", 1); /* gpu_config.c */
  }
  if (strcmp(mode, "ipc") == 0) {
    setenv("NCCL_CUMEM_ENABLE", "0", 1);
  }
  /* The mapped kernel in small inboxes and rounds: many rounds per lane,
   * slots reused within a call; LL up to 256 KB in 64 KB blocks. */
  if (strcmp(mode, "rounds") == 0) {
    setenv("TUTTI_TUNE", "mapped.memory=2m;mapped.round=2k;mapped.ll=256k;mapped.ll_block=64k", 1);
  }
  if (strcmp(mode, "simple") == 0) {
    setenv("TUTTI_TUNE", "mapped.memory=2m;mapped.round=2k;mapped.ll=0;mapped.ll128=0", 1);
  }
  if (strcmp(mode, "ce") == 0) {
    setenv("TUTTI_TUNE", "all:1-inf:@ce;ce.memory=1m", 1);
  }
  if (strcmp(mode, "ll128") == 0) {
    /* Every size in LL128 lines, through small inboxes: many rounds per
     * lane, slots reused within a call. */
    setenv("NCCL_PROTO", "LL128", 1);
    setenv("TUTTI_TUNE",
           "all:0-1g:@mapped;mapped.ll128_memory=4m;mapped.ll128_round=1k;"
           "mapped.ll128_block=16k",
           1);
  }
}

void gcase_assert_path(const char* mode) {
  uint64_t c[TUTTI_DEV_PATHS][TUTTI_DEV_PROTOS];
  tutti_dev_launch_counts(c);
  uint64_t path[TUTTI_DEV_PATHS] = {0};
  for (int p = 0; p < TUTTI_DEV_PATHS; p++) {
    path[p] = c[p][0] + c[p][1] + c[p][2];
  }
  /* tune/plan.h: 0 schedules, 1 the mapped kernel, 2 the copy engines. */
  int ok = 1;
  if (strcmp(mode, "ce") == 0) {
    ok = path[2] > 0;
  } else if (strcmp(mode, "ring") == 0) {
    ok = path[0] > 0 && path[1] == 0;
  } else if (strcmp(mode, "simple") == 0) {
    ok = path[1] > 0 && c[1][0] == 0 && c[1][2] == 0;
  } else if (strcmp(mode, "ll128") == 0) {
    ok = c[1][2] > 0;
  } else if (strcmp(mode, "rounds") == 0) {
    ok = path[1] > 0;
  } else {
    return; /* a mode that forces no path */
  }
  if (ok) {
    passed++;
  } else {
    FAILF(
        "mode %s did not run the path it forces: launches by path and protocol (LL, Simple, "
        "LL128): schedules %llu/%llu/%llu, mapped %llu/%llu/%llu, copy engines %llu/%llu/%llu",
        mode, (unsigned long long)c[0][0], (unsigned long long)c[0][1], (unsigned long long)c[0][2],
        (unsigned long long)c[1][0], (unsigned long long)c[1][1], (unsigned long long)c[1][2],
        (unsigned long long)c[2][0], (unsigned long long)c[2][1], (unsigned long long)c[2][2]);
  }
}
