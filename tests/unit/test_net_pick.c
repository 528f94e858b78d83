/* Choosing network devices (topo/nics.h) from made-up properties: devices
 * the host cannot drive, several functions of one port, the NIC nearest the
 * GPU by sysfs path, speed order, ranks spread by rotation; and a GPU's
 * sysfs path from its bus id. */
#include <dirent.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "topo/nics.h"

static struct tutti_net_props dev(const char* name, uint64_t guid, int port, int speed,
                                  const char* pci) {
  struct tutti_net_props p;
  memset(&p, 0, sizeof p);
  snprintf(p.name, sizeof p.name, "%s", name);
  snprintf(p.pci_path, sizeof p.pci_path, "%s", pci);
  p.guid = guid;
  p.port = port;
  p.speed = speed;
  p.ptr_support = TUTTI_NET_PTR_HOST;
  return p;
}

/* tutti_topo_pick_nics's answer as "0 2 1" ("-" for none). */
static const char* pick(const struct tutti_net_props* p, int n, const char* gpu, int rank,
                        int max) {
  static char out[64];
  int devs[16], k = -1;
  ncclResult_t r = tutti_topo_pick_nics(p, n, gpu, rank, devs, max, &k);
  if (r != ncclSuccess) {
    return "error";
  }
  out[0] = '\0';
  for (int i = 0; i < k; i++) {
    snprintf(out + strlen(out), sizeof out - strlen(out), i ? " %d" : "%d", devs[i]);
  }
  return k == 0 ? "-" : out;
}

#define PICKS(want, ...)                                                                      \
  do {                                                                                        \
    const char* got_ = pick(__VA_ARGS__);                                                     \
    CHECK(strcmp(got_, (want)) == 0, "pick(%s) gives \"%s\", not \"%s\"", #__VA_ARGS__, got_, \
          (want));                                                                            \
  } while (0)

static void test_usable(void) {
  struct tutti_net_props p[4] = {dev("a", 1, 1, 100, ""), dev("b", 2, 1, 100, ""),
                                 dev("c", 3, 1, 100, ""), dev("d", 4, 1, 100, "")};
  p[1].dev_type = 1; /* offloaded: the GPU drives it */
  p[2].ptr_support = TUTTI_NET_PTR_CUDA;
  PICKS("0 3", p, 4, NULL, 0, 8);
  p[0].ptr_support = 0;
  p[3].dev_type = 2;
  PICKS("-", p, 4, NULL, 0, 8);
  PICKS("-", p, 0, NULL, 0, 8);
}

static void test_same_port(void) {
  struct tutti_net_props p[7] = {
      dev("mlx5_0", 0x10, 1, 100, ""), dev("mlx5_1", 0x10, 1, 100, ""), /* one port, twice */
      dev("mlx5_2", 0x10, 2, 100, ""),                                  /* its second port */
      dev("eth0", 0, 1, 100, ""),      dev("eth0", 0, 1, 100, ""),      /* no guid: by name */
      dev("eth1", 0, 1, 100, ""),      dev("eth0", 0x20, 1, 100, ""),   /* a guid differs */
  };
  PICKS("0 2 3 5 6", p, 7, NULL, 0, 8);
  p[0].dev_type = 1; /* the first function unusable: the second stands for the port */
  PICKS("1 2 3 5 6", p, 7, NULL, 0, 8);
}

static void test_speed_order(void) {
  struct tutti_net_props p[4] = {dev("a", 1, 1, 100, ""), dev("b", 2, 1, 400, ""),
                                 dev("c", 3, 1, 100, ""), dev("d", 4, 1, 200, "")};
  PICKS("1 3 0 2", p, 4, NULL, 0, 8);
  PICKS("1 3 0 2", p, 4, "", 0, 8); /* "" is no GPU path */
  PICKS("1", p, 4, NULL, 0, 1);
}

static void test_rotation(void) {
  struct tutti_net_props p[3] = {dev("a", 1, 1, 300, ""), dev("b", 2, 1, 200, ""),
                                 dev("c", 3, 1, 100, "")};
  PICKS("0 1 2", p, 3, NULL, 0, 8);
  PICKS("1 2 0", p, 3, NULL, 1, 8);
  PICKS("2 0 1", p, 3, NULL, 2, 8);
  PICKS("0 1 2", p, 3, NULL, 3, 8);
  PICKS("2 0 1", p, 3, NULL, -1, 8);
  PICKS("1", p, 3, NULL, 4, 1);
  PICKS("2 0", p, 3, NULL, 5, 2);
}

