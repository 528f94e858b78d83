/* Plugins of ABI v11 and v12 as struct tutti_net: init per communicator
 * returns a context that listen, connect and finalize take back; v12 only
 * widens the properties (8 virtual devices, rail and plane). */
#include <string.h>

#include "net/plugin/plugin.h"
#include "util/check.h"

#define V11(n) ((const struct tutti_net_abi_v11*)(n)->table)
#define V12(n) ((const struct tutti_net_abi_v12*)(n)->table)

/* Member f of a table of version abi, read as that version's struct: for
 * the members whose type is the same in v11 and v12 (all but two). */
#define MEMBER(abi, t, f)                                  \
  ((abi) == 11 ? ((const struct tutti_net_abi_v11*)(t))->f \
               : ((const struct tutti_net_abi_v12*)(t))->f)
#define CALL(n, f, ...) MEMBER((n)->abi, (n)->table, f)(__VA_ARGS__)

/* What init takes for every communicator: tutti sets no traffic class. */
static struct tutti_net_abi_config config = {.traffic_class = TUTTI_NET_ABI_TRAFFIC_CLASS_UNDEF};

static ncclResult_t op_devices(struct tutti_net* n, int* ndev) {
  return CALL(n, devices, ndev);
}

static ncclResult_t op_props(struct tutti_net* n, int dev, struct tutti_net_props* out) {
  if (n->abi == 11) {
    struct tutti_net_abi_props_v11 p;
    memset(&p, 0, sizeof p);
    NCCLCHECK(V11(n)->get_properties(dev, &p));
    TUTTI_NET_WIDEN_V9(out, &p, dev);
  } else {
    struct tutti_net_abi_props_v12 p;
    memset(&p, 0, sizeof p);
    NCCLCHECK(V12(n)->get_properties(dev, &p));
    TUTTI_NET_WIDEN_V9(out, &p, dev);
  }
  return tutti_netplugin_check_p2p(n, dev, out);
}

static ncclResult_t op_listen(struct tutti_net* n, int dev, void* handle, void** listen_comm) {
  return CALL(n, listen, n->ctx, dev, handle, listen_comm);
}

/* A pointer to a NULL device handle: no offload (as NCCL asks). */
static ncclResult_t op_connect(struct tutti_net* n, int dev, void* handle, void** send_comm) {
  struct tutti_net_abi_dev_handle* none = NULL;
  return CALL(n, connect, n->ctx, dev, handle, send_comm, &none);
}

static ncclResult_t op_accept(struct tutti_net* n, void* listen_comm, void** recv_comm) {
  struct tutti_net_abi_dev_handle* none = NULL;
  return CALL(n, accept, listen_comm, recv_comm, &none);
}

static ncclResult_t op_reg_mr(struct tutti_net* n, void* comm, void* data, size_t size, int type,
                              void** mhandle) {
  return CALL(n, reg_mr, comm, data, size, type, mhandle);
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
  return CALL(n, isend, send_comm, data, size, tag, mhandle, NULL, request);
}

static ncclResult_t op_irecv(struct tutti_net* n, void* recv_comm, int count, void** data,
                             size_t* sizes, int* tags, void** mhandles, void** request) {
  NCCLCHECK(tutti_netplugin_check_recvs(n, count));
  /* One profiler handle per buffer, none set: plugins may index the array. */
  void* phandles[TUTTI_NET_MAX_RECVS] = {NULL};
  return CALL(n, irecv, recv_comm, count, data, sizes, tags, mhandles, phandles, request);
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
  *ctx = NULL;
  return MEMBER(abi, table, init)(ctx, comm_id, &config, tutti_netplugin_log,
                                  tutti_netplugin_profile);
}

static ncclResult_t finalize(int abi, const void* table, void* ctx) {
  ncclResult_t (*fin)(void*) = MEMBER(abi, table, finalize);
  return fin != NULL ? fin(ctx) : ncclSuccess;
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

ncclResult_t tutti_netplugin_bind_v11(int abi, const void* table,
                                      struct tutti_netplugin_adapter* a) {
  if (abi != 11 && abi != 12) {
    return tutti_error(ncclInternalError, "ABI v%d is not one of v11, v12", abi);
  }
  memset(a, 0, sizeof *a);
  a->ops = ops;
  if (MEMBER(abi, table, reg_mr_dmabuf) == NULL) {
    a->ops.reg_mr_dmabuf = NULL;
  }
  a->per_comm = 1;
  a->init = init;
  a->finalize = finalize;
  return ncclSuccess;
}
