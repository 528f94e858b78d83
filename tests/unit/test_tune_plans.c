/* Every decision tune makes, as a table: for call shapes x what a device
 * communicator offers x the environment, the path, algorithm, protocol,
 * channels, threads, blocks, rounds and pieces of each call, the device
 * communicator's setup-time sizes and the wait policy, compared line for
 * line with tune_plans.golden. The golden table was written by the
 * decisions as they stood before they moved into one place (tune's
 * functions then, and the device executor's launch arithmetic transcribed:
 * this file's first version); a deliberate change of the table rewrites it
 * (TUTTI_PLANS_WRITE=<file>). Pure functions: no GPU, no communicator. Each
 * environment runs in a child pinned to one core (the table reads the
 * variables and the cores once per process). */
#define _GNU_SOURCE
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "harness.h"
#include "tune/tune.h"
#include "util/check.h"

/* The device executor's limits as built (device/work.h, kernels/mapped.h,
 * kernels/kernel.h, net/net.h, work_large's blocks). */
#define L_MAX_CHANNELS 64
#define L_NET_CHANNELS 4
#define L_MAX_THREADS 512
#define L_OP_CTAS 128
#define L_LOOP_CHANNELS 8
#define L_WORK_CTAS 128
#define L_MAPPED_MAX_RANKS 8
#define L_MAPPED_CHANNELS 128
#define L_MAPPED_LL_CHANNELS 128
#define L_MAPPED_LL_CHANNEL_BYTES (16 * 1024)
#define L_LL128_LINE 128
#define L_LL128_DATA 120
#define L_SLOTS 8
#define L_CE_SLOTS 4

/* What one variant of a device communicator offers. */
struct facts {
  const char* name;
  int one_process, capturing, premul, net, gpu_regions, nvlink;
  int nch, nthreads, ctas, mctas; /* 0: the setup's */
};

/* The setup-time sizes of a device communicator. */
struct setup {
  int nthreads, nch, net_nch;
  size_t slot_bytes, net_slot_bytes;
  size_t mapped_mem, ll128_mem, ce_mem;
  int wants_ll128;
};

/* One operation's decision, as the executor runs it. */
struct res {
  int path, algo, proto;
  const char* why;
  int channels, threads;
  unsigned nb, round, slots, slot_bytes;    /* the mapped kernel */
  size_t piece, npieces, nb_first, nb_last; /* the copy engines */
};

/* The inboxes a layout gives `n` ranks (device/layout.cu). */
static uint64_t mapped_chan(int n, int gpu, uint64_t budget) {
  if (!gpu || n < 2 || n > L_MAPPED_MAX_RANKS || budget == 0) {
    return 0;
  }
  uint64_t c = budget / ((uint64_t)(n - 1) * L_MAPPED_CHANNELS) / 4096 * 4096;
  return c < 8192 ? 0 : c;
}
static uint64_t ll128_chan(int n, uint64_t simple, uint64_t budget) {
  if (simple == 0 || budget == 0) {
    return 0;
  }
  uint64_t c = budget / ((uint64_t)(n - 1) * L_MAPPED_CHANNELS) / 4096 * 4096;
  return c < 4096 ? 0 : c;
}
static uint64_t ce_slot(int n, int gpu, uint64_t budget) {
  if (!gpu || n < 2 || n > L_MAPPED_MAX_RANKS || budget == 0) {
    return 0;
  }
  uint64_t s = budget / (L_CE_SLOTS * (uint64_t)(n - 1)) / 4096 * 4096;
  return s < (64 << 10) ? 0 : s;
}

static int dcoll_known(enum tutti_coll c) {
  return c == TUTTI_COLL_ALLREDUCE || c == TUTTI_COLL_REDUCESCATTER || c == TUTTI_COLL_ALLGATHER ||
         c == TUTTI_COLL_BROADCAST || c == TUTTI_COLL_REDUCE;
}

/* ---- The decisions under test: tune's, in one place (tune/plan.c,
 * tune/device.c, tune/setup.c). ---- */

