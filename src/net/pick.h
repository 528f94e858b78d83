/* Which network devices a rank uses, from their properties alone (NCCL's
 * rules: host-driven devices only, one per NIC port, the nearest to the
 * GPU, fastest first, ranks of a host spread over them). */
#ifndef TUTTI_NET_PICK_H
#define TUTTI_NET_PICK_H

#include <stddef.h>

#include "net/net.h"

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
ncclResult_t tutti_net_pick(const struct tutti_net_props* props, int ndev, const char* gpu_pci_path,
                            int local_rank, int* devs, int max, int* ndevs);

/* The sysfs path of a PCI device from its bus id as CUDA or NVML give it
 * ("0000:3B:00.0", "00000000:3b:00.0"): the real path of
 * /sys/bus/pci/devices/<id, lower case>. "" when there is no such entry
 * (no error: devices are then chosen without locality). */
ncclResult_t tutti_net_pci_path(const char* bus_id, char* out, size_t len);

#endif
