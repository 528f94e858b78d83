/* The socket network's devices (dev.c), for its other files and the
 * plugin library: the interfaces it uses and their properties. */
#ifndef TUTTI_NET_SOCKET_DEV_H
#define TUTTI_NET_SOCKET_DEV_H

#include <net/if.h>

#include "net/net.h"
#include "util/socket.h"

/* The largest message (1 TiB: far beyond any buffer; NCCL's own bound). */
#define TUTTI_SOCKNET_MAX_BYTES ((size_t)1 << 40)

struct tutti_socknet_dev {
  char name[IF_NAMESIZE];
  union tutti_socket_addr addr; /* port 0 */
  char pci_path[256];           /* "" when the interface has no device (lo, veth) */
  int speed;                    /* Mb/s */
};

int tutti_socknet_ndevs(void);
/* NULL for a device that does not exist. */
const struct tutti_socknet_dev* tutti_socknet_dev(int dev);
/* ncclInvalidArgument with a sentence naming `doing` for a bad device. */
ncclResult_t tutti_socknet_dev_check(int dev, const char* doing);
ncclResult_t tutti_socknet_props(int dev, struct tutti_net_props* out);

#endif
