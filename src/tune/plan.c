/* The plan of every call, made once: a host call's when it is issued (its
 * buffers name the executor), a device call's at its group's end, when what
 * the device communicator offers the launch is known. From the one table
 * (table.c), within NCCL_ALGO (tune.c) and NCCL_PROTO (proto.c); the device
 * paths' cut in device.c. */
#include <pthread.h>
#include <string.h>

#include "tune/internal.h"
#include "util/log.h"

int tutti_tune_executor(int device_only, int host_only, int reachable, int have_device) {
  /* Device memory needs the device executor, memory CUDA does not know the
   * host executor; managed and pinned memory, which both reach, go to the
   * device executor when the communicator has one (docs/design.md). */
  return device_only || (!host_only && reachable && have_device);
}

enum tutti_algo_id tutti_tune_pick_allowed(const struct tutti_coll_args* a, const char** why) {
  const unsigned allowed = tutti_tune_call_allowed(a);
  for (int id = 0; id < TUTTI_ALGO_COUNT; id++) {
    if ((allowed & (1u << id)) && tutti_tune_table_can_run(a, (enum tutti_algo_id)id)) {
      *why = a->call_algos != 0 ? "the call's algSelection: the first algorithm it allows "
                                  "that runs this collective"
             : tutti_tune_algo_named()
                 ? "NCCL_ALGO: the first allowed algorithm that runs this collective"
                 : "the first algorithm that can run here";
      return (enum tutti_algo_id)id;
    }
  }
  for (int id = 0; id < TUTTI_ALGO_COUNT; id++) {
    if (tutti_algo_get(id)->build[a->coll] != NULL) {
      *why = "NCCL_ALGO allows no algorithm for this collective: the first that runs it";
      return (enum tutti_algo_id)id;
    }
  }
  *why = "nothing implements this collective";
  return TUTTI_ALGO_DIRECT;
}

void tutti_tune_plan(const struct tutti_coll_args* a, struct tutti_plan* plan) {
  const char* why;
  enum tutti_algo_id pick = tutti_tune_table(a, tutti_tune_call_allowed(a), NULL, &why);
  memset(plan, 0, sizeof *plan);
  plan->path = TUTTI_PATH_SCHEDULE;
  plan->algo = pick != TUTTI_ALGO_COUNT ? pick : tutti_tune_pick_allowed(a, &why);
  plan->why = why;
  if (tutti_log_wants(TUTTI_LOG_INFO, TUTTI_TUNING) &&
      tutti_tune_first_sight(tutti_tune_shape(a, TUTTI_PATH_SCHEDULE))) {
    INFO(TUTTI_TUNING, "%s of %zu bytes, %d ranks on %d host%s%s, host buffers: %s%s (%s)",
         tutti_coll_name(a->coll), a->count * a->elem_size, a->nranks, a->nhosts,
         a->nhosts == 1 ? "" : "s", a->in_place ? ", in place" : "",
         tutti_algo_get(plan->algo)->name, tutti_algo_ordered(a, plan->algo) ? ", ordered" : "",
         why);
  }
}

static const char* proto_name(int proto) {
  return proto == TUTTI_PROTO_LL ? "LL" : proto == TUTTI_PROTO_LL128 ? "LL128" : "Simple";
}

/* One device call's plan (before its launch shares blocks): the table's
 * first row that can run with what the launch offers; a schedule's
 * algorithm, where no device path runs it, as a host call's would be. */
