/* The plugin's operations that every ABI version shares, over tutti's
 * socket network: init, properties in tutti's form, and the comm-level
 * calls (their comms carry everything, so no context is needed). */
#include <stdlib.h>
#include <pthread.h>
#include <string.h>

#include "net/socket/socknet.h"
#include "net/socket/dev.h"
#include "plugin.h"
#include "util/check.h"
#include "util/log.h"

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static struct tutti_net* base;

ncclResult_t tutti_netexport_init(tutti_net_abi_logger log) {
  tutti_netexport_set_logger(log);
  pthread_mutex_lock(&lock);
  ncclResult_t res = ncclSuccess;
  if (base == NULL) {
    struct tutti_net* n = NULL;
    res = tutti_socknet_open(0, &n);
    int ndev = 0;
    if (res == ncclSuccess) {
      n->ops->devices(n, &ndev);
      if (ndev == 0) {
        n->ops->finalize(n);
        free(n);
        res = tutti_error(ncclInternalError,
                          "NET/tutti: no usable network interface (NCCL_SOCKET_IFNAME, "
                          "NCCL_SOCKET_FAMILY): the plugin offers no device");
      } else {
        base = n;
        INFO(TUTTI_INIT | TUTTI_NET, "NET/tutti: tutti's socket network, %d devices", ndev);
      }
    }
  }
  pthread_mutex_unlock(&lock);
  return res;
}

ncclResult_t tutti_netexport_open(uint64_t comm_id, struct tutti_net** out) {
  return tutti_socknet_open(comm_id, out);
}

struct tutti_net* tutti_netexport_base(void) {
  return base;
}

/* Before any init, the comm-level calls have no comm to act on: a base
 * is opened for them all the same (the devices are the process's). */
static struct tutti_net* net(void) {
  if (__atomic_load_n(&base, __ATOMIC_ACQUIRE) == NULL) {
    tutti_netexport_init(NULL);
  }
  return base;
}

ncclResult_t tutti_netexport_devices(int* ndev) {
  struct tutti_net* n = net();
  *ndev = 0;
  return n != NULL ? n->ops->devices(n, ndev) : ncclSuccess;
}

ncclResult_t tutti_netexport_props(int dev, struct tutti_net_props* out, const char** name,
                                   const char** pci_path) {
  struct tutti_net* n = net();
  if (n == NULL) {
    return tutti_error(ncclInternalError, "NET/tutti: properties asked, but there is no device");
  }
  NCCLCHECK(n->ops->props(n, dev, out));
  /* NCCL keeps the pointers: strings that live as long as the process. */
  const struct tutti_socknet_dev* d = tutti_socknet_dev(dev);
  *name = d->name;
  *pci_path = d->pci_path[0] != '\0' ? d->pci_path : NULL;
  return ncclSuccess;
}

void tutti_netexport_no_dev_handle(struct tutti_net_abi_dev_handle** dev) {
  if (dev != NULL) {
    *dev = NULL;
  }
}

ncclResult_t tutti_netexport_accept(void* listen_comm, void** recv_comm,
                                    struct tutti_net_abi_dev_handle** recv_dev) {
  tutti_netexport_no_dev_handle(recv_dev);
  return net()->ops->accept(net(), listen_comm, recv_comm);
}

ncclResult_t tutti_netexport_reg_mr(void* comm, void* data, size_t size, int type, void** mhandle) {
  return net()->ops->reg_mr(net(), comm, data, size, type, mhandle);
}

ncclResult_t tutti_netexport_dereg_mr(void* comm, void* mhandle) {
  return net()->ops->dereg_mr(net(), comm, mhandle);
}

ncclResult_t tutti_netexport_isend(void* send_comm, void* data, size_t size, int tag, void* mhandle,
                                   void** request) {
  return net()->ops->isend(net(), send_comm, data, size, tag, mhandle, request);
}

ncclResult_t tutti_netexport_irecv(void* recv_comm, int n, void** data, size_t* sizes, int* tags,
                                   void** mhandles, void** request) {
  return net()->ops->irecv(net(), recv_comm, n, data, sizes, tags, mhandles, request);
}

ncclResult_t tutti_netexport_iflush(void* recv_comm, int n, void** data, int* sizes,
                                    void** mhandles, void** request) {
  return net()->ops->iflush(net(), recv_comm, n, data, sizes, mhandles, request);
}

ncclResult_t tutti_netexport_test(void* request, int* done, int* sizes) {
  return net()->ops->test(net(), request, done, sizes);
}

ncclResult_t tutti_netexport_close_send(void* send_comm) {
  return net()->ops->close_send(net(), send_comm);
}

ncclResult_t tutti_netexport_close_recv(void* recv_comm) {
  return net()->ops->close_recv(net(), recv_comm);
}

ncclResult_t tutti_netexport_close_listen(void* listen_comm) {
  return net()->ops->close_listen(net(), listen_comm);
}

ncclResult_t tutti_netexport_get_device_mr(void* comm, void* mhandle, void** dptr_mhandle) {
  TUTTI_UNUSED(comm);
  TUTTI_UNUSED(mhandle);
  TUTTI_UNUSED(dptr_mhandle);
  return tutti_error(ncclInternalError,
                     "NET/tutti: getDeviceMr called, but the plugin offers no device offload "
                     "(its devices are of type host)");
}

/* NCCL tells every plugin when the GPU has consumed a receive, offload or
 * not: for host-driven devices there is nothing to release. */
ncclResult_t tutti_netexport_irecv_consumed(void* recv_comm, int n, void* request) {
  TUTTI_UNUSED(recv_comm);
  TUTTI_UNUSED(n);
  TUTTI_UNUSED(request);
  return ncclSuccess;
}
