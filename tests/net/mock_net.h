/* What the mock network plugin (mock_plugin.c over mock_core.c) and its
 * test (tests/unit/test_net_load.c) agree on: the devices it reports, and
 * the counters it keeps in the test program's `mock_net_stats`, which it
 * finds with dlsym (the program exports it). */
#ifndef TUTTI_TEST_MOCK_NET_H
#define TUTTI_TEST_MOCK_NET_H

#include <stddef.h>
#include <stdint.h>

#include "nccl.h"

#define MOCK_NAME "Mock"
#define MOCK_NDEV_DEFAULT 2
#define MOCK_GUID(dev) (0x5000ull + (uint64_t)(dev))
#define MOCK_SPEED(dev) (100000 + 1000 * (dev))
#define MOCK_PORT 1
#define MOCK_LATENCY 2.5f
#define MOCK_MAX_COMMS 4096
#define MOCK_MAX_RECVS(abi) ((abi) == 7 ? 1 : 8) /* v7: no grouped receives */
#define MOCK_P2P_BYTES ((size_t)1 << 30)         /* v9+: the largest message */
#define MOCK_PTR(dev) ((dev) == 0 ? 0x1 : 0x3)   /* host; host and CUDA */
#define MOCK_OFFLOAD_TYPE 1                      /* MOCK_OFFLOAD: device 1's dev_type */
#define MOCK_OFFLOAD_VERSION 7
#define MOCK_HAS_DMABUF(abi) ((abi) % 2 == 0)
/* Device 0 has a PCI path, device 1 none (the plugin gives NULL), device 2
 * (MOCK_NDEV=3, v9+) is virtual, over devices 0 and 1. */
#define MOCK_PCI_0 "/sys/devices/pci0000:00/0000:00:02.0/0000:01:00.0"

struct mock_net_stats {
  int inits;        /* init calls, failed ones included */
  int finalizes;    /* v11+ */
  void* ctx;        /* v11+: the last context init made ... */
  uint64_t comm_id; /* ... and the communicator it was for */
  void* listen_ctx; /* v11+: the contexts listen, connect, finalize got */
  void* connect_ctx;
  void* finalize_ctx;
  int bad_ctx;         /* a context init never made (or already finalized) */
  int traffic_class;   /* v10+: from connect's config (v10) or init's (v11+) */
  int dev_handles;     /* v7+: connect / accept calls that got a device-handle pointer ... */
  int bad_dev_handles; /* ... and those where it was NULL or did not point to NULL */
  int profiler_ok;     /* v10+: the profiler callback set *event NULL and succeeded */
  int connects;        /* connect calls, NULL answers included */
  int accepts;
  int isends; /* isend / irecv calls that reached the plugin */
  int irecvs;
  int largest_group; /* the largest count an irecv took */
  int regs;          /* reg_mr, reg_mr_dmabuf, dereg_mr calls that succeeded */
  int dmabuf_regs;
  int deregs;
  int dmabuf_fd; /* the last reg_mr_dmabuf's fd and offset */
  uint64_t dmabuf_offset;
  int bad_mhandle; /* isend / irecv whose mhandle did not cover the buffer */
};

#endif
