/* The socket network's devices: one per usable interface (topo/ifaces.c:
 * NCCL_SOCKET_IFNAME, NCCL_SOCKET_FAMILY), found once per process, and
 * their properties as a network plugin reports them. */
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "net/socket/dev.h"
#include "util/check.h"
#include "topo/ifaces.h"
#include "util/param.h"

#define MAX_DEVS 16
#define UNKNOWN_SPEED 10000 /* Mb/s, as NCCL assumes when the interface does not say */

static struct tutti_socknet_dev devs[MAX_DEVS];
static int ndevs;
static pthread_once_t once = PTHREAD_ONCE_INIT;

/* Mb/s from sysfs; virtual interfaces (lo, veth) have none or -1. */
static int read_speed(const char* name) {
  char path[128];
  snprintf(path, sizeof path, "/sys/class/net/%s/speed", name);
  FILE* f = fopen(path, "r");
  int speed = -1;
  if (f != NULL) {
    if (fscanf(f, "%d", &speed) != 1) {
      speed = -1;
    }
    fclose(f);
  }
  return speed > 0 ? speed : UNKNOWN_SPEED;
}

static void find(void) {
  struct tutti_iface list[64];
  int n = tutti_iface_list(list, 64);
  if (n < 0) {
    WARN("socket network: cannot list the network interfaces: no devices");
    return;
  }
  n = n < 64 ? n : 64;
  /* One device per interface: its best address (the list is best first). */
  for (int i = 0; i < n && ndevs < MAX_DEVS; i++) {
    int seen = 0;
    for (int d = 0; d < ndevs; d++) {
      seen |= strcmp(devs[d].name, list[i].name) == 0;
    }
    if (seen) {
      continue;
    }
    struct tutti_socknet_dev* d = &devs[ndevs++];
    memcpy(d->name, list[i].name, sizeof d->name);
    d->name[sizeof d->name - 1] = '\0';
    d->addr = list[i].addr;
    char sys[128], real[PATH_MAX];
    snprintf(sys, sizeof sys, "/sys/class/net/%s/device", d->name);
    /* A path too long for the field is left out rather than cut. */
    if (realpath(sys, real) != NULL && strlen(real) < sizeof d->pci_path) {
      memcpy(d->pci_path, real, strlen(real) + 1);
    }
    d->speed = read_speed(d->name);
    char where[TUTTI_SOCKET_ADDR_STRLEN];
    INFO(TUTTI_NET | TUTTI_INIT, "socket network: device %d is %s (%s, %d Mb/s%s%s)", ndevs - 1,
         d->name, tutti_socket_format(&d->addr, where, sizeof where), d->speed,
         d->pci_path[0] ? ", " : "", d->pci_path);
  }
  if (ndevs == 0) {
    const char* spec = tutti_param_socket_ifname();
    INFO(TUTTI_NET | TUTTI_INIT,
         "socket network: no usable interface (NCCL_SOCKET_IFNAME=\"%s\"): no devices",
         spec != NULL ? spec : "");
  }
}

int tutti_socknet_ndevs(void) {
  pthread_once(&once, find);
  return ndevs;
}

const struct tutti_socknet_dev* tutti_socknet_dev(int dev) {
  pthread_once(&once, find);
  return dev >= 0 && dev < ndevs ? &devs[dev] : NULL;
}

ncclResult_t tutti_socknet_dev_check(int dev, const char* doing) {
  if (tutti_socknet_dev(dev) == NULL) {
    return tutti_error(ncclInvalidArgument,
                       "socket network: %s on device %d, but there are %d devices (0 ... %d)",
                       doing, dev, ndevs, ndevs - 1);
  }
  return ncclSuccess;
}

ncclResult_t tutti_socknet_props(int dev, struct tutti_net_props* out) {
  NCCLCHECK(tutti_socknet_dev_check(dev, "properties asked"));
  const struct tutti_socknet_dev* d = &devs[dev];
  memset(out, 0, sizeof *out);
  snprintf(out->name, sizeof out->name, "%s", d->name);
  snprintf(out->pci_path, sizeof out->pci_path, "%s", d->pci_path);
  out->guid = (uint64_t)dev;
  out->ptr_support = TUTTI_NET_PTR_HOST;
  out->reg_is_global = 1;
  out->speed = d->speed;
  out->latency = 0;
  out->max_comms = 65536;
  out->max_recvs = TUTTI_NET_MAX_RECVS;
  out->dev_type = 0;
  out->max_p2p_bytes = TUTTI_SOCKNET_MAX_BYTES;
  return ncclSuccess;
}
