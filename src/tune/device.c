/* Device calls: what each path can take, and the plan of a launch. The
 * table (table.c) says which path runs a call and why, with where each row
 * was measured; this file says where a path can run at all (what the
 * device communicator offers, struct tutti_dev_caps), which protocol it
 * uses, and how it cuts the call (knobs.c). Every choice is a function of
 * the call's arguments, those capabilities and the environment only, so
 * every rank launches the same way. */
#include <stdint.h>
#include <string.h>

#include "tune/tune.h"
#include "util/log.h"
#include "util/param.h"

static TUTTI_PARAM(min_nchannels, "NCCL_MIN_NCHANNELS", 1,
                   "device calls: the fewest channels the schedules' kernel cuts a call into");

/* The mapped kernel's lines: LL to its limit, then LL128, then simple
 * rounds; a protocol NCCL_PROTO leaves out passes its sizes to the next
 * one allowed. */
static int mapped_proto(const struct tutti_coll_args* a, const struct tutti_dev_caps* c) {
  const size_t bytes = a->count * a->elem_size;
  const int proto = tutti_tune_protocols();
  const int ll128_ok = (proto & TUTTI_PROTO_LL128) && c->ll128_inboxes;
  if ((proto & TUTTI_PROTO_LL) && bytes <= (size_t)tutti_tune_knob(TUTTI_KNOB_MAPPED_LL)) {
    return TUTTI_PROTO_LL;
  }
  if (ll128_ok && bytes <= (size_t)tutti_tune_knob(TUTTI_KNOB_MAPPED_LL128)) {
    return TUTTI_PROTO_LL128;
  }
  if (!(proto & TUTTI_PROTO_SIMPLE)) {
    return ll128_ok ? TUTTI_PROTO_LL128 : TUTTI_PROTO_LL;
  }
  return TUTTI_PROTO_SIMPLE;
}

int tutti_tune_device_ll(const struct tutti_coll_args* a, int net) {
  int m = tutti_tune_protocols();
  /* The ring's LL stands in for LL128. */
  m = (m & TUTTI_PROTO_SIMPLE) | ((m & (TUTTI_PROTO_LL | TUTTI_PROTO_LL128)) != 0);
  /* A proxy forwards whole slots after their tail: across hosts, simple only. */
  return !net && (m & TUTTI_PROTO_LL) &&
         (!(m & TUTTI_PROTO_SIMPLE) ||
          a->count * a->elem_size <= (size_t)tutti_tune_knob(TUTTI_KNOB_LL));
}

size_t tutti_tune_device_channels(const struct tutti_coll_args* a) {
  const size_t per = (size_t)tutti_tune_knob(TUTTI_KNOB_CHANNEL);
  size_t ch = (a->count * a->elem_size + per - 1) / per;
  const int64_t lo = tutti_param_min_nchannels();
  return ch < (size_t)lo ? (size_t)lo : ch;
}

int tutti_tune_device_wants_ll128(void) {
  const int proto = tutti_tune_protocols();
  return (proto & TUTTI_PROTO_LL128) &&
         (tutti_tune_knob(TUTTI_KNOB_MAPPED_LL128) > 0 || !(proto & TUTTI_PROTO_SIMPLE));
}

void tutti_tune_device_memory(struct tutti_dev_memory* m) {
  m->mapped = (size_t)tutti_tune_knob(TUTTI_KNOB_MAPPED_MEMORY);
  m->mapped_ll128 = (size_t)tutti_tune_knob(TUTTI_KNOB_MAPPED_LL128_MEMORY);
  m->ce = (size_t)tutti_tune_knob(TUTTI_KNOB_CE_MEMORY);
}

static const char* proto_name(int proto) {
  return proto == TUTTI_PROTO_LL ? "LL" : proto == TUTTI_PROTO_LL128 ? "LL128" : "Simple";
}

