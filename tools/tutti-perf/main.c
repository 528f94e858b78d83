/* tutti-perf: nccl-tests' measurements for any NCCL-API library, loaded at
 * run time. main() parses, loads, sets the ranks up, runs the threads and
 * prints the summary; bench.c holds the measuring loop. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "args.h"
#include "bench.h"
#include "colls.h"
#include "gpu.h"
#include "json.h"
#include "lib.h"
#include "perf.h"
#include "report.h"
#include "world.h"

static struct perf_world* the_world; /* for perf_die, from any thread */

double perf_now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

void perf_die(const char* fmt, ...) {
  /* The first thread to fail reports; any other waits here until exit. */
  static pthread_mutex_t once = PTHREAD_MUTEX_INITIALIZER;
  pthread_mutex_lock(&once);
  if (perf_report_row_open()) {
    printf("\n");
  }
  fflush(stdout);
  char msg[2048];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  fprintf(stderr, "tutti-perf: %s\n", msg);
  if (the_world != NULL) {
    perf_json_close(__atomic_load_n(&the_world->json, __ATOMIC_ACQUIRE), "failed", msg, 0, 0.0);
  }
  /* _exit: the library's exit handlers could wait on the ranks still
   * blocked inside collectives. */
  _exit(2);
}

void perf_nccl_fail(const char* what, ncclResult_t r, ncclComm_t comm, int rank, const char* file,
                    int line) {
  const char* last = perf_nccl.GetLastError ? perf_nccl.GetLastError(comm) : NULL;
  const char* hint = "";
  if (the_world != NULL && !the_world->gpu && r == ncclInvalidArgument) {
    hint = "\n  (host buffers: the library must accept host memory; NVIDIA's NCCL does not)";
  } else if (the_world != NULL && the_world->gpu && r == ncclInvalidArgument) {
    hint = "\n  (device buffers: if the library moves host memory only, use --device host)";
  }
  /* "perf_nccl.AllReduce(c->send, ...)" reads better as "ncclAllReduce". */
  char name[64];
  if (strncmp(what, "perf_nccl.", 10) == 0) {
    snprintf(name, sizeof name, "nccl%.*s", (int)strcspn(what + 10, "("), what + 10);
    what = name;
  }
  perf_die("rank %d: %s failed: %s (%d)%s%s [%s:%d]%s", rank, what, perf_nccl.GetErrorString(r),
           (int)r, last && *last ? ": " : "", last ? last : "", file, line, hint);
}

static void* watchdog(void* arg) {
  struct perf_world* w = arg;
  uint64_t last = 0;
  int idle = 0;
  for (;;) {
    sleep(1);
    uint64_t now = __atomic_load_n(&w->progress, __ATOMIC_RELAXED);
    idle = now == last ? idle + 1 : 0;
    last = now;
    if (idle >= w->o->timeout_s) {
      perf_die("no collective completed for %d s (-T %d): giving up", idle, w->o->timeout_s);
    }
  }
  return NULL;
}

/* Drops "mulsum" when the library cannot make PreMulSum operators. */
static void check_ops(struct perf_opts* o) {
  if (perf_nccl.RedOpCreatePreMulSum != NULL && perf_nccl.RedOpDestroy != NULL) {
    return;
  }
  int n = 0;
  for (int i = 0; i < o->nops; i++) {
    if (o->ops[i] != PERF_OP_MULSUM) {
      o->ops[n++] = o->ops[i];
    }
  }
  if (n == 0) {
    perf_die("-o mulsum: %s has no ncclRedOpCreatePreMulSum", perf_nccl.path);
  }
  o->nops = n;
}

/* Returns 1 when -e was lowered to fit the GPUs' memory. */
static int choose_device(struct perf_world* w, struct perf_opts* o) {
  char why[256] = "";
  int ndev = o->device == PERF_DEV_HOST ? 0 : perf_cuda_load(why, sizeof why);
  if (o->device == PERF_DEV_GPU && ndev == 0) {
    perf_die("--device gpu: %s", why);
  }
  w->gpu = ndev > 0;
  w->ndev = ndev;
  if (!w->gpu) {
    return 0;
  }
  int per_proc = o->nthreads * o->ngpus;
  if ((w->local_rank + 1) * per_proc > ndev && !o->share_gpus) {
    perf_die("local rank %d with %d thread(s) x %d GPU(s) needs GPUs %d..%d, but %d are visible",
             w->local_rank, o->nthreads, o->ngpus, w->local_rank * per_proc,
             (w->local_rank + 1) * per_proc - 1, ndev);
  }
  /* nccl-tests keeps 1 GiB free; the tool holds two buffers per GPU (its
   * expected values are computed on the host). */
  size_t least = 0;
  for (int i = 0; i < per_proc; i++) {
    size_t m = perf_cuda_mem_total((w->local_rank * per_proc + i) % ndev);
    least = (least == 0 || (m > 0 && m < least)) ? m : least;
  }
  const size_t sharers = (size_t)(per_proc + ndev - 1) / (size_t)ndev; /* ranks on one GPU */
  if (least > (1u << 30) && o->maxbytes > (least - (1u << 30)) / (2 * sharers)) {
    o->maxbytes = (least - (1u << 30)) / (2 * sharers);
    o->minbytes = o->minbytes > o->maxbytes ? o->maxbytes : o->minbytes;
    return 1;
  }
  return 0;
}

