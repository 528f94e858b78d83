/* Choosing the algorithm of each call: the one place that decides. */
#ifndef TUTTI_TUNE_TUNE_H
#define TUTTI_TUNE_TUNE_H

#include "algo/algo.h"
#include "nccl.h"

#include <stdint.h>

/* The schedule of a call: its algorithm and the rule that chose it. Device
 * calls may instead take a path that needs no schedule (the mapped kernel,
 * the copy engines: tutti_tune_device), which says so in its own TUNING
 * line. */
struct tutti_plan {
  enum tutti_algo_id algo;
  const char* why; /* a static sentence: the table's rule, NCCL_ALGO, a fallback */
};

/* The plan for `a` (host or device buffers, a->device): the table's first
 * row that matches and can run (TUTTI_TUNE's first), within what NCCL_ALGO
 * allows; when none can, the first allowed algorithm that runs it.
 * Never fails. With NCCL_DEBUG_SUBSYS=TUNING the plan and its reason are
 * printed once per distinct call shape. */
void tutti_tune_plan(const struct tutti_coll_args* a, struct tutti_plan* plan);

struct tutti_dev_caps;

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
  TUTTI_KNOB_COUNT
};
/* Its value: TUTTI_TUNE's, else the default (override.c). */
int64_t tutti_tune_knob(enum tutti_knob k);
const char* tutti_tune_knob_name(enum tutti_knob k);
/* The knob TUTTI_TUNE calls `name`, or -1; whether `v` is a value it takes. */
int tutti_tune_knob_find(const char* name);
int tutti_tune_knob_fits(enum tutti_knob k, int64_t v);
int64_t tutti_tune_knob_default(enum tutti_knob k);

/* TUTTI_TUNE's value now (environment or config file), NULL when unset. */
const char* tutti_param_tune(void);

/* Parses a TUTTI_TUNE value: its rows into at most `max` rules (none kept
 * when `rules` is NULL), its sizes into knobs[] (-1: not given; may be
 * NULL). The number of rows, or -1 with what is wrong in `err` (exposed
 * for tests). */
int tutti_tune_parse_override(const char* spec, struct tutti_tune_rule* rules, int max,
                              int64_t knobs[TUTTI_KNOB_COUNT], char* err, size_t errlen);
/* ncclInvalidArgument naming TUTTI_TUNE's mistake, at communicator creation. */
ncclResult_t tutti_tune_check(void);
/* table.c: the first row (TUTTI_TUNE's, then the defaults) that matches
 * `a` and whose algorithm is in `allowed` and can run here; TUTTI_ALGO_COUNT
 * when none. `caps`: what a device launch offers (then the device paths
 * may be chosen), NULL when a schedule is wanted. *why: the row's sentence. */
enum tutti_algo_id tutti_tune_table(const struct tutti_coll_args* a, unsigned allowed,
                                    const struct tutti_dev_caps* caps, const char** why);
/* Whether `algo` can run `a` here at all. */
int tutti_tune_table_can_run(const struct tutti_coll_args* a, enum tutti_algo_id algo);
/* The hierarchical allreduce's exchange among hosts, from the table. */
int tutti_tune_table_inter(const struct tutti_coll_args* a);

/* The hierarchical allreduce's exchange among hosts (coll_args.inter_algo). */
int tutti_tune_inter(const struct tutti_coll_args* a);

/* Non-zero when NCCL_ALGO names the algorithms (read once). */
int tutti_tune_algo_named(void);
/* The algorithms NCCL_ALGO allows for `coll` (a bit per enum tutti_algo_id). */
unsigned tutti_tune_allowed(enum tutti_coll coll);

/* Protocols a device call may use: NCCL_PROTO, read once (bits below). */
enum { TUTTI_PROTO_LL = 1, TUTTI_PROTO_SIMPLE = 2, TUTTI_PROTO_LL128 = 4, TUTTI_PROTO_ALL = 7 };
int tutti_tune_protocols(void);
/* An NCCL_PROTO value as the mask above; unset or nothing left: all (exposed for tests). */
int tutti_tune_parse_proto(const char* spec);

