/* Windows: registration (collective: every rank learns every rank's part),
 * deregistration (local and immediate), lookup. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "bootstrap/bootstrap.h"
#include "rma/internal.h"
#include "util/check.h"
#include "util/cuda.h"

static const char* kind_name(uint32_t kind) {
  switch (kind) {
    case TUTTI_MEM_DEVICE:
      return "device";
    case TUTTI_MEM_MANAGED:
      return "managed";
    case TUTTI_MEM_PINNED:
      return "pinned host";
    default:
      return "host";
  }
}

/* Fills this rank's part; a failure is kept in its status (and the error
 * text), since the all-gather must still run for the peers' sake. */
static void fill_mine(struct tutti_rma* r, struct tutti_rma_peer_win* me, void* buff, size_t size,
                      uint32_t id) {
  me->addr = (uint64_t)(uintptr_t)buff;
  me->size = size;
  me->kind = (uint32_t)tutti_cuda_mem_kind(buff);
  me->pid = (int32_t)getpid();
  me->win_id = id;
  me->status = ncclSuccess;
  if (me->kind != TUTTI_MEM_DEVICE) {
    /* Peers of this host may still raise this rank's signals directly. */
    if (r->s.dev != NULL &&
        tutti_dev_rma_win_export(r->s.dev, buff, size, 0, me->dev) != ncclSuccess) {
      memset(me->dev, 0, sizeof me->dev);
    }
    return;
  }
  if (r->s.dev == NULL) {
    me->status = tutti_error(ncclInvalidUsage,
                             "ncclCommWindowRegister on rank %d: the buffer %p is device memory "
                             "but this communicator has no device executor (see its INIT log): "
                             "register host memory instead",
                             r->s.rank, buff);
    return;
  }
  me->status = tutti_dev_rma_win_export(r->s.dev, buff, size, 1, me->dev);
}

/* Every rank must have registered the same window without failing. */
static ncclResult_t check_all(struct tutti_rma* r, const struct tutti_rma_peer_win* peers,
                              uint32_t id) {
  const int me = r->s.rank;
  for (int p = 0; p < r->s.nranks; p++) {
    if (peers[p].win_id != id) {
      return tutti_error(ncclInvalidUsage,
                         "ncclCommWindowRegister: rank %d registers its window #%u while rank %d "
                         "registers #%u: every rank must register the same windows in the same "
                         "order",
                         me, id, p, peers[p].win_id);
    }
  }
  if (peers[me].status != ncclSuccess) {
    return (ncclResult_t)peers[me].status; /* its sentence is this thread's last error */
  }
  for (int p = 0; p < r->s.nranks; p++) {
    if (peers[p].status != ncclSuccess) {
      return tutti_error((ncclResult_t)peers[p].status,
                         "ncclCommWindowRegister on rank %d: rank %d could not register its part "
                         "of window #%u (%s memory; its log says why), so no rank has the window",
                         me, p, id, kind_name(peers[p].kind));
    }
  }
  return ncclSuccess;
}

/* A window leaves the table (under the lock). */
static void forget_kind(struct tutti_rma* r, const struct tutti_win* w) {
  if (w->kind == TUTTI_MEM_DEVICE) {
    __atomic_sub_fetch(&r->dev_wins, 1, __ATOMIC_RELEASE);
  }
}

static ncclResult_t add(struct tutti_rma* r, struct tutti_win* w) {
  pthread_mutex_lock(&r->win_lock);
  if (r->nwins == r->cap_wins) {
    int cap = r->cap_wins ? 2 * r->cap_wins : 8;
    struct tutti_win** n = realloc(r->wins, (size_t)cap * sizeof *n);
    if (n == NULL) {
      pthread_mutex_unlock(&r->win_lock);
      return tutti_error(ncclSystemError, "ncclCommWindowRegister: out of host memory");
    }
    r->wins = n;
    r->cap_wins = cap;
  }
  r->wins[r->nwins++] = w;
  if (w->kind == TUTTI_MEM_DEVICE) {
    __atomic_add_fetch(&r->dev_wins, 1, __ATOMIC_RELEASE);
  }
  pthread_mutex_unlock(&r->win_lock);
  return ncclSuccess;
}

static void win_free(struct tutti_rma* r, struct tutti_win* w) {
  if (w->dev != NULL) {
    tutti_dev_rma_win_deregister(r->s.dev, w->dev);
  }
  w->magic = 0;
  free(w->peers);
  free(w);
}

/* Takes `w` out of the table again (a registration that failed). */
static void drop(struct tutti_rma* r, struct tutti_win* w) {
  pthread_mutex_lock(&r->win_lock);
  for (int i = 0; i < r->nwins; i++) {
    if (r->wins[i] == w) {
      r->wins[i] = r->wins[--r->nwins];
      forget_kind(r, w);
      break;
    }
  }
  pthread_mutex_unlock(&r->win_lock);
}

