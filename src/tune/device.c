/* Device calls: which path runs a call (the schedules' kernel, the direct
 * kernel, the copy engines) and with which protocol. The device executor
 * describes what its communicator offers (struct tutti_dev_caps) and runs
 * what this returns; every choice is a function of the call's arguments,
 * those capabilities and the environment only, so every rank launches the
 * same way.
 *
 * The defaults were measured on 2 x H200 (bench/RESULTS.md, "GPU"):
 * - The direct kernel (one handshake instead of a ring's three) halves the
 *   time of small collectives and, with every thread pushing and the
 *   combine inlined, beats the ring to 16 MB per rank (8 MB allreduce 45.6
 *   against 55.4 us; reduce-scatter and all-gather of 8 MB per rank 47.9 /
 *   47.1 against 58.0 / 53.7); from 32 MB the ring's pipeline catches up.
 *   A broadcast's ring is a plain chain already at the link: direct is
 *   slower from 8 MB, so broadcasts stop at 4 MB. With more ranks an
 *   allreduce, broadcast or reduce pushes n-1 copies out of one GPU: up to
 *   1 MB (not measured on more than two GPUs).
 * - Its lines: LL up to 1 MB per rank (no fence, no flag round trip); LL128
 *   off unless asked (NCCL_PROTO=LL128 or TUTTI_DEVICE_DIRECT_LL128_MAX_BYTES)
 *   until measured against the simple rounds on NVLink.
 * - The copy engines: reduce-scatter from 32 MB per rank, allreduce from
 *   64 MB when one process drives every GPU (1.07-1.13x NCCL there; with
 *   one process per GPU 5-25% slower than the ring). Two ranks only: on
 *   4 x H200 the path ran 3x slower than the ring (allreduce, one process,
 *   128 MB 1996 us against 639; reduce-scatter of 32 MB per rank 595, NCCL
 *   345).
 * - The schedules' kernel: LL up to 8 KB; one channel per 64 KB. */
#include <stdint.h>

#include "tune/tune.h"
#include "util/log.h"
#include "util/param.h"

static TUTTI_PARAM(direct_on, "TUTTI_DEVICE_DIRECT", 1);
/* -1: 16 MB with two ranks (broadcasts 4 MB), 1 MB with more. */
static TUTTI_PARAM(direct_max, "TUTTI_DEVICE_DIRECT_MAX_BYTES", -1);
static TUTTI_PARAM(direct_ll_max, "TUTTI_DEVICE_DIRECT_LL_MAX_BYTES", 1 << 20);
static TUTTI_PARAM(direct_ll128_max, "TUTTI_DEVICE_DIRECT_LL128_MAX_BYTES", 0);
static TUTTI_PARAM(ce_on, "TUTTI_DEVICE_CE", 1);
/* -1: the measured defaults above. */
static TUTTI_PARAM(ce_min, "TUTTI_DEVICE_CE_MIN_BYTES", -1);
static TUTTI_PARAM(ll_max, "TUTTI_DEVICE_LL_MAX_BYTES", 8 * 1024);
static TUTTI_PARAM(min_nchannels, "NCCL_MIN_NCHANNELS", 1);
static TUTTI_PARAM(channel_bytes, "TUTTI_DEVICE_CHANNEL_BYTES", 64 * 1024);

/* The paths other than the schedules' kernel take single collectives they
 * know; with NCCL_ALGO naming algorithms, only those tune gave Direct. */
static int single_known(const struct tutti_coll_args* a, enum tutti_algo_id sched_algo,
                        const struct tutti_dev_caps* c) {
  return c->nops == 1 && c->known && a->count * a->elem_size > 0 && a->nranks >= 2 &&
         a->nranks <= c->max_ranks && (!tutti_tune_algo_named() || sched_algo == TUTTI_ALGO_DIRECT);
}

static int ce_fits(const struct tutti_coll_args* a, const struct tutti_dev_caps* c) {
  const size_t bytes = a->count * a->elem_size;
  const int64_t min = tutti_param_ce_min();
  size_t from = SIZE_MAX;
  if (min >= 0) {
    from = (size_t)min;
  } else if (a->nranks != 2) {
    /* off: see above */
  } else if (a->coll == TUTTI_COLL_REDUCESCATTER) {
    from = (size_t)32 << 20;
  } else if (a->coll == TUTTI_COLL_ALLREDUCE && c->one_process) {
    from = (size_t)64 << 20;
  }
  return tutti_param_ce_on() && c->ce_slots && bytes >= from && !c->premulsum && !c->capturing;
}

