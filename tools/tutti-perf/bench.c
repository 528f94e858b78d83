/* One thread's run, as nccl-tests' TimeTest and BenchTime: for every type,
 * op, root and size, time the out-of-place then the in-place collective,
 * check the results, and (on rank 0's thread) print the row. */
#include "bench.h"

#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "colls.h"
#include "data.h"
#include "gpu.h"
#include "json.h"
#include "lib.h"
#include "report.h"
#include "world.h"

/* One size of one (type, op, root). */
struct perf_case {
  ncclDataType_t type;
  int op, root;
  size_t elt;
  struct perf_counts counts;
  size_t send_bytes, recv_bytes;
  size_t size; /* max of the two: what the table's size column shows */
};

static void setup_case(struct perf_case* k, const struct perf_opts* o, int nranks, size_t bytes) {
  k->elt = perf_type_size(k->type);
  o->coll->counts(bytes / k->elt, k->elt, nranks, &k->counts);
  k->send_bytes = k->counts.send * k->elt;
  k->recv_bytes = k->counts.recv * k->elt;
  k->size = k->send_bytes > k->recv_bytes ? k->send_bytes : k->recv_bytes;
}

static int prints(const struct perf_thread* t) {
  return t->w->proc == 0 && t->index == 0;
}

/* Queues one collective on every rank of the thread. */
static void start_coll(struct perf_thread* t, const struct perf_case* k, int in_place, int iter) {
  struct perf_world* w = t->w;
  const struct perf_opts* o = w->o;
  /* As nccl-tests: move through the whole buffer from one iteration to
   * the next, so small sizes do not always hit the same cache lines. */
  size_t steps = k->size ? o->maxbytes / k->size : 1;
  size_t shift = k->size * ((size_t)iter % steps);
  if (o->ngpus > 1) {
    PERF_NCCL(perf_nccl.GroupStart(), NULL, t->ranks[0].rank);
  }
  for (int g = 0; g < o->ngpus; g++) {
    struct perf_rank* r = &t->ranks[g];
    char* recv = r->recv + shift;
    struct perf_call c = {
        .send =
            in_place ? recv + (size_t)r->rank * k->counts.send_ip_off * k->elt : r->send + shift,
        .recv = in_place ? recv + (size_t)r->rank * k->counts.recv_ip_off * k->elt : recv,
        .count = k->counts.param,
        .type = k->type,
        .op = (ncclRedOp_t)(k->op < 0 ? ncclSum : k->op),
        .root = k->root < 0 ? 0 : k->root,
        .rank = r->rank,
        .nranks = w->nranks,
        .comm = r->comm,
        .stream = r->stream,
        .win = r->recv_win,
    };
    c.win_off = (size_t)((char*)c.recv - r->recv);
    if (k->op == PERF_OP_MULSUM) {
      uint64_t scalar = 0;
      perf_store(&scalar, 0, k->type, perf_gen_premul(r->rank));
      PERF_NCCL(
          perf_nccl.RedOpCreatePreMulSum(&c.op, &scalar, k->type, ncclScalarHostImmediate, r->comm),
          r->comm, r->rank);
    }
    o->coll->run(&c);
    if (k->op == PERF_OP_MULSUM) {
      PERF_NCCL(perf_nccl.RedOpDestroy(c.op, r->comm), r->comm, r->rank);
    }
  }
  if (o->ngpus > 1) {
    PERF_NCCL(perf_nccl.GroupEnd(), NULL, t->ranks[0].rank);
  }
  __atomic_add_fetch(&w->progress, 1, __ATOMIC_RELAXED); /* for -T */
  if (o->blocking) {
    perf_world_complete(t);
    perf_world_barrier(t);
  }
}

static void images(const struct perf_rank* r, const struct perf_case* k, int in_place,
                   const struct perf_gen* gen, struct perf_images* im) {
  im->send = r->send_img;
  im->recv = r->recv_img;
  im->rank = r->rank;
  im->root = k->root < 0 ? 0 : k->root;
  im->in_place = in_place;
  im->counts = &k->counts;
  im->gen = gen;
}

/* Every rank seeds the same way: the values one rank expects depend on
 * what all the others put in. */
static void init_data(struct perf_thread* t, const struct perf_case* k, int in_place, uint32_t seed,
                      struct perf_gen* gen) {
  struct perf_world* w = t->w;
  perf_gen_init(gen, k->type, k->op, w->nranks, seed);
  for (int g = 0; g < w->o->ngpus; g++) {
    struct perf_rank* r = &t->ranks[g];
    struct perf_images im;
    images(r, k, in_place, gen, &im);
    memset(r->recv_img, 0, k->size);
    w->o->coll->fill(&im);
    perf_set_device(w->gpu, r->dev);
    perf_buf_copy(w->gpu, r->send, r->send_img, k->size, r->stream);
    perf_buf_copy(w->gpu, r->recv, r->recv_img, k->size, r->stream);
  }
}

