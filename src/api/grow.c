/* ncclCommGetUniqueId and ncclCommGrow: a communicator of more ranks made
 * from an existing one. The grown communicator is a fresh one of nRanks
 * joined through one unique id, whose root runs in the process of the rank
 * that called ncclCommGetUniqueId: existing ranks learn the id over the
 * parent's bootstrap ring and keep their ranks, new ranks get it out of band
 * and take the ranks above. Nothing is shared with the parent. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api/api.h"
#include "api/comm.h"
#include "api/group.h"
#include "bootstrap/bootstrap.h"
#include "util/check.h"
#include "util/param.h"

/* What each existing rank puts into the parent's all-gather. */
struct grow_offer {
  int32_t nranks; /* the size it asked for */
  int32_t has_id; /* it called ncclCommGetUniqueId: `id` is the grow's */
  ncclUniqueId id;
};

/* One rank's grow (flat: a failed group frees it with free()). */
struct grow_job {
  struct ncclComm* parent; /* NULL on a new rank */
  struct ncclComm* child;
  int nranks;
  int rank;   /* in the grown communicator */
  int has_id; /* a new rank's id, or this existing rank's ncclCommGetUniqueId */
  ncclUniqueId id;
};

/* NCCL's readiness rule for a parent: still initializing is an invalid
 * argument, a stored failure is returned as it is. A revoked (or shrunk
 * with NCCL_SHRINK_ABORT) parent may still grow: its stored failure is why
 * it was revoked. `grow_to` > 0: the size asked for, checked before the
 * stored failure, as NCCL does (and after the init, which sets the size). */
static ncclResult_t parent_ready(struct ncclComm* comm, const char* what, int grow_to) {
  NCCLCHECK(tutti_comm_check_handle(comm, what));
  ncclResult_t state = __atomic_load_n(&comm->async_error, __ATOMIC_SEQ_CST);
  if (state == ncclInProgress) {
    return tutti_error(ncclInvalidArgument,
                       "%s: comm %p is still initializing: wait until ncclCommGetAsyncError "
                       "reports ncclSuccess",
                       what, (void*)comm);
  }
  if (grow_to > 0 && grow_to <= comm->nranks) {
    return tutti_error(ncclInvalidArgument,
                       "%s: nRanks %d is not larger than comm %p's %d ranks: a grow adds at "
                       "least one rank",
                       what, grow_to, (void*)comm, comm->nranks);
  }
  if (state != ncclSuccess && !__atomic_load_n(&comm->abort_flag, __ATOMIC_ACQUIRE)) {
    return tutti_error(state,
                       "%s: comm %p has failed (%s): revoke it (ncclCommRevoke) or shrink it "
                       "before growing from it",
                       what, (void*)comm, ncclGetErrorString(state));
  }
  return ncclSuccess;
}

NCCL_API ncclResult_t ncclCommGetUniqueId(ncclComm_t comm, ncclUniqueId* uniqueId) {
  NCCLCHECK(parent_ready(comm, "ncclCommGetUniqueId", 0));
  if (uniqueId == NULL) {
    return tutti_error(ncclInvalidArgument, "ncclCommGetUniqueId: uniqueId is NULL");
  }
  const char* fixed = tutti_getenv("NCCL_COMM_ID");
  if (fixed != NULL && *fixed != '\0') {
    return tutti_error(ncclInvalidUsage,
                       "ncclCommGetUniqueId: NCCL_COMM_ID is set (\"%s\"): a grow's bootstrap "
                       "root runs in this process on an address of its own, which a fixed "
                       "NCCL_COMM_ID address cannot be; unset NCCL_COMM_ID in this process "
                       "before calling ncclCommGetUniqueId",
                       fixed);
  }
  if (comm->grow_id_set) {
    return tutti_error(ncclInvalidUsage,
                       "ncclCommGetUniqueId: comm %p (rank %d) still holds the id of an earlier "
                       "call that no ncclCommGrow took: one id serves exactly one grow; call "
                       "ncclCommGrow with that id first",
                       (void*)comm, comm->rank);
  }
  ncclUniqueId id;
  NCCLCHECK(tutti_bootstrap_new_root(&id));
  comm->grow_id = id;
  comm->grow_id_set = 1;
  *uniqueId = id;
  INFO(TUTTI_INIT, "comm %p rank %d: unique id for the next ncclCommGrow made here", (void*)comm,
       comm->rank);
  return ncclSuccess;
}

