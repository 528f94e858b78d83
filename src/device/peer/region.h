/* GPU memory other processes of this host can map: a rank's region (its
 * counters and the queues and inboxes its peers write into).
 *
 * By default the region is allocated with CUDA's virtual memory API
 * (cuMemCreate), exported as a POSIX file descriptor, handed to each peer
 * process over a unix socket (util/fdpass.h) and mapped there for the
 * peer's own GPU only. CUDA IPC handles (cudaIpcOpenMemHandle with lazy
 * peer access) also work, but make every importing process create a
 * context on the owner's GPU: about 0.9 GB of that GPU's memory per peer
 * process. NCCL_CUMEM_ENABLE=0, or a driver without POSIX handles, keeps
 * the IPC handles. */
#ifndef TUTTI_DEVICE_PEER_REGION_H
#define TUTTI_DEVICE_PEER_REGION_H

#include <cuda_runtime.h>
#include <stddef.h>
#include <stdint.h>

#include "nccl.h"

struct td_region {
  char* ptr;
  size_t size;     /* mapped bytes (a multiple of the allocation granularity) */
  int kind;        /* TD_REGION_NONE, _CUMEM (mapped here), _IPC (opened handle), _MALLOC */
  uint64_t handle; /* CUmemGenericAllocationHandle when _CUMEM */
  int released;    /* _CUMEM suspended: addresses reserved, no memory behind them */
};

enum { TD_REGION_NONE = 0, TD_REGION_CUMEM = 1, TD_REGION_IPC = 2, TD_REGION_MALLOC = 3 };

/* Allocates `bytes` on GPU `dev` (the current device): cuMem when `cumem`
 * (tune's: NCCL_CUMEM_ENABLE) and supported, else cudaMalloc; zeroed on
 * `zero_on`, which the caller synchronizes (a device-wide wait could hang
 * on other work of the GPU). */
ncclResult_t td_region_alloc(struct td_region* r, int dev, size_t bytes, cudaStream_t zero_on,
                             int cumem);
/* An fd another process can import `r` with (cuMem regions); -1 and an
 * error otherwise. The caller closes it. */
ncclResult_t td_region_export(const struct td_region* r, int* fd);
/* Maps a peer process's region from `fd` for GPU `dev` (read and write). */
ncclResult_t td_region_import(struct td_region* r, int dev, int fd, size_t size);
/* Opens a peer process's cudaMalloc region from its IPC handle. */
ncclResult_t td_region_open_ipc(struct td_region* r, const cudaIpcMemHandle_t* h);
/* The base of the allocation holding device pointer `p` (what a CUDA IPC
 * handle shares) in *base: 1, or 0 where the driver cannot say. */
int td_region_base(const void* p, char** base);
/* Lets GPU `dev` of this process read and write a cuMem region of another
 * GPU of this process (`ptr`, `size`: as its owner mapped it). */
ncclResult_t td_region_grant(char* ptr, size_t size, int dev);
/* Unmaps (and frees, for this process's own) a region; a no-op on NONE. */
void td_region_free(struct td_region* r);
/* A driver function the device layer calls through the runtime (the
 * library links no libcuda): its name and where its address goes. */
struct td_driver_sym {
  const char* name;
  void** fn;
};
/* Fills every `syms[i].fn` (CUDA 12.0's version of each): 1 when all were found. */
int td_driver_load(const struct td_driver_sym* syms, size_t n);

/* Suspending (device/suspend.cu): a cuMem region's memory is unmapped and
 * released while its addresses stay reserved, so pointers to it (the
 * device communicator, captured graphs) stay valid. A cudaMalloc region is
 * freed and an IPC import closed: their addresses go too (the caller
 * decides whether anything may still hold them). Returns 1 when the region
 * is released, 0 on NONE. */
int td_region_release(struct td_region* r);
/* New memory of the same size behind this process's own released region:
 * at its old addresses (cuMem), or at new ones (cudaMalloc: r->ptr),
 * readable and writable by GPU `dev` (contents undefined); a no-op on a
 * region that was not released. */
ncclResult_t td_region_restore(struct td_region* r, int dev);
/* A peer's released IPC import opened again from its new handle. */
ncclResult_t td_region_reopen_ipc(struct td_region* r, const cudaIpcMemHandle_t* h);
/* A peer's released import mapped again from `fd` (the peer's restored
 * region) at its old addresses, for GPU `dev`. */
ncclResult_t td_region_reimport(struct td_region* r, int dev, int fd);

/* The name of rank `rank`'s box (util/fdpass.h) for communicator `s`. */
struct tutti_dev_setup;
void td_region_box_name(char* out, size_t len, const struct tutti_dev_setup* s, int rank);
/* Hands `myfd` to every rank p with sends[p] and collects an fd from every
 * rank p with gets[p] into fds[p] (else -1), through `box`, this rank's box,
 * already open (every peer's is open before any rank calls this). Fails
 * with a sentence when a descriptor cannot be sent or does not arrive
 * within the communicator's timeout. */
struct tutti_fdbox;
ncclResult_t td_region_swap(struct tutti_fdbox* box, const struct tutti_dev_setup* s,
                            const unsigned char* sends, const unsigned char* gets, int myfd,
                            int* fds);

#endif
