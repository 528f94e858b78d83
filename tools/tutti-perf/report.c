/* Text output in nccl-tests' format (see report.h), so that scripts written
 * for nccl-tests' logs read tutti-perf's too. */
#include "report.h"

#include <stdio.h>

#include "colls.h"
#include "data.h"
#include "lib.h"
#include "world.h"

static int row_open; /* a row is printed up to the middle */

int perf_report_row_open(void) {
  return __atomic_load_n(&row_open, __ATOMIC_RELAXED);
}

void perf_report_header(const struct perf_world* w) {
  const struct perf_opts* o = w->o;
  int graphs = w->gpu ? o->graphs : 0;
  char ver[32];
  perf_lib_version_string(perf_nccl.version, ver, sizeof ver);
  printf("# Collective test starting: tutti-perf %s\n", o->coll->name);
  printf(
      "# nThread %d nGpus %d minBytes %zu maxBytes %zu step: %zu(%s) warmup iters: %d iters: "
      "%d agg iters: %d validation: %d graph: %d\n",
      o->nthreads, o->ngpus, o->minbytes, o->maxbytes,
      o->stepfactor > 1 ? o->stepfactor : o->stepbytes, o->stepfactor > 1 ? "factor" : "bytes",
      o->warmup, o->iters, o->agg_iters, o->check, graphs);
  if (o->blocking) {
    printf("# Blocking Enabled: wait for completion and barrier after each collective \n");
  }
  if (o->parallel_init) {
    printf("# Parallel Init Enabled: threads call into NcclInitRank concurrently \n");
  }
  printf("#\n");
  printf("# Library: %s %s (ncclGetVersion %d) %s\n", w->lib_label, ver, perf_nccl.version,
         perf_nccl.path);
  printf("# Buffers: %s memory, %d ranks: %d process%s x %d thread%s x %d rank%s per thread\n",
         w->gpu ? "device" : "host", w->nranks, w->nprocs, w->nprocs > 1 ? "es" : "", o->nthreads,
         o->nthreads > 1 ? "s" : "", o->ngpus, o->ngpus > 1 ? "s" : "");
  if (o->graphs > 0 && !w->gpu) {
    printf("# -G %d: CUDA graphs are not supported for host buffers; timing without graphs\n",
           o->graphs);
  }
  printf("#\n");
  fflush(stdout);
}

void perf_report_devices(const struct perf_world* w, const char* lines) {
  printf("# Using devices\n");
  for (int r = 0; r < w->nranks; r++) {
    printf("%.*s\n", PERF_LINE, lines + (size_t)r * PERF_LINE);
  }
  fflush(stdout);
}

void perf_report_table_head(const struct perf_opts* o) {
  const char* t = o->report_cputime ? "cputime" : "time";
  printf("#\n");
  printf(
      "# %10s  %12s  %8s  %6s  %6s           out-of-place                       in-place          "
      "\n",
      "", "", "", "", "");
  printf("# %10s  %12s  %8s  %6s  %6s  %7s  %6s  %6s %6s  %7s  %6s  %6s %6s\n", "size", "count",
         "type", "redop", "root", t, "algbw", "busbw", "#wrong", t, "algbw", "busbw", "#wrong");
  printf("# %10s  %12s  %8s  %6s  %6s  %7s  %6s  %6s  %5s  %7s  %6s  %6s  %5s\n", "(B)",
         "(elements)", "", "", "", "(us)", "(GB/s)", "(GB/s)", "", "(us)", "(GB/s)", "(GB/s)", "");
  fflush(stdout);
}

void perf_report_row_start(const struct perf_row* row) {
  __atomic_store_n(&row_open, 1, __ATOMIC_RELAXED);
  printf("%12zu  %12zu  %8s  %6s  %6d", row->bytes, row->count, perf_type_name(row->type),
         perf_op_name(row->op), row->root);
  fflush(stdout);
}

void perf_report_result(const struct perf_result* r) {
  char time[32];
  /* Three significant digits or more, in a 7-character column. */
  if (r->time_us >= 10000.0) {
    snprintf(time, sizeof time, "%7.0f", r->time_us);
  } else if (r->time_us >= 100.0) {
    snprintf(time, sizeof time, "%7.1f", r->time_us);
  } else {
    snprintf(time, sizeof time, "%7.2f", r->time_us);
  }
  if (r->wrong < 0) {
    printf("  %7s  %6.2f  %6.2f  %5s", time, r->algbw, r->busbw, "N/A");
  } else {
    printf("  %7s  %6.2f  %6.2f  %5lld", time, r->algbw, r->busbw, r->wrong);
  }
  fflush(stdout);
}

void perf_report_row_end(void) {
  __atomic_store_n(&row_open, 0, __ATOMIC_RELAXED);
  printf("\n");
  fflush(stdout);
}

void perf_report_summary(const struct perf_world* w, int errors, double avg_busbw) {
  printf("# Out of bounds values : %d %s\n", errors, errors ? "FAILED" : "OK");
  printf("# Avg bus bandwidth    : %g \n", avg_busbw);
  printf("#\n");
  printf("# Collective test concluded: tutti-perf %s\n", w->o->coll->name);
  fflush(stdout);
}