/* The id of the grow, from the one existing rank that called
 * ncclCommGetUniqueId; every existing rank reaches the same verdict. */
static ncclResult_t learn_id(const struct grow_job* j, ncclUniqueId* id) {
  struct ncclComm* p = j->parent;
  const int n = p->nranks;
  struct grow_offer* all = calloc((size_t)n, sizeof *all);
  if (all == NULL) {
    return tutti_error(ncclSystemError, "ncclCommGrow: out of host memory");
  }
  all[p->rank].nranks = j->nranks;
  all[p->rank].has_id = j->has_id;
  all[p->rank].id = j->id;
  /* The child's flag: aborting the new communicator stops this, and a
   * revoked parent's own flag is already raised. */
  ncclResult_t res =
      tutti_bootstrap_allgather_watch(p->boot, all, sizeof *all, &j->child->abort_flag);
  int first = -1, second = -1;
  for (int r = 0; r < n && res == ncclSuccess; r++) {
    if (all[r].nranks != j->nranks) {
      res = tutti_error(ncclInvalidUsage,
                        "ncclCommGrow: rank %d of comm %p asked for %d ranks but rank %d for %d: "
                        "every existing rank must pass the same nRanks",
                        p->rank, (void*)p, j->nranks, r, all[r].nranks);
    } else if (all[r].has_id && first < 0) {
      first = r;
    } else if (all[r].has_id && second < 0) {
      second = r;
    }
  }
  if (res == ncclSuccess && first < 0) {
    res = tutti_error(ncclInvalidUsage,
                      "ncclCommGrow: none of the %d ranks of comm %p called ncclCommGetUniqueId "
                      "before ncclCommGrow: call it on exactly one of them and give its id to the "
                      "new ranks",
                      n, (void*)p);
  } else if (res == ncclSuccess && second >= 0) {
    res = tutti_error(ncclInvalidUsage,
                      "ncclCommGrow: ranks %d and %d of comm %p both called ncclCommGetUniqueId "
                      "for this grow: call it on exactly one rank, whose id every new rank gets",
                      first, second, (void*)p);
  }
  if (res == ncclSuccess) {
    *id = all[first].id;
  }
  free(all);
  return res;
}

/* The failure of a rank's init, with what a grow adds to it: a rank
 * number used twice is the likeliest cause the root can name. */
static ncclResult_t joined_not(const struct grow_job* j, ncclResult_t res) {
  char why[768]; /* copied: tutti_error rewrites the buffer it is read from */
  snprintf(why, sizeof why, "%s", tutti_last_error());
  const struct ncclComm* p = j->parent;
  if (p != NULL) {
    return tutti_error(res,
                       "ncclCommGrow: rank %d of comm %p could not join the communicator grown "
                       "from %d to %d ranks: %s (existing ranks keep 0..%d; new ranks take "
                       "%d..%d, one each)",
                       p->rank, (void*)p, p->nranks, j->nranks, why, p->nranks - 1, p->nranks,
                       j->nranks - 1);
  }
  return tutti_error(res,
                     "ncclCommGrow: new rank %d could not join the grown communicator of %d "
                     "ranks: %s (new ranks take the ranks from the parent's size up to %d, one "
                     "each)",
                     j->rank, j->nranks, why, j->nranks - 1);
}

static ncclResult_t grow_run(void* arg) {
  struct grow_job j = *(struct grow_job*)arg;
  free(arg);
  struct ncclComm* c = j.child;
  ncclUniqueId id = j.id;
  ncclResult_t res = j.parent != NULL ? learn_id(&j, &id) : ncclSuccess;
  if (res == ncclSuccess) {
    res = tutti_comm_init(c, j.nranks, &id, j.rank);
    res = res != ncclSuccess && !__atomic_load_n(&c->abort_flag, __ATOMIC_ACQUIRE)
              ? joined_not(&j, res)
              : res;
  }
  if (res != ncclSuccess) {
    tutti_comm_set_error(c, res);
    return res;
  }
  INFO(TUTTI_INIT, "comm %p grown from %s: rank %d of %d", (void*)c,
       j.parent != NULL ? "its parent" : "a new process", c->rank, j.nranks);
  return ncclSuccess;
}

