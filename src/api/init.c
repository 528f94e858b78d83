/* Communicator creation: ncclGetUniqueId and the init body that
 * ncclCommInitRank[Config|Scalable|All] (comm_init.c), ncclCommSplit and
 * groups run. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api/api.h"
#include "api/comm.h"
#include "api/register.h"
#include "bootstrap/bootstrap.h"
#include "ras/ras.h"
#include "tune/tune.h"
#include "transport/cma.h"
#include "util/param.h"
#include "topo/topo.h"
#include "util/check.h"
#include "util/cuda.h"
#include "util/hash.h"
#include "util/param.h"

NCCL_API ncclResult_t ncclGetVersion(int* version) {
  if (version == NULL) {
    return tutti_error(ncclInvalidArgument, "ncclGetVersion: version is NULL");
  }
  tutti_log_init();
  *version = NCCL_VERSION_CODE;
  return ncclSuccess;
}

NCCL_API ncclResult_t ncclGetUniqueId(ncclUniqueId* uniqueId) {
  if (uniqueId == NULL) {
    return tutti_error(ncclInvalidArgument, "ncclGetUniqueId: uniqueId is NULL");
  }
  tutti_log_init();
  return tutti_bootstrap_get_unique_id(uniqueId);
}

/* The transports a communicator tries, in order of preference: shared
 * memory within a host, a network plugin when every rank loaded the same
 * one, then TCP. */
static const struct tutti_transport* const transports[] = {
    &tutti_transport_shm,
    &tutti_transport_net,
    &tutti_transport_tcp,
};
#define NTRANSPORTS ((int)(sizeof transports / sizeof transports[0]))

struct ncclComm* tutti_comm_alloc(const ncclConfig_t* config, ncclResult_t* res) {
  struct ncclComm* comm = calloc(1, sizeof *comm);
  if (comm == NULL) {
    *res = tutti_error(ncclSystemError, "out of host memory allocating a communicator");
    return NULL;
  }
  pthread_mutex_init(&comm->error_lock, NULL);
  comm->rank = -1;
  comm->cuda_dev = -2; /* detected at init unless ncclCommInitAll assigns one */
  *res = tutti_config_apply(comm, config);
  if (*res != ncclSuccess) {
    pthread_mutex_destroy(&comm->error_lock);
    free(comm);
    return NULL;
  }
  comm->async_error = ncclInProgress;
  tutti_comm_register(comm);
  return comm;
}

void tutti_comm_free(struct ncclComm* comm) {
  tutti_comm_unregister(comm);
  /* Before anything RAS reads goes (the peer table, the doorbells). */
  if (comm->ras != NULL) {
    tutti_ras_unregister(comm->ras);
    free(comm->ras);
    comm->ras = NULL;
    comm->er.ras = NULL;
  }
  /* The service thread first: it reads the service communicator's queues. */
  tutti_rma_destroy(comm->rma);
  comm->rma = NULL;
  if (comm->rma_svc != NULL) {
    if (__atomic_load_n(&comm->abort_flag, __ATOMIC_ACQUIRE)) {
      __atomic_store_n(&comm->rma_svc->abort_flag, 1, __ATOMIC_RELEASE); /* flush nothing */
    }
    tutti_comm_free(comm->rma_svc);
    comm->rma_svc = NULL;
  }
  tutti_exec_rank_free_pool(&comm->er);
  tutti_reg_close(comm); /* its driver maps through the device communicator's GPU */
  tutti_dev_comm_destroy(comm->dev);
  comm->dev = NULL;
  tutti_transport_teardown(&comm->tc, transports, NTRANSPORTS);
  tutti_bootstrap_close(comm->boot);
  free(comm->tc.send);
  free(comm->tc.recv);
  free(comm->tc.peer_bells);
  free(comm->peers);
  free(comm->host_of);
  pthread_mutex_destroy(&comm->error_lock);
  free(comm);
}

/* One rank's view of its connections, all-gathered at init. */
struct conn_caps {
  size_t slot_bytes;    /* its smallest slot (0: no connection) */
  size_t queue_bytes;   /* its smallest queue */
  size_t can_read;      /* it can read every peer's host buffers (single copy) */
  size_t board_bytes;   /* the slot size of the host's board it maps, 0 none */
  size_t deterministic; /* its TUTTI_DETERMINISTIC: must be every rank's */
  size_t grown_from;    /* its comm->grown_from: see agree_grow */
};

