/* The JSON results file (see json.h). */
#include "json.h"

#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "colls.h"
#include "data.h"
#include "lib.h"
#include "util/json.h"

struct perf_json {
  FILE* f;
  long tail; /* where the records end and the closing text begins */
  int nrec;
  int closed;
  pthread_mutex_t lock; /* perf_die may close from any thread */
  char lib_label[64];
  char lib_version[32];
  const char* coll;
  char host[256];
  int nranks;
};

static void put_number(FILE* f, double v) {
  if (isfinite(v)) {
    fprintf(f, "%.6g", v);
  } else {
    fputs("null", f); /* JSON has no inf or nan */
  }
}

static void put_date(FILE* f) {
  char buf[32];
  time_t now = time(NULL);
  struct tm tm;
  gmtime_r(&now, &tm);
  strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
  tutti_json_fput(f, buf);
}

/* Writes the closing text after the records and cuts what an earlier,
 * longer closing left behind. */
static void close_text(struct perf_json* j, const char* status, const char* error, int errors,
                       double avg) {
  fseek(j->f, j->tail, SEEK_SET);
  fprintf(j->f, "\n  ],\n  \"out_of_bounds\": %d,\n  \"avg_busbw_gbs\": ", errors);
  put_number(j->f, avg);
  fprintf(j->f, ",\n  \"status\": ");
  tutti_json_fput(j->f, status);
  if (error != NULL) {
    fprintf(j->f, ",\n  \"error\": ");
    tutti_json_fput(j->f, error);
  }
  fprintf(j->f, "\n}\n");
  fflush(j->f);
  if (ftruncate(fileno(j->f), ftell(j->f)) != 0) {
    perror("tutti-perf: --json");
  }
}

struct perf_json* perf_json_open(const char* path, const struct perf_world* w) {
  struct perf_json* j = calloc(1, sizeof *j);
  if (j == NULL || (j->f = fopen(path, "w")) == NULL) {
    perror(path);
    free(j);
    return NULL;
  }
  pthread_mutex_init(&j->lock, NULL);
  const struct perf_opts* o = w->o;
  snprintf(j->lib_label, sizeof j->lib_label, "%s", w->lib_label);
  perf_lib_version_string(perf_nccl.version, j->lib_version, sizeof j->lib_version);
  snprintf(j->host, sizeof j->host, "%s", w->host);
  j->coll = o->coll->name;
  j->nranks = w->nranks;
  FILE* f = j->f;
  fprintf(f, "{\n  \"format\": \"tutti-perf/1\",\n  \"command\": ");
  tutti_json_fput(f, o->cmdline);
  fprintf(f, ",\n  \"library\": {\"name\": ");
  tutti_json_fput(f, j->lib_label);
  fprintf(f, ", \"path\": ");
  tutti_json_fput(f, perf_nccl.path);
  fprintf(f, ", \"version\": %d, \"version_string\": ", perf_nccl.version);
  tutti_json_fput(f, j->lib_version);
  fprintf(f, "},\n  \"collective\": ");
  tutti_json_fput(f, j->coll);
  fprintf(f, ",\n  \"hostname\": ");
  tutti_json_fput(f, j->host);
  fprintf(f, ",\n  \"date\": ");
  put_date(f);
  fprintf(f,
          ",\n  \"nranks\": %d, \"nprocs\": %d, \"nthreads\": %d, \"ngpus\": %d, "
          "\"device\": \"%s\",\n",
          w->nranks, w->nprocs, o->nthreads, o->ngpus, w->gpu ? "gpu" : "host");
  fprintf(f,
          "  \"iters\": %d, \"warmup_iters\": %d, \"agg_iters\": %d, \"check\": %d, "
          "\"average\": %d,\n  \"records\": [",
          o->iters, o->warmup, o->agg_iters, o->check, o->average);
  j->tail = ftell(f);
  close_text(j, "running", NULL, 0, 0.0);
  return j;
}

static void put_result(FILE* f, const struct perf_result* r) {
  fprintf(f, "{\"time_us\": ");
  put_number(f, r->time_us);
  fprintf(f, ", \"algbw_gbs\": ");
  put_number(f, r->algbw);
  fprintf(f, ", \"busbw_gbs\": ");
  put_number(f, r->busbw);
  if (r->wrong < 0) {
    fprintf(f, ", \"wrong\": null}");
  } else {
    fprintf(f, ", \"wrong\": %lld}", r->wrong);
  }
}

void perf_json_record(struct perf_json* j, const struct perf_row* row) {
  if (j == NULL) {
    return;
  }
  pthread_mutex_lock(&j->lock);
  if (j->closed) {
    pthread_mutex_unlock(&j->lock);
    return;
  }
  FILE* f = j->f;
  fseek(f, j->tail, SEEK_SET);
  fprintf(f, "%s\n    {\"library\": ", j->nrec ? "," : "");
  tutti_json_fput(f, j->lib_label);
  fprintf(f, ", \"library_path\": ");
  tutti_json_fput(f, perf_nccl.path);
  fprintf(f, ", \"library_version\": %d, \"collective\": ", perf_nccl.version);
  tutti_json_fput(f, j->coll);
  fprintf(f, ", \"nranks\": %d, \"bytes\": %zu, \"count\": %zu, \"type\": \"%s\", ", j->nranks,
          row->bytes, row->count, perf_type_name(row->type));
  fprintf(f, "\"op\": \"%s\", \"root\": %d,\n     \"out_of_place\": ", perf_op_name(row->op),
          row->root);
  put_result(f, &row->r[0]);
  fprintf(f, ",\n     \"in_place\": ");
  put_result(f, &row->r[1]);
  fprintf(f, ",\n     \"date\": ");
  put_date(f);
  fprintf(f, ", \"hostname\": ");
  tutti_json_fput(f, j->host);
  fprintf(f, "}");
  j->tail = ftell(f);
  j->nrec++;
  close_text(j, "running", NULL, 0, 0.0);
  pthread_mutex_unlock(&j->lock);
}

void perf_json_close(struct perf_json* j, const char* status, const char* error, int errors,
                     double avg_busbw) {
  if (j == NULL) {
    return;
  }
  pthread_mutex_lock(&j->lock);
  if (!j->closed) {
    close_text(j, status, error, errors, avg_busbw);
    fclose(j->f);
    j->closed = 1;
  }
  pthread_mutex_unlock(&j->lock);
}

void perf_json_free(struct perf_json* j) {
  if (j != NULL) {
    pthread_mutex_destroy(&j->lock);
    free(j);
  }
}
