/* Plugins of ABI v6, v7 and v8 as struct tutti_net: their messages (and
 * v6/v7's registrations) have int sizes, which are checked, never
 * truncated; their properties get the fields later versions added. */
#include <limits.h>
#include <string.h>

#include "net/plugin/plugin.h"
#include "util/check.h"

#define V6(n) ((const struct tutti_net_abi_v6*)(n)->table)
#define V7(n) ((const struct tutti_net_abi_v7*)(n)->table)
#define V8(n) ((const struct tutti_net_abi_v8*)(n)->table)

/* Member f of a table of version abi, read as that version's struct: for
 * the members whose type is the same in v6, v7 and v8. */
#define MEMBER(abi, t, f)                                  \
  ((abi) == 6   ? ((const struct tutti_net_abi_v6*)(t))->f \
   : (abi) == 7 ? ((const struct tutti_net_abi_v7*)(t))->f \
                : ((const struct tutti_net_abi_v8*)(t))->f)
#define CALL(n, f, ...) MEMBER((n)->abi, (n)->table, f)(__VA_ARGS__)

static ncclResult_t to_int(const struct tutti_net* n, size_t size, int* out) {
  if (size > INT_MAX) {
    return tutti_error(ncclInternalError,
                       "the network plugin %s (%s, ABI v%d) takes at most %d bytes at once and "
                       "was given %zu: messages must be cut at the device's max_p2p_bytes",
                       n->name, n->path, n->abi, INT_MAX, size);
  }
  *out = (int)size;
  return ncclSuccess;
}

static ncclResult_t op_devices(struct tutti_net* n, int* ndev) {
  return CALL(n, devices, ndev);
}

static ncclResult_t op_props(struct tutti_net* n, int dev, struct tutti_net_props* out) {
  if (n->abi == 6) {
    struct tutti_net_abi_props_v6 p;
    memset(&p, 0, sizeof p);
    NCCLCHECK(V6(n)->get_properties(dev, &p));
    TUTTI_NET_WIDEN_BASE(out, &p);
  } else if (n->abi == 7) {
    struct tutti_net_abi_props_v7 p;
    memset(&p, 0, sizeof p);
    NCCLCHECK(V7(n)->get_properties(dev, &p));
    TUTTI_NET_WIDEN_BASE(out, &p);
    out->dev_type = p.dev_type;
    out->dev_version = p.dev_version;
  } else {
    struct tutti_net_abi_props_v8 p;
    memset(&p, 0, sizeof p);
    NCCLCHECK(V8(n)->get_properties(dev, &p));
    TUTTI_NET_WIDEN_BASE(out, &p);
    out->dev_type = p.dev_type;
    out->dev_version = p.dev_version;
    out->reg_is_global = p.reg_is_global;
  }
  return ncclSuccess;
}

static ncclResult_t op_listen(struct tutti_net* n, int dev, void* handle, void** listen_comm) {
  return CALL(n, listen, dev, handle, listen_comm);
}

/* From v7 on connect and accept hand back a device handle for offload:
 * like NCCL, tutti passes a pointer to a NULL handle, asking for none. */
static ncclResult_t op_connect(struct tutti_net* n, int dev, void* handle, void** send_comm) {
  struct tutti_net_abi_dev_handle* none = NULL;
  if (n->abi == 6) {
    return V6(n)->connect(dev, handle, send_comm);
  }
  return n->abi == 7 ? V7(n)->connect(dev, handle, send_comm, &none)
                     : V8(n)->connect(dev, handle, send_comm, &none);
}

static ncclResult_t op_accept(struct tutti_net* n, void* listen_comm, void** recv_comm) {
  struct tutti_net_abi_dev_handle* none = NULL;
  if (n->abi == 6) {
    return V6(n)->accept(listen_comm, recv_comm);
  }
  return n->abi == 7 ? V7(n)->accept(listen_comm, recv_comm, &none)
                     : V8(n)->accept(listen_comm, recv_comm, &none);
}

