/* --json FILE: every row as a JSON record. The file is rewritten in place
 * after each row so that it is valid JSON at every moment: a run that dies
 * leaves the rows measured so far and "status": "running". */
#ifndef TUTTI_PERF_JSON_H
#define TUTTI_PERF_JSON_H

#include "perf.h"
#include "report.h"

struct perf_json* perf_json_open(const char* path, const struct perf_world* w);
void perf_json_record(struct perf_json* j, const struct perf_row* row);
/* status: "ok", "wrong" (some values were wrong) or "failed", with `error`
 * (NULL if none) saying why. */
void perf_json_close(struct perf_json* j, const char* status, const char* error, int errors,
                     double avg_busbw);
void perf_json_free(struct perf_json* j);

#endif