static void choose(const struct tutti_coll_args* a, const struct tutti_dev_caps* c,
                   struct tutti_dev_plan* p) {
  const char* why = NULL;
  const enum tutti_algo_id pick = tutti_tune_table(a, tutti_tune_allowed(a->coll), c, &why);
  p->why = why != NULL ? why : "no row of the table for this call can run here";
  if (pick == TUTTI_ALGO_CE) {
    p->path = TUTTI_PATH_COPY_ENGINES;
    p->proto = TUTTI_PROTO_SIMPLE;
    p->piece_bytes = (size_t)tutti_tune_knob(TUTTI_KNOB_CE_PIECE);
    p->block_bytes = (size_t)tutti_tune_knob(TUTTI_KNOB_CE_BLOCK);
  } else if (pick == TUTTI_ALGO_MAPPED) {
    p->path = TUTTI_PATH_MAPPED;
    p->proto = mapped_proto(a, c);
    const int ll = p->proto == TUTTI_PROTO_LL, ll128 = p->proto == TUTTI_PROTO_LL128;
    p->block_bytes = (size_t)tutti_tune_knob(ll      ? TUTTI_KNOB_MAPPED_LL_BLOCK
                                             : ll128 ? TUTTI_KNOB_MAPPED_LL128_BLOCK
                                                     : TUTTI_KNOB_MAPPED_BLOCK);
    p->round_bytes = ll128 ? (size_t)tutti_tune_knob(TUTTI_KNOB_MAPPED_LL128_ROUND)
                     : ll  ? 0
                           : (size_t)tutti_tune_knob(TUTTI_KNOB_MAPPED_ROUND);
    p->threads = ll ? (int)tutti_tune_knob(TUTTI_KNOB_MAPPED_LL_THREADS) : 0;
  } else {
    p->path = TUTTI_PATH_SCHEDULE;
    p->proto = tutti_tune_device_ll(a, c->net) ? TUTTI_PROTO_LL : TUTTI_PROTO_SIMPLE;
  }
}

/* Everything a device plan depends on: a launch like one of the last few
 * of this thread (a training step repeats its calls) takes their plan. */
struct shape {
  size_t bytes, board_bytes;
  int coll, nranks, nhosts, max_local, in_place, can_pull;
  struct tutti_dev_caps caps;
};

#define RECENT 8 /* plans kept per thread, by a hash of the shape */
static __thread struct shape recent_shape[RECENT];
static __thread struct tutti_dev_plan recent_plan[RECENT];
static __thread unsigned char recent_set[RECENT];

void tutti_tune_device(const struct tutti_coll_args* a, enum tutti_algo_id sched_algo,
                       const struct tutti_dev_caps* c, struct tutti_dev_plan* p) {
  struct shape k;
  memset(&k, 0, sizeof k); /* padding too: shapes are compared bytewise */
  k.bytes = a->count * a->elem_size;
  k.coll = (int)a->coll;
  k.nranks = a->nranks;
  k.nhosts = a->nhosts;
  k.max_local = a->max_local;
  k.in_place = a->in_place;
  k.board_bytes = a->board_bytes;
  k.can_pull = a->can_pull;
  k.caps = *c;
  const unsigned i = (unsigned)((k.bytes * 31u + (size_t)k.coll * 7u + (size_t)c->nops) % RECENT);
  if (recent_set[i] && memcmp(&k, &recent_shape[i], sizeof k) == 0) {
    *p = recent_plan[i];
    return;
  }
  *p = (struct tutti_dev_plan){0};
  choose(a, c, p);
  recent_shape[i] = k;
  recent_plan[i] = *p;
  recent_set[i] = 1;
  if (tutti_log_wants(TUTTI_LOG_INFO, TUTTI_TUNING) &&
      tutti_tune_first_sight(tutti_tune_shape(a, (unsigned)p->path) + (uint64_t)c->nops)) {
    INFO(TUTTI_TUNING, "%s of %zu bytes, %d ranks%s%s, device buffers: %s%s%s, %s (%s)",
         tutti_coll_name(a->coll), a->count * a->elem_size, a->nranks,
         a->in_place ? ", in place" : "", c->nops > 1 ? ", in a group" : "",
         p->path == TUTTI_PATH_SCHEDULE ? tutti_algo_get(sched_algo)->name : "",
         p->path == TUTTI_PATH_SCHEDULE       ? " on the schedules' kernel"
         : p->path == TUTTI_PATH_COPY_ENGINES ? "copy engines"
                                              : "mapped kernel",
         c->net ? " through the network proxy" : "", proto_name(p->proto), p->why);
  }
}