static TUTTI_PARAM_STR(dump_on_signal, "TUTTI_DUMP_ON_SIGNAL", NULL,
                       "USR1 or SIGUSR1, USR2 or SIGUSR2 (any case); any other value but 0: USR1",
                       "on that signal every rank of the process logs what it waits for (unset "
                       "or 0: none)");

static TUTTI_PARAM_INT32(deterministic, "TUTTI_DETERMINISTIC", 0, 0, 1,
                         "1: reductions fold every element in rank order, the same bits whatever "
                         "the algorithm; read at communicator creation, the same on every rank");

/* Ranks that fold in different orders would run different schedules: a
 * mismatch fails creation on every rank, naming the first that differs. */
static ncclResult_t agree_deterministic(struct ncclComm* comm, const struct conn_caps* all) {
  comm->deterministic = (int)all[0].deterministic;
  for (int r = 1; r < comm->nranks; r++) {
    if (all[r].deterministic != all[0].deterministic) {
      return tutti_error(ncclInvalidArgument,
                         "rank %d has TUTTI_DETERMINISTIC=%d but rank 0 has %d: set it alike on "
                         "every rank (it changes how reductions are scheduled)",
                         r, (int)all[r].deterministic, (int)all[0].deterministic);
    }
  }
  if (comm->deterministic && comm->rank == 0) {
    INFO(TUTTI_INIT, "deterministic reductions: every element folded in rank order");
  }
  return ncclSuccess;
}

/* A communicator made by ncclCommGrow of a parent of N ranks: ranks 0..N-1
 * are the parent's, at their own numbers, and N..M-1 new ones, every rank
 * having come through ncclCommGrow. The root already refuses a rank number
 * taken twice; this catches what it cannot see: a rank that joined with
 * ncclCommInitRank, only new ranks, or a new rank at the number of an
 * existing rank that learned the id and then failed before it joined. Every rank reads the same
 * table, so a mismatch fails creation on every rank with the same sentence. */
static ncclResult_t agree_grow(struct ncclComm* comm, const struct conn_caps* all) {
  const int n = comm->nranks;
  int plain = -1, grown = -1, old = -1;
  for (int r = 0; r < n; r++) {
    plain = plain < 0 && all[r].grown_from == 0 ? r : plain;
    grown = grown < 0 && all[r].grown_from != 0 ? r : grown;
    old = old < 0 && all[r].grown_from > 1 ? r : old;
  }
  if (grown < 0) {
    return ncclSuccess;
  }
  if (plain >= 0) {
    return tutti_error(ncclInvalidUsage,
                       "rank %d of %d joined with ncclCommInitRank but rank %d with "
                       "ncclCommGrow, on the same id: an id from ncclCommGetUniqueId is for "
                       "ncclCommGrow only; call ncclCommGrow on every rank, existing and new",
                       plain, n, grown);
  }
  if (old < 0) {
    return tutti_error(ncclInvalidUsage,
                       "all %d ranks joined as new ranks (ncclCommGrow without a parent): the "
                       "ranks of the communicator ncclCommGetUniqueId was called on must call "
                       "ncclCommGrow(comm, ...) too, and keep ranks 0..(its size - 1)",
                       n);
  }
  /* Every existing rank grew the same parent (they learned the id over its ring). */
  const size_t parent = all[old].grown_from - 1;
  for (int r = 0; (size_t)r < parent && r < n; r++) {
    if (all[r].grown_from == 1) {
      return tutti_error(ncclInvalidUsage,
                         "new rank %d joined the communicator grown from %zu ranks to %d, but "
                         "ranks 0..%zu are the existing ranks': give new ranks %zu..%d, one each",
                         r, parent, n, parent - 1, parent, n - 1);
    }
  }
  return ncclSuccess;
}

/* What this rank's connections allow, agreed with every rank: the piece
 * and queue sizes (the smallest anywhere), single copy, the board. */
