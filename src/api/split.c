/* ncclCommSplit: new communicators from an existing one. The parent's
 * bootstrap ring carries the colors and keys, then the new job's unique id
 * from each color's first rank. (ncclCommShrink: api/shrink.c.) */
#include <stdlib.h>
#include <string.h>

#include "api/api.h"
#include "api/comm.h"
#include "api/group.h"
#include "bootstrap/bootstrap.h"
#include "util/check.h"

struct split_entry {
  int color;
  int key;
  int rank;
  int pad;
};

struct split_job {
  struct ncclComm* parent;
  int color;
  int key;
  struct tutti_child child;
};

static ncclResult_t split_run(void* arg) {
  struct split_job* j = arg;
  struct ncclComm* p = j->parent;
  const int n = p->nranks;
  ncclResult_t res = ncclSuccess;
  struct split_entry* e = calloc((size_t)n, sizeof *e);
  ncclUniqueId* ids = calloc((size_t)n, sizeof *ids);
  if (e == NULL || ids == NULL) {
    res = tutti_error(ncclSystemError, "ncclCommSplit: out of host memory");
    goto out;
  }
  e[p->rank] = (struct split_entry){j->color, j->key, p->rank, 0};
  NCCLCHECKGOTO(tutti_bootstrap_allgather(p->boot, e, sizeof *e), res, out);
  /* New rank: position among the same color, ordered by (key, parent rank). */
  int newrank = 0, nnew = 0, leader = -1;
  for (int r = 0; r < n; r++) {
    if (e[r].color != j->color) {
      continue;
    }
    nnew++;
    if (e[r].key < j->key || (e[r].key == j->key && r < p->rank)) {
      newrank++;
    }
    if (leader < 0 || e[r].key < e[leader].key) {
      leader = r;
    }
  }
  if (j->color != NCCL_SPLIT_NOCOLOR && newrank == 0) {
    NCCLCHECKGOTO(tutti_bootstrap_new_root(&ids[p->rank]), res, out);
  }
  NCCLCHECKGOTO(tutti_bootstrap_allgather(p->boot, ids, sizeof *ids), res, out);
  if (j->color == NCCL_SPLIT_NOCOLOR) {
    *j->child.out = NULL;
    goto out;
  }
  struct ncclComm* c;
  res = tutti_child_init(&j->child, p, nnew, &ids[leader], newrank, &c);
  if (res != ncclSuccess) {
    goto out;
  }
  INFO(TUTTI_INIT, "comm %p split from comm %p: color %d key %d -> rank %d of %d", (void*)c,
       (void*)p, j->color, j->key, newrank, nnew);
out:
  free(e);
  free(ids);
  free(j);
  return res;
}

NCCL_API ncclResult_t ncclCommSplit(ncclComm_t comm, int color, int key, ncclComm_t* newcomm,
                                    ncclConfig_t* config) {
  NCCLCHECK(tutti_comm_check(comm, "ncclCommSplit"));
  if (newcomm == NULL) {
    return tutti_group_fail(tutti_error(ncclInvalidArgument, "ncclCommSplit: newcomm is NULL"));
  }
  if (color < 0 && color != NCCL_SPLIT_NOCOLOR) {
    return tutti_group_fail(tutti_error(
        ncclInvalidArgument,
        "ncclCommSplit: color %d is negative: use a color >= 0, or NCCL_SPLIT_NOCOLOR", color));
  }
  *newcomm = NULL;
  struct split_job* j = calloc(1, sizeof *j);
  if (j == NULL) {
    return tutti_error(ncclSystemError, "ncclCommSplit: out of host memory");
  }
  j->parent = comm;
  j->color = color;
  j->key = key;
  ncclResult_t res = tutti_child_prepare(&j->child, newcomm, config);
  j->child.made = "split";
  if (res != ncclSuccess) {
    free(j);
    return tutti_group_fail(res);
  }
  return tutti_group_add_job(comm, split_run, j);
}
