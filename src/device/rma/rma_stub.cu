/* Placeholder for the device side of one-sided operations (rma/rma_dev.h)
 * until the device path exists: signals stay in host memory (host windows
 * and buffers work on a GPU host too) and device memory is refused with a
 * sentence. The device path replaces this file with its own in this folder. */
#include "rma/rma_dev.h"

extern "C" {
#include "util/check.h"
}

static ncclResult_t not_built(const char* what) {
  return tutti_error(ncclInvalidUsage,
                     "%s: device windows are not built yet: register host memory as the window "
                     "and put from host buffers",
                     what);
}

extern "C" ncclResult_t tutti_dev_rma_start(struct tutti_dev_comm* dc, int nranks, int num_ctx,
                                            int nsignals, int* on_device) {
  (void)dc;
  (void)nranks;
  (void)num_ctx;
  (void)nsignals;
  *on_device = 0;
  return ncclSuccess;
}

extern "C" void tutti_dev_rma_stop(struct tutti_dev_comm* dc) {
  (void)dc;
}

extern "C" ncclResult_t tutti_dev_rma_win_export(struct tutti_dev_comm* dc, void* buff,
                                                 size_t size,
                                                 unsigned char out[TUTTI_RMA_DEV_EXPORT]) {
  (void)dc;
  (void)buff;
  (void)size;
  (void)out;
  return not_built("ncclCommWindowRegister on device memory");
}

extern "C" ncclResult_t tutti_dev_rma_win_register(struct tutti_dev_comm* dc, uint32_t win_id,
                                                   void* buff, size_t size,
                                                   const struct tutti_rma_peer_win* peers,
                                                   int nranks, struct tutti_rma_dev_win** out) {
  (void)dc;
  (void)win_id;
  (void)buff;
  (void)size;
  (void)peers;
  (void)nranks;
  *out = NULL;
  return not_built("ncclCommWindowRegister on device memory");
}

extern "C" void tutti_dev_rma_win_deregister(struct tutti_dev_comm* dc,
                                             struct tutti_rma_dev_win* w) {
  (void)dc;
  (void)w;
}

extern "C" ncclResult_t tutti_dev_rma_put(struct tutti_dev_comm* dc,
                                          const struct tutti_rma_dev_put* p) {
  (void)dc;
  (void)p;
  return not_built("ncclPutSignal from or into device memory");
}

extern "C" ncclResult_t tutti_dev_rma_deliver(struct tutti_dev_comm* dc,
                                              struct tutti_rma_dev_win* w, int origin,
                                              uint64_t offset, const void* src, size_t bytes) {
  (void)dc;
  (void)w;
  (void)origin;
  (void)offset;
  (void)src;
  (void)bytes;
  return not_built("a put into device memory");
}

extern "C" ncclResult_t tutti_dev_rma_signal(struct tutti_dev_comm* dc, int origin, int sig,
                                             int ctx) {
  (void)dc;
  (void)origin;
  (void)sig;
  (void)ctx;
  return not_built("a signal counted in device memory");
}

extern "C" ncclResult_t tutti_dev_rma_wait(struct tutti_dev_comm* dc,
                                           const ncclWaitSignalDesc_t* descs, int ndesc,
                                           cudaStream_t stream) {
  (void)dc;
  (void)descs;
  (void)ndesc;
  (void)stream;
  return not_built("ncclWaitSignal on a stream");
}
