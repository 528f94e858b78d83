/* Who this rank is: its host's identity (the host hash) and its own entry
 * of the peer table. */
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "topo/topo.h"
#include "util/cuda.h"
#include "util/hash.h"
#include "util/log.h"
#include "util/param.h"

static void read_first_line(const char* path, char* buf, size_t len) {
  buf[0] = '\0';
  FILE* f = fopen(path, "r");
  if (f == NULL) {
    return;
  }
  if (fgets(buf, (int)len, f) == NULL) {
    buf[0] = '\0';
  }
  buf[strcspn(buf, "\n")] = '\0';
  fclose(f);
}

static TUTTI_PARAM_STR(tutti_hostid, "TUTTI_HOSTID", NULL, "any text",
                       "this process's host identity, before NCCL_HOSTID: ranks with different "
                       "ones talk over the network");
static TUTTI_PARAM_STR(nccl_hostid, "NCCL_HOSTID", NULL, "any text",
                       "this process's host identity when TUTTI_HOSTID is unset (unset: host "
                       "name, boot id and network namespace)");

uint64_t tutti_topo_host_hash(void) {
  /* A host identity given by the user, as NCCL's NCCL_HOSTID: ranks with
   * different ones are on different hosts (and talk over the network) even
   * where they share a machine, or a GPU. */
  const char* forced = tutti_param_tutti_hostid();
  if (forced == NULL || *forced == '\0') {
    forced = tutti_param_nccl_hostid();
  }
  if (forced != NULL && *forced != '\0') {
    return tutti_hash(forced, strlen(forced), TUTTI_HASH_INIT);
  }
  char host[256], boot[128], netns[128];
  if (gethostname(host, sizeof host) != 0) {
    host[0] = '\0';
  }
  host[sizeof host - 1] = '\0';
  read_first_line("/proc/sys/kernel/random/boot_id", boot, sizeof boot);
  ssize_t n = readlink("/proc/self/ns/net", netns, sizeof netns - 1);
  netns[n > 0 ? n : 0] = '\0';
  uint64_t h = tutti_hash(host, strlen(host), TUTTI_HASH_INIT);
  h = tutti_hash(boot, strlen(boot), h);
  return tutti_hash(netns, strlen(netns), h);
}

void tutti_topo_fill_self(struct tutti_peer_info* info, int rank, int cuda_dev) {
  memset(info, 0, sizeof *info);
  info->rank = rank;
  info->cuda_dev = cuda_dev;
  info->pid = (int32_t)getpid();
  info->host_hash = tutti_topo_host_hash();
  tutti_cuda_device_uuid(cuda_dev, info->gpu_uuid);
  snprintf(info->hostname, sizeof info->hostname, "%s", tutti_hostname());
}
