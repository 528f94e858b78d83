/* The network-plugin ABI of NCCL, as a shared library exports it: a table
 * named ncclNetPlugin_vN (N = 6 ... 12) of a name and function pointers.
 * Declared here from NCCL's documented interface (ext-net/README.md and
 * the net_vN.h headers it describes) under tutti's own names: only the
 * order, types and sizes of the fields are the ABI. NCCL 2.28 looks for
 * v11 first, then v10 ... v6; v12 is the next one (NCCL 2.29+), which
 * aws-ofi-nccl exports too. What changed from one version to the next:
 *
 *   v6   the base: int sizes in regMr, isend, irecv
 *   v7   connect/accept return a device handle (network offload); regMr
 *        still int; getDeviceMr, irecvConsumed; properties: device type
 *   v8   regMr takes size_t; properties: regIsGlobal
 *   v9   isend/irecv take size_t sizes; makeVDevice; properties:
 *        forceFlush, virtual devices, max p2p / collective sizes
 *   v10  init takes a profiler callback; connect takes a comm config
 *        (traffic class); isend/irecv take profiler handles
 *   v11  init is per communicator and returns a context that listen,
 *        connect and finalize take; the config moves to init; finalize,
 *        setNetAttr; properties: maxMultiRequestSize
 *   v12  8 instead of 4 virtual devices per NIC; properties: rail, plane
 *
 * Nothing here is used directly outside src/net/: the loader turns each
 * version into struct tutti_net (net/net.h). */
#ifndef TUTTI_NET_PLUGIN_ABI_H
#define TUTTI_NET_PLUGIN_ABI_H

#include <stddef.h>
#include <stdint.h>

#include "nccl.h"

#define TUTTI_NET_ABI_HANDLE_MAXSIZE 128 /* NCCL_NET_HANDLE_MAXSIZE */
#define TUTTI_NET_ABI_PTR_HOST 0x1
#define TUTTI_NET_ABI_PTR_CUDA 0x2
#define TUTTI_NET_ABI_PTR_DMABUF 0x4
#define TUTTI_NET_ABI_MAX_REQUESTS 32 /* requests in flight per comm */
/* irecv's *request on entry may hold this: the receiver needs no
 * completion of the data (NCCL_NET_OPTIONAL_RECV_COMPLETION). */
#define TUTTI_NET_ABI_OPTIONAL_RECV_COMPLETION ((void*)(uintptr_t)0x1)
#define TUTTI_NET_ABI_VDEVS 4     /* virtual device list, v9 ... v11 */
#define TUTTI_NET_ABI_VDEVS_V12 8 /* ... v12 */
#define TUTTI_NET_ABI_TRAFFIC_CLASS_UNDEF (-1)
#define TUTTI_NET_ABI_DEVICE_HOST 0 /* netDeviceType: no offload */

/* NCCL's logger (ncclDebugLogger_t): level 0 none, 1 version, 2 warn,
 * 3 info, 4 abort, 5 trace; flags are NCCL's subsystem bits. */
typedef void (*tutti_net_abi_logger)(int level, unsigned long flags, const char* file, int line,
                                     const char* fmt, ...);
/* NCCL's profiler callback (ncclProfilerCallback_t), v10+. */
typedef ncclResult_t (*tutti_net_abi_profiler)(void** event, int type, void* phandle,
                                               int64_t plugin_id, void* ext);

/* ncclNetDeviceHandle_vN_t, v7+: what connect/accept hand back for
 * device offload. tutti asks for none (passes NULL). */
struct tutti_net_abi_dev_handle {
  int type;
  int version;
  void* handle;
  size_t size;
  int needs_proxy_progress;
};

struct tutti_net_abi_vdevs {
  int ndevs;
  int devs[TUTTI_NET_ABI_VDEVS];
};
struct tutti_net_abi_vdevs_v12 {
  int ndevs;
  int devs[TUTTI_NET_ABI_VDEVS_V12];
};

/* ncclNetCommConfig_vN_t, v10+. */
struct tutti_net_abi_config {
  int traffic_class;
};