ncclResult_t tutti_rma_win_register(struct tutti_rma* r, void* buff, size_t size, int flags,
                                    struct tutti_win** out) {
  const int n = r->s.nranks;
  *out = NULL;
  /* Numbered before anything can fail, so that ranks stay in step. */
  const uint32_t id = ++r->next_win_id;
  struct tutti_win* w = calloc(1, sizeof *w);
  struct tutti_rma_peer_win* peers = calloc((size_t)n, sizeof *peers);
  if (w == NULL || peers == NULL) {
    free(w);
    free(peers);
    /* Without memory for the peers' parts this rank cannot take part: the
     * all-gather fails them by its timeout. */
    return tutti_error(ncclSystemError, "ncclCommWindowRegister: out of host memory for %d ranks",
                       n);
  }
  struct tutti_rma_peer_win* me = &peers[r->s.rank];
  fill_mine(r, me, buff, size, id);
  *w = (struct tutti_win){TUTTI_WIN_MAGIC, r, id, flags, buff, size, me->kind, peers, NULL};
  /* In the table before this rank's part leaves: a peer may put into it as
   * soon as its all-gather ends, and the service thread must find it. */
  ncclResult_t res = me->status == ncclSuccess ? add(r, w) : ncclSuccess;
  const int added = res == ncclSuccess && me->status == ncclSuccess;
  if (res != ncclSuccess) {
    me->status = res;
  }
  res = tutti_bootstrap_allgather(r->s.boot, peers, sizeof *peers);
  if (res == ncclSuccess) {
    res = check_all(r, peers, id);
  }
  int any_dev = 0;
  for (int p = 0; p < n && res == ncclSuccess; p++) {
    any_dev |= peers[p].kind == TUTTI_MEM_DEVICE;
  }
  if (res == ncclSuccess && any_dev && r->s.dev == NULL) {
    res = tutti_error(ncclInvalidUsage,
                      "ncclCommWindowRegister on rank %d: a peer's part of window #%u is device "
                      "memory but this rank has no device executor",
                      r->s.rank, id);
  } else if (res == ncclSuccess && any_dev) {
    /* Collective among the ranks with device communicators (all of them);
     * then a barrier, so that no put reaches a rank still mapping. */
    struct tutti_rma_dev_win* dw = NULL;
    res = tutti_dev_rma_win_register(r->s.dev, id, buff, size, peers, n, &dw);
    pthread_mutex_lock(&r->win_lock);
    w->dev = dw;
    pthread_mutex_unlock(&r->win_lock);
    ncclResult_t bres = tutti_bootstrap_barrier(r->s.boot);
    res = res != ncclSuccess ? res : bres;
  }
  if (res != ncclSuccess) {
    if (added) {
      drop(r, w);
    }
    win_free(r, w);
    return res;
  }
  INFO(TUTTI_INIT, "rank %d registered window #%u: %zu bytes of %s memory at %p", r->s.rank, id,
       size, kind_name(me->kind), buff);
  *out = w;
  return ncclSuccess;
}

struct tutti_win* tutti_rma_win_find(struct tutti_rma* r, const void* w) {
  struct tutti_win* found = NULL;
  if (r == NULL || w == NULL) {
    return NULL;
  }
  pthread_mutex_lock(&r->win_lock);
  for (int i = 0; i < r->nwins && found == NULL; i++) {
    found = (const void*)r->wins[i] == w ? r->wins[i] : NULL;
  }
  pthread_mutex_unlock(&r->win_lock);
  return found;
}

struct tutti_win* tutti_rma_win_by_id(struct tutti_rma* r, uint32_t id) {
  for (int i = 0; i < r->nwins; i++) {
    if (r->wins[i]->id == id) {
      return r->wins[i];
    }
  }
  return NULL;
}

ncclResult_t tutti_rma_win_deregister(struct tutti_rma* r, struct tutti_win* w) {
  int found = 0;
  /* Under the lock: a copy of the service thread into it finishes first. */
  pthread_mutex_lock(&r->win_lock);
  for (int i = 0; i < r->nwins && !found; i++) {
    if (r->wins[i] == w) {
      r->wins[i] = r->wins[--r->nwins];
      forget_kind(r, w);
      found = 1;
    }
  }
  pthread_mutex_unlock(&r->win_lock);
  if (!found) {
    return tutti_error(ncclInvalidArgument,
                       "ncclCommWindowDeregister: window %p is not registered on this "
                       "communicator (deregistered already, or another communicator's)",
                       (void*)w);
  }
  INFO(TUTTI_INIT, "rank %d deregistered window #%u", r->s.rank, w->id);
  win_free(r, w);
  return ncclSuccess;
}

void tutti_rma_win_free_all(struct tutti_rma* r) {
  pthread_mutex_lock(&r->win_lock);
  for (int i = 0; i < r->nwins; i++) {
    win_free(r, r->wins[i]);
  }
  free(r->wins);
  r->wins = NULL;
  r->nwins = r->cap_wins = 0;
  pthread_mutex_unlock(&r->win_lock);
}
