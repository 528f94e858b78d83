/* Where this process sits in a job: the library's own reader of the
 * launchers' variables (src/bootstrap/launcher.c, compiled in here, since
 * tutti-perf links no part of libtutti), with the few library functions it
 * calls stood in for. So tutti-perf follows the same lookup order as every
 * other tool: tuttirun / torchrun, mpirun, mpiexec, srun (only a process
 * srun started), and it makes NCCL_COMM_ID the same way when it is unset
 * (MASTER_ADDR:MASTER_PORT+1, or Slurm's first host and a derived port). */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

#include "args.h"
#include "util/check.h"
#include "bootstrap/launcher.h"
#include "util/param.h"

static char launch_error[512];

ncclResult_t tutti_error(ncclResult_t res, const char* fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(launch_error, sizeof launch_error, fmt, ap);
  va_end(ap);
  return res;
}

const char* tutti_getenv(const char* name) {
  return getenv(name);
}

const char* tutti_param_str(const char* name, const char* deflt, int flags) {
  (void)flags;
  const char* v = getenv(name);
  return v != NULL ? v : deflt;
}

int tutti_log_level_v = 0; /* the launcher reader's INFO lines stay silent here */

void tutti_log_init(void) {}

void tutti_log(enum tutti_log_level level, unsigned long subsys, const char* file, int line,
               const char* fmt, ...) {
  (void)level;
  (void)subsys;
  (void)file;
  (void)line;
  (void)fmt;
}

void perf_args_world(int* nprocs, int* proc, int* local_rank) {
  struct tutti_launcher env;
  *nprocs = 1;
  *proc = *local_rank = 0;
  const int rc = tutti_launcher_read(&env);
  if (rc < 0 || (rc > 0 && tutti_launcher_export_comm_id(&env) < 0)) {
    fprintf(stderr, "tutti-perf: %s\n", launch_error);
    exit(2);
  }
  if (rc > 0) {
    *nprocs = env.world_size;
    *proc = env.rank;
    *local_rank = env.local_rank >= 0 ? env.local_rank : env.rank;
  }
}