/* ncclNetAttr_vN_t, v11+ (setNetAttr): hints tutti never sends. */
struct tutti_net_abi_comm_attr {
  int32_t max_concurrent_peers;
  int32_t min_concurrent_peers;
  int32_t max_flows_per_peer;
  int32_t min_flows_per_peer;
};
struct tutti_net_abi_attr {
  struct tutti_net_abi_comm_attr send;
  struct tutti_net_abi_comm_attr recv;
  uint32_t op;
  uint32_t algo;
  uint32_t proto;
};

/* ---- properties (ncclNetProperties_vN_t) ---- */

struct tutti_net_abi_props_v6 {
  char* name;
  char* pci_path;
  uint64_t guid;
  int ptr_support;
  int speed; /* Mb/s */
  int port;
  float latency; /* µs */
  int max_comms;
  int max_recvs;
};

struct tutti_net_abi_props_v7 {
  char* name;
  char* pci_path;
  uint64_t guid;
  int ptr_support;
  int speed;
  int port;
  float latency;
  int max_comms;
  int max_recvs;
  int dev_type;
  int dev_version;
};

struct tutti_net_abi_props_v8 {
  char* name;
  char* pci_path;
  uint64_t guid;
  int ptr_support;
  int reg_is_global;
  int speed;
  int port;
  float latency;
  int max_comms;
  int max_recvs;
  int dev_type;
  int dev_version;
};

/* v9 and v10 */
struct tutti_net_abi_props_v9 {
  char* name;
  char* pci_path;
  uint64_t guid;
  int ptr_support;
  int reg_is_global;
  int force_flush;
  int speed;
  int port;
  float latency;
  int max_comms;
  int max_recvs;
  int dev_type;
  int dev_version;
  struct tutti_net_abi_vdevs vprops;
  size_t max_p2p_bytes;
  size_t max_coll_bytes;
};

struct tutti_net_abi_props_v11 {
  char* name;
  char* pci_path;
  uint64_t guid;
  int ptr_support;
  int reg_is_global;
  int force_flush;
  int speed;
  int port;
  float latency;
  int max_comms;
  int max_recvs;
  int dev_type;
  int dev_version;
  struct tutti_net_abi_vdevs vprops;
  size_t max_p2p_bytes;
  size_t max_coll_bytes;
  int max_multi_request_size;
};

struct tutti_net_abi_props_v12 {
  char* name;
  char* pci_path;
  uint64_t guid;
  int ptr_support;
  int reg_is_global;
  int force_flush;
  int speed;
  int port;
  float latency;
  int max_comms;
  int max_recvs;
  int dev_type;
  int dev_version;
  struct tutti_net_abi_vdevs_v12 vprops;
  size_t max_p2p_bytes;
  size_t max_coll_bytes;
  int max_multi_request_size;
  int16_t rail_id;
  int16_t plane_id;
};

/* ---- the tables (ncclNet_vN_t) ---- */

struct tutti_net_abi_v6 {
  const char* name;
  ncclResult_t (*init)(tutti_net_abi_logger log);
  ncclResult_t (*devices)(int* ndev);
  ncclResult_t (*get_properties)(int dev, struct tutti_net_abi_props_v6* props);
  ncclResult_t (*listen)(int dev, void* handle, void** listen_comm);
  ncclResult_t (*connect)(int dev, void* handle, void** send_comm);
  ncclResult_t (*accept)(void* listen_comm, void** recv_comm);
  ncclResult_t (*reg_mr)(void* comm, void* data, int size, int type, void** mhandle);
  ncclResult_t (*reg_mr_dmabuf)(void* comm, void* data, size_t size, int type, uint64_t offset,
                                int fd, void** mhandle);
  ncclResult_t (*dereg_mr)(void* comm, void* mhandle);
  ncclResult_t (*isend)(void* send_comm, void* data, int size, int tag, void* mhandle,
                        void** request);
  ncclResult_t (*irecv)(void* recv_comm, int n, void** data, int* sizes, int* tags, void** mhandles,
                        void** request);
  ncclResult_t (*iflush)(void* recv_comm, int n, void** data, int* sizes, void** mhandles,
                         void** request);
  ncclResult_t (*test)(void* request, int* done, int* sizes);
  ncclResult_t (*close_send)(void* send_comm);
  ncclResult_t (*close_recv)(void* recv_comm);
  ncclResult_t (*close_listen)(void* listen_comm);
};

