/* tutti's socket network as a struct tutti_net (net/socket/socknet.h): the table of
 * its operations, and memory registration, which host memory over sockets
 * needs only as bookkeeping. */
#include "net/socket/socknet.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "net/socket/comm.h"
#include "net/socket/dev.h"
#include "net/socket/setup.h"
#include "util/check.h"

/* A registration: what was registered, to refuse a stranger's deregister. */
struct mr {
  uint64_t magic;
  void* comm;
};
#define MR_MAGIC 0x6d72747574746921ull

static ncclResult_t devices(struct tutti_net* n, int* ndev) {
  TUTTI_UNUSED(n);
  *ndev = tutti_socknet_ndevs();
  return ncclSuccess;
}

static ncclResult_t props(struct tutti_net* n, int dev, struct tutti_net_props* out) {
  TUTTI_UNUSED(n);
  return tutti_socknet_props(dev, out);
}

static ncclResult_t listen_(struct tutti_net* n, int dev, void* handle, void** listen_comm) {
  TUTTI_UNUSED(n);
  return tutti_socknet_listen(dev, handle, (struct tutti_socknet_listen**)listen_comm);
}

static ncclResult_t connect_(struct tutti_net* n, int dev, void* handle, void** send_comm) {
  TUTTI_UNUSED(n);
  return tutti_socknet_connect(dev, handle, (struct tutti_socknet_comm**)send_comm);
}

static ncclResult_t accept_(struct tutti_net* n, void* listen_comm, void** recv_comm) {
  TUTTI_UNUSED(n);
  return tutti_socknet_accept(listen_comm, (struct tutti_socknet_comm**)recv_comm);
}

static ncclResult_t reg_mr(struct tutti_net* n, void* comm, void* data, size_t size, int type,
                           void** mhandle) {
  TUTTI_UNUSED(n);
  *mhandle = NULL;
  if (type != TUTTI_NET_PTR_HOST) {
    return tutti_error(ncclInvalidArgument,
                       "socket network: cannot register %zu bytes at %p of memory type %d: it "
                       "moves host memory only (TUTTI_NET_PTR_HOST); stage GPU buffers through "
                       "host memory",
                       size, data, type);
  }
  struct mr* m = malloc(sizeof *m);
  if (m == NULL) {
    return tutti_error(ncclSystemError, "socket network: out of memory registering %zu bytes",
                       size);
  }
  *m = (struct mr){MR_MAGIC, comm};
  *mhandle = m;
  return ncclSuccess;
}

static ncclResult_t dereg_mr(struct tutti_net* n, void* comm, void* mhandle) {
  TUTTI_UNUSED(n);
  struct mr* m = mhandle;
  if (m == NULL || m->magic != MR_MAGIC || m->comm != comm) {
    return tutti_error(ncclInvalidArgument,
                       "socket network: deregistering %p, which reg_mr did not give for comm %p",
                       mhandle, comm);
  }
  m->magic = 0;
  free(m);
  return ncclSuccess;
}

static ncclResult_t isend(struct tutti_net* n, void* send_comm, void* data, size_t size, int tag,
                          void* mhandle, void** request) {
  TUTTI_UNUSED(n);
  TUTTI_UNUSED(mhandle);
  return tutti_socknet_isend(send_comm, data, size, tag, request);
}

static ncclResult_t irecv(struct tutti_net* n, void* recv_comm, int count, void** data,
                          size_t* sizes, int* tags, void** mhandles, void** request) {
  TUTTI_UNUSED(n);
  TUTTI_UNUSED(mhandles);
  return tutti_socknet_irecv(recv_comm, count, data, sizes, tags, request);
}

/* Host memory written by the kernel's copies is visible as it is. */
static ncclResult_t iflush(struct tutti_net* n, void* recv_comm, int count, void** data, int* sizes,
                           void** mhandles, void** request) {
  TUTTI_UNUSED(n);
  TUTTI_UNUSED(recv_comm);
  TUTTI_UNUSED(count);
  TUTTI_UNUSED(data);
  TUTTI_UNUSED(sizes);
  TUTTI_UNUSED(mhandles);
  *request = NULL;
  return ncclSuccess;
}

static ncclResult_t test(struct tutti_net* n, void* request, int* done, int* sizes) {
  TUTTI_UNUSED(n);
  return tutti_socknet_test(request, done, sizes);
}

static ncclResult_t close_comm(struct tutti_net* n, void* comm) {
  TUTTI_UNUSED(n);
  tutti_socknet_comm_free(comm);
  return ncclSuccess;
}

static ncclResult_t close_listen(struct tutti_net* n, void* listen_comm) {
  TUTTI_UNUSED(n);
  tutti_socknet_listen_close(listen_comm);
  return ncclSuccess;
}

/* Nothing of an open is the socket network's own to end: its devices and
 * threads are the process's; the struct is freed by whoever frees opens
 * (tutti_net_close, the plugin's finalize). */
static void finalize(struct tutti_net* n) {
  TUTTI_UNUSED(n);
}

static const struct tutti_net_ops ops = {
    .devices = devices,
    .props = props,
    .listen = listen_,
    .connect = connect_,
    .accept = accept_,
    .reg_mr = reg_mr,
    .reg_mr_dmabuf = NULL,
    .dereg_mr = dereg_mr,
    .isend = isend,
    .irecv = irecv,
    .iflush = iflush,
    .test = test,
    .close_send = close_comm,
    .close_recv = close_comm,
    .close_listen = close_listen,
    .finalize = finalize,
};

ncclResult_t tutti_socknet_open(uint64_t comm_id, struct tutti_net** out) {
  struct tutti_net* n = calloc(1, sizeof *n);
  if (n == NULL) {
    return tutti_error(ncclSystemError, "socket network: out of memory opening it");
  }
  n->ops = &ops;
  snprintf(n->name, sizeof n->name, "tutti");
  n->comm_id = comm_id;
  *out = n;
  return ncclSuccess;
}
