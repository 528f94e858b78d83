/* Choosing how each call runs: the one place that decides (docs/tuning.md).
 * Every decision is a function of the call's arguments, what the executor
 * offers and the environment, so every rank decides alike. */
#ifndef TUTTI_TUNE_TUNE_H
#define TUTTI_TUNE_TUNE_H

#include <stdint.h>

#include "algo/algo.h"
#include "nccl.h"
#include "tune/plan.h"

/* plan.c: the executor of a call whose buffers the API classified: device
 * memory on either side, host memory on either side (the API refuses
 * both), and whether some buffer CUDA reaches (managed, pinned). Non-zero:
 * the device executor. */
int tutti_tune_executor(int device_only, int host_only, int reachable, int have_device);

/* plan.c: the plan of a host call, made when it is issued: the table's
 * first row that matches and can run (TUTTI_TUNE's first), within what
 * NCCL_ALGO allows; when none can, the first allowed algorithm that runs
 * it. Never fails. With NCCL_DEBUG_SUBSYS=TUNING the plan and its reason
 * are printed once per distinct call shape. */
void tutti_tune_plan(const struct tutti_coll_args* a, struct tutti_plan* plan);

/* One device call of a launch. */
struct tutti_tune_call {
  const struct tutti_coll_args* args;
  int premulsum; /* the reduction scales by a scalar */
};

/* plan.c: the plans of one launch of device calls (a group's calls on one
 * communicator, in issue order), made at the group's end from what the
 * device communicator offers: each call's path (the mapped kernel, the
 * copy engines, a schedule on the schedules' kernel), protocol, and how
 * the path cuts it; the launch's channels and threads. With
 * NCCL_DEBUG_SUBSYS=TUNING each call shape's path and rule are printed
 * once (NCCL_DEBUG=TRACE: the cut too). */
void tutti_tune_launch(const struct tutti_tune_call* calls, int n,
                       const struct tutti_dev_caps* caps, struct tutti_plan* plans);

/* setup.c: a device communicator's sizes, given to its setup: channels
 * (NCCL_MAX_NCHANNELS), threads (NCCL_NTHREADS), queues (NCCL_BUFFSIZE),
 * inboxes (TUTTI_TUNE), where queues live (NCCL_P2P_DISABLE) and how
 * regions are made (NCCL_CUMEM_ENABLE), within what the executor holds. */
void tutti_tune_device_setup(const struct tutti_dev_limits* lim, struct tutti_dev_sizes* s);
/* NCCL_LOCAL_REGISTER: 1 when device buffers go through the registration
 * cache (device/peer/regcache.h), 0 (the default) when every buffer is
 * staged as before. */
int tutti_tune_local_register(void);

/* setup.c: how long a waiting rank spins and yields before it sleeps, with
 * `local_ranks` ranks on this host's cores (TUTTI_SPIN, TUTTI_YIELD). */
struct tutti_wait_sizes {
  int spin, spin_max, yield;
  int cores;
};
void tutti_tune_wait(int local_ranks, struct tutti_wait_sizes* w);
/* A waiting pass reads sockets (the caller's own path over TCP): spinning
 * stays short unless TUTTI_SPIN says otherwise. */
void tutti_tune_wait_sockets(struct tutti_wait_sizes* w);

/* override.c: TUTTI_TUNE, the one string that overrides the table's rows
 * and the sizes below: "coll[,coll]:lo-hi:@algorithm[#lo-hi:@algorithm]...;
 * name=size;..." with sizes in bytes of the call's buffer (count x element
 * size; k, m, g, inf), e.g. "allreduce:0-64k:@board#64k-inf:@ring;
 * allgather:0-inf:@pull;ce.piece=8m". A range it names takes that
 * algorithm (or device path) wherever it can run. */
struct tutti_tune_rule {
  unsigned colls; /* a bit per enum tutti_coll */
  size_t lo, hi;
  enum tutti_algo_id algo;
};

/* knobs.c: the sizes that cut a call once its path is chosen, where a
 * protocol stops, and what memory a device path's inboxes take. */
