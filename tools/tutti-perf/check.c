/* Inputs and expected outputs of every collective (see check.h). Reductions
 * use perf_gen_input/result, data movement perf_gen_plain indexed by the
 * element's position in the gathered whole, so a block that lands at the
 * wrong rank or offset is caught. */
#include "check.h"

#include "colls.h"
#include "data.h"

/* The pointers the call was given, as in nccl-tests' startColl. */
static char* in_ptr(const struct perf_images* im) {
  size_t elt = perf_type_size(im->gen->type);
  return im->in_place ? im->recv + (size_t)im->rank * im->counts->send_ip_off * elt : im->send;
}

static char* out_ptr(const struct perf_images* im) {
  size_t elt = perf_type_size(im->gen->type);
  return im->in_place ? im->recv + (size_t)im->rank * im->counts->recv_ip_off * elt : im->recv;
}

static size_t nranks(const struct perf_images* im) {
  return (size_t)im->gen->nranks;
}

static size_t count_wrong(const struct perf_gen* g, const char* buf, size_t i, double expected) {
  return (size_t)perf_gen_wrong(g, perf_load(buf, i, g->type), expected);
}

void perf_fill_allreduce(const struct perf_images* im) {
  char* in = in_ptr(im);
  for (size_t i = 0; i < im->counts->param; i++) {
    perf_store(in, i, im->gen->type, perf_gen_input(im->gen, im->rank, i));
  }
}

size_t perf_verify_allreduce(const struct perf_images* im) {
  const char* out = out_ptr(im);
  size_t wrong = 0;
  for (size_t i = 0; i < im->counts->param; i++) {
    wrong += count_wrong(im->gen, out, i, perf_gen_result(im->gen, i));
  }
  return wrong;
}

void perf_fill_broadcast(const struct perf_images* im) {
  char* in = in_ptr(im);
  for (size_t i = 0; im->rank == im->root && i < im->counts->param; i++) {
    perf_store(in, i, im->gen->type, perf_gen_plain(im->gen, i));
  }
}

size_t perf_verify_broadcast(const struct perf_images* im) {
  const char* out = out_ptr(im);
  size_t wrong = 0;
  for (size_t i = 0; i < im->counts->param; i++) {
    wrong += count_wrong(im->gen, out, i, perf_gen_plain(im->gen, i));
  }
  return wrong;
}

void perf_fill_reduce(const struct perf_images* im) {
  perf_fill_allreduce(im);
}

/* Off the root the receive buffer must be left as it was: zeros, or this
 * rank's own input when in place. */
size_t perf_verify_reduce(const struct perf_images* im) {
  if (im->rank == im->root) {
    return perf_verify_allreduce(im);
  }
  const char* out = out_ptr(im);
  size_t wrong = 0;
  for (size_t i = 0; i < im->counts->param; i++) {
    double want = im->in_place ? perf_gen_input(im->gen, im->rank, i) : 0.0;
    wrong += count_wrong(im->gen, out, i, want);
  }
  return wrong;
}

void perf_fill_allgather(const struct perf_images* im) {
  char* in = in_ptr(im);
  size_t c = im->counts->param, base = (size_t)im->rank * c;
  for (size_t i = 0; i < c; i++) {
    perf_store(in, i, im->gen->type, perf_gen_plain(im->gen, base + i));
  }
}

size_t perf_verify_allgather(const struct perf_images* im) {
  size_t wrong = 0, total = im->counts->param * nranks(im);
  for (size_t j = 0; j < total; j++) {
    wrong += count_wrong(im->gen, im->recv, j, perf_gen_plain(im->gen, j));
  }
  return wrong;
}

void perf_fill_reducescatter(const struct perf_images* im) {
  char* in = in_ptr(im);
  size_t total = im->counts->param * nranks(im);
  for (size_t k = 0; k < total; k++) {
    perf_store(in, k, im->gen->type, perf_gen_input(im->gen, im->rank, k));
  }
}

size_t perf_verify_reducescatter(const struct perf_images* im) {
  const char* out = out_ptr(im);
  size_t c = im->counts->param, base = (size_t)im->rank * c, wrong = 0;
  for (size_t i = 0; i < c; i++) {
    wrong += count_wrong(im->gen, out, i, perf_gen_result(im->gen, base + i));
  }
  return wrong;
}

void perf_fill_alltoall(const struct perf_images* im) {
  char* in = in_ptr(im);
  size_t c = im->counts->param, n = nranks(im), base = (size_t)im->rank * n * c;
  for (size_t k = 0; k < n * c; k++) {
    perf_store(in, k, im->gen->type, perf_gen_plain(im->gen, base + k));
  }
}

/* Block j came from rank j's block for this rank. */
size_t perf_verify_alltoall(const struct perf_images* im) {
  size_t c = im->counts->param, n = nranks(im), r = (size_t)im->rank, wrong = 0;
  for (size_t j = 0; j < n; j++) {
    for (size_t i = 0; i < c; i++) {
      double want = perf_gen_plain(im->gen, j * n * c + r * c + i);
      wrong += count_wrong(im->gen, im->recv, j * c + i, want);
    }
  }
  return wrong;
}

void perf_fill_gather(const struct perf_images* im) {
  perf_fill_allgather(im);
}

size_t perf_verify_gather(const struct perf_images* im) {
  if (im->rank == im->root) {
    return perf_verify_allgather(im);
  }
  size_t c = im->counts->param, own = (size_t)im->rank * c, wrong = 0;
  for (size_t j = 0; j < im->counts->recv; j++) {
    int mine = im->in_place && j >= own && j < own + c;
    wrong += count_wrong(im->gen, im->recv, j, mine ? perf_gen_plain(im->gen, j) : 0.0);
  }
  return wrong;
}

void perf_fill_scatter(const struct perf_images* im) {
  char* in = in_ptr(im);
  size_t total = im->counts->param * nranks(im);
  for (size_t k = 0; im->rank == im->root && k < total; k++) {
    perf_store(in, k, im->gen->type, perf_gen_plain(im->gen, k));
  }
}

size_t perf_verify_scatter(const struct perf_images* im) {
  const char* out = out_ptr(im);
  size_t c = im->counts->param, base = (size_t)im->rank * c, wrong = 0;
  for (size_t i = 0; i < c; i++) {
    wrong += count_wrong(im->gen, out, i, perf_gen_plain(im->gen, base + i));
  }
  return wrong;
}

void perf_fill_sendrecv(const struct perf_images* im) {
  perf_fill_allgather(im); /* block `rank` of the gathered whole */
}

size_t perf_verify_sendrecv(const struct perf_images* im) {
  const char* out = out_ptr(im);
  size_t c = im->counts->param, n = nranks(im);
  size_t prev = ((size_t)im->rank + n - 1) % n, wrong = 0;
  for (size_t i = 0; i < c; i++) {
    wrong += count_wrong(im->gen, out, i, perf_gen_plain(im->gen, prev * c + i));
  }
  return wrong;
}