struct tutti_net_abi_v7 {
  const char* name;
  ncclResult_t (*init)(tutti_net_abi_logger log);
  ncclResult_t (*devices)(int* ndev);
  ncclResult_t (*get_properties)(int dev, struct tutti_net_abi_props_v7* props);
  ncclResult_t (*listen)(int dev, void* handle, void** listen_comm);
  ncclResult_t (*connect)(int dev, void* handle, void** send_comm,
                          struct tutti_net_abi_dev_handle** send_dev);
  ncclResult_t (*accept)(void* listen_comm, void** recv_comm,
                         struct tutti_net_abi_dev_handle** recv_dev);
  ncclResult_t (*reg_mr)(void* comm, void* data, int size, int type, void** mhandle);
  ncclResult_t (*reg_mr_dmabuf)(void* comm, void* data, size_t size, int type, uint64_t offset,
                                int fd, void** mhandle);
  ncclResult_t (*dereg_mr)(void* comm, void* mhandle);
  ncclResult_t (*isend)(void* send_comm, void* data, int size, int tag, void* mhandle,
                        void** request);
  ncclResult_t (*irecv)(void* recv_comm, int n, void** data, int* sizes, int* tags, void** mhandles,
                        void** request);
  ncclResult_t (*iflush)(void* recv_comm, int n, void** data, int* sizes, void** mhandles,
                         void** request);
  ncclResult_t (*test)(void* request, int* done, int* sizes);
  ncclResult_t (*close_send)(void* send_comm);
  ncclResult_t (*close_recv)(void* recv_comm);
  ncclResult_t (*close_listen)(void* listen_comm);
  ncclResult_t (*get_device_mr)(void* comm, void* mhandle, void** dptr_mhandle);
  ncclResult_t (*irecv_consumed)(void* recv_comm, int n, void* request);
};

struct tutti_net_abi_v8 {
  const char* name;
  ncclResult_t (*init)(tutti_net_abi_logger log);
  ncclResult_t (*devices)(int* ndev);
  ncclResult_t (*get_properties)(int dev, struct tutti_net_abi_props_v8* props);
  ncclResult_t (*listen)(int dev, void* handle, void** listen_comm);
  ncclResult_t (*connect)(int dev, void* handle, void** send_comm,
                          struct tutti_net_abi_dev_handle** send_dev);
  ncclResult_t (*accept)(void* listen_comm, void** recv_comm,
                         struct tutti_net_abi_dev_handle** recv_dev);
  ncclResult_t (*reg_mr)(void* comm, void* data, size_t size, int type, void** mhandle);
  ncclResult_t (*reg_mr_dmabuf)(void* comm, void* data, size_t size, int type, uint64_t offset,
                                int fd, void** mhandle);
  ncclResult_t (*dereg_mr)(void* comm, void* mhandle);
  ncclResult_t (*isend)(void* send_comm, void* data, int size, int tag, void* mhandle,
                        void** request);
  ncclResult_t (*irecv)(void* recv_comm, int n, void** data, int* sizes, int* tags, void** mhandles,
                        void** request);
  ncclResult_t (*iflush)(void* recv_comm, int n, void** data, int* sizes, void** mhandles,
                         void** request);
  ncclResult_t (*test)(void* request, int* done, int* sizes);
  ncclResult_t (*close_send)(void* send_comm);
  ncclResult_t (*close_recv)(void* recv_comm);
  ncclResult_t (*close_listen)(void* listen_comm);
  ncclResult_t (*get_device_mr)(void* comm, void* mhandle, void** dptr_mhandle);
  ncclResult_t (*irecv_consumed)(void* recv_comm, int n, void* request);
};

