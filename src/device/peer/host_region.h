/* Shared regions in host memory for the device executor (host_region.cu). */
#ifndef TUTTI_DEVICE_PEER_HOST_REGION_H
#define TUTTI_DEVICE_PEER_HOST_REGION_H

#include <cuda_runtime.h>
#include <stddef.h>
#include <stdint.h>

#include "nccl.h"

struct td_host_region {
  char* host; /* this process's mapping */
  char* dev;  /* the same memory as kernels address it */
  size_t bytes;
  int registered;
};

/* Room for a segment's name (td_host_region_name). */
#define TD_HOST_REGION_NAME 96

/* The segment name of `rank`'s region in communicator `comm_hash` of job `secret`. */
void td_host_region_name(char* out, size_t len, const unsigned char* secret, uint64_t comm_hash,
                         int rank);
/* Creates (zeroed) or opens the segment `name`, maps and registers it. */
ncclResult_t td_host_region_map(const char* name, size_t bytes, int create,
                                struct td_host_region* r);
void td_host_region_unmap(struct td_host_region* r);

/* Suspending (device/suspend.cu): the mapping stays, so its address does
 * too; the pages are unpinned, then given back by the segment's owner once
 * every rank unpinned its mapping (a page still pinned elsewhere would stay
 * in use there); pinning again later finds zeroed pages. */
void td_host_region_unpin(struct td_host_region* r);
ncclResult_t td_host_region_punch(struct td_host_region* r);
/* Pins a mapping again; r->dev, the address kernels use, may change. */
ncclResult_t td_host_region_repin(struct td_host_region* r);

#endif
