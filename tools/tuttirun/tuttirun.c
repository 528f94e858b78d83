/* tuttirun, torchrun for tutti: the usage, and the steps from the command
 * line to the agent (torchrun's defaults, OMP_NUM_THREADS, the log folders). */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#include "tuttirun.h"

const char tr_usage_text[] =
    "usage: tuttirun [options] [--] program|script.py|-m module [args...]\n"
    "\n"
    "torchrun for tutti: starts `program` once per local rank with torchrun's\n"
    "environment (RANK, LOCAL_RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT, ...,\n"
    "TORCHELASTIC_*), plus NCCL_COMM_ID and TUTTI_JOB_SECRET, serves the store\n"
    "torch's init_process_group(\"env://\") connects to, and prints each rank's\n"
    "output as \"[rank<r>]: line\". A .py target runs as `python -u script.py`.\n"
    "When a rank fails the others are stopped; the group restarts up to\n"
    "--max_restarts times, else the failed rank's status is tuttirun's.\n"
    "\n"
    "torchrun's flags (each also as --flag-name, --flag=value, or PET_FLAG):\n"
    "  --nproc_per_node N|gpu|cpu|auto  ranks on this host (default 1)\n"
    "  -n N                      ranks, on one host\n"
    "  --nnodes N|MIN:MAX        hosts (default 1; a range needs c10d)\n"
    "  --node_rank K             this host's index (static rendezvous)\n"
    "  --master_addr A           static: host of node 0 (default 127.0.0.1)\n"
    "  --master_port P           static: its port (default: a free one on one\n"
    "                            host, 29500 on several); NCCL_COMM_ID is A:P+1\n"
    "  --rdzv_backend static|c10d  static: ranks from --node_rank; c10d: the\n"
    "                            hosts meet at --rdzv_endpoint and agree on ranks\n"
    "  --rdzv_endpoint H[:P]     c10d: where the hosts meet (port 29400)\n"
    "  --rdzv_id ID              the job's id (TORCHELASTIC_RUN_ID)\n"
    "  --rdzv_conf K=V,...       join_timeout (600), last_call_timeout (30),\n"
    "                            read_timeout (60), is_host\n"
    "  --standalone              one host: c10d on a free port, fresh id\n"
    "  --max_restarts N          restarts of the worker group (default 0)\n"
    "  --monitor_interval S      how often c10d hosts look at each other (0.1)\n"
    "  --role NAME               ROLE_NAME (default \"default\")\n"
    "  -m, --module              run `python -u -m module`\n"
    "  --no_python               run the target as a program\n"
    "  --run_path                run the script with python (as -u script)\n"
    "  --log_dir DIR             DIR/rank_<r>.stdout|stderr, and torchrun's\n"
    "                            DIR/<run_id>_*/attempt_<k>/<local_rank>/ files\n"
    "  -r, --redirects 0-3|i:v,.. streams to files only (1 out, 2 err, 3 both)\n"
    "  -t, --tee 0-3|i:v,..      streams to files and to the terminal\n"
    "  --local_ranks_filter L,.. only these local ranks on the terminal\n"
    "  --local_addr A            this host's address (MASTER_ADDR under c10d)\n"
    "  --start_method, --logs_specs, --event_log_handler, --numa_binding,\n"
    "  --signals_to_handle       accepted; see docs/tuttirun.md\n"
    "tuttirun's own:\n"
    "  --job_secret S            job secret; all hosts must agree (or export\n"
    "                            TUTTI_JOB_SECRET alike on every host)\n"
    "  --no_prefix               print the ranks' lines without \"[rank<r>]: \"\n"
    "  --grace_period S          seconds from SIGTERM to SIGKILL (default 5)\n"
    "  -h, --help                this text\n"
    "\n"
    "Python: $PYTHON_EXEC, else python3 on PATH.\n"
    "Exit status: 0; the failed rank's exit code, or 128+signal; 130 / 143\n"
    "after SIGINT / SIGTERM; 127 program not found; 2 bad usage; 1 otherwise.\n";

/* Two descriptors per rank stay open here, four more with log files. */
static void raise_fd_limit(int nlocal) {
  struct rlimit rl;
  rlim_t need = (rlim_t)nlocal * 6 + 256;
  if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < need) {
    rl.rlim_cur = rl.rlim_max < need ? rl.rlim_max : need;
    setrlimit(RLIMIT_NOFILE, &rl);
  }
}

/* torchrun's log layout: <log_dir or a temp dir>/<run_id>_xxxxxxxx. */
static void make_run_dir(struct tr_job* j) {
  char base[4096];
  if (j->log_dir != NULL) {
    if (tr_mkdir_p(j->log_dir) != 0) {
      tr_say("cannot create --log_dir %s: %s", j->log_dir, strerror(errno));
      exit(1);
    }
    snprintf(base, sizeof base, "%s", j->log_dir);
  } else {
    const char* tmp = getenv("TMPDIR");
    if (tr_mkdtemp(tmp != NULL && *tmp != '\0' ? tmp : "/tmp", "torchelastic_", base,
                   sizeof base) != 0) {
      tr_say("cannot create a temporary folder: %s", strerror(errno));
      exit(1);
    }
    /* Kept when the ranks' streams go there (torchrun keeps it always). */
    int kept = 0;
    for (int i = 0; i < j->nlocal; i++) {
      kept |= j->redirects[i] | j->tees[i];
    }
    j->run_dir_temp = !kept;
  }
  char prefix[300];
  snprintf(prefix, sizeof prefix, "%s_", j->run_id);
  if (tr_mkdtemp(base, prefix, j->run_dir, sizeof j->run_dir) != 0) {
    tr_say("cannot create a folder in %s: %s", base, strerror(errno));
    exit(1);
  }
}

int main(int argc, char** argv) {
  /* A closed 0/1/2 would make a pipe land there and be handed on by mistake. */
  for (int fd = open("/dev/null", O_RDWR); fd >= 0 && fd <= 2; fd = open("/dev/null", O_RDWR)) {
  }
  struct tr_job j = {.nlocal = 1,
                     .prefix = 1,
                     .grace_s = 5,
                     .master_port = -1,
                     .join_timeout = 600,
                     .last_call_timeout = 30,
                     .read_timeout = 60,
                     .is_host = -1,
                     .monitor_interval = 0.1};
  snprintf(j.master_addr, sizeof j.master_addr, "127.0.0.1");
  snprintf(j.run_id, sizeof j.run_id, "none");
  snprintf(j.role, sizeof j.role, "default");
  tr_opts_parse(argc, argv, &j);
  if (j.secret[0] == '\0') {
    const char* env = getenv("TUTTI_JOB_SECRET");
    if (env != NULL && strlen(env) >= sizeof j.secret) {
      tr_say("TUTTI_JOB_SECRET is longer than %d characters", (int)sizeof j.secret - 1);
      return 2;
    }
    snprintf(j.secret, sizeof j.secret, "%s", env != NULL ? env : "");
  }
  if (getenv("OMP_NUM_THREADS") == NULL && j.nlocal > 1) {
    /* torchrun's default, inherited by every rank. */
    tr_say("setting OMP_NUM_THREADS=1 for each rank (as torchrun); set it to tune");
    setenv("OMP_NUM_THREADS", "1", 1);
  }
  make_run_dir(&j);
  raise_fd_limit(j.nlocal);
  int status = tr_agent_run(&j);
  tr_opts_free(&j);
  return status;
}