struct tutti_net_abi_v9 {
  const char* name;
  ncclResult_t (*init)(tutti_net_abi_logger log);
  ncclResult_t (*devices)(int* ndev);
  ncclResult_t (*get_properties)(int dev, struct tutti_net_abi_props_v9* props);
  ncclResult_t (*listen)(int dev, void* handle, void** listen_comm);
  ncclResult_t (*connect)(int dev, void* handle, void** send_comm,
                          struct tutti_net_abi_dev_handle** send_dev);
  ncclResult_t (*accept)(void* listen_comm, void** recv_comm,
                         struct tutti_net_abi_dev_handle** recv_dev);
  ncclResult_t (*reg_mr)(void* comm, void* data, size_t size, int type, void** mhandle);
  ncclResult_t (*reg_mr_dmabuf)(void* comm, void* data, size_t size, int type, uint64_t offset,
                                int fd, void** mhandle);
  ncclResult_t (*dereg_mr)(void* comm, void* mhandle);
  ncclResult_t (*isend)(void* send_comm, void* data, size_t size, int tag, void* mhandle,
                        void** request);
  ncclResult_t (*irecv)(void* recv_comm, int n, void** data, size_t* sizes, int* tags,
                        void** mhandles, void** request);
  ncclResult_t (*iflush)(void* recv_comm, int n, void** data, int* sizes, void** mhandles,
                         void** request);
  ncclResult_t (*test)(void* request, int* done, int* sizes);
  ncclResult_t (*close_send)(void* send_comm);
  ncclResult_t (*close_recv)(void* recv_comm);
  ncclResult_t (*close_listen)(void* listen_comm);
  ncclResult_t (*get_device_mr)(void* comm, void* mhandle, void** dptr_mhandle);
  ncclResult_t (*irecv_consumed)(void* recv_comm, int n, void* request);
  ncclResult_t (*make_vdevice)(int* dev, struct tutti_net_abi_vdevs* props);
};

struct tutti_net_abi_v10 {
  const char* name;
  ncclResult_t (*init)(tutti_net_abi_logger log, tutti_net_abi_profiler prof);
  ncclResult_t (*devices)(int* ndev);
  ncclResult_t (*get_properties)(int dev, struct tutti_net_abi_props_v9* props);
  ncclResult_t (*listen)(int dev, void* handle, void** listen_comm);
  ncclResult_t (*connect)(int dev, struct tutti_net_abi_config* config, void* handle,
                          void** send_comm, struct tutti_net_abi_dev_handle** send_dev);
  ncclResult_t (*accept)(void* listen_comm, void** recv_comm,
                         struct tutti_net_abi_dev_handle** recv_dev);
  ncclResult_t (*reg_mr)(void* comm, void* data, size_t size, int type, void** mhandle);
  ncclResult_t (*reg_mr_dmabuf)(void* comm, void* data, size_t size, int type, uint64_t offset,
                                int fd, void** mhandle);
  ncclResult_t (*dereg_mr)(void* comm, void* mhandle);
  ncclResult_t (*isend)(void* send_comm, void* data, size_t size, int tag, void* mhandle,
                        void* phandle, void** request);
  ncclResult_t (*irecv)(void* recv_comm, int n, void** data, size_t* sizes, int* tags,
                        void** mhandles, void** phandles, void** request);
  ncclResult_t (*iflush)(void* recv_comm, int n, void** data, int* sizes, void** mhandles,
                         void** request);
  ncclResult_t (*test)(void* request, int* done, int* sizes);
  ncclResult_t (*close_send)(void* send_comm);
  ncclResult_t (*close_recv)(void* recv_comm);
  ncclResult_t (*close_listen)(void* listen_comm);
  ncclResult_t (*get_device_mr)(void* comm, void* mhandle, void** dptr_mhandle);
  ncclResult_t (*irecv_consumed)(void* recv_comm, int n, void* request);
  ncclResult_t (*make_vdevice)(int* dev, struct tutti_net_abi_vdevs* props);
};