static struct tutti_dev_limits limits(void) {
  const struct tutti_dev_limits l = {L_MAX_CHANNELS,       L_NET_CHANNELS,
                                     L_MAX_THREADS,        L_OP_CTAS,
                                     L_LOOP_CHANNELS,      L_WORK_CTAS,
                                     L_MAPPED_MAX_RANKS,   L_MAPPED_CHANNELS,
                                     L_MAPPED_LL_CHANNELS, L_MAPPED_LL_CHANNEL_BYTES / 2,
                                     L_LL128_LINE,         L_LL128_DATA};
  return l;
}

static void subject_setup(struct setup* s) {
  const struct tutti_dev_limits lim = limits();
  struct tutti_dev_sizes z;
  tutti_tune_device_setup(&lim, &z);
  s->nthreads = z.threads;
  s->nch = z.channels;
  s->net_nch = z.net_channels;
  /* The device's slots: an eighth of a queue (dev_comm.cu). */
  s->slot_bytes = z.queue_bytes / L_SLOTS / 16 * 16;
  s->net_slot_bytes = z.net_queue_bytes / L_SLOTS / 16 * 16;
  s->mapped_mem = z.mapped_memory;
  s->ll128_mem = z.mapped_ll128_memory;
  s->ce_mem = z.ce_memory;
  s->wants_ll128 = z.wants_ll128;
}

static void subject_wait(int local, int* spin, int* spin_max, int* yield) {
  struct tutti_wait_sizes w;
  tutti_tune_wait(local, &w);
  *spin = w.spin;
  *spin_max = w.spin_max;
  *yield = w.yield;
}

static void subject_host(const struct tutti_coll_args* a, struct res* r) {
  struct tutti_plan p;
  tutti_tune_plan(a, &p);
  r->path = p.path;
  r->algo = p.algo;
  r->why = p.why;
}

/* A launch of `n` operations on a communicator offering `f` (its layout
 * from setup `s`). */
static void subject_launch(const struct tutti_coll_args* as, const int* premul, int n,
                           const struct facts* f, const struct setup* s, struct res* out) {
  const int nr = as[0].nranks;
  struct tutti_dev_caps c;
  memset(&c, 0, sizeof c);
  c.lim = limits();
  for (int k = 0; k < TUTTI_COLL_COUNT; k++) {
    c.colls |= dcoll_known((enum tutti_coll)k) ? 1u << k : 0;
  }
  c.one_process = f->one_process;
  c.net = f->net;
  c.channels = f->nch ? f->nch : f->net ? s->net_nch : s->nch;
  c.threads = f->nthreads ? f->nthreads : s->nthreads;
  c.ctas = f->ctas;
  c.mapped_ctas = f->mctas;
  c.capturing = f->capturing;
  c.mapped_chan_bytes = mapped_chan(nr, f->gpu_regions, s->mapped_mem);
  c.ll128_chan_bytes =
      f->nvlink && s->wants_ll128 ? ll128_chan(nr, c.mapped_chan_bytes, s->ll128_mem) : 0;
  c.ce_slot_bytes = ce_slot(nr, f->gpu_regions, s->ce_mem);
  struct tutti_tune_call calls[64];
  struct tutti_plan plans[64];
  memset(calls, 0, sizeof calls);
  for (int i = 0; i < n; i++) {
    calls[i].args = &as[i];
    calls[i].premulsum = premul[i];
  }
  tutti_tune_launch(calls, n, &c, plans);
  for (int i = 0; i < n; i++) {
    const struct tutti_plan* p = &plans[i];
    struct res* r = &out[i];
    memset(r, 0, sizeof *r);
    r->path = p->path;
    r->algo = p->algo;
    r->proto = p->proto;
    r->why = p->why;
    r->channels = p->channels;
    r->threads = p->threads;
    if (p->path == TUTTI_PATH_MAPPED) {
      r->nb = (unsigned)p->blocks;
      r->round = (unsigned)p->round_bytes;
      r->slots = (unsigned)p->slots;
      r->slot_bytes = (unsigned)p->slot_bytes;
    } else if (p->path == TUTTI_PATH_COPY_ENGINES) {
      const size_t part = as[i].count * as[i].elem_size;
      r->piece = p->piece_bytes;
      r->npieces = (part + p->piece_bytes - 1) / p->piece_bytes;
      r->nb_first = r->npieces > 1 ? (size_t)p->blocks : (size_t)p->last_blocks;
      r->nb_last = (size_t)p->last_blocks;
    }
  }
}

/* ---- The table. ---- */

