/* The device executor of a build without nvcc: device buffers are refused
 * with a sentence that says why; everything else of the library works. */
#include <stdio.h>

#include "device/device.h"
#include "util/check.h"

int tutti_dev_compiled(void) {
  return 0;
}

int tutti_dev_kernel_frames(const char** names, size_t* bytes, int max) {
  (void)names;
  (void)bytes;
  (void)max;
  return 0;
}

ncclResult_t tutti_dev_comm_create(const struct tutti_dev_setup* s, struct tutti_dev_comm** out,
                                   char* why, size_t why_len) {
  (void)s;
  *out = NULL;
  snprintf(why, why_len,
           "this build of tutti has no device executor (nvcc was not found when it was built)");
  return ncclSuccess;
}

int tutti_dev_comm_maps_gpus(const struct tutti_dev_comm* dc) {
  (void)dc;
  return 0;
}

void tutti_dev_comm_abort(struct tutti_dev_comm* dc) {
  (void)dc;
}

void tutti_dev_comm_destroy(struct tutti_dev_comm* dc) {
  (void)dc;
}

ncclResult_t tutti_dev_comm_error(struct tutti_dev_comm* dc) {
  (void)dc;
  return ncclSuccess;
}

ncclResult_t tutti_dev_comm_wait(struct tutti_dev_comm* dc) {
  (void)dc;
  return ncclSuccess;
}

ncclResult_t tutti_dev_launch(struct tutti_dev_comm* dc, const struct tutti_dev_op* ops, int nops) {
  (void)dc;
  (void)ops;
  (void)nops;
  return ncclInternalError;
}

ncclResult_t tutti_dev_mem_alloc(void** ptr, size_t size) {
  (void)size;
  *ptr = NULL;
  return ncclInternalError;
}

ncclResult_t tutti_dev_mem_free(void* ptr) {
  (void)ptr;
  return ncclInternalError;
}

void tutti_dev_comm_mem(struct tutti_dev_comm* dc, struct tutti_dev_mem* m) {
  (void)dc;
  *m = (struct tutti_dev_mem){0, 0, 0, 0};
}

/* Never reached: without the device executor no communicator has a device
 * part (the API suspends host communicators itself). */
ncclResult_t tutti_dev_comm_suspend(struct tutti_dev_comm* dc, const struct tutti_dev_setup* s) {
  (void)dc;
  (void)s;
  return tutti_error(ncclInternalError, "this build of tutti has no device executor to suspend");
}

ncclResult_t tutti_dev_comm_resume(struct tutti_dev_comm* dc, const struct tutti_dev_setup* s) {
  (void)dc;
  (void)s;
  return tutti_error(ncclInternalError, "this build of tutti has no device executor to resume");
}