struct tutti_net_abi_v11 {
  const char* name;
  ncclResult_t (*init)(void** ctx, uint64_t comm_id, struct tutti_net_abi_config* config,
                       tutti_net_abi_logger log, tutti_net_abi_profiler prof);
  ncclResult_t (*devices)(int* ndev);
  ncclResult_t (*get_properties)(int dev, struct tutti_net_abi_props_v11* props);
  ncclResult_t (*listen)(void* ctx, int dev, void* handle, void** listen_comm);
  ncclResult_t (*connect)(void* ctx, int dev, void* handle, void** send_comm,
                          struct tutti_net_abi_dev_handle** send_dev);
  ncclResult_t (*accept)(void* listen_comm, void** recv_comm,
                         struct tutti_net_abi_dev_handle** recv_dev);
  ncclResult_t (*reg_mr)(void* comm, void* data, size_t size, int type, void** mhandle);
  ncclResult_t (*reg_mr_dmabuf)(void* comm, void* data, size_t size, int type, uint64_t offset,
                                int fd, void** mhandle);
  ncclResult_t (*dereg_mr)(void* comm, void* mhandle);
  ncclResult_t (*isend)(void* send_comm, void* data, size_t size, int tag, void* mhandle,
                        void* phandle, void** request);
  ncclResult_t (*irecv)(void* recv_comm, int n, void** data, size_t* sizes, int* tags,
                        void** mhandles, void** phandles, void** request);
  ncclResult_t (*iflush)(void* recv_comm, int n, void** data, int* sizes, void** mhandles,
                         void** request);
  ncclResult_t (*test)(void* request, int* done, int* sizes);
  ncclResult_t (*close_send)(void* send_comm);
  ncclResult_t (*close_recv)(void* recv_comm);
  ncclResult_t (*close_listen)(void* listen_comm);
  ncclResult_t (*get_device_mr)(void* comm, void* mhandle, void** dptr_mhandle);
  ncclResult_t (*irecv_consumed)(void* recv_comm, int n, void* request);
  ncclResult_t (*make_vdevice)(int* dev, struct tutti_net_abi_vdevs* props);
  ncclResult_t (*finalize)(void* ctx);
  ncclResult_t (*set_net_attr)(void* ctx, struct tutti_net_abi_attr* attr);
};

struct tutti_net_abi_v12 {
  const char* name;
  ncclResult_t (*init)(void** ctx, uint64_t comm_id, struct tutti_net_abi_config* config,
                       tutti_net_abi_logger log, tutti_net_abi_profiler prof);
  ncclResult_t (*devices)(int* ndev);
  ncclResult_t (*get_properties)(int dev, struct tutti_net_abi_props_v12* props);
  ncclResult_t (*listen)(void* ctx, int dev, void* handle, void** listen_comm);
  ncclResult_t (*connect)(void* ctx, int dev, void* handle, void** send_comm,
                          struct tutti_net_abi_dev_handle** send_dev);
  ncclResult_t (*accept)(void* listen_comm, void** recv_comm,
                         struct tutti_net_abi_dev_handle** recv_dev);
  ncclResult_t (*reg_mr)(void* comm, void* data, size_t size, int type, void** mhandle);
  ncclResult_t (*reg_mr_dmabuf)(void* comm, void* data, size_t size, int type, uint64_t offset,
                                int fd, void** mhandle);
  ncclResult_t (*dereg_mr)(void* comm, void* mhandle);
  ncclResult_t (*isend)(void* send_comm, void* data, size_t size, int tag, void* mhandle,
                        void* phandle, void** request);
  ncclResult_t (*irecv)(void* recv_comm, int n, void** data, size_t* sizes, int* tags,
                        void** mhandles, void** phandles, void** request);
  ncclResult_t (*iflush)(void* recv_comm, int n, void** data, int* sizes, void** mhandles,
                         void** request);
  ncclResult_t (*test)(void* request, int* done, int* sizes);
  ncclResult_t (*close_send)(void* send_comm);
  ncclResult_t (*close_recv)(void* recv_comm);
  ncclResult_t (*close_listen)(void* listen_comm);
  ncclResult_t (*get_device_mr)(void* comm, void* mhandle, void** dptr_mhandle);
  ncclResult_t (*irecv_consumed)(void* recv_comm, int n, void* request);
  ncclResult_t (*make_vdevice)(int* dev, struct tutti_net_abi_vdevs_v12* props);
  ncclResult_t (*finalize)(void* ctx);
  ncclResult_t (*set_net_attr)(void* ctx, struct tutti_net_abi_attr* attr);
};

#endif
