/* ncclCommShrink: a communicator of the ranks that remain once some are
 * excluded, typically after they failed. The parent's bootstrap ring may be
 * broken (a dead rank is part of it), so the survivors exchange nothing
 * through it: each derives the same unique id on its own, from what every
 * rank already knows: the parent's secret, how many shrinks of this parent
 * came before, the excluded set, and the address of the lowest surviving
 * rank, whose init then starts the new root (as with NCCL_COMM_ID) on a port
 * derived from the same values. */
#include <stdlib.h>
#include <string.h>

#include "api/api.h"
#include "api/comm.h"
#include "api/group.h"
#include "bootstrap/bootstrap.h"
#include "util/check.h"
#include "util/hash.h"
#include "topo/ifaces.h"
#include "util/socket.h"

/* The new root's port: in [20000, 32768), below Linux's default ephemeral
 * range (32768-60999), where connect()'s own ends and their TIME_WAIT never
 * land: a host that made thousands of connections in the last minute would
 * otherwise refuse the bind. */
#define SHRINK_PORT_BASE 20000
#define SHRINK_PORT_SPAN 12768

struct shrink_job {
  struct ncclComm* parent;
  unsigned char* excluded; /* [parent nranks] */
  uint64_t seq;            /* this parent's shrinks before this one */
  struct tutti_child child;
};

static ncclResult_t shrink_run(void* arg) {
  struct shrink_job* j = arg;
  struct ncclComm* p = j->parent;
  const int n = p->nranks;
  int nnew = 0, newrank = 0, leader = -1;
  for (int r = 0; r < n; r++) {
    if (!j->excluded[r]) {
      leader = leader < 0 ? r : leader;
      newrank += r < p->rank;
      nnew++;
    }
  }
  /* Secret and port: the same on every survivor, unknown to anyone outside. */
  uint64_t h = tutti_hash(p->secret, sizeof p->secret, TUTTI_HASH_INIT);
  h = tutti_hash(&p->comm_hash, sizeof p->comm_hash, h);
  h = tutti_hash(&j->seq, sizeof j->seq, h);
  h = tutti_hash(j->excluded, (size_t)n, h);
  uint64_t h2 = tutti_hash("shrink", 6, h);
  unsigned char secret[16];
  memcpy(secret, &h, 8);
  memcpy(secret + 8, &h2, 8);
  ncclResult_t res = ncclSuccess;
  union tutti_socket_addr root;
  const char* where = tutti_bootstrap_address(p->boot, leader);
  res = tutti_socket_parse(where, tutti_iface_family(), &root);
  if (res != ncclSuccess) {
    res = tutti_error(res, "ncclCommShrink: rank %d's address \"%s\" is not usable", leader, where);
    goto out;
  }
  tutti_socket_set_port(&root, SHRINK_PORT_BASE + (int)(h2 % SHRINK_PORT_SPAN));
  ncclUniqueId id;
  tutti_bootstrap_rank0_id(&root, secret, &id);
  struct ncclComm* c;
  res = tutti_child_init(&j->child, p, nnew, &id, newrank, &c);
  if (res != ncclSuccess) {
    goto out;
  }
  INFO(TUTTI_INIT, "comm %p shrunk from comm %p: %d of %d ranks remain, rank %d -> %d", (void*)c,
       (void*)p, nnew, n, p->rank, newrank);
out:
  free(j->excluded);
  free(j);
  return res;
}

NCCL_API ncclResult_t ncclCommShrink(ncclComm_t comm, int* excludeRanksList, int excludeRanksCount,
                                     ncclComm_t* newcomm, ncclConfig_t* config, int shrinkFlags) {
  NCCLCHECK(tutti_comm_check_handle(comm, "ncclCommShrink"));
  if (newcomm == NULL || excludeRanksCount < 0 ||
      (excludeRanksCount > 0 && excludeRanksList == NULL)) {
    return tutti_group_fail(tutti_error(
        ncclInvalidArgument, "ncclCommShrink: newcomm is NULL or the excluded list is invalid"));
  }
  if (shrinkFlags != NCCL_SHRINK_DEFAULT && shrinkFlags != NCCL_SHRINK_ABORT) {
    return tutti_group_fail(tutti_error(
        ncclInvalidArgument,
        "ncclCommShrink: shrinkFlags %d is neither NCCL_SHRINK_DEFAULT nor NCCL_SHRINK_ABORT",
        shrinkFlags));
  }
  *newcomm = NULL;
  if (__atomic_load_n(&comm->async_error, __ATOMIC_SEQ_CST) == ncclInProgress) {
    return tutti_group_fail(tutti_error(
        ncclInvalidUsage, "ncclCommShrink: comm %p is still initializing", (void*)comm));
  }
  struct shrink_job* j = calloc(1, sizeof *j);
  unsigned char* ex = calloc((size_t)comm->nranks, 1);
  if (j == NULL || ex == NULL) {
    free(j);
    free(ex);
    return tutti_group_fail(tutti_error(ncclSystemError, "ncclCommShrink: out of host memory"));
  }
  for (int i = 0; i < excludeRanksCount; i++) {
    int r = excludeRanksList[i];
    if (r < 0 || r >= comm->nranks || r == comm->rank) {
      free(j);
      free(ex);
      return tutti_group_fail(tutti_error(
          ncclInvalidArgument,
          "ncclCommShrink: excluded rank %d is %s: list ranks of [0, %d) other than the caller "
          "(rank %d)",
          r, r == comm->rank ? "the calling rank itself" : "out of range", comm->nranks,
          comm->rank));
    }
    ex[r] = 1;
  }
  if (shrinkFlags == NCCL_SHRINK_ABORT) {
    /* What the parent still runs ends now (with an error); the parent stays
     * to be destroyed by the caller. */
    __atomic_store_n(&comm->abort_flag, 1, __ATOMIC_SEQ_CST);
    tutti_dev_comm_abort(comm->dev);
    tutti_group_wait_idle(comm);
  }
  j->parent = comm;
  j->excluded = ex;
  j->seq = comm->shrinks++;
  ncclResult_t res = tutti_child_prepare(&j->child, newcomm, config);
  j->child.made = "shrink";
  if (res != ncclSuccess) {
    free(ex);
    free(j);
    return tutti_group_fail(res);
  }
  return tutti_group_add_job(comm, shrink_run, j);
}
