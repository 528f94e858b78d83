/* The communicator. */
#ifndef TUTTI_API_COMM_H
#define TUTTI_API_COMM_H

#include <pthread.h>
#include <stdint.h>

#include "device/device.h"
#include "exec/exec.h"
#include "nccl.h"
#include "rma/rma.h"
#include "transport/transport.h"

#define TUTTI_MAX_USER_REDOPS 64
#define TUTTI_MAX_RMA_CTX 16 /* ncclConfig_t.numRmaCtx at most */

struct tutti_user_redop {
  int used;
  ncclDataType_t type;
  ncclScalarResidence_t residence;
  const void* scalar_ptr; /* ncclScalarDevice: read when the operation starts */
  uint64_t scalar_bits;   /* ncclScalarHostImmediate: the value, read at creation */
};

struct ncclComm {
  int rank;
  int nranks;
  int cuda_dev; /* -1 when the process has no CUDA device */
  int blocking;
  int num_rma_ctx;     /* ncclConfig_t.numRmaCtx: contexts of one-sided operations (0: none) */
  ncclConfig_t config; /* as created: every field set (children inherit it) */
  char name[128];
  unsigned char secret[16];
  uint64_t comm_hash;
  uint64_t splits;      /* children made by ncclCommSplit, to name their ids */
  uint64_t shrinks;     /* children made by ncclCommShrink, to derive their ids */
  ncclUniqueId grow_id; /* from ncclCommGetUniqueId, until an ncclCommGrow takes it */
  int grow_id_set;
  /* Made by ncclCommGrow: 0 no; 1 as a new rank; on an existing rank its
   * parent's size + 1. Every rank's is checked against the others' at init. */
  int grown_from;
  const char* made; /* how it was made, for RAS: NULL "init", "split", "shrink" (grown: "grow") */
  struct tutti_ras_comm* ras; /* what RAS and the flight recorder read (NULL: none) */

  struct tutti_bootstrap* boot;
  struct tutti_peer_info* peers;
  int32_t* host_of; /* [nranks]: index of each rank's host, in order of first rank */
  int nhosts;
  int max_local;
  int can_pull;       /* coll_args.can_pull: 0, 1 (another process's memory), 2 (one process) */
  size_t board_bytes; /* coll_args.board_bytes: the host's board, when every rank is on it */
  int deterministic;  /* coll_args.deterministic: TUTTI_DETERMINISTIC, agreed at init */
  struct tutti_transport_comm tc;
  struct tutti_exec_rank er;
  struct tutti_dev_comm* dev; /* device buffers; NULL when they cannot run, and why: */
  char dev_why[256];
  /* The registration cache (api/register.c), NULL unless NCCL_LOCAL_REGISTER=1
   * and device buffers run; read with __atomic (ncclMemAlloc on any thread). */
  struct tutti_reg_comm* reg;
  size_t dev_mem_bytes; /* the GPU's memory (0 unknown): no device buffer is larger */

  /* One-sided operations (api/window.c): made at the first window
   * registration. The service communicator carries only their records; it
   * has no device executor and no user handle. */
  struct tutti_rma* rma;
  struct ncclComm* rma_svc;
  int internal; /* this is a service communicator: no device executor */

  volatile int abort_flag;
  int finalized;
  int suspended;            /* ncclCommSuspend ran, ncclCommResume not yet (read with __atomic) */
  int suspend_queued;       /* a suspend or resume of it waits in a group, or runs */
  int active_calls;         /* calls inside the library now; abort waits for them */
  ncclResult_t async_error; /* read from any thread with __atomic */
  pthread_mutex_t error_lock;
  char last_error[1024];

  pthread_t init_thread; /* non-blocking init runs here */
  int init_thread_live;

  struct tutti_user_redop redops[TUTTI_MAX_USER_REDOPS];
};

/* api/registry.c: which communicator handles are alive. */
void tutti_comm_register(struct ncclComm* comm);
void tutti_comm_unregister(struct ncclComm* comm);
int tutti_comm_is_live(const struct ncclComm* comm);
/* Calls fn on every live communicator, the registry locked: a communicator
 * being freed waits for it (fn must not create or free communicators). */
void tutti_comm_for_each(void (*fn)(struct ncclComm* comm, void* arg), void* arg);
/* The registered window `win` of a live communicator (and that one in
 * *comm), or NULL: never dereferences an unknown pointer. */
struct tutti_win;
struct tutti_win* tutti_comm_find_window(const void* win, struct ncclComm** comm);

/* Checks a handle passed by the user: non-NULL and alive (usable for
 * queries even while it initializes). */
ncclResult_t tutti_comm_check_handle(struct ncclComm* comm, const char* what);

/* Checks a handle passed by the user: non-NULL, alive, initialized, not
 * aborted. `what` names the calling function for the error text. */
ncclResult_t tutti_comm_check(struct ncclComm* comm, const char* what);

/* As tutti_comm_check, and not suspended: for calls that use what a
 * suspend gives back (collectives, point-to-point, registration). */
ncclResult_t tutti_comm_check_active(struct ncclComm* comm, const char* what);

/* What the device executor needs of the communicator (its setup, a suspend). */
void tutti_comm_dev_setup(struct ncclComm* comm, struct tutti_dev_setup* ds);

/* Records an operation's failure on the communicator (sticky async error). */
void tutti_comm_set_error(struct ncclComm* comm, ncclResult_t res);

/* api/init.c: the body of ncclCommInitRankConfig, runnable on any thread. */
ncclResult_t tutti_comm_init(struct ncclComm* comm, int nranks, const ncclUniqueId* id, int rank);
struct ncclComm* tutti_comm_alloc(const ncclConfig_t* config, ncclResult_t* res);
void tutti_comm_free(struct ncclComm* comm);

/* api/config.c: reads a user's config of any release (only its first `size`
 * bytes; fields newer than its `version` count as unset) into a complete
 * one, unset fields given their defaults, and validates it as NCCL does. */
ncclResult_t tutti_config_read(const ncclConfig_t* config, ncclConfig_t* out);
/* api/comm_init.c: a communicator made from a parent (ncclCommSplit,
 * ncclCommShrink): where it goes and the caller's config, if any (none: the
 * parent's, its blocking mode too). */
struct tutti_child {
  ncclComm_t* out;
  ncclConfig_t config;
  int has_config;
  const char* made; /* "split", "shrink": how RAS names it */
};
/* Reads the caller's `config` (NULL: none) for a child going to `out`. */
ncclResult_t tutti_child_prepare(struct tutti_child* ch, ncclComm_t* out,
                                 const ncclConfig_t* config);
/* Makes the child: rank `rank` of `nranks` on `id`, on the parent's GPU. */
ncclResult_t tutti_child_init(const struct tutti_child* ch, const struct ncclComm* parent,
                              int nranks, const ncclUniqueId* id, int rank, struct ncclComm** made);
/* Reads `config` (NULL: defaults) into the communicator. */
ncclResult_t tutti_config_apply(struct ncclComm* comm, const ncclConfig_t* config);

#endif