static FILE* out;
static const char* whys[64];
static int nwhys;

static int why_index(const char* w) {
  for (int i = 0; i < nwhys; i++) {
    if (whys[i] == w || (w != NULL && whys[i] != NULL && strcmp(whys[i], w) == 0)) {
      return i;
    }
  }
  whys[nwhys] = w;
  return nwhys < 63 ? nwhys++ : 63;
}

static const char* proto_name(int p) {
  return p == TUTTI_PROTO_LL ? "LL" : p == TUTTI_PROTO_LL128 ? "LL128" : "Simple";
}

static const char* coll_short(enum tutti_coll c) {
  static const char* names[TUTTI_COLL_COUNT] = {"AR",  "BC", "RD", "AG", "RS",
                                                "A2A", "GA", "SC", "SE", "RE"};
  return names[c];
}

/* A call: its collective, bytes and ranks, then only what differs from
 * one host, out of place, root 0 (a peer: its number). */
static void print_args(const struct tutti_coll_args* a) {
  fprintf(out, "%s %zu n%d", coll_short(a->coll), a->count * a->elem_size, a->nranks);
  if (a->nhosts != 1 || a->max_local != a->nranks) {
    fprintf(out, " h%d l%d", a->nhosts, a->max_local);
  }
  if (a->root != 0 || a->coll == TUTTI_COLL_SEND || a->coll == TUTTI_COLL_RECV) {
    fprintf(out, " to%d", a->root);
  }
  fprintf(out, "%s%s", a->in_place ? " ip" : "", a->deterministic ? " det" : "");
}

static void print_res(const struct res* r) {
  if (r->path == TUTTI_PATH_SCHEDULE) {
    fprintf(out, " => %s %s c%d t%d", tutti_algo_get((enum tutti_algo_id)r->algo)->name,
            proto_name(r->proto), r->channels, r->threads);
  } else if (r->path == TUTTI_PATH_MAPPED) {
    fprintf(out, " => mapped %s b%u t%d r%u s%u", proto_name(r->proto), r->nb, r->threads, r->round,
            r->slots);
    if (r->slot_bytes != 0) {
      fprintf(out, " sb%u", r->slot_bytes);
    }
  } else {
    fprintf(out, " => ce p%zu x%zu b%zu/%zu t%d", r->piece, r->npieces, r->nb_first, r->nb_last,
            r->threads);
  }
  fprintf(out, " #%d\n", why_index(r->why));
}

static struct tutti_coll_args make(enum tutti_coll coll, size_t bytes, int n, int device) {
  struct tutti_coll_args a;
  memset(&a, 0, sizeof a);
  a.coll = coll;
  a.count = bytes / 4;
  a.elem_size = 4;
  a.nranks = n;
  a.nhosts = 1;
  a.max_local = n;
  a.root = coll == TUTTI_COLL_SEND || coll == TUTTI_COLL_RECV ? 1 % n : 0;
  a.device = device;
  return a;
}

static const enum tutti_coll every_coll[] = {
    TUTTI_COLL_ALLREDUCE, TUTTI_COLL_REDUCESCATTER, TUTTI_COLL_ALLGATHER, TUTTI_COLL_BROADCAST,
    TUTTI_COLL_REDUCE,    TUTTI_COLL_ALLTOALL,      TUTTI_COLL_GATHER,    TUTTI_COLL_SCATTER,
    TUTTI_COLL_SEND,      TUTTI_COLL_RECV};
static const enum tutti_coll main_colls[] = {TUTTI_COLL_ALLREDUCE, TUTTI_COLL_REDUCESCATTER,
                                             TUTTI_COLL_ALLGATHER, TUTTI_COLL_BROADCAST,
                                             TUTTI_COLL_SEND};
static const size_t all_sizes[] = {4,        4096,     8192,           8196,
                                   65536,    1 << 20,  (1 << 20) + 16, 4 << 20,
                                   16 << 20, 32 << 20, 64 << 20,       (300u << 20) + 12};
static const size_t few_sizes[] = {4, 8196, 1 << 20, 4 << 20, 64 << 20, (300u << 20) + 12};

#define N(x) (sizeof(x) / sizeof((x)[0]))

