/* tutti-check: run it on a new machine or container. It reports the
 * library, CPU, memory, CUDA, GPUs and their links, network interfaces and
 * shared memory, runs real allreduces (host memory at 1, 2 and 4 ranks; one
 * rank per GPU on device memory when GPUs exist), prints each problem with
 * its fix and one verdict line, and exits 1 when any check failed.
 *
 *   tutti-check [--json FILE] [--quiet] [--shm-dir DIR] [--timeout SECONDS] */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "nccl.h"

static int usage(FILE* f, int status) {
  fprintf(f,
          "Usage: tutti-check [--json FILE] [--quiet] [--shm-dir DIR] [--timeout SECONDS]\n"
          "  --json FILE      also write the report as JSON to FILE\n"
          "  --quiet          print only problems and the verdict\n"
          "  --shm-dir DIR    the shared-memory file system to check (default /dev/shm)\n"
          "  --timeout S      a collective check that takes longer is a hang (default 120)\n"
          "Exit status: 0 when every check passed, 1 when one failed, 2 on a usage error.\n");
  return status;
}

int main(int argc, char** argv) {
  for (int i = 1; i < argc; i++) {
    const char* a = argv[i];
    const char* next = i + 1 < argc ? argv[i + 1] : NULL;
    if (strcmp(a, "--json") == 0 && next != NULL) {
      check_opts.json_path = next;
      i++;
    } else if (strcmp(a, "--shm-dir") == 0 && next != NULL) {
      check_opts.shm_dir = next;
      i++;
    } else if (strcmp(a, "--timeout") == 0 && next != NULL && atof(next) > 0) {
      check_opts.run_timeout_s = atof(next);
      i++;
    } else if (strcmp(a, "--quiet") == 0 || strcmp(a, "-q") == 0) {
      check_opts.quiet = 1;
    } else if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
      return usage(stdout, 0);
    } else {
      fprintf(stderr, "tutti-check: unknown or incomplete option '%s'\n", a);
      return usage(stderr, 2);
    }
  }
  /* The library's own bound on every wait: below the watchdog, so that a
   * stuck rank ends in the library's sentence naming it. */
  char t[32];
  snprintf(t, sizeof t, "%.0f",
           check_opts.run_timeout_s / 2 > 1 ? check_opts.run_timeout_s / 2 : 1);
  setenv("TUTTI_TIMEOUT", t, 0);
  report_json_str("tool", "tutti-check");
  if (!check_opts.quiet) {
    printf("tutti-check %s (NCCL API %d.%d.%d)\n", TUTTI_VERSION_STRING, NCCL_MAJOR, NCCL_MINOR,
           NCCL_PATCH);
  }
  probe_library();
  probe_cpu_memory();
  probe_network();
  probe_net_plugin();
  probe_shm();
  int ngpus = probe_gpus();
  run_host_allreduces();
  if (ngpus > 0) {
    run_gpu_allreduce(ngpus);
  }
  return report_finish();
}