static int direct_fits(const struct tutti_coll_args* a, const struct tutti_dev_caps* c) {
  const int64_t max = tutti_param_direct_max();
  const size_t two = a->coll == TUTTI_COLL_BROADCAST ? (size_t)4 << 20 : (size_t)16 << 20;
  const size_t limit = max >= 0 ? (size_t)max : a->nranks == 2 ? two : (size_t)1 << 20;
  return tutti_param_direct_on() && c->direct_lanes && a->count * a->elem_size <= limit;
}

/* The direct kernel's lines: LL to its limit, then LL128, then simple
 * rounds; a protocol NCCL_PROTO leaves out passes its sizes to the next
 * one allowed. */
static int direct_proto(const struct tutti_coll_args* a, const struct tutti_dev_caps* c) {
  const size_t bytes = a->count * a->elem_size;
  const int proto = tutti_tune_protocols();
  const int ll128_ok = (proto & TUTTI_PROTO_LL128) && c->ll128_lanes;
  if ((proto & TUTTI_PROTO_LL) && bytes <= (size_t)tutti_param_direct_ll_max()) {
    return TUTTI_PROTO_LL;
  }
  if (ll128_ok && bytes <= (size_t)tutti_param_direct_ll128_max()) {
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
         (!(m & TUTTI_PROTO_SIMPLE) || a->count * a->elem_size <= (size_t)tutti_param_ll_max());
}

size_t tutti_tune_device_channels(const struct tutti_coll_args* a) {
  size_t per = (size_t)tutti_param_channel_bytes();
  per = per < 4096 ? 4096 : per;
  size_t ch = (a->count * a->elem_size + per - 1) / per;
  const int64_t lo = tutti_param_min_nchannels();
  return ch < (size_t)lo ? (size_t)lo : ch;
}

int tutti_tune_device_wants_ll128(void) {
  const int proto = tutti_tune_protocols();
  return (proto & TUTTI_PROTO_LL128) &&
         (tutti_param_direct_ll128_max() > 0 || !(proto & TUTTI_PROTO_SIMPLE));
}

static const char* proto_name(int proto) {
  return proto == TUTTI_PROTO_LL ? "LL" : proto == TUTTI_PROTO_LL128 ? "LL128" : "Simple";
}

static void choose(const struct tutti_coll_args* a, enum tutti_algo_id sched_algo,
                   const struct tutti_dev_caps* c, struct tutti_dev_plan* p) {
  p->path = TUTTI_PATH_SCHEDULE;
  p->proto = tutti_tune_device_ll(a, c->net) ? TUTTI_PROTO_LL : TUTTI_PROTO_SIMPLE;
  p->why = "a group, or a collective or rank count the direct paths do not take";
  if (!single_known(a, sched_algo, c)) {
    return;
  }
  p->why = "above the direct kernel's limit, below the copy engines'";
  if (ce_fits(a, c)) {
    p->path = TUTTI_PATH_COPY_ENGINES;
    p->proto = TUTTI_PROTO_SIMPLE;
    p->why =
        "copy engines: two ranks, from TUTTI_DEVICE_CE_MIN_BYTES (32 MB reduce-scatter, "
        "64 MB allreduce in one process)";
  } else if (direct_fits(a, c)) {
    p->path = TUTTI_PATH_DIRECT_KERNEL;
    p->proto = direct_proto(a, c);
    p->why = "direct kernel: peers mapped, up to TUTTI_DEVICE_DIRECT_MAX_BYTES";
  }
}

void tutti_tune_device(const struct tutti_coll_args* a, enum tutti_algo_id sched_algo,
                       const struct tutti_dev_caps* c, struct tutti_dev_plan* p) {
  choose(a, sched_algo, c, p);
  if (tutti_log_wants(TUTTI_LOG_INFO, TUTTI_TUNING) &&
      tutti_tune_first_sight(tutti_tune_shape(a, (unsigned)p->path) + (uint64_t)c->nops)) {
    INFO(TUTTI_TUNING, "%s of %zu bytes, %d ranks%s%s, device buffers: %s%s%s, %s (%s)",
         tutti_coll_name(a->coll), a->count * a->elem_size, a->nranks,
         a->in_place ? ", in place" : "", c->nops > 1 ? ", in a group" : "",
         p->path == TUTTI_PATH_SCHEDULE ? tutti_algo_get(sched_algo)->name : "",
         p->path == TUTTI_PATH_SCHEDULE       ? " on the schedules' kernel"
         : p->path == TUTTI_PATH_COPY_ENGINES ? "copy engines"
                                              : "direct kernel",
         c->net ? " through the network proxy" : "", proto_name(p->proto), p->why);
  }
}
