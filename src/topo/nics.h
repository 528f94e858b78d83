/* Network devices as topology sees them: their properties (what a network,
 * net/net.h, reports of each), and which a rank uses, from those alone
 * (NCCL's rules: host-driven devices only, one per NIC port, the nearest to
 * the GPU, fastest first, ranks of a host spread over them). */
#ifndef TUTTI_TOPO_NICS_H
#define TUTTI_TOPO_NICS_H

#include <stddef.h>
#include <stdint.h>

#include "nccl.h"

#define TUTTI_NET_PTR_HOST 0x1   /* registers and moves host memory */
#define TUTTI_NET_PTR_CUDA 0x2   /* ... GPU memory (GPUDirect RDMA) */
#define TUTTI_NET_PTR_DMABUF 0x4 /* ... GPU memory through a dma-buf fd */
#define TUTTI_NET_MAX_VDEVS 8

/* A device's properties, widened from the plugin's version (fields an
 * older version lacks hold the defaults NCCL gives them). */
struct tutti_net_props {
  char name[64];
  char pci_path[256]; /* "/sys/devices/pci0000:00/..."; "" when the plugin gives none */
  uint64_t guid;      /* one NIC chip, whatever its PCI functions */
  int ptr_support;    /* TUTTI_NET_PTR_* */
  int reg_is_global;  /* a registration serves every comm of the device */
  int force_flush;    /* receives into GPU memory need iflush even without GPUDirect */
  int speed;          /* Mb/s */
  int port;
  float latency; /* µs */
  int max_comms; /* comms one process may open on the device */
  int max_recvs; /* buffers one grouped irecv may take */
  int dev_type;  /* 0: the host drives it (the only kind tutti uses) */
  int dev_version;
  size_t max_p2p_bytes; /* the largest message */
  int nvdevs;           /* a virtual device: the physical ones behind it (0: physical) */
  int vdevs[TUTTI_NET_MAX_VDEVS];
};

/* Writes to devs (at most max) the indices into props[0 .. ndev) this rank
 * should use, its first choice first, and their number to *ndevs (0: none
 * usable). Devices the host cannot drive (dev_type not host, or no
 * TUTTI_NET_PTR_HOST) are left out; devices reporting one NIC port (the
 * same non-zero guid and port, or with guid 0 the same name and port) count
 * once, as the lowest index; with gpu_pci_path (a sysfs path; NULL or "":
 * none) only those whose pci_path shares the most whole components with it
 * stay (ties all stay); the rest are ordered by speed, fastest first, then
 * index, and rotated by local_rank so that a host's ranks start on
 * different NICs. */
ncclResult_t tutti_topo_pick_nics(const struct tutti_net_props* props, int ndev,
                                  const char* gpu_pci_path, int local_rank, int* devs, int max,
                                  int* ndevs);

/* The sysfs path of a PCI device from its bus id as CUDA or NVML give it
 * ("0000:3B:00.0", "00000000:3b:00.0"): the real path of
 * /sys/bus/pci/devices/<id, lower case>. "" when there is no such entry
 * (no error: devices are then chosen without locality). */
ncclResult_t tutti_topo_pci_path(const char* bus_id, char* out, size_t len);

#endif