static ncclResult_t op_reg_mr(struct tutti_net* n, void* comm, void* data, size_t size, int type,
                              void** mhandle) {
  if (n->abi == 8) {
    return V8(n)->reg_mr(comm, data, size, type, mhandle);
  }
  int isize = 0;
  NCCLCHECK(to_int(n, size, &isize));
  return n->abi == 6 ? V6(n)->reg_mr(comm, data, isize, type, mhandle)
                     : V7(n)->reg_mr(comm, data, isize, type, mhandle);
}

static ncclResult_t op_reg_mr_dmabuf(struct tutti_net* n, void* comm, void* data, size_t size,
                                     int type, uint64_t offset, int fd, void** mhandle) {
  return CALL(n, reg_mr_dmabuf, comm, data, size, type, offset, fd, mhandle);
}

static ncclResult_t op_dereg_mr(struct tutti_net* n, void* comm, void* mhandle) {
  return CALL(n, dereg_mr, comm, mhandle);
}

static ncclResult_t op_isend(struct tutti_net* n, void* send_comm, void* data, size_t size, int tag,
                             void* mhandle, void** request) {
  int isize = 0;
  NCCLCHECK(to_int(n, size, &isize));
  return CALL(n, isend, send_comm, data, isize, tag, mhandle, request);
}

static ncclResult_t op_irecv(struct tutti_net* n, void* recv_comm, int count, void** data,
                             size_t* sizes, int* tags, void** mhandles, void** request) {
  NCCLCHECK(tutti_netplugin_check_recvs(n, count));
  int isizes[TUTTI_NET_MAX_RECVS] = {0}; /* the plugin copies what it needs before returning */
  for (int i = 0; i < count; i++) {
    NCCLCHECK(to_int(n, sizes[i], &isizes[i]));
  }
  return CALL(n, irecv, recv_comm, count, data, isizes, tags, mhandles, request);
}

static ncclResult_t op_iflush(struct tutti_net* n, void* recv_comm, int count, void** data,
                              int* sizes, void** mhandles, void** request) {
  if (MEMBER(n->abi, n->table, iflush) == NULL) {
    *request = NULL;
    return ncclSuccess;
  }
  return CALL(n, iflush, recv_comm, count, data, sizes, mhandles, request);
}

static ncclResult_t op_test(struct tutti_net* n, void* request, int* done, int* sizes) {
  return CALL(n, test, request, done, sizes);
}

static ncclResult_t op_close_send(struct tutti_net* n, void* send_comm) {
  return CALL(n, close_send, send_comm);
}

static ncclResult_t op_close_recv(struct tutti_net* n, void* recv_comm) {
  return CALL(n, close_recv, recv_comm);
}

static ncclResult_t op_close_listen(struct tutti_net* n, void* listen_comm) {
  return CALL(n, close_listen, listen_comm);
}

static ncclResult_t init(int abi, const void* table, uint64_t comm_id, void** ctx) {
  TUTTI_UNUSED(comm_id);
  *ctx = NULL;
  return MEMBER(abi, table, init)(tutti_netplugin_log);
}

static const struct tutti_net_ops ops = {
    .devices = op_devices,
    .props = op_props,
    .listen = op_listen,
    .connect = op_connect,
    .accept = op_accept,
    .reg_mr = op_reg_mr,
    .reg_mr_dmabuf = op_reg_mr_dmabuf,
    .dereg_mr = op_dereg_mr,
    .isend = op_isend,
    .irecv = op_irecv,
    .iflush = op_iflush,
    .test = op_test,
    .close_send = op_close_send,
    .close_recv = op_close_recv,
    .close_listen = op_close_listen,
};

ncclResult_t tutti_netplugin_bind_v6(int abi, const void* table,
                                     struct tutti_netplugin_adapter* a) {
  if (abi < 6 || abi > 8) {
    return tutti_error(ncclInternalError, "ABI v%d is not one of v6, v7, v8", abi);
  }
  memset(a, 0, sizeof *a);
  a->ops = ops;
  if (MEMBER(abi, table, reg_mr_dmabuf) == NULL) {
    a->ops.reg_mr_dmabuf = NULL;
  }
  a->init = init;
  return ncclSuccess;
}
