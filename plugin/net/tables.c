/* The tables NCCL looks for in libnccl-net-tutti.so (ncclNetPlugin_v8 ...
 * _v11) and what differs between their versions: how init is called, the
 * width of sizes, the properties' layout, the context of v11. */
#include <stdlib.h>
#include <limits.h>
#include <string.h>

#include "plugin.h"
#include "util/check.h"

#define EXPORT __attribute__((visibility("default")))
#define NAME "tutti"

/* ---- properties ---- */

#define FILL_COMMON(p, t, name, pci)    \
  do {                                  \
    (p)->name = (char*)(name);          \
    (p)->pci_path = (char*)(pci);       \
    (p)->guid = (t).guid;               \
    (p)->ptr_support = (t).ptr_support; \
    (p)->speed = (t).speed;             \
    (p)->port = (t).port;               \
    (p)->latency = (t).latency;         \
    (p)->max_comms = (t).max_comms;     \
    (p)->max_recvs = (t).max_recvs;     \
    (p)->dev_type = (t).dev_type;       \
    (p)->dev_version = (t).dev_version; \
  } while (0)

static ncclResult_t props_v8(int dev, struct tutti_net_abi_props_v8* p) {
  struct tutti_net_props t;
  const char *name, *pci;
  NCCLCHECK(tutti_netexport_props(dev, &t, &name, &pci));
  memset(p, 0, sizeof *p);
  FILL_COMMON(p, t, name, pci);
  p->reg_is_global = t.reg_is_global;
  return ncclSuccess;
}

static ncclResult_t props_v9(int dev, struct tutti_net_abi_props_v9* p) {
  struct tutti_net_props t;
  const char *name, *pci;
  NCCLCHECK(tutti_netexport_props(dev, &t, &name, &pci));
  memset(p, 0, sizeof *p);
  FILL_COMMON(p, t, name, pci);
  p->reg_is_global = t.reg_is_global;
  p->force_flush = t.force_flush;
  p->vprops.ndevs = 1; /* a physical device is its own only member */
  p->vprops.devs[0] = dev;
  p->max_p2p_bytes = t.max_p2p_bytes;
  p->max_coll_bytes = t.max_p2p_bytes;
  return ncclSuccess;
}

static ncclResult_t props_v11(int dev, struct tutti_net_abi_props_v11* p) {
  struct tutti_net_props t;
  const char *name, *pci;
  NCCLCHECK(tutti_netexport_props(dev, &t, &name, &pci));
  memset(p, 0, sizeof *p);
  FILL_COMMON(p, t, name, pci);
  p->reg_is_global = t.reg_is_global;
  p->force_flush = t.force_flush;
  p->vprops.ndevs = 1;
  p->vprops.devs[0] = dev;
  p->max_p2p_bytes = t.max_p2p_bytes;
  p->max_coll_bytes = t.max_p2p_bytes;
  p->max_multi_request_size = 1;
  return ncclSuccess;
}

/* ---- v8 ... v10: one process-wide network ---- */

static ncclResult_t init_v8(tutti_net_abi_logger log) {
  return tutti_netexport_init(log);
}

static ncclResult_t init_v10(tutti_net_abi_logger log, tutti_net_abi_profiler prof) {
  TUTTI_UNUSED(prof);
  return tutti_netexport_init(log);
}

static ncclResult_t listen_v8(int dev, void* handle, void** listen_comm) {
  struct tutti_net* n = tutti_netexport_base();
  return n->ops->listen(n, dev, handle, listen_comm);
}

static ncclResult_t connect_v8(int dev, void* handle, void** send_comm,
                               struct tutti_net_abi_dev_handle** send_dev) {
  struct tutti_net* n = tutti_netexport_base();
  tutti_netexport_no_dev_handle(send_dev);
  return n->ops->connect(n, dev, handle, send_comm);
}

/* The traffic class has no meaning over plain sockets. */
static ncclResult_t connect_v10(int dev, struct tutti_net_abi_config* config, void* handle,
                                void** send_comm, struct tutti_net_abi_dev_handle** send_dev) {
  TUTTI_UNUSED(config);
  return connect_v8(dev, handle, send_comm, send_dev);
}

static ncclResult_t int_size(int size, const char* what) {
  if (size < 0) {
    return tutti_error(ncclInternalError,
                       "NET/tutti: %s of %d bytes: the v8 interface takes sizes from 0 to %d", what,
                       size, INT_MAX);
  }
  return ncclSuccess;
}

static ncclResult_t isend_v8(void* send_comm, void* data, int size, int tag, void* mhandle,
                             void** request) {
  NCCLCHECK(int_size(size, "a send"));
  return tutti_netexport_isend(send_comm, data, (size_t)size, tag, mhandle, request);
}

