/* Memory calls: ncclMemAlloc / ncclMemFree, buffer registration (windows:
 * api/window.c). */
#include <stdlib.h>
#include <string.h>

#include "api/api.h"
#include "api/comm.h"
#include "api/register.h"
#include "util/check.h"
#include "util/cuda.h"

#define REG_MAGIC 0x74757474726567ULL /* "tuttireg" */

struct registration {
  uint64_t magic;
  struct ncclComm* comm;
  void* buff;
  size_t size;
  struct tutti_reg_entry* entry; /* the registration cache's, or NULL: staged */
};

NCCL_API ncclResult_t ncclMemAlloc(void** ptr, size_t size) {
  if (ptr == NULL) {
    return tutti_error(ncclInvalidArgument, "ncclMemAlloc: ptr is NULL");
  }
  *ptr = NULL;
  if (size == 0) {
    return tutti_error(ncclInvalidArgument, "ncclMemAlloc: size is 0");
  }
  /* As NCCL: memory of the calling thread's current GPU. A thread without a
   * CUDA context gets host memory, page aligned, for host collectives. */
  if (tutti_cuda_current_device() >= 0 && tutti_dev_compiled()) {
    NCCLCHECK(tutti_dev_mem_alloc(ptr, size));
    tutti_reg_mem_alloc(*ptr, size); /* NCCL_LOCAL_REGISTER=1: cached ahead */
    return ncclSuccess;
  }
  if (posix_memalign(ptr, 4096, size) != 0) {
    *ptr = NULL;
    return tutti_error(ncclSystemError, "ncclMemAlloc: could not allocate %zu bytes", size);
  }
  return ncclSuccess;
}

NCCL_API ncclResult_t ncclMemFree(void* ptr) {
  if (ptr != NULL && tutti_cuda_is_device_ptr(ptr)) {
    tutti_reg_mem_free(ptr); /* no communicator keeps its export past the free */
    return tutti_dev_mem_free(ptr);
  }
  free(ptr);
  return ncclSuccess;
}

/* Registration is an optimization hint: host collectives need none, so a
 * handle records the range (and is checked on deregistration); with
 * NCCL_LOCAL_REGISTER=1 it also holds the allocation in the registration
 * cache (api/register.c). */
NCCL_API ncclResult_t ncclCommRegister(const ncclComm_t comm, void* buff, size_t size,
                                       void** handle) {
  NCCLCHECK(tutti_comm_check_active(comm, "ncclCommRegister"));
  if (handle == NULL || (buff == NULL && size > 0)) {
    return tutti_error(ncclInvalidArgument, "ncclCommRegister: buff or handle is NULL");
  }
  struct registration* r = calloc(1, sizeof *r);
  if (r == NULL) {
    return tutti_error(ncclSystemError, "ncclCommRegister: out of host memory");
  }
  *r = (struct registration){REG_MAGIC, comm, buff, size, NULL};
  ncclResult_t res = tutti_reg_register(comm, buff, size, &r->entry);
  if (res != ncclSuccess) {
    free(r);
    return res;
  }
  *handle = r;
  return ncclSuccess;
}

NCCL_API ncclResult_t ncclCommDeregister(const ncclComm_t comm, void* handle) {
  NCCLCHECK(tutti_comm_check(comm, "ncclCommDeregister"));
  struct registration* r = handle;
  if (r == NULL || r->magic != REG_MAGIC || r->comm != comm) {
    return tutti_error(ncclInvalidArgument,
                       "ncclCommDeregister: handle %p was not returned by ncclCommRegister on "
                       "this communicator",
                       handle);
  }
  tutti_reg_deregister(comm, r->entry);
  r->magic = 0;
  free(r);
  return ncclSuccess;
}

/* Reads NCCL_DEBUG, NCCL_DEBUG_SUBSYS and NCCL_DEBUG_FILE again. */
NCCL_API void ncclResetDebugInit(void) {
  tutti_log_reload();
}

/* What NVIDIA's deprecated ncclResetDebugInit calls; exported as it is. */
NCCL_API void ncclResetDebugInitInternal(void) {
  tutti_log_reload();
}
