/* Resolving an ncclRedOp_t for one call. */
#ifndef TUTTI_API_REDOP_H
#define TUTTI_API_REDOP_H

#include "api/comm.h"
#include "reduce/reduce.h"

/* For a call on device buffers (`device`), a PreMulSum scalar that resides on
 * the device is returned in *scalar_dev, for the kernel to read; host calls
 * read it now. */
ncclResult_t tutti_redop_resolve(struct ncclComm* comm, ncclRedOp_t op, ncclDataType_t type,
                                 const char* what, int device, struct tutti_redop* out,
                                 const void** scalar_dev);

#endif
