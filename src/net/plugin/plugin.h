/* Inside src/net/plugin only: how the loader (loader.c), the per-communicator
 * opening (open.c) and the adapters of each ABI family (abi_v6.c, abi_v9.c,
 * abi_v11.c) fit together, and the callbacks plugins receive (callbacks.c). */
#ifndef TUTTI_NET_PLUGIN_PLUGIN_H
#define TUTTI_NET_PLUGIN_PLUGIN_H

#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "net/plugin/abi.h"
#include "net/net.h"
#include "util/check.h"

_Static_assert(TUTTI_NET_HANDLE_BYTES == TUTTI_NET_ABI_HANDLE_MAXSIZE, "handle sizes differ");
_Static_assert(TUTTI_NET_PTR_HOST == TUTTI_NET_ABI_PTR_HOST &&
                   TUTTI_NET_PTR_CUDA == TUTTI_NET_ABI_PTR_CUDA &&
                   TUTTI_NET_PTR_DMABUF == TUTTI_NET_ABI_PTR_DMABUF,
               "pointer kinds differ");

/* One ABI version's adapters over one plugin table. */
struct tutti_netplugin_adapter {
  /* Every op but finalize (open.c's); reg_mr_dmabuf NULL when the table has none. */
  struct tutti_net_ops ops;
  int per_comm; /* init once per communicator, with a context (v11+) */
  /* Calls the plugin's init; *ctx gets the context it made (v11+; else NULL). */
  ncclResult_t (*init)(int abi, const void* table, uint64_t comm_id, void** ctx);
  /* Ends a context init made (v11+; NULL before, where nothing ends). */
  ncclResult_t (*finalize)(int abi, const void* table, void* ctx);
};

/* Fill *a for version `abi` of the table; ncclInternalError when `abi` is
 * not of the file's family (6 ... 8, 9 ... 10, 11 ... 12). */
ncclResult_t tutti_netplugin_bind_v6(int abi, const void* table, struct tutti_netplugin_adapter* a);
ncclResult_t tutti_netplugin_bind_v9(int abi, const void* table, struct tutti_netplugin_adapter* a);
ncclResult_t tutti_netplugin_bind_v11(int abi, const void* table,
                                      struct tutti_netplugin_adapter* a);

/* The plugin this process loaded (loader.c), once. */
struct tutti_netplugin {
  const void* table;
  int abi;
  int named; /* NCCL_NET_PLUGIN named it (failures are then errors, not fallbacks) */
  char name[64];
  char path[512];
  struct tutti_netplugin_adapter adapter;
};
/* Loads it on the first call (thread-safe); NULL when there is none. */
const struct tutti_netplugin* tutti_netplugin_load(void);

/* What plugins get for logging (NCCL's ncclDebugLogger_t, printed through
 * util/log.h) and profiling (nothing is profiled). */
void tutti_netplugin_log(int level, unsigned long flags, const char* file, int line,
                         const char* fmt, ...) __attribute__((format(printf, 5, 6)));
ncclResult_t tutti_netplugin_profile(void** event, int type, void* phandle, int64_t plugin_id,
                                     void* ext);

/* Fills the fields every version's properties have, in a zeroed *out:
 * `p` is any tutti_net_abi_props_vN. Strings the plugin leaves NULL become "". */
#define TUTTI_NET_WIDEN_BASE(out, p)                                                    \
  do {                                                                                  \
    memset((out), 0, sizeof *(out));                                                    \
    snprintf((out)->name, sizeof(out)->name, "%s", (p)->name != NULL ? (p)->name : ""); \
    snprintf((out)->pci_path, sizeof(out)->pci_path, "%s",                              \
             (p)->pci_path != NULL ? (p)->pci_path : "");                               \
    (out)->guid = (p)->guid;                                                            \
    (out)->ptr_support = (p)->ptr_support;                                              \
    (out)->speed = (p)->speed;                                                          \
    (out)->port = (p)->port;                                                            \
    (out)->latency = (p)->latency;                                                      \
    (out)->max_comms = (p)->max_comms;                                                  \
    (out)->max_recvs = (p)->max_recvs;                                                  \
    (out)->dev_type = TUTTI_NET_ABI_DEVICE_HOST;                                        \
    (out)->max_p2p_bytes = INT_MAX; /* int-sized versions: the largest int */           \
  } while (0)

/* ... and those from v9 on (`p` is tutti_net_abi_props_v9, _v11 or _v12).
 * A device that lists only itself is physical (nvdevs 0), as older
 * versions' devices are. */
#define TUTTI_NET_WIDEN_V9(out, p, dev)                                         \
  do {                                                                          \
    TUTTI_NET_WIDEN_BASE(out, p);                                               \
    (out)->reg_is_global = (p)->reg_is_global;                                  \
    (out)->force_flush = (p)->force_flush;                                      \
    (out)->dev_type = (p)->dev_type;                                            \
    (out)->dev_version = (p)->dev_version;                                      \
    (out)->max_p2p_bytes = (p)->max_p2p_bytes;                                  \
    const int cap_ = (int)(sizeof(p)->vprops.devs / sizeof(p)->vprops.devs[0]); \
    int nv_ = (p)->vprops.ndevs < cap_ ? (p)->vprops.ndevs : cap_;              \
    nv_ = nv_ < TUTTI_NET_MAX_VDEVS ? nv_ : TUTTI_NET_MAX_VDEVS;                \
    if (nv_ > 1 || (nv_ == 1 && (p)->vprops.devs[0] != (dev))) {                \
      (out)->nvdevs = nv_;                                                      \
      for (int v_ = 0; v_ < nv_; v_++) {                                        \
        (out)->vdevs[v_] = (p)->vprops.devs[v_];                                \
      }                                                                         \
    }                                                                           \
  } while (0)

/* From v9 on a plugin gives its largest message; NCCL refuses 0, so
 * does tutti (every message would be too large). */
static inline ncclResult_t tutti_netplugin_check_p2p(const struct tutti_net* n, int dev,
                                                     const struct tutti_net_props* p) {
  if (p->max_p2p_bytes == 0) {
    return tutti_error(ncclInternalError,
                       "the network plugin %s (%s) gives 0 as device %d's largest message "
                       "(max_p2p_bytes): the plugin is broken; set NCCL_NET_PLUGIN=none to use "
                       "tutti's own transport",
                       n->name, n->path, dev);
  }
  return ncclSuccess;
}

/* A grouped receive takes 1 to TUTTI_NET_MAX_RECVS buffers (the adapters
 * convert sizes and profiler handles on the stack). */
static inline ncclResult_t tutti_netplugin_check_recvs(const struct tutti_net* n, int count) {
  if (count < 1 || count > TUTTI_NET_MAX_RECVS) {
    return tutti_error(ncclInternalError,
                       "a grouped receive of %d buffers on network plugin %s: tutti groups 1 "
                       "to %d",
                       count, n->name, TUTTI_NET_MAX_RECVS);
  }
  return ncclSuccess;
}

#endif