static const struct facts variants[] = {
    {"base", 0, 0, 0, 0, 1, 0, 0, 0, 132, 132},     {"oneproc", 1, 0, 0, 0, 1, 0, 0, 0, 132, 132},
    {"captured", 1, 1, 1, 0, 1, 0, 0, 0, 132, 132}, {"nvlink", 0, 0, 0, 0, 1, 1, 0, 0, 132, 132},
    {"hostmem", 0, 0, 0, 0, 0, 0, 0, 0, 132, 132},  {"net", 0, 0, 0, 1, 0, 0, 0, 0, 132, 132},
    {"small", 0, 0, 0, 0, 1, 1, 8, 256, 16, 8},
};

static void device_line(const char* tag, const struct tutti_coll_args* a, int premul,
                        const struct facts* f, const struct setup* s) {
  struct res r;
  subject_launch(a, &premul, 1, f, s, &r);
  fprintf(out, "D %s%s%s ", f->name, tag, premul ? " premul" : "");
  print_args(a);
  print_res(&r);
}

static void device_table(const struct setup* s, int full) {
  const int ranks[] = {1, 2, 4, 9, 16};
  for (size_t v = 0; v < N(variants); v++) {
    const struct facts* f = &variants[v];
    const int wide = full && v == 0;
    const enum tutti_coll* colls = wide ? every_coll : main_colls;
    const size_t ncolls = wide ? N(every_coll) : N(main_colls);
    const size_t* sizes = wide ? all_sizes : few_sizes;
    const size_t nsizes = wide ? N(all_sizes) : N(few_sizes);
    /* Beyond the defaults: the base, a small GPU, and NVLink where LL128
     * is wanted. */
    if (!full && v != 0 && v != 6 && !(v == 3 && s->wants_ll128)) {
      continue;
    }
    const size_t k0 = wide ? 0 : v == 6 ? 2 : 1, k1 = wide ? N(ranks) : 3;
    for (size_t c = 0; c < ncolls; c++) {
      for (size_t b = 0; b < nsizes; b++) {
        for (size_t k = k0; k < k1; k++) {
          struct tutti_coll_args a = make(colls[c], sizes[b], ranks[k], 1);
          if (f->net) {
            a.nhosts = 2;
            a.max_local = (ranks[k] + 1) / 2;
          }
          device_line("", &a, 0, f, s);
          const int reduces = colls[c] == TUTTI_COLL_ALLREDUCE ||
                              colls[c] == TUTTI_COLL_REDUCESCATTER || colls[c] == TUTTI_COLL_REDUCE;
          if (wide && reduces && (b % 3) == 0) {
            a.deterministic = 1;
            device_line("", &a, 0, f, s);
            a.deterministic = 0;
            device_line("", &a, 1, f, s);
          }
          if (wide && (b % 4) == 1) {
            a.in_place = 1;
            device_line("", &a, 0, f, s);
          }
        }
      }
    }
  }
  /* A zero-byte send. */
  struct tutti_coll_args z = make(TUTTI_COLL_SEND, 0, 2, 1);
  device_line("", &z, 0, &variants[0], s);
}

/* Groups: one launch of several operations. */
static void group_line(const char* name, const struct tutti_coll_args* as, int n,
                       const struct facts* f, const struct setup* s) {
  struct res r[64];
  int premul[64] = {0};
  subject_launch(as, premul, n, f, s, r);
  fprintf(out, "G %s %s n%d %zu x%d t%d #%d:", name, f->name, as[0].nranks,
          as[0].count * as[0].elem_size, n, r[0].threads, why_index(r[0].why));
  for (int i = 0; i < n; i++) {
    const int p2p = as[i].coll == TUTTI_COLL_SEND || as[i].coll == TUTTI_COLL_RECV;
    fprintf(out, " %s", coll_short(as[i].coll));
    if (p2p) {
      fprintf(out, "%d", as[i].root);
    }
    fprintf(out, ":%s/%s/c%d", tutti_algo_get((enum tutti_algo_id)r[i].algo)->name,
            proto_name(r[i].proto), r[i].channels);
    CHECK(r[i].threads == r[0].threads, "one launch, one count of threads");
  }
  fputc('\n', out);
}

