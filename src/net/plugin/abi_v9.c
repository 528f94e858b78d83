/* Plugins of ABI v9 and v10 as struct tutti_net: size_t sizes, one init per
 * process; v10 adds the profiler (handles tutti leaves NULL) and a comm
 * config on every connect. */
#include <string.h>

#include "net/plugin/plugin.h"
#include "util/check.h"

#define V9(n) ((const struct tutti_net_abi_v9*)(n)->table)
#define V10(n) ((const struct tutti_net_abi_v10*)(n)->table)

/* Member f of a table of version abi, read as that version's struct: for
 * the members whose type is the same in v9 and v10. */
#define MEMBER(abi, t, f)                                \
  ((abi) == 9 ? ((const struct tutti_net_abi_v9*)(t))->f \
              : ((const struct tutti_net_abi_v10*)(t))->f)
#define CALL(n, f, ...) MEMBER((n)->abi, (n)->table, f)(__VA_ARGS__)

/* What v10's connect takes: tutti sets no traffic class. */
static struct tutti_net_abi_config config = {.traffic_class = TUTTI_NET_ABI_TRAFFIC_CLASS_UNDEF};

static ncclResult_t op_devices(struct tutti_net* n, int* ndev) {
  return CALL(n, devices, ndev);
}

static ncclResult_t op_props(struct tutti_net* n, int dev, struct tutti_net_props* out) {
  struct tutti_net_abi_props_v9 p; /* v10's too */
  memset(&p, 0, sizeof p);
  NCCLCHECK(CALL(n, get_properties, dev, &p));
  TUTTI_NET_WIDEN_V9(out, &p, dev);
  return tutti_netplugin_check_p2p(n, dev, out);
}

static ncclResult_t op_listen(struct tutti_net* n, int dev, void* handle, void** listen_comm) {
  return CALL(n, listen, dev, handle, listen_comm);
}

/* A pointer to a NULL device handle: no offload (as NCCL asks). */
static ncclResult_t op_connect(struct tutti_net* n, int dev, void* handle, void** send_comm) {
  struct tutti_net_abi_dev_handle* none = NULL;
  return n->abi == 9 ? V9(n)->connect(dev, handle, send_comm, &none)
                     : V10(n)->connect(dev, &config, handle, send_comm, &none);
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
  return n->abi == 9 ? V9(n)->isend(send_comm, data, size, tag, mhandle, request)
                     : V10(n)->isend(send_comm, data, size, tag, mhandle, NULL, request);
}

static ncclResult_t op_irecv(struct tutti_net* n, void* recv_comm, int count, void** data,
                             size_t* sizes, int* tags, void** mhandles, void** request) {
  NCCLCHECK(tutti_netplugin_check_recvs(n, count));
  if (n->abi == 9) {
    return V9(n)->irecv(recv_comm, count, data, sizes, tags, mhandles, request);
  }
  /* One profiler handle per buffer, none set: plugins may index the array. */
  void* phandles[TUTTI_NET_MAX_RECVS] = {NULL};
  return V10(n)->irecv(recv_comm, count, data, sizes, tags, mhandles, phandles, request);
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
  return abi == 9 ? ((const struct tutti_net_abi_v9*)table)->init(tutti_netplugin_log)
                  : ((const struct tutti_net_abi_v10*)table)
                        ->init(tutti_netplugin_log, tutti_netplugin_profile);
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

ncclResult_t tutti_netplugin_bind_v9(int abi, const void* table,
                                     struct tutti_netplugin_adapter* a) {
  if (abi != 9 && abi != 10) {
    return tutti_error(ncclInternalError, "ABI v%d is not one of v9, v10", abi);
  }
  memset(a, 0, sizeof *a);
  a->ops = ops;
  if (MEMBER(abi, table, reg_mr_dmabuf) == NULL) {
    a->ops.reg_mr_dmabuf = NULL;
  }
  a->init = init;
  return ncclSuccess;
}
