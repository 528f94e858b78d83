/* tutti-check: what a new machine or container has, and whether tutti
 * works on it. Facts are gathered into a small report (printed as they come
 * and, with --json, written as one JSON document); checks pass, fail (with
 * the fix) or are skipped, and decide the verdict and the exit status. */
#ifndef TUTTI_CHECK_H
#define TUTTI_CHECK_H

#include <stddef.h>

enum check_status { CHECK_PASS, CHECK_FAIL, CHECK_SKIP };

struct check_opts {
  const char* json_path; /* --json FILE, or NULL */
  int quiet;             /* --quiet: only problems and the verdict */
  const char* shm_dir;   /* --shm-dir DIR (default /dev/shm) */
  double run_timeout_s;  /* longest a collective check may take before it counts as hung */
};

extern struct check_opts check_opts;

/* ---- report.c ---- */

/* A fact for the human report ("cpu", "Intel Xeon ..., 8 cores"). */
void report_line(const char* section, const char* fmt, ...) __attribute__((format(printf, 2, 3)));
/* JSON: values of the section being written; sections are objects, or
 * arrays of objects (report_array_item starts the next element). */
void report_json_begin(const char* section, int array);
void report_json_item(void);
void report_json_str(const char* key, const char* value);
void report_json_num(const char* key, double value);
void report_json_int(const char* key, long long value);
void report_json_bool(const char* key, int value);
void report_json_end(void);
/* A check: counted in the verdict unless skipped; a failure prints `fix`. */
void report_check(const char* name, enum check_status st, const char* fix, const char* fmt, ...)
    __attribute__((format(printf, 4, 5)));
/* Prints the verdict line, writes the JSON file; returns the exit status. */
int report_finish(void);
/* For a watchdog: the verdict of a run that cannot go on. Never returns. */
void report_abort(const char* why) __attribute__((noreturn));

/* ---- host.c ---- */
void probe_library(void);
void probe_cpu_memory(void);
void probe_network(void);
void probe_shm(void);

/* ---- net.c ---- */
/* The network plugin the library would load, its devices; else tutti's
 * own socket network's devices. */
void probe_net_plugin(void);

/* ---- gpu.c ---- */
/* Loads the CUDA driver and runtime and NVML if present, reports them,
 * each GPU and each pair's link. Returns the number of GPUs (0: none). */
int probe_gpus(void);
/* One rank per GPU on device buffers; only when probe_gpus found some. */
void run_gpu_allreduce(int ngpus);

/* ---- runs.c ---- */
void run_host_allreduces(void);
/* Guards a collective check: past check_opts.run_timeout_s the process
 * reports the hang and exits. */
void watchdog_arm(const char* what);
void watchdog_disarm(void);
/* Fills n floats with integer values for rank r; the sum over ranks 0..n-1
 * is then exact in float. */
void fill_rank(float* buf, size_t n, int rank);
/* Counts elements that differ from the exact sum over `nranks` ranks. */
size_t count_wrong(const float* buf, size_t n, int nranks);

#endif