static void plan_device(const struct tutti_coll_args* a, const struct tutti_tune_offer* o,
                        struct tutti_plan* p) {
  const char* why = NULL;
  const enum tutti_algo_id pick = tutti_tune_table(a, tutti_tune_call_allowed(a), o, &why);
  enum tutti_algo_id sched = pick;
  if (pick == TUTTI_ALGO_COUNT) {
    const char* ignored;
    sched = tutti_tune_pick_allowed(a, &ignored);
  }
  memset(p, 0, sizeof *p);
  tutti_tune_device_cut(a, o->caps, pick, sched, p);
  p->why = why != NULL ? why : "no row of the table for this call can run here";
  if (tutti_log_wants(TUTTI_LOG_INFO, TUTTI_TUNING) &&
      tutti_tune_first_sight(tutti_tune_shape(a, (unsigned)p->path) + (uint64_t)o->nops)) {
    INFO(TUTTI_TUNING, "%s of %zu bytes, %d ranks%s%s, device buffers: %s%s%s, %s (%s)",
         tutti_coll_name(a->coll), a->count * a->elem_size, a->nranks,
         a->in_place ? ", in place" : "", o->nops > 1 ? ", in a group" : "",
         p->path == TUTTI_PATH_SCHEDULE ? tutti_algo_get(p->algo)->name : "",
         p->path == TUTTI_PATH_SCHEDULE       ? " on the schedules' kernel"
         : p->path == TUTTI_PATH_COPY_ENGINES ? "copy engines"
                                              : "mapped kernel",
         o->caps->net ? " through the network proxy" : "", proto_name(p->proto), p->why);
  }
}

/* Everything a device call's plan depends on: a call like one of the last
 * few of this thread (a training step repeats its calls) takes their plan. */
struct shape {
  size_t bytes, board_bytes;
  int coll, nranks, rank, root, nhosts, max_local, in_place, can_pull, deterministic;
  int nops, premulsum;
  unsigned call_algos;
  int min_channels, max_channels;
  struct tutti_dev_caps caps;
};
/* Compared bytewise: no padding inside what is compared. */
_Static_assert(sizeof(struct tutti_dev_caps) ==
                   sizeof(struct tutti_dev_limits) + 10 * sizeof(int) + 3 * sizeof(uint64_t),
               "struct tutti_dev_caps has padding: plans are cached by its bytes");

#define RECENT 8 /* plans kept per thread, by a hash of the shape */
static __thread struct shape recent_shape[RECENT];
static __thread struct tutti_plan recent_plan[RECENT];
static __thread unsigned char recent_set[RECENT];

void tutti_tune_launch(const struct tutti_tune_call* calls, int n,
                       const struct tutti_dev_caps* caps, struct tutti_plan* plans) {
  for (int i = 0; i < n; i++) {
    const struct tutti_coll_args* a = calls[i].args;
    struct shape k;
    memset(&k, 0, sizeof k); /* padding too: shapes are compared bytewise */
    k.bytes = a->count * a->elem_size;
    k.board_bytes = a->board_bytes;
    k.coll = (int)a->coll;
    k.nranks = a->nranks;
    k.rank = a->rank;
    k.root = a->root;
    k.nhosts = a->nhosts;
    k.max_local = a->max_local;
    k.in_place = a->in_place;
    k.can_pull = a->can_pull;
    k.deterministic = a->deterministic;
    k.nops = n;
    k.premulsum = calls[i].premulsum;
    k.call_algos = a->call_algos;
    k.min_channels = a->min_channels;
    k.max_channels = a->max_channels;
    memcpy(&k.caps, caps, sizeof k.caps);
    const unsigned r = (unsigned)((k.bytes * 31u + (size_t)k.coll * 7u + (size_t)n) % RECENT);
    if (recent_set[r] && memcmp(&k, &recent_shape[r], sizeof k) == 0) {
      plans[i] = recent_plan[r];
      continue;
    }
    const struct tutti_tune_offer o = {caps, n, calls[i].premulsum};
    plan_device(a, &o, &plans[i]);
    memcpy(&recent_shape[r], &k, sizeof k);
    recent_plan[r] = plans[i];
    recent_set[r] = 1;
  }
  if (plans[0].path == TUTTI_PATH_SCHEDULE) {
    tutti_tune_device_share(calls, n, caps, plans);
  }
}