enum tutti_knob {
  TUTTI_KNOB_LL,      /* the schedules' kernel: LL lines up to this many bytes */
  TUTTI_KNOB_CHANNEL, /* the schedules' kernel: a channel per this many bytes */
  TUTTI_KNOB_MAPPED_LL,
  TUTTI_KNOB_MAPPED_LL128,
  TUTTI_KNOB_MAPPED_BLOCK,
  TUTTI_KNOB_MAPPED_LL_BLOCK,
  TUTTI_KNOB_MAPPED_LL_THREADS,
  TUTTI_KNOB_MAPPED_LL128_BLOCK,
  TUTTI_KNOB_MAPPED_LL128_ROUND,
  TUTTI_KNOB_MAPPED_ROUND,
  TUTTI_KNOB_MAPPED_MEMORY,
  TUTTI_KNOB_MAPPED_LL128_MEMORY,
  TUTTI_KNOB_CE_BLOCK,
  TUTTI_KNOB_CE_PIECE,
  TUTTI_KNOB_CE_MEMORY,
  TUTTI_KNOB_STREAM,       /* host: outputs from this size are written with streaming stores */
  TUTTI_KNOB_BOARD_STREAM, /* host: the board's gathers, likewise */
  TUTTI_KNOB_BOARD_SLOT,   /* host: data bytes of a rank's slot on the board */
  TUTTI_KNOB_NET_POLL,     /* device proxy: receives tested on the running kernel's channels */
  TUTTI_KNOB_NET_YIELD,    /* device proxy: yields between passes that moved nothing */
  TUTTI_KNOB_RMA_LANDING,  /* device one-sided: pinned bytes landed data may wait in */
  TUTTI_KNOB_TCP_DIRECT,   /* host TCP: slots the calling thread moves itself, at most */
  TUTTI_KNOB_COUNT
};
/* Its value: TUTTI_TUNE's, else the default (override.c). */
int64_t tutti_tune_knob(enum tutti_knob k);
const char* tutti_tune_knob_name(enum tutti_knob k);
/* The knob TUTTI_TUNE calls `name`, or -1; whether `v` is a value it takes. */
int tutti_tune_knob_find(const char* name);
int tutti_tune_knob_fits(enum tutti_knob k, int64_t v);
int64_t tutti_tune_knob_default(enum tutti_knob k);

/* Parses a TUTTI_TUNE value: its rows into at most `max` rules (none kept
 * when `rules` is NULL), its sizes into knobs[] (-1: not given; may be
 * NULL). The number of rows, or -1 with what is wrong in `err` (exposed
 * for tests). */
int tutti_tune_parse_override(const char* spec, struct tutti_tune_rule* rules, int max,
                              int64_t knobs[TUTTI_KNOB_COUNT], char* err, size_t errlen);
/* ncclInvalidArgument naming TUTTI_TUNE's mistake, at communicator creation
 * (the value parsed once per process; one changed since is checked too). */
ncclResult_t tutti_tune_check(void);

/* The hierarchical allreduce's exchange among hosts (coll_args.inter_algo). */
int tutti_tune_inter(const struct tutti_coll_args* a);

/* Non-zero when NCCL_ALGO names the algorithms (read once). */
int tutti_tune_algo_named(void);
/* The algorithms NCCL_ALGO allows for `coll` (a bit per enum tutti_algo_id). */
unsigned tutti_tune_allowed(enum tutti_coll coll);

/* select.c: ncclCollConfig_t.algSelection (NCCL's grammar: "," or, "+"
 * and, "^" not, names matched by their beginning) as a bit per enum
 * tutti_algo_id into *mask; 0, or -1 with what is wrong in `err`. */
int tutti_tune_parse_selection(const char* sel, unsigned* mask, char* err, size_t errlen);
/* The algorithms (and device paths) that implement `coll`. */
unsigned tutti_tune_implements(enum tutti_coll coll);
/* Those of `mask` that can run `a` (the device paths: where `a` is a device
 * call; whether they do is decided at its launch). */
unsigned tutti_tune_runnable(const struct tutti_coll_args* a, unsigned mask);
/* What `a` may use: NCCL_ALGO's algorithms, narrowed by the call's own
 * selection where both leave some. */
unsigned tutti_tune_call_allowed(const struct tutti_coll_args* a);

/* Protocols a device call may use: NCCL_PROTO, read once (TUTTI_PROTO_*). */
int tutti_tune_protocols(void);
/* An NCCL_PROTO value as the mask above; unset or nothing left: all (exposed for tests). */
int tutti_tune_parse_proto(const char* spec);

/* A call shape: collective, bytes, ranks, hosts, in place, buffers, path. */
uint64_t tutti_tune_shape(const struct tutti_coll_args* a, unsigned path);
/* Non-zero the first time `shape` is asked about in this process. */
int tutti_tune_first_sight(uint64_t shape);

/* Bytes of queue per connection: NCCL_BUFFSIZE, or what the placement
 * wants (host: 4 MB when every rank is alone on its host in a small job). */
size_t tutti_tune_queue_bytes(int nranks, int nhosts);

/* Bytes a ring round moves per step: half the smallest queue, so that a rank
 * one step ahead of its neighbour never fills the queue between them (which
 * could close a cycle of ranks all waiting to send). */
size_t tutti_tune_chunk(size_t queue_bytes, size_t piece_bytes);

/* Parses an NCCL_ALGO value into an allowed-mask per collective (exposed for tests). */
void tutti_tune_parse_algo(const char* spec, unsigned allowed[TUTTI_COLL_COUNT]);

#endif
