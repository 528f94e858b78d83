/* The NCCL entry points that create communicators: ncclCommInitRank,
 * ncclCommInitRankConfig, ncclCommInitRankScalable, ncclCommInitAll. They
 * check their arguments and hand the work to the group (group.c), which
 * runs tutti_comm_init (init.c) at once or at ncclGroupEnd. */
#include <stddef.h>

#include "api/api.h"
#include "api/comm.h"
#include "api/group.h"
#include "bootstrap/bootstrap.h"
#include "util/check.h"
#include "util/log.h"

static ncclResult_t check_init_args(ncclComm_t* out, int nranks, const ncclUniqueId* id, int rank) {
  if (out == NULL) {
    return tutti_error(ncclInvalidArgument, "ncclCommInitRank: comm (the output) is NULL");
  }
  *out = NULL;
  if (nranks < 1) {
    return tutti_error(ncclInvalidArgument, "ncclCommInitRank: nranks is %d, it must be >= 1",
                       nranks);
  }
  if (rank < 0 || rank >= nranks) {
    return tutti_error(ncclInvalidArgument, "ncclCommInitRank: rank %d is out of range [0, %d)",
                       rank, nranks);
  }
  return tutti_bootstrap_check_id(id);
}

ncclResult_t tutti_child_prepare(struct tutti_child* ch, ncclComm_t* out,
                                 const ncclConfig_t* config) {
  ch->out = out;
  ch->has_config = config != NULL;
  /* Only the caller's `size` bytes are its struct (an older header's is smaller). */
  return config != NULL ? tutti_config_read(config, &ch->config) : ncclSuccess;
}

ncclResult_t tutti_child_init(const struct tutti_child* ch, const struct ncclComm* parent,
                              int nranks, const ncclUniqueId* id, int rank,
                              struct ncclComm** made) {
  ncclResult_t res = ncclSuccess;
  struct ncclComm* c = tutti_comm_alloc(ch->has_config ? &ch->config : &parent->config, &res);
  if (c == NULL) {
    return res;
  }
  if (!ch->has_config) {
    c->blocking = parent->blocking;
  }
  c->cuda_dev = parent->cuda_dev;
  c->made = ch->made;
  res = tutti_comm_init(c, nranks, id, rank);
  if (res != ncclSuccess) {
    tutti_comm_free(c);
    return res;
  }
  *ch->out = c;
  *made = c;
  return ncclSuccess;
}

NCCL_API ncclResult_t ncclCommInitRankConfig(ncclComm_t* newcomm, int nranks, ncclUniqueId commId,
                                             int rank, ncclConfig_t* config) {
  tutti_log_init();
  NCCLCHECK(check_init_args(newcomm, nranks, &commId, rank));
  ncclResult_t res;
  struct ncclComm* comm = tutti_comm_alloc(config, &res);
  if (comm == NULL) {
    return res;
  }
  *newcomm = comm;
  return tutti_group_add_init(comm, newcomm, nranks, &commId, rank);
}

NCCL_API ncclResult_t ncclCommInitRank(ncclComm_t* newcomm, int nranks, ncclUniqueId commId,
                                       int rank) {
  return ncclCommInitRankConfig(newcomm, nranks, commId, rank, NULL);
}

NCCL_API ncclResult_t ncclCommInitRankScalable(ncclComm_t* newcomm, int nranks, int myrank, int nId,
                                               ncclUniqueId* commIds, ncclConfig_t* config) {
  if (nId < 1 || commIds == NULL) {
    return tutti_error(ncclInvalidArgument,
                       "ncclCommInitRankScalable: nId is %d and commIds %p: give at least one id",
                       nId, (void*)commIds);
  }
  /* Every id reaches the same job; tutti's root scales to the ranks it
   * serves, so the first id is enough (all ranks pass the same list). */
  return ncclCommInitRankConfig(newcomm, nranks, commIds[0], myrank, config);
}

NCCL_API ncclResult_t ncclCommInitAll(ncclComm_t* comms, int ndev, const int* devlist) {
  tutti_log_init();
  if (comms == NULL) {
    return tutti_error(ncclInvalidArgument, "ncclCommInitAll: comms is NULL");
  }
  if (ndev < 1) {
    return tutti_error(ncclInvalidArgument, "ncclCommInitAll: ndev is %d, it must be >= 1", ndev);
  }
  if (devlist != NULL) {
    for (int i = 0; i < ndev; i++) {
      for (int j = 0; j < i; j++) {
        if (devlist[i] == devlist[j]) {
          return tutti_error(ncclInvalidUsage, "ncclCommInitAll: device %d is listed twice",
                             devlist[i]);
        }
      }
    }
  }
  ncclUniqueId id;
  NCCLCHECK(tutti_bootstrap_new_root(&id));
  NCCLCHECK(ncclGroupStart());
  ncclResult_t res = ncclSuccess;
  for (int i = 0; i < ndev && res == ncclSuccess; i++) {
    res = ncclCommInitRank(&comms[i], ndev, id, i);
    if (res == ncclSuccess) {
      comms[i]->cuda_dev = devlist ? devlist[i] : i;
    }
  }
  ncclResult_t gres = ncclGroupEnd();
  return res != ncclSuccess ? res : gres;
}