static ncclResult_t agree_caps(struct ncclComm* comm) {
  struct tutti_transport_comm* tc = &comm->tc;
  struct tutti_exec_rank* er = &comm->er;
  const int n = comm->nranks;
  struct conn_caps mine = {0,
                           0,
                           comm->nhosts == 1,
                           comm->nhosts == 1 && tc->board.base != NULL ? tc->board.slot_bytes : 0,
                           (size_t)tutti_param_deterministic(),
                           (size_t)comm->grown_from};
  for (int r = 0; r < n; r++) {
    struct tutti_conn* cs[2] = {tc->send[r], tc->recv[r]};
    /* Single copy: the offer's slot is its completion flag (send_idle), and
     * the reader reaches the offering peer's memory (mem). */
    if (r != comm->rank &&
        (cs[0] == NULL || cs[0]->ops->send_idle == NULL || cs[1] == NULL || cs[1]->mem == NULL)) {
      mine.can_read = 0;
    }
    for (int d = 0; d < 2; d++) {
      if (cs[d] != NULL && (mine.slot_bytes == 0 || cs[d]->slot_bytes < mine.slot_bytes)) {
        mine.slot_bytes = cs[d]->slot_bytes;
      }
      if (cs[d] != NULL && (mine.queue_bytes == 0 || cs[d]->queue_bytes < mine.queue_bytes)) {
        mine.queue_bytes = cs[d]->queue_bytes;
      }
    }
  }
  mine.can_read = mine.can_read && tutti_cma_probe(tc);
  struct conn_caps* all = calloc((size_t)n, sizeof *all);
  if (all == NULL) {
    return tutti_error(ncclSystemError, "out of host memory");
  }
  all[comm->rank] = mine;
  ncclResult_t res = tutti_bootstrap_allgather(comm->boot, all, sizeof *all);
  /* Every rank must cut steps into the same pieces and rounds: the smallest. */
  er->piece_bytes = mine.slot_bytes;
  er->queue_bytes = mine.queue_bytes;
  comm->can_pull = res == ncclSuccess;
  /* The board runs when every rank maps it, with the same slots. */
  comm->board_bytes = res == ncclSuccess ? mine.board_bytes : 0;
  for (int r = 0; r < n && res == ncclSuccess; r++) {
    if (all[r].slot_bytes != 0 && all[r].slot_bytes < er->piece_bytes) {
      er->piece_bytes = all[r].slot_bytes;
    }
    if (all[r].queue_bytes != 0 && all[r].queue_bytes < er->queue_bytes) {
      er->queue_bytes = all[r].queue_bytes;
    }
    comm->can_pull = comm->can_pull && all[r].can_read != 0;
    comm->board_bytes = all[r].board_bytes == comm->board_bytes ? comm->board_bytes : 0;
  }
  if (res == ncclSuccess) {
    res = agree_grow(comm, all);
  }
  if (res == ncclSuccess) {
    res = agree_deterministic(comm, all);
  }
  free(all);
  if (comm->board_bytes > 0) {
    er->board = tc->board;
  }
  if (comm->can_pull) {
    /* One process: peers' buffers are read in place, not copied in. */
    comm->can_pull = tutti_topo_one_process(comm->peers, n, comm->rank) ? 2 : 1;
  }
  if (comm->can_pull && comm->rank == 0 && n > 1) {
    INFO(TUTTI_INIT, "ranks read each other's host buffers directly (single-copy collectives, %s)",
         comm->can_pull == 2 ? "one process" : "cross-memory attach");
  }
  return res;
}