int main(int argc, char** argv) {
  setvbuf(stdout, NULL, _IOLBF, 0);
  struct perf_opts o;
  perf_args_parse(argc, argv, &o);
  struct perf_world w;
  memset(&w, 0, sizeof w);
  w.o = &o;
  perf_args_world(&w.nprocs, &w.proc, &w.local_rank);
  if (gethostname(w.host, sizeof w.host - 1) != 0) {
    snprintf(w.host, sizeof w.host, "unknown");
  }
  the_world = &w;

  char why[1024];
  /* The library's own bound on every wait comes before -T gives up, so that
   * a stalled call ends with tutti's sentence naming whom it waited for
   * (other libraries ignore the variable). */
  if (o.timeout_s > 0 && getenv("TUTTI_TIMEOUT") == NULL) {
    char limit[16];
    snprintf(limit, sizeof limit, "%d", o.timeout_s > 3 ? o.timeout_s * 2 / 3 : 1);
    setenv("TUTTI_TIMEOUT", limit, 0);
  }
  if (perf_lib_load(o.lib, why, sizeof why) != 0) {
    perf_die("cannot load the NCCL-API library: %s", why);
  }
  if (o.label != NULL) {
    snprintf(w.lib_label, sizeof w.lib_label, "%s", o.label);
  } else {
    perf_lib_label(perf_nccl.path, w.lib_label, sizeof w.lib_label);
  }
  w.nranks = w.nprocs * o.nthreads * o.ngpus;
  int reduced = choose_device(&w, &o);
  /* Opened before the checks below so that their failures are recorded. */
  if (o.json != NULL && w.proc == 0 && (w.json = perf_json_open(o.json, &w)) == NULL) {
    perf_die("cannot write --json %s", o.json);
  }
  check_ops(&o);
  const char* psk = getenv("TUTTI_PERF_PSK"); /* encrypted runs (bench/run_netns_enc.sh) */
  if (psk != NULL && psk[0] != '\0') {
    ncclEncryptionConfig_t e = NCCL_ENCRYPTION_CONFIG_INITIALIZER;
    e.mode = NCCL_ENCRYPTION_MODE_PSK;
    e.psk = psk;
    if (perf_nccl.SetEncryption == NULL) {
      perf_die("TUTTI_PERF_PSK: %s has no ncclSetEncryption", perf_nccl.path);
    }
    ncclResult_t r = perf_nccl.SetEncryption(&e);
    if (r != ncclSuccess) {
      perf_die("TUTTI_PERF_PSK: ncclSetEncryption failed: %s",
               perf_nccl.GetLastError ? perf_nccl.GetLastError(NULL) : perf_nccl.GetErrorString(r));
    }
  }
  if (w.nprocs > 1 && getenv("NCCL_COMM_ID") == NULL) {
    perf_die(
        "%d processes: set NCCL_COMM_ID=host:port (the same in every process) so that "
        "they agree on the unique id; tuttirun and srun give it, mpirun gives it when "
        "MASTER_ADDR and MASTER_PORT are exported (-x)",
        w.nprocs);
  }
  if (o.coll->has_root && o.root >= w.nranks) {
    perf_die("-r %d: the root must be below the %d ranks", o.root, w.nranks);
  }
  if (w.proc == 0) {
    perf_report_header(&w);
    if (reduced) {
      printf("# Reducing maxBytes to %zu due to memory limitation\n#\n", o.maxbytes);
    }
  }

  struct perf_thread* threads = calloc((size_t)o.nthreads, sizeof *threads);
  w.lines = calloc((size_t)w.nranks, PERF_LINE);
  if (threads == NULL || w.lines == NULL) {
    perf_die("out of host memory");
  }
  perf_world_setup(&w, threads);
  if (o.timeout_s > 0) {
    pthread_t wd;
    pthread_create(&wd, NULL, watchdog, &w);
    pthread_detach(wd);
  }
  /* Thread 0 runs on the main thread, as in nccl-tests. */
  for (int t = 1; t < o.nthreads; t++) {
    if (pthread_create(&threads[t].tid, NULL, perf_bench_thread, &threads[t]) != 0) {
      perf_die("cannot start thread %d", t);
    }
  }
  perf_bench_thread(&threads[0]);
  for (int t = 1; t < o.nthreads; t++) {
    pthread_join(threads[t].tid, NULL);
  }

  int errors = threads[0].errors;
  double avg = threads[0].bw_count ? threads[0].bw_sum / threads[0].bw_count : 0.0;
  if (w.proc == 0) {
    perf_report_summary(&w, errors, avg);
  }
  perf_world_teardown(&w, threads);
  /* Taken from the world first: a late perf_die must not see it freed. */
  struct perf_json* json = __atomic_exchange_n(&w.json, NULL, __ATOMIC_ACQ_REL);
  perf_json_close(json, errors ? "wrong" : "ok", NULL, errors, avg);
  perf_json_free(json);
  free(threads);
  free(w.lines);
  return errors ? 1 : 0;
}
