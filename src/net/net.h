/* A network as tutti's transports use it: the operations of NCCL's network
 * plugins (listen / connect / accept, memory registration, non-blocking
 * isend / irecv / iflush / test), whatever ABI version they came through
 * (net/plugin/abi.h), or tutti's own socket network built in (net/socket/socknet.h).
 *
 *   struct tutti_net       one network opened for one communicator
 *   tutti_net_ops          its operations; each takes the network first
 *   tutti_net_open         the plugin NCCL_NET_PLUGIN names (or
 *                          libnccl-net.so), NULL when there is none
 *
 * Semantics are the plugins': connect and accept never block (they return
 * success with a NULL comm until the connection is up: call again); isend
 * and irecv may return a NULL request (no room now: call again); a request
 * is polled with test until done, which frees it; messages on one comm
 * arrive in the order they were sent, each into the next posted receive,
 * which must be at least as large. */
#ifndef TUTTI_NET_NET_H
#define TUTTI_NET_NET_H

#include <stddef.h>
#include <stdint.h>

#include "nccl.h"
#include "topo/nics.h" /* a device's properties */

#define TUTTI_NET_HANDLE_BYTES 128 /* what listen fills, exchanged out of band */
#define TUTTI_NET_MAX_REQUESTS 32  /* requests in flight on one comm, at most */
#define TUTTI_NET_MAX_RECVS 8      /* buffers of one grouped receive, at most */

struct tutti_net;

struct tutti_net_ops {
  ncclResult_t (*devices)(struct tutti_net* n, int* ndev);
  ncclResult_t (*props)(struct tutti_net* n, int dev, struct tutti_net_props* out);
  /* Fills `handle` (TUTTI_NET_HANDLE_BYTES) for a peer's connect. */
  ncclResult_t (*listen)(struct tutti_net* n, int dev, void* handle, void** listen_comm);
  ncclResult_t (*connect)(struct tutti_net* n, int dev, void* handle, void** send_comm);
  ncclResult_t (*accept)(struct tutti_net* n, void* listen_comm, void** recv_comm);
  /* type: TUTTI_NET_PTR_HOST or _CUDA. reg_mr_dmabuf is NULL when the
   * plugin offers none. */
  ncclResult_t (*reg_mr)(struct tutti_net* n, void* comm, void* data, size_t size, int type,
                         void** mhandle);
  ncclResult_t (*reg_mr_dmabuf)(struct tutti_net* n, void* comm, void* data, size_t size, int type,
                                uint64_t offset, int fd, void** mhandle);
  ncclResult_t (*dereg_mr)(struct tutti_net* n, void* comm, void* mhandle);
  ncclResult_t (*isend)(struct tutti_net* n, void* send_comm, void* data, size_t size, int tag,
                        void* mhandle, void** request);
  /* A grouped receive of `count` buffers (at most the device's max_recvs),
   * matched by tag, completing together. */
  ncclResult_t (*irecv)(struct tutti_net* n, void* recv_comm, int count, void** data, size_t* sizes,
                        int* tags, void** mhandles, void** request);
  /* After a receive into GPU memory: makes the data visible to kernels. A
   * NULL request means nothing was needed. */
  ncclResult_t (*iflush)(struct tutti_net* n, void* recv_comm, int count, void** data, int* sizes,
                         void** mhandles, void** request);
  /* *done once complete (the request is then freed); sizes (may be NULL):
   * the bytes moved, per buffer of a grouped receive. */
  ncclResult_t (*test)(struct tutti_net* n, void* request, int* done, int* sizes);
  ncclResult_t (*close_send)(struct tutti_net* n, void* send_comm);
  ncclResult_t (*close_recv)(struct tutti_net* n, void* recv_comm);
  ncclResult_t (*close_listen)(struct tutti_net* n, void* listen_comm);
  /* Ends what tutti_net_open began (once per open); does not free n
   * (tutti_net_close does both: every struct tutti_net is malloc'ed). */
  void (*finalize)(struct tutti_net* n);
};

struct tutti_net {
  const struct tutti_net_ops* ops;
  char name[64];     /* the plugin's own name: "IB", "AWS Libfabric", "tutti" ... */
  char path[512];    /* the library it came from ("" when built in) */
  int abi;           /* the ncclNetPlugin_vN found (6 ... 12); 0: built in */
  const void* table; /* the plugin's own table (net/plugin/abi.h) */
  void* ctx;         /* the context init gave (v11+; NULL before) */
  uint64_t comm_id;  /* the communicator it was opened for */
};

/* The plugin this process uses, loaded once: NCCL_NET_PLUGIN (a comma list
 * of names, each tried as given, a path or a file name, then, unless it is
 * a path or lib*.so, as libnccl-net-<name>.so; "none": no plugin) or, when
 * unset, libnccl-net.so if the dynamic loader finds one; the newest ABI it
 * exports (v12 ... v6). NCCL_NET names which network to use ("Socket":
 * tutti's own transport, no plugin). Then
 * opens it for one communicator (init, per communicator from v11 on, once
 * per process before). *out is NULL when no plugin is to be used (none
 * loads, NCCL_NET names another network, or it has no device: said at
 * INFO, at WARN when a named plugin does not load); an error only when a
 * named plugin's init fails. Thread-safe.
 * Plugins may set variables in init (aws-ofi-nccl sets NCCL_PROTO): code
 * that reads such a variable once must read it after this call. */
ncclResult_t tutti_net_open(uint64_t comm_id, struct tutti_net** out);
/* Finalizes and frees what tutti_net_open gave (NULL: nothing). */
void tutti_net_close(struct tutti_net* n);

/* The devices of `net` a rank uses, chosen from every device's properties
 * by tutti_topo_pick_nics (its gpu_pci_path, local_rank and max), into devs
 * and *ndevs, and their names into names[0 .. *ndevs) when not NULL
 * (net/plugin/choose.c). */
ncclResult_t tutti_net_choose(struct tutti_net* net, const char* gpu_pci_path, int local_rank,
                              int* devs, int max, int* ndevs, char (*names)[64]);

/* The plugin found at load, for tutti-check and logs: its path, name and
 * ABI version (not opened: ops and ctx are NULL), or NULL when none loads
 * (tries to load it). */
const struct tutti_net* tutti_net_loaded(void);

#endif