static ncclResult_t connect_ranks(struct ncclComm* comm) {
  struct tutti_transport_comm* tc = &comm->tc;
  const int n = comm->nranks;
  comm->host_of = calloc((size_t)n, sizeof *comm->host_of);
  if (comm->host_of == NULL) {
    return tutti_error(ncclSystemError, "out of host memory");
  }
  tutti_topo_hosts(comm->peers, n, comm->host_of, &comm->nhosts, &comm->max_local);
  tc->rank = comm->rank;
  tc->nranks = n;
  tc->peers = comm->peers;
  tc->boot = comm->boot;
  tc->secret = comm->secret;
  tc->comm_hash = comm->comm_hash;
  tc->buffsize = tutti_tune_queue_bytes(n, comm->nhosts);
  tc->board_slot_bytes = (size_t)tutti_tune_knob(TUTTI_KNOB_BOARD_SLOT);
  tc->tcp_direct_bytes = (size_t)tutti_tune_knob(TUTTI_KNOB_TCP_DIRECT);
  tc->abort_flag = &comm->abort_flag;
  tc->send = calloc((size_t)n, sizeof *tc->send);
  tc->recv = calloc((size_t)n, sizeof *tc->recv);
  tc->peer_bells = calloc((size_t)n, sizeof *tc->peer_bells);
  if (tc->send == NULL || tc->recv == NULL || tc->peer_bells == NULL) {
    return tutti_error(ncclSystemError, "out of host memory connecting %d ranks", n);
  }
  NCCLCHECK(tutti_transport_setup(tc, transports, NTRANSPORTS));

  struct tutti_exec_rank* er = &comm->er;
  er->rank = comm->rank;
  er->nranks = n;
  er->send = tc->send;
  er->recv = tc->recv;
  er->bell = tc->bell;
  er->peer_bells = tc->peer_bells;
  er->peers = comm->peers;
  er->abort_flag = &comm->abort_flag;
  er->timeout_s = tutti_timeout_s();
  er->stream_min_bytes = (size_t)tutti_tune_knob(TUTTI_KNOB_STREAM);
  er->board_stream_min_bytes = (size_t)tutti_tune_knob(TUTTI_KNOB_BOARD_STREAM);
  const int local = tutti_topo_local_count(comm->host_of, n, comm->rank);
  struct tutti_wait_sizes w;
  tutti_tune_wait(local, &w);
  if (tc->socket_passes) {
    tutti_tune_wait_sockets(&w);
  }
  er->spin_max = w.spin_max;
  er->spin_passes = w.spin;
  er->yield_passes = w.yield;
  INFO(TUTTI_INIT, "rank %d: %d ranks on this host's %d cores: spin up to %d, yield %d, then sleep",
       er->rank, local, w.cores, er->spin_max, er->yield_passes);
  return agree_caps(comm);
}

/* What RAS answers for this rank, and the flight recorder its calls fill. */
static void ras_start(struct ncclComm* comm) {
  struct tutti_ras_comm* rc = comm->internal ? NULL : calloc(1, sizeof *rc);
  if (rc == NULL) {
    return; /* a service communicator, or no memory: no record, nothing else lost */
  }
  rc->hash = comm->comm_hash;
  rc->rank = comm->rank;
  rc->nranks = comm->nranks;
  rc->made = comm->grown_from != 0 ? "grow" : comm->made != NULL ? comm->made : "init";
  memcpy(rc->secret, comm->secret, sizeof rc->secret);
  rc->peers = comm->peers;
  rc->bell = comm->tc.bell;
  rc->peer_bells = comm->tc.peer_bells;
  rc->waits_for = -1;
  comm->ras = rc;
  comm->er.ras = rc;
  tutti_ras_register(rc);
}

ncclResult_t tutti_comm_init(struct ncclComm* comm, int nranks, const ncclUniqueId* id, int rank) {
  ncclResult_t res;
  tutti_log_init();
  /* A mistyped variable is refused here, not silently replaced by its default. */
  NCCLCHECKGOTO(tutti_param_validate(), res, fail);
  NCCLCHECKGOTO(tutti_tune_check(), res, fail);
  comm->rank = rank;
  comm->nranks = nranks;
  if (comm->cuda_dev == -2) {
    comm->cuda_dev = tutti_cuda_current_device();
  }
  tutti_log_set_device(comm->cuda_dev);
  tutti_dump_install(tutti_param_dump_on_signal());
  tutti_bootstrap_id_secret(id, comm->secret);
  comm->comm_hash = tutti_hash(id, sizeof *id, TUTTI_HASH_INIT);
  NCCLCHECKGOTO(
      tutti_bootstrap_init(id, rank, nranks, tutti_timeout_s(), &comm->abort_flag, &comm->boot),
      res, fail);
  tutti_bootstrap_secret(comm->boot, comm->secret); /* the id's, or its job's token */
  comm->peers = calloc((size_t)nranks, sizeof *comm->peers);
  if (comm->peers == NULL) {
    res = tutti_error(ncclSystemError, "out of host memory for %d ranks", nranks);
    goto fail;
  }
  tutti_topo_fill_self(&comm->peers[rank], rank, comm->cuda_dev);
  if (!comm->internal) {
    tutti_ras_peer_address(tutti_bootstrap_address(comm->boot, rank), comm->peers[rank].ras);
  }
  NCCLCHECKGOTO(tutti_bootstrap_allgather(comm->boot, comm->peers, sizeof *comm->peers), res, fail);
  NCCLCHECKGOTO(connect_ranks(comm), res, fail);
  const int next = (rank + 1) % nranks;
  tutti_topo_log(comm->peers, nranks, rank,
                 next != rank && comm->tc.send[next] != NULL ? comm->tc.send[next]->via : NULL);
  ras_start(comm);
  struct tutti_dev_setup ds;
  tutti_comm_dev_setup(comm, &ds);
  if (comm->internal) {
    snprintf(comm->dev_why, sizeof comm->dev_why, "a service communicator moves host data only");
  } else {
    NCCLCHECKGOTO(tutti_dev_comm_create(&ds, &comm->dev, comm->dev_why, sizeof comm->dev_why), res,
                  fail);
  }
  comm->dev_mem_bytes = comm->dev != NULL ? tutti_cuda_device_mem(comm->cuda_dev) : 0;
  if (comm->ras != NULL && comm->dev != NULL) {
    /* Before any launch; the listener reads it with the record. */
    __atomic_store_n(&comm->ras->dev, tutti_dev_ras_view(comm->dev), __ATOMIC_RELEASE);
  }
  tutti_reg_open(comm);
  if (comm->dev == NULL && comm->cuda_dev >= 0 && !comm->internal) {
    INFO(TUTTI_INIT, "device buffers unavailable on this communicator: %s", comm->dev_why);
  }
  INFO(TUTTI_INIT, "comm %p rank %d nranks %d cudaDev %d%s%s - Init COMPLETE", (void*)comm, rank,
       nranks, comm->cuda_dev, comm->name[0] ? " commName " : "", comm->name);
  __atomic_store_n(&comm->async_error, ncclSuccess, __ATOMIC_SEQ_CST);
  return ncclSuccess;
fail:
  tutti_comm_set_error(comm, res);
  return res;
}

