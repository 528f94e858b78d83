/* What the files of libnccl-net-tutti.so share: tutti's socket network
 * (net/socket/socknet.h) behind NCCL's plugin tables (net/plugin/abi.h). adapt.c holds
 * the operations every ABI version has alike, tables.c the versions'
 * differences and the exported tables, log.c the logging. */
#ifndef TUTTI_PLUGIN_NET_PLUGIN_H
#define TUTTI_PLUGIN_NET_PLUGIN_H

#include <stddef.h>

#include "net/plugin/abi.h"
#include "net/net.h"

/* log.c: where tutti's log lines go from now on (NULL: kept as it was). */
void tutti_netexport_set_logger(tutti_net_abi_logger log);

/* adapt.c */
/* Saves the logger and opens the process's network once; a second call
 * only updates the logger. Fails when there is no device to offer. */
ncclResult_t tutti_netexport_init(tutti_net_abi_logger log);
/* A network for one communicator (v11's context). */
ncclResult_t tutti_netexport_open(uint64_t comm_id, struct tutti_net** out);
/* The network opened by the first init: the one comm-level calls use. */
struct tutti_net* tutti_netexport_base(void);
ncclResult_t tutti_netexport_props(int dev, struct tutti_net_props* out, const char** name,
                                   const char** pci_path);
void tutti_netexport_no_dev_handle(struct tutti_net_abi_dev_handle** dev);

ncclResult_t tutti_netexport_devices(int* ndev);
ncclResult_t tutti_netexport_accept(void* listen_comm, void** recv_comm,
                                    struct tutti_net_abi_dev_handle** recv_dev);
ncclResult_t tutti_netexport_reg_mr(void* comm, void* data, size_t size, int type, void** mhandle);
ncclResult_t tutti_netexport_dereg_mr(void* comm, void* mhandle);
ncclResult_t tutti_netexport_isend(void* send_comm, void* data, size_t size, int tag, void* mhandle,
                                   void** request);
ncclResult_t tutti_netexport_irecv(void* recv_comm, int n, void** data, size_t* sizes, int* tags,
                                   void** mhandles, void** request);
ncclResult_t tutti_netexport_iflush(void* recv_comm, int n, void** data, int* sizes,
                                    void** mhandles, void** request);
ncclResult_t tutti_netexport_test(void* request, int* done, int* sizes);
ncclResult_t tutti_netexport_close_send(void* send_comm);
ncclResult_t tutti_netexport_close_recv(void* recv_comm);
ncclResult_t tutti_netexport_close_listen(void* listen_comm);
ncclResult_t tutti_netexport_get_device_mr(void* comm, void* mhandle, void** dptr_mhandle);
ncclResult_t tutti_netexport_irecv_consumed(void* recv_comm, int n, void* request);

#endif