static long long verify(struct perf_thread* t, const struct perf_case* k, int in_place,
                        const struct perf_gen* gen) {
  struct perf_world* w = t->w;
  size_t wrong = 0;
  for (int g = 0; g < w->o->ngpus; g++) {
    struct perf_rank* r = &t->ranks[g];
    struct perf_images im;
    images(r, k, in_place, gen, &im);
    perf_buf_copy(w->gpu, r->recv_img, r->recv, k->size, r->stream);
    wrong += w->o->coll->verify(&im);
  }
  return (long long)wrong;
}

static void capture_begin(struct perf_thread* t) {
  for (int g = 0; g < t->w->o->ngpus; g++) {
    perf_set_device(1, t->ranks[g].dev);
    perf_graph_begin(t->ranks[g].stream);
  }
}

/* Every stream's capture ends before any graph is instantiated: a thread
 * may not instantiate while one of its streams is still capturing. */
static void capture_end(struct perf_thread* t, struct perf_graph* graphs) {
  for (int g = 0; g < t->w->o->ngpus; g++) {
    perf_set_device(1, t->ranks[g].dev);
    perf_graph_end(t->ranks[g].stream, &graphs[g]);
  }
  for (int g = 0; g < t->w->o->ngpus; g++) {
    perf_set_device(1, t->ranks[g].dev);
    perf_graph_instantiate(&graphs[g]);
  }
}

static void graphs_launch(struct perf_thread* t, struct perf_graph* graphs, int times) {
  for (int l = 0; l < times; l++) {
    for (int g = 0; g < t->w->o->ngpus; g++) {
      perf_graph_launch(&graphs[g], t->ranks[g].stream);
    }
  }
}

static void graphs_destroy(struct perf_thread* t, struct perf_graph* graphs) {
  for (int g = 0; g < t->w->o->ngpus; g++) {
    perf_graph_destroy(&graphs[g]);
  }
}

/* Checks the results of one collective -c times, each on fresh data. */
static long long check(struct perf_thread* t, const struct perf_case* k, int in_place,
                       int use_graphs, struct perf_graph* graphs) {
  const struct perf_opts* o = t->w->o;
  long long wrong = 0;
  for (int c = 0; c < o->check; c++) {
    struct perf_gen gen;
    init_data(t, k, in_place, 1000 + ++t->rep, &gen);
    if (o->coll->one_sided) {
      perf_world_barrier(t); /* no put lands before its target reset the buffer */
    }
    if (use_graphs) {
      capture_begin(t);
    }
    start_coll(t, k, in_place, 0);
    if (use_graphs) {
      capture_end(t, graphs);
      graphs_launch(t, graphs, 1);
    }
    perf_world_complete(t);
    if (use_graphs) {
      graphs_destroy(t, graphs);
    }
    wrong = (long long)perf_world_reduce(t, (double)verify(t, k, in_place, &gen), PERF_RED_SUM);
    if (wrong != 0) {
      break;
    }
  }
  return wrong;
}

static void bench_time(struct perf_thread* t, const struct perf_case* k, int in_place,
                       struct perf_result* res) {
  struct perf_world* w = t->w;
  const struct perf_opts* o = w->o;
  int use_graphs = w->gpu && o->graphs > 0;
  struct perf_graph graphs[1024];
  struct perf_gen gen;
  if (o->check) {
    init_data(t, k, in_place, 99, &gen);
  }
  start_coll(t, k, in_place, 0); /* every rank is here before the clock starts */
  perf_world_complete(t);
  perf_world_barrier(t);
  if (use_graphs) {
    capture_begin(t);
  }
  double t0 = perf_now();
  for (int it = 0; it < o->iters; it++) {
    if (o->agg_iters > 1) {
      PERF_NCCL(perf_nccl.GroupStart(), NULL, t->ranks[0].rank);
    }
    for (int a = 0; a < o->agg_iters; a++) {
      start_coll(t, k, in_place, it * o->agg_iters + a);
    }
    if (o->agg_iters > 1) {
      PERF_NCCL(perf_nccl.GroupEnd(), NULL, t->ranks[0].rank);
    }
  }
  if (use_graphs) {
    capture_end(t, graphs);
    perf_world_barrier(t);
    t0 = perf_now();
    graphs_launch(t, graphs, o->graphs);
  }
  double ops = (double)o->iters * o->agg_iters;
  double cpu = (perf_now() - t0) / ops;
  perf_world_complete(t);
  double sec = (perf_now() - t0) / ops / (use_graphs ? o->graphs : 1);
  sec = perf_world_reduce(t, sec, (enum perf_reduce)o->average);
  if (use_graphs) {
    graphs_destroy(t, graphs);
  }
  double bytes = (double)k->counts.param * k->elt * (o->coll->algbw_times_n ? w->nranks : 1);
  res->algbw = sec > 0 ? bytes / 1e9 / sec : 0.0;
  res->busbw = res->algbw * perf_busbw_factor(o->coll->busbw, w->nranks);
  res->time_us = (o->report_cputime ? cpu : sec) * 1e6;
  perf_world_barrier(t);
  res->wrong = -1;
  if (o->check && (!in_place || o->coll->check_in_place)) {
    res->wrong = check(t, k, in_place, use_graphs, graphs);
  }
}