void tutti_comm_dev_setup(struct ncclComm* comm, struct tutti_dev_setup* ds) {
  *ds = (struct tutti_dev_setup){comm->rank,          comm->nranks,  comm->cuda_dev,
                                 comm->peers,         comm->host_of, comm->boot,
                                 tutti_timeout_s(),   comm->secret,  comm->comm_hash,
                                 comm->tc.peer_bells, comm->tc.bell};
  /* The device executor's sizes are tune's, within what it holds. */
  memset(&ds->sizes, 0, sizeof ds->sizes);
  if (tutti_dev_compiled()) {
    struct tutti_dev_limits lim;
    tutti_dev_limits(&lim);
    tutti_tune_device_setup(&lim, &ds->sizes);
  }
}

ncclResult_t tutti_comm_check_handle(struct ncclComm* comm, const char* what) {
  if (comm == NULL) {
    return tutti_error(ncclInvalidArgument, "%s: comm is NULL", what);
  }
  if (!tutti_comm_is_live(comm)) {
    return tutti_error(ncclInvalidArgument,
                       "%s: comm %p is not a live communicator (destroyed, or never created)", what,
                       (void*)comm);
  }
  return ncclSuccess;
}

ncclResult_t tutti_comm_check(struct ncclComm* comm, const char* what) {
  NCCLCHECK(tutti_comm_check_handle(comm, what));
  ncclResult_t state = __atomic_load_n(&comm->async_error, __ATOMIC_SEQ_CST);
  if (state == ncclInProgress) {
    return tutti_error(ncclInvalidUsage,
                       "%s: comm %p is still initializing, suspending or resuming: wait until "
                       "ncclCommGetAsyncError reports ncclSuccess",
                       what, (void*)comm);
  }
  if (__atomic_load_n(&comm->abort_flag, __ATOMIC_ACQUIRE)) {
    return tutti_error(ncclInvalidUsage, "%s: comm %p was aborted", what, (void*)comm);
  }
  return ncclSuccess;
}

ncclResult_t tutti_comm_check_active(struct ncclComm* comm, const char* what) {
  NCCLCHECK(tutti_comm_check(comm, what));
  if (__atomic_load_n(&comm->suspended, __ATOMIC_ACQUIRE)) {
    return tutti_error(ncclInvalidUsage,
                       "%s: comm %p is suspended: call ncclCommResume (in a group of its own) "
                       "before using it",
                       what, (void*)comm);
  }
  if (__atomic_load_n(&comm->suspend_queued, __ATOMIC_ACQUIRE)) {
    return tutti_error(ncclInvalidUsage,
                       "%s: comm %p has a ncclCommSuspend queued in this group: end the group "
                       "before using it",
                       what, (void*)comm);
  }
  return ncclSuccess;
}