static void test_locality(void) {
#define GPU "/sys/devices/pci0000:00/0000:00:01.0/0000:02:00.0/0000:03:00.0"
  struct tutti_net_props p[6] = {
      dev("far", 1, 1, 400, "/sys/devices/pci0000:80/0000:80:01.0/0000:81:00.0"),
      dev("switch", 2, 1, 100, "/sys/devices/pci0000:00/0000:00:01.0/0000:02:00.0/0000:04:00.0"),
      dev("root", 3, 1, 400, "/sys/devices/pci0000:00/0000:00:02.0/0000:05:00.0"),
      dev("none", 4, 1, 400, ""),
      /* a longer name, not the same component: as far as "root" */
      dev("lookalike", 5, 1, 400, "/sys/devices/pci0000:00/0000:00:01.00/0000:06:00.0"),
      dev("switch2", 6, 1, 200, "/sys/devices/pci0000:00/0000:00:01.0/0000:02:00.0/0000:07:00.0"),
  };
  PICKS("5 1", p, 6, GPU, 0, 8); /* the two under the GPU's switch, fastest first */
  PICKS("1 5", p, 6, GPU, 1, 8);
  PICKS("0 2 3 4 5 1", p, 6, NULL, 0, 8);
  p[1].dev_type = 1;
  p[5].dev_type = 1;
  PICKS("2 4", p, 6, GPU, 0, 8); /* the same root port, whatever the name's length */
  PICKS("2 4", p, 6, GPU "/", 0, 8);
  PICKS("0 2 3 4", p, 6, "/elsewhere", 0, 8); /* nothing shared: all tie */
}

static void test_arguments(void) {
  struct tutti_net_props p = dev("a", 1, 1, 100, "");
  int devs[2], k = 0;
  CHECK(tutti_topo_pick_nics(&p, 1, NULL, 0, devs, 2, NULL) == ncclInternalError, "no *ndevs");
  CHECK(tutti_topo_pick_nics(NULL, 1, NULL, 0, devs, 2, &k) == ncclInternalError, "no props");
  CHECK(tutti_topo_pick_nics(&p, -1, NULL, 0, devs, 2, &k) == ncclInternalError, "ndev < 0");
  CHECK(tutti_topo_pick_nics(&p, 1, NULL, 0, NULL, 2, &k) == ncclInternalError, "no devs");
  CHECK(tutti_topo_pick_nics(&p, 1, NULL, 0, NULL, 0, &k) == ncclSuccess && k == 0, "max 0");
}

static void test_pci_path(void) {
  char out[PATH_MAX];
  CHECK(tutti_topo_pci_path("0000:3b:00.0/../x", out, sizeof out) == ncclInvalidArgument,
        "a path is not a bus id");
  CHECK(tutti_topo_pci_path("", out, sizeof out) == ncclInvalidArgument, "empty");
  CHECK(tutti_topo_pci_path("ffff:ff:1f.7", out, sizeof out) == ncclSuccess && out[0] == '\0',
        "no such device: no path, no error");
  DIR* d = opendir("/sys/bus/pci/devices");
  struct dirent* e = NULL;
  while (d != NULL && (e = readdir(d)) != NULL && e->d_name[0] == '.') {
  }
  if (e == NULL) {
    printf("no PCI devices in /sys: the bus id lookup of a real device is not tested\n");
  } else {
    char link[PATH_MAX], want[PATH_MAX], upper[300], nvml[310];
    snprintf(link, sizeof link, "/sys/bus/pci/devices/%s", e->d_name);
    CHECK(realpath(link, want) != NULL, "%s resolves", link);
    snprintf(upper, sizeof upper, "%s", e->d_name);
    for (char* c = upper; *c; c++) {
      *c = (char)(*c >= 'a' && *c <= 'f' ? *c - 'a' + 'A' : *c);
    }
    snprintf(nvml, sizeof nvml, "0000%s", upper); /* NVML's 8-digit domain */
    CHECK(tutti_topo_pci_path(upper, out, sizeof out) == ncclSuccess && strcmp(out, want) == 0,
          "%s: %s, not %s", upper, out, want);
    CHECK(tutti_topo_pci_path(nvml, out, sizeof out) == ncclSuccess && strcmp(out, want) == 0,
          "%s: %s, not %s", nvml, out, want);
    CHECK(tutti_topo_pci_path(upper, out, 4) == ncclInternalError, "no room: an error");
  }
  if (d != NULL) {
    closedir(d);
  }
}

int main(void) {
  test_usable();
  test_same_port();
  test_speed_order();
  test_rotation();
  test_locality();
  test_arguments();
  test_pci_path();
  return test_summary("net_pick");
}
