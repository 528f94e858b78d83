/* The device executor of a build without nvcc: device buffers are refused
 * with a sentence that says why; everything else of the library works. */
#include <stdio.h>
#include <string.h>

#include "device/device.h"
#include "rma/rma_dev.h"
#include "util/check.h"

int tutti_dev_compiled(void) {
  return 0;
}

void tutti_dev_limits(struct tutti_dev_limits* lim) {
  memset(lim, 0, sizeof *lim);
}

void tutti_dev_comm_caps(struct tutti_dev_comm* dc, cudaStream_t stream, struct tutti_dev_caps* c) {
  (void)dc;
  (void)stream;
  memset(c, 0, sizeof *c);
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

int tutti_dev_regcache_driver(struct tutti_dev_comm* dc, struct tutti_regcache_driver* drv) {
  (void)dc;
  (void)drv;
  return 0;
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

const struct tutti_ras_dev* tutti_dev_ras_view(struct tutti_dev_comm* dc) {
  (void)dc;
  return NULL;
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

/* One-sided operations (rma/rma_dev.h): without a device executor no
 * communicator has a device communicator, so src/rma/ never calls these;
 * they still answer with the reason. */
static ncclResult_t no_device_rma(const char* what) {
  return tutti_error(ncclInvalidUsage,
                     "%s: this build of tutti has no device executor (nvcc was not found when it "
                     "was built): register host memory as the window",
                     what);
}

ncclResult_t tutti_dev_rma_start(struct tutti_dev_comm* dc, int nranks, int num_ctx, int nsignals,
                                 size_t max_payload, int* on_device) {
  (void)dc;
  (void)max_payload;
  (void)nranks;
  (void)num_ctx;
  (void)nsignals;
  *on_device = 0;
  return no_device_rma("one-sided operations on device memory");
}

void tutti_dev_rma_stop(struct tutti_dev_comm* dc) {
  (void)dc;
}

ncclResult_t tutti_dev_rma_win_export(struct tutti_dev_comm* dc, void* buff, size_t size,
                                      int device, unsigned char out[TUTTI_RMA_DEV_EXPORT]) {
  (void)dc;
  (void)buff;
  (void)size;
  (void)device;
  (void)out;
  return no_device_rma("ncclCommWindowRegister on device memory");
}

ncclResult_t tutti_dev_rma_win_register(struct tutti_dev_comm* dc, uint32_t win_id, void* buff,
                                        size_t size, const struct tutti_rma_peer_win* peers,
                                        int nranks, struct tutti_rma_dev_win** out) {
  (void)dc;
  (void)win_id;
  (void)buff;
  (void)size;
  (void)peers;
  (void)nranks;
  *out = NULL;
  return no_device_rma("ncclCommWindowRegister on device memory");
}

void tutti_dev_rma_win_deregister(struct tutti_dev_comm* dc, struct tutti_rma_dev_win* w) {
  (void)dc;
  (void)w;
}

ncclResult_t tutti_dev_rma_put(struct tutti_dev_comm* dc, const struct tutti_rma_dev_put* p) {
  (void)dc;
  (void)p;
  return no_device_rma("ncclPutSignal from or into device memory");
}

ncclResult_t tutti_dev_rma_deliver(struct tutti_dev_comm* dc, struct tutti_rma_dev_win* w,
                                   int origin, uint64_t offset, const void* src, size_t bytes,
                                   int sig, int ctx) {
  (void)dc;
  (void)sig;
  (void)ctx;
  (void)w;
  (void)origin;
  (void)offset;
  (void)src;
  (void)bytes;
  return no_device_rma("a put into device memory");
}

ncclResult_t tutti_dev_rma_signal(struct tutti_dev_comm* dc, int origin, int sig, int ctx) {
  (void)dc;
  (void)origin;
  (void)sig;
  (void)ctx;
  return no_device_rma("a signal counted in device memory");
}

void tutti_dev_rma_fail(struct tutti_dev_comm* dc, int origin, const char* why) {
  (void)dc;
  (void)origin;
  (void)why;
}

ncclResult_t tutti_dev_rma_wait(struct tutti_dev_comm* dc, const ncclWaitSignalDesc_t* descs,
                                int ndesc, cudaStream_t stream) {
  (void)dc;
  (void)descs;
  (void)ndesc;
  (void)stream;
  return no_device_rma("ncclWaitSignal on a stream");
}

void tutti_dev_launch_counts(uint64_t counts[TUTTI_DEV_PATHS][TUTTI_DEV_PROTOS]) {
  memset(counts, 0, sizeof(uint64_t) * TUTTI_DEV_PATHS * TUTTI_DEV_PROTOS);
}
