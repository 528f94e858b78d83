/* Resolving an ncclRedOp_t for one call. */
#ifndef TUTTI_API_REDOP_H
#define TUTTI_API_REDOP_H

#include "api/comm.h"
#include "reduce/reduce.h"

ncclResult_t tutti_redop_resolve(struct ncclComm* comm, ncclRedOp_t op, ncclDataType_t type,
                                 const char* what, struct tutti_redop* out);

#endif
