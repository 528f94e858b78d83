/* Between tune's files: the table, TUTTI_TUNE as parsed once, and how the
 * device paths cut a call. */
#ifndef TUTTI_TUNE_INTERNAL_H
#define TUTTI_TUNE_INTERNAL_H

#include "tune/tune.h"

/* A device launch as the table sees it: what its communicator offers, how
 * many calls it holds, whether this one scales by a scalar. */
struct tutti_tune_offer {
  const struct tutti_dev_caps* caps;
  int nops;
  int premulsum;
};

/* table.c: the first row (TUTTI_TUNE's, then the defaults) that matches
 * `a` and whose algorithm is in `allowed` and can run here; TUTTI_ALGO_COUNT
 * when none. `o`: a device launch (then the device paths may be chosen),
 * NULL when a schedule is wanted. *why: the row's sentence. */
enum tutti_algo_id tutti_tune_table(const struct tutti_coll_args* a, unsigned allowed,
                                    const struct tutti_tune_offer* o, const char** why);
/* Whether `algo` can run `a` as a schedule at all. */
int tutti_tune_table_can_run(const struct tutti_coll_args* a, enum tutti_algo_id algo);
/* The hierarchical allreduce's exchange among hosts, from the table. */
int tutti_tune_table_inter(const struct tutti_coll_args* a);

/* override.c: TUTTI_TUNE as parsed at its first use in this process. */
#define TUTTI_TUNE_MAX_RULES 64
struct tutti_tune_override {
  int ok; /* it parsed (else none of it applies, and communicator creation fails) */
  int nrules;
  struct tutti_tune_rule rules[TUTTI_TUNE_MAX_RULES];
  int64_t knobs[TUTTI_KNOB_COUNT]; /* -1: not given */
};
const struct tutti_tune_override* tutti_tune_override(void);

/* plan.c: no row of the table runs `a` as a schedule under NCCL_ALGO: the
 * first allowed algorithm that can, else any that implements it. */
enum tutti_algo_id tutti_tune_pick_allowed(const struct tutti_coll_args* a, const char** why);

/* device.c: the plan of one device call for the table's pick (a device
 * path, or TUTTI_ALGO_COUNT for none) and the schedule `sched` that runs it
 * otherwise: protocol and cut; the schedules' kernel's channels before the
 * launch shares its blocks among its calls. */
void tutti_tune_device_cut(const struct tutti_coll_args* a, const struct tutti_dev_caps* c,
                           enum tutti_algo_id pick, enum tutti_algo_id sched, struct tutti_plan* p);
/* The launch's share of blocks among its calls on the schedules' kernel,
 * and its threads. */
void tutti_tune_device_share(const struct tutti_tune_call* calls, int n,
                             const struct tutti_dev_caps* c, struct tutti_plan* plans);
/* Whether the schedules' kernel runs `a` in LL lines (`net`: some peer
 * through the network proxy). */
int tutti_tune_device_ll(const struct tutti_coll_args* a, int net);
/* The channels the schedules' kernel wishes `a` before any cap
 * (NCCL_MIN_NCHANNELS, one per TUTTI_KNOB_CHANNEL bytes). */
size_t tutti_tune_device_channels(const struct tutti_coll_args* a);

/* tune.c: bytes of a device queue per connection (NCCL_BUFFSIZE; else
 * 4 MB, 1 MB through the network proxy). */
size_t tutti_tune_device_queue_bytes(int net);

/* Shapes of the cut's TRACE lines (seen.c keys; apart from the paths'). */
#define TUTTI_TUNE_SHAPE_LAUNCH 3

#endif