static size_t next_size(const struct perf_opts* o, size_t size) {
  size_t next = o->stepfactor > 1 ? (size ? size * o->stepfactor : 1) : size + o->stepbytes;
  if (next <= size || (o->stepfactor > 1 && size > SIZE_MAX / o->stepfactor)) {
    return SIZE_MAX; /* no progress or overflow: stop */
  }
  return next;
}

static void warm_up(struct perf_thread* t, struct perf_case* k, size_t bytes) {
  setup_case(k, t->w->o, t->w->nranks, bytes);
  for (int it = 0; it < t->w->o->warmup; it++) {
    start_coll(t, k, 0, it);
  }
  perf_world_complete(t);
}

/* The device memory each communicator of this thread took: free memory
 * before it was made, less free memory once it ran its first collectives. */
static void report_comm_memory(struct perf_thread* t) {
  for (int g = 0; g < t->w->o->ngpus; g++) {
    const struct perf_rank* r = &t->ranks[g];
    const size_t now = perf_cuda_mem_free(r->dev);
    if (r->free_before > 0 && now > 0) {
      printf("# Rank %2d GPU %2d: the communicator holds %.0f MiB of device memory\n", r->rank,
             r->dev, ((double)r->free_before - (double)now) / (1 << 20));
    }
  }
  perf_set_device(1, t->ranks[0].dev);
  fflush(stdout);
}

static void time_test(struct perf_thread* t, ncclDataType_t type, int op, int root) {
  struct perf_world* w = t->w;
  const struct perf_opts* o = w->o;
  struct perf_case k = {.type = type, .op = op, .root = root};
  perf_world_barrier(t);
  warm_up(t, &k, o->maxbytes);
  if (!t->mem_reported && w->gpu && prints(t)) {
    report_comm_memory(t);
  }
  t->mem_reported = 1;
  warm_up(t, &k, o->minbytes);
  for (size_t size = o->minbytes; size <= o->maxbytes; size = next_size(o, size)) {
    setup_case(&k, o, w->nranks, size);
    struct perf_row row = {
        .bytes = k.size, .count = k.counts.param, .type = type, .op = op, .root = root};
    if (prints(t)) {
      perf_report_row_start(&row);
    }
    for (int ip = 0; ip < 2; ip++) {
      bench_time(t, &k, ip, &row.r[ip]);
      t->bw_sum += row.r[ip].busbw;
      t->bw_count++;
      t->errors += row.r[ip].wrong > 0;
      if (prints(t)) {
        perf_report_result(&row.r[ip]);
      }
    }
    if (prints(t)) {
      perf_report_row_end();
      perf_json_record(w->json, &row);
    }
  }
}

void* perf_bench_thread(void* arg) {
  struct perf_thread* t = arg;
  struct perf_world* w = t->w;
  const struct perf_opts* o = w->o;
  perf_set_device(w->gpu, t->ranks[0].dev);
  if (o->parallel_init) {
    perf_world_init_thread(t);
  }
  if (o->coll->one_sided) {
    perf_world_windows(t, 1);
  }
  perf_world_device_lines(t, w->lines);
  if (prints(t)) {
    perf_report_devices(w, w->lines);
    perf_report_table_head(o);
  }
  for (int ti = 0; ti < o->ntypes; ti++) {
    for (int oi = 0; oi < o->nops; oi++) {
      int first = o->root, last = o->root;
      if (o->root == PERF_ALL_ROOTS && o->coll->has_root) {
        first = 0;
        last = w->nranks - 1;
      }
      for (int root = first; root <= last; root++) {
        time_test(t, o->types[ti], o->ops[oi], root);
      }
    }
  }
  if (o->coll->one_sided) {
    /* Every put into this rank's window was awaited here: none is left. */
    perf_world_windows(t, 0);
  }
  return NULL;
}