static void group_table(const struct setup* s, int several) {
  struct tutti_coll_args as[64];
  const int ranks[] = {2, 4, 8};
  const size_t vs[] = {0, 6, 5};
  for (size_t vi = 0; vi < (several ? N(vs) : 1); vi++) {
    const struct facts* f = &variants[vs[vi]];
    for (size_t k = 0; k < N(ranks); k++) {
      const int nr = ranks[k];
      const size_t sizes[] = {4096, 1 << 20, 64 << 20};
      for (size_t b = 0; b < N(sizes); b++) {
        int n = 0;
        for (int p = 0; p < nr; p++) { /* a send and a receive per peer, itself too */
          as[n] = make(TUTTI_COLL_SEND, sizes[b], nr, 1);
          as[n++].root = p;
          as[n] = make(TUTTI_COLL_RECV, sizes[b], nr, 1);
          as[n++].root = p;
        }
        group_line("p2p", as, n, f, s);
        as[0] = make(TUTTI_COLL_ALLREDUCE, sizes[b], nr, 1);
        as[1] = make(TUTTI_COLL_ALLGATHER, sizes[b] / 4, nr, 1);
        as[2] = make(TUTTI_COLL_REDUCESCATTER, sizes[b] / 2, nr, 1);
        as[2].deterministic = 1;
        group_line("mixed", as, 3, f, s);
        for (n = 0; n < 12 && b == 1; n++) {
          as[n] = make(TUTTI_COLL_ALLREDUCE, sizes[b], nr, 1);
        }
        if (b == 1) {
          group_line("ar12", as, 12, f, s);
        }
      }
    }
  }
  /* As many operations as one launch takes. */
  for (int n = 0; n < 32; n++) {
    as[n] = make(n % 2 ? TUTTI_COLL_ALLGATHER : TUTTI_COLL_ALLREDUCE, 8192, 16, 1);
  }
  group_line("max", as, 32, &variants[0], s);
}

static void host_table(int full) {
  struct {
    int n, h, l;
  } places[] = {{2, 1, 2}, {4, 1, 4}, {8, 2, 4}, {16, 4, 4}, {4, 4, 1}, {5, 5, 1}};
  const size_t sizes[] = {4, 65536, 1 << 20, 16 << 20, 64 << 20};
  const size_t nplaces = full ? N(places) : 2;
  for (size_t c = 0; c < N(every_coll); c++) {
    for (size_t b = full ? 0 : 1; b < N(sizes); b += full ? 1 : 2) {
      for (size_t k = 0; k < nplaces; k++) {
        for (int kind = 0; kind < (full && places[k].h == 1 ? 3 : 1); kind++) {
          struct tutti_coll_args a = make(every_coll[c], sizes[b], places[k].n, 0);
          a.nhosts = places[k].h;
          a.max_local = places[k].l;
          a.can_pull = places[k].h == 1 ? kind : 0;
          a.board_bytes = places[k].h == 1 && kind > 0 ? 1 << 20 : 0;
          a.in_place = kind == 2;
          a.inter_algo = tutti_tune_inter(&a);
          struct res r;
          memset(&r, 0, sizeof r);
          subject_host(&a, &r);
          fprintf(out, "H ");
          print_args(&a);
          fprintf(out, " pull%d board%d => %s inter %s #%d\n", a.can_pull, a.board_bytes != 0,
                  tutti_algo_get((enum tutti_algo_id)r.algo)->name,
                  tutti_algo_get((enum tutti_algo_id)a.inter_algo)->name, why_index(r.why));
        }
      }
    }
  }
}

/* The environments the table is made under. */
/* host: 0 no host calls, 1 a few, 2 many; full: every device call shape;
 * -1 none; groups: 0 none, 1 on the base variant, 2 on several. */
