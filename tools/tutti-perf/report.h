/* The nccl-tests text output: header, "# Using devices", the table (each
 * part printed and flushed as soon as it is measured) and the summary. */
#ifndef TUTTI_PERF_REPORT_H
#define TUTTI_PERF_REPORT_H

#include <stddef.h>

#include "perf.h"

struct perf_result {
  double time_us, algbw, busbw; /* GB/s, 1e9 bytes */
  long long wrong;              /* -1: not checked */
};

struct perf_row {
  size_t bytes, count;
  ncclDataType_t type;
  int op, root;
  struct perf_result r[2]; /* out-of-place, in-place */
};

void perf_report_header(const struct perf_world* w);
void perf_report_devices(const struct perf_world* w, const char* lines);
void perf_report_table_head(const struct perf_opts* o);
void perf_report_row_start(const struct perf_row* row);
void perf_report_result(const struct perf_result* r);
void perf_report_row_end(void);
/* Non-zero between row_start and row_end: an error then ends the line first. */
int perf_report_row_open(void);
void perf_report_summary(const struct perf_world* w, int errors, double avg_busbw);

#endif
