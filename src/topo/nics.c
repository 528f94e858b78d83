/* Choosing a rank's network devices from their properties (topo/nics.h),
 * and the sysfs path of a GPU to choose by. Pure but for the path lookup,
 * so that every rule is tested with made-up devices. */
#include "topo/nics.h"

#include <ctype.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/check.h"
#include "util/log.h"

static int host_driven(const struct tutti_net_props* p) {
  return p->dev_type == 0 && (p->ptr_support & TUTTI_NET_PTR_HOST) != 0;
}

/* Plugins list a NIC port once per PCI function or virtual function. */
static int same_port(const struct tutti_net_props* a, const struct tutti_net_props* b) {
  if (a->port != b->port) {
    return 0;
  }
  if (a->guid != 0 || b->guid != 0) {
    return a->guid == b->guid;
  }
  return strcmp(a->name, b->name) == 0;
}

/* Whole components two paths share from the start ("/a/bc" and "/a/b": 1). */
static int shared_components(const char* a, const char* b) {
  int n = 0;
  for (;;) {
    while (*a == '/') {
      a++;
    }
    while (*b == '/') {
      b++;
    }
    const size_t la = strcspn(a, "/");
    const size_t lb = strcspn(b, "/");
    if (la == 0 || la != lb || strncmp(a, b, la) != 0) {
      return n;
    }
    n++;
    a += la;
    b += lb;
  }
}

static int faster(const struct tutti_net_props* props, int a, int b) {
  return props[a].speed != props[b].speed ? props[a].speed > props[b].speed : a < b;
}

ncclResult_t tutti_topo_pick_nics(const struct tutti_net_props* props, int ndev,
                                  const char* gpu_pci_path, int local_rank, int* devs, int max,
                                  int* ndevs) {
  if (ndevs == NULL || ndev < 0 || max < 0 || (ndev > 0 && props == NULL) ||
      (max > 0 && devs == NULL)) {
    return tutti_error(ncclInternalError, "tutti_topo_pick_nics: bad arguments (ndev %d, max %d)",
                       ndev, max);
  }
  *ndevs = 0;
  int* kept = malloc(((size_t)ndev + 1) * sizeof *kept);
  int* score = malloc(((size_t)ndev + 1) * sizeof *score);
  if (kept == NULL || score == NULL) {
    free(kept);
    free(score);
    return tutti_error(ncclSystemError, "out of host memory choosing among %d network devices",
                       ndev);
  }
  const int near = gpu_pci_path != NULL && gpu_pci_path[0] != '\0';
  int k = 0, best = 0;
  for (int d = 0; d < ndev; d++) {
    if (!host_driven(&props[d])) {
      continue;
    }
    int dup = 0;
    for (int j = 0; j < k && !dup; j++) {
      dup = same_port(&props[kept[j]], &props[d]);
    }
    if (dup) {
      continue;
    }
    score[k] = near ? shared_components(props[d].pci_path, gpu_pci_path) : 0;
    best = score[k] > best ? score[k] : best;
    kept[k++] = d;
  }
  int m = 0; /* the nearest, in index order */
  for (int j = 0; j < k; j++) {
    if (score[j] == best) {
      kept[m++] = kept[j];
    }
  }
  for (int i = 1; i < m; i++) { /* a handful of devices: insertion sort */
    const int d = kept[i];
    int j = i;
    for (; j > 0 && faster(props, d, kept[j - 1]); j--) {
      kept[j] = kept[j - 1];
    }
    kept[j] = d;
  }
  const int start = m > 0 ? ((local_rank % m) + m) % m : 0;
  const int n = m < max ? m : max;
  for (int i = 0; i < n; i++) {
    devs[i] = kept[(start + i) % m];
  }
  *ndevs = n;
  free(kept);
  free(score);
  return ncclSuccess;
}

ncclResult_t tutti_topo_pci_path(const char* bus_id, char* out, size_t len) {
  if (out == NULL || len == 0 || bus_id == NULL) {
    return tutti_error(ncclInternalError, "tutti_topo_pci_path: no bus id or no room for the path");
  }
  out[0] = '\0';
  /* NVML writes 8-digit domains, sysfs 4. */
  const char* colon = strchr(bus_id, ':');
  while (colon != NULL && colon - bus_id > 4 && *bus_id == '0') {
    bus_id++;
  }
  char id[32];
  const size_t n = strlen(bus_id);
  int ok = n > 0 && n < sizeof id;
  for (size_t i = 0; ok && i <= n; i++) {
    const unsigned char c = (unsigned char)bus_id[i];
    ok = c == '\0' || isxdigit(c) || c == ':' || c == '.';
    id[i] = (char)tolower(c);
  }
  if (!ok) {
    return tutti_error(ncclInvalidArgument,
                       "\"%s\" is not a PCI bus id (one looks like 0000:3b:00.0)", bus_id);
  }
  char link[64], real[PATH_MAX];
  snprintf(link, sizeof link, "/sys/bus/pci/devices/%s", id);
  if (realpath(link, real) == NULL) {
    INFO(TUTTI_INIT | TUTTI_NET, "NET: no %s: network devices are chosen without the GPU's place",
         link);
    return ncclSuccess;
  }
  if (strlen(real) >= len) {
    return tutti_error(ncclInternalError, "the sysfs path of %s is longer than %zu bytes", id,
                       len - 1);
  }
  memcpy(out, real, strlen(real) + 1);
  return ncclSuccess;
}