/* The path that runs a call (and that a TUNING line describes: part of its
 * call shape). TUTTI_PATH_LAUNCH: the schedules' kernel's launch details. */
enum { TUTTI_PATH_SCHEDULE, TUTTI_PATH_MAPPED, TUTTI_PATH_COPY_ENGINES, TUTTI_PATH_LAUNCH };

/* What a device communicator offers one launch (filled by src/device). */
struct tutti_dev_caps {
  int nops;           /* operations launched together */
  int known;          /* the mapped kernel and the copy engines implement the collective */
  int max_ranks;      /* the most ranks those paths take */
  int mapped_inboxes; /* the mapped kernel's inboxes exist (every peer mapped) */
  int ll128_inboxes;  /* and its LL128 inboxes (NVLink, agreed by every rank) */
  int ce_slots;       /* the copy engines' inboxes exist */
  int one_process;    /* every peer's memory belongs to this process */
  int premulsum;      /* the reduction scales by a scalar */
  int capturing;      /* the stream is being captured into a graph */
  int net;            /* some peer is reached through the network proxy */
};

/* A device call's plan: its path, protocol (TUTTI_PROTO_*) and the rule
 * that chose them, and how the path cuts the call. */
struct tutti_dev_plan {
  int path;
  int proto;
  const char* why;
  /* The mapped kernel: bytes per block, per round (simple, LL128: bytes
   * of lines), threads per block (LL); the copy engines: bytes per piece
   * and per block of the combining kernel. */
  size_t block_bytes;
  size_t round_bytes;
  int threads;
  size_t piece_bytes;
};

/* The plan for `a`, whose schedule is of `sched_algo`: the table's first
 * row that can run with `caps` (table.c holds the rules and where each was
 * measured; device.c what each path can take). */
void tutti_tune_device(const struct tutti_coll_args* a, enum tutti_algo_id sched_algo,
                       const struct tutti_dev_caps* caps, struct tutti_dev_plan* plan);
/* The memory a device communicator gives each path's inboxes, per rank. */
struct tutti_dev_memory {
  size_t mapped, mapped_ll128, ce;
};
void tutti_tune_device_memory(struct tutti_dev_memory* m);
/* Whether the schedules' kernel runs `a` in LL lines (`net`: some peer
 * through the network proxy). */
int tutti_tune_device_ll(const struct tutti_coll_args* a, int net);
/* The channels the schedules' kernel would give `a` before the launch's
 * own caps (NCCL_MIN_NCHANNELS, one per TUTTI_KNOB_CHANNEL bytes). */
size_t tutti_tune_device_channels(const struct tutti_coll_args* a);
/* Whether some size may take the mapped kernel's LL128 lines: only then
 * are its inboxes worth their memory. */
int tutti_tune_device_wants_ll128(void);
/* A call shape: collective, bytes, ranks, hosts, in place, buffers, path. */
uint64_t tutti_tune_shape(const struct tutti_coll_args* a, unsigned path);
/* Non-zero the first time `shape` is asked about in this process. */
int tutti_tune_first_sight(uint64_t shape);

/* Bytes of queue per connection: NCCL_BUFFSIZE, or what the placement
 * wants (host: 4 MB when every rank is alone on its host in a small job;
 * device: 4 MB, 1 MB through the network proxy). */
size_t tutti_tune_queue_bytes(int nranks, int nhosts);
size_t tutti_tune_device_queue_bytes(int net);

/* Bytes a ring round moves per step: half the smallest queue, so that a rank
 * one step ahead of its neighbour never fills the queue between them (which
 * could close a cycle of ranks all waiting to send). */
size_t tutti_tune_chunk(size_t queue_bytes, size_t piece_bytes);

/* Parses an NCCL_ALGO value into an allowed-mask per collective (exposed for tests). */
void tutti_tune_parse_algo(const char* spec, unsigned allowed[TUTTI_COLL_COUNT]);

#endif
