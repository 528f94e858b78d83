/* Which devices of a network a rank uses: every device's properties read
 * through the network, the choice made by topology (topo/nics.h). */
#include <stdio.h>
#include <stdlib.h>

#include "net/net.h"
#include "util/check.h"

ncclResult_t tutti_net_choose(struct tutti_net* net, const char* gpu_pci_path, int local_rank,
                              int* devs, int max, int* ndevs, char (*names)[64]) {
  int ndev = 0;
  NCCLCHECK(net->ops->devices(net, &ndev));
  struct tutti_net_props* props =
      (struct tutti_net_props*)calloc((size_t)(ndev > 0 ? ndev : 1), sizeof *props);
  if (props == NULL) {
    return tutti_error(ncclSystemError, "out of host memory");
  }
  ncclResult_t res = ncclSuccess;
  for (int d = 0; d < ndev && res == ncclSuccess; d++) {
    res = net->ops->props(net, d, &props[d]);
  }
  if (res == ncclSuccess) {
    res = tutti_topo_pick_nics(props, ndev, gpu_pci_path, local_rank, devs, max, ndevs);
  }
  for (int i = 0; res == ncclSuccess && names != NULL && i < *ndevs; i++) {
    snprintf(names[i], sizeof names[i], "%s", props[devs[i]].name);
  }
  free(props);
  return res;
}