static const struct {
  const char* name;
  const char* vars[4];
  int host, full, groups;
} envs[] = {
    {"defaults", {NULL}, 2, 1, 2},
    {"proto-ll128", {"NCCL_PROTO=LL128"}, 0, 0, 1},
    {"proto-simple", {"NCCL_PROTO=Simple"}, 0, 0, 0},
    {"proto-ll", {"NCCL_PROTO=LL"}, 0, 0, 0},
    {"proto-no-ll", {"NCCL_PROTO=^LL"}, 0, 0, 0},
    {"algo-no-device-paths", {"NCCL_ALGO=^Mapped,CE"}, 0, 0, 0},
    {"algo-tree", {"NCCL_ALGO=Tree"}, 1, 0, 1},
    {"algo-per-coll", {"NCCL_ALGO=allreduce:direct;broadcast:^ring,mapped"}, 1, 0, 0},
    {"tune-ce", {"TUTTI_TUNE=all:1-inf:@ce;ce.piece=8m;ce.block=16k;ce.memory=1m"}, 0, 0, 0},
    {"tune-ll128",
     {"NCCL_PROTO=LL128",
      "TUTTI_TUNE=all:0-1g:@mapped;mapped.ll128_memory=4m;mapped.ll128_round=1k;"
      "mapped.ll128_block=16k"},
     0,
     0,
     1},
    {"tune-ll128-sizes", {"TUTTI_TUNE=mapped.ll=64k;mapped.ll128=2m"}, 0, 0, 0},
    {"tune-rounds",
     {"TUTTI_TUNE=mapped.memory=2m;mapped.round=2k;mapped.ll=256k;mapped.ll_block=64k;"
      "mapped.ll_threads=100"},
     0,
     0,
     0},
    {"tune-rows",
     {"TUTTI_TUNE=allreduce:0-64k:@ring#64k-inf:@direct;reducescatter:0-inf:@pull;"
      "broadcast:0-inf:@hier;allgather:0-1m:@board"},
     1,
     0,
     1},
    {"channels", {"NCCL_MIN_NCHANNELS=4", "NCCL_MAX_NCHANNELS=8", "NCCL_NTHREADS=256"}, 0, 0, 2},
    {"channels-few",
     {"NCCL_MAX_NCHANNELS=2", "NCCL_NTHREADS=1000", "TUTTI_TUNE=channel=4k;ll=0"},
     0,
     0,
     1},
    {"threads-odd", {"NCCL_NTHREADS=100", "NCCL_MAX_NCHANNELS=0", "NCCL_BUFFSIZE=65536"}, 0, 0, 1},
    {"buffsize", {"NCCL_BUFFSIZE=16777216", "TUTTI_SPIN=3", "TUTTI_YIELD=7"}, 0, -1, 0},
    {"bad-tune", {"TUTTI_TUNE=allreduce:0-64k:@bogus;ce.piece=8m"}, 1, 0, 0},
};

static const char* cleared[] = {"NCCL_ALGO",          "NCCL_PROTO",         "TUTTI_TUNE",
                                "NCCL_MIN_NCHANNELS", "NCCL_MAX_NCHANNELS", "NCCL_NTHREADS",
                                "NCCL_BUFFSIZE",      "TUTTI_SPIN",         "TUTTI_YIELD",
                                "NCCL_P2P_DISABLE",   "NCCL_CUMEM_ENABLE",  "NCCL_DEBUG"};

static void child(size_t e, int fd) {
  out = fdopen(fd, "w");
  cpu_set_t set, one;
  CPU_ZERO(&one);
  if (sched_getaffinity(0, sizeof set, &set) == 0) {
    for (int c = 0; c < CPU_SETSIZE; c++) {
      if (CPU_ISSET(c, &set)) {
        CPU_SET(c, &one);
        break;
      }
    }
    sched_setaffinity(0, sizeof one, &one);
  }
  for (size_t i = 0; i < N(cleared); i++) {
    unsetenv(cleared[i]);
  }
  setenv("NCCL_CONF_FILE", "/dev/null", 1);
  for (int i = 0; i < 4 && envs[e].vars[i] != NULL; i++) {
    char buf[512];
    snprintf(buf, sizeof buf, "%s", envs[e].vars[i]);
    char* eq = strchr(buf, '=');
    *eq = '\0';
    setenv(buf, eq + 1, 1);
  }
  fprintf(out, "== %s\n", envs[e].name);
  ncclResult_t rc = tutti_tune_check();
  fprintf(out, "check %d %s\n", (int)rc, rc == ncclSuccess ? "" : tutti_last_error());
  struct setup s;
  subject_setup(&s);
  fprintf(out,
          "S threads %d channels %d net %d slot %zu net %zu memory %zu ll128 %zu ce %zu "
          "wants_ll128 %d\n",
          s.nthreads, s.nch, s.net_nch, s.slot_bytes, s.net_slot_bytes, s.mapped_mem, s.ll128_mem,
          s.ce_mem, s.wants_ll128);
  const int locals[] = {1, 2, 8};
  for (size_t i = 0; i < N(locals); i++) {
    int spin, spin_max, yield;
    subject_wait(locals[i], &spin, &spin_max, &yield);
    fprintf(out, "W local %d spin %d max %d yield %d\n", locals[i], spin, spin_max, yield);
  }
  if (envs[e].host > 0) {
    host_table(envs[e].host > 1);
  }
  if (envs[e].full >= 0) {
    device_table(&s, envs[e].full);
  }
  if (envs[e].groups > 0) {
    group_table(&s, envs[e].groups > 1);
  }
  for (int i = 0; i < nwhys; i++) {
    fprintf(out, "#%d %s\n", i, whys[i] != NULL ? whys[i] : "(none)");
  }
  fclose(out);
  _exit(0);
}

