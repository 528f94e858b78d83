/* Windows: ncclCommWindowRegister (collective, group-deferred as a split),
 * ncclCommWindowDeregister (local), ncclWinGetUserPtr; and, at the first
 * registration, the communicator's service communicator and one-sided
 * state (src/rma/). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api/api.h"
#include "api/comm.h"
#include "api/group.h"
#include "api/register.h"
#include "bootstrap/bootstrap.h"
#include "util/check.h"

/* Makes the service communicator, as ncclCommSplit with one color would
 * (rank 0 starts a fresh root, its id travels over the parent's ring), and
 * the one-sided state over it. Collective over the parent's ranks. */
static ncclResult_t rma_start(struct ncclComm* p) {
  const int n = p->nranks;
  ncclResult_t res = ncclSuccess;
  ncclUniqueId* ids = calloc((size_t)n, sizeof *ids);
  if (ids == NULL) {
    return tutti_error(ncclSystemError, "ncclCommWindowRegister: out of host memory");
  }
  if (p->rank == 0) {
    res = tutti_bootstrap_new_root(&ids[0]);
  }
  /* Every rank takes part, even one whose root failed: the others learn it
   * from the id (all zero), instead of waiting for it. */
  ncclResult_t gres = tutti_bootstrap_allgather(p->boot, ids, sizeof *ids);
  res = res != ncclSuccess ? res : gres;
  const ncclUniqueId zero = {{0}};
  if (res == ncclSuccess && memcmp(&ids[0], &zero, sizeof zero) == 0) {
    res = tutti_error(ncclSystemError,
                      "ncclCommWindowRegister: rank 0 could not start the one-sided service "
                      "communicator's bootstrap (its log says why)");
  }
  struct ncclComm* s = res == ncclSuccess ? tutti_comm_alloc(&p->config, &res) : NULL;
  if (s == NULL) {
    free(ids);
    return res;
  }
  tutti_comm_unregister(s); /* no user handle */
  s->internal = 1;
  s->blocking = 1;
  s->cuda_dev = p->cuda_dev;
  /* Logs name it after its parent (the name cut to fit). */
  snprintf(s->name, sizeof s->name, "%.100s%sone-sided service", p->name, p->name[0] ? " " : "");
  res = tutti_comm_init(s, n, &ids[0], p->rank);
  free(ids);
  if (res != ncclSuccess) {
    tutti_comm_free(s);
    return res;
  }
  struct tutti_rma_setup setup = {
      .rank = p->rank,
      .nranks = n,
      .num_ctx = p->num_rma_ctx,
      .send = s->tc.send,
      .recv = s->tc.recv,
      .bell = s->tc.bell,
      .peer_bells = s->tc.peer_bells,
      .peers = s->peers,
      .boot = s->boot,
      .abort_flag = &p->abort_flag,
      .dev = p->dev,
      .timeout_s = tutti_timeout_s(),
      .spin = s->er.spin_passes,
      .spin_max = s->er.spin_max,
      .yield = s->er.yield_passes,
  };
  res = tutti_rma_create(&setup, &p->rma);
  if (res != ncclSuccess) {
    tutti_comm_free(s);
    return res;
  }
  p->rma_svc = s;
  return ncclSuccess;
}

struct win_job {
  struct ncclComm* comm;
  void* buff;
  size_t size;
  int flags;
  ncclWindow_t* out;
};

static ncclResult_t win_register_run(void* arg) {
  struct win_job* j = arg;
  struct ncclComm* comm = j->comm;
  ncclResult_t res = ncclSuccess;
  if (comm->rma == NULL) {
    res = rma_start(comm);
  }
  struct tutti_win* w = NULL;
  if (res == ncclSuccess) {
    res = tutti_rma_win_register(comm->rma, j->buff, j->size, j->flags, &w);
  }
  if (res == ncclSuccess && w != NULL) {
    tutti_reg_window(comm, w, j->buff, j->size);
  }
  *j->out = (ncclWindow_t)(void*)w;
  free(j);
  return res;
}

NCCL_API ncclResult_t ncclCommWindowRegister(ncclComm_t comm, void* buff, size_t size,
                                             ncclWindow_t* win, int winFlags) {
  NCCLCHECK(tutti_comm_check_active(comm, "ncclCommWindowRegister"));
  if (win == NULL) {
    return tutti_group_fail(
        tutti_error(ncclInvalidArgument, "ncclCommWindowRegister: win is NULL"));
  }
  *win = NULL;
  if (buff == NULL || size == 0) {
    return tutti_group_fail(tutti_error(ncclInvalidArgument,
                                        "ncclCommWindowRegister: %s: register a buffer of at "
                                        "least one byte",
                                        buff == NULL ? "buff is NULL" : "size is 0"));
  }
  /* NCCL 2.32's GIN_ONLY and CFT_COUNTED narrow what the window is
   * registered for: tutti registers it for its one-sided service alone
   * either way, and has no CFT endpoints. */
  const int known =
      NCCL_WIN_COLL_SYMMETRIC | NCCL_WIN_STRICT_ORDERING | NCCL_WIN_GIN_ONLY | NCCL_WIN_CFT_COUNTED;
  if ((winFlags & ~known) != 0) {
    return tutti_group_fail(tutti_error(ncclInvalidArgument,
                                        "ncclCommWindowRegister: winFlags 0x%x holds bits other "
                                        "than NCCL_WIN_COLL_SYMMETRIC, NCCL_WIN_STRICT_ORDERING, "
                                        "NCCL_WIN_GIN_ONLY and NCCL_WIN_CFT_COUNTED",
                                        (unsigned)winFlags));
  }
  struct win_job* j = calloc(1, sizeof *j);
  if (j == NULL) {
    return tutti_group_fail(
        tutti_error(ncclSystemError, "ncclCommWindowRegister: out of host memory"));
  }
  *j = (struct win_job){comm, buff, size, winFlags, win};
  return tutti_group_add_job(comm, win_register_run, j);
}

NCCL_API ncclResult_t ncclCommWindowDeregister(ncclComm_t comm, ncclWindow_t win) {
  NCCLCHECK(tutti_comm_check(comm, "ncclCommWindowDeregister"));
  if (win == NULL) {
    return ncclSuccess; /* as NCCL: nothing to do */
  }
  struct tutti_win* w = tutti_rma_win_find(comm->rma, win);
  if (w == NULL) {
    return tutti_error(ncclInvalidArgument,
                       "ncclCommWindowDeregister: window %p is not registered on this "
                       "communicator (deregistered already, or another communicator's)",
                       (void*)win);
  }
  tutti_reg_window_release(comm, w);
  return tutti_rma_win_deregister(comm->rma, w);
}

NCCL_API ncclResult_t ncclWinGetUserPtr(ncclComm_t comm, ncclWindow_t win, void** outUserPtr) {
  NCCLCHECK(tutti_comm_check_handle(comm, "ncclWinGetUserPtr"));
  if (outUserPtr == NULL) {
    return tutti_error(ncclInvalidArgument, "ncclWinGetUserPtr: outUserPtr is NULL");
  }
  *outUserPtr = NULL;
  if (win == NULL) {
    return tutti_error(ncclInvalidArgument, "ncclWinGetUserPtr: win is NULL");
  }
  struct tutti_win* w = tutti_rma_win_find(comm->rma, win);
  if (w == NULL) {
    return tutti_error(ncclInvalidArgument,
                       "ncclWinGetUserPtr: window %p is not registered on this communicator "
                       "(deregistered, or another communicator's)",
                       (void*)win);
  }
  *outUserPtr = w->buff;
  return ncclSuccess;
}