static ncclResult_t irecv_v8(void* recv_comm, int n, void** data, int* sizes, int* tags,
                             void** mhandles, void** request) {
  size_t wide[TUTTI_NET_MAX_RECVS];
  if (n < 1 || n > TUTTI_NET_MAX_RECVS) {
    return tutti_error(ncclInternalError,
                       "NET/tutti: a grouped receive of %d buffers: it takes 1 to %d", n,
                       TUTTI_NET_MAX_RECVS);
  }
  for (int i = 0; i < n; i++) {
    NCCLCHECK(int_size(sizes[i], "a receive"));
    wide[i] = (size_t)sizes[i];
  }
  return tutti_netexport_irecv(recv_comm, n, data, wide, tags, mhandles, request);
}

static ncclResult_t isend_v10(void* send_comm, void* data, size_t size, int tag, void* mhandle,
                              void* phandle, void** request) {
  TUTTI_UNUSED(phandle);
  return tutti_netexport_isend(send_comm, data, size, tag, mhandle, request);
}

static ncclResult_t irecv_v10(void* recv_comm, int n, void** data, size_t* sizes, int* tags,
                              void** mhandles, void** phandles, void** request) {
  TUTTI_UNUSED(phandles);
  return tutti_netexport_irecv(recv_comm, n, data, sizes, tags, mhandles, request);
}

/* ---- v11: a context per communicator ---- */

static ncclResult_t init_v11(void** ctx, uint64_t comm_id, struct tutti_net_abi_config* config,
                             tutti_net_abi_logger log, tutti_net_abi_profiler prof) {
  TUTTI_UNUSED(config);
  TUTTI_UNUSED(prof);
  *ctx = NULL;
  NCCLCHECK(tutti_netexport_init(log));
  return tutti_netexport_open(comm_id, (struct tutti_net**)ctx);
}

static ncclResult_t finalize_v11(void* ctx) {
  struct tutti_net* n = ctx;
  if (n != NULL) {
    n->ops->finalize(n);
    free(n);
  }
  return ncclSuccess;
}

static ncclResult_t listen_v11(void* ctx, int dev, void* handle, void** listen_comm) {
  struct tutti_net* n = ctx;
  return n->ops->listen(n, dev, handle, listen_comm);
}

static ncclResult_t connect_v11(void* ctx, int dev, void* handle, void** send_comm,
                                struct tutti_net_abi_dev_handle** send_dev) {
  struct tutti_net* n = ctx;
  tutti_netexport_no_dev_handle(send_dev);
  return n->ops->connect(n, dev, handle, send_comm);
}

/* ---- the tables; NULL where NCCL takes "not offered" ---- */

#define COMMON                                                                                   \
  .name = NAME, .devices = tutti_netexport_devices, .accept = tutti_netexport_accept,            \
  .reg_mr = tutti_netexport_reg_mr, .reg_mr_dmabuf = NULL, .dereg_mr = tutti_netexport_dereg_mr, \
  .iflush = tutti_netexport_iflush, .test = tutti_netexport_test,                                \
  .close_send = tutti_netexport_close_send, .close_recv = tutti_netexport_close_recv,            \
  .close_listen = tutti_netexport_close_listen, .get_device_mr = tutti_netexport_get_device_mr,  \
  .irecv_consumed = tutti_netexport_irecv_consumed

EXPORT const struct tutti_net_abi_v8 ncclNetPlugin_v8 = {
    COMMON,
    .init = init_v8,
    .get_properties = props_v8,
    .listen = listen_v8,
    .connect = connect_v8,
    .isend = isend_v8,
    .irecv = irecv_v8,
};

EXPORT const struct tutti_net_abi_v9 ncclNetPlugin_v9 = {
    COMMON,
    .init = init_v8,
    .get_properties = props_v9,
    .listen = listen_v8,
    .connect = connect_v8,
    .isend = tutti_netexport_isend,
    .irecv = tutti_netexport_irecv,
    .make_vdevice = NULL, /* NCCL then makes no virtual devices */
};

EXPORT const struct tutti_net_abi_v10 ncclNetPlugin_v10 = {
    COMMON,
    .init = init_v10,
    .get_properties = props_v9,
    .listen = listen_v8,
    .connect = connect_v10,
    .isend = isend_v10,
    .irecv = irecv_v10,
    .make_vdevice = NULL,
};

EXPORT const struct tutti_net_abi_v11 ncclNetPlugin_v11 = {
    COMMON,
    .init = init_v11,
    .get_properties = props_v11,
    .listen = listen_v11,
    .connect = connect_v11,
    .isend = isend_v10,
    .irecv = irecv_v10,
    .make_vdevice = NULL,
    .finalize = finalize_v11,
    .set_net_attr = NULL, /* hints about traffic that sockets cannot use */
};