/* Queues `j` as the job that makes `c`. */
static ncclResult_t add_job(struct grow_job* j, struct ncclComm* c, ncclComm_t* newcomm) {
  j->child = c;
  *newcomm = c;
  return tutti_group_add_create(c, newcomm, grow_run, j);
}

/* An existing rank: checks, then the job that learns the id and joins. */
/* The new communicator (with `config`) and the job that fills it. */
static ncclResult_t alloc_job(const ncclConfig_t* config, struct ncclComm** c,
                              struct grow_job** j) {
  ncclResult_t res;
  *c = tutti_comm_alloc(config, &res);
  *j = *c != NULL ? calloc(1, sizeof **j) : NULL;
  if (*j == NULL) {
    if (*c != NULL) {
      tutti_comm_free(*c);
      res = tutti_error(ncclSystemError, "ncclCommGrow: out of host memory");
    }
    return res;
  }
  return ncclSuccess;
}

static ncclResult_t grow_existing(struct ncclComm* comm, int nRanks, int rank, ncclComm_t* newcomm,
                                  ncclConfig_t* config) {
  NCCLCHECK(parent_ready(comm, "ncclCommGrow", nRanks));
  if (rank != -1) {
    return tutti_error(ncclInvalidArgument,
                       "ncclCommGrow: rank is %d on an existing rank (comm %p): pass -1, existing "
                       "ranks keep their rank (%d here)",
                       rank, (void*)comm, comm->rank);
  }
  struct ncclComm* c;
  struct grow_job* j;
  /* No config: the parent's (its blocking mode too). */
  NCCLCHECK(alloc_job(config != NULL ? config : &comm->config, &c, &j));
  c->cuda_dev = comm->cuda_dev;
  c->grown_from = comm->nranks + 1;
  j->parent = comm;
  j->nranks = nRanks;
  j->rank = comm->rank;
  j->has_id = comm->grow_id_set;
  j->id = comm->grow_id;
  comm->grow_id_set = 0; /* taken by this grow, whatever becomes of it */
  return add_job(j, c, newcomm);
}

/* A new rank: an init on the id, checked as one of the grow's. */
static ncclResult_t grow_new(int nRanks, const ncclUniqueId* id, int rank, ncclComm_t* newcomm,
                             ncclConfig_t* config) {
  if (id == NULL) {
    return tutti_error(ncclInvalidArgument,
                       "ncclCommGrow: uniqueId is NULL on a new rank (comm NULL): pass the id "
                       "that ncclCommGetUniqueId gave an existing rank");
  }
  if (rank < 0 || rank >= nRanks) {
    return tutti_error(ncclInvalidArgument,
                       "ncclCommGrow: new rank %d is out of range [0, %d): new ranks take the "
                       "ranks from the parent's size up to nRanks - 1",
                       rank, nRanks);
  }
  NCCLCHECK(tutti_bootstrap_check_id(id));
  struct ncclComm* c;
  struct grow_job* j;
  /* No config: the defaults, as for ncclCommInitRank. */
  NCCLCHECK(alloc_job(config, &c, &j));
  c->grown_from = 1;
  j->nranks = nRanks;
  j->rank = rank;
  j->has_id = 1;
  j->id = *id;
  return add_job(j, c, newcomm);
}

NCCL_API ncclResult_t ncclCommGrow(ncclComm_t comm, int nRanks, const ncclUniqueId* uniqueId,
                                   int rank, ncclComm_t* newcomm, ncclConfig_t* config) {
  tutti_log_init();
  if (newcomm == NULL) {
    return tutti_group_fail(tutti_error(ncclInvalidArgument, "ncclCommGrow: newcomm is NULL"));
  }
  *newcomm = NULL;
  if (nRanks <= 0) {
    return tutti_group_fail(tutti_error(ncclInvalidArgument,
                                        "ncclCommGrow: nRanks is %d: it must be positive", nRanks));
  }
  if (comm != NULL) {
    ncclResult_t res = tutti_comm_check_handle(comm, "ncclCommGrow");
    return tutti_group_fail(
        res != ncclSuccess ? res : grow_existing(comm, nRanks, rank, newcomm, config));
  }
  return tutti_group_fail(grow_new(nRanks, uniqueId, rank, newcomm, config));
}
