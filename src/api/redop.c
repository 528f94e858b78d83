/* Reduction operators: the built-in ones resolved per call, and the
 * PreMulSum operators users create per communicator. */
#include <string.h>

#include "api/api.h"
#include "api/comm.h"
#include "api/redop.h"
#include "reduce/reduce.h"
#include "util/check.h"
#include "util/cuda.h"

static int is_float_type(ncclDataType_t t) {
  return t == ncclFloat16 || t == ncclFloat32 || t == ncclFloat64 || t == ncclBfloat16 ||
         t == ncclFloat8e4m3 || t == ncclFloat8e5m2;
}

/* Stores `v` as a value of type `t` in the scalar. */
static void scalar_from_double(struct tutti_redop* r, ncclDataType_t t, double v) {
  memset(&r->scalar, 0, sizeof r->scalar);
  switch (t) {
    case ncclFloat16:
      r->scalar.u16 = tutti_float_to_half((float)v);
      break;
    case ncclBfloat16:
      r->scalar.u16 = tutti_float_to_bf16((float)v);
      break;
    case ncclFloat8e4m3:
      r->scalar.u8 = tutti_float_to_e4m3((float)v);
      break;
    case ncclFloat8e5m2:
      r->scalar.u8 = tutti_float_to_e5m2((float)v);
      break;
    case ncclFloat32:
      r->scalar.f32 = (float)v;
      break;
    default:
      r->scalar.f64 = v;
      break;
  }
}

ncclResult_t tutti_redop_resolve(struct ncclComm* comm, ncclRedOp_t op, ncclDataType_t type,
                                 const char* what, int device, struct tutti_redop* out,
                                 const void** scalar_dev) {
  memset(out, 0, sizeof *out);
  *scalar_dev = NULL;
  out->type = type;
  switch ((int)op) {
    case ncclSum:
      out->kind = TUTTI_RED_SUM;
      return ncclSuccess;
    case ncclProd:
      out->kind = TUTTI_RED_PROD;
      return ncclSuccess;
    case ncclMax:
      out->kind = TUTTI_RED_MAX;
      return ncclSuccess;
    case ncclMin:
      out->kind = TUTTI_RED_MIN;
      return ncclSuccess;
    case ncclAvg:
      /* As NCCL: integers sum then divide, floating types pre-multiply by 1/N. */
      if (is_float_type(type)) {
        out->kind = TUTTI_RED_PREMULSUM;
        scalar_from_double(out, type, 1.0 / comm->nranks);
      } else {
        out->kind = TUTTI_RED_SUMPOSTDIV;
        out->divisor = (uint64_t)comm->nranks;
      }
      return ncclSuccess;
    default:
      break;
  }
  int idx = (int)op - (int)ncclNumOps;
  if (idx < 0 || idx >= TUTTI_MAX_USER_REDOPS || !comm->redops[idx].used) {
    return tutti_error(ncclInvalidArgument,
                       "%s: op %d is neither a built-in reduction nor one created on this "
                       "communicator with ncclRedOpCreatePreMulSum",
                       what, (int)op);
  }
  const struct tutti_user_redop* u = &comm->redops[idx];
  if (u->type != type) {
    return tutti_error(ncclInvalidArgument, "%s: op %d was created for %s but the call uses %s",
                       what, (int)op, tutti_type_name(u->type), tutti_type_name(type));
  }
  out->kind = TUTTI_RED_PREMULSUM;
  uint64_t bits = u->scalar_bits;
  if (u->residence == ncclScalarDevice && device) {
    /* Read by the kernel when it starts, as NCCL does: stream order decides the value. */
    *scalar_dev = u->scalar_ptr;
  } else if (u->residence == ncclScalarDevice) {
    if (tutti_cuda_is_device_ptr(u->scalar_ptr)) {
      return tutti_error(ncclInvalidArgument,
                         "%s: op %d has its scalar in device memory, which host-buffer "
                         "collectives cannot read: use ncclScalarHostImmediate",
                         what, (int)op);
    }
    bits = 0;
    memcpy(&bits, u->scalar_ptr, tutti_type_size(type));
  }
  memcpy(&out->scalar, &bits, sizeof bits);
  return ncclSuccess;
}

NCCL_API ncclResult_t ncclRedOpCreatePreMulSum(ncclRedOp_t* op, void* scalar,
                                               ncclDataType_t datatype,
                                               ncclScalarResidence_t residence, ncclComm_t comm) {
  NCCLCHECK(tutti_comm_check(comm, "ncclRedOpCreatePreMulSum"));
  if (op == NULL || scalar == NULL) {
    return tutti_error(ncclInvalidArgument, "ncclRedOpCreatePreMulSum: op or scalar is NULL");
  }
  if ((int)datatype < 0 || datatype >= ncclNumTypes) {
    return tutti_error(ncclInvalidArgument, "ncclRedOpCreatePreMulSum: invalid datatype %d",
                       (int)datatype);
  }
  if (residence != ncclScalarDevice && residence != ncclScalarHostImmediate) {
    return tutti_error(ncclInvalidArgument, "ncclRedOpCreatePreMulSum: invalid residence %d",
                       (int)residence);
  }
  for (int i = 0; i < TUTTI_MAX_USER_REDOPS; i++) {
    struct tutti_user_redop* u = &comm->redops[i];
    if (u->used) {
      continue;
    }
    memset(u, 0, sizeof *u);
    u->used = 1;
    u->type = datatype;
    u->residence = residence;
    u->scalar_ptr = scalar;
    if (residence == ncclScalarHostImmediate) {
      memcpy(&u->scalar_bits, scalar, tutti_type_size(datatype));
    }
    *op = (ncclRedOp_t)(ncclNumOps + i);
    return ncclSuccess;
  }
  return tutti_error(ncclInvalidUsage,
                     "ncclRedOpCreatePreMulSum: this communicator already has %d operators: "
                     "destroy unused ones with ncclRedOpDestroy",
                     TUTTI_MAX_USER_REDOPS);
}

NCCL_API ncclResult_t ncclRedOpDestroy(ncclRedOp_t op, ncclComm_t comm) {
  NCCLCHECK(tutti_comm_check(comm, "ncclRedOpDestroy"));
  int idx = (int)op - (int)ncclNumOps;
  if ((int)op >= 0 && (int)op < (int)ncclNumOps) {
    return tutti_error(ncclInvalidArgument,
                       "ncclRedOpDestroy: op %d is a built-in reduction and cannot be destroyed",
                       (int)op);
  }
  if (idx < 0 || idx >= TUTTI_MAX_USER_REDOPS || !comm->redops[idx].used) {
    return tutti_error(ncclInvalidArgument,
                       "ncclRedOpDestroy: op %d was not created on this communicator", (int)op);
  }
  comm->redops[idx].used = 0;
  return ncclSuccess;
}