/* The whole table, one child per environment. */
static char* make_table(size_t* len) {
  size_t cap = 1 << 20, n = 0;
  char* text = malloc(cap);
  for (size_t e = 0; e < N(envs) && text != NULL; e++) {
    int fds[2];
    if (pipe(fds) != 0) {
      free(text);
      return NULL;
    }
    fflush(NULL);
    pid_t pid = fork();
    if (pid == 0) {
      close(fds[0]);
      child(e, fds[1]);
    }
    close(fds[1]);
    ssize_t k;
    for (;;) {
      if (n + 65536 > cap) {
        cap *= 2;
        char* t = realloc(text, cap);
        if (t == NULL) {
          break;
        }
        text = t;
      }
      k = read(fds[0], text + n, 65536);
      if (k <= 0) {
        break;
      }
      n += (size_t)k;
    }
    close(fds[0]);
    int st = 0;
    waitpid(pid, &st, 0);
    CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0, "environment %s: the child failed", envs[e].name);
  }
  *len = n;
  return text;
}

static char* read_file(const char* path, size_t* len) {
  FILE* f = fopen(path, "r");
  if (f == NULL) {
    return NULL;
  }
  fseek(f, 0, SEEK_END);
  long sz = ftell(f);
  fseek(f, 0, SEEK_SET);
  char* t = malloc((size_t)sz + 1);
  *len = t != NULL ? fread(t, 1, (size_t)sz, f) : 0;
  fclose(f);
  return t;
}

/* The first lines that differ, for the reader. */
static void show_differences(const char* want, size_t wn, const char* got, size_t gn) {
  size_t i = 0, j = 0;
  int line = 1, shown = 0;
  while (i < wn && j < gn && shown < 10) {
    const char* we = memchr(want + i, '\n', wn - i);
    const char* ge = memchr(got + j, '\n', gn - j);
    size_t wl = we ? (size_t)(we - (want + i)) : wn - i;
    size_t gl = ge ? (size_t)(ge - (got + j)) : gn - j;
    if (wl != gl || memcmp(want + i, got + j, wl) != 0) {
      fprintf(stderr, "line %d\n  want: %.*s\n  got:  %.*s\n", line, (int)wl, want + i, (int)gl,
              got + j);
      shown++;
    }
    i += wl + 1;
    j += gl + 1;
    line++;
  }
}

int main(void) {
  size_t n = 0;
  char* table = make_table(&n);
  CHECK(table != NULL && n > 0, "the table was made");
  const char* write = getenv("TUTTI_PLANS_WRITE");
  if (table != NULL && write != NULL) {
    FILE* f = fopen(write, "w");
    CHECK(f != NULL && fwrite(table, 1, n, f) == n, "writing %s", write);
    if (f != NULL) {
      fclose(f);
    }
    fprintf(stderr, "wrote %zu bytes to %s\n", n, write);
  } else if (table != NULL) {
    size_t gn = 0;
    char* golden = read_file(TUTTI_SOURCE_DIR "/tests/unit/tune_plans.golden", &gn);
    CHECK(golden != NULL, "reading tests/unit/tune_plans.golden");
    const int same = golden != NULL && gn == n && memcmp(golden, table, n) == 0;
    if (golden != NULL && !same) {
      show_differences(golden, gn, table, n);
    }
    CHECK(same, "every decision as in tune_plans.golden (%zu bytes made, %zu expected)", n, gn);
    free(golden);
  }
  free(table);
  return test_summary("tune_plans");
}
